/* MPI_MINLOC and MPI_MAXLOC on every value-index pair type (MPI_SHORT_INT, MPI_LONG_INT,
 * MPI_DOUBLE_INT, MPI_LONG_DOUBLE_INT, which have a gap or padding in their layout, and
 * MPI_2INT, MPI_FLOAT_INT, which have none) through MPI_Allreduce, MPI_Reduce, MPI_Scan,
 * MPI_Reduce_scatter_block, MPI_Reduce_scatter (unequal blocks: rank i's holds n + i items),
 * MPI_Iallreduce, MPI_Ireduce, MPI_Iscan and MPI_Ireduce_scatter_block, out of place and in
 * place, at counts whose packed bytes lie on
 * both sides of the shared-memory segment (4 KiB), in the point-to-point range and (argument
 * "big") in the large-vector region, against a reference each rank computes.
 *
 * Besides the values, the bytes the type map does not cover must be left alone: every
 * buffer is filled with a pattern first, and after the call every byte of a receive buffer
 * outside the type map of its items (the gap after a short, the padding after the int, the
 * bytes after the buffer) must still hold it. Each buffer is placed two ways: its last
 * item's int ending exactly at an inaccessible page (a read or write of the last item's
 * padding, which may lie outside the user's memory, faults) and at the start of a page
 * (aligned, with pattern bytes after it).
 *
 * Argument "pieces" runs instead the two pair types without a gap (MPI_2INT, MPI_FLOAT_INT),
 * which travel in their layout and are reduced by the layout kernels, at odd counts on
 * both sides of 1 MiB (131071 and 131073 items: the nonblocking large region's last size
 * and past it, cut into slices of unequal item counts), through MPI_Allreduce, MPI_Reduce,
 * MPI_Iallreduce and MPI_Ireduce, with a third placement: 4 bytes into a page (aligned for
 * the pair's ints, as C aligns these structs, and not for 8-byte words).
 *
 * Prints "coll_pairs: all checks passed" on rank 0. */
#include "check.h"
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int rank, size, failures;

/* One pair type: its handle, layout (the int's offset, extent, the value's bytes), and how
 * to store a small integer as its value and compare two values. */
typedef struct {
    const char *name;
    MPI_Datatype dt;
    size_t vsize, ioff, extent;
    void (*set)(void *, long);
    int (*cmp)(const void *, const void *);
} pair_t;

#define PAIR_FNS(N, V)                                                                      \
    static void set_##N(void *p, long x) {                                                  \
        V v = (V)x * (V)3 / (V)2; /* long double: 10 bytes of value, the rest left 0 */     \
        memset(p, 0, sizeof(V));                                                            \
        memcpy(p, &v, sizeof v > 10 ? 10 : sizeof v);                                       \
    }                                                                                       \
    static int cmp_##N(const void *a, const void *b) {                                      \
        V x, y;                                                                             \
        memcpy(&x, a, sizeof x);                                                            \
        memcpy(&y, b, sizeof y);                                                            \
        return (x > y) - (x < y);                                                           \
    }
PAIR_FNS(short, short)
PAIR_FNS(long, long)
PAIR_FNS(double, double)
PAIR_FNS(ldouble, long double)
PAIR_FNS(int, int)
PAIR_FNS(float, float)

#define PAIR(N, V, DT)                                                                      \
    {#DT, DT, sizeof(V), offsetof(struct { V v; int i; }, i), sizeof(struct { V v; int i; }), \
     set_##N, cmp_##N}

/* Value and index of item k on rank r: few distinct values, equal on ranks 2j and 2j + 1
 * (ties across ranks, which the indices decide: `r * 13` alone gave every rank below 5 a
 * different value), indices that tie too, large magnitudes for the 8-byte values. */
static long gen_v(const pair_t *t, int r, long k) {
    long v = (k * 7 + (r / 2) * 13) % 5 - 2;
    return t->vsize == 8 && t->ioff == 8 && k % 3 == 1 ? v << 40 : v;
}
static int gen_i(int r, long k) { return (int)((r * 5 + k) % 4) + (int)(k % 7) * 10; }

#define PATTERN 0xa5
#define SLACK 64

/* A buffer of `n` items placed per `mode` (0: its type map ends at an inaccessible page;
 * 1: it starts a page, pattern bytes after; 2: it starts 4 bytes into a page, pattern
 * bytes before and after), filled with the pattern. */
typedef struct {
    unsigned char *map, *p;
    size_t maplen, len, span;
} buf_t;

static size_t page;

static buf_t buf_new(const pair_t *t, long n, int mode) {
    buf_t b;
    b.len = n ? (size_t)n * t->extent - (t->extent - (t->ioff + 4)) : 0;
    size_t data = (b.len + SLACK + page - 1) / page * page;
    b.maplen = data + page;
    b.map = mmap(NULL, b.maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(b.map != MAP_FAILED);
    CHECK(mprotect(b.map + data, page, PROT_NONE) == 0);
    memset(b.map, PATTERN, data);
    b.p = mode == 0 ? b.map + data - b.len : b.map + (mode == 2 ? 4 : 0);
    b.span = (size_t)(b.map + data - b.p); /* accessible bytes from p */
    return b;
}

static void buf_free(buf_t *b) { munmap(b->map, b->maplen); }

/* Store item k (value x, index i). */
static void put(const pair_t *t, unsigned char *p, long k, long x, int i) {
    t->set(p + k * t->extent, x);
    memcpy(p + k * t->extent + t->ioff, &i, 4);
}

/* Fill items [0, n) of `b` with rank r's contribution, items from `first` on. */
static void fill(const pair_t *t, buf_t *b, long n, int r, long first) {
    for (long k = 0; k < n; k++) put(t, b->p, k, gen_v(t, r, first + k), gen_i(r, first + k));
}

/* Is byte `off` of a buffer of `n` items in the type map? */
static int in_map(const pair_t *t, size_t off, long n) {
    size_t k = off / t->extent, o = off % t->extent;
    return (long)k < n && (o < t->vsize || (o >= t->ioff && o < t->ioff + 4));
}

static int wrong(const pair_t *t, const char *what, long n, const char *detail, long k) {
    if (failures++ < 10)
        printf("rank %d: %s %s count %ld: %s at %ld\n", rank, t->name, what, n, detail, k);
    return 1;
}

/* The reduction over ranks [lo, hi) of item k into (value bytes, index). */
static void expect(const pair_t *t, int minloc, int lo, int hi, long k, unsigned char *v,
                   int *idx) {
    unsigned char x[32];
    t->set(v, gen_v(t, lo, k));
    *idx = gen_i(lo, k);
    for (int r = lo + 1; r < hi; r++) {
        t->set(x, gen_v(t, r, k));
        int c = t->cmp(x, v), i = gen_i(r, k);
        if ((minloc ? c < 0 : c > 0) || (c == 0 && i < *idx)) memcpy(v, x, t->vsize), *idx = i;
    }
}

/* Items [0, n) of `b` hold the reduction over ranks [lo, hi) of items from `first`; every
 * byte outside the type map of the buffer's `all` items holds the pattern. */
static void check(const pair_t *t, const char *what, buf_t *b, long n, long all, int minloc,
                  int lo, int hi, long first) {
    for (long k = 0; k < n; k++) {
        unsigned char v[32];
        int i, got;
        expect(t, minloc, lo, hi, first + k, v, &i);
        memcpy(&got, b->p + k * t->extent + t->ioff, 4);
        if (t->cmp(v, b->p + k * t->extent) || got != i) {
            wrong(t, what, n, "wrong value or index", k);
            break;
        }
    }
    for (size_t o = 0; o < b->span; o++)
        if (!in_map(t, o, all) && b->p[o] != PATTERN) {
            wrong(t, what, n, "byte outside the type map written", (long)o);
            break;
        }
    for (unsigned char *q = b->map; q < b->p; q++)
        if (*q != PATTERN) {
            wrong(t, what, n, "byte before the buffer written", (long)(q - b->p));
            break;
        }
}

enum { ALLREDUCE, REDUCE, SCAN, RSB, IALLREDUCE, IREDUCE, ISCAN, IRSB, RS, NCOLL };
static const char *coll_names[] = {"allreduce", "reduce", "scan", "reduce_scatter_block",
                                   "iallreduce", "ireduce", "iscan", "ireduce_scatter_block",
                                   "reduce_scatter"};

static void run(const pair_t *t, int coll, int inplace, int minloc, long n, int mode) {
    MPI_Op op = minloc ? MPI_MINLOC : MPI_MAXLOC;
    MPI_Request rq = MPI_REQUEST_NULL;
    int root = size - 1, blocks = (coll == RSB || coll == IRSB) ? size : 1;
    char what[96];
    snprintf(what, sizeof what, "%s%s %s mode %d", coll_names[coll], inplace ? " in place" : "",
             minloc ? "minloc" : "maxloc", mode);
    /* Items in a whole vector; MPI_Reduce_scatter's blocks are n, n + 1, ... items, ours
     * `mine` from item `first`. */
    long items = coll == RS ? n * size + (long)size * (size - 1) / 2 : n * blocks;
    long mine = coll == RS ? n + rank : n;
    long first = coll == RS ? n * rank + (long)rank * (rank - 1) / 2 : rank * n;
    buf_t s = buf_new(t, items, mode), r = buf_new(t, items, mode);
    fill(t, &s, items, rank, 0);
    /* In place, the input is in the receive buffer (at the root only for reduce). */
    int ip = inplace && (coll == REDUCE || coll == IREDUCE ? rank == root : 1);
    if (ip) fill(t, &r, items, rank, 0);
    const void *sb = ip ? MPI_IN_PLACE : s.p;
    MPI_Comm w = MPI_COMM_WORLD;
    switch (coll) {
    case ALLREDUCE: CHECK_RC(MPI_Allreduce(sb, r.p, (int)n, t->dt, op, w)); break;
    case REDUCE: CHECK_RC(MPI_Reduce(sb, r.p, (int)n, t->dt, op, root, w)); break;
    case SCAN: CHECK_RC(MPI_Scan(sb, r.p, (int)n, t->dt, op, w)); break;
    case RSB: CHECK_RC(MPI_Reduce_scatter_block(sb, r.p, (int)n, t->dt, op, w)); break;
    case IALLREDUCE: CHECK_RC(MPI_Iallreduce(sb, r.p, (int)n, t->dt, op, w, &rq)); break;
    case IREDUCE: CHECK_RC(MPI_Ireduce(sb, r.p, (int)n, t->dt, op, root, w, &rq)); break;
    case ISCAN: CHECK_RC(MPI_Iscan(sb, r.p, (int)n, t->dt, op, w, &rq)); break;
    case IRSB: CHECK_RC(MPI_Ireduce_scatter_block(sb, r.p, (int)n, t->dt, op, w, &rq)); break;
    case RS: {
        int counts[64];
        CHECK(size <= 64);
        for (int i = 0; i < size; i++) counts[i] = (int)n + i;
        CHECK_RC(MPI_Reduce_scatter(sb, r.p, counts, t->dt, op, w));
        break;
    }
    }
    CHECK_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    /* What the receive buffer holds: the whole reduction (allreduce, reduce at the root),
     * the prefix up to this rank (scan), this rank's block (reduce-scatter). In place, a
     * reduce-scatter's other blocks are not specified: only their holes are checked. */
    long all = ip ? items : mine;
    if (coll == ALLREDUCE || coll == IALLREDUCE) check(t, what, &r, n, all, minloc, 0, size, 0);
    if ((coll == REDUCE || coll == IREDUCE) && rank == root)
        check(t, what, &r, n, all, minloc, 0, size, 0);
    if ((coll == REDUCE || coll == IREDUCE) && rank != root && !inplace)
        check(t, what, &r, 0, 0, minloc, 0, size, 0); /* not written at all */
    if (coll == SCAN || coll == ISCAN) check(t, what, &r, n, all, minloc, 0, rank + 1, 0);
    if (coll == RSB || coll == IRSB || coll == RS)
        check(t, what, &r, mine, all, minloc, 0, size, first);
    /* The send buffer is only read. */
    if (!ip) {
        buf_t ref = buf_new(t, items, mode);
        fill(t, &ref, items, rank, 0);
        if (memcmp(ref.map, s.map, ref.maplen - page)) wrong(t, what, n, "send buffer written", 0);
        buf_free(&ref);
    }
    buf_free(&s);
    buf_free(&r);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    page = (size_t)sysconf(_SC_PAGESIZE);
    pair_t types[] = {
        PAIR(short, short, MPI_SHORT_INT),   PAIR(long, long, MPI_LONG_INT),
        PAIR(double, double, MPI_DOUBLE_INT), PAIR(ldouble, long double, MPI_LONG_DOUBLE_INT),
        PAIR(int, int, MPI_2INT),            PAIR(float, float, MPI_FLOAT_INT),
    };
    /* Packed bytes per buffer: one item, a few, both sides of the 4 KiB segment, the
     * point-to-point range, and (argument "big") the large-vector region. */
    long bytes[] = {1, 40, 4090, 4100, 9000, 65536 + 40, 600 * 1024};
    int nbytes = argc > 1 && !strcmp(argv[1], "big") ? 7 : 6;
    if (argc > 1 && !strcmp(argv[1], "pieces")) {
        /* MPI_2INT and MPI_FLOAT_INT (the last two types) at odd counts around 1 MiB. */
        static const int colls[] = {ALLREDUCE, REDUCE, IALLREDUCE, IREDUCE};
        static const long counts[] = {131071, 131073};
        for (size_t ti = 4; ti < 6; ti++)
            for (int ci = 0; ci < 2; ci++)
                for (int c = 0; c < 4; c++)
                    for (int inplace = 0; inplace < 2; inplace++)
                        for (int minloc = 0; minloc < 2; minloc++)
                            for (int mode = 0; mode < 3; mode++)
                                run(&types[ti], colls[c], inplace, minloc, counts[ci], mode);
        nbytes = 0;
    }
    for (size_t ti = 0; nbytes && ti < sizeof types / sizeof types[0]; ti++) {
        const pair_t *t = &types[ti];
        int psize;
        CHECK_RC(MPI_Type_size(t->dt, &psize));
        MPI_Aint lb, ext;
        CHECK_RC(MPI_Type_get_extent(t->dt, &lb, &ext));
        CHECK(psize == (int)(t->vsize + 4) && (size_t)ext == t->extent);
        for (int bi = 0; bi < nbytes; bi++) {
            long n = bytes[bi] / psize;
            if (n < 1) n = 1;
            for (int coll = 0; coll < NCOLL; coll++)
                for (int inplace = 0; inplace < 2; inplace++)
                    for (int minloc = 0; minloc < 2; minloc++)
                        for (int mode = 0; mode < 2; mode++) run(t, coll, inplace, minloc, n, mode);
        }
    }
    int all = 0;
    CHECK_RC(MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (rank == 0 && all == 0) printf("coll_pairs: all checks passed\n");
    MPI_Finalize();
    return all != 0;
}
