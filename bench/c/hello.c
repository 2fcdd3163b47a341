/* Job start-up benchmark: MPI_Init + MPI_Finalize, then each rank prints its
 * peak resident set size (after finalize, so the library's whole footprint). */
#include <mpi.h>
#include <stdio.h>
#include <sys/resource.h>
int main(int argc, char **argv) {
  int rank = -1;
  MPI_Init(&argc, &argv);
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
