//! A handler with `op = PATH` must have the referenced declaration's operands,
//! results and attributes, same names in the same order (besides its `scratch`
//! results, which must be trailing results): otherwise a compile error.
use xla_ffi::{handler, AnyFloat, Attr, Buffer, Context, Result, ResultBuffer};

#[handler(target = "ui.norm", shapes = "...b ...n, ...n -> ...b ...n", dtypes = "X, W -> promote(X, W)")]
pub fn norm(x: Buffer<AnyFloat>, weight: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>, eps: Attr<f64>) -> Result<()> {
    let _ = (x, weight, y, eps);
    Ok(())
}

// An operand renamed.
#[handler(op = NORM, platform = device, descriptor = RENAMED)]
pub fn renamed(x: Buffer<AnyFloat>, w: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>, eps: Attr<f64>) -> Result<()> {
    let _ = (x, w, y, eps);
    Ok(())
}

// Two operands swapped.
#[handler(op = NORM, platform = device, descriptor = SWAPPED)]
pub fn swapped(weight: Buffer<AnyFloat>, x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>, eps: Attr<f64>) -> Result<()> {
    let _ = (x, weight, y, eps);
    Ok(())
}

// One result too many (not declared as scratch).
#[handler(op = NORM, platform = device, descriptor = EXTRA_RESULT)]
pub fn extra_result(
    ctx: Context,
    x: Buffer<AnyFloat>,
    weight: Buffer<AnyFloat>,
    y: ResultBuffer<AnyFloat>,
    inv: ResultBuffer<AnyFloat>,
    eps: Attr<f64>,
) -> Result<()> {
    let _ = (ctx, x, weight, y, inv, eps);
    Ok(())
}

// The attribute missing.
#[handler(op = NORM, platform = device, descriptor = NO_ATTR)]
pub fn no_attr(x: Buffer<AnyFloat>, weight: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> {
    let _ = (x, weight, y);
    Ok(())
}

// A scratch result before a declared one.
#[handler(op = NORM, scratch = "ws", platform = device, descriptor = SCRATCH_FIRST)]
pub fn scratch_first(
    x: Buffer<AnyFloat>,
    weight: Buffer<AnyFloat>,
    ws: ResultBuffer<AnyFloat>,
    y: ResultBuffer<AnyFloat>,
    eps: Attr<f64>,
) -> Result<()> {
    let _ = (x, weight, ws, y, eps);
    Ok(())
}

// A scratch that is an operand.
#[handler(op = NORM, scratch = "extra", platform = device, descriptor = SCRATCH_OPERAND)]
pub fn scratch_operand(
    x: Buffer<AnyFloat>,
    weight: Buffer<AnyFloat>,
    extra: Buffer<AnyFloat>,
    y: ResultBuffer<AnyFloat>,
    eps: Attr<f64>,
) -> Result<()> {
    let _ = (x, weight, extra, y, eps);
    Ok(())
}

fn main() {}
