/* MPI_Comm_spawn and MPI_Comm_spawn_multiple: the parents spawn copies of this program
 * (argv[1] says which part they play), exchange messages over the intercommunicator, merge
 * it and reduce over the merged communicator; spawn_multiple gives each command its
 * MPI_APPNUM and the info key wdir; a command that does not exist is MPI_ERR_SPAWN and
 * maxprocs 0 is MPI_ERR_ARG. Rank 0 of the parents prints one line per part. */
#include "check.h"
#include <string.h>
#include <unistd.h>

static int appnum(void) {
    int *v = NULL, flag = 0;
    CHECK_RC(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &v, &flag));
    return flag ? *v : -1;
}

/* A child: meets its parents, plays part `what`. */
static int child(const char *what) {
    MPI_Comm parent;
    CHECK_RC(MPI_Comm_get_parent(&parent));
    CHECK(parent != MPI_COMM_NULL);
    int rank, size, nparents, flag;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK_RC(MPI_Comm_test_inter(parent, &flag));
    CHECK(flag);
    CHECK_RC(MPI_Comm_remote_size(parent, &nparents));
    if (strcmp(what, "pair") == 0) {
        CHECK(size == 2);
        CHECK(appnum() == 0);
        int v = -1;
        CHECK_RC(MPI_Recv(&v, 1, MPI_INT, 0, 7, parent, MPI_STATUS_IGNORE));
        CHECK(v == 42);
        v = 100 + rank;
        CHECK_RC(MPI_Send(&v, 1, MPI_INT, 0, 8, parent));
        MPI_Comm all;
        CHECK_RC(MPI_Intercomm_merge(parent, 1, &all));
        int me, n, sum = 0;
        MPI_Comm_rank(all, &me);
        MPI_Comm_size(all, &n);
        CHECK(n == nparents + 2 && me == nparents + rank);
        int one = me + 1;
        CHECK_RC(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, all));
        CHECK(sum == n * (n + 1) / 2);
        CHECK_RC(MPI_Comm_free(&all));
    } else {
        /* multi: report the application number and the working directory. */
        CHECK(size == 2);
        char cwd[4096] = "";
        CHECK(getcwd(cwd, sizeof cwd) != NULL);
        int msg[2] = {appnum(), strcmp(cwd, "/tmp") == 0};
        CHECK_RC(MPI_Send(msg, 2, MPI_INT, 0, 9, parent));
    }
    CHECK_RC(MPI_Comm_disconnect(&parent));
    CHECK_RC(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL);
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc > 1)
        return child(argv[1]), MPI_Finalize();
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    MPI_Comm parent;
    CHECK_RC(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL);
    const char *fatal = getenv("SPAWN_FATAL");
    if (fatal) {
        /* Under MPI_ERRORS_ARE_FATAL: the job ends with the launcher's reason. */
        MPI_Comm inter;
        MPI_Comm_spawn(fatal, MPI_ARGV_NULL, atoi(getenv("SPAWN_N")), MPI_INFO_NULL, 0,
                       MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
        printf("spawn: not reached\n");
        MPI_Finalize();
        return 0;
    }

    /* 2 children: exchange, merge, allreduce. */
    char *pair_args[] = {"pair", NULL};
    int codes[4] = {-1, -1, -1, -1};
    MPI_Comm inter;
    CHECK_RC(MPI_Comm_spawn(argv[0], pair_args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, codes));
    CHECK(codes[0] == MPI_SUCCESS && codes[1] == MPI_SUCCESS && codes[2] == -1);
    int rsize;
    CHECK_RC(MPI_Comm_remote_size(inter, &rsize));
    CHECK(rsize == 2);
    if (rank == 0) {
        for (int c = 0; c < 2; c++) {
            int v = 42;
            CHECK_RC(MPI_Send(&v, 1, MPI_INT, c, 7, inter));
        }
        for (int c = 0; c < 2; c++) {
            int v = -1;
            CHECK_RC(MPI_Recv(&v, 1, MPI_INT, c, 8, inter, MPI_STATUS_IGNORE));
            CHECK(v == 100 + c);
        }
    }
    MPI_Comm all;
    CHECK_RC(MPI_Intercomm_merge(inter, 0, &all));
    int me, n, sum = 0;
    MPI_Comm_rank(all, &me);
    MPI_Comm_size(all, &n);
    CHECK(n == size + 2 && me == rank);
    int one = me + 1;
    CHECK_RC(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, all));
    CHECK(sum == n * (n + 1) / 2);
    CHECK_RC(MPI_Comm_free(&all));
    CHECK_RC(MPI_Comm_disconnect(&inter));
    if (rank == 0)
        printf("spawn: 2 children, exchange, merge, allreduce ok\n");

    /* 2 commands: MPI_APPNUM 0 and 1, wdir for the second. */
    char *cmds[2] = {argv[0], argv[0]};
    char *multi_args[] = {"multi", NULL};
    char **argvs[2] = {multi_args, multi_args};
    int maxprocs[2] = {1, 1};
    MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
    CHECK_RC(MPI_Info_create(&infos[1]));
    CHECK_RC(MPI_Info_set(infos[1], "wdir", "/tmp"));
    CHECK_RC(MPI_Comm_spawn_multiple(2, cmds, argvs, maxprocs, infos, 0, MPI_COMM_WORLD, &inter,
                                     MPI_ERRCODES_IGNORE));
    CHECK_RC(MPI_Info_free(&infos[1]));
    if (rank == 0) {
        for (int c = 0; c < 2; c++) {
            int msg[2] = {-1, -1};
            CHECK_RC(MPI_Recv(msg, 2, MPI_INT, c, 9, inter, MPI_STATUS_IGNORE));
            CHECK(msg[0] == c);
            CHECK(msg[1] == (c == 1));
        }
    }
    CHECK_RC(MPI_Comm_disconnect(&inter));
    if (rank == 0)
        printf("spawn_multiple: MPI_APPNUM and wdir ok\n");

    /* Bad input: errors reach every parent, nothing is started. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    codes[0] = -1;
    int rc = MPI_Comm_spawn("/no/such/program", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0,
                            MPI_COMM_WORLD, &inter, codes);
    CHECK(class_of_rc(rc) == MPI_ERR_SPAWN);
    if (rank == 0)
        CHECK(codes[0] == MPI_ERR_SPAWN);
    rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 0, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                        MPI_ERRCODES_IGNORE);
    CHECK(class_of_rc(rc) == MPI_ERR_ARG);
    if (rank == 0)
        printf("spawn errors: missing program and maxprocs 0 ok\n");
    MPI_Finalize();
    return 0;
}
