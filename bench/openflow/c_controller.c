/*
 * A minimal C OpenFlow 1.0 controller, the yardstick `commbench controller`
 * is measured against: one thread, poll(2), non-blocking sockets, a 1 MiB
 * input and a 4 MiB output buffer per switch. It says HELLO and sends
 * FEATURES_REQUEST, answers ECHO_REQUEST, and answers every PACKET_IN with
 * an exact-match FLOW_MOD (match from the frame, buffer_id, output to
 * in_port+1) built into a prepared 80-byte template — the same work as the
 * cbench app's template path. On SIGTERM/SIGINT it prints the flow_mods
 * sent and its CPU time per flow_mod (getrusage).
 *
 * usage: c_controller PORT [CONGESTION]
 * CONGESTION (e.g. cubic): the TCP congestion control each accepted
 * connection gets, so that it can be given the same one `commbench
 * controller --tcp-congestion auto` puts in force.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXC 1024
#define IN_CAP (1 << 20)
#define OUT_CAP (4 << 20)

struct conn { int fd; uint8_t *in; size_t in_len; uint8_t *out; size_t out_len, out_off; };
static struct conn conns[MAXC];
static int nconns;
static volatile sig_atomic_t stop;
static unsigned long long flow_mods;
static uint8_t tmpl[80];

static void on_sig(int s) { (void)s; stop = 1; }

static void put16(uint8_t *p, uint16_t v) { v = htons(v); memcpy(p, &v, 2); }

static void queue(struct conn *c, const void *m, size_t n) {
    if (c->out_off > 0 && c->out_len + n > OUT_CAP) {
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off; c->out_off = 0;
    }
    if (c->out_len + n > OUT_CAP) return; /* full: the switch is not reading */
    memcpy(c->out + c->out_len, m, n); c->out_len += n;
}

static void hdr(uint8_t *m, uint8_t type, uint16_t len, uint32_t xid) {
    m[0] = 1; m[1] = type; put16(m + 2, len); memcpy(m + 4, &xid, 4);
}

static void packet_in(struct conn *c, const uint8_t *m, size_t len) {
    if (len < 18) return;
    uint8_t *f = tmpl;
    memcpy(f + 4, m + 4, 4); /* xid */
    uint16_t in_port; memcpy(&in_port, m + 16, 2);
    const uint8_t *d = m + 18; size_t dl = len - 18;
    uint8_t *mt = f + 8; /* ofp_match */
    memset(mt, 0, 40);
    memcpy(mt + 4, &in_port, 2);
    if (dl >= 14) {
        memcpy(mt + 6, d + 6, 6); memcpy(mt + 12, d, 6);
        uint16_t type; memcpy(&type, d + 12, 2);
        size_t off = 14;
        put16(mt + 18, 0xffff);
        if (type == htons(0x8100) && dl >= 18) {
            uint16_t tci; memcpy(&tci, d + 14, 2); tci = ntohs(tci);
            put16(mt + 18, tci & 0x0fff); mt[20] = tci >> 13;
            memcpy(&type, d + 16, 2); off = 18;
        }
        memcpy(mt + 22, &type, 2);
        if (type == htons(0x0800) && dl >= off + 20) {
            const uint8_t *ip = d + off; size_t ihl = (ip[0] & 15) * 4;
            mt[24] = ip[1] & 0xfc; mt[25] = ip[9];
            memcpy(mt + 28, ip + 12, 4); memcpy(mt + 32, ip + 16, 4);
            if ((ip[9] == 6 || ip[9] == 17) && dl >= off + ihl + 4) {
                memcpy(mt + 36, ip + ihl, 2); memcpy(mt + 38, ip + ihl + 2, 2);
            } else if (ip[9] == 1 && dl >= off + ihl + 2) {
                put16(mt + 36, ip[ihl]); put16(mt + 38, ip[ihl + 1]);
            }
        } else if (type == htons(0x0806) && dl >= off + 28) {
            const uint8_t *a = d + off; mt[25] = a[7];
            memcpy(mt + 28, a + 14, 4); memcpy(mt + 32, a + 24, 4);
        }
    }
    memcpy(f + 64, m + 8, 4); /* buffer_id */
    put16(f + 76, ntohs(in_port) + 1); /* the action's output port */
    queue(c, f, 80);
    flow_mods++;
}

static int handle(struct conn *c) {
    size_t off = 0;
    while (c->in_len - off >= 8) {
        uint8_t *m = c->in + off;
        uint16_t len; memcpy(&len, m + 2, 2); len = ntohs(len);
        if (len < 8 || m[0] != 1) return -1;
        if (c->in_len - off < len) break;
        uint8_t r[8];
        switch (m[1]) {
        case 2: /* ECHO_REQUEST */
            hdr(r, 3, 8, 0); memcpy(r + 4, m + 4, 4); queue(c, r, 8); break;
        case 10: packet_in(c, m, len); break;
        default: break;
        }
        off += len;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return 0;
}

static void drop(int i) {
    close(conns[i].fd); free(conns[i].in); free(conns[i].out);
    conns[i] = conns[--nconns];
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: c_controller PORT [CONGESTION]\n"); return 2; }
    const char *cc = argc > 2 ? argv[2] : NULL;
    signal(SIGTERM, on_sig); signal(SIGINT, on_sig); signal(SIGPIPE, SIG_IGN);
    /* the template: header, match (filled per packet), cookie 0, ADD,
       idle 0, hard 0, priority 0x8000, buffer_id, out_port NONE, flags 0,
       one output action */
    hdr(tmpl, 14, 80, 0);
    put16(tmpl + 56, 0); put16(tmpl + 58, 0); put16(tmpl + 60, 0);
    put16(tmpl + 62, 0x8000); put16(tmpl + 68, 0xffff); put16(tmpl + 70, 0);
    /* the action: OUTPUT (type 0), len 8, port (per packet), max_len 0 */
    put16(tmpl + 72, 0); put16(tmpl + 74, 8); put16(tmpl + 78, 0);
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(ls, (void *)&a, sizeof a) || listen(ls, 1024)) { perror("bind/listen"); return 1; }
    fcntl(ls, F_SETFL, O_NONBLOCK);
    struct pollfd p[MAXC + 1];
    while (!stop) {
        p[0].fd = ls; p[0].events = POLLIN;
        for (int i = 0; i < nconns; i++) {
            p[i + 1].fd = conns[i].fd;
            p[i + 1].events = POLLIN | (conns[i].out_len > conns[i].out_off ? POLLOUT : 0);
        }
        int n = poll(p, nconns + 1, 100);
        if (n < 0) { if (errno == EINTR) continue; perror("poll"); return 1; }
        if (p[0].revents & POLLIN) {
            int fd;
            while (nconns < MAXC && (fd = accept4(ls, 0, 0, SOCK_NONBLOCK)) >= 0) {
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                if (cc && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)) < 0) {
                    perror("TCP_CONGESTION"); return 1;
                }
                struct conn *c = &conns[nconns++];
                c->fd = fd; c->in = malloc(IN_CAP); c->out = malloc(OUT_CAP);
                c->in_len = c->out_len = c->out_off = 0;
                uint8_t m[8]; hdr(m, 0, 8, 0); queue(c, m, 8);      /* HELLO */
                hdr(m, 5, 8, htonl(1)); queue(c, m, 8);              /* FEATURES_REQUEST */
            }
        }
        for (int i = nconns - 1; i >= 0; i--) {
            struct conn *c = &conns[i];
            short ev = p[i + 1].revents;
            if (ev & (POLLIN | POLLHUP | POLLERR)) {
                ssize_t r = read(c->fd, c->in + c->in_len, IN_CAP - c->in_len);
                if (r == 0 || (r < 0 && errno != EAGAIN)) { drop(i); continue; }
                if (r > 0) { c->in_len += r; if (handle(c)) { drop(i); continue; } }
            }
            if (c->out_len > c->out_off) {
                ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
                if (w > 0) { c->out_off += w; if (c->out_off == c->out_len) c->out_off = c->out_len = 0; }
                else if (w < 0 && errno != EAGAIN) { drop(i); continue; }
            }
        }
    }
    struct rusage u; getrusage(RUSAGE_SELF, &u);
    double cpu = u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
    double user = u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6;
    printf("flow_mods %llu cpu_s %.3f user_s %.3f ns_per_response %.1f\n", flow_mods, cpu, user,
           flow_mods ? cpu * 1e9 / flow_mods : 0.0);
    return 0;
}
