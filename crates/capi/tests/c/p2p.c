/* Point-to-point: blocking, nonblocking, synchronous, ready, buffered, sendrecv,
 * persistent requests, derived datatypes, wildcards, MPI_PROC_NULL, Get_count and
 * Get_elements, the any/some completion calls. Needs exactly 2 ranks. */
#include "check.h"
#include <string.h>

static int greq_freed = 0;
static int greq_query(void *extra, MPI_Status *st)
{
    st->MPI_SOURCE = *(int *)extra;
    st->MPI_TAG = 77;
    st->MPI_ERROR = MPI_SUCCESS;
    MPI_Status_set_elements(st, MPI_INT, 3);
    MPI_Status_set_cancelled(st, 0);
    return MPI_SUCCESS;
}
static int greq_free(void *extra)
{
    (void)extra;
    greq_freed++;
    return MPI_SUCCESS;
}
static int greq_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    int rank, size, i;
    MPI_Status st;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 2);
    int peer = 1 - rank;

    /* 1. blocking send/recv of doubles, status fields and counts */
    double d[8];
    if (rank == 0) {
        for (i = 0; i < 8; i++) d[i] = i * 1.5;
        CHECK_RC(MPI_Send(d, 8, MPI_DOUBLE, 1, 11, MPI_COMM_WORLD));
    } else {
        memset(d, 0, sizeof d);
        CHECK_RC(MPI_Recv(d, 8, MPI_DOUBLE, 0, 11, MPI_COMM_WORLD, &st));
        for (i = 0; i < 8; i++) CHECK(d[i] == i * 1.5);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 11);
        int c;
        CHECK_RC(MPI_Get_count(&st, MPI_DOUBLE, &c));
        CHECK(c == 8);
        CHECK_RC(MPI_Get_count(&st, MPI_INT, &c));
        CHECK(c == 16);
        CHECK_RC(MPI_Get_elements(&st, MPI_DOUBLE, &c));
        CHECK(c == 8);
    }
    if (rank == 0) printf("blocking send/recv: ok\n");

    /* 2. nonblocking exchange with wildcards and Waitall */
    int sbuf[4], rbuf[4];
    MPI_Request rq[2];
    MPI_Status sts[2];
    for (i = 0; i < 4; i++) sbuf[i] = rank * 100 + i;
    CHECK_RC(MPI_Irecv(rbuf, 4, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[0]));
    CHECK_RC(MPI_Isend(sbuf, 4, MPI_INT, peer, 20 + rank, MPI_COMM_WORLD, &rq[1]));
    CHECK_RC(MPI_Waitall(2, rq, sts));
    CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL);
    CHECK(sts[0].MPI_SOURCE == peer && sts[0].MPI_TAG == 20 + peer);
    for (i = 0; i < 4; i++) CHECK(rbuf[i] == peer * 100 + i);
    if (rank == 0) printf("isend/irecv/waitall with wildcards: ok\n");

    /* 3. synchronous and ready sends */
    int v = 0;
    if (rank == 0) {
        v = 7;
        CHECK_RC(MPI_Ssend(&v, 1, MPI_INT, 1, 30, MPI_COMM_WORLD));
        CHECK_RC(MPI_Recv(&v, 1, MPI_INT, 1, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(v == 8);
    } else {
        CHECK_RC(MPI_Recv(&v, 1, MPI_INT, 0, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        v++;
        CHECK_RC(MPI_Rsend(&v, 1, MPI_INT, 0, 31, MPI_COMM_WORLD));
    }
    if (rank == 0) printf("ssend/rsend: ok\n");

    /* 4. buffered send with an attached buffer */
    {
        int bsize = 4 * (int)sizeof(int) + MPI_BSEND_OVERHEAD;
        char *bbuf = malloc(bsize);
        CHECK_RC(MPI_Buffer_attach(bbuf, bsize));
        int x[4] = {rank, rank + 1, rank + 2, rank + 3}, y[4];
        CHECK_RC(MPI_Bsend(x, 4, MPI_INT, peer, 40, MPI_COMM_WORLD));
        CHECK_RC(MPI_Recv(y, 4, MPI_INT, peer, 40, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (i = 0; i < 4; i++) CHECK(y[i] == peer + i);
        void *back;
        int bs;
        CHECK_RC(MPI_Buffer_detach(&back, &bs));
        CHECK(back == bbuf && bs == bsize);
        free(bbuf);
    }
    if (rank == 0) printf("bsend with attach/detach: ok\n");

    /* 5. sendrecv and sendrecv_replace */
    {
        long a = rank + 1000, b = -1;
        CHECK_RC(MPI_Sendrecv(&a, 1, MPI_LONG, peer, 50, &b, 1, MPI_LONG, peer, 50, MPI_COMM_WORLD, &st));
        CHECK(b == peer + 1000 && st.MPI_SOURCE == peer);
        int r[3] = {rank, rank, rank};
        CHECK_RC(MPI_Sendrecv_replace(r, 3, MPI_INT, peer, 51, peer, 51, MPI_COMM_WORLD, &st));
        CHECK(r[0] == peer && r[2] == peer);
    }
    if (rank == 0) printf("sendrecv/sendrecv_replace: ok\n");

    /* 6. persistent requests, started three times */
    {
        int out = 0, in = -1, k;
        MPI_Request p[2];
        CHECK_RC(MPI_Send_init(&out, 1, MPI_INT, peer, 60, MPI_COMM_WORLD, &p[0]));
        CHECK_RC(MPI_Recv_init(&in, 1, MPI_INT, peer, 60, MPI_COMM_WORLD, &p[1]));
        for (k = 0; k < 3; k++) {
            out = rank * 10 + k;
            CHECK_RC(MPI_Startall(2, p));
            CHECK_RC(MPI_Waitall(2, p, MPI_STATUSES_IGNORE));
            CHECK(in == peer * 10 + k);
            CHECK(p[0] != MPI_REQUEST_NULL && p[1] != MPI_REQUEST_NULL);
        }
        CHECK_RC(MPI_Request_free(&p[0]));
        CHECK_RC(MPI_Request_free(&p[1]));
        CHECK(p[0] == MPI_REQUEST_NULL);
    }
    if (rank == 0) printf("persistent requests: ok\n");

    /* 7. derived datatypes: a strided vector sent, received contiguous */
    {
        int m[12], c[6], n;
        MPI_Datatype vec;
        CHECK_RC(MPI_Type_vector(3, 2, 4, MPI_INT, &vec));
        CHECK_RC(MPI_Type_commit(&vec));
        CHECK_RC(MPI_Type_size(vec, &n));
        CHECK(n == 24);
        MPI_Aint lb, ext;
        CHECK_RC(MPI_Type_get_extent(vec, &lb, &ext));
        CHECK(lb == 0 && ext == 10 * (MPI_Aint)sizeof(int));
        if (rank == 0) {
            for (i = 0; i < 12; i++) m[i] = i;
            CHECK_RC(MPI_Send(m, 1, vec, 1, 70, MPI_COMM_WORLD));
            CHECK_RC(MPI_Recv(m, 1, vec, 1, 71, MPI_COMM_WORLD, &st));
            int expect[12] = {0, 1, -1, -1, 4, 5, -1, -1, 8, 9, -1, -1};
            for (i = 0; i < 10; i++) CHECK(m[i] == expect[i] || (expect[i] == -1 && m[i] == i));
            CHECK_RC(MPI_Get_count(&st, vec, &n));
            CHECK(n == 1);
            CHECK_RC(MPI_Get_elements(&st, vec, &n));
            CHECK(n == 6);
        } else {
            CHECK_RC(MPI_Recv(c, 6, MPI_INT, 0, 70, MPI_COMM_WORLD, &st));
            int expect[6] = {0, 1, 4, 5, 8, 9};
            for (i = 0; i < 6; i++) CHECK(c[i] == expect[i]);
            CHECK_RC(MPI_Send(c, 6, MPI_INT, 0, 71, MPI_COMM_WORLD));
        }
        CHECK_RC(MPI_Type_free(&vec));
        CHECK(vec == MPI_DATATYPE_NULL);
    }
    if (rank == 0) printf("vector datatype: ok\n");

    /* 8. MPI_PROC_NULL */
    {
        int z = 5;
        CHECK_RC(MPI_Send(&z, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
        CHECK_RC(MPI_Recv(&z, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
        CHECK(z == 5 && st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
        int c = -1;
        CHECK_RC(MPI_Get_count(&st, MPI_INT, &c));
        CHECK(c == 0);
    }
    if (rank == 0) printf("proc_null: ok\n");

    /* 9. Waitany / Testsome / Test over several receives */
    {
        int in[3] = {0, 0, 0}, o[3], idx, done = 0, k, flag;
        MPI_Request r3[3];
        for (k = 0; k < 3; k++) CHECK_RC(MPI_Irecv(&in[k], 1, MPI_INT, peer, 80 + k, MPI_COMM_WORLD, &r3[k]));
        for (k = 2; k >= 0; k--) {
            o[k] = 1000 * rank + k;
            CHECK_RC(MPI_Send(&o[k], 1, MPI_INT, peer, 80 + k, MPI_COMM_WORLD));
        }
        CHECK_RC(MPI_Waitany(3, r3, &idx, &st));
        CHECK(idx >= 0 && idx < 3 && r3[idx] == MPI_REQUEST_NULL && st.MPI_TAG == 80 + idx);
        done = 1;
        while (done < 3) {
            int outc, ind[3];
            CHECK_RC(MPI_Testsome(3, r3, &outc, ind, MPI_STATUSES_IGNORE));
            CHECK(outc != MPI_UNDEFINED);
            done += outc;
        }
        for (k = 0; k < 3; k++) CHECK(in[k] == 1000 * peer + k);
        CHECK_RC(MPI_Waitany(3, r3, &idx, MPI_STATUS_IGNORE));
        CHECK(idx == MPI_UNDEFINED);
        MPI_Request nr = MPI_REQUEST_NULL;
        CHECK_RC(MPI_Test(&nr, &flag, &st));
        CHECK(flag == 1);
    }
    if (rank == 0) printf("waitany/testsome: ok\n");

    /* 10. cancel a receive that can never match */
    {
        int never;
        MPI_Request cr;
        CHECK_RC(MPI_Irecv(&never, 1, MPI_INT, peer, 999, MPI_COMM_WORLD, &cr));
        CHECK_RC(MPI_Cancel(&cr));
        CHECK_RC(MPI_Wait(&cr, &st));
        int c = 0;
        CHECK_RC(MPI_Test_cancelled(&st, &c));
        CHECK(c == 1);
    }
    if (rank == 0) printf("cancel: ok\n");

    /* 11. MPI_BOTTOM with absolute addresses (a struct type built from MPI_Get_address) */
    {
        int a = -1;
        double b = -1;
        MPI_Aint disp[2];
        int bl[2] = {1, 1};
        MPI_Datatype ty[2] = {MPI_INT, MPI_DOUBLE}, abs_t;
        CHECK_RC(MPI_Get_address(&a, &disp[0]));
        CHECK_RC(MPI_Get_address(&b, &disp[1]));
        CHECK_RC(MPI_Type_create_struct(2, bl, disp, ty, &abs_t));
        CHECK_RC(MPI_Type_commit(&abs_t));
        if (rank == 0) {
            a = 17;
            b = 2.5;
            CHECK_RC(MPI_Send(MPI_BOTTOM, 1, abs_t, 1, 100, MPI_COMM_WORLD));
        } else {
            CHECK_RC(MPI_Recv(MPI_BOTTOM, 1, abs_t, 0, 100, MPI_COMM_WORLD, &st));
            CHECK(a == 17 && b == 2.5);
            int n;
            CHECK_RC(MPI_Get_elements(&st, abs_t, &n));
            CHECK(n == 2);
        }
        CHECK_RC(MPI_Type_free(&abs_t));
    }
    if (rank == 0) printf("mpi_bottom with absolute addresses: ok\n");

    /* 12. generalized requests */
    {
        MPI_Request g;
        int who = 5, flag = -1, n = 0;
        CHECK_RC(MPI_Grequest_start(greq_query, greq_free, greq_cancel, &who, &g));
        CHECK_RC(MPI_Test(&g, &flag, &st));
        CHECK(flag == 0 && g != MPI_REQUEST_NULL);
        CHECK_RC(MPI_Grequest_complete(g));
        CHECK_RC(MPI_Wait(&g, &st));
        CHECK(g == MPI_REQUEST_NULL && greq_freed == 1);
        CHECK(st.MPI_SOURCE == 5 && st.MPI_TAG == 77);
        CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
        CHECK(n == 3);
    }
    if (rank == 0) printf("generalized requests: ok\n");

    /* blocking send/recv on duplicated communicators (the library's fast path caches
       the communicator of a handle): contexts stay apart, errors go to the duplicate's
       handler, and a freed handle that is reused names the new communicator */
    {
        MPI_Comm a, b;
        int x = -1, y = -1, k, cls;
        CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &a));
        CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &b));
        if (rank == 0) {
            x = 1; CHECK_RC(MPI_Send(&x, 1, MPI_INT, 1, 7, a));
            x = 2; CHECK_RC(MPI_Send(&x, 1, MPI_INT, 1, 7, b));
            x = 3; CHECK_RC(MPI_Send(&x, 1, MPI_INT, 1, 7, MPI_COMM_WORLD));
        } else {
            CHECK_RC(MPI_Recv(&x, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(x == 3);
            CHECK_RC(MPI_Recv(&x, 1, MPI_INT, 0, 7, b, &st));
            CHECK(x == 2 && st.MPI_SOURCE == 0 && st.MPI_TAG == 7);
            CHECK_RC(MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, a, &st));
            CHECK(x == 1 && st.MPI_SOURCE == 0 && st.MPI_TAG == 7);
        }
        CHECK_RC(MPI_Comm_set_errhandler(a, MPI_ERRORS_RETURN));
        k = MPI_Send(&x, 1, MPI_INT, 5, 7, a);
        CHECK(k != MPI_SUCCESS);
        MPI_Error_class(k, &cls);
        CHECK(cls == MPI_ERR_RANK);
        k = MPI_Recv(&x, 1, MPI_INT, 0, -5, a, MPI_STATUS_IGNORE);
        MPI_Error_class(k, &cls);
        CHECK(cls == MPI_ERR_TAG);
        for (k = 0; k < 3; k++) {
            /* free and re-create: the new communicator may get the same handle */
            CHECK_RC(MPI_Comm_free(&a));
            CHECK(a == MPI_COMM_NULL);
            CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, 0, 1 - rank, &a));
            CHECK_RC(MPI_Comm_rank(a, &y));
            CHECK(y == 1 - rank);
            /* in `a` the ranks are swapped: world rank 0 is rank 1 */
            x = 10 * rank + k;
            CHECK_RC(MPI_Sendrecv(&x, 1, MPI_INT, 1 - y, k, &y, 1, MPI_INT, MPI_ANY_SOURCE, k, a, &st));
            CHECK(y == 10 * peer + k);
            if (rank == 0) CHECK_RC(MPI_Send(&x, 1, MPI_INT, 0, 40 + k, a));
            else {
                CHECK_RC(MPI_Recv(&y, 1, MPI_INT, 1, 40 + k, a, &st));
                CHECK(y == k && st.MPI_SOURCE == 1);
            }
        }
        CHECK_RC(MPI_Comm_free(&a));
        CHECK_RC(MPI_Comm_free(&b));
        CHECK(b == MPI_COMM_NULL);
    }
    if (rank == 0) printf("duplicated communicators: ok\n");

    /* final handshake so nobody finalizes with traffic in flight */
    CHECK_RC(MPI_Sendrecv(&v, 1, MPI_INT, peer, 90, &v, 1, MPI_INT, peer, 90, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Finalize());
    if (rank == 0) printf("p2p: all checks passed\n");
    return 0;
}
