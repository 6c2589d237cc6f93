//! A `#![forbid(unsafe_code)]` crate can hold handlers of every kind.
#![forbid(unsafe_code)]

use xla_ffi::{handler, state_type, Attr, Buffer, Context, RemainingArgs, Result, ResultBuffer, State, Traits};

pub struct S(f64);
state_type!(S);

#[handler(target = "ui.init", stage = instantiate)]
pub fn ui_init(k: Attr<f64>) -> Result<S> {
    Ok(S(*k))
}

#[handler(target = "ui.init")]
pub fn ui_exec(ctx: Context, x: Buffer<f64>, mut y: ResultBuffer<f64>, s: State<S>) -> Result<()> {
    let _ = ctx.thread_pool().num_threads();
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(s.0 * v);
    }
    Ok(())
}

#[handler(target = "ui.dev", platform = device, traits = Traits::COMMAND_BUFFER_COMPATIBLE)]
fn ui_dev(_xs: RemainingArgs) {}

fn main() {
    let table = [&UI_INIT, &UI_EXEC, &UI_DEV];
    assert_eq!(table[2].symbol, "xla_ffi_handler__ui_dev");
}
