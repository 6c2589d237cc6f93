// The kernel of the CUDA handler example in docs/gpu.md (compiled there as a doc
// test of xla-ffi with the `cuda` feature, which embeds this file). Each buffer
// arrives as its address and its size in bytes, as `xla_ffi::cuda::Arg` passes it.
template <class T>
__global__ void scale(const void* x, unsigned long long x_bytes, void* y, unsigned long long y_bytes,
                      unsigned long long n) {
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(y);
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = T(2) * in[i];
    }
}
