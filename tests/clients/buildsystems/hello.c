/* The program every build-system client builds: each rank checks that the library it runs
 * on is oxmpi (or the one whose version string starts with argv[1]: "MPICH", "Open MPI"),
 * then a token goes around the ring. Rank 0 prints one line:
 *   hello: 2 ranks on oxmpi <version>, token 1 (expected 1)
 * and the program exits non-zero if anything is wrong. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, rank, size, token = 0, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_library_version(lib, &len);
    const char *want_lib = argc > 1 ? argv[1] : "oxmpi";
    if (strncmp(lib, want_lib, strlen(want_lib)) != 0) {
        fprintf(stderr, "hello: rank %d runs on '%s', not %s\n", rank, lib, want_lib);
        bad = 1;
    }
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    if (size > 1) {
        if (rank == 0) {
            MPI_Send(&token, 1, MPI_INT, next, 7, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += rank;
            MPI_Send(&token, 1, MPI_INT, next, 7, MPI_COMM_WORLD);
        }
    }
    int all_bad = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        int want = size * (size - 1) / 2;
        printf("hello: %d ranks on %.*s, token %d (expected %d)\n", size,
               (int)strcspn(lib, "\n"), lib, token, want);
        if (token != want)
            all_bad = 1;
    }
    MPI_Finalize();
    return all_bad;
}
