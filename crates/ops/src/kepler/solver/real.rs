//! The float types the solver is generic over: the constants of the algorithm
//! (`f64`, and the `f32` ones rounded from them), the [`Real`] trait with its
//! `f64` and `f32` impls (the steps that depend on the bit layout or on the
//! reduction's precision), and the small arithmetic helpers the impls and the
//! kernel's stages share (all `#[inline(always)]`, so they take on the target
//! features of the multiversioned function they are inlined into).

use core::ops::{Add, Div, Mul, Neg, Sub};

use super::reduce::{reduce_large, LARGE_M};

// ---------------------------------------------------------------------------
// Constants shared by both dtypes (the `f32` ones are rounded from these).

/// `2 pi` in three parts: `A` and `B` have 28 significant bits.
pub(super) const TWO_PI_A: f64 = 6.283185303211212;
pub(super) const TWO_PI_B: f64 = 3.968_374_323_592_982_5e-9;
pub(super) const TWO_PI_C: f64 = -4.870_820_711_189_586e-18;
pub(super) const INV_TWO_PI: f64 = 0.159_154_943_091_895_35;
/// `|M| / 2pi` is clamped to this before rounding (keeps the magic rounding valid
/// for the large `M` that the exact reduction then redoes).
pub(super) const K_MAX: f64 = 1.125_899_906_842_624e15; // 2^50
/// `2 pi` in three `f32` parts (`A` is `2 pi` rounded to `f32`; the rest to about
/// `4e-23`) and `1 / (2 pi)`, for the `f32` reduction with FMA.
pub(super) const TWO_PI_A32: f32 = 6.283_185_5;
pub(super) const TWO_PI_B32: f32 = -1.748_455_5e-7;
pub(super) const TWO_PI_C32: f32 = -6.860_498e-15;
pub(super) const INV_TWO_PI32: f32 = 0.159_154_94;
/// Below this `|M|` the `f32` reduction with FMA is used (`|M| / 2pi < 2^20`).
pub(super) const LARGE_M32: f32 = 4_194_304.0; // 2^22
/// Markley's `alpha = (3 pi^2 + 1.6 pi (pi - |M|) / (1 + e)) / (pi^2 - 6)`,
/// written as `ALPHA0 + ALPHA1 * (pi - |M|) / (1 + e)`.
pub(super) const ALPHA0: f64 = 7.651_638_290_191_292_5;
pub(super) const ALPHA1: f64 = 1.298_982_460_410_84;
/// `1 / (1 + e)` on `[0, 1]` (lowest power first; Chebyshev fit, relative error
/// 5.1e-5, which moves Markley's empirical `alpha` by less than 1e-5 relative
/// and saves a division).
pub(super) const RECIP_1PE: [f64; 6] = [
    0.999_948_982_194_786,
    -0.996_275_700_219_376_6,
    0.953_420_743_839_600_1,
    -0.770_572_929_952_553_4,
    0.417_937_860_313_249_3,
    -0.104_484_465_078_312_33,
];
/// Polynomial (lowest power first) approximating `z^(-1/3)` on `[1, 8]`
/// (Chebyshev fit, relative error 2.6e-2 before the Newton steps).
pub(super) const RCBRT_INIT: [f64; 4] =
    [1.205_349_891_422_690_1, -0.267_643_418_046_174_1, 0.038_675_058_265_227_75, -0.002_038_603_180_644_133];
/// `f32`: polynomial approximating `z^(1/3)` itself on `[1, 8]` (fitted for
/// relative error, 1.9e-2), for one Halley step (error 4.5e-6 after it).
pub(super) const CBRT32: [f32; 4] = [0.726_920_8, 0.324_196_5, -0.033_637_353, 0.001_645_962];

/// `sin x = x + x^3 * S(x^2)`, Taylor through `x^15` (error below `5e-17` on
/// `[-pi/4, pi/4]`); `f32` has its own shorter fit, `SIN32`.
pub(super) const SIN: [f64; 7] = [
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
pub(super) const COS: [f64; 7] = [
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
pub(super) const SIN32: [f32; 3] = [-0.166_666_64, 0.008_332_745, -0.000_195_873_61];
pub(super) const COS32: [f32; 3] = [0.041_666_664, -0.001_388_830_1, 0.000_024_547_608];

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
pub(super) fn fma<T: Real, const F: bool>(a: T, b: T, c: T) -> T {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Horner evaluation, coefficients lowest power first.
#[inline(always)]
pub(super) fn poly<T: Real, const F: bool>(z: T, c: &[T]) -> T {
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
pub(super) fn round<T: Real>(x: T) -> T {
    (x + T::ROUND_MAGIC) - T::ROUND_MAGIC
}

/// `f64`: `z^(1/3)` for `z` in `[1, 8)`: `g ~ z^(-1/3)` from a polynomial, two
/// division-free Newton steps `g += g (1 - z g^3) / 3` (error -> 2 err^2), then
/// `z g^2`.
#[inline(always)]
pub(super) fn cbrt_1_8<const F: bool>(z: f64) -> f64 {
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
pub(super) fn cbrt_1_8_halley<const F: bool>(z: f32) -> f32 {
    let t = poly::<f32, F>(z, &CBRT32);
    let t3 = t * t * t;
    t * fma::<f32, F>(2.0, z, t3) / fma::<f32, F>(2.0, t3, z)
}

/// `x` where `ok`, else NaN.
#[inline(always)]
pub(super) fn mask<T: Real>(ok: bool, x: T) -> T {
    if ok {
        x
    } else {
        T::NAN
    }
}

/// Whether `(m, e)` is in the solver's domain (finite `m`, `0 <= e < 1`).
#[inline(always)]
pub(super) fn valid<T: Real>(m: T, e: T) -> bool {
    (T::ZERO..T::ONE).contains(&e) & (m.abs() <= T::MAX)
}
