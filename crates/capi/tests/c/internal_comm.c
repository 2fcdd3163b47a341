/* Windows and files work on a private communicator of the library's own: creating and
 * freeing them runs none of the user's attribute callbacks (no MPI_Comm_dup /
 * MPI_Comm_free of the user's communicator behind the scenes), while a user's
 * MPI_Comm_dup / MPI_Comm_free of the same communicator does run them. */
#include "check.h"
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static int copies = 0;
static int deletes = 0;

static int copy_fn(MPI_Comm comm, int key, void *extra, void *in, void *out, int *flag) {
    (void)comm, (void)key, (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm comm, int key, void *value, void *extra) {
    (void)comm, (void)key, (void)value, (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;

    int key;
    CHECK_RC(MPI_Comm_create_keyval(copy_fn, delete_fn, &key, NULL));
    CHECK_RC(MPI_Comm_set_attr(MPI_COMM_WORLD, key, &key));

    /* A window: allocate, fence, put, fence, free. */
    int *base = NULL;
    MPI_Win win;
    CHECK_RC(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                              &win));
    *base = -1;
    CHECK_RC(MPI_Win_fence(0, win));
    int v = rank;
    CHECK_RC(MPI_Put(&v, 1, MPI_INT, (rank + 1) % size, 0, 1, MPI_INT, win));
    CHECK_RC(MPI_Win_fence(0, win));
    CHECK(*base == (rank + size - 1) % size);
    CHECK_RC(MPI_Win_free(&win));
    if (rank == 0) printf("window: %d copy, %d delete callbacks\n", copies, deletes);

    /* A file: open, ordered write, close (deleted on close). */
    int pid = (int)getpid();
    CHECK_RC(MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD));
    const char *tmp = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/oxmpi-internal-comm-%d.dat", tmp && *tmp ? tmp : "/tmp",
             pid);
    MPI_File fh;
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path,
                           MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                           MPI_INFO_NULL, &fh));
    CHECK_RC(MPI_File_write_ordered(fh, &v, 1, MPI_INT, MPI_STATUS_IGNORE));
    MPI_Offset fsize;
    CHECK_RC(MPI_File_sync(fh));
    CHECK_RC(MPI_File_get_size(fh, &fsize));
    CHECK(fsize == (MPI_Offset)(size * sizeof(int)));
    CHECK_RC(MPI_File_close(&fh));
    if (rank == 0) printf("file: %d copy, %d delete callbacks\n", copies, deletes);
    CHECK(copies == 0 && deletes == 0);

    /* The user's own duplicate runs them. */
    MPI_Comm dup;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK(copies == 1);
    CHECK_RC(MPI_Comm_free(&dup));
    CHECK(deletes == 1);
    if (rank == 0) printf("user dup and free: %d copy, %d delete callbacks\n", copies, deletes);

    CHECK_RC(MPI_Comm_delete_attr(MPI_COMM_WORLD, key));
    CHECK_RC(MPI_Comm_free_keyval(&key));
    if (rank == 0) printf("internal_comm: all checks passed\n");
    MPI_Finalize();
    return 0;
}
