/* Process topologies: Cartesian grids (create, get, rank/coords, shift, sub, map), graphs
 * and distributed graphs, Topo_test, and topology inheritance by MPI_Comm_dup. */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size, t;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;

    CHECK_RC(MPI_Topo_test(MPI_COMM_WORLD, &t));
    CHECK(t == MPI_UNDEFINED);

    /* 2-D grid over all ranks, periodic in the second dimension. */
    int dims[2] = {0, 0}, periods[2] = {0, 1};
    CHECK_RC(MPI_Dims_create(size, 2, dims));
    CHECK(dims[0] * dims[1] == size && dims[0] >= dims[1]);
    MPI_Comm cart;
    CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    CHECK(cart != MPI_COMM_NULL);
    CHECK_RC(MPI_Topo_test(cart, &t));
    CHECK(t == MPI_CART);
    int nd, gd[2], gp[2], gc[2], coords[2], r2;
    CHECK_RC(MPI_Cartdim_get(cart, &nd));
    CHECK(nd == 2);
    CHECK_RC(MPI_Cart_get(cart, 2, gd, gp, gc));
    CHECK(gd[0] == dims[0] && gd[1] == dims[1] && gp[0] == 0 && gp[1] == 1);
    CHECK(gc[0] == rank / dims[1] && gc[1] == rank % dims[1]);
    for (int r = 0; r < size; r++) {
        CHECK_RC(MPI_Cart_coords(cart, r, 2, coords));
        CHECK(coords[0] == r / dims[1] && coords[1] == r % dims[1]);
        CHECK_RC(MPI_Cart_rank(cart, coords, &r2));
        CHECK(r2 == r);
    }
    int src, dst;
    CHECK_RC(MPI_Cart_shift(cart, 1, 1, &src, &dst));
    CHECK(dst == gc[0] * dims[1] + (gc[1] + 1) % dims[1]);
    CHECK(src == gc[0] * dims[1] + (gc[1] + dims[1] - 1) % dims[1]);
    CHECK_RC(MPI_Cart_shift(cart, 0, 1, &src, &dst));
    CHECK(dst == (gc[0] + 1 < dims[0] ? rank + dims[1] : MPI_PROC_NULL));
    CHECK(src == (gc[0] > 0 ? rank - dims[1] : MPI_PROC_NULL));

    /* Neighbourhood collectives on the grid: slots (d0-, d0+, d1-, d1+). */
    {
        int nbr[4], got[4] = {-1, -1, -1, -1}, sendb[4], recvb[4] = {-1, -1, -1, -1};
        CHECK_RC(MPI_Cart_shift(cart, 0, 1, &nbr[0], &nbr[1]));
        CHECK_RC(MPI_Cart_shift(cart, 1, 1, &nbr[2], &nbr[3]));
        CHECK_RC(MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, cart));
        for (int k = 0; k < 4; k++) CHECK(got[k] == (nbr[k] == MPI_PROC_NULL ? -1 : nbr[k]));
        for (int k = 0; k < 4; k++) sendb[k] = rank * 10 + k;
        MPI_Request rq;
        CHECK_RC(MPI_Ineighbor_alltoall(sendb, 1, MPI_INT, recvb, 1, MPI_INT, cart, &rq));
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        /* the negative neighbour sent us its positive-direction block and vice versa */
        for (int k = 0; k < 4; k++)
            CHECK(recvb[k] == (nbr[k] == MPI_PROC_NULL ? -1 : nbr[k] * 10 + (k ^ 1)));
    }
    if (rank == 0) printf("neighbourhood collectives on a grid: ok\n");

    /* Rows: keep dimension 1. */
    int remain[2] = {0, 1};
    MPI_Comm row;
    CHECK_RC(MPI_Cart_sub(cart, remain, &row));
    int rr, rs;
    MPI_Comm_rank(row, &rr);
    MPI_Comm_size(row, &rs);
    CHECK(rs == dims[1] && rr == gc[1]);
    CHECK_RC(MPI_Cartdim_get(row, &nd));
    CHECK(nd == 1);
    int sum = 0;
    CHECK_RC(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, row));
    CHECK(sum == gc[0] * dims[1] * dims[1] + dims[1] * (dims[1] - 1) / 2);

    /* A duplicate keeps the topology; freeing drops it. */
    MPI_Comm cd;
    CHECK_RC(MPI_Comm_dup(cart, &cd));
    CHECK_RC(MPI_Topo_test(cd, &t));
    CHECK(t == MPI_CART);
    MPI_Comm_free(&cd);
    MPI_Comm_free(&row);
    MPI_Comm_free(&cart);

    int nr;
    CHECK_RC(MPI_Cart_map(MPI_COMM_WORLD, 2, dims, periods, &nr));
    CHECK(nr == rank);

    /* A grid smaller than the job leaves the last rank out. */
    if (size > 1) {
        int d1 = size - 1, p1 = 0;
        MPI_Comm c1;
        CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 1, &d1, &p1, 0, &c1));
        CHECK((c1 == MPI_COMM_NULL) == (rank == size - 1));
        if (c1 != MPI_COMM_NULL) MPI_Comm_free(&c1);
    }
    if (rank == 0) printf("cartesian: ok\n");

    /* Ring graph. */
    int *index = malloc(size * sizeof(int)), *edges = malloc(2 * size * sizeof(int));
    for (int i = 0; i < size; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + 1) % size;
        edges[2 * i + 1] = (i + size - 1) % size;
    }
    MPI_Comm g;
    CHECK_RC(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &g));
    CHECK_RC(MPI_Topo_test(g, &t));
    CHECK(t == MPI_GRAPH);
    int nn, ne, cnt, nb[2];
    CHECK_RC(MPI_Graphdims_get(g, &nn, &ne));
    CHECK(nn == size && ne == 2 * size);
    CHECK_RC(MPI_Graph_neighbors_count(g, rank, &cnt));
    CHECK(cnt == 2);
    CHECK_RC(MPI_Graph_neighbors(g, rank, 2, nb));
    CHECK(nb[0] == (rank + 1) % size && nb[1] == (rank + size - 1) % size);
    MPI_Comm_free(&g);
    free(index);
    free(edges);
    if (rank == 0) printf("graph: ok\n");

    /* Distributed graph: every rank declares the edge rank -> rank+1 (weight rank). */
    int one = 1, next = (rank + 1) % size, w = rank;
    MPI_Comm dg;
    CHECK_RC(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &rank, &one, &next, &w, MPI_INFO_NULL, 0,
                                   &dg));
    CHECK_RC(MPI_Topo_test(dg, &t));
    CHECK(t == MPI_DIST_GRAPH);
    int indeg, outdeg, weighted;
    CHECK_RC(MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted));
    CHECK(indeg == 1 && outdeg == 1 && weighted);
    int s1, sw1, d1, dw1;
    CHECK_RC(MPI_Dist_graph_neighbors(dg, 1, &s1, &sw1, 1, &d1, &dw1));
    CHECK(s1 == (rank + size - 1) % size && sw1 == (rank + size - 1) % size);
    CHECK(d1 == next && dw1 == rank);
    {
        int from = -1;
        CHECK_RC(MPI_Neighbor_allgather(&rank, 1, MPI_INT, &from, 1, MPI_INT, dg));
        CHECK(from == (rank + size - 1) % size);
    }
    MPI_Comm_free(&dg);

    int srcs[1] = {(rank + size - 1) % size}, dsts[1] = {next};
    CHECK_RC(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, srcs, MPI_UNWEIGHTED, 1, dsts,
                                            MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg));
    CHECK_RC(MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted));
    CHECK(indeg == 1 && outdeg == 1 && !weighted);
    MPI_Comm_free(&dg);
    if (rank == 0) printf("distributed graph: ok\n");

    if (rank == 0) printf("coll_topo: all checks passed\n");
    MPI_Finalize();
    return 0;
}
