/* Reference echo server in C for bench/mux-compare.sh: the same job as
 * `commbench mux serve` (accept, read up to 64 KiB, write it back, close on
 * EOF), written the way a C programmer would, as the yardstick for the
 * server CPU per round trip. Engines: poll (pollfd position = state index),
 * epoll level-triggered with the slot index in epoll data, io_uring
 * (liburing: multishot accept, recv -> send -> recv per connection, the
 * slot index in user_data).
 *
 * usage: c_echo poll|epoll|uring PORT [MAXCONN]
 * Runs until SIGTERM/SIGINT.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef HAVE_URING
#include <liburing.h>
#endif

#define BUF 65536
static volatile sig_atomic_t stop;
static void on_sig(int s) { (void)s; stop = 1; }

static int listen_on(int port, int backlog) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                          .sin_addr.s_addr = htonl(INADDR_ANY)};
  if (bind(fd, (void *)&a, sizeof a) || listen(fd, backlog)) { perror("listen"); exit(1); }
  return fd;
}

static void nodelay(int fd) { int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); }

static char buf[BUF];

/* Echo what is readable once; returns 0 to keep, -1 to close. Blocking
 * writes are avoided: a short write is finished with a poll on POLLOUT
 * (rare: one message in flight per connection). */
static int echo_once(int fd) {
  ssize_t n = read(fd, buf, BUF);
  if (n == 0) return -1;
  if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
  ssize_t off = 0;
  while (off < n) {
    ssize_t w = send(fd, buf + off, n - off, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN) { struct pollfd p = {fd, POLLOUT, 0}; poll(&p, 1, 1000); continue; }
      if (errno == EINTR) continue;
      return -1;
    }
    off += w;
  }
  return 0;
}

static void run_poll(int lfd, int maxc) {
  struct pollfd *p = calloc(maxc + 1, sizeof *p);
  int n = 1;
  p[0].fd = lfd; p[0].events = POLLIN;
  for (int i = 1; i <= maxc; i++) p[i].fd = -1;
  while (!stop) {
    int r = poll(p, n, 100);
    if (r <= 0) continue;
    if (p[0].revents) {
      r--;
      for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0) break;
        nodelay(c);
        int i = 1;
        while (i < n && p[i].fd >= 0) i++;
        if (i > maxc) { close(c); continue; }
        p[i].fd = c; p[i].events = POLLIN; p[i].revents = 0;
        if (i == n) n++;
      }
    }
    for (int i = 1; i < n && r > 0; i++) {
      if (!p[i].revents) continue;
      r--;
      p[i].revents = 0;
      if (echo_once(p[i].fd) < 0) { close(p[i].fd); p[i].fd = -1; }
    }
  }
}

static void run_epoll(int lfd, int maxc) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  int *fds = calloc(maxc, sizeof *fds);
  int *freel = calloc(maxc, sizeof *freel);
  int nfree = 0, top = 0;
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  struct epoll_event evs[1024];
  while (!stop) {
    int r = epoll_wait(ep, evs, 1024, 100);
    for (int k = 0; k < r; k++) {
      if (evs[k].data.u64 == UINT64_MAX) {
        for (;;) {
          int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          nodelay(c);
          int slot = nfree ? freel[--nfree] : (top < maxc ? top++ : -1);
          if (slot < 0) { close(c); continue; }
          fds[slot] = c;
          struct epoll_event e = {.events = EPOLLIN, .data.u64 = (uint64_t)slot};
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
        }
        continue;
      }
      int slot = (int)evs[k].data.u64;
      if (echo_once(fds[slot]) < 0) { close(fds[slot]); fds[slot] = -1; freel[nfree++] = slot; }
    }
  }
}

#ifdef HAVE_URING
enum { OP_ACCEPT, OP_RECV, OP_SEND };
#define UD(slot, op) (((uint64_t)(slot) << 2) | (op))
static void run_uring(int lfd, int maxc) {
  struct io_uring ring;
  struct io_uring_params prm = {0};
  prm.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
  prm.cq_entries = 65536;
  if (io_uring_queue_init_params(4096, &ring, &prm) < 0) {
    memset(&prm, 0, sizeof prm);
    prm.flags = IORING_SETUP_CQSIZE; prm.cq_entries = 65536;
    if (io_uring_queue_init_params(4096, &ring, &prm) < 0) { perror("io_uring"); exit(1); }
  }
  int *fds = calloc(maxc, sizeof *fds);
  char **bufs = calloc(maxc, sizeof *bufs);
  int *len = calloc(maxc, sizeof *len), *sent = calloc(maxc, sizeof *sent);
  int *freel = calloc(maxc, sizeof *freel);
  int nfree = 0, top = 0;
  struct io_uring_sqe *s;
#define SQE() ({ struct io_uring_sqe *q_; while (!(q_ = io_uring_get_sqe(&ring))) io_uring_submit(&ring); q_; })
  s = SQE(); io_uring_prep_multishot_accept(s, lfd, NULL, NULL, SOCK_CLOEXEC); io_uring_sqe_set_data64(s, UD(0, OP_ACCEPT));
  struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 100000000};
  while (!stop) {
    struct io_uring_cqe *cqe;
    io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, NULL);
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      seen++;
      uint64_t ud = cqe->user_data; int op = ud & 3, slot = ud >> 2, res = cqe->res;
      if (op == OP_ACCEPT) {
        if (res >= 0) {
          nodelay(res);
          int sl = nfree ? freel[--nfree] : (top < maxc ? top++ : -1);
          if (sl < 0) { close(res); } else {
            fds[sl] = res;
            if (!bufs[sl]) bufs[sl] = malloc(BUF);
            s = SQE(); io_uring_prep_recv(s, res, bufs[sl], BUF, 0); io_uring_sqe_set_data64(s, UD(sl, OP_RECV));
          }
        }
        if (!(cqe->flags & IORING_CQE_F_MORE)) {
          s = SQE(); io_uring_prep_multishot_accept(s, lfd, NULL, NULL, SOCK_CLOEXEC); io_uring_sqe_set_data64(s, UD(0, OP_ACCEPT));
        }
        continue;
      }
      int fd = fds[slot];
      if (op == OP_RECV && res > 0) {
        len[slot] = res; sent[slot] = 0;
        s = SQE(); io_uring_prep_send(s, fd, bufs[slot], res, MSG_NOSIGNAL); io_uring_sqe_set_data64(s, UD(slot, OP_SEND));
      } else if (op == OP_SEND && res > 0) {
        sent[slot] += res;
        s = SQE();
        if (sent[slot] < len[slot]) { io_uring_prep_send(s, fd, bufs[slot] + sent[slot], len[slot] - sent[slot], MSG_NOSIGNAL); io_uring_sqe_set_data64(s, UD(slot, OP_SEND)); }
        else { io_uring_prep_recv(s, fd, bufs[slot], BUF, 0); io_uring_sqe_set_data64(s, UD(slot, OP_RECV)); }
      } else {
        close(fd); fds[slot] = -1; freel[nfree++] = slot;
      }
    }
    io_uring_cq_advance(&ring, seen);
  }
}
#endif

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: c_echo poll|epoll|uring PORT [MAXCONN]\n"); return 2; }
  int port = atoi(argv[2]);
  int maxc = argc > 3 ? atoi(argv[3]) : 20000;
  struct rlimit rl; getrlimit(RLIMIT_NOFILE, &rl); rl.rlim_cur = rl.rlim_max; setrlimit(RLIMIT_NOFILE, &rl);
  signal(SIGTERM, on_sig); signal(SIGINT, on_sig); signal(SIGPIPE, SIG_IGN);
  int lfd = listen_on(port, 65535);
  if (!strcmp(argv[1], "poll")) run_poll(lfd, maxc);
  else if (!strcmp(argv[1], "epoll")) run_epoll(lfd, maxc);
#ifdef HAVE_URING
  else if (!strcmp(argv[1], "uring")) run_uring(lfd, maxc);
#endif
  else { fprintf(stderr, "unknown engine %s\n", argv[1]); return 2; }
  return 0;
}
