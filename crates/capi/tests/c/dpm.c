/* Dynamic process management between processes of one job: ports, MPI_Comm_accept /
 * MPI_Comm_connect in both directions (rank 0 alone against the others), messages and a
 * merge over the result, MPI_Comm_join over a TCP socket between ranks 0 and 1, the name
 * service, and the error classes of bad ports and names. Runs on 2 or more ranks. Rank 0
 * prints one line per finished part. */
#include "check.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int wrank, wsize;

static void say(const char *part) {
    if (wrank == 0) {
        printf("dpm: %s ok\n", part);
        fflush(stdout);
    }
}

/* Checks an intercommunicator between {0} and {1..n-1}: sizes, ranks, a broadcast from
 * rank 0's side, replies from every rank of the other side, and the merge. */
static void use_inter(MPI_Comm ic, int alone) {
    int flag, size, rsize, rank;
    CHECK_RC(MPI_Comm_test_inter(ic, &flag));
    CHECK(flag);
    CHECK_RC(MPI_Comm_size(ic, &size));
    CHECK_RC(MPI_Comm_remote_size(ic, &rsize));
    CHECK_RC(MPI_Comm_rank(ic, &rank));
    CHECK(size == (alone ? 1 : wsize - 1));
    CHECK(rsize == (alone ? wsize - 1 : 1));
    CHECK(rank == (alone ? 0 : wrank - 1));
    int v = alone ? 4242 : -1;
    CHECK_RC(MPI_Bcast(&v, 1, MPI_INT, alone ? MPI_ROOT : 0, ic));
    if (!alone) CHECK(v == 4242);
    if (alone) {
        for (int r = 0; r < rsize; r++) {
            int got;
            MPI_Status st;
            CHECK_RC(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 7, ic, &st));
            CHECK(got == 100 + st.MPI_SOURCE);
        }
    } else {
        int mine = 100 + rank;
        CHECK_RC(MPI_Send(&mine, 1, MPI_INT, 0, 7, ic));
    }
    MPI_Comm merged;
    CHECK_RC(MPI_Intercomm_merge(ic, alone ? 0 : 1, &merged));
    int mrank, msize;
    CHECK_RC(MPI_Comm_rank(merged, &mrank));
    CHECK_RC(MPI_Comm_size(merged, &msize));
    CHECK(msize == wsize && mrank == wrank);
    int sum = 0, one = wrank;
    CHECK_RC(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK(sum == wsize * (wsize - 1) / 2);
    CHECK_RC(MPI_Comm_free(&merged));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    check_rank_ = wrank;
    CHECK(wsize >= 2);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm rest; /* world ranks 1..n-1 */
    CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, wrank == 0 ? MPI_UNDEFINED : 1, wrank, &rest));
    CHECK((wrank == 0) == (rest == MPI_COMM_NULL));
    if (rest != MPI_COMM_NULL) MPI_Comm_set_errhandler(rest, MPI_ERRORS_RETURN);
    char port[MPI_MAX_PORT_NAME];

    /* 1. rank 0 accepts, the others connect (root = their rank 0 = world rank 1). */
    MPI_Comm ic;
    if (wrank == 0) {
        CHECK_RC(MPI_Open_port(MPI_INFO_NULL, port));
        CHECK(strncmp(port, "oxmpi-port:", 11) == 0 || strlen(port) > 0);
        CHECK_RC(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 1, 1, MPI_COMM_WORLD));
        CHECK_RC(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic));
        CHECK_RC(MPI_Close_port(port));
    } else {
        if (wrank == 1)
            CHECK_RC(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 1, MPI_COMM_WORLD,
                              MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Comm_connect(wrank == 1 ? port : NULL, MPI_INFO_NULL, 0, rest, &ic));
    }
    use_inter(ic, wrank == 0);
    CHECK_RC(MPI_Comm_disconnect(&ic));
    CHECK(ic == MPI_COMM_NULL);
    say("accept/connect");

    /* 2. the other way round: the group accepts (port opened by its root, the last world
     * rank), rank 0 connects; two connections in a row on one port. */
    for (int round = 0; round < 2; round++) {
        if (wrank == 0) {
            if (round == 0)
                CHECK_RC(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, wsize - 1, 2,
                                  MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK_RC(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic));
        } else {
            int root = wsize - 2; /* world rank wsize-1 */
            if (wrank == wsize - 1 && round == 0) {
                CHECK_RC(MPI_Open_port(MPI_INFO_NULL, port));
                CHECK_RC(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 2, MPI_COMM_WORLD));
            }
            CHECK_RC(MPI_Comm_accept(wrank == wsize - 1 ? port : NULL, MPI_INFO_NULL, root,
                                     rest, &ic));
        }
        use_inter(ic, wrank == 0);
        CHECK_RC(MPI_Comm_free(&ic));
    }
    if (wrank == wsize - 1) CHECK_RC(MPI_Close_port(port));
    say("connect/accept twice on one port");

    /* 3. errors: a port that is not one, a closed port, connecting to one's own port. */
    if (wrank == 0) {
        int cls;
        int rc = MPI_Comm_connect("no such port", MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_PORT);
        rc = MPI_Close_port(port); /* rank wsize-1's port, closed, not ours */
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_PORT);
        char mine[MPI_MAX_PORT_NAME];
        CHECK_RC(MPI_Open_port(MPI_INFO_NULL, mine));
        rc = MPI_Comm_connect(mine, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_PORT);
        CHECK_RC(MPI_Close_port(mine));
        rc = MPI_Close_port(mine);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_PORT);
        rc = MPI_Comm_accept(mine, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_PORT);
    } else {
        /* An error at the root reaches every member of the group. */
        int cls, rc = MPI_Comm_connect(wrank == 1 ? "oxmpi-port:nojob:0:1" : NULL,
                                       MPI_INFO_NULL, 0, rest, &ic);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_PORT);
    }
    say("port errors");

    /* 4. name service. */
    if (wrank == 0) {
        CHECK_RC(MPI_Open_port(MPI_INFO_NULL, port));
        CHECK_RC(MPI_Publish_name("oxmpi-dpm-test", MPI_INFO_NULL, port));
        int cls, rc = MPI_Publish_name("oxmpi-dpm-test", MPI_INFO_NULL, port);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_NAME);
    }
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    char found[MPI_MAX_PORT_NAME];
    CHECK_RC(MPI_Lookup_name("oxmpi-dpm-test", MPI_INFO_NULL, found));
    {
        int cls, rc = MPI_Lookup_name("oxmpi-dpm-nothing", MPI_INFO_NULL, found + 0);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_NAME);
    }
    /* Everybody found rank 0's port: connect to it by name. */
    if (wrank == 0) {
        CHECK(strcmp(found, port) == 0);
        CHECK_RC(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic));
    } else {
        CHECK_RC(MPI_Comm_connect(found, MPI_INFO_NULL, 0, rest, &ic));
    }
    use_inter(ic, wrank == 0);
    CHECK_RC(MPI_Comm_free(&ic));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (wrank == 0) {
        int cls, rc = MPI_Unpublish_name("oxmpi-dpm-test", MPI_INFO_NULL, "wrong port");
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_SERVICE);
        CHECK_RC(MPI_Unpublish_name("oxmpi-dpm-test", MPI_INFO_NULL, port));
        rc = MPI_Unpublish_name("oxmpi-dpm-test", MPI_INFO_NULL, port);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_SERVICE);
        CHECK_RC(MPI_Close_port(port));
    }
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    {
        int cls, rc = MPI_Lookup_name("oxmpi-dpm-test", MPI_INFO_NULL, found);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_NAME);
    }
    say("name service");

    /* 5. MPI_Comm_join over a TCP socket on the loopback between ranks 0 and 1. */
    if (wrank <= 1) {
        int fd = -1;
        if (wrank == 0) {
            int ls = socket(AF_INET, SOCK_STREAM, 0);
            CHECK(ls >= 0);
            struct sockaddr_in a = {0};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            CHECK(bind(ls, (struct sockaddr *)&a, sizeof a) == 0);
            CHECK(listen(ls, 1) == 0);
            socklen_t len = sizeof a;
            CHECK(getsockname(ls, (struct sockaddr *)&a, &len) == 0);
            int p = ntohs(a.sin_port);
            CHECK_RC(MPI_Send(&p, 1, MPI_INT, 1, 3, MPI_COMM_WORLD));
            fd = accept(ls, NULL, NULL);
            CHECK(fd >= 0);
            close(ls);
        } else {
            int p;
            CHECK_RC(MPI_Recv(&p, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {0};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            a.sin_port = htons((unsigned short)p);
            CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
        }
        MPI_Comm jc;
        CHECK_RC(MPI_Comm_join(fd, &jc));
        close(fd);
        int rsize, size;
        CHECK_RC(MPI_Comm_remote_size(jc, &rsize));
        CHECK_RC(MPI_Comm_size(jc, &size));
        CHECK(rsize == 1 && size == 1);
        int v = wrank == 0 ? 77 : 0;
        CHECK_RC(MPI_Bcast(&v, 1, MPI_INT, wrank == 0 ? MPI_ROOT : 0, jc));
        if (wrank == 1) CHECK(v == 77);
        int back = 0, mine = 10 + wrank;
        CHECK_RC(MPI_Sendrecv(&mine, 1, MPI_INT, 0, 5, &back, 1, MPI_INT, 0, 5, jc,
                              MPI_STATUS_IGNORE));
        CHECK(back == 10 + (1 - wrank));
        CHECK_RC(MPI_Comm_free(&jc));
    }
    say("join");

    if (rest != MPI_COMM_NULL) MPI_Comm_free(&rest);
    MPI_Finalize();
    if (wrank == 0) printf("dpm: all checks passed (%d ranks)\n", wsize);
    return 0;
}
