//! Async handlers (`#[handler(async)]`): the body runs after the handler returned,
//! on another thread, and completes the call through the fake runtime's future.
//! `CallBuilder::run` waits for the future, as XLA does. Runs under Miri too.

mod common;

use std::time::Duration;

use common::{expect_err, expect_ok, quiet_deliberate_panics};
use xla_ffi::testing::{Arg, AttrArg, CallBuilder, FakeApi};
use xla_ffi::{handler, AsyncCall, Attr, Buffer, Call, Context, Decode, Error, ErrorCode, InOut, Result, ResultBuffer};

/// y = 2x on a thread of its own (the default spawner).
#[handler(target = "async.double", async)]
fn async_double(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    y.expect_dims(x.dims(), "the shape of x")?;
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(2.0 * v);
    }
    Ok(())
}

fn call_double() -> CallBuilder {
    CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0, 3.0], &[3])).ret(Arg::zeros::<f32>(&[3]))
}

#[test]
fn success_from_another_thread() {
    let mut call = call_double();
    expect_ok(call.run(ASYNC_DOUBLE));
    assert_eq!(call.ret_as::<f32>(0), vec![2.0, 4.0, 6.0]);
    assert!(call.pending_at_return().is_some(), "the handler returned a future");
}

/// Runs the call on a new thread after a pause, so it completes after the handler
/// returned.
fn later(call: AsyncCall) {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        call.run();
    });
}

#[handler(target = "async.later", async = later)]
fn async_later(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v + 1.0);
    }
    Ok(())
}

#[test]
fn completion_after_the_handler_returned() {
    let mut call = call_double();
    expect_ok(call.run(ASYNC_LATER));
    assert_eq!(call.pending_at_return(), Some(true));
    assert_eq!(call.ret_as::<f32>(0), vec![2.0, 3.0, 4.0]);
}

#[handler(target = "async.fail", async)]
fn async_fail(code: Attr<u32>) -> Result<()> {
    Err(Error::new(ErrorCode::from_raw(*code), "deliberate failure in the asynchronous part"))
}

#[test]
fn an_error_becomes_the_calls_error_with_its_code() {
    let mut call = CallBuilder::new().attr("code", AttrArg::scalar(8u32));
    let msg = expect_err(call.run(ASYNC_FAIL), ErrorCode::ResourceExhausted, &["deliberate failure"]);
    assert_eq!(msg, "async.fail: deliberate failure in the asynchronous part");
    assert!(call.pending_at_return().is_some());
}

#[handler(target = "async.panic", async)]
fn async_panic(x: Buffer<f32>) -> Result<()> {
    panic!("deliberate panic with {} elements", x.len())
}

#[test]
fn a_panic_becomes_an_internal_error() {
    quiet_deliberate_panics();
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2]));
    let msg = expect_err(call.run(ASYNC_PANIC), ErrorCode::Internal, &["handler panicked"]);
    assert_eq!(msg, "async.panic: handler panicked: deliberate panic with 2 elements");
}

fn lose(call: AsyncCall) {
    drop(call);
}

#[handler(target = "async.dropped", async = lose)]
fn async_dropped(mut y: ResultBuffer<f32>) -> Result<()> {
    y.as_uninit()?.fill(core::mem::MaybeUninit::new(1.0));
    Ok(())
}

#[test]
fn a_dropped_promise_is_an_error_not_a_hang() {
    let mut call = CallBuilder::new().ret(Arg::zeros::<f32>(&[2]));
    let msg = expect_err(call.run(ASYNC_DROPPED), ErrorCode::Internal, &["promise dropped"]);
    assert_eq!(msg, "async.dropped: the asynchronous part ended without completing (promise dropped)");
    // The harness fills results with 0xFF bytes before the call: the body never ran.
    let bits: Vec<u32> = call.ret_as::<f32>(0).iter().map(|v| v.to_bits()).collect();
    assert_eq!(bits, vec![u32::MAX; 2], "the body never ran");
}

#[test]
fn a_promise_dropped_on_another_thread_is_an_error() {
    #[handler(target = "async.dropped_later", async = |c: AsyncCall| { std::thread::spawn(move || drop(c)); })]
    fn async_dropped_later() {}
    let msg = expect_err(CallBuilder::new().run(ASYNC_DROPPED_LATER), ErrorCode::Internal, &["promise dropped"]);
    assert!(msg.starts_with("async.dropped_later: "), "{msg}");
}

#[test]
fn a_panicking_spawner_completes_the_call() {
    quiet_deliberate_panics();
    #[handler(target = "async.bad_spawner", async = |_c: AsyncCall| panic!("deliberate spawner panic"))]
    fn async_bad_spawner() {}
    let mut call = CallBuilder::new();
    let msg = expect_err(call.run(ASYNC_BAD_SPAWNER), ErrorCode::Internal, &["deliberate spawner panic"]);
    // The spawner's panic message, as a handler's panic gives its own.
    assert_eq!(msg, "async.bad_spawner: the async spawner panicked before the call ran: deliberate spawner panic");
}

#[test]
fn a_spawner_that_catches_its_own_panic_still_completes_the_call() {
    quiet_deliberate_panics();
    #[handler(target = "async.caught_spawner", async = |c: AsyncCall| {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _held = c;
            panic!("deliberate, caught by the spawner")
        }));
    })]
    fn async_caught_spawner() {}
    let msg = expect_err(CallBuilder::new().run(ASYNC_CAUGHT_SPAWNER), ErrorCode::Internal, &["promise dropped"]);
    assert_eq!(
        msg,
        "async.caught_spawner: the asynchronous part ended without completing (promise dropped while a panic unwound)"
    );
}

#[test]
fn fail_completes_with_the_given_error() {
    #[handler(target = "async.io", async = |c: AsyncCall| c.fail(Error::unimplemented("deliberate: no device")))]
    fn async_io() {}
    let msg = expect_err(CallBuilder::new().run(ASYNC_IO), ErrorCode::Unimplemented, &["no device"]);
    assert_eq!(msg, "async.io: deliberate: no device");
}

#[test]
fn a_bad_call_is_refused_synchronously_without_a_future() {
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f64], &[1])).ret(Arg::zeros::<f32>(&[1]));
    expect_err(
        call.run(ASYNC_DOUBLE),
        ErrorCode::InvalidArgument,
        &["operand 0 (x)", "expected dtype float32, got float64"],
    );
    assert_eq!(call.pending_at_return(), None);
    // A problem only the body sees goes through the future.
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1])).ret(Arg::zeros::<f32>(&[2]));
    expect_err(call.run(ASYNC_DOUBLE), ErrorCode::InvalidArgument, &["async.double", "the shape of x"]);
    assert!(call.pending_at_return().is_some());
}

#[handler(target = "async.rules", async, shapes = "...b -> ...b")]
fn async_rules(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(-v);
    }
    Ok(())
}

#[test]
fn declared_rules_are_checked_before_the_future() {
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[3]));
    expect_err(call.run(ASYNC_RULES), ErrorCode::InvalidArgument, &["result 0 (y)", "expected shape [2]"]);
    assert_eq!(call.pending_at_return(), None);
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[2]));
    expect_ok(call.run(ASYNC_RULES));
    assert_eq!(call.ret_as::<f32>(0), vec![-1.0, -2.0]);
}

#[handler(target = "async.in_place", async)]
fn async_in_place(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    match y.with_input::<f32, _, { xla_ffi::ANY_RANK }>(&x)? {
        InOut::InPlace(xy) => xy.iter_mut().for_each(|v| *v *= 3.0),
        InOut::Separate { .. } => return Err(Error::internal("expected the aliased pair")),
    }
    Ok(())
}

#[test]
fn aliased_buffers_work_in_the_asynchronous_part() {
    let mut call =
        CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[2])).alias(0, 0);
    expect_ok(call.run(ASYNC_IN_PLACE));
    assert_eq!(call.ret_as::<f32>(0), vec![3.0, 6.0]);
}

#[test]
fn a_runtime_without_future_functions_is_refused_clearly() {
    // The table ends before `XLA_FFI_Future_Create` (slot 13, at byte 152).
    let api = FakeApi::new(5).with_struct_size(152);
    let mut call = call_double().api(api);
    let msg = expect_err(call.run(ASYNC_DOUBLE), ErrorCode::Unimplemented, &["no future functions", "152 bytes"]);
    assert!(msg.starts_with("async.double: this XLA runtime's FFI API table"), "{msg}");
    assert_eq!(call.pending_at_return(), None);
}

/// A decoder that reads the context without saying so (`NEEDS_CONTEXT` left false):
/// refused in the asynchronous part, where the context no longer exists.
struct SneakyContext;

impl<'f> Decode<'f> for SneakyContext {
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        let _ctx = <Context<'f> as Decode<'f>>::decode(call, name)?;
        Some(SneakyContext)
    }
}

#[handler(target = "async.sneaky", async)]
fn async_sneaky(_c: SneakyContext) -> Result<()> {
    Ok(())
}

#[test]
fn the_context_is_refused_in_the_asynchronous_part() {
    let mut call = CallBuilder::new();
    let msg = expect_err(call.run(ASYNC_SNEAKY), ErrorCode::InvalidArgument, &["parameter `_c`", "execution context"]);
    assert!(msg.starts_with("async.sneaky: "), "{msg}");
    assert!(call.pending_at_return().is_some());
}

#[test]
fn many_calls_at_once() {
    let threads: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let x = [i as f32, 1.0];
                let mut call = CallBuilder::new().arg(Arg::from_slice(&x, &[2])).ret(Arg::zeros::<f32>(&[2]));
                expect_ok(call.run(ASYNC_DOUBLE));
                call.ret_as::<f32>(0)
            })
        })
        .collect();
    for (i, t) in threads.into_iter().enumerate() {
        assert_eq!(t.join().unwrap(), vec![2.0 * i as f32, 2.0]);
    }
}

/// Reads attributes of every kind in the asynchronous part, after the fake runtime
/// (as XLA:CPU) freed the call's own attribute structures: they come from the copy
/// the synchronous part made.
#[handler(target = "async.attrs", async = later)]
fn async_attrs(
    mut out: ResultBuffer<f64>,
    scale: Attr<f64>,
    offsets: Attr<&[i64]>,
    label: Attr<&str>,
    nested: Attr<xla_ffi::Dict>,
) -> Result<()> {
    let inner: f32 = nested.get("k").map_err(Error::invalid_argument)?;
    let tag: &str = nested.get("tag").map_err(Error::invalid_argument)?;
    let v = [*scale, offsets.iter().sum::<i64>() as f64, label.len() as f64, inner as f64, tag.len() as f64];
    for (o, x) in out.as_uninit()?.iter_mut().zip(v) {
        o.write(x);
    }
    Ok(())
}

#[test]
fn attributes_of_every_kind_are_kept_for_the_asynchronous_part() {
    let nested =
        AttrArg::Dict(vec![("k".into(), AttrArg::scalar(1.5f32)), ("tag".into(), AttrArg::Str("abcd".into()))]);
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<f64>(&[5]))
        .attr("scale", AttrArg::scalar(2.5f64))
        .attr("offsets", AttrArg::array(&[1i64, 2, 3]))
        .attr("label", AttrArg::Str("hello".into()))
        .attr("nested", nested);
    expect_ok(call.run(ASYNC_ATTRS));
    assert_eq!(call.pending_at_return(), Some(true));
    assert_eq!(call.ret_as::<f64>(0), vec![2.5, 6.0, 5.0, 1.5, 4.0]);
}

/// Operands and results of several ranks, read after the call's own buffer
/// descriptions were freed.
#[handler(target = "async.shapes", async = later)]
fn async_shapes(a: Buffer<f32, 2>, b: Buffer<i32, 0>, mut out: ResultBuffer<f32, 2>) -> Result<()> {
    out.expect_dims(a.dims(), "the shape of a")?;
    let k = b.as_slice()?[0] as f32;
    for (o, &v) in out.as_uninit()?.iter_mut().zip(a.as_slice()?) {
        o.write(v * k);
    }
    Ok(())
}

#[test]
fn buffer_shapes_are_kept_for_the_asynchronous_part() {
    let mut call = CallBuilder::new()
        .arg(Arg::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]))
        .arg(Arg::from_slice(&[3i32], &[]))
        .ret(Arg::zeros::<f32>(&[2, 3]));
    expect_ok(call.run(ASYNC_SHAPES));
    assert_eq!(call.pending_at_return(), Some(true));
    assert_eq!(call.ret_as::<f32>(0), vec![3.0, 6.0, 9.0, 12.0, 15.0, 18.0]);
}
