/* The application the PMPI counter (pmpi_counter.c) watches: on 2 ranks, 3 sends from rank
 * 0 to rank 1, one sendrecv each, and collectives that the library builds on
 * point-to-point (bcast, allreduce of 1 MiB, barrier); 6 datatype frees each, 3 of them of
 * references that get_contents returned (freed before the library's entry wrapper while
 * no profile counts calls); 3 commits (one of a committed type), 3 size, 3 extent and 3
 * envelope queries in both forms, of a derived and a predefined type (answered before the
 * entry wrapper while no profile counts calls), and some of each with an error. */
#include "check.h"

int main(int argc, char **argv)
{
    static double big[1 << 17], out[1 << 17];
    int rank, x = 0, y = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank_ = rank;
    for (int i = 0; i < 3; i++) {
        if (rank == 0)
            MPI_Send(&i, 1, MPI_INT, 1, i, MPI_COMM_WORLD);
        else
            MPI_Recv(&x, 1, MPI_INT, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Sendrecv(&rank, 1, MPI_INT, 1 - rank, 9, &y, 1, MPI_INT, 1 - rank, 9, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    CHECK(y == 1 - rank);
    MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int i = 0; i < (1 << 17); i++)
        big[i] = rank + 1;
    MPI_Allreduce(big, out, 1 << 17, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(out[7] == 3.0);
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Datatype v, c, got[1];
    int ints[4];
    MPI_Aint addrs[1];
    MPI_Type_vector(2, 1, 2, MPI_INT, &v);
    CHECK(MPI_Type_commit(&v) == MPI_SUCCESS);
    MPI_Type_contiguous(2, v, &c);
    CHECK(MPI_Type_commit(&c) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&c) == MPI_SUCCESS);
    int sz = 0, ni = -1, na = -1, nd = -1, comb = -1;
    MPI_Count csz = 0, clb = -1, cext = 0, cni = -1, cna = -1, cnc = -1, cnd = -1;
    MPI_Aint lb = -1, ext = 0;
    CHECK(MPI_Type_size(c, &sz) == MPI_SUCCESS && sz == 16);
    CHECK(MPI_Type_size(MPI_INT, &sz) == MPI_SUCCESS && sz == 4);
    CHECK(MPI_Type_size_c(c, &csz) == MPI_SUCCESS && csz == 16);
    CHECK(MPI_Type_get_extent(c, &lb, &ext) == MPI_SUCCESS && lb == 0 && ext == 24);
    CHECK(MPI_Type_get_extent_c(c, &clb, &cext) == MPI_SUCCESS && clb == 0 && cext == 24);
    CHECK(MPI_Type_get_extent_c(MPI_INT, &clb, &cext) == MPI_SUCCESS && clb == 0 && cext == 4);
    CHECK(MPI_Type_get_envelope(c, &ni, &na, &nd, &comb) == MPI_SUCCESS && ni == 1 && na == 0 &&
          nd == 1 && comb == MPI_COMBINER_CONTIGUOUS);
    CHECK(MPI_Type_get_envelope(MPI_INT, &ni, &na, &nd, &comb) == MPI_SUCCESS && ni == 0 &&
          comb == MPI_COMBINER_NAMED);
    CHECK(MPI_Type_get_envelope_c(v, &cni, &cna, &cnc, &cnd, &comb) == MPI_SUCCESS &&
          cni == 3 && cna == 0 && cnc == 0 && cnd == 1 && comb == MPI_COMBINER_VECTOR);
    for (int i = 0; i < 3; i++) {
        MPI_Type_get_contents(c, 4, 1, 1, ints, addrs, got);
        CHECK(got[0] == v && ints[0] == 2);
        CHECK(MPI_Type_free(&got[0]) == MPI_SUCCESS && got[0] == MPI_DATATYPE_NULL);
    }
    /* Their errors keep their classes (NULL outputs, a large-count type's int envelope, a
     * stale handle). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Datatype lc, stale = c;
    int cls = -1;
    MPI_Type_contiguous_c(2, MPI_INT, &lc);
    MPI_Error_class(MPI_Type_size(c, NULL), &cls);
    CHECK(cls == MPI_ERR_ARG);
    MPI_Error_class(MPI_Type_get_extent_c(c, &clb, NULL), &cls);
    CHECK(cls == MPI_ERR_ARG);
    MPI_Error_class(MPI_Type_get_envelope(c, &ni, &na, NULL, &comb), &cls);
    CHECK(cls == MPI_ERR_ARG);
    MPI_Error_class(MPI_Type_get_envelope(lc, &ni, &na, &nd, &comb), &cls);
    CHECK(cls == MPI_ERR_TYPE);
    MPI_Error_class(MPI_Type_commit(NULL), &cls);
    CHECK(cls == MPI_ERR_ARG);
    CHECK(MPI_Type_free(&lc) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&c) == MPI_SUCCESS && MPI_Type_free(&v) == MPI_SUCCESS);
    MPI_Error_class(MPI_Type_commit(&stale), &cls);
    CHECK(cls == MPI_ERR_TYPE);
    MPI_Error_class(MPI_Type_get_envelope_c(stale, &cni, &cna, &cnc, &cnd, &comb), &cls);
    CHECK(cls == MPI_ERR_TYPE);
    MPI_Error_class(MPI_Type_size(MPI_DATATYPE_NULL, &sz), &cls);
    CHECK(cls == MPI_ERR_TYPE);
    MPI_Finalize();
    if (rank == 0)
        printf("pmpi_app: all checks passed\n");
    return 0;
}
