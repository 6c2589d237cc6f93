//! `#[handler(op = PATH, scratch = "...")]`: a handler that takes its target and
//! rules from another handler's declaration enforces those rules, with the same
//! messages, before its body runs; its scratch results are outside them.

mod common;

use std::cell::Cell;

use common::{expect_err, expect_ok};
use xla_ffi::testing::{Arg, AttrArg, CallBuilder};
use xla_ffi::{handler, AnyFloat, Attr, Buffer, ErrorCode, Result, ResultBuffer};

/// The handler whose declaration is referenced; never called here.
#[handler(
    target = "decl_op.norm",
    shapes = "...b ...n, ...n -> ...b ...n, ...b",
    dtypes = "X, W -> promote(X, W), acc(X, W)",
    linear = "x",
    transpose = "decl_op.norm_t"
)]
fn decl_op_norm(
    x: Buffer<AnyFloat>,
    weight: Buffer<AnyFloat>,
    y: ResultBuffer<AnyFloat>,
    inv_rms: ResultBuffer<AnyFloat>,
    eps: Attr<f64>,
) -> Result<()> {
    let _ = (x, weight, y, inv_rms, eps);
    Ok(())
}

// Per thread: tests run in parallel threads, and each call runs its body on the
// calling thread, so a test sees only its own runs.
thread_local! {
    static TWIN_BODY_RUNS: Cell<usize> = const { Cell::new(0) };
}

/// A twin that refers to it, with one trailing scratch result; the body counts its
/// runs and reports the scratch's shape it was given.
#[handler(op = DECL_OP_NORM, scratch = "ws")]
fn decl_op_twin(
    x: Buffer<AnyFloat>,
    weight: Buffer<AnyFloat>,
    y: ResultBuffer<AnyFloat>,
    inv_rms: ResultBuffer<AnyFloat>,
    eps: Attr<f64>,
    ws: ResultBuffer<AnyFloat>,
) -> Result<()> {
    let _ = (x, weight, y, inv_rms, eps, ws);
    TWIN_BODY_RUNS.with(|n| n.set(n.get() + 1));
    Ok(())
}

fn twin_call(x: Arg, w: Arg, y: Arg, inv: Arg, ws: Arg) -> CallBuilder {
    CallBuilder::new().arg(x).arg(w).ret(y).ret(inv).ret(ws).attr("eps", AttrArg::scalar(1e-6f64))
}

#[test]
fn the_twin_declares_the_referenced_op() {
    let (a, b) = (DECL_OP_NORM.declaration, DECL_OP_TWIN.declaration);
    assert_eq!(DECL_OP_TWIN.target, "decl_op.norm");
    assert_eq!(
        (b.target, b.shapes, b.dtypes, b.linear, b.transpose),
        (a.target, a.shapes, a.dtypes, a.linear, a.transpose)
    );
    assert_eq!(b.operands().map(|(n, _)| n).collect::<Vec<_>>(), ["x", "weight"]);
    assert_eq!(b.results().map(|(n, _)| n).collect::<Vec<_>>(), ["y", "inv_rms"], "the scratch is not declared");
    assert_eq!(b.attributes().map(|(n, ..)| n).collect::<Vec<_>>(), ["eps"]);
}

#[test]
fn the_referenced_shape_rule_is_enforced_before_the_body() {
    let before = TWIN_BODY_RUNS.with(Cell::get);
    let mut call = twin_call(
        Arg::zeros::<f32>(&[2, 4]),
        Arg::zeros::<f32>(&[5]),
        Arg::zeros::<f32>(&[2, 4]),
        Arg::zeros::<f32>(&[2]),
        Arg::zeros::<f32>(&[1, 4]),
    );
    expect_err(
        call.run(DECL_OP_TWIN),
        ErrorCode::InvalidArgument,
        &["decl_op.norm: operand 1 (weight): expected shape [4] (...n of operand 0 (x)), got [5]"],
    );
    let mut call = twin_call(
        Arg::zeros::<f32>(&[2, 3, 4]),
        Arg::zeros::<f32>(&[4]),
        Arg::zeros::<f32>(&[2, 3, 4]),
        Arg::zeros::<f32>(&[2]),
        Arg::zeros::<f32>(&[1, 4]),
    );
    expect_err(
        call.run(DECL_OP_TWIN),
        ErrorCode::InvalidArgument,
        &["decl_op.norm: result 1 (inv_rms): expected shape [2, 3] (...b of operand 0 (x)), got [2]"],
    );
    assert_eq!(TWIN_BODY_RUNS.with(Cell::get), before, "the body must not run");
}

#[test]
fn the_referenced_dtype_rule_is_enforced_before_the_body() {
    let before = TWIN_BODY_RUNS.with(Cell::get);
    let mut call = twin_call(
        Arg::zeros::<f32>(&[2, 4]),
        Arg::zeros::<f64>(&[4]),
        Arg::zeros::<f64>(&[2, 4]),
        Arg::zeros::<f32>(&[2]),
        Arg::zeros::<f32>(&[1, 4]),
    );
    expect_err(
        call.run(DECL_OP_TWIN),
        ErrorCode::InvalidArgument,
        &["decl_op.norm: result 1 (inv_rms): expected dtype float64 (acc(X, W)", "got float32"],
    );
    assert_eq!(TWIN_BODY_RUNS.with(Cell::get), before, "the body must not run");
}

#[test]
fn the_scratch_result_is_outside_the_rules() {
    let before = TWIN_BODY_RUNS.with(Cell::get);
    // A scratch of any shape and dtype: the body checks it, not the rules.
    for ws in [Arg::zeros::<f64>(&[3, 7]), Arg::zeros::<f32>(&[])] {
        let mut call = twin_call(
            Arg::zeros::<f32>(&[2, 4]),
            Arg::zeros::<f32>(&[4]),
            Arg::zeros::<f32>(&[2, 4]),
            Arg::zeros::<f32>(&[2]),
            ws,
        );
        expect_ok(call.run(DECL_OP_TWIN));
    }
    assert_eq!(TWIN_BODY_RUNS.with(Cell::get), before + 2);
}
