// A type that is no XLA element type or no attribute type: the error says so and
// lists the types that are (`usize` is the usual slip: XLA's integers have a width).
use xla_ffi::{handler, Attr, Buffer, Result};

#[handler(target = "ui.usize_attr")]
fn usize_attribute(n: Attr<usize>) -> Result<()> {
    let _ = *n;
    Ok(())
}

#[handler(target = "ui.usize_buffer")]
fn usize_buffer(x: Buffer<usize>) -> Result<()> {
    let _ = x;
    Ok(())
}

fn main() {}
