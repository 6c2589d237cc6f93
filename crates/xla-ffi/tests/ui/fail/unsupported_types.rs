// A type that is no XLA element type or no attribute type: the error says so and
// lists the types that are (`usize` is the usual slip for an attribute: XLA's
// integers have a width; `bool` for a PRED buffer, which is `Pred`).
use xla_ffi::{handler, Attr, Buffer, Result};

#[handler(target = "ui.usize_attr")]
fn usize_attribute(n: Attr<usize>) -> Result<()> {
    let _ = *n;
    Ok(())
}

#[handler(target = "ui.bool_buffer")]
fn bool_buffer(x: Buffer<bool>) -> Result<()> {
    let _ = x;
    Ok(())
}

fn main() {}
