//! The element type of the Kepler targets (`xla_ffi_rs.kepler`, its derivative
//! targets `xla_ffi_rs.kepler_tangent`, `xla_ffi_rs.kepler_cotangent`, and the fused
//! `xla_ffi_rs.kepler_jvp`), shared by
//! the CPU and CUDA handlers. Their shapes and dtypes are declared in `#[handler]`:
//! every operand and result has the shape and dtype of operand 0.

use xla_ffi::{DataType, ElementSpec};

/// `float32` or `float64`: the dtypes the Kepler solver takes.
pub struct F32OrF64;

impl ElementSpec for F32OrF64 {
    const DTYPES: Option<&'static [DataType]> = Some(&[DataType::F32, DataType::F64]);
    fn accepts(dtype: DataType) -> bool {
        dtype == DataType::F32 || dtype == DataType::F64
    }
    fn describe() -> String {
        "float32 or float64".into()
    }
}
