//! `#![forbid(unsafe_code)]` refuses an `unsafe` block written in a handler body.
#![forbid(unsafe_code)]
use xla_ffi::{handler, Buffer, Result};

#[handler(target = "ui.deref")]
fn ui_deref(x: Buffer<f32>) -> Result<()> {
    let p = x.as_ptr() as *const f32;
    let _v = unsafe { *p };
    Ok(())
}

fn main() {}
