/* The per-call cost of the library's small-message path, for A/B comparisons of two
 * builds on a loaded machine (the observability overhead: as is, with a started tools
 * interface session, with the job profile).
 *
 * usage: callcost TEST BATCHES ITERS [mpit=1|2]
 *   TEST  self:     1 rank, MPI_Irecv + MPI_Isend of 8 bytes to itself, MPI_Wait on both
 *         sendrecv: 1 rank, MPI_Send of 8 bytes to itself (eager), then MPI_Recv
 *         pingpong: 2 ranks, MPI_Send/MPI_Recv of 8 bytes (rank 0 prints half the
 *                   round trip)
 *   BATCHES batches of ITERS iterations, each batch timed on its own; the best batch is
 *         the figure least disturbed by other processes (also printed: the median)
 *   mpit=1 before measuring, open a tools interface session with handles on every
 *         unbound continuous variable (the transports' counters among them, as
 *         `oxbench mpit=1`)
 *   mpit=2 the same with a handle on every unbound performance variable, started where
 *         it can be (counters, levels, the wait timer), as a tool reading everything
 * The job profile is turned on from outside (`mpirun --profile`, or the parameter
 * `mpi_profile` in the environment: OXMPI_MCA_mpi_profile=DIR).
 *
 * Output (rank 0): `CALLCOST test=T iters=N batches=B best_ns=X median_ns=X`, the
 * nanoseconds per iteration. For instruction counts, run it under
 * `valgrind --tool=callgrind` with two ITERS values and divide the difference. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static MPI_T_pvar_session session;
static MPI_T_pvar_handle handles[256];
static int nhandles = -1;

/* A session with a handle on every unbound continuous variable (all = 0: the counters
 * that count anyway, a superset of `oxbench mpit=1`'s) or on every unbound variable, each
 * started where it can be (all = 1: the wait timer too). */
static void mpit_start(int all) {
  int provided, num = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS ||
      MPI_T_pvar_session_create(&session) != MPI_SUCCESS ||
      MPI_T_pvar_get_num(&num) != MPI_SUCCESS) {
    fprintf(stderr, "callcost: the MPI tools interface is not available\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  nhandles = 0;
  for (int i = 0; i < num && nhandles < 256; i++) {
    char name[256];
    int len = sizeof name, bind, cont, count;
    if (MPI_T_pvar_get_info(i, name, &len, NULL, NULL, NULL, NULL, NULL, NULL, &bind, NULL,
                            &cont, NULL) != MPI_SUCCESS ||
        bind != MPI_T_BIND_NO_OBJECT || (!all && !cont))
      continue;
    MPI_T_pvar_handle h;
    if (MPI_T_pvar_handle_alloc(session, i, NULL, &h, &count) != MPI_SUCCESS || count != 1)
      continue;
    if (!cont) MPI_T_pvar_start(session, h);
    handles[nhandles++] = h;
  }
}

static void mpit_stop(void) {
  if (nhandles < 0) return;
  MPI_T_pvar_session_free(&session);
  MPI_T_finalize();
}

int main(int argc, char **argv) {
  int rank, np;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (argc < 4) {
    if (rank == 0) fprintf(stderr, "usage: callcost self|sendrecv|pingpong BATCHES ITERS [mpit=1|2]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *test = argv[1];
  int batches = atoi(argv[2]);
  long iters = atol(argv[3]);
  if (argc > 4 && !strncmp(argv[4], "mpit=", 5) && atoi(argv[4] + 5) > 0)
    mpit_start(atoi(argv[4] + 5) > 1);
  int pp = !strcmp(test, "pingpong");
  if ((pp && np != 2) || (!pp && strcmp(test, "self") && strcmp(test, "sendrecv")) ||
      batches < 1 || batches > 100000 || iters < 1) {
    if (rank == 0) fprintf(stderr, "callcost: bad arguments (pingpong needs 2 ranks)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char sbuf[8] = {0}, rbuf[8];
  double *t = malloc(sizeof(double) * batches);
  MPI_Comm c = MPI_COMM_WORLD;
  for (int b = 0; b < batches; b++) {
    if (pp) MPI_Barrier(c);
    double t0 = now_ns();
    if (!strcmp(test, "self")) {
      for (long i = 0; i < iters; i++) {
        MPI_Request r[2];
        MPI_Irecv(rbuf, 8, MPI_CHAR, 0, 1, c, &r[0]);
        MPI_Isend(sbuf, 8, MPI_CHAR, 0, 1, c, &r[1]);
        MPI_Wait(&r[0], MPI_STATUS_IGNORE);
        MPI_Wait(&r[1], MPI_STATUS_IGNORE);
      }
    } else if (!strcmp(test, "sendrecv")) {
      for (long i = 0; i < iters; i++) {
        MPI_Send(sbuf, 8, MPI_CHAR, 0, 1, c);
        MPI_Recv(rbuf, 8, MPI_CHAR, 0, 1, c, MPI_STATUS_IGNORE);
      }
    } else if (rank == 0) {
      for (long i = 0; i < iters; i++) {
        MPI_Send(sbuf, 8, MPI_CHAR, 1, 1, c);
        MPI_Recv(rbuf, 8, MPI_CHAR, 1, 1, c, MPI_STATUS_IGNORE);
      }
    } else {
      for (long i = 0; i < iters; i++) {
        MPI_Recv(rbuf, 8, MPI_CHAR, 0, 1, c, MPI_STATUS_IGNORE);
        MPI_Send(sbuf, 8, MPI_CHAR, 0, 1, c);
      }
    }
    t[b] = (now_ns() - t0) / iters / (pp ? 2 : 1);
  }
  qsort(t, batches, sizeof(double), cmp);
  if (rank == 0)
    printf("CALLCOST test=%s iters=%ld batches=%d best_ns=%.2f median_ns=%.2f\n", test, iters,
           batches, t[0], t[batches / 2]);
  free(t);
  mpit_stop();
  MPI_Finalize();
  return 0;
}
