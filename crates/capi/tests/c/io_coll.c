/* Collective MPI-IO: every rank owns every size-th block of B ints of one file (a vector
 * filetype), written with MPI_File_write_all, read back with MPI_File_read_all and checked
 * byte for byte through an independent read of the whole file; then write_at_all /
 * read_at_all with a contiguous view (rank r at offset r*N), write_ordered / read_ordered,
 * the split and nonblocking collective forms, a collective read past the end of the file
 * (short counts), and ranks that take part with nothing; then the first part again on a
 * file whose cb_buffer_size hint (1000 bytes) makes the aggregators work in rounds.
 * argv[1] is a scratch directory; the files are deleted at the end. Rank 0 prints "io_coll: done". */
#include "check.h"
#include <string.h>

#define B 16  /* ints per block */
#define N 64  /* blocks per rank */

static int rank, size;

static int value(int owner, int i) { return owner * 1000003 + i; }

/* This rank's N*B ints written collectively through the current view, then
 * sync-barrier-sync, so that every rank sees the whole file. */
static void write_all_synced(MPI_File fh, const int *mine) {
    MPI_Status st;
    int n;
    CHECK_RC(MPI_File_write_all(fh, mine, N * B, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == N * B);
    CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPI_File_sync(fh));
}

int main(int argc, char **argv) {
    char path[4096];
    MPI_File fh;
    MPI_Status st;
    MPI_Datatype blocks, filetype;
    int n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(argc > 1);
    snprintf(path, sizeof path, "%s/io_coll.dat", argv[1]);
    int total = size * N * B;
    int *mine = malloc(sizeof(int) * N * B), *back = malloc(sizeof(int) * N * B);
    int *whole = malloc(sizeof(int) * total);
    for (int i = 0; i < N * B; i++) mine[i] = value(rank, i);

    /* Interleaved view: block k of rank r at (k*size + r)*B ints. */
    CHECK_RC(MPI_Type_vector(N, B, size * B, MPI_INT, &blocks));
    CHECK_RC(MPI_Type_create_resized(blocks, 0, (MPI_Aint)size * N * B * sizeof(int), &filetype));
    CHECK_RC(MPI_Type_commit(&filetype));
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                           MPI_INFO_NULL, &fh));
    CHECK_RC(MPI_File_set_view(fh, (MPI_Offset)rank * B * sizeof(int), MPI_INT, filetype,
                               "native", MPI_INFO_NULL));
    write_all_synced(fh, mine);
    /* The file, read independently through a byte view, holds every rank's blocks. */
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_RC(MPI_File_read_at(fh, 0, whole, total * (int)sizeof(int), MPI_BYTE, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_BYTE, &n));
    CHECK(n == total * (int)sizeof(int));
    for (int k = 0; k < N * size; k++)
        for (int j = 0; j < B; j++)
            CHECK(whole[k * B + j] == value(k % size, (k / size) * B + j));
    /* read_all through the interleaved view gives each rank its own blocks. */
    CHECK_RC(MPI_File_set_view(fh, (MPI_Offset)rank * B * sizeof(int), MPI_INT, filetype,
                               "native", MPI_INFO_NULL));
    memset(back, 0, sizeof(int) * N * B);
    CHECK_RC(MPI_File_read_all(fh, back, N * B, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == N * B);
    CHECK(memcmp(back, mine, sizeof(int) * N * B) == 0);

    /* Contiguous view: write_at_all at rank*N*B ints, in reverse rank order of values. */
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    for (int i = 0; i < N * B; i++) mine[i] = value(size - 1 - rank, i) + 7;
    CHECK_RC(MPI_File_write_at_all(fh, (MPI_Offset)rank * N * B, mine, N * B, MPI_INT, &st));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    memset(whole, 0, sizeof(int) * total);
    /* Every rank reads the whole file collectively (overlapping reads). */
    CHECK_RC(MPI_File_read_at_all(fh, 0, whole, total, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == total);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < N * B; i++)
            CHECK(whole[r * N * B + i] == value(size - 1 - r, i) + 7);
    /* Past the end: rank r asks for 2*N*B ints at r*N*B; only the file's data comes back. */
    int *big = malloc(sizeof(int) * 2 * N * B);
    CHECK_RC(MPI_File_read_at_all(fh, (MPI_Offset)rank * N * B, big, 2 * N * B, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == (rank == size - 1 ? N * B : 2 * N * B < total - rank * N * B ? 2 * N * B
                                                                            : total - rank * N * B));
    CHECK(memcmp(big, whole + rank * N * B, sizeof(int) * n) == 0);
    free(big);
    /* Every section first waits until all ranks are done reading what it overwrites
     * (collective calls need not synchronise: fcoll=^two_phase does not). */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    /* Only odd ranks take part with data; the others with count 0. */
    int cnt = rank % 2 ? B : 0;
    for (int i = 0; i < B; i++) mine[i] = -rank;
    CHECK_RC(MPI_File_write_at_all(fh, (MPI_Offset)rank * B, mine, cnt, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == cnt);
    /* Other ranks' writes are visible after sync-barrier-sync (MPI 3.1 §13.6.1). */
    CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_File_read_at_all(fh, 0, whole, size * B, MPI_INT, &st));
    for (int r = 1; r < size; r += 2)
        for (int i = 0; i < B; i++) CHECK(whole[r * B + i] == -r);

    /* Ordered: rank r writes r+1 ints equal to r, in rank order from the start. */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPI_File_set_size(fh, 0));
    CHECK_RC(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    for (int i = 0; i <= rank; i++) mine[i] = rank;
    CHECK_RC(MPI_File_write_ordered(fh, mine, rank + 1, MPI_INT, &st));
    CHECK_RC(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    memset(back, 0xff, sizeof(int) * (rank + 1));
    CHECK_RC(MPI_File_read_ordered(fh, back, rank + 1, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == rank + 1);
    for (int i = 0; i <= rank; i++) CHECK(back[i] == rank);

    /* Split and nonblocking forms go the same way. */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < B; i++) mine[i] = value(rank, i) ^ 0x55;
    CHECK_RC(MPI_File_write_at_all_begin(fh, (MPI_Offset)rank * B, mine, B, MPI_INT));
    CHECK_RC(MPI_File_write_at_all_end(fh, mine, &st));
    MPI_Request req;
    CHECK_RC(MPI_File_iread_at_all(fh, (MPI_Offset)rank * B, back, B, MPI_INT, &req));
    CHECK_RC(MPI_Wait(&req, &st));
    CHECK(memcmp(back, mine, sizeof(int) * B) == 0);

    CHECK_RC(MPI_File_close(&fh));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) CHECK_RC(MPI_File_delete(path, MPI_INFO_NULL));

    /* cb_buffer_size 1000: less than any aggregator's part of the file, so the two phases
     * run in rounds of at most 1000 bytes each; the file holds the same as above. */
    char cbpath[4096];
    MPI_Info info;
    snprintf(cbpath, sizeof cbpath, "%s/io_coll_cb.dat", argv[1]);
    CHECK_RC(MPI_Info_create(&info));
    CHECK_RC(MPI_Info_set(info, "cb_buffer_size", "1000"));
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, cbpath, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    CHECK_RC(MPI_Info_free(&info));
    CHECK_RC(MPI_File_set_view(fh, (MPI_Offset)rank * B * sizeof(int), MPI_INT, filetype,
                               "native", MPI_INFO_NULL));
    for (int i = 0; i < N * B; i++) mine[i] = value(rank, i) + 11;
    write_all_synced(fh, mine);
    memset(back, 0, sizeof(int) * N * B);
    CHECK_RC(MPI_File_seek(fh, 0, MPI_SEEK_SET));
    CHECK_RC(MPI_File_read_all(fh, back, N * B, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == N * B);
    CHECK(memcmp(back, mine, sizeof(int) * N * B) == 0);
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    memset(whole, 0, sizeof(int) * total);
    CHECK_RC(MPI_File_read_at_all(fh, 0, whole, total * (int)sizeof(int), MPI_BYTE, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_BYTE, &n));
    CHECK(n == total * (int)sizeof(int));
    for (int k = 0; k < N * size; k++)
        for (int j = 0; j < B; j++)
            CHECK(whole[k * B + j] == value(k % size, (k / size) * B + j) + 11);
    CHECK_RC(MPI_File_close(&fh));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) CHECK_RC(MPI_File_delete(cbpath, MPI_INFO_NULL));
    CHECK_RC(MPI_Type_free(&filetype));
    CHECK_RC(MPI_Type_free(&blocks));
    free(mine); free(back); free(whole);
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("io_coll: done\n");
    MPI_Finalize();
    return 0;
}
