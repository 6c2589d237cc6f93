//! The one pass over a call's buffers before its parameters are decoded: a call it
//! declines (a buffer it refuses, a decoder that takes operands it does not
//! declare) decodes parameter by parameter, with the same results and errors.

mod common;

use common::{expect_err, expect_ok};
use xla_ffi::testing::{Arg, CallBuilder};
use xla_ffi::{handler, Buffer, Call, Decode, ErrorCode, Result, ResultBuffer};

/// out = x * y, float64.
#[handler(target = "pass.mul")]
fn pass_mul(x: Buffer<f64>, y: Buffer<f64>, mut out: ResultBuffer<f64>) -> Result<()> {
    let (x, y) = (x.as_slice()?, y.as_slice()?);
    for ((o, &a), &b) in out.as_uninit()?.iter_mut().zip(x).zip(y) {
        o.write(a * b);
    }
    Ok(())
}

fn f64s(v: &[f64]) -> Arg {
    Arg::from_slice(v, &[v.len() as i64])
}

#[test]
fn a_checked_call_computes_against_a_plain_product() {
    let (x, y) = ([1.5, -2.0, 3.25, 0.0], [2.0, 0.5, -4.0, 7.0]);
    let mut call = CallBuilder::new().arg(f64s(&x)).arg(f64s(&y)).ret(Arg::zeros::<f64>(&[4]));
    expect_ok(call.run(PASS_MUL));
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    assert_eq!(call.ret_as::<f64>(0), want);
}

#[test]
fn an_entry_of_another_kind_is_reported_alone() {
    // The pass refuses the call; operand 0 and the result still decode.
    let mut call = CallBuilder::new().arg(f64s(&[1.0])).arg(f64s(&[2.0])).ret(Arg::zeros::<f64>(&[1])).arg_kind(1, 7);
    let msg = expect_err(
        call.run(PASS_MUL),
        ErrorCode::InvalidArgument,
        &["pass.mul", "operand 1 (y)", "expected a buffer, got XLA argument kind 7"],
    );
    assert!(!msg.contains("operand 0") && !msg.contains("result 0"), "only operand 1 is bad: {msg}");
}

#[test]
fn a_negative_dimension_in_a_result_is_reported_alone() {
    let mut call =
        CallBuilder::new().arg(f64s(&[1.0])).arg(f64s(&[2.0])).ret(Arg::raw(xla_ffi::DataType::F64, &[-1], 8));
    let msg =
        expect_err(call.run(PASS_MUL), ErrorCode::InvalidArgument, &["pass.mul", "result 0 (out)", "invalid shape"]);
    assert!(!msg.contains("operand"), "the operands are fine: {msg}");
}

#[test]
fn an_operand_aliasing_the_result_is_refused_as_a_slice() {
    // The pass finds the overlap: the call is not clean, and the views refuse.
    let mut call =
        CallBuilder::new().arg(f64s(&[1.0, 2.0])).arg(f64s(&[3.0, 4.0])).ret(Arg::zeros::<f64>(&[2])).alias(0, 0);
    expect_err(call.run(PASS_MUL), ErrorCode::InvalidArgument, &["pass.mul", "shares memory with result 0"]);
}

/// Takes an operand without declaring it (`ARGS` stays 0): the declared positions
/// of the parameters after it are then off by one.
struct Undeclared;

impl<'f> Decode<'f> for Undeclared {
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        <Buffer<'f, f64> as Decode<'f>>::decode(call, name).map(|_| Undeclared)
    }
}

/// Returns `y`'s first element: `y` must be the operand after the one `Undeclared`
/// took, not the one its declaration gives it.
#[handler(target = "pass.undeclared")]
fn pass_undeclared(_u: Undeclared, y: Buffer<f64>, mut out: ResultBuffer<f64>) -> Result<()> {
    let y = y.as_slice()?;
    out.as_uninit()?[0].write(y[0]);
    Ok(())
}

#[test]
fn a_decoder_taking_an_undeclared_operand_shifts_the_next_parameter() {
    // Declared: one operand (`y`); the call has one, which `Undeclared` takes, so
    // `y` finds none, and must not be handed operand 0 by its declared position.
    let mut call = CallBuilder::new().arg(f64s(&[5.0])).ret(Arg::zeros::<f64>(&[1]));
    expect_err(call.run(PASS_UNDECLARED), ErrorCode::InvalidArgument, &["pass.undeclared", "operand 1 (y)", "missing"]);
}
