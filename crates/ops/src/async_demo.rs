//! Demo targets of async handlers (`#[handler(async)]`), for the Python tests and
//! the overlap benchmark; not part of the production tables (Python gets them from
//! `_native.async_demo_targets`).
//!
//! * `xla_ffi_rs.demo.async_sleep_scale`: `y = 2 * x` (float32), written on a thread
//!   of its own after sleeping `delay_ms` milliseconds: XLA's thread is free meanwhile.
//! * `xla_ffi_rs.demo.sleep_scale`: the same, synchronously (it holds XLA's thread
//!   while it sleeps), for comparison.
//! * `xla_ffi_rs.demo.async_fail`, `.async_panic`, `.async_drop`: an asynchronous part
//!   that returns an error, panics, or is dropped without running.

use std::time::Duration;

use xla_ffi::{handler, AsyncCall, Attr, Buffer, Error, HandlerDescriptor, Result, ResultBuffer};

/// The async demo handlers for platform `"cpu"`.
pub const ASYNC_DEMO_CPU_HANDLERS: &[&HandlerDescriptor] =
    &[&ASYNC_SLEEP_SCALE, &SLEEP_SCALE, &ASYNC_FAIL, &ASYNC_PANIC, &ASYNC_DROP];

/// Sleeps `delay_ms` milliseconds, then writes `y = 2 * x`.
fn sleep_scale(x: Buffer<f32>, mut y: ResultBuffer<f32>, delay_ms: i64) -> Result<()> {
    let ms = u64::try_from(delay_ms)
        .ok()
        .filter(|&ms| ms <= 60_000)
        .ok_or_else(|| Error::invalid_argument(format!("attribute `delay_ms`: expected 0 to 60000, got {delay_ms}")))?;
    // As the C++ twin (benchmarks/cpp/bench_ffi.cc): no sleep at all for 0 ms.
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(2.0 * v);
    }
    Ok(())
}

/// `y = 2 * x` after `delay_ms` ms, on a thread of its own.
#[handler(target = "xla_ffi_rs.demo.async_sleep_scale", descriptor = ASYNC_SLEEP_SCALE, async, shapes = "...b -> ...b")]
pub fn async_sleep_scale(x: Buffer<f32>, y: ResultBuffer<f32>, delay_ms: Attr<i64>) -> Result<()> {
    sleep_scale(x, y, *delay_ms)
}

/// `y = 2 * x` after `delay_ms` ms, on XLA's thread.
#[handler(target = "xla_ffi_rs.demo.sleep_scale", descriptor = SLEEP_SCALE, shapes = "...b -> ...b")]
pub fn sync_sleep_scale(x: Buffer<f32>, y: ResultBuffer<f32>, delay_ms: Attr<i64>) -> Result<()> {
    sleep_scale(x, y, *delay_ms)
}

/// Fails in the asynchronous part.
#[handler(target = "xla_ffi_rs.demo.async_fail", descriptor = ASYNC_FAIL, async)]
pub fn async_fail(_x: Buffer<f32>, _y: ResultBuffer<f32>) -> Result<()> {
    Err(Error::invalid_argument("deliberate failure in the asynchronous part"))
}

/// Panics in the asynchronous part.
#[handler(target = "xla_ffi_rs.demo.async_panic", descriptor = ASYNC_PANIC, async)]
pub fn async_panic(_x: Buffer<f32>, _y: ResultBuffer<f32>) -> Result<()> {
    panic!("deliberate panic in the asynchronous part")
}

/// A spawner that loses the call.
fn drop_call(call: AsyncCall) {
    drop(call);
}

/// Its asynchronous part is dropped without running.
#[handler(target = "xla_ffi_rs.demo.async_drop", descriptor = ASYNC_DROP, async = drop_call)]
pub fn async_drop(_x: Buffer<f32>, _y: ResultBuffer<f32>) -> Result<()> {
    Ok(())
}
