/* MPI-IO: open/close/delete and their error classes, file error handlers, views with a
 * noncontiguous filetype, explicit-offset / individual / shared / ordered access, split
 * collectives, nonblocking forms, sizes and queries. argv[1] is a scratch directory;
 * everything created there is deleted again (the harness checks). */
#include "check.h"
#include <dirent.h>
#include <string.h>
#include <unistd.h>

static int rank, size;
static char path[4096], path2[4096];

static int err_class(int code) {
    int c;
    MPI_Error_class(code, &c);
    return c;
}

static int handler_calls;
static int handler_code;
static MPI_File handler_file;
static void file_handler(MPI_File *fh, int *code, ...) {
    handler_calls++;
    handler_code = *code;
    handler_file = *fh;
}

/* Read the whole file through the byte view into buf (rank-local). */
static int read_all_bytes(MPI_File fh, void *buf, int max) {
    MPI_Status st;
    int n;
    CHECK_RC(MPI_File_read_at(fh, 0, buf, max, MPI_BYTE, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_BYTE, &n));
    return n;
}

static void errors_and_handlers(void) {
    MPI_File fh;
    int rc;
    MPI_Errhandler eh;

    /* The default handler of MPI_FILE_NULL returns errors. */
    CHECK_RC(MPI_File_get_errhandler(MPI_FILE_NULL, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);

    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    CHECK(err_class(rc) == MPI_ERR_NO_SUCH_FILE);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL,
                       &fh);
    CHECK(err_class(rc) == MPI_ERR_AMODE);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    CHECK(err_class(rc) == MPI_ERR_AMODE);
    rc = MPI_File_delete(path, MPI_INFO_NULL);
    CHECK(err_class(rc) == MPI_ERR_NO_SUCH_FILE);

    /* Exclusive create: succeeds once, then MPI_ERR_FILE_EXISTS on every rank. */
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY | MPI_MODE_CREATE | MPI_MODE_EXCL,
                           MPI_INFO_NULL, &fh));
    CHECK(fh != MPI_FILE_NULL);
#ifndef MPI_ABI_VERSION /* the MPI-5 standard ABI has no Fortran handles */
    {
        /* Fortran handles: an open file round-trips, MPI_FILE_NULL is 0. */
        MPI_Fint fi = MPI_File_c2f(fh);
        CHECK(fi != 0);
        CHECK(MPI_File_f2c(fi) == fh);
        CHECK(MPI_File_c2f(MPI_FILE_NULL) == 0);
        CHECK(MPI_File_f2c(0) == MPI_FILE_NULL);
    }
#endif
    CHECK_RC(MPI_File_close(&fh));
    CHECK(fh == MPI_FILE_NULL);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY | MPI_MODE_CREATE | MPI_MODE_EXCL,
                       MPI_INFO_NULL, &fh);
    CHECK(err_class(rc) == MPI_ERR_FILE_EXISTS);

    /* A user handler on MPI_FILE_NULL sees failing opens. */
    CHECK_RC(MPI_File_create_errhandler(file_handler, &eh));
    CHECK_RC(MPI_File_set_errhandler(MPI_FILE_NULL, eh));
    handler_calls = 0;
    rc = MPI_File_open(MPI_COMM_WORLD, path2, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    CHECK(err_class(rc) == MPI_ERR_NO_SUCH_FILE);
    CHECK(handler_calls == 1 && handler_file == MPI_FILE_NULL);
    CHECK_RC(MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN));

    /* A user handler on an open file: called with that file and the code. */
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
    CHECK_RC(MPI_File_get_errhandler(fh, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);
    CHECK_RC(MPI_File_create_errhandler(file_handler, &eh));
    CHECK_RC(MPI_File_set_errhandler(fh, eh));
    handler_calls = 0;
    int x = 0;
    rc = MPI_File_read_at(fh, 0, &x, 1, MPI_INT, MPI_STATUS_IGNORE);
    CHECK(err_class(rc) == MPI_ERR_ACCESS);
    CHECK(handler_calls == 1 && handler_file == fh && err_class(handler_code) == MPI_ERR_ACCESS);
    CHECK_RC(MPI_File_call_errhandler(fh, MPI_ERR_OTHER));
    CHECK(handler_calls == 2 && handler_code == MPI_ERR_OTHER);
    rc = MPI_File_write_at(fh, -1, &x, 1, MPI_INT, MPI_STATUS_IGNORE);
    CHECK(err_class(rc) == MPI_ERR_ARG && handler_calls == 3);
    CHECK_RC(MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN));
    CHECK_RC(MPI_Errhandler_free(&eh));
    CHECK_RC(MPI_File_close(&fh));
    /* A closed handle is invalid. */
    MPI_File stale = fh;
    rc = MPI_File_get_size(stale, &(MPI_Offset){0});
    CHECK(err_class(rc) == MPI_ERR_FILE);

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        CHECK_RC(MPI_File_delete(path, MPI_INFO_NULL));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(access(path, F_OK) != 0);
    if (rank == 0)
        printf("io: errors ok\n");
}

static void views(void) {
    MPI_File fh;
    MPI_Status st;
    int n;
    const int N = 10;
    int buf[10];

    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL,
                           &fh));
    /* Interleave the ranks' ints: rank r owns every size-th int starting at r. */
    MPI_Datatype one, ftype;
    int disp = rank;
    CHECK_RC(MPI_Type_create_indexed_block(1, 1, &disp, MPI_INT, &one));
    CHECK_RC(MPI_Type_create_resized(one, 0, (MPI_Aint)(size * sizeof(int)), &ftype));
    CHECK_RC(MPI_Type_commit(&ftype));
    CHECK_RC(MPI_Type_free(&one));
    CHECK_RC(MPI_File_set_view(fh, 8, MPI_INT, ftype, "native", MPI_INFO_NULL));
    MPI_Offset d, boff;
    MPI_Datatype et, ft;
    char rep[MPI_MAX_DATAREP_STRING];
    CHECK_RC(MPI_File_get_view(fh, &d, &et, &ft, rep));
    CHECK(d == 8 && et == MPI_INT && strcmp(rep, "native") == 0);
    MPI_Aint lb, ext;
    CHECK_RC(MPI_Type_get_extent(ft, &lb, &ext));
    CHECK(ext == (MPI_Aint)(size * sizeof(int)));
    CHECK_RC(MPI_Type_free(&ft));
    CHECK_RC(MPI_File_get_byte_offset(fh, 3, &boff));
    CHECK(boff == 8 + (MPI_Offset)((3 * size + rank) * sizeof(int)));

    for (int i = 0; i < N; i++)
        buf[i] = rank * 100 + i;
    CHECK_RC(MPI_File_write_all(fh, buf, N, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == N);
    MPI_Offset pos;
    CHECK_RC(MPI_File_get_position(fh, &pos));
    CHECK(pos == N);
    CHECK_RC(MPI_File_sync(fh));

    /* Read back through the same view, then the whole file as bytes. */
    int back[10];
    memset(back, 0xff, sizeof back);
    CHECK_RC(MPI_File_seek(fh, 2, MPI_SEEK_SET));
    CHECK_RC(MPI_File_read(fh, back, N - 2, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == N - 2);
    for (int i = 0; i < N - 2; i++)
        CHECK(back[i] == rank * 100 + i + 2);
    /* Reading past the end returns what is there. */
    CHECK_RC(MPI_File_read(fh, back, 5, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == 0);
    CHECK_RC(MPI_File_seek(fh, 0, MPI_SEEK_END));
    CHECK_RC(MPI_File_get_position(fh, &pos));
    CHECK(pos == N);

    CHECK_RC(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    MPI_Offset fsize;
    CHECK_RC(MPI_File_get_size(fh, &fsize));
    CHECK(fsize == 8 + (MPI_Offset)(N * size * sizeof(int)));
    int *all = malloc(fsize);
    CHECK(read_all_bytes(fh, all, (int)fsize) == (int)fsize);
    for (int j = 0; j < N * size; j++)
        CHECK(all[2 + j] == (j % size) * 100 + j / size);
    free(all);

    /* Unknown data representation. */
    int rc = MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "no-such-rep", MPI_INFO_NULL);
    CHECK(err_class(rc) == MPI_ERR_UNSUPPORTED_DATAREP);

    CHECK_RC(MPI_Type_free(&ftype));
    CHECK_RC(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        CHECK_RC(MPI_File_delete(path, MPI_INFO_NULL));
    if (rank == 0)
        printf("io: views ok\n");
}

static void shared_pointer(void) {
    MPI_File fh;
    MPI_Status st;
    int n;

    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path,
                           MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE,
                           MPI_INFO_NULL, &fh));
    /* The shared pointer lives in rank 0's memory: no backing file in /dev/shm. */
    if (rank == 0) {
        char pre[64];
        snprintf(pre, sizeof pre, "oxmpi-shfp-%d-", (int)getpid());
        DIR *d = opendir("/dev/shm");
        if (d) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL)
                CHECK(strncmp(e->d_name, pre, strlen(pre)) != 0);
            closedir(d);
        }
    }
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));

    /* Ordered: rank r writes r + 1 ints of value r, in rank order. */
    int mine[64];
    for (int i = 0; i <= rank; i++)
        mine[i] = rank;
    CHECK_RC(MPI_File_write_ordered(fh, mine, rank + 1, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == rank + 1);
    int total = size * (size + 1) / 2;
    MPI_Offset sp;
    CHECK_RC(MPI_File_get_position_shared(fh, &sp));
    CHECK(sp == total);
    MPI_Barrier(MPI_COMM_WORLD); /* everyone saw it before anyone moves it again */

    /* Independent shared writes: 3 ints each, every block lands once, whole. */
    int three[3] = {1000 + rank, 1000 + rank, 1000 + rank};
    CHECK_RC(MPI_File_write_shared(fh, three, 3, MPI_INT, &st));
    /* The standard's consistency recipe: sync, barrier, sync. */
    CHECK_RC(MPI_File_sync(fh));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_File_get_position_shared(fh, &sp));
    CHECK(sp == total + 3 * size);

    int all[256];
    CHECK_RC(MPI_File_read_at_all(fh, 0, all, total + 3 * size, MPI_INT, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == total + 3 * size);
    int k = 0;
    for (int r = 0; r < size; r++)
        for (int i = 0; i <= r; i++)
            CHECK(all[k++] == r);
    int seen[64] = {0};
    for (int b = 0; b < size; b++, k += 3) {
        int v = all[k];
        CHECK(v >= 1000 && v < 1000 + size && all[k + 1] == v && all[k + 2] == v);
        seen[v - 1000]++;
    }
    for (int r = 0; r < size; r++)
        CHECK(seen[r] == 1);

    /* Ordered read from the start; seek_shared is collective. */
    CHECK_RC(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    int got[64];
    CHECK_RC(MPI_File_read_ordered(fh, got, rank + 1, MPI_INT, &st));
    for (int i = 0; i <= rank; i++)
        CHECK(got[i] == rank);
    CHECK_RC(MPI_File_seek_shared(fh, 0, MPI_SEEK_END));
    CHECK_RC(MPI_File_get_position_shared(fh, &sp));
    CHECK(sp == total + 3 * size);

    /* Split collectives and nonblocking forms. */
    MPI_Request req;
    int v = 7 + rank;
    CHECK_RC(MPI_File_iwrite_at(fh, total + 3 * size + rank, &v, 1, MPI_INT, &req));
    CHECK_RC(MPI_Wait(&req, &st));
    CHECK_RC(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == 1);
    CHECK_RC(MPI_File_sync(fh));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_RC(MPI_File_sync(fh));
    int w = -1;
    CHECK_RC(MPI_File_read_at_all_begin(fh, total + 3 * size + (rank + 1) % size, &w, 1, MPI_INT));
    CHECK_RC(MPI_File_read_at_all_end(fh, &w, &st));
    CHECK(w == 7 + (rank + 1) % size);
    w = -1;
    CHECK_RC(MPI_File_iread_at(fh, total + 3 * size + rank, &w, 1, MPI_INT, &req));
    int flag = 0;
    CHECK_RC(MPI_Test(&req, &flag, &st));
    CHECK(flag && w == 7 + rank);
    int rc = MPI_File_read_all_end(fh, &w, &st);
    CHECK(err_class(rc) != MPI_SUCCESS);

    CHECK_RC(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(access(path, F_OK) != 0); /* deleted on close */
    if (rank == 0)
        printf("io: shared ok\n");
}

static void queries(void) {
    MPI_File fh;
    int amode, flag, cmp;
    MPI_Offset sz;
    MPI_Group g, wg;
    MPI_Info info;
    MPI_Aint ext;

    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path2,
                           MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE,
                           MPI_INFO_NULL, &fh));
    CHECK_RC(MPI_File_get_amode(fh, &amode));
    CHECK(amode == (MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE));
    CHECK_RC(MPI_File_get_group(fh, &g));
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_compare(g, wg, &cmp);
    CHECK(cmp == MPI_IDENT);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    CHECK_RC(MPI_File_get_atomicity(fh, &flag));
    CHECK(!flag);
    CHECK_RC(MPI_File_set_atomicity(fh, 1));
    CHECK_RC(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag);
    int v = rank;
    CHECK_RC(MPI_File_write_at(fh, rank * sizeof(int), &v, 1, MPI_INT, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_File_set_atomicity(fh, 0));
    MPI_Barrier(MPI_COMM_WORLD); /* every rank has written */
    CHECK_RC(MPI_File_get_size(fh, &sz));
    CHECK(sz == (MPI_Offset)(size * sizeof(int)));
    MPI_Barrier(MPI_COMM_WORLD); /* checked before anyone resizes */
    CHECK_RC(MPI_File_preallocate(fh, 1000));
    CHECK_RC(MPI_File_get_size(fh, &sz));
    CHECK(sz == 1000);
    CHECK_RC(MPI_File_preallocate(fh, 10));
    CHECK_RC(MPI_File_get_size(fh, &sz));
    CHECK(sz == 1000);
    MPI_Barrier(MPI_COMM_WORLD); /* set_size need not wait for the others */
    CHECK_RC(MPI_File_set_size(fh, 12));
    CHECK_RC(MPI_File_get_size(fh, &sz));
    CHECK(sz == 12);
    CHECK_RC(MPI_File_get_type_extent(fh, MPI_DOUBLE, &ext));
    CHECK(ext == sizeof(double));
    MPI_Info_create(&info);
    MPI_Info_set(info, "access_style", "read_mostly");
    CHECK_RC(MPI_File_set_info(fh, info));
    MPI_Info_free(&info);
    CHECK_RC(MPI_File_get_info(fh, &info));
    char val[64];
    MPI_Info_get(info, "access_style", sizeof val - 1, val, &flag);
    CHECK(flag && strcmp(val, "read_mostly") == 0);
    MPI_Info_free(&info);
    CHECK_RC(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(access(path2, F_OK) != 0);
    if (rank == 0)
        printf("io: queries ok\n");
}

static void bad_input(void) {
    MPI_File fh;
    MPI_Offset sz;
    int x[4] = {0};
    CHECK(err_class(MPI_File_open(MPI_COMM_WORLD, NULL, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh)) ==
          MPI_ERR_BAD_FILE);
    CHECK(err_class(MPI_File_open(MPI_COMM_NULL, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh)) ==
          MPI_ERR_COMM);
    CHECK(err_class(MPI_File_get_size(MPI_FILE_NULL, &sz)) == MPI_ERR_FILE);
    CHECK(err_class(MPI_File_get_size((MPI_File)(size_t)0x12345, &sz)) == MPI_ERR_FILE);
    CHECK(err_class(MPI_File_close(NULL)) == MPI_ERR_ARG);
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path,
                           MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE,
                           MPI_INFO_NULL, &fh));
    CHECK(err_class(MPI_File_get_size(fh, NULL)) == MPI_ERR_ARG);
    CHECK(err_class(MPI_File_write_at(fh, 0, x, -1, MPI_INT, MPI_STATUS_IGNORE)) ==
          MPI_ERR_COUNT);
    CHECK(err_class(MPI_File_write_at(fh, 0, NULL, 4, MPI_INT, MPI_STATUS_IGNORE)) ==
          MPI_ERR_BUFFER);
    CHECK(err_class(MPI_File_read_at(fh, 0, x, 1, MPI_DATATYPE_NULL, MPI_STATUS_IGNORE)) ==
          MPI_ERR_TYPE);
    CHECK(err_class(MPI_File_seek(fh, 0, 12345)) == MPI_ERR_ARG);
    CHECK(err_class(MPI_File_seek(fh, -1, MPI_SEEK_SET)) == MPI_ERR_ARG);
    MPI_Datatype loose;
    CHECK_RC(MPI_Type_contiguous(2, MPI_INT, &loose));
    CHECK(err_class(MPI_File_set_view(fh, 0, MPI_INT, loose, "native", MPI_INFO_NULL)) ==
          MPI_ERR_TYPE);
    CHECK_RC(MPI_Type_free(&loose));
    CHECK(err_class(MPI_File_iwrite(fh, x, 1, MPI_INT, NULL)) == MPI_ERR_ARG);
    CHECK_RC(MPI_File_close(&fh));
    /* Sequential files only have the shared file pointer. */
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path,
                           MPI_MODE_WRONLY | MPI_MODE_CREATE | MPI_MODE_SEQUENTIAL |
                               MPI_MODE_DELETE_ON_CLOSE,
                           MPI_INFO_NULL, &fh));
    CHECK_RC(MPI_File_write_shared(fh, x, 1, MPI_INT, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_File_write_ordered(fh, x, 1, MPI_INT, MPI_STATUS_IGNORE));
    CHECK(err_class(MPI_File_write_at(fh, 0, x, 1, MPI_INT, MPI_STATUS_IGNORE)) ==
          MPI_ERR_UNSUPPORTED_OPERATION);
    CHECK(err_class(MPI_File_write(fh, x, 1, MPI_INT, MPI_STATUS_IGNORE)) ==
          MPI_ERR_UNSUPPORTED_OPERATION);
    CHECK(err_class(MPI_File_seek(fh, 0, MPI_SEEK_SET)) == MPI_ERR_UNSUPPORTED_OPERATION);
    MPI_Offset sp;
    CHECK_RC(MPI_File_get_position_shared(fh, &sp));
    CHECK(sp >= 4 * size + 4 && sp <= 8 * size);
    CHECK_RC(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(access(path, F_OK) != 0);
    if (rank == 0)
        printf("io: bad input ok\n");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(argc == 2);
    snprintf(path, sizeof path, "%s/data.bin", argv[1]);
    snprintf(path2, sizeof path2, "%s/other.bin", argv[1]);
    errors_and_handlers();
    views();
    shared_pointer();
    queries();
    bad_input();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("io: done\n");
    MPI_Finalize();
    return 0;
}
