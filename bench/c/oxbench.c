/* oxbench: the MPI micro-benchmarks of the oxmpi benchmark harness.
 *
 * One source, built with each implementation's compiler wrapper. Uses only a
 * small set of MPI calls so that young implementations can run it: the
 * point-to-point tests (lat, bw, bibw) need only Send/Recv/Isend/Irecv/Waitall;
 * the collective tests add Barrier, Allreduce, Bcast and Alltoall.
 *
 * usage: oxbench TESTS SAMPLES SCALE SIZE...
 *   TESTS    comma list of: lat, bw, bibw, allreduce, bcast, alltoall, barrier
 *   SAMPLES  samples per (test, size); each sample times `n` iterations
 *   SCALE    multiplier of the default iteration counts (e.g. 0.2 for quick runs)
 *   SIZE     message sizes in bytes (0 allowed; barrier ignores sizes)
 *
 * Output (all printed by rank 0, one line per test and size, BIND/RSS per rank):
 *   BIND rank=R cpus=LIST
 *   RESULT test=T np=P size=S iters=N samples=K median=X min=X max=X mean=X unit=U values=X;X;...
 *   RSS prog=oxbench rank=R kb=K
 * Latency-like tests report microseconds per operation (ping-pong: one way,
 * half the round trip); bw/bibw report MB/s (1e6 bytes per second). For
 * collectives each sample is the slowest rank's time (max over ranks).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define WINDOW 64
#define MAXS 1000

static int rank, np;

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Rank 0 prints one line per rank (collected with point-to-point messages),
 * so that no two ranks write to the launcher's output at the same time. */
static void print_from_all(const char *mine) {
  char buf[256];
  if (rank == 0) {
    fputs(mine, stdout);
    for (int r = 1; r < np; r++) {
      MPI_Recv(buf, sizeof buf, MPI_CHAR, r, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      buf[sizeof buf - 1] = 0;
      fputs(buf, stdout);
    }
    fflush(stdout);
  } else {
    snprintf(buf, sizeof buf, "%s", mine);
    MPI_Send(buf, sizeof buf, MPI_CHAR, 0, 98, MPI_COMM_WORLD);
  }
}

static void print_binding(void) {
  char line[512], cpus[200] = "?", out[256];
  FILE *f = fopen("/proc/self/status", "r");
  if (f) {
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "Cpus_allowed_list: %199s", cpus) == 1) break;
    fclose(f);
  }
  snprintf(out, sizeof out, "BIND rank=%d cpus=%s\n", rank, cpus);
  print_from_all(out);
}

static void report(const char *test, size_t size, int n, double *v, int S, const char *unit) {
  /* the whole line is formatted first and written at once: some launchers
   * forward partial writes, which would interleave with other ranks' output */
  static char line[64 + 16 * MAXS + 256];
  double sum = 0, sorted[MAXS];
  for (int i = 0; i < S; i++) sum += v[i], sorted[i] = v[i];
  qsort(sorted, S, sizeof(double), cmp);
  double med = S % 2 ? sorted[S / 2] : 0.5 * (sorted[S / 2 - 1] + sorted[S / 2]);
  int k = snprintf(line, sizeof line,
                   "RESULT test=%s np=%d size=%zu iters=%d samples=%d median=%.4f min=%.4f max=%.4f mean=%.4f unit=%s values=",
                   test, np, size, n, S, med, sorted[0], sorted[S - 1], sum / S, unit);
  for (int i = 0; i < S && k < (int)sizeof line - 24; i++) /* in time order */
    k += snprintf(line + k, sizeof line - k, i ? ";%.4f" : "%.4f", v[i]);
  snprintf(line + k, sizeof line - k, "\n");
  fputs(line, stdout);
  fflush(stdout);
}

static int iters(double base, double scale, int lo) {
  int n = (int)(base * scale);
  return n < lo ? lo : n;
}

/* Slowest rank's elapsed time, gathered on rank 0 with point-to-point only. */
static double max_over_ranks(double t) {
  if (rank == 0) {
    for (int r = 1; r < np; r++) {
      double o;
      MPI_Recv(&o, 1, MPI_DOUBLE, r, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (o > t) t = o;
    }
  } else {
    MPI_Send(&t, 1, MPI_DOUBLE, 0, 99, MPI_COMM_WORLD);
  }
  return t;
}

/* Start-of-sample synchronisation of ranks 0 and 1 for the point-to-point
 * tests, with a zero-byte exchange (so those tests need no collective). */
static void sync2(void) {
  char c = 0;
  if (rank == 0) {
    MPI_Send(&c, 0, MPI_CHAR, 1, 97, MPI_COMM_WORLD);
    MPI_Recv(&c, 0, MPI_CHAR, 1, 97, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (rank == 1) {
    MPI_Recv(&c, 0, MPI_CHAR, 0, 97, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&c, 0, MPI_CHAR, 0, 97, MPI_COMM_WORLD);
  }
}

static void pingpong(char *buf, int sz) {
  if (rank == 0) {
    MPI_Send(buf, sz, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
    MPI_Recv(buf, sz, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (rank == 1) {
    MPI_Recv(buf, sz, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(buf, sz, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
  }
}

static void lat(char *buf, int sz, int S, double scale) {
  int n = iters(sz <= 8192 ? 2000 : sz <= (1 << 20) ? 100 : 20, scale, 5);
  double v[MAXS];
  for (int i = 0; i < n / 4 + 2; i++) pingpong(buf, sz); /* warm-up */
  for (int s = 0; s < S; s++) {
    sync2();
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) pingpong(buf, sz);
    v[s] = (MPI_Wtime() - t0) / n / 2 * 1e6;
  }
  if (rank == 0) report("lat", sz, n, v, S, "us");
}

/* One window: rank 0 posts WINDOW sends, rank 1 WINDOW receives into one
 * buffer (bidir: both post both), then rank 1 acknowledges with a small message. */
static void window(char *sbuf, char *rbuf, int sz, int bidir) {
  MPI_Request rq[2 * WINDOW];
  MPI_Status st[2 * WINDOW];
  int k = 0;
  char ack = 0;
  if (rank == 0 || bidir) {
    if (bidir)
      for (int w = 0; w < WINDOW; w++)
        MPI_Irecv(rbuf, sz, MPI_CHAR, 1 - rank, 2, MPI_COMM_WORLD, &rq[k++]);
    for (int w = 0; w < WINDOW; w++)
      MPI_Isend(sbuf, sz, MPI_CHAR, 1 - rank, 2, MPI_COMM_WORLD, &rq[k++]);
  } else {
    for (int w = 0; w < WINDOW; w++)
      MPI_Irecv(rbuf, sz, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &rq[k++]);
  }
  MPI_Waitall(k, rq, st);
  if (rank == 0) MPI_Recv(&ack, 1, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  else MPI_Send(&ack, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
}

static void bw(char *sbuf, char *rbuf, int sz, int S, double scale, int bidir) {
  int n = iters(sz <= 8192 ? 100 : sz <= (1 << 20) ? 10 : 3, scale, 2);
  double v[MAXS];
  window(sbuf, rbuf, sz, bidir); /* warm-up */
  for (int s = 0; s < S; s++) {
    sync2();
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) window(sbuf, rbuf, sz, bidir);
    double dt = MPI_Wtime() - t0;
    v[s] = (double)sz * WINDOW * n * (bidir ? 2 : 1) / dt / 1e6;
  }
  if (rank == 0) report(bidir ? "bibw" : "bw", sz, n, v, S, "MB/s");
}

static void coll(const char *test, char *sbuf, char *rbuf, size_t sz, int S, double scale) {
  int big = sz > 65536;
  int n = iters(big ? 20 : 500, scale, 3);
  if (np > 2) n = iters(big ? 5 : 20, scale, 2); /* oversubscribed: keep it short */
  double v[MAXS];
  for (int s = -1; s < S; s++) { /* s = -1 is the warm-up */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
      if (!strcmp(test, "allreduce"))
        MPI_Allreduce(sbuf, rbuf, (int)(sz / sizeof(float)), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else if (!strcmp(test, "bcast"))
        MPI_Bcast(sbuf, (int)sz, MPI_CHAR, 0, MPI_COMM_WORLD);
      else if (!strcmp(test, "alltoall"))
        MPI_Alltoall(sbuf, (int)sz, MPI_CHAR, rbuf, (int)sz, MPI_CHAR, MPI_COMM_WORLD);
      else
        MPI_Barrier(MPI_COMM_WORLD);
    }
    double t = max_over_ranks((MPI_Wtime() - t0) / n * 1e6);
    if (s >= 0) v[s] = t;
  }
  if (rank == 0) report(test, sz, n, v, S, "us");
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (argc < 4) {
    if (rank == 0) fprintf(stderr, "usage: oxbench TESTS SAMPLES SCALE SIZE...\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int S = atoi(argv[2]);
  double scale = atof(argv[3]);
  if (S < 1) S = 1;
  if (S > MAXS) S = MAXS;
  size_t maxsz = 1;
  for (int a = 4; a < argc; a++) {
    size_t v = strtoull(argv[a], 0, 0);
    if (v > maxsz) maxsz = v;
  }
  /* alltoall needs np blocks on both sides */
  char *sbuf = malloc(maxsz * (size_t)np), *rbuf = malloc(maxsz * (size_t)np);
  if (!sbuf || !rbuf) MPI_Abort(MPI_COMM_WORLD, 3);
  memset(sbuf, rank + 1, maxsz * (size_t)np);
  memset(rbuf, 0, maxsz * (size_t)np);
  print_binding();

  char tests[256];
  snprintf(tests, sizeof tests, "%s", argv[1]);
  for (char *t = strtok(tests, ","); t; t = strtok(NULL, ",")) {
    if (!strcmp(t, "barrier")) {
      coll(t, sbuf, rbuf, 0, S, scale);
      continue;
    }
    for (int a = 4; a < argc; a++) {
      int sz = (int)strtoull(argv[a], 0, 0);
      if (!strcmp(t, "lat") || !strcmp(t, "bw") || !strcmp(t, "bibw")) {
        if (np < 2) continue;
        if (!strcmp(t, "lat")) lat(sbuf, sz, S, scale);
        else if (sz > 0) bw(sbuf, rbuf, sz, S, scale, !strcmp(t, "bibw"));
      } else if (!strcmp(t, "allreduce")) {
        if (sz >= (int)sizeof(float)) coll(t, sbuf, rbuf, sz, S, scale);
      } else if (sz > 0) {
        coll(t, sbuf, rbuf, sz, S, scale);
      }
    }
  }
  struct rusage ru;
  char out[256];
  getrusage(RUSAGE_SELF, &ru);
  snprintf(out, sizeof out, "RSS prog=oxbench rank=%d kb=%ld\n", rank, ru.ru_maxrss);
  print_from_all(out);
  free(sbuf);
  free(rbuf);
  MPI_Finalize();
  return 0;
}
