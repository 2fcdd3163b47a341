/* oxbench: the MPI micro-benchmarks of the oxmpi benchmark harness.
 *
 * One source, built with each implementation's compiler wrapper. The
 * point-to-point tests (lat, bw, bibw) need only Send/Recv/Isend/Irecv/Waitall;
 * the collective tests call the collective they measure and Barrier.
 *
 * usage: oxbench TESTS SAMPLES SCALE [OPTION=VALUE...] SIZE...
 *   TESTS    comma list of: lat, bw, bibw, and the collectives allreduce,
 *            reduce, bcast, gather, gatherv, scatter, scatterv, allgather,
 *            allgatherv, alltoall, alltoallv, alltoallw, reduce_scatter,
 *            reduce_scatter_block, scan, barrier, each also nonblocking with
 *            an "i" in front (iallreduce, ..., ibarrier: post, then wait)
 *   SAMPLES  samples per (test, size); each sample times `n` iterations
 *   SCALE    multiplier of the default iteration counts (e.g. 0.2 for quick runs)
 *   budget=  time budget of one (test, size) in seconds: fewer iterations per
 *            sample and fewer samples (at least 3) when iterations are slow;
 *            the reported iters/samples say what was done (default: none)
 *   fill=    1 (with budget=): iterations per sample from a calibration, so
 *            that each sample fills its share of the budget (budget / (SAMPLES
 *            + 1), barriers between timed iterations included) whatever the
 *            default count; SCALE then no longer sets the count (default 0:
 *            the default counts times SCALE, shrunk when slow)
 *   dtype=   datatype of the collectives: CHAR (default, as the standard
 *            suites), INT, FLOAT, DOUBLE, LONG, or a pair type 2INT, FLOAT_INT,
 *            DOUBLE_INT, LONG_INT, SHORT_INT
 *   op=      reduction: SUM (default; MINLOC for pair types), PROD, MAX, MIN,
 *            BAND, BOR, LAND, LOR, MINLOC, MAXLOC
 *   inplace= 1: MPI_IN_PLACE where the collective allows it (default 0)
 *   mpit=    1: before measuring, open an MPI tools interface session with
 *            started handles on the transports' send and receive counters
 *            (every btl_*_msgs_sent/_recv and btl_*_bytes_sent/_recv the
 *            library has), so that the measurement includes what counters a
 *            tool reads cost; the handles are read and freed at the end
 *   clock=   rank (default): each rank times its own calls and a sample is the
 *            slowest rank's sum; span: every iteration is the span over all
 *            ranks, from the first rank's entry to the last rank's return, on
 *            the host's monotonic clock (all ranks on one host or sharing its
 *            clock, e.g. network namespaces). Per-rank times miss the work a
 *            collective leaves to the barrier after it: a scatterv root that
 *            sends eagerly returns at once, and its receivers, which leave the
 *            barrier later (oversubscribed ranks wait to be scheduled), find
 *            the data there, so every rank's own time is tiny
 *   ranks=   max (default): a sample is the slowest rank's time; avg: the
 *            mean over the ranks, as OSU's default column reports (clock=rank
 *            and method=b2b; clock=span has one time per iteration already)
 *   probe=   1: the vCPU placement probe (every test): ranks 0 and the
 *            probe peer (rank 1, or probe_peer=) bounce a cache line through
 *            a shared page of their own (a POSIX shared-memory object,
 *            removed as soon as both have mapped it, so the probe is the same
 *            whatever the MPI library), before every sample and after the
 *            last one, outside the timed region (collectives: before the
 *            barrier that starts a sample; the other ranks wait in it); the
 *            RESULT line then has probe= (each probe's median round trip in
 *            ns, in time order), probe_cpus= (the CPUs of rank 0 and the
 *            peer at the last probe) and probe_ranks=0,PEER. The two ranks
 *            must run on different CPUs (a spinning probe on a shared CPU
 *            waits for time slices). The hypervisor may move the vCPUs
 *            during a run: a measurement whose probes disagree (near and far,
 *            RTT below/above about 200 ns) was not taken in one placement
 *   probe_peer= R: the rank that probes with rank 0 (default 1; an
 *            oversubscribed block placement puts rank 1 on rank 0's CPU)
 *   copyprobe= BYTES (with probe=1): after each placement probe, rank 0 and
 *            the probe peer also time copies of BYTES (e.g. 1048576) across
 *            their two CPUs, outside MPI: the RESULT line then has
 *            copy=XR/XV/DUO/LOC/LOC2;... (GB/s, one group per probe): XR
 *            rank 0 memcpy()s lines the peer has just written (a shared
 *            mapping), XV the same by process_vm_readv() from the peer's
 *            memory, DUO both read the other's just-written buffer by
 *            process_vm_readv() at once (rank 0's rate), LOC rank 0 copies a
 *            buffer of its own (in its cache) while the peer waits, LOC2 both
 *            copy their own at once (rank 0's rate): the copy rates of the
 *            placement the probe saw (-1: a copy failed)
 *   method=  osu (default): a barrier between timed iterations, each timed on
 *            its own, as the standard suites (OSU) do; b2b: back-to-back calls
 *            timed as one block (this harness's method before)
 *   SIZE     message sizes in bytes (0 allowed; barrier ignores sizes); for
 *            collectives the bytes of one block (per rank, per peer), rounded
 *            down to whole items, sizes below one item skipped
 *
 * Send and receive buffers are separate (np blocks each), filled with ones
 * (pairs: {1, rank}) so repeated reductions stay normal numbers.
 *
 * Output (all printed by rank 0, one line per test and size, BIND/RSS per rank):
 *   BIND rank=R cpus=LIST
 *   RESULT test=T np=P size=S iters=N samples=K median=X min=X max=X mean=X unit=U values=X;X;...
 *          [probe=NS;NS;... probe_cpus=C0,CP probe_ranks=0,P]   (probe=1)
 *          [copy=XR/XV/DUO/LOC/LOC2;...]   (copyprobe=BYTES)
 *   OVERLAP test=iT np=P size=S pure=US compute=US total=US overlap=PCT   (nonblocking tests)
 *   RSS prog=oxbench rank=R kb=K vcs=V ivcs=I cpu_ms=C   (getrusage of the whole run:
 *          peak RSS, voluntary and involuntary context switches, user + system CPU time)
 * Latency-like tests report microseconds per operation (ping-pong: one way,
 * half the round trip); bw/bibw report MB/s (1e6 bytes per second). For
 * collectives each sample is the slowest rank's time (max over ranks).
 */
#define _GNU_SOURCE /* sched_getcpu */
#include <mpi.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* oxb_probe: the placement probe, shared with the mpi4py driver */
#include "probe_lib.c"

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

/* probe=1: the placement probes of the current measurement (rank 0; see
 * probe_rtt), reported with its RESULT line. */
static double probes[MAXS + 1];
static int nprobes = 0, probe_cpu[2] = {-1, -1};
/* copyprobe=: the copy rates of each probe (GB/s; see copy_probe) */
#define NCOPY 5
static double copies[MAXS + 1][NCOPY];
static int ncopies = 0;
static int probe_peer = 1; /* probe_peer=: the rank that probes with rank 0 */

static double report(const char *test, size_t size, int n, double *v, int S, const char *unit) {
  /* the whole line is formatted first and written at once: some launchers
   * forward partial writes, which would interleave with other ranks' output */
  static char line[64 + 16 * MAXS + 12 * (MAXS + 1) + 48 * (MAXS + 1) + 256];
  double sum = 0, sorted[MAXS];
  for (int i = 0; i < S; i++) sum += v[i], sorted[i] = v[i];
  qsort(sorted, S, sizeof(double), cmp);
  double med = S % 2 ? sorted[S / 2] : 0.5 * (sorted[S / 2 - 1] + sorted[S / 2]);
  int k = snprintf(line, sizeof line,
                   "RESULT test=%s np=%d size=%zu iters=%d samples=%d median=%.4f min=%.4f max=%.4f mean=%.4f unit=%s values=",
                   test, np, size, n, S, med, sorted[0], sorted[S - 1], sum / S, unit);
  for (int i = 0; i < S && k < (int)sizeof line - 24; i++) /* in time order */
    k += snprintf(line + k, sizeof line - k, i ? ";%.4f" : "%.4f", v[i]);
  for (int i = 0; i < nprobes && k < (int)sizeof line - 64; i++)
    k += snprintf(line + k, sizeof line - k, i ? ";%.1f" : " probe=%.1f", probes[i]);
  if (nprobes > 0)
    k += snprintf(line + k, sizeof line - k, " probe_cpus=%d,%d probe_ranks=0,%d", probe_cpu[0],
                  probe_cpu[1], probe_peer);
  for (int i = 0; i < ncopies && k < (int)sizeof line - 96; i++)
    k += snprintf(line + k, sizeof line - k, "%s%.2f/%.2f/%.2f/%.2f/%.2f", i ? ";" : " copy=", copies[i][0],
                  copies[i][1], copies[i][2], copies[i][3], copies[i][4]);
  nprobes = 0;
  ncopies = 0;
  snprintf(line + k, sizeof line - k, "\n");
  fputs(line, stdout);
  fflush(stdout);
  return med;
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
/* fill=1: iterations per sample calibrated to fill the sample's share of the
 * budget (at most MAX_FILL), not the default counts. */
static int fill_budget = 0;
#define MAX_FILL 10000000
/* Rank 0's wall time of the last `timed` call (barriers between timed
 * iterations included): what a batch costs the budget. */
static double last_wall = 0;

/* Rank 0 sends *v to every other rank, which receives it into *v. */
static void ctl(int *v) {
  if (rank == 0) {
    for (int r = 1; r < np; r++) MPI_Send(v, 1, MPI_INT, r, 96, MPI_COMM_WORLD);
  } else {
    MPI_Recv(v, 1, MPI_INT, 0, 96, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
}

/* ranks=avg: a sample is the mean over the ranks (OSU's default "Avg Latency"
 * column) instead of the slowest rank's time. */
static int avg_ranks = 0;

/* Slowest rank's elapsed time (with ranks=avg the mean over the ranks),
 * gathered on rank 0 with point-to-point only. */
static double max_over_ranks(double t) {
  if (rank == 0) {
    double sum = t;
    for (int r = 1; r < np; r++) {
      double o;
      MPI_Recv(&o, 1, MPI_DOUBLE, r, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (o > t) t = o;
      sum += o;
    }
    if (avg_ranks) t = sum / np;
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

static double mono(void);
static void copy_sync(void);

/* probe=1: the placement probe, a cache-line ping-pong between ranks 0 and 1
 * through a page they share outside MPI (oxb_probe of probe_lib.c: batches of
 * round trips; rank 0 keeps the median batch's time per round trip). Near
 * vCPUs (SMT siblings, a shared cache) bounce a line in about 100 ns, far ones
 * in 400-600 ns: the same probe as the harness's pingpong.c, but at every
 * sample of the measurement, so that a placement change during a run shows. */
static int probe_on = 0;
/* ping at word 0, pong at word 16 (128 bytes apart: separate lines), rank 1's
 * CPU at word 32; copyprobe=: the two sides' sync counters at words 48 and 64,
 * pids and buffer addresses at 80/88 (peer) and 96/104 (rank 0), the shared
 * copy buffer after the first page */
static uint64_t *probe_mem;
static size_t copy_bytes = 0;    /* copyprobe=BYTES */
static char *copy_src, *copy_dst; /* private buffers of the copy probe */

/* Ranks 0 and 1 map one shared page: rank 0 creates a POSIX shared-memory
 * object named after its pid, rank 1 opens it, rank 0 removes the name once
 * rank 1 answered (nothing stays in /dev/shm). Point-to-point messages only;
 * without the page (either side failed) the probe is off on both ranks. */
static void probe_setup(void) {
  if (np < 2 || probe_peer < 1 || probe_peer >= np) {
    if (rank == 0) fprintf(stderr, "oxbench: probe=1: no probe peer (np=%d probe_peer=%d), no placement probe\n", np, probe_peer);
    probe_on = 0;
    return;
  }
  int pp = probe_peer;
  if (rank != 0 && rank != pp) return;
  int msg[2] = {getpid(), 0}, ok = 0, fd = -1;
  char name[64];
  if (rank == 0) {
    snprintf(name, sizeof name, "/oxbench-probe-%d", msg[0]);
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    msg[1] = fd >= 0 && ftruncate(fd, 4096 + copy_bytes) == 0;
    MPI_Send(msg, 2, MPI_INT, pp, 94, MPI_COMM_WORLD);
    MPI_Recv(&ok, 1, MPI_INT, pp, 94, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (fd >= 0) shm_unlink(name);
  } else {
    MPI_Recv(msg, 2, MPI_INT, 0, 94, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    snprintf(name, sizeof name, "/oxbench-probe-%d", msg[0]);
    if (msg[1]) fd = shm_open(name, O_RDWR, 0600);
  }
  void *m = fd >= 0 ? mmap(NULL, 4096 + copy_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) close(fd);
  int mine = m != MAP_FAILED;
  if (rank == pp) {
    ok = msg[1] && mine;
    MPI_Send(&ok, 1, MPI_INT, 0, 94, MPI_COMM_WORLD);
  }
  probe_on = ok && mine;
  if (probe_on) probe_mem = m;
  else if (mine) munmap(m, 4096 + copy_bytes);
  if (!probe_on && rank == 0) fprintf(stderr, "oxbench: probe=1: no shared page, no placement probe\n");
  if (probe_on && copy_bytes) {
    copy_src = aligned_alloc(4096, copy_bytes);
    copy_dst = aligned_alloc(4096, copy_bytes);
    if (!copy_src || !copy_dst) MPI_Abort(MPI_COMM_WORLD, 3);
    memset(copy_src, 1, copy_bytes);
    memset(copy_dst, 1, copy_bytes);
    uint64_t *me = probe_mem + (rank == 0 ? 96 : 80);
    me[0] = (uint64_t)getpid();
    me[1] = (uint64_t)(uintptr_t)copy_src;
    copy_sync(); /* both published */
  }
}

/* copyprobe=: rank 0 and the probe peer meet (spinning: they run on different
 * CPUs), each bumping its own counter and waiting for the other's. */
static void copy_sync(void) {
  uint64_t *mine = probe_mem + (rank == 0 ? 48 : 64), *theirs = probe_mem + (rank == 0 ? 64 : 48);
  uint64_t v = __atomic_load_n(mine, __ATOMIC_RELAXED) + 1;
  __atomic_store_n(mine, v, __ATOMIC_RELEASE);
  while (__atomic_load_n(theirs, __ATOMIC_ACQUIRE) < v) oxb_probe_pause();
}

/* process_vm_readv of copy_bytes from the other side's copy_src into copy_dst;
 * returns GB/s (bytes per ns), -1 on failure. */
static double copy_readv(void) {
  uint64_t *other = probe_mem + (rank == 0 ? 80 : 96);
  struct iovec l = {copy_dst, copy_bytes}, r = {(void *)(uintptr_t)other[1], copy_bytes};
  double t = mono();
  ssize_t n = process_vm_readv((pid_t)other[0], &l, 1, &r, 1, 0);
  t = mono() - t;
  return n == (ssize_t)copy_bytes ? copy_bytes / t * 1e-9 : -1;
}

/* copyprobe=: the copy rates of this placement (see the header's copy=);
 * rank 0 and the probe peer together, right after the cache-line probe. */
static void copy_probe(void) {
  static int val = 1;
  int lead = rank == 0;
  double r[NCOPY] = {0}, t;
  char *shared = (char *)probe_mem + 4096;
  val = val % 250 + 2;
  if (!lead) memset(shared, val, copy_bytes); /* XR: lines the peer wrote */
  copy_sync();
  if (lead) {
    t = mono();
    memcpy(copy_dst, shared, copy_bytes);
    r[0] = copy_bytes / (mono() - t) * 1e-9;
  }
  copy_sync();
  if (!lead) memset(copy_src, val, copy_bytes); /* XV: the same by CMA */
  copy_sync();
  if (lead) r[1] = copy_readv();
  copy_sync();
  memset(copy_src, val + 1, copy_bytes); /* DUO: both read at once */
  copy_sync();
  double duo = copy_readv();
  if (lead) r[2] = duo;
  copy_sync();
  if (lead) { /* LOC: our own cached buffer, the peer waiting */
    memcpy(copy_dst, copy_src, copy_bytes);
    t = mono();
    memcpy(copy_dst, copy_src, copy_bytes);
    r[3] = copy_bytes / (mono() - t) * 1e-9;
  }
  copy_sync();
  memcpy(copy_dst, copy_src, copy_bytes); /* LOC2: both at once */
  copy_sync();
  t = mono();
  memcpy(copy_dst, copy_src, copy_bytes);
  t = mono() - t;
  if (lead) r[4] = copy_bytes / t * 1e-9;
  copy_sync();
  if (lead && ncopies <= MAXS) memcpy(copies[ncopies++], r, sizeof r);
}

/* One probe (rank 0 and the probe peer together, in the same place of the
 * program): rank 0 appends the median round trip (ns) to probes[] and records
 * both CPUs. */
static void probe_rtt(void) {
  if (!probe_on || (rank != 0 && rank != probe_peer)) return;
  uint64_t *cpu1 = probe_mem + 32;
  if (rank == probe_peer) __atomic_store_n(cpu1, (uint64_t)sched_getcpu(), __ATOMIC_RELAXED);
  double ns = oxb_probe(probe_mem, rank == 0);
  if (copy_bytes) copy_probe();
  if (rank != 0 || nprobes > MAXS) return;
  probes[nprobes++] = ns;
  probe_cpu[0] = sched_getcpu();
  probe_cpu[1] = (int)__atomic_load_n(cpu1, __ATOMIC_RELAXED);
}

/* Separate send and receive buffers, as the standard suites' latency test (OSU) and mpi4py's
 * ping-pong: with one buffer every message is sent from the lines the peer's message has just
 * written, which on far vCPUs doubles the time at 16 KiB (spot-checks, s46-pp16k). */
static void pingpong(const char *sbuf, char *rbuf, int sz) {
  if (rank == 0) {
    MPI_Send(sbuf, sz, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
    MPI_Recv(rbuf, sz, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (rank == 1) {
    MPI_Recv(rbuf, sz, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(sbuf, sz, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
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

/* The datatype and operation of the data-carrying collectives (options
 * dtype= and op=): MPI_CHAR and MPI_SUM by default, as the standard suites;
 * the pair types take MPI_MINLOC unless op= says otherwise. */
struct dtype {
  const char *name;
  MPI_Datatype dt;
  int size; /* extent in bytes */
  int pair; /* value-index pair (MINLOC/MAXLOC) */
};
static struct dtype dtypes[] = {
    {"CHAR", MPI_CHAR, 1, 0},          {"INT", MPI_INT, 4, 0},
    {"FLOAT", MPI_FLOAT, 4, 0},        {"DOUBLE", MPI_DOUBLE, 8, 0},
    {"LONG", MPI_LONG, sizeof(long), 0}, {"2INT", MPI_2INT, 8, 1},
    {"FLOAT_INT", MPI_FLOAT_INT, 8, 1}, {"DOUBLE_INT", MPI_DOUBLE_INT, 16, 1},
    {"LONG_INT", MPI_LONG_INT, 16, 1},  {"SHORT_INT", MPI_SHORT_INT, 8, 1},
};
static struct dtype *dty = &dtypes[0];
static MPI_Op rop = MPI_SUM;
static int op_set = 0;
static int in_place = 0;
/* method=osu (default): a barrier between timed iterations, each iteration
 * timed on its own, as the standard suites do; method=b2b: back-to-back
 * calls timed as one block (the harness's method before). */
static int b2b = 0;
/* clock=span: each iteration's time is max(end) - min(start) over the ranks,
 * on CLOCK_MONOTONIC (one clock for every process of the host). */
static int span_clock = 0;
#define SPAN_CHUNK 1024

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The sum over k iterations of the span max_r(end) - min_r(start): rank 0
 * receives every other rank's start and end times (point-to-point only) and
 * folds them into lo/hi; the other ranks send theirs and get 0. */
static double span_sum(double *start, double *end, int k) {
  if (rank != 0) {
    MPI_Send(start, k, MPI_DOUBLE, 0, 95, MPI_COMM_WORLD);
    MPI_Send(end, k, MPI_DOUBLE, 0, 95, MPI_COMM_WORLD);
    return 0;
  }
  static double s[SPAN_CHUNK], e[SPAN_CHUNK];
  double lo[SPAN_CHUNK], hi[SPAN_CHUNK], sum = 0;
  for (int i = 0; i < k; i++) lo[i] = start[i], hi[i] = end[i];
  for (int r = 1; r < np; r++) {
    MPI_Recv(s, k, MPI_DOUBLE, r, 95, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(e, k, MPI_DOUBLE, r, 95, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < k; i++) {
      if (s[i] < lo[i]) lo[i] = s[i];
      if (e[i] > hi[i]) hi[i] = e[i];
    }
  }
  for (int i = 0; i < k; i++) sum += hi[i] - lo[i];
  return sum;
}

static int set_dtype(const char *name) {
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (!strcmp(dtypes[i].name, name)) {
      dty = &dtypes[i];
      if (dty->pair && !op_set) rop = MPI_MINLOC;
      return 1;
    }
  return 0;
}

static int set_op(const char *name) {
  static const struct { const char *n; MPI_Op o; } ops[] = {
      {"SUM", MPI_SUM}, {"PROD", MPI_PROD}, {"MAX", MPI_MAX},       {"MIN", MPI_MIN},
      {"BAND", MPI_BAND}, {"BOR", MPI_BOR}, {"LAND", MPI_LAND},     {"LOR", MPI_LOR},
      {"MINLOC", MPI_MINLOC}, {"MAXLOC", MPI_MAXLOC}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(ops[i].n, name)) {
      rop = ops[i].o;
      op_set = 1;
      return 1;
    }
  return 0;
}

/* What one measurement runs. */
struct op {
  const char *test; /* lat, bw, bibw, a collective, or "i" + a collective */
  char *sbuf, *rbuf;
  size_t sz;         /* bytes per block (per rank and peer) */
  int *counts, *displs, *bdispls; /* v/w forms: items per block and offsets (items, bytes) */
  MPI_Datatype *types;
  double compute;    /* nonblocking forms: seconds of computation between post and wait */
};

static int is_p2p(const struct op *o) {
  return !strcmp(o->test, "lat") || !strcmp(o->test, "bw") || !strcmp(o->test, "bibw");
}

/* The collective names oxbench knows (each also as "i" + name, nonblocking,
 * except barrier's "ibarrier" which is there too). */
static const char *colls[] = {"allreduce", "reduce", "bcast", "gather", "gatherv", "scatter",
                              "scatterv", "allgather", "allgatherv", "alltoall", "alltoallv",
                              "alltoallw", "reduce_scatter", "reduce_scatter_block", "scan",
                              "barrier"};

static int known_coll(const char *t) {
  if (t[0] == 'i') t++;
  for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
    if (!strcmp(colls[i], t)) return 1;
  return 0;
}

/* Post (nonblocking: rq != NULL) or run one collective. */
static void coll(const struct op *o, MPI_Request *rq) {
  const char *t = o->test[0] == 'i' ? o->test + 1 : o->test;
  int c = (int)(o->sz / dty->size), root0 = rank == 0;
  MPI_Datatype d = dty->dt;
  MPI_Comm w = MPI_COMM_WORLD;
  void *s = o->sbuf, *r = o->rbuf;
  void *ip = MPI_IN_PLACE;
#define COLL(blocking, nonblocking) \
  do {                              \
    if (rq)                         \
      nonblocking;                  \
    else                            \
      blocking;                     \
  } while (0)
  if (!strcmp(t, "allreduce"))
    COLL(MPI_Allreduce(in_place ? ip : s, r, c, d, rop, w),
         MPI_Iallreduce(in_place ? ip : s, r, c, d, rop, w, rq));
  else if (!strcmp(t, "reduce"))
    COLL(MPI_Reduce(in_place && root0 ? ip : s, r, c, d, rop, 0, w),
         MPI_Ireduce(in_place && root0 ? ip : s, r, c, d, rop, 0, w, rq));
  else if (!strcmp(t, "scan"))
    COLL(MPI_Scan(in_place ? ip : s, r, c, d, rop, w), MPI_Iscan(in_place ? ip : s, r, c, d, rop, w, rq));
  else if (!strcmp(t, "bcast"))
    COLL(MPI_Bcast(s, c, d, 0, w), MPI_Ibcast(s, c, d, 0, w, rq));
  else if (!strcmp(t, "gather"))
    COLL(MPI_Gather(in_place && root0 ? ip : s, c, d, r, c, d, 0, w),
         MPI_Igather(in_place && root0 ? ip : s, c, d, r, c, d, 0, w, rq));
  else if (!strcmp(t, "gatherv"))
    COLL(MPI_Gatherv(in_place && root0 ? ip : s, c, d, r, o->counts, o->displs, d, 0, w),
         MPI_Igatherv(in_place && root0 ? ip : s, c, d, r, o->counts, o->displs, d, 0, w, rq));
  else if (!strcmp(t, "scatter"))
    COLL(MPI_Scatter(s, c, d, in_place && root0 ? ip : r, c, d, 0, w),
         MPI_Iscatter(s, c, d, in_place && root0 ? ip : r, c, d, 0, w, rq));
  else if (!strcmp(t, "scatterv"))
    COLL(MPI_Scatterv(s, o->counts, o->displs, d, in_place && root0 ? ip : r, c, d, 0, w),
         MPI_Iscatterv(s, o->counts, o->displs, d, in_place && root0 ? ip : r, c, d, 0, w, rq));
  else if (!strcmp(t, "allgather"))
    COLL(MPI_Allgather(in_place ? ip : s, c, d, r, c, d, w),
         MPI_Iallgather(in_place ? ip : s, c, d, r, c, d, w, rq));
  else if (!strcmp(t, "allgatherv"))
    COLL(MPI_Allgatherv(in_place ? ip : s, c, d, r, o->counts, o->displs, d, w),
         MPI_Iallgatherv(in_place ? ip : s, c, d, r, o->counts, o->displs, d, w, rq));
  else if (!strcmp(t, "alltoall"))
    COLL(MPI_Alltoall(in_place ? ip : s, c, d, r, c, d, w),
         MPI_Ialltoall(in_place ? ip : s, c, d, r, c, d, w, rq));
  else if (!strcmp(t, "alltoallv"))
    COLL(MPI_Alltoallv(in_place ? ip : s, o->counts, o->displs, d, r, o->counts, o->displs, d, w),
         MPI_Ialltoallv(in_place ? ip : s, o->counts, o->displs, d, r, o->counts, o->displs, d, w, rq));
  else if (!strcmp(t, "alltoallw"))
    COLL(MPI_Alltoallw(in_place ? ip : s, o->counts, o->bdispls, o->types, r, o->counts, o->bdispls,
                       o->types, w),
         MPI_Ialltoallw(in_place ? ip : s, o->counts, o->bdispls, o->types, r, o->counts, o->bdispls,
                        o->types, w, rq));
  else if (!strcmp(t, "reduce_scatter_block"))
    COLL(MPI_Reduce_scatter_block(in_place ? ip : s, in_place ? s : r, c, d, rop, w),
         MPI_Ireduce_scatter_block(in_place ? ip : s, in_place ? s : r, c, d, rop, w, rq));
  else if (!strcmp(t, "reduce_scatter"))
    COLL(MPI_Reduce_scatter(in_place ? ip : s, in_place ? s : r, o->counts, d, rop, w),
         MPI_Ireduce_scatter(in_place ? ip : s, in_place ? s : r, o->counts, d, rop, w, rq));
  else
    COLL(MPI_Barrier(w), MPI_Ibarrier(w, rq));
#undef COLL
}

/* Busy computation for `sec` seconds (the overlap measurement's work). */
static void compute(double sec) {
  double t0 = MPI_Wtime();
  while (MPI_Wtime() - t0 < sec) {
  }
}

/* One collective as the user sees it: blocking, or post + (computation) + wait. */
static void one_coll(const struct op *o) {
  if (o->test[0] != 'i') {
    coll(o, NULL);
    return;
  }
  MPI_Request rq;
  coll(o, &rq);
  if (o->compute > 0) compute(o->compute);
  MPI_Wait(&rq, MPI_STATUS_IGNORE);
}

/* Synchronise, run n iterations, return the elapsed seconds as rank 0 should
 * see them (point-to-point: rank 0's time; collectives: the slowest rank's).
 * Collectives (method=osu): each iteration is timed on its own with a barrier
 * before it, so no rank starts a collective while another is still in the
 * previous one; the sum of the iterations' times is returned. */
static double timed(const struct op *o, int n) {
  int sz = (int)o->sz;
  if (is_p2p(o)) {
    sync2();
    double t0 = MPI_Wtime();
    if (!strcmp(o->test, "lat"))
      for (int i = 0; i < n; i++) pingpong(o->sbuf, o->rbuf, sz);
    else
      for (int i = 0; i < n; i++) window(o->sbuf, o->rbuf, sz, !strcmp(o->test, "bibw"));
    last_wall = MPI_Wtime() - t0;
    return last_wall;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double w0 = MPI_Wtime();
  if (b2b) {
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) one_coll(o);
    last_wall = MPI_Wtime() - w0;
    return max_over_ranks(MPI_Wtime() - t0);
  }
  double sum = 0;
  if (span_clock) {
    /* per-iteration entry and return times, gathered in chunks between the
     * barriers (outside the timed calls), then one more barrier */
    static double st[SPAN_CHUNK], en[SPAN_CHUNK];
    for (int i = 0; i < n;) {
      int k = 0;
      for (; k < SPAN_CHUNK && i < n; k++, i++) {
        st[k] = mono();
        one_coll(o);
        en[k] = mono();
        MPI_Barrier(MPI_COMM_WORLD);
      }
      sum += span_sum(st, en, k);
      MPI_Barrier(MPI_COMM_WORLD);
    }
    last_wall = MPI_Wtime() - w0;
    return max_over_ranks(sum);
  }
  for (int i = 0; i < n; i++) {
    double t0 = MPI_Wtime();
    one_coll(o);
    sum += MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
  }
  last_wall = MPI_Wtime() - w0;
  return max_over_ranks(sum);
}

/* The value of one sample from its elapsed time over n iterations. */
static double value(const struct op *o, int n, double dt) {
  if (dt <= 0) dt = 1e-9;
  if (!strcmp(o->test, "lat")) return dt / n / 2 * 1e6;
  if (!strcmp(o->test, "bw")) return (double)o->sz * WINDOW * n / dt / 1e6;
  if (!strcmp(o->test, "bibw")) return (double)o->sz * WINDOW * n * 2 / dt / 1e6;
  return dt / n * 1e6;
}

/* One untimed call, then warm up (doubling batches, at most nmax/4 + 1 iterations or a tenth of the
 * budget; with fill=1 a tenth of the budget) and choose the iteration count
 * from the fastest warm-up batch's wall time per iteration (barriers
 * included; a descheduled batch must not shrink a quiet run): nmax, fewer if
 * a sample's share of the budget cannot hold them, or with fill=1 as many as
 * fill the share. Then time up to S samples. Under a budget, a sample slower
 * than twice its share shrinks the next samples' iteration count (not with
 * fill=1), and no
 * sample starts once the budget is spent (after MIN_SAMPLES). Rank 0 decides
 * and reports; `iters` in the report is the smallest count used, `*used` (if
 * not NULL) the count of the last sample. */
static double measure(const struct op *o, int nmax, int S, int *used) {
  /* One untimed call first (the standard suites' warm-up iterations): the first
   * call at a size may pay one-time costs (page faults, lazy set-up) which,
   * counted in the first batch, would set the iteration count to 1 and leave
   * every sample a lone cold call. */
  timed(o, 1);
  double start = MPI_Wtime(), per_iter = 0;
  int done = 0, cmd = 1, fill = fill_budget && budget > 0;
  for (;;) {
    ctl(&cmd);
    if (cmd == 0) break;
    timed(o, cmd);
    if (rank == 0) {
      double wall = last_wall;
      done += cmd;
      if (per_iter == 0 || wall / cmd < per_iter) per_iter = wall / cmd;
      int enough = (budget > 0 && MPI_Wtime() - start > budget / 10) ||
                   (fill ? cmd >= MAX_FILL / 2 : done >= nmax / 4 + 1);
      cmd = enough ? 0 : 2 * cmd;
    }
  }
  double share = budget / (S + 1); /* target time of one sample */
  int n = nmax;
  if (fill && per_iter > 0) n = share / per_iter >= MAX_FILL ? MAX_FILL : (int)(share / per_iter);
  else if (budget > 0 && per_iter > 0 && share / per_iter < n) n = (int)(share / per_iter);
  if (n < 1) n = 1;
  int nmin = n;
  double v[MAXS];
  int taken = 0;
  for (int s = 0; s < S; s++) {
    int go = n;
    if (rank == 0 && budget > 0 && s >= MIN_SAMPLES && MPI_Wtime() - start > budget) go = 0;
    ctl(&go);
    if (!go) break;
    probe_rtt(); /* (probe=1) the placement of this sample */
    double dt = timed(o, go);
    if (rank == 0) {
      double wall = last_wall;
      v[taken] = value(o, go, dt);
      if (go < nmin) nmin = go;
      /* (fill=1 keeps its calibrated count: one descheduled sample on a busy machine
       * must not shrink the others; the budget still ends the samples, after MIN_SAMPLES) */
      if (budget > 0 && !fill && wall > 2 * share && go > 1) {
        double k = go * share / wall;
        n = k < 1 ? 1 : (int)k;
      }
    }
    taken++;
  }
  probe_rtt(); /* (probe=1) and after the last one */
  if (used) {
    ctl(&n);
    *used = n;
  }
  if (rank == 0) return report(o->test, o->sz, nmin, v, taken, is_p2p(o) && strcmp(o->test, "lat") ? "MB/s" : "us");
  return 0;
}

/* Nonblocking collectives: after the post+wait measurement (`pure`, in us),
 * time post + `pure` of computation + wait and print, as the standard suites,
 *   OVERLAP test=T np=P size=S pure=US compute=US total=US overlap=PCT
 * with overlap = 100 * (1 - (total - compute) / pure), clamped to 0..100
 * (100: the collective progressed entirely behind the computation). */
static void overlap(struct op *o, double pure, int n) {
  int ns = (int)(pure * 1e3 + 0.5); /* rank 0's figure, for every rank */
  ctl(&ns);
  double us = ns * 1e-3;
  o->compute = us * 1e-6;
  double dt = timed(o, n);
  o->compute = 0;
  if (rank != 0) return;
  double total = dt / n * 1e6, pct = 100 * (1 - (total - us) / pure);
  pct = pct < 0 ? 0 : pct > 100 ? 100 : pct;
  printf("OVERLAP test=%s np=%d size=%zu pure=%.4f compute=%.4f total=%.4f overlap=%.1f\n", o->test, np,
         o->sz, pure, us, total, pct);
  fflush(stdout);
}

static void run_test(struct op *o, int S, double scale) {
  const char *test = o->test;
  size_t sz = o->sz;
  int nmax;
  if (!strcmp(test, "lat"))
    nmax = iters(sz <= 8192 ? 2000 : sz <= (1 << 20) ? 100 : 20, scale, 5);
  else if (!strcmp(test, "bw") || !strcmp(test, "bibw"))
    nmax = iters(sz <= 8192 ? 100 : sz <= (1 << 20) ? 10 : 3, scale, 2);
  else if (np > 2) /* oversubscribed: keep it short */
    nmax = iters(sz > 65536 ? 5 : 20, scale, 2);
  else
    nmax = iters(sz > 65536 ? 20 : 500, scale, 3);
  int n = nmax;
  double pure = measure(o, nmax, S, &n);
  if (test[0] == 'i') overlap(o, pure, n < 3 ? n : n / 3);
}

/* Fill `n` items of the datatype with ones (pairs: {1, rank}), so repeated
 * reductions stay normal numbers (no denormals, no NaN). */
static void fill(char *buf, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char *p = buf + i * dty->size;
    if (dty->dt == MPI_CHAR) *p = 1;
    else if (dty->dt == MPI_INT) *(int *)p = 1;
    else if (dty->dt == MPI_FLOAT) *(float *)p = 1;
    else if (dty->dt == MPI_DOUBLE) *(double *)p = 1;
    else if (dty->dt == MPI_LONG) *(long *)p = 1;
    else if (dty->dt == MPI_2INT) ((int *)p)[0] = 1, ((int *)p)[1] = rank;
    else if (dty->dt == MPI_FLOAT_INT) *(float *)p = 1, *(int *)(p + 4) = rank;
    else if (dty->dt == MPI_DOUBLE_INT) *(double *)p = 1, *(int *)(p + 8) = rank;
    else if (dty->dt == MPI_LONG_INT) *(long *)p = 1, *(int *)(p + sizeof(long)) = rank;
    else if (dty->dt == MPI_SHORT_INT) *(short *)p = 1, *(int *)(p + 4) = rank;
  }
}

static void usage(const char *why) {
  if (rank == 0)
    fprintf(stderr,
            "oxbench: %s\nusage: oxbench TESTS SAMPLES SCALE [budget=S] [fill=0|1] [dtype=T] [op=O] [inplace=0|1] "
            "[mpit=0|1] [probe=0|1] [probe_peer=R] [copyprobe=BYTES] [method=osu|b2b] [clock=rank|span] [ranks=max|avg] SIZE...\n",
            why);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

/* mpit=1: the tools interface session and its handles. */
#define MAX_MPIT 16
static MPI_T_pvar_session mpit_session;
static MPI_T_pvar_handle mpit_handles[MAX_MPIT];
static int mpit_n = -1;

/* Whether a performance variable name is one of the transports' send and
 * receive counters. */
static int mpit_wanted(const char *name) {
  if (strncmp(name, "btl_", 4)) return 0;
  const char *ends[] = {"_msgs_sent", "_msgs_recv", "_bytes_sent", "_bytes_recv"};
  size_t n = strlen(name);
  for (int i = 0; i < 4; i++) {
    size_t e = strlen(ends[i]);
    if (n > e && !strcmp(name + n - e, ends[i])) return 1;
  }
  return 0;
}

static void mpit_start(void) {
  int provided, num = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS ||
      MPI_T_pvar_session_create(&mpit_session) != MPI_SUCCESS ||
      MPI_T_pvar_get_num(&num) != MPI_SUCCESS)
    usage("mpit=1: the MPI tools interface is not available");
  mpit_n = 0;
  for (int i = 0; i < num && mpit_n < MAX_MPIT; i++) {
    char name[256];
    int len = sizeof name, bind, cont, count;
    if (MPI_T_pvar_get_info(i, name, &len, NULL, NULL, NULL, NULL, NULL, NULL, &bind, NULL,
                            &cont, NULL) != MPI_SUCCESS ||
        bind != MPI_T_BIND_NO_OBJECT || !mpit_wanted(name))
      continue;
    MPI_T_pvar_handle h;
    if (MPI_T_pvar_handle_alloc(mpit_session, i, NULL, &h, &count) != MPI_SUCCESS) continue;
    if (!cont) MPI_T_pvar_start(mpit_session, h);
    mpit_handles[mpit_n++] = h;
  }
  if (rank == 0) printf("MPIT handles=%d\n", mpit_n);
}

static void mpit_stop(void) {
  if (mpit_n < 0) return;
  unsigned long long v, total = 0;
  for (int i = 0; i < mpit_n; i++)
    if (MPI_T_pvar_read(mpit_session, mpit_handles[i], &v) == MPI_SUCCESS) total += v;
  if (rank == 0) printf("MPIT counted=%llu\n", total);
  MPI_T_pvar_session_free(&mpit_session);
  MPI_T_finalize();
}

int main(int argc, char **argv) {
  int mpit = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (argc < 4) usage("too few arguments");
  int S = atoi(argv[2]);
  double scale = atof(argv[3]);
  if (S < 1) S = 1;
  if (S > MAXS) S = MAXS;
  size_t maxsz = 1;
  for (int a = 4; a < argc; a++) {
    const char *v = strchr(argv[a], '=');
    if (!v) {
      size_t n = strtoull(argv[a], 0, 0);
      if (n > maxsz) maxsz = n;
      continue;
    }
    v++;
    if (!strncmp(argv[a], "budget=", 7)) budget = atof(v);
    else if (!strncmp(argv[a], "fill=", 5)) fill_budget = atoi(v) != 0;
    else if (!strncmp(argv[a], "dtype=", 6)) {
      if (!set_dtype(v)) usage("unknown dtype (CHAR INT FLOAT DOUBLE LONG 2INT FLOAT_INT DOUBLE_INT LONG_INT SHORT_INT)");
    } else if (!strncmp(argv[a], "op=", 3)) {
      if (!set_op(v)) usage("unknown op (SUM PROD MAX MIN BAND BOR LAND LOR MINLOC MAXLOC)");
    } else if (!strncmp(argv[a], "inplace=", 8)) in_place = atoi(v) != 0;
    else if (!strncmp(argv[a], "mpit=", 5)) mpit = atoi(v) != 0;
    else if (!strncmp(argv[a], "probe=", 6)) probe_on = atoi(v) != 0;
    else if (!strncmp(argv[a], "probe_peer=", 11)) probe_peer = atoi(v);
    else if (!strncmp(argv[a], "copyprobe=", 10)) copy_bytes = strtoull(v, 0, 0);
    else if (!strncmp(argv[a], "method=", 7)) {
      if (strcmp(v, "osu") && strcmp(v, "b2b")) usage("unknown method (osu, b2b)");
      b2b = !strcmp(v, "b2b");
    } else if (!strncmp(argv[a], "ranks=", 6)) {
      if (strcmp(v, "max") && strcmp(v, "avg")) usage("unknown ranks (max, avg)");
      avg_ranks = !strcmp(v, "avg");
    } else if (!strncmp(argv[a], "clock=", 6)) {
      if (strcmp(v, "rank") && strcmp(v, "span")) usage("unknown clock (rank, span)");
      span_clock = !strcmp(v, "span");
    } else
      usage("unknown option");
  }
  /* separate send and receive buffers; np blocks on both sides (alltoall,
   * gather, scatter, reduce_scatter) */
  size_t items = maxsz / dty->size + 1, bytes = items * dty->size * (size_t)np;
  char *sbuf = malloc(bytes), *rbuf = malloc(bytes);
  int *counts = malloc(np * sizeof(int)), *displs = malloc(np * sizeof(int)), *bdispls = malloc(np * sizeof(int));
  MPI_Datatype *types = malloc(np * sizeof(MPI_Datatype));
  if (!sbuf || !rbuf || !counts || !displs || !bdispls || !types) MPI_Abort(MPI_COMM_WORLD, 3);
  fill(sbuf, items * np);
  fill(rbuf, items * np);
  print_binding();
  if (probe_on) probe_setup();
  if (mpit) mpit_start();

  char *tests = strdup(argv[1]); /* strtok writes into it */
  if (!tests) MPI_Abort(MPI_COMM_WORLD, 3);
  for (char *t = strtok(tests, ","); t; t = strtok(NULL, ",")) {
    int p2p = !strcmp(t, "lat") || !strcmp(t, "bw") || !strcmp(t, "bibw");
    if (!p2p && !known_coll(t)) usage("unknown test");
    struct op o = {t, sbuf, rbuf, 0, counts, displs, bdispls, types, 0};
    if (!strcmp(t, "barrier") || !strcmp(t, "ibarrier")) {
      run_test(&o, S, scale);
      continue;
    }
    for (int a = 4; a < argc; a++) {
      if (strchr(argv[a], '=')) continue;
      size_t sz = strtoull(argv[a], 0, 0);
      if (p2p) {
        if (np < 2 || (sz == 0 && strcmp(t, "lat"))) continue;
      } else if (sz < (size_t)dty->size) { /* not one item */
        continue;
      }
      int c = (int)(sz / dty->size);
      for (int r = 0; r < np; r++)
        counts[r] = c, displs[r] = r * c, bdispls[r] = r * c * dty->size, types[r] = dty->dt;
      o.sz = p2p ? sz : (size_t)c * dty->size;
      run_test(&o, S, scale);
    }
  }
  struct rusage ru;
  char out[256];
  getrusage(RUSAGE_SELF, &ru);
  snprintf(out, sizeof out, "RSS prog=oxbench rank=%d kb=%ld vcs=%ld ivcs=%ld cpu_ms=%.1f\n", rank, ru.ru_maxrss,
           ru.ru_nvcsw, ru.ru_nivcsw,
           (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-3);
  print_from_all(out);
  mpit_stop();
  free(tests);
  free(sbuf);
  free(rbuf);
  free(counts);
  free(displs);
  free(bdispls);
  free(types);
  MPI_Finalize();
  return 0;
}
