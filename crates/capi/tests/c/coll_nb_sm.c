/* Nonblocking collectives of small vectors, which run on the communicator's shared-memory
 * segment once an earlier collective made it (coll_sm_nonblocking; with it off, the same
 * checks run the schedules of messages).
 *
 * - Reductions (iallreduce, ireduce, iscan, iexscan, ireduce_scatter_block,
 *   ireduce_scatter) over every predefined type and every operation defined on it (the
 *   value-index pairs with MINLOC/MAXLOC), in place and not, at sizes inside and outside
 *   one shared-memory buffer: results equal the blocking collective's, bit for bit (values
 *   are small integers, so every order of evaluation is exact), and a local reference for
 *   MPI_INT sums.
 * - Data movement (ibcast, igather, iscatter, iallgather, iallgatherv, ialltoall) of
 *   MPI_CHAR, MPI_DOUBLE and a strided type with holes, in place and not, every root,
 *   up to blocks too large for a buffer (ibcast, igather and iscatter: by one
 *   cross-memory copy per rank, up to 64 KiB): checked against a local reference, holes
 *   untouched.
 * - Igather and igatherv of blocks from 32 KiB + 8 bytes to 1 MiB, in place and not, both
 *   outstanding: every block where it belongs, the igatherv's gaps untouched; on 2 ranks
 *   the igathers up to 64 KiB run on the segment (by one cross-memory copy), larger ones
 *   not.
 * - Iscatters of 16 B to 4000 B blocks (one size per rank count through the segment as a
 *   scatterv, whose root of predefined types posts at its call), 20 outstanding per root,
 *   the other ranks posting theirs only after the root posted all of its: the root's
 *   later posts must wait for its buffers to be read; values per rank, in place and not.
 * - Ireduce_scatter_block and ireduce_scatter of vectors from just above one buffer to
 *   64 KiB, in place and not: values against a local reference; on 2 ranks those in
 *   place of at most 8 KiB go by message (counted by the pairwise schedule's counter),
 *   the others by cross-memory copies.
 * - Ordering: 20 outstanding collectives (more than the segment's 8 buffers per rank)
 *   mixed with blocking ones, completed in reverse order; and each collective posted by
 *   rank 0 only after every other rank has completed its own part where that is possible,
 *   or has sent it a token (a post that waited for the others would hang).
 * - Blocking and nonblocking collectives matched each in their own order, as Open MPI and
 *   MPICH match them (separate tag spaces): for every root, the root starts an
 *   MPI_Iallreduce (and an MPI_Ibcast), tests it, then enters MPI_Barrier; the others enter
 *   the barrier first and start theirs after it (mpi4py's test_ulfm does this through its
 *   MPI_Comm_iagree fallback). The root's test must not complete it early, and the result
 *   must be the AND of everybody's flags.
 * - Ialltoallv and Ialltoallw (contiguous types) with uneven blocks, one at a time and
 *   2 * 20 outstanding with iallreduces and barriers, completed in reverse order: blocks
 *   through the segment and, rank 0's large ones, by messages; and rank 0 blocked in
 *   receives that the others send only once their alltoallv completed (its blocks must
 *   move while it does not wait for its request).
 * - Many outstanding of mixed kinds (ibcast, iscatter, igather, ireduce, iallreduce,
 *   ireduce_scatter_block, igatherv, iscatterv, ialltoallv, ialltoallw), every root, in
 *   place and not, on both sides of one buffer (the v-forms with uneven and empty blocks,
 *   displacements in reverse rank order with gaps that must stay untouched; the
 *   all-to-all forms with blocks through the segment and by message in one collective,
 *   ialltoallw with a non-contiguous type on odd ranks only), completed by Wait in reverse
 *   order, Waitany, Testall and Waitsome; and rank 0 blocked in a receive while the others
 *   wait for 12 of its broadcasts, then for 12 gathervs, scattervs, alltoallvs and
 *   alltoallws (rank 0's blocks must move while it does not wait).
 * - Ibarriers: none completes before every rank started its own (rank 0 posts last), on
 *   MPI_COMM_WORLD and on a duplicate; after the duplicate is freed, the communicator that
 *   gets its handle back holds rank 0 alone, whose MPI_Ibarrier there must end by itself.
 * - Requests of collectives that ended at their post: complete for every completion call
 *   (test, get_status, Testany and Waitall next to pending ones), freeable.
 * Rank 0 prints "coll_nb_sm: sm nonblocking calls: used" (or "not used", read from the
 * coll_sm_nonblocking_calls counter) and "coll_nb_sm: all checks passed".
 * Argument: number of rounds. */
#include "check.h"
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
#include <wchar.h>
#include <complex.h>

static int rank, size;

/* ---- the predefined types, their element accessors, their operations ---- */
enum { K_INT, K_UINT, K_FLOAT, K_BOOL, K_COMPLEX, K_BYTE };
#define TYPES(X)                                                                           \
    X(MPI_CHAR, char, K_INT)                                                               \
    X(MPI_SIGNED_CHAR, signed char, K_INT)                                                 \
    X(MPI_UNSIGNED_CHAR, unsigned char, K_UINT)                                            \
    X(MPI_SHORT, short, K_INT)                                                             \
    X(MPI_UNSIGNED_SHORT, unsigned short, K_UINT)                                          \
    X(MPI_INT, int, K_INT)                                                                 \
    X(MPI_UNSIGNED, unsigned, K_UINT)                                                      \
    X(MPI_LONG, long, K_INT)                                                               \
    X(MPI_UNSIGNED_LONG, unsigned long, K_UINT)                                            \
    X(MPI_LONG_LONG, long long, K_INT)                                                     \
    X(MPI_UNSIGNED_LONG_LONG, unsigned long long, K_UINT)                                  \
    X(MPI_INT8_T, int8_t, K_INT)                                                           \
    X(MPI_INT16_T, int16_t, K_INT)                                                         \
    X(MPI_INT32_T, int32_t, K_INT)                                                         \
    X(MPI_INT64_T, int64_t, K_INT)                                                         \
    X(MPI_UINT8_T, uint8_t, K_UINT)                                                        \
    X(MPI_UINT16_T, uint16_t, K_UINT)                                                      \
    X(MPI_UINT32_T, uint32_t, K_UINT)                                                      \
    X(MPI_UINT64_T, uint64_t, K_UINT)                                                      \
    X(MPI_C_BOOL, bool, K_BOOL)                                                            \
    X(MPI_WCHAR, wchar_t, K_INT)                                                           \
    X(MPI_BYTE, unsigned char, K_BYTE)                                                     \
    X(MPI_FLOAT, float, K_FLOAT)                                                           \
    X(MPI_DOUBLE, double, K_FLOAT)                                                         \
    X(MPI_C_FLOAT_COMPLEX, float _Complex, K_COMPLEX)                                      \
    X(MPI_C_DOUBLE_COMPLEX, double _Complex, K_COMPLEX)

typedef struct {
    MPI_Datatype t;
    const char *name;
    int size, kind;
    void (*set)(void *, int, int);
} tdesc;

#define SETTER(T, C, K)                                                                    \
    static void set_##T(void *b, int i, int v) { ((C *)b)[i] = (C)v; }
TYPES(SETTER)
#define DESC(T, C, K) {T, #T, (int)sizeof(C), K, set_##T},
static tdesc types[] = {TYPES(DESC)};
#define NTYPES ((int)(sizeof types / sizeof types[0]))

/* Value-index pairs. */
typedef struct { int v, i; } p_2int;
typedef struct { float v; int i; } p_float;
typedef struct { double v; int i; } p_double;
typedef struct { long v; int i; } p_long;
typedef struct { short v; int i; } p_short;
#define PAIRS(X)                                                                           \
    X(MPI_2INT, p_2int)                                                                    \
    X(MPI_FLOAT_INT, p_float)                                                              \
    X(MPI_DOUBLE_INT, p_double)                                                            \
    X(MPI_LONG_INT, p_long)                                                                \
    X(MPI_SHORT_INT, p_short)
#define PSET(T, S)                                                                         \
    static void pset_##T(void *b, int k, int v, int i) { ((S *)b)[k].v = v; ((S *)b)[k].i = i; } \
    static int peq_##T(const void *a, const void *b, int n) {                              \
        for (int k = 0; k < n; k++)                                                        \
            if (((const S *)a)[k].v != ((const S *)b)[k].v ||                              \
                ((const S *)a)[k].i != ((const S *)b)[k].i)                                \
                return 0;                                                                  \
        return 1;                                                                          \
    }
PAIRS(PSET)
typedef struct {
    MPI_Datatype t;
    const char *name;
    int size;
    void (*set)(void *, int, int, int);
    int (*eq)(const void *, const void *, int);
} pdesc;
#define PDESC(T, S) {T, #T, (int)sizeof(S), pset_##T, peq_##T},
static pdesc pairs[] = {PAIRS(PDESC)};
#define NPAIRS ((int)(sizeof pairs / sizeof pairs[0]))

static MPI_Op int_ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND,
                           MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
static MPI_Op float_ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
static MPI_Op bool_ops[] = {MPI_LAND, MPI_LOR, MPI_LXOR};
static MPI_Op complex_ops[] = {MPI_SUM, MPI_PROD};
static MPI_Op byte_ops[] = {MPI_BAND, MPI_BOR, MPI_BXOR};

/* A small value: products over 8 ranks stay exact in every type (|v| <= 2). */
static int val(int r, int k, int round, MPI_Op op, int kind) {
    int v = (r * 5 + k * 3 + round) % 5;
    if (op == MPI_PROD) return v % 2 + 1;                 /* 1 or 2 */
    if (kind == K_BOOL) return v % 2;
    if (kind == K_UINT || kind == K_BYTE) return v;
    return v - 2;                                          /* -2..2 */
}

/* ---- reductions ---- */

enum { R_ALLREDUCE, R_REDUCE, R_SCAN, R_EXSCAN, R_RSB, R_RS, R_N };
static const char *rnames[] = {"iallreduce", "ireduce", "iscan", "iexscan",
                               "ireduce_scatter_block", "ireduce_scatter"};

/* Run reduction `which` of `count` items (per rank block for the scatters) nonblocking into
 * `nb` and blocking into `bl`, from the same input; in place if `inplace`. */
static void reduce_pair(int which, MPI_Datatype t, int esize, MPI_Op op, int count, int root,
                        int inplace, const char *in, char *nb, char *bl) {
    int total = (which == R_RSB || which == R_RS) ? count * size : count;
    int *counts = malloc(size * sizeof(int));
    for (int r = 0; r < size; r++) counts[r] = count;
    if (which == R_RS && size > 1) { counts[0] = count + 1; counts[size - 1] = count - 1 < 0 ? 0 : count - 1; }
    size_t bytes = (size_t)total * esize + 64;
    char *snb = malloc(bytes), *sbl = malloc(bytes);
    memcpy(snb, in, (size_t)total * esize);
    memcpy(sbl, in, (size_t)total * esize);
    int ip = inplace && !(which == R_REDUCE && rank != root);
    if (ip) { memcpy(nb, in, (size_t)total * esize); memcpy(bl, in, (size_t)total * esize); }
    const void *s1 = ip ? MPI_IN_PLACE : snb, *s2 = ip ? MPI_IN_PLACE : sbl;
    MPI_Request rq;
    switch (which) {
    case R_ALLREDUCE:
        CHECK_RC(MPI_Iallreduce(s1, nb, count, t, op, MPI_COMM_WORLD, &rq));
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Allreduce(s2, bl, count, t, op, MPI_COMM_WORLD));
        break;
    case R_REDUCE:
        CHECK_RC(MPI_Ireduce(s1, nb, count, t, op, root, MPI_COMM_WORLD, &rq));
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Reduce(s2, bl, count, t, op, root, MPI_COMM_WORLD));
        break;
    case R_SCAN:
        CHECK_RC(MPI_Iscan(s1, nb, count, t, op, MPI_COMM_WORLD, &rq));
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Scan(s2, bl, count, t, op, MPI_COMM_WORLD));
        break;
    case R_EXSCAN:
        CHECK_RC(MPI_Iexscan(s1, nb, count, t, op, MPI_COMM_WORLD, &rq));
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Exscan(s2, bl, count, t, op, MPI_COMM_WORLD));
        break;
    case R_RSB:
        CHECK_RC(MPI_Ireduce_scatter_block(s1, nb, count, t, op, MPI_COMM_WORLD, &rq));
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Reduce_scatter_block(s2, bl, count, t, op, MPI_COMM_WORLD));
        break;
    default:
        CHECK_RC(MPI_Ireduce_scatter(s1, nb, counts, t, op, MPI_COMM_WORLD, &rq));
        CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Reduce_scatter(s2, bl, counts, t, op, MPI_COMM_WORLD));
        break;
    }
    free(counts);
    free(snb);
    free(sbl);
}

/* Items of the result of `which` on this rank (0: none). */
static int result_items(int which, int count, int root) {
    if (which == R_REDUCE) return rank == root ? count : 0;
    if (which == R_EXSCAN) return rank == 0 ? 0 : count;
    if (which == R_RS && size > 1) return rank == 0 ? count + 1 : rank == size - 1 ? (count - 1 < 0 ? 0 : count - 1) : count;
    return count;
}

static void check_reductions(int round) {
    /* counts: small, around one 4 KiB buffer for 1-byte types, beyond it */
    int counts[] = {1, 7, 100, 1000 / size, 5000};
    for (int c = 0; c < (int)(sizeof counts / sizeof counts[0]); c++) {
        int count = counts[c] < 1 ? 1 : counts[c];
        for (int which = 0; which < R_N; which++) {
            int total = (which == R_RSB || which == R_RS) ? count * size + 1 : count;
            for (int ti = 0; ti < NTYPES + NPAIRS; ti++) {
                int pair = ti >= NTYPES;
                tdesc *td = pair ? NULL : &types[ti];
                pdesc *pd = pair ? &pairs[ti - NTYPES] : NULL;
                int esize = pair ? pd->size : td->size;
                MPI_Datatype t = pair ? pd->t : td->t;
                MPI_Op *ops;
                int nops;
                static MPI_Op pair_ops[] = {MPI_MINLOC, MPI_MAXLOC};
                if (pair) { ops = pair_ops; nops = 2; }
                else if (td->kind == K_FLOAT) { ops = float_ops; nops = 4; }
                else if (td->kind == K_BOOL) { ops = bool_ops; nops = 3; }
                else if (td->kind == K_COMPLEX) { ops = complex_ops; nops = 2; }
                else if (td->kind == K_BYTE) { ops = byte_ops; nops = 3; }
                else { ops = int_ops; nops = 10; }
                if (count * esize > 20000 && (ti % 4) != round % 4) continue; /* keep it short */
                for (int oi = 0; oi < nops; oi++) {
                    MPI_Op op = ops[oi];
                    int root = (round + oi) % size, inplace = (oi + ti + c) % 2;
                    size_t bytes = (size_t)total * esize;
                    char *in = calloc(1, bytes + 64), *nb = calloc(1, bytes + 64),
                         *bl = calloc(1, bytes + 64);
                    for (int k = 0; k < total; k++) {
                        if (pair) pd->set(in, k, val(rank, k, round, MPI_SUM, K_INT), (rank * 3 + k) % 4);
                        else td->set(in, k, val(rank, k, round, op, td->kind));
                    }
                    reduce_pair(which, t, esize, op, count, root, inplace, in, nb, bl);
                    int items = result_items(which, count, root);
                    int same = pair ? pd->eq(nb, bl, items) : !memcmp(nb, bl, (size_t)items * esize);
                    if (!same)
                        fprintf(stderr, "rank %d: %s of %d %s (op %d, in place %d) differs from the blocking form\n",
                                rank, rnames[which], count, pair ? pd->name : td->name, oi, inplace);
                    CHECK(same);
                    if (!pair && t == MPI_INT && op == MPI_SUM && which == R_ALLREDUCE) {
                        for (int k = 0; k < count; k++) {
                            int want = 0;
                            for (int r = 0; r < size; r++) want += val(r, k, round, op, K_INT);
                            CHECK(((int *)nb)[k] == want);
                        }
                    }
                    free(in);
                    free(nb);
                    free(bl);
                }
            }
        }
    }
}

/* ---- data movement ---- */

static int bval(int r, int k, int round) { return (r * 131 + k * 7 + round * 17) % 251 + 1; }

/* Element kinds: 0 MPI_CHAR, 1 MPI_DOUBLE, 2 an int every 8 bytes (a strided type). */
static MPI_Datatype strided;
static MPI_Datatype move_type(int e) { return e == 0 ? MPI_CHAR : e == 1 ? MPI_DOUBLE : strided; }
static int ext_of(int e) { return e == 0 ? 1 : 8; }
static void mset(int e, char *b, int k, int v) {
    if (e == 0) b[k] = (char)v;
    else if (e == 1) ((double *)b)[k] = v;
    else ((int *)b)[2 * k] = v;
}
static int mget(int e, const char *b, int k) {
    if (e == 0) return (unsigned char)b[k] == 0 ? 0 : (int)(unsigned char)b[k];
    if (e == 1) return (int)((const double *)b)[k];
    return ((const int *)b)[2 * k];
}
/* The holes of the strided type keep this. */
#define HOLE 0x5a5a5a5a
static char *mbuf(int e, int items) {
    size_t n = (size_t)items * ext_of(e) + 16;
    char *b = malloc(n);
    memset(b, 0, n);
    if (e == 2)
        for (int k = 0; k < items; k++) ((int *)b)[2 * k + 1] = HOLE;
    return b;
}
static void holes_ok(int e, const char *b, int items) {
    if (e == 2)
        for (int k = 0; k < items; k++) CHECK(((const int *)b)[2 * k + 1] == HOLE);
}
static int as_byte(int e, int v) { return e == 0 ? (int)(unsigned char)(char)v : v; }

static void check_moves(int round) {
    /* 4097 and 8192 items: blocks too large for a buffer, moved by one cross-memory copy
     * per rank (32776 and 65536 bytes of MPI_DOUBLE: on both sides of the 32 KiB limit of
     * 2 ranks) */
    int counts[] = {1, 13, 1024 / size, 3000, 4097, 8192};
    for (int c = 0; c < 6; c++) {
        int n = counts[c] < 1 ? 1 : counts[c];
        for (int e = 0; e < 3; e++) {
            MPI_Datatype t = move_type(e);
            for (int inplace = 0; inplace < 2; inplace++) {
                int root = (round + c + e) % size;
                MPI_Request rq;
                /* ibcast */
                char *b = mbuf(e, n);
                for (int k = 0; k < n; k++) mset(e, b, k, rank == root ? bval(root, k, round) : 0);
                CHECK_RC(MPI_Ibcast(b, n, t, root, MPI_COMM_WORLD, &rq));
                CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                for (int k = 0; k < n; k++) CHECK(mget(e, b, k) == as_byte(e, bval(root, k, round)));
                holes_ok(e, b, n);
                free(b);
                /* igather / iallgather / iscatter / ialltoall / iallgatherv */
                char *s = mbuf(e, n * size), *r = mbuf(e, n * size);
                for (int k = 0; k < n; k++) mset(e, s, k, bval(rank, k, round));
                int ip = inplace && rank == root;
                if (ip)
                    for (int k = 0; k < n; k++) mset(e, r, root * n + k, bval(root, k, round));
                CHECK_RC(MPI_Igather(ip ? MPI_IN_PLACE : s, n, t, r, n, t, root, MPI_COMM_WORLD, &rq));
                CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                if (rank == root)
                    for (int j = 0; j < size; j++)
                        for (int k = 0; k < n; k++) CHECK(mget(e, r, j * n + k) == as_byte(e, bval(j, k, round)));
                holes_ok(e, r, n * size);
                memset(r, 0, (size_t)n * size * ext_of(e));
                if (e == 2) for (int k = 0; k < n * size; k++) ((int *)r)[2 * k + 1] = HOLE;
                if (inplace)
                    for (int k = 0; k < n; k++) mset(e, r, rank * n + k, bval(rank, k, round));
                CHECK_RC(MPI_Iallgather(inplace ? MPI_IN_PLACE : s, n, t, r, n, t, MPI_COMM_WORLD, &rq));
                CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                for (int j = 0; j < size; j++)
                    for (int k = 0; k < n; k++) CHECK(mget(e, r, j * n + k) == as_byte(e, bval(j, k, round)));
                holes_ok(e, r, n * size);
                /* iallgatherv: block j has n - j % 2 items (at least 0), displaced by one item */
                int *cnt = malloc(size * sizeof(int)), *dsp = malloc(size * sizeof(int)), tot = 0;
                for (int j = 0; j < size; j++) { cnt[j] = n - j % 2; dsp[j] = tot + 1; tot += cnt[j] + 1; }
                char *v = mbuf(e, tot + 1);
                for (int k = 0; k < cnt[rank]; k++) {
                    mset(e, s, k, bval(rank, k, round + 1));
                    if (inplace) mset(e, v, dsp[rank] + k, bval(rank, k, round + 1));
                }
                CHECK_RC(MPI_Iallgatherv(inplace ? MPI_IN_PLACE : s, cnt[rank], t, v, cnt, dsp, t, MPI_COMM_WORLD, &rq));
                CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                for (int j = 0; j < size; j++) {
                    CHECK(mget(e, v, dsp[j] - 1) == 0); /* the gaps stay */
                    for (int k = 0; k < cnt[j]; k++) CHECK(mget(e, v, dsp[j] + k) == as_byte(e, bval(j, k, round + 1)));
                }
                holes_ok(e, v, tot + 1);
                free(v);
                /* iallgatherv laid out as an iallgather (n items each, back to back) on rank 0,
                 * and on the others for every other (count, type, in place) case, the blocks in
                 * reverse rank order there otherwise: each rank reads with its own layout */
                int rev = rank != 0 && (c + e + inplace) % 2;
                for (int j = 0; j < size; j++) { cnt[j] = n; dsp[j] = (rev ? size - 1 - j : j) * n; }
                v = mbuf(e, n * size);
                for (int k = 0; k < n; k++) {
                    mset(e, s, k, bval(rank, k, round + 3));
                    if (inplace) mset(e, v, dsp[rank] + k, bval(rank, k, round + 3));
                }
                CHECK_RC(MPI_Iallgatherv(inplace ? MPI_IN_PLACE : s, n, t, v, cnt, dsp, t, MPI_COMM_WORLD, &rq));
                CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                for (int j = 0; j < size; j++)
                    for (int k = 0; k < n; k++) CHECK(mget(e, v, dsp[j] + k) == as_byte(e, bval(j, k, round + 3)));
                holes_ok(e, v, n * size);
                free(v);
                free(cnt);
                free(dsp);
                /* iscatter */
                for (int j = 0; j < size; j++)
                    for (int k = 0; k < n; k++) mset(e, s, j * n + k, bval(j, k, round + 2));
                char *o = mbuf(e, n);
                if (ip) memset(r, 0, (size_t)n * size * ext_of(e));
                if (ip && e == 2) for (int k = 0; k < n * size; k++) ((int *)r)[2 * k + 1] = HOLE;
                CHECK_RC(MPI_Iscatter(s, n, t, ip ? MPI_IN_PLACE : o, n, t, root, MPI_COMM_WORLD, &rq));
                CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                if (!ip)
                    for (int k = 0; k < n; k++) CHECK(mget(e, o, k) == as_byte(e, bval(rank, k, round + 2)));
                holes_ok(e, o, n);
                free(o);
                /* ialltoall: block j of rank i carries bval(i * size + j, k) */
                if (n * size <= 20000) {
                    char *src = inplace ? r : s;
                    for (int j = 0; j < size; j++)
                        for (int k = 0; k < n; k++) mset(e, src, j * n + k, bval(rank * size + j, k, round));
                    CHECK_RC(MPI_Ialltoall(inplace ? MPI_IN_PLACE : s, n, t, r, n, t, MPI_COMM_WORLD, &rq));
                    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                    for (int j = 0; j < size; j++)
                        for (int k = 0; k < n; k++) CHECK(mget(e, r, j * n + k) == as_byte(e, bval(j * size + rank, k, round)));
                    holes_ok(e, r, n * size);
                }
                free(s);
                free(r);
            }
        }
    }
}

/* ---- gathers of large blocks ---- */

static MPI_T_pvar_session pv_ses;
static MPI_T_pvar_handle pv_calls;
static unsigned long long sm_calls(void) {
    unsigned long long v = 0;
    CHECK_RC(MPI_T_pvar_read(pv_ses, pv_calls, &v));
    return v;
}
static double gval(int r, size_t k, int round) { return (double)(r * 1000003 + (int)(k % 999983) + round); }

/* Igather and igatherv of blocks too large for a buffer (on 2 ranks up to 64 KiB by one
 * cross-memory copy, the other rank writing its block into the root's buffer; larger by
 * message), in place and not, every root, both outstanding at once and completed in
 * reverse order: every block where it belongs, the igatherv's gaps (blocks in reverse
 * rank order, one double apart) untouched. With coll_sm_nonblocking on, a 2-rank igather
 * counts as a segment call iff its block has at most 64 KiB. */
static void check_pair_gathers(int round, bool on) {
    size_t bytes[] = {(32 << 10) + 8, 64 << 10, (64 << 10) + 8, (256 << 10) + 24, 1 << 20};
    for (int c = 0; c < 5; c++) {
        size_t n = bytes[c] / sizeof(double);
        for (int inplace = 0; inplace < 2; inplace++) {
            int root = (round + c + inplace) % size, me = rank == root, ip = inplace && me;
            double *s = malloc(n * sizeof(double)), *g = malloc(n * size * sizeof(double));
            size_t vtot = (n + 1) * size + 1;
            double *v = malloc(vtot * sizeof(double));
            int *cnt = malloc(size * sizeof(int)), *dsp = malloc(size * sizeof(int));
            for (int j = 0; j < size; j++) {
                cnt[j] = (int)n;
                dsp[j] = (size - 1 - j) * ((int)n + 1) + 1;
            }
            for (size_t k = 0; k < n; k++) s[k] = gval(rank, k, round);
            for (size_t k = 0; k < n * size; k++) g[k] = -1.0;
            for (size_t k = 0; k < vtot; k++) v[k] = -2.0;
            if (ip) {
                memcpy(g + (size_t)root * n, s, n * sizeof(double));
                memcpy(v + dsp[root], s, n * sizeof(double));
            }
            unsigned long long before = sm_calls();
            MPI_Request rq[2];
            CHECK_RC(MPI_Igather(ip ? MPI_IN_PLACE : s, (int)n, MPI_DOUBLE, g, (int)n, MPI_DOUBLE, root, MPI_COMM_WORLD, &rq[0]));
            unsigned long long after = sm_calls();
            CHECK_RC(MPI_Igatherv(ip ? MPI_IN_PLACE : s, (int)n, MPI_DOUBLE, v, cnt, dsp, MPI_DOUBLE, root, MPI_COMM_WORLD, &rq[1]));
            if (on && size == 2) CHECK(after == before + (bytes[c] <= (64 << 10)));
            CHECK_RC(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
            CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
            if (me) {
                for (int j = 0; j < size; j++)
                    for (size_t k = 0; k < n; k++) {
                        CHECK(g[(size_t)j * n + k] == gval(j, k, round));
                        CHECK(v[dsp[j] + k] == gval(j, k, round));
                    }
                for (int j = 0; j < size; j++) CHECK(v[dsp[j] - 1] == -2.0);
                CHECK(v[vtot - 1] == -2.0);
            }
            free(s);
            free(g);
            free(v);
            free(cnt);
            free(dsp);
        }
    }
}

/* Iscatter and iscatterv of blocks too large for a buffer (on 2 ranks up to 64 KiB by one
 * cross-memory copy, the other rank reading its block from the root's input; larger by
 * message), in place and not, every root, both outstanding at once and completed in
 * reverse order: every rank's block as the root's, the root's own (in place) untouched,
 * the bytes after each block untouched. With coll_sm_nonblocking on, a 2-rank iscatter
 * counts as a segment call iff its block has at most 64 KiB. */
static void check_pair_scatters(int round, bool on) {
    size_t bytes[] = {(32 << 10) + 8, 64 << 10, (64 << 10) + 8, (256 << 10) + 24, 1 << 20};
    for (int c = 0; c < 5; c++) {
        size_t n = bytes[c] / sizeof(double);
        for (int inplace = 0; inplace < 2; inplace++) {
            int root = (round + c + inplace) % size, me = rank == root, ip = inplace && me;
            size_t vtot = (n + 1) * size + 1;
            double *s = malloc(n * size * sizeof(double)), *v = malloc(vtot * sizeof(double));
            double *a = malloc((n + 1) * sizeof(double)), *b = malloc((n + 1) * sizeof(double));
            int *cnt = malloc(size * sizeof(int)), *dsp = malloc(size * sizeof(int));
            for (int j = 0; j < size; j++) {
                cnt[j] = (int)n;
                dsp[j] = (size - 1 - j) * ((int)n + 1) + 1;
            }
            for (int j = 0; j < size; j++)
                for (size_t k = 0; k < n; k++) {
                    s[(size_t)j * n + k] = me ? gval(j, k, round) : -3.0;
                    v[dsp[j] + k] = me ? gval(j, k, round + 1) : -3.0;
                }
            for (size_t k = 0; k <= n; k++) a[k] = b[k] = -1.0;
            unsigned long long before = sm_calls();
            MPI_Request rq[2];
            CHECK_RC(MPI_Iscatter(s, (int)n, MPI_DOUBLE, ip ? MPI_IN_PLACE : a, (int)n, MPI_DOUBLE, root, MPI_COMM_WORLD, &rq[0]));
            unsigned long long after = sm_calls();
            CHECK_RC(MPI_Iscatterv(v, cnt, dsp, MPI_DOUBLE, ip ? MPI_IN_PLACE : b, (int)n, MPI_DOUBLE, root, MPI_COMM_WORLD, &rq[1]));
            if (on && size == 2) CHECK(after == before + (bytes[c] <= (64 << 10)));
            CHECK_RC(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
            CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
            if (!ip)
                for (size_t k = 0; k < n; k++) {
                    CHECK(a[k] == gval(rank, k, round));
                    CHECK(b[k] == gval(rank, k, round + 1));
                }
            CHECK(a[n] == -1.0 && b[n] == -1.0);
            if (me)
                for (int j = 0; j < size; j++)
                    for (size_t k = 0; k < n; k++) {
                        CHECK(s[(size_t)j * n + k] == gval(j, k, round));
                        CHECK(v[dsp[j] + k] == gval(j, k, round + 1));
                    }
            free(s);
            free(v);
            free(a);
            free(b);
            free(cnt);
            free(dsp);
        }
    }
}

/* ---- iscatters whose root posts at its call ---- */

static int spval(int i, int q, int k, int round) { return (i * 37 + q * 11 + k * 3 + round * 5) % 251 + 1; }

/* Iscatters of 16, 1200, 2000 and 4000-byte blocks, MPI_CHAR and MPI_INT, in place and not,
 * every root (on 2, 3 and 4 ranks one of the sizes goes through the segment as a scatterv,
 * whose root of predefined types posts at its call): SPOSTS outstanding, more than the
 * segment's 8 buffers per rank, and the other ranks post theirs only once the root has
 * posted all of its and sent them a token, so that the root's later posts find its buffers
 * still unread (they must wait for the readers, not overwrite the older posts); completed
 * in reverse order. Every rank's block as the root's, the bytes after it untouched, the
 * root's input (its own block, in place) unchanged. */
#define SPOSTS 20
static void check_scatter_posts(int round) {
    int bytes[] = {16, 1200, 2000, 4000};
    for (int root = 0; root < size; root++) {
        int me = rank == root;
        unsigned char *s[SPOSTS], *o[SPOSTS];
        int b[SPOSTS], ip[SPOSTS], isint[SPOSTS];
        MPI_Request rq[SPOSTS];
        int token = 0;
        if (!me) CHECK_RC(MPI_Recv(&token, 1, MPI_INT, root, 61, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < SPOSTS; i++) {
            b[i] = bytes[(i + round) % 4];
            isint[i] = (i / 4 + round) % 2;
            ip[i] = me && (i + root) % 3 == 1;
            s[i] = malloc((size_t)b[i] * size);
            o[i] = malloc((size_t)b[i] + 8);
            for (int q = 0; q < size; q++)
                for (int k = 0; k < b[i]; k++) {
                    int v = spval(i, q, k, round);
                    if (isint[i] && k % 4 == 0) ((int *)(s[i] + (size_t)q * b[i]))[k / 4] = me ? v : -1;
                    else if (!isint[i]) s[i][(size_t)q * b[i] + k] = me ? (unsigned char)v : 0;
                }
            memset(o[i], 0x77, (size_t)b[i] + 8);
            MPI_Datatype t = isint[i] ? MPI_INT : MPI_CHAR;
            int n = isint[i] ? b[i] / 4 : b[i];
            CHECK_RC(MPI_Iscatter(s[i], n, t, ip[i] ? MPI_IN_PLACE : o[i], n, t, root, MPI_COMM_WORLD, &rq[i]));
        }
        if (me)
            for (int q = 0; q < size; q++)
                if (q != root) CHECK_RC(MPI_Send(&token, 1, MPI_INT, q, 61, MPI_COMM_WORLD));
        for (int i = SPOSTS - 1; i >= 0; i--) CHECK_RC(MPI_Wait(&rq[i], MPI_STATUS_IGNORE));
        for (int i = 0; i < SPOSTS; i++) {
            for (int k = 0; k < b[i] && !ip[i]; k++) {
                int v = spval(i, rank, k, round);
                if (isint[i] && k % 4 == 0) CHECK(((int *)o[i])[k / 4] == v);
                else if (!isint[i]) CHECK(o[i][k] == v);
            }
            /* the bytes after the block (in place: all of the unused buffer) untouched */
            for (int k = ip[i] ? 0 : b[i]; k < b[i] + 8; k++) CHECK(o[i][k] == 0x77);
            for (int q = 0; q < size && me; q++)
                for (int k = 0; k < b[i]; k++) {
                    int v = spval(i, q, k, round);
                    if (isint[i] && k % 4 == 0) CHECK(((int *)(s[i] + (size_t)q * b[i]))[k / 4] == v);
                    else if (!isint[i]) CHECK(s[i][(size_t)q * b[i] + k] == v);
                }
            free(s[i]);
            free(o[i]);
        }
    }
}

/* ---- reduce-scatters of vectors larger than a buffer ---- */

static MPI_T_pvar_handle pv_pairwise;
static unsigned long long pairwise_calls(void) {
    unsigned long long v = 0;
    CHECK_RC(MPI_T_pvar_read(pv_ses, pv_pairwise, &v));
    return v;
}
static int rsval(int r, long k, int round) { return r * 7 + (int)(k % 13) + round; }

/* Ireduce_scatter_block and Ireduce_scatter (blocks n + 1 and n - 1 items on ranks 0 and
 * size - 1) of MPI_INT sums whose vectors lie above one buffer, in place and not, both
 * outstanding at once and completed in reverse order: each rank's block is the sum of
 * every rank's contribution to it; out of place the bytes after the block are untouched.
 * With coll_sm_nonblocking on, on 2 ranks, a vector goes by the cross-memory pair unless
 * the call is in place and the vector has at most 8 KiB (the lines the peer would read
 * were just written by the other core): then by message, and the pairwise schedule counts
 * it (coll_nbc_reduce_scatter_pairwise_calls). */
static void check_pair_reduce_scatters(int round, bool on) {
    /* items per block: vectors of 4104 B, 8 KiB, 8 KiB + 8 B, 16 KiB, about 64 KiB (not
     * a multiple of a page or a line) at np=2 */
    int items[] = {513, 1024, 1025, 2048, 8191};
    for (int c = 0; c < 5; c++) {
        int n = items[c];
        long total = (long)n * size;
        int *cnt = malloc(size * sizeof(int));
        for (int j = 0; j < size; j++) cnt[j] = n;
        if (size > 1) { cnt[0] = n + 1; cnt[size - 1] = n - 1; }
        for (int inplace = 0; inplace < 2; inplace++) {
            int *s1 = malloc(total * sizeof(int)), *s2 = malloc(total * sizeof(int));
            int *r1 = malloc((total + 1) * sizeof(int)), *r2 = malloc((total + 1) * sizeof(int));
            for (long k = 0; k < total; k++) s1[k] = s2[k] = rsval(rank, k, round);
            for (long k = 0; k <= total; k++) r1[k] = r2[k] = -5;
            if (inplace) {
                memcpy(r1, s1, total * sizeof(int));
                memcpy(r2, s2, total * sizeof(int));
            }
            unsigned long long before = pairwise_calls();
            MPI_Request rq[2];
            CHECK_RC(MPI_Ireduce_scatter_block(inplace ? MPI_IN_PLACE : s1, r1, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[0]));
            unsigned long long after = pairwise_calls();
            CHECK_RC(MPI_Ireduce_scatter(inplace ? MPI_IN_PLACE : s2, r2, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[1]));
            unsigned long long after2 = pairwise_calls();
            if (on && size == 2) {
                int by_msg = inplace && total * (long)sizeof(int) <= (8 << 10);
                if (after != before + by_msg || after2 != after + by_msg)
                    fprintf(stderr, "rank %d: %d items per block, in place %d: %llu and %llu pairwise schedules, want %d\n",
                            rank, n, inplace, after - before, after2 - after, by_msg);
                CHECK(after == before + by_msg);
                CHECK(after2 == after + by_msg);
            }
            CHECK_RC(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
            CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
            long at2 = 0;
            for (int j = 0; j < rank; j++) at2 += cnt[j];
            int bad = 0;
            for (long k = 0; k < n; k++) {
                int want = 0;
                for (int j = 0; j < size; j++) want += rsval(j, (long)rank * n + k, round);
                bad += r1[k] != want;
            }
            for (long k = 0; k < cnt[rank]; k++) {
                int want = 0;
                for (int j = 0; j < size; j++) want += rsval(j, at2 + k, round);
                bad += r2[k] != want;
            }
            if (!inplace) bad += r1[n] != -5 || r2[cnt[rank]] != -5;
            if (bad)
                fprintf(stderr, "rank %d: ireduce_scatter(_block) of %d items per block, in place %d: %d wrong items\n",
                        rank, n, inplace, bad);
            CHECK(bad == 0);
            free(s1);
            free(s2);
            free(r1);
            free(r2);
        }
        free(cnt);
    }
}

/* ---- ordering ---- */

#define DEPTH 20
static void check_ordering(int round) {
    /* DEPTH outstanding allreduces and barriers with blocking collectives between them,
     * completed in reverse order. */
    MPI_Request rq[2 * DEPTH];
    int v[DEPTH], w[DEPTH], n = 0;
    for (int i = 0; i < DEPTH; i++) {
        v[i] = rank + i + round;
        CHECK_RC(MPI_Iallreduce(MPI_IN_PLACE, &v[i], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[n++]));
        CHECK_RC(MPI_Ibarrier(MPI_COMM_WORLD, &rq[n++]));
        if (i % 3 == 0) {
            w[i] = rank == i % size ? i * 7 : -1;
            CHECK_RC(MPI_Bcast(&w[i], 1, MPI_INT, i % size, MPI_COMM_WORLD));
            CHECK(w[i] == i * 7);
        }
        if (i % 5 == 0) CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    }
    for (int i = n - 1; i >= 0; i--) CHECK_RC(MPI_Wait(&rq[i], MPI_STATUS_IGNORE));
    for (int i = 0; i < DEPTH; i++) CHECK(v[i] == size * (size - 1) / 2 + size * (i + round));

    /* Rank 0 posts last: the others post and complete what does not need rank 0's data
     * first, then send it a token; rank 0 receives every token before it posts. */
    int token = 0, x = rank + 1, y = 0, g[64];
    if (rank == 0) {
        for (int r = 1; r < size; r++)
            CHECK_RC(MPI_Recv(&token, 1, MPI_INT, r, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[0]));
        CHECK_RC(MPI_Igather(&x, 1, MPI_INT, g, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq[1]));
        CHECK_RC(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        for (int r = 0; r < size; r++) CHECK(g[r] == r + 1);
    } else {
        CHECK_RC(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[0]));
        CHECK_RC(MPI_Igather(&x, 1, MPI_INT, g, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq[1]));
        CHECK_RC(MPI_Wait(&rq[1], MPI_STATUS_IGNORE)); /* a non-root's gather needs nobody */
        CHECK_RC(MPI_Send(&token, 1, MPI_INT, 0, 5, MPI_COMM_WORLD));
        CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    }
    CHECK(y == size * (size + 1) / 2);
    /* The reverse: rank 0 posts first and blocks in a receive that the others send only
     * after their collective completed. */
    int z = 0;
    if (rank == 0) {
        z = 42;
        CHECK_RC(MPI_Ibcast(&z, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq[0]));
        for (int r = 1; r < size; r++)
            CHECK_RC(MPI_Recv(&token, 1, MPI_INT, r, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    } else {
        CHECK_RC(MPI_Ibcast(&z, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq[0]));
        CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        CHECK(z == 42);
        CHECK_RC(MPI_Send(&token, 1, MPI_INT, 0, 6, MPI_COMM_WORLD));
    }

    /* Blocking and nonblocking collectives in a different order at the root. */
    for (int root = 0; root < size; root++) {
        int flag, b = -1, done = 1;
        CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == root) {
            flag = 11;
            b = 100 + root + round;
            CHECK_RC(MPI_Iallreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_BAND, MPI_COMM_WORLD, &rq[0]));
            CHECK_RC(MPI_Ibcast(&b, 1, MPI_INT, root, MPI_COMM_WORLD, &rq[1]));
            CHECK_RC(MPI_Test(&rq[0], &done, MPI_STATUS_IGNORE));
            CHECK(!done); /* the others have not started theirs */
            CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
        } else {
            flag = 13;
            CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
            CHECK(flag == 13);
            CHECK_RC(MPI_Iallreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_BAND, MPI_COMM_WORLD, &rq[0]));
            CHECK_RC(MPI_Ibcast(&b, 1, MPI_INT, root, MPI_COMM_WORLD, &rq[1]));
        }
        CHECK_RC(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        CHECK(flag == (size > 1 ? 9 : 11));
        CHECK(b == 100 + root + round);
    }
}


/* Ialltoallv and Ialltoallw (contiguous types) on the segment: block (i -> j) carries
 * `len(i, j, big)` bytes of bval(i * 64 + j, k); with `big` rank 0's blocks have 3000 bytes
 * and more: by message from 3 ranks on (more than a rank's share of its buffer), while
 * the others' blocks go through the segment in the same collective. */
static int a2a_len(int i, int j, int big) { return big && i == 0 ? 3000 + j : 1 + (i * 5 + j * 3) % 40; }
static void a2a_post(int w, int big, int k, char **sb, char **rb, MPI_Request *rq) {
    int sc[64], sd[64], rc[64], rd[64], stot = 0, rtot = 0;
    MPI_Datatype ty[64];
    for (int j = 0; j < size; j++) {
        sc[j] = a2a_len(rank, j, big);
        rc[j] = a2a_len(j, rank, big);
        ty[j] = MPI_CHAR;
    }
    /* blocks in reverse order with a gap, so displacements matter */
    for (int j = size - 1; j >= 0; j--) {
        sd[j] = stot;
        stot += sc[j] + 3;
        rd[j] = rtot;
        rtot += rc[j] + 5;
    }
    *sb = malloc(stot);
    *rb = malloc(rtot);
    memset(*rb, 0xee, rtot);
    for (int j = 0; j < size; j++)
        for (int b = 0; b < sc[j]; b++) (*sb)[sd[j] + b] = (char)(bval(rank * 64 + j, b, k));
    if (w)
        CHECK_RC(MPI_Ialltoallw(*sb, sc, sd, ty, *rb, rc, rd, ty, MPI_COMM_WORLD, rq));
    else
        CHECK_RC(MPI_Ialltoallv(*sb, sc, sd, MPI_CHAR, *rb, rc, rd, MPI_CHAR, MPI_COMM_WORLD, rq));
}
static void a2a_check(int big, int k, char *sb, char *rb) {
    int rtot = 0, rd[64], rc[64];
    for (int j = size - 1; j >= 0; j--) {
        rc[j] = a2a_len(j, rank, big);
        rd[j] = rtot;
        rtot += rc[j] + 5;
    }
    for (int j = 0; j < size; j++) {
        for (int b = 0; b < rc[j]; b++) CHECK(rb[rd[j] + b] == (char)bval(j * 64 + rank, b, k));
        for (int b = rc[j]; b < rc[j] + 5; b++) CHECK((unsigned char)rb[rd[j] + b] == 0xee);
    }
    free(sb);
    free(rb);
}
static void check_alltoallv(int round) {
    /* one at a time, fitting and not */
    for (int big = 0; big < 2; big++)
        for (int w = 0; w < 2; w++) {
            char *sb, *rb;
            MPI_Request rq;
            a2a_post(w, big, round, &sb, &rb, &rq);
            CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            a2a_check(big, round, sb, rb);
        }
    /* more outstanding than the segment has buffers, with and without messages in turn,
     * between blocking collectives and other nonblocking ones, completed in reverse */
    enum { N = 2 * DEPTH };
    char *sb[N], *rb[N];
    MPI_Request rq[2 * N];
    int v[N];
    for (int i = 0; i < N; i++) {
        a2a_post(i % 2, i % 3 == 1, round + i, &sb[i], &rb[i], &rq[2 * i]);
        v[i] = rank + i;
        CHECK_RC(MPI_Iallreduce(MPI_IN_PLACE, &v[i], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[2 * i + 1]));
        if (i % 4 == 0) CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    }
    for (int i = 2 * N - 1; i >= 0; i--) CHECK_RC(MPI_Wait(&rq[i], MPI_STATUS_IGNORE));
    for (int i = 0; i < N; i++) {
        a2a_check(i % 3 == 1, round + i, sb[i], rb[i]);
        CHECK(v[i] == size * (size - 1) / 2 + size * i);
    }
    /* Rank 0 posts (with `big` its blocks go by message from 3 ranks on) and then
     * blocks in receives that the others send only after their alltoallv completed: rank
     * 0's blocks must move without rank 0 waiting for its request. */
    for (int big = 0; big < 2; big++) {
        char *s1, *r1;
        MPI_Request q;
        int token = 0;
        a2a_post(big, big, round + 7, &s1, &r1, &q);
        if (rank == 0) {
            for (int r = 1; r < size; r++)
                CHECK_RC(MPI_Recv(&token, 1, MPI_INT, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
            CHECK_RC(MPI_Send(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD));
        }
        if (rank == 0) CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        a2a_check(big, round + 7, s1, r1);
    }
}

/* Requests of collectives that end at their post (a broadcast's root on the segment, a
 * gather's non-roots): every completion call treats them as complete requests with the
 * empty status of a collective; freeing one is allowed; mixed with requests still
 * pending in Waitall and Testany. */
/* Ibarriers, each rank's after the others have posted theirs or not: a rank's request
 * must not complete before every rank has started its barrier (the others post first,
 * test theirs, and only then send rank 0 the token it waits for before posting: rank 0's
 * barrier ends at its post, the others' in their waits). Repeated on a duplicate of
 * MPI_COMM_WORLD, which is then freed: the next communicator gets its handle back (oxmpi
 * reuses freed handles; checked, so that what follows stays meaningful), and rank 0 alone,
 * by itself in it, calls MPI_Ibarrier on it, which must end without any other rank (a
 * barrier that still ran on the freed communicator's segment would wait for the others
 * forever: bounded here to 10 s). */
static void check_barriers(int round) {
    MPI_Comm dup, alone;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_RC(MPI_Barrier(dup)); /* makes dup's segment */
    MPI_Comm comms[] = {MPI_COMM_WORLD, dup};
    int token = 0;
    for (int c = 0; c < 2; c++) {
        for (int i = 0; i < 6; i++) {
            MPI_Request rq;
            int flag = 0;
            if (rank == 0) {
                for (int r = 1; r < size; r++)
                    CHECK_RC(MPI_Recv(&token, 1, MPI_INT, r, 31, comms[c], MPI_STATUS_IGNORE));
                CHECK_RC(MPI_Ibarrier(comms[c], &rq));
            } else {
                CHECK_RC(MPI_Ibarrier(comms[c], &rq));
                CHECK_RC(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
                CHECK(!flag); /* rank 0 has not started its barrier */
                CHECK_RC(MPI_Send(&token, 1, MPI_INT, 0, 31, comms[c]));
            }
            CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            CHECK(rq == MPI_REQUEST_NULL);
        }
    }
    MPI_Comm was = dup;
    CHECK_RC(MPI_Comm_free(&dup));
    CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : 1, round, &alone));
    CHECK(alone == was);
    if (rank == 0) {
        MPI_Request rq;
        int flag = 0;
        CHECK_RC(MPI_Ibarrier(alone, &rq));
        double t0 = MPI_Wtime();
        while (!flag && MPI_Wtime() - t0 < 10.0) CHECK_RC(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
        CHECK(flag); /* rank 0 is alone in its communicator */
    }
    CHECK_RC(MPI_Comm_free(&alone));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
}

static void check_ended_at_post(void) {
    for (int root = 0; root < size; root++) {
        int v = rank == root ? 1234 + root : -1, flag = 0, idx = -1;
        MPI_Request rq[2];
        MPI_Status st;
        CHECK_RC(MPI_Ibcast(&v, 1, MPI_INT, root, MPI_COMM_WORLD, &rq[0]));
        CHECK(rq[0] != MPI_REQUEST_NULL);
        if (rank == root) {
            CHECK_RC(MPI_Request_get_status(rq[0], &flag, &st));
            CHECK(flag);
            CHECK_RC(MPI_Test(&rq[0], &flag, &st));
            CHECK(flag && rq[0] == MPI_REQUEST_NULL);
            CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG);
            int count = -1;
            CHECK_RC(MPI_Get_count(&st, MPI_INT, &count));
            CHECK(count == 0);
        } else {
            CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
            CHECK(v == 1234 + root);
        }
        /* a gather whose request is freed (non-roots) or waited for with a pending one */
        int mine = rank * 3 + root, all[64];
        CHECK_RC(MPI_Igather(&mine, 1, MPI_INT, all, 1, MPI_INT, root, MPI_COMM_WORLD, &rq[0]));
        CHECK_RC(MPI_Ibarrier(MPI_COMM_WORLD, &rq[1]));
        if (rank != root) {
            CHECK_RC(MPI_Testany(2, rq, &idx, &flag, MPI_STATUS_IGNORE));
            if (flag && idx == 0) CHECK(rq[0] == MPI_REQUEST_NULL);
            if (rq[0] != MPI_REQUEST_NULL) CHECK_RC(MPI_Request_free(&rq[0]));
            CHECK_RC(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        } else {
            CHECK_RC(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
            for (int i = 0; i < size; i++) CHECK(all[i] == i * 3 + root);
        }
    }
}

/* ---- many outstanding of mixed kinds ---- */

/* One outstanding collective of kind `kind` (0 ibcast, 1 iscatter, 2 igather, 3 ireduce,
 * 4 iallreduce, 5 ireduce_scatter_block, 6 igatherv, 7 iscatterv, 8 ialltoallv, 9
 * ialltoallw) from `root`, `n` ints per block (the v-forms: `vcnt` ints for rank q, some
 * none, at `vdsp`: in reverse rank order with a gap; the all-to-all forms: `acnt` ints
 * per pair, see there), in place if `ip` where the kind allows it; values from `tag`. */
#define MIXED_KINDS 10
typedef struct { int kind, root, n, ip, tag; int *s, *r; int vcnt[64], vdsp[64]; } mixed_t;
static int mval(int tag, int r, int k) { return (tag * 31 + r * 7 + k) % 97 - 40; }
/* Ints from rank i to rank j in the all-to-all forms: none for every third pair, else
 * n-ish or a few (with n = 1100 both kinds in one collective: the segment's blocks and
 * messages), the same both ways (in place sends what it receives). */
static int acnt(const mixed_t *m, int i, int j) {
    if ((i + j + m->tag) % 3 == 0) return 0;
    return (i * j + m->tag) % 2 ? m->n + i + j : 1 + i + j;
}
/* Stride (in ints) of rank r's all-to-all type: ialltoallw on odd ranks uses an int
 * resized to 8 bytes (not contiguous, the even ranks' MPI_INT is: the ranks must still
 * take the same path). */
static int astride(const mixed_t *m, int r) { return m->kind == 9 && r % 2 ? 2 : 1; }
static MPI_Datatype int8;
/* Rank me's all-to-all layout: block j (`acnt(me, j)` ints) at `dsp[j]` items, in reverse
 * rank order with a gap of 2 items; returns the items spanned. */
static int alayout(const mixed_t *m, int me, int *cnt, int *dsp) {
    int at = 1;
    for (int j = size - 1; j >= 0; j--) {
        cnt[j] = acnt(m, me, j);
        dsp[j] = at;
        at += cnt[j] + 2;
    }
    return at + 1;
}
static void a2a_mixed_post(mixed_t *m, MPI_Request *rq) {
    int cnt[64], dsp[64], bd[64], st = astride(m, rank);
    MPI_Datatype ty[64], t = st == 2 ? int8 : MPI_INT;
    int items = alayout(m, rank, cnt, dsp);
    m->s = calloc((size_t)items * st, sizeof(int));
    m->r = calloc((size_t)items * st, sizeof(int));
    for (int k = 0; k < items * st; k++) m->r[k] = -7777;
    int *src = m->ip ? m->r : m->s;
    for (int j = 0; j < size; j++) {
        for (int k = 0; k < cnt[j]; k++) src[st * (dsp[j] + k)] = mval(m->tag, rank * 64 + j, k);
        ty[j] = t;
        bd[j] = dsp[j] * st * (int)sizeof(int);
    }
    const void *sb = m->ip ? MPI_IN_PLACE : m->s;
    if (m->kind == 8)
        CHECK_RC(MPI_Ialltoallv(sb, cnt, dsp, MPI_INT, m->r, cnt, dsp, MPI_INT, MPI_COMM_WORLD, rq));
    else
        CHECK_RC(MPI_Ialltoallw(sb, cnt, bd, ty, m->r, cnt, bd, ty, MPI_COMM_WORLD, rq));
}
/* Every block where it belongs, nothing else written (gaps and holes keep their mark). */
static void a2a_mixed_check(mixed_t *m) {
    int cnt[64], dsp[64], st = astride(m, rank);
    int items = alayout(m, rank, cnt, dsp);
    int *want = malloc((size_t)items * st * sizeof(int));
    for (int k = 0; k < items * st; k++) want[k] = -7777;
    for (int j = 0; j < size; j++)
        for (int k = 0; k < cnt[j]; k++) want[st * (dsp[j] + k)] = mval(m->tag, j * 64 + rank, k);
    for (int k = 0; k < items * st; k++) CHECK(m->r[k] == want[k]);
    free(want);
}
/* The v-forms' blocks: uneven (n + 3q ints, none for every third rank by tag), laid out
 * from the last rank to the first with a gap of 2 ints between blocks. */
static void vlayout(mixed_t *m) {
    int at = 1;
    for (int q = size - 1; q >= 0; q--) {
        m->vcnt[q] = (q + m->tag) % 3 == 2 ? 0 : m->n + 3 * q;
        m->vdsp[q] = at;
        at += m->vcnt[q] + 2;
    }
}
static void mixed_post(mixed_t *m, MPI_Request *rq) {
    if (m->kind >= 8) {
        a2a_mixed_post(m, rq);
        return;
    }
    int n = m->n, me = rank == m->root, p = size;
    vlayout(m);
    size_t room = ((size_t)n + 3 * p + 2) * p + 2;
    m->s = calloc(room, sizeof(int));
    m->r = calloc(room, sizeof(int));
    int *s = m->s, *r = m->r;
    MPI_Comm w = MPI_COMM_WORLD;
    switch (m->kind) {
    case 6: {
        int c = m->vcnt[rank];
        for (int k = 0; k < c; k++) s[k] = mval(m->tag, rank, k);
        for (size_t k = 0; k < room; k++) if (me) r[k] = -7777;
        if (m->ip && me) for (int k = 0; k < c; k++) r[m->vdsp[rank] + k] = s[k];
        CHECK_RC(MPI_Igatherv(m->ip && me ? MPI_IN_PLACE : s, c, MPI_INT, r, m->vcnt, m->vdsp, MPI_INT, m->root, w, rq));
        break;
    }
    case 7:
        if (me)
            for (int q = 0; q < p; q++)
                for (int k = 0; k < m->vcnt[q]; k++) s[m->vdsp[q] + k] = mval(m->tag, q, k);
        for (size_t k = 0; k < room; k++) r[k] = -7777;
        CHECK_RC(MPI_Iscatterv(s, m->vcnt, m->vdsp, MPI_INT, m->ip && me ? MPI_IN_PLACE : r, m->vcnt[rank], MPI_INT, m->root, w, rq));
        break;
    case 0:
        for (int k = 0; k < n; k++) s[k] = me ? mval(m->tag, m->root, k) : 0;
        CHECK_RC(MPI_Ibcast(s, n, MPI_INT, m->root, w, rq));
        break;
    case 1:
        if (me) for (int k = 0; k < n * p; k++) s[k] = mval(m->tag, k / n, k % n);
        CHECK_RC(MPI_Iscatter(s, n, MPI_INT, m->ip && me ? MPI_IN_PLACE : r, n, MPI_INT, m->root, w, rq));
        break;
    case 2:
        for (int k = 0; k < n; k++) s[k] = mval(m->tag, rank, k);
        if (m->ip && me) for (int k = 0; k < n; k++) r[rank * n + k] = s[k];
        CHECK_RC(MPI_Igather(m->ip && me ? MPI_IN_PLACE : s, n, MPI_INT, r, n, MPI_INT, m->root, w, rq));
        break;
    case 3:
        for (int k = 0; k < n; k++) s[k] = mval(m->tag, rank, k);
        if (m->ip && me) memcpy(r, s, (size_t)n * sizeof(int));
        CHECK_RC(MPI_Ireduce(m->ip && me ? MPI_IN_PLACE : s, r, n, MPI_INT, MPI_SUM, m->root, w, rq));
        break;
    case 4:
        for (int k = 0; k < n; k++) s[k] = mval(m->tag, rank, k);
        if (m->ip) memcpy(r, s, (size_t)n * sizeof(int));
        CHECK_RC(MPI_Iallreduce(m->ip ? MPI_IN_PLACE : s, r, n, MPI_INT, MPI_SUM, w, rq));
        break;
    default:
        for (int k = 0; k < n * p; k++) s[k] = mval(m->tag, rank, k);
        if (m->ip) memcpy(r, s, (size_t)n * p * sizeof(int));
        CHECK_RC(MPI_Ireduce_scatter_block(m->ip ? MPI_IN_PLACE : s, r, n, MPI_INT, MPI_SUM, w, rq));
        break;
    }
}
static void mixed_check(mixed_t *m) {
    int n = m->n, me = rank == m->root, p = size;
    int *s = m->s, *r = m->r;
    switch (m->kind) {
    case 8:
    case 9:
        a2a_mixed_check(m);
        break;
    case 6:
        if (me) {
            /* every block in place, nothing else written (the gaps keep their mark) */
            int at = 0;
            for (int q = p - 1; q >= 0; q--) {
                for (; at < m->vdsp[q]; at++) CHECK(r[at] == -7777);
                for (int k = 0; k < m->vcnt[q]; k++, at++) CHECK(r[at] == mval(m->tag, q, k));
            }
            CHECK(r[at] == -7777);
        }
        break;
    case 7:
        if (!(m->ip && me)) {
            for (int k = 0; k < m->vcnt[rank]; k++) CHECK(r[k] == mval(m->tag, rank, k));
            CHECK(r[m->vcnt[rank]] == -7777);
        }
        break;
    case 0:
        for (int k = 0; k < n; k++) CHECK(s[k] == mval(m->tag, m->root, k));
        break;
    case 1:
        for (int k = 0; k < n; k++) CHECK((m->ip && me ? s[rank * n + k] : r[k]) == mval(m->tag, rank, k));
        break;
    case 2:
        if (me)
            for (int k = 0; k < n * p; k++) CHECK(r[k] == mval(m->tag, k / n, k % n));
        break;
    case 3:
    case 4:
        if (m->kind == 4 || me)
            for (int k = 0; k < n; k++) {
                int want = 0;
                for (int q = 0; q < p; q++) want += mval(m->tag, q, k);
                CHECK(r[k] == want);
            }
        break;
    default:
        for (int k = 0; k < n; k++) {
            int want = 0;
            for (int q = 0; q < p; q++) want += mval(m->tag, q, rank * n + k);
            CHECK(r[k] == want);
        }
        break;
    }
    free(m->s);
    free(m->r);
}

/* 18 outstanding collectives of every kind, root and in-place choice, blocks on both sides
 * of one shared-memory buffer (4096 bytes: 1 and 300 ints per rank's contribution fit,
 * 1100 do not), posted between blocking collectives and completed by Wait in reverse
 * order, by Waitany, by a Testall loop (with Request_get_status looks) and by Waitsome.
 * Then rank 0 posts 12 broadcasts (more than the segment's 8 nonblocking buffers) and
 * blocks in a receive that the others send only once theirs completed: its posts past the
 * 8th must happen without rank 0 waiting for them. */
#define MIXED 18
static void check_mixed(int round) {
    for (int how = 0; how < 4; how++) {
        mixed_t m[MIXED];
        MPI_Request rq[MIXED];
        for (int i = 0; i < MIXED; i++) {
            int nn[] = {1, 300 / size, 1100, 5000};
            m[i].kind = (i + how + round) % MIXED_KINDS;
            m[i].root = (i * 5 + how) % size;
            m[i].n = nn[(i + round) % 4];
            if (m[i].n < 1) m[i].n = 1;
            m[i].ip = (i / 2 + how) % 2;
            m[i].tag = i + 100 * how + 1000 * round;
            mixed_post(&m[i], &rq[i]);
            if (i % 7 == 3) CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
        }
        if (how == 0) {
            for (int i = MIXED - 1; i >= 0; i--) CHECK_RC(MPI_Wait(&rq[i], MPI_STATUS_IGNORE));
        } else if (how == 1) {
            for (int left = MIXED; left > 0; left--) {
                int idx = -1;
                MPI_Status st;
                CHECK_RC(MPI_Waitany(MIXED, rq, &idx, &st));
                CHECK(idx >= 0 && idx < MIXED && rq[idx] == MPI_REQUEST_NULL);
                CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG);
            }
        } else if (how == 2) {
            int flag = 0;
            while (!flag) {
                for (int i = 0; i < MIXED; i++) {
                    int f = 0;
                    if (rq[i] != MPI_REQUEST_NULL) CHECK_RC(MPI_Request_get_status(rq[i], &f, MPI_STATUS_IGNORE));
                }
                CHECK_RC(MPI_Testall(MIXED, rq, &flag, MPI_STATUSES_IGNORE));
            }
        } else {
            int left = MIXED;
            while (left > 0) {
                int out = 0, idx[MIXED];
                CHECK_RC(MPI_Waitsome(MIXED, rq, &out, idx, MPI_STATUSES_IGNORE));
                CHECK(out > 0 && out != MPI_UNDEFINED);
                left -= out;
            }
        }
        for (int i = 0; i < MIXED; i++) {
            CHECK(rq[i] == MPI_REQUEST_NULL);
            mixed_check(&m[i]);
        }
    }
    /* rank 0 does not wait for its broadcasts while the others complete theirs */
    enum { NB = 12 };
    int b[NB], token = 0;
    MPI_Request q[NB];
    for (int i = 0; i < NB; i++) {
        b[i] = rank == 0 ? 500 + i + round : -1;
        CHECK_RC(MPI_Ibcast(&b[i], 1, MPI_INT, 0, MPI_COMM_WORLD, &q[i]));
    }
    if (rank == 0) {
        for (int r = 1; r < size; r++)
            CHECK_RC(MPI_Recv(&token, 1, MPI_INT, r, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Waitall(NB, q, MPI_STATUSES_IGNORE));
    } else {
        for (int i = NB - 1; i >= 0; i--) CHECK_RC(MPI_Wait(&q[i], MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Send(&token, 1, MPI_INT, 0, 8, MPI_COMM_WORLD));
    }
    for (int i = 0; i < NB; i++) CHECK(b[i] == 500 + i + round);
    /* the same with gathervs and scattervs to and from rank 0 and alltoallvs and
     * alltoallws, small and large blocks, in place and not */
    mixed_t v[NB];
    for (int i = 0; i < NB; i++) {
        int nn[] = {1, 5, 1100};
        v[i].kind = 6 + i % 4;
        v[i].root = 0;
        v[i].n = nn[(i / 2 + round) % 3];
        v[i].ip = (i / 4) % 2;
        v[i].tag = 7000 + i + 100 * round;
        mixed_post(&v[i], &q[i]);
    }
    if (rank == 0) {
        for (int r = 1; r < size; r++)
            CHECK_RC(MPI_Recv(&token, 1, MPI_INT, r, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Waitall(NB, q, MPI_STATUSES_IGNORE));
    } else {
        for (int i = NB - 1; i >= 0; i--) CHECK_RC(MPI_Wait(&q[i], MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Send(&token, 1, MPI_INT, 0, 9, MPI_COMM_WORLD));
    }
    for (int i = 0; i < NB; i++) mixed_check(&v[i]);
}

int main(int argc, char **argv) {
    int provided;
    CHECK_RC(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    int rounds = argc > 1 ? atoi(argv[1]) : 2;
    MPI_Type_create_resized(MPI_INT, 0, 8, &strided);
    MPI_Type_commit(&strided);
    MPI_Type_create_resized(MPI_INT, 0, 8, &int8);
    MPI_Type_commit(&int8);
    MPI_T_pvar_session ses;
    MPI_T_pvar_handle h;
    int idx = -1, cnt;
    int nb = 0;
    MPI_T_cvar_handle ch;
    CHECK_RC(MPI_T_cvar_get_index("coll_sm_nonblocking", &idx));
    CHECK_RC(MPI_T_cvar_handle_alloc(idx, NULL, &ch, &cnt));
    CHECK_RC(MPI_T_cvar_read(ch, &nb));
    CHECK_RC(MPI_T_cvar_handle_free(&ch));
    unsigned long long calls = 0, calls0 = 0;
    CHECK_RC(MPI_T_pvar_session_create(&ses));
    CHECK_RC(MPI_T_pvar_get_index("coll_sm_nonblocking_calls", MPI_T_PVAR_CLASS_COUNTER, &idx));
    CHECK_RC(MPI_T_pvar_handle_alloc(ses, idx, NULL, &h, &cnt));
    CHECK_RC(MPI_T_pvar_read(ses, h, &calls0));
    pv_ses = ses;
    pv_calls = h;
    CHECK_RC(MPI_T_pvar_get_index("coll_nbc_reduce_scatter_pairwise_calls", MPI_T_PVAR_CLASS_COUNTER, &idx));
    CHECK_RC(MPI_T_pvar_handle_alloc(ses, idx, NULL, &pv_pairwise, &cnt));
    /* A blocking collective first: it makes the communicator's segment. */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    for (int round = 0; round < rounds; round++) {
        check_reductions(round);
        check_moves(round);
        check_pair_gathers(round, nb != 0);
        check_pair_scatters(round, nb != 0);
        check_scatter_posts(round);
        check_pair_reduce_scatters(round, nb != 0);
        check_ordering(round);
        check_alltoallv(round);
        check_mixed(round);
        check_barriers(round);
    }
    CHECK(size <= 64);
    check_ended_at_post();
    CHECK_RC(MPI_T_pvar_read(ses, h, &calls));
    calls -= calls0;
    CHECK_RC(MPI_T_pvar_handle_free(ses, &h));
    CHECK_RC(MPI_T_pvar_handle_free(ses, &pv_pairwise));
    CHECK_RC(MPI_T_pvar_session_free(&ses));
    unsigned long long all = 0;
    CHECK_RC(MPI_Reduce(&calls, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        printf("coll_nb_sm: sm nonblocking calls: %s\n", all > 0 ? "used" : "not used");
        printf("coll_nb_sm: all checks passed\n");
    }
    MPI_Type_free(&strided);
    MPI_Type_free(&int8);
    MPI_Finalize();
    MPI_T_finalize();
    return 0;
}
