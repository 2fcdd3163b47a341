/* Reduce-scatters through the segment's nonblocking large region with every rank pinned to
 * one CPU (rank r on CPU r mod the CPUs it may use, pinned before MPI_Init), where
 * commutative operations on equal blocks fold by CPU: MPI_Reduce_scatter_block and
 * MPI_Reduce_scatter with equal counts (INT SUM, in place and not, vectors past 4 KiB up to
 * 512 KiB), and for comparison uneven counts and a non-commutative user op (which keep the
 * rank-order fold). In each call rank c mod p (call c) starts late (after a sleep), so that a
 * late starter sits on each CPU in turn while its CPU mates and the other CPUs' ranks fold
 * (a CPU's partials are folded as soon as its ranks have posted), and every call's values
 * differ from the previous call's (a vector read before its rank posted it shows). Every
 * result is checked element by element against its formula. */
#define _GNU_SOURCE
#include "check.h"
#include "rs_cpu.h"
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, p;
    if (init_pinned(&argc, &argv, &rank, &p) != 0) return 3;
    MPI_Op nc;
    CHECK_RC(MPI_Op_create(lin, 0, &nc));
    const int blocks[] = {1100, 4096, 16384, 65536 / 4 * 2};
    int checks = 0;
    for (int bi = 0; bi < 4; bi++) {
        int b = blocks[bi] / (p > 4 ? 2 : 1), n = b * p;
        int *s = malloc(sizeof(int) * n), *r = malloc(sizeof(int) * n);
        int *counts = malloc(sizeof(int) * p);
        for (int rep = 0; rep < 3; rep++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                for (int kind = 0; kind < 4; kind++) {
                    /* kind 0: block SUM, 1: reduce_scatter equal SUM, 2: uneven SUM, 3: block
                     * non-commutative. */
                    /* Call `add`'s values: unlike the previous call's in every slot. */
                    int add = checks;
                    for (int i = 0; i < n; i++) s[i] = val(rank, i) + add;
                    for (int q = 0; q < p; q++) counts[q] = b;
                    if (kind == 2) {
                        counts[0] = b + p - 1;
                        for (int q = 1; q < p; q++) counts[q] = b - 1;
                    }
                    int at = 0;
                    for (int q = 0; q < rank; q++) at += counts[q];
                    int *in = inplace ? r : s;
                    if (inplace) memcpy(r, s, sizeof(int) * n);
                    const void *src = inplace ? MPI_IN_PLACE : s;
                    (void)in;
                    if (rank == add % p) usleep(1000);
                    if (kind == 0)
                        CHECK_RC(MPI_Reduce_scatter_block(src, r, b, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
                    else if (kind == 3)
                        CHECK_RC(MPI_Reduce_scatter_block(src, r, b, MPI_INT, nc, MPI_COMM_WORLD));
                    else
                        CHECK_RC(MPI_Reduce_scatter(src, r, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
                    for (int i = 0; i < counts[rank]; i++) {
                        int e = 0;
                        if (kind == 3) {
                            /* x0 o (x1 o (... o x_{p-1})): folded from the last rank down. */
                            e = val(p - 1, at + i) + add;
                            for (int q = p - 2; q >= 0; q--) e = 2 * (val(q, at + i) + add) + e;
                        } else {
                            for (int q = 0; q < p; q++) e += val(q, at + i) + add;
                        }
                        if (r[i] != e) {
                            fprintf(stderr, "rank %d kind %d inplace %d block %d rep %d: [%d] %d != %d\n",
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
    MPI_Op_free(&nc);
    int all_ok = checks;
    CHECK_RC(MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (rank == 0) printf("coll_rs_cpu: all checks passed (%d)\n", all_ok);
    MPI_Finalize();
    return 0;
}
