/* How a 64 KiB stream through a 4 MiB single-producer single-consumer
 * ring in C moves, by how each end touches the bytes: the two threads
 * pinned to CPUs 0 and 1, spinning, 64 KiB messages whose first 8 bytes
 * carry the sequence number (checked by the consumer).
 *
 * usage: ring_read COUNT PRODUCER CONSUMER
 *   PRODUCER  memcpy    glibc memcpy from a 64 KiB buffer into the ring
 *             avx512    64-byte loads and stores
 *             nt512     64-byte loads, non-temporal 64-byte stores
 *             fill      the message composed in the ring (stores only)
 *             cldemote  memcpy, then cldemote on every line written
 *   CONSUMER  memcpy    glibc memcpy out of the ring into a 64 KiB buffer
 *             fold16    read in place: XOR of every 16-byte word (SSE2)
 *             fold32    the same with 32-byte loads (AVX2)
 *             fold64    the same with 64-byte loads (AVX-512F)
 * prints: producer, consumer, msgs/s, GB/s.
 * build: cc -O2 -pthread -o ring_read ring_read.c
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CAP (4u << 20)
#define MSG 65536u

static uint8_t *ring;
static _Alignas(128) _Atomic uint64_t head;
static _Alignas(128) _Atomic uint64_t tail;
static uint64_t count;
static const char *prod_kind, *cons_kind;
static uint8_t src[MSG], dst[MSG];
static volatile uint64_t sink;

static void pin(int c) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(c, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static uint64_t fold16(const uint8_t *p) {
    __m128i a = _mm_setzero_si128(), b = a, c = a, d = a;
    for (size_t i = 0; i < MSG; i += 64) {
        a = _mm_xor_si128(a, _mm_loadu_si128((const void *)(p + i)));
        b = _mm_xor_si128(b, _mm_loadu_si128((const void *)(p + i + 16)));
        c = _mm_xor_si128(c, _mm_loadu_si128((const void *)(p + i + 32)));
        d = _mm_xor_si128(d, _mm_loadu_si128((const void *)(p + i + 48)));
    }
    return (uint64_t)_mm_cvtsi128_si64(_mm_xor_si128(_mm_xor_si128(a, b), _mm_xor_si128(c, d)));
}

__attribute__((target("avx2"))) static uint64_t fold32(const uint8_t *p) {
    __m256i a = _mm256_setzero_si256(), b = a;
    for (size_t i = 0; i < MSG; i += 64) {
        a = _mm256_xor_si256(a, _mm256_loadu_si256((const void *)(p + i)));
        b = _mm256_xor_si256(b, _mm256_loadu_si256((const void *)(p + i + 32)));
    }
    return (uint64_t)_mm256_extract_epi64(_mm256_xor_si256(a, b), 0);
}

__attribute__((target("avx512f"))) static uint64_t fold64(const uint8_t *p) {
    __m512i a = _mm512_setzero_si512(), b = a;
    for (size_t i = 0; i < MSG; i += 128) {
        a = _mm512_xor_si512(a, _mm512_loadu_si512((const void *)(p + i)));
        b = _mm512_xor_si512(b, _mm512_loadu_si512((const void *)(p + i + 64)));
    }
    return (uint64_t)_mm512_reduce_or_epi64(_mm512_xor_si512(a, b));
}

__attribute__((target("avx512f"))) static void copy64(uint8_t *d, const uint8_t *s, int nt) {
    for (size_t i = 0; i < MSG; i += 64) {
        __m512i v = _mm512_loadu_si512((const void *)(s + i));
        if (nt)
            _mm512_stream_si512((void *)(d + i), v);
        else
            _mm512_storeu_si512((void *)(d + i), v);
    }
    _mm_sfence();
}

__attribute__((target("cldemote"))) static void demote(uint8_t *d) {
    for (size_t o = 0; o < MSG; o += 64)
        _cldemote(d + o);
}

static void *producer(void *x) {
    (void)x;
    pin(0);
    uint64_t h = 0;
    for (uint64_t i = 0; i < count; i++) {
        while (h + MSG - atomic_load_explicit(&tail, memory_order_acquire) > CAP)
            _mm_pause();
        uint8_t *d = ring + (h & (CAP - 1));
        if (!strcmp(prod_kind, "avx512"))
            copy64(d, src, 0);
        else if (!strcmp(prod_kind, "nt512"))
            copy64(d, src, 1);
        else if (!strcmp(prod_kind, "fill"))
            memset(d, (int)i, MSG);
        else
            memcpy(d, src, MSG);
        memcpy(d, &i, 8);
        if (!strcmp(prod_kind, "cldemote"))
            demote(d);
        h += MSG;
        atomic_store_explicit(&head, h, memory_order_release);
    }
    return 0;
}

static void *consumer(void *x) {
    (void)x;
    pin(1);
    uint64_t t = 0, acc = 0;
    for (uint64_t i = 0; i < count; i++) {
        while (atomic_load_explicit(&head, memory_order_acquire) == t)
            _mm_pause();
        const uint8_t *s = ring + (t & (CAP - 1));
        uint64_t seq;
        memcpy(&seq, s, 8);
        if (seq != i) {
            fprintf(stderr, "message %llu carries %llu\n", (unsigned long long)i, (unsigned long long)seq);
            exit(1);
        }
        if (!strcmp(cons_kind, "fold16"))
            acc ^= fold16(s);
        else if (!strcmp(cons_kind, "fold32"))
            acc ^= fold32(s);
        else if (!strcmp(cons_kind, "fold64"))
            acc ^= fold64(s);
        else {
            memcpy(dst, s, MSG);
            acc ^= dst[i & (MSG - 1)];
        }
        t += MSG;
        atomic_store_explicit(&tail, t, memory_order_release);
    }
    sink = acc;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: ring_read COUNT PRODUCER CONSUMER (see the comment at the top)\n");
        return 2;
    }
    count = strtoull(argv[1], 0, 10);
    prod_kind = argv[2];
    cons_kind = argv[3];
    ring = aligned_alloc(4096, CAP);
    if (!ring || !count) return 2;
    memset(ring, 0, CAP);
    memset(src, 1, MSG);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_t p, q;
    pthread_create(&q, 0, consumer, 0);
    pthread_create(&p, 0, producer, 0);
    pthread_join(p, 0);
    pthread_join(q, 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    printf("%s %s %.0f msgs/s %.2f GB/s\n", prod_kind, cons_kind, count / s, count * (double)MSG / s / 1e9);
    free(ring);
    return 0;
}
