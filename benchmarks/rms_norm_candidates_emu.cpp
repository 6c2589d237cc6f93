// The candidate rms_norm kernels (benchmarks/rms_norm_candidates.cuh) against the
// shipped ones (crates/ops/src/rms_norm/rms_norm.cu) on the CPU emulator: the same
// launch shape must give bit-identical outputs (forward y and inv_rms, backward dx and
// the dweight workspace), for every dtype combination the kernel table has, rows and
// rows per block that do and do not divide, and K packs per thread with and without
// the prefetch; a row longer than K packs per thread must be refused (nothing written).
// Built and run by .ci/cuda_emu.sh; prints one line per dtype and exits 1 on a mismatch.
//
//   g++ -std=c++17 -O2 -fno-extern-tls-init -Icuda/emu benchmarks/rms_norm_candidates_emu.cpp \
//       cuda/emu/cuda_emu.cpp -o target/rms_norm_candidates_emu && target/rms_norm_candidates_emu
#include "cuda_emu.h"

#include "../crates/ops/src/rms_norm/rms_norm.cu"
#include "rms_norm_candidates.cuh"

#include <cstdio>
#include <random>
#include <vector>

XFR_EMU_DYNAMIC_SHARED(smem_raw)

static int failures = 0, checks = 0;

template <class F>
struct Body {
    F f;
    static void run(void* a) { static_cast<Body*>(a)->f(); }
};
template <class F>
static void launch(F f, unsigned grid, unsigned block, unsigned smem = 0) {
    Body<F> b{f};
    dim3 g, bl;
    g.x = grid, bl.x = block;
    xfr_emu::run_grid(&Body<F>::run, &b, g, bl, smem);
}

template <class T>
static std::vector<T> random_vec(std::mt19937& g, size_t len, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<T> v(len);
    for (auto& e : v) e = Narrow<T>::of(d(g));
    return v;
}

template <class T>
static std::vector<T> poisoned(size_t len) {
    std::vector<T> v(len);
    memset(v.data(), 0xA5, len * sizeof(T));
    return v;
}

template <class T>
static bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

#define CHECK(c, ...)                                    \
    do {                                                 \
        ++checks;                                        \
        if (!(c)) {                                      \
            printf("rms_norm_candidates_emu: FAIL: " __VA_ARGS__); \
            printf("\n");                                \
            failures++;                                  \
        }                                                \
    } while (0)

// One shape, one thread count, candidates with K packs per thread (and prefetch or not)
// against the shipped kernels launched with the same threads.
template <class X, class W, class Y, class ACC, int K, bool PF>
static void check_shape(const char* name, std::mt19937& g, u64 rows, u64 n, unsigned threads, unsigned blocks) {
    const double eps = 1e-5;
    auto x = random_vec<X>(g, rows * n, -2.f, 2.f);
    auto dy = random_vec<Y>(g, rows * n, -2.f, 2.f);
    auto w = random_vec<W>(g, n, 0.5f, 1.5f);
    const u64 xb = rows * n * sizeof(X), yb = rows * n * sizeof(Y), wb = n * sizeof(W);

    auto y0 = poisoned<Y>(rows * n), y1 = poisoned<Y>(rows * n);
    auto i0 = poisoned<ACC>(rows), i1 = poisoned<ACC>(rows);
    launch([&] { rms_norm_fwd<X, W, Y, ACC>(x.data(), xb, w.data(), wb, y0.data(), yb, i0.data(), rows * sizeof(ACC), rows, n, eps); },
           (unsigned)rows, threads);
    launch([&] { rms_norm_fwd_rows<X, W, Y, ACC, K, PF>(x.data(), xb, w.data(), wb, y1.data(), yb, i1.data(), rows * sizeof(ACC), rows, n, eps); },
           blocks, threads);
    CHECK(same_bytes(y0, y1) && same_bytes(i0, i1), "%s fwd rows %llu n %llu threads %u blocks %u K %d prefetch %d",
          name, rows, n, threads, blocks, K, PF);

    auto dx0 = poisoned<X>(rows * n), dx1 = poisoned<X>(rows * n);
    auto ws0 = poisoned<ACC>(blocks * n), ws1 = poisoned<ACC>(blocks * n);
    const u64 wsb = blocks * n * sizeof(ACC);
    const unsigned smem = n * sizeof(ACC) <= 48 * 1024 - 64 * sizeof(ACC) ? (unsigned)(n * sizeof(ACC)) : 0;
    launch([&] { rms_norm_bwd<X, W, Y, ACC>(dy.data(), yb, x.data(), xb, w.data(), wb, dx0.data(), xb, ws0.data(), wsb, rows, n, eps); },
           blocks, threads, smem);
    launch([&] { rms_norm_bwd_rows<X, W, Y, ACC, K, PF>(dy.data(), yb, x.data(), xb, w.data(), wb, dx1.data(), xb, ws1.data(), wsb, rows, n, eps); },
           blocks, threads);
    CHECK(same_bytes(dx0, dx1) && same_bytes(ws0, ws1), "%s bwd rows %llu n %llu threads %u blocks %u K %d prefetch %d",
          name, rows, n, threads, blocks, K, PF);
}

// A row longer than K packs per thread: both candidates write nothing.
template <class X, class W, class Y, class ACC>
static void check_refusal(const char* name, std::mt19937& g) {
    constexpr int L = Lanes<X, W, Y>::L;
    const u64 rows = 2, n = (u64)L * 32 * 2 + L;  // 65 packs, 32 threads x 2 packs
    auto x = random_vec<X>(g, rows * n, -2.f, 2.f);
    auto w = random_vec<W>(g, n, 0.5f, 1.5f);
    auto y = poisoned<Y>(rows * n), y0 = poisoned<Y>(rows * n);
    auto inv = poisoned<ACC>(rows), inv0 = poisoned<ACC>(rows);
    auto dx = poisoned<X>(rows * n), dx0 = poisoned<X>(rows * n);
    auto ws = poisoned<ACC>(n), ws0 = poisoned<ACC>(n);
    launch([&] { rms_norm_fwd_rows<X, W, Y, ACC, 2, true>(x.data(), rows * n * sizeof(X), w.data(), n * sizeof(W), y.data(), rows * n * sizeof(Y), inv.data(), rows * sizeof(ACC), rows, n, 1e-5); },
           1, 32);
    launch([&] { rms_norm_bwd_rows<X, W, Y, ACC, 2, true>(y.data(), rows * n * sizeof(Y), x.data(), rows * n * sizeof(X), w.data(), n * sizeof(W), dx.data(), rows * n * sizeof(X), ws.data(), n * sizeof(ACC), rows, n, 1e-5); },
           1, 32);
    CHECK(same_bytes(y, y0) && same_bytes(inv, inv0) && same_bytes(dx, dx0) && same_bytes(ws, ws0),
          "%s: a row of 65 packs on 32 threads x 2 packs was not refused", name);
}

template <class X, class W, class Y, class ACC>
static void check_dtypes(const char* name) {
    std::mt19937 g(7);
    constexpr int L = Lanes<X, W, Y>::L;
    const int before = failures, checks_before = checks;
    // (rows, packs per row, threads, blocks): one pack per thread; a row shorter than
    // the block; packs that do not fill the last k; more blocks than rows; rows that
    // blocks do not divide.
    const u64 shapes[][4] = {{1, 32, 32, 1}, {3, 20, 32, 3}, {37, 128, 64, 5}, {16, 200, 64, 4}, {9, 256, 32, 16}};
    for (auto& s : shapes) {
        const u64 rows = s[0], n = s[1] * L;
        const unsigned t = (unsigned)s[2], b = (unsigned)s[3];
        const u64 per = (s[1] + t - 1) / t;  // packs per thread the row needs
        if (per <= 1) {
            check_shape<X, W, Y, ACC, 1, false>(name, g, rows, n, t, b);
            check_shape<X, W, Y, ACC, 1, true>(name, g, rows, n, t, b);
        }
        if (per <= 4) {
            check_shape<X, W, Y, ACC, 4, false>(name, g, rows, n, t, b);
            check_shape<X, W, Y, ACC, 4, true>(name, g, rows, n, t, b);
        }
        check_shape<X, W, Y, ACC, 8, true>(name, g, rows, n, t, b);
    }
    check_refusal<X, W, Y, ACC>(name, g);
    printf("rms_norm_candidates_emu: %s: %d checks, %s\n", name, checks - checks_before,
           failures == before ? "bit-identical to the shipped kernels" : "MISMATCH");
}

int main() {
    // Combinations of the kernel table (x, weight, y = their promotion, accumulator:
    // float, or double when x or weight is).
    check_dtypes<bhalf_t, bhalf_t, bhalf_t, float>("bf16");
    check_dtypes<half_t, half_t, half_t, float>("f16");
    check_dtypes<float, float, float, float>("f32");
    check_dtypes<double, double, double, double>("f64");
    check_dtypes<bhalf_t, float, float, float>("bf16 x, f32 weight");
    check_dtypes<half_t, bhalf_t, float, float>("f16 x, bf16 weight");
    check_dtypes<float, double, double, double>("f32 x, f64 weight");
    if (failures) {
        printf("rms_norm_candidates_emu: %d of %d checks FAILED\n", failures, checks);
        return 1;
    }
    printf("rms_norm_candidates_emu: all %d checks passed\n", checks);
    return 0;
}
