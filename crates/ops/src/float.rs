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
    /// Narrow from `f64`, rounding to nearest even.
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
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                <$t>::from_f64(v)
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
