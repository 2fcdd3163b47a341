/* Nonblocking receives whose message arrived before they were posted (2 ranks).
 *
 * Rank 0 sends a batch of small messages and then a "go" message; rank 1 receives "go"
 * first, so the batch waits unexpected, and each MPI_Irecv posted afterwards matches a
 * message that is already there (the library may complete such a receive inside
 * MPI_Irecv). Their requests must behave exactly like any other receive request:
 * statuses (source, tag, count, MPI_ERROR in multiple completions), data, truncation
 * (MPI_ERR_TRUNCATE through the request's communicator's error handler, MPI_ERR_IN_STATUS
 * from Waitall; checks limited to what MPI defines, so that the program passes on Open MPI
 * too), cancel (fails: the receive matched), Request_free, Request_get_status
 * (does not free), every wait/test form mixed with pending, null and completed-send
 * requests, MPI_Start rejected, persistent receives unaffected, a stale handle rejected,
 * more such requests alive at once than any fixed-size store holds, receives from
 * MPI_PROC_NULL and from ourselves, and four threads doing all this at once at
 * MPI_THREAD_MULTIPLE (one communicator each, requests completed by another thread). */
#include <pthread.h>
#include <string.h>

#include "check.h"

static int rank;

static int err_class(int code) {
    int c = -1;
    MPI_Error_class(code, &c);
    return c;
}

static int is_oxmpi(void) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    CHECK_RC(MPI_Get_library_version(v, &n));
    return strstr(v, "oxmpi") != NULL;
}

static int count_of(const MPI_Status *st, MPI_Datatype t) {
    int n = -1;
    CHECK_RC(MPI_Get_count(st, t, &n));
    return n;
}

/* Rank 0: send `n` ints (message i holds i * 7 + base, tag base + i % 50), then "go". */
static void send_batch(MPI_Comm comm, int n, int base) {
    for (int i = 0; i < n; i++) {
        int v = i * 7 + base;
        CHECK_RC(MPI_Send(&v, 1, MPI_INT, 1, base + i % 50, comm));
    }
    CHECK_RC(MPI_Send(NULL, 0, MPI_INT, 1, 32000, comm));
}

/* Rank 1: wait for "go" (everything sent before it is then queued unexpected). */
static void await_batch(MPI_Comm comm) {
    CHECK_RC(MPI_Recv(NULL, 0, MPI_INT, 0, 32000, comm, MPI_STATUS_IGNORE));
}

static int handler_calls, handler_code;
static MPI_Comm handler_comm;

static void count_errors(MPI_Comm *comm, int *code, ...) {
    handler_calls++;
    handler_comm = *comm;
    handler_code = *code;
}

/* Statuses and data through every completion form. */
static void completions(MPI_Comm comm) {
    enum { N = 40 };
    if (rank == 0) {
        send_batch(comm, N, 100);
        return;
    }
    await_batch(comm);
    int in[N], flag = 0, idx = -1, outcount = -1, indices[N], cancelled = 1;
    MPI_Request r[N];
    MPI_Status st, sts[N];
    memset(in, 0xff, sizeof in);
    for (int i = 0; i < N; i++) CHECK_RC(MPI_Irecv(&in[i], 1, MPI_INT, 0, MPI_ANY_TAG, comm, &r[i]));
    /* Request_get_status: complete, status right, the request stays. */
    st.MPI_ERROR = 12345;
    CHECK_RC(MPI_Request_get_status(r[0], &flag, &st));
    CHECK(flag && r[0] != MPI_REQUEST_NULL);
    CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 100 && count_of(&st, MPI_INT) == 1);
    CHECK(st.MPI_ERROR == 12345); /* single completion leaves MPI_ERROR alone */
    /* Wait. */
    CHECK_RC(MPI_Wait(&r[0], &st));
    CHECK(r[0] == MPI_REQUEST_NULL && st.MPI_SOURCE == 0 && st.MPI_TAG == 100);
    CHECK(in[0] == 100 && count_of(&st, MPI_INT) == 1);
    CHECK_RC(MPI_Test_cancelled(&st, &cancelled));
    CHECK(!cancelled);
    /* Test. */
    CHECK_RC(MPI_Test(&r[1], &flag, &st));
    CHECK(flag && r[1] == MPI_REQUEST_NULL && st.MPI_TAG == 101 && in[1] == 107);
    /* Cancel fails: the receive has matched; the data and status are the message's. */
    CHECK_RC(MPI_Cancel(&r[2]));
    CHECK_RC(MPI_Wait(&r[2], &st));
    CHECK_RC(MPI_Test_cancelled(&st, &cancelled));
    CHECK(!cancelled && st.MPI_TAG == 102 && in[2] == 114 && count_of(&st, MPI_INT) == 1);
    /* Request_free: the request is gone, the data arrived. */
    CHECK_RC(MPI_Request_free(&r[3]));
    CHECK(r[3] == MPI_REQUEST_NULL && in[3] == 121);
    /* A stale copy of a completed handle is rejected (an erroneous program: checked on
     * oxmpi only; other libraries may abort). */
    MPI_Request stale = r[4];
    CHECK_RC(MPI_Wait(&r[4], MPI_STATUS_IGNORE));
    CHECK(in[4] == 128);
    if (is_oxmpi()) CHECK(err_class(MPI_Wait(&stale, MPI_STATUS_IGNORE)) == MPI_ERR_REQUEST);
    /* MPI_Start rejects it. */
    CHECK(err_class(MPI_Start(&r[5])) == MPI_ERR_REQUEST);
    /* Waitany / Testany over null, completed and pending (no message yet: tag 31999)
     * requests. */
    int spare;
    MPI_Request mix[3];
    mix[0] = MPI_REQUEST_NULL;
    CHECK_RC(MPI_Irecv(&spare, 1, MPI_INT, 0, 31999, comm, &mix[1]));
    mix[2] = r[5];
    CHECK_RC(MPI_Waitany(3, mix, &idx, &st));
    CHECK(idx == 2 && mix[2] == MPI_REQUEST_NULL && st.MPI_TAG == 105 && in[5] == 135);
    mix[2] = r[6];
    CHECK_RC(MPI_Testany(3, mix, &idx, &flag, &st));
    CHECK(flag && idx == 2 && mix[2] == MPI_REQUEST_NULL && st.MPI_TAG == 106 && in[6] == 142);
    /* Testsome / Waitsome: every completed request reported, with MPI_ERROR set. */
    MPI_Request some[4] = {mix[1], r[7], MPI_REQUEST_NULL, r[8]};
    CHECK_RC(MPI_Testsome(4, some, &outcount, indices, sts));
    CHECK(outcount == 2 && indices[0] == 1 && indices[1] == 3);
    CHECK(sts[0].MPI_TAG == 107 && in[7] == 149);
    CHECK(sts[1].MPI_TAG == 108 && in[8] == 156);
    CHECK(some[1] == MPI_REQUEST_NULL && some[3] == MPI_REQUEST_NULL && some[0] != MPI_REQUEST_NULL);
    some[1] = r[9];
    CHECK_RC(MPI_Waitsome(4, some, &outcount, indices, sts));
    CHECK(outcount == 1 && indices[0] == 1 && sts[0].MPI_TAG == 109 && in[9] == 163);
    /* Testall (all or nothing): with the pending one, nothing completes. */
    MPI_Request two[2] = {r[10], some[0]};
    CHECK_RC(MPI_Testall(2, two, &flag, sts));
    CHECK(!flag && two[0] == r[10]);
    CHECK_RC(MPI_Cancel(&two[1]));
    CHECK_RC(MPI_Wait(&two[1], &st));
    CHECK_RC(MPI_Test_cancelled(&st, &cancelled));
    CHECK(cancelled);
    CHECK_RC(MPI_Testall(2, two, &flag, sts));
    CHECK(flag && two[0] == MPI_REQUEST_NULL && sts[0].MPI_TAG == 110 && in[10] == 170);
    /* Waitall over the rest mixed with completed sends (to ourselves) and nulls. */
    int selfv = 5, selfin = 0;
    MPI_Request all[N];
    int k = 0;
    for (int i = 11; i < N; i++) {
        all[k++] = r[i];
        if (i == 20) CHECK_RC(MPI_Isend(&selfv, 1, MPI_INT, 1, 7, comm, &all[k++]));
        if (i == 25) all[k++] = MPI_REQUEST_NULL;
    }
    CHECK_RC(MPI_Waitall(k, all, sts));
    for (int i = 0, j = 11; i < k; i++) {
        CHECK(all[i] == MPI_REQUEST_NULL);
        if (i == 10 || i == 16) continue; /* the send and the null */
        CHECK(sts[i].MPI_SOURCE == 0 && sts[i].MPI_TAG == 100 + j && count_of(&sts[i], MPI_INT) == 1);
        CHECK(in[j] == j * 7 + 100);
        j++;
    }
    CHECK(sts[16].MPI_SOURCE == MPI_ANY_SOURCE && sts[16].MPI_TAG == MPI_ANY_TAG);
    CHECK_RC(MPI_Recv(&selfin, 1, MPI_INT, 1, 7, comm, &st));
    CHECK(selfin == 5);
}

/* Truncation of a receive that matched at once: MPI_ERR_TRUNCATE through the error
 * handler of the request's communicator, the buffer holds what fits, statuses say it. */
static void truncation(MPI_Comm comm) {
    if (rank == 0) {
        int big[4] = {1, 2, 3, 4};
        for (int i = 0; i < 4; i++) CHECK_RC(MPI_Send(big, 4, MPI_INT, 1, 200 + i, comm));
        CHECK_RC(MPI_Send(big, 1, MPI_INT, 1, 204, comm));
        CHECK_RC(MPI_Send(NULL, 0, MPI_INT, 1, 32000, comm));
        return;
    }
    MPI_Errhandler eh;
    CHECK_RC(MPI_Comm_create_errhandler(count_errors, &eh));
    CHECK_RC(MPI_Comm_set_errhandler(comm, eh));
    await_batch(comm);
    int small[2] = {0, 0}, fits[4] = {0, 0, 0, 0}, flag = 0;
    MPI_Request r[5];
    MPI_Status st, sts[2];
    for (int i = 0; i < 4; i++) CHECK_RC(MPI_Irecv(small, 2, MPI_INT, 0, 200 + i, comm, &r[i]));
    CHECK_RC(MPI_Irecv(fits, 4, MPI_INT, 0, 204, comm, &r[4]));
    handler_calls = 0;
    CHECK(err_class(MPI_Wait(&r[0], &st)) == MPI_ERR_TRUNCATE);
    CHECK(handler_calls == 1 && handler_comm == comm && err_class(handler_code) == MPI_ERR_TRUNCATE);
    CHECK(r[0] == MPI_REQUEST_NULL); /* (MPI_ERROR of a single status: undefined) */
    CHECK(small[0] == 1 && small[1] == 2);
    CHECK(err_class(MPI_Test(&r[1], &flag, &st)) == MPI_ERR_TRUNCATE);
    CHECK(flag && handler_calls == 2);
    MPI_Request two[2] = {r[2], r[4]};
    CHECK(err_class(MPI_Waitall(2, two, sts)) == MPI_ERR_IN_STATUS);
    CHECK(handler_calls == 3 && err_class(handler_code) == MPI_ERR_IN_STATUS);
    CHECK(err_class(sts[0].MPI_ERROR) == MPI_ERR_TRUNCATE && sts[0].MPI_TAG == 202);
    CHECK(sts[1].MPI_ERROR == MPI_SUCCESS && sts[1].MPI_TAG == 204 && count_of(&sts[1], MPI_INT) == 1);
    CHECK(two[0] == MPI_REQUEST_NULL && two[1] == MPI_REQUEST_NULL && fits[0] == 1);
    CHECK_RC(MPI_Request_free(&r[3])); /* a failed receive freed without completion */
    CHECK(handler_calls == 3);
    CHECK_RC(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    CHECK_RC(MPI_Errhandler_free(&eh));
}

/* More completed receives alive at once than a fixed-size store holds; order kept. */
static void many(MPI_Comm comm) {
    enum { N = 5000 };
    if (rank == 0) {
        send_batch(comm, N, 1000);
        return;
    }
    await_batch(comm);
    int *in = malloc(N * sizeof(int));
    MPI_Request *r = malloc(N * sizeof(MPI_Request));
    MPI_Status *sts = malloc(N * sizeof(MPI_Status));
    for (int i = 0; i < N; i++) CHECK_RC(MPI_Irecv(&in[i], 1, MPI_INT, 0, MPI_ANY_TAG, comm, &r[i]));
    /* Free every seventh, complete the rest together. */
    for (int i = 0; i < N; i += 7) CHECK_RC(MPI_Request_free(&r[i]));
    CHECK_RC(MPI_Waitall(N, r, sts));
    for (int i = 0; i < N; i++) {
        CHECK(r[i] == MPI_REQUEST_NULL && in[i] == i * 7 + 1000);
        if (i % 7) CHECK(sts[i].MPI_TAG == 1000 + i % 50 && sts[i].MPI_SOURCE == 0);
    }
    free(in);
    free(r);
    free(sts);
}

/* Persistent receives, MPI_PROC_NULL and receives from ourselves. */
static void others(MPI_Comm comm) {
    int v = 0, flag = 0;
    MPI_Request r;
    MPI_Status st;
    if (rank == 0) {
        send_batch(comm, 3, 300);
    } else {
        await_batch(comm);
        CHECK_RC(MPI_Recv_init(&v, 1, MPI_INT, 0, MPI_ANY_TAG, comm, &r));
        for (int i = 0; i < 3; i++) {
            CHECK_RC(MPI_Start(&r));
            CHECK_RC(MPI_Wait(&r, &st));
            CHECK(r != MPI_REQUEST_NULL && st.MPI_TAG == 300 + i && v == i * 7 + 300);
        }
        CHECK_RC(MPI_Request_free(&r));
    }
    CHECK_RC(MPI_Irecv(&v, 1, MPI_INT, MPI_PROC_NULL, 0, comm, &r));
    CHECK_RC(MPI_Request_get_status(r, &flag, &st));
    CHECK(flag && st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count_of(&st, MPI_INT) == 0);
    CHECK_RC(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL && st.MPI_SOURCE == MPI_PROC_NULL && count_of(&st, MPI_INT) == 0);
    int me[3] = {rank + 1, rank + 2, rank + 3}, got[3] = {0, 0, 0};
    MPI_Request s[3], q[3];
    for (int i = 0; i < 3; i++) CHECK_RC(MPI_Isend(&me[i], 1, MPI_INT, rank, 400 + i, comm, &s[i]));
    for (int i = 2; i >= 0; i--) CHECK_RC(MPI_Irecv(&got[i], 1, MPI_INT, rank, 400 + i, comm, &q[i]));
    CHECK_RC(MPI_Waitall(3, s, MPI_STATUSES_IGNORE));
    for (int i = 0; i < 3; i++) {
        CHECK_RC(MPI_Wait(&q[i], &st));
        CHECK(st.MPI_SOURCE == rank && st.MPI_TAG == 400 + i && got[i] == rank + 1 + i);
    }
}

/* ---------- threads ---------- */

#define THREADS 4
#define ROUNDS 50
#define BATCH 16

static MPI_Comm tcomm[THREADS];
static MPI_Request handoff[THREADS][BATCH];
static int handoff_in[THREADS][BATCH];

/* One thread: batches on its own communicator; rank 1 completes the receives of the
 * thread with the next index's batch (handed over through pthread_join below) too. */
static void *worker(void *arg) {
    int t = (int)(long)arg;
    MPI_Comm comm = tcomm[t];
    for (int k = 0; k < ROUNDS; k++) {
        if (rank == 0) {
            send_batch(comm, BATCH, 500 + k);
            continue;
        }
        int in[BATCH];
        MPI_Request r[BATCH];
        MPI_Status sts[BATCH];
        await_batch(comm);
        for (int i = 0; i < BATCH; i++) CHECK_RC(MPI_Irecv(&in[i], 1, MPI_INT, 0, MPI_ANY_TAG, comm, &r[i]));
        if (k % 2) {
            CHECK_RC(MPI_Waitall(BATCH, r, sts));
        } else {
            for (int i = 0; i < BATCH; i++) {
                int flag = 0;
                while (!flag) CHECK_RC(MPI_Test(&r[i], &flag, &sts[i]));
            }
        }
        for (int i = 0; i < BATCH; i++)
            CHECK(in[i] == i * 7 + 500 + k && sts[i].MPI_TAG == 500 + k + i && r[i] == MPI_REQUEST_NULL);
    }
    /* Last batch: left for another thread to complete. */
    if (rank == 0) {
        send_batch(comm, BATCH, 700);
    } else {
        await_batch(comm);
        for (int i = 0; i < BATCH; i++)
            CHECK_RC(MPI_Irecv(&handoff_in[t][i], 1, MPI_INT, 0, MPI_ANY_TAG, comm, &handoff[t][i]));
    }
    return NULL;
}

static void *finisher(void *arg) {
    int t = (int)(long)arg;
    if (rank == 1) {
        MPI_Status sts[BATCH];
        CHECK_RC(MPI_Waitall(BATCH, handoff[t], sts));
        for (int i = 0; i < BATCH; i++) CHECK(handoff_in[t][i] == i * 7 + 700 && sts[i].MPI_TAG == 700 + i);
    }
    return NULL;
}

static void threads(void) {
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &tcomm[t]));
        CHECK_RC(MPI_Comm_set_errhandler(tcomm[t], MPI_ERRORS_RETURN));
    }
    for (int t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, worker, (void *)(long)t) == 0);
    for (int t = 0; t < THREADS; t++) CHECK(pthread_join(th[t], NULL) == 0);
    for (int t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, finisher, (void *)(long)((t + 1) % THREADS)) == 0);
    for (int t = 0; t < THREADS; t++) CHECK(pthread_join(th[t], NULL) == 0);
    for (int t = 0; t < THREADS; t++) CHECK_RC(MPI_Comm_free(&tcomm[t]));
}

int main(int argc, char **argv) {
    int provided, size;
    CHECK_RC(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 2 && provided == MPI_THREAD_MULTIPLE);
    MPI_Comm comm;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    CHECK_RC(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    completions(comm);
    completions(MPI_COMM_WORLD);
    truncation(comm);
    many(comm);
    others(comm);
    others(MPI_COMM_WORLD);
    threads();
    CHECK_RC(MPI_Comm_free(&comm));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("recv_done: all checks passed\n");
    MPI_Finalize();
    return 0;
}
