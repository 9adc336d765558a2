/* The C yardstick for `commbench data_channel_write mt 1 LEN COUNT`: a
 * Unix-domain stream socket carrying COUNT messages of LEN bytes one way,
 * made as strong as the kernel path gets: socket buffers raised to
 * BUF bytes each (SO_SNDBUF/SO_RCVBUF; root may exceed wmem_max with the
 * FORCE variants), one write(2) per message, the reader takes each
 * message whole with recv(MSG_WAITALL) into one reused buffer and checks
 * the sequence number in its first 8 bytes.
 *
 * usage: uds_stream LEN COUNT [BUF]   (BUF default 4 MiB)
 * prints one JSON line: messages, elapsed, msgs/s, GiB/s, CPU per message
 * (getrusage: reader over the loop + the writer process).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu(const struct rusage *u) {
    return u->ru_utime.tv_sec + u->ru_utime.tv_usec / 1e6 + u->ru_stime.tv_sec + u->ru_stime.tv_usec / 1e6;
}
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
static void bufs(int fd, int buf) {
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf))
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf))
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}
int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: uds_stream LEN COUNT [BUF]\n"); return 2; }
    size_t len = strtoul(argv[1], 0, 10);
    long count = strtol(argv[2], 0, 10);
    int buf = argc > 3 ? atoi(argv[3]) : 4 << 20;
    if (len < 8 || count < 1) { fprintf(stderr, "LEN >= 8, COUNT >= 1\n"); return 2; }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) { perror("socketpair"); return 1; }
    bufs(sv[0], buf);
    bufs(sv[1], buf);
    int go[2];
    if (pipe(go)) { perror("pipe"); return 1; }
    char *b = malloc(len);
    memset(b, 0x5a, len);
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        if (read(go[0], &c, 1) != 1) _exit(1);
        for (long i = 0; i < count; i++) {
            uint64_t q = (uint64_t)i;
            memcpy(b, &q, 8);
            size_t off = 0;
            while (off < len) {
                ssize_t w = write(sv[1], b + off, len - off);
                if (w <= 0) { perror("write"); _exit(1); }
                off += (size_t)w;
            }
        }
        _exit(0);
    }
    struct rusage u0, u1, uc = {0};
    getrusage(RUSAGE_SELF, &u0);
    double t0 = now();
    if (write(go[1], "g", 1) != 1) return 1;
    for (long i = 0; i < count; i++) {
        size_t off = 0;
        while (off < len) {
            ssize_t r = recv(sv[0], b + off, len - off, MSG_WAITALL);
            if (r <= 0) { perror("recv"); return 1; }
            off += (size_t)r;
        }
        uint64_t q;
        memcpy(&q, b, 8);
        if (q != (uint64_t)i) { fprintf(stderr, "sequence %ld: got %lu\n", i, (unsigned long)q); return 1; }
    }
    double el = now() - t0;
    wait4(pid, 0, 0, &uc);
    getrusage(RUSAGE_SELF, &u1);
    double c = cpu(&u1) - cpu(&u0) + cpu(&uc);
    printf("{\"len\":%zu,\"messages\":%ld,\"elapsed_s\":%.6f,\"msgs_per_s\":%.1f,\"gib_per_s\":%.3f,\"cpu_ns_per_msg\":%.0f}\n",
           len, count, el, count / el, count * (double)len / el / (1 << 30), c * 1e9 / count);
    return 0;
}
