/* MPI_Parrived and MPI_Win_test polled in a loop on an oversubscribed core: every rank
 * pins itself to one CPU (the first it may run on), so the ranks share one core, and the
 * job runs with mpi_yield_when_idle=1. A poll that finds nothing must let the core go, or
 * the polling rank spins through its whole time slice while the rank it waits for (on the
 * same core) cannot run.
 *
 * Partitioned ring: each rank receives from its left neighbour's partitioned send and
 * polls MPI_Parrived on every partition until it arrives. PSCW ring: each rank exposes
 * its window to its left neighbour and polls MPI_Win_test until that one completed. The
 * program counts the polls that found nothing and prints the mean per round and rank;
 * argv[1] is the number of rounds (default 200). Prints "part_poll: polls per round
 * parrived P win_test W" and "part_poll: all checks passed". */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#define PARTS 4
#define PER 8

static void pin_first_cpu(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, &set)) {
            CPU_ZERO(&set);
            CPU_SET(c, &set);
            sched_setaffinity(0, sizeof set, &set);
            return;
        }
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    pin_first_cpu();
    int right = (me + 1) % np, left = (me + np - 1) % np;
    int sbuf[PARTS * PER], rbuf[PARTS * PER];
    MPI_Request sreq, rreq;
    MPI_Psend_init(sbuf, PARTS, PER, MPI_INT, right, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &sreq);
    MPI_Precv_init(rbuf, PARTS, PER, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &rreq);
    long empty = 0;
    int bad = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < PARTS * PER; i++) {
            sbuf[i] = me * 1000 + r + i;
            rbuf[i] = -1;
        }
        MPI_Start(&rreq);
        MPI_Start(&sreq);
        for (int p = 0; p < PARTS; p++) MPI_Pready(p, sreq);
        for (int p = 0; p < PARTS; p++) {
            int flag = 0;
            for (;;) {
                MPI_Parrived(rreq, p, &flag);
                if (flag) break;
                empty++;
            }
        }
        MPI_Wait(&rreq, MPI_STATUS_IGNORE);
        MPI_Wait(&sreq, MPI_STATUS_IGNORE);
        for (int i = 0; i < PARTS * PER; i++) bad += rbuf[i] != left * 1000 + r + i;
    }
    MPI_Request_free(&sreq);
    MPI_Request_free(&rreq);

    int *mem;
    MPI_Win win;
    MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    *mem = -1;
    MPI_Group world, gl, gr;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &left, &gl);
    MPI_Group_incl(world, 1, &right, &gr);
    long wempty = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int r = 0; r < rounds; r++) {
        MPI_Win_post(gl, 0, win);
        MPI_Win_start(gr, 0, win);
        int v = me * 1000 + r;
        MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, win);
        MPI_Win_complete(win);
        int flag = 0;
        for (;;) {
            MPI_Win_test(win, &flag);
            if (flag) break;
            wempty++;
        }
        bad += *mem != left * 1000 + r;
    }
    MPI_Group_free(&gl);
    MPI_Group_free(&gr);
    MPI_Group_free(&world);
    MPI_Win_free(&win);

    long mine[3] = {empty, wempty, bad}, sum[3];
    MPI_Reduce(mine, sum, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0) {
        long per = (long)rounds * np;
        printf("part_poll: polls per round parrived %ld win_test %ld\n", sum[0] / per,
               sum[1] / per);
        if (sum[2]) printf("part_poll: %ld wrong values\n", sum[2]);
        else printf("part_poll: all checks passed\n");
    }
    MPI_Finalize();
    return 0;
}
