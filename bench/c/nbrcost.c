/* Cost of one neighbourhood collective per call on a 2-rank periodic 1-D Cartesian grid
 * (each rank is both neighbours of the other) or a 2-rank graph, as mpi4py's
 * test_cco_ngh_* modules call them. Timed mode: a barrier before each timed call (as the
 * standard suites do), separate send and receive buffers, MPI_CHAR; prints the median over
 * SAMPLES of the mean per call. Callgrind mode (`callgrind` as the last argument): run
 * rank 0 under `valgrind --tool=callgrind --collect-atstart=no`; only the N calls are
 * collected (after two uncollected warm-up calls; rank 0 sleeps 20 ms before each, so its
 * peers have posted their part); divide the total (Ir) by N.
 *
 * usage: nbrcost TEST TOPO SIZE N [callgrind]
 *   TEST   alltoall, allgather, alltoallv, alltoallw, ialltoall (post and wait),
 *          palltoall (MPI_Neighbor_alltoall_init, start, wait, free: the whole cycle),
 *          pcycle (one init at the start, then start and wait per call), pallgather
 *          (persistent forms need MPI 4: Open MPI 4.1 reports them missing)
 *   TOPO   cart (periodic, 2 ranks: 2 neighbours each) or graph (one edge to the other)
 *   SIZE   bytes per neighbour block
 *
 * Output (rank 0): `NBRCOST test=T topo=O size=S n=N usec=U` (timed mode). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#define SAMPLES 7

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc < 5) {
        fprintf(stderr, "usage: nbrcost TEST TOPO SIZE N [callgrind]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *test = argv[1], *topo = argv[2];
    int size = atoi(argv[3]), n = atoi(argv[4]);
    int cg = argc > 5 && strcmp(argv[5], "callgrind") == 0;
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Comm comm;
    if (strcmp(topo, "cart") == 0) {
        int dims[1] = {np}, periods[1] = {1};
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &comm);
    } else {
        /* A ring: each rank's edges are its two ring neighbours (one when np = 2). */
        int *index = malloc(sizeof(int) * np), *edges = malloc(sizeof(int) * 2 * np), e = 0;
        for (int r = 0; r < np; r++) {
            edges[e++] = (r + 1) % np;
            if (np > 2) edges[e++] = (r + np - 1) % np;
            index[r] = e;
        }
        MPI_Graph_create(MPI_COMM_WORLD, np, index, edges, 0, &comm);
        free(index);
        free(edges);
    }
    int indeg, outdeg, weighted;
    {
        int status;
        MPI_Topo_test(comm, &status);
        if (status == MPI_CART) {
            indeg = outdeg = 2;
        } else {
            int nn;
            MPI_Graph_neighbors_count(comm, rank, &nn);
            indeg = outdeg = nn;
        }
        (void)weighted;
    }
    char *sbuf = malloc((size_t)size * outdeg + 1), *rbuf = malloc((size_t)size * indeg + 1);
    memset(sbuf, rank + 1, (size_t)size * outdeg + 1);
    int *sc = malloc(sizeof(int) * outdeg), *rc = malloc(sizeof(int) * indeg);
    int *sd = malloc(sizeof(int) * outdeg), *rd = malloc(sizeof(int) * indeg);
    MPI_Aint *sdw = malloc(sizeof(MPI_Aint) * outdeg), *rdw = malloc(sizeof(MPI_Aint) * indeg);
    MPI_Datatype *stw = malloc(sizeof(MPI_Datatype) * outdeg), *rtw = malloc(sizeof(MPI_Datatype) * indeg);
    for (int j = 0; j < outdeg; j++) {
        sc[j] = size; sd[j] = j * size; sdw[j] = j * size; stw[j] = MPI_CHAR;
    }
    for (int i = 0; i < indeg; i++) {
        rc[i] = size; rd[i] = i * size; rdw[i] = i * size; rtw[i] = MPI_CHAR;
    }
    MPI_Request preq = MPI_REQUEST_NULL;
    int pcycle = strcmp(test, "pcycle") == 0;
#if MPI_VERSION < 4
    if (test[0] == 'p') {
        if (rank == 0) printf("NBRCOST test=%s: no persistent collectives (MPI %d)\n", test, MPI_VERSION);
        MPI_Finalize();
        return 0;
    }
#define MPI_Neighbor_alltoall_init(...) MPI_ERR_OTHER
#define MPI_Neighbor_allgather_init(...) MPI_ERR_OTHER
#endif
    if (pcycle)
        MPI_Neighbor_alltoall_init(sbuf, size, MPI_CHAR, rbuf, size, MPI_CHAR, comm, MPI_INFO_NULL, &preq);

#define ONE()                                                                                       \
    do {                                                                                            \
        if (strcmp(test, "alltoall") == 0)                                                          \
            MPI_Neighbor_alltoall(sbuf, size, MPI_CHAR, rbuf, size, MPI_CHAR, comm);                \
        else if (strcmp(test, "allgather") == 0)                                                    \
            MPI_Neighbor_allgather(sbuf, size, MPI_CHAR, rbuf, size, MPI_CHAR, comm);               \
        else if (strcmp(test, "alltoallv") == 0)                                                    \
            MPI_Neighbor_alltoallv(sbuf, sc, sd, MPI_CHAR, rbuf, rc, rd, MPI_CHAR, comm);           \
        else if (strcmp(test, "alltoallw") == 0)                                                    \
            MPI_Neighbor_alltoallw(sbuf, sc, sdw, stw, rbuf, rc, rdw, rtw, comm);                   \
        else if (strcmp(test, "ialltoall") == 0) {                                                  \
            MPI_Request r;                                                                          \
            MPI_Ineighbor_alltoall(sbuf, size, MPI_CHAR, rbuf, size, MPI_CHAR, comm, &r);           \
            MPI_Wait(&r, MPI_STATUS_IGNORE);                                                        \
        } else if (strcmp(test, "palltoall") == 0 || strcmp(test, "pallgather") == 0) {             \
            MPI_Request r;                                                                          \
            if (test[1] == 'a' && test[4] == 't')                                                   \
                MPI_Neighbor_alltoall_init(sbuf, size, MPI_CHAR, rbuf, size, MPI_CHAR, comm,        \
                                           MPI_INFO_NULL, &r);                                      \
            else                                                                                    \
                MPI_Neighbor_allgather_init(sbuf, size, MPI_CHAR, rbuf, size, MPI_CHAR, comm,       \
                                            MPI_INFO_NULL, &r);                                     \
            MPI_Start(&r);                                                                          \
            MPI_Wait(&r, MPI_STATUS_IGNORE);                                                        \
            MPI_Request_free(&r);                                                                   \
        } else if (pcycle) {                                                                        \
            MPI_Start(&preq);                                                                       \
            MPI_Wait(&preq, MPI_STATUS_IGNORE);                                                     \
        } else {                                                                                    \
            fprintf(stderr, "unknown test %s\n", test);                                            \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                           \
        }                                                                                           \
    } while (0)

    for (int w = 0; w < 2; w++) ONE();
    if (cg) {
        for (int it = 0; it < n; it++) {
            MPI_Barrier(comm);
            /* Rank 0 (the counted one) lets its peers post their part first: what it
             * counts is then its own work, seldom a wait for them. */
            if (rank == 0) usleep(20000);
            if (rank == 0) CALLGRIND_TOGGLE_COLLECT;
            ONE();
            if (rank == 0) CALLGRIND_TOGGLE_COLLECT;
        }
    } else {
        double t[SAMPLES];
        for (int s = 0; s < SAMPLES; s++) {
            double sum = 0;
            for (int it = 0; it < n; it++) {
                MPI_Barrier(comm);
                double t0 = MPI_Wtime();
                ONE();
                sum += MPI_Wtime() - t0;
            }
            t[s] = sum / n;
        }
        qsort(t, SAMPLES, sizeof(double), cmp);
        double med = t[SAMPLES / 2], all;
        MPI_Allreduce(&med, &all, 1, MPI_DOUBLE, MPI_MAX, comm);
        if (rank == 0)
            printf("NBRCOST test=%s topo=%s size=%d n=%d usec=%.3f\n", test, topo, size, n, all * 1e6);
    }
    /* Check: the last received blocks hold the other rank's data. */
    if (size > 0 && strcmp(test, "allgather") != 0 && strcmp(test, "pallgather") != 0) {
        for (int i = 0; i < indeg; i++)
            if (rbuf[(size_t)i * size] != (char)((rank + 1) % np + 1) && np == 2) {
                fprintf(stderr, "rank %d: wrong data in block %d\n", rank, i);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
    }
    if (pcycle) MPI_Request_free(&preq);
    MPI_Comm_free(&comm);
    free(sbuf); free(rbuf); free(sc); free(rc); free(sd); free(rd); free(sdw); free(rdw);
    free(stw); free(rtw);
    MPI_Finalize();
    return 0;
}
