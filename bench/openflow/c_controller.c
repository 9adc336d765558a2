/*
 * A minimal C OpenFlow 1.0 controller, the yardstick `commbench controller`
 * is measured against: the leanest C we could write for the cbench app.
 *
 * Design: one thread, poll(2) over non-blocking sockets (level-triggered,
 * as cbench itself), per switch a 1 MiB input buffer and a 4 MiB output
 * buffer. Each turn a readable switch gets one read of up to 1 MiB, every
 * complete message in it is handled in place, and the replies go out in
 * one write. It says HELLO and sends FEATURES_REQUEST, answers
 * ECHO_REQUEST, and answers every PACKET_IN with an exact-match FLOW_MOD
 * (the match from the frame with the same rules as commbench's FlowKey:
 * one 802.1Q tag, IPv4 with TCP/UDP ports or ICMP type/code when not a
 * fragment, ARP opcode and addresses; the packet_in's xid and buffer_id;
 * output to in_port+1): the prepared 80-byte template is copied straight
 * into the output buffer and patched there, so no reply is built twice.
 *
 * Backpressure: parsing stops at a message whose reply has no room in the
 * output buffer (the rest stays in the input buffer and is parsed once
 * the replies drain), and a switch whose unsent replies leave less than
 * MIN_ROOM free is not read (not polled for input) until they drain: an
 * open-loop generator cannot grow the controller's memory, and no reply
 * is ever dropped.
 *
 * How we checked it is strong (2-vCPU VM; `commbench cbench -s 16 -l 4
 * -m 1000 -t` on CPU 0, the controller on CPU 1, interleaved rounds;
 * docs/openflow.md has the figures):
 * - it answers byte for byte what `commbench controller` answers
 *   (bench/openflow/xcheck.py: probes, TCP, fragments, ICMP behind IP
 *   options, 802.1Q, ARP, LLDP, short frames, echo);
 * - 34-37 M responses/s at 27-30 ns of CPU per response (user 6-7.6 ns),
 *   with 0.63 reads, 0.63 writes and 0.11 polls per 1000 responses (the
 *   counts it prints on exit): the system calls are ~1.4 per 1000
 *   responses, so what is left is the kernel's TCP copies;
 * - its loop over 800 probe packet_ins in cache costs 6.7-7.0 ns per
 *   packet_in;
 * - none of the variants we tried was cheaper (CPU per response against
 *   this build, 2 interleaved rounds): epoll (-DUSE_EPOLL) 1.12x [0.98,
 *   1.28], 64 KiB reads (-DREAD_MAX=65536) 1.48x [1.32, 1.67], reading
 *   until EAGAIN (-DREAD_UNTIL_EAGAIN) 1.43x [1.40, 1.47]: smaller reads
 *   and the extra empty read cost kernel time.
 * Compile with -O2 -march=native.
 *
 * On SIGTERM/SIGINT it prints the flow_mods sent, its CPU time per
 * flow_mod (getrusage) and its system calls per 1000 flow_mods.
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
#ifdef USE_EPOLL
#include <sys/epoll.h>
#endif

#define MAXC 1024
#define IN_CAP (1 << 20)
#ifndef READ_MAX
#define READ_MAX IN_CAP
#endif
#define OUT_CAP (4 << 20)
/* A switch is read only while its output buffer has this much room. */
#define MIN_ROOM (64 << 10)
#define MAX_MSG 65535

struct conn {
    int fd;
    uint8_t *in;
    size_t in_len;
    uint8_t *out;
    size_t out_len, out_off;
    int stalled; /* parsing stopped for want of output room */
#ifdef USE_EPOLL
    uint32_t ev;
#endif
};
#ifndef USE_EPOLL
static struct conn conns[MAXC];
#endif
static int nconns;
static volatile sig_atomic_t stop;
static unsigned long long flow_mods, n_read, n_write, n_poll;
static uint8_t tmpl[80];

static void on_sig(int s) { (void)s; stop = 1; }

static inline void put16(uint8_t *p, uint16_t v) { v = htons(v); memcpy(p, &v, 2); }
static inline uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return ntohs(v); }

static void hdr(uint8_t *m, uint8_t type, uint16_t len, uint32_t xid) {
    m[0] = 1; m[1] = type; put16(m + 2, len); memcpy(m + 4, &xid, 4);
}

/* Room is checked by the caller. */
static inline void queue(struct conn *c, const void *m, size_t n) {
    memcpy(c->out + c->out_len, m, n); c->out_len += n;
}

/* The flow_mod answering packet_in `m` (len >= 18), built in place. */
static inline void packet_in(struct conn *c, const uint8_t *m, size_t len) {
    uint8_t *f = c->out + c->out_len;
    memcpy(f, tmpl, 80);
    memcpy(f + 4, m + 4, 4);                 /* xid */
    uint8_t *mt = f + 8;                      /* ofp_match, zero in tmpl */
    memcpy(mt + 4, m + 14, 2);                /* in_port */
    const uint8_t *d = m + 18;
    size_t dl = len - 18;
    if (dl >= 14) {
        memcpy(mt + 6, d + 6, 6);             /* dl_src */
        memcpy(mt + 12, d, 6);                /* dl_dst */
        uint16_t type = get16(d + 12);
        size_t off = 14;
        put16(mt + 18, 0xffff);               /* dl_vlan: none */
        if (type == 0x8100) {
            if (dl < 18) goto done;
            uint16_t tci = get16(d + 14);
            put16(mt + 18, tci & 0x0fff); mt[20] = tci >> 13;
            type = get16(d + 16); off = 18;
        }
        put16(mt + 22, type);
        if (type == 0x0800 && dl >= off + 20) {
            const uint8_t *ip = d + off;
            size_t ihl = (ip[0] & 15) * 4;
            mt[24] = ip[1] & 0xfc; mt[25] = ip[9];
            memcpy(mt + 28, ip + 12, 8);      /* nw_src, nw_dst */
            if (ihl >= 20 && (get16(ip + 6) & 0x1fff) == 0 && dl >= off + ihl + 4) {
                const uint8_t *l4 = ip + ihl;
                if (ip[9] == 6 || ip[9] == 17) memcpy(mt + 36, l4, 4);
                else if (ip[9] == 1) { put16(mt + 36, l4[0]); put16(mt + 38, l4[1]); }
            }
        } else if (type == 0x0806 && dl >= off + 28) {
            const uint8_t *a = d + off;
            uint16_t op = get16(a + 6);
            if (op <= 0xff) mt[25] = op;
            memcpy(mt + 28, a + 14, 4); memcpy(mt + 32, a + 24, 4);
        }
    }
done:
    memcpy(f + 64, m + 8, 4);                 /* buffer_id */
    put16(f + 76, get16(m + 14) + 1);         /* output to in_port+1 */
    c->out_len += 80;
    flow_mods++;
}

/* Handle every complete message in the input while the output has room
   for its reply; keep the rest. */
static int handle(struct conn *c) {
    size_t off = 0, n = c->in_len;
    c->stalled = 0;
    const uint8_t *b = c->in;
    while (n - off >= 8) {
        const uint8_t *m = b + off;
        size_t len = get16(m + 2);
        if (len < 8 || m[0] != 1) return -1;
        if (n - off < len) break;
        if (OUT_CAP - c->out_len < (len > 80 ? len : 80)) { c->stalled = 1; break; }
        if (m[1] == 10) {
            if (len < 18) return -1;
            packet_in(c, m, len);
        } else if (m[1] == 2) {                /* ECHO_REQUEST -> ECHO_REPLY */
            queue(c, m, len); c->out[c->out_len - len + 1] = 3;
        }
        off += len;
    }
    if (off) { memmove(c->in, c->in + off, n - off); c->in_len = n - off; }
    return 0;
}

#ifndef USE_EPOLL
static void drop(int i) {
    close(conns[i].fd); free(conns[i].in); free(conns[i].out);
    conns[i] = conns[--nconns];
}
#endif

static size_t room(const struct conn *c) { return OUT_CAP - c->out_len; }

/* One read (or reads until EAGAIN), handled; -1: the connection is gone. */
static int do_read(struct conn *c) {
    for (;;) {
        if (c->out_off == c->out_len) c->out_off = c->out_len = 0;
        else if (room(c) < MIN_ROOM + READ_MAX && c->out_off > 0) {
            memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
            c->out_len -= c->out_off; c->out_off = 0;
        }
        if (c->stalled && handle(c)) return -1;
        if (c->stalled || room(c) < MIN_ROOM) return 0;    /* backpressure */
        size_t want = IN_CAP + MAX_MSG - c->in_len;
        if (want > READ_MAX) want = READ_MAX;
        ssize_t r = read(c->fd, c->in + c->in_len, want);
        n_read++;
        if (r == 0) return -1;
        if (r < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
        c->in_len += r;
        if (handle(c)) return -1;
#ifndef READ_UNTIL_EAGAIN
        return 0;
#else
        if ((size_t)r < want) return 0;
#endif
    }
}

static int do_write(struct conn *c) {
    if (c->out_len == c->out_off) return 0;
    ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
    n_write++;
    if (w > 0) { c->out_off += w; if (c->out_off == c->out_len) c->out_off = c->out_len = 0; }
    else if (w < 0 && errno != EAGAIN && errno != EINTR) return -1;
    if (c->stalled && c->out_off == 0 && handle(c)) return -1;  /* room again */
    return 0;
}

/* Input wanted unless backpressure holds it; output while replies wait. */
static short want_events(const struct conn *c) {
    short e = 0;
    if (!c->stalled && room(c) + c->out_off >= MIN_ROOM) e |= POLLIN;
    if (c->out_len > c->out_off) e |= POLLOUT;
    return e;
}

static void setup(struct conn *c, int fd, const char *cc) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (cc && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)) < 0) {
        perror("TCP_CONGESTION"); exit(1);
    }
    c->fd = fd; c->in = malloc(IN_CAP + MAX_MSG); c->out = malloc(OUT_CAP);
    if (!c->in || !c->out) { perror("malloc"); exit(1); }
    c->in_len = c->out_len = c->out_off = 0;
    c->stalled = 0;
    uint8_t m[8];
    hdr(m, 0, 8, htonl(1)); queue(c, m, 8);      /* HELLO */
    hdr(m, 5, 8, htonl(2)); queue(c, m, 8);      /* FEATURES_REQUEST */
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: c_controller PORT [CONGESTION]\n"); return 2; }
    const char *cc = argc > 2 ? argv[2] : NULL;
    signal(SIGTERM, on_sig); signal(SIGINT, on_sig); signal(SIGPIPE, SIG_IGN);
    /* the template: header, match (zero; filled per packet), cookie 0,
       ADD, idle 0, hard 0, priority 0x8000, buffer_id, out_port NONE,
       flags 0, one output action (type 0, len 8, port per packet, max_len 0) */
    memset(tmpl, 0, sizeof tmpl);
    hdr(tmpl, 14, 80, 0);
    put16(tmpl + 62, 0x8000); put16(tmpl + 68, 0xffff); put16(tmpl + 74, 8);
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(ls, (void *)&a, sizeof a) || listen(ls, 1024)) { perror("bind/listen"); return 1; }
    fcntl(ls, F_SETFL, O_NONBLOCK);
#ifndef USE_EPOLL
    static struct pollfd p[MAXC + 1];
    while (!stop) {
        p[0].fd = ls; p[0].events = POLLIN;
        for (int i = 0; i < nconns; i++) { p[i + 1].fd = conns[i].fd; p[i + 1].events = want_events(&conns[i]); }
        int n = poll(p, nconns + 1, 100);
        n_poll++;
        if (n < 0) { if (errno == EINTR) continue; perror("poll"); return 1; }
        for (int i = nconns - 1; i >= 0; i--) {
            struct conn *c = &conns[i];
            short ev = p[i + 1].revents;
            if ((ev & (POLLIN | POLLHUP | POLLERR)) && do_read(c)) { drop(i); continue; }
            if (do_write(c)) { drop(i); continue; }
        }
        if (p[0].revents & POLLIN) {
            int fd;
            while (nconns < MAXC && (fd = accept4(ls, 0, 0, SOCK_NONBLOCK)) >= 0) {
                struct conn *c = &conns[nconns++];
                setup(c, fd, cc);
                do_write(c);
            }
        }
    }
#else
    int ep = epoll_create1(0);
    struct epoll_event e = { .events = EPOLLIN, .data.u64 = ~0ull };
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &e);
    static struct conn *slot[MAXC];   /* epoll's token -> the connection */
    static struct epoll_event evs[MAXC + 1];
    while (!stop) {
        int n = epoll_wait(ep, evs, MAXC + 1, 100);
        n_poll++;
        if (n < 0) { if (errno == EINTR) continue; perror("epoll_wait"); return 1; }
        for (int k = 0; k < n; k++) {
            if (evs[k].data.u64 == ~0ull) {
                int fd;
                while (nconns < MAXC && (fd = accept4(ls, 0, 0, SOCK_NONBLOCK)) >= 0) {
                    int s = 0;
                    while (slot[s]) s++;
                    struct conn *c = malloc(sizeof *c);
                    slot[s] = c; nconns++;
                    setup(c, fd, cc);
                    do_write(c);
                    c->ev = want_events(c);
                    struct epoll_event ce = { .events = c->ev, .data.u64 = s };
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
                }
                continue;
            }
            int s = evs[k].data.u64;
            struct conn *c = slot[s];
            uint32_t ev = evs[k].events;
            int bad = (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && do_read(c);
            if (!bad) bad = do_write(c);
            if (bad) {
                close(c->fd); free(c->in); free(c->out); free(c); slot[s] = 0; nconns--;
                continue;
            }
            uint32_t want = want_events(c);
            if (want != c->ev) {
                c->ev = want;
                struct epoll_event ce = { .events = want, .data.u64 = s };
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ce);
            }
        }
    }
#endif
    struct rusage u; getrusage(RUSAGE_SELF, &u);
    double user = u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6;
    double cpu = user + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
    double k = flow_mods ? 1000.0 / flow_mods : 0.0;
    printf("flow_mods %llu cpu_s %.3f user_s %.3f ns_per_response %.1f user_ns_per_response %.1f "
           "per_1000: reads %.3f writes %.3f polls %.3f\n",
           flow_mods, cpu, user, flow_mods ? cpu * 1e9 / flow_mods : 0.0,
           flow_mods ? user * 1e9 / flow_mods : 0.0, n_read * k, n_write * k, n_poll * k);
    return 0;
}
