//! An example plugin: XLA FFI handlers written as a user of `xla-ffi` would.
//!
//! * `plugin.scale`: `y = factor * x`, elementwise, for float16, bfloat16, float32
//!   and float64, split over XLA's CPU thread pool for large inputs; linear in `x`,
//!   and its own transpose;
//! * `plugin.moments`: the mean and variance of each row (the last axis) of a
//!   float64 array, with an integer attribute `ddof` and an optional `clip`;
//! * `plugin.axpy`: `out = alpha * x + y` for any float dtype, linear in `x` and
//!   `y`, whose transpose is `plugin.axpy_transpose`: `ct -> (alpha * ct, ct)`;
//! * `plugin.softplus` and its tangent `plugin.softplus_jvp` (in [`softplus`]): a
//!   nonlinear elementwise op with its derivative.
//!
//! Each handler declares its op in `#[handler]`: the shape rule (`shapes`), the
//! dtype rule (`dtypes`), the operands it is linear in and its transpose target. The
//! generated shim checks the shapes and dtypes before the body runs, so the bodies
//! hold only the checks no rule says (`factor` finite, `ddof` in range), and
//! `declarations()` hands the same facts to Python.
//!
//! The crate holds no `unsafe` code at all.
#![forbid(unsafe_code)]

use core::mem::MaybeUninit;

use xla_ffi::half::{bf16, f16};
use xla_ffi::{dispatch_float, handler, AnyFloat, Attr, Buffer, Context, Parts, Result, ResultBuffer};

/// Elements per task on XLA's thread pool: below this a task costs more than it saves.
pub(crate) const CHUNK: usize = 1 << 15;

/// The float types `dispatch_float!` binds, computed on in f64: widening is exact,
/// and the result is rounded once. (A plugin's own trait; `num_traits::Float`, which
/// `half` implements with its `num-traits` feature, would serve as well.)
pub(crate) trait Real: Copy + Send + Sync + Into<f64> {
    fn from_f64(v: f64) -> Self;
}

impl Real for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl Real for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
}

/// `v` as `f32` rounded to odd (toward zero, lowest bit set if inexact), so that
/// rounding it again to `f16` or `bf16` rounds `v` once. `half`'s own `from_f64`
/// does not: it rounds through a nearest `f32`, or drops the low half of the
/// mantissa first, and a value just past a tie can land on the tie and go to even.
fn f32_rounded_to_odd(v: f64) -> f32 {
    let nearest = v as f32;
    if f64::from(nearest) == v || v.is_nan() {
        return nearest;
    }
    let bits = nearest.to_bits() - u32::from(f64::from(nearest).abs() > v.abs());
    f32::from_bits(bits | 1)
}

impl Real for f16 {
    fn from_f64(v: f64) -> Self {
        f16::from_f32(f32_rounded_to_odd(v))
    }
}

impl Real for bf16 {
    fn from_f64(v: f64) -> Self {
        bf16::from_f32(f32_rounded_to_odd(v))
    }
}

fn scale_into<T: Real>(ctx: &Context<'_>, x: &[T], y: &mut [MaybeUninit<T>], factor: f64) -> Result<()> {
    let run = |x: &[T], y: &mut [MaybeUninit<T>]| {
        for (o, &v) in y.iter_mut().zip(x) {
            o.write(T::from_f64(v.into() * factor));
        }
    };
    if x.len() <= CHUNK {
        run(x, y);
        return Ok(());
    }
    let parts = Parts::new(y, CHUNK);
    ctx.thread_pool().for_each(parts.len(), |i| {
        let (start, y) = parts.take(i);
        run(&x[start..start + y.len()], y);
    })
}

/// `y = factor * x` for any float dtype; `y` has `x`'s shape and dtype.
#[handler(
    target = "plugin.scale",
    shapes = "...b -> ...b",
    dtypes = "T -> T",
    linear = "x",
    transpose = "plugin.scale"
)]
pub fn plugin_scale(ctx: Context, x: Buffer<AnyFloat>, mut y: ResultBuffer<AnyFloat>, factor: Attr<f64>) -> Result<()> {
    if !factor.is_finite() {
        return Err(x.error(format!("attribute `factor` must be finite, got {}", *factor)));
    }
    dispatch_float!(x.dtype(),
        T => scale_into::<T>(&ctx, x.typed()?, y.typed_uninit()?, *factor),
        else d => unreachable!("{d} was checked to be a float"))
}

/// Mean and variance over the last axis of `x` (float64, rank >= 1).
///
/// Results: `mean` and `var`, both float64 of shape `x.shape[:-1]`. Attributes:
/// `ddof` (int, 0 <= ddof < row length; the variance divides by `n - ddof`) and
/// `clip` (optional float > 0: values are clipped to `[-clip, clip]` first).
/// Exported as `xla_ffi_handler__plugin_moments` (every handler's symbol is its
/// function's name after that prefix; a raw name needs `unsafe(symbol = "...")`,
/// which this `forbid(unsafe_code)` crate cannot write).
#[handler(target = "plugin.moments", shapes = "...b n -> ...b, ...b")]
pub fn plugin_moments(
    x: Buffer<f64>,
    mut mean: ResultBuffer<f64>,
    mut var: ResultBuffer<f64>,
    ddof: Attr<i64>,
    clip: Attr<Option<f64>>,
) -> Result<()> {
    // The shape rule checked that x has rank >= 1 and mean, var its leading axes.
    let n = x.dims().last().copied().unwrap_or(0);
    if *ddof < 0 || *ddof >= n {
        return Err(x.error(format!("attribute `ddof` must be in [0, {n}) for rows of length {n}, got {}", *ddof)));
    }
    if let Some(c) = *clip {
        if c.is_nan() || c <= 0.0 {
            return Err(x.error(format!("attribute `clip` must be > 0, got {c}")));
        }
    }
    let n = n as usize;
    let x = x.as_slice()?;
    let (mean, var) = (mean.as_uninit()?, var.as_uninit()?);
    for ((row, m), v) in x.chunks_exact(n.max(1)).zip(mean.iter_mut()).zip(var.iter_mut()) {
        let value = |&x: &f64| match *clip {
            Some(c) => x.clamp(-c, c),
            None => x,
        };
        let mu = row.iter().map(value).sum::<f64>() / n as f64;
        let ss = row.iter().map(|x| (value(x) - mu).powi(2)).sum::<f64>();
        m.write(mu);
        v.write(ss / (n as f64 - *ddof as f64));
    }
    Ok(())
}

fn axpy_into<T: Real>(ctx: &Context<'_>, x: &[T], y: &[T], out: &mut [MaybeUninit<T>], alpha: f64) -> Result<()> {
    let run = |start: usize, out: &mut [MaybeUninit<T>]| {
        let (x, y) = (&x[start..start + out.len()], &y[start..start + out.len()]);
        for ((o, &a), &b) in out.iter_mut().zip(x).zip(y) {
            o.write(T::from_f64(alpha * a.into() + b.into()));
        }
    };
    if out.len() <= CHUNK {
        run(0, out);
        return Ok(());
    }
    let parts = Parts::new(out, CHUNK);
    ctx.thread_pool().for_each(parts.len(), |i| {
        let (start, out) = parts.take(i);
        run(start, out);
    })
}

/// `out = alpha * x + y`, elementwise, for any float dtype (`x`, `y` and `out` share
/// shape and dtype); computed in float64 and rounded once.
#[handler(
    target = "plugin.axpy",
    shapes = "...b, ...b -> ...b",
    dtypes = "T, T -> T",
    linear = "x, y",
    transpose = "plugin.axpy_transpose"
)]
pub fn plugin_axpy(
    ctx: Context,
    x: Buffer<AnyFloat>,
    y: Buffer<AnyFloat>,
    mut out: ResultBuffer<AnyFloat>,
    alpha: Attr<f64>,
) -> Result<()> {
    dispatch_float!(x.dtype(),
        T => axpy_into::<T>(&ctx, x.typed()?, y.typed()?, out.typed_uninit()?, *alpha),
        else d => unreachable!("{d} was checked to be a float"))
}

/// The transpose of `plugin.axpy`: `(ct_x, ct_y) = (alpha * ct, ct)`.
#[handler(
    target = "plugin.axpy_transpose",
    shapes = "...b -> ...b, ...b",
    dtypes = "T -> T, T",
    linear = "ct",
    transpose = "plugin.axpy"
)]
pub fn plugin_axpy_transpose(
    ctx: Context,
    ct: Buffer<AnyFloat>,
    mut ct_x: ResultBuffer<AnyFloat>,
    mut ct_y: ResultBuffer<AnyFloat>,
    alpha: Attr<f64>,
) -> Result<()> {
    dispatch_float!(ct.dtype(), T => {
        let ct = ct.typed::<T>()?;
        scale_into::<T>(&ctx, ct, ct_x.typed_uninit()?, *alpha)?;
        scale_into::<T>(&ctx, ct, ct_y.typed_uninit()?, 1.0)
    }, else d => unreachable!("{d} was checked to be a float"))
}

mod features;
pub mod softplus;
pub use features::FEATURE_HANDLERS;
use softplus::{PLUGIN_SOFTPLUS, PLUGIN_SOFTPLUS_JVP};

/// Every handler of this plugin (besides [`FEATURE_HANDLERS`]).
pub const HANDLERS: &[&xla_ffi::HandlerDescriptor] =
    &[&PLUGIN_SCALE, &PLUGIN_MOMENTS, &PLUGIN_AXPY, &PLUGIN_AXPY_TRANSPOSE, &PLUGIN_SOFTPLUS, &PLUGIN_SOFTPLUS_JVP];

// Every handler and type, exported from the cdylib as one C function,
// `xla_ffi_rs_registry`, for hosts without Python (a PJRT plugin's host, such as
// `xla-ffi-run`); built with or without the `python` feature.
xla_ffi::export_registry! {
    handlers: [HANDLERS, FEATURE_HANDLERS].concat(),
    types: { "features.Missing" => features::Missing },
}

#[cfg(feature = "python")]
mod python {
    use pyo3::prelude::*;
    use pyo3::types::PyDict;

    /// `{target: capsule}` of the handlers for `platform` (JAX's name: `"cpu"`, or
    /// `"cuda"` for `platform = device` handlers), for
    /// `xla_ffi_rs.register_targets(targets(platform), platform)`. A CUDA twin of an
    /// op goes into `HANDLERS` beside its CPU handler (docs/gpu.md).
    #[pyfunction]
    #[pyo3(signature = (platform = "cpu"))]
    fn targets<'py>(py: Python<'py>, platform: &str) -> PyResult<Bound<'py, PyDict>> {
        xla_ffi::python::targets(py, super::HANDLERS, platform)
    }

    /// `{target: declaration}`: each op's operands, results, attributes and rules
    /// (see `xla_ffi::python::declarations`), for `xla_ffi_rs.binding`.
    #[pyfunction]
    fn declarations(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        xla_ffi::python::declarations(py, super::HANDLERS)
    }

    #[pymodule]
    fn plugin_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_function(wrap_pyfunction!(targets, m)?)?;
        super::features::python::add(m)?;
        m.add_function(wrap_pyfunction!(declarations, m)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xla_ffi::testing::{Arg, AttrArg, CallBuilder};

    /// The exported registry lists every handler's target (one execute-only
    /// bundle each) and the one type, for hosts without Python.
    #[test]
    fn the_registry_lists_every_target() {
        let reg = registry();
        assert_eq!(reg.error(), None);
        let names: Vec<&str> = reg.targets().map(|t| t.name()).collect();
        let expected: Vec<&str> = HANDLERS.iter().chain(FEATURE_HANDLERS).map(|h| h.target).collect();
        assert_eq!(names, expected);
        assert!(reg.targets().all(|t| t.stages().len() == 1));
        assert_eq!(reg.types().map(|t| t.name()).collect::<Vec<_>>(), ["features.Missing"]);
        assert_eq!(xla_ffi_rs_registry(), reg.as_raw());
    }

    #[test]
    fn scale_runs_in_rust_without_jax() {
        let mut call = CallBuilder::new()
            .arg(Arg::from_slice(&[1.0f32, -2.0, 3.5], &[3]))
            .ret(Arg::zeros::<f32>(&[3]))
            .attr("factor", AttrArg::scalar(2.0f64));
        call.run(PLUGIN_SCALE).unwrap();
        assert_eq!(call.ret_as::<f32>(0), vec![2.0, -4.0, 7.0]);
    }

    #[test]
    fn axpy_and_its_transpose_in_every_float_dtype() {
        fn run<T: xla_ffi::Element + Real + PartialEq + core::fmt::Debug>() {
            let t = |v: &[f64]| v.iter().map(|&v| T::from_f64(v)).collect::<Vec<T>>();
            let mut call = CallBuilder::new()
                .arg(Arg::from_slice(&t(&[1.0, -2.0, 0.5, 4.0]), &[2, 2]))
                .arg(Arg::from_slice(&t(&[10.0, 20.0, 30.0, 40.0]), &[2, 2]))
                .ret(Arg::zeros::<T>(&[2, 2]))
                .attr("alpha", AttrArg::scalar(2.0f64));
            call.run(PLUGIN_AXPY).unwrap();
            assert_eq!(call.ret_as::<T>(0), t(&[12.0, 16.0, 31.0, 48.0]));
            let mut call = CallBuilder::new()
                .arg(Arg::from_slice(&t(&[1.0, -3.0]), &[2]))
                .ret(Arg::zeros::<T>(&[2]))
                .ret(Arg::zeros::<T>(&[2]))
                .attr("alpha", AttrArg::scalar(0.5f64));
            call.run(PLUGIN_AXPY_TRANSPOSE).unwrap();
            assert_eq!(call.ret_as::<T>(0), t(&[0.5, -1.5]));
            assert_eq!(call.ret_as::<T>(1), t(&[1.0, -3.0]));
        }
        run::<f32>();
        run::<f64>();
        run::<f16>();
        run::<bf16>();
    }

    /// The transpose property <axpy(x, y), ct> = <(x, y), axpy_transpose(ct)>.
    #[test]
    fn axpy_transpose_is_the_adjoint() {
        let (x, y, ct) = ([0.3f64, -1.25, 2.0], [4.0f64, 0.5, -0.75], [1.5f64, -2.0, 0.25]);
        let alpha = -1.75;
        let mut call = CallBuilder::new()
            .arg(Arg::from_slice(&x, &[3]))
            .arg(Arg::from_slice(&y, &[3]))
            .ret(Arg::zeros::<f64>(&[3]))
            .attr("alpha", AttrArg::scalar(alpha));
        call.run(PLUGIN_AXPY).unwrap();
        let out = call.ret_as::<f64>(0);
        let mut call = CallBuilder::new()
            .arg(Arg::from_slice(&ct, &[3]))
            .ret(Arg::zeros::<f64>(&[3]))
            .ret(Arg::zeros::<f64>(&[3]))
            .attr("alpha", AttrArg::scalar(alpha));
        call.run(PLUGIN_AXPY_TRANSPOSE).unwrap();
        let (cx, cy) = (call.ret_as::<f64>(0), call.ret_as::<f64>(1));
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(a, b)| a * b).sum::<f64>();
        let lhs = dot(&out, &ct);
        let rhs = dot(&x, &cx) + dot(&y, &cy);
        assert!((lhs - rhs).abs() <= 1e-12 * lhs.abs().max(1.0), "{lhs} vs {rhs}");
    }

    #[test]
    fn axpy_rules_are_checked_before_the_body() {
        let mut call = CallBuilder::new()
            .arg(Arg::zeros::<f32>(&[3]))
            .arg(Arg::zeros::<f64>(&[3]))
            .ret(Arg::zeros::<f32>(&[3]))
            .attr("alpha", AttrArg::scalar(1.0f64));
        let (_, msg) = call.run(PLUGIN_AXPY).unwrap_err();
        assert_eq!(
            msg,
            "plugin.axpy: operand 1 (y): expected dtype float32 (T, the dtype of operand 0 (x)), got float64"
        );
        let mut call = CallBuilder::new()
            .arg(Arg::zeros::<f32>(&[3]))
            .arg(Arg::zeros::<f32>(&[4]))
            .ret(Arg::zeros::<f32>(&[3]))
            .attr("alpha", AttrArg::scalar(1.0f64));
        let (_, msg) = call.run(PLUGIN_AXPY).unwrap_err();
        assert_eq!(msg, "plugin.axpy: operand 1 (y): expected shape [3] (...b of operand 0 (x)), got [4]");
        let call =
            CallBuilder::new().arg(Arg::zeros::<f64>(&[])).ret(Arg::zeros::<f64>(&[])).ret(Arg::zeros::<f64>(&[]));
        let (_, msg) = call.attr("ddof", AttrArg::scalar(0i64)).run(PLUGIN_MOMENTS).unwrap_err();
        assert!(msg.starts_with("plugin.moments: operand 0 (x): expected rank at least 1"), "{msg}");
    }

    #[test]
    fn the_declarations_name_every_parameter() {
        let d = PLUGIN_AXPY.declaration;
        assert_eq!(d.operands().map(|(n, _)| n).collect::<Vec<_>>(), ["x", "y"]);
        assert_eq!(d.linear, ["x", "y"]);
        assert_eq!(d.transpose, Some("plugin.axpy_transpose"));
        assert_eq!(PLUGIN_AXPY_TRANSPOSE.declaration.transpose, Some("plugin.axpy"));
        assert_eq!(PLUGIN_SCALE.declaration.transpose, Some("plugin.scale"));
        let attrs: Vec<_> = PLUGIN_MOMENTS.declaration.attributes().collect();
        assert_eq!(attrs, [("ddof", "i64".to_string(), false), ("clip", "f64".to_string(), true)]);
    }

    #[test]
    fn moments_of_two_rows() {
        let mut call = CallBuilder::new()
            .arg(Arg::from_slice(&[1.0f64, 2.0, 3.0, 10.0, 10.0, 40.0], &[2, 3]))
            .ret(Arg::zeros::<f64>(&[2]))
            .ret(Arg::zeros::<f64>(&[2]))
            .attr("ddof", AttrArg::scalar(1i64));
        call.run(PLUGIN_MOMENTS).unwrap();
        assert_eq!(call.ret_as::<f64>(0), vec![2.0, 20.0]);
        assert_eq!(call.ret_as::<f64>(1), vec![1.0, 300.0]);
    }
}
