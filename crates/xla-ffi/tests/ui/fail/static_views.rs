// A synchronous handler cannot keep a view past its call: a parameter declared
// with the lifetime `'static` (to stash a slice, a string or the context in a
// static) does not compile, since the frame lives only for the call.
use std::sync::Mutex;
use xla_ffi::{handler, Attr, Buffer, Context, Result};

static SLICES: Mutex<Vec<&'static [f32]>> = Mutex::new(Vec::new());
static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

#[handler(target = "ui.keep_slice")]
fn keep_slice(x: Buffer<'static, f32>) -> Result<()> {
    SLICES.lock().unwrap().push(x.as_slice()?);
    Ok(())
}

#[handler(target = "ui.keep_str")]
fn keep_str(name: Attr<&'static str>) -> Result<()> {
    NAMES.lock().unwrap().push(*name);
    Ok(())
}

#[handler(target = "ui.keep_context")]
fn keep_context(ctx: Context<'static>) -> Result<()> {
    let _ = ctx;
    Ok(())
}

fn main() {}
