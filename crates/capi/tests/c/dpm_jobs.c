/* Dynamic process management between two separate jobs (two mpirun), the port name passed
 * in a file:
 *   dpm_jobs server FILE   rank 0 opens a port and writes its name to FILE; the job accepts
 *   dpm_jobs client FILE   the job connects to the port named in FILE
 *   dpm_jobs pubserver S   like server, the port published as service S (mpirun --ompi-server)
 *   dpm_jobs pubclient S   like client, the port looked up by service name S
 * then both check the intercommunicator (sizes, a broadcast, a message from every rank to
 * every remote rank, a large message each way, the merge and an allreduce over it).
 *   dpm_jobs lonely FILE   rank 0 opens a port, writes FILE, and waits for FILE.done
 *                          without accepting
 *   dpm_jobs refused FILE  connects to the port in FILE, which nobody accepts on (lonely)
 *                          or whose job has ended: MPI_ERR_PORT under MPI_ERRORS_ARE_FATAL
 *                          (the one-line report on stderr, the job fails)
 * Rank 0 prints one line per finished part. */
#include "check.h"
#include <string.h>
#include <unistd.h>

#define BIG (1 << 20)

static int wrank, wsize;

static void read_port(const char *file, char *port) {
    FILE *f = NULL;
    for (int i = 0; i < 6000 && !(f = fopen(file, "r")); i++) usleep(10000);
    CHECK(f != NULL);
    CHECK(fgets(port, MPI_MAX_PORT_NAME, f) != NULL);
    fclose(f);
}

static void write_file(const char *file, const char *text) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    FILE *f = fopen(tmp, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
    CHECK(rename(tmp, file) == 0);
}

/* The checks over the intercommunicator, on both sides (`server` says which). */
static void use_inter(MPI_Comm ic, int server) {
    int flag, size, rsize, rank;
    CHECK_RC(MPI_Comm_test_inter(ic, &flag));
    CHECK(flag);
    CHECK_RC(MPI_Comm_size(ic, &size));
    CHECK_RC(MPI_Comm_remote_size(ic, &rsize));
    CHECK_RC(MPI_Comm_rank(ic, &rank));
    CHECK(size == wsize && rank == wrank);
    /* A broadcast from the server's rank 0. */
    int v = server ? 4242 : -1;
    CHECK_RC(MPI_Bcast(&v, 1, MPI_INT, server ? (rank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0, ic));
    if (!server) CHECK(v == 4242);
    /* Every rank to every remote rank and back. */
    MPI_Request reqs[2 * 64];
    int out[64], in[64], n = 0;
    CHECK(rsize <= 64);
    for (int r = 0; r < rsize; r++) {
        out[r] = (server ? 1000 : 2000) + 10 * rank + r;
        CHECK_RC(MPI_Irecv(&in[r], 1, MPI_INT, r, 7, ic, &reqs[n++]));
        CHECK_RC(MPI_Isend(&out[r], 1, MPI_INT, r, 7, ic, &reqs[n++]));
    }
    CHECK_RC(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
    for (int r = 0; r < rsize; r++) CHECK(in[r] == (server ? 2000 : 1000) + 10 * r + rank);
    /* A large message each way between the two ranks 0 (rendezvous). */
    if (rank == 0) {
        char *a = malloc(BIG), *b = malloc(BIG);
        CHECK(a && b);
        for (int i = 0; i < BIG; i++) a[i] = (char)(i * 7 + server);
        MPI_Status st;
        CHECK_RC(MPI_Sendrecv(a, BIG, MPI_CHAR, 0, 8, b, BIG, MPI_CHAR, 0, 8, ic, &st));
        for (int i = 0; i < BIG; i++) CHECK(b[i] == (char)(i * 7 + !server));
        free(a);
        free(b);
    }
    /* The merge: the server's ranks first. */
    MPI_Comm m;
    CHECK_RC(MPI_Intercomm_merge(ic, !server, &m));
    int msize, mrank, sum;
    CHECK_RC(MPI_Comm_size(m, &msize));
    CHECK_RC(MPI_Comm_rank(m, &mrank));
    CHECK(msize == size + rsize);
    CHECK(mrank == (server ? rank : rsize + rank));
    CHECK_RC(MPI_Allreduce(&mrank, &sum, 1, MPI_INT, MPI_SUM, m));
    CHECK(sum == msize * (msize - 1) / 2);
    CHECK_RC(MPI_Comm_free(&m));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    check_rank_ = wrank;
    CHECK(argc == 3);
    const char *mode = argv[1], *file = argv[2]; /* file: the service name when published */
    char port[MPI_MAX_PORT_NAME] = "";
    MPI_Comm ic;
    int published = !strcmp(mode, "pubserver") || !strcmp(mode, "pubclient");
    if (published) mode += 3;
    if (!strcmp(mode, "server") || !strcmp(mode, "lonely")) {
        if (wrank == 0) {
            CHECK_RC(MPI_Open_port(MPI_INFO_NULL, port));
            CHECK(strncmp(port, "oxmpi-port:", 11) == 0);
            if (published) {
                CHECK_RC(MPI_Publish_name(file, MPI_INFO_NULL, port));
                CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
                CHECK(class_of_rc(MPI_Publish_name(file, MPI_INFO_NULL, port)) == MPI_ERR_NAME);
                CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
            } else {
                write_file(file, port);
            }
        }
        if (!strcmp(mode, "lonely")) {
            char done[4096];
            snprintf(done, sizeof done, "%s.done", file);
            for (int i = 0; i < 6000 && access(done, F_OK) != 0; i++) usleep(10000);
            CHECK(access(done, F_OK) == 0);
            if (wrank == 0) printf("lonely: done\n");
        } else {
            CHECK_RC(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic));
            if (published && wrank == 0) CHECK_RC(MPI_Unpublish_name(file, MPI_INFO_NULL, port));
            use_inter(ic, 1);
            CHECK_RC(MPI_Comm_disconnect(&ic));
            if (wrank == 0) printf("server: ok\n");
        }
        if (wrank == 0) CHECK_RC(MPI_Close_port(port));
    } else if (!strcmp(mode, "client")) {
        if (wrank == 0 && published) {
            /* Started with the server: look the name up until it is published. */
            CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
            int rc = MPI_ERR_NAME;
            for (int i = 0; i < 6000 && rc != MPI_SUCCESS; i++) {
                rc = MPI_Lookup_name(file, MPI_INFO_NULL, port);
                if (rc != MPI_SUCCESS) {
                    CHECK(class_of_rc(rc) == MPI_ERR_NAME);
                    usleep(10000);
                }
            }
            CHECK_RC(rc);
            CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
        } else if (wrank == 0) {
            read_port(file, port);
        }
        CHECK_RC(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic));
        use_inter(ic, 0);
        CHECK_RC(MPI_Comm_disconnect(&ic));
        if (wrank == 0) printf("client: ok\n");
    } else if (!strcmp(mode, "refused")) {
        /* MPI_ERRORS_ARE_FATAL: the error's one-line report ends the job. */
        if (wrank == 0) read_port(file, port);
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic);
        if (wrank == 0) printf("refused: connected\n");
    } else {
        CHECK(!"unknown mode");
    }
    MPI_Finalize();
    return 0;
}
