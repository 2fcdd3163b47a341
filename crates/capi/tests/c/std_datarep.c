/* User data representations (MPI 4.1 §14.5.3, MPI_Register_datarep): a representation
 * whose conversion functions byte-swap each item is used by a file view; independent and
 * collective writes go through write_conversion_fn and land byte-swapped in the file,
 * reads through read_conversion_fn give the values back; MPI_File_get_view names it and
 * MPI_File_get_type_extent asks its extent function. The large-count form
 * (MPI_Register_datarep_c) with doubles; MPI_CONVERSION_FN_NULL (native data); errors: a
 * name defined twice or predefined (MPI_ERR_DUP_DATAREP), a NULL extent function
 * (MPI_ERR_ARG), a representation that changes a type's size and an undefined name
 * (MPI_ERR_UNSUPPORTED_DATAREP on every rank), a failing conversion (its error class).
 * Needs 2 ranks; the file is deleted on close; rank 0 prints. */
#include "check.h"
#include <string.h>
#include <unistd.h>

static int write_calls, read_calls, extent_calls;

static int item_size(MPI_Datatype t)
{
    int s = 0;
    MPI_Type_size(t, &s);
    return s;
}

/* Reverses the bytes of each of n items of s bytes from src into dst. */
static void swap_items(unsigned char *dst, const unsigned char *src, MPI_Count n, int s)
{
    for (MPI_Count i = 0; i < n; i++)
        for (int b = 0; b < s; b++)
            dst[i * s + b] = src[i * s + (s - 1 - b)];
}

/* Converts count items of datatype t between the user's buffer (from item position on)
 * and the file buffer, byte-swapped; to_file says which way. */
static int swap_conv(void *userbuf, MPI_Datatype t, MPI_Count count, void *filebuf,
                     MPI_Offset position, int to_file)
{
    int s = item_size(t);
    unsigned char *user = (unsigned char *)userbuf + position * s;
    if (to_file) {
        write_calls++;
        swap_items(filebuf, user, count, s);
    } else {
        read_calls++;
        swap_items(user, filebuf, count, s);
    }
    return MPI_SUCCESS;
}

static int swap_write(void *userbuf, MPI_Datatype t, int count, void *filebuf,
                      MPI_Offset position, void *extra)
{
    CHECK(extra == &write_calls);
    return swap_conv(userbuf, t, count, filebuf, position, 1);
}

static int swap_read(void *userbuf, MPI_Datatype t, int count, void *filebuf,
                     MPI_Offset position, void *extra)
{
    (void)extra;
    return swap_conv(userbuf, t, count, filebuf, position, 0);
}

static int swap_write_c(void *userbuf, MPI_Datatype t, MPI_Count count, void *filebuf,
                        MPI_Offset position, void *extra)
{
    (void)extra;
    return swap_conv(userbuf, t, count, filebuf, position, 1);
}

static int swap_read_c(void *userbuf, MPI_Datatype t, MPI_Count count, void *filebuf,
                       MPI_Offset position, void *extra)
{
    (void)extra;
    return swap_conv(userbuf, t, count, filebuf, position, 0);
}

static int failing_write(void *userbuf, MPI_Datatype t, int count, void *filebuf,
                         MPI_Offset position, void *extra)
{
    (void)userbuf, (void)t, (void)count, (void)filebuf, (void)position, (void)extra;
    return MPI_ERR_CONVERSION;
}

/* The file extent of a predefined type: its size (the representation keeps sizes). */
static int same_extent(MPI_Datatype t, MPI_Aint *extent, void *extra)
{
    (void)extra;
    extent_calls++;
    *extent = item_size(t);
    return MPI_SUCCESS;
}

static int double_extent(MPI_Datatype t, MPI_Aint *extent, void *extra)
{
    (void)extra;
    *extent = 2 * item_size(t);
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    int rank, size, i, pid, vals[4], back[4];
    double d[2] = {1.5, -2.25}, dback[2] = {0, 0};
    unsigned char raw[8], draw[8];
    char path[256], rep[MPI_MAX_DATAREP_STRING];
    const char *tmp = getenv("TMPDIR");
    MPI_File fh;
    MPI_Aint ext;
    MPI_Status st;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 2);

    /* Registration and its errors (through MPI_FILE_NULL's handler: errors return). */
    CHECK_RC(MPI_Register_datarep("oxmpi-swap", swap_read, swap_write, same_extent,
                                  &write_calls));
    CHECK(class_of_rc(MPI_Register_datarep("oxmpi-swap", swap_read, swap_write, same_extent,
                                           NULL)) == MPI_ERR_DUP_DATAREP);
    CHECK(class_of_rc(MPI_Register_datarep("external32", swap_read, swap_write, same_extent,
                                           NULL)) == MPI_ERR_DUP_DATAREP);
    CHECK(class_of_rc(MPI_Register_datarep("oxmpi-noextent", swap_read, swap_write, NULL,
                                           NULL)) == MPI_ERR_ARG);
    CHECK_RC(MPI_Register_datarep_c("oxmpi-swap-c", swap_read_c, swap_write_c, same_extent,
                                    NULL));
    CHECK_RC(MPI_Register_datarep("oxmpi-ident", MPI_CONVERSION_FN_NULL,
                                  MPI_CONVERSION_FN_NULL, same_extent, NULL));
    CHECK_RC(MPI_Register_datarep("oxmpi-wide", swap_read, swap_write, double_extent, NULL));
    CHECK_RC(MPI_Register_datarep("oxmpi-fail", swap_read, failing_write, same_extent, NULL));
    if (rank == 0)
        printf("std_datarep: registered; duplicate and predefined names: MPI_ERR_DUP_DATAREP; "
               "NULL extent function: MPI_ERR_ARG\n");

    pid = (int)getpid();
    CHECK_RC(MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD));
    snprintf(path, sizeof path, "%s/oxmpi-std-datarep-%d", tmp && *tmp ? tmp : "/tmp", pid);
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path,
                           MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                           MPI_INFO_NULL, &fh));

    /* The byte-swapping view: a collective write, an independent write, reads back. */
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "oxmpi-swap", MPI_INFO_NULL));
    CHECK_RC(MPI_File_get_view(fh, &(MPI_Offset){0}, &(MPI_Datatype){MPI_DATATYPE_NULL},
                               &(MPI_Datatype){MPI_DATATYPE_NULL}, rep));
    CHECK(strcmp(rep, "oxmpi-swap") == 0);
    extent_calls = 0;
    CHECK_RC(MPI_File_get_type_extent(fh, MPI_DOUBLE, &ext));
    CHECK(ext == 8 && extent_calls == 1);
    for (i = 0; i < 4; i++)
        vals[i] = 0x01020304 + 16 * rank + i;
    write_calls = 0;
    CHECK_RC(MPI_File_write_at_all(fh, 4 * rank, vals, 2, MPI_INT, &st));
    CHECK_RC(MPI_File_write_at(fh, 4 * rank + 2, vals + 2, 2, MPI_INT, &st));
    CHECK(write_calls == 2);
    CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPI_File_sync(fh));
    read_calls = 0;
    CHECK_RC(MPI_File_read_at_all(fh, 4 * (1 - rank), back, 4, MPI_INT, &st));
    CHECK(read_calls == 1);
    for (i = 0; i < 4; i++)
        CHECK(back[i] == 0x01020304 + 16 * (1 - rank) + i);
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_RC(MPI_File_read_at(fh, 0, raw, 4, MPI_BYTE, &st));
    if (rank == 0)
        printf("std_datarep: swap view: %02x %02x %02x %02x in the file, read back %#x "
               "(conversions: write 2 calls, read 1)\n",
               raw[0], raw[1], raw[2], raw[3], (unsigned)back[0]);

    /* The large-count form, with doubles. */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_DOUBLE, MPI_DOUBLE, "oxmpi-swap-c", MPI_INFO_NULL));
    if (rank == 0)
        CHECK_RC(MPI_File_write_at(fh, 0, d, 2, MPI_DOUBLE, &st));
    CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_File_read_at(fh, 0, dback, 2, MPI_DOUBLE, &st));
    CHECK(dback[0] == 1.5 && dback[1] == -2.25);
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_RC(MPI_File_read_at(fh, 0, draw, 8, MPI_BYTE, &st));
    for (i = 0; i < 8; i++)
        CHECK(draw[i] == ((unsigned char *)d)[7 - i]);
    if (rank == 0)
        printf("std_datarep: MPI_Register_datarep_c: doubles byte-swapped in the file, read "
               "back %g %g\n",
               dback[0], dback[1]);

    /* MPI_CONVERSION_FN_NULL: native data in the file. */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "oxmpi-ident", MPI_INFO_NULL));
    if (rank == 0)
        CHECK_RC(MPI_File_write_at(fh, 0, vals, 1, MPI_INT, &st));
    CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_File_read_at(fh, 0, back, 1, MPI_INT, &st));
    CHECK(back[0] == 0x01020304);
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_RC(MPI_File_read_at(fh, 0, raw, 4, MPI_BYTE, &st));
    CHECK(memcmp(raw, &back[0], 4) == 0);
    if (rank == 0)
        printf("std_datarep: MPI_CONVERSION_FN_NULL: native data\n");

    /* Errors: a representation that changes sizes (refused by every rank's set_view), an
     * undefined name, a failing conversion. */
    CHECK(class_of_rc(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "oxmpi-wide",
                                        MPI_INFO_NULL)) == MPI_ERR_UNSUPPORTED_DATAREP);
    CHECK(class_of_rc(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "oxmpi-no-such-rep",
                                        MPI_INFO_NULL)) == MPI_ERR_UNSUPPORTED_DATAREP);
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "oxmpi-fail", MPI_INFO_NULL));
    CHECK(class_of_rc(MPI_File_write_at(fh, rank, vals, 1, MPI_INT, &st)) ==
          MPI_ERR_CONVERSION);
    if (rank == 0)
        printf("std_datarep: size-changing and undefined representations: "
               "MPI_ERR_UNSUPPORTED_DATAREP; failing conversion: MPI_ERR_CONVERSION\n");

    CHECK_RC(MPI_File_close(&fh));
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(access(path, F_OK) != 0);
    if (rank == 0)
        printf("std_datarep: all checks passed\n");
    MPI_Finalize();
    return 0;
}
