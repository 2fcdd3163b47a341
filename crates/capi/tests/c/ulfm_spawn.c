/* ULFM on an intercommunicator to another job: 2 parents (mpirun --with-ft ulfm -n 2)
 * spawn 2 children. On the parent/children intercommunicator, with nobody failed: agree
 * (each side gets the AND of the other side's flags), failure_ack, get_acked and
 * get_failed (empty), shrink (an intercommunicator of the same groups, over which a
 * message goes both ways). Then child 1 kills itself: the other child and the parents see
 * it in get_failed, agree reports it (MPIX_ERR_PROC_FAILED) until acknowledged, get_acked
 * names it, and shrink gives an intercommunicator without it (the parents' remote group
 * of 1), over which a message goes both ways; then every survivor disconnects from the
 * other job (with the dead child: the failure was acknowledged, so at once) and prints
 * "ulfm_spawn: <side> R ok". */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank;
static const char *side;

static void expect_class(int rc, int want, const char *what) {
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    if (cls != want) {
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        printf("ulfm_spawn: %s %d: %s: class %d, expected %d (%s)\n", side, rank, what, cls,
               want, msg);
        fflush(stdout);
        _exit(1);
    }
}

static void expect(int cond, const char *what) {
    if (!cond) {
        printf("ulfm_spawn: %s %d: %s\n", side, rank, what);
        fflush(stdout);
        _exit(1);
    }
}

static int group_size(MPI_Group g) {
    int n = -1;
    MPI_Group_size(g, &n);
    MPI_Group_free(&g);
    return n;
}

/* A message from the parents' rank 0 to the children's rank 0 and back over `ic`. */
static void ping(MPI_Comm ic, int parents, const char *what) {
    int v = 7;
    if (rank != 0)
        return;
    if (parents) {
        expect_class(MPI_Send(&v, 1, MPI_INT, 0, 3, ic), MPI_SUCCESS, what);
        expect_class(MPI_Recv(&v, 1, MPI_INT, 0, 4, ic, MPI_STATUS_IGNORE), MPI_SUCCESS, what);
        expect(v == 8, what);
    } else {
        expect_class(MPI_Recv(&v, 1, MPI_INT, 0, 3, ic, MPI_STATUS_IGNORE), MPI_SUCCESS, what);
        v++;
        expect_class(MPI_Send(&v, 1, MPI_INT, 0, 4, ic), MPI_SUCCESS, what);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm ic;
    MPI_Comm_get_parent(&ic);
    int parents = ic == MPI_COMM_NULL;
    side = parents ? "parent" : "child";
    if (parents)
        MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic,
                       MPI_ERRCODES_IGNORE);
    MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
    int remote = -1;
    MPI_Comm_remote_size(ic, &remote);

    /* No failure. */
    int bit = 1 << ((parents ? 0 : 2) + rank);
    int flag = ~bit, want = parents ? ~(4 | 8) : ~(1 | 2);
    expect_class(MPIX_Comm_agree(ic, &flag), MPI_SUCCESS, "agree");
    expect(flag == want, "agree: not the AND of the other side's flags");
    expect_class(MPIX_Comm_failure_ack(ic), MPI_SUCCESS, "failure_ack");
    MPI_Group g;
    expect_class(MPIX_Comm_failure_get_acked(ic, &g), MPI_SUCCESS, "get_acked");
    expect(group_size(g) == 0, "get_acked: not empty");
    expect_class(MPIX_Comm_get_failed(ic, &g), MPI_SUCCESS, "get_failed");
    expect(group_size(g) == 0, "get_failed: not empty");
    MPI_Comm s;
    int inter = 0, rs = -1;
    expect_class(MPIX_Comm_shrink(ic, &s), MPI_SUCCESS, "shrink");
    MPI_Comm_test_inter(s, &inter);
    MPI_Comm_remote_size(s, &rs);
    expect(inter && rs == remote, "shrink: not the same intercommunicator");
    MPI_Comm_set_errhandler(s, MPI_ERRORS_RETURN);
    ping(s, parents, "message over the shrunk intercommunicator");
    MPI_Comm_free(&s);

    /* Child 1 dies once everyone got here. */
    flag = 1;
    expect_class(MPIX_Comm_agree(ic, &flag), MPI_SUCCESS, "agree before the failure");
    if (!parents && rank == 1)
        kill(getpid(), SIGKILL);
    int n = 0;
    for (int tries = 0; tries < 20000 && n == 0; tries++) {
        expect_class(MPIX_Comm_get_failed(ic, &g), MPI_SUCCESS, "get_failed after the failure");
        n = group_size(g);
        if (n == 0) {
            int idle;
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &idle, MPI_STATUS_IGNORE);
            usleep(1000);
        }
    }
    expect(n == 1, "get_failed: the dead child is not (only) there");
    flag = 1;
    expect_class(MPIX_Comm_agree(ic, &flag), MPIX_ERR_PROC_FAILED,
                 "agree with an unacknowledged failure");
    expect_class(MPIX_Comm_failure_ack(ic), MPI_SUCCESS, "failure_ack after the failure");
    expect_class(MPIX_Comm_failure_get_acked(ic, &g), MPI_SUCCESS, "get_acked after");
    expect(group_size(g) == 1, "get_acked: not the dead child");
    flag = 1;
    expect_class(MPIX_Comm_agree(ic, &flag), MPI_SUCCESS, "agree after the ack");
    expect_class(MPIX_Comm_shrink(ic, &s), MPI_SUCCESS, "shrink after the failure");
    int ls = -1;
    MPI_Comm_remote_size(s, &rs);
    MPI_Comm_size(s, &ls);
    expect(parents ? (rs == 1 && ls == 2) : (rs == 2 && ls == 1),
           "shrink after the failure: wrong group sizes");
    MPI_Comm_set_errhandler(s, MPI_ERRORS_RETURN);
    ping(s, parents, "message over the intercommunicator of the survivors");
    MPI_Comm_free(&s);
    /* Disconnect from the other job, the dead child included, as ULFM expects before
     * MPI_Finalize: the failure is acknowledged on ic, so it succeeds (no waiting for
     * the dead child) and ic becomes MPI_COMM_NULL. */
    double t0 = MPI_Wtime();
    expect_class(MPI_Comm_disconnect(&ic), MPI_SUCCESS, "disconnect with a dead child");
    expect(MPI_Wtime() - t0 < 10, "disconnect with a dead child took over 10 s");
    expect(ic == MPI_COMM_NULL, "disconnect: the handle is not MPI_COMM_NULL");
    printf("ulfm_spawn: %s %d ok\n", side, rank);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
