// A dtype spelt as Rust spells it (`f32`) in a dtype rule is refused: read as a
// variable, any dtype would bind it, and `Buffer<AnyFloat>` would take float64 too.
use xla_ffi::{handler, AnyFloat, Buffer, Result, ResultBuffer};

#[handler(target = "ui.rust_dtype_name", dtypes = "f32 -> f32")]
fn rust_dtype_name(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> {
    let _ = (x, y);
    Ok(())
}

fn main() {}
