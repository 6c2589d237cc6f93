// RMS normalization over the trailing axes, forward and backward, on the GPU.
//
// Part of xla-ffi-rs: the kernels behind the CUDA handlers of
// `xla_ffi_rs.rms_norm_fwd` and `xla_ffi_rs.rms_norm_bwd`
// (crates/ops/src/rms_norm/cuda.rs). Compiled at run time with NVRTC, once per CUDA
// context and dtype combination: the kernels are templates on four element types,
//   X (x, dx), W (weight, dweight), Y (y, dy) and ACC (inv_rms and the accumulator),
// each one of half_t, bhalf_t, float, double, and the launcher asks NVRTC for the
// instantiation it needs (a name expression such as `rms_norm_fwd<half_t, float,
// float, float>`; the list is the kernel table crates/ops/src/rms_norm/kernel_table.rs). The same file is compiled by g++ with cuda/emu/cuda_emu.h for the
// CPU emulator. The data is viewed as `rows` rows of `n` elements (row-major).
//
//   forward:  inv_rms[r] = 1 / sqrt(mean_j x[r,j]^2 + eps);  y = x * inv_rms * w
//   backward: dx[r,j] = r w_j dy_j - x_j r^3 / n * sum_k dy_k w_k x_k
//             dweight_j = sum_r dy[r,j] x[r,j] inv_rms[r]
//             with r = inv_rms[r] recomputed from x, in the pass over the row that
//             sums dy w x (the backward takes eps, not the forward's inv_rms)
//
// Determinism: every sum has a fixed order that depends on the shapes only (never on
// timing, atomics or the number of SMs). dweight is reduced in two launches: block b
// of `rms_norm_bwd` sums its contiguous slice of rows, in row order, into row b of a
// workspace (blocks x n, accumulator type); `rms_norm_dweight` then adds the
// workspace rows in a fixed tree. The result is bit-identical run to run.
//
// ABI: kernels are templates, not `extern "C"`. The launcher looks each one up by
// the lowered name of `static_cast<void(*)(params)>(kernel<types>)`, with the
// parameter list its arguments imply, so a signature mismatch is a compile error.
// Every buffer comes with its size in bytes; kernels return early, writing nothing,
// if the sizes they were given do not cover the extents they would touch.

typedef unsigned long long u64;

// 16-bit floats as raw bits: no cuda_fp16.h / cuda_bf16.h needed.
struct half_t { unsigned short bits; };
struct bhalf_t { unsigned short bits; };

// ---- widening (exact) ----
// The three PTX instructions the kernels use. The CPU emulator (cuda/emu/cuda_emu.h,
// which defines XFR_CUDA_EMU) gives them their PTX ISA semantics in C++.
#ifndef XFR_CUDA_EMU
__device__ __forceinline__ float ptx_cvt_f32_f16(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ unsigned short ptx_cvt_rn_f16_f32(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ unsigned ptx_dynamic_smem_size() {
    unsigned v;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(v));
    return v;
}
#endif

__device__ __forceinline__ float to_f32(half_t h) { return ptx_cvt_f32_f16(h.bits); }
__device__ __forceinline__ float to_f32(bhalf_t h) { return __uint_as_float(((unsigned)h.bits) << 16); }
__device__ __forceinline__ float to_f32(float v) { return v; }

template <class A> struct Widen;
template <> struct Widen<float> {
    template <class T> static __device__ __forceinline__ float of(T v) { return to_f32(v); }
    static __device__ __forceinline__ float of(double v) { return (float)v; }  // never used by the rules
};
template <> struct Widen<double> {
    template <class T> static __device__ __forceinline__ double of(T v) { return (double)to_f32(v); }
    static __device__ __forceinline__ double of(double v) { return v; }
};

// ---- narrowing (round to nearest even; from double without double rounding) ----
// double -> float rounded to odd: a later rounding to a format with at most 22
// significand bits is then correctly rounded.
__device__ __forceinline__ float f64_to_f32_odd(double d) {
    float f = __double2float_rz(d);
    if ((double)f != d && d == d) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f;
}
__device__ __forceinline__ unsigned short f32_to_f16_bits(float f) { return ptx_cvt_rn_f16_f32(f); }
__device__ __forceinline__ unsigned short f32_to_bf16_bits(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

template <class T> struct Narrow;
template <> struct Narrow<float> {
    static __device__ __forceinline__ float of(float v) { return v; }
    static __device__ __forceinline__ float of(double v) { return (float)v; }
};
template <> struct Narrow<double> {
    static __device__ __forceinline__ double of(float v) { return (double)v; }
    static __device__ __forceinline__ double of(double v) { return v; }
};
template <> struct Narrow<half_t> {
    static __device__ __forceinline__ half_t of(float v) { half_t h; h.bits = f32_to_f16_bits(v); return h; }
    static __device__ __forceinline__ half_t of(double v) { half_t h; h.bits = f32_to_f16_bits(f64_to_f32_odd(v)); return h; }
};
template <> struct Narrow<bhalf_t> {
    static __device__ __forceinline__ bhalf_t of(float v) { bhalf_t h; h.bits = f32_to_bf16_bits(v); return h; }
    static __device__ __forceinline__ bhalf_t of(double v) { bhalf_t h; h.bits = f32_to_bf16_bits(f64_to_f32_odd(v)); return h; }
};

__device__ __forceinline__ float sqrt_acc(float v) { return sqrtf(v); }
__device__ __forceinline__ double sqrt_acc(double v) { return sqrt(v); }

// ---- deterministic block reduction (fixed shuffle tree) ----
template <class ACC>
__device__ __forceinline__ ACC warp_sum(ACC v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The sum of `v` over the block, returned to every thread. `sh` holds 32 values.
// Starts with a barrier, so it may be called repeatedly with the same `sh`.
// blockDim.x must be a multiple of 32.
template <class ACC>
__device__ __forceinline__ ACC block_sum(ACC v, ACC* sh) {
    v = warp_sum(v);
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    const unsigned warps = blockDim.x >> 5;
    return warp_sum(lane < warps ? sh[lane] : ACC(0));
}

__device__ __forceinline__ bool fits(u64 count, u64 elem_size, u64 bytes) {
    return count == 0 || (count <= bytes / elem_size);
}

// ---- packed access: L consecutive elements in one aligned load or store ----
// L = 16 bytes / the widest of x's, weight's and y's element types, so their packs are
// at most 16 bytes (ld.global.v4 / v2 on the GPU); a pack of the accumulator type may
// be 32 bytes (two accesses). The packed path is taken when n is a multiple of L and
// every base address is aligned to its pack: then every row starts aligned.
template <class T, int L>
struct alignas(sizeof(T) * L > 16 ? 16 : sizeof(T) * L) Pack {
    T v[L];
};

template <class A, class B, class C>
struct Lanes {
    static constexpr int wide = sizeof(A) > sizeof(B) ? (sizeof(A) > sizeof(C) ? sizeof(A) : sizeof(C))
                                                      : (sizeof(B) > sizeof(C) ? sizeof(B) : sizeof(C));
    static constexpr int L = 16 / wide;
};

template <class T, int L>
__device__ __forceinline__ bool pack_aligned(const void* p) {
    return ((u64)p % alignof(Pack<T, L>)) == 0;
}

// Packs of a row each thread keeps in registers between the two passes over it
// (the rest, for rows longer than KEEP * blockDim.x packs, is read again).
#define KEEP 4

// Forward. One block per row (grid-stride over rows). `y` may alias `x` (same
// dtype): each element is read (second pass) and written by the same thread, after
// the whole row was read in the first pass.
template <class X, class W, class Y, class ACC, int L>
__device__ __forceinline__ void fwd_rows_packed(const X* x, const W* w, Y* y, ACC* inv, u64 rows, u64 n, ACC eps,
                                                ACC* sh) {
    typedef Pack<X, L> PX;
    typedef Pack<W, L> PW;
    typedef Pack<Y, L> PY;
    const u64 np = n / L;
    const ACC n_acc = (ACC)(n > 0 ? n : 1);
    const PW* wp = reinterpret_cast<const PW*>(w);
    for (u64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const PX* xp = reinterpret_cast<const PX*>(x + r * n);
        PY* yp = reinterpret_cast<PY*>(y + r * n);
        PX keep[KEEP];
        ACC s = ACC(0);
        for (int k = 0; k < KEEP; ++k) {
            const u64 j = threadIdx.x + (u64)k * blockDim.x;
            if (j < np) {
                keep[k] = xp[j];
                for (int i = 0; i < L; ++i) {
                    const ACC v = Widen<ACC>::of(keep[k].v[i]);
                    s += v * v;
                }
            }
        }
        for (u64 j = threadIdx.x + (u64)KEEP * blockDim.x; j < np; j += blockDim.x) {
            const PX p = xp[j];
            for (int i = 0; i < L; ++i) {
                const ACC v = Widen<ACC>::of(p.v[i]);
                s += v * v;
            }
        }
        s = block_sum(s, sh);
        const ACC iv = ACC(1) / sqrt_acc(s / n_acc + eps);
        if (threadIdx.x == 0) inv[r] = iv;
        for (int k = 0; k < KEEP; ++k) {
            const u64 j = threadIdx.x + (u64)k * blockDim.x;
            if (j < np) {
                const PW q = wp[j];
                PY o;
                for (int i = 0; i < L; ++i) o.v[i] = Narrow<Y>::of(Widen<ACC>::of(keep[k].v[i]) * iv * Widen<ACC>::of(q.v[i]));
                yp[j] = o;
            }
        }
        for (u64 j = threadIdx.x + (u64)KEEP * blockDim.x; j < np; j += blockDim.x) {
            const PX p = xp[j];
            const PW q = wp[j];
            PY o;
            for (int i = 0; i < L; ++i) o.v[i] = Narrow<Y>::of(Widen<ACC>::of(p.v[i]) * iv * Widen<ACC>::of(q.v[i]));
            yp[j] = o;
        }
    }
}

template <class X, class W, class Y, class ACC>
__global__ void rms_norm_fwd(const void* x_, u64 x_bytes, const void* w_, u64 w_bytes, void* y_, u64 y_bytes,
                             void* inv_, u64 inv_bytes, u64 rows, u64 n, double eps_) {
    if (!(fits(rows * n, sizeof(X), x_bytes) && fits(n, sizeof(W), w_bytes) && fits(rows * n, sizeof(Y), y_bytes) &&
          fits(rows, sizeof(ACC), inv_bytes)) || (blockDim.x & 31u) != 0)
        return;
    const X* x = static_cast<const X*>(x_);
    const W* w = static_cast<const W*>(w_);
    Y* y = static_cast<Y*>(y_);
    ACC* inv = static_cast<ACC*>(inv_);
    __shared__ ACC sh[32];
    const ACC eps = (ACC)eps_;
    constexpr int L = Lanes<X, W, Y>::L;
    if (n % L == 0 && pack_aligned<X, L>(x) && pack_aligned<W, L>(w) && pack_aligned<Y, L>(y)) {
        fwd_rows_packed<X, W, Y, ACC, L>(x, w, y, inv, rows, n, eps, sh);
        return;
    }
    const ACC n_acc = (ACC)(n > 0 ? n : 1);
    for (u64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const X* xr = x + r * n;
        Y* yr = y + r * n;
        ACC s = ACC(0);
        for (u64 j = threadIdx.x; j < n; j += blockDim.x) {
            const ACC v = Widen<ACC>::of(xr[j]);
            s += v * v;
        }
        s = block_sum(s, sh);
        const ACC iv = ACC(1) / sqrt_acc(s / n_acc + eps);
        if (threadIdx.x == 0) inv[r] = iv;
        for (u64 j = threadIdx.x; j < n; j += blockDim.x) {
            yr[j] = Narrow<Y>::of(Widen<ACC>::of(xr[j]) * iv * Widen<ACC>::of(w[j]));
        }
    }
}

// The rows [r0, r1) of the backward with packed access (see fwd_rows_packed): thread t
// owns packs j = t, t + blockDim.x, ..., i.e. columns j*L .. j*L + L - 1, and alone
// accumulates their dweight, in row order.
template <class X, class W, class Y, class ACC, int L>
__device__ __forceinline__ void bwd_rows_packed(const Y* dy, const X* x, const W* w, X* dx, ACC* acc, u64 r0, u64 r1,
                                                u64 n, ACC eps, ACC* sh) {
    typedef Pack<X, L> PX;
    typedef Pack<W, L> PW;
    typedef Pack<Y, L> PY;
    typedef Pack<ACC, L> PA;
    const u64 np = n / L;
    const ACC n_acc = (ACC)(n > 0 ? n : 1);
    const PW* wp = reinterpret_cast<const PW*>(w);
    PA* ap = reinterpret_cast<PA*>(acc);
    for (u64 r = r0; r < r1; ++r) {
        const PY* dyp = reinterpret_cast<const PY*>(dy + r * n);
        const PX* xp = reinterpret_cast<const PX*>(x + r * n);
        PX* dxp = reinterpret_cast<PX*>(dx + r * n);
        PX kx[KEEP];
        PY kdy[KEEP];
        ACC s = ACC(0), sq = ACC(0);
        for (int k = 0; k < KEEP; ++k) {
            const u64 j = threadIdx.x + (u64)k * blockDim.x;
            if (j < np) {
                kx[k] = xp[j];
                kdy[k] = dyp[j];
                const PW q = wp[j];
                for (int i = 0; i < L; ++i) {
                    const ACC xj = Widen<ACC>::of(kx[k].v[i]);
                    s += Widen<ACC>::of(kdy[k].v[i]) * Widen<ACC>::of(q.v[i]) * xj;
                    sq += xj * xj;
                }
            }
        }
        for (u64 j = threadIdx.x + (u64)KEEP * blockDim.x; j < np; j += blockDim.x) {
            const PX p = xp[j];
            const PY d = dyp[j];
            const PW q = wp[j];
            for (int i = 0; i < L; ++i) {
                const ACC xj = Widen<ACC>::of(p.v[i]);
                s += Widen<ACC>::of(d.v[i]) * Widen<ACC>::of(q.v[i]) * xj;
                sq += xj * xj;
            }
        }
        s = block_sum(s, sh);
        sq = block_sum(sq, sh);
        const ACC rr = ACC(1) / sqrt_acc(sq / n_acc + eps);
        const ACC c = rr * (rr * (rr * s / n_acc));  // no overflow of rr^3 (kernel.rs)
        for (int k = 0; k < KEEP; ++k) {
            const u64 j = threadIdx.x + (u64)k * blockDim.x;
            if (j < np) {
                const PW q = wp[j];
                PX o;
                PA a = ap[j];
                for (int i = 0; i < L; ++i) {
                    const ACC dyj = Widen<ACC>::of(kdy[k].v[i]);
                    const ACC xj = Widen<ACC>::of(kx[k].v[i]);
                    o.v[i] = Narrow<X>::of(rr * Widen<ACC>::of(q.v[i]) * dyj - xj * c);
                    a.v[i] += dyj * xj * rr;
                }
                dxp[j] = o;
                ap[j] = a;
            }
        }
        for (u64 j = threadIdx.x + (u64)KEEP * blockDim.x; j < np; j += blockDim.x) {
            const PX p = xp[j];
            const PY d = dyp[j];
            const PW q = wp[j];
            PX o;
            PA a = ap[j];
            for (int i = 0; i < L; ++i) {
                const ACC dyj = Widen<ACC>::of(d.v[i]);
                const ACC xj = Widen<ACC>::of(p.v[i]);
                o.v[i] = Narrow<X>::of(rr * Widen<ACC>::of(q.v[i]) * dyj - xj * c);
                a.v[i] += dyj * xj * rr;
            }
            dxp[j] = o;
            ap[j] = a;
        }
    }
}

// Backward, part 1: dx, and per-block partial sums of dweight.
//
// Block b handles rows [b*per, min((b+1)*per, rows)) with per = ceil(rows/blocks),
// where blocks = gridDim.x = the workspace's row count. Thread t owns columns
// j = t, t + blockDim.x, ...: it alone accumulates dweight_j over the block's rows,
// in row order, in dynamic shared memory when the launch gave n accumulators of it,
// else directly in its workspace row; either way the same sums in the same order.
// Finally the block's partial sums are in workspace row b.
template <class X, class W, class Y, class ACC>
__global__ void rms_norm_bwd(const void* dy_, u64 dy_bytes, const void* x_, u64 x_bytes, const void* w_, u64 w_bytes,
                             void* dx_, u64 dx_bytes, void* ws_, u64 ws_bytes, u64 rows, u64 n, double eps_) {
    const u64 blocks = gridDim.x;
    if (!(fits(rows * n, sizeof(Y), dy_bytes) && fits(rows * n, sizeof(X), x_bytes) && fits(n, sizeof(W), w_bytes) &&
          fits(rows * n, sizeof(X), dx_bytes) && fits(blocks * n, sizeof(ACC), ws_bytes)) ||
        (blockDim.x & 31u) != 0)
        return;
    const Y* dy = static_cast<const Y*>(dy_);
    const X* x = static_cast<const X*>(x_);
    const W* w = static_cast<const W*>(w_);
    X* dx = static_cast<X*>(dx_);
    ACC* ws = static_cast<ACC*>(ws_);

    extern __shared__ unsigned char smem_raw[];
    __shared__ ACC sh[32];
    const unsigned smem_bytes = ptx_dynamic_smem_size();
    const bool in_smem = n <= smem_bytes / sizeof(ACC);
    ACC* acc = in_smem ? reinterpret_cast<ACC*>(smem_raw) : ws + blockIdx.x * n;

    for (u64 j = threadIdx.x; j < n; j += blockDim.x) acc[j] = ACC(0);

    const u64 per = (rows + blocks - 1) / blocks;
    const u64 r0 = blockIdx.x * per;
    const u64 r1 = r0 + per < rows ? r0 + per : rows;
    const ACC n_acc = (ACC)(n > 0 ? n : 1);
    const ACC eps = (ACC)eps_;
    constexpr int L = Lanes<X, W, Y>::L;
    if (n % L == 0 && pack_aligned<Y, L>(dy) && pack_aligned<X, L>(x) && pack_aligned<W, L>(w) &&
        pack_aligned<X, L>(dx) && pack_aligned<ACC, L>(acc)) {
        bwd_rows_packed<X, W, Y, ACC, L>(dy, x, w, dx, acc, r0, r1, n, eps, sh);
    } else {
        for (u64 r = r0; r < r1; ++r) {
            const Y* dyr = dy + r * n;
            const X* xr = x + r * n;
            X* dxr = dx + r * n;
            ACC s = ACC(0), sq = ACC(0);
            for (u64 j = threadIdx.x; j < n; j += blockDim.x) {
                const ACC xj = Widen<ACC>::of(xr[j]);
                s += Widen<ACC>::of(dyr[j]) * Widen<ACC>::of(w[j]) * xj;
                sq += xj * xj;
            }
            s = block_sum(s, sh);
            sq = block_sum(sq, sh);
            // As the forward computes it, from the same sum of squares.
            const ACC rr = ACC(1) / sqrt_acc(sq / n_acc + eps);
            const ACC c = rr * (rr * (rr * s / n_acc));  // no overflow of rr^3 (kernel.rs)
            for (u64 j = threadIdx.x; j < n; j += blockDim.x) {
                const ACC dyj = Widen<ACC>::of(dyr[j]);
                const ACC xj = Widen<ACC>::of(xr[j]);
                dxr[j] = Narrow<X>::of(rr * Widen<ACC>::of(w[j]) * dyj - xj * c);
                acc[j] += dyj * xj * rr;
            }
        }
    }
    // The packed path's threads own other columns than this loop's.
    __syncthreads();
    if (in_smem) {
        ACC* out = ws + blockIdx.x * n;
        for (u64 j = threadIdx.x; j < n; j += blockDim.x) out[j] = acc[j];
    }
}

// Backward, part 2: dweight_j = the workspace's column j summed in a fixed tree.
// Block (32, RED_Y) threads, grid ceil(n / 32): thread (tx, ty) sums rows
// b = ty, ty + RED_Y, ... of column blockIdx.x*32 + tx in order; then thread (tx, 0)
// adds the RED_Y partial sums in order.
#define RED_Y 16
template <class X, class W, class Y, class ACC>
__global__ void rms_norm_dweight(const void* ws_, u64 ws_bytes, void* dw_, u64 dw_bytes, u64 blocks, u64 n) {
    if (!(fits(blocks * n, sizeof(ACC), ws_bytes) && fits(n, sizeof(W), dw_bytes)) || blockDim.x != 32 ||
        blockDim.y != RED_Y)
        return;
    const ACC* ws = static_cast<const ACC*>(ws_);
    W* dw = static_cast<W*>(dw_);
    __shared__ ACC part[RED_Y][33];
    const u64 j = (u64)blockIdx.x * 32 + threadIdx.x;
    ACC s = ACC(0);
    if (j < n) {
        for (u64 b = threadIdx.y; b < blocks; b += RED_Y) s += ws[b * n + j];
    }
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && j < n) {
        ACC t = ACC(0);
        for (int k = 0; k < RED_Y; ++k) t += part[k][threadIdx.x];
        dw[j] = Narrow<W>::of(t);
    }
}
