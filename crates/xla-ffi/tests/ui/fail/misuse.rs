//! Misuse of the macro's options and signature: each gets a message that says what to write.
use xla_ffi::{handler, Buffer, Result};

#[handler]
fn no_target() -> Result<()> { Ok(()) }

#[handler(target = "ui.a", stge = execute)]
fn misspelt_option() -> Result<()> { Ok(()) }

#[handler(target = "ui.b", target = "ui.c")]
fn twice() -> Result<()> { Ok(()) }

#[handler(target = "ui.d", stage = later)]
fn bad_stage() -> Result<()> { Ok(()) }

#[handler(target = "ui.e", unsafe(symbol = "not a symbol"))]
fn bad_symbol() -> Result<()> { Ok(()) }

#[handler(target = "ui.f")]
unsafe fn unsafe_handler() -> Result<()> { Ok(()) }

#[handler(target = "ui.g")]
fn generic<T>(_x: Buffer<f32>) -> Result<()> { Ok(()) }

#[handler(target = "ui.h")]
async fn asynchronous() -> Result<()> { Ok(()) }

#[handler(target = "ui.i")]
fn pattern((a, b): (Buffer<f32>, Buffer<f32>)) -> Result<()> { let _ = (a, b); Ok(()) }

#[handler(target = "ui.j", stage = instantiate)]
fn no_state(_x: Buffer<f32>) {}

#[handler(target = "ui.k")]
extern "C" fn with_abi() {}

fn main() {}
