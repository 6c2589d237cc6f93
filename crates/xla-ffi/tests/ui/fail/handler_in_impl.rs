//! `#[handler]` on an associated function: the exported shim is a free function
//! and cannot call `Self::f`, so the macro's output is refused at once, pointing at
//! the attribute, instead of "cannot find function".
use xla_ffi::{handler, Buffer, Result};

pub struct Ops;

impl Ops {
    #[handler(target = "ui.assoc")]
    pub fn assoc(x: Buffer<f32>) -> Result<()> {
        let _ = x;
        Ok(())
    }
}

fn main() {}
