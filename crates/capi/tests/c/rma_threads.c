/* One-sided operations from 4 threads of each rank to one target of one window, at once:
 * fetch-and-op, get and compare-and-swap each wait for their own reply, so a reply taken
 * by the wrong thread shows up as a wrong value. Each rank targets the next one; thread i
 * owns slot i of each kind at the target. Prints "rma_threads: ok on N ranks". */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

#define THREADS 4
#define ITER 200

static MPI_Win win;
static int rank, size, target;
static int errors[THREADS];

static void *work(void *arg) {
    int i = (int)(long)arg, one = 1;
    for (int it = 0; it < ITER; it++) {
        int old = -1, got = -1, prev = -1, cmp = it, next = it + 1;
        MPI_Fetch_and_op(&one, &old, MPI_INT, target, i, MPI_SUM, win);
        MPI_Get(&got, 1, MPI_INT, target, THREADS + i, 1, MPI_INT, win);
        MPI_Compare_and_swap(&next, &cmp, &prev, MPI_INT, target, 2 * THREADS + i, win);
        MPI_Win_flush(target, win);
        if (old != it || got != 1000 * target + i || prev != it) {
            if (errors[i]++ < 3)
                fprintf(stderr, "rank %d thread %d iteration %d: fetch %d get %d cas %d\n", rank,
                        i, it, old, got, prev);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided, *base, all = 0, bad = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided != MPI_THREAD_MULTIPLE) {
        printf("rma_threads: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    target = (rank + 1) % size;
    MPI_Win_allocate(3 * THREADS * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                     &base, &win);
    for (int i = 0; i < THREADS; i++) {
        base[i] = 0;
        base[THREADS + i] = 1000 * rank + i;
        base[2 * THREADS + i] = 0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, work, (void *)(long)i);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        bad += errors[i];
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
    for (int i = 0; i < THREADS; i++) {
        if (base[i] != ITER || base[2 * THREADS + i] != ITER) {
            fprintf(stderr, "rank %d slot %d: %d increments, cas at %d\n", rank, i, base[i],
                    base[2 * THREADS + i]);
            bad++;
        }
    }
    MPI_Win_unlock(rank, win);
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(all ? "rma_threads: %d errors\n" : "rma_threads: ok on %d ranks\n", all ? all : size);
    MPI_Win_free(&win);
    MPI_Finalize();
    return all != 0;
}
