//! Small targets for the newer `ffi.h` features, run by `test_features.py` on the
//! real XLA runtime:
//!
//! * `features.conj_scale`: `y = k * conj(x)` in complex64 or complex128, in place
//!   when XLA aliases `y` to `x`;
//! * `features.add_bias`: `y = x + bias` over the last axis, `bias` optional
//!   (`Option<Buffer>`, `n?` in the rules);
//! * `features.reduce`: each row's sum, maximum or mean, chosen by an enum
//!   attribute `mode`;
//! * `features.log_append`: appends `x` to a process-wide log, ordered by a token
//!   operand and a token result (`features.log_take` reads and clears the log);
//! * `features.user_data`: reads user data JAX never sets, so the runtime's own
//!   error (its code and message) comes back.

use std::sync::Mutex;

use xla_ffi::num_complex::Complex;
use xla_ffi::{
    dispatch_complex, dispatch_float, handler, state_type, AnyComplex, AnyFloat, Attr, AttrEnum, Buffer, Context,
    Element, InOut, Result, ResultBuffer, ResultToken, Token, ANY_RANK,
};

/// The complex types `dispatch_complex!` binds: conjugate and scale by a real.
trait ConjScale: Element {
    fn conj_scale(self, k: f64) -> Self;
}

impl ConjScale for Complex<f32> {
    fn conj_scale(self, k: f64) -> Self {
        self.conj() * k as f32
    }
}

impl ConjScale for Complex<f64> {
    fn conj_scale(self, k: f64) -> Self {
        self.conj() * k
    }
}

fn conj_scale_as<T: ConjScale>(x: &Buffer<AnyComplex>, y: &mut ResultBuffer<AnyComplex>, k: f64) -> Result<()> {
    match y.with_input::<T, _, ANY_RANK>(x)? {
        InOut::Separate { input, output } => {
            for (o, &v) in output.iter_mut().zip(input) {
                o.write(v.conj_scale(k));
            }
        }
        InOut::InPlace(xy) => xy.iter_mut().for_each(|v| *v = v.conj_scale(k)),
    }
    Ok(())
}

/// `y = k * conj(x)`, complex64 or complex128; in place when `y` aliases `x`.
#[handler(target = "features.conj_scale", shapes = "...b -> ...b", dtypes = "T -> T")]
pub fn features_conj_scale(x: Buffer<AnyComplex>, mut y: ResultBuffer<AnyComplex>, k: Attr<f64>) -> Result<()> {
    let k = *k;
    dispatch_complex!(x.dtype(), T => conj_scale_as::<T>(&x, &mut y, k), else d => Err(x.error(format!("unexpected {d}"))))
}

fn add_bias_as<T: Element + core::ops::Add<Output = T> + Default>(
    x: &Buffer<AnyFloat>,
    bias: Option<&Buffer<AnyFloat>>,
    y: &mut ResultBuffer<AnyFloat>,
) -> Result<()> {
    let xs = x.typed::<T>()?;
    let n = x.dims().last().map_or(1, |&n| n as usize);
    let bias = match bias {
        Some(b) => b.typed::<T>()?,
        None => &[],
    };
    for (i, (o, &v)) in y.typed_uninit::<T>()?.iter_mut().zip(xs).enumerate() {
        o.write(v + bias.get(i % n.max(1)).copied().unwrap_or_default());
    }
    Ok(())
}

/// `y = x + bias` over the last axis, in any float dtype; without `bias`, `y = x`.
#[handler(target = "features.add_bias", shapes = "...b n, n? -> ...b n", dtypes = "T, T? -> T")]
pub fn features_add_bias(
    x: Buffer<AnyFloat>,
    bias: Option<Buffer<AnyFloat>>,
    mut y: ResultBuffer<AnyFloat>,
) -> Result<()> {
    dispatch_float!(x.dtype(), T => add_bias_as::<T>(&x, bias.as_ref(), &mut y), else d => Err(x.error(format!("unexpected {d}"))))
}

/// How `features.reduce` reduces a row.
#[derive(AttrEnum, Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    Sum = 0,
    Max = 1,
    Mean = 7,
}

/// Each row's (last axis) sum, maximum or mean, in float64.
#[handler(target = "features.reduce", shapes = "...b n -> ...b", dtypes = "float64 -> float64")]
pub fn features_reduce(x: Buffer<f64>, mut y: ResultBuffer<f64>, mode: Attr<Mode>) -> Result<()> {
    let n = x.dims().last().map_or(1, |&n| n as usize).max(1);
    for (o, row) in y.as_uninit()?.iter_mut().zip(x.as_slice()?.chunks(n)) {
        o.write(match *mode {
            Mode::Sum => row.iter().sum(),
            Mode::Max => row.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            Mode::Mean => row.iter().sum::<f64>() / row.len() as f64,
        });
    }
    Ok(())
}

/// The log `features.log_append` writes.
pub static LOG: Mutex<Vec<f32>> = Mutex::new(Vec::new());

/// Appends the scalar `x` to [`LOG`] and returns it; the tokens order the call
/// after the op that made `order` and before the op that takes `done`.
#[handler(target = "features.log_append", shapes = "(), () -> (), ()", dtypes = "token, float32 -> token, float32")]
pub fn features_log_append(order: Token, x: Buffer<f32>, done: ResultToken, mut y: ResultBuffer<f32>) -> Result<()> {
    let _ = (order, done);
    let v = x.as_slice()?[0];
    LOG.lock().map_err(|_| xla_ffi::Error::internal("features.log_append: the log is poisoned"))?.push(v);
    y.as_uninit()?[0].write(v);
    Ok(())
}

/// User data that JAX never puts in a run.
pub struct Missing;
state_type!(Missing);

/// Asks the runtime for user data of type [`Missing`] and returns its error as is.
#[handler(target = "features.user_data")]
pub fn features_user_data(ctx: Context) -> Result<()> {
    ctx.user_data::<Missing>().map(|_| ())
}

/// Every handler of this file.
pub const FEATURE_HANDLERS: &[&xla_ffi::HandlerDescriptor] =
    &[&FEATURES_CONJ_SCALE, &FEATURES_ADD_BIAS, &FEATURES_REDUCE, &FEATURES_LOG_APPEND, &FEATURES_USER_DATA];

#[cfg(feature = "python")]
pub(crate) mod python {
    use pyo3::prelude::*;
    use pyo3::types::PyDict;

    /// `{target: capsule}` of the feature targets.
    #[pyfunction]
    fn feature_targets(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        xla_ffi::python::targets(py, super::FEATURE_HANDLERS, "cpu")
    }

    /// `{target: declaration}` of the feature targets.
    #[pyfunction]
    fn feature_declarations(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        xla_ffi::python::declarations(py, super::FEATURE_HANDLERS)
    }

    /// `{type name: registration}` for `jax.ffi.register_ffi_type`.
    #[pyfunction]
    fn feature_types(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("features.Missing", xla_ffi::python::type_registration::<super::Missing>(py)?)?;
        Ok(d)
    }

    /// The values `features.log_append` logged since the last call, in order.
    #[pyfunction]
    fn feature_log_take() -> Vec<f32> {
        super::LOG.lock().map(|mut l| core::mem::take(&mut *l)).unwrap_or_default()
    }

    /// Adds the functions above to the module.
    pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_function(wrap_pyfunction!(feature_targets, m)?)?;
        m.add_function(wrap_pyfunction!(feature_declarations, m)?)?;
        m.add_function(wrap_pyfunction!(feature_types, m)?)?;
        m.add_function(wrap_pyfunction!(feature_log_take, m)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xla_ffi::testing::{Arg, AttrArg, CallBuilder};

    #[test]
    fn add_bias_with_and_without_bias() {
        let x = || Arg::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
        let mut call =
            CallBuilder::new().arg(x()).arg(Arg::from_slice(&[10.0f32, 20.0], &[2])).ret(Arg::zeros::<f32>(&[2, 2]));
        call.run(FEATURES_ADD_BIAS).unwrap();
        assert_eq!(call.ret_as::<f32>(0), [11.0, 22.0, 13.0, 24.0]);
        let mut call = CallBuilder::new().arg(x()).ret(Arg::zeros::<f32>(&[2, 2]));
        call.run(FEATURES_ADD_BIAS).unwrap();
        assert_eq!(call.ret_as::<f32>(0), [1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn reduce_by_mode() {
        let run = |mode: i64| {
            let mut call = CallBuilder::new()
                .arg(Arg::from_slice(&[1.0f64, 5.0, 3.0], &[1, 3]))
                .ret(Arg::zeros::<f64>(&[1]))
                .attr("mode", AttrArg::scalar(mode));
            call.run(FEATURES_REDUCE).map(|()| call.ret_as::<f64>(0)[0])
        };
        assert_eq!((run(0), run(1), run(7)), (Ok(9.0), Ok(5.0), Ok(3.0)));
        assert!(run(2).unwrap_err().1.contains("Sum = 0, Max = 1, Mean = 7"));
    }
}
