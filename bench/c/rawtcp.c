/* rawtcp: the raw-socket limit of a TCP network path, as the MPI benchmarks measure it: a
 * ping-pong of SIZE-byte messages (one way = half the round trip, in microseconds) and a
 * stream of SIZE-byte messages (MB/s, 1e6 bytes per second), over LINKS connections
 * (a stream stripes each message over them, in equal parts; the ping-pong uses the first).
 * Plain blocking sockets with TCP_NODELAY, as a hand-written program would use them.
 *
 * usage: rawtcp server PORT                       (serves one client, then exits)
 *        rawtcp client HOST[,HOST2...] PORT TEST SIZE [ITERS] [LINKS]
 *   TEST lat or bw; HOSTs: the server's address per link (one for all links if one given).
 * Output (client): RESULT test=T size=S iters=N links=L median=X best=X unit=U
 * (median and best over 11 samples of ITERS iterations). */
#include <arpa/inet.h>
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

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what) {
  perror(what);
  exit(2);
}

static void full_write(int fd, const char *b, size_t n) {
  while (n) {
    ssize_t k = write(fd, b, n);
    if (k <= 0) die("write");
    b += k;
    n -= (size_t)k;
  }
}

static void full_read(int fd, char *b, size_t n) {
  while (n) {
    ssize_t k = read(fd, b, n);
    if (k <= 0) die("read");
    b += k;
    n -= (size_t)k;
  }
}

static void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* The request a client sends on its first connection: test, size, iterations, links. */
struct hello {
  uint32_t test, links;
  uint64_t size, iters;
};

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Sends (or receives) `size` bytes split over the links in equal parts. */
static void striped(int *fd, int links, char *buf, size_t size, int send) {
  size_t part = size / links, off = 0;
  for (int l = 0; l < links; l++) {
    size_t n = l == links - 1 ? size - off : part;
    if (send) full_write(fd[l], buf + off, n);
    else full_read(fd[l], buf + off, n);
    off += n;
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
  full_read(fd[0], (char *)&h, sizeof h);
  if (h.links < 1 || h.links > MAXL) return 2;
  for (uint32_t l = 1; l < h.links; l++) {
    if ((fd[l] = accept(ls, 0, 0)) < 0) die("accept");
    nodelay(fd[l]);
  }
  char *buf = malloc(h.size ? h.size : 1);
  for (int s = 0; s < SAMPLES; s++) {
    for (uint64_t i = 0; i < h.iters; i++) {
      if (h.test == 0) {
        full_read(fd[0], buf, h.size);
        full_write(fd[0], buf, h.size);
      } else {
        striped(fd, (int)h.links, buf, h.size, 0);
      }
    }
    if (h.test == 1) full_write(fd[0], buf, 1); /* end of the sample */
  }
  return 0;
}

static int client(char *hosts, int port, const char *test, size_t size, long iters,
                  int links) {
  char *host[MAXL];
  int nh = 0;
  for (char *t = strtok(hosts, ","); t && nh < MAXL; t = strtok(0, ",")) host[nh++] = t;
  int fd[MAXL];
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
                        .size = size, .iters = (uint64_t)iters};
      full_write(fd[0], (char *)&h, sizeof h);
    }
  }
  char *buf = calloc(size ? size : 1, 1);
  double r[SAMPLES];
  int lat = !strcmp(test, "lat");
  for (int s = 0; s < SAMPLES; s++) {
    double t0 = now();
    for (long i = 0; i < iters; i++) {
      if (lat) {
        full_write(fd[0], buf, size);
        full_read(fd[0], buf, size);
      } else {
        striped(fd, links, buf, size, 1);
      }
    }
    if (!lat) full_read(fd[0], buf, 1);
    double t = now() - t0;
    r[s] = lat ? t / iters / 2 * 1e6 : (double)size * iters / t / 1e6;
  }
  qsort(r, SAMPLES, sizeof r[0], cmp);
  printf("RESULT test=%s size=%zu iters=%ld links=%d median=%.3f best=%.3f unit=%s\n", test, size,
         iters, links, r[SAMPLES / 2], lat ? r[0] : r[SAMPLES - 1], lat ? "us" : "MB/s");
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "server")) return server(atoi(argv[2]));
  if (argc >= 6 && !strcmp(argv[1], "client")) {
    long iters = argc > 6 ? atol(argv[6]) : 1000;
    int links = argc > 7 ? atoi(argv[7]) : 1;
    if (links < 1 || links > MAXL) links = 1;
    return client(argv[2], atoi(argv[3]), argv[4], strtoull(argv[5], 0, 0), iters, links);
  }
  fprintf(stderr,
          "usage: rawtcp server PORT | rawtcp client HOST[,HOST2] PORT lat|bw SIZE [ITERS] "
          "[LINKS]\n");
  return 2;
}
