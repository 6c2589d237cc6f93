/* The cost of one 800 KB copy (N = 1e5 float64, the copies of `python_op out`)
 * on this machine: glibc memcpy with the L2 evicted first (an 8 MB memset), the
 * same with AVX non-temporal stores, and memcpy hot (right after the same copy).
 * Medians of 300 of each, in this thread's CPU time. See docs/performance.md.
 *
 *   gcc -O2 -mavx2 benchmarks/copy_cost.c -o /tmp/copy_cost && /tmp/copy_cost
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 800000, EVICT = 8 << 20, REPS = 300 };

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__attribute__((noinline)) static void copy_nt(char *d, const char *s, size_t n) {
    for (size_t i = 0; i < n; i += 64) {
        __m256i a = _mm256_loadu_si256((const void *)(s + i)), b = _mm256_loadu_si256((const void *)(s + i + 32));
        _mm256_stream_si256((void *)(d + i), a);
        _mm256_stream_si256((void *)(d + i + 32), b);
    }
    _mm_sfence();
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    char *src = malloc(N + 64) + 16; /* malloc's alignment, as NumPy's buffers */
    char *dst = (char *)(((uintptr_t)malloc(N + 128) + 63) & ~(uintptr_t)63); /* NT stores need 32-byte alignment */
    char *evict = malloc(EVICT);
    static double t[3][REPS];
    memset(src, 1, N);
    memset(dst, 2, N);
    for (int k = 0; k < REPS; k++) {
        for (int w = 0; w < 3; w++) {
            if (w < 2)
                memset(evict, k, EVICT);
            else
                memcpy(dst, src, N);
            double t0 = now_us();
            if (w == 1)
                copy_nt(dst, src, N);
            else
                memcpy(dst, src, N);
            t[w][k] = now_us() - t0;
        }
    }
    for (int w = 0; w < 3; w++)
        qsort(t[w], REPS, sizeof(double), cmp);
    printf("800 KB: memcpy after evicting L2 %.1f us, NT stores after evicting L2 %.1f us, memcpy hot %.1f us\n",
           t[0][REPS / 2], t[1][REPS / 2], t[2][REPS / 2]);
    return 0;
}
