//! The operand rules of the Kepler targets (`xla_ffi_rs.kepler` and its derivative
//! targets `xla_ffi_rs.kepler_tangent`, `xla_ffi_rs.kepler_cotangent`), shared by
//! the CPU and CUDA handlers.

use core::fmt;

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
    check_all(mean_anomaly, "mean_anomaly", &[eccentricity], &[sin_e, cos_e])
}

/// Checks that every one of `operands` and `results` has the shape and dtype of
/// `first` (operand 0, named `name`); returns that dtype.
pub fn check_all(
    first: &Buffer<'_, F32OrF64>,
    name: &str,
    operands: &[&Buffer<'_, F32OrF64>],
    results: &[&ResultBuffer<'_, F32OrF64>],
) -> Result<DataType> {
    let (dims, dtype) = (first.dims(), first.dtype());
    let what = LikeOperand0(name);
    for op in operands {
        op.expect_dims(dims, what)?;
        op.expect_dtype(dtype, what)?;
    }
    for out in results {
        out.expect_dims(dims, what)?;
        out.expect_dtype(dtype, what)?;
    }
    Ok(dtype)
}

/// "that of operand 0 (NAME)", what a mismatch is measured against (formatted only
/// on error: a call that passes its checks allocates nothing).
#[derive(Clone, Copy)]
struct LikeOperand0<'a>(&'a str);

impl fmt::Display for LikeOperand0<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "that of operand 0 ({})", self.0)
    }
}
