/* Scatters of blocks too large for the shared-memory segment with every rank pinned to one
 * CPU (rank r on CPU r mod the CPUs it may use, pinned before MPI_Init), the case where the
 * blocking root (MPI_Scatter, MPI_Scatterv) writes the blocks of the readers pinned to its
 * own CPU whose 2 MiB stretch of its memory a reader of the other CPU reads too (the reader
 * posts where its block goes and waits for the root's word) while the others read theirs,
 * and where an in-place MPI_Iscatterv root shares its readers' copies:
 * MPI_Scatterv and MPI_Iscatterv with irregular counts (no multiple of a chunk or of 8)
 * whose blocks lie in the send buffer in reverse rank order with gaps, and with a zero
 * count and a small block among 1 MiB ones; MPI_Scatter of 200003 bytes and of 1 MiB. From
 * every root, in place and not, every call's values new; a root that sleeps (before a
 * blocking call, between the post and the wait of a nonblocking one) and readers that
 * sleep (likewise), and two MPI_Iscatterv of different roots outstanding at once,
 * completed in reverse order. Every byte of every rank's block is checked, and the bytes
 * after it in the receive buffer are checked untouched. Prints "scat_v_cpu: all checks
 * passed (N)" from rank 0. */
#define _GNU_SOURCE
#include "check.h"
#include "rs_cpu.h"
#include <string.h>
#include <unistd.h>

/* Bytes after a block in the receive buffer that must stay as they were. */
#define GUARD 4096
/* The largest block. */
#define MAX (1 << 20)

enum form { SCATTER, SCATTERV, ISCATTERV };
static const char *names[] = {"scatter", "scatterv", "iscatterv"};

/* Byte i of rank q's block in call `salt`. */
static unsigned char byte(int q, size_t i, int salt) {
    return (unsigned char)(q * 31 + salt * 17 + i * 7 + (i >> 12));
}

/* Counts and displacements of pattern `pat` (0, 1: for the v forms; 2, 3: MPI_Scatter's
 * 200003 and 1 MiB blocks) for p ranks and `root`; returns the send buffer's length.
 * Pattern 0: every block 128 KiB and more, of irregular lengths; 1: rank root+1's count 0,
 * rank root+2's 3000 bytes (on 3 ranks rank root+2 is the root's left neighbour), the
 * others near 1 MiB. The v patterns put the blocks in reverse rank order with gaps. */
static size_t layout(int pat, int p, int root, int *counts, int *displs) {
    if (pat >= 2) {
        const int n = pat == 2 ? 200003 : MAX;
        for (int q = 0; q < p; q++) counts[q] = n, displs[q] = q * n;
        return (size_t)p * n;
    }
    size_t off = 0;
    for (int q = p - 1; q >= 0; q--) {
        int c;
        if (pat == 0)
            c = (1 << 17) + q * 40961 + 3;
        else if (q == (root + 1) % p)
            c = 0;
        else if (q == (root + 2) % p && q != root)
            c = 3000;
        else
            c = MAX - q * 777;
        counts[q] = c;
        displs[q] = (int)off;
        off += (size_t)c + 4093;
    }
    return off;
}

/* Checks `n` bytes at `r` against rank `q`'s block of call `salt`, then `guard` bytes after
 * them against 0xee; a wrong byte fails the job. */
static void check(const unsigned char *r, size_t n, size_t guard, int q, int salt,
                  const char *what, int rank) {
    for (size_t i = 0; i < n + guard; i++) {
        const unsigned char want = i < n ? byte(q, i, salt) : 0xee;
        if (r[i] != want) {
            fprintf(stderr, "rank %d %s salt %d: byte %zu of %zu (+%zu) is %u, not %u\n", rank,
                    what, salt, i, n, guard, r[i], want);
            CHECK(0);
        }
    }
}

/* The root's send buffer for call `salt`: every rank's block at its displacement, 0x5a in
 * the gaps. */
static void fill(unsigned char *s, size_t len, int p, const int *counts, const int *displs,
                 int salt) {
    memset(s, 0x5a, len);
    for (int q = 0; q < p; q++)
        for (int i = 0; i < counts[q]; i++) s[displs[q] + i] = byte(q, (size_t)i, salt);
}

/* One call of `f` with layout `pat` from `root` (in place at the root when `ip`); `late`: 1
 * the root sleeps (before a blocking call, between post and wait of a nonblocking one), 2
 * the others do. */
static void one(enum form f, int pat, int rank, int p, int root, int ip, int late, int salt,
                unsigned char *s, unsigned char *r) {
    int counts[64], displs[64];
    const size_t len = layout(pat, p, root, counts, displs);
    const int me = rank == root, n = counts[rank];
    char what[96];
    snprintf(what, sizeof what, "%s pattern %d root %d%s late %d", names[f], pat, root,
             ip ? " in place" : "", late);
    memset(r, 0xee, (size_t)n + GUARD);
    if (me) fill(s, len, p, counts, displs, salt);
    void *out = me && ip ? MPI_IN_PLACE : r;
    const int sleeps = (late == 1 && me) || (late == 2 && !me);
    if (f == ISCATTERV) {
        MPI_Request rq;
        CHECK_RC(MPI_Iscatterv(s, counts, displs, MPI_BYTE, out, n, MPI_BYTE, root,
                               MPI_COMM_WORLD, &rq));
        if (sleeps) usleep(20000);
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    } else {
        if (sleeps) usleep(20000);
        if (f == SCATTERV)
            CHECK_RC(MPI_Scatterv(s, counts, displs, MPI_BYTE, out, n, MPI_BYTE, root,
                                  MPI_COMM_WORLD));
        else
            CHECK_RC(MPI_Scatter(s, n, MPI_BYTE, out, n, MPI_BYTE, root, MPI_COMM_WORLD));
    }
    if (me) {
        /* The send buffer is the root's alone: every block and gap as it was. */
        for (int q = 0; q < p; q++)
            check(s + displs[q], (size_t)counts[q], 0, q, salt, what, rank);
        if (ip) return;
    }
    check(r, (size_t)n, GUARD, rank, salt, what, rank);
}

int main(int argc, char **argv) {
    int rank, p;
    if (init_pinned(&argc, &argv, &rank, &p) != 0) return 3;
    CHECK(p <= 64);
    /* A blocking collective first: the nonblocking ones take the segment it made. */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    const size_t max = ((size_t)MAX + 4093) * p + GUARD;
    unsigned char *s = malloc(max), *r = malloc(max), *s2 = malloc(max), *r2 = malloc(max);
    CHECK(s && r && s2 && r2);
    int checks = 0, salt = 0;
    for (int root = 0; root < p; root++)
        for (int ip = 0; ip < 2; ip++)
            for (int late = 0; late < 3; late++) {
                for (int pat = 0; pat < 2; pat++) {
                    one(SCATTERV, pat, rank, p, root, ip, late, ++salt, s, r);
                    one(ISCATTERV, pat, rank, p, root, ip, late, ++salt, s, r);
                }
                for (int pat = 2; pat < 4; pat++)
                    one(SCATTER, pat, rank, p, root, ip, late, ++salt, s, r);
                checks += 6;
            }
    /* Two MPI_Iscatterv outstanding (roots 0 and p - 1, in place), completed in reverse
     * order. */
    for (int pat = 0; pat < 2; pat++) {
        const int ra = 0, rb = p - 1, sa = ++salt, sb = ++salt;
        int ca[64], da[64], cb[64], db[64];
        const size_t la = layout(pat, p, ra, ca, da), lb = layout(pat, p, rb, cb, db);
        memset(r, 0xee, (size_t)ca[rank] + GUARD);
        memset(r2, 0xee, (size_t)cb[rank] + GUARD);
        if (rank == ra) fill(s, la, p, ca, da, sa);
        if (rank == rb) fill(s2, lb, p, cb, db, sb);
        MPI_Request rq[2];
        CHECK_RC(MPI_Iscatterv(s, ca, da, MPI_BYTE, rank == ra ? MPI_IN_PLACE : r, ca[rank],
                               MPI_BYTE, ra, MPI_COMM_WORLD, &rq[0]));
        CHECK_RC(MPI_Iscatterv(s2, cb, db, MPI_BYTE, rank == rb ? MPI_IN_PLACE : r2, cb[rank],
                               MPI_BYTE, rb, MPI_COMM_WORLD, &rq[1]));
        CHECK_RC(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        if (rank == ra)
            check(s + da[ra], (size_t)ca[ra], 0, ra, sa, "outstanding, first (root)", rank);
        else
            check(r, (size_t)ca[rank], GUARD, rank, sa, "outstanding, first", rank);
        if (rank == rb)
            check(s2 + db[rb], (size_t)cb[rb], 0, rb, sb, "outstanding, second (root)", rank);
        else
            check(r2, (size_t)cb[rank], GUARD, rank, sb, "outstanding, second", rank);
        checks++;
    }
    int all = 0;
    CHECK_RC(MPI_Reduce(&checks, &all, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD));
    if (rank == 0) printf("scat_v_cpu: all checks passed (%d)\n", all);
    free(s);
    free(r);
    free(s2);
    free(r2);
    MPI_Finalize();
    return 0;
}
