/* The nonblocking collectives beyond coll_nb.c — Igatherv, Iscatterv, Iallgatherv,
 * Ialltoallv, Ialltoallw, Ireduce_scatter(_block), Iscan, Iexscan, Iallreduce/Ireduce with
 * a user-defined non-commutative operation, and the neighbourhood I* forms on Cartesian
 * grids — must progress without blocking at start, and match a local reference for random
 * sizes, roots, ops, datatypes (contiguous and strided) and MPI_IN_PLACE variants.
 *
 * Every collective is posted with the "late rank" pattern: all ranks but one post it and
 * then send a token to the late rank, which receives every token before posting. An
 * implementation that completes any of them at start deadlocks (a rank whose part needs
 * the late rank never sends its token); the test harness runs it under mpirun --timeout.
 * Prints "coll_nb_more: all checks passed" on rank 0. */
#include "check.h"
#include <string.h>

static unsigned long long rs = 0x2545F4914F6CDD1DULL;
static unsigned rnd(unsigned n) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return n ? (unsigned)(rs % n) : 0;
}
static int val(int rank, int k, int it, int what) {
    return (rank * 7919 + k * 31 + it * 101 + what * 13) % 1000 - 300;
}

static int rank, size, late_, post_no_;
static MPI_Datatype vec, pair, pairvec;

/* Post `call` on every rank, the late rank last (see the header). */
#define POST(late, call)                                                                   \
    do {                                                                                   \
        late_ = (late);                                                                    \
        int tk_ = rank, tag_ = 100 + post_no_++ % 10000;                                   \
        if (rank == late_) {                                                               \
            for (int q_ = 1; q_ < size; q_++)                                              \
                CHECK_RC(MPI_Recv(&tk_, 1, MPI_INT, MPI_ANY_SOURCE, tag_, MPI_COMM_WORLD,  \
                                  MPI_STATUS_IGNORE));                                     \
            CHECK_RC(call);                                                                \
        } else {                                                                           \
            CHECK_RC(call);                                                                \
            CHECK_RC(MPI_Send(&tk_, 1, MPI_INT, late_, tag_, MPI_COMM_WORLD));             \
        }                                                                                  \
    } while (0)

#define WAIT(r)                                                                            \
    do {                                                                                   \
        CHECK_RC(MPI_Wait(&(r), MPI_STATUS_IGNORE));                                       \
        CHECK((r) == MPI_REQUEST_NULL);                                                    \
    } while (0)

/* Element k (in packed order) of items with `per` ints each, `ext` ints apart, the ints of
 * one item 2 apart (MPI_INT: per 1, ext 1; vec: per 2, ext 3). */
static int at(int k, int per, int ext) { return (k / per) * ext + (k % per) * 2; }

/* ---- reductions: ints with a predefined op, or affine maps (a, b) with a user op ---- */

/* (a1, b1) o (a2, b2) = (a1 a2, a1 b2 + b1): x -> a x + b composed, associative and not
 * commutative (arithmetic mod 2^32). */
static void affine_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    unsigned *x = in, *y = inout;
    int per = *dt == pairvec ? 2 : 1, ext = *dt == pairvec ? 3 : 1;
    CHECK(*dt == pair || *dt == pairvec);
    for (int i = 0; i < *len * per; i++) {
        int p = at(i, per, ext) * 2;
        unsigned a = x[p] * y[p], b = x[p] * y[p + 1] + x[p + 1];
        y[p] = a;
        y[p + 1] = b;
    }
}

typedef struct {
    int user;        /* 0: ints with `op`; 1: affine pairs with a user op */
    MPI_Op op;       /* predefined op (user == 0) */
    MPI_Datatype t;  /* MPI_INT, pair or pairvec */
    int per, ext;    /* elements per item, item extent in elements */
} Red;

static Red pick_red(void) {
    MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_BXOR};
    Red r;
    memset(&r, 0, sizeof r);
    r.user = rnd(2);
    if (!r.user) {
        r.op = ops[rnd(4)];
        r.t = MPI_INT;
        r.per = r.ext = 1;
    } else {
        int strided = rnd(2);
        r.t = strided ? pairvec : pair;
        r.per = strided ? 2 : 1;
        r.ext = strided ? 3 : 1;
    }
    return r;
}
/* Unit size of the buffers (int or pair of unsigned). */
static size_t unit(const Red *r) { return r->user ? 2 * sizeof(unsigned) : sizeof(int); }
static void *rbuf(const Red *r, int items) { return calloc((size_t)items * r->ext + 1, unit(r)); }
/* Store rank r's element k (tag w) at element position k of buf. */
static void put(const Red *R, void *buf, int k, int r, int it, int w) {
    int p = at(k, R->per, R->ext), v = val(r, k, it, w);
    if (R->user) {
        ((unsigned *)buf)[2 * p] = 2u * (unsigned)v + 1u;
        ((unsigned *)buf)[2 * p + 1] = (unsigned)v;
    } else {
        ((int *)buf)[p] = v;
    }
}
/* Check element k of buf against the reduction of ranks lo..hi-1 (rank order) of element
 * src_k (tag w). */
static void expect(const Red *R, const void *buf, int k, int src_k, int lo, int hi, int it, int w) {
    int p = at(k, R->per, R->ext);
    if (R->user) {
        unsigned a = 1, b = 0; /* identity */
        for (int r = lo; r < hi; r++) {
            int v = val(r, src_k, it, w);
            unsigned a2 = 2u * (unsigned)v + 1u, b2 = (unsigned)v;
            b = a * b2 + b;
            a = a * a2;
        }
        CHECK(((const unsigned *)buf)[2 * p] == a && ((const unsigned *)buf)[2 * p + 1] == b);
    } else {
        int e = val(lo, src_k, it, w);
        for (int r = lo + 1; r < hi; r++) {
            int v = val(r, src_k, it, w);
            e = R->op == MPI_SUM ? e + v : R->op == MPI_MAX ? (v > e ? v : e) : R->op == MPI_MIN ? (v < e ? v : e) : (e ^ v);
        }
        CHECK(((const int *)buf)[p] == e);
    }
}
static MPI_Op user_op(const Red *R, MPI_Op *made) {
    if (!R->user) return R->op;
    CHECK_RC(MPI_Op_create(affine_fn, 0, made));
    return *made;
}

static void test_reductions(MPI_Comm comm, int it) {
    MPI_Request q;
    /* Iallreduce and Ireduce (the op is freed right after posting: the operation must
     * still complete with it) */
    {
        Red R = pick_red();
        int count = rnd(6), root = rnd(size), in_place = rnd(2);
        MPI_Op made = MPI_OP_NULL, op = user_op(&R, &made);
        void *s = rbuf(&R, count), *ar = rbuf(&R, count);
        for (int k = 0; k < count * R.per; k++) put(&R, in_place ? ar : s, k, rank, it, 1);
        POST(0, MPI_Iallreduce(in_place ? MPI_IN_PLACE : s, ar, count, R.t, op, comm, &q));
        if (made != MPI_OP_NULL) CHECK_RC(MPI_Op_free(&made));
        WAIT(q);
        for (int k = 0; k < count * R.per; k++) expect(&R, ar, k, k, 0, size, it, 1);
        if (R.per == 2) /* holes untouched */
            for (int i = 0; i < count; i++) CHECK(((unsigned *)ar)[2 * (3 * i + 1)] == 0);
        op = user_op(&R, &made);
        void *rr = rbuf(&R, count), *s2 = rbuf(&R, count);
        int ip = in_place && rank == root;
        for (int k = 0; k < count * R.per; k++) put(&R, ip ? rr : s2, k, rank, it, 2);
        POST((root + 1) % size, MPI_Ireduce(ip ? MPI_IN_PLACE : s2, rr, count, R.t, op, root, comm, &q));
        WAIT(q);
        if (made != MPI_OP_NULL) CHECK_RC(MPI_Op_free(&made));
        if (rank == root)
            for (int k = 0; k < count * R.per; k++) expect(&R, rr, k, k, 0, size, it, 2);
        free(s); free(ar); free(rr); free(s2);
    }
    /* Iscan and Iexscan */
    for (int ex = 0; ex < 2; ex++) {
        Red R = pick_red();
        int count = rnd(6), in_place = rnd(2);
        MPI_Op made = MPI_OP_NULL, op = user_op(&R, &made);
        void *s = rbuf(&R, count), *out = rbuf(&R, count), *before = rbuf(&R, count);
        for (int k = 0; k < count * R.per; k++) put(&R, in_place ? out : s, k, rank, it, 3 + ex);
        memcpy(before, out, (size_t)count * R.ext * unit(&R));
        if (ex)
            POST(0, MPI_Iexscan(in_place ? MPI_IN_PLACE : s, out, count, R.t, op, comm, &q));
        else
            POST(0, MPI_Iscan(in_place ? MPI_IN_PLACE : s, out, count, R.t, op, comm, &q));
        WAIT(q);
        if (made != MPI_OP_NULL) CHECK_RC(MPI_Op_free(&made));
        if (ex && rank == 0)
            CHECK(memcmp(before, out, (size_t)count * R.ext * unit(&R)) == 0);
        else
            for (int k = 0; k < count * R.per; k++) expect(&R, out, k, k, 0, ex ? rank : rank + 1, it, 3 + ex);
        free(s); free(out); free(before);
    }
    /* Ireduce_scatter_block and Ireduce_scatter */
    for (int v = 0; v < 2; v++) {
        Red R = pick_red();
        int *counts = malloc(size * sizeof(int)), total = 0, in_place = rnd(2), blk = rnd(4);
        for (int i = 0; i < size; i++) total += counts[i] = v ? (int)rnd(4) : blk;
        int before = 0;
        for (int i = 0; i < rank; i++) before += counts[i];
        MPI_Op made = MPI_OP_NULL, op = user_op(&R, &made);
        void *s = rbuf(&R, total), *out = rbuf(&R, in_place ? total : counts[rank]);
        for (int k = 0; k < total * R.per; k++) put(&R, in_place ? out : s, k, rank, it, 5 + v);
        void *sb = in_place ? MPI_IN_PLACE : s;
        if (v)
            POST(0, MPI_Ireduce_scatter(sb, out, counts, R.t, op, comm, &q));
        else
            POST(size - 1, MPI_Ireduce_scatter_block(sb, out, blk, R.t, op, comm, &q));
        WAIT(q);
        if (made != MPI_OP_NULL) CHECK_RC(MPI_Op_free(&made));
        for (int k = 0; k < counts[rank] * R.per; k++) expect(&R, out, k, before * R.per + k, 0, size, it, 5 + v);
        free(counts); free(s); free(out);
    }
}

/* ---- v and w variants of gather/scatter/allgather/alltoall ---- */

/* Blocks of `counts[i]` items placed in reverse rank order with one free item between
 * them: fills displs, returns the total number of items. */
static int reverse_layout(const int *counts, int *displs, int n) {
    int pos = 0;
    for (int i = n - 1; i >= 0; i--) {
        displs[i] = pos;
        pos += counts[i] + 1;
    }
    return pos;
}

static void test_vectors(MPI_Comm comm, int it) {
    MPI_Request q;
    int strided = rnd(2), per = strided ? 2 : 1, ext = strided ? 3 : 1;
    MPI_Datatype t = strided ? vec : MPI_INT;
    int root = rnd(size), in_place = rnd(2);
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int));
    for (int i = 0; i < size; i++) counts[i] = rnd(4);
    int items = reverse_layout(counts, displs, size);
    int len = items * ext + 1;
    int *buf = calloc(len, sizeof(int)), *ex = calloc(len, sizeof(int));
    int *mine = calloc(4 * ext + 1, sizeof(int));

    /* Igatherv: the root gathers, so a rank it waits for posts last */
    int ip = in_place && rank == root;
    for (int k = 0; k < counts[rank] * per; k++) {
        mine[at(k, per, ext)] = val(rank, k, it, 11);
        if (ip) buf[at(displs[rank] * per + k, per, ext)] = val(rank, k, it, 11);
    }
    POST((root + 1) % size, MPI_Igatherv(ip ? MPI_IN_PLACE : mine, counts[rank], t, buf, counts, displs, t, root, comm, &q));
    WAIT(q);
    if (rank == root) {
        for (int i = 0; i < size; i++)
            for (int k = 0; k < counts[i] * per; k++) ex[at(displs[i] * per + k, per, ext)] = val(i, k, it, 11);
        CHECK(memcmp(buf, ex, len * sizeof(int)) == 0);
    }

    /* Iscatterv: everybody waits for the root, which posts last */
    memset(buf, 0, len * sizeof(int));
    memset(mine, 0, (4 * ext + 1) * sizeof(int));
    if (rank == root)
        for (int i = 0; i < size; i++)
            for (int k = 0; k < counts[i] * per; k++) buf[at(displs[i] * per + k, per, ext)] = val(i, k, it, 12);
    POST(root, MPI_Iscatterv(buf, counts, displs, t, ip ? MPI_IN_PLACE : mine, counts[rank], t, root, comm, &q));
    WAIT(q);
    if (!ip) {
        memset(ex, 0, len * sizeof(int));
        for (int k = 0; k < counts[rank] * per; k++) ex[at(k, per, ext)] = val(rank, k, it, 12);
        CHECK(memcmp(mine, ex, (4 * ext + 1) * sizeof(int)) == 0);
    }

    /* Iallgatherv */
    memset(buf, 0, len * sizeof(int));
    for (int k = 0; k < counts[rank] * per; k++) {
        mine[at(k, per, ext)] = val(rank, k, it, 13);
        if (in_place) buf[at(displs[rank] * per + k, per, ext)] = val(rank, k, it, 13);
    }
    POST(0, MPI_Iallgatherv(in_place ? MPI_IN_PLACE : mine, counts[rank], t, buf, counts, displs, t, comm, &q));
    WAIT(q);
    memset(ex, 0, len * sizeof(int));
    for (int i = 0; i < size; i++)
        for (int k = 0; k < counts[i] * per; k++) ex[at(displs[i] * per + k, per, ext)] = val(i, k, it, 13);
    CHECK(memcmp(buf, ex, len * sizeof(int)) == 0);
    free(buf); free(ex); free(mine);

    /* Ialltoallv: rank i sends cnt(i, j) items to j (symmetric when in place) */
#define CNT(i, j) (in_place ? ((i) + (j) + it) % 3 : ((i) + 2 * (j) + it) % 4)
    int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    int spos = 0;
    for (int j = 0; j < size; j++) {
        sc[j] = CNT(rank, j);
        sd[j] = spos;
        spos += sc[j] + 1;
        rc[j] = CNT(j, rank);
    }
    int ritems = reverse_layout(rc, rd, size);
    int *sb = calloc(spos * ext + 1, sizeof(int)), *rb = calloc(ritems * ext + 1, sizeof(int));
    int *rex = calloc(ritems * ext + 1, sizeof(int));
    for (int j = 0; j < size; j++)
        for (int k = 0; k < (in_place ? rc[j] : sc[j]) * per; k++) {
            int v = val(rank, k, it, 20 + 5 * j);
            if (in_place) rb[at(rd[j] * per + k, per, ext)] = v;
            else sb[at(sd[j] * per + k, per, ext)] = v;
        }
    POST(0, MPI_Ialltoallv(in_place ? MPI_IN_PLACE : sb, sc, sd, t, rb, rc, rd, t, comm, &q));
    WAIT(q);
    for (int j = 0; j < size; j++)
        for (int k = 0; k < rc[j] * per; k++) rex[at(rd[j] * per + k, per, ext)] = val(j, k, it, 20 + 5 * rank);
    CHECK(memcmp(rb, rex, (ritems * ext + 1) * sizeof(int)) == 0);
    free(sb); free(rb); free(rex);

    /* Ialltoallw: the pair (i, j) uses MPI_INT or the strided vec, byte displacements */
#define TY(i, j) ((((i) + (j) + it) % 2) ? vec : MPI_INT)
#define PER(i, j) ((((i) + (j) + it) % 2) ? 2 : 1)
#define EXT(i, j) ((((i) + (j) + it) % 2) ? 3 : 1)
    MPI_Datatype *st = malloc(size * sizeof(MPI_Datatype)), *rt = malloc(size * sizeof(MPI_Datatype));
    int sints = 0, rints = 0;
    for (int j = 0; j < size; j++) {
        st[j] = TY(rank, j);
        rt[j] = TY(j, rank);
        sd[j] = sints * (int)sizeof(int);
        sints += sc[j] * EXT(rank, j) + 1;
    }
    for (int j = size - 1; j >= 0; j--) {
        rd[j] = rints * (int)sizeof(int);
        rints += rc[j] * EXT(j, rank) + 1;
    }
    sb = calloc(sints + 1, sizeof(int));
    rb = calloc(rints + 1, sizeof(int));
    rex = calloc(rints + 1, sizeof(int));
    for (int j = 0; j < size; j++) {
        int base = (in_place ? rd[j] : sd[j]) / (int)sizeof(int);
        int n = (in_place ? rc[j] : sc[j]) * PER(rank, j);
        for (int k = 0; k < n; k++) (in_place ? rb : sb)[base + at(k, PER(rank, j), EXT(rank, j))] = val(rank, k, it, 40 + 5 * j);
    }
    POST(size - 1, MPI_Ialltoallw(in_place ? MPI_IN_PLACE : sb, sc, sd, st, rb, rc, rd, rt, comm, &q));
    WAIT(q);
    for (int j = 0; j < size; j++) {
        int base = rd[j] / (int)sizeof(int);
        for (int k = 0; k < rc[j] * PER(j, rank); k++) rex[base + at(k, PER(j, rank), EXT(j, rank))] = val(j, k, it, 40 + 5 * rank);
    }
    CHECK(memcmp(rb, rex, (rints + 1) * sizeof(int)) == 0);
    free(sb); free(rb); free(rex); free(st); free(rt);
    free(sc); free(sd); free(rc); free(rd); free(counts); free(displs);
}

/* ---- neighbourhood collectives on a periodic ring and a non-periodic 2-d grid ---- */

#define SENTINEL (-77777)

static void test_neighbors(MPI_Comm cart, int it) {
    MPI_Request q;
    int ndims, me;
    CHECK_RC(MPI_Cartdim_get(cart, &ndims));
    CHECK_RC(MPI_Comm_rank(cart, &me));
    int deg = 2 * ndims, nb[8];
    for (int d = 0; d < ndims; d++) CHECK_RC(MPI_Cart_shift(cart, d, 1, &nb[2 * d], &nb[2 * d + 1]));
    int count = rnd(4);
    int *x = calloc(count * deg + 1, sizeof(int)), *r = malloc((count + 1) * deg * sizeof(int) + sizeof(int));
    int rlen = (count + 1) * deg + 1;

    /* Ineighbor_allgather */
    for (int k = 0; k < count; k++) x[k] = val(me, k, it, 60);
    for (int i = 0; i < rlen; i++) r[i] = SENTINEL;
    POST(0, MPI_Ineighbor_allgather(x, count, MPI_INT, r, count, MPI_INT, cart, &q));
    WAIT(q);
    for (int i = 0; i < deg; i++)
        for (int k = 0; k < count; k++) CHECK(r[i * count + k] == (nb[i] == MPI_PROC_NULL ? SENTINEL : val(nb[i], k, it, 60)));
    CHECK(r[deg * count] == SENTINEL);

    /* Ineighbor_allgatherv: blocks in reverse order with gaps */
    int rcounts[8], displs[8];
    for (int i = 0; i < deg; i++) rcounts[i] = count;
    reverse_layout(rcounts, displs, deg);
    for (int i = 0; i < rlen; i++) r[i] = SENTINEL;
    POST(0, MPI_Ineighbor_allgatherv(x, count, MPI_INT, r, rcounts, displs, MPI_INT, cart, &q));
    WAIT(q);
    for (int i = 0; i < deg; i++) {
        for (int k = 0; k < count; k++) CHECK(r[displs[i] + k] == (nb[i] == MPI_PROC_NULL ? SENTINEL : val(nb[i], k, it, 60)));
        CHECK(r[displs[i] + count] == SENTINEL);
    }

    /* Ineighbor_alltoall: block j goes to neighbour j; from the neighbour on our negative
     * side comes the block it sent towards its positive side (index ^ 1). */
    for (int j = 0; j < deg; j++)
        for (int k = 0; k < count; k++) x[j * count + k] = val(me, k, it, 70 + j);
    for (int i = 0; i < rlen; i++) r[i] = SENTINEL;
    POST(0, MPI_Ineighbor_alltoall(x, count, MPI_INT, r, count, MPI_INT, cart, &q));
    WAIT(q);
    for (int i = 0; i < deg; i++)
        for (int k = 0; k < count; k++) CHECK(r[i * count + k] == (nb[i] == MPI_PROC_NULL ? SENTINEL : val(nb[i], k, it, 70 + (i ^ 1))));

    /* Ineighbor_alltoallv: direction d carries (d + it) % 3 items both ways */
    int sc[8], sd[8], rc[8], rd[8], spos = 0;
    for (int j = 0; j < deg; j++) {
        sc[j] = rc[j] = (j / 2 + it) % 3;
        sd[j] = spos;
        spos += sc[j] + 1;
    }
    int rtot = reverse_layout(rc, rd, deg);
    int *sb = calloc(spos + 1, sizeof(int)), *rb = malloc((rtot + 1) * sizeof(int));
    for (int j = 0; j < deg; j++)
        for (int k = 0; k < sc[j]; k++) sb[sd[j] + k] = val(me, k, it, 80 + j);
    for (int i = 0; i <= rtot; i++) rb[i] = SENTINEL;
    POST(0, MPI_Ineighbor_alltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, cart, &q));
    WAIT(q);
    for (int i = 0; i < deg; i++) {
        for (int k = 0; k < rc[i]; k++) CHECK(rb[rd[i] + k] == (nb[i] == MPI_PROC_NULL ? SENTINEL : val(nb[i], k, it, 80 + (i ^ 1))));
        CHECK(rb[rd[i] + rc[i]] == SENTINEL);
    }

    /* Ineighbor_alltoallw: odd directions use the strided vec type, byte displacements */
    MPI_Datatype ty[8];
    MPI_Aint sdb[8], rdb[8];
    int sints = 0, rints = 0;
    for (int j = 0; j < deg; j++) {
        int e = (j / 2) % 2 ? 3 : 1;
        ty[j] = (j / 2) % 2 ? vec : MPI_INT;
        sdb[j] = sints * (MPI_Aint)sizeof(int);
        sints += sc[j] * e + 1;
        rdb[j] = rints * (MPI_Aint)sizeof(int);
        rints += rc[j] * e + 1;
    }
    int *sw = calloc(sints + 1, sizeof(int)), *rw = malloc((rints + 1) * sizeof(int)), *ew = malloc((rints + 1) * sizeof(int));
    for (int j = 0; j < deg; j++) {
        int p = (j / 2) % 2 ? 2 : 1, e = p == 2 ? 3 : 1;
        for (int k = 0; k < sc[j] * p; k++) sw[sdb[j] / sizeof(int) + at(k, p, e)] = val(me, k, it, 90 + j);
    }
    for (int i = 0; i <= rints; i++) rw[i] = ew[i] = SENTINEL;
    for (int i = 0; i < deg; i++) {
        int p = (i / 2) % 2 ? 2 : 1, e = p == 2 ? 3 : 1;
        if (nb[i] != MPI_PROC_NULL)
            for (int k = 0; k < rc[i] * p; k++) ew[rdb[i] / sizeof(int) + at(k, p, e)] = val(nb[i], k, it, 90 + (i ^ 1));
    }
    POST(0, MPI_Ineighbor_alltoallw(sw, sc, sdb, ty, rw, rc, rdb, ty, cart, &q));
    WAIT(q);
    CHECK(memcmp(rw, ew, (rints + 1) * sizeof(int)) == 0);
    free(x); free(r); free(sb); free(rb); free(sw); free(rw); free(ew);
}

int main(int argc, char **argv) {
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    int iters = argc > 1 ? atoi(argv[1]) : 12;

    CHECK_RC(MPI_Type_vector(2, 1, 2, MPI_INT, &vec)); /* 2 ints, a hole between them */
    CHECK_RC(MPI_Type_commit(&vec));
    CHECK_RC(MPI_Type_contiguous(2, MPI_UNSIGNED, &pair));
    CHECK_RC(MPI_Type_commit(&pair));
    CHECK_RC(MPI_Type_vector(2, 1, 2, pair, &pairvec)); /* 2 pairs, a pair-sized hole */
    CHECK_RC(MPI_Type_commit(&pairvec));

    MPI_Comm dup;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    for (int it = 0; it < iters; it++) test_reductions(it % 2 ? dup : MPI_COMM_WORLD, it);
    if (rank == 0) printf("ireduce/iallreduce/iscan/iexscan/ireduce_scatter with user and predefined ops: ok\n");
    for (int it = 0; it < iters; it++) test_vectors(it % 2 ? dup : MPI_COMM_WORLD, it);
    if (rank == 0) printf("igatherv/iscatterv/iallgatherv/ialltoallv/ialltoallw: ok\n");

    MPI_Comm ring, grid;
    int periodic = 1, one = size, dims[2] = {0, 0}, per2[2] = {0, 0};
    CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 1, &one, &periodic, 0, &ring));
    CHECK_RC(MPI_Dims_create(size, 2, dims));
    CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, per2, 0, &grid));
    for (int it = 0; it < iters; it++) test_neighbors(it % 2 ? grid : ring, it);
    if (rank == 0) printf("ineighbor_* on a periodic ring and a 2-d grid: ok\n");

    /* Several different ones outstanding at once, completed in reverse order. */
    {
        int x = rank + 1, s1 = 0, s2 = -1;
        int *g = calloc(size, sizeof(int)), *cnt = malloc(size * sizeof(int)), *dsp = malloc(size * sizeof(int));
        int *contrib = malloc(size * sizeof(int));
        for (int i = 0; i < size; i++) cnt[i] = 1, dsp[i] = size - 1 - i, contrib[i] = (i + 1) * x;
        MPI_Request rq[3];
        CHECK_RC(MPI_Iscan(&x, &s1, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[0]));
        CHECK_RC(MPI_Iallgatherv(&x, 1, MPI_INT, g, cnt, dsp, MPI_INT, dup, &rq[1]));
        CHECK_RC(MPI_Ireduce_scatter(contrib, &s2, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[2]));
        CHECK_RC(MPI_Wait(&rq[2], MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        CHECK(s1 == (rank + 1) * (rank + 2) / 2);
        for (int i = 0; i < size; i++) CHECK(g[size - 1 - i] == i + 1);
        CHECK(s2 == (rank + 1) * size * (size + 1) / 2);
        free(g); free(cnt); free(dsp); free(contrib);
    }
    if (rank == 0) printf("several outstanding, completed in reverse order: ok\n");

    /* Ialltoallw from and to MPI_BOTTOM: the types carry absolute addresses. */
    {
        int *sv = malloc(size * sizeof(int)), *rv = malloc(size * sizeof(int));
        int *ones = malloc(size * sizeof(int)), *zeros = calloc(size, sizeof(int));
        MPI_Datatype *st = malloc(size * sizeof(MPI_Datatype)), *rt = malloc(size * sizeof(MPI_Datatype));
        for (int j = 0; j < size; j++) {
            MPI_Aint a;
            int one = 1;
            sv[j] = 1000 * rank + j;
            rv[j] = -1;
            ones[j] = 1;
            CHECK_RC(MPI_Get_address(&sv[j], &a));
            CHECK_RC(MPI_Type_create_hindexed(1, &one, &a, MPI_INT, &st[j]));
            CHECK_RC(MPI_Type_commit(&st[j]));
            CHECK_RC(MPI_Get_address(&rv[j], &a));
            CHECK_RC(MPI_Type_create_hindexed(1, &one, &a, MPI_INT, &rt[j]));
            CHECK_RC(MPI_Type_commit(&rt[j]));
        }
        MPI_Request q;
        POST(0, MPI_Ialltoallw(MPI_BOTTOM, ones, zeros, st, MPI_BOTTOM, ones, zeros, rt, MPI_COMM_WORLD, &q));
        WAIT(q);
        for (int j = 0; j < size; j++) {
            CHECK(rv[j] == 1000 * j + rank);
            CHECK_RC(MPI_Type_free(&st[j]));
            CHECK_RC(MPI_Type_free(&rt[j]));
        }
        free(sv); free(rv); free(ones); free(zeros); free(st); free(rt);
    }
    if (rank == 0) printf("ialltoallw with MPI_BOTTOM and absolute addresses: ok\n");

    CHECK_RC(MPI_Comm_free(&ring));
    CHECK_RC(MPI_Comm_free(&grid));
    CHECK_RC(MPI_Comm_free(&dup));
    CHECK_RC(MPI_Type_free(&pairvec));
    CHECK_RC(MPI_Type_free(&pair));
    CHECK_RC(MPI_Type_free(&vec));
    if (rank == 0) printf("coll_nb_more: all checks passed\n");
    MPI_Finalize();
    return 0;
}
