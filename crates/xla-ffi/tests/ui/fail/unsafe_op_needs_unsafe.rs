//! The body is not an unsafe context: a raw-pointer read needs `unsafe`.
use xla_ffi::{handler, Buffer, Result};

#[handler(target = "ui.deref")]
fn ui_deref(x: Buffer<f32>) -> Result<()> {
    let p = x.as_ptr() as *const f32;
    let _v = *p;
    Ok(())
}

fn main() {}
