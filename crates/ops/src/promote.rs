//! jnp's type promotion between two float types, and the accumulator the kernels
//! compute in: one declared table.
//!
//! The table below is the single source of these rules. It generates the
//! type-level [`Promote`] impls and the run-time [`PROMOTION`] rows; Python reads
//! the rows through `_native.promotion_table()` (abstract evaluation and the jnp
//! fallback), and the kernel table (`kernels.rs`) instantiates the rms_norm CUDA
//! kernels for each row. The Python tests check the rows against
//! `jnp.result_type`.

use half::{bf16, f16};
use xla_ffi::{DataType, Element};

use crate::float::Float;

/// `jnp.result_type(Self, W)` for the float types: the same type stays, `f16` with
/// `bf16` gives `f32`, otherwise the wider type wins.
pub trait Promote<W: Float>: Float {
    /// The promoted type.
    type Output: Float;
}

/// `A` and `B` are the same type (a compile-time check of the table).
trait Same<B> {}
impl<A> Same<A> for A {}
fn same<A: Same<B>, B>() {}

macro_rules! promotion_table {
    ($($a:ty, $b:ty => $o:ty, acc $c:ty;)*) => {
        $( impl Promote<$b> for $a { type Output = $o; } )*

        /// `(x, w, result_type(x, w), accumulator)` for every pair of float dtypes.
        pub const PROMOTION: &[(DataType, DataType, DataType, DataType)] =
            &[$((<$a as Element>::DTYPE, <$b as Element>::DTYPE, <$o as Element>::DTYPE, <$c as Element>::DTYPE)),*];

        /// The accumulator column is the promoted type's `Float::Acc`.
        #[allow(dead_code)]
        fn accumulator_column_is_output_acc() {
            $( same::<<$o as Float>::Acc, $c>(); )*
        }
    };
}

// x,    w     => result_type, acc accumulator;
promotion_table! {
    f16,  f16  => f16,  acc f32;  f16,  bf16 => f32,  acc f32;  f16,  f32 => f32, acc f32;  f16,  f64 => f64, acc f64;
    bf16, f16  => f32,  acc f32;  bf16, bf16 => bf16, acc f32;  bf16, f32 => f32, acc f32;  bf16, f64 => f64, acc f64;
    f32,  f16  => f32,  acc f32;  f32,  bf16 => f32,  acc f32;  f32,  f32 => f32, acc f32;  f32,  f64 => f64, acc f64;
    f64,  f16  => f64,  acc f64;  f64,  bf16 => f64,  acc f64;  f64,  f32 => f64, acc f64;  f64,  f64 => f64, acc f64;
}

/// The row of `(a, b)`, if both are float dtypes.
fn row(a: DataType, b: DataType) -> Option<&'static (DataType, DataType, DataType, DataType)> {
    PROMOTION.iter().find(|r| r.0 == a && r.1 == b)
}

/// The runtime twin of [`Promote`]: the promoted dtype of two float dtypes
/// (`a` itself for a dtype the table does not hold; callers check for floats first).
pub fn promote(a: DataType, b: DataType) -> DataType {
    row(a, b).map_or(a, |r| r.2)
}

/// The accumulator dtype for two float dtypes: `f64` if either is, else `f32`.
pub fn accumulator(a: DataType, b: DataType) -> DataType {
    row(a, b).map_or(DataType::F32, |r| r.3)
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
                assert_eq!(promote(dt::<$a>(), dt::<$b>()), dt::<<$a as Promote<$b>>::Output>(),
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
