/*
 * DPDK's software Toeplitz (rte_softrss, rte_thash.h from dpdk-dev) on the
 * same 1024 IPv4 4-tuples shape as `commbench pipeline rss`: median TSC
 * ticks per hash over batches of 1024 hashes. Also checks Microsoft's first
 * RSS verification vector so the two compute the same function.
 * build: gcc -O2 $(pkg-config --cflags libdpdk) softrss.c -o softrss
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>
#include <rte_thash.h>

static uint8_t key[40] = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    /* 66.9.149.187:2794 -> 161.142.100.80:1766 = 0x51ccc178 */
    uint32_t t[3] = {(66u << 24) | (9 << 16) | (149 << 8) | 187, (161u << 24) | (142 << 16) | (100 << 8) | 80,
                     (2794u << 16) | 1766};
    if (rte_softrss(t, 3, key) != 0x51ccc178) { fprintf(stderr, "vector mismatch\n"); return 1; }
    enum { N = 1024, B = 400 };
    static uint32_t in[N][3];
    for (int i = 0; i < N; i++) {
        uint64_t r = (uint64_t)i * 0x9e3779b97f4a7c15ull;
        in[i][0] = 0x0a000000u | (uint32_t)(r >> 40);
        in[i][1] = 0xc0a80000u | (uint32_t)i;
        in[i][2] = (uint32_t)(r & 0xffff0000u) | 80;
    }
    double per[B];
    volatile uint32_t sink = 0;
    for (int b = 0; b < B; b++) {
        uint64_t t0 = __rdtscp(&(unsigned){0});
        uint32_t h = 0;
        for (int i = 0; i < N; i++) h ^= rte_softrss(in[i], 3, key);
        uint64_t t1 = __rdtscp(&(unsigned){0});
        sink ^= h;
        per[b] = (double)(t1 - t0) / N;
    }
    qsort(per, B, sizeof(double), cmp);
    printf("rte_softrss ipv4-l4 ticks_per_hash_median %.2f\n", per[B / 2]);
    return 0;
}
