//! An example plugin: two XLA FFI handlers, written as a user of `xla-ffi` would.
//!
//! * `plugin.scale`: `y = factor * x`, elementwise, for float16, bfloat16, float32
//!   and float64, split over XLA's CPU thread pool for large inputs;
//! * `plugin.moments`: the mean and variance of each row (the last axis) of a
//!   float64 array, with an integer attribute `ddof` and an optional `clip`.
//!
//! The crate holds no `unsafe` code at all.
#![forbid(unsafe_code)]

use core::mem::MaybeUninit;

use xla_ffi::half::{bf16, f16};
use xla_ffi::{dispatch_float, handler, AnyFloat, Attr, Buffer, Context, Parts, Result, ResultBuffer};

/// Elements per task on XLA's thread pool: below this a task costs more than it saves.
const CHUNK: usize = 1 << 15;

/// The float types `dispatch_float!` binds, computed on in f64: widening is exact,
/// and the result is rounded once. (A plugin's own trait; `num_traits::Float`, which
/// `half` implements with its `num-traits` feature, would serve as well.)
trait Real: Copy + Send + Sync + Into<f64> {
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

impl Real for f16 {
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
}

impl Real for bf16 {
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
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
#[handler(target = "plugin.scale")]
pub fn plugin_scale(ctx: Context, x: Buffer<AnyFloat>, mut y: ResultBuffer<AnyFloat>, factor: Attr<f64>) -> Result<()> {
    y.expect_dims(x.dims(), "the shape of x")?;
    y.expect_dtype(x.dtype(), "the dtype of x")?;
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
#[handler(target = "plugin.moments")]
pub fn plugin_moments(
    x: Buffer<f64>,
    mut mean: ResultBuffer<f64>,
    mut var: ResultBuffer<f64>,
    ddof: Attr<i64>,
    clip: Attr<Option<f64>>,
) -> Result<()> {
    let dims = x.dims();
    let Some((&n, rows)) = dims.split_last() else {
        return Err(x.error("expected rank >= 1, got a scalar"));
    };
    mean.expect_dims(rows, "x.shape[:-1]")?;
    var.expect_dims(rows, "x.shape[:-1]")?;
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

/// Every handler of this plugin.
pub const HANDLERS: &[&xla_ffi::HandlerDescriptor] = &[&PLUGIN_SCALE, &PLUGIN_MOMENTS];

#[cfg(feature = "python")]
mod python {
    use pyo3::prelude::*;
    use pyo3::types::PyDict;

    /// `{target: capsule}` for `jax.ffi.register_ffi_target(..., platform="cpu")`.
    #[pyfunction]
    fn targets(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        xla_ffi::python::targets(py, super::HANDLERS, "cpu")
    }

    #[pymodule]
    fn plugin_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_function(wrap_pyfunction!(targets, m)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xla_ffi::testing::{Arg, AttrArg, CallBuilder};

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
