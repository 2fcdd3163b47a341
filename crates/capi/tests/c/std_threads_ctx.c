/* Communicator creation from several threads at once (MPI_THREAD_MULTIPLE): each thread
 * dups, creates, create_groups and idups over its own parent communicator, many times;
 * context ids must be unique here and agree across ranks (MPI 3.1 §6.4, §12.4). Runs on
 * any number of ranks; rank 0 prints. */
#include "check.h"
#include <pthread.h>

#define THREADS 4
#define ROUNDS 15

static MPI_Comm parents[THREADS];

static void *work(void *arg)
{
    int t = (int)(long)arg, r, sum, size;
    MPI_Comm parent = parents[t], a, b, c, d;
    MPI_Group g;
    MPI_Request req;
    MPI_Comm_size(parent, &size);
    CHECK_RC(MPI_Comm_group(parent, &g));
    for (r = 0; r < ROUNDS; r++) {
        CHECK_RC(MPI_Comm_dup(parent, &a));
        CHECK_RC(MPI_Comm_create(parent, g, &b));
        CHECK_RC(MPI_Comm_create_group(parent, g, t, &c));
        CHECK_RC(MPI_Comm_idup(parent, &d, &req));
        CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
        /* Traffic on every new communicator: a wrong context would mix the threads. */
        CHECK_RC(MPI_Allreduce(&t, &sum, 1, MPI_INT, MPI_SUM, a));
        CHECK(sum == t * size);
        CHECK_RC(MPI_Allreduce(&t, &sum, 1, MPI_INT, MPI_SUM, b));
        CHECK(sum == t * size);
        CHECK_RC(MPI_Allreduce(&t, &sum, 1, MPI_INT, MPI_SUM, c));
        CHECK(sum == t * size);
        CHECK_RC(MPI_Allreduce(&t, &sum, 1, MPI_INT, MPI_SUM, d));
        CHECK(sum == t * size);
        CHECK_RC(MPI_Comm_free(&a));
        CHECK_RC(MPI_Comm_free(&b));
        CHECK_RC(MPI_Comm_free(&c));
        CHECK_RC(MPI_Comm_free(&d));
    }
    CHECK_RC(MPI_Group_free(&g));
    return NULL;
}

int main(int argc, char **argv)
{
    int rank, provided, i;
    pthread_t th[THREADS];
    CHECK_RC(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank_ = rank;
    CHECK(provided == MPI_THREAD_MULTIPLE);
    for (i = 0; i < THREADS; i++)
        CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &parents[i]));
    for (i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, work, (void *)(long)i) == 0);
    for (i = 0; i < THREADS; i++)
        CHECK(pthread_join(th[i], NULL) == 0);
    for (i = 0; i < THREADS; i++)
        CHECK_RC(MPI_Comm_free(&parents[i]));
    if (rank == 0) {
        printf("%d threads x %d rounds of dup, create, create_group, idup: ok\n", THREADS,
               ROUNDS);
        printf("std_threads_ctx: all checks passed\n");
    }
    CHECK_RC(MPI_Finalize());
    return 0;
}
