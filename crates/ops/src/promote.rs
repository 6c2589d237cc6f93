//! jnp's type promotion between two float types, and the accumulator the kernels
//! compute in, at the type level ([`Promote`]) and as rows ([`PROMOTION`]).
//!
//! The rule itself is `xla_ffi`'s, the one the op declarations' `promote(...)` and
//! `acc(...)` use ([`xla_ffi::decl::promote`], [`xla_ffi::decl::accumulator`]): the
//! [`PROMOTION`] rows are computed from it, and the type-level [`Promote`] impls
//! below are checked against it at compile time. Python reads the rows through
//! `_native.promotion_table()`, and the kernel table (`rms_norm/kernel_table.rs`) instantiates the
//! rms_norm CUDA kernels for each row. The Python tests check the rows against
//! `jnp.result_type`.

use half::{bf16, f16};
use xla_ffi::decl::{accumulator, promote};
use xla_ffi::{DataType, Element};

use crate::float::Float;

/// `jnp.result_type(Self, W)` for the float types: the same type stays, `f16` with
/// `bf16` gives `f32`, otherwise the wider type wins.
pub trait Promote<W: Float>: Float {
    /// The promoted type.
    type Output: Float;
}

/// `(x, w, promote(x, w), accumulator(x, w))` by `xla_ffi`'s rule.
const fn row(x: DataType, w: DataType) -> (DataType, DataType, DataType, DataType) {
    match promote(x, w) {
        Some(y) => (x, w, y, accumulator(x, w)),
        None => panic!("promote: not a float pair"),
    }
}

macro_rules! promotion_table {
    ($($a:ty, $b:ty => $o:ty;)*) => {
        $( impl Promote<$b> for $a { type Output = $o; } )*

        /// `(x, w, result_type(x, w), accumulator)` for every pair of float dtypes.
        pub const PROMOTION: &[(DataType, DataType, DataType, DataType)] =
            &[$(row(<$a as Element>::DTYPE, <$b as Element>::DTYPE)),*];

        // Each impl's output type, and its accumulator type, are the rule's.
        const _: () = {$(
            let r = row(<$a as Element>::DTYPE, <$b as Element>::DTYPE);
            assert!(r.2.0 == <$o as Element>::DTYPE.0, "a Promote impl disagrees with xla_ffi::decl::promote");
            assert!(
                r.3.0 == <<$o as Float>::Acc as Element>::DTYPE.0,
                "an accumulator type disagrees with xla_ffi::decl::accumulator"
            );
        )*};
    };
}

// x,    w     => result_type (checked against the rule above);
promotion_table! {
    f16,  f16  => f16;  f16,  bf16 => f32;  f16,  f32 => f32;  f16,  f64 => f64;
    bf16, f16  => f32;  bf16, bf16 => bf16; bf16, f32 => f32;  bf16, f64 => f64;
    f32,  f16  => f32;  f32,  bf16 => f32;  f32,  f32 => f32;  f32,  f64 => f64;
    f64,  f16  => f64;  f64,  bf16 => f64;  f64,  f32 => f64;  f64,  f64 => f64;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dt<T: Float>() -> DataType {
        T::DTYPE
    }

    #[test]
    fn runtime_promotion_matches_the_trait() {
        macro_rules! check {
            ($($a:ty, $b:ty;)*) => {$(
                assert_eq!(promote(dt::<$a>(), dt::<$b>()), Some(dt::<<$a as Promote<$b>>::Output>()),
                    "{} + {}", stringify!($a), stringify!($b));
            )*};
        }
        check! {
            f16, f16; f16, bf16; f16, f32; f16, f64; bf16, f16; bf16, bf16; bf16, f32; bf16, f64;
            f32, f16; f32, bf16; f32, f32; f32, f64; f64, f16; f64, bf16; f64, f32; f64, f64;
        }
        assert_eq!(PROMOTION.len(), 16);
    }

    #[test]
    fn accumulator_is_f64_only_with_f64() {
        for &(a, b, _, acc) in PROMOTION {
            let want = if a == DataType::F64 || b == DataType::F64 { DataType::F64 } else { DataType::F32 };
            assert_eq!(acc, want, "{a} + {b}");
        }
        assert_eq!(accumulator(DataType::BF16, DataType::F32), DataType::F32);
        assert_eq!(accumulator(DataType::F16, DataType::F64), DataType::F64);
    }
}
