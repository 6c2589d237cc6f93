//! Optional operands and results (`Option<Buffer<..>>`, `Option<ResultBuffer<..>>`,
//! `Option<Token>`): present or absent by the call's arity, and count errors that
//! name the missing operands and results and say which are optional.

mod common;

use common::{expect_err, expect_ok};
use xla_ffi::testing::{Arg, CallBuilder};
use xla_ffi::{handler, Buffer, ErrorCode, Result, ResultBuffer, Token};

/// y = x * scale + shift; `scale` and `shift` default to 1 and 0. `count`, if the
/// call has it, receives how many optional operands came.
#[handler(target = "opt.affine")]
fn opt_affine(
    x: Buffer<f64>,
    scale: Option<Buffer<f64>>,
    shift: Option<Buffer<f64>>,
    mut y: ResultBuffer<f64>,
    count: Option<ResultBuffer<i64>>,
) -> Result<()> {
    let s = match &scale {
        Some(b) => b.as_slice()?[0],
        None => 1.0,
    };
    let t = match &shift {
        Some(b) => b.as_slice()?[0],
        None => 0.0,
    };
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v * s + t);
    }
    if let Some(mut c) = count {
        c.as_uninit()?[0].write(scale.is_some() as i64 + shift.is_some() as i64);
    }
    Ok(())
}

fn x() -> Arg {
    Arg::from_slice(&[1.0f64, -2.0, 3.5], &[3])
}
fn one(v: f64) -> Arg {
    Arg::from_slice(&[v], &[1])
}

/// The reference: the same affine map, written independently.
fn affine(scale: Option<f64>, shift: Option<f64>) -> Vec<f64> {
    [1.0f64, -2.0, 3.5].iter().map(|v| v * scale.unwrap_or(1.0) + shift.unwrap_or(0.0)).collect()
}

#[test]
fn optional_operands_present_or_absent_by_arity() {
    for (scale, shift) in [(None, None), (Some(3.0), None), (Some(-0.5), Some(4.0))] {
        let mut call = CallBuilder::new().arg(x());
        for v in [scale, shift].into_iter().flatten() {
            call = call.arg(one(v));
        }
        call = call.ret(Arg::zeros::<f64>(&[3]));
        expect_ok(call.run(OPT_AFFINE));
        assert_eq!(call.ret_as::<f64>(0), affine(scale, shift), "{scale:?} {shift:?}");
    }
}

#[test]
fn optional_result_present_or_absent() {
    let mut call = CallBuilder::new().arg(x()).arg(one(2.0)).ret(Arg::zeros::<f64>(&[3])).ret(Arg::zeros::<i64>(&[1]));
    expect_ok(call.run(OPT_AFFINE));
    assert_eq!(call.ret_as::<f64>(0), affine(Some(2.0), None));
    assert_eq!(call.ret_as::<i64>(1), vec![1]);
    let mut call = CallBuilder::new().arg(x()).ret(Arg::zeros::<f64>(&[3]));
    expect_ok(call.run(OPT_AFFINE));
    assert_eq!(call.ret_as::<f64>(0), affine(None, None));
}

#[test]
fn too_few_operands_name_the_missing_required_ones() {
    let mut call = CallBuilder::new().ret(Arg::zeros::<f64>(&[3]));
    expect_err(
        call.run(OPT_AFFINE),
        ErrorCode::InvalidArgument,
        &["opt.affine", "expected 1 to 3 operands (`scale`, `shift` are optional), got 0 (missing `x`)"],
    );
}

#[test]
fn too_many_operands_or_results() {
    let mut call = CallBuilder::new().arg(x()).arg(one(1.0)).arg(one(1.0)).arg(one(1.0)).ret(Arg::zeros::<f64>(&[3]));
    expect_err(
        call.run(OPT_AFFINE),
        ErrorCode::InvalidArgument,
        &["opt.affine", "expected 1 to 3 operands (`scale`, `shift` are optional), got 4"],
    );
    let mut call = CallBuilder::new()
        .arg(x())
        .ret(Arg::zeros::<f64>(&[3]))
        .ret(Arg::zeros::<i64>(&[1]))
        .ret(Arg::zeros::<i64>(&[1]));
    expect_err(
        call.run(OPT_AFFINE),
        ErrorCode::InvalidArgument,
        &["opt.affine", "expected 1 to 2 results (`count` is optional), got 3"],
    );
    let mut call = CallBuilder::new().arg(x());
    expect_err(
        call.run(OPT_AFFINE),
        ErrorCode::InvalidArgument,
        &["opt.affine", "expected 1 to 2 results (`count` is optional), got 0 (missing `y`)"],
    );
}

#[test]
fn a_present_optional_operand_is_checked_like_any_other() {
    let mut call = CallBuilder::new().arg(x()).arg(Arg::from_slice(&[2.0f32], &[1])).ret(Arg::zeros::<f64>(&[3]));
    expect_err(
        call.run(OPT_AFFINE),
        ErrorCode::InvalidArgument,
        &["opt.affine", "operand 1 (scale)", "expected dtype float64, got float32"],
    );
}

#[test]
fn fixed_arity_errors_name_the_missing_operands_and_results() {
    #[handler(target = "opt.fixed")]
    fn opt_fixed(a: Buffer<f32>, b: Buffer<f32>, c: Buffer<f32>, out: ResultBuffer<f32>) -> Result<()> {
        let _ = (a, b, c, out);
        Ok(())
    }
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1]));
    expect_err(
        call.run(OPT_FIXED),
        ErrorCode::InvalidArgument,
        &["opt.fixed", "expected 3 operands, got 1 (missing `b`, `c`)", "expected 1 result, got 0 (missing `out`)"],
    );
}

#[test]
fn optional_token() {
    #[handler(target = "opt.token")]
    fn opt_token(x: Buffer<f32>, tok: Option<Token>, mut y: ResultBuffer<f32>) -> Result<()> {
        y.as_uninit()?[0].write(x.as_slice()?[0] + if tok.is_some() { 1.0 } else { 0.0 });
        Ok(())
    }
    let mut call =
        CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1])).arg(Arg::token()).ret(Arg::zeros::<f32>(&[1]));
    expect_ok(call.run(OPT_TOKEN));
    assert_eq!(call.ret_as::<f32>(0), vec![2.0]);
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1])).ret(Arg::zeros::<f32>(&[1]));
    expect_ok(call.run(OPT_TOKEN));
    assert_eq!(call.ret_as::<f32>(0), vec![1.0]);
}

#[test]
fn optional_buffers_are_in_the_declaration_marked_optional() {
    // The declaration lists every operand and result, the optional ones marked (the
    // rules mark them `?`: tests/optional_rules.rs).
    let d = OPT_AFFINE.declaration;
    let ops: Vec<&str> = d.operands().map(|(n, _)| n).collect();
    let rets: Vec<&str> = d.results().map(|(n, _)| n).collect();
    assert_eq!((ops, rets), (vec!["x", "scale", "shift"], vec!["y", "count"]));
    let optional: Vec<bool> = ["x", "scale", "shift"].iter().map(|n| d.is_optional(false, n)).collect();
    assert_eq!(optional, [false, true, true]);
    assert_eq!((d.is_optional(true, "y"), d.is_optional(true, "count")), (false, true));
}
