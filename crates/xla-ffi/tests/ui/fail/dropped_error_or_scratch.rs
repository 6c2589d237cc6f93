//! An `Error` made and dropped (a missing `return Err(..)`), or scratch memory
//! dropped as soon as it is allocated, is a bug: both are `#[must_use]`.
#![deny(unused_must_use)]
use xla_ffi::{handler, Buffer, Context, Result};

#[handler(target = "ui.dropped")]
fn ui_dropped(ctx: Context, x: Buffer<f32>) -> Result<()> {
    if x.is_empty() {
        x.error("must not be empty");
    }
    ctx.scratch(1024, 16)?;
    Ok(())
}

fn main() {}
