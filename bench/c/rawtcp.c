/* rawtcp: the raw-socket limit of a TCP network path, as the MPI benchmarks measure it: a
 * ping-pong of SIZE-byte messages (one way = half the round trip, in microseconds) and a
 * stream of SIZE-byte messages (MB/s, 1e6 bytes per second), over LINKS connections
 * (a stream stripes each message over them, in equal parts; the ping-pong uses the first).
 * Sockets with TCP_NODELAY and the kernel's default (autotuned) buffer sizes, waited on in
 * one of two ways (WAIT):
 *   spin   (default) non-blocking sockets polled in a loop (MSG_DONTWAIT), as the MPI
 *          libraries wait for a message: the limit a polling MPI library can reach; a
 *          stream over several links moves whichever link is ready;
 *   block  blocking sockets (the process sleeps in read and write, and is woken by the
 *          kernel), as a hand-written program would use them: slower by the wake-ups.
 *
 * usage: rawtcp server PORT                       (serves one client, then exits)
 *        rawtcp client HOST[,HOST2...] PORT TEST SIZE [ITERS] [LINKS] [WAIT]
 *   TEST lat or bw; HOSTs: the server's address per link (one for all links if one given).
 * Output (client):
 *   RESULT test=T size=S iters=N links=L wait=W median=X best=X unit=U sndbuf=B rcvbuf=B
 * (median and best over 11 samples of ITERS iterations; sndbuf and rcvbuf: the first
 * connection's socket buffer sizes after the run, as the kernel tuned them). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SAMPLES 11
#define MAXL 8

/* 1: non-blocking calls, polled (WAIT spin); 0: blocking calls (WAIT block). */
static int spin = 1;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what) {
  perror(what);
  exit(2);
}

/* One send or receive call of at most n bytes; returns what moved (0 if the call would
 * block, spin mode only). The end of the stream or an error ends the program. */
static size_t io_once(int fd, char *b, size_t n, int send_) {
  int flags = spin ? MSG_DONTWAIT : 0;
  ssize_t k = send_ ? send(fd, b, n, flags | MSG_NOSIGNAL) : recv(fd, b, n, flags);
  if (k > 0) return (size_t)k;
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  if (k == 0) {
    fprintf(stderr, "rawtcp: the peer closed the connection\n");
    exit(2);
  }
  die(send_ ? "send" : "recv");
  return 0;
}

static void full_io(int fd, char *b, size_t n, int send_) {
  while (n) {
    size_t k = io_once(fd, b, n, send_);
    b += k;
    n -= k;
  }
}

static void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* The request a client sends on its first connection: test, size, iterations, links, wait. */
struct hello {
  uint32_t test, links;
  uint64_t size, iters;
  uint32_t spin, pad;
};

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Sends (or receives) `size` bytes split over the links in equal parts: one link after the
 * other when blocking, all links at once (whichever can move) when spinning. */
static void striped(int *fd, int links, char *buf, size_t size, int send_) {
  size_t part = size / links, off[MAXL], end[MAXL];
  for (int l = 0; l < links; l++) {
    off[l] = part * l;
    end[l] = l == links - 1 ? size : part * (l + 1);
  }
  if (!spin) {
    for (int l = 0; l < links; l++) full_io(fd[l], buf + off[l], end[l] - off[l], send_);
    return;
  }
  for (int left = links; left;) {
    left = 0;
    for (int l = 0; l < links; l++) {
      if (off[l] == end[l]) continue;
      off[l] += io_once(fd[l], buf + off[l], end[l] - off[l], send_);
      left += off[l] < end[l];
    }
  }
}

static int server(int port) {
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  if (ls < 0) die("socket");
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, MAXL)) die("bind/listen");
  int fd[MAXL];
  fd[0] = accept(ls, 0, 0);
  if (fd[0] < 0) die("accept");
  nodelay(fd[0]);
  struct hello h;
  spin = 0;
  full_io(fd[0], (char *)&h, sizeof h, 0);
  if (h.links < 1 || h.links > MAXL) return 2;
  for (uint32_t l = 1; l < h.links; l++) {
    if ((fd[l] = accept(ls, 0, 0)) < 0) die("accept");
    nodelay(fd[l]);
  }
  spin = h.spin != 0;
  char *buf = malloc(h.size ? h.size : 1);
  for (int s = 0; s < SAMPLES; s++) {
    for (uint64_t i = 0; i < h.iters; i++) {
      if (h.test == 0) {
        full_io(fd[0], buf, h.size, 0);
        full_io(fd[0], buf, h.size, 1);
      } else {
        striped(fd, (int)h.links, buf, h.size, 0);
      }
    }
    if (h.test == 1) full_io(fd[0], buf, 1, 1); /* end of the sample */
  }
  return 0;
}

static int client(char *hosts, int port, const char *test, size_t size, long iters, int links) {
  char *host[MAXL];
  int nh = 0;
  for (char *t = strtok(hosts, ","); t && nh < MAXL; t = strtok(0, ",")) host[nh++] = t;
  if (nh == 0) {
    fprintf(stderr, "rawtcp: no host given\n");
    return 2;
  }
  int fd[MAXL], wait_spin = spin;
  spin = 0; /* connect and say hello blocking */
  for (int l = 0; l < links; l++) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, host[l % nh], &a.sin_addr) != 1) die("inet_pton");
    fd[l] = socket(AF_INET, SOCK_STREAM, 0);
    int tries = 0;
    while (connect(fd[l], (struct sockaddr *)&a, sizeof a)) {
      if (++tries > 200) die("connect");
      usleep(10000);
      close(fd[l]);
      fd[l] = socket(AF_INET, SOCK_STREAM, 0);
    }
    nodelay(fd[l]);
    if (l == 0) {
      struct hello h = {.test = strcmp(test, "lat") ? 1 : 0, .links = (uint32_t)links,
                        .size = size, .iters = (uint64_t)iters, .spin = (uint32_t)wait_spin};
      full_io(fd[0], (char *)&h, sizeof h, 1);
    }
  }
  spin = wait_spin;
  char *buf = calloc(size ? size : 1, 1);
  double r[SAMPLES];
  int lat = !strcmp(test, "lat");
  for (int s = 0; s < SAMPLES; s++) {
    double t0 = now();
    for (long i = 0; i < iters; i++) {
      if (lat) {
        full_io(fd[0], buf, size, 1);
        full_io(fd[0], buf, size, 0);
      } else {
        striped(fd, links, buf, size, 1);
      }
    }
    if (!lat) full_io(fd[0], buf, 1, 0);
    double t = now() - t0;
    r[s] = lat ? t / iters / 2 * 1e6 : (double)size * iters / t / 1e6;
  }
  qsort(r, SAMPLES, sizeof r[0], cmp);
  int sb = 0, rb = 0;
  socklen_t len = sizeof sb;
  getsockopt(fd[0], SOL_SOCKET, SO_SNDBUF, &sb, &len);
  len = sizeof rb;
  getsockopt(fd[0], SOL_SOCKET, SO_RCVBUF, &rb, &len);
  printf("RESULT test=%s size=%zu iters=%ld links=%d wait=%s median=%.3f best=%.3f unit=%s "
         "sndbuf=%d rcvbuf=%d\n",
         test, size, iters, links, spin ? "spin" : "block", r[SAMPLES / 2],
         lat ? r[0] : r[SAMPLES - 1], lat ? "us" : "MB/s", sb, rb);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "server")) return server(atoi(argv[2]));
  if (argc >= 6 && !strcmp(argv[1], "client")) {
    long iters = argc > 6 ? atol(argv[6]) : 1000;
    int links = argc > 7 ? atoi(argv[7]) : 1;
    if (links < 1 || links > MAXL) links = 1;
    if (argc > 8 && strcmp(argv[8], "spin") && strcmp(argv[8], "block")) {
      fprintf(stderr, "rawtcp: WAIT is spin or block, not %s\n", argv[8]);
      return 2;
    }
    spin = argc > 8 ? !strcmp(argv[8], "spin") : 1;
    return client(argv[2], atoi(argv[3]), argv[4], strtoull(argv[5], 0, 0), iters, links);
  }
  fprintf(stderr, "usage: rawtcp server PORT | rawtcp client HOST[,HOST2] PORT lat|bw SIZE "
                  "[ITERS] [LINKS] [spin|block]\n");
  return 2;
}
