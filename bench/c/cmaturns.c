/* LD_PRELOAD shim that records the turns of an exchange's ranks: every process_vm_readv and
 * process_vm_writev (remote pid, remote address, bytes, the CPU it started on, CLOCK_MONOTONIC
 * before and after), every sched_yield made inside a collective, and the entry and return of
 * the collectives oxbench times in place (MPI_Alltoall, MPI_Allgather, MPI_Ialltoall,
 * MPI_Iallgather: post; MPI_Wait) with the receive buffer's address. At exit it writes
 * $CMATRACE_DIR/turns-RANK.txt (RANK from OMPI_COMM_WORLD_RANK, which oxmpi's and Open MPI's
 * launchers set; nothing is written without CMATRACE_DIR or a rank):
 *   P RANK PID
 *   C NAME T0 T1 RECVBUF          a collective call (NAME alltoall, ialltoall, wait, ...)
 *   R|W PID ADDR BYTES CPU T0 T1  a cross-memory read / write of process PID at ADDR
 *   Y T                           a sched_yield inside a collective
 * The clock is shared by the processes of a node, so bench/py/cmaturns.py can merge the
 * ranks' files: per call who copied from whom, when, how long, and how many other CPUs were
 * in the same source at the same time.
 * The MPI wrappers take every argument as a machine word and pass it on unchanged, so the
 * one shim serves the MPICH ABI (int handles) and Open MPI's (pointers) on x86-64.
 * Build: cc -O2 -shared -fPIC -o cmaturns.so cmaturns.c -ldl
 * Run:   mpirun -np 4 env LD_PRELOAD=$PWD/cmaturns.so CMATRACE_DIR=DIR pin 0,0,1,1 oxbench ...
 * Session 52 (spot-checks-wave2.md, s52-slow). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define N 1000000
typedef uintptr_t W;
static struct ev {
  char kind;        /* R, W, C, Y */
  const char *name; /* C */
  int pid, cpu;
  W addr, len;
  long long t0, t1;
} ev[N];
static int n, in_coll;

static long long ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static struct ev *next(char kind) {
  if (n >= N) return NULL;
  struct ev *e = &ev[n++];
  e->kind = kind;
  return e;
}

typedef ssize_t (*vm_fn)(pid_t, const struct iovec *, unsigned long, const struct iovec *,
                         unsigned long, unsigned long);

static ssize_t vm(char kind, vm_fn real, pid_t pid, const struct iovec *l, unsigned long ln,
                  const struct iovec *r, unsigned long rn, unsigned long f) {
  int cpu = sched_getcpu();
  long long a = ns();
  ssize_t x = real(pid, l, ln, r, rn, f);
  long long b = ns();
  struct ev *e = next(kind);
  if (e) {
    e->pid = pid, e->cpu = cpu, e->t0 = a, e->t1 = b;
    e->addr = rn ? (W)r[0].iov_base : 0;
    e->len = 0;
    for (unsigned long i = 0; i < rn; i++) e->len += r[i].iov_len;
  }
  return x;
}

ssize_t process_vm_readv(pid_t pid, const struct iovec *l, unsigned long ln, const struct iovec *r,
                         unsigned long rn, unsigned long f) {
  static vm_fn real;
  if (!real) real = (vm_fn)dlsym(RTLD_NEXT, "process_vm_readv");
  return vm('R', real, pid, l, ln, r, rn, f);
}

ssize_t process_vm_writev(pid_t pid, const struct iovec *l, unsigned long ln, const struct iovec *r,
                          unsigned long rn, unsigned long f) {
  static vm_fn real;
  if (!real) real = (vm_fn)dlsym(RTLD_NEXT, "process_vm_writev");
  return vm('W', real, pid, l, ln, r, rn, f);
}

int sched_yield(void) {
  static int (*real)(void);
  if (!real) real = (int (*)(void))dlsym(RTLD_NEXT, "sched_yield");
  if (in_coll) {
    struct ev *e = next('Y');
    if (e) e->t0 = e->t1 = ns();
  }
  return real();
}

/* A collective wrapper: NAME, its argument count's prototype, the receive buffer's argument. */
typedef int (*f8)(W, W, W, W, W, W, W, W);
static int wrapped(const char *name, f8 *real, W buf, W a, W b, W c, W d, W e, W f, W g, W h) {
  if (!*real) *real = (f8)dlsym(RTLD_NEXT, name);
  long long t0 = ns();
  in_coll = 1;
  int x = (*real)(a, b, c, d, e, f, g, h);
  in_coll = 0;
  struct ev *v = next('C');
  if (v) v->name = name, v->t0 = t0, v->t1 = ns(), v->addr = buf;
  return x;
}

/* MPI_Alltoall(s, sc, st, r, rc, rt, comm), MPI_Allgather likewise; the nonblocking forms add
 * the request. */
int MPI_Alltoall(W s, W sc, W st, W r, W rc, W rt, W comm) {
  static f8 real;
  return wrapped("MPI_Alltoall", &real, r, s, sc, st, r, rc, rt, comm, 0);
}
int MPI_Allgather(W s, W sc, W st, W r, W rc, W rt, W comm) {
  static f8 real;
  return wrapped("MPI_Allgather", &real, r, s, sc, st, r, rc, rt, comm, 0);
}
int MPI_Ialltoall(W s, W sc, W st, W r, W rc, W rt, W comm, W rq) {
  static f8 real;
  return wrapped("MPI_Ialltoall", &real, r, s, sc, st, r, rc, rt, comm, rq);
}
int MPI_Iallgather(W s, W sc, W st, W r, W rc, W rt, W comm, W rq) {
  static f8 real;
  return wrapped("MPI_Iallgather", &real, r, s, sc, st, r, rc, rt, comm, rq);
}
int MPI_Wait(W rq, W st) {
  static f8 real;
  return wrapped("MPI_Wait", &real, 0, rq, st, 0, 0, 0, 0, 0, 0);
}

__attribute__((destructor)) static void dump(void) {
  const char *rank = getenv("OMPI_COMM_WORLD_RANK"), *dir = getenv("CMATRACE_DIR");
  if (!rank || !dir || !n) return;
  char p[4096];
  snprintf(p, sizeof p, "%s/turns-%s.txt", dir, rank);
  FILE *f = fopen(p, "w");
  if (!f) return;
  fprintf(f, "P %s %d\n", rank, (int)getpid());
  for (int i = 0; i < n; i++) {
    struct ev *e = &ev[i];
    if (e->kind == 'C')
      fprintf(f, "C %s %lld %lld %lu\n", e->name + 4, e->t0, e->t1, (unsigned long)e->addr);
    else if (e->kind == 'Y')
      fprintf(f, "Y %lld\n", e->t0);
    else
      fprintf(f, "%c %d %lu %lu %d %lld %lld\n", e->kind, e->pid, (unsigned long)e->addr,
              (unsigned long)e->len, e->cpu, e->t0, e->t1);
  }
  fclose(f);
}
