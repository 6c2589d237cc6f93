// C++ twins of the xla_ffi_rs CPU handlers, written against jaxlib's ffi.h, for the
// benchmarks only (nothing else builds or loads this file).
//
// They run the same algorithms as the Rust handlers, in the same order of
// operations, on XLA's intra-op thread pool (ffi::ThreadPool) with the same
// blocking, so that "ours vs C++" measures what the Rust layer costs:
//   * bench_cpp.kepler       <- crates/ops/src/kepler/{cpu,solver}.rs
//       (Cody-Waite reduction, Markley's starter, one fifth-order correction in f64,
//        third-order in f32; sin/cos by Taylor polynomials in f64, f32's own shorter
//        fits, a cube root by Halley and the reduction in f32 lanes below 2^22;
//        stages run over blocks of 64 (f64) / 128 (f32) elements; no Payne-Hanek
//        reduction past 2^27)
//   * bench_cpp.rms_norm_fwd <- crates/ops/src/rms_norm/{cpu,kernel}.rs
//   * bench_cpp.rms_norm_bwd      (32 independent lanes per reduction, fixed pairwise
//                                  tree, plain mul/add, bf16 by bit operations; the
//                                  backward is (dy, x, weight; eps) -> (dx, dweight)
//                                  and recomputes each row's inv_rms from x)
//   * bench_cpp.num_threads  writes ThreadPool::num_threads() (the thread suite
//                            reads it to show how many threads XLA gave the FFI).
// Compiled with -ffp-contract=off and explicit fma() exactly where the Rust code
// calls mul_add, so on an FMA machine the results are meant to be bit-identical.
// rms_norm supports x and weight of the same dtype, float32 or bfloat16 (what the
// benchmarks use); other combinations return INVALID_ARGUMENT.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// ---------------------------------------------------------------------------
// Parallel-for on XLA's pool (mirrors crates/ops/src/parallel.rs and
// crates/xla-ffi/src/pool.rs): the calling thread claims tasks too.

constexpr size_t kMinTaskWork = size_t{1} << 15;

size_t BlockCount(ffi::ThreadPool& pool, size_t items, size_t work_per_item) {
  size_t total = items * std::max<size_t>(work_per_item, 1);
  size_t by_work = total / kMinTaskWork;
  size_t threads = 1;
  if (by_work >= 2) threads = static_cast<size_t>(std::max<int64_t>(pool.num_threads(), 1));
  size_t blocks = std::clamp<size_t>(by_work, 1, threads * 4);
  return std::min(blocks, std::max<size_t>(items, 1));
}

size_t BlockLen(size_t items, size_t blocks) {
  size_t b = std::max<size_t>(blocks, 1);
  return std::max<size_t>((items + b - 1) / b, 1);
}

struct Shared {
  const void* job;
  void (*call)(const void*, size_t);
  size_t n;
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;

  void Work() {
    for (;;) {
      size_t i = next.fetch_add(1, std::memory_order_acq_rel);
      if (i >= n) return;
      call(job, i);
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
        std::lock_guard<std::mutex> lock(mu);
        finished = true;
        cv.notify_all();
      }
    }
  }
};

template <typename F>
void ForEach(ffi::ThreadPool& pool, size_t n, const F& f) {
  if (n == 0) return;
  size_t threads = static_cast<size_t>(std::max<int64_t>(pool.num_threads(), 1));
  size_t helpers = std::min(threads, n) - 1;
  if (helpers == 0) {
    for (size_t i = 0; i < n; ++i) f(i);
    return;
  }
  auto shared = std::make_shared<Shared>();
  shared->job = &f;
  shared->call = [](const void* job, size_t i) { (*static_cast<const F*>(job))(i); };
  shared->n = n;
  for (size_t h = 0; h < helpers; ++h) {
    pool.Schedule([shared] { shared->Work(); });
  }
  shared->Work();
  std::unique_lock<std::mutex> lock(shared->mu);
  shared->cv.wait(lock, [&] { return shared->finished; });
}

template <typename F>
void RunBlocks(ffi::ThreadPool& pool, size_t blocks, const F& f) {
  if (blocks <= 1) {
    f(0);
  } else {
    ForEach(pool, blocks, f);
  }
}

// ---------------------------------------------------------------------------
// Kepler solver (port of crates/ops/src/kepler/solver.rs).

constexpr double TWO_PI_A = 6.283185303211212;
constexpr double TWO_PI_B = 3.9683743235929825e-9;
constexpr double TWO_PI_C = -4.870820711189586e-18;
constexpr double INV_TWO_PI = 0.15915494309189535;
constexpr double PI = 3.14159265358979323846;
constexpr double PIO2_A = 1.57079632679489661923;
constexpr double PIO2_B = 6.123233995736766e-17;
constexpr double TWO_OVER_PI = 0.63661977236758134308;
constexpr double ROUND_MAGIC = 6755399441055744.0;
constexpr double K_MAX = 1.125899906842624e15;
constexpr double ALPHA0 = 7.6516382901912925;
constexpr double ALPHA1 = 1.29898246041084;
constexpr double RECIP_1PE[6] = {0.999948982194786,   -0.9962757002193766, 0.9534207438396001,
                                 -0.7705729299525534, 0.4179378603132493,  -0.10448446507831233};
constexpr double SIN64[7] = {-1.0 / 6.0,         1.0 / 120.0,          -1.0 / 5040.0,          1.0 / 362880.0,
                             -1.0 / 39916800.0, 1.0 / 6227020800.0, -1.0 / 1307674368000.0};
constexpr double COS64[7] = {1.0 / 24.0,           -1.0 / 720.0,           1.0 / 40320.0,          -1.0 / 3628800.0,
                             1.0 / 479001600.0, -1.0 / 87178291200.0, 1.0 / 20922789888000.0};
constexpr double RCBRT_INIT[4] = {1.2053498914226901, -0.2676434180461741, 0.03867505826522775,
                                  -0.002038603180644133};

constexpr float ROUND_MAGIC_F32 = 12582912.0f;
constexpr float PI_F32 = 3.14159265358979323846f;
constexpr float PIO2_A_F32 = 1.570797f;
constexpr float PIO2_B_F32 = (float)(PIO2_A - (double)PIO2_A_F32);
constexpr float TWO_OVER_PI_F32 = 0.63661977236758134308f;
// f32's own fits (solver.rs): sin x - x = x^3 S(x^2), 1 - x^2/2 - ... = x^4 C(x^2).
constexpr float SIN32[3] = {-0.16666664f, 0.008332745f, -0.00019587361f};
constexpr float COS32[3] = {0.041666664f, -0.0013888301f, 0.000024547608f};
// z^(1/3) on [1, 8), the start of one Halley step.
constexpr float CBRT32[4] = {0.7269208f, 0.3241965f, -0.033637353f, 0.001645962f};
// 2 pi in three f32 parts and 1 / (2 pi), for the f32 reduction below 2^22.
constexpr float TWO_PI_A32 = 6.2831855f;
constexpr float TWO_PI_B32 = -1.7484555e-7f;
constexpr float TWO_PI_C32 = -6.860498e-15f;
constexpr float INV_TWO_PI32 = 0.15915494f;
constexpr float LARGE_M32 = 4194304.0f;       // 2^22
constexpr double LARGE_M64 = 134217728.0;     // 2^27

// a * b + c: fused when the target has FMA (as the Rust code's F = true versions).
inline double fma64(double a, double b, double c) {
#ifdef __FMA__
  return __builtin_fma(a, b, c);
#else
  return a * b + c;
#endif
}
inline float fma32(float a, float b, float c) {
#ifdef __FMA__
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

template <size_t N>
inline double poly64(double z, const double (&c)[N]) {
  double p = c[N - 1];
  for (size_t i = N - 1; i > 0; --i) p = fma64(p, z, c[i - 1]);
  return p;
}
template <size_t N>
inline float poly32(float z, const float (&c)[N]) {
  float p = c[N - 1];
  for (size_t i = N - 1; i > 0; --i) p = fma32(p, z, c[i - 1]);
  return p;
}

inline double round64(double x) { return (x + ROUND_MAGIC) - ROUND_MAGIC; }
inline float round32(float x) { return (x + ROUND_MAGIC_F32) - ROUND_MAGIC_F32; }
inline double clampd(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }
inline float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

inline uint64_t bits64(double x) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  return u;
}
inline double from_bits64(uint64_t u) {
  double x;
  std::memcpy(&x, &u, 8);
  return x;
}
inline uint32_t bits32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float from_bits32(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

inline double pow_two_thirds64(double y) {
  uint64_t b = bits64(y);
  double eb = from_bits64((b >> 52) | 0x4330000000000000ull) - 4503599627370496.0;
  double j = round64((eb - 1023.0 + 0.5) * (1.0 / 3.0) - 0.5);
  uint64_t magic = bits64(ROUND_MAGIC);
  uint64_t j3 = bits64(3.0 * j + ROUND_MAGIC) - magic;
  uint64_t j2 = bits64(2.0 * j + ROUND_MAGIC) - magic;
  double z = from_bits64(b - (j3 << 52));
  double g = poly64(z, RCBRT_INIT);
  for (int it = 0; it < 2; ++it) {
    double g3 = g * g * g;
    g = fma64(g * (1.0 / 3.0), fma64(-z, g3, 1.0), g);
  }
  double t = z * g * g;
  return from_bits64(bits64(t * t) + (j2 << 52));
}

inline float pow_two_thirds32(float y) {
  uint32_t b = bits32(y);
  float eb = (float)(int32_t)(b >> 23);
  float j = round32((eb - 127.0f + 0.5f) * (1.0f / 3.0f) - 0.5f);
  uint32_t magic = bits32(ROUND_MAGIC_F32);
  uint32_t j3 = bits32(3.0f * j + ROUND_MAGIC_F32) - magic;
  uint32_t j2 = bits32(2.0f * j + ROUND_MAGIC_F32) - magic;
  float z = from_bits32(b - (j3 << 23));
  // z^(1/3): a polynomial, then one Halley step t (t^3 + 2z) / (2t^3 + z).
  float t = poly32(z, CBRT32);
  float t3 = t * t * t;
  t = t * fma32(2.0f, z, t3) / fma32(2.0f, t3, z);
  return from_bits32(bits32(t * t) + (j2 << 23));
}

// Stage 1: reduction and Markley's starter up to the cube root.
inline void stage1_64(double m_in, double e, double& m, double& d, double& q, double& r, double& y) {
  double k = round64(clampd(m_in * INV_TWO_PI, -K_MAX, K_MAX));
  double mm = fma64(-k, TWO_PI_A, m_in);
  mm = fma64(-k, TWO_PI_B, mm);
  mm = fma64(-k, TWO_PI_C, mm);
  // k may be one off near an odd multiple of pi: a second step (k2 in {-1, 0, 1}).
  double k2 = round64(mm * INV_TWO_PI);
  mm = fma64(-k2, TWO_PI_A, mm);
  mm = fma64(-k2, TWO_PI_B, mm);
  mm = fma64(-k2, TWO_PI_C, mm);
  mm = clampd(mm, -PI, PI);
  double a = std::fabs(mm);
  double ome = 1.0 - e;
  double alpha = fma64(ALPHA1 * (PI - a), poly64(e, RECIP_1PE), ALPHA0);
  double dd = fma64(alpha, e, 3.0 * ome);
  double ad = alpha * dd;
  double qq = fma64(2.0 * ad, ome, -a * a);
  double rr = a * fma64(3.0 * ad, dd - ome, a * a);
  double q2 = qq * qq;
  m = mm;
  d = dd;
  q = qq;
  r = rr;
  y = rr + std::sqrt(fma64(q2, qq, rr * rr));
}

// Stage 3: the starter E1, its sine and cosine, f0 and f1.
inline void stage3_64(double m, double e, double d, double q, double r, double w, double& e1, double& s1,
                      double& c1, double& f0, double& f1) {
  double a = std::fabs(m);
  double ome = 1.0 - e;
  double wd = fma64(w, w + q, q * q);
  double ee = fma64(a, wd, 2.0 * r * w) / (wd * d);
  double n = round64(ee * TWO_OVER_PI);
  double x = fma64(-n, PIO2_B, fma64(-n, PIO2_A, ee));
  double z = x * x;
  double xs = x * z * poly64(z, SIN64);
  double zc = z * fma64(-z, poly64(z, COS64), 0.5);
  double sx = x + xs;
  double cx = 1.0 - zc;
  bool q0 = n == 0.0;
  bool q1 = n == 1.0;
  double s = q0 ? sx : (q1 ? cx : -sx);
  double c = q0 ? cx : (q1 ? -sx : -cx);
  e1 = ee;
  s1 = s;
  c1 = c;
  f0 = q0 ? fma64(ome, ee, -e * xs) - a : (ee - e * s) - a;
  f1 = q0 ? fma64(e, zc, ome) : fma64(-e, c, 1.0);
}

// Stage 4: fifth-order correction (series reversion) and angle addition.
inline void stage4_64(double m, double e, double e1, double s1, double c1, double f0, double f1, double& sin_e,
                      double& cos_e) {
  double inv = 1.0 / f1;
  double u = -f0 * inv;
  double b2 = 0.5 * e * s1 * inv;
  double b3 = e * c1 * inv * (1.0 / 6.0);
  double c4 = b2 * fma64(5.0, b3 - b2 * b2, 1.0 / 12.0);
  double c3 = fma64(2.0 * b2, b2, -b3);
  double corr = fma64(fma64(c4, u, c3), u, -b2);
  double delta = fma64(u * u, corr, u);
  double d2 = delta * delta;
  double sd = fma64(delta * d2, -1.0 / 6.0, delta);
  double omcd = d2 * fma64(d2, -1.0 / 24.0, 0.5);
  double s = s1 + fma64(c1, sd, -s1 * omcd);
  double c = c1 - fma64(s1, sd, c1 * omcd);
  double sgn = m < 0.0 ? -1.0 : 1.0;
  sin_e = sgn * s;
  cos_e = c;
  (void)e1;
}

inline bool valid64(double m, double e) { return (e >= 0.0) & (e < 1.0) & (std::fabs(m) <= 1.7976931348623157e308); }

inline void solve_one64(double m_in, double e, double& s, double& c) {
  double m, d, q, r, y, e1, s1, c1, f0, f1;
  stage1_64(m_in, e, m, d, q, r, y);
  double w = pow_two_thirds64(y);
  stage3_64(m, e, d, q, r, w, e1, s1, c1, f0, f1);
  stage4_64(m, e, e1, s1, c1, f0, f1, s, c);
  if (!valid64(m_in, e)) s = c = NAN;
}

constexpr size_t BLOCK64 = 64;
constexpr size_t BLOCK32 = 128;

void solve_f64(const double* __restrict m, const double* __restrict e, double* __restrict sin_e,
               double* __restrict cos_e, size_t n) {
  constexpr size_t L = BLOCK64;
  size_t full = n / L * L;
  for (size_t b0 = 0; b0 < full; b0 += L) {
    const double* mb = m + b0;
    const double* eb = e + b0;
    alignas(64) double mr[L], d[L], q[L], r[L], y[L], w[L], e1[L], s1[L], c1[L], f0[L], f1[L];
    for (size_t i = 0; i < L; ++i) stage1_64(mb[i], eb[i], mr[i], d[i], q[i], r[i], y[i]);
    for (size_t i = 0; i < L; ++i) w[i] = pow_two_thirds64(y[i]);
    for (size_t i = 0; i < L; ++i) stage3_64(mr[i], eb[i], d[i], q[i], r[i], w[i], e1[i], s1[i], c1[i], f0[i], f1[i]);
    for (size_t i = 0; i < L; ++i) {
      double s, c;
      stage4_64(mr[i], eb[i], e1[i], s1[i], c1[i], f0[i], f1[i], s, c);
      bool ok = valid64(mb[i], eb[i]);
      sin_e[b0 + i] = ok ? s : NAN;
      cos_e[b0 + i] = ok ? c : NAN;
    }
  }
  for (size_t i = full; i < n; ++i) solve_one64(m[i], e[i], sin_e[i], cos_e[i]);
}

// M reduced to [-pi, pi] as solver.rs's f32 reduce (its FMA build): below 2^22 in
// f32 (three-part 2 pi, then a second step); below 2^27 Cody-Waite in f64 without
// FMA; beyond, f64 with FMA (the Rust code's Payne-Hanek is not ported: no
// benchmark input reaches it).
inline float reduce32(float m_in) {
  if (std::fabs(m_in) < LARGE_M32) {
    float k = round32(m_in * INV_TWO_PI32);
    float m = fma32(-k, TWO_PI_A32, m_in);
    m = fma32(-k, TWO_PI_B32, m);
    m = fma32(-k, TWO_PI_C32, m);
    float k2 = round32(m * INV_TWO_PI32);
    m = fma32(-k2, TWO_PI_A32, m);
    return clampf(fma32(-k2, TWO_PI_B32, m), -PI_F32, PI_F32);
  }
  double md = (double)m_in;
  double k = round64(clampd(md * INV_TWO_PI, -K_MAX, K_MAX));
  double mr;
  if (std::fabs(md) < LARGE_M64) {
    mr = -k * TWO_PI_A + md;
    mr = -k * TWO_PI_B + mr;
    mr = -k * TWO_PI_C + mr;
    double k2 = round64(mr * INV_TWO_PI);
    mr = -k2 * TWO_PI_A + mr;
    mr = -k2 * TWO_PI_B + mr;
    mr = -k2 * TWO_PI_C + mr;
  } else {
    mr = fma64(-k, TWO_PI_C, fma64(-k, TWO_PI_B, fma64(-k, TWO_PI_A, md)));
  }
  return clampf((float)clampd(mr, -PI, PI), -PI_F32, PI_F32);
}

inline void stage1_32(float m_in, float e, float& m, float& d, float& q, float& r, float& y) {
  float mm = reduce32(m_in);
  float a = std::fabs(mm);
  float ome = 1.0f - e;
  float alpha = fma32((float)ALPHA1 * (PI_F32 - a), 1.0f / (1.0f + e), (float)ALPHA0);
  float dd = fma32(alpha, e, 3.0f * ome);
  float ad = alpha * dd;
  float qq = fma32(2.0f * ad, ome, -a * a);
  float rr = a * fma32(3.0f * ad, dd - ome, a * a);
  float q2 = qq * qq;
  m = mm;
  d = dd;
  q = qq;
  r = rr;
  y = rr + std::sqrt(fma32(q2, qq, rr * rr));
}

inline void stage3_32(float m, float e, float d, float q, float r, float w, float& e1, float& s1, float& c1,
                      float& f0, float& f1) {
  float a = std::fabs(m);
  float ome = 1.0f - e;
  float wd = fma32(w, w + q, q * q);
  float ee = fma32(a, wd, 2.0f * r * w) / (wd * d);
  float n = round32(ee * TWO_OVER_PI_F32);
  float x = fma32(-n, PIO2_B_F32, fma32(-n, PIO2_A_F32, ee));
  float z = x * x;
  float xs = x * z * poly32(z, SIN32);
  float zc = z * fma32(-z, poly32(z, COS32), 0.5f);
  float sx = x + xs;
  float cx = 1.0f - zc;
  bool q0 = n == 0.0f;
  bool q1 = n == 1.0f;
  float s = q0 ? sx : (q1 ? cx : -sx);
  float c = q0 ? cx : (q1 ? -sx : -cx);
  e1 = ee;
  s1 = s;
  c1 = c;
  f0 = q0 ? fma32(ome, ee, -e * xs) - a : (ee - e * s) - a;
  f1 = q0 ? fma32(e, zc, ome) : fma32(-e, c, 1.0f);
}

inline void stage4_32(float m, float e, float s1, float c1, float f0, float f1, float& sin_e, float& cos_e) {
  float inv = 1.0f / f1;
  float u = -f0 * inv;
  float b2 = 0.5f * e * s1 * inv;
  float b3 = e * c1 * inv * (1.0f / 6.0f);
  float c3 = fma32(2.0f * b2, b2, -b3);
  float delta = fma32(u * u, fma32(c3, u, -b2), u);
  float d2 = delta * delta;
  float sd = fma32(delta * d2, -1.0f / 6.0f, delta);
  float omcd = d2 * fma32(d2, -1.0f / 24.0f, 0.5f);
  float s = s1 + fma32(c1, sd, -s1 * omcd);
  float c = c1 - fma32(s1, sd, c1 * omcd);
  float sgn = m < 0.0f ? -1.0f : 1.0f;
  sin_e = sgn * s;
  cos_e = c;
}

inline bool valid32(float m, float e) { return (e >= 0.0f) & (e < 1.0f) & (std::fabs(m) <= 3.40282347e38f); }

inline void solve_one32(float m_in, float e, float& s, float& c) {
  float m, d, q, r, y, e1, s1, c1, f0, f1;
  stage1_32(m_in, e, m, d, q, r, y);
  float w = pow_two_thirds32(y);
  stage3_32(m, e, d, q, r, w, e1, s1, c1, f0, f1);
  stage4_32(m, e, s1, c1, f0, f1, s, c);
  if (!valid32(m_in, e)) s = c = NAN;
}

void solve_f32(const float* __restrict m, const float* __restrict e, float* __restrict sin_e,
               float* __restrict cos_e, size_t n) {
  constexpr size_t L = BLOCK32;
  size_t full = n / L * L;
  for (size_t b0 = 0; b0 < full; b0 += L) {
    const float* mb = m + b0;
    const float* eb = e + b0;
    alignas(64) float mr[L], d[L], q[L], r[L], y[L], w[L], e1[L], s1[L], c1[L], f0[L], f1[L];
    for (size_t i = 0; i < L; ++i) stage1_32(mb[i], eb[i], mr[i], d[i], q[i], r[i], y[i]);
    for (size_t i = 0; i < L; ++i) w[i] = pow_two_thirds32(y[i]);
    for (size_t i = 0; i < L; ++i) stage3_32(mr[i], eb[i], d[i], q[i], r[i], w[i], e1[i], s1[i], c1[i], f0[i], f1[i]);
    for (size_t i = 0; i < L; ++i) {
      float s, c;
      stage4_32(mr[i], eb[i], s1[i], c1[i], f0[i], f1[i], s, c);
      bool ok = valid32(mb[i], eb[i]);
      sin_e[b0 + i] = ok ? s : NAN;
      cos_e[b0 + i] = ok ? c : NAN;
    }
  }
  for (size_t i = full; i < n; ++i) solve_one32(m[i], e[i], sin_e[i], cos_e[i]);
}

constexpr size_t kKeplerWorkPerElement = 16;

template <typename T, typename Solve>
void KeplerParallel(ffi::ThreadPool& pool, const T* m, const T* e, T* s, T* c, size_t n, Solve solve) {
  size_t blocks = BlockCount(pool, n, kKeplerWorkPerElement);
  size_t len = BlockLen(n, blocks);
  size_t parts = n == 0 ? 0 : (n + len - 1) / len;
  if (parts == 0) return;
  RunBlocks(pool, parts, [&](size_t i) {
    size_t start = i * len;
    size_t end = std::min(n, start + len);
    solve(m + start, e + start, s + start, c + start, end - start);
  });
}

ffi::Error KeplerImpl(ffi::ThreadPool pool, ffi::AnyBuffer m, ffi::AnyBuffer e, ffi::Result<ffi::AnyBuffer> s,
                      ffi::Result<ffi::AnyBuffer> c) {
  auto dt = m.element_type();
  size_t n = m.element_count();
  if (e.element_type() != dt || s->element_type() != dt || c->element_type() != dt || e.element_count() != n ||
      s->element_count() != n || c->element_count() != n) {
    return ffi::Error::InvalidArgument("bench_cpp.kepler: operands and results must match in dtype and size");
  }
  if (dt == ffi::DataType::F64) {
    KeplerParallel<double>(pool, static_cast<const double*>(m.untyped_data()),
                           static_cast<const double*>(e.untyped_data()), static_cast<double*>(s->untyped_data()),
                           static_cast<double*>(c->untyped_data()), n, solve_f64);
  } else if (dt == ffi::DataType::F32) {
    KeplerParallel<float>(pool, static_cast<const float*>(m.untyped_data()),
                          static_cast<const float*>(e.untyped_data()), static_cast<float*>(s->untyped_data()),
                          static_cast<float*>(c->untyped_data()), n, solve_f32);
  } else {
    return ffi::Error::InvalidArgument("bench_cpp.kepler: float32 or float64 only");
  }
  return ffi::Error::Success();
}

// ---------------------------------------------------------------------------
// RMS norm (port of crates/ops/src/rms_norm/kernel.rs for X = W = Y, acc float).

constexpr size_t L = 32;

struct F32 {
  using T = float;
  static inline float load(float v) { return v; }
  static inline float store(float v) { return v; }
};

struct BF16 {
  using T = uint16_t;
  static inline float load(uint16_t b) { return from_bits32((uint32_t)b << 16); }
  static inline uint16_t store(float v) {
    uint32_t x = bits32(v);
    uint32_t rounded = (x + (0x7FFFu + ((x >> 16) & 1u))) >> 16;
    uint32_t quiet_nan = (x >> 16) | 0x0040u;
    return (uint16_t)(v != v ? quiet_nan : rounded);
  }
};

inline float reduce_lanes(float (&a)[L]) {
  for (size_t half = L / 2; half > 0; half /= 2)
    for (size_t i = 0; i < half; ++i) a[i] += a[i + half];
  return a[0];
}

// One chunk of up to L elements, widened (zero-padded).
template <typename D>
inline void load_chunk(const typename D::T* src, size_t len, float (&out)[L]) {
  if (len == L) {
    for (size_t i = 0; i < L; ++i) out[i] = D::load(src[i]);
  } else {
    for (size_t i = 0; i < L; ++i) out[i] = 0.0f;
    for (size_t i = 0; i < len; ++i) out[i] = D::load(src[i]);
  }
}

// inv_rms = 1/sqrt(sum(x^2)/n + eps) of one row (mean 0 for n == 0): L lanes,
// the pairwise tree of reduce_lanes (kernel.rs sum_sq and inv_rms).
// Sums go group by group: GROUP chunks (1024 elements) into the lanes, then the
// group's lanes into the row's (kernel.rs GROUP).
constexpr size_t GROUP = 32;

template <typename D>
inline float row_inv_rms(const typename D::T* xr, size_t n, float eps) {
  float total[L] = {0};
  for (size_t g = 0; g < n; g += L * GROUP) {
    float acc[L] = {0};
    size_t end = std::min(n, g + L * GROUP);
    for (size_t j = g; j < end; j += L) {
      float v[L];
      load_chunk<D>(xr + j, std::min(L, end - j), v);
      for (size_t i = 0; i < L; ++i) acc[i] += v[i] * v[i];
    }
    for (size_t i = 0; i < L; ++i) total[i] += acc[i];
  }
  float ss = reduce_lanes(total);
  float mean = n == 0 ? 0.0f : ss / (float)n;
  return 1.0f / std::sqrt(mean + eps);
}

// y may alias x: every chunk is loaded before it is stored.
template <typename D>
void fwd_rows(const typename D::T* x, const float* w, float eps, typename D::T* y, float* inv, size_t rows,
              size_t n) {
  for (size_t r = 0; r < rows; ++r) {
    const typename D::T* xr = x + r * n;
    typename D::T* yr = y + r * n;
    float ir = row_inv_rms<D>(xr, n, eps);
    inv[r] = ir;
    for (size_t j = 0; j < n; j += L) {
      size_t len = std::min(L, n - j);
      float v[L];
      load_chunk<D>(xr + j, len, v);
      if (len == L) {
        for (size_t i = 0; i < L; ++i) yr[j + i] = D::store(v[i] * ir * w[j + i]);
      } else {
        for (size_t i = 0; i < len; ++i) yr[j + i] = D::store(v[i] * ir * w[j + i]);
      }
    }
  }
}

// Each row's inv_rms is recomputed from x (the forward's bits), as kernel.rs
// bwd_rows does: a sum-of-squares pass, then the dot product, then dx.
template <typename D>
void bwd_rows(const typename D::T* dy, const typename D::T* x, const float* w, float eps, typename D::T* dx,
              float* dw, size_t rows, size_t n) {
  float nf = (float)n;
  for (size_t r = 0; r < rows; ++r) {
    const typename D::T* dyr = dy + r * n;
    const typename D::T* xr = x + r * n;
    typename D::T* dxr = dx + r * n;
    float ir = row_inv_rms<D>(xr, n, eps);
    float total[L] = {0};
    for (size_t g = 0; g < n; g += L * GROUP) {
      float acc[L] = {0};
      size_t end = std::min(n, g + L * GROUP);
      for (size_t j = g; j < end; j += L) {
        size_t len = std::min(L, end - j);
        float d[L], xv[L], wv[L] = {0};
        load_chunk<D>(dyr + j, len, d);
        load_chunk<D>(xr + j, len, xv);
        for (size_t i = 0; i < len; ++i) wv[i] = w[j + i];
        for (size_t i = 0; i < L; ++i) acc[i] += d[i] * wv[i] * xv[i];
      }
      for (size_t i = 0; i < L; ++i) total[i] += acc[i];
    }
    float s = reduce_lanes(total);
    float c = ir * ir * ir / nf * s;
    for (size_t j = 0; j < n; j += L) {
      size_t len = std::min(L, n - j);
      float d[L], xv[L];
      load_chunk<D>(dyr + j, len, d);
      load_chunk<D>(xr + j, len, xv);
      if (len == L) {
        for (size_t i = 0; i < L; ++i) {
          dxr[j + i] = D::store(ir * (w[j + i] * d[i]) - xv[i] * c);
          dw[j + i] += d[i] * xv[i] * ir;
        }
      } else {
        for (size_t i = 0; i < len; ++i) {
          dxr[j + i] = D::store(ir * (w[j + i] * d[i]) - xv[i] * c);
          dw[j + i] += d[i] * xv[i] * ir;
        }
      }
    }
  }
}

template <typename D>
std::vector<float> widen_weight(const void* w, size_t n) {
  std::vector<float> out(n);
  auto* p = static_cast<const typename D::T*>(w);
  for (size_t i = 0; i < n; ++i) out[i] = D::load(p[i]);
  return out;
}

template <typename D>
void RmsFwd(ffi::ThreadPool& pool, const void* xp, const void* wp, void* yp, float* inv, size_t rows, size_t n,
            float eps) {
  auto* x = static_cast<const typename D::T*>(xp);
  auto* y = static_cast<typename D::T*>(yp);
  std::vector<float> w = widen_weight<D>(wp, n);
  if (n == 0 || rows == 0) {
    fwd_rows<D>(x, w.data(), eps, y, inv, rows, n);
    return;
  }
  size_t per = BlockLen(rows, BlockCount(pool, rows, n));
  size_t parts = (rows + per - 1) / per;
  RunBlocks(pool, parts, [&](size_t b) {
    size_t r0 = b * per, r1 = std::min(rows, r0 + per);
    fwd_rows<D>(x + r0 * n, w.data(), eps, y + r0 * n, inv + r0, r1 - r0, n);
  });
}

template <typename D>
void RmsBwd(ffi::ThreadPool& pool, const void* dyp, const void* xp, const void* wp, float eps, void* dxp, void* dwp,
            size_t rows, size_t n) {
  auto* dy = static_cast<const typename D::T*>(dyp);
  auto* x = static_cast<const typename D::T*>(xp);
  auto* dx = static_cast<typename D::T*>(dxp);
  auto* dwo = static_cast<typename D::T*>(dwp);
  std::vector<float> w = widen_weight<D>(wp, n);
  size_t block = std::max<size_t>(rows / 256, 64);
  size_t blocks = (rows + block - 1) / block;
  std::vector<float> partial(blocks * n, 0.0f);
  if (n > 0 && blocks > 0) {
    RunBlocks(pool, blocks, [&](size_t b) {
      size_t r0 = b * block, r1 = std::min(rows, r0 + block);
      bwd_rows<D>(dy + r0 * n, x + r0 * n, w.data(), eps, dx + r0 * n, partial.data() + b * n, r1 - r0, n);
    });
  }
  size_t col_len = BlockLen(n, BlockCount(pool, n, std::max<size_t>(blocks, 1)));
  size_t cparts = n == 0 ? 0 : (n + col_len - 1) / col_len;
  if (cparts == 0) return;
  RunBlocks(pool, cparts, [&](size_t cb) {
    size_t j0 = cb * col_len, j1 = std::min(n, j0 + col_len);
    for (size_t j = j0; j < j1; ++j) {
      float s = 0.0f;
      for (size_t b = 0; b < blocks; ++b) s += partial[b * n + j];
      dwo[j] = D::store(s);
    }
  });
}

bool SplitRows(const ffi::AnyBuffer& x, const ffi::AnyBuffer& w, size_t& rows, size_t& n) {
  auto xd = x.dimensions();
  auto wd = w.dimensions();
  if (wd.size() > xd.size()) return false;
  size_t off = xd.size() - wd.size();
  n = 1;
  for (size_t i = 0; i < wd.size(); ++i) {
    if (xd[off + i] != wd[i]) return false;
    n *= (size_t)wd[i];
  }
  rows = 1;
  for (size_t i = 0; i < off; ++i) rows *= (size_t)xd[i];
  return true;
}

ffi::Error RmsFwdImpl(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer w, ffi::Result<ffi::AnyBuffer> y,
                      ffi::Result<ffi::AnyBuffer> inv, double eps) {
  size_t rows, n;
  auto dt = x.element_type();
  if (!SplitRows(x, w, rows, n) || w.element_type() != dt || y->element_type() != dt ||
      inv->element_type() != ffi::DataType::F32 || y->element_count() != x.element_count() ||
      inv->element_count() != rows) {
    return ffi::Error::InvalidArgument("bench_cpp.rms_norm_fwd: bad shapes or dtypes");
  }
  float* ip = static_cast<float*>(inv->untyped_data());
  if (dt == ffi::DataType::F32) {
    RmsFwd<F32>(pool, x.untyped_data(), w.untyped_data(), y->untyped_data(), ip, rows, n, (float)eps);
  } else if (dt == ffi::DataType::BF16) {
    RmsFwd<BF16>(pool, x.untyped_data(), w.untyped_data(), y->untyped_data(), ip, rows, n, (float)eps);
  } else {
    return ffi::Error::InvalidArgument("bench_cpp.rms_norm_fwd: float32 or bfloat16 only");
  }
  return ffi::Error::Success();
}

ffi::Error RmsBwdImpl(ffi::ThreadPool pool, ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer w,
                      ffi::Result<ffi::AnyBuffer> dx, ffi::Result<ffi::AnyBuffer> dw, double eps) {
  size_t rows, n;
  auto dt = x.element_type();
  if (!SplitRows(x, w, rows, n) || dy.element_type() != dt || w.element_type() != dt ||
      dx->element_type() != dt || dw->element_type() != dt || dy.element_count() != x.element_count() ||
      dx->element_count() != x.element_count() || dw->element_count() != n) {
    return ffi::Error::InvalidArgument("bench_cpp.rms_norm_bwd: bad shapes or dtypes");
  }
  if (!(eps >= 0.0 && std::isfinite(eps))) {
    return ffi::Error::InvalidArgument("bench_cpp.rms_norm_bwd: attribute eps must be finite and >= 0");
  }
  if (dt == ffi::DataType::F32) {
    RmsBwd<F32>(pool, dy.untyped_data(), x.untyped_data(), w.untyped_data(), (float)eps, dx->untyped_data(),
                dw->untyped_data(), rows, n);
  } else if (dt == ffi::DataType::BF16) {
    RmsBwd<BF16>(pool, dy.untyped_data(), x.untyped_data(), w.untyped_data(), (float)eps, dx->untyped_data(),
                 dw->untyped_data(), rows, n);
  } else {
    return ffi::Error::InvalidArgument("bench_cpp.rms_norm_bwd: float32 or bfloat16 only");
  }
  return ffi::Error::Success();
}

ffi::Error NumThreadsImpl(ffi::ThreadPool pool, ffi::Result<ffi::Buffer<ffi::S32>> out) {
  out->typed_data()[0] = (int32_t)pool.num_threads();
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(BenchKepler, KeplerImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(BenchRmsNormFwd, RmsFwdImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<double>("eps"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(BenchRmsNormBwd, RmsBwdImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<double>("eps"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(BenchNumThreads, NumThreadsImpl,
                              ffi::Ffi::Bind().Ctx<ffi::ThreadPool>().Ret<ffi::Buffer<ffi::S32>>());
