/* Every blocking and nonblocking intracommunicator collective (bcast, reduce, allreduce,
 * reduce_scatter_block, reduce_scatter, scan, exscan, gather, gatherv, scatter, scatterv,
 * allgather, allgatherv, alltoall, alltoallv, alltoallw and their I-forms) with ranks that
 * pass DIFFERENT datatypes of the same type signature, which is legal MPI: a rank's block of
 * n ints is one of
 *   form 0: n x MPI_INT                                  (contiguous, predefined)
 *   form 1: 1 x MPI_Type_contiguous(n, MPI_INT)          (contiguous, derived)
 *   form 2: n x MPI_INT resized to an extent of 8 bytes  (strided: a hole after each int)
 *   form 3: 1 x MPI_Type_vector(n, 1, 2, MPI_INT) resized to 2n ints (strided, derived)
 * (the v-forms' displaced sides and reduce_scatter take the per-item forms 0 and 2). The
 * forms rotate over the ranks from one variant to the next, so every rank takes every form
 * against every other; reductions (MPI_SUM) also run in place. Blocks of 4 B to 1 MiB, on
 * both sides of the segment's path bounds (56 B lane, 4 KiB buffer, the 32 KiB single-copy
 * and 64 KiB bounds, 256 KiB, 1 MiB). Every result is checked against a local reference
 * and the holes of strided buffers (and one int after every buffer) must stay untouched.
 *
 * A hang is reported, not waited on: every case runs under alarm(); the SIGALRM handler
 * prints the collective, block size and variant the rank was in and exits with status 3.
 * Optional arguments: the largest block in bytes (default 1 MiB), and "survey" (see FAIL).
 * Rank 0 prints "coll_mixed_types: all checks passed" at the end. */
#include "check.h"
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int rank, size;
static const char *cur = "init";
static int cur_bytes, cur_var, cur_inpl, cur_nb;

static void on_alarm(int sig) {
    (void)sig;
    char msg[200];
    int len = snprintf(msg, sizeof msg,
                       "coll_mixed_types: rank %d HUNG in %s%s (%d B per block, variant %d%s)\n",
                       rank, cur_nb ? "I" : "", cur, cur_bytes, cur_var,
                       cur_inpl ? ", in place" : "");
    if (write(2, msg, (size_t)len) < 0) _exit(4);
    _exit(3);
}

/* With "survey" as the second argument a failed check is printed (the first of each case)
 * and the run goes on; the program then exits with status 1 at the end. */
static int survey, fails_here, failed;
#define FAIL(...)                                                                          \
    do {                                                                                   \
        failed = 1;                                                                        \
        if (fails_here++ == 0) {                                                           \
            fprintf(stderr, "coll_mixed_types: rank %d: %s%s (%d B per block, variant %d%s): ", \
                    rank, cur_nb ? "I" : "", cur, cur_bytes, cur_var,                      \
                    cur_inpl ? ", in place" : "");                                         \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            fflush(stderr);                                                                \
        }                                                                                  \
        if (!survey) MPI_Abort(MPI_COMM_WORLD, 99);                                        \
    } while (0)

static void rc_ok(int rc) {
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int l = 0;
        MPI_Error_string(rc, s, &l);
        FAIL("returned %d: %s", rc, s);
    }
}

/* Runs MPI_<B>(args) or, when nb, MPI_I<b>(args, &req) and waits. */
static int nb;
#define COLL(B, b, ...)                                                                    \
    do {                                                                                   \
        if (nb) {                                                                          \
            MPI_Request rq_;                                                               \
            rc_ok(MPI_I##b(__VA_ARGS__, &rq_));                                            \
            rc_ok(MPI_Wait(&rq_, MPI_STATUS_IGNORE));                                      \
        } else                                                                             \
            rc_ok(MPI_##B(__VA_ARGS__));                                                   \
    } while (0)

#define SENT (-7)

/* The value of item k from rank r in a collective salted by `salt`. */
static int V(int r, int k, int salt) { return (r * 7919 + k * 13 + salt * 101) % 100000 + 1; }

/* A rank's layout of blocks of n ints: `count` items of `t` per block; item k of block b is
 * at int offset (b * n + k) * stride (b * n replaced by a displacement in the v-forms). */
typedef struct {
    MPI_Datatype t;
    int count, stride, own;
} lay;

static MPI_Datatype strided_int; /* MPI_INT resized to 8 bytes */

static lay make(int form, int n) {
    lay l = {MPI_INT, n, 1, 0};
    MPI_Datatype v;
    switch (form & 3) {
    case 0:
        break;
    case 1:
        rc_ok(MPI_Type_contiguous(n, MPI_INT, &l.t));
        rc_ok(MPI_Type_commit(&l.t));
        l.count = 1;
        l.own = 1;
        break;
    case 2:
        l.t = strided_int;
        l.stride = 2;
        break;
    case 3:
        rc_ok(MPI_Type_vector(n, 1, 2, MPI_INT, &v));
        rc_ok(MPI_Type_create_resized(v, 0, (MPI_Aint)2 * n * (MPI_Aint)sizeof(int), &l.t));
        rc_ok(MPI_Type_free(&v));
        rc_ok(MPI_Type_commit(&l.t));
        l.count = 1;
        l.stride = 2;
        l.own = 1;
        break;
    }
    return l;
}

static void unmake(lay *l) {
    if (l->own) rc_ok(MPI_Type_free(&l->t));
}

/* A buffer for `items` ints at `stride`, plus one guard int, all SENT. */
static int *alloc(int items, int stride) {
    size_t n = (size_t)items * stride + 1;
    int *b = malloc(n * sizeof(int));
    CHECK(b != NULL);
    for (size_t i = 0; i < n; i++) b[i] = SENT;
    return b;
}

/* Every int of the buffer that is not item < items is still SENT. */
static void holes(const int *b, int items, int stride, const char *what) {
    size_t n = (size_t)items * stride + 1;
    for (size_t i = 0; i < n; i++)
        if ((i % stride || i / stride >= (size_t)items) && b[i] != SENT)
            FAIL("%s: int %zu outside the data written (%d)", what, i, b[i]);
}

static void expect(const int *b, int stride, int at, int k, int want, const char *what) {
    int got = b[(size_t)(at + k) * stride];
    if (got != want) FAIL("%s: item %d (at %d) is %d, expected %d", what, k, at, got, want);
}

/* Per-rank counts of the v-forms: n or about half of it, by parity. */
static int cnt(int r, int n) { return r % 2 ? (n + 1) / 2 : n; }
static int cnt2(int a, int b, int n) { return (a + b) % 2 ? (n + 1) / 2 : n; }

static void begin(const char *what) {
    cur = what;
    fails_here = 0;
    alarm(60);
}

static void end(void) { alarm(0); }

/* ---------------------------------------------------------------- reductions */

static void reductions(int n, int var, int inpl) {
    int f = rank + var, root = var % size;
    lay l = make(f, n);
    int *s, *r;
    cur_inpl = inpl;

    /* reduce */
    begin("reduce");
    s = alloc(n, l.stride);
    r = alloc(n, l.stride);
    int ip = inpl && rank == root;
    for (int k = 0; k < n; k++) (ip ? r : s)[(size_t)k * l.stride] = V(rank, k, 1);
    COLL(Reduce, reduce, ip ? MPI_IN_PLACE : s, r, l.count, l.t, MPI_SUM, root, MPI_COMM_WORLD);
    if (rank == root) {
        for (int k = 0; k < n; k++) {
            int sum = 0;
            for (int q = 0; q < size; q++) sum += V(q, k, 1);
            expect(r, l.stride, 0, k, sum, "result");
        }
        holes(r, n, l.stride, "result");
    } else
        holes(r, 0, l.stride, "recvbuf of a non-root");
    free(s);
    free(r);
    end();

    /* allreduce */
    begin("allreduce");
    s = alloc(n, l.stride);
    r = alloc(n, l.stride);
    for (int k = 0; k < n; k++) (inpl ? r : s)[(size_t)k * l.stride] = V(rank, k, 2);
    COLL(Allreduce, allreduce, inpl ? MPI_IN_PLACE : s, r, l.count, l.t, MPI_SUM,
         MPI_COMM_WORLD);
    for (int k = 0; k < n; k++) {
        int sum = 0;
        for (int q = 0; q < size; q++) sum += V(q, k, 2);
        expect(r, l.stride, 0, k, sum, "result");
    }
    holes(r, n, l.stride, "result");
    free(s);
    free(r);
    end();

    /* scan, exscan */
    for (int ex = 0; ex < 2; ex++) {
        begin(ex ? "exscan" : "scan");
        s = alloc(n, l.stride);
        r = alloc(n, l.stride);
        for (int k = 0; k < n; k++) (inpl ? r : s)[(size_t)k * l.stride] = V(rank, k, 3 + ex);
        if (ex)
            COLL(Exscan, exscan, inpl ? MPI_IN_PLACE : s, r, l.count, l.t, MPI_SUM,
                 MPI_COMM_WORLD);
        else
            COLL(Scan, scan, inpl ? MPI_IN_PLACE : s, r, l.count, l.t, MPI_SUM, MPI_COMM_WORLD);
        if (!ex || rank > 0) {
            for (int k = 0; k < n; k++) {
                int sum = 0;
                for (int q = 0; q < rank + !ex; q++) sum += V(q, k, 3 + ex);
                expect(r, l.stride, 0, k, sum, "result");
            }
            holes(r, n, l.stride, "result");
        }
        free(s);
        free(r);
        end();
    }

    /* reduce_scatter_block: size blocks of the rank's form */
    begin("reduce_scatter_block");
    s = alloc(size * n, l.stride);
    r = alloc(inpl ? size * n : n, l.stride);
    for (int k = 0; k < size * n; k++) (inpl ? r : s)[(size_t)k * l.stride] = V(rank, k, 5);
    COLL(Reduce_scatter_block, reduce_scatter_block, inpl ? MPI_IN_PLACE : s, r, l.count, l.t,
         MPI_SUM, MPI_COMM_WORLD);
    for (int k = 0; k < n; k++) {
        int sum = 0;
        for (int q = 0; q < size; q++) sum += V(q, rank * n + k, 5);
        expect(r, l.stride, 0, k, sum, "result");
    }
    if (!inpl) holes(r, n, l.stride, "result");
    free(s);
    free(r);
    end();
    unmake(&l);

    /* reduce_scatter: per-item forms, blocks of cnt(i) items */
    begin("reduce_scatter");
    lay e = make(f & 2, n);
    int *counts = malloc(size * sizeof(int)), tot = 0, off = 0;
    for (int i = 0; i < size; i++) {
        counts[i] = cnt(i, n);
        if (i < rank) off += counts[i];
        tot += counts[i];
    }
    s = alloc(tot, e.stride);
    r = alloc(inpl ? tot : counts[rank], e.stride);
    for (int k = 0; k < tot; k++) (inpl ? r : s)[(size_t)k * e.stride] = V(rank, k, 6);
    COLL(Reduce_scatter, reduce_scatter, inpl ? MPI_IN_PLACE : s, r, counts, e.t, MPI_SUM,
         MPI_COMM_WORLD);
    for (int k = 0; k < counts[rank]; k++) {
        int sum = 0;
        for (int q = 0; q < size; q++) sum += V(q, off + k, 6);
        expect(r, e.stride, 0, k, sum, "result");
    }
    if (!inpl) holes(r, counts[rank], e.stride, "result");
    free(s);
    free(r);
    free(counts);
    end();
    cur_inpl = 0;
}

/* ---------------------------------------------------------------- movement */

static void movement(int n, int var) {
    int root = var % size, me_root = rank == root;
    int fs = rank + var, fr = rank + var + 1;
    int *s, *r;

    /* bcast */
    {
        begin("bcast");
        lay l = make(fs, n);
        r = alloc(n, l.stride);
        if (me_root)
            for (int k = 0; k < n; k++) r[(size_t)k * l.stride] = V(root, k, 10);
        COLL(Bcast, bcast, r, l.count, l.t, root, MPI_COMM_WORLD);
        for (int k = 0; k < n; k++) expect(r, l.stride, 0, k, V(root, k, 10), "buffer");
        holes(r, n, l.stride, "buffer");
        free(r);
        unmake(&l);
        end();
    }

    /* gather, scatter */
    {
        lay ls = make(fs, n), lr = make(fr, n);
        begin("gather");
        s = alloc(n, ls.stride);
        r = alloc(size * n, lr.stride);
        for (int k = 0; k < n; k++) s[(size_t)k * ls.stride] = V(rank, k, 11);
        COLL(Gather, gather, s, ls.count, ls.t, r, lr.count, lr.t, root, MPI_COMM_WORLD);
        if (me_root) {
            for (int q = 0; q < size; q++)
                for (int k = 0; k < n; k++) expect(r, lr.stride, q * n, k, V(q, k, 11), "recvbuf");
            holes(r, size * n, lr.stride, "recvbuf");
        }
        free(s);
        free(r);
        end();

        begin("scatter");
        /* the root's blocks in its receive form, each rank's block in its send form */
        s = alloc(size * n, lr.stride);
        r = alloc(n, ls.stride);
        if (me_root)
            for (int k = 0; k < size * n; k++) s[(size_t)k * lr.stride] = V(k / n, k % n, 12);
        COLL(Scatter, scatter, s, lr.count, lr.t, r, ls.count, ls.t, root, MPI_COMM_WORLD);
        for (int k = 0; k < n; k++) expect(r, ls.stride, 0, k, V(rank, k, 12), "recvbuf");
        holes(r, n, ls.stride, "recvbuf");
        free(s);
        free(r);
        end();

        begin("allgather");
        s = alloc(n, ls.stride);
        r = alloc(size * n, lr.stride);
        for (int k = 0; k < n; k++) s[(size_t)k * ls.stride] = V(rank, k, 13);
        COLL(Allgather, allgather, s, ls.count, ls.t, r, lr.count, lr.t, MPI_COMM_WORLD);
        for (int q = 0; q < size; q++)
            for (int k = 0; k < n; k++) expect(r, lr.stride, q * n, k, V(q, k, 13), "recvbuf");
        holes(r, size * n, lr.stride, "recvbuf");
        free(s);
        free(r);
        end();

        begin("alltoall");
        s = alloc(size * n, ls.stride);
        r = alloc(size * n, lr.stride);
        for (int k = 0; k < size * n; k++) s[(size_t)k * ls.stride] = V(rank, k, 14);
        COLL(Alltoall, alltoall, s, ls.count, ls.t, r, lr.count, lr.t, MPI_COMM_WORLD);
        for (int q = 0; q < size; q++)
            for (int k = 0; k < n; k++)
                expect(r, lr.stride, q * n, k, V(q, rank * n + k, 14), "recvbuf");
        holes(r, size * n, lr.stride, "recvbuf");
        free(s);
        free(r);
        end();
        unmake(&ls);
        unmake(&lr);
    }

    /* gatherv, scatterv, allgatherv: the displaced side in a per-item form, blocks of
     * cnt(q) items in reverse rank order; the other side in any form */
    {
        int *c = malloc(size * sizeof(int)), *d = malloc(size * sizeof(int)), tot = 0;
        for (int q = size - 1; q >= 0; q--) {
            c[q] = cnt(q, n);
            d[q] = tot;
            tot += c[q];
        }
        lay ls = make(fs, c[rank]), lv = make(fr & 2, n);

        begin("gatherv");
        s = alloc(c[rank], ls.stride);
        r = alloc(tot, lv.stride);
        for (int k = 0; k < c[rank]; k++) s[(size_t)k * ls.stride] = V(rank, k, 15);
        COLL(Gatherv, gatherv, s, ls.count, ls.t, r, c, d, lv.t, root, MPI_COMM_WORLD);
        if (me_root) {
            for (int q = 0; q < size; q++)
                for (int k = 0; k < c[q]; k++) expect(r, lv.stride, d[q], k, V(q, k, 15), "recvbuf");
            holes(r, tot, lv.stride, "recvbuf");
        }
        free(s);
        free(r);
        end();

        begin("scatterv");
        s = alloc(tot, lv.stride);
        r = alloc(c[rank], ls.stride);
        if (me_root)
            for (int q = 0; q < size; q++)
                for (int k = 0; k < c[q]; k++) s[(size_t)(d[q] + k) * lv.stride] = V(q, k, 16);
        COLL(Scatterv, scatterv, s, c, d, lv.t, r, ls.count, ls.t, root, MPI_COMM_WORLD);
        for (int k = 0; k < c[rank]; k++) expect(r, ls.stride, 0, k, V(rank, k, 16), "recvbuf");
        holes(r, c[rank], ls.stride, "recvbuf");
        free(s);
        free(r);
        end();

        begin("allgatherv");
        s = alloc(c[rank], ls.stride);
        r = alloc(tot, lv.stride);
        for (int k = 0; k < c[rank]; k++) s[(size_t)k * ls.stride] = V(rank, k, 17);
        COLL(Allgatherv, allgatherv, s, ls.count, ls.t, r, c, d, lv.t, MPI_COMM_WORLD);
        for (int q = 0; q < size; q++)
            for (int k = 0; k < c[q]; k++) expect(r, lv.stride, d[q], k, V(q, k, 17), "recvbuf");
        holes(r, tot, lv.stride, "recvbuf");
        free(s);
        free(r);
        end();
        unmake(&ls);
        unmake(&lv);
        free(c);
        free(d);
    }

    /* alltoallv (per-item forms), alltoallw (a form per block) */
    {
        int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
        int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
        int st = 0, rt = 0;
        for (int q = 0; q < size; q++) {
            sc[q] = cnt2(rank, q, n);
            sd[q] = st;
            st += sc[q];
            rc[q] = cnt2(q, rank, n);
            rd[q] = rt;
            rt += rc[q];
        }
        lay es = make(fs & 2, n), er = make(fr & 2, n);
        begin("alltoallv");
        s = alloc(st, es.stride);
        r = alloc(rt, er.stride);
        for (int q = 0; q < size; q++)
            for (int k = 0; k < sc[q]; k++) s[(size_t)(sd[q] + k) * es.stride] = V(rank, q * 3 + k, 18);
        COLL(Alltoallv, alltoallv, s, sc, sd, es.t, r, rc, rd, er.t, MPI_COMM_WORLD);
        for (int q = 0; q < size; q++)
            for (int k = 0; k < rc[q]; k++)
                expect(r, er.stride, rd[q], k, V(q, rank * 3 + k, 18), "recvbuf");
        holes(r, rt, er.stride, "recvbuf");
        free(s);
        free(r);
        end();
        unmake(&es);
        unmake(&er);

        /* alltoallw: block q is sent in form rank + q + var and received in form
         * rank + q + var + 1, each block at a byte displacement leaving room for stride 2
         * (so the buffers have holes between blocks as well) */
        begin("alltoallw");
        MPI_Datatype *stt = malloc(size * sizeof(MPI_Datatype)), *rtt = malloc(size * sizeof(MPI_Datatype));
        lay *sl = malloc(size * sizeof(lay)), *rl = malloc(size * sizeof(lay));
        int *swc = malloc(size * sizeof(int)), *rwc = malloc(size * sizeof(int));
        int *swd = malloc(size * sizeof(int)), *rwd = malloc(size * sizeof(int));
        int sp = 0, rp = 0; /* ints */
        for (int q = 0; q < size; q++) {
            sl[q] = make(rank + q + var, sc[q]);
            rl[q] = make(rank + q + var + 1, rc[q]);
            stt[q] = sl[q].t;
            rtt[q] = rl[q].t;
            swc[q] = sl[q].count;
            rwc[q] = rl[q].count;
            swd[q] = sp * (int)sizeof(int);
            rwd[q] = rp * (int)sizeof(int);
            sp += 2 * sc[q];
            rp += 2 * rc[q];
        }
        s = alloc(sp, 1);
        r = alloc(rp, 1);
        for (int q = 0; q < size; q++)
            for (int k = 0; k < sc[q]; k++)
                s[swd[q] / (int)sizeof(int) + k * sl[q].stride] = V(rank, q * 5 + k, 19);
        COLL(Alltoallw, alltoallw, s, swc, swd, stt, r, rwc, rwd, rtt, MPI_COMM_WORLD);
        for (int q = 0; q < size; q++) {
            int at = rwd[q] / (int)sizeof(int);
            for (int k = 0; k < rc[q]; k++) {
                int got = r[at + k * rl[q].stride], want = V(q, rank * 5 + k, 19);
                if (got != want) FAIL("recvbuf: block %d item %d is %d, expected %d", q, k, got, want);
            }
            /* the rest of the block's room is untouched */
            for (int i = 0; i < 2 * rc[q]; i++)
                if ((i % rl[q].stride || i / rl[q].stride >= rc[q]) && r[at + i] != SENT)
                    FAIL("recvbuf: block %d int %d outside the data written (%d)", q, i, r[at + i]);
        }
        if (r[rp] != SENT) FAIL("recvbuf: the guard after the buffer was written");
        for (int q = 0; q < size; q++) {
            unmake(&sl[q]);
            unmake(&rl[q]);
        }
        free(s);
        free(r);
        free(stt);
        free(rtt);
        free(sl);
        free(rl);
        free(swc);
        free(rwc);
        free(swd);
        free(rwd);
        end();
        free(sc);
        free(sd);
        free(rc);
        free(rd);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    signal(SIGALRM, on_alarm);
    MPI_Datatype t;
    rc_ok(MPI_Type_create_resized(MPI_INT, 0, 2 * (MPI_Aint)sizeof(int), &t));
    rc_ok(MPI_Type_commit(&t));
    strided_int = t;

    int max = argc > 1 ? atoi(argv[1]) : 1 << 20;
    survey = argc > 2 && !strcmp(argv[2], "survey");
    static const int bytes[] = {4,     8,     56,    60,    112,   116,    4096,   4100,
                                16384, 32768, 32772, 65536, 65540, 262144, 1048576};
    for (unsigned i = 0; i < sizeof bytes / sizeof bytes[0]; i++) {
        if (bytes[i] > max) continue;
        int n = bytes[i] / (int)sizeof(int);
        cur_bytes = bytes[i];
        for (int var = 0; var < 4; var++) {
            cur_var = var;
            for (nb = 0; nb < 2; nb++) {
                cur_nb = nb;
                reductions(n, var, 0);
                reductions(n, var, 1);
                movement(n, var);
            }
        }
        /* no rank runs ahead into the next size (the next size's failure names its size) */
        cur = "barrier";
        cur_nb = 0;
        alarm(60);
        rc_ok(MPI_Barrier(MPI_COMM_WORLD));
        alarm(0);
        if (rank == 0) printf("coll_mixed_types: %d B per block: done\n", bytes[i]);
        fflush(stdout);
    }
    rc_ok(MPI_Type_free(&strided_int));
    int any = 0;
    rc_ok(MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (rank == 0) printf(any ? "coll_mixed_types: FAILED\n" : "coll_mixed_types: all checks passed\n");
    MPI_Finalize();
    return any;
}
