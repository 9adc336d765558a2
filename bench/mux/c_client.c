/* Reference load client in C for bench/mux-compare.sh: N connections, R
 * closed-loop rounds of K bytes each (send, wait for the whole echo, next),
 * all driven from one epoll loop: the same job as `commbench mux load`,
 * without verification of the echoed bytes beyond their count. Prints
 * `rt=<round trips> wall_s=<s> user_s=<s> sys_s=<s>` for the rounds phase.
 *
 * usage: c_client HOST_IPV4 PORT N R K
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double cpu(int who, int sys) { struct rusage u; getrusage(who, &u); struct timeval t = sys ? u.ru_stime : u.ru_utime; return t.tv_sec + t.tv_usec * 1e-6; }

int main(int argc, char **argv) {
  if (argc != 6) { fprintf(stderr, "usage: c_client HOST PORT N R K\n"); return 2; }
  int n = atoi(argv[3]), rounds = atoi(argv[4]), k = atoi(argv[5]);
  struct rlimit rl; getrlimit(RLIMIT_NOFILE, &rl); rl.rlim_cur = rl.rlim_max; setrlimit(RLIMIT_NOFILE, &rl);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
  inet_pton(AF_INET, argv[1], &a.sin_addr);
  int *fds = malloc(n * sizeof *fds), *round = calloc(n, sizeof *round), *got = calloc(n, sizeof *got);
  char *msg = malloc(k), *buf = malloc(k > 65536 ? 65536 : k);
  memset(msg, 'x', k);
  for (int i = 0; i < n; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fds[i], (void *)&a, sizeof a)) { perror("connect"); return 1; }
    int one = 1; setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  int ep = epoll_create1(0);
  for (int i = 0; i < n; i++) {
    struct epoll_event e = {.events = EPOLLIN, .data.u32 = i};
    epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e);
  }
  double u0 = cpu(RUSAGE_SELF, 0), s0 = cpu(RUSAGE_SELF, 1), t0 = now();
  /* Messages up to the socket buffer go out in one blocking send. */
  for (int i = 0; i < n; i++) if (send(fds[i], msg, k, MSG_NOSIGNAL) != k) { perror("send"); return 1; }
  int left = n;
  struct epoll_event evs[1024];
  while (left > 0) {
    int r = epoll_wait(ep, evs, 1024, 10000);
    if (r <= 0) { fprintf(stderr, "stalled\n"); return 1; }
    for (int j = 0; j < r; j++) {
      int i = evs[j].data.u32;
      ssize_t m = read(fds[i], buf, k - got[i] > 65536 ? 65536 : k - got[i]);
      if (m <= 0) { if (m < 0 && errno == EAGAIN) continue; fprintf(stderr, "server closed\n"); return 1; }
      got[i] += m;
      if (got[i] == k) {
        got[i] = 0;
        if (++round[i] == rounds) { left--; continue; }
        if (send(fds[i], msg, k, MSG_NOSIGNAL) != k) { perror("send"); return 1; }
      }
    }
  }
  double t1 = now(), u1 = cpu(RUSAGE_SELF, 0), s1 = cpu(RUSAGE_SELF, 1);
  for (int i = 0; i < n; i++) close(fds[i]);
  printf("rt=%lld wall_s=%.6f user_s=%.6f sys_s=%.6f\n", (long long)n * rounds, t1 - t0, u1 - u0, s1 - s0);
  return 0;
}
