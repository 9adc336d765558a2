/* The C yardstick for `commbench reqres_loop mt 1 LEN COUNT`: a
 * request/response ping-pong over two pipes, the plainest kernel path
 * between two ends. The client writes LEN bytes (the sequence number in
 * the first 8), the echo end reads them whole and writes them back, the
 * client reads the echo and checks the sequence. One write and one
 * blocking read per message per side: nothing else is in the loop.
 *
 * usage: pipe_rt LEN COUNT [proc|thread]
 *   proc (default): the echo end is a forked process; thread: a pthread.
 * prints one JSON line: round trips, elapsed, round trips/s, msgs/s
 * (2 per round trip, as reqres_loop counts), CPU per round trip (getrusage).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static size_t len;
static long count;
static int req[2], resp[2];

static void xread(int fd, char *b, size_t n) {
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r <= 0) { perror("read"); exit(1); }
        b += r; n -= (size_t)r;
    }
}
static void xwrite(int fd, const char *b, size_t n) {
    while (n) {
        ssize_t r = write(fd, b, n);
        if (r <= 0) { perror("write"); exit(1); }
        b += r; n -= (size_t)r;
    }
}
static void *echo(void *arg) {
    (void)arg;
    char *b = malloc(len ? len : 1);
    for (long i = 0; i < count; i++) {
        xread(req[0], b, len);
        xwrite(resp[1], b, len);
    }
    free(b);
    return NULL;
}
static double cpu(const struct rusage *u) {
    return u->ru_utime.tv_sec + u->ru_utime.tv_usec / 1e6 + u->ru_stime.tv_sec + u->ru_stime.tv_usec / 1e6;
}
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: pipe_rt LEN COUNT [proc|thread]\n"); return 2; }
    len = strtoul(argv[1], 0, 10);
    count = strtol(argv[2], 0, 10);
    int threads = argc > 3 && !strcmp(argv[3], "thread");
    if (len < 8 || count < 1) { fprintf(stderr, "LEN >= 8, COUNT >= 1\n"); return 2; }
    if (pipe(req) || pipe(resp)) { perror("pipe"); return 1; }
    pthread_t th; pid_t pid = 0;
    if (threads) pthread_create(&th, 0, echo, 0);
    else if ((pid = fork()) == 0) { echo(0); _exit(0); }
    char *s = malloc(len), *r = malloc(len);
    memset(s, 0x5a, len);
    struct rusage u0, u1, uc = {0};
    getrusage(RUSAGE_SELF, &u0);
    double t0 = now();
    for (long i = 0; i < count; i++) {
        uint64_t q = (uint64_t)i;
        memcpy(s, &q, 8);
        xwrite(req[1], s, len);
        xread(resp[0], r, len);
        memcpy(&q, r, 8);
        if (q != (uint64_t)i) { fprintf(stderr, "sequence %ld: got %lu\n", i, (unsigned long)q); return 1; }
    }
    double el = now() - t0;
    if (threads) pthread_join(th, 0); else wait4(pid, 0, 0, &uc);
    getrusage(RUSAGE_SELF, &u1);
    /* CPU of both ends: this process over the loop (both threads in
     * thread mode), plus the echo process's whole life. */
    double c = cpu(&u1) - cpu(&u0) + cpu(&uc);
    printf("{\"len\":%zu,\"round_trips\":%ld,\"elapsed_s\":%.6f,\"round_trips_per_s\":%.1f,\"msgs_per_s\":%.1f,\"cpu_ns_per_round_trip\":%.0f}\n",
           len, count, el, count / el, 2 * count / el, c * 1e9 / count);
    return 0;
}
