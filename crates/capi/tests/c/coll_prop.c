/* Property test of the blocking collectives: for random counts, roots, operations,
 * datatypes (contiguous MPI_INT and a strided vector type with holes) and MPI_IN_PLACE
 * variants, every result is compared with a reference computed locally (each rank can
 * regenerate every rank's contribution). All ranks draw the same random numbers.
 * Prints "coll_prop: all checks passed" on rank 0. Argument: number of iterations. */
#include "check.h"
#include <string.h>

static unsigned long long rng_state = 88172645463325252ULL;
static unsigned rnd(unsigned n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return n ? (unsigned)(rng_state % n) : 0;
}

#define SENT (-999)

/* A datatype seen as ints: per item, `per` data ints at `pos` within `ext` ints. */
typedef struct {
    MPI_Datatype t;
    int per, ext;
    int pos[2];
    const char *name;
} ty;

static int at(const ty *t, int k) { return (k / t->per) * t->ext + t->pos[k % t->per]; }
/* Ints needed for `count` items. */
static int span(const ty *t, int count) { return count * t->ext + 1; }

static int val(int rank, int k, int it, int what) {
    return (rank * 7919 + k * 31 + it * 101 + what * 13) % 1000 - 300;
}

static int *alloc_ints(int n) {
    int *p = malloc((n + 1) * sizeof(int));
    for (int i = 0; i <= n; i++) p[i] = SENT;
    return p;
}

/* Fill elements [0, n) of `count` items with val(rank, k0 + k, ...). */
static void fill(const ty *t, int *b, int n, int rank, int k0, int it, int what) {
    for (int k = 0; k < n; k++) b[at(t, k)] = val(rank, k0 + k, it, what);
}

static int apply(MPI_Op op, int a, int b) {
    if (op == MPI_SUM) return a + b;
    if (op == MPI_MAX) return a > b ? a : b;
    if (op == MPI_MIN) return a < b ? a : b;
    if (op == MPI_BXOR) return a ^ b;
    if (op == MPI_BAND) return a & b;
    return a | b; /* MPI_BOR */
}

/* Reduction over ranks lo..hi-1 of element k. */
static int red(MPI_Op op, int lo, int hi, int k, int it, int what) {
    int acc = val(lo, k, it, what);
    for (int r = lo + 1; r < hi; r++) acc = apply(op, acc, val(r, k, it, what));
    return acc;
}

/* Non-commutative op on pairs of unsigned (affine maps x -> a x + b): p o q. */
static void affine(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    unsigned *p = in, *q = inout;
    for (int i = 0; i < *len; i++) {
        unsigned a = p[2 * i] * q[2 * i], b = p[2 * i] * q[2 * i + 1] + p[2 * i + 1];
        q[2 * i] = a;
        q[2 * i + 1] = b;
    }
}
static void aff_val(int rank, int k, int it, unsigned *o) {
    o[0] = 2u * (unsigned)(rank * 3 + k + it) + 1u;
    o[1] = (unsigned)(rank * 17 + k * 5 + it);
}
static void aff_red(int lo, int hi, int k, int it, unsigned *o) {
    aff_val(lo, k, it, o);
    for (int r = lo + 1; r < hi; r++) {
        unsigned x[2];
        aff_val(r, k, it, x);
        unsigned a = o[0] * x[0], b = o[0] * x[1] + o[1];
        o[0] = a;
        o[1] = b;
    }
}

static void check_holes(const ty *t, const int *b, int count) {
    int n = span(t, count);
    int k = 0, next = count * t->per > 0 ? at(t, 0) : -1;
    for (int i = 0; i < n; i++) {
        if (i == next) {
            k++;
            next = k < count * t->per ? at(t, k) : -1;
        } else {
            CHECK(b[i] == SENT);
        }
    }
}

int main(int argc, char **argv) {
    int rank, size;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    int iters = argc > 1 ? atoi(argv[1]) : 30;
    /* Optional second argument: run on a duplicate of world ("dup") or on a split of it
     * with the ranks in reverse order ("rsplit") instead of on world itself. */
    const char *on = argc > 2 ? argv[2] : "world";
    MPI_Comm comm = MPI_COMM_WORLD;
    if (!strcmp(on, "dup")) CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    if (!strcmp(on, "rsplit")) CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, 7, size - rank, &comm));
    MPI_Comm_rank(comm, &rank);

    ty types[2];
    types[0] = (ty){MPI_INT, 1, 1, {0, 0}, "int"};
    MPI_Datatype vec;
    CHECK_RC(MPI_Type_vector(2, 1, 2, MPI_INT, &vec));
    CHECK_RC(MPI_Type_commit(&vec));
    types[1] = (ty){vec, 2, 3, {0, 2}, "vector"};
    MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_BXOR, MPI_BAND, MPI_BOR};
    MPI_Datatype pair;
    CHECK_RC(MPI_Type_contiguous(2, MPI_UNSIGNED, &pair));
    CHECK_RC(MPI_Type_commit(&pair));
    MPI_Op aff;
    CHECK_RC(MPI_Op_create(affine, 0, &aff));

    /* Runs of small broadcasts from one root, then the next, with no other collective in
     * between (a shared-memory root may run ahead of its readers). */
    for (int i = 0; i < 400; i++) {
        int root = (i / 50) % size, n = 1 + i % 14, v[14];
        for (int k = 0; k < n; k++) v[k] = rank == root ? val(root, k, i, 9) : SENT;
        CHECK_RC(MPI_Bcast(v, n, MPI_INT, root, comm));
        for (int k = 0; k < n; k++) CHECK(v[k] == val(root, k, i, 9));
    }

    for (int it = 0; it < iters; it++) {
        int big = rnd(4);
        int count = big == 0 ? (int)rnd(3) : big == 1 ? 1 + (int)rnd(50) : big == 2 ? 200 + (int)rnd(3000) : 5000 + (int)rnd(20000);
        int root = rnd(size);
        const ty *t = &types[rnd(2)];
        MPI_Op op = ops[rnd(6)];
        int inpl = rnd(2);
        int n = count * t->per; /* data ints */
        int sp = span(t, count);

        /* bcast */
        int *b = alloc_ints(sp);
        if (rank == root) fill(t, b, n, root, 0, it, 1);
        CHECK_RC(MPI_Bcast(b, count, t->t, root, comm));
        for (int k = 0; k < n; k++) CHECK(b[at(t, k)] == val(root, k, it, 1));
        check_holes(t, b, count);
        free(b);

        /* reduce, allreduce, scan, exscan */
#ifdef OPEN_MPI
        /* Open MPI (used to validate this test) rejects predefined ops on derived types. */
        t = &types[0];
        n = count;
        sp = span(t, count);
#endif
        int *s = alloc_ints(sp), *r = alloc_ints(sp);
        fill(t, s, n, rank, 0, it, 2);
        int *src = s;
        if (inpl && rank == root) { memcpy(r, s, (sp + 1) * sizeof(int)); src = MPI_IN_PLACE; }
        CHECK_RC(MPI_Reduce(src, r, count, t->t, op, root, comm));
        if (rank == root) {
            for (int k = 0; k < n; k++) CHECK(r[at(t, k)] == red(op, 0, size, k, it, 2));
            check_holes(t, r, count);
        }
        free(r);
        r = alloc_ints(sp);
        src = s;
        if (inpl) { memcpy(r, s, (sp + 1) * sizeof(int)); src = MPI_IN_PLACE; }
        CHECK_RC(MPI_Allreduce(src, r, count, t->t, op, comm));
        for (int k = 0; k < n; k++) CHECK(r[at(t, k)] == red(op, 0, size, k, it, 2));
        check_holes(t, r, count);
        free(r);
        r = alloc_ints(sp);
        src = s;
        if (inpl) { memcpy(r, s, (sp + 1) * sizeof(int)); src = MPI_IN_PLACE; }
        CHECK_RC(MPI_Scan(src, r, count, t->t, op, comm));
        for (int k = 0; k < n; k++) CHECK(r[at(t, k)] == red(op, 0, rank + 1, k, it, 2));
        check_holes(t, r, count);
        free(r);
        r = alloc_ints(sp);
        src = s;
        if (inpl) { memcpy(r, s, (sp + 1) * sizeof(int)); src = MPI_IN_PLACE; }
        CHECK_RC(MPI_Exscan(src, r, count, t->t, op, comm));
        if (rank > 0) {
            for (int k = 0; k < n; k++) CHECK(r[at(t, k)] == red(op, 0, rank, k, it, 2));
            check_holes(t, r, count);
        }
        free(r);
        free(s);

        /* allreduce on other predefined types: sums of small integers are exact in float
         * and double whatever the order of combination, max and min always */
        {
            MPI_Op fops[] = {MPI_SUM, MPI_MAX, MPI_MIN};
            MPI_Op fo = fops[rnd(3)];
            int ti = rnd(4);
#define TYPED_ALLREDUCE(T, MT)                                                               \
    do {                                                                                     \
        T *x = malloc((count + 1) * sizeof(T)), *y = malloc((count + 1) * sizeof(T));       \
        for (int k = 0; k < count; k++) x[k] = (T)val(rank, k, it, 8);                     \
        y[count] = (T)SENT;                                                                  \
        CHECK_RC(MPI_Allreduce(x, y, count, MT, fo, comm));                                  \
        for (int k = 0; k < count; k++) {                                                    \
            T e = (T)val(0, k, it, 8);                                                       \
            for (int q = 1; q < size; q++) {                                                 \
                T v = (T)val(q, k, it, 8);                                                   \
                e = fo == MPI_SUM ? (T)(e + v) : fo == MPI_MAX ? (v > e ? v : e) : (v < e ? v : e); \
            }                                                                                \
            CHECK(y[k] == e);                                                                \
        }                                                                                    \
        CHECK(y[count] == (T)SENT);                                                          \
        free(x);                                                                             \
        free(y);                                                                             \
    } while (0)
            if (ti == 0) TYPED_ALLREDUCE(float, MPI_FLOAT);
            if (ti == 1) TYPED_ALLREDUCE(double, MPI_DOUBLE);
            if (ti == 2) TYPED_ALLREDUCE(long long, MPI_LONG_LONG);
            if (ti == 3) TYPED_ALLREDUCE(unsigned, MPI_UNSIGNED);
#undef TYPED_ALLREDUCE
        }

        /* non-commutative user op in rank order */
        {
            int c = count > 3000 ? 3000 : count;
            unsigned *x = malloc((2 * c + 2) * sizeof(unsigned)), *y = malloc((2 * c + 2) * sizeof(unsigned));
            for (int k = 0; k < c; k++) aff_val(rank, k, it, x + 2 * k);
            CHECK_RC(MPI_Allreduce(x, y, c, pair, aff, comm));
            for (int k = 0; k < c; k++) {
                unsigned e[2];
                aff_red(0, size, k, it, e);
                CHECK(y[2 * k] == e[0] && y[2 * k + 1] == e[1]);
            }
            CHECK_RC(MPI_Reduce(x, y, c, pair, aff, root, comm));
            if (rank == root)
                for (int k = 0; k < c; k++) {
                    unsigned e[2];
                    aff_red(0, size, k, it, e);
                    CHECK(y[2 * k] == e[0] && y[2 * k + 1] == e[1]);
                }
            CHECK_RC(MPI_Scan(x, y, c, pair, aff, comm));
            for (int k = 0; k < c; k++) {
                unsigned e[2];
                aff_red(0, rank + 1, k, it, e);
                CHECK(y[2 * k] == e[0] && y[2 * k + 1] == e[1]);
            }
            CHECK_RC(MPI_Exscan(x, y, c, pair, aff, comm));
            if (rank > 0)
                for (int k = 0; k < c; k++) {
                    unsigned e[2];
                    aff_red(0, rank, k, it, e);
                    CHECK(y[2 * k] == e[0] && y[2 * k + 1] == e[1]);
                }
            free(x);
            free(y);
        }

        /* reduce_scatter_block and reduce_scatter (random counts) */
        {
            int blk = count > 4000 ? 4000 : count;
            int tot = blk * size;
            int *x = alloc_ints(span(t, tot)), *y = alloc_ints(span(t, tot));
            fill(t, x, tot * t->per, rank, 0, it, 3);
            int *xs = x;
            if (inpl) { memcpy(y, x, (span(t, tot) + 1) * sizeof(int)); xs = MPI_IN_PLACE; }
            CHECK_RC(MPI_Reduce_scatter_block(xs, y, blk, t->t, op, comm));
            for (int k = 0; k < blk * t->per; k++)
                CHECK(y[at(t, k)] == red(op, 0, size, rank * blk * t->per + k, it, 3));
            int *cnts = malloc(size * sizeof(int));
            int tot2 = 0, before = 0;
            for (int i = 0; i < size; i++) {
                cnts[i] = rnd(blk + 1);
                if (i < rank) before += cnts[i];
                tot2 += cnts[i];
            }
            free(y);
            y = alloc_ints(span(t, tot2));
            CHECK_RC(MPI_Reduce_scatter(x, y, cnts, t->t, op, comm));
            for (int k = 0; k < cnts[rank] * t->per; k++)
                CHECK(y[at(t, k)] == red(op, 0, size, before * t->per + k, it, 3));
            check_holes(t, y, cnts[rank]);
            free(cnts);
            free(x);
            free(y);
        }

        /* gather / scatter / allgather / alltoall with blocks of `blk` items */
        {
            int blk = count > 3000 ? 3000 : count;
            int bn = blk * t->per;
            int *x = alloc_ints(span(t, blk)), *g = alloc_ints(span(t, blk * size));
            fill(t, x, bn, rank, 0, it, 4);
            int *xs = x;
            if (inpl && rank == root) {
                for (int k = 0; k < bn; k++) g[at(t, root * bn + k)] = val(rank, k, it, 4);
                xs = MPI_IN_PLACE;
            }
            CHECK_RC(MPI_Gather(xs, blk, t->t, g, blk, t->t, root, comm));
            if (rank == root)
                for (int i = 0; i < size; i++)
                    for (int k = 0; k < bn; k++) CHECK(g[at(t, i * bn + k)] == val(i, k, it, 4));
            /* scatter back what was gathered (root holds val(i, k)) */
            int *y = alloc_ints(span(t, blk));
            if (rank != root) { free(g); g = alloc_ints(span(t, blk * size)); }
            int *ys = y;
            if (inpl && rank == root) ys = MPI_IN_PLACE;
            CHECK_RC(MPI_Scatter(g, blk, t->t, ys, blk, t->t, root, comm));
            if (!(inpl && rank == root)) {
                for (int k = 0; k < bn; k++) CHECK(y[at(t, k)] == val(rank, k, it, 4));
                check_holes(t, y, blk);
            }
            free(g);
            g = alloc_ints(span(t, blk * size));
            xs = x;
            if (inpl) { for (int k = 0; k < bn; k++) g[at(t, rank * bn + k)] = val(rank, k, it, 4); xs = MPI_IN_PLACE; }
            CHECK_RC(MPI_Allgather(xs, blk, t->t, g, blk, t->t, comm));
            for (int i = 0; i < size; i++)
                for (int k = 0; k < bn; k++) CHECK(g[at(t, i * bn + k)] == val(i, k, it, 4));
            check_holes(t, g, blk * size);
            free(g);
            /* alltoall: block j of rank i carries val(i, j * bn + k, it, 5) */
            int *a = alloc_ints(span(t, blk * size)), *z = alloc_ints(span(t, blk * size));
            fill(t, a, bn * size, rank, 0, it, 5);
            int *as = a;
            if (inpl) { memcpy(z, a, (span(t, blk * size) + 1) * sizeof(int)); as = MPI_IN_PLACE; }
            CHECK_RC(MPI_Alltoall(as, blk, t->t, z, blk, t->t, comm));
            for (int i = 0; i < size; i++)
                for (int k = 0; k < bn; k++) CHECK(z[at(t, i * bn + k)] == val(i, rank * bn + k, it, 5));
            check_holes(t, z, blk * size);
            free(a);
            free(z);
            free(x);
            free(y);
        }

        /* v-variants: random counts, blocks placed in reverse rank order with gaps */
        {
            int m = count > 2000 ? 2000 : count;
            int *cnt = malloc(size * sizeof(int)), *dis = malloc(size * sizeof(int));
            int *cm = malloc(size * size * sizeof(int)); /* cm[i*size+j]: i sends j */
            for (int i = 0; i < size * size; i++) cm[i] = rnd(m + 1);
            for (int i = 0; i < size; i++) cnt[i] = cm[i * size + i];
            int off = 0;
            for (int i = size - 1; i >= 0; i--) { dis[i] = off; off += cnt[i] + (int)rnd(3); }
            int tot = off;
            /* gatherv of cnt[rank] items */
            int me = cnt[rank] * t->per;
            int *x = alloc_ints(span(t, cnt[rank])), *g = alloc_ints(span(t, tot));
            fill(t, x, me, rank, 0, it, 6);
            CHECK_RC(MPI_Gatherv(x, cnt[rank], t->t, g, cnt, dis, t->t, root, comm));
            if (rank == root)
                for (int i = 0; i < size; i++)
                    for (int k = 0; k < cnt[i] * t->per; k++)
                        CHECK(g[at(t, dis[i] * t->per + k)] == val(i, k, it, 6));
            int *y = alloc_ints(span(t, cnt[rank]));
            CHECK_RC(MPI_Scatterv(g, cnt, dis, t->t, y, cnt[rank], t->t, root, comm));
            for (int k = 0; k < me; k++) CHECK(y[at(t, k)] == val(rank, k, it, 6));
            check_holes(t, y, cnt[rank]);
            free(g);
            g = alloc_ints(span(t, tot));
            CHECK_RC(MPI_Allgatherv(x, cnt[rank], t->t, g, cnt, dis, t->t, comm));
            for (int i = 0; i < size; i++)
                for (int k = 0; k < cnt[i] * t->per; k++)
                    CHECK(g[at(t, dis[i] * t->per + k)] == val(i, k, it, 6));
            free(g);
            free(x);
            free(y);
            /* alltoallv: rank i sends cm[i*size+j] items to j, blocks at reversed offsets */
            int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
            int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
            int so = 0, ro = 0;
            for (int j = size - 1; j >= 0; j--) {
                sc[j] = cm[rank * size + j];
                sd[j] = so;
                so += sc[j] + 1;
                rc[j] = cm[j * size + rank];
                rd[j] = ro;
                ro += rc[j] + 2;
            }
            int *a = alloc_ints(span(t, so)), *z = alloc_ints(span(t, ro));
            for (int j = 0; j < size; j++)
                for (int k = 0; k < sc[j] * t->per; k++)
                    a[at(t, sd[j] * t->per + k)] = val(rank, j * 100000 + k, it, 7);
            CHECK_RC(MPI_Alltoallv(a, sc, sd, t->t, z, rc, rd, t->t, comm));
            for (int j = 0; j < size; j++)
                for (int k = 0; k < rc[j] * t->per; k++)
                    CHECK(z[at(t, rd[j] * t->per + k)] == val(j, rank * 100000 + k, it, 7));
            /* alltoallw with the same layout in bytes, received as contiguous ints */
            int *swb = malloc(size * sizeof(int)), *rwb = malloc(size * sizeof(int));
            int *rci = malloc(size * sizeof(int));
            MPI_Datatype *sts = malloc(size * sizeof(MPI_Datatype)), *rts = malloc(size * sizeof(MPI_Datatype));
            int rio = 0;
            for (int j = 0; j < size; j++) {
                swb[j] = sd[j] * t->ext * (int)sizeof(int);
                sts[j] = t->t;
                rci[j] = rc[j] * t->per;
                rwb[j] = rio * (int)sizeof(int);
                rio += rci[j];
                rts[j] = MPI_INT;
            }
            int *w = alloc_ints(rio);
            CHECK_RC(MPI_Alltoallw(a, sc, swb, sts, w, rci, rwb, rts, comm));
            for (int j = 0, o = 0; j < size; j++)
                for (int k = 0; k < rci[j]; k++, o++) CHECK(w[o] == val(j, rank * 100000 + k, it, 7));
            CHECK(w[rio] == SENT);
            /* alltoallw in place (blocking, then nonblocking), contiguous ints with a
             * one-int gap after each piece: counts symmetric per pair, as in place needs */
            for (int nb = 0; nb < 2; nb++) {
                int ipo = 0;
                for (int j = 0; j < size; j++) {
                    rci[j] = (rank + j + it + nb) % 5 * 3;
                    rwb[j] = ipo * (int)sizeof(int);
                    ipo += rci[j] + 1;
                }
                int *v = alloc_ints(ipo);
                for (int j = 0; j < size; j++)
                    for (int k = 0; k < rci[j]; k++) v[rwb[j] / (int)sizeof(int) + k] = val(rank, j * 100000 + k, it, 8 + nb);
                if (nb) {
                    MPI_Request q;
                    CHECK_RC(MPI_Ialltoallw(MPI_IN_PLACE, NULL, NULL, NULL, v, rci, rwb, rts, comm, &q));
                    CHECK_RC(MPI_Wait(&q, MPI_STATUS_IGNORE));
                } else {
                    CHECK_RC(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, v, rci, rwb, rts, comm));
                }
                for (int j = 0; j < size; j++) {
                    int *piece = v + rwb[j] / (int)sizeof(int);
                    for (int k = 0; k < rci[j]; k++) CHECK(piece[k] == val(j, rank * 100000 + k, it, 8 + nb));
                    CHECK(piece[rci[j]] == SENT);
                }
                free(v);
            }
            free(w); free(swb); free(rwb); free(rci); free(sts); free(rts);
            free(a); free(z); free(sc); free(sd); free(rc); free(rd);
            free(cnt); free(dis); free(cm);
        }
    }
    if (comm != MPI_COMM_WORLD) CHECK_RC(MPI_Comm_free(&comm));
    CHECK_RC(MPI_Op_free(&aff));
    CHECK_RC(MPI_Type_free(&pair));
    CHECK_RC(MPI_Type_free(&vec));
    if (rank == 0) printf("coll_prop: %d random rounds on %d ranks (%s): ok\ncoll_prop: all checks passed\n", iters, size, on);
    MPI_Finalize();
    return 0;
}
