/*
 * The plain C AF_PACKET generator that `commbench pipeline io --mode gen`
 * is compared with: the same frames (Ethernet/IPv4/UDP, the "CBPL" mark and
 * a sequence number at offset 42), sendmmsg bursts on a socket bound to the
 * interface with PACKET_QDISC_BYPASS, the sequence number rewritten in each
 * frame before it is sent. Prints frames sent, wall pps, and pps per CPU
 * second of the process (getrusage), the figure that survives a noisy
 * machine.
 *
 * usage: afp_gen IFACE FRAMES [SIZE] [BURST]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: afp_gen IFACE FRAMES [SIZE] [BURST]\n"); return 2; }
    const char *ifname = argv[1];
    uint64_t frames = strtoull(argv[2], 0, 10);
    int size = argc > 3 ? atoi(argv[3]) : 64;
    int burst = argc > 4 ? atoi(argv[4]) : 32;
    if (size < 64 || size > 1518 || burst < 1 || burst > 1024) return 2;
    int len = size - 4; /* without FCS */
    int fd = socket(AF_PACKET, SOCK_RAW, 0);
    if (fd < 0) { perror("socket"); return 1; }
    int one = 1;
    setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
    struct sockaddr_ll sll = {0};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = 0;
    sll.sll_ifindex = if_nametoindex(ifname);
    if (!sll.sll_ifindex) { perror(ifname); return 1; }
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) { perror("bind"); return 1; }
    uint8_t (*buf)[1518] = calloc(burst, 1518);
    struct mmsghdr *msgs = calloc(burst, sizeof *msgs);
    struct iovec *iov = calloc(burst, sizeof *iov);
    for (int i = 0; i < burst; i++) {
        uint8_t *f = buf[i];
        uint8_t dst[6] = {0x02, 0xcb, 0, 0, 0, 2}, src[6] = {0x02, 0xcb, 0, 0, 0, 1};
        memcpy(f, dst, 6); memcpy(f + 6, src, 6);
        f[12] = 0x08; f[13] = 0x00;
        uint8_t *ip = f + 14;
        ip[0] = 0x45; ip[8] = 64; ip[9] = 17;
        uint16_t tot = htons(len - 14); memcpy(ip + 2, &tot, 2);
        ip[12] = 10; ip[13] = 0; ip[14] = 0; ip[15] = 1;
        ip[16] = 192; ip[17] = 168; ip[18] = 0; ip[19] = (uint8_t)(i + 1);
        uint8_t *udp = ip + 20;
        uint16_t sp = htons(1024 + i), dp = htons(5201), ul = htons(len - 34);
        memcpy(udp, &sp, 2); memcpy(udp + 2, &dp, 2); memcpy(udp + 4, &ul, 2);
        memcpy(f + 42, "CBPL", 4);
        iov[i].iov_base = f; iov[i].iov_len = len;
        msgs[i].msg_hdr.msg_iov = &iov[i]; msgs[i].msg_hdr.msg_iovlen = 1;
    }
    double c0 = cpu_s(), t0 = now();
    uint64_t sent = 0;
    while (sent < frames) {
        int n = frames - sent < (uint64_t)burst ? (int)(frames - sent) : burst;
        for (int i = 0; i < n; i++) { uint64_t s = sent + i; memcpy(buf[i] + 46, &s, 8); }
        int k = sendmmsg(fd, msgs, n, 0);
        if (k < 0) { perror("sendmmsg"); return 1; }
        sent += k;
    }
    double wall = now() - t0, cpu = cpu_s() - c0;
    printf("sent %llu wall_s %.3f pps %.0f cpu_s %.3f pps_per_cpu_s %.0f\n",
           (unsigned long long)sent, wall, sent / wall, cpu, sent / cpu);
    return 0;
}
