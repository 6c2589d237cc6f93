// A safe `extern "C" fn` with a handler's signature must not reach XLA or the
// synthetic frames: it could return a dangling error pointer. Only the macro (or
// `unsafe` code) makes a `Handler`, and only the macro makes a descriptor.
#![forbid(unsafe_code)]

use xla_ffi::sys::{XLA_FFI_CallFrame, XLA_FFI_Error};
use xla_ffi::testing::CallBuilder;
use xla_ffi::{handler, Handler, HandlerDescriptor, Platform, Result, Stage, Traits};

#[handler(target = "ui.real")]
fn ui_real() -> Result<()> {
    Ok(())
}

extern "C" fn forged(_frame: *mut XLA_FFI_CallFrame) -> *mut XLA_FFI_Error {
    8 as *mut XLA_FFI_Error
}

fn main() {
    // A bare function pointer is not a handler.
    let _ = CallBuilder::new().run(forged);
    // Nor can one be wrapped without `unsafe`, or put into a descriptor.
    let h = Handler(forged);
    let _ = HandlerDescriptor {
        target: "t",
        stage: Stage::Execute,
        platform: Platform::Host,
        traits: Traits::NONE,
        symbol: "forged",
        handler: h,
    };
    // Nor can a descriptor be assembled from a real handler's parts (the struct is
    // `#[non_exhaustive]`: only the macro makes one).
    let _ = HandlerDescriptor {
        target: "t",
        stage: Stage::Execute,
        platform: Platform::Host,
        traits: Traits::NONE,
        symbol: "forged",
        handler: UI_REAL.handler,
        declaration: UI_REAL.declaration,
    };
}
