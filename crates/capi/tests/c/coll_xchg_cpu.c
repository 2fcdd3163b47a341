/* Exchanges of blocks too large for the shared-memory segment (cross-memory copies) with
 * every rank pinned to one CPU before MPI_Init, block-wise (argv[1] "block": rank r on CPU
 * r x cpus / p, as the benchmarks pin oversubscribed ranks) or round-robin ("cyclic"), the
 * case where each rank copies from (or trades with) the others in the order their claims
 * allow: a rank first takes a peer whose memory no rank of another CPU is copying from or
 * into. MPI_Alltoall, MPI_Ialltoall, MPI_Alltoallv, MPI_Allgather, MPI_Iallgather,
 * MPI_Allgatherv and MPI_Iallgatherv, in place and not, with blocks of 2^16 + 8, 200003
 * (no multiple of 8 or of a page) and 1 MiB bytes, every call's values new; some calls with
 * one rank (its number changing) sleeping before it enters or waits, so that the ranks copy
 * in other orders; two nonblocking exchanges outstanding, completed in reverse order. Every
 * byte of every block is checked, and the bytes around the blocks are left alone. Prints
 * "coll_xchg_cpu: all checks passed (N)" from rank 0. */
#define _GNU_SOURCE
#include "check.h"
#include <sched.h>
#include <string.h>
#include <unistd.h>

/* Pins this process to one CPU of those it may use: rank r (OMPI_COMM_WORLD_RANK) of p
 * (OMPI_COMM_WORLD_SIZE) on CPU r x n / p (`block`) or r mod n; nothing with a single CPU.
 * Non-zero if the pinning failed. */
static int pin(int block) {
    const char *rk = getenv("OMPI_COMM_WORLD_RANK"), *sz = getenv("OMPI_COMM_WORLD_SIZE");
    cpu_set_t all;
    if (!rk || !sz || sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2) return 0;
    int cpus[CPU_SETSIZE], n = 0, r = atoi(rk), p = atoi(sz);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) cpus[n++] = c;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[block ? (int)((long)r * n / (p > 0 ? p : 1)) % n : r % n], &one);
    return sched_setaffinity(0, sizeof one, &one) != 0;
}

/* Byte i of the block rank `from` sends rank `to` in call `salt` (an allgather's block:
 * `to` = -1). */
static unsigned char byte(int from, int to, size_t i, int salt) {
    return (unsigned char)(from * 31 + to * 11 + salt * 17 + i * 7 + (i >> 12));
}

static int rank, p;

/* Checks block `b` (n bytes, from rank `from` for us, `to`: rank or -1) of call `salt`. */
static void check_block(const unsigned char *b, size_t n, int from, int to, int salt,
                        const char *what) {
    for (size_t i = 0; i < n; i++)
        if (b[i] != byte(from, to, i, salt)) {
            fprintf(stderr, "rank %d %s salt %d: byte %zu of %zu from rank %d is %u, not %u\n",
                    rank, what, salt, i, n, from, b[i], byte(from, to, i, salt));
            CHECK(0);
        }
}

/* The gap of G bytes after each block of the receive buffer (untouched by the exchange). */
#define G 64
#define GAP 0x5a

static void check_gaps(const unsigned char *r, size_t stride, size_t n, const char *what) {
    for (int q = 0; q < p; q++)
        for (size_t i = n; i < stride; i++)
            if (r[q * stride + i] != GAP) {
                fprintf(stderr, "rank %d %s: byte %zu after block %d changed to %u\n", rank,
                        what, i - n, q, r[q * stride + i]);
                CHECK(0);
            }
}

enum kind { ALLTOALL, IALLTOALL, ALLTOALLV, ALLGATHER, IALLGATHER, ALLGATHERV, IALLGATHERV };
static const char *names[] = {"alltoall", "ialltoall", "alltoallv", "allgather",
                              "iallgather", "allgatherv", "iallgatherv"};

/* One exchange of n-byte blocks (v forms: blocks `stride` bytes apart, a gap after each);
 * `late`: the rank that sleeps before it enters (blocking) or waits (nonblocking), -1
 * none. */
static void one(enum kind k, size_t n, int ip, int late, int salt, unsigned char *s,
                unsigned char *r) {
    const int v = k == ALLTOALLV || k == ALLGATHERV || k == IALLGATHERV;
    const int gather = k >= ALLGATHER;
    const size_t stride = v ? n + G : n;
    int counts[64], displs[64];
    for (int q = 0; q < p; q++) counts[q] = (int)n, displs[q] = (int)(q * stride);
    memset(r, GAP, stride * p);
    for (int q = 0; q < p; q++)
        for (size_t i = 0; i < n; i++) {
            /* In place the data to send is in the receive buffer. */
            unsigned char *at = (ip ? r : s) + (gather && !ip ? 0 : q * stride);
            if (gather && q != rank) continue;
            at[i] = byte(rank, gather ? -1 : q, i, salt);
        }
    void *sb = ip ? MPI_IN_PLACE : s;
    MPI_Request rq = MPI_REQUEST_NULL;
    if (late == rank && (k == ALLTOALL || k == ALLTOALLV || k == ALLGATHER || k == ALLGATHERV))
        usleep(3000);
    const int c = (int)n;
    switch (k) {
    case ALLTOALL:
        CHECK_RC(MPI_Alltoall(sb, c, MPI_BYTE, r, c, MPI_BYTE, MPI_COMM_WORLD));
        break;
    case IALLTOALL:
        CHECK_RC(MPI_Ialltoall(sb, c, MPI_BYTE, r, c, MPI_BYTE, MPI_COMM_WORLD, &rq));
        break;
    case ALLTOALLV:
        CHECK_RC(MPI_Alltoallv(sb, counts, displs, MPI_BYTE, r, counts, displs, MPI_BYTE,
                               MPI_COMM_WORLD));
        break;
    case ALLGATHER:
        CHECK_RC(MPI_Allgather(sb, c, MPI_BYTE, r, c, MPI_BYTE, MPI_COMM_WORLD));
        break;
    case IALLGATHER:
        CHECK_RC(MPI_Iallgather(sb, c, MPI_BYTE, r, c, MPI_BYTE, MPI_COMM_WORLD, &rq));
        break;
    case ALLGATHERV:
        CHECK_RC(MPI_Allgatherv(sb, c, MPI_BYTE, r, counts, displs, MPI_BYTE, MPI_COMM_WORLD));
        break;
    case IALLGATHERV:
        CHECK_RC(MPI_Iallgatherv(sb, c, MPI_BYTE, r, counts, displs, MPI_BYTE, MPI_COMM_WORLD,
                                 &rq));
        break;
    }
    if (rq != MPI_REQUEST_NULL) {
        if (late == rank) usleep(3000);
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    }
    char what[64];
    snprintf(what, sizeof what, "%s %s n %zu", names[k], ip ? "in place" : "not in place", n);
    for (int q = 0; q < p; q++)
        check_block(r + q * stride, n, q, gather ? -1 : rank, salt, what);
    if (v) check_gaps(r, stride, n, what);
}

int main(int argc, char **argv) {
    const int block = argc > 1 && !strcmp(argv[1], "block");
    if (pin(block) != 0) return 3;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    check_rank_ = rank;
    CHECK(p <= 64);
    /* A blocking collective first: the nonblocking ones take the segment it made. */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    const size_t sizes[] = {(1 << 16) + 8, 200003, 1 << 20};
    const size_t max = (1 << 20) + G;
    unsigned char *s = malloc(max * p), *r = malloc(max * p), *r2 = malloc(max * p);
    CHECK(s && r && r2);
    int checks = 0, salt = 0;
    for (int k = ALLTOALL; k <= IALLGATHERV; k++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
            for (int ip = 0; ip < 2; ip++)
                for (int rep = 0; rep < 3; rep++) {
                    /* rep 0: nobody late; then rank (salt mod p) sleeps. */
                    one((enum kind)k, sizes[z], ip, rep ? salt % p : -1, ++salt, s, r);
                    checks++;
                }
    /* Two in place outstanding (an ialltoall and an iallgather), completed in reverse. */
    for (int rep = 0; rep < 3; rep++) {
        const size_t n = rep == 1 ? 200003 : 1 << 20;
        const int sa = ++salt, sb = ++salt;
        for (int q = 0; q < p; q++)
            for (size_t i = 0; i < n; i++) r[q * n + i] = byte(rank, q, i, sa);
        for (size_t i = 0; i < n; i++) r2[rank * n + i] = byte(rank, -1, i, sb);
        MPI_Request rq[2];
        CHECK_RC(MPI_Ialltoall(MPI_IN_PLACE, (int)n, MPI_BYTE, r, (int)n, MPI_BYTE,
                               MPI_COMM_WORLD, &rq[0]));
        CHECK_RC(MPI_Iallgather(MPI_IN_PLACE, (int)n, MPI_BYTE, r2, (int)n, MPI_BYTE,
                                MPI_COMM_WORLD, &rq[1]));
        if (rank == rep % p) usleep(3000);
        CHECK_RC(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        for (int q = 0; q < p; q++) {
            check_block(r + q * n, n, q, rank, sa, "two outstanding, ialltoall");
            check_block(r2 + q * n, n, q, -1, sb, "two outstanding, iallgather");
        }
        checks++;
    }
    free(s);
    free(r);
    free(r2);
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("coll_xchg_cpu: all checks passed (%d)\n", checks);
    MPI_Finalize();
    return 0;
}
