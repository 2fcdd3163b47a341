/* oxbench: the MPI micro-benchmarks of the oxmpi benchmark harness.
 *
 * One source, built with each implementation's compiler wrapper. Uses only a
 * small set of MPI calls so that young implementations can run it: the
 * point-to-point tests (lat, bw, bibw) need only Send/Recv/Isend/Irecv/Waitall;
 * the collective tests add Barrier, Allreduce, Bcast and Alltoall.
 *
 * usage: oxbench TESTS SAMPLES SCALE [budget=SECONDS] SIZE...
 *   TESTS    comma list of: lat, bw, bibw, allreduce, bcast, alltoall, barrier
 *   SAMPLES  samples per (test, size); each sample times `n` iterations
 *   SCALE    multiplier of the default iteration counts (e.g. 0.2 for quick runs)
 *   budget=  time budget of one (test, size) in seconds: fewer iterations per
 *            sample and fewer samples (at least 3) when iterations are slow;
 *            the reported iters/samples say what was done (default: none)
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

/* Per-(test, size) time budget in seconds (option budget=S; 0 = none). The
 * iteration counts above are maxima: when one iteration is slow (a loaded
 * machine, a slow implementation), fewer are timed per sample, and once the
 * budget is spent no further sample starts (at least MIN_SAMPLES are taken).
 * Rank 0 decides and tells the other ranks (ctl), so all ranks agree. */
static double budget = 0;
#define MIN_SAMPLES 3

/* Rank 0 sends *v to every other rank, which receives it into *v. */
static void ctl(int *v) {
  if (rank == 0) {
    for (int r = 1; r < np; r++) MPI_Send(v, 1, MPI_INT, r, 96, MPI_COMM_WORLD);
  } else {
    MPI_Recv(v, 1, MPI_INT, 0, 96, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
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

/* One window: rank 0 posts WINDOW sends, rank 1 WINDOW receives into one
 * buffer (bidir: both post both), then rank 1 acknowledges with a small message. */
static void window(char *sbuf, char *rbuf, int sz, int bidir) {
  MPI_Request rq[2 * WINDOW];
  MPI_Status st[2 * WINDOW];
  int k = 0;
  char ack = 0;
  if (rank > 1) return;
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

/* What one measurement runs. */
struct op {
  const char *test; /* lat, bw, bibw, allreduce, bcast, alltoall, barrier */
  char *sbuf, *rbuf;
  size_t sz;
};

static int is_p2p(const struct op *o) {
  return !strcmp(o->test, "lat") || !strcmp(o->test, "bw") || !strcmp(o->test, "bibw");
}

/* Synchronise, run n iterations, return the elapsed seconds as rank 0 should
 * see them (point-to-point: rank 0's time; collectives: the slowest rank's). */
static double timed(const struct op *o, int n) {
  int sz = (int)o->sz;
  if (is_p2p(o)) {
    sync2();
    double t0 = MPI_Wtime();
    if (!strcmp(o->test, "lat"))
      for (int i = 0; i < n; i++) pingpong(o->sbuf, sz);
    else
      for (int i = 0; i < n; i++) window(o->sbuf, o->rbuf, sz, !strcmp(o->test, "bibw"));
    return MPI_Wtime() - t0;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < n; i++) {
    if (!strcmp(o->test, "allreduce"))
      MPI_Allreduce(o->sbuf, o->rbuf, (int)(o->sz / sizeof(float)), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(o->test, "bcast"))
      MPI_Bcast(o->sbuf, sz, MPI_CHAR, 0, MPI_COMM_WORLD);
    else if (!strcmp(o->test, "alltoall"))
      MPI_Alltoall(o->sbuf, sz, MPI_CHAR, o->rbuf, sz, MPI_CHAR, MPI_COMM_WORLD);
    else
      MPI_Barrier(MPI_COMM_WORLD);
  }
  return max_over_ranks(MPI_Wtime() - t0);
}

/* The value of one sample from its elapsed time over n iterations. */
static double value(const struct op *o, int n, double dt) {
  if (dt <= 0) dt = 1e-9;
  if (!strcmp(o->test, "lat")) return dt / n / 2 * 1e6;
  if (!strcmp(o->test, "bw")) return (double)o->sz * WINDOW * n / dt / 1e6;
  if (!strcmp(o->test, "bibw")) return (double)o->sz * WINDOW * n * 2 / dt / 1e6;
  return dt / n * 1e6;
}

/* Warm up (doubling batches, at most nmax/4 + 1 iterations or a tenth of the
 * budget) and choose the iteration count from the fastest warm-up batch's
 * time per iteration (a descheduled batch must not shrink a quiet run), then
 * time up to S samples. Under a budget, a sample slower than twice its share
 * shrinks the next samples' iteration count, and no sample starts once the
 * budget is spent (after MIN_SAMPLES). Rank 0 decides and reports; `iters`
 * in the report is the smallest count used. */
static void measure(const struct op *o, int nmax, int S) {
  double start = MPI_Wtime(), per_iter = 0;
  int done = 0, cmd = 1;
  for (;;) {
    ctl(&cmd);
    if (cmd == 0) break;
    double dt = timed(o, cmd);
    if (rank == 0) {
      done += cmd;
      if (per_iter == 0 || dt / cmd < per_iter) per_iter = dt / cmd;
      int enough = done >= nmax / 4 + 1 || (budget > 0 && MPI_Wtime() - start > budget / 10);
      cmd = enough ? 0 : 2 * cmd;
    }
  }
  double share = budget / (S + 1); /* target time of one sample */
  int n = nmax;
  if (budget > 0 && per_iter > 0 && share / per_iter < n) n = share / per_iter < 1 ? 1 : (int)(share / per_iter);
  int nmin = n;
  double v[MAXS];
  int taken = 0;
  for (int s = 0; s < S; s++) {
    int go = n;
    if (rank == 0 && budget > 0 && s >= MIN_SAMPLES && MPI_Wtime() - start > budget) go = 0;
    ctl(&go);
    if (!go) break;
    double dt = timed(o, go);
    if (rank == 0) {
      v[taken] = value(o, go, dt);
      if (go < nmin) nmin = go;
      if (budget > 0 && dt > 2 * share && go > 1) {
        double k = go * share / dt;
        n = k < 1 ? 1 : (int)k;
      }
    }
    taken++;
  }
  if (rank == 0) report(o->test, o->sz, nmin, v, taken, is_p2p(o) && strcmp(o->test, "lat") ? "MB/s" : "us");
}

static void run_test(const char *test, char *sbuf, char *rbuf, size_t sz, int S, double scale) {
  struct op o = {test, sbuf, rbuf, sz};
  int nmax;
  if (!strcmp(test, "lat"))
    nmax = iters(sz <= 8192 ? 2000 : sz <= (1 << 20) ? 100 : 20, scale, 5);
  else if (!strcmp(test, "bw") || !strcmp(test, "bibw"))
    nmax = iters(sz <= 8192 ? 100 : sz <= (1 << 20) ? 10 : 3, scale, 2);
  else if (np > 2) /* oversubscribed: keep it short */
    nmax = iters(sz > 65536 ? 5 : 20, scale, 2);
  else
    nmax = iters(sz > 65536 ? 20 : 500, scale, 3);
  measure(&o, nmax, S);
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
    if (!strncmp(argv[a], "budget=", 7)) {
      budget = atof(argv[a] + 7);
      continue;
    }
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
      run_test(t, sbuf, rbuf, 0, S, scale);
      continue;
    }
    for (int a = 4; a < argc; a++) {
      if (strchr(argv[a], '=')) continue;
      size_t sz = strtoull(argv[a], 0, 0);
      if (!strcmp(t, "lat") || !strcmp(t, "bw") || !strcmp(t, "bibw")) {
        if (np < 2 || (sz == 0 && strcmp(t, "lat"))) continue;
      } else if (!strcmp(t, "allreduce")) {
        if (sz < sizeof(float)) continue;
      } else if (sz == 0) {
        continue;
      }
      run_test(t, sbuf, rbuf, sz, S, scale);
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
