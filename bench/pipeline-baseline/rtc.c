/*
 * The plain C run-to-completion loop that `commbench pipeline run --mode rtc
 * --work swap` is compared with: the same steps on the same data layout.
 * A pool (LIFO stack) of 2 KiB buffers and an rx ring of BURST buffers.
 * Before the timed section the "NIC" writes the next flows' precomputed
 * headers and RSS queue into the ring's buffers (its DMA, which costs a
 * real system's CPU nothing) and counts them per queue (the NIC's
 * counters); timed: rx burst = take the ring's buffers, refill the ring
 * from the pool; work = swap the
 * MACs; tx = per-queue buffer of TX_BULK packets whose flush "transmits"
 * (counts) and recycles the buffers (with one queue the burst moves into
 * the buffer in runs). Two TSC reads per burst.
 *
 * The strongest form found on the 2-vCPU EPYC VM (2026-11-27): -O3
 * -march=native, the pool and buffers in main's frame, the swap as one
 * 8-byte and one 4-byte load: 6.3-6.5 ticks per packet, where the first
 * version (globals, byte-wise swap, -O2) took 10.5-10.9 and -O2
 * -march=native 14.5.
 * Prints the median TSC ticks per packet over batches of 256 packets.
 *
 * usage: rtc PACKETS [BURST] [TX_BULK] [QUEUES]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#define DATA 2048
#define FLOWS 1024
#define HDR 42 /* Ethernet + IPv4 + UDP */
#define POOL 4096
#define MAXQ 64

struct mbuf { uint16_t len, queue; uint32_t rss; uint8_t data[DATA]; };
struct flow { uint8_t hdr[80]; uint8_t hdr_len; uint32_t rss; uint16_t queue; };

/* The pool, the tx buffers and their counters live in main's frame and the
 * flush is a macro: as globals (or behind a function taking them), every
 * byte store into a frame (uint8_t, which may alias anything) made gcc
 * reload the pool's and buffers' indices from memory: 10.5-10.9 ticks per
 * packet at -O2, 14.5 at -O2 -march=native, against 8.x this way. */
#define FLUSH(q)                                                              \
    do {                                                                      \
        for (int i_ = 0; i_ < txn[q]; i_++) pool[pool_n++] = txb[q][i_];      \
        transmitted[q] += (uint64_t)txn[q];                                   \
        txn[q] = 0;                                                           \
    } while (0)

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: rtc PACKETS [BURST] [TX_BULK] [QUEUES]\n"); return 2; }
    uint64_t packets = strtoull(argv[1], 0, 10);
    int burst = argc > 2 ? atoi(argv[2]) : 32;
    int bulk = argc > 3 ? atoi(argv[3]) : 32;
    int queues = argc > 4 ? atoi(argv[4]) : 1;
    if (burst < 1 || burst > 1024 || bulk < 1 || bulk > 1024 || queues < 1 || queues > MAXQ) return 2;
    static struct flow flows[FLOWS];
    for (int i = 0; i < FLOWS; i++) {
        memset(flows[i].hdr, i, HDR);
        flows[i].hdr[12] = 0x08; flows[i].hdr[13] = 0x00;
        flows[i].hdr_len = HDR;
        flows[i].rss = (uint32_t)i * 2654435761u;
        flows[i].queue = (uint16_t)((flows[i].rss & 127) % queues);
    }
    static struct mbuf *txb[MAXQ][1024];
    int txn[MAXQ] = {0};
    uint64_t transmitted[MAXQ] = {0};
    struct mbuf *pool[POOL];
    int pool_n = POOL;
    for (int i = 0; i < POOL; i++) { pool[i] = calloc(1, sizeof(struct mbuf)); }
    struct mbuf *rx[1024], *ring[1024];
    uint64_t generated[MAXQ] = {0};
    for (int k = 0; k < burst; k++) ring[k] = pool[--pool_n];
    size_t nb = packets / 256 + 2, nbatches = 0;
    double *per = malloc(nb * sizeof(double));
    uint64_t acc = 0, accp = 0, remaining = packets;
    int next = 0;
    while (remaining > 0) {
        int n = remaining < (uint64_t)burst ? (int)remaining : burst;
        for (int k = 0; k < n; k++) { /* the NIC */
            struct mbuf *m = ring[k];
            struct flow *f = &flows[next];
            if (++next == FLOWS) next = 0;
            memcpy(m->data, f->hdr, 80);
            m->len = 60; m->rss = f->rss; m->queue = f->queue;
            generated[f->queue]++; /* the NIC's per-queue rx counter */
        }
        uint64_t t0 = __rdtsc();
        for (int k = 0; k < n; k++) rx[k] = ring[k];
        for (int k = 0; k < n; k++) ring[k] = pool[--pool_n];
        remaining -= n;
        for (int k = 0; k < n; k++) {
            /* One 8-byte and one 4-byte load, shifts, two stores. */
            uint8_t *d = rx[k]->data;
            uint64_t a; uint32_t b;
            memcpy(&a, d, 8); memcpy(&b, d + 8, 4);
            uint64_t na = (a >> 48) | ((uint64_t)b << 16) | (a << 48);
            uint32_t nb = (uint32_t)(a >> 16);
            memcpy(d, &na, 8); memcpy(d + 8, &nb, 4);
        }
        if (queues == 1) {
            /* One queue: the burst moves into its buffer in runs (one
             * copy per run, as commbench's loop does). */
            for (int k = 0; k < n;) {
                int take = bulk - txn[0] < n - k ? bulk - txn[0] : n - k;
                memcpy(&txb[0][txn[0]], &rx[k], (size_t)take * sizeof rx[0]);
                txn[0] += take; k += take;
                if (txn[0] >= bulk) FLUSH(0);
            }
        } else {
            for (int k = 0; k < n; k++) {
                int q = rx[k]->queue;
                txb[q][txn[q]++] = rx[k];
                if (txn[q] >= bulk) FLUSH(q);
            }
        }
        uint64_t t1 = __rdtsc();
        acc += t1 - t0; accp += n;
        if (accp >= 256) { per[nbatches++] = (double)acc / accp; acc = 0; accp = 0; }
    }
    for (int q = 0; q < queues; q++) FLUSH(q);
    uint64_t total = 0;
    for (int q = 0; q < queues; q++) total += transmitted[q];
    qsort(per, nbatches, sizeof(double), cmp);
    uint64_t gen_total = 0;
    for (int q = 0; q < MAXQ; q++) gen_total += generated[q];
    if (gen_total != packets) return 1;
    printf("packets %llu transmitted %llu ticks_per_packet_median %.2f batches %zu\n",
           (unsigned long long)packets, (unsigned long long)total,
           nbatches ? per[nbatches / 2] : 0.0, nbatches);
    return total == packets ? 0 : 1;
}
