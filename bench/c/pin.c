/* pin: run a program on the CPU its local rank is given, for every MPI
 * launcher alike (the collectives matrix's placements, --placement).
 *
 * usage: pin CPUS PROG [ARG...]
 *   CPUS  comma list: the CPU of local rank 0, 1, 2, ... (e.g. 0,0,1,1)
 *
 * The local rank is the first of these the launcher set:
 *   OMPI_COMM_WORLD_LOCAL_RANK (Open MPI, and oxmpi's mpirun),
 *   MPI_LOCALRANKID (MPICH's Hydra, and oxmpi's mpirun),
 *   PMI_RANK (a PMI launcher on one node: the rank is the local rank).
 * The mask is set with sched_setaffinity before exec, so the program and
 * every thread it starts stay on that CPU (the launcher must not bind:
 * Open MPI --bind-to none; Hydra and oxmpi do not bind oversubscribed ranks).
 * Exits 127 without running PROG when the rank or its CPU is unknown. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *local_rank(const char **from) {
  static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) {
      *from = vars[i];
      return v;
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: pin CPUS PROG [ARG...]\n");
    return 127;
  }
  const char *from = "";
  const char *r = local_rank(&from);
  if (!r) {
    fprintf(stderr, "pin: no local rank in the environment\n");
    return 127;
  }
  long rank = strtol(r, NULL, 10);
  /* the rank-th entry of the CPU list */
  const char *p = argv[1];
  for (long i = 0; i < rank && p; i++) {
    p = strchr(p, ',');
    if (p) p++;
  }
  if (rank < 0 || !p || !*p) {
    fprintf(stderr, "pin: local rank %ld (%s) has no CPU in '%s'\n", rank, from, argv[1]);
    return 127;
  }
  int cpu = atoi(p);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    perror("pin: sched_setaffinity");
    return 127;
  }
  execvp(argv[2], argv + 2);
  perror("pin: exec");
  return 127;
}
