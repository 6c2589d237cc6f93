//! The defects found by an outside soundness audit, one test each, plus the risks it
//! listed. Each test failed before its fix: how it failed is said in its comment
//! (an assertion, an abort of the test binary, a hang, or Miri/valgrind reporting
//! undefined behaviour).

mod common;

use std::panic::panic_any;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use common::{expect_err, expect_ok};
use xla_ffi::testing::{Arg, AttrArg, CallBuilder, FakeApi};
use xla_ffi::{
    handler, state_type, Attr, Buffer, Context, DataType, Dict, ErrorCode, InOut, Pred, Result, ResultBuffer, State,
    StateType, TypeRegistration,
};

/// A panic payload whose own `Drop` panics.
struct PanicsWhenDropped;
impl Drop for PanicsWhenDropped {
    fn drop(&mut self) {
        panic!("deliberate: the payload's Drop panics");
    }
}

// -- defect 1: PRED bytes other than 0 and 1 -----------------------------------

/// out = [number of true elements, number of false elements] (as `!b` sees it).
#[handler(target = "snd.pred")]
fn snd_pred(x: Buffer<Pred>, mut out: ResultBuffer<i64>) -> Result<()> {
    let x = x.as_slice()?;
    let t = x.iter().filter(|b| b.get()).count() as i64;
    let f = x.iter().filter(|b| !b.get()).count() as i64;
    let out = out.as_uninit()?;
    out[0].write(t);
    out[1].write(f);
    Ok(())
}

/// y = !x, in place when aliased.
#[handler(target = "snd.pred_inplace")]
fn snd_pred_inplace(x: Buffer<Pred>, mut y: ResultBuffer<Pred>) -> Result<()> {
    match y.with_input::<Pred, _, { xla_ffi::ANY_RANK }>(&x)? {
        InOut::InPlace(xy) => xy.iter_mut().for_each(|v| *v = Pred::from(!v.get())),
        InOut::Separate { input, output } => {
            for (o, v) in output.iter_mut().zip(input) {
                o.write(Pred::from(!v.get()));
            }
        }
    }
    Ok(())
}

/// Before the fix this handler read the bytes as `&[bool]`: Miri reported
/// "constructing invalid value: encountered 0x02, but expected a boolean".
#[test]
fn pred_bytes_other_than_0_and_1_are_true() {
    let mut call =
        CallBuilder::new().arg(Arg::from_bytes(DataType::PRED, &[4], &[2, 0xff, 1, 0])).ret(Arg::zeros::<i64>(&[2]));
    expect_ok(call.run(SND_PRED));
    assert_eq!(call.ret_as::<i64>(0), vec![3, 1]);
}

#[test]
fn pred_in_place_and_separate() {
    let mut call = CallBuilder::new()
        .arg(Arg::from_bytes(DataType::PRED, &[4], &[2, 0xff, 1, 0]))
        .ret(Arg::raw(DataType::PRED, &[4], 1))
        .alias(0, 0);
    expect_ok(call.run(SND_PRED_INPLACE));
    assert_eq!(call.ret_as::<u8>(0), vec![0, 0, 0, 1]);
    let mut call = CallBuilder::new().arg(Arg::from_bytes(DataType::PRED, &[3], &[7, 0, 1])).ret(Arg::raw(
        DataType::PRED,
        &[3],
        1,
    ));
    expect_ok(call.run(SND_PRED_INPLACE));
    assert_eq!(call.ret_as::<u8>(0), vec![0, 1, 0]);
}

#[handler(target = "snd.pred_attr")]
fn snd_pred_attr(flags: Attr<&[Pred]>, on: Attr<bool>, mut out: ResultBuffer<i64>) -> Result<()> {
    let out = out.as_uninit()?;
    out[0].write(flags.iter().filter(|b| b.get()).count() as i64);
    out[1].write(*on as i64);
    Ok(())
}

#[test]
fn pred_array_attribute_is_read_as_bytes() {
    let mut call = CallBuilder::new()
        .attr("flags", AttrArg::Array(DataType::PRED, 3, vec![2, 0, 1]))
        .attr("on", AttrArg::Scalar(DataType::PRED, vec![0x40]))
        .ret(Arg::zeros::<i64>(&[2]));
    expect_ok(call.run(SND_PRED_ATTR));
    assert_eq!(call.ret_as::<i64>(0), vec![2, 1]);
}

// -- defect 3: a task panic whose payload panics when dropped ------------------

static FIRED: AtomicBool = AtomicBool::new(false);

/// Task 0 of the calling thread panics with a payload that panics on drop;
/// the other tasks keep reading borrowed data for a while.
#[handler(target = "snd.pool_caller")]
fn snd_pool_caller(ctx: Context, mut out: ResultBuffer<u64>) -> Result<()> {
    let caller = std::thread::current().id();
    let data: Vec<u64> = (0..256).collect();
    let sum = AtomicU64::new(0);
    let r = ctx.thread_pool().for_each(48, |_| {
        if std::thread::current().id() == caller && !FIRED.swap(true, Ordering::SeqCst) {
            panic_any(PanicsWhenDropped);
        }
        std::thread::sleep(Duration::from_millis(1));
        sum.fetch_add(data.iter().sum::<u64>(), Ordering::Relaxed);
    });
    out.as_uninit()?[0].write(sum.load(Ordering::Relaxed));
    r
}

/// Before the fix `for_each` unwound out of the calling thread while the pool's
/// tasks still read `data` (valgrind: invalid reads of freed memory), and the
/// error said "handler panicked", not "task panicked".
#[test]
fn pool_task_payload_that_panics_on_drop_on_the_calling_thread() {
    common::quiet_deliberate_panics();
    FIRED.store(false, Ordering::SeqCst);
    let mut call = CallBuilder::new().threads(4).ret(Arg::zeros::<u64>(&[1]));
    expect_err(call.run(SND_POOL_CALLER), ErrorCode::Internal, &["snd.pool_caller", "task panicked"]);
    // Every task but the panicking one ran to the end before `for_each` returned.
    assert_eq!(call.ret_as::<u64>(0), vec![47 * (255 * 256 / 2)]);
}

/// Every task that runs on a pool thread panics with a payload that panics on drop.
#[handler(target = "snd.pool_helper")]
fn snd_pool_helper(ctx: Context) -> Result<()> {
    let caller = std::thread::current().id();
    ctx.thread_pool().for_each(64, |_| {
        if std::thread::current().id() != caller {
            panic_any(PanicsWhenDropped);
        }
        std::thread::sleep(Duration::from_millis(1));
    })
}

/// Before the fix a pool thread unwound out of its task without counting it done,
/// and `for_each` waited forever: this test timed out.
#[test]
fn pool_task_payload_that_panics_on_drop_on_a_pool_thread() {
    common::quiet_deliberate_panics();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut call = CallBuilder::new().threads(4);
        let _ = tx.send(call.run(SND_POOL_HELPER));
    });
    let r = rx.recv_timeout(Duration::from_secs(if cfg!(miri) { 600 } else { 60 })).expect("for_each hung");
    if let Err((code, msg)) = r {
        // A pool thread may not get to run a task before the caller has run them all.
        assert_eq!(code, ErrorCode::Internal, "{msg}");
        assert!(msg.contains("snd.pool_helper") && msg.contains("task panicked"), "{msg}");
    }
}

// -- defect 4: aborts ----------------------------------------------------------

/// A state whose Drop panics with a payload that panics when dropped.
struct Explosive;
impl Drop for Explosive {
    fn drop(&mut self) {
        panic_any(PanicsWhenDropped);
    }
}
state_type!(Explosive);

/// Before the fix the deleter dropped the payload inside `extern "C"`: the test
/// binary aborted ("panic in a function that cannot unwind").
#[test]
fn state_deleter_survives_a_payload_that_panics_on_drop() {
    common::quiet_deliberate_panics();
    let info = Explosive::registration().type_info_ptr() as *const xla_ffi::sys::XLA_FFI_TypeInfo;
    // SAFETY: a registration's TypeInfo is a valid static.
    let deleter = unsafe { (*info).deleter }.expect("a deleter");
    let p = Box::into_raw(Box::new(Explosive)) as *mut core::ffi::c_void;
    // SAFETY: `p` is a leaked Box<Explosive>, as instantiate stores; freed once.
    unsafe { deleter(p) };
}

/// A state type whose registration panics (user code may implement the trait).
struct BadRegistration;
impl StateType for BadRegistration {
    fn registration() -> &'static TypeRegistration<Self> {
        panic!("deliberate: registration() panics")
    }
}

#[handler(target = "snd.bad_registration")]
fn snd_bad_registration(s: State<BadRegistration>) -> Result<()> {
    let _ = &*s;
    Ok(())
}

/// Before the fix the metadata answer called `registration()` outside
/// `catch_unwind`: the test binary aborted.
#[test]
fn metadata_with_a_panicking_registration_is_an_error() {
    common::quiet_deliberate_panics();
    let r = CallBuilder::new().metadata(SND_BAD_REGISTRATION);
    let (code, msg) = r.expect_err("metadata must fail");
    assert_eq!(code, ErrorCode::Internal);
    assert!(msg.contains("snd.bad_registration") && msg.contains("registration() panics"), "{msg}");
}

/// A parameter type whose `state_type_id` panics.
struct BadDecode;
impl<'f> xla_ffi::Decode<'f> for BadDecode {
    fn decode(_: &mut xla_ffi::Call<'f>, _: &'static str) -> Option<Self> {
        Some(BadDecode)
    }
    fn state_type_id() -> i64 {
        panic!("deliberate: state_type_id() panics")
    }
}

#[handler(target = "snd.bad_decode")]
fn snd_bad_decode(_b: BadDecode) -> Result<()> {
    Ok(())
}

#[test]
fn metadata_with_a_panicking_state_type_id_is_an_error() {
    common::quiet_deliberate_panics();
    let (code, msg) = CallBuilder::new().metadata(SND_BAD_DECODE).expect_err("metadata must fail");
    assert_eq!(code, ErrorCode::Internal);
    assert!(msg.contains("snd.bad_decode") && msg.contains("state_type_id() panics"), "{msg}");
}

// -- defect 5: a table shorter than the header's -------------------------------

#[handler(target = "snd.short_table")]
fn snd_short_table(ctx: Context, x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v * 2.0);
    }
    let _ = ctx.thread_pool().num_threads();
    let _ = ctx.api_version();
    Ok(())
}

/// Before the fix the crate made a `&XLA_FFI_Api` of the 0.5 header's 208 bytes
/// over jaxlib 0.10's 192-byte table: Miri reported an out-of-bounds reference.
#[test]
fn api_table_of_192_bytes_is_never_referenced_whole() {
    for size in [192, 176, 72] {
        let mut call = CallBuilder::new()
            .api(FakeApi::new(3).with_struct_size(size))
            .arg(Arg::from_slice(&[1.0f32, 2.0], &[2]))
            .ret(Arg::zeros::<f32>(&[2]));
        expect_ok(call.run(SND_SHORT_TABLE));
        assert_eq!(call.ret_as::<f32>(0), vec![2.0, 4.0], "table of {size} bytes");
    }
}

// -- defect 6: the testing module itself ---------------------------------------

/// Before the fix `from_slice` accepted dims that describe more elements than
/// given, and a handler then read past the allocation.
#[test]
#[should_panic(expected = "describe 4 elements, but 2 values were given")]
fn arg_from_slice_checks_dims() {
    let _ = Arg::from_slice(&[1.0f32, 2.0], &[4]);
}

/// Before the fix `misaligned(12)` moved the pointer past the allocation's end and
/// `ret_as` read out of bounds (Miri and valgrind: invalid read).
#[test]
fn misaligned_storage_stays_in_bounds() {
    let a = Arg::from_slice(&[1.0f64, 2.0], &[2]).misaligned(12);
    assert_eq!(a.bytes().len(), 16);
    let mut call = CallBuilder::new().ret(Arg::zeros::<f64>(&[2]).misaligned(12));
    assert_eq!(call.ret_as::<f64>(0), vec![0.0, 0.0]);
    let _ = call.run(SND_SHORT_TABLE);
}

#[handler(target = "snd.nested")]
fn snd_nested(cfg: Attr<Dict>, mut out: ResultBuffer<i64>) -> Result<()> {
    let inner: Dict = cfg.get("inner").map_err(xla_ffi::Error::invalid_argument)?;
    let k: i64 = inner.get("k").map_err(xla_ffi::Error::invalid_argument)?;
    let name: &str = cfg.get("name").map_err(xla_ffi::Error::invalid_argument)?;
    out.as_uninit()?[0].write(k + name.len() as i64);
    Ok(())
}

/// Before the fix every frame with attributes failed under Miri (Stacked Borrows:
/// the attribute store took pointers into boxes and then moved the boxes).
#[test]
fn nested_attribute_dictionaries_are_sound() {
    let inner = AttrArg::Dict(vec![("k".into(), AttrArg::scalar(40i64))]);
    let cfg = AttrArg::Dict(vec![("name".into(), AttrArg::Str("ab".into())), ("inner".into(), inner)]);
    let mut call = CallBuilder::new().attr("cfg", cfg).ret(Arg::zeros::<i64>(&[1]));
    expect_ok(call.run(SND_NESTED));
    assert_eq!(call.ret_as::<i64>(0), vec![42]);
}

// -- risks ---------------------------------------------------------------------

/// A parameter type that claims an operand but never checks it (the `Decode`
/// trait is public).
struct Unchecked;
impl<'f> xla_ffi::Decode<'f> for Unchecked {
    const ARGS: usize = 1;
    fn decode(_: &mut xla_ffi::Call<'f>, _: &'static str) -> Option<Self> {
        Some(Unchecked)
    }
}

#[handler(target = "snd.unchecked")]
fn snd_unchecked(_u: Unchecked, mut y: ResultBuffer<f32>) -> Result<()> {
    y.as_uninit()?.iter_mut().for_each(|o| {
        o.write(1.0);
    });
    Ok(())
}

/// Before the fix the overlap scan read the unchecked entry (of another kind, a
/// pointer to 4 bytes) as an `XLA_FFI_Buffer` (Miri: out-of-bounds read).
#[test]
fn overlap_scan_checks_entry_kinds() {
    let mut call = CallBuilder::new()
        .arg(Arg::from_slice(&[0u8; 4], &[4]))
        .ret(Arg::zeros::<f32>(&[2]))
        .arg_kind(0, 7)
        .arg_entry_is_data(0);
    expect_err(call.run(SND_UNCHECKED), ErrorCode::InvalidArgument, &["snd.unchecked", "result 0", "operand 0"]);
}

#[handler(target = "snd.fp8")]
fn snd_fp8(x: Buffer, mut y: ResultBuffer<u8>) -> Result<()> {
    let _ = x.dtype();
    y.as_uninit()?.iter_mut().for_each(|o| {
        o.write(0);
    });
    Ok(())
}

/// Before the fix FP8, sub-byte and unknown dtypes had no width, so their buffers
/// never counted as overlapping: the result was handed out as `&mut` over the
/// operand's memory.
#[test]
fn fp8_subbyte_and_unknown_dtypes_overlap() {
    for (code, width) in [(19u32, 1usize), (20, 1), (32, 1), (21, 1), (31, 1), (99, 1), (0, 1)] {
        let mut call =
            CallBuilder::new().arg(Arg::raw(DataType(code), &[8], width)).ret(Arg::zeros::<u8>(&[8])).alias(0, 0);
        expect_err(call.run(SND_FP8), ErrorCode::InvalidArgument, &["snd.fp8", "shares memory with operand 0"]);
    }
    assert_eq!(DataType(19).byte_width(), Some(1));
    assert_eq!(DataType(21).byte_width(), Some(1));
    assert_eq!(DataType::TOKEN.byte_width(), Some(0));
}

#[handler(target = "snd.host_guard")]
fn snd_host_guard(x: Buffer<f32>) -> Result<()> {
    let _ = x.as_slice()?;
    Ok(())
}

static STREAM_CALLS: AtomicUsize = AtomicUsize::new(0);

/// A GPU runtime whose first `Stream_Get` fails (transiently) and later ones work.
unsafe extern "C" fn flaky_stream_get(
    args: *mut xla_ffi::sys::XLA_FFI_Stream_Get_Args,
) -> *mut xla_ffi::sys::XLA_FFI_Error {
    if STREAM_CALLS.fetch_add(1, Ordering::SeqCst) > 0 {
        // SAFETY: valid args from the crate under test; the stream is a dummy address.
        unsafe { (*args).stream = core::ptr::without_provenance_mut(0x1000) };
    }
    core::ptr::null_mut()
}

/// Before the fix a failed or null `Stream_Get` was cached as "host" for the
/// table: the second call below read device memory as a host slice.
#[test]
fn host_guard_caches_only_proofs() {
    // SAFETY: `flaky_stream_get` returns NULL and writes only `(*args).stream`.
    let api = unsafe { FakeApi::new(5).without_thread_pool().with_stream_get(flaky_stream_get) };
    let mut call = CallBuilder::new().api(api).arg(Arg::from_slice(&[1.0f32], &[1]));
    let first = call.run(SND_HOST_GUARD);
    expect_err(call.run(SND_HOST_GUARD), ErrorCode::FailedPrecondition, &["snd.host_guard", "device platform"]);
    // The first call had no proof either way; it must not have cached "host".
    let _ = first;
}

/// Before the fix a pointer near the top of the address space made `data + bytes`
/// wrap around (a debug-build panic inside the decoder).
#[test]
fn buffer_end_past_the_address_space_is_an_error() {
    // SAFETY: the decoder refuses a range that wraps around before reading it.
    let mut call =
        unsafe { CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1])).arg_data_address(0, usize::MAX - 3) };
    expect_err(call.run(SND_HOST_GUARD), ErrorCode::InvalidArgument, &["snd.host_guard", "operand 0"]);
    // No slice may end past isize::MAX, even where the address space goes on (found by
    // the frames fuzz target: a PRED buffer of i64::MAX elements at address 8).
    // SAFETY: the decoder refuses a range that passes isize::MAX before reading it.
    let mut call = unsafe {
        CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1])).arg_data_address(0, isize::MAX as usize - 1)
    };
    expect_err(call.run(SND_HOST_GUARD), ErrorCode::InvalidArgument, &["snd.host_guard", "operand 0"]);
    // One element that would end one byte past isize::MAX (an aligned address).
    // SAFETY: as above.
    let mut call = unsafe {
        CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1])).arg_data_address(0, isize::MAX as usize - 3)
    };
    expect_err(call.run(SND_HOST_GUARD), ErrorCode::InvalidArgument, &["snd.host_guard", "operand 0", "address space"]);
    // No bytes at all cover nothing, wherever they start: an empty slice.
    // SAFETY: an empty buffer is never read.
    let mut call =
        unsafe { CallBuilder::new().arg(Arg::from_slice(&[] as &[f32], &[0])).arg_data_address(0, usize::MAX - 3) };
    assert!(call.run(SND_HOST_GUARD).is_ok());
}

#[handler(target = "snd.stateful_md")]
fn snd_stateful_md(s: State<Explosive>) -> Result<()> {
    let _ = &*s;
    Ok(())
}

/// The state type id is written only to runtimes that read it (API >= 0.3 here),
/// and a runtime older than our minimum gets a clear error.
#[test]
fn metadata_state_type_id_is_gated_on_the_runtime_version() {
    xla_ffi::testing::register_state_type::<Explosive>(77);
    let md = CallBuilder::new().api(FakeApi::new(3).with_struct_size(192)).metadata(SND_STATEFUL_MD).unwrap();
    assert_eq!(md, (0, 3, 0, 77));
    let (code, msg) = CallBuilder::new().api(FakeApi::new(2)).metadata(SND_STATEFUL_MD).unwrap_err();
    assert_eq!(code, ErrorCode::FailedPrecondition);
    assert!(msg.contains("snd.stateful_md") && msg.contains("0.2") && msg.contains("0.3"), "{msg}");
}

/// Before the fix a frame too small to hold the operands returned success.
#[test]
fn too_small_frame_is_an_error() {
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1])).frame_size(100);
    expect_err(call.run(SND_HOST_GUARD), ErrorCode::Internal, &["snd.host_guard", "XLA_FFI_CallFrame size"]);
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1])).frame_size(16);
    expect_err(call.run(SND_HOST_GUARD), ErrorCode::Internal, &["snd.host_guard", "call frame"]);
    let mut call = CallBuilder::new().api(FakeApi::new(5).with_struct_size(40)).arg(Arg::from_slice(&[1.0f32], &[1]));
    let r = call.run(SND_HOST_GUARD);
    // No Error_Create in that table: the error comes from a table seen before.
    expect_err(r, ErrorCode::Internal, &["snd.host_guard", "API table"]);
}

/// An args, rets or attrs struct smaller than this header's is refused before any of
/// its fields past `struct_size` is read, and the message says which and by how much.
#[test]
fn too_small_frame_parts_are_errors() {
    use xla_ffi_sys as sys;
    let (args, rets, attrs) = (
        sys::XLA_FFI_Args_STRUCT_SIZE as usize,
        sys::XLA_FFI_Rets_STRUCT_SIZE as usize,
        sys::XLA_FFI_Attrs_STRUCT_SIZE as usize,
    );
    let call = || CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1]));
    let got = format!("XLA_FFI_Args struct of {} bytes (expected at least {args})", args - 1);
    expect_err(call().args_struct_size(args - 1).run(SND_HOST_GUARD), ErrorCode::Internal, &["snd.host_guard", &got]);
    let got = format!("XLA_FFI_Rets struct of 0 bytes (expected at least {rets})");
    expect_err(call().rets_struct_size(0).run(SND_HOST_GUARD), ErrorCode::Internal, &["snd.host_guard", &got]);
    let got = format!("XLA_FFI_Attrs struct of 8 bytes (expected at least {attrs})");
    expect_err(call().attrs_struct_size(8).run(SND_HOST_GUARD), ErrorCode::Internal, &["snd.host_guard", &got]);
    // All three named in one message; none named when it is large enough.
    let msg = expect_err(
        call().args_struct_size(1).rets_struct_size(2).attrs_struct_size(3).run(SND_HOST_GUARD),
        ErrorCode::Internal,
        &["XLA_FFI_Args struct of 1 bytes", "XLA_FFI_Rets struct of 2 bytes", "XLA_FFI_Attrs struct of 3 bytes"],
    );
    assert!(msg.starts_with("snd.host_guard: the call frame's "), "{msg}");
    let msg = expect_err(call().rets_struct_size(rets - 8).run(SND_HOST_GUARD), ErrorCode::Internal, &["XLA_FFI_Rets"]);
    assert!(!msg.contains("XLA_FFI_Args") && !msg.contains("XLA_FFI_Attrs"), "{msg}");
    // Larger than this header's (a newer runtime's): accepted.
    expect_ok(
        call().args_struct_size(args + 8).rets_struct_size(rets + 8).attrs_struct_size(attrs + 8).run(SND_HOST_GUARD),
    );
}
