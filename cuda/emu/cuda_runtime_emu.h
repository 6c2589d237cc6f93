// The part of the CUDA runtime API the GPU benchmarks under benchmarks/ use, on the
// CPU emulator (cuda_emu.h): device memory is host memory, a launch runs the grid on
// the emulator, events read a steady clock. With cuda/emu/run_cu.py, which rewrites
// `kernel<<<grid, block[, smem]>>>(args);` into emulator launches, a benchmark's .cu
// file compiles with g++ and runs on small shapes: its host code (allocation, launch
// shapes, comparisons, the report) is checked before it is taken to a GPU.
#pragma once
#include "cuda_emu.h"

#include <chrono>
#include <cstring>

typedef int cudaError_t;
enum { cudaSuccess = 0 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount };
struct uint4 { unsigned x, y, z, w; };
struct cudaDeviceProp { char name[256]; int multiProcessorCount; };
typedef std::chrono::steady_clock::time_point* cudaEvent_t;

// The SM count the emulated device reports (small, so that blocks-per-SM shapes stay small).
constexpr int kEmuSms = 4;

inline const char* cudaGetErrorString(cudaError_t) { return "emulated CUDA error"; }
inline cudaError_t cudaMalloc(void** p, size_t n) { *p = aligned_alloc(256, (n + 255) / 256 * 256); return *p ? cudaSuccess : 2; }
inline cudaError_t cudaFree(void* p) { free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemset(void* d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr, int) { *v = kEmuSms; return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
    snprintf(p->name, sizeof p->name, "CPU emulator");
    p->multiProcessorCount = kEmuSms;
    return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = new std::chrono::steady_clock::time_point(); return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e) { *e = std::chrono::steady_clock::now(); return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
    *ms = std::chrono::duration<float, std::milli>(*b - *a).count();
    return cudaSuccess;
}

namespace xfr_emu {
template <class F>
struct LaunchBody {
    F f;
    static void run(void* a) { static_cast<LaunchBody*>(a)->f(); }
};
inline dim3 to_dim3(dim3 d) { return d; }
inline dim3 to_dim3(unsigned long long x) { dim3 d; d.x = (unsigned)x; return d; }
// `kernel<<<grid, block, smem>>>(args)` as run_cu.py rewrites it.
template <class G, class B, class F>
inline void launch_rewritten(G grid, B block, unsigned long long smem, F f) {
    LaunchBody<F> body{f};
    run_grid(&LaunchBody<F>::run, &body, to_dim3(grid), to_dim3(block), (unsigned)smem);
}
}  // namespace xfr_emu
