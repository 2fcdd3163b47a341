/* A loop of MPI_Barrier + MPI_Allreduce (MPI_CHAR, MPI_SUM) as the standard suites time a
 * collective: prints the whole iteration (barrier included) and the allreduce's own time,
 * each the slowest rank's, per iteration. It tells a change that makes the collective
 * faster from one that only moves time into the untimed barrier.
 *
 * usage: mpirun -n 2 --bind-to core barloop [BYTES [ITERS]]   (default 64 B, 20000)
 * prints: BYTES loop US allreduce US us
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int n = argc > 1 ? atoi(argv[1]) : 64, iters = argc > 2 ? atoi(argv[2]) : 20000;
  char *s = calloc(n > 0 ? n : 1, 1), *r = calloc(n > 0 ? n : 1, 1);
  for (int w = 0; w < iters / 10; w++) {
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Allreduce(s, r, n, MPI_CHAR, MPI_SUM, MPI_COMM_WORLD);
  }
  double in = 0, t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double a = MPI_Wtime();
    MPI_Allreduce(s, r, n, MPI_CHAR, MPI_SUM, MPI_COMM_WORLD);
    in += MPI_Wtime() - a;
  }
  double tot = MPI_Wtime() - t0, mi, mt;
  MPI_Reduce(&in, &mi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&tot, &mt, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("%d loop %.4f allreduce %.4f us\n", n, mt / iters * 1e6, mi / iters * 1e6);
  free(s);
  free(r);
  MPI_Finalize();
  return 0;
}
