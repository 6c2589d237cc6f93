// Candidate rms_norm kernels, timed against the shipped ones on a GPU by
// benchmarks/gpu_kernels.cu and checked bit for bit against them on the CPU by
// benchmarks/rms_norm_candidates_emu.cpp (in .ci/cuda_emu.sh). Not shipped: a
// candidate that wins on a GPU moves into crates/ops/src/rms_norm/rms_norm.cu.
// Include rms_norm.cu first (Pack, Lanes, Widen, Narrow, warp_sum, sqrt_acc).
//
// What the fastest published RMSNorm kernels do that the shipped backward does not
// (QuACK's, and Apex's and Liger's backward): the loads of the next row are in flight
// while the block reduces the current one, and a thread's share of the weight and of
// the `dweight` partial sums stays in registers for all of the block's rows. The
// shipped backward reads a row, waits at two block reductions (four barriers), then
// computes and stores, with the next row's loads issued only after that; it re-reads
// the weight for every row and keeps the `dweight` sums in shared memory. The
// candidates here:
//
// * rms_norm_fwd_rows / rms_norm_bwd_rows<..., K, PREFETCH>: each thread holds its K
//   packs of a row in registers (the whole row: rows longer than K packs per thread
//   are refused, writing nothing), its K packs of the weight and (backward) its K
//   packs of `dweight` sums for all of the block's rows; both sums of a row are reduced
//   in one pass (block_sum2: one pair of barriers); with PREFETCH the next row's packs
//   are loaded before the current row's reduction.
//
// Every sum is the shipped kernel's, in the same order, when the block has as many
// threads (thread t owns packs t, t + blockDim.x, ...; its row sums run over them in
// that order; the block and warp trees are the same): outputs and the workspace are
// bit-identical to the shipped kernels'. The backward's block b handles rows
// [b*per, (b+1)*per) into workspace row b, as the shipped one does, so
// rms_norm_dweight finishes either.

// The sums of `a` and of `b` over the block, each with block_sum's tree (so the same
// bits as two block_sum calls) but one pair of barriers. `sh` holds 64 values.
template <class ACC>
__device__ __forceinline__ void block_sum2(ACC& a, ACC& b, ACC* sh) {
    a = warp_sum(a);
    b = warp_sum(b);
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) {
        sh[warp] = a;
        sh[32 + warp] = b;
    }
    __syncthreads();
    const unsigned warps = blockDim.x >> 5;
    a = warp_sum(lane < warps ? sh[lane] : ACC(0));
    b = warp_sum(lane < warps ? sh[32 + lane] : ACC(0));
}

// Loads this thread's K packs of row `r` (j = t + k * blockDim.x < np).
template <class T, int L, int K>
__device__ __forceinline__ void load_row(Pack<T, L> (&dst)[K], const T* base, u64 r, u64 n, u64 np) {
    const Pack<T, L>* p = reinterpret_cast<const Pack<T, L>*>(base + r * n);
    for (int k = 0; k < K; ++k) {
        const u64 j = threadIdx.x + (u64)k * blockDim.x;
        if (j < np) dst[k] = p[j];
    }
}

// The rows block b handles: [r0, r1), `per` = ceil(rows / gridDim.x) each.
__device__ __forceinline__ void block_rows(u64 rows, u64& r0, u64& r1) {
    const u64 per = (rows + gridDim.x - 1) / gridDim.x;
    r0 = blockIdx.x * per;
    if (r0 > rows) r0 = rows;
    r1 = r0 + per < rows ? r0 + per : rows;
}

// Forward over the block's contiguous rows (grid = any number of blocks), the row in
// registers. Same arguments as rms_norm_fwd.
template <class X, class W, class Y, class ACC, int K, bool PREFETCH>
__global__ void rms_norm_fwd_rows(const void* x_, u64 x_bytes, const void* w_, u64 w_bytes, void* y_, u64 y_bytes,
                                  void* inv_, u64 inv_bytes, u64 rows, u64 n, double eps_) {
    constexpr int L = Lanes<X, W, Y>::L;
    typedef Pack<X, L> PX;
    typedef Pack<W, L> PW;
    typedef Pack<Y, L> PY;
    const u64 np = n / L;
    const X* x = static_cast<const X*>(x_);
    const W* w = static_cast<const W*>(w_);
    Y* y = static_cast<Y*>(y_);
    ACC* inv = static_cast<ACC*>(inv_);
    if (!(fits(rows * n, sizeof(X), x_bytes) && fits(n, sizeof(W), w_bytes) && fits(rows * n, sizeof(Y), y_bytes) &&
          fits(rows, sizeof(ACC), inv_bytes)) || (blockDim.x & 31u) != 0 || n % L != 0 || np > (u64)K * blockDim.x ||
        !(pack_aligned<X, L>(x) && pack_aligned<W, L>(w) && pack_aligned<Y, L>(y)))
        return;
    __shared__ ACC sh[64];
    const ACC eps = (ACC)eps_, n_acc = (ACC)(n > 0 ? n : 1);
    u64 r0, r1;
    block_rows(rows, r0, r1);
    PW q[K];
    load_row<W, L, K>(q, w, 0, n, np);
    PX cx[K], nx[K];
    if (r0 < r1) load_row<X, L, K>(cx, x, r0, n, np);
    for (u64 r = r0; r < r1; ++r) {
        ACC s = ACC(0), unused = ACC(0);
        for (int k = 0; k < K; ++k) {
            if (threadIdx.x + (u64)k * blockDim.x < np) {
                for (int i = 0; i < L; ++i) {
                    const ACC v = Widen<ACC>::of(cx[k].v[i]);
                    s += v * v;
                }
            }
        }
        if (PREFETCH && r + 1 < r1) load_row<X, L, K>(nx, x, r + 1, n, np);
        block_sum2(s, unused, sh);
        const ACC iv = ACC(1) / sqrt_acc(s / n_acc + eps);
        if (threadIdx.x == 0) inv[r] = iv;
        PY* yp = reinterpret_cast<PY*>(y + r * n);
        for (int k = 0; k < K; ++k) {
            const u64 j = threadIdx.x + (u64)k * blockDim.x;
            if (j < np) {
                PY o;
                for (int i = 0; i < L; ++i) o.v[i] = Narrow<Y>::of(Widen<ACC>::of(cx[k].v[i]) * iv * Widen<ACC>::of(q[k].v[i]));
                yp[j] = o;
            }
        }
        if (r + 1 < r1) {
            if (PREFETCH) {
                for (int k = 0; k < K; ++k) cx[k] = nx[k];
            } else {
                load_row<X, L, K>(cx, x, r + 1, n, np);
            }
        }
    }
}

// Backward part 1, the row in registers. Same arguments, workspace layout and
// rows per block as rms_norm_bwd; rms_norm_dweight finishes it.
template <class X, class W, class Y, class ACC, int K, bool PREFETCH>
__global__ void rms_norm_bwd_rows(const void* dy_, u64 dy_bytes, const void* x_, u64 x_bytes, const void* w_, u64 w_bytes,
                                  void* dx_, u64 dx_bytes, void* ws_, u64 ws_bytes, u64 rows, u64 n, double eps_) {
    constexpr int L = Lanes<X, W, Y>::L;
    typedef Pack<X, L> PX;
    typedef Pack<W, L> PW;
    typedef Pack<Y, L> PY;
    typedef Pack<ACC, L> PA;
    const u64 np = n / L;
    const Y* dy = static_cast<const Y*>(dy_);
    const X* x = static_cast<const X*>(x_);
    const W* w = static_cast<const W*>(w_);
    X* dx = static_cast<X*>(dx_);
    ACC* ws = static_cast<ACC*>(ws_);
    if (!(fits(rows * n, sizeof(Y), dy_bytes) && fits(rows * n, sizeof(X), x_bytes) && fits(n, sizeof(W), w_bytes) &&
          fits(rows * n, sizeof(X), dx_bytes) && fits((u64)gridDim.x * n, sizeof(ACC), ws_bytes)) ||
        (blockDim.x & 31u) != 0 || n % L != 0 || np > (u64)K * blockDim.x ||
        !(pack_aligned<Y, L>(dy) && pack_aligned<X, L>(x) && pack_aligned<W, L>(w) && pack_aligned<X, L>(dx) &&
          pack_aligned<ACC, L>(ws)))
        return;
    __shared__ ACC sh[64];
    const ACC eps = (ACC)eps_, n_acc = (ACC)(n > 0 ? n : 1);
    u64 r0, r1;
    block_rows(rows, r0, r1);
    PW q[K];
    PA a[K];
    load_row<W, L, K>(q, w, 0, n, np);
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < L; ++i) a[k].v[i] = ACC(0);
    PX cx[K], nx[K];
    PY cd[K], nd[K];
    if (r0 < r1) {
        load_row<X, L, K>(cx, x, r0, n, np);
        load_row<Y, L, K>(cd, dy, r0, n, np);
    }
    for (u64 r = r0; r < r1; ++r) {
        ACC s = ACC(0), sq = ACC(0);
        for (int k = 0; k < K; ++k) {
            if (threadIdx.x + (u64)k * blockDim.x < np) {
                for (int i = 0; i < L; ++i) {
                    const ACC xj = Widen<ACC>::of(cx[k].v[i]);
                    s += Widen<ACC>::of(cd[k].v[i]) * Widen<ACC>::of(q[k].v[i]) * xj;
                    sq += xj * xj;
                }
            }
        }
        if (PREFETCH && r + 1 < r1) {
            load_row<X, L, K>(nx, x, r + 1, n, np);
            load_row<Y, L, K>(nd, dy, r + 1, n, np);
        }
        block_sum2(s, sq, sh);
        const ACC rr = ACC(1) / sqrt_acc(sq / n_acc + eps);
        const ACC c = rr * (rr * (rr * s / n_acc));  // no overflow of rr^3 (kernel.rs)
        PX* dxp = reinterpret_cast<PX*>(dx + r * n);
        for (int k = 0; k < K; ++k) {
            const u64 j = threadIdx.x + (u64)k * blockDim.x;
            if (j < np) {
                PX o;
                for (int i = 0; i < L; ++i) {
                    const ACC dyj = Widen<ACC>::of(cd[k].v[i]);
                    const ACC xj = Widen<ACC>::of(cx[k].v[i]);
                    o.v[i] = Narrow<X>::of(rr * Widen<ACC>::of(q[k].v[i]) * dyj - xj * c);
                    a[k].v[i] += dyj * xj * rr;
                }
                dxp[j] = o;
            }
        }
        if (r + 1 < r1) {
            if (PREFETCH) {
                for (int k = 0; k < K; ++k) {
                    cx[k] = nx[k];
                    cd[k] = nd[k];
                }
            } else {
                load_row<X, L, K>(cx, x, r + 1, n, np);
                load_row<Y, L, K>(cd, dy, r + 1, n, np);
            }
        }
    }
    PA* out = reinterpret_cast<PA*>(ws + blockIdx.x * n);
    for (int k = 0; k < K; ++k) {
        const u64 j = threadIdx.x + (u64)k * blockDim.x;
        if (j < np) out[j] = a[k];
    }
}
