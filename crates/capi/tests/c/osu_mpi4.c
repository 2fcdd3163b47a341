/* What the OSU micro-benchmarks' MPI-4 parts need from a library and its mpicc (the suite
 * itself is not packaged in Debian or on PyPI): the persistent-collective benchmarks
 * (osu_allreduce_persistent & co.: MPI_Allreduce_init once per message size, then warm-up
 * and timed MPI_Start/MPI_Wait loops) and the session mode (no MPI_Init: MPI_Session_init,
 * a communicator from the mpi://WORLD process set, the benchmark, MPI_Session_finalize),
 * repeated as a benchmark run repeats it. The session part runs first, then the world
 * model. Timings go to stderr (not compared); stdout is deterministic. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define WARMUP 10
#define ITERS 100
#define MAXCOUNT 1024
#define SESSIONS 5

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "CHECK FAILED at %s:%d: %s\n", __FILE__, __LINE__, #cond);    \
            exit(99);                                                                      \
        }                                                                                  \
    } while (0)
#define CHECK_RC(call) CHECK((call) == MPI_SUCCESS)

static float sbuf[MAXCOUNT], rbuf[MAXCOUNT];

/* osu_allreduce_persistent's loop on `comm` for 1..MAXCOUNT floats; returns the number of
 * sizes whose results were right. */
static int allreduce_persistent(MPI_Comm comm, const char *mode) {
    int rank, size, good = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int count = 1; count <= MAXCOUNT; count *= 4) {
        MPI_Request req;
        CHECK_RC(MPI_Allreduce_init(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL,
                                    &req));
        double t = 0.0;
        int ok = 1;
        for (int i = 0; i < WARMUP + ITERS; i++) {
            for (int k = 0; k < count; k++)
                sbuf[k] = (float)(rank + i + k % 7);
            double t0 = MPI_Wtime();
            CHECK_RC(MPI_Start(&req));
            CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
            if (i >= WARMUP)
                t += MPI_Wtime() - t0;
            for (int k = 0; k < count; k++)
                ok &= rbuf[k] == (float)(size * (size - 1) / 2 + size * (i + k % 7));
        }
        CHECK_RC(MPI_Request_free(&req));
        double avg = 0.0;
        t = t * 1e6 / ITERS;
        CHECK_RC(MPI_Reduce(&t, &avg, 1, MPI_DOUBLE, MPI_SUM, 0, comm));
        if (rank == 0)
            fprintf(stderr, "osu_mpi4 %s: allreduce_persistent %7zu bytes %10.2f us\n", mode,
                    count * sizeof(float), avg / size);
        good += ok;
    }
    return good;
}

int main(int argc, char **argv) {
    /* Session mode, as OSU's --session runs: no MPI_Init. */
    int sizes = 0, wrank = -1;
    for (int s = 0; s < SESSIONS; s++) {
        MPI_Session session;
        MPI_Group group;
        MPI_Comm comm;
        CHECK_RC(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session));
        CHECK_RC(MPI_Group_from_session_pset(session, "mpi://WORLD", &group));
        CHECK_RC(MPI_Comm_create_from_group(group, "org.oxmpi.osu_mpi4", MPI_INFO_NULL,
                                            MPI_ERRORS_RETURN, &comm));
        MPI_Comm_rank(comm, &wrank);
        sizes = allreduce_persistent(comm, "session");
        CHECK_RC(MPI_Comm_free(&comm));
        CHECK_RC(MPI_Group_free(&group));
        CHECK_RC(MPI_Session_finalize(&session));
    }
    if (wrank == 0)
        printf("osu_mpi4: session mode, %d sessions, %d sizes right: ok\n", SESSIONS, sizes);
    /* The world model afterwards. */
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    sizes = allreduce_persistent(MPI_COMM_WORLD, "world");
    if (rank == 0)
        printf("osu_mpi4: world model, %d sizes right: ok\nosu_mpi4: all checks passed\n",
               sizes);
    MPI_Finalize();
    return 0;
}
