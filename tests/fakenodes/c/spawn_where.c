/* MPI_Comm_spawn across nodes: `spawn_where N ROOT [KEY=VALUE]` spawns N children of this
 * program from parent rank ROOT (with the info key KEY=VALUE if given). Each child prints
 * "child C of N on HOST" (the node it runs on) and sends its host name to the parents'
 * rank 0; parents and children merge and sum their ranks; the parents' rank 0 prints
 * "spawn_where: N children from root ROOT ok". Errors are fatal (the default handler). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what) {
    printf("spawn_where: %s failed\n", what);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

/* Merge the intercommunicator (parents first) and check the sum of all ranks. */
static void merge_and_sum(MPI_Comm inter, int high) {
    MPI_Comm all;
    int n, me, sum = 0, one;
    if (MPI_Intercomm_merge(inter, high, &all) != MPI_SUCCESS)
        fail("MPI_Intercomm_merge");
    MPI_Comm_size(all, &n);
    MPI_Comm_rank(all, &me);
    one = me + 1;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, all);
    if (sum != n * (n + 1) / 2)
        fail("MPI_Allreduce over the merged communicator");
    MPI_Comm_free(&all);
}

int main(int argc, char **argv) {
    MPI_Comm parent, inter;
    int rank, size, len;
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        printf("child %d of %d on %s\n", rank, size, host);
        fflush(stdout);
        MPI_Send(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, 5, parent);
        merge_and_sum(parent, 1);
        MPI_Comm_disconnect(&parent);
        MPI_Finalize();
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: spawn_where N ROOT [KEY=VALUE]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[1]), root = atoi(argv[2]);
    MPI_Info info = MPI_INFO_NULL;
    if (argc > 3) {
        char kv[256];
        snprintf(kv, sizeof kv, "%s", argv[3]);
        char *eq = strchr(kv, '=');
        if (!eq)
            fail("parsing KEY=VALUE");
        *eq = 0;
        MPI_Info_create(&info);
        MPI_Info_set(info, kv, eq + 1);
    }
    char *args[] = {"child", NULL};
    int *codes = calloc((size_t)n, sizeof *codes);
    MPI_Comm_spawn(argv[0], args, n, info, root, MPI_COMM_WORLD, &inter, codes);
    if (rank == root)
        for (int c = 0; c < n; c++)
            if (codes[c] != MPI_SUCCESS)
                fail("error code of a child");
    int remote;
    MPI_Comm_remote_size(inter, &remote);
    if (remote != n)
        fail("remote size of the intercommunicator");
    if (rank == 0)
        for (int c = 0; c < n; c++) {
            char got[MPI_MAX_PROCESSOR_NAME];
            MPI_Recv(got, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, c, 5, inter, MPI_STATUS_IGNORE);
        }
    merge_and_sum(inter, 0);
    MPI_Comm_disconnect(&inter);
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    free(codes);
    if (rank == 0)
        printf("spawn_where: %d children from root %d ok\n", n, root);
    MPI_Finalize();
    return 0;
}
