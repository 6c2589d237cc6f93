//! The public types' common traits (the Rust API guidelines' C-COMMON-TRAITS,
//! C-DEBUG, C-GOOD-ERR). Every public type a handler, a test or a host holds
//! implements `Debug`: a handler can log its parameters, and a test can `{:?}` or
//! `assert_eq!` what it got. Views show where they sit in the call, their dtype and
//! shape, never uninitialised memory. Every error type is a `std::error::Error`.

mod common;

use core::fmt::Debug;

use common::expect_err;
use xla_ffi::testing::raw::RawOutcome;
use xla_ffi::testing::{Arg, AttrArg, CallBuilder, FakeApi};
use xla_ffi::{
    handler, state_type, AnyComplex, AnyFloat, AnyType, Array, Attr, AttrValue, Buffer, Call, Context, Dict, Error,
    ErrorCode, InOut, Parts, RemainingArgs, RemainingRets, Result, ResultBuffer, Scalar, Scratch, State, ThreadPool,
    TokenSpec, TypeRegistration, UserData,
};

#[derive(Debug)]
struct Plan;
state_type!(Plan);

fn is_debug<T: Debug + ?Sized>() {}

fn is_error<T: std::error::Error + Send + Sync + 'static>() {}

#[test]
fn every_error_type_is_a_std_error() {
    is_error::<Error>();
    is_error::<xla_ffi::decl::RuleError>();
}

#[test]
fn every_public_type_is_debug() {
    is_debug::<Buffer<'static, AnyFloat, 2>>();
    is_debug::<ResultBuffer<'static, AnyComplex>>();
    is_debug::<InOut<'static, f32>>();
    is_debug::<(AnyFloat, AnyComplex, AnyType, TokenSpec)>();
    is_debug::<(Context<'static>, Scratch<'static>, ThreadPool<'static>, Parts<'static, u8>)>();
    is_debug::<(Call<'static>, RemainingArgs<'static>, RemainingRets<'static>)>();
    is_debug::<(State<'static, Plan>, UserData<'static, Plan>, TypeRegistration<Plan>)>();
    is_debug::<(AttrValue<'static>, Scalar<'static>, Array<'static>, Dict<'static>)>();
    is_debug::<(xla_ffi::export::Registry, CallBuilder, FakeApi, RawOutcome)>();
}

/// Shows its parameters, and fails with what it showed.
#[handler(target = "dbg.show")]
fn dbg_show(ctx: Context, x: Buffer<f32>, mut y: ResultBuffer<f32>, cfg: Attr<Dict<'_>>) -> Result<()> {
    let shown = format!("{ctx:?} | {x:?} | {y:?} | {:?} | {:?}", cfg.0, ctx.thread_pool());
    for o in y.as_uninit()? {
        o.write(0.0);
    }
    Err(Error::invalid_argument(shown))
}

#[test]
fn views_show_their_site_dtype_and_shape() {
    let cfg = AttrArg::Dict(vec![
        ("eps".into(), AttrArg::scalar(0.5f64)),
        ("name".into(), AttrArg::Str("rms".into())),
        ("sizes".into(), AttrArg::array(&[1i64, 2, 3])),
    ]);
    let mut call =
        CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[2])).attr("cfg", cfg);
    let shown = expect_err(call.run(DBG_SHOW), ErrorCode::InvalidArgument, &[]);
    for part in [
        "Context { target: \"dbg.show\"",
        "Buffer { site: dbg.show: operand 0 (x), dtype: float32, dims: [2] }",
        "ResultBuffer { site: dbg.show: result 0 (y), dtype: float32, dims: [2] }",
        "\"eps\": Some(Scalar(Scalar { dtype: float64, value: Some(Float(0.5)) }))",
        "\"name\": Some(String(\"rms\"))",
        "\"sizes\": Some(Array(Array { dtype: int64, len: 3 }))",
        "ThreadPool { target: \"dbg.show\"",
    ] {
        assert!(shown.contains(part), "{part:?} not in {shown}");
    }
}

#[test]
fn an_in_out_pair_never_shows_the_uninitialised_output() {
    let input = [1.0f32, 2.0];
    let mut output = [core::mem::MaybeUninit::<f32>::uninit(); 2];
    let pair = InOut::Separate { input: &input, output: &mut output };
    assert_eq!(format!("{pair:?}"), "Separate { input: [1.0, 2.0], output_len: 2 }");
    let mut both = [3.0f32];
    assert_eq!(format!("{:?}", InOut::InPlace(&mut both)), "InPlace([3.0])");
    let mut data = [0u8; 10];
    assert_eq!(format!("{:?}", Parts::new(&mut data, 4)), "Parts { len: 10, chunk: 4, .. }");
}
