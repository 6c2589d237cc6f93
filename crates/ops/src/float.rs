//! The float element types the kernels are written over, and the accumulator each
//! computes in: kernel arithmetic, kept out of the FFI crate (`xla_ffi` maps dtypes
//! to Rust types; what a kernel does with them is decided here).

use core::fmt;

use half::{bf16, f16};
use xla_ffi::Element;

/// The floating element types a dtype-generic kernel is written over:
/// `f16`, `bf16`, `f32` and `f64`.
///
/// [`Float::Acc`] is the type to accumulate in: `f32` for the 16- and 32-bit types,
/// `f64` for `f64`. Conversions go through it, so a kernel written as
/// `fn k<T: Float>(x: &[T]) -> T::Acc` reads the same for every type.
pub trait Float: Element + PartialOrd + fmt::Debug + Default {
    /// The accumulator: `f32`, or `f64` for `f64`.
    type Acc: AccFloat;
    /// Widen to the accumulator type (exact).
    fn to_acc(self) -> Self::Acc;
    /// Narrow from the accumulator, rounding to nearest even.
    fn from_acc(v: Self::Acc) -> Self;
    /// Widen to `f64` (exact).
    fn to_f64(self) -> f64;
    /// Narrow from `f64`, rounding to nearest even (once: no double rounding).
    fn from_f64(v: f64) -> Self;
    /// Narrow from `f32`, rounding to nearest even (exact for `f32` and `f64`).
    fn from_f32(v: f32) -> Self;
}

/// The two accumulator types, `f32` and `f64`, with the arithmetic kernels need.
pub trait AccFloat:
    Float
    + core::ops::Add<Output = Self>
    + core::ops::Sub<Output = Self>
    + core::ops::Mul<Output = Self>
    + core::ops::Div<Output = Self>
    + core::ops::AddAssign
    + core::ops::MulAssign
    + core::ops::Neg<Output = Self>
{
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Converts a count (a row length, say) to this type.
    fn from_usize(n: usize) -> Self;
}

impl Float for f32 {
    type Acc = f32;
    #[inline(always)]
    fn to_acc(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_acc(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl Float for f64 {
    type Acc = f64;
    #[inline(always)]
    fn to_acc(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_acc(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v as f64
    }
}

/// `v` as `f32`, rounded to odd: truncated toward zero, with the lowest mantissa
/// bit set when that dropped anything (NaN, infinities and exact values pass
/// unchanged). Rounding that to a format with at least two bits fewer (`bf16`,
/// `f16`, to nearest even) gives the same result as rounding `v` once, which a
/// round-to-nearest `f32` in between would not: a value just past a tie of the
/// narrow format can round to the tie itself in `f32`, and then to even. The
/// CUDA kernels narrow `double` the same way (`f64_to_f32_odd` in `rms_norm.cu`).
#[inline(always)]
pub(crate) fn f64_to_f32_odd(v: f64) -> f32 {
    let nearest = v as f32;
    if f64::from(nearest) == v || v.is_nan() {
        return nearest;
    }
    // Inexact: `nearest` is one of the two f32 neighbours of `v` (or an infinity
    // past f32::MAX); step to the one toward zero, then mark it odd.
    let mut bits = nearest.to_bits();
    if f64::from(nearest).abs() > v.abs() {
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

macro_rules! half_float {
    ($t:ty) => {
        impl Float for $t {
            type Acc = f32;
            #[inline(always)]
            fn to_acc(self) -> f32 {
                self.to_f32()
            }
            #[inline(always)]
            fn from_acc(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                <$t>::to_f64(self)
            }
            /// Rounded once: through `f32` rounded to odd (see `f64_to_f32_odd`),
            /// not `half`'s own `from_f64`, which rounds some values the wrong way
            /// (it drops the low 32 bits of the mantissa, or goes through a
            /// rounded `f32`, before its rounding).
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                <$t>::from_f32(f64_to_f32_odd(v))
            }
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                <$t>::from_f32(v)
            }
        }
    };
}
half_float!(f16);
half_float!(bf16);

macro_rules! acc_float {
    ($t:ty) => {
        impl AccFloat for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn from_usize(n: usize) -> Self {
                n as $t
            }
        }
    };
}
acc_float!(f32);
acc_float!(f64);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every finite positive value `lo` of a 16-bit format (but the largest) and
    /// the next one up, `hi`: `from_f64` of points between them, each exact in
    /// `f64`, against the answer read off where the point was put (below the
    /// midpoint: `lo`; above: `hi`; on it: the even one), and the same negated.
    fn check_every_gap<T: Float>(to_bits: fn(T) -> u16, from_bits: fn(u16) -> T, max_bits: u16) {
        for b in 1..max_bits {
            let (lo, hi) = (from_bits(b).to_f64(), from_bits(b + 1).to_f64());
            let half = (hi - lo) / 2.0;
            let even = if b % 2 == 0 { b } else { b + 1 };
            // Offsets down to 2^-40 of the gap: past f32's precision, so only a
            // conversion that rounds once sees them.
            for k in [3, 12, 22, 30, 40] {
                let d = (hi - lo) * (-(k as f64)).exp2();
                for (v, want) in
                    [(lo + d, b), (lo + half - d, b), (lo + half, even), (lo + half + d, b + 1), (hi - d, b + 1)]
                {
                    assert_eq!(
                        to_bits(T::from_f64(v)),
                        want,
                        "from_f64({v:e}) between bits {b:#06x} and {:#06x}",
                        b + 1
                    );
                    assert_eq!(to_bits(T::from_f64(-v)), want | 0x8000, "from_f64({:e})", -v);
                }
            }
        }
    }

    #[test]
    fn bf16_from_f64_rounds_once_to_nearest_even() {
        check_every_gap::<bf16>(bf16::to_bits, bf16::from_bits, 0x7F7F);
        // A value just past a tie in the low word of the f64 mantissa: 204.5 + 2^-16
        // is 205 (rounded through a nearest f32 tie first, it would be 204).
        assert_eq!(<bf16 as Float>::from_f64(204.5 + (-16f64).exp2()).to_f32(), 205.0);
    }

    #[test]
    fn f16_from_f64_rounds_once_to_nearest_even() {
        check_every_gap::<f16>(f16::to_bits, f16::from_bits, 0x7BFF);
        assert_eq!(<f16 as Float>::from_f64(1.0 + (-11f64).exp2() + (-40f64).exp2()).to_f32(), 1.0 + (-10f32).exp2());
    }

    #[test]
    fn f64_to_f32_odd_keeps_specials_and_exact_values() {
        for v in [0.0, -0.0, 1.0, -2.5, f64::from(f32::MAX), f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(f64_to_f32_odd(v).to_bits(), (v as f32).to_bits(), "{v}");
        }
        assert!(f64_to_f32_odd(f64::NAN).is_nan());
        // Past f32::MAX: the largest f32 (odd already), which still rounds to an
        // infinity in bf16 and f16; below the smallest subnormal: that subnormal.
        assert_eq!(f64_to_f32_odd(1e39), f32::MAX);
        assert_eq!(f64_to_f32_odd(-1e39), -f32::MAX);
        assert_eq!(f64_to_f32_odd(1e-50).to_bits(), 1);
        assert_eq!(f64_to_f32_odd(-1e-50).to_bits(), 0x8000_0001);
        assert_eq!(<bf16 as Float>::from_f64(1e39), bf16::INFINITY);
        assert_eq!(<f16 as Float>::from_f64(1e39), f16::INFINITY);
    }
}
