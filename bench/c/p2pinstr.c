/* Instruction counts of the small-message point-to-point path, without the spinning of a
 * rank that waits for its peer (which a timing or a whole-run count would include): each
 * measured call finds its peer's part already done. For `valgrind --tool=callgrind
 * --collect-atstart=no` on the measured rank (the other rank runs natively): only the
 * regions below are collected (callgrind's client requests), so the total divided by the
 * message count is the per-message cost.
 *
 * usage: p2pinstr TEST N [SIZE]
 *   window  N windows of the bandwidth test's pattern (64 messages of SIZE bytes, default
 *           8, MPI_CHAR, tag 2; rank 0 sends, rank 1 receives). Rank 1: 64 MPI_Irecv
 *           (collected), a token to rank 0, a wait (not collected) while rank 0 sends
 *           the 64 messages, then MPI_Waitall with statuses (collected: the drain of the
 *           64 records into the posted receives and their completion). Rank 0: waits for
 *           the token (not collected), then 64 MPI_Isend and MPI_Waitall (collected).
 *           Rank 1 waits for rank 0's sends through a shared-memory counter (not MPI).
 *   pingpong N round trips of MPI_Send/MPI_Recv of SIZE bytes (default 1) on rank 0 whose
 *           replies rank 1 sent before: rank 1 sends message i and then receives rank 0's
 *           message i; rank 0 waits until message i is sent (the shared-memory counter,
 *           not collected) and then calls MPI_Send and MPI_Recv (collected), the receive
 *           finding its message in the ring.
 *
 * Output (rank 0): `P2PINSTR test=T n=N size=S`. Divide callgrind's total (Ir) by 64*N
 * (window) or N (pingpong). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#define WINDOW 64

/* A counter both ranks see outside MPI (a POSIX shared-memory object named after rank 0's
 * pid, removed at once): the sender counts what it has sent, and the receiver waits for it
 * (not collected) without polling the library, so no record is drained before the
 * collected region. */
static volatile long *shared_counter(int rank) {
  int pid = getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  char name[64];
  snprintf(name, sizeof name, "/p2pinstr-%d", pid);
  int fd = -1;
  if (rank == 0) fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) fd = shm_open(name, O_RDWR, 0600);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) shm_unlink(name);
  if (fd < 0 || ftruncate(fd, 4096) != 0) {
    perror("p2pinstr: shm_open");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    perror("p2pinstr: mmap");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return (volatile long *)m;
}

static void wait_for(volatile long *c, long v) {
  while (__atomic_load_n(c, __ATOMIC_ACQUIRE) < v) usleep(100);
}

static void count_to(volatile long *c, long v) { __atomic_store_n(c, v, __ATOMIC_RELEASE); }

int main(int argc, char **argv) {
  int rank, np;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (argc < 3 || np != 2) {
    if (rank == 0) fprintf(stderr, "usage: p2pinstr window|pingpong N [SIZE] (2 ranks)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *test = argv[1];
  long n = atol(argv[2]);
  int window = !strcmp(test, "window");
  int sz = argc > 3 ? atoi(argv[3]) : (window ? 8 : 1);
  char *sbuf = calloc(sz ? sz : 1, 1), *rbuf = calloc(sz ? sz : 1, 1);
  char tok = 0;
  MPI_Request rq[WINDOW];
  MPI_Status st[WINDOW];
  volatile long *sent = shared_counter(rank);
  if (window) {
    for (long w = 0; w < n; w++) {
      if (rank == 1) {
        CALLGRIND_TOGGLE_COLLECT;
        for (int i = 0; i < WINDOW; i++)
          MPI_Irecv(rbuf, sz, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &rq[i]);
        CALLGRIND_TOGGLE_COLLECT;
        MPI_Send(&tok, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
        wait_for(sent, w + 1);
        CALLGRIND_TOGGLE_COLLECT;
        MPI_Waitall(WINDOW, rq, st);
        CALLGRIND_TOGGLE_COLLECT;
      } else {
        MPI_Recv(&tok, 1, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CALLGRIND_TOGGLE_COLLECT;
        for (int i = 0; i < WINDOW; i++)
          MPI_Isend(sbuf, sz, MPI_CHAR, 1, 2, MPI_COMM_WORLD, &rq[i]);
        MPI_Waitall(WINDOW, rq, st);
        CALLGRIND_TOGGLE_COLLECT;
        count_to(sent, w + 1);
      }
    }
  } else if (!strcmp(test, "pingpong")) {
    /* Rank 1 sends message i, says so through the counter, then receives rank 0's
     * message i; rank 0 waits for the counter (not collected), then sends and receives
     * (collected): its receive finds the message there, as a ping-pong's receive does
     * once the reply arrived. */
    for (long i = 0; i < n; i++) {
      if (rank == 1) {
        MPI_Send(sbuf, sz, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        count_to(sent, i + 1);
        MPI_Recv(rbuf, sz, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        wait_for(sent, i + 1);
        CALLGRIND_TOGGLE_COLLECT;
        MPI_Send(sbuf, sz, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(rbuf, sz, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CALLGRIND_TOGGLE_COLLECT;
      }
    }
  } else {
    if (rank == 0) fprintf(stderr, "p2pinstr: unknown test %s\n", test);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 0) printf("P2PINSTR test=%s n=%ld size=%d\n", test, n, sz);
  munmap((void *)sent, 4096);
  free(sbuf);
  free(rbuf);
  MPI_Finalize();
  return 0;
}
