/* scale: what a job costs per rank as it grows (the harness's --scale mode).
 *
 * Each rank times its MPI_Init (wall clock, CLOCK_MONOTONIC around the call),
 * reads its peak resident set size after MPI_Init, then exchanges one message
 * of BYTES bytes (default 8) with every other rank (all pairs: Irecv from all,
 * Isend to all, Waitall, so every connection, ring or eager buffer a library
 * makes per peer is made) and reads its peak RSS again. Rank 0 gathers and
 * prints one line per rank:
 *
 *   SCALE rank=R init_ms=X rss_init_kb=A rss_pairs_kb=B
 *
 * usage: scale [BYTES]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static long peak_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

int main(int argc, char **argv) {
  double t0 = now_ms();
  MPI_Init(&argc, &argv);
  double init_ms = now_ms() - t0;
  long rss_init = peak_kb();
  int rank, np;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  int bytes = argc > 1 ? atoi(argv[1]) : 8;
  if (bytes < 0) bytes = 0;
  char *sbuf = malloc((size_t)bytes * np + 1), *rbuf = malloc((size_t)bytes * np + 1);
  MPI_Request *rq = malloc(2 * (size_t)np * sizeof(MPI_Request));
  if (!sbuf || !rbuf || !rq) MPI_Abort(MPI_COMM_WORLD, 3);
  memset(sbuf, 1, (size_t)bytes * np + 1);
  int k = 0;
  for (int r = 0; r < np; r++)
    if (r != rank) MPI_Irecv(rbuf + (size_t)r * bytes, bytes, MPI_CHAR, r, 5, MPI_COMM_WORLD, &rq[k++]);
  for (int i = 1; i < np; i++) { /* staggered, so that no rank is everyone's first peer */
    int r = (rank + i) % np;
    MPI_Isend(sbuf + (size_t)r * bytes, bytes, MPI_CHAR, r, 5, MPI_COMM_WORLD, &rq[k++]);
  }
  MPI_Waitall(k, rq, MPI_STATUSES_IGNORE);
  long rss_pairs = peak_kb();
  double mine[3] = {init_ms, (double)rss_init, (double)rss_pairs};
  double *all = rank == 0 ? malloc(3 * sizeof(double) * np) : NULL;
  if (rank == 0 && !all) MPI_Abort(MPI_COMM_WORLD, 3);
  MPI_Gather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < np; r++)
      printf("SCALE rank=%d init_ms=%.3f rss_init_kb=%.0f rss_pairs_kb=%.0f\n", r, all[3 * r],
             all[3 * r + 1], all[3 * r + 2]);
    fflush(stdout);
    free(all);
  }
  free(sbuf);
  free(rbuf);
  free(rq);
  MPI_Finalize();
  return 0;
}
