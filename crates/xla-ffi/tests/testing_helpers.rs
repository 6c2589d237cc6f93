//! The `testing` helpers are safe functions: they cannot build a frame that
//! describes memory it does not own. A buffer whose bytes do not cover its dims,
//! an operand entry read as the wrong struct, or a device address given to a host
//! handler is refused before any handler runs (a panic in the test helper, never
//! an out-of-bounds read).

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use common::{expect_ok, panic_text};
use xla_ffi::testing::{Arg, CallBuilder};
use xla_ffi::{handler, Buffer, DataType, Result, ResultBuffer};

#[handler(target = "th.sum")]
fn th_sum(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    y.as_uninit()?[0].write(x.as_slice()?.iter().sum());
    Ok(())
}

#[handler(target = "th.bytes")]
fn th_bytes(x: Buffer, mut y: ResultBuffer<u8>) -> Result<()> {
    y.as_uninit()?[0].write(x.as_bytes()?.iter().fold(0u8, |a, &b| a.wrapping_add(b)));
    Ok(())
}

#[track_caller]
fn refused(what: &str, f: impl FnOnce(), words: &[&str]) {
    let r = catch_unwind(AssertUnwindSafe(f));
    let msg = panic_text(r.expect_err(what));
    for w in words {
        assert!(msg.contains(w), "{what}: {w:?} not in {msg}");
    }
}

/// Before the fix `from_bytes` took 4 bytes for 1000 float32 elements, and the
/// handler's `as_slice()` read 4000 (SIGSEGV, or an out-of-bounds read under Miri).
#[test]
fn from_bytes_must_cover_the_dims() {
    refused(
        "4 bytes for 1000 float32",
        || drop(Arg::from_bytes(DataType::F32, &[1000], &[0; 4])),
        &["Arg::from_bytes", "describe 4000 bytes, but 4 were given"],
    );
    // Enough bytes (or more) is fine, as are dtypes without a byte width.
    let mut call = CallBuilder::new()
        .arg(Arg::from_bytes(DataType::F32, &[2], &1.5f32.to_le_bytes().repeat(3)))
        .ret(Arg::zeros::<f32>(&[1]));
    expect_ok(call.run(TH_SUM));
    assert_eq!(call.ret_as::<f32>(0), vec![3.0]);
    drop(Arg::from_bytes(DataType(99), &[1000], &[]));
}

/// Before the fix `Arg::raw(F64, .., 1)` gave 1 byte per 8-byte element.
#[test]
fn raw_width_must_cover_the_dtype() {
    refused(
        "width 1 for float64",
        || drop(Arg::raw(DataType::F64, &[64], 1)),
        &["Arg::raw", "float64 has 8 bytes per element, but a width of 1"],
    );
    let mut call = CallBuilder::new().arg(Arg::raw(DataType::U8, &[3], 1)).ret(Arg::zeros::<u8>(&[1]));
    expect_ok(call.run(TH_BYTES));
}

/// Before the fix an operand entry made to point at its data but still tagged
/// BUFFER was read as an `XLA_FFI_Buffer` from 4 bytes of data.
#[test]
fn a_data_entry_must_have_another_kind() {
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1])).ret(Arg::zeros::<f32>(&[1]));
    call = call.arg_entry_is_data(0);
    refused(
        "a data entry tagged BUFFER",
        || drop(call.run(TH_SUM)),
        &["operand entry 0 points at data but is tagged BUFFER"],
    );
}

/// A device address in a host call: a host handler would read it as host memory.
#[test]
fn a_device_buffer_needs_a_device_call() {
    // SAFETY: `run` refuses these frames before any handler sees the address.
    let dev = || unsafe { Arg::device(DataType::F32, &[4], 0x10_0000) };
    let mut host = CallBuilder::new().arg(dev()).ret(Arg::zeros::<f32>(&[1]));
    refused("a device buffer on a host frame", || drop(host.run(TH_SUM)), &["needs a device call", "device_stream"]);
    // A null stream proves nothing to the host guard: refused too.
    let mut null_stream = CallBuilder::new().device_stream(0).arg(dev()).ret(Arg::zeros::<f32>(&[1]));
    refused("a device buffer with a null stream", || drop(null_stream.run(TH_SUM)), &["needs a device call"]);
    // On a device frame the host handler is refused by the crate's host guard.
    let mut device = CallBuilder::new().device_stream(0x2000).arg(dev()).ret(dev());
    let (code, msg) = device.run(TH_SUM).expect_err("a host handler on a device frame");
    assert_eq!(code, xla_ffi::ErrorCode::FailedPrecondition, "{msg}");
    assert!(msg.contains("th.sum") && msg.contains("device platform"), "{msg}");
}

#[handler(target = "th.fill")]
fn th_fill(_x: Buffer, mut y: ResultBuffer<f32>) -> Result<()> {
    y.as_uninit()?.iter_mut().for_each(|o| _ = o.write(7.0));
    Ok(())
}

/// Before the fix `alias` pointed a float32[1000] result at a zero-size (or token)
/// operand's 8 bytes of storage: the operand covers no bytes, so nothing overlapped,
/// and the handler's safe `as_uninit()` wrote 4000 bytes past them (heap corruption,
/// SIGSEGV).
#[test]
fn an_aliased_result_must_fit_the_operand() {
    for (what, operand) in [("a zero-size operand", Arg::from_slice::<f32>(&[], &[0])), ("a token", Arg::token())] {
        let mut call = CallBuilder::new().arg(operand).ret(Arg::zeros::<f32>(&[1000])).alias(0, 0);
        refused(
            what,
            || drop(call.run(TH_FILL)),
            &["result 0 (float32 [1000], 4000 bytes) is aliased to operand 0", "storage holds 8 bytes"],
        );
    }
    // A result that fits (the same shape, or fewer bytes) still runs.
    let mut call =
        CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[2])).alias(0, 0);
    let (_, msg) = call.run(TH_FILL).expect_err("an aliased result is refused as a plain slice");
    assert!(msg.contains("th.fill") && msg.contains("shares memory with operand 0"), "{msg}");
}
