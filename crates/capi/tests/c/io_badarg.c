/* Collective MPI-IO where one rank's arguments fail their checks (files return errors by
 * default): the other ranks must not wait for it, and, since the check result travels with
 * the collective's first exchange, every rank returns an error and nobody touches the file
 * (or moves the shared file pointer). Rank 1 passes a negative count, then an invalid
 * datatype, then a NULL buffer; the others pass good arguments. Covered: write_all,
 * read_at_all, write_ordered, read_ordered, the split begin of ordered and _all forms.
 * Ends with a good ordered write to show the handle is usable. argv[1] is a scratch
 * directory (left empty). Rank 0 prints "io_badarg: done". Needs 2 or more ranks. */
#include "check.h"
#include <string.h>

static int rank, size;

/* A bad argument on rank 1 only, by case: count, datatype, buffer. */
static void args(int which, int *count, MPI_Datatype *dt, int **buf, int *good) {
    *count = 4;
    *dt = MPI_INT;
    *buf = good;
    if (rank != 1) return;
    if (which == 0) *count = -1;
    if (which == 1) *dt = MPI_DATATYPE_NULL;
    if (which == 2) *buf = NULL;
}

/* Every rank failed (rank 1 with its own class, the others with the same class). */
static void all_failed(int rc, int which) {
    int want = which == 0 ? MPI_ERR_COUNT : which == 1 ? MPI_ERR_TYPE : MPI_ERR_BUFFER;
    CHECK(rc != MPI_SUCCESS);
    CHECK(class_of_rc(rc) == want);
}

int main(int argc, char **argv) {
    char path[4096];
    MPI_File fh;
    MPI_Status st;
    MPI_Offset pos, size_now;
    int good[4] = {1, 2, 3, 4}, *buf, count;
    MPI_Datatype dt;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(argc > 1 && size >= 2);
    snprintf(path, sizeof path, "%s/io_badarg.dat", argv[1]);
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                           &fh));
    for (int which = 0; which < 3; which++) {
        args(which, &count, &dt, &buf, good);
        all_failed(MPI_File_write_all(fh, buf, count, dt, &st), which);
        all_failed(MPI_File_read_at_all(fh, 0, buf, count, dt, &st), which);
        all_failed(MPI_File_write_ordered(fh, buf, count, dt, &st), which);
        all_failed(MPI_File_read_ordered(fh, buf, count, dt, &st), which);
        all_failed(MPI_File_write_ordered_begin(fh, buf, count, dt), which);
        all_failed(MPI_File_write_at_all_begin(fh, 0, buf, count, dt), which);
        /* Nothing was written, the pointers did not move, no split collective is active. */
        CHECK_RC(MPI_File_get_size(fh, &size_now));
        CHECK(size_now == 0);
        CHECK_RC(MPI_File_get_position_shared(fh, &pos));
        CHECK(pos == 0);
        CHECK_RC(MPI_File_get_position(fh, &pos));
        CHECK(pos == 0);
        CHECK(MPI_File_write_all_end(fh, good, &st) != MPI_SUCCESS);
    }
    /* The handle still works: an ordered write of 4 ints per rank. */
    CHECK_RC(MPI_File_write_ordered(fh, good, 4, MPI_INT, &st));
    CHECK_RC(MPI_File_get_size(fh, &size_now));
    CHECK(size_now == (MPI_Offset)size * 4 * (MPI_Offset)sizeof(int));
    CHECK_RC(MPI_File_close(&fh));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) CHECK_RC(MPI_File_delete(path, MPI_INFO_NULL));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("io_badarg: done\n");
    MPI_Finalize();
    return 0;
}
