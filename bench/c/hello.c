/* Job start-up benchmark: MPI_Init + MPI_Finalize, then each rank prints its
 * peak resident set size (after finalize, so the library's whole footprint).
 * `hello spawn N R` (one rank): R times, the wall time of MPI_Comm_spawn of N
 * children (this program, which merge and leave) plus MPI_Intercomm_merge, one
 * line `SPAWN children=N ms=T` each. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
int main(int argc, char **argv) {
  int rank = -1;
  MPI_Comm parent, inter, all;
  MPI_Init(&argc, &argv);
  MPI_Comm_get_parent(&parent);
  if (parent != MPI_COMM_NULL) {
    MPI_Intercomm_merge(parent, 1, &all);
    MPI_Comm_free(&all);
    MPI_Comm_disconnect(&parent);
    MPI_Finalize();
    return 0;
  }
  if (argc > 3 && strcmp(argv[1], "spawn") == 0) {
    int n = atoi(argv[2]), reps = atoi(argv[3]);
    for (int i = 0; i < reps; i++) {
      double t0 = MPI_Wtime();
      MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, n, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter,
                     MPI_ERRCODES_IGNORE);
      MPI_Intercomm_merge(inter, 0, &all);
      double ms = (MPI_Wtime() - t0) * 1e3;
      MPI_Comm_free(&all);
      MPI_Comm_disconnect(&inter);
      printf("SPAWN children=%d ms=%.3f\n", n, ms);
      fflush(stdout);
    }
    MPI_Finalize();
    return 0;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Finalize();
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  char line[128]; /* one write per line, so ranks' lines do not interleave */
  snprintf(line, sizeof line, "RSS prog=hello rank=%d kb=%ld\n", rank, ru.ru_maxrss);
  fputs(line, stdout);
  fflush(stdout);
  return 0;
}
