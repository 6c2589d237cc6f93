//! The `#[handler]` attribute macro: the function stays an ordinary function, the
//! descriptor and the exported shim are generated beside it, variadic operands and
//! results, the attribute policy, and third-party `Decode` implementations.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{expect_err, expect_ok};
use xla_ffi::testing::{register_state_type, Arg, AttrArg, CallBuilder};
use xla_ffi::{
    handler, state_type, Attr, Buffer, Call, Decode, ErrorCode, Platform, RemainingArgs, RemainingRets, ResultBuffer,
    Stage, State, Traits,
};

// ---- the function stays a function ----------------------------------------------

static PINGS: AtomicUsize = AtomicUsize::new(0);

/// No parameters, no return type: infallible.
#[handler(target = "m.ping")]
fn m_ping() {
    PINGS.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn the_function_is_callable_and_the_shim_calls_it() {
    let before = PINGS.load(Ordering::SeqCst);
    m_ping();
    assert_eq!(PINGS.load(Ordering::SeqCst), before + 1);
    expect_ok(CallBuilder::new().run(M_PING));
    assert_eq!(PINGS.load(Ordering::SeqCst), before + 2);
}

/// A parameter type from outside the crate: a pair of float32 operands.
struct Pair<'f> {
    a: Buffer<'f, f32>,
    b: Buffer<'f, f32>,
}

impl<'f> Decode<'f> for Pair<'f> {
    const ARGS: usize = 2;
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        let a = Buffer::decode(call, name);
        let b = Buffer::decode(call, name);
        Some(Pair { a: a?, b: b? })
    }
}

/// A plain Rust type that is also a parameter (for unit tests of the body).
struct Offset(f32);

impl<'f> Decode<'f> for Offset {
    fn decode(_: &mut Call<'f>, _: &'static str) -> Option<Self> {
        Some(Offset(0.5))
    }
}

/// A body with its own error type, `mut` parameters, and a full path to `Result`.
#[derive(Debug)]
struct NotEnough(usize);

impl From<NotEnough> for xla_ffi::Error {
    fn from(e: NotEnough) -> Self {
        xla_ffi::Error::invalid_argument(format!("need at least {} elements", e.0))
    }
}

#[handler(target = "m.sum_pair", unsafe(symbol = "m_sum_pair_custom_symbol"), descriptor = SUM_PAIR)]
fn m_sum_pair(pair: Pair, mut out: ResultBuffer<f32>, mut offset: Offset) -> core::result::Result<(), NotEnough> {
    offset.0 *= 2.0;
    let (a, b) = (pair.a.as_slice().unwrap(), pair.b.as_slice().unwrap());
    if a.len() < 2 {
        return Err(NotEnough(2));
    }
    for ((o, &x), &y) in out.as_uninit().unwrap().iter_mut().zip(a).zip(b) {
        o.write(x + y + offset.0);
    }
    Ok(())
}

#[test]
fn descriptor_names_symbol_and_accepts_any_result_path() {
    assert_eq!(SUM_PAIR.target, "m.sum_pair");
    assert_eq!(SUM_PAIR.symbol, "m_sum_pair_custom_symbol");
    assert_eq!(SUM_PAIR.stage, Stage::Execute);
    assert_eq!(SUM_PAIR.platform, Platform::Host);
    assert_eq!(SUM_PAIR.traits, Traits::NONE);
    let mut call = CallBuilder::new()
        .arg(Arg::from_slice(&[1.0f32, 2.0], &[2]))
        .arg(Arg::from_slice(&[10.0f32, 20.0], &[2]))
        .ret(Arg::zeros::<f32>(&[2]));
    expect_ok(call.run(SUM_PAIR));
    assert_eq!(call.ret_as::<f32>(0), vec![12.0, 23.0]);
    let mut short = CallBuilder::new()
        .arg(Arg::from_slice(&[1.0f32], &[1]))
        .arg(Arg::from_slice(&[1.0f32], &[1]))
        .ret(Arg::zeros::<f32>(&[1]));
    expect_err(short.run(SUM_PAIR), ErrorCode::InvalidArgument, &["m.sum_pair", "need at least 2 elements"]);
    // A third-party decoder's operand count is part of the declaration.
    expect_err(
        CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1])).ret(Arg::zeros::<f32>(&[1])).run(SUM_PAIR),
        ErrorCode::InvalidArgument,
        &["m.sum_pair", "expected 2 operands, got 1"],
    );
}

/// A decoder that returns None without saying why (a bug in a third-party impl).
struct Silent;

impl<'f> Decode<'f> for Silent {
    fn decode(_: &mut Call<'f>, _: &'static str) -> Option<Self> {
        None
    }
}

#[handler(target = "m.silent")]
fn m_silent(_s: Silent) -> xla_ffi::Result<()> {
    Ok(())
}

#[test]
fn a_silent_decoder_is_an_internal_error_not_a_crash() {
    expect_err(CallBuilder::new().run(M_SILENT), ErrorCode::Internal, &["m.silent", "Call::problem", "_s"]);
}

#[handler(target = "m.traits", platform = device, traits = Traits::COMMAND_BUFFER_COMPATIBLE)]
fn m_traits() -> xla_ffi::Result<()> {
    Ok(())
}

#[test]
fn platform_and_traits_reach_descriptor_and_metadata() {
    assert_eq!(M_TRAITS.platform, Platform::Device);
    assert_eq!(M_TRAITS.traits, Traits::COMMAND_BUFFER_COMPATIBLE);
    let (major, minor, traits, _) = CallBuilder::new().metadata(M_TRAITS).unwrap();
    assert_eq!((major, minor, traits), (0, 3, 1));
    assert!(xla_ffi::bundles(&[&M_TRAITS], "cpu").unwrap().is_empty());
    assert_eq!(xla_ffi::bundles(&[&M_TRAITS], "cuda").unwrap().len(), 1);
}

// ---- variadic operands and results ----------------------------------------------

/// out[0] = how many operands; the rest: each operand's sum, in order; every
/// remaining result is filled with its index.
#[handler(target = "m.variadic")]
fn m_variadic(mut counts: ResultBuffer<f64>, xs: RemainingArgs, mut rest: RemainingRets) -> xla_ffi::Result<()> {
    let counts = counts.as_uninit()?;
    counts[0].write(xs.len() as f64);
    for (i, x) in xs.iter().enumerate() {
        counts[i + 1].write(x.typed::<f64>()?.iter().sum());
    }
    for (i, r) in rest.iter_mut().enumerate() {
        for o in r.typed_uninit::<i32>()? {
            o.write(i as i32);
        }
    }
    Ok(())
}

#[test]
fn remaining_args_and_rets_take_every_buffer_left() {
    for n in 0..4 {
        let mut call = CallBuilder::new().ret(Arg::zeros::<f64>(&[5]));
        for k in 0..n {
            call = call.arg(Arg::from_slice(&[k as f64, 1.0], &[2]));
        }
        call = call.ret(Arg::zeros::<i32>(&[2])).ret(Arg::zeros::<i32>(&[3]));
        expect_ok(call.run(M_VARIADIC));
        let got = call.ret_as::<f64>(0);
        assert_eq!(got[0], n as f64);
        for k in 0..n {
            assert_eq!(got[k + 1], k as f64 + 1.0);
        }
        assert_eq!(call.ret_as::<i32>(1), vec![0, 0]);
        assert_eq!(call.ret_as::<i32>(2), vec![1, 1, 1]);
    }
}

#[test]
fn remaining_buffers_are_checked_and_named() {
    let mut call = CallBuilder::new().ret(Arg::zeros::<f64>(&[3])).arg(Arg::from_slice(&[1i32], &[1]));
    expect_err(call.run(M_VARIADIC), ErrorCode::InvalidArgument, &["m.variadic", "operand 0 (xs)", "float64", "int32"]);
    // The fixed result is still required.
    expect_err(CallBuilder::new().run(M_VARIADIC), ErrorCode::InvalidArgument, &["expected at least 1 result, got 0"]);
}

/// Copies `x` into every remaining result.
#[handler(target = "m.fan_out")]
fn m_fan_out(x: Buffer<i32>, mut rest: RemainingRets) -> xla_ffi::Result<()> {
    let x = x.as_slice()?;
    for r in rest.iter_mut() {
        for (o, &v) in r.typed_uninit::<i32>()?.iter_mut().zip(x) {
            o.write(v);
        }
    }
    Ok(())
}

#[test]
fn a_remaining_result_aliasing_an_operand_is_not_handed_out() {
    let mut ok = CallBuilder::new()
        .arg(Arg::from_slice(&[1i32, 2], &[2]))
        .ret(Arg::zeros::<i32>(&[2]))
        .ret(Arg::zeros::<i32>(&[2]));
    expect_ok(ok.run(M_FAN_OUT));
    assert_eq!((ok.ret_as::<i32>(0), ok.ret_as::<i32>(1)), (vec![1, 2], vec![1, 2]));
    let mut aliased = CallBuilder::new()
        .arg(Arg::from_slice(&[1i32, 2], &[2]))
        .ret(Arg::zeros::<i32>(&[2]))
        .ret(Arg::zeros::<i32>(&[2]))
        .alias(0, 1);
    let msg = expect_err(aliased.run(M_FAN_OUT), ErrorCode::InvalidArgument, &["m.fan_out"]);
    assert!(msg.contains("operand 0 (x)") || msg.contains("result 1 (rest)"), "{msg}");
}

// ---- the attribute policy ---------------------------------------------------------

struct Factor(f32);
state_type!(Factor);

#[handler(target = "m.scaled", stage = instantiate)]
fn m_scaled_init(factor: Attr<f32>) -> core::result::Result<Factor, xla_ffi::Error> {
    Ok(Factor(*factor))
}

/// Binds no attribute: `factor` belongs to the instantiate stage.
#[handler(target = "m.scaled")]
fn m_scaled(x: Buffer<f32>, mut y: ResultBuffer<f32>, s: State<Factor>) -> xla_ffi::Result<()> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(s.0 * v);
    }
    Ok(())
}

/// The same body without state: strict about attributes.
#[handler(target = "m.unscaled")]
fn m_unscaled(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> xla_ffi::Result<()> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v);
    }
    Ok(())
}

#[test]
fn execute_may_ignore_what_instantiate_consumed_and_misspellings_are_still_caught() {
    register_state_type::<Factor>(31);
    let mut call = CallBuilder::new()
        .stage(Stage::Instantiate)
        .attr("factor", AttrArg::scalar(3.0f32))
        .arg(Arg::from_slice(&[1.0f32, 2.0], &[2]))
        .ret(Arg::zeros::<f32>(&[2]));
    expect_ok(call.run(M_SCALED_INIT));
    call.set_stage(Stage::Execute);
    expect_ok(call.run(M_SCALED));
    assert_eq!(call.ret_as::<f32>(0), vec![3.0, 6.0]);

    // A misspelt attribute fails at the instantiate stage, so no state exists.
    let mut bad = CallBuilder::new().stage(Stage::Instantiate).attr("factr", AttrArg::scalar(3.0f32));
    expect_err(
        bad.run(M_SCALED_INIT),
        ErrorCode::InvalidArgument,
        &["m.scaled", "unknown attribute `factr`; this handler takes: factor (did you mean `factor`?)"],
    );

    // Without state, every attribute must be bound.
    let mut strict = CallBuilder::new()
        .attr("factor", AttrArg::scalar(3.0f32))
        .arg(Arg::from_slice(&[1.0f32], &[1]))
        .ret(Arg::zeros::<f32>(&[1]));
    expect_err(
        strict.run(M_UNSCALED),
        ErrorCode::InvalidArgument,
        &["m.unscaled", "unknown attribute `factor`; this handler takes no attributes"],
    );
}

#[test]
fn bundles_group_stages_and_refuse_duplicates() {
    let b = xla_ffi::bundles(&[&M_SCALED_INIT, &M_SCALED, &M_UNSCALED], "cpu").unwrap();
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].target, "m.scaled");
    assert_eq!(b[0].stages.iter().map(|s| s.0.key()).collect::<Vec<_>>(), ["instantiate", "execute"]);
    assert!(b[0].execute_only().is_none());
    assert!(b[1].execute_only().is_some());
    let e = xla_ffi::bundles(&[&M_SCALED, &M_SCALED], "cpu").unwrap_err();
    assert!(e.message().contains("two handlers for the execute stage"), "{}", e.message());
    let e = xla_ffi::bundles(&[&M_SCALED_INIT], "cpu").unwrap_err();
    assert!(e.message().contains("m.scaled: no execute handler"), "{}", e.message());
}

/// A handler named like a C library function. Before the default symbol was
/// namespaced it was exported as `write`, replacing libc's in this test binary,
/// which crashed before the first test printed.
#[handler(target = "m.write")]
pub fn write(mut out: ResultBuffer<u8>) -> xla_ffi::Result<()> {
    out.as_uninit()?.iter_mut().for_each(|o| {
        o.write(7);
    });
    Ok(())
}

/// Likewise `malloc`: every allocation of the binary would have called it.
#[handler(target = "m.malloc")]
pub fn malloc() {}

#[test]
fn default_symbols_are_namespaced_and_do_not_replace_libc() {
    assert_eq!(WRITE.symbol, "xla_ffi_handler__write");
    assert_eq!(MALLOC.symbol, "xla_ffi_handler__malloc");
    // libc's write and malloc still work (println, Vec) and so does the handler.
    println!("libc's write still works");
    let mut call = CallBuilder::new().ret(Arg::zeros::<u8>(&[3]));
    expect_ok(call.run(WRITE));
    assert_eq!(call.ret_as::<u8>(0), vec![7, 7, 7]);
    expect_ok(CallBuilder::new().run(MALLOC));
}
