/* ULFM under mpirun --with-ft ulfm on 4 ranks: bad input first, agreements with no
 * failure (also on an intercommunicator, which gives the AND of the remote group's flags,
 * and a shrink of it), then the last rank kills itself; the survivors see
 * MPIX_ERR_PROC_FAILED from it, rank 0 revokes MPI_COMM_WORLD (which unblocks the others'
 * receive with MPIX_ERR_REVOKED), a receive from any source pending on a duplicate of the
 * world reports MPIX_ERR_PROC_FAILED_PENDING until the failure is acknowledged (through
 * every completion call: Wait, Test, Request_get_status, the any, some and all forms) and then
 * takes a survivor's message, everyone acknowledges the failure, agrees, shrinks (and
 * ishrinks) and finishes an MPI_Allreduce on the shrunk communicator. Each survivor prints
 * "ulfm: rank R ok". */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int rank;

static void expect_class(int rc, int want, const char *what) {
    int cls = -1;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    else
        cls = MPI_SUCCESS;
    if (cls != want) {
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        printf("ulfm: rank %d: %s: class %d, expected %d (%s)\n", rank, what, cls, want, msg);
        fflush(stdout);
        _exit(1);
    }
}

/* A request completed by a send to self, for the multiple-completion calls. */
static MPI_Request completed_self(int *buf) {
    MPI_Request r;
    MPI_Irecv(buf, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &r);
    MPI_Send(&rank, 1, MPI_INT, 0, 5, MPI_COMM_SELF);
    return r;
}

/* Checks that failure-pending request *any (and a completed one beside it) are reported
 * as ULFM says by MPI_Request_get_status, Test, Testany, Waitany, Testsome, Waitsome,
 * Testall and Waitall. 0 if so. */
static int pending_everywhere(MPI_Request *any) {
    int flag = 1, idx = -1, cnt = -1, ids[2], selfv;
    MPI_Request two[2];
    MPI_Status sts[2];
    expect_class(MPI_Request_get_status(*any, &flag, MPI_STATUS_IGNORE),
                 MPIX_ERR_PROC_FAILED_PENDING, "request_get_status(any source)");
    int bad = flag != 0;
    flag = 1;
    expect_class(MPI_Test(any, &flag, MPI_STATUS_IGNORE), MPIX_ERR_PROC_FAILED_PENDING,
                 "test(any source)");
    bad |= (flag != 0) << 1;
    flag = 1;
    expect_class(MPI_Testany(1, any, &idx, &flag, MPI_STATUS_IGNORE),
                 MPIX_ERR_PROC_FAILED_PENDING, "testany(any source)");
    bad |= (flag != 0 || idx != 0) << 2;
    idx = -1;
    expect_class(MPI_Waitany(1, any, &idx, MPI_STATUS_IGNORE), MPIX_ERR_PROC_FAILED_PENDING,
                 "waitany(any source)");
    bad |= (idx != 0) << 3;
    for (int call = 0; call < 4; call++) {
        const char *name[] = {"testsome", "waitsome", "testall", "waitall"};
        two[0] = *any;
        selfv = -1;
        two[1] = completed_self(&selfv);
        sts[0].MPI_ERROR = sts[1].MPI_ERROR = -1;
        ids[0] = ids[1] = -1;
        int rc;
        if (call == 0)
            rc = MPI_Testsome(2, two, &cnt, ids, sts);
        else if (call == 1)
            rc = MPI_Waitsome(2, two, &cnt, ids, sts);
        else if (call == 2)
            rc = MPI_Testall(2, two, &flag, sts);
        else
            rc = MPI_Waitall(2, two, sts);
        expect_class(rc, MPI_ERR_IN_STATUS, name[call]);
        /* the statuses in the order of the requests */
        int e0 = sts[0].MPI_ERROR, e1 = sts[1].MPI_ERROR;
        if (call < 2) {
            if (cnt != 2 || ids[0] + ids[1] != 1) {
                printf("ulfm: rank %d: %s: outcount %d indices %d %d\n", rank, name[call], cnt,
                       ids[0], ids[1]);
                return 1;
            }
            e0 = sts[ids[0] == 0 ? 0 : 1].MPI_ERROR;
            e1 = sts[ids[0] == 0 ? 1 : 0].MPI_ERROR;
        } else if (call == 2 && flag != 1) {
            printf("ulfm: rank %d: testall: flag %d\n", rank, flag);
            return 1;
        }
        int c0 = -1;
        MPI_Error_class(e0, &c0);
        if (c0 != MPIX_ERR_PROC_FAILED_PENDING || e1 != MPI_SUCCESS || two[0] != *any ||
            two[1] != MPI_REQUEST_NULL || selfv != rank) {
            printf("ulfm: rank %d: %s: errors %d %d, handles kept %d %d, value %d\n", rank,
                   name[call], e0, e1, two[0] == *any, two[1] == MPI_REQUEST_NULL, selfv);
            return 1;
        }
    }
    if (bad || *any == MPI_REQUEST_NULL) {
        printf("ulfm: rank %d: single completion calls: %#x, request %s\n", rank, bad,
               *any == MPI_REQUEST_NULL ? "released" : "kept");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    int size, flag, v = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int victim = size - 1;

    /* Bad input. */
    expect_class(MPIX_Comm_revoke(MPI_COMM_NULL), MPI_ERR_COMM, "revoke(MPI_COMM_NULL)");
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 7, &inter);
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    /* On an intercommunicator: the AND of the remote group's flags. */
    int want_inter = -1;
    for (int r = 0; r < size; r++)
        if (r % 2 != rank % 2)
            want_inter &= ~(1 << r);
    flag = ~(1 << rank);
    expect_class(MPIX_Comm_agree(inter, &flag), MPI_SUCCESS, "agree(intercomm)");
    if (flag != want_inter) {
        printf("ulfm: rank %d: intercomm agreed %#x, expected %#x\n", rank, flag, want_inter);
        return 1;
    }
    MPI_Comm ishrunk;
    int is_inter = 0, rsize = -1, rsize2 = -2;
    expect_class(MPIX_Comm_shrink(inter, &ishrunk), MPI_SUCCESS, "shrink(intercomm)");
    MPI_Comm_test_inter(ishrunk, &is_inter);
    MPI_Comm_remote_size(inter, &rsize);
    MPI_Comm_remote_size(ishrunk, &rsize2);
    if (!is_inter || rsize != rsize2) {
        printf("ulfm: rank %d: shrunk intercomm inter %d remote size %d, expected %d\n", rank,
               is_inter, rsize2, rsize);
        return 1;
    }
    MPI_Comm_free(&ishrunk);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);

    /* An agreement without failures: the AND of the flags. */
    flag = rank == 1 ? 0x5 : 0x7;
    expect_class(MPIX_Comm_agree(MPI_COMM_WORLD, &flag), MPI_SUCCESS, "agree");
    if (flag != 0x5) {
        printf("ulfm: rank %d: agreed flag %#x, expected 0x5\n", rank, flag);
        return 1;
    }
    MPI_Request req;
    flag = rank == 2 ? 0x2 : 0x3;
    expect_class(MPIX_Comm_iagree(MPI_COMM_WORLD, &flag, &req), MPI_SUCCESS, "iagree");
    expect_class(MPI_Wait(&req, MPI_STATUS_IGNORE), MPI_SUCCESS, "wait(iagree)");
    if (flag != 0x2) {
        printf("ulfm: rank %d: iagreed flag %#x, expected 0x2\n", rank, flag);
        return 1;
    }

    /* A receive from any source, pending when the failure comes (on a duplicate of the
     * world, which nobody revokes). */
    MPI_Comm dupw;
    MPI_Request any;
    int got = -1;
    MPI_Comm_dup(MPI_COMM_WORLD, &dupw);
    MPI_Irecv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 42, dupw, &any);

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == victim)
        kill(getpid(), SIGKILL);

    /* The dead rank's messages never come: the failure, or rank 0's revoke if that
     * arrives first. */
    int rc = MPI_Recv(&v, 1, MPI_INT, victim, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), cls = -1;
    MPI_Error_class(rc, &cls);
    if (!(cls == MPIX_ERR_PROC_FAILED || (rank != 0 && cls == MPIX_ERR_REVOKED)))
        expect_class(rc, MPIX_ERR_PROC_FAILED, "recv from the dead rank");
    if (rank == 0) {
        expect_class(MPIX_Comm_revoke(MPI_COMM_WORLD), MPI_SUCCESS, "revoke");
        expect_class(MPI_Send(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD), MPIX_ERR_REVOKED,
                     "send after revoke");
    } else {
        /* Nobody sends this: the revoke ends the wait. */
        expect_class(MPI_Recv(&v, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                     MPIX_ERR_REVOKED, "recv on the revoked communicator");
    }
    /* Rank 0 revoked it here; elsewhere the barrier may meet the dead rank first. */
    rc = MPI_Barrier(MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    if (!(cls == MPIX_ERR_REVOKED || (rank != 0 && cls == MPIX_ERR_PROC_FAILED)))
        expect_class(rc, MPIX_ERR_REVOKED, "barrier after revoke");

    /* Failures: what is known, acknowledged, then agreed on the revoked communicator. */
    MPI_Group failed, acked;
    int n = -1, who = -1, zero = 0;
    /* A revoke notice can come before this rank's own link to the dead rank breaks (on
     * another node): wait (bounded) until the failure is known locally. */
    for (int tries = 0;; tries++) {
        expect_class(MPIX_Comm_get_failed(MPI_COMM_WORLD, &failed), MPI_SUCCESS, "get_failed");
        MPI_Group_size(failed, &n);
        if (n > 0 || tries == 10000)
            break;
        MPI_Group_free(&failed);
        int idle;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &idle, MPI_STATUS_IGNORE);
        usleep(1000);
    }
    MPI_Group wg;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(failed, 1, &zero, wg, &who);
    if (n != 1 || who != victim) {
        printf("ulfm: rank %d: failed group size %d first %d, expected 1 and %d\n", rank, n, who, victim);
        return 1;
    }

    /* The pending receive from any source: failure-pending (twice: it stays so) until
     * acknowledged; the agreement then makes sure every survivor got that far before
     * anyone sends, and a survivor's message completes it. */
    for (int twice = 0; twice < 2; twice++) {
        expect_class(MPI_Wait(&any, MPI_STATUS_IGNORE), MPIX_ERR_PROC_FAILED_PENDING,
                     "wait(any source) after the failure");
        if (any == MPI_REQUEST_NULL) {
            printf("ulfm: rank %d: the failure-pending request was released\n", rank);
            return 1;
        }
    }
    /* The same through the other completion calls (ULFM): not complete (flag 0), the index
     * or status names it, its handle stays; the multiple-completion calls complete the
     * others and return MPI_ERR_IN_STATUS. */
    if (pending_everywhere(&any) != 0)
        return 1;
    expect_class(MPIX_Comm_failure_ack(dupw), MPI_SUCCESS, "failure_ack(dup)");
    flag = 1;
    expect_class(MPIX_Comm_agree(dupw, &flag), MPI_SUCCESS, "agree(dup) after ack");
    int alive = size - 1, next = (rank + 1) % alive, prev = (rank + alive - 1) % alive;
    MPI_Status st;
    expect_class(MPI_Send(&rank, 1, MPI_INT, next, 42, dupw), MPI_SUCCESS, "send on the dup");
    expect_class(MPI_Wait(&any, &st), MPI_SUCCESS, "wait(any source) after ack");
    if (got != prev || st.MPI_SOURCE != prev) {
        printf("ulfm: rank %d: any-source receive got %d from %d, expected %d\n", rank, got,
               st.MPI_SOURCE, prev);
        return 1;
    }
    MPI_Comm_free(&dupw);
    flag = 1;
    expect_class(MPIX_Comm_agree(MPI_COMM_WORLD, &flag), MPIX_ERR_PROC_FAILED,
                 "agree with an unacknowledged failure");
    expect_class(MPIX_Comm_failure_ack(MPI_COMM_WORLD), MPI_SUCCESS, "failure_ack");
    expect_class(MPIX_Comm_failure_get_acked(MPI_COMM_WORLD, &acked), MPI_SUCCESS, "get_acked");
    MPI_Group_size(acked, &n);
    if (n != 1) {
        printf("ulfm: rank %d: acked group size %d, expected 1\n", rank, n);
        return 1;
    }
    flag = 1;
    expect_class(MPIX_Comm_agree(MPI_COMM_WORLD, &flag), MPI_SUCCESS, "agree after ack");
    MPI_Group_free(&failed);
    MPI_Group_free(&acked);
    MPI_Group_free(&wg);

    /* Shrink (allowed on the revoked communicator) and reduce on the survivors. */
    MPI_Comm shrunk;
    expect_class(MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk), MPI_SUCCESS, "shrink");
    int ns = 0, sum = 0;
    MPI_Comm_size(shrunk, &ns);
    expect_class(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, shrunk), MPI_SUCCESS,
                 "allreduce on the shrunk communicator");
    int want = (size - 1) * (size - 2) / 2;
    if (ns != size - 1 || sum != want) {
        printf("ulfm: rank %d: shrunk size %d sum %d, expected %d and %d\n", rank, ns, sum, size - 1, want);
        return 1;
    }
    MPI_Comm_free(&shrunk);
    /* The nonblocking shrink gives the same. */
    expect_class(MPIX_Comm_ishrink(MPI_COMM_WORLD, &shrunk, &req), MPI_SUCCESS, "ishrink");
    expect_class(MPI_Wait(&req, MPI_STATUS_IGNORE), MPI_SUCCESS, "wait(ishrink)");
    MPI_Comm_size(shrunk, &ns);
    if (ns != size - 1) {
        printf("ulfm: rank %d: ishrunk size %d, expected %d\n", rank, ns, size - 1);
        return 1;
    }
    MPI_Comm_free(&shrunk);
    printf("ulfm: rank %d ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
