/* The engine's lock at each thread level (`tests/progress.rs` checks the verbose lines
 * `pml_base_verbose` 10 prints): below MPI_THREAD_SERIALIZED it is taken without atomic
 * read-modify-write instructions while the application's thread is the only one in the
 * library, and with compare-and-swap from the start of the first library thread on (here:
 * the nonblocking collectives' progress thread) and at the higher levels.
 *
 * usage: lock_mode LEVEL (single|funneled|serialized|multiple). Two ranks. Windows of 64
 * MPI_Irecv/MPI_Isend each way (the fast requests) are checked byte by byte before and
 * while an MPI_Iallreduce of 64 Ki ints runs, started first by one rank while the other
 * still exchanges messages, so that its schedule cannot end at its start and goes to the
 * progress thread (on rank 0, then rank 1: both start the thread); the application thread
 * keeps posting and draining messages in the meantime, and the reduction's result is
 * checked. */
#include "check.h"
#include <string.h>
#include <unistd.h>

#define W 64
#define LEN 24
#define RED (64 * 1024)

static unsigned char pattern(int from, int win, int i, int k) {
    return (unsigned char)(from * 101 + win * 7 + i * 3 + k + 1);
}

/* One window each way between ranks 0 and 1, checked. */
static void window(int rank, int win) {
    static unsigned char in[W][LEN], out[W][LEN];
    MPI_Request r[2 * W];
    int peer = 1 - rank;
    for (int i = 0; i < W; i++) {
        memset(in[i], 0, LEN);
        CHECK_RC(MPI_Irecv(in[i], LEN, MPI_BYTE, peer, i, MPI_COMM_WORLD, &r[i]));
    }
    for (int i = 0; i < W; i++) {
        for (int k = 0; k < LEN; k++)
            out[i][k] = pattern(rank, win, i, k);
        CHECK_RC(MPI_Isend(out[i], LEN, MPI_BYTE, peer, i, MPI_COMM_WORLD, &r[W + i]));
    }
    MPI_Status st[2 * W];
    CHECK_RC(MPI_Waitall(2 * W, r, st));
    for (int i = 0; i < W; i++) {
        CHECK(st[i].MPI_SOURCE == peer && st[i].MPI_TAG == i);
        for (int k = 0; k < LEN; k++)
            CHECK(in[i][k] == pattern(peer, win, i, k));
    }
}

int main(int argc, char **argv) {
    const char *names[] = {"single", "funneled", "serialized", "multiple"};
    const int levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED,
                          MPI_THREAD_MULTIPLE};
    int lv = -1;
    for (int i = 0; i < 4; i++)
        if (argc > 1 && strcmp(argv[1], names[i]) == 0)
            lv = i;
    if (lv < 0) {
        fprintf(stderr, "usage: lock_mode single|funneled|serialized|multiple\n");
        return 2;
    }
    int provided = -1, rank, size;
    CHECK_RC(MPI_Init_thread(&argc, &argv, levels[lv], &provided));
    CHECK_RC(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_RC(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank_ = rank;
    CHECK(size == 2 && provided == levels[lv]);
    int win = 0;
    for (int i = 0; i < 200; i++)
        window(rank, win++);
    int *a = malloc(RED * sizeof(int)), *b = malloc(RED * sizeof(int));
    CHECK(a && b);
    for (int first = 0; first < 2; first++) {
        for (int i = 0; i < RED; i++)
            a[i] = i + rank + first;
        MPI_Request red;
        if (rank == first) {
            CHECK_RC(MPI_Iallreduce(a, b, RED, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &red));
            /* The peer starts its part only after this message. */
            CHECK_RC(MPI_Send(&win, 1, MPI_INT, 1 - rank, 1000, MPI_COMM_WORLD));
        } else {
            int w = -1;
            CHECK_RC(MPI_Recv(&w, 1, MPI_INT, 1 - rank, 1000, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            usleep(20000);
            CHECK_RC(MPI_Iallreduce(a, b, RED, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &red));
        }
        for (int i = 0; i < 300; i++)
            window(rank, win++);
        CHECK_RC(MPI_Wait(&red, MPI_STATUS_IGNORE));
        for (int i = 0; i < RED; i++)
            CHECK(b[i] == 2 * (i + first) + 1);
        for (int i = 0; i < 100; i++)
            window(rank, win++);
    }
    free(a);
    free(b);
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0)
        printf("lock_mode: %s passed\n", names[lv]);
    MPI_Finalize();
    return 0;
}
