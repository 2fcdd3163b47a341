/* CPU time of ranks that wait idle on a passive-target window whose peers are reached with
 * messages (other nodes, or --mca osc pt2pt), on 3 ranks with --map-by node over 2 nodes
 * (ranks 0 and 2 on the first, rank 1 on the second). Rank 0 locks rank 1's window
 * exclusively and holds the lock for SECONDS (argv[1], default 2) outside MPI (sleep);
 * rank 2 asks for the same lock and waits in MPI_Win_lock until rank 0 releases it; rank 1,
 * the target, sleeps outside MPI while its progress thread serves both. Each rank measures
 * its process's CPU time (user + system, every thread) over that phase and prints
 * "rma_idle: rank R cpu MS ms of WALL ms"; a rank that used more than LIMIT percent
 * (argv[2], default 10) of the phase's wall time prints "BUSY" instead of "ok" and the
 * program exits with 1. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static double cpu_ms(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static double wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    int provided, rank, size;
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    double limit = argc > 2 ? atof(argv[2]) : 10.0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 3);
    int *mem;
    MPI_Win win;
    CHECK_RC(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem,
                              &win));
    *mem = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) CHECK_RC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win));
    MPI_Barrier(MPI_COMM_WORLD);
    double c0 = cpu_ms(), w0 = wall_ms();
    if (rank == 0) {
        usleep((useconds_t)(secs * 1e6));
        int one = 1;
        CHECK_RC(MPI_Put(&one, 1, MPI_INT, 1, 0, 1, MPI_INT, win));
        CHECK_RC(MPI_Win_unlock(1, win));
    } else if (rank == 2) {
        CHECK_RC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win));
        int got = -1;
        CHECK_RC(MPI_Get(&got, 1, MPI_INT, 1, 0, 1, MPI_INT, win));
        CHECK_RC(MPI_Win_unlock(1, win));
        CHECK(got == 1);
    } else {
        usleep((useconds_t)(secs * 1e6));
    }
    double cpu = cpu_ms() - c0, wall = wall_ms() - w0;
    int busy = cpu > wall * limit / 100.0;
    int any = 0;
    MPI_Allreduce(&busy, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++) {
        if (r == rank) {
            printf("rma_idle: rank %d cpu %.0f ms of %.0f ms %s\n", rank, cpu, wall,
                   busy ? "BUSY" : "ok");
            fflush(stdout);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return any ? 1 : 0;
}
