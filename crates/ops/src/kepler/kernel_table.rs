//! The CUDA kernels of `kepler.cu` the Kepler handlers launch, with their
//! instantiations: one per dtype the handlers take (see [`crate::kernels`]).

use xla_ffi::{DataType, ElementSpec};

use super::shapes::F32OrF64;
use crate::kernels::KernelFn;
use crate::kernels::Param::{In, Out, U64};

static TYPES: [DataType; 2] = [DataType::F32, DataType::F64];

/// `kepler<T>` (`T` the dtype of the operands) of `src/kepler/kepler.cu`.
pub static KEPLER: KernelFn = KernelFn {
    source: "src/kepler/kepler.cu",
    name: "kepler",
    params: &[In, In, Out, Out, U64],
    key: &[F32OrF64::accepts],
    arity: 1,
    types: &TYPES,
};

/// `kepler_tangent<T>` of `src/kepler/kepler.cu`.
pub static KEPLER_TANGENT: KernelFn = KernelFn {
    source: "src/kepler/kepler.cu",
    name: "kepler_tangent",
    params: &[In, In, In, In, In, Out, Out, U64],
    key: &[F32OrF64::accepts],
    arity: 1,
    types: &TYPES,
};

/// `kepler_cotangent<T>` of `src/kepler/kepler.cu`.
pub static KEPLER_COTANGENT: KernelFn = KernelFn {
    source: "src/kepler/kepler.cu",
    name: "kepler_cotangent",
    params: &[In, In, In, In, In, Out, Out, U64],
    key: &[F32OrF64::accepts],
    arity: 1,
    types: &TYPES,
};

/// `kepler_jvp<T>` of `src/kepler/kepler.cu` (`n`, then the steps of the two
/// tangents: 1 for an array, 0 for a scalar), for all three fused targets.
pub static KEPLER_JVP: KernelFn = KernelFn {
    source: "src/kepler/kepler.cu",
    name: "kepler_jvp",
    params: &[In, In, In, In, Out, Out, Out, Out, U64, U64, U64],
    key: &[F32OrF64::accepts],
    arity: 1,
    types: &TYPES,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kepler_instances_are_picked_by_dtype() {
        let k = KEPLER.instance(&[DataType::F64]).unwrap();
        assert_eq!(k.name(), "kepler<double>");
        assert_eq!(
            k.name_expression(),
            "static_cast<void(*)(const void*, unsigned long long, const void*, unsigned long long, void*, \
             unsigned long long, void*, unsigned long long, unsigned long long)>(kepler<double>)"
        );
        assert_eq!(KEPLER_TANGENT.instance(&[DataType::F32]).unwrap().name(), "kepler_tangent<float>");
        assert_eq!(KEPLER_COTANGENT.instance(&[DataType::F64]).unwrap().name(), "kepler_cotangent<double>");
        assert_eq!(KEPLER_JVP.instance(&[DataType::F32]).unwrap().name(), "kepler_jvp<float>");
        assert!(KEPLER.instance(&[DataType::F16]).is_none());
        assert!(KEPLER.instance(&[DataType::F32, DataType::F32]).is_none(), "one key dtype, not two");
    }
}
