/* The vCPU placement probe of oxbench.c (probe=1, which includes this file) and,
 * built as a shared library, of the mpi4py ping-pong driver
 * (bench/py/mpi4py_pingpong.py loads it with ctypes):
 * ranks 0 and 1 bounce a cache line through a page they share outside MPI,
 * PROBE_SAMPLES batches of PROBE_TRIPS round trips, and the leader (rank 0)
 * gets the median batch's time per round trip in ns (the other side gets 0).
 * Both ranks must call it the same number of times (each call continues the
 * sequence numbers of the last). Near vCPUs bounce a line in about 100 ns,
 * far ones in 400-600 ns. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define PROBE_SAMPLES 7
#define PROBE_TRIPS 100

static uint64_t oxb_probe_seq = 0;

static double oxb_probe_mono(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void oxb_probe_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static int oxb_probe_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* mem: the shared page (ping at word 0, pong at word 16: separate lines). */
double oxb_probe(uint64_t *mem, int leader) {
  uint64_t *ping = mem, *pong = mem + 16;
  double r[PROBE_SAMPLES];
  for (int s = 0; s < PROBE_SAMPLES; s++) {
    double t0 = oxb_probe_mono();
    for (int i = 0; i < PROBE_TRIPS; i++) {
      uint64_t v = ++oxb_probe_seq;
      if (leader) {
        __atomic_store_n(ping, v, __ATOMIC_RELEASE);
        while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != v) oxb_probe_pause();
      } else {
        while (__atomic_load_n(ping, __ATOMIC_ACQUIRE) != v) oxb_probe_pause();
        __atomic_store_n(pong, v, __ATOMIC_RELEASE);
      }
    }
    r[s] = (oxb_probe_mono() - t0) / PROBE_TRIPS * 1e9;
  }
  if (!leader) return 0.0;
  qsort(r, PROBE_SAMPLES, sizeof(double), oxb_probe_cmp);
  return r[PROBE_SAMPLES / 2];
}
