// Kernel times of crates/ops's CUDA kernels with CUDA events (no JAX, no host
// dispatch in the figures): rms_norm_fwd in bfloat16 and float32 at rows of 4096 over
// threads per row, against a 16-byte copy kernel; a warp-per-row forward for
// comparison; kepler<float> in 1e7 elements with its error against kepler<double>.
// The launch shapes crates/ops/src/rms_norm/cuda.rs picks come from these figures.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o gpu_kernels benchmarks/gpu_kernels.cu && ./gpu_kernels
//   (add -prec-div=false to see what the float division costs kepler<float>)
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "../crates/ops/src/rms_norm/rms_norm.cu"
#include "../crates/ops/src/kepler/kepler.cu"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1);} } while (0)

template <class X, class W, class Y, class ACC, int L, int PPL>
__global__ void fwd_warp(const void* x_, const void* w_, void* y_, void* inv_, u64 rows, u64 n, double eps_) {
    typedef Pack<X, L> PX; typedef Pack<W, L> PW; typedef Pack<Y, L> PY;
    const X* x = (const X*)x_; const W* w = (const W*)w_; Y* y = (Y*)y_; ACC* inv = (ACC*)inv_;
    const u64 np = n / L;
    const unsigned lane = threadIdx.x & 31u;
    const u64 wpb = blockDim.x >> 5;
    const u64 total = (u64)gridDim.x * wpb;
    const ACC eps = (ACC)eps_, n_acc = (ACC)n;
    const PW* wp = (const PW*)w;
    for (u64 r = (u64)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += total) {
        const PX* xp = (const PX*)(x + r * n);
        PY* yp = (PY*)(y + r * n);
        PX keep[PPL];
        ACC s = 0;
#pragma unroll
        for (int k = 0; k < PPL; ++k) {
            const u64 j = lane + (u64)k * 32;
            if (j < np) { keep[k] = xp[j];
#pragma unroll
                for (int i = 0; i < L; ++i) { ACC v = Widen<ACC>::of(keep[k].v[i]); s += v * v; } }
        }
        s = warp_sum(s);
        const ACC iv = ACC(1) / sqrt_acc(s / n_acc + eps);
        if (lane == 0) inv[r] = iv;
#pragma unroll
        for (int k = 0; k < PPL; ++k) {
            const u64 j = lane + (u64)k * 32;
            if (j < np) { const PW q = wp[j]; PY o;
#pragma unroll
                for (int i = 0; i < L; ++i) o.v[i] = Narrow<Y>::of(Widen<ACC>::of(keep[k].v[i]) * iv * Widen<ACC>::of(q.v[i]));
                yp[j] = o; }
        }
    }
}

__global__ void copy16(const uint4* a, uint4* b, u64 n) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) b[i] = a[i];
}

struct Timer { cudaEvent_t a, b; Timer() { cudaEventCreate(&a); cudaEventCreate(&b); }
  template <class F> float us(F f, int reps = 50) { f(); CK(cudaDeviceSynchronize()); cudaEventRecord(a); for (int i = 0; i < reps; ++i) f(); cudaEventRecord(b); CK(cudaEventSynchronize(b)); float ms; cudaEventElapsedTime(&ms, a, b); return ms * 1000 / reps; } };


#include <cmath>
int main() {
    Timer T;
    const u64 rows = 8192, n = 4096;
    const u64 xb = rows * n * 2;
    void *x, *y, *w, *inv;
    CK(cudaMalloc(&x, xb * 4)); CK(cudaMalloc(&y, xb * 4)); CK(cudaMalloc(&w, n * 8)); CK(cudaMalloc(&inv, rows * 8));
    std::vector<unsigned short> h(rows * n, 0x3f80); CK(cudaMemcpy(x, h.data(), xb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(w, h.data(), n * 2, cudaMemcpyHostToDevice));
    float c = T.us([&] { copy16<<<132 * 16, 256>>>((const uint4*)x, (uint4*)y, xb / 16); });
    printf("copy %llu MB: %.1f us = %.0f GB/s (read+write)\n", xb >> 20, c, 2.0 * xb / c / 1e3);
    for (int th : {32, 64, 128, 256}) {
        float t4 = T.us([&] { rms_norm_fwd<bhalf_t, bhalf_t, bhalf_t, float><<<rows, th>>>(x, xb, w, n * 2, y, xb, inv, rows * 4, rows, n, 1e-5); });
        CK(cudaGetLastError());
        printf("fwd bf16 %4d threads per row: %.1f us = %.0f GB/s\n", th, t4, 2.0 * xb / t4 / 1e3);
    }
    for (int wpb : {1, 4}) {
        float t = T.us([&] { fwd_warp<bhalf_t, bhalf_t, bhalf_t, float, 8, 16><<<(rows + wpb - 1) / wpb, 32 * wpb>>>(x, w, y, inv, rows, n, 1e-5); });
        CK(cudaGetLastError());
        printf("fwd bf16 warp-per-row, %d warps per block: %.1f us = %.0f GB/s\n", wpb, t, 2.0 * xb / t / 1e3);
    }
    for (int th : {128, 256, 512}) {
        float t4 = T.us([&] { rms_norm_fwd<float, float, float, float><<<rows, th>>>(x, xb * 2, w, n * 4, y, xb * 2, inv, rows * 4, rows, n, 1e-5); });
        printf("fwd f32 %4d threads per row: %.1f us = %.0f GB/s\n", th, t4, 4.0 * xb / t4 / 1e3);
    }
    // kepler f32 against the f64 kernel on the same (float) inputs
    const u64 kn = 10000000;
    void *m, *e, *s, *cc, *md, *ed, *sd, *cd;
    CK(cudaMalloc(&m, kn * 4)); CK(cudaMalloc(&e, kn * 4)); CK(cudaMalloc(&s, kn * 4)); CK(cudaMalloc(&cc, kn * 4));
    CK(cudaMalloc(&md, kn * 8)); CK(cudaMalloc(&ed, kn * 8)); CK(cudaMalloc(&sd, kn * 8)); CK(cudaMalloc(&cd, kn * 8));
    std::vector<float> fm(kn), fe(kn); srand(1);
    for (u64 i = 0; i < kn; ++i) {
        fm[i] = (float)(20.0 * rand() / RAND_MAX - 10);
        fe[i] = (float)((i % 4 == 0) ? 0.99 + 0.0099 * rand() / RAND_MAX : 0.99 * rand() / RAND_MAX);
        if (i % 4 == 0) fm[i] = (float)(0.2 * rand() / RAND_MAX - 0.1);
    }
    std::vector<double> dm(fm.begin(), fm.end()), de(fe.begin(), fe.end());
    CK(cudaMemcpy(m, fm.data(), kn * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(e, fe.data(), kn * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(md, dm.data(), kn * 8, cudaMemcpyHostToDevice)); CK(cudaMemcpy(ed, de.data(), kn * 8, cudaMemcpyHostToDevice));
    float t = T.us([&] { kepler<float><<<4096, 256>>>(m, kn * 4, e, kn * 4, s, kn * 4, cc, kn * 4, kn); });
    kepler<double><<<4096, 256>>>(md, kn * 8, ed, kn * 8, sd, kn * 8, cd, kn * 8, kn);
    CK(cudaDeviceSynchronize());
    std::vector<float> hs(kn), hc(kn); std::vector<double> hsd(kn), hcd(kn);
    CK(cudaMemcpy(hs.data(), s, kn * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(hc.data(), cc, kn * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hsd.data(), sd, kn * 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(hcd.data(), cd, kn * 8, cudaMemcpyDeviceToHost));
    double es = 0, ec = 0, eb = 0;
    for (u64 i = 0; i < kn; ++i) {
        es = fmax(es, fabs(hs[i] - hsd[i])); ec = fmax(ec, fabs(hc[i] - hcd[i]));
        const double E = atan2((double)hs[i], (double)hc[i]);
        double r = dm[i] - E + de[i] * sin(E);  // backward error, modulo 2 pi
        r = remainder(r, 2 * M_PI);
        eb = fmax(eb, fabs(r));
    }
    printf("kepler f32 1e7: %.1f us = %.1f G/s; max |sin - f64| %.2e, max |cos - f64| %.2e, max backward error %.2e\n", t, kn / t / 1e3, es, ec, eb);
    return 0;
}
