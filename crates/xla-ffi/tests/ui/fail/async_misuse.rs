// Misuse of `#[handler(async)]`, each refused at compile time.
use xla_ffi::{handler, AsyncCall, Buffer, Context, Result, ResultBuffer};

// The context ends when the handler call returns.
#[handler(target = "t.async_ctx", async)]
fn async_ctx(ctx: Context, x: Buffer<f32>) -> Result<()> {
    let _ = (ctx, x);
    Ok(())
}

// Only execute handlers complete through a future.
#[handler(target = "t.async_instantiate", stage = instantiate, async)]
fn async_instantiate() -> Result<()> {
    Ok(())
}

#[handler(target = "t.async_twice", async, async)]
fn async_twice() {}

#[handler(target = "t.async_list", async(spawner))]
fn async_list() {}

// A view cannot outlive the call: not as a `'static` value (into a static, state)...
fn keep(_x: Buffer<'static, f32>) {}

#[handler(target = "t.async_keep", async)]
fn async_keep(x: Buffer<f32>) -> Result<()> {
    keep(x);
    Ok(())
}

// ... nor onto a thread that outlives it.
#[handler(target = "t.async_escape", async)]
fn async_escape(mut y: ResultBuffer<f32>) -> Result<()> {
    let out = y.as_uninit()?;
    std::thread::spawn(move || out.len());
    Ok(())
}

// The rest of a call is not cloned: it completes once.
fn twice(call: AsyncCall) {
    let again = call.clone();
    call.run();
    again.run();
}

fn main() {}
