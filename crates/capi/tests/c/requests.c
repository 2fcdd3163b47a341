/* Nonblocking point-to-point requests and generalized requests (2 ranks, or 1 rank for the
 * generalized-request part only).
 *
 * Generalized requests follow MPI-3.1 section 12.2: query_fn runs in the call that
 * completes the request (or in MPI_Request_get_status), never in MPI_Grequest_complete;
 * free_fn runs after it in the completing call, or in MPI_Request_free /
 * MPI_Grequest_complete, whichever comes last; error codes returned by the callbacks are
 * returned by those calls (MPI_ERR_IN_STATUS for multiple completion).
 *
 * Point-to-point: windows of Isend/Irecv completed by Waitall/Waitany/Waitsome/Testsome/
 * Testall (statuses, MPI_REQUEST_NULL entries, partial completion), cancel, free of an
 * active send, Request_get_status, truncation errors in statuses and through the request's
 * communicator's error handler, persistent requests, MPI_PROC_NULL, and (at
 * MPI_THREAD_MULTIPLE) four threads using requests at once. */
#include <pthread.h>
#include <string.h>

#include "check.h"

static int rank, size;

/* ---------- generalized requests ---------- */

struct gctx {
    int query_calls, free_calls, cancel_calls, last_cancel_complete;
    int query_rc, free_rc, cancel_rc;
    int seq, query_seq, free_seq;
};

static int g_query(void *extra, MPI_Status *st) {
    struct gctx *c = extra;
    c->query_calls++;
    c->query_seq = ++c->seq;
    st->MPI_SOURCE = 3;
    st->MPI_TAG = 7;
    MPI_Status_set_elements(st, MPI_BYTE, 5);
    MPI_Status_set_cancelled(st, 0);
    return c->query_rc;
}

static int g_free(void *extra) {
    struct gctx *c = extra;
    c->free_calls++;
    c->free_seq = ++c->seq;
    return c->free_rc;
}

static int g_cancel(void *extra, int complete) {
    struct gctx *c = extra;
    c->cancel_calls++;
    c->last_cancel_complete = complete;
    return c->cancel_rc;
}

static int err_class(int code) {
    int cls;
    MPI_Error_class(code, &cls);
    return cls;
}

static void grequests(void) {
    MPI_Request r, rs[3];
    MPI_Status st, sts[3];
    int flag, idx, outcount, indices[3], count;

    /* Test/Wait: query_fn runs in the completing call, then free_fn. */
    {
        struct gctx c = {0};
        CHECK_RC(MPI_Grequest_start(g_query, g_free, g_cancel, &c, &r));
        CHECK_RC(MPI_Test(&r, &flag, &st));
        CHECK(!flag && c.query_calls == 0 && c.free_calls == 0);
        CHECK_RC(MPI_Grequest_complete(r));
        CHECK(c.query_calls == 0 && c.free_calls == 0);
        CHECK_RC(MPI_Test(&r, &flag, &st));
        CHECK(flag && r == MPI_REQUEST_NULL);
        CHECK(c.query_calls == 1 && c.free_calls == 1 && c.query_seq < c.free_seq);
        CHECK(st.MPI_SOURCE == 3 && st.MPI_TAG == 7);
        CHECK_RC(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(count == 5);
    }
    /* MPI_Request_get_status calls query_fn and frees nothing; Wait then completes. */
    {
        struct gctx c = {0};
        CHECK_RC(MPI_Grequest_start(g_query, g_free, g_cancel, &c, &r));
        CHECK_RC(MPI_Request_get_status(r, &flag, &st));
        CHECK(!flag && c.query_calls == 0);
        CHECK_RC(MPI_Grequest_complete(r));
        CHECK_RC(MPI_Request_get_status(r, &flag, &st));
        CHECK(flag && c.query_calls == 1 && c.free_calls == 0 && st.MPI_TAG == 7);
        CHECK(r != MPI_REQUEST_NULL);
        CHECK_RC(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL && c.query_calls == 2 && c.free_calls == 1);
        CHECK(st.MPI_SOURCE == 3);
    }
    /* cancel_fn gets the completion state; its error is MPI_Cancel's. */
    {
        struct gctx c = {0};
        CHECK_RC(MPI_Grequest_start(g_query, g_free, g_cancel, &c, &r));
        CHECK_RC(MPI_Cancel(&r));
        CHECK(c.cancel_calls == 1 && c.last_cancel_complete == 0);
        CHECK_RC(MPI_Grequest_complete(r));
        c.cancel_rc = MPI_ERR_OTHER;
        CHECK(err_class(MPI_Cancel(&r)) == MPI_ERR_OTHER);
        CHECK(c.cancel_calls == 2 && c.last_cancel_complete == 1);
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(c.query_calls == 1 && c.free_calls == 1);
    }
    /* Request_free before completion: free_fn runs in MPI_Grequest_complete, no query. */
    {
        struct gctx c = {0};
        CHECK_RC(MPI_Grequest_start(g_query, g_free, g_cancel, &c, &r));
        MPI_Request saved = r;
        CHECK_RC(MPI_Request_free(&r));
        CHECK(r == MPI_REQUEST_NULL && c.free_calls == 0);
        CHECK_RC(MPI_Grequest_complete(saved));
        CHECK(c.free_calls == 1 && c.query_calls == 0);
    }
    {
        /* Request_free after completion: free_fn runs in MPI_Request_free. */
        struct gctx c = {0};
        CHECK_RC(MPI_Grequest_start(g_query, g_free, g_cancel, &c, &r));
        CHECK_RC(MPI_Grequest_complete(r));
        c.free_rc = MPI_ERR_OTHER;
        CHECK(err_class(MPI_Request_free(&r)) == MPI_ERR_OTHER);
        CHECK(c.free_calls == 1 && c.query_calls == 0);
    }
    /* Errors of query_fn and free_fn are the completing call's (errors return). */
    {
        struct gctx c = {0};
        c.query_rc = MPI_ERR_BUFFER;
        CHECK_RC(MPI_Grequest_start(g_query, g_free, g_cancel, &c, &r));
        CHECK_RC(MPI_Grequest_complete(r));
        CHECK(err_class(MPI_Wait(&r, &st)) == MPI_ERR_BUFFER);
        CHECK(c.query_calls == 1 && c.free_calls == 1);
    }
    {
        struct gctx c = {0};
        c.free_rc = MPI_ERR_TAG;
        CHECK_RC(MPI_Grequest_start(g_query, g_free, g_cancel, &c, &r));
        CHECK_RC(MPI_Grequest_complete(r));
        CHECK(err_class(MPI_Wait(&r, MPI_STATUS_IGNORE)) == MPI_ERR_TAG);
        CHECK(c.query_calls == 1 && c.free_calls == 1);
    }
    /* Multiple completion: the failing one's status holds its error. */
    {
        struct gctx a = {0}, b = {0};
        a.query_rc = MPI_ERR_BUFFER;
        CHECK_RC(MPI_Grequest_start(g_query, g_free, g_cancel, &a, &rs[0]));
        CHECK_RC(MPI_Grequest_start(g_query, g_free, g_cancel, &b, &rs[1]));
        rs[2] = MPI_REQUEST_NULL;
        CHECK_RC(MPI_Testall(3, rs, &flag, sts));
        CHECK(!flag && a.query_calls == 0 && b.query_calls == 0);
        CHECK_RC(MPI_Grequest_complete(rs[0]));
        CHECK_RC(MPI_Testall(3, rs, &flag, sts));
        CHECK(!flag && a.query_calls == 0);
        CHECK_RC(MPI_Grequest_complete(rs[1]));
        CHECK(MPI_Waitall(3, rs, sts) == MPI_ERR_IN_STATUS);
        CHECK(err_class(sts[0].MPI_ERROR) == MPI_ERR_BUFFER);
        CHECK(sts[1].MPI_ERROR == MPI_SUCCESS && sts[1].MPI_TAG == 7);
        CHECK(a.query_calls == 1 && a.free_calls == 1 && b.query_calls == 1 && b.free_calls == 1);
    }
    /* Waitany/Waitsome/Testsome complete only what is complete. */
    {
        struct gctx a = {0}, b = {0};
        CHECK_RC(MPI_Grequest_start(g_query, g_free, g_cancel, &a, &rs[0]));
        CHECK_RC(MPI_Grequest_start(g_query, g_free, g_cancel, &b, &rs[1]));
        rs[2] = MPI_REQUEST_NULL;
        CHECK_RC(MPI_Testsome(3, rs, &outcount, indices, sts));
        CHECK(outcount == 0);
        CHECK_RC(MPI_Grequest_complete(rs[1]));
        CHECK_RC(MPI_Waitsome(3, rs, &outcount, indices, sts));
        CHECK(outcount == 1 && indices[0] == 1 && rs[1] == MPI_REQUEST_NULL);
        CHECK(b.query_calls == 1 && b.free_calls == 1 && a.query_calls == 0);
        CHECK_RC(MPI_Grequest_complete(rs[0]));
        CHECK_RC(MPI_Waitany(3, rs, &idx, &st));
        CHECK(idx == 0 && rs[0] == MPI_REQUEST_NULL && st.MPI_SOURCE == 3);
        CHECK(a.query_calls == 1 && a.free_calls == 1);
        CHECK_RC(MPI_Waitany(3, rs, &idx, &st));
        CHECK(idx == MPI_UNDEFINED);
    }
}

/* ---------- point-to-point ---------- */

#define W 64

static int handler_calls;
static MPI_Comm handler_comm;
static int handler_code;

static void count_errors(MPI_Comm *comm, int *code, ...) {
    handler_calls++;
    handler_comm = *comm;
    handler_code = *code;
}

static void window(int bytes) {
    int peer = 1 - rank;
    char *sb = malloc((size_t)W * bytes + 1), *rb = malloc((size_t)W * bytes + 1);
    MPI_Request r[2 * W];
    MPI_Status st[2 * W];
    for (int i = 0; i < W * bytes; i++) sb[i] = (char)(i * 7 + rank);
    memset(rb, 0, (size_t)W * bytes);
    for (int i = 0; i < W; i++)
        CHECK_RC(MPI_Irecv(rb + i * bytes, bytes, MPI_CHAR, peer, 100 + i, MPI_COMM_WORLD, &r[i]));
    for (int i = 0; i < W; i++)
        CHECK_RC(MPI_Isend(sb + i * bytes, bytes, MPI_CHAR, peer, 100 + i, MPI_COMM_WORLD, &r[W + i]));
    CHECK_RC(MPI_Waitall(2 * W, r, st));
    for (int i = 0; i < 2 * W; i++) CHECK(r[i] == MPI_REQUEST_NULL);
    for (int i = 0; i < W; i++) {
        int count;
        CHECK(st[i].MPI_SOURCE == peer && st[i].MPI_TAG == 100 + i && st[i].MPI_ERROR == MPI_SUCCESS);
        CHECK_RC(MPI_Get_count(&st[i], MPI_CHAR, &count));
        CHECK(count == bytes);
    }
    for (int i = 0; i < W * bytes; i++) CHECK(rb[i] == (char)(i * 7 + peer));
    free(sb);
    free(rb);
}

/* One Waitall over more receives than it hands the engine at once (runs of fast requests,
 * broken by null handles, receives from MPI_PROC_NULL and sends), with one truncated
 * receive: every status at its own index, the error in its status only, every handle nulled.
 * Rank 0 receives, rank 1 sends in reverse order of tags (so the receives complete out of
 * the order they are waited for). */
#define LONG_N 150
static void long_waitall(void) {
    int peer = 1 - rank, vals[LONG_N], small = 0;
    MPI_Request r[LONG_N + 1];
    MPI_Status st[LONG_N + 1];
    if (rank == 0) {
        for (int i = 0; i < LONG_N; i++) {
            vals[i] = -1;
            if (i % 7 == 3)
                r[i] = MPI_REQUEST_NULL;
            else if (i % 11 == 5)
                CHECK_RC(MPI_Irecv(&vals[i], 1, MPI_INT, MPI_PROC_NULL, i, MPI_COMM_WORLD, &r[i]));
            else
                CHECK_RC(MPI_Irecv(&vals[i], 1, MPI_INT, peer, 1000 + i, MPI_COMM_WORLD, &r[i]));
        }
        /* A 2-int message into a 1-byte buffer: truncated. */
        CHECK_RC(MPI_Irecv(&small, 1, MPI_BYTE, peer, 999, MPI_COMM_WORLD, &r[LONG_N]));
        CHECK_RC(MPI_Send(&small, 0, MPI_INT, peer, 998, MPI_COMM_WORLD));
        CHECK(MPI_Waitall(LONG_N + 1, r, st) == MPI_ERR_IN_STATUS);
        for (int i = 0; i < LONG_N; i++) {
            CHECK(r[i] == MPI_REQUEST_NULL);
            if (i % 7 == 3) continue;
            CHECK(st[i].MPI_ERROR == MPI_SUCCESS);
            if (i % 11 == 5) {
                CHECK(st[i].MPI_SOURCE == MPI_PROC_NULL && vals[i] == -1);
            } else {
                CHECK(st[i].MPI_SOURCE == peer && st[i].MPI_TAG == 1000 + i && vals[i] == 7 * i);
            }
        }
        CHECK(r[LONG_N] == MPI_REQUEST_NULL && err_class(st[LONG_N].MPI_ERROR) == MPI_ERR_TRUNCATE);
    } else {
        int two[2] = {1, 2};
        CHECK_RC(MPI_Recv(&small, 0, MPI_INT, peer, 998, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = LONG_N - 1; i >= 0; i--) {
            vals[i] = 7 * i;
            if (i % 7 != 3 && i % 11 != 5)
                CHECK_RC(MPI_Send(&vals[i], 1, MPI_INT, peer, 1000 + i, MPI_COMM_WORLD));
        }
        CHECK_RC(MPI_Send(two, 2, MPI_INT, peer, 999, MPI_COMM_WORLD));
    }
}

static void p2p(void) {
    int peer = 1 - rank, flag, idx, outcount, indices[4], count;
    MPI_Request r[4];
    MPI_Status st, sts[4];
    int a[4] = {0}, b[4] = {0};

    window(8);
    window(1000);
    window(70000);
    long_waitall();

    /* Waitany over an array with null entries. */
    if (rank == 0) {
        r[0] = MPI_REQUEST_NULL;
        CHECK_RC(MPI_Irecv(&a[1], 1, MPI_INT, peer, 1, MPI_COMM_WORLD, &r[1]));
        r[2] = MPI_REQUEST_NULL;
        CHECK_RC(MPI_Irecv(&a[3], 1, MPI_INT, peer, 3, MPI_COMM_WORLD, &r[3]));
        int seen = 0;
        for (int k = 0; k < 2; k++) {
            CHECK_RC(MPI_Waitany(4, r, &idx, &st));
            CHECK((idx == 1 || idx == 3) && r[idx] == MPI_REQUEST_NULL && st.MPI_TAG == idx);
            seen |= 1 << idx;
        }
        CHECK(seen == 0xa && a[1] == 11 && a[3] == 33);
        CHECK_RC(MPI_Waitany(4, r, &idx, &st));
        CHECK(idx == MPI_UNDEFINED);
        CHECK_RC(MPI_Testany(4, r, &idx, &flag, &st));
        CHECK(flag && idx == MPI_UNDEFINED);
    } else {
        b[0] = 33;
        CHECK_RC(MPI_Send(&b[0], 1, MPI_INT, peer, 3, MPI_COMM_WORLD));
        b[1] = 11;
        CHECK_RC(MPI_Send(&b[1], 1, MPI_INT, peer, 1, MPI_COMM_WORLD));
    }

    /* Partial completion: only the first of two receives can complete. */
    if (rank == 0) {
        CHECK_RC(MPI_Irecv(&a[0], 1, MPI_INT, peer, 10, MPI_COMM_WORLD, &r[0]));
        CHECK_RC(MPI_Irecv(&a[1], 1, MPI_INT, peer, 11, MPI_COMM_WORLD, &r[1]));
        CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
        do {
            CHECK_RC(MPI_Testsome(2, r, &outcount, indices, sts));
        } while (outcount == 0);
        CHECK(outcount == 1 && indices[0] == 0 && sts[0].MPI_TAG == 10 && a[0] == 100);
        CHECK(r[0] == MPI_REQUEST_NULL && r[1] != MPI_REQUEST_NULL);
        CHECK_RC(MPI_Testall(2, r, &flag, sts));
        CHECK(!flag && r[1] != MPI_REQUEST_NULL);
        CHECK_RC(MPI_Test(&r[1], &flag, &st));
        CHECK(!flag);
        CHECK_RC(MPI_Request_get_status(r[1], &flag, &st));
        CHECK(!flag);
        CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
        /* Request_get_status reports completion without freeing the request. */
        do {
            CHECK_RC(MPI_Request_get_status(r[1], &flag, &st));
        } while (!flag);
        CHECK(st.MPI_TAG == 11 && st.MPI_SOURCE == peer && r[1] != MPI_REQUEST_NULL);
        CHECK_RC(MPI_Waitsome(2, r, &outcount, indices, sts));
        CHECK(outcount == 1 && indices[0] == 1 && sts[0].MPI_TAG == 11 && a[1] == 101);
        CHECK_RC(MPI_Waitsome(2, r, &outcount, indices, sts));
        CHECK(outcount == MPI_UNDEFINED);
        CHECK_RC(MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE));
        CHECK(flag);
    } else {
        b[0] = 100;
        CHECK_RC(MPI_Send(&b[0], 1, MPI_INT, peer, 10, MPI_COMM_WORLD));
        CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
        b[1] = 101;
        CHECK_RC(MPI_Send(&b[1], 1, MPI_INT, peer, 11, MPI_COMM_WORLD));
    }

    /* Testall completes all or none. */
    {
        CHECK_RC(MPI_Irecv(&a[0], 1, MPI_INT, peer, 20, MPI_COMM_WORLD, &r[0]));
        CHECK_RC(MPI_Irecv(&a[1], 1, MPI_INT, peer, 21, MPI_COMM_WORLD, &r[1]));
        b[0] = 200 + rank;
        CHECK_RC(MPI_Send(&b[0], 1, MPI_INT, peer, 20, MPI_COMM_WORLD));
        CHECK_RC(MPI_Wait(&r[0], &st));
        CHECK(a[0] == 200 + peer);
        CHECK_RC(MPI_Irecv(&a[0], 1, MPI_INT, peer, 22, MPI_COMM_WORLD, &r[0]));
        CHECK_RC(MPI_Send(&b[0], 1, MPI_INT, peer, 22, MPI_COMM_WORLD));
        /* r[0] completes soon; r[1] only after the barrier. */
        for (int k = 0; k < 100; k++) {
            CHECK_RC(MPI_Testall(2, r, &flag, sts));
            CHECK(!flag && r[0] != MPI_REQUEST_NULL && r[1] != MPI_REQUEST_NULL);
        }
        CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_RC(MPI_Send(&b[0], 1, MPI_INT, peer, 21, MPI_COMM_WORLD));
        do {
            CHECK_RC(MPI_Testall(2, r, &flag, sts));
        } while (!flag);
        CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL);
        CHECK(sts[0].MPI_TAG == 22 && sts[1].MPI_TAG == 21 && a[0] == 200 + peer && a[1] == 200 + peer);
    }

    /* Cancel a receive that never matches. */
    CHECK_RC(MPI_Irecv(&a[0], 1, MPI_INT, peer, 999, MPI_COMM_WORLD, &r[0]));
    CHECK_RC(MPI_Cancel(&r[0]));
    CHECK_RC(MPI_Wait(&r[0], &st));
    CHECK_RC(MPI_Test_cancelled(&st, &flag));
    CHECK(flag && r[0] == MPI_REQUEST_NULL);

    /* Free an active send: the message still arrives. */
    if (rank == 0) {
        static int big[20000];
        for (int i = 0; i < 20000; i++) big[i] = i;
        CHECK_RC(MPI_Isend(big, 20000, MPI_INT, peer, 30, MPI_COMM_WORLD, &r[0]));
        CHECK_RC(MPI_Request_free(&r[0]));
        CHECK(r[0] == MPI_REQUEST_NULL);
        CHECK_RC(MPI_Recv(&a[0], 1, MPI_INT, peer, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else {
        static int got[20000];
        CHECK_RC(MPI_Recv(got, 20000, MPI_INT, peer, 30, MPI_COMM_WORLD, &st));
        CHECK_RC(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(count == 20000 && got[19999] == 19999);
        CHECK_RC(MPI_Send(&b[0], 1, MPI_INT, peer, 31, MPI_COMM_WORLD));
    }

    /* Truncation: error in the statuses, and through the request's communicator. */
    {
        MPI_Comm dup;
        MPI_Errhandler eh;
        CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        CHECK_RC(MPI_Comm_create_errhandler(count_errors, &eh));
        CHECK_RC(MPI_Comm_set_errhandler(dup, eh));
        int big[4] = {1, 2, 3, 4};
        if (rank == 0) {
            CHECK_RC(MPI_Irecv(a, 2, MPI_INT, peer, 40, dup, &r[0]));
            int rc = MPI_Wait(&r[0], &st);
            CHECK(err_class(rc) == MPI_ERR_TRUNCATE);
            CHECK(handler_calls == 1 && handler_comm == dup && err_class(handler_code) == MPI_ERR_TRUNCATE);
            CHECK(a[0] == 1 && a[1] == 2);
            CHECK_RC(MPI_Irecv(a, 2, MPI_INT, peer, 41, dup, &r[0]));
            CHECK_RC(MPI_Irecv(b, 4, MPI_INT, peer, 42, dup, &r[1]));
            rc = MPI_Waitall(2, r, sts);
            CHECK(rc == MPI_ERR_IN_STATUS);
            CHECK(err_class(sts[0].MPI_ERROR) == MPI_ERR_TRUNCATE && sts[1].MPI_ERROR == MPI_SUCCESS);
            CHECK(b[3] == 4 && r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL);
        } else {
            CHECK_RC(MPI_Send(big, 4, MPI_INT, peer, 40, dup));
            CHECK_RC(MPI_Send(big, 4, MPI_INT, peer, 41, dup));
            CHECK_RC(MPI_Send(big, 4, MPI_INT, peer, 42, dup));
        }
        CHECK_RC(MPI_Errhandler_free(&eh));
        CHECK_RC(MPI_Comm_free(&dup));
    }

    /* Persistent requests, and MPI_Start on a nonpersistent one. */
    {
        int v = -1, w = 0;
        MPI_Request ps, pr;
        CHECK_RC(MPI_Send_init(&w, 1, MPI_INT, peer, 50, MPI_COMM_WORLD, &ps));
        CHECK_RC(MPI_Recv_init(&v, 1, MPI_INT, peer, 50, MPI_COMM_WORLD, &pr));
        for (int k = 0; k < 3; k++) {
            w = 500 + k;
            MPI_Request both[2] = {pr, ps};
            CHECK_RC(MPI_Startall(2, both));
            CHECK_RC(MPI_Waitall(2, both, sts));
            CHECK(both[0] == pr && both[1] == ps && v == 500 + k && sts[0].MPI_TAG == 50);
        }
        CHECK_RC(MPI_Request_free(&ps));
        CHECK_RC(MPI_Request_free(&pr));
        CHECK_RC(MPI_Irecv(&v, 1, MPI_INT, peer, 51, MPI_COMM_WORLD, &r[0]));
        CHECK(err_class(MPI_Start(&r[0])) == MPI_ERR_REQUEST);
        CHECK_RC(MPI_Send(&w, 1, MPI_INT, peer, 51, MPI_COMM_WORLD));
        CHECK_RC(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    }

    /* MPI_PROC_NULL. */
    CHECK_RC(MPI_Irecv(a, 4, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r[0]));
    CHECK_RC(MPI_Isend(b, 4, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r[1]));
    CHECK_RC(MPI_Waitall(2, r, sts));
    CHECK(sts[0].MPI_SOURCE == MPI_PROC_NULL && sts[0].MPI_TAG == MPI_ANY_TAG);
    CHECK_RC(MPI_Get_count(&sts[0], MPI_INT, &count));
    CHECK(count == 0);

    /* Bad arguments are reported (errors return on the world). */
    CHECK(err_class(MPI_Isend(a, 1, MPI_INT, size, 0, MPI_COMM_WORLD, &r[0])) == MPI_ERR_RANK);
    CHECK(err_class(MPI_Irecv(a, 1, MPI_INT, peer, -5, MPI_COMM_WORLD, &r[0])) == MPI_ERR_TAG);
    CHECK(err_class(MPI_Irecv(a, -1, MPI_INT, peer, 0, MPI_COMM_WORLD, &r[0])) == MPI_ERR_COUNT);
}

/* ---------- threads ---------- */

#define THREADS 4
#define ROUNDS 300

static void *exchange(void *arg) {
    int t = (int)(long)arg, peer = 1 - rank;
    int out[8], in[8];
    for (int k = 0; k < ROUNDS; k++) {
        MPI_Request r[2];
        for (int i = 0; i < 8; i++) out[i] = rank * 1000000 + t * 10000 + k * 8 + i;
        CHECK_RC(MPI_Irecv(in, 8, MPI_INT, peer, 60 + t, MPI_COMM_WORLD, &r[0]));
        CHECK_RC(MPI_Isend(out, 8, MPI_INT, peer, 60 + t, MPI_COMM_WORLD, &r[1]));
        if (k % 2) {
            CHECK_RC(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        } else {
            CHECK_RC(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
            int flag = 0;
            while (!flag) CHECK_RC(MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE));
        }
        for (int i = 0; i < 8; i++) CHECK(in[i] == peer * 1000000 + t * 10000 + k * 8 + i);
    }
    return NULL;
}

/* ---------- sends that complete inside their start call ----------
 * A small eager send (here to ourselves) may finish in MPI_Isend; its request must still
 * behave as a request: wait/test/get_status complete it, cancel does not cancel it, free
 * nulls it, MPI_Start rejects it, and several of them in one Waitall are fine. */
static void early_sends(void) {
    int out[4] = {11, 12, 13, 14}, in[4] = {0, 0, 0, 0}, flag = 0, cancelled = 1;
    MPI_Request s[4], r;
    MPI_Status st;
    for (int i = 0; i < 4; i++) CHECK_RC(MPI_Isend(&out[i], 1, MPI_INT, rank, 40 + i, MPI_COMM_WORLD, &s[i]));
    CHECK_RC(MPI_Request_get_status(s[0], &flag, &st));
    CHECK(flag);
    CHECK(s[0] != MPI_REQUEST_NULL);
    CHECK_RC(MPI_Test(&s[0], &flag, &st));
    CHECK(flag && s[0] == MPI_REQUEST_NULL);
    CHECK_RC(MPI_Test_cancelled(&st, &cancelled));
    CHECK(!cancelled);
    CHECK_RC(MPI_Cancel(&s[1]));
    CHECK_RC(MPI_Wait(&s[1], &st));
    CHECK(s[1] == MPI_REQUEST_NULL);
    CHECK_RC(MPI_Test_cancelled(&st, &cancelled));
    CHECK(!cancelled);
    CHECK(err_class(MPI_Start(&s[2])) == MPI_ERR_REQUEST);
    CHECK_RC(MPI_Request_free(&s[3]));
    CHECK(s[3] == MPI_REQUEST_NULL);
    CHECK_RC(MPI_Waitall(4, s, MPI_STATUSES_IGNORE));
    CHECK(s[2] == MPI_REQUEST_NULL);
    for (int i = 3; i >= 0; i--) {
        CHECK_RC(MPI_Irecv(&in[i], 1, MPI_INT, rank, 40 + i, MPI_COMM_WORLD, &r));
        CHECK_RC(MPI_Wait(&r, &st));
        CHECK(st.MPI_SOURCE == rank && st.MPI_TAG == 40 + i && in[i] == out[i]);
    }
}

int main(int argc, char **argv) {
    int provided;
    CHECK_RC(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    grequests();
    early_sends();
    if (size == 2) {
        p2p();
        if (provided == MPI_THREAD_MULTIPLE) {
            pthread_t th[THREADS];
            for (long t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, exchange, (void *)t) == 0);
            for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
        }
    }
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("requests: all checks passed (%d ranks)\n", size);
    MPI_Finalize();
    return 0;
}
