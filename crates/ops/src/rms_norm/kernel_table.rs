//! The CUDA kernels of `rms_norm.cu` the RMS normalization handlers launch, with
//! their instantiations: one per `(x, weight)` float pair (see [`crate::kernels`]).

use xla_ffi::{AnyFloat, DataType, ElementSpec};

use crate::kernels::KernelFn;
use crate::kernels::Param::{In, Out, F64, U64};
use crate::promote::PROMOTION;

/// `x, w, result_type(x, w), accumulator` for each row of the promotion table.
const fn promotion_types() -> [DataType; 4 * PROMOTION.len()] {
    let mut out = [DataType::INVALID; 4 * PROMOTION.len()];
    let mut i = 0;
    while i < PROMOTION.len() {
        let (x, w, y, acc) = PROMOTION[i];
        out[4 * i] = x;
        out[4 * i + 1] = w;
        out[4 * i + 2] = y;
        out[4 * i + 3] = acc;
        i += 1;
    }
    out
}

static TYPES: [DataType; 4 * PROMOTION.len()] = promotion_types();

/// `rms_norm_fwd<X, W, Y, ACC>` of `src/rms_norm/rms_norm.cu`, for every `(x, weight)`
/// float pair: `Y = result_type(x, weight)` and `ACC` the accumulator, from the
/// promotion table.
pub static RMS_NORM_FWD: KernelFn = KernelFn {
    source: "src/rms_norm/rms_norm.cu",
    name: "rms_norm_fwd",
    params: &[In, In, Out, Out, U64, U64, F64],
    key: &[AnyFloat::accepts, AnyFloat::accepts],
    arity: 4,
    types: &TYPES,
};

/// `rms_norm_bwd<X, W, Y, ACC>` of `src/rms_norm/rms_norm.cu` (as [`RMS_NORM_FWD`]).
pub static RMS_NORM_BWD: KernelFn = KernelFn {
    source: "src/rms_norm/rms_norm.cu",
    name: "rms_norm_bwd",
    params: &[In, In, In, Out, Out, U64, U64, F64],
    key: &[AnyFloat::accepts, AnyFloat::accepts],
    arity: 4,
    types: &TYPES,
};

/// `rms_norm_dweight<X, W, Y, ACC>` of `src/rms_norm/rms_norm.cu` (as [`RMS_NORM_FWD`]).
pub static RMS_NORM_DWEIGHT: KernelFn = KernelFn {
    source: "src/rms_norm/rms_norm.cu",
    name: "rms_norm_dweight",
    params: &[In, Out, U64, U64],
    key: &[AnyFloat::accepts, AnyFloat::accepts],
    arity: 4,
    types: &TYPES,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_instances_follow_jnp_promotion() {
        // (x, weight) -> template arguments, written out from jnp.result_type and
        // the accumulators of the CPU kernels.
        let cases = [
            (DataType::F16, DataType::F16, "half_t, half_t, half_t, float"),
            (DataType::F16, DataType::BF16, "half_t, bhalf_t, float, float"),
            (DataType::BF16, DataType::BF16, "bhalf_t, bhalf_t, bhalf_t, float"),
            (DataType::BF16, DataType::F32, "bhalf_t, float, float, float"),
            (DataType::F32, DataType::F16, "float, half_t, float, float"),
            (DataType::F16, DataType::F64, "half_t, double, double, double"),
            (DataType::F64, DataType::BF16, "double, bhalf_t, double, double"),
        ];
        for (x, w, types) in cases {
            for k in [&RMS_NORM_FWD, &RMS_NORM_BWD, &RMS_NORM_DWEIGHT] {
                assert_eq!(k.instance(&[x, w]).unwrap().name(), format!("{}<{types}>", k.name));
            }
        }
        assert_eq!(
            RMS_NORM_DWEIGHT.instance(&[DataType::F32, DataType::F32]).unwrap().name_expression(),
            "static_cast<void(*)(const void*, unsigned long long, void*, unsigned long long, unsigned long long, \
             unsigned long long)>(rms_norm_dweight<float, float, float, float>)"
        );
        assert!(RMS_NORM_FWD.instance(&[DataType::F32, DataType::S32]).is_none());
    }
}
