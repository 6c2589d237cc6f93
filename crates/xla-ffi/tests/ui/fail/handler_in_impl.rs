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



pub struct Scaled(f32);
xla_ffi::state_type!(Scaled);

impl Scaled {
    /// Naming `Self` (or taking `self`) shows it is an associated function: the
    /// macro says so itself.
    #[handler(target = "ui.assoc_self", stage = instantiate)]
    pub fn create() -> Result<Self> {
        Ok(Scaled(1.0))
    }

    #[handler(target = "ui.assoc_receiver")]
    pub fn method(&self, x: Buffer<f32>) -> Result<()> {
        let _ = (self.0, x);
        Ok(())
    }
}
fn main() {}
