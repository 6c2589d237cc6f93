//! `plugin.softplus`, a nonlinear elementwise op with its derivative in Rust:
//!
//! * `plugin.softplus`: `y = log(1 + exp(x))`, the primal (no `linear`: it is not
//!   linear in anything, so its JVP is given in Python with `def_jvp`);
//! * `plugin.softplus_jvp`: `dy = sigmoid(x) * dx`, the tangent. It is linear in
//!   `dx` and, as a map of `dx`, multiplication by a diagonal: its own transpose.
//!   Declared so (`linear = "dx"`, `transpose = "plugin.softplus_jvp"`), reverse
//!   mode calls it with the cotangent where `dx` was and the same `x`, paired by
//!   name; `grad` needs nothing more.
//!
//! Both compute in float64 and round once, for float16, bfloat16, float32 and
//! float64 (`Buffer<AnyFloat>` + `dispatch_float!`), split over XLA's thread pool
//! for large inputs. docs/binding.md walks through this file.

use core::mem::MaybeUninit;

use xla_ffi::{dispatch_float, handler, AnyFloat, Buffer, Context, Parts, Result, ResultBuffer};

use crate::{Real, CHUNK};

/// `log(1 + exp(x))` without overflow: `max(x, 0) + log1p(exp(-|x|))`.
pub fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// `1 / (1 + exp(-x))`, the derivative of [`softplus`], without overflow.
pub fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// `out[i] = f(a[i], b[i])` (with `b = a` for a one-operand op), in float64,
/// rounded once, split over the thread pool above [`CHUNK`] elements.
fn map_into<T: Real>(
    ctx: &Context<'_>,
    a: &[T],
    b: &[T],
    out: &mut [MaybeUninit<T>],
    f: impl Fn(f64, f64) -> f64 + Sync,
) -> Result<()> {
    let run = |start: usize, out: &mut [MaybeUninit<T>]| {
        let (a, b) = (&a[start..start + out.len()], &b[start..start + out.len()]);
        for ((o, &u), &v) in out.iter_mut().zip(a).zip(b) {
            o.write(T::from_f64(f(u.into(), v.into())));
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

/// `y = softplus(x)`, elementwise; `y` has `x`'s shape and dtype.
#[handler(target = "plugin.softplus", shapes = "...b -> ...b", dtypes = "T -> T")]
pub fn plugin_softplus(ctx: Context, x: Buffer<AnyFloat>, mut y: ResultBuffer<AnyFloat>) -> Result<()> {
    dispatch_float!(x.dtype(), T => {
        let x = x.typed::<T>()?;
        map_into::<T>(&ctx, x, x, y.typed_uninit()?, |x, _| softplus(x))
    }, else d => unreachable!("{d} was checked to be a float"))
}

/// `dy = sigmoid(x) * dx`: the tangent of `plugin.softplus` at `x`, linear in `dx`
/// and its own transpose (`ct -> sigmoid(x) * ct`).
#[handler(
    target = "plugin.softplus_jvp",
    shapes = "...b, ...b -> ...b",
    dtypes = "T, T -> T",
    linear = "dx",
    transpose = "plugin.softplus_jvp"
)]
pub fn plugin_softplus_jvp(
    ctx: Context,
    x: Buffer<AnyFloat>,
    dx: Buffer<AnyFloat>,
    mut dy: ResultBuffer<AnyFloat>,
) -> Result<()> {
    dispatch_float!(x.dtype(),
        T => map_into::<T>(&ctx, x.typed()?, dx.typed()?, dy.typed_uninit()?, |x, dx| sigmoid(x) * dx),
        else d => unreachable!("{d} was checked to be a float"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use xla_ffi::testing::{Arg, CallBuilder};

    #[test]
    fn softplus_matches_its_definition_and_does_not_overflow() {
        let x = [-800.0f64, -3.0, 0.0, 0.5, 40.0, 800.0];
        let mut call = CallBuilder::new().arg(Arg::from_slice(&x, &[6])).ret(Arg::zeros::<f64>(&[6]));
        call.run(PLUGIN_SOFTPLUS).unwrap();
        let y = call.ret_as::<f64>(0);
        for (&x, &y) in x.iter().zip(&y) {
            let want = if x.abs() < 30.0 { x.exp().ln_1p() } else { x.max(0.0) };
            assert!((y - want).abs() <= 1e-15 * want.abs().max(1e-300), "softplus({x}) = {y}, want {want}");
        }
        assert_eq!(y[2], core::f64::consts::LN_2);
    }

    #[test]
    fn the_tangent_is_sigmoid_times_dx() {
        let (x, dx) = ([-2.0f32, 0.0, 3.0], [1.0f32, 4.0, -2.0]);
        let mut call = CallBuilder::new()
            .arg(Arg::from_slice(&x, &[3]))
            .arg(Arg::from_slice(&dx, &[3]))
            .ret(Arg::zeros::<f32>(&[3]));
        call.run(PLUGIN_SOFTPLUS_JVP).unwrap();
        let want: Vec<f32> =
            x.iter().zip(&dx).map(|(&x, &d)| (f64::from(d) / (1.0 + (-f64::from(x)).exp())) as f32).collect();
        assert_eq!(call.ret_as::<f32>(0), want);
        // Finite differences of softplus itself.
        for &x in &[-5.0f64, -0.3, 0.0, 2.0, 9.0] {
            let h = 1e-6;
            let fd = (softplus(x + h) - softplus(x - h)) / (2.0 * h);
            assert!((fd - sigmoid(x)).abs() < 1e-8, "{x}: {fd} vs {}", sigmoid(x));
        }
    }

    #[test]
    fn the_declarations_make_the_tangent_its_own_transpose() {
        let d = PLUGIN_SOFTPLUS_JVP.declaration;
        assert_eq!(d.operands().map(|(n, _)| n).collect::<Vec<_>>(), ["x", "dx"]);
        assert_eq!(d.linear, ["dx"]);
        assert_eq!(d.transpose, Some("plugin.softplus_jvp"));
        assert!(PLUGIN_SOFTPLUS.declaration.linear.is_empty());
        assert_eq!(PLUGIN_SOFTPLUS.declaration.transpose, None);
    }

    #[test]
    fn mismatched_operands_are_refused_before_the_body() {
        let call =
            CallBuilder::new().arg(Arg::zeros::<f32>(&[3])).arg(Arg::zeros::<f32>(&[2])).ret(Arg::zeros::<f32>(&[3]));
        let (_, msg) = {
            let mut c = call;
            c.run(PLUGIN_SOFTPLUS_JVP).unwrap_err()
        };
        assert_eq!(msg, "plugin.softplus_jvp: operand 1 (dx): expected shape [3] (...b of operand 0 (x)), got [2]");
        let mut call = CallBuilder::new().arg(Arg::zeros::<i32>(&[3])).ret(Arg::zeros::<i32>(&[3]));
        let (_, msg) = call.run(PLUGIN_SOFTPLUS).unwrap_err();
        let want = "plugin.softplus: operand 0 (x): expected dtype float16, bfloat16, float32 or float64, got int32";
        assert!(msg.contains(want), "{msg}");
    }
}
