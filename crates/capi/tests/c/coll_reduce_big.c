/* MPI_Reduce, MPI_Scan and MPI_Exscan of vectors past one shared-memory buffer (4 KiB),
 * which go through the segment's large region when it can be used (the ranks copy their
 * vectors in chunks, the readers fold each chunk as it comes): sizes around 4 KiB and
 * around the chunks (items of 12 bytes straddling them), up to 1 MiB; MPI_CHAR, INT,
 * FLOAT, DOUBLE, LONG with SUM and MAX, MPI_DOUBLE_INT with MINLOC (12-byte packed items),
 * and a non-commutative user op (2x2 integer matrices, products in rank order); every
 * root, in place and not, checked against local references; back to back with the root
 * moving, interleaved with large allreduces (which share the region), scans and small
 * reduces.
 *
 * On two ranks they go by cross-memory copies up to 1 MiB, both ranks folding a part from
 * 32 KiB on (the root the front, the other rank the back, written into the root's result).
 *
 * Then the nonblocking forms (MPI_Ireduce, MPI_Iallreduce, MPI_Iscan, MPI_Iexscan), which
 * on more than 2 ranks go through the segment's nonblocking large region up to 1 MiB:
 * sizes around 4 KiB and 1 MiB, in place and not, every root, the non-commutative op,
 * several posted before the first wait (each waits for the region in its progress) with
 * a blocking collective in between; and MPI_Ireduce_scatter(_block) of equal blocks past
 * 1 MiB (through the region in phases), uneven blocks, and the matrix product. Last,
 * MPI_Iscans, then MPI_Scans, of 1 MiB and 200008 bytes back to back with new items each
 * time (the chain of 64 KiB chunks through a large region on more than 2 ranks); then
 * MPI_Reduces of 32 KiB to 1 MiB back to back with new items each time (the slot copies
 * by non-temporal stores).
 *
 * Allreduce, reduce_scatter (uneven blocks) and reduce_scatter_block past 4 KiB, which on
 * two ranks go by cross-memory copies up to 1 MiB (each rank folds its half and, in an
 * allreduce, writes it into the other's result): the same types, sizes around 4 KiB and
 * 1 MiB, odd counts, in place and not, the matrix product and "inout = in" (a user op on
 * MPI_INT, not commutative), and a strided MPI_INT type (packed first).
 *
 * Rank 0 prints "coll_reduce_big: large reduce on sm: used" (or "not used": whether the
 * coll_sm_reduce_calls counter moved at a 64 KiB reduce), "coll_reduce_big: pair allreduce
 * and reduce_scatter on sm: used" (or "not used": whether coll_sm_allreduce_calls and
 * coll_sm_reduce_scatter_calls moved at 64 KiB ones), "coll_reduce_big: allreduce on sm:
 * used" (or "not used": whether coll_sm_allreduce_calls moved at a 64 KiB one; on more than
 * 2 ranks that yield when idle it goes through the nonblocking large region) and
 * "coll_reduce_big: all checks passed". */
#include "check.h"
#include <stdint.h>
#include <string.h>

static int rank, size;
/* Run the nonblocking forms (posted, then waited for) instead of the blocking ones. */
static int nonblocking;

/* The reduce / allreduce / scan / exscan of `send` into `recv` (`root` < 0: allreduce),
 * blocking or posted and waited for. */
static void reduction(const void *send, void *recv, long n, MPI_Datatype t, MPI_Op op, int root,
                      int kind) {
    MPI_Request q = MPI_REQUEST_NULL;
    int nb = nonblocking;
    if (kind == 0 && root >= 0)
        CHECK_RC(nb ? MPI_Ireduce(send, recv, (int)n, t, op, root, MPI_COMM_WORLD, &q)
                    : MPI_Reduce(send, recv, (int)n, t, op, root, MPI_COMM_WORLD));
    else if (kind == 0)
        CHECK_RC(nb ? MPI_Iallreduce(send, recv, (int)n, t, op, MPI_COMM_WORLD, &q)
                    : MPI_Allreduce(send, recv, (int)n, t, op, MPI_COMM_WORLD));
    else if (kind == 1)
        CHECK_RC(nb ? MPI_Iscan(send, recv, (int)n, t, op, MPI_COMM_WORLD, &q)
                    : MPI_Scan(send, recv, (int)n, t, op, MPI_COMM_WORLD));
    else
        CHECK_RC(nb ? MPI_Iexscan(send, recv, (int)n, t, op, MPI_COMM_WORLD, &q)
                    : MPI_Exscan(send, recv, (int)n, t, op, MPI_COMM_WORLD));
    CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
}

/* Item k of rank r's contribution: small integers (sums exact in any order). */
static int val(int r, long k, int what) { return (int)((r * 37 + k * 11 + what * 5) % 20) - 5; }

typedef struct {
    MPI_Datatype t;
    int bytes; /* of one item */
    const char *name;
} ty;

static void fill(const ty *t, void *buf, long n, int r, int what) {
    for (long k = 0; k < n; k++) {
        int v = val(r, k, what);
        if (t->t == MPI_CHAR) ((signed char *)buf)[k] = (signed char)v;
        else if (t->t == MPI_INT) ((int *)buf)[k] = v;
        else if (t->t == MPI_FLOAT) ((float *)buf)[k] = (float)v;
        else if (t->t == MPI_DOUBLE) ((double *)buf)[k] = (double)v;
        else if (t->t == MPI_LONG) ((long *)buf)[k] = (long)v * 1000003L;
    }
}

/* Our contribution (`n` items of `t`) and a result buffer of 16 more bytes, all 0x5a. */
static void buffers(const ty *t, long n, int what, unsigned char **s, unsigned char **r) {
    size_t len = (size_t)n * t->bytes;
    *s = malloc(len + 16);
    *r = malloc(len + 16);
    CHECK(*s && *r);
    fill(t, *s, n, rank, what);
    memset(*r, 0x5a, len + 16);
}

/* Whether item i of `buf` is item k of the reduction (`max`: MAX, else SUM) over ranks below
 * `upto`. */
static int same_at(const ty *t, const void *buf, long i, long k, int what, int max, int upto) {
    long acc = max ? -1000 : 0;
    for (int r = 0; r < upto; r++) {
        long v = val(r, k, what);
        acc = max ? (v > acc ? v : acc) : acc + v;
    }
    if (t->t == MPI_CHAR) return ((const signed char *)buf)[i] == (signed char)acc;
    if (t->t == MPI_INT) return ((const int *)buf)[i] == (int)acc;
    if (t->t == MPI_FLOAT) return ((const float *)buf)[i] == (float)acc;
    if (t->t == MPI_DOUBLE) return ((const double *)buf)[i] == (double)acc;
    return ((const long *)buf)[i] == acc * 1000003L;
}

/* The expected item k of the reduction over ranks below `upto`, at item k of `buf`. */
static int same_upto(const ty *t, const void *buf, long k, int what, int max, int upto) {
    return same_at(t, buf, k, k, what, max, upto);
}

/* The same over every rank. */
static int same(const ty *t, const void *buf, long k, int what, int max) {
    return same_upto(t, buf, k, what, max, size);
}

/* One scan (`ex`: exscan) of `n` items of `t` (SUM or MAX), in place or not, checked. */
static void scan(const ty *t, long n, int ex, int inpl, int max, int what) {
    size_t len = (size_t)n * t->bytes;
    unsigned char *s, *r;
    buffers(t, n, what, &s, &r);
    MPI_Op op = max ? MPI_MAX : MPI_SUM;
    if (inpl) memcpy(r, s, len);
    const void *src = inpl ? MPI_IN_PLACE : s;
    reduction(src, r, n, t->t, op, 0, ex ? 2 : 1);
    if (!ex || rank > 0)
        for (long k = 0; k < n; k++)
            if (!same_upto(t, r, k, what, max, ex ? rank : rank + 1)) {
                fprintf(stderr, "%s %s n=%ld inpl=%d max=%d: item %ld wrong on %d\n",
                        ex ? "exscan" : "scan", t->name, n, inpl, max, k, rank);
                CHECK(0);
            }
    for (int g = 0; g < 16; g++) CHECK(r[len + g] == 0x5a);
    free(s);
    free(r);
}

/* One reduce of `n` items of `t` (SUM or MAX) to `root` (-1: an allreduce), in place or
 * not, checked. */
static void basic(const ty *t, long n, int root, int inpl, int max, int what) {
    size_t len = (size_t)n * t->bytes;
    unsigned char *s, *r;
    buffers(t, n, what, &s, &r);
    MPI_Op op = max ? MPI_MAX : MPI_SUM;
    if (inpl && (rank == root || root < 0)) {
        memcpy(r, s, len);
        reduction(MPI_IN_PLACE, r, n, t->t, op, root, 0);
    } else {
        reduction(s, r, n, t->t, op, root, 0);
    }
    if (rank == root || root < 0) {
        for (long k = 0; k < n; k++)
            if (!same(t, r, k, what, max)) {
                fprintf(stderr, "reduce %s n=%ld root=%d inpl=%d max=%d nb=%d: item %ld wrong\n",
                        t->name, n, root, inpl, max, nonblocking, k);
                CHECK(0);
            }
        for (int g = 0; g < 16; g++) CHECK(r[len + g] == 0x5a);
    } else {
        for (size_t g = 0; g < len + 16; g++) CHECK(r[g] == 0x5a); /* recv untouched */
    }
    /* the send buffer is never written */
    unsigned char *again = malloc(len);
    CHECK(again);
    fill(t, again, n, rank, what);
    CHECK(memcmp(again, s, len) == 0);
    free(again);
    free(s);
    free(r);
}

/* The send buffer `s` (`n` items of `t`) still holds our contribution. */
static void unchanged(const ty *t, const unsigned char *s, long n, int what) {
    size_t len = (size_t)n * t->bytes;
    unsigned char *again = malloc(len + 1);
    CHECK(again);
    fill(t, again, n, rank, what);
    CHECK(memcmp(again, s, len) == 0);
    free(again);
}

/* One allreduce of `n` items of `t` (SUM or MAX), in place or not, checked on every rank. */
static void allred(const ty *t, long n, int inpl, int max, int what) {
    size_t len = (size_t)n * t->bytes;
    unsigned char *s, *r;
    buffers(t, n, what, &s, &r);
    if (inpl) memcpy(r, s, len);
    CHECK_RC(MPI_Allreduce(inpl ? MPI_IN_PLACE : s, r, (int)n, t->t, max ? MPI_MAX : MPI_SUM,
                           MPI_COMM_WORLD));
    for (long k = 0; k < n; k++)
        if (!same(t, r, k, what, max)) {
            fprintf(stderr, "allreduce %s n=%ld inpl=%d max=%d: item %ld wrong on %d\n", t->name,
                    n, inpl, max, k, rank);
            CHECK(0);
        }
    for (int g = 0; g < 16; g++) CHECK(r[len + g] == 0x5a);
    unchanged(t, s, n, what);
    free(s);
    free(r);
}

/* The items of rank `r`'s block of a reduce-scatter of `n` items: `blk`, reduce_scatter_block
 * of n / size each; else uneven (rank 0 the most, the last the rest), some blocks empty when
 * n is small. */
static long block_of(long n, int blk, int r) {
    if (blk) return n / size;
    long q = n / (2 * size);
    return r == 0 ? n - (size - 1) * q : q;
}

/* One reduce-scatter (`blk`: 1 reduce_scatter_block, 2 reduce_scatter with equal counts;
 * posted and waited for when `nonblocking`) of `n` items of `t` (SUM or MAX), in place or
 * not, checked: our block at the start of the receive buffer, the rest untouched (out of
 * place). */
static void redscat(const ty *t, long n, int blk, int inpl, int max, int what) {
    int counts[64];
    long at = 0, total = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = (int)block_of(n, blk, r);
        if (r < rank) at += counts[r];
        total += counts[r];
    }
    long mine = counts[rank];
    size_t len = (size_t)total * t->bytes;
    unsigned char *s, *r;
    buffers(t, total, what, &s, &r);
    if (inpl) memcpy(r, s, len);
    const void *src = inpl ? MPI_IN_PLACE : s;
    MPI_Op op = max ? MPI_MAX : MPI_SUM;
    MPI_Request q = MPI_REQUEST_NULL;
    if (blk == 1)
        CHECK_RC(nonblocking ? MPI_Ireduce_scatter_block(src, r, counts[0], t->t, op,
                                                         MPI_COMM_WORLD, &q)
                             : MPI_Reduce_scatter_block(src, r, counts[0], t->t, op,
                                                        MPI_COMM_WORLD));
    else
        CHECK_RC(nonblocking ? MPI_Ireduce_scatter(src, r, counts, t->t, op, MPI_COMM_WORLD, &q)
                             : MPI_Reduce_scatter(src, r, counts, t->t, op, MPI_COMM_WORLD));
    CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
    for (long k = 0; k < mine; k++)
        if (!same_at(t, r, k, at + k, what, max, size)) {
            fprintf(stderr, "reduce_scatter%s %s n=%ld inpl=%d max=%d: item %ld wrong on %d\n",
                    blk ? "_block" : "", t->name, total, inpl, max, k, rank);
            CHECK(0);
        }
    for (int g = 0; g < 16; g++) CHECK(r[len + g] == 0x5a);
    if (!inpl) {
        for (size_t g = (size_t)mine * t->bytes; g < len; g++) CHECK(r[g] == 0x5a);
        unchanged(t, s, total, what);
    }
    free(s);
    free(r);
}

/* "inout = in": associative and not commutative; reduced in rank order it gives rank 0's
 * contribution. */
static void first(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    memcpy(inout, in, (size_t)*len * sizeof(int));
}

/* Allreduce and reduce_scatter_block of `n` ints with `first` (a predefined type with a user
 * op: rank 0's items everywhere), in place or not. */
static void firsts(MPI_Op op, long n, int inpl) {
    long b = n / size, total = b * size;
    int *s = malloc(total * sizeof(int) + 1), *r = malloc(total * sizeof(int) + 1);
    CHECK(s && r);
    for (long k = 0; k < total; k++) s[k] = rank * 100000 + (int)k;
    if (inpl) memcpy(r, s, total * sizeof(int));
    CHECK_RC(MPI_Allreduce(inpl ? MPI_IN_PLACE : s, r, (int)total, MPI_INT, op, MPI_COMM_WORLD));
    for (long k = 0; k < total; k++) CHECK(r[k] == (int)k);
    if (inpl) memcpy(r, s, total * sizeof(int));
    CHECK_RC(
        MPI_Reduce_scatter_block(inpl ? MPI_IN_PLACE : s, r, (int)b, MPI_INT, op, MPI_COMM_WORLD));
    for (long k = 0; k < b; k++) CHECK(r[k] == (int)(rank * b + k));
    free(s);
    free(r);
}

/* `rs`: reduce_scatter_block of blocks of `b` items, else allreduce of the `size * b`
 * (posted and waited for when `nonblocking`). */
static void all_or_block(int rs, const void *src, void *r, long b, MPI_Datatype t, MPI_Op op) {
    MPI_Request q = MPI_REQUEST_NULL;
    MPI_Comm w = MPI_COMM_WORLD;
    if (rs)
        CHECK_RC(nonblocking ? MPI_Ireduce_scatter_block(src, r, (int)b, t, op, w, &q)
                             : MPI_Reduce_scatter_block(src, r, (int)b, t, op, w));
    else
        CHECK_RC(nonblocking ? MPI_Iallreduce(src, r, (int)(b * size), t, op, w, &q)
                             : MPI_Allreduce(src, r, (int)(b * size), t, op, w));
    CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
}

/* Allreduce and reduce_scatter_block (SUM) of `n` ints 8 bytes apart (a non-contiguous
 * type: packed first), the gaps left alone. */
static void strided(MPI_Datatype st, long n, int inpl) {
    long b = n / size, total = b * size;
    int *s = malloc(2 * total * sizeof(int) + 1), *r = malloc(2 * total * sizeof(int) + 1);
    CHECK(s && r);
    for (long k = 0; k < 2 * total; k++) s[k] = k % 2 ? -7 : rank + (int)(k % 13);
    for (int rs = 0; rs < 2; rs++) {
        for (long k = 0; k < 2 * total; k++) r[k] = inpl ? s[k] : -9;
        all_or_block(rs, inpl ? MPI_IN_PLACE : s, r, b, st, MPI_SUM);
        long from = rs ? rank * b : 0, items = rs ? b : total;
        for (long k = 0; k < items; k++) {
            int e = size * (int)((2 * (from + k)) % 13) + size * (size - 1) / 2;
            CHECK(r[2 * k] == e);
            CHECK(r[2 * k + 1] == (inpl ? -7 : -9));
        }
    }
    free(s);
    free(r);
}

/* MINLOC on MPI_DOUBLE_INT: values with ties across ranks (the lower rank wins). */
static void minloc(long n, int root, int inpl) {
    struct di {
        double v;
        int i;
    } *s = malloc(n * sizeof *s), *r = malloc(n * sizeof *r);
    CHECK(s && r);
    for (long k = 0; k < n; k++) {
        s[k].v = (double)((rank * 7 + k * 3) % 5);
        s[k].i = rank * 1000 + (int)(k % 1000);
    }
    if (inpl && rank == root) {
        memcpy(r, s, n * sizeof *s);
        CHECK_RC(MPI_Reduce(MPI_IN_PLACE, r, (int)n, MPI_DOUBLE_INT, MPI_MINLOC, root,
                            MPI_COMM_WORLD));
    } else {
        CHECK_RC(MPI_Reduce(s, r, (int)n, MPI_DOUBLE_INT, MPI_MINLOC, root, MPI_COMM_WORLD));
    }
    if (rank == root)
        for (long k = 0; k < n; k++) {
            double best = 1e9;
            int at = -1;
            for (int q = 0; q < size; q++) {
                double v = (double)((q * 7 + k * 3) % 5);
                if (v < best) best = v, at = q * 1000 + (int)(k % 1000);
            }
            if (r[k].v != best || r[k].i != at) {
                fprintf(stderr, "minloc n=%ld root=%d inpl=%d: item %ld wrong\n", n, root, inpl, k);
                CHECK(0);
            }
        }
    free(s);
    free(r);
}

/* The value-index pairs with a gap in their layout (packed by the library, into buffers it
 * keeps between calls): MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT. */
typedef struct {
    MPI_Datatype t;
    int ext, off; /* extent, offset of the int */
    int kind;     /* value: 0 double, 1 long, 2 short */
    const char *name;
} pty;

static double pval(int r, long k, int what) { return (double)((r * 7 + k * 3 + what) % 5); }
static int pidx(int r, long k, int what) { return r * 1000 + (int)((k + what) % 1000); }

static double get_v(const pty *t, const unsigned char *p) {
    if (t->kind == 0) return *(const double *)p;
    if (t->kind == 1) return (double)*(const long *)p;
    return (double)*(const short *)p;
}

/* Item k of rank r's pairs at `p`; the gaps (and everything else) were 0x5a. */
static void put_pair(const pty *t, unsigned char *p, int r, long k, int what) {
    double v = pval(r, k, what);
    if (t->kind == 0) *(double *)p = v;
    else if (t->kind == 1) *(long *)p = (long)v;
    else *(short *)p = (short)v;
    *(int *)(p + t->off) = pidx(r, k, what);
}

/* Whether the pair at `p` is item k of MINLOC (`max`: MAXLOC) over ranks lo..hi-1 (the lower
 * index wins ties), its gap bytes still 0x5a. */
static int pair_ok(const pty *t, const unsigned char *p, long k, int what, int max, int lo,
                   int hi) {
    double best = pval(lo, k, what);
    int at = pidx(lo, k, what);
    for (int r = lo + 1; r < hi; r++) {
        double v = pval(r, k, what);
        if (max ? v > best : v < best) best = v, at = pidx(r, k, what);
    }
    int vsize = t->kind == 0 ? 8 : t->kind == 1 ? (int)sizeof(long) : 2;
    for (int g = vsize; g < t->off; g++)
        if (p[g] != 0x5a) return 0;
    for (int g = t->off + 4; g < t->ext; g++)
        if (p[g] != 0x5a) return 0;
    return get_v(t, p) == best && *(const int *)(p + t->off) == at;
}

/* `kind`: 0 reduce to the last rank, 1 allreduce, 2 scan, 3 exscan, 4 reduce_scatter_block;
 * `nb`: the nonblocking form (reduce, allreduce, scan, exscan). `n` items of `t` (a multiple
 * of the size for kind 4), in place or not, checked with the gaps and the bytes after the
 * result untouched. */
static void pairs_one(const pty *t, long n, int kind, int inpl, int max, int what, int nb) {
    size_t len = (size_t)n * t->ext;
    unsigned char *s = malloc(len + 16), *r = malloc(len + 16);
    CHECK(s && r);
    memset(s, 0x5a, len + 16);
    memset(r, 0x5a, len + 16);
    for (long k = 0; k < n; k++) put_pair(t, s + k * t->ext, rank, k, what);
    int root = size - 1, gets = kind != 0 || rank == root;
    if (inpl && gets) memcpy(r, s, len);
    const void *src = inpl && gets ? MPI_IN_PLACE : s;
    MPI_Op op = max ? MPI_MAXLOC : MPI_MINLOC;
    MPI_Request q = MPI_REQUEST_NULL;
    if (kind == 0)
        CHECK_RC(nb ? MPI_Ireduce(src, r, (int)n, t->t, op, root, MPI_COMM_WORLD, &q)
                    : MPI_Reduce(src, r, (int)n, t->t, op, root, MPI_COMM_WORLD));
    else if (kind == 1)
        CHECK_RC(nb ? MPI_Iallreduce(src, r, (int)n, t->t, op, MPI_COMM_WORLD, &q)
                    : MPI_Allreduce(src, r, (int)n, t->t, op, MPI_COMM_WORLD));
    else if (kind == 2)
        CHECK_RC(nb ? MPI_Iscan(src, r, (int)n, t->t, op, MPI_COMM_WORLD, &q)
                    : MPI_Scan(src, r, (int)n, t->t, op, MPI_COMM_WORLD));
    else if (kind == 3)
        CHECK_RC(nb ? MPI_Iexscan(src, r, (int)n, t->t, op, MPI_COMM_WORLD, &q)
                    : MPI_Exscan(src, r, (int)n, t->t, op, MPI_COMM_WORLD));
    else
        CHECK_RC(MPI_Reduce_scatter_block(src, r, (int)(n / size), t->t, op, MPI_COMM_WORLD));
    CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
    long items = kind == 4 ? n / size : n, from = kind == 4 ? rank * (n / size) : 0;
    int hi = kind == 2 ? rank + 1 : kind == 3 ? rank : size;
    if (gets && hi > 0)
        for (long k = 0; k < items; k++)
            if (!pair_ok(t, r + k * t->ext, from + k, what, max, 0, hi)) {
                fprintf(stderr, "pairs %s n=%ld kind=%d inpl=%d max=%d nb=%d: item %ld wrong on %d\n",
                        t->name, n, kind, inpl, max, nb, k, rank);
                CHECK(0);
            }
    /* past the result untouched (in place: past the vector; exscan's rank 0 gets none) */
    size_t end = (inpl && gets) || hi == 0 ? len : gets ? (size_t)items * t->ext : 0;
    for (size_t g = end; g < len + 16; g++)
        if (r[g] != 0x5a) {
            fprintf(stderr, "pairs %s n=%ld kind=%d inpl=%d: byte %zu written on %d\n", t->name,
                    n, kind, inpl, g, rank);
            CHECK(0);
        }
    free(s);
    free(r);
}

/* The pair types through every reduction, at sizes that go up and down (the buffers the
 * library keeps between calls are reused with another size and old contents). */
static void pairs(void) {
    pty types[] = {{MPI_DOUBLE_INT, 16, 8, 0, "DOUBLE_INT"},
                   {MPI_LONG_INT, (int)sizeof(struct { long v; int i; }), (int)sizeof(long), 1,
                    "LONG_INT"},
                   {MPI_SHORT_INT, 8, 4, 2, "SHORT_INT"}};
    /* items: up to 1 MiB and past it on 2 and 3 ranks, up to 64 KiB on more */
    long items[] = {70000, 300, 65536, 5000, 4104};
    int w = 0;
    for (size_t z = 0; z < sizeof items / sizeof items[0]; z++)
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            long n = items[z] * 16 / types[ti].ext / size * size;
            if (size > 3 && n * types[ti].ext > 65536) continue;
            for (int kind = 0; kind < 5; kind++)
                for (int inpl = 0; inpl < 2; inpl++, w++)
                    pairs_one(&types[ti], n, kind, inpl, w % 2, w % 7, 0);
        }
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (int kind = 0; kind < 4; kind++, w++)
            pairs_one(&types[ti], size > 3 ? 4000 : 70000, kind, w % 2, w % 2, w % 7, 1);
}

/* 2x2 matrices of 32-bit integers (wrapping): an associative, non-commutative product. */
typedef struct {
    uint32_t a, b, c, d;
} mat;

static mat mul(mat x, mat y) {
    mat z = {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c,
             x.c * y.b + x.d * y.d};
    return z;
}

static void matmul(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    mat *x = in, *y = inout;
    for (int k = 0; k < *len; k++) y[k] = mul(x[k], y[k]); /* inout = in * inout */
}

static mat mat_of(int r, long k) {
    mat m = {(uint32_t)(r + 2 + k % 3), (uint32_t)(r * 3 + 1), (uint32_t)(k % 7 + 1),
             (uint32_t)(r + 1)};
    return m;
}

static void noncommutative(MPI_Op op, MPI_Datatype mt, long n, int root, int inpl) {
    mat *s = malloc(n * sizeof *s), *r = malloc(n * sizeof *r);
    CHECK(s && r);
    for (long k = 0; k < n; k++) s[k] = mat_of(rank, k);
    if (inpl && (rank == root || root < 0)) {
        memcpy(r, s, n * sizeof *s);
        reduction(MPI_IN_PLACE, r, n, mt, op, root, 0);
    } else {
        reduction(s, r, n, mt, op, root, 0);
    }
    if (rank == root || root < 0)
        for (long k = 0; k < n; k++) {
            mat e = mat_of(0, k);
            for (int q = 1; q < size; q++) e = mul(e, mat_of(q, k));
            if (memcmp(&e, &r[k], sizeof e) != 0) {
                fprintf(stderr, "matmul n=%ld root=%d inpl=%d nb=%d: item %ld wrong\n", n, root,
                        inpl, nonblocking, k);
                CHECK(0);
            }
        }
    free(s);
    free(r);
}

/* Allreduce and reduce_scatter_block with the matrix product: rank order matters. */
static void matall(MPI_Op op, MPI_Datatype mt, long n, int inpl) {
    long b = n / size, total = b * size;
    mat *s = malloc(total * sizeof *s + 1), *r = malloc(total * sizeof *r + 1);
    CHECK(s && r);
    for (long k = 0; k < total; k++) s[k] = mat_of(rank, k);
    for (int rs = 0; rs < 2; rs++) {
        if (inpl) memcpy(r, s, total * sizeof *s);
        all_or_block(rs, inpl ? MPI_IN_PLACE : s, r, b, mt, op);
        long from = rs ? rank * b : 0, items = rs ? b : total;
        for (long k = 0; k < items; k++) {
            mat e = mat_of(0, from + k);
            for (int q = 1; q < size; q++) e = mul(e, mat_of(q, from + k));
            if (memcmp(&e, &r[k], sizeof e) != 0) {
                fprintf(stderr, "matmul %s n=%ld inpl=%d: item %ld wrong on %d\n",
                        rs ? "reduce_scatter_block" : "allreduce", total, inpl, k, rank);
                CHECK(0);
            }
        }
    }
    free(s);
    free(r);
}

/* Scan (inclusive, or `ex`: exclusive) with the matrix product: rank order matters. */
static void matscan_ex(MPI_Op op, MPI_Datatype mt, long n, int inpl, int ex) {
    mat *s = malloc(n * sizeof *s), *r = malloc(n * sizeof *r);
    CHECK(s && r);
    for (long k = 0; k < n; k++) s[k] = mat_of(rank, k);
    if (inpl) {
        memcpy(r, s, n * sizeof *s);
        reduction(MPI_IN_PLACE, r, n, mt, op, 0, ex ? 2 : 1);
    } else {
        reduction(s, r, n, mt, op, 0, ex ? 2 : 1);
    }
    for (long k = 0; k < n && (!ex || rank > 0); k++) {
        mat e = mat_of(0, k);
        for (int q = 1; q < (ex ? rank : rank + 1); q++) e = mul(e, mat_of(q, k));
        CHECK(memcmp(&e, &r[k], sizeof e) == 0);
    }
    free(s);
    free(r);
}

static void matscan(MPI_Op op, MPI_Datatype mt, long n, int inpl) {
    matscan_ex(op, mt, n, inpl, 0);
}

/* Several nonblocking reductions of `n` ints posted before the first wait (an ireduce to
 * each of two roots, an iallreduce in place, an iscan, an iexscan), a barrier in between:
 * each waits for the region in its progress. */
static void outstanding(long n, int i) {
    enum { K = 5 };
    int *s[K], *r[K];
    MPI_Request q[K];
    for (int j = 0; j < K; j++) {
        s[j] = malloc(n * sizeof(int));
        r[j] = malloc(n * sizeof(int));
        CHECK(s[j] && r[j]);
        for (long k = 0; k < n; k++) s[j][k] = val(rank, k, i + j), r[j][k] = s[j][k];
    }
    int r0 = i % size, r1 = (i + 1) % size;
    CHECK_RC(MPI_Ireduce(s[0], r[0], (int)n, MPI_INT, MPI_SUM, r0, MPI_COMM_WORLD, &q[0]));
    CHECK_RC(MPI_Iallreduce(MPI_IN_PLACE, r[1], (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[1]));
    CHECK_RC(MPI_Ireduce(s[2], r[2], (int)n, MPI_INT, MPI_SUM, r1, MPI_COMM_WORLD, &q[2]));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPI_Iscan(s[3], r[3], (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[3]));
    CHECK_RC(MPI_Iexscan(MPI_IN_PLACE, r[4], (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[4]));
    /* completed in an order that differs between ranks */
    for (int j = 0; j < K; j++) CHECK_RC(MPI_Wait(&q[(j + rank) % K], MPI_STATUS_IGNORE));
    ty in = {MPI_INT, 4, "INT"};
    int upto[K] = {size, size, size, rank + 1, rank};
    for (int j = 0; j < K; j++) {
        if ((j == 0 && rank != r0) || (j == 2 && rank != r1) || (j == 4 && rank == 0)) continue;
        for (long k = 0; k < n; k++)
            if (!same_upto(&in, r[j], k, i + j, 0, upto[j])) {
                fprintf(stderr, "outstanding n=%ld i=%d: collective %d item %ld wrong on %d\n", n,
                        i, j, k, rank);
                CHECK(0);
            }
    }
    for (int j = 0; j < K; j++) free(s[j]), free(r[j]);
}

/* `reps` inclusive MPI_Iscans (`nb`; else MPI_Scans) (sum of longs) of `n` items back to
 * back, every rank's items new each time, in place on odd ones: past 16 KiB on more than 2
 * ranks they run as a chain of 64 KiB chunks through a large region (the nonblocking one,
 * or the blocking reduces' one), where rank r reads rank r-1's slot as soon as r-1's
 * counter says a chunk is there. A chunk counted before it is copied would be read as the
 * previous call's partial sum (different items), so the result would be wrong. */
static void scan_chain(long n, int reps, int nb) {
    long *s = malloc(n * sizeof(long)), *r = malloc(n * sizeof(long));
    CHECK(s && r);
    for (int it = 0; it < reps; it++) {
        long base = (long)(it + 1) * 1000003L;
        for (long k = 0; k < n; k++) s[k] = base + (long)rank * 7919L + k, r[k] = s[k];
        MPI_Request q;
        int inpl = it % 2;
        if (nb) {
            CHECK_RC(MPI_Iscan(inpl ? MPI_IN_PLACE : s, r, (int)n, MPI_LONG, MPI_SUM,
                               MPI_COMM_WORLD, &q));
            CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
        } else {
            CHECK_RC(MPI_Scan(inpl ? MPI_IN_PLACE : s, r, (int)n, MPI_LONG, MPI_SUM,
                              MPI_COMM_WORLD));
        }
        long tri = 7919L * rank * (rank + 1) / 2;
        for (long k = 0; k < n; k++)
            if (r[k] != (long)(rank + 1) * (base + k) + tri) {
                fprintf(stderr,
                        "scan_chain n=%ld it=%d inpl=%d nb=%d: item %ld is %ld on %d, not %ld\n",
                        n, it, inpl, nb, k, r[k], rank, (long)(rank + 1) * (base + k) + tri);
                CHECK(0);
            }
    }
    free(s), free(r);
}

/* `reps` MPI_Reduces (sum of ints) of `n` items to `root` back to back, every rank's items
 * new each time, send buffers `skew` bytes past a 16-byte alignment (the slot copy's loads
 * cross lines): through the large region every other rank rewrites its slot, which the
 * root read at the last call, with non-temporal stores from 32 KiB on when ranks yield when
 * idle (one piece; 8 KiB chunks, copied plainly, otherwise). Lines folded before the new
 * stores reach them hold the previous call's items, which the check tells apart. (A progress
 * word published before the copy, broken on purpose once, was caught by basic() above, not
 * by this one alone at np=4: there the root's fold stayed behind the writers.) */
static void reduce_stream(long n, int reps, int root, int skew) {
    char *raw = malloc(n * sizeof(int) + 64);
    int *r = malloc(n * sizeof(int));
    CHECK(raw && r);
    int *s = (int *)(raw + skew);
    for (int it = 0; it < reps; it++) {
        int base = (it + 1) * 1009;
        for (long k = 0; k < n; k++) s[k] = base + rank * 7 + (int)(k % 8191);
        CHECK_RC(MPI_Reduce(s, r, (int)n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
        if (rank != root) continue;
        for (long k = 0; k < n; k++) {
            int e = size * (base + (int)(k % 8191)) + 7 * size * (size - 1) / 2;
            if (r[k] != e) {
                fprintf(stderr, "reduce_stream n=%ld it=%d root=%d skew=%d: item %ld is %d, not %d\n", n,
                        it, root, skew, k, r[k], e);
                CHECK(0);
            }
        }
    }
    free(raw), free(r);
}

static unsigned long long reduce_calls(MPI_T_pvar_session ses, MPI_T_pvar_handle h) {
    unsigned long long v = 0;
    CHECK_RC(MPI_T_pvar_read(ses, h, &v));
    return v;
}

/* A handle on the counter `name`, started. */
static MPI_T_pvar_handle counter(MPI_T_pvar_session ses, const char *name) {
    MPI_T_pvar_handle h;
    int idx = -1, count, cont = 1;
    CHECK_RC(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &idx));
    CHECK_RC(MPI_T_pvar_handle_alloc(ses, idx, NULL, &h, &count));
    CHECK_RC(MPI_T_pvar_get_info(idx, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                 &cont, NULL));
    if (!cont) CHECK_RC(MPI_T_pvar_start(ses, h));
    return h;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init(&argc, &argv);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    /* which path: the sm reduce counter around one 64 KiB reduce */
    MPI_T_pvar_session ses;
    MPI_T_pvar_handle h;
    int idx = -1, count, cont = 1;
    CHECK_RC(MPI_T_pvar_session_create(&ses));
    CHECK_RC(MPI_T_pvar_get_index("coll_sm_reduce_calls", MPI_T_PVAR_CLASS_COUNTER, &idx));
    CHECK_RC(MPI_T_pvar_handle_alloc(ses, idx, NULL, &h, &count));
    CHECK_RC(MPI_T_pvar_get_info(idx, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                 &cont, NULL));
    if (!cont) CHECK_RC(MPI_T_pvar_start(ses, h));
    ty types[] = {{MPI_CHAR, 1, "CHAR"},
                  {MPI_INT, 4, "INT"},
                  {MPI_FLOAT, 4, "FLOAT"},
                  {MPI_DOUBLE, 8, "DOUBLE"},
                  {MPI_LONG, (int)sizeof(long), "LONG"}};
    ty *c = &types[0];
    MPI_Barrier(MPI_COMM_WORLD); /* makes the segment */
    unsigned long long before = reduce_calls(ses, h);
    basic(c, 65536, 0, 0, 0, 0);
    int used = reduce_calls(ses, h) > before;
    /* bytes around the 4 KiB buffer, the 16 KiB chunks, 32 KiB (from there two ranks
     * split the fold) and 1 MiB (the largest reduce on two ranks by cross-memory copies) */
    long bytes[] = {4096,  4097,  4104,  16384,      16385,   3 * 16384 + 24,
                    32760, 32768, 65536, 262144 + 8, 1 << 20, (1 << 20) + 40};
    for (size_t z = 0; z < sizeof bytes / sizeof bytes[0]; z++)
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            long n = bytes[z] / types[ti].bytes;
            if (n == 0) continue;
            for (int root = 0; root < size; root++)
                for (int inpl = 0; inpl < 2; inpl++) {
                    /* every root for CHAR; the first, last and one middle root otherwise */
                    if (ti > 0 && root != 0 && root != size - 1 && root != size / 2) continue;
                    basic(&types[ti], n, root, inpl, (int)(z + ti + root) % 2, (int)z);
                }
        }
    /* allreduces and reduce-scatters: the pair path's counters around 64 KiB ones, then
     * sizes around 4 KiB (from there two ranks go by cross-memory copies), odd counts, up
     * to 1 MiB (the largest so) and past it */
    MPI_T_pvar_handle ha = counter(ses, "coll_sm_allreduce_calls");
    MPI_T_pvar_handle hr = counter(ses, "coll_sm_reduce_scatter_calls");
    unsigned long long a0 = reduce_calls(ses, ha), r0 = reduce_calls(ses, hr);
    allred(c, 65536, 0, 0, 0);
    redscat(c, 65536, 1, 0, 0, 0);
    int allr = reduce_calls(ses, ha) > a0;
    int pair = allr && reduce_calls(ses, hr) > r0;
    /* the allreduces' smallest (8 KiB + 1) and largest (1 MiB) by cross-memory copies, the
     * reduce-scatters' (4 KiB + 1, 2 MiB); from 256 KiB CHAR and DOUBLE only, and on more
     * than 3 ranks (oversubscribed) CHAR below 256 KiB only */
    long abytes[] = {4096,        4097,    4104,           8192,    8193,          12289,
                     65536 + 8,   262144 + 40, 1 << 20, (1 << 20) + 40, 2 << 20, (2 << 20) + 8};
    for (size_t z = 0; z < sizeof abytes / sizeof abytes[0]; z++)
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            for (int inpl = 0; inpl < 2; inpl++) {
                if (abytes[z] >= 262144 && ti != 0 && ti != 3) continue;
                if (size > 3 && (abytes[z] >= 262144 || ti != 0)) continue;
                long n = abytes[z] / types[ti].bytes;
                int max = (int)(z + ti + inpl) % 2;
                if (abytes[z] <= (2 << 20) - 8) allred(&types[ti], n, inpl, max, (int)z);
                redscat(&types[ti], n, abytes[z] >= (2 << 20) ? 1 - inpl : (int)(z + inpl) % 2,
                        inpl, max, (int)z);
            }
    MPI_Op firstop;
    MPI_Datatype st;
    CHECK_RC(MPI_Op_create(first, 0, &firstop));
    CHECK_RC(MPI_Type_create_resized(MPI_INT, 0, 8, &st));
    CHECK_RC(MPI_Type_commit(&st));
    long ints[] = {1024, 1026, 16383, 262144};
    for (size_t z = 0; z < sizeof ints / sizeof ints[0]; z++)
        for (int inpl = 0; inpl < 2; inpl++) {
            firsts(firstop, ints[z], inpl);
            strided(st, ints[z], inpl);
        }
    /* scans and exscans of the same sizes */
    for (size_t z = 0; z < sizeof bytes / sizeof bytes[0]; z++)
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            for (int ex = 0; ex < 2; ex++)
                for (int inpl = 0; inpl < 2; inpl++)
                    scan(&types[ti], bytes[z] / types[ti].bytes, ex, inpl, (int)(z + ti) % 2,
                         (int)z);
    pairs();
    /* 12-byte pairs: chunks end inside an item unless cut at whole items */
    long pairs[] = {342, 1366, 4097, 21846};
    for (size_t z = 0; z < sizeof pairs / sizeof pairs[0]; z++)
        for (int root = 0; root < size; root++)
            for (int inpl = 0; inpl < 2; inpl++) minloc(pairs[z], root, inpl);
    MPI_Op op;
    MPI_Datatype mt;
    CHECK_RC(MPI_Op_create(matmul, 0, &op));
    CHECK_RC(MPI_Type_contiguous(4, MPI_UINT32_T, &mt));
    CHECK_RC(MPI_Type_commit(&mt));
    long mats[] = {256, 257, 1025, 4096 + 3, 65536};
    for (size_t z = 0; z < sizeof mats / sizeof mats[0]; z++)
        for (int root = 0; root < size; root++)
            for (int inpl = 0; inpl < 2; inpl++) noncommutative(op, mt, mats[z], root, inpl);
    for (size_t z = 0; z < sizeof mats / sizeof mats[0]; z++)
        for (int inpl = 0; inpl < 2; inpl++) {
            matscan(op, mt, mats[z], inpl);
            matall(op, mt, mats[z], inpl);
        }
    /* back to back, the root moving, with large allreduces (which use the same region
     * when coll_sm_allreduce_large_min lets them) and small reduces in between */
    for (int i = 0; i < 40; i++) {
        int root = (i * 7) % size;
        long n = (i % 3 == 0) ? 70000 : (i % 3 == 1) ? 300000 : 20000;
        basic(c, n, root, i % 2, i % 2, i);
        if (i % 4 == 1) {
            long m = 600000;
            int *x = malloc(m * sizeof(int));
            CHECK(x);
            for (long k = 0; k < m; k++) x[k] = rank + (int)(k % 3);
            CHECK_RC(MPI_Allreduce(MPI_IN_PLACE, x, (int)m, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            for (long k = 0; k < m; k++) CHECK(x[k] == size * (size - 1) / 2 + size * (int)(k % 3));
            free(x);
        }
        if (i % 5 == 2) basic(c, 1000, (root + 1) % size, 0, 0, i);
        if (i % 3 == 2) scan(c, n / 2, i % 2, 0, 0, i);
    }
    /* the nonblocking forms: sizes around 4 KiB and 1 MiB (the largest through the
     * nonblocking region; one item more takes the schedules), allreduce too */
    nonblocking = 1;
    long nbytes[] = {4104, 4096, 65536 + 8, 1 << 20, (1 << 20) + 8};
    for (size_t z = 0; z < sizeof nbytes / sizeof nbytes[0]; z++)
        for (size_t ti = 0; ti < (z == 0 ? 4u : 1u); ti += 3) {
            long n = nbytes[z] / types[ti].bytes;
            for (int root = -1; root < size; root++)
                for (int inpl = 0; inpl < 2; inpl++) {
                    if (root > 0 && root != size - 1) continue;
                    basic(&types[ti], n, root, inpl, (int)(z + ti + root + 1) % 2, (int)z);
                }
            for (int ex = 0; ex < 2; ex++)
                for (int inpl = 0; inpl < 2; inpl++)
                    scan(&types[ti], n, ex, inpl, (int)(z + ti) % 2, (int)z);
        }
    long nmats[] = {257, 4096 + 3};
    for (size_t z = 0; z < sizeof nmats / sizeof nmats[0]; z++)
        for (int inpl = 0; inpl < 2; inpl++) {
            for (int root = -1; root < size; root += (root == 0 ? size - 1 : 1))
                noncommutative(op, mt, nmats[z], root, inpl);
            matscan_ex(op, mt, nmats[z], inpl, 0);
            matscan_ex(op, mt, nmats[z], inpl, 1);
        }
    for (int i = 0; i < 2; i++) outstanding(i % 2 ? 20000 : 70000, i);
    /* reduce-scatters of equal blocks whose vector is larger than a slot of the nonblocking
     * region (1 MiB): through it in phases on more than 2 ranks (_block, and equal counts;
     * uneven ones take the schedules), CHAR and DOUBLE; the matrix product checks the
     * rank order */
    long rsbytes[] = {(1 << 20) + 4096, (3 << 20) + 40};
    for (size_t z = 0; z < sizeof rsbytes / sizeof rsbytes[0]; z++)
        for (size_t ti = 0; ti < 4; ti += 3)
            for (int blk = 0; blk < 3; blk++)
                for (int inpl = 0; inpl < 2; inpl++)
                    redscat(&types[ti], rsbytes[z] / types[ti].bytes, blk, inpl,
                            (int)(z + blk + inpl) % 2, (int)z);
    for (int inpl = 0; inpl < 2; inpl++) matall(op, mt, 70001, inpl);
    nonblocking = 0;
    /* the same reduce-scatters blocking: equal blocks through the region in phases on more
     * than 2 ranks (the counter says so), uneven ones point to point */
    for (size_t z = 0; z < sizeof rsbytes / sizeof rsbytes[0]; z++)
        for (size_t ti = 0; ti < 4; ti += 3)
            for (int blk = 0; blk < 3; blk++)
                for (int inpl = 0; inpl < 2; inpl++) {
                    unsigned long long c0 = reduce_calls(ses, hr);
                    redscat(&types[ti], rsbytes[z] / types[ti].bytes, blk, inpl,
                            (int)(z + blk + inpl + 1) % 2, (int)z);
                    if (size > 2 && (reduce_calls(ses, hr) > c0) != (blk != 0)) {
                        fprintf(stderr, "reduce_scatter%s %ld bytes inpl=%d: on sm %d\n",
                                blk ? "_block" : "", rsbytes[z], inpl, blk == 0);
                        CHECK(0);
                    }
                }
    for (int nb = 1; nb >= 0; nb--) {
        scan_chain(1 << 17, 40, nb); /* 1 MiB: 16 chunks */
        scan_chain(25001, 20, nb);   /* 200008 bytes: the last chunk partial */
    }
    /* reduces around the 32 KiB from which slot copies stream, and 1 MiB */
    reduce_stream(8192 - 1, 60, 0, 4);    /* 32 KiB - 4: plain copies */
    reduce_stream(8192, 60, size - 1, 0); /* 32 KiB */
    reduce_stream(16384 + 3, 60, 0, 12);  /* 64 KiB + 12: a partial last line */
    reduce_stream(1 << 18, 12, 0, 4);     /* 1 MiB */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        printf("coll_reduce_big: large reduce on sm: %s\n", used ? "used" : "not used");
        printf("coll_reduce_big: pair allreduce and reduce_scatter on sm: %s\n",
               pair ? "used" : "not used");
        printf("coll_reduce_big: allreduce on sm: %s\n", allr ? "used" : "not used");
        printf("coll_reduce_big: all checks passed\n");
    }
    MPI_Op_free(&firstop);
    MPI_Type_free(&st);
    MPI_T_pvar_handle_free(ses, &ha);
    MPI_T_pvar_handle_free(ses, &hr);
    MPI_Op_free(&op);
    MPI_Type_free(&mt);
    MPI_T_pvar_handle_free(ses, &h);
    MPI_T_pvar_session_free(&ses);
    MPI_T_finalize();
    MPI_Finalize();
    return 0;
}
