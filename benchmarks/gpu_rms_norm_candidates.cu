// The shipped rms_norm kernels against the candidates of rms_norm_candidates.cuh on a
// GPU, timed with CUDA events (no JAX, no host dispatch in the figures), as a fraction
// of a 16-byte copy kernel's bandwidth measured in the same run. For each dtype (bf16,
// f32) and row length, the shipped forward and backward (+ rms_norm_dweight) with the
// launch shape crates/ops/src/rms_norm/cuda.rs picks, then every candidate shape:
// packs per thread K (threads = the row's packs / K), prefetch on or off, and the
// number of row blocks (one per row for the forward as shipped, 2, 4 or 8 per SM, the
// shipped rows/16 for the backward). Each candidate's outputs are compared with the
// shipped kernel's: `=` bit-identical (same threads: the same sums in the same order),
// else the largest difference of y / dx / dweight relative to the largest |value|.
// The last lines give the best shape per pass and dtype.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o gpu_rms_norm_candidates benchmarks/gpu_rms_norm_candidates.cu
//   ./gpu_rms_norm_candidates            # about a minute on an H100
//   python cuda/emu/run_cu.py benchmarks/gpu_rms_norm_candidates.cu --quick   # on the CPU emulator
//
// The candidates give the shipped bits on the CPU emulator (benchmarks/rms_norm_candidates_emu.cpp,
// in CI); this is where they are timed.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include <cuda_runtime.h>
#include "../crates/ops/src/rms_norm/rms_norm.cu"
#include "rms_norm_candidates.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at line %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)

__global__ void copy16(const uint4* a, uint4* b, u64 n) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) b[i] = a[i];
}

// Deterministic pseudo-random values in [lo, hi) of type T.
template <class T>
__global__ void fill(T* p, u64 n, unsigned seed, float lo, float hi) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
        p[i] = Narrow<T>::of(lo + (hi - lo) * (h >> 8) * (1.0f / 16777216.0f));
    }
}

static float host_f32(float v) { return v; }
static float host_f32(bhalf_t v) { unsigned u = (unsigned)v.bits << 16; float f; memcpy(&f, &u, 4); return f; }

// --quick: small shapes, one timed call (a check that the program runs, no figure).
static bool g_quick = false;

struct Timer {
    cudaEvent_t a, b;
    Timer() { cudaEventCreate(&a); cudaEventCreate(&b); }
    // Microseconds per call of `f`, the median of 5 runs of `reps` calls.
    // A launch the device refuses (too many registers for the block, say) gives -1
    // and leaves `failed` saying why; any later error stops the program.
    std::string failed;
    template <class F> float us(F f, int reps = 30) {
        f();
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) { failed = cudaGetErrorString(e); return -1; }
        CK(cudaDeviceSynchronize());
        if (g_quick) reps = 1;
        std::vector<float> t;
        for (int k = 0; k < (g_quick ? 1 : 5); ++k) {
            cudaEventRecord(a);
            for (int i = 0; i < reps; ++i) f();
            cudaEventRecord(b); CK(cudaEventSynchronize(b));
            float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1000 / reps);
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    }
};

template <class T>
static std::vector<T> to_host(const void* d, u64 n) {
    std::vector<T> h(n);
    CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// "=" when bit-identical, else max |a - b| / max |a|.
template <class T>
static std::string compare(const std::vector<T>& a, const std::vector<T>& b) {
    if (memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0) return "=";
    double d = 0, m = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        d = fmax(d, fabs((double)host_f32(a[i]) - host_f32(b[i])));
        m = fmax(m, fabs((double)host_f32(a[i])));
    }
    char s[32];
    snprintf(s, sizeof s, "%.1e", m > 0 ? d / m : d);
    return s;
}

struct Best { float us = 1e30f; std::string what; };

static int sms() { int d, n; CK(cudaGetDevice(&d)); CK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, d)); return n; }

// The shipped launch shapes (crates/ops/src/rms_norm/cuda.rs: row_block, bwd_workspace_rows).
static unsigned row_block(u64 n, int lanes, bool fwd, unsigned max) {
    const u64 per = (lanes > 1 && n % lanes == 0) ? (u64)lanes * ((fwd && lanes >= 8) ? 8 : 4) : 8;
    u64 t = (n + per - 1) / per;
    t = (t + 31) / 32 * 32;
    return (unsigned)std::min<u64>(std::max<u64>(t, 32), max);
}
// The block counts a candidate is timed with: `first` (the shipped kernel's), then 2, 4
// and 8 per SM, each once.
static std::vector<u64> grids(u64 first, int sms) {
    std::vector<u64> g{first};
    for (u64 k : {2, 4, 8})
        if (std::find(g.begin(), g.end(), k * sms) == g.end()) g.push_back(k * sms);
    return g;
}
static unsigned bwd_blocks(u64 rows) { return (unsigned)std::min<u64>(std::max<u64>((rows + 15) / 16, 1), 1024); }

template <class T, int K, bool PF> struct FwdRows {
    static void launch(unsigned g, unsigned t, const void* x, u64 xb, const void* w, u64 wb, void* y, void* inv, u64 rows, u64 n) {
        rms_norm_fwd_rows<T, T, T, float, K, PF><<<g, t>>>(x, xb, w, wb, y, xb, inv, rows * 4, rows, n, 1e-5);
    }
};
template <class T, int K, bool PF> struct BwdRows {
    static void launch(unsigned g, unsigned t, const void* dy, const void* x, u64 xb, const void* w, u64 wb, void* dx, void* ws, u64 rows, u64 n) {
        rms_norm_bwd_rows<T, T, T, float, K, PF><<<g, t>>>(dy, xb, x, xb, w, wb, dx, xb, ws, (u64)g * n * 4, rows, n, 1e-5);
    }
};

template <class T>
static void sweep(const char* name, u64 rows, u64 n, float copy_gbs, std::vector<std::string>& summary) {
    constexpr int L = Lanes<T, T, T>::L;
    const u64 np = n / L, xb = rows * n * sizeof(T), wb = n * sizeof(T);
    const int S = sms();
    void *x, *dy, *w, *y, *inv, *dx, *ws, *dw;
    const u64 max_blocks = std::max<u64>(bwd_blocks(rows), (u64)8 * S);
    CK(cudaMalloc(&x, xb)); CK(cudaMalloc(&dy, xb)); CK(cudaMalloc(&w, wb)); CK(cudaMalloc(&y, xb));
    CK(cudaMalloc(&inv, rows * 4)); CK(cudaMalloc(&dx, xb)); CK(cudaMalloc(&ws, max_blocks * n * 4)); CK(cudaMalloc(&dw, wb));
    fill<T><<<1024, 256>>>((T*)x, rows * n, 1, -2.f, 2.f);
    fill<T><<<1024, 256>>>((T*)dy, rows * n, 2, -2.f, 2.f);
    fill<T><<<64, 256>>>((T*)w, n, 3, 0.5f, 1.5f);
    CK(cudaDeviceSynchronize());
    Timer T_;
    const double fwd_bytes = 2.0 * xb + wb + rows * 4, bwd_bytes = 3.0 * xb + 2.0 * wb;
    auto line = [&](const char* pass, const std::string& what, float us, double bytes, const std::string& cmp, Best& best) {
        const double gbs = bytes / us / 1e3;
        printf("%-4s %-5s %6llux%-6llu %-34s %8.1f us %6.0f GB/s %4.0f%% of copy  %s\n", pass, name,
               (unsigned long long)rows, (unsigned long long)n, what.c_str(), us, gbs, 100 * gbs / copy_gbs, cmp.c_str());
        if (us < best.us) { best.us = us; best.what = what; }
    };
    char what[96];

    // ---- forward ----
    Best bf;
    const unsigned tf = row_block(n, L, true, 1024);
    auto shipped_fwd = [&] { rms_norm_fwd<T, T, T, float><<<(unsigned)std::min<u64>(rows, 65535), tf>>>(x, xb, w, wb, y, xb, inv, rows * 4, rows, n, 1e-5); };
    float t0 = T_.us(shipped_fwd);
    if (t0 < 0) { printf("the shipped forward was not launched: %s\n", T_.failed.c_str()); exit(1); }
    const auto y_ref = to_host<T>(y, rows * n);
    snprintf(what, sizeof what, "shipped: %u threads, 1 row/block", tf);
    line("fwd", what, t0, fwd_bytes, "", bf);
    const float shipped_f = t0;
    // A candidate of K packs per thread at every block count of grids(first, S):
    // `clear` wipes its outputs, `run(g, threads)` launches it, `check` compares its
    // outputs with the shipped kernel's.
    auto try_shape = [&](const char* pass, int K, bool pf, u64 first, double bytes, Best& best, auto clear, auto run,
                         auto check) {
        const unsigned th = (unsigned)(((np + K - 1) / K + 31) / 32 * 32);
        if (th > 1024 || n % L) return;
        for (u64 g : grids(first, S)) {
            clear();
            const float t1 = T_.us([&] { run(g, th); });
            snprintf(what, sizeof what, "K=%d%s %u thr, %llu blocks", K, pf ? " pf" : "", th, (unsigned long long)g);
            if (t1 < 0) { printf("%-4s %-5s %-40s not launched: %s\n", pass, name, what, T_.failed.c_str()); continue; }
            line(pass, what, t1, bytes, check(), best);
        }
    };
    auto try_fwd = [&](auto kernel, int K, bool pf) {
        try_shape("fwd", K, pf, std::min<u64>(rows, 65535), fwd_bytes, bf, [&] { CK(cudaMemset(y, 0, xb)); },
                  [&](u64 g, unsigned th) { kernel(g, th, x, xb, w, wb, y, inv, rows, n); },
                  [&] { return compare(y_ref, to_host<T>(y, rows * n)); });
    };
    try_fwd(FwdRows<T, 1, true>::launch, 1, true);
    try_fwd(FwdRows<T, 2, true>::launch, 2, true);
    try_fwd(FwdRows<T, 4, false>::launch, 4, false);
    try_fwd(FwdRows<T, 4, true>::launch, 4, true);
    try_fwd(FwdRows<T, 8, false>::launch, 8, false);
    try_fwd(FwdRows<T, 8, true>::launch, 8, true);
    try_fwd(FwdRows<T, 16, false>::launch, 16, false);

    // ---- backward: rms_norm_bwd (or a candidate) + rms_norm_dweight ----
    Best bb;
    const unsigned B0 = bwd_blocks(rows), tb = row_block(n, L, false, 512);
    const unsigned smem = n * 4 <= 48 * 1024 - 256 ? (unsigned)(n * 4) : 0;
    auto dweight = [&](unsigned g) { rms_norm_dweight<T, T, T, float><<<(unsigned)((n + 31) / 32), dim3(32, RED_Y)>>>(ws, (u64)g * n * 4, dw, wb, g, n); };
    auto shipped_bwd = [&] {
        rms_norm_bwd<T, T, T, float><<<B0, tb, smem>>>(dy, xb, x, xb, w, wb, dx, xb, ws, (u64)B0 * n * 4, rows, n, 1e-5);
        dweight(B0);
    };
    t0 = T_.us(shipped_bwd);
    if (t0 < 0) { printf("the shipped backward was not launched: %s\n", T_.failed.c_str()); exit(1); }
    const auto dx_ref = to_host<T>(dx, rows * n);
    const auto dw_ref = to_host<T>(dw, n);
    snprintf(what, sizeof what, "shipped: %u threads, %u blocks", tb, B0);
    line("bwd", what, t0, bwd_bytes, "", bb);
    const float shipped_b = t0;
    auto try_bwd = [&](auto kernel, int K, bool pf) {
        try_shape("bwd", K, pf, B0, bwd_bytes, bb, [&] { CK(cudaMemset(dx, 0, xb)); },
                  [&](u64 g, unsigned th) { kernel(g, th, dy, x, xb, w, wb, dx, ws, rows, n); dweight(g); },
                  [&] { return compare(dx_ref, to_host<T>(dx, rows * n)) + " " + compare(dw_ref, to_host<T>(dw, n)); });
    };
    try_bwd(BwdRows<T, 1, true>::launch, 1, true);
    try_bwd(BwdRows<T, 2, false>::launch, 2, false);
    try_bwd(BwdRows<T, 2, true>::launch, 2, true);
    try_bwd(BwdRows<T, 4, false>::launch, 4, false);
    try_bwd(BwdRows<T, 4, true>::launch, 4, true);
    try_bwd(BwdRows<T, 8, false>::launch, 8, false);
    try_bwd(BwdRows<T, 16, false>::launch, 16, false);

    char s[256];
    snprintf(s, sizeof s, "%-5s %6llux%-6llu fwd shipped %4.0f%%, best %4.0f%% (%s); bwd shipped %4.0f%%, best %4.0f%% (%s)", name,
             (unsigned long long)rows, (unsigned long long)n, 100 * fwd_bytes / shipped_f / 1e3 / copy_gbs,
             100 * fwd_bytes / bf.us / 1e3 / copy_gbs, bf.what.c_str(), 100 * bwd_bytes / shipped_b / 1e3 / copy_gbs,
             100 * bwd_bytes / bb.us / 1e3 / copy_gbs, bb.what.c_str());
    summary.push_back(s);
    cudaFree(x); cudaFree(dy); cudaFree(w); cudaFree(y); cudaFree(inv); cudaFree(dx); cudaFree(ws); cudaFree(dw);
}

int main(int argc, char** argv) {
    g_quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    const u64 bytes = g_quick ? 1ull << 20 : 256ull << 20;
    void *a, *b;
    CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&b, bytes));
    Timer T_;
    const float c = T_.us([&] { copy16<<<p.multiProcessorCount * 16, 256>>>((const uint4*)a, (uint4*)b, bytes / 16); });
    const float copy_gbs = 2.0f * bytes / c / 1e3f;
    printf("%s, %d SMs; copy kernel %llu MiB: %.1f us = %.0f GB/s (read + write)\n", p.name, p.multiProcessorCount,
           bytes >> 20, c, copy_gbs);
    cudaFree(a); cudaFree(b);
    std::vector<std::string> summary;
    if (g_quick) {  // every code path on small shapes: rows that blocks do not divide, a long row
        sweep<bhalf_t>("bf16", 37, 512, copy_gbs, summary);
        sweep<float>("f32", 37, 512, copy_gbs, summary);
        sweep<bhalf_t>("bf16", 8, 4096, copy_gbs, summary);
    } else {
    // 8192 x 4096, then short and long rows at 2^25 elements.
    sweep<bhalf_t>("bf16", 8192, 4096, copy_gbs, summary);
    sweep<float>("f32", 8192, 4096, copy_gbs, summary);
    sweep<bhalf_t>("bf16", 32768, 1024, copy_gbs, summary);
    sweep<bhalf_t>("bf16", 2048, 16384, copy_gbs, summary);
    sweep<bhalf_t>("bf16", 512, 65536, copy_gbs, summary);
    sweep<float>("f32", 512, 65536, copy_gbs, summary);
    }
    printf("\nsummary (fraction of the copy kernel; candidates as K packs per thread, pf = prefetch, threads, blocks):\n");
    for (auto& s : summary) printf("%s\n", s.c_str());
    return 0;
}
