/* Erroneous counts must fail cleanly, never hang: broadcasts whose root sends more or fewer
 * bytes than one rank posts (MPI_Bcast, MPI_Ibcast, MPI_Bcast_init), and all-to-alls where
 * the sender's and the receiver's counts for one pair differ (MPI_Alltoallv, MPI_Ialltoallv,
 * MPI_Alltoallw, MPI_Ialltoallw, MPI_Alltoallv_init, MPI_Alltoallw_init), with lengths on both sides of the shared-memory segment's bounds (a
 * 4 KiB buffer, the alltoallv table's room per block, 32 KiB and 64 KiB; for broadcasts also
 * 256 KiB and 1 MiB, the nonblocking large region's and the single copy's bounds) and far
 * apart.
 * MPI_ERRORS_RETURN is set on MPI_COMM_WORLD. After every erroneous call a correct call of
 * the same collective must succeed on every rank (the communicator stays usable).
 *
 * What is required (oxmpi's rules; run with "survey" to print every rank's outcome instead,
 * e.g. under another MPI):
 * - bcast: the root succeeds; the rank whose buffer is shorter than the root's data fails
 *   with MPI_ERR_TRUNCATE, longer with MPI_ERR_COUNT; every other rank succeeds with the
 *   root's data, or (the short rank could not forward the data) fails with
 *   MPI_ERR_TRUNCATE or MPI_ERR_OTHER (nonblocking: MPI_ERR_OTHER whatever the erroneous
 *   rank's length, which may have put it on a path that forwards nothing).
 * - alltoallv/w: the receiver of the erroneous block fails with MPI_ERR_TRUNCATE when the
 *   sender's count is larger, and with MPI_ERR_TRUNCATE, MPI_ERR_COUNT or success when it
 *   is smaller; the sender succeeds or fails with one of those; every other rank succeeds
 *   with every block right.
 * - allreduce (ar_case): the rank whose count differs fails (MPI_ERR_TRUNCATE, MPI_ERR_COUNT
 *   or MPI_ERR_OTHER); every other rank succeeds with the right sums or fails alike. Also
 *   where one vector is half another's around the point-to-point bound (16 KiB), where
 *   recursive doubling's one exchange has the length of the large plan's first (every
 *   form: a vector of 8 to 16 KiB on recursive doubling also runs the large plan's extra
 *   exchanges, with empty messages).
 * - reduce, scan, exscan, reduce_scatter_block, reduce_scatter (rd_case): a reduce's root,
 *   a scan's ranks above the erroneous one (and it, unless it is rank 0), and every rank
 *   of a reduce-scatter (each one's block folds every rank's vector) fail; with the segment
 *   every rank sees every rank's length, without it the reduce's tree carries the error
 *   to the root and the reduce-scatter's ring to every rank within its p - 1 steps (with
 *   a non-commutative op its tree to rank 0, which then scatters the marker to every
 *   rank), and the scan's exact exchanges (recursive doubling, the chain) to every rank
 *   above the erroneous one. Without the segment ("nosm") on more than 2 ranks, a scan's
 *   or exscan's pairs of lengths on different point-to-point plans (below 16 KiB
 *   recursive doubling, from it the chain) or with chains of different segment counts
 *   (64 KiB each) are left out of the blocking and nonblocking forms unless "allplans"
 *   runs them (both forms pass them: the chain's ranks check the lengths over recursive
 *   doubling's messages first, the nonblocking ones in rounds before the chain).
 * - iscatter (sc_case, "scatter"): a rank whose block is shorter than the root's fails;
 *   every other rank succeeds with its block right or fails. On 2 ranks around the
 *   single copy's bounds (the root's block read by one cross-memory copy up to 64 KiB,
 *   by message beyond: the root's post on the segment says which).
 * - one-byte items ("bytes", by_case): MPI_Allreduce, MPI_Reduce, MPI_Scan and MPI_Exscan
 *   and their I-forms of MPI_UNSIGNED_CHAR where one rank passes another
 *   count, as rd_case requires (an allreduce's erroneous rank fails too): an exchange's
 *   error marker then meets receives of exactly its length (one byte, or none), which
 *   tell it from data by its mark, not its length.
 * - a scan's length header ("magic", mg_cases; without the segment, 3 ranks and more):
 *   32-byte MPI_(I)Scan and MPI_(I)Exscan (MPI_BOR on MPI_BYTE) whose every vector is the image
 *   of a chain rank's length header (its 16-byte magic, then a length twice) must succeed
 *   with the right result; and rank 0 passing such an image of 32 bytes, naming the
 *   length every other rank passes (16 KiB and 64 KiB, the chain's), against those ranks:
 *   every rank above 0 fails (the chain ranks tell rank 0's partial from a header by its
 *   mark, not its bytes).
 * - reduce_scatter whose blocks one rank splits otherwise with the same sum ("rsmix",
 *   rs_mixed: e.g. counts {1, 3} against {2, 2}): every rank fails (each would otherwise
 *   fold its own block of the same-length vector and succeed); correct calls with the
 *   uneven split on every rank, then even blocks, succeed afterwards.
 *
 * A hang is reported, not waited on: every case runs under alarm(); the SIGALRM handler
 * prints the case and exits with status 3. A persistent request is started twice and must
 * give the same outcome both times. Arguments (any order): "survey", "bcast" or "a2a" (only
 * that part), "allreduce" (only sums where one rank passes another count: MPI_Allreduce,
 * MPI_Iallreduce, MPI_Allreduce_init), "reduce", "scan" (scan and exscan), "rs"
 * (reduce_scatter_block and reduce_scatter: one rank passes other counts; see rd_case),
 * "nosm" (the shared-memory segment is off: leaves out the scan pairs above), "allplans"
 * (does not), "twobad" (with "allreduce": two erroneous ranks, every pair of ranks),
 * "rsmix" (only the reduce_scatter splits), "scatter" (only the iscatters of sc_case),
 * "bytes" (only by_case), "magic" (only mg_cases),
 * "noncomm" (those reductions with a user op made non-commutative, which sums too),
 * "blocking", "nonblocking", "persistent" or
 * "nopersistent" (only those forms). Rank 0 prints "coll_errcounts: all checks passed" at the end. */
#include "check.h"
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int rank, size, survey, failed, nosm, allplans;
/* Which forms run: bit 0 blocking, bit 1 nonblocking, bit 2 persistent ("blocking",
 * "nonblocking", "persistent"). */
static int forms = 7;
static char cur[200];

static void on_alarm(int sig) {
    (void)sig;
    char msg[300];
    int len = snprintf(msg, sizeof msg, "coll_errcounts: rank %d HUNG in %s\n", rank, cur);
    if (write(2, msg, (size_t)len) < 0) _exit(4);
    _exit(3);
}

static const char *cname(int c) {
    static char other[32];
    switch (c) {
    case MPI_SUCCESS: return "success";
    case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
    case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
    case MPI_ERR_OTHER: return "MPI_ERR_OTHER";
    case MPI_ERR_INTERN: return "MPI_ERR_INTERN";
    default: snprintf(other, sizeof other, "class %d", c); return other;
    }
}

#define FAIL(...)                                                                          \
    do {                                                                                   \
        failed = 1;                                                                        \
        fprintf(stderr, "coll_errcounts: rank %d: %s: ", rank, cur);                       \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fprintf(stderr, "\n");                                                             \
        fflush(stderr);                                                                    \
        if (!survey) MPI_Abort(MPI_COMM_WORLD, 99);                                        \
    } while (0)

/* The verdict on one rank of an erroneous call that returned class `c` (`ok`: its data is
 * right): a rank that `sees` the mismatch must fail with a count error; any other rank
 * fails so too or succeeds with the right data. */
static void judge(int c, int ok, int sees) {
    int known = c == MPI_ERR_TRUNCATE || c == MPI_ERR_COUNT || c == MPI_ERR_OTHER;
    if (survey) {
        printf("%s: rank %d: %s%s\n", cur, rank, cname(c), c == MPI_SUCCESS && !ok ? " (wrong data)" : "");
        fflush(stdout);
    } else if (sees) {
        if (!known) FAIL("got %s%s, expected an error", cname(c), c == MPI_SUCCESS && !ok ? " with wrong data" : "");
    } else if (!(known || (c == MPI_SUCCESS && ok))) {
        FAIL("got %s%s", cname(c), c == MPI_SUCCESS ? " with wrong data" : "");
    }
}

static unsigned char pat(size_t i, int seed) { return (unsigned char)(i * 7 + (size_t)seed * 13 + 1); }

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    CHECK(p != NULL);
    return p;
}

/* ---- broadcasts ---- */

/* Start persistent request q twice (its outcome must be the same both times: a restart
 * neither hangs nor reads the first run's state), then free it. */
static int start_twice(MPI_Request *q) {
    int rc[2];
    for (int i = 0; i < 2; i++) {
        rc[i] = MPI_Start(q);
        if (rc[i] == MPI_SUCCESS) rc[i] = MPI_Wait(q, MPI_STATUS_IGNORE);
    }
    MPI_Request_free(q);
    if (class_of_rc(rc[0]) != class_of_rc(rc[1])) {
        char first[32];
        snprintf(first, sizeof first, "%s", class_of_rc(rc[0]) == MPI_SUCCESS ? "success" : "an error");
        fprintf(stderr, "coll_errcounts: rank %d: %s: the first start got %s, the second class %d\n",
                rank, cur, first, class_of_rc(rc[1]));
        failed = 1;
        if (!survey) MPI_Abort(MPI_COMM_WORLD, 99);
    }
    return rc[0];
}

/* nb: 0 MPI_Bcast, 1 MPI_Ibcast, 2 MPI_Bcast_init (started twice). */
static int bcast_call(int nb, void *buf, size_t n, int root) {
    if (!nb) return MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
    MPI_Request q;
    if (nb == 2) {
        int rc = MPI_Bcast_init(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD, MPI_INFO_NULL, &q);
        return rc != MPI_SUCCESS ? rc : start_twice(&q);
    }
    int rc = MPI_Ibcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD, &q);
    return rc != MPI_SUCCESS ? rc : MPI_Wait(&q, MPI_STATUS_IGNORE);
}

static const char *bcast_name[] = {"MPI_Bcast", "MPI_Ibcast", "MPI_Bcast_init"};

/* The root sends m bytes, rank `bad` posts n, every other rank m. */
static void bcast_case(int nb, int root, int bad, size_t m, size_t n, int seed) {
    size_t mine = rank == bad ? n : m;
    unsigned char *buf = xmalloc(mine);
    for (size_t i = 0; i < mine; i++) buf[i] = rank == root ? pat(i, seed) : 0xee;
    snprintf(cur, sizeof cur, "%s: root %d sends %zu B, rank %d posts %zu B",
             bcast_name[nb], root, m, bad, n);
    alarm(30);
    int c = class_of_rc(bcast_call(nb, buf, mine, root));
    int data_ok = 1;
    if (rank != root && rank != bad)
        for (size_t i = 0; i < m; i++)
            if (buf[i] != pat(i, seed)) { data_ok = 0; break; }
    if (survey) {
        printf("%s: rank %d: %s%s\n", cur, rank, cname(c),
               c == MPI_SUCCESS && !data_ok ? " (wrong data)" : "");
        fflush(stdout);
    } else if (rank == root) {
        if (c != MPI_SUCCESS) FAIL("the root got %s", cname(c));
    } else if (rank == bad) {
        int want = m > n ? MPI_ERR_TRUNCATE : MPI_ERR_COUNT;
        if (c != want) FAIL("got %s, expected %s", cname(c), cname(want));
    } else if (c == MPI_SUCCESS) {
        if (!data_ok) FAIL("success with the wrong data");
    } else if (!(m > n && (c == MPI_ERR_TRUNCATE || c == MPI_ERR_OTHER)) &&
               !(nb && c == MPI_ERR_OTHER)) {
        /* MPI_ERR_OTHER below the erroneous rank in the nonblocking form also when that
         * rank posts more: its length may put it on another path than the root's
         * messages (e.g. the large region between two lengths that go by message), and
         * then it forwards nothing. */
        FAIL("got %s", cname(c));
    }
    /* A correct broadcast afterwards. */
    int v = rank == root ? 1000 + seed : -1;
    int c2 = class_of_rc(bcast_call(nb, &v, sizeof v, root));
    if (c2 != MPI_SUCCESS || v != 1000 + seed)
        FAIL("the correct broadcast after it got %s, value %d", cname(c2), v);
    alarm(0);
    free(buf);
}

static void bcasts(void) {
    /* (root's bytes, the other rank's bytes) */
    static const size_t pairs[][2] = {
        {0, 1},         {1, 0},         {1, 2},         {2, 1},         {50, 200},
        {200, 50},      {4096, 4097},   {4097, 4096},   {4152, 4153},   {4153, 4152},
        {32768, 32769}, {32769, 32768}, {65536, 65537}, {65537, 65536}, {100, 40000},
        {40000, 100},   {0, 70000},     {70000, 0},     {300000, 1},    {1, 300000},
        /* The nonblocking large region's lower bound (256 KiB, on more than 2 ranks that
         * yield), the single copy's and the large region's upper bound (1 MiB). */
        {262143, 262144}, {262144, 262143}, {1048576, 1048577}, {1048577, 1048576},
        {4096, 1048577},  {1048577, 4096},
    };
    int seed = 0;
    for (int nb = 0; nb < 3; nb++)
        for (size_t k = 0; k < sizeof pairs / sizeof pairs[0] && (forms >> nb & 1); k++)
            for (int root = 0; root < size; root++)
                for (int bad = 0; bad < size; bad++) {
                    if (bad == root || (size > 3 && bad != (root + 1) % size && bad != (root + 2) % size))
                        continue;
                    bcast_case(nb, root, bad, pairs[k][0], pairs[k][1], ++seed % 200);
                }
    if (rank == 0 && !failed) printf("coll_errcounts: bcast mismatches: ok\n");
}

/* ---- all-to-alls ---- */

static const char *a2a_name[] = {"MPI_Alltoallv", "MPI_Ialltoallv", "MPI_Alltoallw",
                                 "MPI_Ialltoallw", "MPI_Alltoallv_init", "MPI_Alltoallw_init"};

static int a2a_call(int kind, const void *sb, const int *sc, const int *sd, void *rb,
                    const int *rcn, const int *rd) {
    MPI_Datatype t[64];
    for (int i = 0; i < size; i++) t[i] = MPI_BYTE;
    MPI_Request q;
    int rc;
    switch (kind) {
    case 0: return MPI_Alltoallv(sb, sc, sd, MPI_BYTE, rb, rcn, rd, MPI_BYTE, MPI_COMM_WORLD);
    case 1: rc = MPI_Ialltoallv(sb, sc, sd, MPI_BYTE, rb, rcn, rd, MPI_BYTE, MPI_COMM_WORLD, &q); break;
    case 2: return MPI_Alltoallw(sb, sc, sd, t, rb, rcn, rd, t, MPI_COMM_WORLD);
    case 3: rc = MPI_Ialltoallw(sb, sc, sd, t, rb, rcn, rd, t, MPI_COMM_WORLD, &q); break;
    case 4:
        rc = MPI_Alltoallv_init(sb, sc, sd, MPI_BYTE, rb, rcn, rd, MPI_BYTE, MPI_COMM_WORLD,
                                MPI_INFO_NULL, &q);
        return rc != MPI_SUCCESS ? rc : start_twice(&q);
    default:
        rc = MPI_Alltoallw_init(sb, sc, sd, t, rb, rcn, rd, t, MPI_COMM_WORLD, MPI_INFO_NULL, &q);
        return rc != MPI_SUCCESS ? rc : start_twice(&q);
    }
    return rc != MPI_SUCCESS ? rc : MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* Every block `base` bytes but the one from rank s to rank d: s sends sc bytes, d expects
 * rc. Block from i to j: pat(., seed + 31 i + j). */
static void a2a_case(int kind, int s, int d, size_t base, size_t sc, size_t rc, int seed) {
    int scount[64], sdispl[64], rcount[64], rdispl[64];
    size_t stot = 0, rtot = 0;
    for (int j = 0; j < size; j++) {
        scount[j] = (int)(rank == s && j == d ? sc : base);
        rcount[j] = (int)(rank == d && j == s ? rc : base);
        sdispl[j] = (int)stot;
        rdispl[j] = (int)rtot;
        stot += (size_t)scount[j];
        rtot += (size_t)rcount[j];
    }
    unsigned char *sb = xmalloc(stot), *rb = xmalloc(rtot);
    for (int j = 0; j < size; j++)
        for (int i = 0; i < scount[j]; i++) sb[sdispl[j] + i] = pat((size_t)i, seed + 31 * rank + j);
    memset(rb, 0xee, rtot);
    snprintf(cur, sizeof cur, "%s: blocks of %zu B, rank %d sends %zu B to rank %d, which expects %zu B",
             a2a_name[kind], base, s, sc, d, rc);
    alarm(30);
    int c = class_of_rc(a2a_call(kind, sb, scount, sdispl, rb, rcount, rdispl));
    int data_ok = 1;
    for (int i = 0; i < size && data_ok; i++) {
        if (rank == d && i == s) continue;
        for (int k = 0; k < rcount[i]; k++)
            if (rb[rdispl[i] + k] != pat((size_t)k, seed + 31 * i + rank)) { data_ok = 0; break; }
    }
    if (survey) {
        printf("%s: rank %d: %s%s\n", cur, rank, cname(c),
               c == MPI_SUCCESS && !data_ok ? " (wrong data)" : "");
        fflush(stdout);
    } else if (rank == d && sc > rc) {
        if (c != MPI_ERR_TRUNCATE) FAIL("got %s, expected MPI_ERR_TRUNCATE", cname(c));
    } else if (rank == d || rank == s) {
        if (c != MPI_SUCCESS && c != MPI_ERR_TRUNCATE && c != MPI_ERR_COUNT) FAIL("got %s", cname(c));
        if (c == MPI_SUCCESS && !data_ok) FAIL("success with a wrong block");
    } else if (c != MPI_SUCCESS || !data_ok) {
        FAIL("got %s%s", cname(c), data_ok ? "" : " with a wrong block");
    }
    /* A correct all-to-all afterwards. */
    for (int j = 0; j < size; j++) {
        scount[j] = rcount[j] = 4;
        sdispl[j] = rdispl[j] = 4 * j;
        for (int i = 0; i < 4; i++) sb[4 * j + i] = pat((size_t)i, seed + 31 * rank + j);
    }
    memset(rb, 0, 4 * (size_t)size);
    int c2 = class_of_rc(a2a_call(kind, sb, scount, sdispl, rb, rcount, rdispl));
    int ok2 = c2 == MPI_SUCCESS;
    for (int i = 0; i < size && ok2; i++)
        for (int k = 0; k < 4; k++) ok2 &= rb[4 * i + k] == pat((size_t)k, seed + 31 * i + rank);
    if (!ok2) FAIL("the correct all-to-all after it got %s%s", cname(c2), c2 ? "" : " with a wrong block");
    alarm(0);
    free(sb);
    free(rb);
}

static void a2as(void) {
    /* The alltoallv table's room per block on the segment: (4152 - 8 p) / (p - 1). */
    size_t t = (4152 - 8 * (size_t)size) / (size_t)(size > 1 ? size - 1 : 1);
    const size_t pairs[][2] = {
        {0, 1},         {1, 0},         {8, 16},        {16, 8},        {t, t + 1},
        {t + 1, t},     {4096, 4097},   {4097, 4096},   {32768, 32769}, {32769, 32768},
        {65536, 65537}, {65537, 65536}, {100, 40000},   {40000, 100},   {0, 70000},
        {70000, 0},     {300000, 1},    {1, 300000},
    };
    const size_t bases[] = {8, 0};
    int seed = 0;
    for (int kind = 0; kind < 6; kind++)
        for (size_t b = 0; b < sizeof bases / sizeof bases[0] && (forms >> (kind < 4 ? kind & 1 : 2) & 1); b++)
            for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
                for (int s = 0; s < size; s++)
                    for (int d = 0; d < size; d++) {
                        if (size > 2 && (d != (s + 1) % size) && d != s) continue;
                        a2a_case(kind, s, d, bases[b], pairs[k][0], pairs[k][1], ++seed % 200);
                    }
    if (rank == 0 && !failed) printf("coll_errcounts: all-to-all mismatches: ok\n");
}

/* ---- allreduce ---- */

static const char *ar_name[] = {"MPI_Allreduce", "MPI_Iallreduce", "MPI_Allreduce_init"};

static int ar_call(int form, const int *in, int *out, size_t n) {
    MPI_Request q;
    int rc;
    switch (form) {
    case 0: return MPI_Allreduce(in, out, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    case 1: rc = MPI_Iallreduce(in, out, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q); break;
    default:
        rc = MPI_Allreduce_init(in, out, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q);
        return rc != MPI_SUCCESS ? rc : start_twice(&q);
    }
    return rc != MPI_SUCCESS ? rc : MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* Every rank sums m ints but the ranks of `bad` (bit r: rank r), which pass n. A bad rank must fail (any of
 * MPI_ERR_TRUNCATE, MPI_ERR_COUNT, MPI_ERR_OTHER), the others succeed with the right sums
 * or fail with one of those (every form; MPI_Iallreduce without the segment: a rank of
 * recursive doubling that got a wrong length also runs the exchanges of Rabenseifner's
 * algorithm, which another length may have taken); correct allreduces afterwards (1 int, then m ints) succeed
 * everywhere with the right sums. Lengths on both sides of a segment buffer (1024 ints),
 * the two-rank point-to-point range (up to 8 KiB) and cross-memory range (up to 1 MiB),
 * the large region, the point-to-point algorithms' bound (16 KiB: recursive doubling
 * below, the ring or Rabenseifner's algorithm above), and far apart. */
static void ar_case(int form, unsigned bad, size_t m, size_t n, int seed) {
    int is_bad = bad >> rank & 1;
    size_t mine = is_bad ? n : m;
    int *in = xmalloc(mine * sizeof(int)), *out = xmalloc(mine * sizeof(int));
    for (size_t i = 0; i < mine; i++) {
        in[i] = (int)(i % 1000) + seed + rank;
        out[i] = -1;
    }
    if ((bad & (bad - 1)) == 0)
        snprintf(cur, sizeof cur, "%s: %zu ints, rank %d passes %zu", ar_name[form], m,
                 __builtin_ctz(bad), n);
    else
        snprintf(cur, sizeof cur, "%s: %zu ints, the ranks of mask %u pass %zu", ar_name[form], m,
                 bad, n);
    alarm(30);
    int c = class_of_rc(ar_call(form, in, out, mine));
    int data_ok = 1;
    for (size_t i = 0; i < mine && data_ok; i++)
        data_ok = out[i] == size * ((int)(i % 1000) + seed) + size * (size - 1) / 2;
    int known = c == MPI_ERR_TRUNCATE || c == MPI_ERR_COUNT || c == MPI_ERR_OTHER;
    if (survey) {
        printf("%s: rank %d: %s%s\n", cur, rank, cname(c),
               c == MPI_SUCCESS && !data_ok ? " (wrong data)" : "");
        fflush(stdout);
    } else if (is_bad) {
        if (!known) FAIL("got %s", cname(c));
    } else if (!(known || (c == MPI_SUCCESS && data_ok))) {
        FAIL("got %s%s", cname(c), c == MPI_SUCCESS ? " with wrong sums" : "");
    }
    int v = rank + seed, w = -1;
    int c2 = class_of_rc(ar_call(form, &v, &w, 1));
    if (c2 != MPI_SUCCESS || w != size * seed + size * (size - 1) / 2)
        FAIL("the correct allreduce after it got %s, sum %d", cname(c2), w);
    /* And a correct one of the common length m (the path of that length, ranks in step). */
    int *in2 = xmalloc(m * sizeof(int)), *out2 = xmalloc(m * sizeof(int));
    for (size_t i = 0; i < m; i++) {
        in2[i] = (int)(i % 1000) + seed + rank;
        out2[i] = -1;
    }
    int c3 = class_of_rc(ar_call(form, in2, out2, m));
    size_t bad_at = m;
    for (size_t i = 0; i < m && bad_at == m; i++)
        if (out2[i] != size * ((int)(i % 1000) + seed) + size * (size - 1) / 2) bad_at = i;
    if (c3 != MPI_SUCCESS || bad_at != m)
        FAIL("the correct allreduce of %zu ints after it got %s%s", m, cname(c3),
             bad_at != m ? " with wrong sums" : "");
    alarm(0);
    free(in);
    free(out);
    free(in2);
    free(out2);
}

static void allreduces(void) {
    static const size_t pairs[][2] = {
        {0, 1}, {1, 0}, {1, 2}, {2, 1}, {1024, 1025}, {1025, 1024}, {8192, 8193}, {8193, 8192},
        {100, 70000}, {70000, 100}, {2048, 2049}, {2049, 2048}, {262144, 262145},
        {262145, 262144}, {1024, 262145}, {262145, 1024}, {4096, 4097}, {4097, 4096},
        /* Half another's length around the point-to-point bound (16 KiB): recursive
         * doubling's one exchange has the length of the large plan's first. */
        {2500, 5000}, {5000, 2500}, {4096, 8192}, {8192, 4096},
    };
    const size_t npairs = sizeof pairs / sizeof pairs[0];
    int seed = 0;
    for (int form = 0; form < 3; form++)
        for (size_t k = 0; k < npairs && (forms >> form & 1); k++)
            for (int bad = 0; bad < size; bad++)
                ar_case(form, 1u << bad, pairs[k][0], pairs[k][1], ++seed % 200);
    if (rank == 0 && !failed) printf("coll_errcounts: allreduce mismatches: ok\n");
}

/* "twobad": two erroneous ranks, every pair of ranks (e.g. on 4 ranks, 1 and 2 of 2500 ints
 * on recursive doubling against 0 and 3 of 5000 on Rabenseifner's algorithm), lengths on
 * both sides of the point-to-point bound and of the segment's paths. */
static void allreduces_twobad(void) {
    static const size_t pairs[][2] = {
        {2500, 5000}, {5000, 2500}, {4096, 8192}, {8192, 4096}, {100, 70000},
        {70000, 100}, {1024, 262145}, {262145, 1024}, {1, 2}, {2049, 2048},
    };
    int seed = 0;
    for (int form = 0; form < 3; form++)
        for (size_t k = 0; k < sizeof pairs / sizeof pairs[0] && (forms >> form & 1); k++)
            for (int a = 0; a < size; a++)
                for (int b = a + 1; b < size; b++)
                    ar_case(form, 1u << a | 1u << b, pairs[k][0], pairs[k][1], ++seed % 200);
    if (rank == 0 && !failed) printf("coll_errcounts: allreduce mismatches of two ranks: ok\n");
}

/* ---- reduce, scan, exscan, reduce_scatter(_block) ---- */

/* Collectives of the "reduce", "scan" and "rs" parts: 0 reduce (root `root`), 1 scan,
 * 2 exscan, 3 reduce_scatter_block (n ints per block), 4 reduce_scatter (n ints per block). */
static const char *rd_coll[] = {"Reduce", "Scan", "Exscan", "Reduce_scatter_block", "Reduce_scatter"};

/* The reductions' op: MPI_SUM, or ("noncomm") a user op made non-commutative that sums as
 * well (the same results; a reduce-scatter then takes its non-commutative path). */
static MPI_Op rd_op = MPI_SUM;

static void nc_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const int *a = in;
    int *b = inout;
    for (int i = 0; i < *len; i++) b[i] += a[i];
}
static const char *rd_form[] = {"MPI_", "MPI_I", "MPI_"};
static const char *rd_suffix[] = {"", "", "_init"};

static int rd_call(int coll, int form, const int *in, int *out, size_t n, int root) {
    MPI_Request q;
    MPI_Comm w = MPI_COMM_WORLD;
    int c = (int)n, rc = MPI_SUCCESS;
    int counts[64];
    for (int i = 0; i < size; i++) counts[i] = c;
    switch (coll * 3 + form) {
    case 0: return MPI_Reduce(in, out, c, MPI_INT, rd_op, root, w);
    case 1: rc = MPI_Ireduce(in, out, c, MPI_INT, rd_op, root, w, &q); break;
    case 2: rc = MPI_Reduce_init(in, out, c, MPI_INT, rd_op, root, w, MPI_INFO_NULL, &q); break;
    case 3: return MPI_Scan(in, out, c, MPI_INT, rd_op, w);
    case 4: rc = MPI_Iscan(in, out, c, MPI_INT, rd_op, w, &q); break;
    case 5: rc = MPI_Scan_init(in, out, c, MPI_INT, rd_op, w, MPI_INFO_NULL, &q); break;
    case 6: return MPI_Exscan(in, out, c, MPI_INT, rd_op, w);
    case 7: rc = MPI_Iexscan(in, out, c, MPI_INT, rd_op, w, &q); break;
    case 8: rc = MPI_Exscan_init(in, out, c, MPI_INT, rd_op, w, MPI_INFO_NULL, &q); break;
    case 9: return MPI_Reduce_scatter_block(in, out, c, MPI_INT, rd_op, w);
    case 10: rc = MPI_Ireduce_scatter_block(in, out, c, MPI_INT, rd_op, w, &q); break;
    case 11:
        rc = MPI_Reduce_scatter_block_init(in, out, c, MPI_INT, rd_op, w, MPI_INFO_NULL, &q);
        break;
    case 12: return MPI_Reduce_scatter(in, out, counts, MPI_INT, rd_op, w);
    case 13: rc = MPI_Ireduce_scatter(in, out, counts, MPI_INT, rd_op, w, &q); break;
    default:
        rc = MPI_Reduce_scatter_init(in, out, counts, MPI_INT, rd_op, w, MPI_INFO_NULL, &q);
        break;
    }
    if (rc != MPI_SUCCESS) return rc;
    return form == 2 ? start_twice(&q) : MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* The right result of element i of our output (ints: (j % 1000) + seed + rank at index j of
 * every rank's input, the block's index j = rank * n + i for a reduce-scatter). */
static int rd_want(int coll, size_t n, size_t i, int seed) {
    size_t j = coll >= 3 ? (size_t)rank * n + i : i;
    int v = (int)(j % 1000) + seed;
    if (coll == 1) return (rank + 1) * v + rank * (rank + 1) / 2;
    if (coll == 2) return rank * v + rank * (rank - 1) / 2;
    return size * v + size * (size - 1) / 2;
}

/* One call of `coll` of n ints (every rank but `bad`, which passes `bad_n`); returns the
 * class, *ok whether our output (where we have one) is right. */
static int rd_run(int coll, int form, int root, int bad, size_t n, size_t bad_n, int seed, int *ok) {
    size_t mine = rank == bad ? bad_n : n;
    size_t in_n = coll >= 3 ? mine * (size_t)size : mine;
    int has_out = coll != 0 || rank == root;
    int *in = xmalloc(in_n * sizeof(int)), *out = xmalloc(mine * sizeof(int));
    for (size_t j = 0; j < in_n; j++) in[j] = (int)(j % 1000) + seed + rank;
    for (size_t i = 0; i < mine; i++) out[i] = -1;
    int c = class_of_rc(rd_call(coll, form, in, out, mine, root));
    *ok = 1;
    if (has_out && !(coll == 2 && rank == 0))
        for (size_t i = 0; i < mine && *ok; i++) *ok = out[i] == rd_want(coll, mine, i, seed);
    free(in);
    free(out);
    return c;
}

/* Every rank passes m ints (per block for a reduce-scatter) but rank `bad`, which passes n.
 * A rank that sees the mismatch must fail (MPI_ERR_TRUNCATE, MPI_ERR_COUNT or
 * MPI_ERR_OTHER): a reduce's root; a scan's or exscan's ranks above `bad`, and `bad` itself
 * unless it is rank 0 (each sees the ranks up to its own); a reduce-scatter's every rank.
 * Every other rank succeeds with the right result or fails with one of those. Correct calls
 * afterwards (1 int, then m ints) succeed everywhere with the right results.
 * The same rule for every form. In oxmpi the nonblocking forms on the segment post each
 * rank's length with its vector (the root, or a scan's rank, compares those it folds), and
 * by message compare every length on the segment before the rounds (every rank of that
 * path fails); the persistent forms (MPI_Reduce_init, MPI_Scan_init, MPI_Exscan_init,
 * MPI_Reduce_scatter(_block)_init: the whole vector) compare every rank's length at the init, which fails alike on every rank (nothing to
 * start). */
static void rd_case(int coll, int form, int root, int bad, size_t m, size_t n, int seed) {
    if (coll == 0)
        snprintf(cur, sizeof cur, "%s%s%s: root %d, %zu ints, rank %d passes %zu", rd_form[form],
                 rd_coll[coll], rd_suffix[form], root, m, bad, n);
    else
        snprintf(cur, sizeof cur, "%s%s%s: %zu ints, rank %d passes %zu", rd_form[form],
                 rd_coll[coll], rd_suffix[form], m, bad, n);
    alarm(30);
    int ok, c = rd_run(coll, form, root, bad, m, n, seed, &ok);
    judge(c, ok, coll == 0 ? rank == root : coll <= 2 ? rank > bad || (rank == bad && bad > 0) : 1);
    int c2 = rd_run(coll, form, root, -1, 1, 1, seed, &ok);
    if (c2 != MPI_SUCCESS || !ok)
        FAIL("the correct call of 1 int after it got %s%s", cname(c2), c2 == MPI_SUCCESS ? " with wrong data" : "");
    int c3 = rd_run(coll, form, root, -1, m, m, seed + 1, &ok);
    if (c3 != MPI_SUCCESS || !ok)
        FAIL("the correct call of %zu ints after it got %s%s", m, cname(c3), c3 == MPI_SUCCESS ? " with wrong data" : "");
    alarm(0);
}

/* Whether a point-to-point scan of m and one of n ints (without the segment) run different
 * plans or chains of different segment counts (left out with "nosm", see the header). */
static int scan_plans_differ(size_t m, size_t n) {
    int cm = size > 2 && m * sizeof(int) >= 16384, cn = size > 2 && n * sizeof(int) >= 16384;
    size_t seg = 65536 / sizeof(int);
    return cm != cn || (cm && (m + seg - 1) / seg != (n + seg - 1) / seg);
}

/* colls: bit c runs collective c of rd_coll. */
static void reductions(int colls) {
    static const size_t pairs[][2] = {
        {0, 1}, {1, 0}, {1, 2}, {2, 1}, {1024, 1025}, {1025, 1024}, {2048, 2049}, {2049, 2048},
        {8192, 8193}, {8193, 8192}, {100, 70000}, {70000, 100}, {262144, 262145},
        {262145, 262144}, {1024, 262145}, {262145, 1024},
    };
    int seed = 0;
    for (int coll = 0; coll < 5; coll++)
        for (int form = 0; form < 3 && (colls >> coll & 1); form++)
            for (size_t k = 0; k < sizeof pairs / sizeof pairs[0] && (forms >> form & 1); k++)
                for (int root = 0; root < (coll == 0 ? size : 1); root++)
                    for (int bad = 0; bad < size; bad++) {
                        if (coll == 0 && size > 3 && bad != root && bad != (root + 1) % size) continue;
                        if ((coll == 1 || coll == 2) && nosm && !allplans && form != 2 &&
                            scan_plans_differ(pairs[k][0], pairs[k][1]))
                            continue;
                        rd_case(coll, form, root, bad, pairs[k][0], pairs[k][1], ++seed % 200);
                    }
    if (rank == 0 && !failed) printf("coll_errcounts: reduction mismatches: ok\n");
}

/* ---- one-byte items ---- */

/* coll: 0 allreduce, 1 reduce (root `root`), 2 scan, 3 exscan, of n MPI_UNSIGNED_CHAR
 * (MPI_SUM), blocking (nb 0) or nonblocking (nb 1); returns the class, *ok whether our
 * output (where we have one) is right. */
static int by_run(int nb, int coll, int root, int bad, size_t m, size_t n, int seed, int *ok) {
    static const char *names[2][4] = {{"Allreduce", "Reduce", "Scan", "Exscan"},
                                      {"Iallreduce", "Ireduce", "Iscan", "Iexscan"}};
    size_t mine = rank == bad ? n : m;
    unsigned char *in = xmalloc(mine), *out = xmalloc(mine);
    for (size_t i = 0; i < mine; i++) {
        in[i] = pat(i, seed + rank);
        out[i] = 0xee;
    }
    if (bad >= 0)
        snprintf(cur, sizeof cur, "MPI_%s of unsigned chars: root %d, %zu, rank %d passes %zu",
                 names[nb][coll], root, m, bad, n);
    int c, w = (int)mine;
    MPI_Datatype t = MPI_UNSIGNED_CHAR;
    MPI_Comm cw = MPI_COMM_WORLD;
    MPI_Request q;
    switch (coll * 2 + nb) {
    case 0: c = MPI_Allreduce(in, out, w, t, MPI_SUM, cw); break;
    case 1: c = MPI_Iallreduce(in, out, w, t, MPI_SUM, cw, &q); break;
    case 2: c = MPI_Reduce(in, out, w, t, MPI_SUM, root, cw); break;
    case 3: c = MPI_Ireduce(in, out, w, t, MPI_SUM, root, cw, &q); break;
    case 4: c = MPI_Scan(in, out, w, t, MPI_SUM, cw); break;
    case 5: c = MPI_Iscan(in, out, w, t, MPI_SUM, cw, &q); break;
    case 6: c = MPI_Exscan(in, out, w, t, MPI_SUM, cw); break;
    default: c = MPI_Iexscan(in, out, w, t, MPI_SUM, cw, &q); break;
    }
    if (nb && c == MPI_SUCCESS) c = MPI_Wait(&q, MPI_STATUS_IGNORE);
    c = class_of_rc(c);
    int has_out = (coll != 1 || rank == root) && !(coll == 3 && rank == 0);
    int lo = 0, hi = coll <= 1 ? size : coll == 2 ? rank + 1 : rank;
    *ok = 1;
    for (size_t i = 0; i < mine && has_out && *ok; i++) {
        unsigned v = 0;
        for (int r = lo; r < hi; r++) v += pat(i, seed + r);
        *ok = out[i] == (unsigned char)v;
    }
    free(in);
    free(out);
    return c;
}

static void by_case(int nb, int coll, int root, int bad, size_t m, size_t n, int seed) {
    alarm(30);
    int ok, c = by_run(nb, coll, root, bad, m, n, seed, &ok);
    judge(c, ok, coll == 0 ? rank == bad : coll == 1 ? rank == root : rank > bad || (rank == bad && bad > 0));
    for (int k = 0; k < 2; k++) {
        size_t len = k ? m : 1;
        int c2 = by_run(nb, coll, root, -1, len, len, seed + k, &ok);
        if (c2 != MPI_SUCCESS || !ok)
            FAIL("the correct call of %zu after it got %s%s", len, cname(c2), c2 == MPI_SUCCESS ? " with wrong data" : "");
    }
    alarm(0);
}

static void bytes(void) {
    static const size_t pairs[][2] = {{1, 2}, {2, 1}, {0, 1}, {1, 0}, {1, 3}, {3, 1}, {2, 3}};
    int seed = 0;
    for (int nb = 0; nb < 2; nb++)
        for (int coll = 0; coll < 4 && (forms >> nb & 1); coll++)
            for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
                for (int root = 0; root < (coll == 1 ? size : 1); root++)
                    for (int bad = 0; bad < size; bad++)
                        by_case(nb, coll, root, bad, pairs[k][0], pairs[k][1], ++seed % 200);
    if (rank == 0 && !failed) printf("coll_errcounts: one-byte items: ok\n");
}

/* ---- a scan's length header: 16 bytes of magic, the smallest and the largest length ---- */

static void header_image(unsigned char *b, unsigned long long len) {
    memcpy(b, "oxmpi scan chain", 16);
    for (int i = 0; i < 8; i++) b[16 + i] = b[24 + i] = (unsigned char)(len >> (8 * i));
}

/* MPI_Scan (MPI_Exscan when `exclusive`; `nb`: MPI_Iscan, MPI_Iexscan) of n bytes, MPI_BOR. */
static int mg_call(int nb, int exclusive, const void *in, void *out, size_t n) {
    MPI_Request q;
    int c, w = (int)n;
    if (!nb)
        return exclusive ? MPI_Exscan(in, out, w, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD)
                         : MPI_Scan(in, out, w, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD);
    c = exclusive ? MPI_Iexscan(in, out, w, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD, &q)
                  : MPI_Iscan(in, out, w, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD, &q);
    return c != MPI_SUCCESS ? c : MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* The correct calls (every rank passes the image of a header naming `len`), then rank 0
 * passing that image against every other rank's `len` bytes. */
static void mg_case(int nb, int exclusive, unsigned long long len) {
    const char *name = exclusive ? (nb ? "MPI_Iexscan" : "MPI_Exscan") : (nb ? "MPI_Iscan" : "MPI_Scan");
    unsigned char in[32], out[32], want[32];
    header_image(in, len);
    header_image(want, len);
    memset(out, 0xee, sizeof out);
    snprintf(cur, sizeof cur, "%s of 32 bytes, each the image of a header for %llu", name, len);
    alarm(30);
    int c = class_of_rc(mg_call(nb, exclusive, in, out, 32));
    int ok = (exclusive && rank == 0) || !memcmp(out, want, 32);
    if (survey) {
        printf("%s: rank %d: %s%s\n", cur, rank, cname(c), c == MPI_SUCCESS && !ok ? " (wrong data)" : "");
        fflush(stdout);
    } else if (c != MPI_SUCCESS || !ok) {
        FAIL("got %s%s", cname(c), c == MPI_SUCCESS ? " with wrong data" : "");
    }
    snprintf(cur, sizeof cur, "%s: rank 0 passes 32 bytes, the image of a header for the %llu "
             "every other rank passes", name, len);
    size_t mine = rank == 0 ? 32 : (size_t)len;
    unsigned char *a = xmalloc(mine), *b = xmalloc(mine);
    memset(a, 0, mine);
    if (rank == 0) header_image(a, len);
    c = class_of_rc(mg_call(nb, exclusive, a, b, mine));
    int known = c == MPI_ERR_TRUNCATE || c == MPI_ERR_COUNT || c == MPI_ERR_OTHER;
    if (survey) {
        printf("%s: rank %d: %s\n", cur, rank, cname(c));
        fflush(stdout);
    } else if (rank > 0 ? !known : !(known || c == MPI_SUCCESS)) {
        FAIL("got %s%s", cname(c), rank > 0 ? ", expected an error" : "");
    }
    free(a);
    free(b);
    /* A correct call of the long length afterwards. */
    size_t L = (size_t)len;
    a = xmalloc(L);
    b = xmalloc(L);
    for (size_t i = 0; i < L; i++) a[i] = (unsigned char)(1u << (rank % 8));
    c = class_of_rc(mg_call(nb, exclusive, a, b, L));
    unsigned char v = 0;
    for (int r = 0; r < (exclusive ? rank : rank + 1); r++) v |= (unsigned char)(1u << (r % 8));
    ok = 1;
    for (size_t i = 0; i < L && ok && !(exclusive && rank == 0); i++) ok = b[i] == v;
    if (c != MPI_SUCCESS || !ok)
        FAIL("the correct call of %zu bytes after it got %s%s", L, cname(c), c == MPI_SUCCESS ? " with wrong data" : "");
    free(a);
    free(b);
    alarm(0);
}

static void mg_cases(void) {
    for (int nb = 0; nb < 2; nb++)
        for (int exclusive = 0; exclusive < 2 && (forms >> nb & 1); exclusive++) {
            mg_case(nb, exclusive, 16384);
            mg_case(nb, exclusive, 65536);
        }
    if (rank == 0 && !failed) printf("coll_errcounts: scan header images: ok\n");
}

/* ---- scatter: one rank's block length differs from the root's ---- */

/* One MPI_Iscatter (MPI_BYTE, out of place or, `inplace`, MPI_IN_PLACE at the root) where
 * the root passes `m` bytes a block and the other ranks `m` too, but rank `bad` passes
 * `n`; returns the class, *ok whether our received block (the root's own, or ours up to
 * the shorter length) is right. */
static int sc_run(int root, int bad, size_t m, size_t n, int inplace, int seed, int *ok) {
    size_t mine = rank == bad ? n : m;
    unsigned char *in = NULL, *out = xmalloc(mine);
    int me = rank == root;
    if (me) {
        in = xmalloc(mine * (size_t)size);
        for (size_t j = 0; j < mine * (size_t)size; j++) in[j] = pat(j, seed);
    }
    memset(out, 0xee, mine);
    MPI_Request q;
    void *rb = me && inplace ? MPI_IN_PLACE : out;
    int rc = MPI_Iscatter(in, (int)mine, MPI_BYTE, rb, (int)mine, MPI_BYTE, root, MPI_COMM_WORLD, &q);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
    int c = class_of_rc(rc);
    /* The root's block length (what the others' blocks start at in its buffer). */
    size_t rm = root == bad ? n : m, got = mine < rm ? mine : rm;
    *ok = 1;
    for (size_t i = 0; i < got && *ok; i++) {
        unsigned char v = me ? (inplace ? in[(size_t)root * mine + i] : out[i]) : out[i];
        *ok = v == pat((size_t)rank * rm + i, seed);
    }
    free(in);
    free(out);
    return c;
}

/* The rank whose block is shorter than the root's fails (MPI_ERR_TRUNCATE, MPI_ERR_COUNT or
 * MPI_ERR_OTHER); every other rank succeeds with its block right (up to the shorter
 * length) or fails alike. Then correct calls (1 byte, m bytes) succeed everywhere. */
static void sc_case(int root, int bad, size_t m, size_t n, int inplace, int seed) {
    snprintf(cur, sizeof cur, "MPI_Iscatter%s: root %d, %zu bytes a block, rank %d passes %zu",
             inplace ? " in place" : "", root, m, bad, n);
    alarm(30);
    int ok, c = sc_run(root, bad, m, n, inplace, seed, &ok);
    size_t rm = root == bad ? n : m, mine = rank == bad ? n : m;
    judge(c, ok, rank != root && mine < rm);
    int c2 = sc_run(root, -1, 1, 1, inplace, seed, &ok);
    if (c2 != MPI_SUCCESS || !ok)
        FAIL("the correct call of 1 byte after it got %s%s", cname(c2), c2 == MPI_SUCCESS ? " with wrong data" : "");
    int c3 = sc_run(root, -1, m, m, inplace, seed + 1, &ok);
    if (c3 != MPI_SUCCESS || !ok)
        FAIL("the correct call of %zu bytes after it got %s%s", m, cname(c3), c3 == MPI_SUCCESS ? " with wrong data" : "");
    alarm(0);
}

/* Lengths on both sides of the 2-rank single copy's bound (64 KiB: the root's block by one
 * cross-memory copy, beyond it by message) and of the single copy's own (32 KiB), far
 * apart beyond the segment's buffer, and blocks through the segment's buffers (100 bytes
 * in the small scatter, 3000 through the root's buffer as a scatterv) against one by
 * message; every root, every erroneous rank, in place and not. */
static void scatters(void) {
    static const size_t pairs[][2] = {
        {65536, 65544}, {65544, 65536}, {65536, 131072}, {131072, 65536},
        {32768, 32776}, {32776, 32768}, {65544, 65552},
        {100, 65544}, {65544, 100}, {3000, 65544}, {65544, 3000},
    };
    int seed = 0;
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
        for (int root = 0; root < size; root++)
            for (int bad = 0; bad < size; bad++)
                for (int inplace = 0; inplace < 2; inplace++)
                    sc_case(root, bad, pairs[k][0], pairs[k][1], inplace, ++seed % 200);
    if (rank == 0 && !failed) printf("coll_errcounts: scatter mismatches: ok\n");
}

/* ---- reduce_scatter: counts that differ with the same sum ---- */

static int rsm_call(int form, const int *in, int *out, const int *counts) {
    MPI_Request q;
    int rc;
    if (form == 0) return MPI_Reduce_scatter(in, out, counts, MPI_INT, rd_op, MPI_COMM_WORLD);
    if (form == 1)
        rc = MPI_Ireduce_scatter(in, out, counts, MPI_INT, rd_op, MPI_COMM_WORLD, &q);
    else
        rc = MPI_Reduce_scatter_init(in, out, counts, MPI_INT, rd_op, MPI_COMM_WORLD, MPI_INFO_NULL, &q);
    if (rc != MPI_SUCCESS) return rc;
    return form == 2 ? start_twice(&q) : MPI_Wait(&q, MPI_STATUS_IGNORE);
}

/* One reduce_scatter where block 0 has m - d ints and block 1 m + d (every other m) on
 * the ranks in `uneven` (bit r: rank r), all blocks m ints on the others: the class, *ok
 * whether our block is right. */
static int rsm_run(int form, unsigned uneven, size_t m, size_t d, int seed, int *ok) {
    int counts[64];
    for (int i = 0; i < size; i++) counts[i] = (int)m;
    if (uneven >> rank & 1) {
        counts[0] = (int)(m - d);
        counts[1] = (int)(m + d);
    }
    size_t total = m * (size_t)size, at = 0;
    for (int i = 0; i < rank; i++) at += (size_t)counts[i];
    size_t mine = (size_t)counts[rank];
    int *in = xmalloc(total * sizeof(int)), *out = xmalloc(mine * sizeof(int));
    for (size_t j = 0; j < total; j++) in[j] = (int)(j % 1000) + seed + rank;
    for (size_t i = 0; i < mine; i++) out[i] = -1;
    int c = class_of_rc(rsm_call(form, in, out, counts));
    *ok = 1;
    for (size_t i = 0; i < mine && *ok; i++)
        *ok = out[i] == size * ((int)((at + i) % 1000) + seed) + size * (size - 1) / 2;
    free(in);
    free(out);
    return c;
}

/* Rank `bad` splits the vector (m ints a block, the same sum everywhere) with d ints moved
 * from block 0 to block 1: every rank must fail (MPI_ERR_TRUNCATE, MPI_ERR_COUNT or
 * MPI_ERR_OTHER; each would otherwise fold its own block and succeed, or hang where the
 * split puts ranks on different paths); without the segment ("nosm": exact point-to-point
 * exchanges of the blocks) a rank may instead succeed with its block right. Correct calls afterwards: every rank with the
 * uneven split, then every rank with even blocks, both right everywhere. */
static void rsm_case(int form, int bad, size_t m, size_t d, int seed) {
    snprintf(cur, sizeof cur, "%sReduce_scatter%s: %zu ints a block, rank %d moves %zu from block 0 to 1",
             rd_form[form], rd_suffix[form], m, bad, d);
    alarm(30);
    int ok, c = rsm_run(form, 1u << bad, m, d, seed, &ok);
    int known = c == MPI_ERR_TRUNCATE || c == MPI_ERR_COUNT || c == MPI_ERR_OTHER;
    if (survey) {
        printf("%s: rank %d: %s%s\n", cur, rank, cname(c), c == MPI_SUCCESS && !ok ? " (wrong data)" : "");
        fflush(stdout);
    } else if (!known && !(nosm && c == MPI_SUCCESS && ok)) {
        FAIL("got %s%s, expected an error", cname(c), c == MPI_SUCCESS && !ok ? " with wrong data" : "");
    }
    int c2 = rsm_run(form, ~0u, m, d, seed + 1, &ok);
    if (c2 != MPI_SUCCESS || !ok)
        FAIL("the correct uneven call after it got %s%s", cname(c2), c2 == MPI_SUCCESS ? " with wrong data" : "");
    int c3 = rsm_run(form, 0, m, d, seed + 2, &ok);
    if (c3 != MPI_SUCCESS || !ok)
        FAIL("the correct even call after it got %s%s", cname(c3), c3 == MPI_SUCCESS ? " with wrong data" : "");
    alarm(0);
}

/* Vectors in a segment buffer (up to 4 KiB), on two ranks by cross-memory copies, on more
 * in the nonblocking large region (up to 1 MiB) and beyond it (even blocks in phases, the
 * uneven split point to point), and one block emptied. */
static void rs_mixed(void) {
    static const size_t cases[][2] = {
        {2, 1}, {1, 1}, {100, 50}, {300, 1}, {2048, 1000}, {70000, 1}, {300000, 7},
    };
    int seed = 0;
    for (int form = 0; form < 3; form++)
        for (size_t k = 0; k < sizeof cases / sizeof cases[0] && (forms >> form & 1); k++)
            for (int bad = 0; bad < size; bad++)
                rsm_case(form, bad, cases[k][0], cases[k][1], ++seed % 200);
    if (rank == 0 && !failed) printf("coll_errcounts: reduce_scatter splits: ok\n");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size <= 64);
    int only_bcast = 0, only_a2a = 0, only_ar = 0, rd = 0, rsmix = 0, twobad = 0, only_sc = 0;
    int only_bytes = 0, only_magic = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "survey")) survey = 1;
        if (!strcmp(argv[i], "bcast")) only_bcast = 1;
        if (!strcmp(argv[i], "a2a")) only_a2a = 1;
        if (!strcmp(argv[i], "allreduce")) only_ar = 1;
        if (!strcmp(argv[i], "reduce")) rd |= 1;
        if (!strcmp(argv[i], "scan")) rd |= 6;
        if (!strcmp(argv[i], "rs")) rd |= 24;
        if (!strcmp(argv[i], "nosm")) nosm = 1;
        if (!strcmp(argv[i], "allplans")) allplans = 1;
        if (!strcmp(argv[i], "rsmix")) rsmix = 1;
        if (!strcmp(argv[i], "scatter")) only_sc = 1;
        if (!strcmp(argv[i], "twobad")) twobad = 1;
        if (!strcmp(argv[i], "bytes")) only_bytes = 1;
        if (!strcmp(argv[i], "magic")) only_magic = 1;
        if (!strcmp(argv[i], "blocking")) forms = 1;
        if (!strcmp(argv[i], "nonblocking")) forms = 2;
        if (!strcmp(argv[i], "persistent")) forms = 4;
        if (!strcmp(argv[i], "nopersistent")) forms = 3;
        if (!strcmp(argv[i], "noncomm")) MPI_Op_create(nc_sum, 0, &rd_op);
    }
    signal(SIGALRM, on_alarm);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    /* The segment (when there is one) is made by a first collective. */
    MPI_Barrier(MPI_COMM_WORLD);
    int only = only_ar || rd || rsmix || only_sc || only_bytes || only_magic;
    if (!only_a2a && !only) bcasts();
    if (!only_bcast && !only) a2as();
    if (only_bytes) bytes();
    if (only_magic) mg_cases();
    if (only_sc) scatters();
    if (rsmix) rs_mixed();
    if (only_ar && !twobad) allreduces();
    if (only_ar && twobad) allreduces_twobad();
    if (rd) reductions(rd);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rd_op != MPI_SUM) MPI_Op_free(&rd_op);
    if (rank == 0 && !failed) printf("coll_errcounts: all checks passed\n");
    MPI_Finalize();
    return failed;
}
