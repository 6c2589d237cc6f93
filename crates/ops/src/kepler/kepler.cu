// Kepler's equation M = E - e sin E, solved elementwise on the GPU.
//
// Part of xla-ffi-rs: the kernels behind the CUDA handlers of `xla_ffi_rs.kepler` and
// of its derivative targets `xla_ffi_rs.kepler_tangent` and `kepler_cotangent`, and
// of the fused forward + tangent `xla_ffi_rs.kepler_jvp` (crates/ops/src/kepler/cuda.rs). It is compiled at run time with NVRTC, once per
// CUDA context, element type and kernel: the launcher asks NVRTC for `kepler<float>`,
// `kepler<double>`, `kepler_tangent<T>`, `kepler_cotangent<T>` or `kepler_jvp<T>` (a name expression,
// which instantiates the template), as the kernel table crates/ops/src/kepler/kernel_table.rs lists.
// The same file is compiled by g++ with cuda/emu/cuda_emu.h for the CPU emulator.
//
// Method (branch-light, fixed work per element, no data-dependent loop):
//   1. M is reduced to [-pi, pi] modulo the real 2*pi, in double also for float
//      input: below |M| = 2^27 with a three-part 2*pi (Cody-Waite, with FMA), from
//      2^27 on exactly in integer arithmetic (Payne-Hanek, kepler_reduce_large, the
//      twin of crates/ops/src/kepler/solver/reduce.rs), so every finite M is
//      solved; then folded to m = |M| in [0, pi] using E(-M) = -E(M).
//   2. Markley's starter (F. L. Markley, "Kepler equation solver", Celestial
//      Mechanics and Dynamical Astronomy 63, 1995): a cubic approximation solved in
//      closed form, accurate over the whole (m, e) domain, including the corner
//      e -> 1, m -> 0.
//   3. A fixed number of fifth-order corrections (Markley's Householder-type step):
//      one in float, two in double.
//   4. sin E and cos E of the final iterate come from the last sincos by a Taylor
//      rotation through the last (tiny) correction, so no extra sincos is needed.
// An eccentricity outside [0, 1), or NaN/inf input, gives NaN outputs.
//
// ABI: the kernel is a C++ template, not `extern "C"`. The Rust launcher asks NVRTC
// for the lowered name of `static_cast<void(*)(params)>(kepler<T>)`, with the
// parameter list its arguments imply, so a signature mismatch is a compile error,
// never a mis-typed launch. Every buffer comes with its size in bytes, and the kernel never
// touches memory beyond those sizes.

#ifdef __CUDACC__
#define KEPLER_HD __device__ __forceinline__
#else
// Host build (numerics check with a C++ compiler): plain inline functions.
#include <cmath>
#include <cstring>
#define KEPLER_HD inline
using std::sqrt; using std::cbrt; using std::fabs; using std::rint; using std::fma; using std::isnan;
#endif

typedef unsigned long long u64;

#ifdef __CUDACC__
KEPLER_HD double kepler_bits_f64(u64 b) { return __longlong_as_double((long long)b); }
KEPLER_HD float kepler_bits_f32(unsigned b) { return __uint_as_float(b); }
KEPLER_HD u64 kepler_f64_bits(double d) { return (u64)__double_as_longlong(d); }
#else
KEPLER_HD double kepler_bits_f64(u64 b) { double d; std::memcpy(&d, &b, 8); return d; }
KEPLER_HD float kepler_bits_f32(unsigned b) { float f; std::memcpy(&f, &b, 4); return f; }
KEPLER_HD u64 kepler_f64_bits(double d) { u64 b; std::memcpy(&b, &d, 8); return b; }
#endif

template <class T> struct KeplerConst;

template <> struct KeplerConst<double> {
    static KEPLER_HD double pi() { return 3.141592653589793; }
    static KEPLER_HD double inv_two_pi() { return 0.15915494309189535; }
    // 2*pi = A + B + C to about 1e-48.
    static KEPLER_HD double two_pi_a() { return 6.283185307179586; }
    static KEPLER_HD double two_pi_b() { return 2.4492935982947064e-16; }
    static KEPLER_HD double two_pi_c() { return -5.989539619436679e-33; }
    static KEPLER_HD double nan() { return kepler_bits_f64(0x7ff8000000000000ULL); }
    static const int steps = 2;
};

template <> struct KeplerConst<float> {
    static KEPLER_HD float pi() { return 3.14159274f; }
    static KEPLER_HD float nan() { return kepler_bits_f32(0x7fc00000u); }
    static const int steps = 1;
};

// 1 / (2 pi) in binary, 64 bits a word, most significant first, after one word of
// zeros: the table of crates/ops/src/kepler/solver/reduce.rs.
#ifdef __CUDACC__
__device__
#endif
static const u64 kepler_inv_two_pi_bits[21] = {
    0ULL,
    0x28BE60DB9391054AULL, 0x7F09D5F47D4D3770ULL, 0x36D8A5664F10E410ULL, 0x7F9458EAF7AEF158ULL,
    0x6DC91B8E909374B8ULL, 0x01924BBA82746487ULL, 0x3F877AC72C4A69CFULL, 0xBA208D7D4BAED121ULL,
    0x3A671C09AD17DF90ULL, 0x4E64758E60D4CE7DULL, 0x272117E2EF7E4A0EULL, 0xC7FE25FFF7816603ULL,
    0xFBCBC462D6829B47ULL, 0xDB4D9FB3C9F2C26DULL, 0xD3D18FD9A797FA8BULL, 0x5D49EEB1FAF97C5EULL,
    0xCF41CE7DE294A4BAULL, 0x9AFED7EC47E35742ULL, 0x1580CC11BF1EDAEAULL, 0xFC33EF0826BD0D87ULL,
};

// The high 64 bits of a * b (portable: the same code on the GPU, in the emulator
// and on the host).
KEPLER_HD u64 kepler_mul_hi(u64 a, u64 b) {
    const u64 a0 = a & 0xFFFFFFFFULL, a1 = a >> 32, b0 = b & 0xFFFFFFFFULL, b1 = b >> 32;
    const u64 p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    const u64 mid = (p00 >> 32) + (p01 & 0xFFFFFFFFULL) + (p10 & 0xFFFFFFFFULL);
    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

// Leading zeros of a nonzero v.
KEPLER_HD int kepler_clz(u64 v) {
    int z = 0;
    for (int sh = 32; sh > 0; sh >>= 1) {
        if ((v >> (64 - sh)) == 0) { z += sh; v <<= sh; }
    }
    return z;
}

// The 64 bits of the table starting at bit s (0 = the top bit of word 0).
KEPLER_HD u64 kepler_table_window(int s) {
    const int w = s >> 6, b = s & 63;
    const u64 hi = w < 21 ? kepler_inv_two_pi_bits[w] : 0;
    if (b == 0) return hi;
    const u64 lo = w + 1 < 21 ? kepler_inv_two_pi_bits[w + 1] : 0;
    return (hi << b) | (lo >> (64 - b));
}

// M reduced to [-pi, pi] exactly (Payne-Hanek): x = m 2^q, and the fraction of
// x / (2 pi) is that of m times the 256 bits of 1/(2 pi) from bit q + 1 on; the
// nearest-integer remainder times 2 pi (2 pi as a 64-bit fixed-point number) is the
// result, correctly rounded from a 128-bit product. NaN for infinite or NaN x.
KEPLER_HD double kepler_reduce_large(double x) {
    const u64 bits = kepler_f64_bits(x);
    const int biased = (int)((bits >> 52) & 0x7FF);
    const u64 frac = bits & ((1ULL << 52) - 1);
    if (biased == 0x7FF) return kepler_bits_f64(0x7ff8000000000000ULL);
    const u64 m = biased == 0 ? frac : (frac | (1ULL << 52));
    const int q = biased == 0 ? -1074 : biased - 1075;
    if (q < -64) return x;  // |x| < 2^-11: nothing to reduce
    const int s = q + 64;
    u64 acc[4];  // the low 256 bits of m * window, least significant first
    u64 carry = 0;
    for (int i = 0; i < 4; ++i) {
        const u64 w = kepler_table_window(s + 64 * (3 - i));
        u64 lo = m * w;
        u64 hi = kepler_mul_hi(m, w);
        lo += carry;
        hi += lo < carry ? 1 : 0;
        acc[i] = lo;
        carry = hi;
    }
    const bool negative = (acc[3] >> 63) != 0;  // fraction >= 1/2: round up, negate
    if (negative) {
        u64 c = 1;
        for (int i = 0; i < 4; ++i) {
            const u64 v = ~acc[i] + c;
            c = (c != 0 && v == 0) ? 1 : 0;
            acc[i] = v;
        }
    }
    int lz = 0;
    u64 top = 0;
    for (int i = 3; i >= 0; --i) {
        if (acc[i] != 0) {
            const int z = kepler_clz(acc[i]);
            const u64 below = i > 0 ? acc[i - 1] : 0;
            top = z == 0 ? acc[i] : ((acc[i] << z) | (below >> (64 - z)));
            lz += z;
            break;
        }
        lz += 64;
    }
    if (top == 0) return x < 0 ? -0.0 : 0.0;
    // |r| = top * (2 pi 2^61) * 2^(-125 - lz); the 128-bit product's high word has
    // at least 62 bits, so its bit 0 can carry the sticky bit of the low word.
    const u64 two_pi_fix61 = 0xC90FDAA22168C235ULL;
    const u64 ph = kepler_mul_hi(top, two_pi_fix61) | ((top * two_pi_fix61) != 0 ? 1 : 0);
    const double r = (double)ph * kepler_bits_f64((u64)(1023 - 61 - lz) << 52);
    return negative != (x < 0) ? -r : r;
}

// M reduced to [-pi, pi]: Cody-Waite with a three-part 2*pi (with FMA), exact below
// |M| = 2^27 (k < 2^25); the exact reduction beyond. A float M is reduced in double
// too: a float 2*pi in three parts leaves r far outside [-pi, pi] for |M| beyond
// about 1e7, and Markley's starter then overflows to NaN.
KEPLER_HD double kepler_reduce(double M) {
    typedef KeplerConst<double> K;
    if (fabs(M) >= 134217728.0) return kepler_reduce_large(M);
    const double k = rint(M * K::inv_two_pi());
    double r = fma(-k, K::two_pi_a(), M);
    r = fma(-k, K::two_pi_b(), r);
    return fma(-k, K::two_pi_c(), r);
}
KEPLER_HD float kepler_reduce(float M) { return (float)kepler_reduce((double)M); }

// Division. In float on the GPU: PTX div.full.f32 (at most 2 ulp, what NVRTC's
// --prec-div=false gives) instead of the IEEE division's longer sequence: on an H200
// the float solver took 86 us instead of 107 us per 1e7 elements with the same worst
// backward error (3.2e-7), since the correction step recovers the last bits. The
// emulator and the host build divide exactly; double always does.
#if defined(__CUDACC__) && !defined(XFR_CUDA_EMU)
KEPLER_HD float kepler_div(float a, float b) {
    float q;
    asm("div.full.f32 %0, %1, %2;" : "=f"(q) : "f"(a), "f"(b));
    return q;
}
#else
KEPLER_HD float kepler_div(float a, float b) { return a / b; }
#endif
KEPLER_HD double kepler_div(double a, double b) { return a / b; }

KEPLER_HD void kepler_sincos(double x, double* s, double* c) { sincos(x, s, c); }
KEPLER_HD void kepler_sincos(float x, float* s, float* c) { sincosf(x, s, c); }

// One fifth-order correction of E for f(E) = E - e sin E - m, given sE = sin E and
// cE = cos E; returns the step.
template <class T>
KEPLER_HD T kepler_step(T E, T e, T m, T sE, T cE) {
    const T f = E - e * sE - m;
    const T f1 = T(1) - e * cE;
    const T f2 = e * sE;
    const T f3 = e * cE;
    const T d3 = kepler_div(-f, f1 - kepler_div(T(0.5) * f * f2, f1));
    const T d4 = kepler_div(-f, f1 + d3 * (T(0.5) * f2 + d3 * f3 * T(1.0 / 6.0)));
    return kepler_div(-f, f1 + d4 * (T(0.5) * f2 + d4 * (f3 * T(1.0 / 6.0) - d4 * f2 * T(1.0 / 24.0))));
}

// Rotates (s, c) = (sin E, cos E) by a small angle d: (sin(E + d), cos(E + d)).
template <class T>
KEPLER_HD void kepler_rotate(T d, T* s, T* c) {
    const T d2 = d * d;
    const T sd = d * (T(1) - d2 * (T(1.0 / 6.0) - d2 * T(1.0 / 120.0)));
    const T cd = T(1) - d2 * (T(0.5) - d2 * (T(1.0 / 24.0) - d2 * T(1.0 / 720.0)));
    const T s0 = *s, c0 = *c;
    *s = s0 * cd + c0 * sd;
    *c = c0 * cd - s0 * sd;
}

// Solves one element: writes sin E and cos E.
template <class T>
KEPLER_HD void kepler_solve(T M, T e, T* sin_e, T* cos_e) {
    typedef KeplerConst<T> K;
    // Reduce M to r in [-pi, pi]; NaN/inf M gives NaN through rint/fma.
    const T r = kepler_reduce(M);
    const T sign = r < T(0) ? T(-1) : T(1);
    const T m = fabs(r);

    // Markley's starter.
    const T pi = K::pi();
    const T pi2 = pi * pi;
    const T one_e = T(1) - e;
    const T alpha = kepler_div(T(3) * pi2 + kepler_div(T(1.6) * pi * (pi - m), T(1) + e), pi2 - T(6));
    const T d = T(3) * one_e + alpha * e;
    const T q = T(2) * alpha * d * one_e - m * m;
    const T rr = T(3) * alpha * d * (d - one_e) * m + m * m * m;
    T disc = q * q * q + rr * rr;
    disc = disc > T(0) ? disc : T(0);
    T w = cbrt(fabs(rr) + sqrt(disc));
    w = w * w;
    const T den = w * w + w * q + q * q;
    T E = den > T(0) ? kepler_div(kepler_div(T(2) * rr * w, den) + m, d) : kepler_div(m, d);

    // Fixed-count high-order corrections.
    T sE, cE;
    kepler_sincos(E, &sE, &cE);
    T step = kepler_step(E, e, m, sE, cE);
    for (int i = 1; i < K::steps; ++i) {
        E += step;
        kepler_sincos(E, &sE, &cE);
        step = kepler_step(E, e, m, sE, cE);
    }
    kepler_rotate(step, &sE, &cE);

    const bool ok = e >= T(0) && e < T(1) && !isnan(r);
    const T nan = K::nan();
    *sin_e = ok ? sign * sE : nan;
    *cos_e = ok ? cE : nan;
}

// The derivative of the solver at (e, sin E, cos E), one element; the same formulas
// as crates/ops/src/kepler/tangent.rs. Tangent: (a, b) = (dM, de) -> (d sin E,
// d cos E) with t = (dM + sin E de) / (1 - e cos E), (cos E t, -sin E t).
// Cotangent (its transpose): (a, b) = (ct_sin, ct_cos) -> (ct_M, ct_e) with
// t = (cos E ct_sin - sin E ct_cos) / (1 - e cos E), (t, sin E t).
// num / (1 - e cos E) without the cancellation of 1 - e c near e -> 1, E -> 0: for
// c > 0, 1 - c = s^2 / (1 + c), so num (1 + c) / ((1 - e)(1 + c) + e s^2), a sum of
// positive terms; for c <= 0, 1 - e c >= 1 (tangent.rs's over_one_minus_e_cos).
template <class T>
KEPLER_HD T kepler_over_one_minus_e_cos(T num, T e, T s, T c) {
    const T opc = T(1) + c;
    const bool near = c > T(0);
    const T scale = near ? opc : T(1);
    const T den = near ? (T(1) - e) * opc + e * (s * s) : T(1) - e * c;
    return kepler_div(num * scale, den);
}

template <class T>
KEPLER_HD void kepler_tangent_one(T a, T b, T e, T s, T c, T* out0, T* out1) {
    const T t = kepler_over_one_minus_e_cos(a + s * b, e, s, c);
    *out0 = c * t;
    *out1 = -(s * t);
}

template <class T>
KEPLER_HD void kepler_cotangent_one(T a, T b, T e, T s, T c, T* out0, T* out1) {
    const T t = kepler_over_one_minus_e_cos(c * a - s * b, e, s, c);
    *out0 = t;
    *out1 = s * t;
}

#ifdef __CUDACC__
// sin E and cos E for n elements. Each pointer comes with its buffer's size in
// bytes; the kernel clamps n to what every buffer holds.
template <class T>
__global__ void kepler(const void* mean_anomaly, u64 m_bytes, const void* eccentricity, u64 e_bytes,
                       void* sin_e, u64 s_bytes, void* cos_e, u64 c_bytes, u64 n) {
    u64 cap = m_bytes;
    cap = e_bytes < cap ? e_bytes : cap;
    cap = s_bytes < cap ? s_bytes : cap;
    cap = c_bytes < cap ? c_bytes : cap;
    cap /= sizeof(T);
    n = n < cap ? n : cap;
    const T* M = static_cast<const T*>(mean_anomaly);
    const T* E = static_cast<const T*>(eccentricity);
    T* S = static_cast<T*>(sin_e);
    T* C = static_cast<T*>(cos_e);
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        T s, c;
        kepler_solve<T>(M[i], E[i], &s, &c);
        S[i] = s;
        C[i] = c;
    }
}

// The derivative maps for n elements: operands (a, b, e, sin E, cos E), results
// (out0, out1), each with its size in bytes; n is clamped to what every buffer holds.
template <class T, bool Transpose>
KEPLER_HD void kepler_derivative(const void* const* in, const u64* in_bytes, void* out0,
                                                  u64 o0_bytes, void* out1, u64 o1_bytes, u64 n) {
    u64 cap = o0_bytes < o1_bytes ? o0_bytes : o1_bytes;
    for (int k = 0; k < 5; ++k) cap = in_bytes[k] < cap ? in_bytes[k] : cap;
    cap /= sizeof(T);
    n = n < cap ? n : cap;
    const T* A = static_cast<const T*>(in[0]);
    const T* B = static_cast<const T*>(in[1]);
    const T* E = static_cast<const T*>(in[2]);
    const T* S = static_cast<const T*>(in[3]);
    const T* C = static_cast<const T*>(in[4]);
    T* O0 = static_cast<T*>(out0);
    T* O1 = static_cast<T*>(out1);
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (Transpose) {
            kepler_cotangent_one<T>(A[i], B[i], E[i], S[i], C[i], &O0[i], &O1[i]);
        } else {
            kepler_tangent_one<T>(A[i], B[i], E[i], S[i], C[i], &O0[i], &O1[i]);
        }
    }
}

// (dM, de, e, sin E, cos E) -> (d sin E, d cos E).
template <class T>
__global__ void kepler_tangent(const void* dm, u64 dm_bytes, const void* de, u64 de_bytes, const void* ecc,
                               u64 e_bytes, const void* sin_e, u64 s_bytes, const void* cos_e, u64 c_bytes,
                               void* d_sin_e, u64 ds_bytes, void* d_cos_e, u64 dc_bytes, u64 n) {
    const void* in[5] = {dm, de, ecc, sin_e, cos_e};
    const u64 in_bytes[5] = {dm_bytes, de_bytes, e_bytes, s_bytes, c_bytes};
    kepler_derivative<T, false>(in, in_bytes, d_sin_e, ds_bytes, d_cos_e, dc_bytes, n);
}

// (ct_sin, ct_cos, e, sin E, cos E) -> (ct_M, ct_e).
template <class T>
__global__ void kepler_cotangent(const void* ct_s, u64 cts_bytes, const void* ct_c, u64 ctc_bytes,
                                 const void* ecc, u64 e_bytes, const void* sin_e, u64 s_bytes, const void* cos_e,
                                 u64 c_bytes, void* ct_m, u64 ctm_bytes, void* ct_e, u64 cte_bytes, u64 n) {
    const void* in[5] = {ct_s, ct_c, ecc, sin_e, cos_e};
    const u64 in_bytes[5] = {cts_bytes, ctc_bytes, e_bytes, s_bytes, c_bytes};
    kepler_derivative<T, true>(in, in_bytes, ct_m, ctm_bytes, ct_e, cte_bytes, n);
}

// The solver and its tangent in one pass: (M, e, dM, de) -> (sin E, cos E,
// d sin E, d cos E), each buffer with its size in bytes; n is clamped to what every
// buffer holds. A tangent's step is 1 for one value per element, 0 for one value
// for all (a scalar, shape (), which must hold one element: else nothing is
// written). The same values as `kepler` followed by `kepler_tangent`.
template <class T>
__global__ void kepler_jvp(const void* mean_anomaly, u64 m_bytes, const void* eccentricity, u64 e_bytes,
                           const void* dm, u64 dm_bytes, const void* de, u64 de_bytes, void* sin_e, u64 s_bytes,
                           void* cos_e, u64 c_bytes, void* d_sin_e, u64 ds_bytes, void* d_cos_e, u64 dc_bytes,
                           u64 n, u64 dm_step, u64 de_step) {
    const u64 bytes[6] = {m_bytes, e_bytes, s_bytes, c_bytes, ds_bytes, dc_bytes};
    u64 cap = bytes[0];
    for (int k = 1; k < 6; ++k) cap = bytes[k] < cap ? bytes[k] : cap;
    cap /= sizeof(T);
    // An array tangent caps n; a scalar one must hold its one element.
    const u64 dm_cap = dm_step ? dm_bytes / sizeof(T) : (dm_bytes >= sizeof(T) ? cap : 0);
    const u64 de_cap = de_step ? de_bytes / sizeof(T) : (de_bytes >= sizeof(T) ? cap : 0);
    cap = dm_cap < cap ? dm_cap : cap;
    cap = de_cap < cap ? de_cap : cap;
    n = n < cap ? n : cap;
    const u64 sm = dm_step ? 1 : 0;
    const u64 se = de_step ? 1 : 0;
    const T* M = static_cast<const T*>(mean_anomaly);
    const T* E = static_cast<const T*>(eccentricity);
    const T* DM = static_cast<const T*>(dm);
    const T* DE = static_cast<const T*>(de);
    T* S = static_cast<T*>(sin_e);
    T* C = static_cast<T*>(cos_e);
    T* DS = static_cast<T*>(d_sin_e);
    T* DC = static_cast<T*>(d_cos_e);
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        T s, c;
        const T e = E[i];
        kepler_solve<T>(M[i], e, &s, &c);
        S[i] = s;
        C[i] = c;
        kepler_tangent_one<T>(DM[i * sm], DE[i * se], e, s, c, &DS[i], &DC[i]);
    }
}
#endif
