/* Nonblocking collectives on intercommunicators (halves of the world: groups [0, h) and
 * [h, size)): every MPI_I* form with MPI_ROOT / MPI_PROC_NULL roots, reductions of the
 * other group's contributions in rank order (a non-commutative user op or a predefined
 * one), checked against a local reference. Posted with the "late rank" pattern of
 * coll_nb_more.c: the program deadlocks if any of them completes at start. Also checks
 * that calls undefined on intercommunicators (Iscan, Iexscan, neighbourhood and topology
 * constructors) fail with MPI_ERR_COMM through the communicator's error handler.
 * Prints "coll_nb_inter: all checks passed" on world rank 0. Needs 2 or more ranks. */
#include "check.h"
#include <string.h>

static unsigned long long rs = 0x9E3779B97F4A7C15ULL;
static unsigned rnd(unsigned n) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return n ? (unsigned)(rs % n) : 0;
}
static int val(int w, int k, int it, int what) { return (w * 7919 + k * 31 + it * 101 + what * 13) % 1000 - 300; }

static int wrank, wsize, half, grp, lrank, lsize, rsize, rbase, late_, post_no_;

#define POST(late, call)                                                                   \
    do {                                                                                   \
        late_ = (late);                                                                    \
        int tk_ = wrank, tag_ = 100 + post_no_++ % 10000;                                  \
        if (wrank == late_) {                                                              \
            for (int q_ = 1; q_ < wsize; q_++)                                             \
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

/* World rank of local rank r of group g. */
static int world(int g, int r) { return g ? half + r : r; }

/* (a1, b1) o (a2, b2) = (a1 a2, a1 b2 + b1) on unsigned pairs: not commutative. */
static void affine_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    unsigned *x = in, *y = inout;
    (void)dt;
    for (int i = 0; i < *len; i++) {
        unsigned a = x[2 * i] * y[2 * i], b = x[2 * i] * y[2 * i + 1] + x[2 * i + 1];
        y[2 * i] = a;
        y[2 * i + 1] = b;
    }
}

static MPI_Datatype pair;

/* user: affine pairs with a user op, else ints with MPI_SUM. Contribution of world rank w,
 * element k. */
static void put(int user, void *buf, int k, int w, int it, int what) {
    int v = val(w, k, it, what);
    if (user) {
        ((unsigned *)buf)[2 * k] = 2u * (unsigned)v + 1u;
        ((unsigned *)buf)[2 * k + 1] = (unsigned)v;
    } else {
        ((int *)buf)[k] = v;
    }
}
/* Element k of buf == the reduction (rank order) of element src_k of world ranks lo..hi-1. */
static void expect(int user, const void *buf, int k, int src_k, int lo, int hi, int it, int what) {
    if (user) {
        unsigned a = 1, b = 0;
        for (int w = lo; w < hi; w++) {
            int v = val(w, src_k, it, what);
            b = a * (unsigned)v + b;
            a = a * (2u * (unsigned)v + 1u);
        }
        CHECK(((const unsigned *)buf)[2 * k] == a && ((const unsigned *)buf)[2 * k + 1] == b);
    } else {
        int e = 0;
        for (int w = lo; w < hi; w++) e += val(w, src_k, it, what);
        CHECK(((const int *)buf)[k] == e);
    }
}

/* Root argument for a rooted collective whose root is local rank rr of group g. */
static int root_arg(int g, int rr) { return g == grp ? (lrank == rr ? MPI_ROOT : MPI_PROC_NULL) : rr; }

static void rooted(MPI_Comm ic, int it) {
    MPI_Request q;
    int g = rnd(2), gsize = g ? wsize - half : half, rr = rnd(gsize), root = root_arg(g, rr);
    int am_root = root == MPI_ROOT, other = !g, osize = other ? wsize - half : half;
    int cnt[64], dsp[64];
    for (int i = 0; i < 64; i++) cnt[i] = rnd(4);
    int count = rnd(5);

    /* Ibcast: the other group waits for the root, which posts last. */
    int *b = calloc(count + 1, sizeof(int));
    if (am_root) for (int k = 0; k < count; k++) b[k] = val(world(g, rr), k, it, 1);
    POST(world(g, rr), MPI_Ibcast(b, count, MPI_INT, root, ic, &q));
    WAIT(q);
    if (grp != g) for (int k = 0; k < count; k++) CHECK(b[k] == val(world(g, rr), k, it, 1));
    free(b);

    /* Igather and Igatherv (blocks in reverse order with gaps): the root waits for the
     * other group's rank 0, which posts last. */
    int pos = 0;
    for (int i = osize - 1; i >= 0; i--) dsp[i] = pos, pos += cnt[i] + 1;
    int *gb = calloc(pos + count * osize + 1, sizeof(int)), *mine = calloc(count + 4, sizeof(int));
    for (int k = 0; k < count + 3; k++) mine[k] = val(wrank, k, it, 2);
    POST(world(other, 0), MPI_Igather(mine, count, MPI_INT, gb, count, MPI_INT, root, ic, &q));
    WAIT(q);
    if (am_root)
        for (int i = 0; i < osize; i++)
            for (int k = 0; k < count; k++) CHECK(gb[i * count + k] == val(world(other, i), k, it, 2));
    memset(gb, 0, (pos + count * osize + 1) * sizeof(int));
    POST(world(other, 0), MPI_Igatherv(mine, grp == other ? cnt[lrank] : 0, MPI_INT, gb, cnt, dsp, MPI_INT, root, ic, &q));
    WAIT(q);
    if (am_root)
        for (int i = 0; i < osize; i++) {
            for (int k = 0; k < cnt[i]; k++) CHECK(gb[dsp[i] + k] == val(world(other, i), k, it, 2));
            CHECK(gb[dsp[i] + cnt[i]] == 0);
        }

    /* Iscatter and Iscatterv: the other group waits for the root. */
    int *src = calloc(pos + count * osize + 1, sizeof(int)), *got = calloc(count + 4, sizeof(int));
    if (am_root)
        for (int i = 0; i < osize; i++)
            for (int k = 0; k < count; k++) src[i * count + k] = val(world(other, i), k, it, 3);
    POST(world(g, rr), MPI_Iscatter(src, count, MPI_INT, got, count, MPI_INT, root, ic, &q));
    WAIT(q);
    if (grp == other) for (int k = 0; k < count; k++) CHECK(got[k] == val(wrank, k, it, 3));
    if (am_root)
        for (int i = 0; i < osize; i++)
            for (int k = 0; k < cnt[i]; k++) src[dsp[i] + k] = val(world(other, i), k, it, 4);
    POST(world(g, rr), MPI_Iscatterv(src, cnt, dsp, MPI_INT, got, grp == other ? cnt[lrank] : 0, MPI_INT, root, ic, &q));
    WAIT(q);
    if (grp == other) for (int k = 0; k < cnt[lrank]; k++) CHECK(got[k] == val(wrank, k, it, 4));
    free(gb); free(mine); free(src); free(got);

    /* Ireduce: the root gets the other group's reduction. */
    int user = rnd(2);
    MPI_Op op = MPI_SUM;
    if (user) CHECK_RC(MPI_Op_create(affine_fn, 0, &op));
    MPI_Datatype t = user ? pair : MPI_INT;
    unsigned *s = calloc(2 * count + 2, sizeof(unsigned)), *r = calloc(2 * count + 2, sizeof(unsigned));
    for (int k = 0; k < count; k++) put(user, s, k, wrank, it, 5);
    POST(world(other, 0), MPI_Ireduce(s, r, count, t, op, root, ic, &q));
    if (user) CHECK_RC(MPI_Op_free(&op));
    WAIT(q);
    int olo = world(other, 0);
    if (am_root) for (int k = 0; k < count; k++) expect(user, r, k, k, olo, olo + osize, it, 5);
    free(s); free(r);
}

static void all_to_all(MPI_Comm ic, int it) {
    MPI_Request q;
    int count = rnd(4), cnt[64], dsp[64], pos = 0;
    for (int i = 0; i < 64; i++) cnt[i] = rnd(4);
    /* what world rank w sends to remote rank j in the v variants: cnt[(w + j) % 64] */
    MPI_Barrier(MPI_COMM_WORLD);
    POST(0, MPI_Ibarrier(ic, &q));
    WAIT(q);

    /* Iallgather / Iallgatherv: block r comes from remote rank r */
    int *mine = calloc(8, sizeof(int)), *ag = calloc(8 * rsize + 64, sizeof(int));
    for (int k = 0; k < 8; k++) mine[k] = val(wrank, k, it, 6);
    POST(0, MPI_Iallgather(mine, count, MPI_INT, ag, count, MPI_INT, ic, &q));
    WAIT(q);
    for (int j = 0; j < rsize; j++)
        for (int k = 0; k < count; k++) CHECK(ag[j * count + k] == val(rbase + j, k, it, 6));
    int rc[64];
    for (int j = rsize - 1; j >= 0; j--) rc[j] = cnt[(rbase + j) % 64], dsp[j] = pos, pos += rc[j] + 1;
    memset(ag, 0, (8 * rsize + 64) * sizeof(int));
    POST(wsize - 1, MPI_Iallgatherv(mine, cnt[wrank % 64], MPI_INT, ag, rc, dsp, MPI_INT, ic, &q));
    WAIT(q);
    for (int j = 0; j < rsize; j++) {
        for (int k = 0; k < rc[j]; k++) CHECK(ag[dsp[j] + k] == val(rbase + j, k, it, 6));
        CHECK(ag[dsp[j] + rc[j]] == 0);
    }
    free(mine); free(ag);

    /* Ialltoall / Ialltoallv / Ialltoallw: block for remote rank j */
    int *sb = calloc(4 * rsize + 1, sizeof(int)), *rb = calloc(8 * rsize + 64, sizeof(int));
    for (int j = 0; j < rsize; j++)
        for (int k = 0; k < 4; k++) sb[j * 4 + k] = val(wrank, k, it, 10 + rbase + j);
    int *sa = calloc(4 * rsize + 1, sizeof(int));
    for (int j = 0; j < rsize; j++)
        for (int k = 0; k < count; k++) sa[j * count + k] = val(wrank, k, it, 10 + rbase + j);
    POST(0, MPI_Ialltoall(sa, count, MPI_INT, rb, count, MPI_INT, ic, &q));
    WAIT(q);
    for (int j = 0; j < rsize; j++)
        for (int k = 0; k < count; k++) CHECK(rb[j * count + k] == val(rbase + j, k, it, 10 + wrank));
    free(sa);
    int sc[64], sd[64], rcv[64], rd[64];
    MPI_Datatype st[64];
    pos = 0;
    for (int j = 0; j < rsize; j++) sc[j] = cnt[(wrank + rbase + j) % 64], sd[j] = 4 * j, st[j] = MPI_INT;
    for (int j = rsize - 1; j >= 0; j--) rcv[j] = cnt[(rbase + j + wrank) % 64], rd[j] = pos, pos += rcv[j] + 1;
    memset(rb, 0, (8 * rsize + 64) * sizeof(int));
    POST(wsize - 1, MPI_Ialltoallv(sb, sc, sd, MPI_INT, rb, rcv, rd, MPI_INT, ic, &q));
    WAIT(q);
    for (int j = 0; j < rsize; j++) {
        for (int k = 0; k < rcv[j]; k++) CHECK(rb[rd[j] + k] == val(rbase + j, k, it, 10 + wrank));
        CHECK(rb[rd[j] + rcv[j]] == 0);
    }
    int sdb[64], rdb[64];
    for (int j = 0; j < rsize; j++) sdb[j] = sd[j] * (int)sizeof(int), rdb[j] = rd[j] * (int)sizeof(int);
    memset(rb, 0, (8 * rsize + 64) * sizeof(int));
    POST(0, MPI_Ialltoallw(sb, sc, sdb, st, rb, rcv, rdb, st, ic, &q));
    WAIT(q);
    for (int j = 0; j < rsize; j++) {
        for (int k = 0; k < rcv[j]; k++) CHECK(rb[rd[j] + k] == val(rbase + j, k, it, 10 + wrank));
        CHECK(rb[rd[j] + rcv[j]] == 0);
    }
    free(sb); free(rb);

    /* Iallreduce and Ireduce_scatter(_block): the other group's reduction */
    int user = rnd(2);
    MPI_Op op = MPI_SUM;
    if (user) CHECK_RC(MPI_Op_create(affine_fn, 0, &op));
    MPI_Datatype t = user ? pair : MPI_INT;
    int total = half * (wsize - half) * (1 + (int)rnd(2)); /* the same in both groups */
    unsigned *s = calloc(2 * total + 2, sizeof(unsigned)), *r = calloc(2 * total + 2, sizeof(unsigned));
    for (int k = 0; k < total; k++) put(user, s, k, wrank, it, 7);
    POST(0, MPI_Iallreduce(s, r, total, t, op, ic, &q));
    WAIT(q);
    for (int k = 0; k < total; k++) expect(user, r, k, k, rbase, rbase + rsize, it, 7);
    memset(r, 0, (2 * total + 2) * sizeof(unsigned));
    POST(wsize - 1, MPI_Ireduce_scatter_block(s, r, total / lsize, t, op, ic, &q));
    WAIT(q);
    for (int k = 0; k < total / lsize; k++) expect(user, r, k, lrank * (total / lsize) + k, rbase, rbase + rsize, it, 7);
    int counts[64], before = 0;
    for (int i = 0; i < lsize; i++) counts[i] = total / lsize;
    if (lsize > 1) counts[0]++, counts[1]--; /* uneven blocks, the same total */
    for (int i = 0; i < lrank; i++) before += counts[i];
    memset(r, 0, (2 * total + 2) * sizeof(unsigned));
    POST(0, MPI_Ireduce_scatter(s, r, counts, t, op, ic, &q));
    if (user) CHECK_RC(MPI_Op_free(&op));
    WAIT(q);
    for (int k = 0; k < counts[lrank]; k++) expect(user, r, k, before + k, rbase, rbase + rsize, it, 7);
    free(s); free(r);
}

/* Undefined on intercommunicators: MPI_ERR_COMM through the error handler. */
static int handler_calls;
static void count_errors(MPI_Comm *c, int *code, ...) {
    int cls;
    (void)c;
    MPI_Error_class(*code, &cls);
    CHECK(cls == MPI_ERR_COMM);
    handler_calls++;
}

static void undefined(MPI_Comm ic) {
    MPI_Errhandler eh;
    CHECK_RC(MPI_Comm_create_errhandler(count_errors, &eh));
    CHECK_RC(MPI_Comm_set_errhandler(ic, eh));
    int x = 1, y = 0, cls, n = 0, zero = 0, dims[1] = {lsize}, per[1] = {0};
    int index[1] = {0}, edges[1] = {0};
    MPI_Request q = MPI_REQUEST_NULL;
    MPI_Comm out = MPI_COMM_NULL;
#define UNDEF(call)                                                                        \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        CHECK(rc_ != MPI_SUCCESS);                                                         \
        MPI_Error_class(rc_, &cls);                                                        \
        CHECK(cls == MPI_ERR_COMM);                                                        \
        n++;                                                                               \
    } while (0)
    UNDEF(MPI_Iscan(&x, &y, 1, MPI_INT, MPI_SUM, ic, &q));
    UNDEF(MPI_Iexscan(&x, &y, 1, MPI_INT, MPI_SUM, ic, &q));
    UNDEF(MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, ic));
    UNDEF(MPI_Ineighbor_allgather(&x, 1, MPI_INT, &y, 1, MPI_INT, ic, &q));
    UNDEF(MPI_Neighbor_allgather(&x, 1, MPI_INT, &y, 1, MPI_INT, ic));
    UNDEF(MPI_Ineighbor_alltoall(&x, 1, MPI_INT, &y, 1, MPI_INT, ic, &q));
    UNDEF(MPI_Cart_create(ic, 1, dims, per, 0, &out));
    UNDEF(MPI_Graph_create(ic, 1, index, edges, 0, &out));
    UNDEF(MPI_Dist_graph_create_adjacent(ic, 0, &zero, MPI_UNWEIGHTED, 0, &zero, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &out));
    UNDEF(MPI_Dist_graph_create(ic, 0, &zero, &zero, &zero, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &out));
    CHECK(q == MPI_REQUEST_NULL && out == MPI_COMM_NULL);
    CHECK(handler_calls == n);
    CHECK_RC(MPI_Comm_set_errhandler(ic, MPI_ERRORS_ARE_FATAL));
    CHECK_RC(MPI_Errhandler_free(&eh));
}

int main(int argc, char **argv) {
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    check_rank_ = wrank;
    int iters = argc > 1 ? atoi(argv[1]) : 8;
    if (wsize < 2) {
        if (wrank == 0) printf("coll_nb_inter: needs 2 ranks\n");
        MPI_Finalize();
        return 0;
    }
    half = wsize / 2;
    grp = wrank >= half;
    CHECK_RC(MPI_Type_contiguous(2, MPI_UNSIGNED, &pair));
    CHECK_RC(MPI_Type_commit(&pair));
    MPI_Comm local, ic, ic2;
    CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, grp, wrank, &local));
    CHECK_RC(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, grp ? 0 : half, 33, &ic));
    CHECK_RC(MPI_Comm_rank(ic, &lrank));
    CHECK_RC(MPI_Comm_size(ic, &lsize));
    CHECK_RC(MPI_Comm_remote_size(ic, &rsize));
    CHECK(lsize == (grp ? wsize - half : half) && rsize == wsize - lsize);
    rbase = grp ? 0 : half;
    CHECK_RC(MPI_Comm_dup(ic, &ic2));
    for (int it = 0; it < iters; it++) rooted(it % 2 ? ic2 : ic, it);
    if (wrank == 0) printf("rooted nonblocking intercommunicator collectives: ok\n");
    for (int it = 0; it < iters; it++) all_to_all(it % 2 ? ic2 : ic, it);
    if (wrank == 0) printf("all-to-all nonblocking intercommunicator collectives: ok\n");
    undefined(ic);
    if (wrank == 0) printf("undefined on intercommunicators: MPI_ERR_COMM: ok\n");
    CHECK_RC(MPI_Comm_free(&ic2));
    CHECK_RC(MPI_Comm_free(&ic));
    CHECK_RC(MPI_Comm_free(&local));
    CHECK_RC(MPI_Type_free(&pair));
    if (wrank == 0) printf("coll_nb_inter: all checks passed\n");
    MPI_Finalize();
    return 0;
}
