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
 * (counts) and recycles the buffers. Two TSC reads per burst.
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

static struct mbuf *pool[POOL];
static int pool_n;
static struct mbuf *txb[MAXQ][1024];
static int txn[MAXQ];
static uint64_t transmitted[MAXQ];

static void flush(int q) {
    for (int i = 0; i < txn[q]; i++) { transmitted[q]++; pool[pool_n++] = txb[q][i]; }
    txn[q] = 0;
}

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
    for (int i = 0; i < POOL; i++) { pool[i] = calloc(1, sizeof(struct mbuf)); }
    pool_n = POOL;
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
            uint8_t tmp[6];
            memcpy(tmp, rx[k]->data, 6);
            memcpy(rx[k]->data, rx[k]->data + 6, 6);
            memcpy(rx[k]->data + 6, tmp, 6);
        }
        for (int k = 0; k < n; k++) {
            int q = rx[k]->queue;
            txb[q][txn[q]++] = rx[k];
            if (txn[q] >= bulk) flush(q);
        }
        uint64_t t1 = __rdtsc();
        acc += t1 - t0; accp += n;
        if (accp >= 256) { per[nbatches++] = (double)acc / accp; acc = 0; accp = 0; }
    }
    for (int q = 0; q < queues; q++) flush(q);
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
