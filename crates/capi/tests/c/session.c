/* Sessions (MPI 4.0 §11.3): MPI_Session_init without MPI_Init, the process sets
 * mpi://WORLD and mpi://SELF (names, lengths, infos, groups), communicators from groups
 * with string tags, an intercommunicator from two groups, two sessions at once, the
 * session's error handler, bad input (error classes), re-init after MPI_Session_finalize,
 * and then a session next to the World Model (MPI_Init). With the argument "only" the
 * program never calls MPI_Init/MPI_Finalize (the library ends at exit).
 * Prints "session: all checks passed" on rank 0. */
#include "check.h"
#include <string.h>

static int rank = -1, size = -1;

static void say(const char *what) {
    if (rank == 0)
        printf("session: %s: ok\n", what);
}

static int handled = 0;
static void on_session_error(MPI_Session *s, int *code, ...) {
    (void)s;
    handled = *code;
}

/* A communicator over process set `pset` of session `s`. */
static MPI_Comm comm_of(MPI_Session s, const char *pset, const char *tag) {
    MPI_Group g;
    MPI_Comm c;
    CHECK_RC(MPI_Group_from_session_pset(s, pset, &g));
    CHECK_RC(MPI_Comm_create_from_group(g, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
    CHECK_RC(MPI_Group_free(&g));
    return c;
}

static void psets(MPI_Session s) {
    int n = 0;
    CHECK_RC(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n));
    CHECK(n >= 2);
    int world = 0, self = 0, shared = 0;
    for (int i = 0; i < n; i++) {
        char name[64];
        int len = 0;
        CHECK_RC(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, NULL));
        CHECK(len > 1 && len <= (int)sizeof name);
        CHECK_RC(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name));
        CHECK((int)strlen(name) == len - 1);
        world += strcmp(name, "mpi://WORLD") == 0;
        self += strcmp(name, "mpi://SELF") == 0;
        shared += strcmp(name, "mpix://SHARED") == 0;
    }
    CHECK(world == 1 && self == 1 && shared == 1);
    MPI_Info info;
    char v[32];
    int flag = 0;
    CHECK_RC(MPI_Session_get_pset_info(s, "mpi://WORLD", &info));
    CHECK_RC(MPI_Info_get(info, "mpi_size", sizeof v - 1, v, &flag));
    CHECK(flag && atoi(v) == size);
    CHECK_RC(MPI_Info_free(&info));
    CHECK_RC(MPI_Session_get_pset_info(s, "mpi://SELF", &info));
    CHECK_RC(MPI_Info_get(info, "mpi_size", sizeof v - 1, v, &flag));
    CHECK(flag && atoi(v) == 1);
    CHECK_RC(MPI_Info_free(&info));
    CHECK_RC(MPI_Session_get_info(s, &info));
    CHECK_RC(MPI_Info_get(info, "thread_level", sizeof v - 1, v, &flag));
    CHECK(flag && strncmp(v, "MPI_THREAD_", 11) == 0);
    CHECK_RC(MPI_Info_free(&info));
    say("process sets mpi://WORLD and mpi://SELF");
    /* The node's processes (every rank here: one node). */
    CHECK_RC(MPI_Session_get_pset_info(s, "mpix://SHARED", &info));
    CHECK_RC(MPI_Info_get(info, "mpi_size", sizeof v - 1, v, &flag));
    CHECK(flag && atoi(v) == size);
    CHECK_RC(MPI_Info_free(&info));
    MPI_Group g;
    MPI_Comm c;
    int r = -1;
    CHECK_RC(MPI_Group_from_session_pset(s, "mpix://SHARED", &g));
    CHECK_RC(MPI_Comm_create_from_group(g, "org.oxmpi.test.shared", MPI_INFO_NULL,
                                        MPI_ERRORS_RETURN, &c));
    CHECK_RC(MPI_Group_free(&g));
    CHECK_RC(MPI_Comm_size(c, &n));
    CHECK_RC(MPI_Comm_rank(c, &r));
    CHECK(n == size && r == rank);
    CHECK_RC(MPI_Comm_free(&c));
    say("process set mpix://SHARED (this node)");
}

static void communicators(MPI_Session s1, MPI_Session s2) {
    MPI_Comm w1 = comm_of(s1, "mpi://WORLD", "org.oxmpi.test.one");
    MPI_Comm w2 = comm_of(s2, "mpi://WORLD", "org.oxmpi.test.two");
    MPI_Comm me = comm_of(s1, "mpi://SELF", "org.oxmpi.test.self");
    int n1, n2, n3, r1, r2;
    MPI_Comm_size(w1, &n1);
    MPI_Comm_size(w2, &n2);
    MPI_Comm_size(me, &n3);
    MPI_Comm_rank(w1, &r1);
    MPI_Comm_rank(w2, &r2);
    CHECK(n1 == size && n2 == size && n3 == 1 && r1 == rank && r2 == rank);
    int sum = 0, want = size * (size - 1) / 2;
    CHECK_RC(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, w1));
    CHECK(sum == want);
    sum = 0;
    CHECK_RC(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, w2));
    CHECK(sum == want);
    /* Traffic on one does not match on the other. */
    if (size >= 2) {
        int a = 1, b = 2, x = 0, y = 0;
        if (rank == 0) {
            CHECK_RC(MPI_Send(&a, 1, MPI_INT, 1, 0, w1));
            CHECK_RC(MPI_Send(&b, 1, MPI_INT, 1, 0, w2));
        } else if (rank == 1) {
            CHECK_RC(MPI_Recv(&y, 1, MPI_INT, 0, 0, w2, MPI_STATUS_IGNORE));
            CHECK_RC(MPI_Recv(&x, 1, MPI_INT, 0, 0, w1, MPI_STATUS_IGNORE));
            CHECK(x == 1 && y == 2);
        }
    }
    say("communicators from groups of two sessions");
    /* An intercommunicator between the even and the odd ranks. */
    if (size >= 2) {
        MPI_Group wg, even, odd;
        CHECK_RC(MPI_Group_from_session_pset(s2, "mpi://WORLD", &wg));
        int evens[64], odds[64], ne = 0, no = 0;
        for (int i = 0; i < size && i < 128; i++) {
            if (i % 2 == 0)
                evens[ne++] = i;
            else
                odds[no++] = i;
        }
        CHECK_RC(MPI_Group_incl(wg, ne, evens, &even));
        CHECK_RC(MPI_Group_incl(wg, no, odds, &odd));
        MPI_Comm inter;
        MPI_Group mine = rank % 2 == 0 ? even : odd, other = rank % 2 == 0 ? odd : even;
        CHECK_RC(MPI_Intercomm_create_from_groups(mine, 0, other, 0, "org.oxmpi.test.inter",
                                                  MPI_INFO_NULL, MPI_ERRORS_RETURN, &inter));
        int flag = 0, rsize = 0;
        CHECK_RC(MPI_Comm_test_inter(inter, &flag));
        CHECK_RC(MPI_Comm_remote_size(inter, &rsize));
        CHECK(flag && rsize == (rank % 2 == 0 ? no : ne));
        int lrank, x = -1;
        MPI_Comm_rank(inter, &lrank);
        if (lrank == 0) {
            int mine_v = rank;
            CHECK_RC(MPI_Sendrecv(&mine_v, 1, MPI_INT, 0, 4, &x, 1, MPI_INT, 0, 4, inter,
                                  MPI_STATUS_IGNORE));
            CHECK(x == (rank == 0 ? 1 : 0));
        }
        CHECK_RC(MPI_Comm_free(&inter));
        CHECK_RC(MPI_Group_free(&even));
        CHECK_RC(MPI_Group_free(&odd));
        CHECK_RC(MPI_Group_free(&wg));
    }
    say("intercommunicator from two groups");
    CHECK_RC(MPI_Comm_free(&w1));
    CHECK_RC(MPI_Comm_free(&w2));
    CHECK_RC(MPI_Comm_free(&me));
}

static void errors(MPI_Session s) {
    MPI_Group g;
    int len = 0;
    int rc = MPI_Group_from_session_pset(s, "mpi://NOWHERE", &g);
    int cls = class_of_rc(rc);
    CHECK(cls == MPI_ERR_ARG);
    CHECK(class_of_rc(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 99, &len, NULL)) == MPI_ERR_ARG);
    MPI_Info info;
    CHECK(class_of_rc(MPI_Session_get_pset_info(s, "mpi://NOWHERE", &info)) == MPI_ERR_ARG);
    MPI_Errhandler eh, got;
    CHECK_RC(MPI_Session_create_errhandler(on_session_error, &eh));
    CHECK_RC(MPI_Session_set_errhandler(s, eh));
    CHECK_RC(MPI_Session_get_errhandler(s, &got));
    CHECK(got == eh);
    CHECK_RC(MPI_Session_call_errhandler(s, MPI_ERR_OTHER));
    CHECK(handled == MPI_ERR_OTHER);
    handled = 0;
    MPI_Group_from_session_pset(s, "mpi://NOWHERE", &g);
    CHECK(handled == MPI_ERR_ARG);
    CHECK_RC(MPI_Session_set_errhandler(s, MPI_ERRORS_RETURN));
    CHECK_RC(MPI_Errhandler_free(&eh));
    say("bad input error classes and the session's error handler");
}

int main(int argc, char **argv) {
    int only = argc > 1 && strcmp(argv[1], "only") == 0;
    MPI_Session s1, s2;
    MPI_Info info;
    CHECK_RC(MPI_Info_create(&info));
    CHECK_RC(MPI_Info_set(info, "thread_level", "MPI_THREAD_MULTIPLE"));
    CHECK_RC(MPI_Session_init(info, MPI_ERRORS_RETURN, &s1));
    CHECK_RC(MPI_Info_free(&info));
    CHECK_RC(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s2));
    int flag = 1;
    CHECK_RC(MPI_Initialized(&flag));
    CHECK(flag == 0);
    {
        MPI_Comm w = comm_of(s1, "mpi://WORLD", "org.oxmpi.test.ranks");
        MPI_Comm_rank(w, &rank);
        MPI_Comm_size(w, &size);
        check_rank_ = rank;
        CHECK_RC(MPI_Comm_free(&w));
    }
    psets(s1);
    communicators(s1, s2);
    errors(s2);
    CHECK_RC(MPI_Session_finalize(&s1));
    CHECK(s1 == MPI_SESSION_NULL);
    CHECK_RC(MPI_Session_finalize(&s2));
    /* Again, after every session was finalized. */
    MPI_Session s3;
    CHECK_RC(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s3));
    MPI_Comm w3 = comm_of(s3, "mpi://WORLD", "org.oxmpi.test.again");
    CHECK_RC(MPI_Barrier(w3));
    CHECK_RC(MPI_Comm_free(&w3));
    CHECK_RC(MPI_Session_finalize(&s3));
    say("re-init after session finalize");
    if (!only) {
        CHECK_RC(MPI_Init(&argc, &argv));
        CHECK_RC(MPI_Initialized(&flag));
        CHECK(flag == 1);
        MPI_Session s4;
        CHECK_RC(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s4));
        MPI_Comm w4 = comm_of(s4, "mpi://WORLD", "org.oxmpi.test.world");
        int cmp = -1;
        CHECK_RC(MPI_Comm_compare(w4, MPI_COMM_WORLD, &cmp));
        CHECK(cmp == MPI_CONGRUENT);
        CHECK_RC(MPI_Comm_free(&w4));
        CHECK_RC(MPI_Session_finalize(&s4));
        CHECK_RC(MPI_Finalize());
        say("a session next to the World Model");
    }
    if (rank == 0)
        printf("session: all checks passed\n");
    return 0;
}
