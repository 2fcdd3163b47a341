/* MPI-IO views (MPI 3.1 §13.3, §13.5): MPI_File_set_view where one rank's filetype holds
 * no data completes (no hang) and the others' data lands; a filetype that is not made of
 * etypes gives MPI_ERR_IO, and when only one rank's view is bad every rank returns an
 * error instead of hanging; the "external32" representation writes big-endian data and
 * reads it back. Needs 2 ranks; the file is deleted on close; rank 0 prints. */
#include "check.h"
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, i, rc, cls, vals[4], back[4], pid;
    unsigned char raw[8];
    char path[256], rep[MPI_MAX_DATAREP_STRING];
    const char *tmp = getenv("TMPDIR");
    MPI_File fh;
    MPI_Datatype four, none, six, et, ft;
    MPI_Offset disp;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank_ = rank;
    pid = (int)getpid();
    CHECK_RC(MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD));
    snprintf(path, sizeof path, "%s/oxmpi-std-io-%d", tmp && *tmp ? tmp : "/tmp", pid);
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path,
                           MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                           MPI_INFO_NULL, &fh));

    /* Rank 1's filetype holds no data. */
    CHECK_RC(MPI_Type_contiguous(4, MPI_INT, &four));
    CHECK_RC(MPI_Type_commit(&four));
    CHECK_RC(MPI_Type_contiguous(0, MPI_INT, &none));
    CHECK_RC(MPI_Type_commit(&none));
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, rank == 0 ? four : none, "native",
                               MPI_INFO_NULL));
    for (i = 0; i < 4; i++)
        vals[i] = 10 + i;
    CHECK_RC(MPI_File_write_all(fh, vals, rank == 0 ? 4 : 0, MPI_INT, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    CHECK_RC(MPI_File_read_at(fh, 0, back, 4, MPI_INT, MPI_STATUS_IGNORE));
    CHECK(back[0] == 10 && back[3] == 13);
    if (rank == 0)
        printf("zero-size view on rank 1: set_view and write_all completed\n");

    /* A filetype of 6 bytes is not made of 4-byte etypes: MPI_ERR_IO everywhere. */
    CHECK_RC(MPI_Type_contiguous(6, MPI_BYTE, &six));
    CHECK_RC(MPI_Type_commit(&six));
    rc = MPI_File_set_view(fh, 0, MPI_INT, six, "native", MPI_INFO_NULL);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_IO);
    /* Only rank 1's view is bad: both ranks return (an error), nobody hangs. */
    rc = MPI_File_set_view(fh, 0, MPI_INT, rank == 1 ? six : MPI_INT, "native", MPI_INFO_NULL);
    CHECK(rc != MPI_SUCCESS);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_IO);
    if (rank == 0)
        printf("etype/filetype mismatch: MPI_ERR_IO on every rank\n");

    /* external32: big-endian in the file. */
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL));
    CHECK_RC(MPI_File_get_view(fh, &disp, &et, &ft, rep));
    CHECK(strcmp(rep, "external32") == 0 && disp == 0);
    if (rank == 0) {
        int two[2] = {0x01020304, -2};
        CHECK_RC(MPI_File_write_at(fh, 0, two, 2, MPI_INT, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_File_sync(fh));
    }
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank != 0)
        CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_File_read_at(fh, 0, back, 2, MPI_INT, MPI_STATUS_IGNORE));
    CHECK(back[0] == 0x01020304 && back[1] == -2);
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_RC(MPI_File_read_at(fh, 0, raw, 8, MPI_BYTE, MPI_STATUS_IGNORE));
    CHECK(raw[0] == 1 && raw[1] == 2 && raw[2] == 3 && raw[3] == 4);
    CHECK(raw[4] == 0xff && raw[7] == 0xfe);
    if (rank == 0)
        printf("external32: %02x %02x %02x %02x in the file, read back %#x %d\n", raw[0],
               raw[1], raw[2], raw[3], back[0], back[1]);

    CHECK_RC(MPI_File_close(&fh));
    MPI_Type_free(&four);
    MPI_Type_free(&none);
    MPI_Type_free(&six);
    if (rank == 0)
        printf("std_io: all checks passed\n");
    CHECK_RC(MPI_Finalize());
    return 0;
}
