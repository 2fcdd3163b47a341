/* Shared by coll_rs_cpu.c and icoll_rs_cpu.c (the reduce-scatters' fold by CPU) and
 * icoll_scat_cpu.c: the pinning of each rank to one CPU before MPI_Init, a non-commutative
 * op and the values. Include after check.h. */
#ifndef OXMPI_TEST_RS_CPU_H
#define OXMPI_TEST_RS_CPU_H
#include <sched.h>
#include <stdlib.h>

/* Pins this process to one CPU, rank r (from the launcher's OMPI_COMM_WORLD_RANK) on CPU r
 * mod the CPUs it may use; nothing when there is no rank or a single CPU. Non-zero if the
 * pinning failed. */
static int pin_by_rank(void) {
    const char *rk = getenv("OMPI_COMM_WORLD_RANK");
    cpu_set_t all;
    if (rk && sched_getaffinity(0, sizeof all, &all) == 0 && CPU_COUNT(&all) > 1) {
        int cpus[CPU_SETSIZE], n = 0;
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &all)) cpus[n++] = c;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[atoi(rk) % n], &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) return 1;
    }
    return 0;
}

/* Pins this process (pin_by_rank), then MPI_Init, and gives its rank (also CHECK's) and
 * the size of MPI_COMM_WORLD. Non-zero if the pinning failed (before MPI_Init). */
static int init_pinned(int *argc, char ***argv, int *rank, int *p) {
    if (pin_by_rank() != 0) return 1;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, p);
    check_rank_ = *rank;
    return 0;
}

/* A non-commutative op on single ints: x o y = 2 x + y (inout = in o inout). */
static void lin(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] = 2 * a[i] + b[i];
}

/* Rank r's value at index i. */
static int val(int r, int i) { return (r + 1) * 7 + i % 1013; }

#endif
