//! Token operands and results (`Token`, `ResultToken`): rank-0 buffers of dtype
//! TOKEN, checked like every other buffer, with nothing to read or write.

mod common;

use common::{expect_err, expect_ok};
use xla_ffi::testing::{Arg, CallBuilder};
use xla_ffi::{handler, Buffer, DataType, ErrorCode, Result, ResultBuffer, ResultToken, Token};

/// y = 2 x, between a token in and a token out.
#[handler(target = "tok.double")]
fn tok_double(order: Token, x: Buffer<f32>, mut y: ResultBuffer<f32>, done: ResultToken) -> Result<()> {
    assert_eq!((order.dtype(), order.rank(), order.size_bytes()), (DataType::TOKEN, 0, 0));
    assert_eq!((done.dtype(), done.rank()), (DataType::TOKEN, 0));
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(2.0 * v);
    }
    Ok(())
}

fn call(order: Arg, x: Arg, y: Arg, done: Arg) -> CallBuilder {
    CallBuilder::new().arg(order).arg(x).ret(y).ret(done)
}

#[test]
fn token_operand_and_result() {
    let mut c = call(Arg::token(), Arg::from_slice(&[1.0f32, -2.0], &[2]), Arg::zeros::<f32>(&[2]), Arg::token());
    expect_ok(c.run(TOK_DOUBLE));
    assert_eq!(c.ret_as::<f32>(0), vec![2.0, -4.0]);
}

#[test]
fn a_buffer_in_place_of_a_token_is_an_error() {
    let mut c = call(
        Arg::from_slice(&[1.0f32], &[1]),
        Arg::from_slice(&[1.0f32], &[1]),
        Arg::zeros::<f32>(&[1]),
        Arg::zeros::<f32>(&[]),
    );
    let msg = expect_err(
        c.run(TOK_DOUBLE),
        ErrorCode::InvalidArgument,
        &["tok.double", "operand 0 (order): expected dtype token, got float32", "expected rank 0, got rank 1"],
    );
    assert!(msg.contains("result 1 (done): expected dtype token, got float32"), "{msg}");
}

#[test]
fn a_token_in_place_of_a_buffer_is_an_error() {
    let mut c = call(Arg::token(), Arg::token(), Arg::zeros::<f32>(&[1]), Arg::token());
    expect_err(
        c.run(TOK_DOUBLE),
        ErrorCode::InvalidArgument,
        &["tok.double", "operand 1 (x): expected dtype float32, got token"],
    );
}

#[test]
fn a_token_of_rank_1_is_an_error() {
    let mut c = call(
        Arg::raw(DataType::TOKEN, &[3], 0),
        Arg::from_slice(&[1.0f32], &[1]),
        Arg::zeros::<f32>(&[1]),
        Arg::token(),
    );
    expect_err(
        c.run(TOK_DOUBLE),
        ErrorCode::InvalidArgument,
        &["tok.double", "operand 0 (order): expected rank 0, got rank 1"],
    );
}

/// Tries to read a token's data.
#[handler(target = "tok.peek")]
fn tok_peek(t: Token, mut n: ResultBuffer<u64>) -> Result<()> {
    let bytes = t.as_bytes().map(<[u8]>::len);
    let typed = t.typed::<u8>().map(<[u8]>::len);
    n.as_uninit()?[0].write(0);
    match (bytes, typed) {
        (Err(a), Err(b)) => Err(xla_ffi::Error::invalid_argument(format!("{} | {}", a.message(), b.message()))),
        _ => Ok(()),
    }
}

#[test]
fn a_token_has_no_data_to_read() {
    let mut c = CallBuilder::new().arg(Arg::token()).ret(Arg::zeros::<u64>(&[]));
    expect_err(
        c.run(TOK_PEEK),
        ErrorCode::InvalidArgument,
        &["tok.peek: operand 0 (t)", "token has no byte representation", "is token, not uint8"],
    );
}

#[test]
fn the_declaration_lists_tokens_as_token_operands_and_results() {
    let d = TOK_DOUBLE.declaration;
    let ops: Vec<_> = d.operands().map(|(n, a)| (n, a(DataType::TOKEN), a(DataType::F32))).collect();
    assert_eq!(ops, [("order", true, false), ("x", false, true)]);
    let rets: Vec<_> = d.results().map(|(n, a)| (n, a(DataType::TOKEN))).collect();
    assert_eq!(rets, [("y", false), ("done", true)]);
}
