/* A 64 KiB stream through a 1 MiB single-producer single-consumer ring in
 * C, the two threads pinned to CPUs 0 and 1 and spinning: the plainest
 * form of what `data_channel_write mt 1 65532` does over shm, with the
 * producer copying each message into the ring by memcpy (mode 0, as
 * commbench does) or by non-temporal stores (mode 1, SSE2 streaming
 * stores that bypass the producer's cache), to tell what moving the bytes
 * between the two CPUs costs. usage: ring_stream COUNT MODE
 * prints: mode, msgs/s, us per message.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <emmintrin.h>
#define CAP (1<<20)
#define LEN 65536
static char *ring; static _Alignas(128) _Atomic uint64_t head; static _Alignas(128) _Atomic uint64_t tail;
static long N; static int mode;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
/* d 16-byte aligned, n a multiple of 64; the sfence orders the streaming
 * stores before the release store of head. */
static void nt_copy(char *d, const char *s, size_t n) {
    for (size_t i = 0; i < n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i)), b = _mm_loadu_si128((const __m128i *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32)), e = _mm_loadu_si128((const __m128i *)(s + i + 48));
        _mm_stream_si128((__m128i *)(d + i), a);
        _mm_stream_si128((__m128i *)(d + i + 16), b);
        _mm_stream_si128((__m128i *)(d + i + 32), c);
        _mm_stream_si128((__m128i *)(d + i + 48), e);
    }
    _mm_sfence();
}
static void *prod(void*a){pin(0);char *src=aligned_alloc(64,LEN);memset(src,3,LEN);uint64_t h=0;
  for(long i=0;i<N;i++){while(h+LEN-atomic_load_explicit(&tail,memory_order_acquire)>CAP)_mm_pause();
    char *d=ring+(h&(CAP-1)); if(mode==1) nt_copy(d,src,LEN); else memcpy(d,src,LEN); h+=LEN; atomic_store_explicit(&head,h,memory_order_release);}return 0;}
int main(int c,char**v){if(c<3){fprintf(stderr,"usage: ring_stream COUNT MODE\n");return 2;}N=atol(v[1]);mode=atoi(v[2]);ring=aligned_alloc(4096,CAP);memset(ring,0,CAP);char *dst=aligned_alloc(64,LEN);
  pthread_t t;double t0=now();pthread_create(&t,0,prod,0);pin(1);uint64_t tl=0;
  for(long i=0;i<N;i++){while(atomic_load_explicit(&head,memory_order_acquire)==tl)_mm_pause();memcpy(dst,ring+(tl&(CAP-1)),LEN);tl+=LEN;atomic_store_explicit(&tail,tl,memory_order_release);}
  pthread_join(t,0);double e=now()-t0;printf("mode %s %.0f msgs/s %.2f us/msg\n",mode?"nt-store":"memcpy",N/e,e/N*1e6);return 0;}
