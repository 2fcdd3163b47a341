/* Fence epochs over the message path (run with --mca osc pt2pt, or across nodes): every
 * epoch each rank puts (even epochs) or accumulates (odd ones) into its own slot of every
 * other rank's window; after the closing fence each rank checks every slot of its window,
 * and gets every other rank's whole window, checked after the next fence: the slots a third
 * rank updated in the epoch before must be there (the fence must have applied them at that
 * target before the get is served, or before a get from a rank of the same node reads that
 * memory directly while a put from another node is still on its way). EPOCHS is argv[1] (default 100). Prints "rma_fence_epochs: all
 * checks passed on N ranks" on rank 0, or the first mismatch of each rank and exits 1. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, n = argc > 1 ? atoi(argv[1]) : 100, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *buf;
    MPI_Win win;
    MPI_Win_allocate(size * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &buf, &win);
    for (int s = 0; s < size; s++) buf[s] = s;
    int *got = malloc(size * size * sizeof(int));
    MPI_Win_fence(0, win);
    for (int i = 1; i <= n; i++) {
        /* Slot o holds i*100+o after epoch i: put it, or add 100 to (i-1)*100+o. */
        int v = i * 100 + rank, add = 100;
        for (int t = 0; t < size; t++) {
            if (t == rank) continue;
            if (i % 2 == 0)
                MPI_Put(&v, 1, MPI_INT, t, rank, 1, MPI_INT, win);
            else
                MPI_Accumulate(&add, 1, MPI_INT, t, rank, 1, MPI_INT, MPI_SUM, win);
        }
        MPI_Win_fence(0, win);
        for (int o = 0; o < size; o++)
            if (o != rank && buf[o] != i * 100 + o && !bad) {
                printf("rank %d epoch %d: slot %d = %d, want %d\n", rank, i, o, buf[o], i * 100 + o);
                bad = 1;
            }
        for (int t = 0; t < size; t++)
            if (t != rank) MPI_Get(got + t * size, size, MPI_INT, t, 0, size, MPI_INT, win);
        MPI_Win_fence(0, win);
        for (int t = 0; t < size; t++)
            for (int o = 0; o < size; o++)
                if (t != rank && o != t && got[t * size + o] != i * 100 + o && !bad) {
                    printf("rank %d epoch %d: get of slot %d at rank %d = %d, want %d\n", rank, i,
                           o, t, got[t * size + o], i * 100 + o);
                    bad = 1;
                }
    }
    int anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !anybad) printf("rma_fence_epochs: all checks passed on %d ranks\n", size);
    fflush(stdout);
    MPI_Win_free(&win);
    free(got);
    MPI_Finalize();
    return anybad;
}
