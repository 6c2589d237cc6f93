// A type that is no XLA element type or no attribute type: the error says so and
// lists the types that are (`usize` is the usual slip for an attribute: XLA's
// integers have a width; `bool` for a PRED buffer, which is `Pred`; `Vec<String>`
// for a list of strings, which no XLA attribute is).
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

#[handler(target = "ui.string_list")]
fn string_list(names: Attr<Vec<String>>) -> Result<()> {
    let _ = names;
    Ok(())
}

fn main() {}
