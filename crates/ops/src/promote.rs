//! jnp's type promotion between two float types, at the type level.

use half::{bf16, f16};
use xla_ffi::{DataType, Float};

/// `jnp.result_type(Self, W)` for the float types: the same type stays, `f16` with
/// `bf16` gives `f32`, otherwise the wider type wins.
pub trait Promote<W: Float>: Float {
    /// The promoted type.
    type Output: Float;
}

macro_rules! promote {
    ($($a:ty, $b:ty => $o:ty;)*) => {$( impl Promote<$b> for $a { type Output = $o; } )*};
}

promote! {
    f16, f16 => f16;   f16, bf16 => f32;  f16, f32 => f32;  f16, f64 => f64;
    bf16, f16 => f32;  bf16, bf16 => bf16; bf16, f32 => f32; bf16, f64 => f64;
    f32, f16 => f32;   f32, bf16 => f32;  f32, f32 => f32;  f32, f64 => f64;
    f64, f16 => f64;   f64, bf16 => f64;  f64, f32 => f64;  f64, f64 => f64;
}

/// The runtime twin of [`Promote`]: the promoted dtype of two float dtypes.
pub fn promote(a: DataType, b: DataType) -> DataType {
    let rank = |d: DataType| match d {
        DataType::F16 | DataType::BF16 => 0,
        DataType::F32 => 1,
        _ => 2,
    };
    if a == b {
        a
    } else if rank(a) == 0 && rank(b) == 0 {
        DataType::F32
    } else if rank(a) >= rank(b) {
        a
    } else {
        b
    }
}

/// The accumulator dtype for two float dtypes: `f64` if either is, else `f32`.
pub fn accumulator(a: DataType, b: DataType) -> DataType {
    if a == DataType::F64 || b == DataType::F64 {
        DataType::F64
    } else {
        DataType::F32
    }
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
    }

    #[test]
    fn accumulator_is_f64_only_with_f64() {
        assert_eq!(accumulator(DataType::BF16, DataType::F32), DataType::F32);
        assert_eq!(accumulator(DataType::F16, DataType::F64), DataType::F64);
    }
}
