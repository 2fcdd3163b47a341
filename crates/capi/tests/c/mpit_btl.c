/* A transport's performance variables on 2 ranks (run with `--mca btl self,T`, T the
 * transport named by argv[1]: sm, tcp or ofi): rank 0 sends one 8-byte message (eager) and
 * one of 64 KiB (rendezvous) to rank 1; btl_T_msgs_sent, _bytes_sent, _eager_sent and
 * _rndv_sent count them on rank 0, btl_T_msgs_recv and _bytes_recv on rank 1, and the
 * other transports' counters stay at 0. Each rank prints its line. */
#include "check.h"
#include <stdlib.h>
#include <string.h>

#define T_CHECK(call) CHECK((call) == MPI_SUCCESS)
#define BIG (64 * 1024)

static MPI_T_pvar_session s;

/* A started handle on transport `t`'s counter `what`. */
static MPI_T_pvar_handle handle(const char *t, const char *what)
{
    char name[128];
    int i, count;
    snprintf(name, sizeof name, "btl_%s_%s", t, what);
    T_CHECK(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &i));
    MPI_T_pvar_handle h;
    T_CHECK(MPI_T_pvar_handle_alloc(s, i, NULL, &h, &count));
    CHECK(count == 1);
    return h;
}

static unsigned long long readu(MPI_T_pvar_handle h)
{
    unsigned long long v = 0;
    T_CHECK(MPI_T_pvar_read(s, h, &v));
    return v;
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 2 && argc == 2);
    const char *t = argv[1];
    const char *all[] = {"sm", "tcp", "ofi"};
    /* Whatever MPI_Init sent (tcp's wire-up) has arrived once both left a barrier: the
     * links deliver in order. */
    MPI_Barrier(MPI_COMM_WORLD);
    T_CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    T_CHECK(MPI_T_pvar_session_create(&s));
    const char *what[] = {"msgs_sent", "bytes_sent", "eager_sent", "rndv_sent", "msgs_recv",
                          "bytes_recv"};
    MPI_T_pvar_handle h[3][6];
    for (int k = 0; k < 3; k++)
        for (int w = 0; w < 6; w++)
            h[k][w] = handle(all[k], what[w]);
    int mine = -1;
    for (int k = 0; k < 3; k++)
        if (!strcmp(all[k], t))
            mine = k;
    CHECK(mine >= 0);

    char *buf = calloc(BIG, 1);
    CHECK(buf != NULL);
    if (rank == 0) {
        MPI_Send(buf, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
        MPI_Send(buf, BIG, MPI_CHAR, 1, 2, MPI_COMM_WORLD);
    } else {
        MPI_Recv(buf, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(buf, BIG, MPI_CHAR, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    unsigned long long v[3][6];
    for (int k = 0; k < 3; k++)
        for (int w = 0; w < 6; w++)
            v[k][w] = readu(h[k][w]);
    for (int k = 0; k < 3; k++)
        if (k != mine)
            for (int w = 0; w < 6; w++)
                CHECK(v[k][w] == 0);
    unsigned long long *m = v[mine];
    if (rank == 0) {
        printf("mpit_btl: %s sent %llu msgs %llu bytes, eager %llu rndv %llu\n", t, m[0], m[1],
               m[2], m[3]);
        CHECK(m[0] == 2 && m[1] == 8 + BIG && m[2] == 1 && m[3] == 1);
    } else {
        printf("mpit_btl: %s received %llu msgs %llu bytes\n", t, m[4], m[5]);
        if (m[0] != 0)
            fprintf(stderr, "mpit_btl: rank 1 sent %llu msgs %llu bytes\n", m[0], m[1]);
        fflush(stdout);
        CHECK(m[4] == 2 && m[5] == 8 + BIG && m[0] == 0);
    }
    free(buf);
    T_CHECK(MPI_T_pvar_session_free(&s));
    T_CHECK(MPI_T_finalize());
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0)
        printf("mpit_btl: all checks passed\n");
    return 0;
}
