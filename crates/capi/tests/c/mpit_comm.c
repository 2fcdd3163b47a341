/* Performance variables bound to communicators (MPI_T_BIND_MPI_COMM) on 2 ranks: two
 * duplicates of MPI_COMM_WORLD carry different traffic, and handles bound to each count
 * only their own, sent and received, and the collective algorithms that ran on it
 * (blocking, nonblocking and persistent barriers). Rank 0 prints deterministic lines. */
#include "check.h"
#include <string.h>

#define T_CHECK(call) CHECK((call) == MPI_SUCCESS)

static unsigned long long readu(MPI_T_pvar_session s, MPI_T_pvar_handle h)
{
    unsigned long long v = 0;
    T_CHECK(MPI_T_pvar_read(s, h, &v));
    return v;
}

static unsigned long long sum(MPI_T_pvar_session s, MPI_T_pvar_handle *h, int n)
{
    unsigned long long v = 0;
    for (int i = 0; i < n; i++)
        v += readu(s, h[i]);
    return v;
}

/* Handles on every communicator-bound barrier algorithm counter of `comm`. */
static int barrier_handles(MPI_T_pvar_session s, MPI_Comm *comm, MPI_T_pvar_handle *h, int max)
{
    int num = 0, n = 0;
    T_CHECK(MPI_T_pvar_get_num(&num));
    for (int i = 0; i < num; i++) {
        char name[256];
        int len = sizeof name, bind, count;
        T_CHECK(MPI_T_pvar_get_info(i, name, &len, NULL, NULL, NULL, NULL, NULL, NULL, &bind,
                                    NULL, NULL, NULL));
        if (bind != MPI_T_BIND_MPI_COMM || strncmp(name, "coll_", 5) ||
            !strstr(name, "_comm_") || !strstr(name, "barrier"))
            continue;
        CHECK(n < max);
        T_CHECK(MPI_T_pvar_handle_alloc(s, i, comm, &h[n], &count));
        n++;
    }
    return n;
}

int main(int argc, char **argv)
{
    int provided, rank, size, count, msgs = -1, bytes = -1, bind = -1, cls;
    int rmsgs = -1, rbytes = -1;
    T_CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 2);
    T_CHECK(MPI_T_pvar_get_index("pml_ox_comm_msgs_sent", MPI_T_PVAR_CLASS_COUNTER, &msgs));
    T_CHECK(MPI_T_pvar_get_index("pml_ox_comm_bytes_sent", MPI_T_PVAR_CLASS_COUNTER, &bytes));
    T_CHECK(MPI_T_pvar_get_index("pml_ox_comm_msgs_recv", MPI_T_PVAR_CLASS_COUNTER, &rmsgs));
    T_CHECK(MPI_T_pvar_get_index("pml_ox_comm_bytes_recv", MPI_T_PVAR_CLASS_COUNTER, &rbytes));
    T_CHECK(MPI_T_pvar_get_info(rbytes, NULL, NULL, NULL, &cls, NULL, NULL, NULL, NULL, &bind,
                                NULL, NULL, NULL));
    CHECK(bind == MPI_T_BIND_MPI_COMM);
    T_CHECK(MPI_T_pvar_get_info(msgs, NULL, NULL, NULL, &cls, NULL, NULL, NULL, NULL, &bind,
                                NULL, NULL, NULL));
    CHECK(bind == MPI_T_BIND_MPI_COMM);

    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    MPI_T_pvar_session s;
    MPI_T_pvar_handle ma, mb, ba, bb, rma, rmb, rba, rbb;
    T_CHECK(MPI_T_pvar_session_create(&s));
    T_CHECK(MPI_T_pvar_handle_alloc(s, msgs, &a, &ma, &count));
    CHECK(count == 1);
    T_CHECK(MPI_T_pvar_handle_alloc(s, msgs, &b, &mb, &count));
    T_CHECK(MPI_T_pvar_handle_alloc(s, bytes, &a, &ba, &count));
    T_CHECK(MPI_T_pvar_handle_alloc(s, bytes, &b, &bb, &count));
    T_CHECK(MPI_T_pvar_handle_alloc(s, rmsgs, &a, &rma, &count));
    T_CHECK(MPI_T_pvar_handle_alloc(s, rmsgs, &b, &rmb, &count));
    T_CHECK(MPI_T_pvar_handle_alloc(s, rbytes, &a, &rba, &count));
    T_CHECK(MPI_T_pvar_handle_alloc(s, rbytes, &b, &rbb, &count));
    MPI_Comm null = MPI_COMM_NULL;
    MPI_T_pvar_handle bad;
    CHECK(MPI_T_pvar_handle_alloc(s, msgs, &null, &bad, &count) != MPI_SUCCESS);

    MPI_T_pvar_handle colla[32], collb[32];
    int ncoll = barrier_handles(s, &a, colla, 32);
    CHECK(ncoll >= 3 && barrier_handles(s, &b, collb, 32) == ncoll);

    MPI_Barrier(MPI_COMM_WORLD); /* both sides count from here */
    char buf[100] = {0};
    int peer = 1 - rank;
    /* On a: three 10-byte messages from rank 0; on b: one 100-byte message each way. */
    for (int i = 0; i < 3; i++) {
        if (rank == 0)
            MPI_Send(buf, 10, MPI_CHAR, 1, i, a);
        else
            MPI_Recv(buf, 10, MPI_CHAR, 0, i, a, MPI_STATUS_IGNORE);
    }
    MPI_Sendrecv_replace(buf, 100, MPI_CHAR, peer, 9, peer, 9, b, MPI_STATUS_IGNORE);
    MPI_Barrier(a); /* collective traffic is not point-to-point on a */
    /* b: one nonblocking barrier, one persistent barrier started twice. */
    MPI_Request r;
    MPI_Ibarrier(b, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Barrier_init(b, MPI_INFO_NULL, &r);
    for (int i = 0; i < 2; i++) {
        MPI_Start(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    MPI_Request_free(&r);
    unsigned long long runs_a = sum(s, colla, ncoll), runs_b = sum(s, collb, ncoll);
    if (rank == 0)
        printf("mpit_comm: barriers on a %llu, on b %llu\n", runs_a, runs_b);
    CHECK(runs_a == 1 && runs_b == 3);

    unsigned long long na = readu(s, ma), nb = readu(s, mb), ya = readu(s, ba), yb = readu(s, bb);
    unsigned long long rna = readu(s, rma), rnb = readu(s, rmb), rya = readu(s, rba),
                       ryb = readu(s, rbb);
    if (rank == 0) {
        printf("mpit_comm: a %llu msgs %llu bytes, b %llu msgs %llu bytes\n", na, ya, nb, yb);
        CHECK(rna == 0 && rya == 0);
    } else {
        CHECK(na == 0 && ya == 0);
        CHECK(rna == 3 && rya == 30); /* rank 0's three 10-byte messages arrived on a */
    }
    CHECK(nb == 1 && yb == 100 && rnb == 1 && ryb == 100);
    T_CHECK(MPI_T_pvar_session_free(&s));
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
    T_CHECK(MPI_T_finalize());
    MPI_Finalize();
    if (rank == 0)
        printf("mpit_comm: all checks passed\n");
    return 0;
}
