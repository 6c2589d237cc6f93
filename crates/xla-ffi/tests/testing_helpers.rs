//! The `testing` helpers are safe functions: they cannot build a frame that
//! describes memory it does not own. A buffer whose bytes do not cover its dims,
//! an attribute whose bytes do not cover its count, an operand entry read as the
//! wrong struct, or a device address given to a host handler is refused before any
//! handler runs (a panic in the test helper, never an out-of-bounds read), and a
//! call's memory lives until its async handler is done.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

use common::{expect_ok, panic_text};
use xla_ffi::testing::raw::{Data, RawBuffer, RawCall};
use xla_ffi::testing::{Arg, AttrArg, CallBuilder, FakeApi};
use xla_ffi::{handler, Attr, Buffer, DataType, Result, ResultBuffer};

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
    // SAFETY: a host handler never hands the stream to a driver.
    let mut null_stream = unsafe { CallBuilder::new().device_stream(0) }.arg(dev()).ret(Arg::zeros::<f32>(&[1]));
    refused("a device buffer with a null stream", || drop(null_stream.run(TH_SUM)), &["needs a device call"]);
    // On a device frame the host handler is refused by the crate's host guard.
    // SAFETY: a host handler never hands the stream to a driver.
    let mut device = unsafe { CallBuilder::new().device_stream(0x2000) }.arg(dev()).ret(dev());
    let (code, msg) = device.run(TH_SUM).expect_err("a host handler on a device frame");
    assert_eq!(code, xla_ffi::ErrorCode::FailedPrecondition, "{msg}");
    assert!(msg.contains("th.sum") && msg.contains("device platform"), "{msg}");
}

#[handler(target = "th.prepare", stage = prepare)]
fn th_prepare(x: Buffer<f32>) -> Result<()> {
    let _ = x.as_slice()?.first();
    Ok(())
}

#[handler(target = "th.initialize", stage = initialize)]
fn th_initialize(x: Buffer<f32>) -> Result<()> {
    let _ = x.as_slice()?.first();
    Ok(())
}

#[handler(target = "th.record", stage = record)]
fn th_record(x: Buffer<f32>) -> Result<()> {
    let _ = x.as_slice()?.first();
    Ok(())
}

/// Before the fix the host guard ran at the execute stage only: a host handler at
/// prepare, initialize or record on a device frame got `&[f32]` over a device
/// address (SIGSEGV; a dangling reference under Miri).
#[test]
fn a_host_handler_is_refused_on_a_device_frame_at_every_stage() {
    use xla_ffi::{HandlerDescriptor, Stage};
    let cases: [(Stage, HandlerDescriptor, &str); 3] = [
        (Stage::Prepare, TH_PREPARE, "th.prepare"),
        (Stage::Initialize, TH_INITIALIZE, "th.initialize"),
        (Stage::Record, TH_RECORD, "th.record"),
    ];
    for (stage, handler, target) in cases {
        // SAFETY: the host guard refuses the frame before the handler reads the address.
        let dev = unsafe { Arg::device(DataType::F32, &[4], 0x10_0000) };
        // SAFETY: a host handler never hands the stream to a driver.
        let mut call = unsafe { CallBuilder::new().device_stream(0x2000) }.stage(stage).arg(dev);
        let (code, msg) = call.run(handler).expect_err("a host handler on a device frame");
        assert_eq!(code, xla_ffi::ErrorCode::FailedPrecondition, "{stage:?}: {msg}");
        assert!(msg.contains(target) && msg.contains("device platform"), "{stage:?}: {msg}");
        // The same handler on a host frame at its stage runs.
        let mut host = CallBuilder::new().stage(stage).arg(Arg::from_slice(&[1.0f32], &[1]));
        expect_ok(host.run(handler));
    }
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

#[handler(target = "th.attr_sum")]
fn th_attr_sum(xs: Attr<&[f64]>) -> Result<()> {
    let _ = xs.iter().sum::<f64>();
    Ok(())
}

#[handler(target = "th.attr_c128")]
fn th_attr_c128(z: Attr<xla_ffi::num_complex::Complex<f64>>) -> Result<()> {
    let _ = *z;
    Ok(())
}

/// Before the fix an `AttrArg` built by hand with fewer bytes than its count and
/// dtype describe went to the handler as is: `Attr<&[f64]>` read 800000 bytes of
/// an 8-byte payload (SIGSEGV), a complex scalar 16 bytes of none (Miri).
#[test]
fn attribute_bytes_must_match_their_dtype() {
    refused(
        "8 bytes for 100000 float64",
        || drop(CallBuilder::new().attr("xs", AttrArg::Array(DataType::F64, 100_000, vec![0; 8])).run(TH_ATTR_SUM)),
        &["attribute `xs`", "array of 100000", "needs 800000 bytes, got 8"],
    );
    refused(
        "an empty complex128 scalar",
        || drop(CallBuilder::new().attr("z", AttrArg::Scalar(DataType::C128, vec![])).run(TH_ATTR_C128)),
        &["attribute `z`", "scalar", "needs 16 bytes, got 0"],
    );
    refused(
        "a count whose bytes overflow",
        || drop(CallBuilder::new().attr("xs", AttrArg::Array(DataType::F64, usize::MAX, vec![])).run(TH_ATTR_SUM)),
        &["attribute `xs`", "more than usize::MAX"],
    );
    refused(
        "a nested entry",
        || {
            let inner = AttrArg::Dict(vec![("v".into(), AttrArg::Array(DataType::S32, 3, vec![0; 4]))]);
            drop(CallBuilder::new().attr("d", inner).run(TH_ATTR_SUM))
        },
        &["attribute `v`", "needs 12 bytes, got 4"],
    );
    refused(
        "a custom option",
        || drop(CallBuilder::new().custom_option("o", AttrArg::Scalar(DataType::F32, vec![1])).run(TH_ATTR_SUM)),
        &["attribute `o`", "needs 4 bytes, got 1"],
    );
    // Matching bytes decode; a dtype without a width takes any bytes (never read).
    let ok = CallBuilder::new()
        .attr("xs", AttrArg::Array(DataType::F64, 2, 1.5f64.to_le_bytes().repeat(2)))
        .run(TH_ATTR_SUM);
    expect_ok(ok);
    let invalid = CallBuilder::new().attr("xs", AttrArg::Array(DataType(99), 1000, vec![])).run(TH_ATTR_SUM);
    assert!(invalid.is_err(), "{invalid:?}");
}

/// Before the fix `misaligned` added the shift to the buffer's size unchecked: in a
/// build without overflow checks the storage was not grown and the data pointer
/// went far outside it.
#[test]
fn a_shift_past_the_address_space_is_refused() {
    refused(
        "a shift of usize::MAX - 7",
        || drop(Arg::from_slice(&[1u8; 8], &[8]).misaligned(usize::MAX - 7)),
        &["Arg::misaligned", "does not fit in memory"],
    );
    refused(
        "a shift past isize::MAX",
        || drop(Arg::from_slice(&[1u8; 8], &[8]).misaligned(isize::MAX as usize)),
        &["Arg::misaligned", "does not fit in memory"],
    );
}

static RAW_ASYNC_DONE: AtomicBool = AtomicBool::new(false);

#[handler(target = "th.raw_async", async)]
fn th_raw_async(x: Buffer<u8>, mut y: ResultBuffer<u8>) -> Result<()> {
    std::thread::sleep(std::time::Duration::from_millis(20));
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v.wrapping_add(1));
    }
    RAW_ASYNC_DONE.store(true, Ordering::SeqCst);
    Ok(())
}

/// Before the fix `RawCall::run` freed the buffers as soon as an async handler
/// returned, and its async part then wrote into freed memory (Miri: a dangling
/// reference in `typed_uninit`). It now waits for the future, as XLA does.
#[test]
fn a_raw_call_waits_for_an_async_handler() {
    let buf = || RawBuffer {
        kind: 1,
        null_entry: false,
        struct_size: xla_ffi::sys::XLA_FFI_Buffer_STRUCT_SIZE as usize,
        dtype: DataType::U8.0,
        dims: vec![4],
        rank_override: None,
        data: Data::Own { misalign: 0 },
        fill: 7,
    };
    let mut call = RawCall::new();
    call.args.push(buf());
    call.rets.push(buf());
    let out = call.run(&FakeApi::new(5), 2, TH_RAW_ASYNC.into());
    assert!(RAW_ASYNC_DONE.load(Ordering::SeqCst), "run returned before the async part finished");
    assert_eq!(out.result, Ok(()));
}

fn summed() -> CallBuilder {
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[1]));
    expect_ok(call.run(TH_SUM));
    call
}

/// Before the fix `ret_as::<i32>` of a float32 result returned the bit patterns
/// ([1077936128] for 3.0), so a test comparing against the wrong type read garbage
/// without a word; now the read names the result, its dtype and the type asked for.
#[test]
fn reading_back_as_another_dtype_is_refused() {
    let call = summed();
    assert_eq!(call.ret_as::<f32>(0), vec![3.0]);
    assert_eq!(call.arg_as::<f32>(0), vec![1.0, 2.0]);
    refused("ret_as i32", || drop(call.ret_as::<i32>(0)), &["ret_as", "result 0 is float32 [1]", "not int32"]);
    refused("arg_as u8", || drop(call.arg_as::<u8>(0)), &["arg_as", "operand 0 is float32 [2]", "not uint8"]);
    refused("ret_as f64", || drop(call.ret_as::<f64>(0)), &["result 0 is float32", "not float64"]);
}

/// Before the fix an index the call does not have panicked with Rust's bare
/// "index out of bounds: the len is 1 but the index is 5", naming no method.
#[test]
fn an_index_the_call_does_not_have_is_named() {
    let call = summed();
    refused("ret_as(5)", || drop(call.ret_as::<f32>(5)), &["ret_as", "1 result", "no result 5"]);
    refused("arg_as(3)", || drop(call.arg_as::<f32>(3)), &["arg_as", "1 operand", "no operand 3"]);
    let builder = || CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1])).ret(Arg::zeros::<f32>(&[1]));
    refused("alias ret", || drop(builder().alias(0, 4).run(TH_SUM)), &["alias", "result 4", "1 result"]);
    refused("alias arg", || drop(builder().alias(2, 0).run(TH_SUM)), &["alias", "operand 2", "1 operand"]);
    refused("arg_kind", || drop(builder().arg_kind(7, 2).run(TH_SUM)), &["arg_kind", "operand 7"]);
    refused(
        "arg_entry_is_data",
        || drop(builder().arg_entry_is_data(3).run(TH_SUM)),
        &["arg_entry_is_data", "operand 3"],
    );
}

/// One-byte elements stay readable as their raw bytes.
#[test]
fn one_byte_elements_read_back_as_bytes() {
    let mut call = CallBuilder::new().arg(Arg::from_bytes(DataType::PRED, &[2], &[1, 0])).ret(Arg::zeros::<u8>(&[1]));
    expect_ok(call.run(TH_BYTES));
    assert_eq!(call.arg_as::<u8>(0), vec![1, 0]);
    assert_eq!(call.ret_as::<u8>(0), vec![1]);
}

/// Before the fix a negative dimension was reported as "dims [-1] describe 0
/// elements, but 0 values were given", which contradicts itself.
#[test]
fn a_negative_dimension_in_from_slice_is_named() {
    refused("from_slice [-1]", || drop(Arg::from_slice::<f32>(&[], &[-1])), &["dims [-1]", "negative dimension"]);
    refused("from_slice [2]", || drop(Arg::from_slice(&[1.0f32], &[2])), &["describe 2 elements", "1 values"]);
}
