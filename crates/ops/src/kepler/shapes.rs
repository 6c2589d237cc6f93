//! The operand rules of the `xla_ffi_rs.kepler` target, shared by the CPU and CUDA
//! handlers.

use xla_ffi::{Buffer, DataType, ElementSpec, Result, ResultBuffer};

/// `float32` or `float64`: the dtypes the Kepler solver takes.
pub struct F32OrF64;

impl ElementSpec for F32OrF64 {
    fn accepts(dtype: DataType) -> bool {
        dtype == DataType::F32 || dtype == DataType::F64
    }
    fn describe() -> String {
        "float32 or float64".into()
    }
}

/// Checks that `eccentricity`, `sin_e` and `cos_e` have the shape and dtype of
/// `mean_anomaly`; returns that dtype.
pub fn check(
    mean_anomaly: &Buffer<'_, F32OrF64>,
    eccentricity: &Buffer<'_, F32OrF64>,
    sin_e: &ResultBuffer<'_, F32OrF64>,
    cos_e: &ResultBuffer<'_, F32OrF64>,
) -> Result<DataType> {
    let (dims, dtype) = (mean_anomaly.dims(), mean_anomaly.dtype());
    let what = "that of operand 0 (mean_anomaly)";
    eccentricity.expect_dims(dims, what)?;
    eccentricity.expect_dtype(dtype, what)?;
    for out in [sin_e, cos_e] {
        out.expect_dims(dims, what)?;
        out.expect_dtype(dtype, what)?;
    }
    Ok(dtype)
}
