//! The spawner of `async = spawner` is safe code like the body: an unsafe
//! operation written in it needs `unsafe` (it is not pasted into the shim's own
//! `unsafe` block).
use xla_ffi::{handler, AsyncCall, Result};

#[handler(target = "ui.spawner", async = |call: AsyncCall| {
    let p = 0x40 as *mut u64;
    *p = 1;
    call.run()
})]
fn ui_spawner() -> Result<()> {
    Ok(())
}

fn main() {}
