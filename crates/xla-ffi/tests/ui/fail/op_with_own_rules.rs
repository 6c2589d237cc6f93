//! `op = PATH` takes the target and every rule from another handler's declaration:
//! giving any of them again beside it, or `scratch` without `op`, is a compile error.
use xla_ffi::{handler, AnyFloat, Buffer, Result, ResultBuffer};

#[handler(target = "ui.base", shapes = "...b -> ...b", dtypes = "T -> T")]
pub fn base(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(op = BASE, shapes = "...b -> ...b", descriptor = WITH_SHAPES)]
pub fn with_shapes(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.base", op = BASE, descriptor = WITH_TARGET)]
pub fn with_target(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(op = BASE, transpose = "ui.base", descriptor = WITH_TRANSPOSE)]
pub fn with_transpose(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.own", scratch = "w")]
pub fn scratch_without_op(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>, w: ResultBuffer<AnyFloat>) -> Result<()> {
    let _ = (x, y, w);
    Ok(())
}

#[handler(op = BASE, scratch = "z", descriptor = SCRATCH_UNKNOWN)]
pub fn scratch_unknown(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(op = "BASE")]
pub fn op_string(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

fn main() {}
