//! A branch-free, vectorizable solver for Kepler's equation `M = E - e sin E`.
//!
//! Given the mean anomaly `M` (any real) and the eccentricity `e` in `[0, 1)`, the
//! solver returns `sin E` and `cos E` of the eccentric anomaly `E`. Everything is
//! straight-line arithmetic (selects instead of branches, no libm calls), so the
//! slice functions auto-vectorize. They are compiled several times with
//! [`multiversion`](mod@multiversion) (AVX-512, AVX2+FMA, AVX, baseline) and dispatched at run time;
//! `mul_add` is used only in the versions whose target has FMA: the x86 versions
//! with `fma`, and every aarch64 build (fused multiply-add is part of its base
//! instruction set, NEON's `fmla`), whose one version the compiler vectorizes
//! with NEON.
//!
//! # Method
//!
//! 1. **Range reduction.** `M` is reduced to `m` in `[-pi, pi]` modulo the real
//!    `2 pi`, to about 1 ulp of `m`, for every finite `M`. Below `|M| = 2^27`
//!    this is Cody-Waite reduction with `2 pi` split into three parts (the first
//!    two have 28 significant bits, so `k * part` is exact for `|k| < 2^25`);
//!    from `2^27` on it is Payne-Hanek reduction in integer arithmetic with 1280
//!    bits of `1 / (2 pi)` (`solver/reduce.rs`), which only the elements that
//!    need it take (the slice functions check a block for them after the
//!    vectorized pass). `E(-m) = -E(m)`, so the solver works on `|m|`
//!    in `[0, pi]` and flips the sign of `sin E` (and `E`) at the end.
//! 2. **Starter.** Markley's starter (F. L. Markley, "Kepler Equation Solver",
//!    Celestial Mechanics and Dynamical Astronomy 63, 101-111, 1995): `sin E` is
//!    replaced by a rational approximation, which turns Kepler's equation into a
//!    cubic in `E`, solved in closed form (Cardano, in Markley's cancellation-free
//!    form). The starter is uniformly good, including the singular corner
//!    `e -> 1`, `M -> 0`: its error is below `4.4e-4` rad everywhere. Markley's
//!    empirical `alpha` needs `1 / (1 + e)`, taken from a degree-5 polynomial
//!    (relative error 5e-5; this moves `alpha` by < 1e-5 relative). The cube root
//!    comes from the exponent bits, a cubic polynomial and two division-free
//!    Newton steps for `x^(-1/3)` (in `f32`: a cubic for `x^(1/3)` and one Halley
//!    step).
//! 3. **One fifth-order correction.** With `f(E) = E - e sin E - m` and its
//!    derivatives at the starter `E1`, the correction solves the quartic Taylor
//!    model `f0 + f1 d + f2 d^2/2 + f3 d^3/6 + f4 d^4/24 = 0` by series reversion
//!    (`d = u - b2 u^2 + (2 b2^2 - b3) u^3 + (5 b2 b3 - 5 b2^3 - b4) u^4`,
//!    `u = -f0/f1`, `bk = fk / (k! f1)`). This has the order of Markley's nested
//!    `delta_3, delta_4, delta_5` but costs one division instead of three; with
//!    the starter's error below `4.4e-4`, the truncation error is far below
//!    rounding. For `E1 < pi/4`, `f0` and `f1` are evaluated as
//!    `(1-e) E + e (E - sin E) - m` and `(1-e) + e (1 - cos E)` from the
//!    polynomial tails, avoiding the cancellation of the naive forms near the
//!    singular corner.
//! 4. **sin and cos.** `sin E1`, `cos E1` come from Taylor polynomials on
//!    `[-pi/4, pi/4]` after a quadrant reduction (`pi/2` in two parts); the
//!    final `sin E`, `cos E` follow from the angle-addition formulas with short
//!    series for `sin d` and `1 - cos d`, so `sin E` and `cos E` are consistent
//!    (`sin^2 + cos^2 = 1` to a few ulp).
//!
//! One generic solver serves both dtypes (over the private trait `Real`): only the
//! constants, the range reduction, `1 / (1 + e)`, the exponent-bit handling of the
//! cube root and the order of the correction differ per type. The `f32` path
//! computes in `f32` lanes throughout: with FMA it reduces `M` below `|M| = 2^22`
//! in `f32` (three-part `2 pi`, exact first step, one correcting step), beyond
//! that and without FMA in `f64` as above; it takes `1 / (1 + e)` by a division,
//! three-term fitted polynomials for `sin` and `cos`, and a third-order
//! (Halley-class) correction. (The divider has room in the `f32` solver, so a
//! division that replaces FMAs pays there.)
//!
//! # Speed
//!
//! The slice functions run each stage (reduction + starter, cube root, `sin`/`cos`,
//! correction) over a block of 64 (`f64`) or 128 (`f32`) elements before the
//! next: one fused loop body is a single ~300-cycle dependency chain, and the
//! blocks give the out-of-order core many independent vectors (the range
//! reduction has a loop of its own: chained into the starter, the chain was still
//! too long). Measured on one Zen 4 core (AVX-512) in cache: about 5.4
//! ns/element `f64` and 2.3 ns `f32` (`--example kepler_speed`), against 17-22 ns
//! (`f64`) and 6-8 ns (`f32`) for glibc's scalar `sin` + `cos`, which is what
//! XLA's CPU backend calls for `jnp.sin`, `jnp.cos`.
//!
//! # Accuracy (checked by `solver/tests.rs`)
//!
//! * `f64`: `|E - e sin E - m| <= 1e-12` for `e <= 0.9999` and
//!   `|E - E_ref| <= 1e-13` for `e <= 0.999` (both about `1e-15` measured), on
//!   grids that include the corner `|M| <= 1e-3`, `e` in `[0.99, 0.9999]`.
//! * `f32`: backward error `<= 2e-5` (about `3e-7` measured, in `f64` from the
//!   `f32` outputs) for `e <= 0.9999`.
//!
//! An eccentricity outside `[0, 1)`, a NaN, or an infinite `M` gives NaN for
//! both outputs of that element. Any finite `M` is solved, up to `f64::MAX`.

use core::mem::MaybeUninit;
use core::ops::{Add, Div, Mul, Neg, Sub};

use multiversion::multiversion;

use crate::slot::Slot;

mod reduce;
#[cfg(test)]
mod tests;

use reduce::{reduce_large, LARGE_M};

// ---------------------------------------------------------------------------
// Constants shared by both dtypes (the `f32` ones are rounded from these).

/// `2 pi` in three parts: `A` and `B` have 28 significant bits.
const TWO_PI_A: f64 = 6.283185303211212;
const TWO_PI_B: f64 = 3.968_374_323_592_982_5e-9;
const TWO_PI_C: f64 = -4.870_820_711_189_586e-18;
const INV_TWO_PI: f64 = 0.159_154_943_091_895_35;
/// `|M| / 2pi` is clamped to this before rounding (keeps the magic rounding valid
/// for the large `M` that the exact reduction then redoes).
const K_MAX: f64 = 1.125_899_906_842_624e15; // 2^50
/// `2 pi` in three `f32` parts (`A` is `2 pi` rounded to `f32`; the rest to about
/// `4e-23`) and `1 / (2 pi)`, for the `f32` reduction with FMA.
const TWO_PI_A32: f32 = 6.283_185_5;
const TWO_PI_B32: f32 = -1.748_455_5e-7;
const TWO_PI_C32: f32 = -6.860_498e-15;
const INV_TWO_PI32: f32 = 0.159_154_94;
/// Below this `|M|` the `f32` reduction with FMA is used (`|M| / 2pi < 2^20`).
const LARGE_M32: f32 = 4_194_304.0; // 2^22
/// Markley's `alpha = (3 pi^2 + 1.6 pi (pi - |M|) / (1 + e)) / (pi^2 - 6)`,
/// written as `ALPHA0 + ALPHA1 * (pi - |M|) / (1 + e)`.
const ALPHA0: f64 = 7.651_638_290_191_292_5;
const ALPHA1: f64 = 1.298_982_460_410_84;
/// `1 / (1 + e)` on `[0, 1]` (lowest power first; Chebyshev fit, relative error
/// 5.1e-5, which moves Markley's empirical `alpha` by less than 1e-5 relative
/// and saves a division).
const RECIP_1PE: [f64; 6] = [
    0.999_948_982_194_786,
    -0.996_275_700_219_376_6,
    0.953_420_743_839_600_1,
    -0.770_572_929_952_553_4,
    0.417_937_860_313_249_3,
    -0.104_484_465_078_312_33,
];
/// Polynomial (lowest power first) approximating `z^(-1/3)` on `[1, 8]`
/// (Chebyshev fit, relative error 2.6e-2 before the Newton steps).
const RCBRT_INIT: [f64; 4] =
    [1.205_349_891_422_690_1, -0.267_643_418_046_174_1, 0.038_675_058_265_227_75, -0.002_038_603_180_644_133];
/// `f32`: polynomial approximating `z^(1/3)` itself on `[1, 8]` (fitted for
/// relative error, 1.9e-2), for one Halley step (error 4.5e-6 after it).
const CBRT32: [f32; 4] = [0.726_920_8, 0.324_196_5, -0.033_637_353, 0.001_645_962];

/// `sin x = x + x^3 * S(x^2)`, Taylor through `x^15` (error below `5e-17` on
/// `[-pi/4, pi/4]`); `f32` has its own shorter fit, `SIN32`.
const SIN: [f64; 7] = [
    -1.0 / 6.0,
    1.0 / 120.0,
    -1.0 / 5040.0,
    1.0 / 362_880.0,
    -1.0 / 39_916_800.0,
    1.0 / 6_227_020_800.0,
    -1.0 / 1_307_674_368_000.0,
];
/// `cos x = 1 - x^2/2 + x^4 * C(x^2)`, Taylor through `x^16` (error below
/// `3e-18`); `f32` has its own shorter fit, `COS32`.
const COS: [f64; 7] = [
    1.0 / 24.0,
    -1.0 / 720.0,
    1.0 / 40_320.0,
    -1.0 / 3_628_800.0,
    1.0 / 479_001_600.0,
    -1.0 / 87_178_291_200.0,
    1.0 / 20_922_789_888_000.0,
];

/// `f32`: `sin x = x + x^3 * S(x^2)` and `cos x = 1 - x^2/2 + x^4 * C(x^2)` on
/// `[-pi/4, pi/4]` with three-term polynomials fitted for relative error (1.2e-7 in
/// `sin x - x`, 5e-8 in `C`): in `f32` arithmetic `sin` is within 4.7e-8 and `cos`
/// within 6.6e-8 of the true values, as the five Taylor terms were (4.2e-8, 6.6e-8).
const SIN32: [f32; 3] = [-0.166_666_64, 0.008_332_745, -0.000_195_873_61];
const COS32: [f32; 3] = [0.041_666_664, -0.001_388_830_1, 0.000_024_547_608];

/// Elements per block in the slice functions (512 bytes of each input).
pub(crate) const BLOCK64: usize = 64;
pub(crate) const BLOCK32: usize = 128;

/// A block's worth of one intermediate, on the stack, aligned to a cache line.
///
/// Without the alignment a `[T; L]` local is aligned to 16 bytes at most, and where it
/// lands depends on the caller's stack: the block loops' 64-byte vector loads and
/// stores then cross two cache lines at three stack positions in four. Measured on the
/// fused forward + JVP (f32, 16384 elements, in cache, 64-byte aligned buffers as XLA
/// gives), with the stack moved 16 bytes at a time: fused / forward 1.01–1.08 at one
/// position in four and 1.16–1.45 at the others before; 1.03–1.06 at every one with it.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Scratch<T, const L: usize>(pub(crate) [T; L]);

impl<T, const L: usize> core::ops::Deref for Scratch<T, L> {
    type Target = [T; L];
    #[inline(always)]
    fn deref(&self) -> &[T; L] {
        &self.0
    }
}

impl<T, const L: usize> core::ops::DerefMut for Scratch<T, L> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T; L] {
        &mut self.0
    }
}

// ---------------------------------------------------------------------------
// The float type the solver is generic over.

/// What the solver needs of a float type: arithmetic, its constants, and the
/// three steps that depend on the bit layout or on the reduction's precision.
pub(crate) trait Real:
    Copy
    + 'static
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const NAN: Self;
    const MAX: Self;
    const PI: Self;
    /// `pi / 2` in two parts; `n * PIO2_A` is exact for the quadrants `n <= 2`.
    const PIO2_A: Self;
    const PIO2_B: Self;
    const TWO_OVER_PI: Self;
    /// `1.5 * 2^(mantissa bits)`: `(x + R) - R` rounds to the nearest integer.
    const ROUND_MAGIC: Self;
    const ALPHA0: Self;
    const ALPHA1: Self;
    const SIN: &'static [Self];
    const COS: &'static [Self];
    /// Whether the correction is of fifth order (else third, Halley-class).
    const FIFTH_ORDER: bool;

    /// A literal of the algorithm (exact in both types, or rounded once).
    fn lit(x: f64) -> Self;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    fn mul_add(self, b: Self, c: Self) -> Self;
    /// `M` reduced to `[-pi, pi]` by Cody-Waite: exact for `|M| < LARGE_M`,
    /// garbage (never a panic) beyond, where [`Real::is_large`] holds.
    fn reduce_fast<const F: bool>(m: Self) -> Self;
    /// Whether `M` needs [`Real::reduce_exact`]: `|M| >= LARGE_M` (or infinite).
    fn is_large(m: Self) -> bool;
    /// `M` reduced to `[-pi, pi]` by Payne-Hanek: the slow path for large `M`.
    fn reduce_exact(m: Self) -> Self;
    /// `1 / (1 + e)` for Markley's `alpha`, to about `5e-5` relative or better.
    fn recip_1pe<const F: bool>(e: Self) -> Self;
    /// `y^(2/3)` for positive normal `y`; garbage (never a panic) otherwise.
    fn pow_two_thirds<const F: bool>(y: Self) -> Self;
}

/// The methods of [`Real`] that the standard float types have under the same name.
macro_rules! std_float_ops {
    ($t:ty) => {
        #[inline(always)]
        fn abs(self) -> Self {
            <$t>::abs(self)
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            <$t>::sqrt(self)
        }
        #[inline(always)]
        fn mul_add(self, b: Self, c: Self) -> Self {
            <$t>::mul_add(self, b, c)
        }
    };
}

impl Real for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const NAN: Self = f64::NAN;
    const MAX: Self = f64::MAX;
    const PI: Self = core::f64::consts::PI;
    /// `A` has 50 significant bits (`n * A` exact for `n <= 7`).
    const PIO2_A: Self = core::f64::consts::FRAC_PI_2;
    const PIO2_B: Self = 6.123_233_995_736_766e-17;
    const TWO_OVER_PI: Self = core::f64::consts::FRAC_2_PI;
    const ROUND_MAGIC: Self = 6_755_399_441_055_744.0;
    const ALPHA0: Self = ALPHA0;
    const ALPHA1: Self = ALPHA1;
    const SIN: &'static [Self] = &SIN;
    const COS: &'static [Self] = &COS;
    const FIFTH_ORDER: bool = true;

    std_float_ops!(f64);

    #[inline(always)]
    fn lit(x: f64) -> Self {
        x
    }

    /// Cody-Waite with `2 pi` in three parts: `k * TWO_PI_A` and `k * TWO_PI_B`
    /// are exact for `|k| < 2^25`. `k` is the rounded product `M / 2pi`, so where
    /// `M` lies within about an ulp of an odd multiple of `pi` it may be one off the
    /// nearest integer, and `M - 2 pi k` lands just outside `[-pi, pi]` (by up to
    /// about `ulp(M)`): a second step with `k2` in `{-1, 0, 1}` brings it back, as
    /// in the `f32` reduction (`k2 = 0`, every other `M`, leaves the bits as they
    /// are). Clamping instead would answer `E = +-pi` there.
    #[inline(always)]
    fn reduce_fast<const F: bool>(m_in: f64) -> f64 {
        let k = round((m_in * INV_TWO_PI).clamp(-K_MAX, K_MAX));
        let m = fma::<f64, F>(-k, TWO_PI_A, m_in);
        let m = fma::<f64, F>(-k, TWO_PI_B, m);
        let m = fma::<f64, F>(-k, TWO_PI_C, m);
        let k2 = round(m * INV_TWO_PI);
        let m = fma::<f64, F>(-k2, TWO_PI_A, m);
        let m = fma::<f64, F>(-k2, TWO_PI_B, m);
        let m = fma::<f64, F>(-k2, TWO_PI_C, m);
        m.clamp(-Self::PI, Self::PI)
    }

    #[inline(always)]
    fn is_large(m: f64) -> bool {
        m.abs() >= LARGE_M
    }

    #[inline(never)]
    fn reduce_exact(m: f64) -> f64 {
        reduce_large(m).clamp(-Self::PI, Self::PI)
    }

    /// The polynomial (five FMAs): the `f64` divider is busy enough.
    #[inline(always)]
    fn recip_1pe<const F: bool>(e: f64) -> f64 {
        poly::<f64, F>(e, &RECIP_1PE)
    }

    #[inline(always)]
    fn pow_two_thirds<const F: bool>(y: f64) -> f64 {
        let bits = y.to_bits();
        // Biased exponent as an exact f64, then j = floor((exp - 1023) / 3).
        let eb = f64::from_bits((bits >> 52) | 0x4330_0000_0000_0000) - 4_503_599_627_370_496.0;
        let j = round((eb - 1023.0 + 0.5) * (1.0 / 3.0) - 0.5);
        // z = y * 2^(-3j) in [1, 8): subtract 3j from the exponent field.
        let magic_bits = Self::ROUND_MAGIC.to_bits();
        let j3 = (3.0 * j + Self::ROUND_MAGIC).to_bits().wrapping_sub(magic_bits);
        let j2 = (2.0 * j + Self::ROUND_MAGIC).to_bits().wrapping_sub(magic_bits);
        let z = f64::from_bits(bits.wrapping_sub(j3 << 52));
        // w = (z^(1/3))^2 * 2^(2j).
        let t = cbrt_1_8::<F>(z);
        f64::from_bits((t * t).to_bits().wrapping_add(j2 << 52))
    }
}

impl Real for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const NAN: Self = f32::NAN;
    const MAX: Self = f32::MAX;
    const PI: Self = core::f32::consts::PI;
    /// `A` has 20 significant bits (= 1.5707969665527344 exactly).
    const PIO2_A: Self = 1.570_797;
    const PIO2_B: Self = (core::f64::consts::FRAC_PI_2 - 1.570_797f32 as f64) as f32;
    const TWO_OVER_PI: Self = core::f32::consts::FRAC_2_PI;
    const ROUND_MAGIC: Self = 12_582_912.0;
    const ALPHA0: Self = ALPHA0 as f32;
    const ALPHA1: Self = ALPHA1 as f32;
    const SIN: &'static [Self] = &SIN32;
    const COS: &'static [Self] = &COS32;
    const FIFTH_ORDER: bool = false;

    std_float_ops!(f32);

    #[inline(always)]
    fn lit(x: f64) -> Self {
        x as f32
    }

    /// With FMA, in `f32` lanes: `k = round(M / 2pi)`, then `M - k A` is exact
    /// (for `|M| < LARGE_M32` both `M` and `k A` are multiples of `2^-21`, or of
    /// `2^-22` with `|M - k A| < 4`, and `|M - k A| < 8`, so the difference has
    /// at most 24 significant bits), `- k B - k C` are rounded once each; `k` may be one
    /// off the nearest integer (the product `M / 2pi` is rounded), so a second
    /// step with `k2` in `{-1, 0, 1}` brings the result into `[-pi, pi]`.
    /// Without FMA, in `f64` (an `f32` is an exact `f64`), then rounded to `f32`.
    #[inline(always)]
    fn reduce_fast<const F: bool>(m_in: f32) -> f32 {
        if F {
            let k = round(m_in * INV_TWO_PI32);
            let m = fma::<f32, F>(-k, TWO_PI_A32, m_in);
            let m = fma::<f32, F>(-k, TWO_PI_B32, m);
            let m = fma::<f32, F>(-k, TWO_PI_C32, m);
            let k2 = round(m * INV_TWO_PI32);
            let m = fma::<f32, F>(-k2, TWO_PI_A32, m);
            fma::<f32, F>(-k2, TWO_PI_B32, m).clamp(-Self::PI, Self::PI)
        } else {
            (f64::reduce_fast::<F>(m_in as f64) as f32).clamp(-Self::PI, Self::PI)
        }
    }

    #[inline(always)]
    fn is_large(m: f32) -> bool {
        m.abs() >= LARGE_M32
    }

    /// Cody-Waite in `f64` without FMA (`k * TWO_PI_A`, `k * TWO_PI_B` are exact)
    /// below `LARGE_M`, Payne-Hanek from there on.
    #[inline(never)]
    fn reduce_exact(m: f32) -> f32 {
        let m = m as f64;
        let r = if m.abs() < LARGE_M { f64::reduce_fast::<false>(m) } else { reduce_large(m) };
        (r as f32).clamp(-Self::PI, Self::PI)
    }

    /// A division: in `f32` the divider has room (with it, three divisions and a
    /// square root per vector).
    #[inline(always)]
    fn recip_1pe<const F: bool>(e: f32) -> f32 {
        1.0 / (1.0 + e)
    }

    #[inline(always)]
    fn pow_two_thirds<const F: bool>(y: f32) -> f32 {
        let bits = y.to_bits();
        let eb = (bits >> 23) as i32 as f32; // exact, vectorizes (cvtdq2ps)
        let j = round((eb - 127.0 + 0.5) * (1.0 / 3.0) - 0.5);
        // 3j and 2j (|j| <= 43) as two's-complement integers from the bits of
        // `x + ROUND_MAGIC`, as in f64: a float-to-int `as` cast saturates, and
        // LLVM scalarizes its NaN and range checks (16 `vucomiss` per vector).
        let magic_bits = Self::ROUND_MAGIC.to_bits();
        let j3 = (3.0 * j + Self::ROUND_MAGIC).to_bits().wrapping_sub(magic_bits);
        let j2 = (2.0 * j + Self::ROUND_MAGIC).to_bits().wrapping_sub(magic_bits);
        let z = f32::from_bits(bits.wrapping_sub(j3 << 23));
        let t = cbrt_1_8_halley::<F>(z);
        f32::from_bits((t * t).to_bits().wrapping_add(j2 << 23))
    }
}

// ---------------------------------------------------------------------------
// Small helpers (all `#[inline(always)]`, so they take on the target features of
// the multiversioned function they are inlined into).

/// `a * b + c`, fused when the caller's target has FMA (`F`), plain otherwise
/// (`mul_add` without hardware FMA is a slow library call).
#[inline(always)]
fn fma<T: Real, const F: bool>(a: T, b: T, c: T) -> T {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Horner evaluation, coefficients lowest power first.
#[inline(always)]
fn poly<T: Real, const F: bool>(z: T, c: &[T]) -> T {
    let mut i = c.len() - 1;
    let mut p = c[i];
    while i > 0 {
        i -= 1;
        p = fma::<T, F>(p, z, c[i]);
    }
    p
}

/// Nearest integer (ties to even) for `|x|` below half of `ROUND_MAGIC`, without libm.
#[inline(always)]
fn round<T: Real>(x: T) -> T {
    (x + T::ROUND_MAGIC) - T::ROUND_MAGIC
}

/// `f64`: `z^(1/3)` for `z` in `[1, 8)`: `g ~ z^(-1/3)` from a polynomial, two
/// division-free Newton steps `g += g (1 - z g^3) / 3` (error -> 2 err^2), then
/// `z g^2`.
#[inline(always)]
fn cbrt_1_8<const F: bool>(z: f64) -> f64 {
    let mut g = poly::<f64, F>(z, &RCBRT_INIT);
    for _ in 0..2 {
        let g3 = g * g * g;
        g = fma::<f64, F>(g * (1.0 / 3.0), fma::<f64, F>(-z, g3, 1.0), g);
    }
    z * g * g
}

/// `f32`: `z^(1/3)` for `z` in `[1, 8)`: `t ~ z^(1/3)` from a polynomial, then one
/// Halley step `t (t^3 + 2z) / (2t^3 + z)` (error -> err^3): one division in
/// place of seven multiplies and FMAs and a shorter dependency chain than two
/// Newton steps. The divider has room in the `f32` solver (with all four of its
/// divisions made multiplies, an experiment, it ran only about 3% faster).
#[inline(always)]
fn cbrt_1_8_halley<const F: bool>(z: f32) -> f32 {
    let t = poly::<f32, F>(z, &CBRT32);
    let t3 = t * t * t;
    t * fma::<f32, F>(2.0, z, t3) / fma::<f32, F>(2.0, t3, z)
}

/// `x` where `ok`, else NaN.
#[inline(always)]
fn mask<T: Real>(ok: bool, x: T) -> T {
    if ok {
        x
    } else {
        T::NAN
    }
}

/// Whether `(m, e)` is in the solver's domain (finite `m`, `0 <= e < 1`).
#[inline(always)]
fn valid<T: Real>(m: T, e: T) -> bool {
    (T::ZERO..T::ONE).contains(&e) & (m.abs() <= T::MAX)
}

// ---------------------------------------------------------------------------
// The kernel, in four stages. A stage is a short dependency chain; the slice
// functions run each stage over a block of elements before the next, so the
// vectorized loop of every stage has several independent vectors in flight (a
// single fused loop body is one ~300-cycle chain and stalls on latency). The
// scalar functions run the same stages in sequence, so they give bit-identical
// results.

/// `M` reduced to `[-pi, pi]`: Cody-Waite, or Payne-Hanek for large `M`.
#[inline(always)]
fn reduce<T: Real, const F: bool>(m: T) -> T {
    if T::is_large(m) {
        T::reduce_exact(m)
    } else {
        T::reduce_fast::<F>(m)
    }
}

/// Whether any element of `m` needs the exact reduction (no early exit, so the
/// loop vectorizes).
#[inline(always)]
fn any_large<T: Real>(m: &[T]) -> bool {
    m.iter().fold(false, |acc, &x| acc | T::is_large(x))
}

/// Stage 1: Markley's starter up to the cube root, for `m` = `M` reduced to
/// `[-pi, pi]`. Returns `(m, d, q, r, y)`; the starter needs `w = y^(2/3)`.
#[inline(always)]
fn stage1<T: Real, const F: bool>(m: T, e: T) -> (T, T, T, T, T) {
    let a = m.abs();
    // Markley (1995): the cubic  d E^3 ... with alpha, d, q, r as in the paper.
    let ome = T::ONE - e;
    let alpha = fma::<T, F>(T::ALPHA1 * (T::PI - a), T::recip_1pe::<F>(e), T::ALPHA0);
    let d = fma::<T, F>(alpha, e, T::lit(3.0) * ome);
    let ad = alpha * d;
    let q = fma::<T, F>(T::lit(2.0) * ad, ome, -a * a);
    let r = a * fma::<T, F>(T::lit(3.0) * ad, d - ome, a * a);
    let q2 = q * q;
    let y = r + fma::<T, F>(q2, q, r * r).sqrt();
    (m, d, q, r, y)
}

/// Stage 3: the starter `E1`, its sine and cosine, and `f0 = E1 - e sin E1 - a`,
/// `f1 = 1 - e cos E1`. Returns `(E1, sin E1, cos E1, f0, f1)`.
#[inline(always)]
fn stage3<T: Real, const F: bool>(m: T, e: T, d: T, q: T, r: T, w: T) -> (T, T, T, T, T) {
    let a = m.abs();
    let ome = T::ONE - e;
    let wd = fma::<T, F>(w, w + q, q * q); // w^2 + w q + q^2 > 0
                                           // E1 = (2 r w / wd + a) / d, with one division.
    let e1 = fma::<T, F>(a, wd, T::lit(2.0) * r * w) / (wd * d);
    // Quadrant n in {0, 1, 2} (E1 in [0, ~pi]) and x = E1 - n pi/2 in [-pi/4, pi/4].
    let n = round(e1 * T::TWO_OVER_PI);
    let x = fma::<T, F>(-n, T::PIO2_B, fma::<T, F>(-n, T::PIO2_A, e1));
    let z = x * x;
    let xs = x * z * poly::<T, F>(z, T::SIN); // sin x - x
    let zc = z * fma::<T, F>(-z, poly::<T, F>(z, T::COS), T::lit(0.5)); // 1 - cos x
    let sx = x + xs;
    let cx = T::ONE - zc;
    let q0 = n == T::ZERO;
    let q1 = n == T::ONE;
    let s1 = if q0 {
        sx
    } else if q1 {
        cx
    } else {
        -sx
    };
    let c1 = if q0 {
        cx
    } else if q1 {
        -sx
    } else {
        -cx
    };
    // For n = 0 (then x == E1) use the cancellation-free forms
    // f0 = (1-e) E - e (sin E - E) - a and f1 = (1-e) + e (1 - cos E).
    let f0 = if q0 { fma::<T, F>(ome, e1, -e * xs) - a } else { (e1 - e * s1) - a };
    let f1 = if q0 { fma::<T, F>(e, zc, ome) } else { fma::<T, F>(-e, c1, T::ONE) };
    (e1, s1, c1, f0, f1)
}

/// Stage 4: the correction and the final `(E, sin E, cos E)`, `E` in `[-pi, pi]`
/// with the sign of the reduced `m`.
#[inline(always)]
fn stage4<T: Real, const F: bool>(m: T, e: T, e1: T, s1: T, c1: T, f0: T, f1: T) -> (T, T, T) {
    // Series reversion of f0 + f1 d + f2 d^2/2 + f3 d^3/6 + f4 d^4/24 = 0 with
    // f2 = e sin E1, f3 = e cos E1, f4 = -f2:  u = -f0/f1, bk = fk/(k! f1),
    // d = u - b2 u^2 + (2 b2^2 - b3) u^3 [+ (-5 b2^3 + 5 b2 b3 - b4) u^4 at fifth order].
    let inv = T::ONE / f1;
    let u = -f0 * inv;
    let b2 = T::lit(0.5) * e * s1 * inv;
    let b3 = e * c1 * inv * T::lit(1.0 / 6.0);
    let c3 = fma::<T, F>(T::lit(2.0) * b2, b2, -b3);
    let c3 = if T::FIFTH_ORDER {
        let c4 = b2 * fma::<T, F>(T::lit(5.0), b3 - b2 * b2, T::lit(1.0 / 12.0)); // b4 = -b2/12
        fma::<T, F>(c4, u, c3)
    } else {
        c3
    };
    let delta = fma::<T, F>(u * u, fma::<T, F>(c3, u, -b2), u);
    // Angle addition; |delta| < 5e-4, so sin delta = delta - delta^3/6 and
    // 1 - cos delta = delta^2/2 - delta^4/24 are exact to below 1e-19.
    let d2 = delta * delta;
    let sd = fma::<T, F>(delta * d2, T::lit(-1.0 / 6.0), delta);
    let omcd = d2 * fma::<T, F>(d2, T::lit(-1.0 / 24.0), T::lit(0.5));
    let sin_e = s1 + fma::<T, F>(c1, sd, -s1 * omcd);
    let cos_e = c1 - fma::<T, F>(s1, sd, c1 * omcd);
    let sgn = if m < T::ZERO { -T::ONE } else { T::ONE };
    (sgn * (e1 + delta), sgn * sin_e, cos_e)
}

/// All stages for one element: `(E, sin E, cos E)`; garbage (never a panic) for
/// invalid inputs, which the callers mask.
#[inline(always)]
fn kernel<T: Real, const F: bool>(m_in: T, e: T) -> (T, T, T) {
    let (m, d, q, r, y) = stage1::<T, F>(reduce::<T, F>(m_in), e);
    let w = T::pow_two_thirds::<F>(y);
    let (e1, s1, c1, f0, f1) = stage3::<T, F>(m, e, d, q, r, w);
    stage4::<T, F>(m, e, e1, s1, c1, f0, f1)
}

/// `(sin E, cos E)` of one element, NaN outside the domain.
#[inline(always)]
pub(crate) fn solve_masked<T: Real, const F: bool>(m: T, e: T) -> (T, T) {
    let (_, s, c) = kernel::<T, F>(m, e);
    let ok = valid(m, e);
    (mask(ok, s), mask(ok, c))
}

/// One block of `L` elements, stage by stage; `out(i, sin E, cos E)` takes element
/// `i`'s results (NaN outside the domain) as the last stage computes them, so a
/// caller's own work on them and its stores run in that loop (the fused JVP writes
/// its four outputs there: one streaming pass, no burst of stores after a chunk).
#[inline(always)]
pub(crate) fn block_with<T: Real, const F: bool, const L: usize>(
    m: &[T; L],
    e: &[T; L],
    mut out: impl FnMut(usize, T, T),
) {
    let z = Scratch([T::ZERO; L]);
    let (mut mr, mut d, mut q, mut r, mut y) = (z, z, z, z, z);
    // The reduction in a loop of its own: its chain (two rounding steps) and the
    // starter's (a division and a square root) in one loop body are too long for
    // the out-of-order window to overlap several vectors.
    for i in 0..L {
        mr[i] = T::reduce_fast::<F>(m[i]);
    }
    for i in 0..L {
        (mr[i], d[i], q[i], r[i], y[i]) = stage1::<T, F>(mr[i], e[i]);
    }
    if any_large(m) {
        // The rare elements whose Cody-Waite reduction is not exact: again,
        // exactly (what `reduce` does for one element, so the results match).
        for i in 0..L {
            if T::is_large(m[i]) {
                (mr[i], d[i], q[i], r[i], y[i]) = stage1::<T, F>(T::reduce_exact(m[i]), e[i]);
            }
        }
    }
    let mut w = z;
    for i in 0..L {
        w[i] = T::pow_two_thirds::<F>(y[i]);
    }
    let (mut e1, mut s1, mut c1, mut f0, mut f1) = (z, z, z, z, z);
    for i in 0..L {
        (e1[i], s1[i], c1[i], f0[i], f1[i]) = stage3::<T, F>(mr[i], e[i], d[i], q[i], r[i], w[i]);
    }
    for i in 0..L {
        let (_, s, c) = stage4::<T, F>(mr[i], e[i], e1[i], s1[i], c1[i], f0[i], f1[i]);
        let ok = valid(m[i], e[i]);
        out(i, mask(ok, s), mask(ok, c));
    }
}

/// One block of `L` elements into `(sin E, cos E)`.
#[inline(always)]
fn block<T: Real, const F: bool, S: Slot<T>, const L: usize>(m: &[T], e: &[T], sin_e: &mut [S], cos_e: &mut [S]) {
    let (m, e): (&[T; L], &[T; L]) = (m.try_into().unwrap(), e.try_into().unwrap());
    let (sin_e, cos_e): (&mut [S; L], &mut [S; L]) = (sin_e.try_into().unwrap(), cos_e.try_into().unwrap());
    block_with::<T, F, L>(m, e, |i, s, c| {
        sin_e[i].put(s);
        cos_e[i].put(c);
    });
}

// ---------------------------------------------------------------------------
// Dispatch and the public API.

#[inline(always)]
fn check_lengths(m: usize, e: usize, s: usize, c: usize) {
    if !(m == e && m == s && m == c) {
        lengths_differ(m, e, s, c);
    }
}

/// The panic of [`check_lengths`], out of line: formatting its message would
/// otherwise give every caller a stack frame.
#[cold]
#[inline(never)]
fn lengths_differ(m: usize, e: usize, s: usize, c: usize) -> ! {
    panic!("kepler solver: slice lengths differ (m: {m}, e: {e}, sin_e: {s}, cos_e: {c})");
}

/// The slice solver: whole blocks of `L`, then the remainder element by element.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "x86_64+avx"))]
fn solve_dispatch<T: Real, S: Slot<T>, const L: usize>(m: &[T], e: &[T], sin_e: &mut [S], cos_e: &mut [S]) {
    const FMA: bool = multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64"));
    let mut mc = m.chunks_exact(L);
    let mut ec = e.chunks_exact(L);
    let mut sc = sin_e.chunks_exact_mut(L);
    let mut cc = cos_e.chunks_exact_mut(L);
    for (((m, e), s), c) in (&mut mc).zip(&mut ec).zip(&mut sc).zip(&mut cc) {
        block::<T, FMA, S, L>(m, e, s, c);
    }
    let (m, e) = (mc.remainder(), ec.remainder());
    for (((m, e), s), c) in m.iter().zip(e).zip(sc.into_remainder()).zip(cc.into_remainder()) {
        let (sv, cv) = solve_masked::<T, FMA>(*m, *e);
        s.put(sv);
        c.put(cv);
    }
}

/// [`solve_f64`] and [`solve_f32`]: `one` is the dispatched one-element solver.
///
/// One element (what an N = 1 call from JAX asks) is solved here, with nothing kept
/// across the call to `one` but the two output slots; a few elements and whole
/// blocks each take a function of their own that is never inlined, so this one sets
/// up neither the loop's registers nor the block function's large stack frame.
#[inline(always)]
fn solve<T: Real, S: Slot<T>, const L: usize>(
    m: &[T],
    e: &[T],
    sin_e: &mut [S],
    cos_e: &mut [S],
    one: fn(T, T) -> (T, T),
) {
    check_lengths(m.len(), e.len(), sin_e.len(), cos_e.len());
    if let ([m], [e], [s], [c]) = (m, e, &mut *sin_e, &mut *cos_e) {
        let (sv, cv) = one(*m, *e);
        s.put(sv);
        c.put(cv);
    } else if m.len() < L {
        solve_few(m, e, sin_e, cos_e, one);
    } else {
        solve_blocks::<T, S, L>(m, e, sin_e, cos_e);
    }
}

/// Fewer elements than one block: element by element.
#[inline(never)]
fn solve_few<T: Real, S: Slot<T>>(m: &[T], e: &[T], sin_e: &mut [S], cos_e: &mut [S], one: fn(T, T) -> (T, T)) {
    for (((&m, &e), s), c) in m.iter().zip(e).zip(sin_e).zip(cos_e) {
        let (sv, cv) = one(m, e);
        s.put(sv);
        c.put(cv);
    }
}

/// [`solve_dispatch`] behind a call that is never inlined, so that the block
/// function's large stack frame is set up only when there is a block to solve.
#[inline(never)]
fn solve_blocks<T: Real, S: Slot<T>, const L: usize>(m: &[T], e: &[T], sin_e: &mut [S], cos_e: &mut [S]) {
    solve_dispatch::<T, S, L>(m, e, sin_e, cos_e);
}

/// Solves `M = E - e sin E` elementwise and writes `sin E` and `cos E`.
///
/// Every output element is written. An `e` outside `[0, 1)`, a NaN in `m` or
/// `e`, or an infinite `m` gives NaN in both outputs for that element.
///
/// `M` is reduced modulo the real `2 pi`, not modulo the `f64` nearest to it:
/// `M = 2.0 * PI` (about `2.4e-16` below the real `2 pi`) is solved as
/// `M = -2.4e-16`, whose `sin E` is small and negative. This is the exact
/// solution for the given input; see the README's section on Kepler.
///
/// # Panics
/// If the four slices do not all have the same length.
///
/// # Example
/// ```
/// use core::mem::MaybeUninit;
/// use xla_ffi_rs_ops::kepler::solver::{solve_f64, solve_one_f64};
///
/// let (m, e) = ([0.5, 1.0, 3.0], [0.1, 0.5, 0.9]);
/// let mut s = [MaybeUninit::uninit(); 3];
/// let mut c = [MaybeUninit::uninit(); 3];
/// solve_f64(&m, &e, &mut s, &mut c);
/// // One element: E from (sin E, cos E) solves Kepler's equation.
/// let (sin_e, cos_e) = solve_one_f64(1.0, 0.5);
/// let ea = sin_e.atan2(cos_e);
/// assert!((ea - 0.5 * ea.sin() - 1.0).abs() < 1e-15);
/// ```
pub fn solve_f64(m: &[f64], e: &[f64], sin_e: &mut [MaybeUninit<f64>], cos_e: &mut [MaybeUninit<f64>]) {
    solve::<f64, _, BLOCK64>(m, e, sin_e, cos_e, solve_one_f64);
}

/// The `f32` twin of [`solve_f64`] (backward error `<= 2e-5` for `e <= 0.9999`).
///
/// # Panics
/// If the four slices do not all have the same length.
pub fn solve_f32(m: &[f32], e: &[f32], sin_e: &mut [MaybeUninit<f32>], cos_e: &mut [MaybeUninit<f32>]) {
    solve::<f32, _, BLOCK32>(m, e, sin_e, cos_e, solve_one_f32);
}

/// One element of [`solve_f64`]: returns `(sin E, cos E)` (NaNs outside the
/// domain). Dispatched like the slice version, so the results are bit-identical.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "x86_64+avx"))]
pub fn solve_one_f64(m: f64, e: f64) -> (f64, f64) {
    const FMA: bool = multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64"));
    solve_masked::<f64, FMA>(m, e)
}

/// One element of [`solve_f32`]: returns `(sin E, cos E)` (NaNs outside the
/// domain). Dispatched like the slice version, so the results are bit-identical.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "x86_64+avx"))]
pub fn solve_one_f32(m: f32, e: f32) -> (f32, f32) {
    const FMA: bool = multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64"));
    solve_masked::<f32, FMA>(m, e)
}

/// The eccentric anomaly `E` itself, in `[-pi, pi]`: the solution for `M`
/// reduced to `[-pi, pi]` (so `E` has the sign of the reduced `M`). NaN outside
/// the domain. Same algorithm and dispatch as [`solve_f64`].
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "x86_64+avx"))]
pub fn eccentric_anomaly_f64(m: f64, e: f64) -> f64 {
    const FMA: bool = multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64"));
    let (ea, _, _) = kernel::<f64, FMA>(m, e);
    mask(valid(m, e), ea)
}
