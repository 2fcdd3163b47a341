/* Nonblocking scatters of blocks too large for the shared-memory segment with every rank
 * pinned to one CPU (rank r on CPU r mod the CPUs it may use, pinned before MPI_Init), the
 * case where an in-place root shares the copies with its readers and writes the whole
 * blocks of the readers pinned to its own CPU (which leave them to it for a few looks and
 * then claim what is left): MPI_Iscatter of 2 chunks, of lengths that are no multiple of a
 * chunk or of 8, and of 1 MiB, from every root, in place and not, every call's values new;
 * a root that sleeps between its post and its wait (its readers end without it, or with
 * its progress thread), readers that sleep before they wait, and two scatters of different
 * roots outstanding at once, completed in reverse order. Every byte of every rank's block
 * is checked. Prints "icoll_scat_cpu: all checks passed (N)" from rank 0. */
#define _GNU_SOURCE
#include "check.h"
#include "rs_cpu.h"
#include <string.h>
#include <unistd.h>

/* Byte i of rank q's block in call `salt`. */
static unsigned char byte(int q, size_t i, int salt) {
    return (unsigned char)(q * 31 + salt * 17 + i * 7 + (i >> 12));
}

/* Checks our block `r` (n bytes) of call `salt`; a wrong byte fails the job. */
static void check_block(const unsigned char *r, size_t n, int rank, int salt, const char *what) {
    for (size_t i = 0; i < n; i++) {
        if (r[i] != byte(rank, i, salt)) {
            fprintf(stderr, "rank %d %s salt %d: byte %zu of %zu is %u, not %u\n", rank, what,
                    salt, i, n, r[i], byte(rank, i, salt));
            CHECK(0);
        }
    }
}

/* The root's send buffer of p blocks of n bytes for call `salt`. */
static void fill(unsigned char *s, int p, size_t n, int salt) {
    for (int q = 0; q < p; q++)
        for (size_t i = 0; i < n; i++) s[q * n + i] = byte(q, i, salt);
}

/* One MPI_Iscatter of n-byte blocks from `root` (in place at the root when `ip`); `late`:
 * 1 the root sleeps between its post and its wait, 2 the others do. */
static void one(int rank, int p, size_t n, int root, int ip, int late, int salt, unsigned char *s,
                unsigned char *r) {
    memset(r, 0xee, n);
    if (rank == root) fill(s, p, n, salt);
    MPI_Request rq;
    const int me = rank == root;
    CHECK_RC(MPI_Iscatter(s, (int)n, MPI_BYTE, me && ip ? MPI_IN_PLACE : r, (int)n, MPI_BYTE,
                          root, MPI_COMM_WORLD, &rq));
    if ((late == 1 && me) || (late == 2 && !me)) usleep(20000);
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    if (me && ip)
        check_block(s + (size_t)root * n, n, rank, salt, "in place, root's own block");
    else
        check_block(r, n, rank, salt, ip ? "in place" : "not in place");
}

int main(int argc, char **argv) {
    int rank, p;
    if (init_pinned(&argc, &argv, &rank, &p) != 0) return 3;
    /* A blocking collective first: the nonblocking ones take the segment it made. */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    const size_t sizes[] = {2 << 16, (2 << 16) + 1, 200003, 1 << 20};
    const size_t max = 1 << 20;
    unsigned char *s = malloc(max * p), *r = malloc(max), *s2 = malloc(max * p),
                  *r2 = malloc(max);
    CHECK(s && r && s2 && r2);
    int checks = 0, salt = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int root = 0; root < p; root++)
            for (int ip = 0; ip < 2; ip++)
                for (int late = 0; late < 3; late++) {
                    /* Sleeps only at 1 MiB (they take a while). */
                    if (late && sizes[k] != max) continue;
                    one(rank, p, sizes[k], root, ip, late, ++salt, s, r);
                    checks++;
                }
    /* Two in place outstanding (roots 0 and p - 1), completed in reverse order. */
    for (int rep = 0; rep < 3; rep++) {
        const size_t n = rep == 1 ? 200003 : max;
        const int ra = 0, rb = p - 1, sa = ++salt, sb = ++salt;
        memset(r, 0xee, n);
        memset(r2, 0xee, n);
        if (rank == ra) fill(s, p, n, sa);
        if (rank == rb) fill(s2, p, n, sb);
        MPI_Request rq[2];
        CHECK_RC(MPI_Iscatter(s, (int)n, MPI_BYTE, rank == ra ? MPI_IN_PLACE : r, (int)n, MPI_BYTE,
                              ra, MPI_COMM_WORLD, &rq[0]));
        CHECK_RC(MPI_Iscatter(s2, (int)n, MPI_BYTE, rank == rb ? MPI_IN_PLACE : r2, (int)n,
                              MPI_BYTE, rb, MPI_COMM_WORLD, &rq[1]));
        CHECK_RC(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        check_block(rank == ra ? s + (size_t)ra * n : r, n, rank, sa, "outstanding, first");
        check_block(rank == rb ? s2 + (size_t)rb * n : r2, n, rank, sb, "outstanding, second");
        checks += 2;
    }
    int all = 0;
    CHECK_RC(MPI_Reduce(&checks, &all, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD));
    if (rank == 0) printf("icoll_scat_cpu: all checks passed (%d)\n", all);
    free(s);
    free(r);
    free(s2);
    free(r2);
    MPI_Finalize();
    return 0;
}
