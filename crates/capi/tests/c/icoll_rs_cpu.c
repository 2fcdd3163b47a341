/* Nonblocking reduce-scatters through the segment's nonblocking large region with every rank
 * pinned to one CPU (rank r on CPU r mod the CPUs it may use, pinned before MPI_Init), where
 * commutative operations on equal blocks fold by CPU as the blocking forms do (at most 4
 * ranks on every CPU; with more they keep the rank-order fold):
 * - one at a time: MPI_Ireduce_scatter_block and MPI_Ireduce_scatter with equal counts (INT
 *   SUM, in place and not, vectors past 4 KiB up to 512 KiB), and for comparison uneven
 *   counts (ranks 1..p-2 holding the mean block, not alike all the same) and a
 *   non-commutative user op (which keep the rank-order fold); in each call rank c mod p
 *   (call c) starts late (after a sleep), and the last rank too in even calls, so that a
 *   late starter sits on each CPU in turn while its CPU mates and the other CPUs' ranks
 *   fold (the fold by CPU folds a CPU's partials as soon as that CPU's ranks have posted),
 *   and every call's values differ from the previous call's (a vector read before its
 *   rank posted it shows);
 * - several outstanding at once on the same communicator: two reduce-scatters of equal
 *   blocks (one in place), one of uneven counts, an allreduce through the same region and a
 *   small ibarrier, completed in reverse order, rank 0 sleeping before it waits (its
 *   partials come from its own progress or the progress thread's).
 * Every result is checked element by element against its formula. */
#define _GNU_SOURCE
#include "check.h"
#include "rs_cpu.h"
#include <string.h>
#include <unistd.h>

/* The sum over the ranks of val(q, i) + add. */
static int sum_at(int p, int i, int add) {
    int e = 0;
    for (int q = 0; q < p; q++) e += val(q, i) + add;
    return e;
}

static void check_sum(const int *r, int len, int at, int p, int add, const char *what, int rank) {
    for (int i = 0; i < len; i++) {
        int e = sum_at(p, at + i, add);
        if (r[i] != e) {
            fprintf(stderr, "rank %d %s: [%d] %d != %d\n", rank, what, i, r[i], e);
            CHECK(0);
        }
    }
}

int main(int argc, char **argv) {
    int rank, p;
    if (init_pinned(&argc, &argv, &rank, &p) != 0) return 3;
    MPI_Op nc;
    CHECK_RC(MPI_Op_create(lin, 0, &nc));
    const int blocks[] = {1100, 4096, 16384, 65536 / 4 * 2};
    int checks = 0;
    {
        /* A blocking reduce-scatter first: the nonblocking ones take the segment an earlier
         * collective made. */
        int *s = malloc(sizeof(int) * p), x = 0;
        for (int q = 0; q < p; q++) s[q] = val(rank, q);
        CHECK_RC(MPI_Reduce_scatter_block(s, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        check_sum(&x, 1, rank, p, 0, "blocking", rank);
        free(s);
    }
    for (int bi = 0; bi < 4; bi++) {
        int b = blocks[bi] / (p > 4 ? 2 : 1), n = b * p;
        int *s = malloc(sizeof(int) * n), *r = malloc(sizeof(int) * n);
        int *counts = malloc(sizeof(int) * p);
        for (int rep = 0; rep < 2; rep++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                for (int kind = 0; kind < 4; kind++) {
                    /* kind 0: block SUM, 1: reduce_scatter equal SUM, 2: uneven SUM, 3: block
                     * non-commutative. */
                    /* Call `add`'s values: unlike the previous call's in every slot. */
                    int add = checks;
                    for (int i = 0; i < n; i++) s[i] = val(rank, i) + add;
                    for (int q = 0; q < p; q++) counts[q] = b;
                    if (kind == 2) {
                        /* Ranks 1..p-2 have the blocks' mean (their block times p is the
                         * vector): only the counts tell them that these are not alike. */
                        counts[0] = b - 1;
                        counts[p - 1] = b + 1;
                    }
                    int at = 0;
                    for (int q = 0; q < rank; q++) at += counts[q];
                    if (inplace) memcpy(r, s, sizeof(int) * n);
                    const void *src = inplace ? MPI_IN_PLACE : s;
                    if (rank == add % p || (rank == p - 1 && add % 2 == 0)) usleep(2000);
                    MPI_Request req;
                    if (kind == 0)
                        CHECK_RC(MPI_Ireduce_scatter_block(src, r, b, MPI_INT, MPI_SUM,
                                                           MPI_COMM_WORLD, &req));
                    else if (kind == 3)
                        CHECK_RC(MPI_Ireduce_scatter_block(src, r, b, MPI_INT, nc,
                                                           MPI_COMM_WORLD, &req));
                    else
                        CHECK_RC(MPI_Ireduce_scatter(src, r, counts, MPI_INT, MPI_SUM,
                                                     MPI_COMM_WORLD, &req));
                    CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
                    for (int i = 0; i < counts[rank]; i++) {
                        int e = 0;
                        if (kind == 3) {
                            /* x0 o (x1 o (... o x_{p-1})): folded from the last rank down. */
                            e = val(p - 1, at + i) + add;
                            for (int q = p - 2; q >= 0; q--) e = 2 * (val(q, at + i) + add) + e;
                        } else {
                            e = sum_at(p, at + i, add);
                        }
                        if (r[i] != e) {
                            fprintf(stderr,
                                    "rank %d kind %d inplace %d block %d rep %d: [%d] %d != %d\n",
                                    rank, kind, inplace, b, rep, i, r[i], e);
                            CHECK(0);
                        }
                    }
                    checks++;
                }
            }
        }
        free(s);
        free(r);
        free(counts);
    }
    /* Several outstanding on one communicator, completed in reverse order. */
    for (int bi = 2; bi < 4; bi++) {
        int b = blocks[bi] / (p > 4 ? 2 : 1), n = b * p;
        int *s1 = malloc(sizeof(int) * n), *r1 = malloc(sizeof(int) * b);
        int *r2 = malloc(sizeof(int) * n);
        int *s3 = malloc(sizeof(int) * n), *r3 = malloc(sizeof(int) * (b + p));
        int na = 65536; /* 256 KiB allreduce through the same region */
        int *sa = malloc(sizeof(int) * na), *ra = malloc(sizeof(int) * na);
        int *counts = malloc(sizeof(int) * p);
        for (int q = 0; q < p; q++) counts[q] = b;
        counts[0] = b - 1;
        counts[p - 1] = b + 1;
        for (int rep = 0; rep < 3; rep++) {
            for (int i = 0; i < n; i++) {
                s1[i] = val(rank, i) + rep;
                r2[i] = val(rank, i) + rep + 1;
                s3[i] = val(rank, i) + rep + 2;
            }
            for (int i = 0; i < na; i++) sa[i] = val(rank, i) + rep + 3;
            MPI_Request q[5];
            CHECK_RC(MPI_Ireduce_scatter_block(s1, r1, b, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
            CHECK_RC(MPI_Ireduce_scatter_block(MPI_IN_PLACE, r2, b, MPI_INT, MPI_SUM,
                                               MPI_COMM_WORLD, &q[1]));
            CHECK_RC(MPI_Iallreduce(sa, ra, na, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[2]));
            CHECK_RC(MPI_Ireduce_scatter(s3, r3, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[3]));
            CHECK_RC(MPI_Ibarrier(MPI_COMM_WORLD, &q[4]));
            if (rank == 0) usleep(5000);
            for (int j = 4; j >= 0; j--) CHECK_RC(MPI_Wait(&q[j], MPI_STATUS_IGNORE));
            char what[64];
            snprintf(what, sizeof what, "outstanding block %d rep %d: first", b, rep);
            check_sum(r1, b, rank * b, p, rep, what, rank);
            snprintf(what, sizeof what, "outstanding block %d rep %d: in place", b, rep);
            check_sum(r2, b, rank * b, p, rep + 1, what, rank);
            snprintf(what, sizeof what, "outstanding block %d rep %d: allreduce", b, rep);
            check_sum(ra, na, 0, p, rep + 3, what, rank);
            int at = 0;
            for (int x = 0; x < rank; x++) at += counts[x];
            snprintf(what, sizeof what, "outstanding block %d rep %d: uneven", b, rep);
            check_sum(r3, counts[rank], at, p, rep + 2, what, rank);
            checks++;
        }
        free(s1);
        free(r1);
        free(r2);
        free(s3);
        free(r3);
        free(sa);
        free(ra);
        free(counts);
    }
    MPI_Op_free(&nc);
    int all_ok = checks;
    CHECK_RC(MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (rank == 0) printf("icoll_rs_cpu: all checks passed (%d)\n", all_ok);
    MPI_Finalize();
    return 0;
}
