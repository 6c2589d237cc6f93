//! `xla_ffi_rs.examples.scale`: a small stateful target, the worked example of handler
//! bundles. The instantiate stage (once per call site, when XLA compiles) turns the
//! attribute `factor` into state; every execution reads that state as `&ScaleState`,
//! from any number of threads at once.

use xla_ffi::{handler, state_type, Attr, Buffer, Context, Result, ResultBuffer, State};

/// What the instantiate stage builds: here just the factor and a call-site tag.
#[derive(Debug)]
pub struct ScaleState {
    /// The factor `y = factor * x`.
    pub factor: f32,
}

state_type!(ScaleState);

/// Creates the state from the `factor` attribute. Instantiate handlers see no
/// buffers, only attributes and context.
#[handler(target = "xla_ffi_rs.examples.scale", stage = instantiate, descriptor = INSTANTIATE)]
pub fn xla_ffi_rs_scale_instantiate(factor: Attr<f32>) -> Result<ScaleState> {
    if !factor.is_finite() {
        return Err(xla_ffi::Error::invalid_argument(format!(
            "attribute `factor`: expected a finite number, got {}",
            *factor
        )));
    }
    Ok(ScaleState { factor: *factor })
}

/// `y = factor * x` in float32, with `factor` read from the state. The `factor`
/// attribute is not bound here: the instantiate stage consumed (and checked) it.
/// The declared shape rule checks that `y` has the shape of `x`; the op is linear
/// in `x` and its own transpose.
#[handler(
    target = "xla_ffi_rs.examples.scale",
    descriptor = EXECUTE,
    shapes = "...b -> ...b",
    linear = "x",
    transpose = "xla_ffi_rs.examples.scale"
)]
pub fn xla_ffi_rs_scale_execute(
    _ctx: Context,
    x: Buffer<f32>,
    mut y: ResultBuffer<f32>,
    state: State<ScaleState>,
) -> Result<()> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(state.factor * v);
    }
    Ok(())
}
