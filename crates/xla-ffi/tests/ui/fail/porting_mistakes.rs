//! What a port of a C++ `ffi.h` handler often gets wrong first: each error points at
//! the parameter or keyword and says what to write instead.
use xla_ffi::{handler, Buffer, Result, ResultBuffer};

/// `ffi::Buffer<F32>` is passed by value, and so is `Buffer<f32>`.
#[handler(target = "ui.port_ref")]
fn by_reference(x: &mut Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    let _ = (x, y.as_uninit()?);
    Ok(())
}

/// A template over the buffer type becomes one concrete parameter type.
#[handler(target = "ui.port_impl")]
fn impl_trait(x: impl Into<f32>) -> Result<()> {
    let _ = x.into();
    Ok(())
}

#[handler(target = "ui.port_const")]
const fn constant() -> Result<()> {
    Ok(())
}

fn main() {}
