/* MPI_File_sync after each kind of write, on a file of every rank: each step writes (or
 * only reads, or resizes), then runs the standard's sync, barrier, sync recipe and checks
 * that every rank sees the other ranks' data. Run with io_base_verbose 10, each sync
 * reports whether it flushed; tests/io.rs checks, per rank, that every sync after a write
 * of this process flushed and that the second sync of each recipe (and a sync after only
 * reads) did not. The steps, each one recipe unless noted (F: a flush, -: none):
 *   open (writable, maybe created)  F-     write_at (own 8 ints)       F-
 *   write_at_all (own 8 ints)       F-     iwrite_at + wait            F-
 *   write_shared                    F-     write_ordered               F-
 *   read_at_all only                --     set_size (one sync only)    rank 0: F, others: -
 * argv[1] is a scratch directory; the file is deleted at the end. Rank 0 prints
 * "io_sync: done". */
#include "check.h"
#include <string.h>

#define K 8 /* ints per rank and step */

static int rank, size;

static void sync_barrier_sync(MPI_File fh) {
    CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPI_File_sync(fh));
}

static int value(int step, int owner, int i) { return step * 100000 + owner * 100 + i; }

/* Every rank's K ints of `step` are at `base + owner*K` (ints); an independent read of
 * the whole range sees them all. */
static void check_all(MPI_File fh, int step, int base) {
    int *all = malloc(sizeof(int) * K * size);
    MPI_Status st;
    int n;
    CHECK_RC(MPI_File_read_at(fh, (MPI_Offset)base * sizeof(int), all, K * size, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == K * size);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < K; i++) CHECK(all[r * K + i] == value(step, r, i));
    free(all);
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv) {
    char path[4096];
    MPI_File fh;
    MPI_Status st;
    MPI_Request req;
    int buf[K], back[K * 8];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(argc > 1);
    CHECK(size <= 8);
    snprintf(path, sizeof path, "%s/io_sync.dat", argv[1]);
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                           MPI_INFO_NULL, &fh));
    sync_barrier_sync(fh);

    /* Steps 1..3 write at explicit offsets: step s at s*size*K ints. */
    for (int i = 0; i < K; i++) buf[i] = value(1, rank, i);
    CHECK_RC(MPI_File_write_at(fh, (MPI_Offset)(1 * size + rank) * K * sizeof(int), buf, K,
                               MPI_INT, &st));
    sync_barrier_sync(fh);
    check_all(fh, 1, 1 * size * K);

    for (int i = 0; i < K; i++) buf[i] = value(2, rank, i);
    CHECK_RC(MPI_File_write_at_all(fh, (MPI_Offset)(2 * size + rank) * K * sizeof(int), buf,
                                   K, MPI_INT, &st));
    sync_barrier_sync(fh);
    check_all(fh, 2, 2 * size * K);

    for (int i = 0; i < K; i++) buf[i] = value(3, rank, i);
    CHECK_RC(MPI_File_iwrite_at(fh, (MPI_Offset)(3 * size + rank) * K * sizeof(int), buf, K,
                                MPI_INT, &req));
    CHECK_RC(MPI_Wait(&req, &st));
    sync_barrier_sync(fh);
    check_all(fh, 3, 3 * size * K);

    /* Shared file pointer: rank order is not fixed, so each rank writes its K ints with
     * its rank in the first one and the check looks for every rank's block. */
    CHECK_RC(MPI_File_seek_shared(fh, (MPI_Offset)4 * size * K * sizeof(int), MPI_SEEK_SET));
    for (int i = 0; i < K; i++) buf[i] = value(4, rank, i);
    CHECK_RC(MPI_File_write_shared(fh, buf, K, MPI_INT, &st));
    sync_barrier_sync(fh);
    CHECK_RC(MPI_File_read_at(fh, (MPI_Offset)4 * size * K * sizeof(int), back, K * size,
                              MPI_INT, &st));
    for (int r = 0; r < size; r++) {
        int found = 0;
        for (int b = 0; b < size; b++)
            if (back[b * K] == value(4, r, 0)) {
                for (int i = 0; i < K; i++) CHECK(back[b * K + i] == value(4, r, i));
                found = 1;
            }
        CHECK(found);
    }
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));

    /* Ordered: rank order after the shared pointer (now at the end of step 4). */
    for (int i = 0; i < K; i++) buf[i] = value(5, rank, i);
    CHECK_RC(MPI_File_write_ordered(fh, buf, K, MPI_INT, &st));
    sync_barrier_sync(fh);
    check_all(fh, 5, 5 * size * K);

    /* Only reads: nothing to flush. */
    CHECK_RC(MPI_File_read_at_all(fh, (MPI_Offset)(1 * size + rank) * K * sizeof(int), back,
                                  K, MPI_INT, &st));
    for (int i = 0; i < K; i++) CHECK(back[i] == value(1, rank, i));
    sync_barrier_sync(fh);

    /* A size change (made by rank 0): its sync flushes; the others wrote nothing. */
    CHECK_RC(MPI_File_set_size(fh, (MPI_Offset)2 * size * K * sizeof(int)));
    CHECK_RC(MPI_File_sync(fh));
    MPI_Offset bytes;
    CHECK_RC(MPI_File_get_size(fh, &bytes));
    CHECK(bytes == (MPI_Offset)2 * size * K * sizeof(int));
    check_all(fh, 1, 1 * size * K);

    CHECK_RC(MPI_File_close(&fh));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK_RC(MPI_File_delete(path, MPI_INFO_NULL));
        printf("io_sync: done\n");
    }
    MPI_Finalize();
    return 0;
}
