//! The element type of the Kepler targets (`xla_ffi_rs.kepler`, its derivative
//! targets `xla_ffi_rs.kepler_tangent`, `xla_ffi_rs.kepler_cotangent`, and the fused
//! `xla_ffi_rs.kepler_jvp` and its scalar-tangent variants), and which fused target a
//! handler is ([`JvpVariant`]), shared by the CPU and CUDA handlers. Their shapes and
//! dtypes are declared in `#[handler]`: every operand and result has the dtype of
//! operand 0, and every one but a fused target's scalar tangents its shape.

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

/// Which fused target a handler is: which of the tangent operands
/// `(d_mean_anomaly, d_eccentricity)` are scalars (shape `()`, one value for every
/// element) rather than arrays of the operands' shape. The one thing the three fused
/// targets' handlers differ in, on either platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JvpVariant {
    /// `xla_ffi_rs.kepler_jvp`: both tangents arrays.
    Arrays,
    /// `xla_ffi_rs.kepler_jvp_dm`: `d_eccentricity` a scalar.
    ScalarDe,
    /// `xla_ffi_rs.kepler_jvp_const`: both tangents scalars.
    Scalars,
}

impl JvpVariant {
    /// Whether `(d_mean_anomaly, d_eccentricity)` are scalars.
    pub const fn scalars(self) -> (bool, bool) {
        match self {
            JvpVariant::Arrays => (false, false),
            JvpVariant::ScalarDe => (false, true),
            JvpVariant::Scalars => (true, true),
        }
    }
}
