//! Declared shape and dtype rules: the shim checks them before the body, with errors
//! naming the target, the operand or result, what was expected and what was got;
//! `decl::infer` says the same words; the declaration lists every parameter.

mod common;

use std::cell::Cell;

use common::{expect_err, expect_ok};
use xla_ffi::decl::{infer, ProblemKind};
use xla_ffi::half::{bf16, f16};
use xla_ffi::testing::{Arg, AttrArg, CallBuilder};
use xla_ffi::{handler, AnyFloat, Attr, Buffer, DataType, ErrorCode, Result, ResultBuffer};

// Per thread: tests run in parallel threads, and each call runs its body on the
// calling thread, so a test sees only its own runs.
thread_local! {
    static NORM_BODY_RUNS: Cell<usize> = const { Cell::new(0) };
}

/// A declared rms_norm-like op; the body only counts its runs.
#[handler(
    target = "decl.norm",
    shapes = "...b ...n, ...n -> ...b ...n, ...b",
    dtypes = "X, W -> promote(X, W), acc(X, W)"
)]
fn decl_norm(
    x: Buffer<AnyFloat>,
    weight: Buffer<AnyFloat>,
    y: ResultBuffer<AnyFloat>,
    inv_rms: ResultBuffer<AnyFloat>,
    eps: Attr<f64>,
) -> Result<()> {
    let _ = (x, weight, y, inv_rms, eps);
    NORM_BODY_RUNS.with(|n| n.set(n.get() + 1));
    Ok(())
}

fn norm_call(x: Arg, w: Arg, y: Arg, inv: Arg) -> CallBuilder {
    CallBuilder::new().arg(x).arg(w).ret(y).ret(inv).attr("eps", AttrArg::scalar(1e-6f64))
}

#[test]
fn a_call_that_fits_runs_the_body() {
    let before = NORM_BODY_RUNS.with(Cell::get);
    let mut call = norm_call(
        Arg::zeros::<f32>(&[2, 3, 4]),
        Arg::zeros::<f32>(&[4]),
        Arg::zeros::<f32>(&[2, 3, 4]),
        Arg::zeros::<f32>(&[2, 3]),
    );
    expect_ok(call.run(DECL_NORM));
    // Mixed precision: bf16 x with f16 weight promote to f32; the accumulator is f32.
    let mut call = norm_call(
        Arg::zeros::<bf16>(&[5, 4]),
        Arg::zeros::<f16>(&[4]),
        Arg::zeros::<f32>(&[5, 4]),
        Arg::zeros::<f32>(&[5]),
    );
    expect_ok(call.run(DECL_NORM));
    // No batch axes, a scalar inv_rms.
    let mut call =
        norm_call(Arg::zeros::<f64>(&[4]), Arg::zeros::<f64>(&[4]), Arg::zeros::<f64>(&[4]), Arg::zeros::<f64>(&[]));
    expect_ok(call.run(DECL_NORM));
    assert_eq!(NORM_BODY_RUNS.with(Cell::get), before + 3);
}

#[test]
fn an_operand_against_an_earlier_one() {
    let mut call = norm_call(
        Arg::zeros::<f32>(&[2, 4]),
        Arg::zeros::<f32>(&[5]),
        Arg::zeros::<f32>(&[2, 4]),
        Arg::zeros::<f32>(&[2]),
    );
    let msg = expect_err(
        call.run(DECL_NORM),
        ErrorCode::InvalidArgument,
        &["decl.norm: operand 1 (weight): expected shape [4] (...n of operand 0 (x)), got [5]"],
    );
    assert!(!msg.contains("result"), "{msg}");
}

#[test]
fn an_operand_of_too_low_a_rank() {
    let mut call =
        norm_call(Arg::zeros::<f32>(&[]), Arg::zeros::<f32>(&[4]), Arg::zeros::<f32>(&[]), Arg::zeros::<f32>(&[]));
    expect_err(
        call.run(DECL_NORM),
        ErrorCode::InvalidArgument,
        &["decl.norm: operand 0 (x): expected rank at least 1", "...n of rank 1", "got rank 0 (shape [])"],
    );
}

#[test]
fn a_result_of_the_wrong_shape() {
    let mut call = norm_call(
        Arg::zeros::<f32>(&[2, 3, 4]),
        Arg::zeros::<f32>(&[4]),
        Arg::zeros::<f32>(&[2, 3, 4]),
        Arg::zeros::<f32>(&[2]),
    );
    expect_err(
        call.run(DECL_NORM),
        ErrorCode::InvalidArgument,
        &["decl.norm: result 1 (inv_rms): expected shape [2, 3] (...b of operand 0 (x)), got [2]"],
    );
}

#[test]
fn a_result_of_the_wrong_dtype() {
    let mut call = norm_call(
        Arg::zeros::<f16>(&[2, 4]),
        Arg::zeros::<f16>(&[4]),
        Arg::zeros::<f32>(&[2, 4]),
        Arg::zeros::<f32>(&[2]),
    );
    expect_err(
        call.run(DECL_NORM),
        ErrorCode::InvalidArgument,
        &["decl.norm: result 0 (y): expected dtype float16 (promote(X, W) with X = float16", "got float32"],
    );
    let mut call = norm_call(
        Arg::zeros::<f64>(&[2, 4]),
        Arg::zeros::<f32>(&[4]),
        Arg::zeros::<f64>(&[2, 4]),
        Arg::zeros::<f32>(&[2]),
    );
    expect_err(
        call.run(DECL_NORM),
        ErrorCode::InvalidArgument,
        &["decl.norm: result 1 (inv_rms): expected dtype float64 (acc(X, W)", "got float32"],
    );
}

#[test]
fn the_body_does_not_run_when_a_rule_fails() {
    let before = NORM_BODY_RUNS.with(Cell::get);
    let mut call = norm_call(
        Arg::zeros::<f32>(&[2, 4]),
        Arg::zeros::<f32>(&[3]),
        Arg::zeros::<f32>(&[2, 4]),
        Arg::zeros::<f32>(&[2]),
    );
    assert!(call.run(DECL_NORM).is_err());
    // Repeated calls (the checks are not cached past a failure); fewer under Miri.
    for _ in 0..if cfg!(miri) { 3 } else { 50 } {
        assert!(call.run(DECL_NORM).is_err());
    }
    assert_eq!(NORM_BODY_RUNS.with(Cell::get), before, "the body must not run");
}

/// Same variable twice: both operands must have one dtype; a literal and a fixed dtype.
#[handler(target = "decl.pair", shapes = "...b 3, ...b -> ...b", dtypes = "T, T -> float32")]
fn decl_pair(a: Buffer<AnyFloat>, b: Buffer<AnyFloat>, out: ResultBuffer<f32>) -> Result<()> {
    let _ = (a, b, out);
    Ok(())
}

#[test]
fn a_variable_binds_the_first_operand_dtype() {
    let mut call =
        CallBuilder::new().arg(Arg::zeros::<f64>(&[2, 3])).arg(Arg::zeros::<f32>(&[2])).ret(Arg::zeros::<f32>(&[2]));
    expect_err(
        call.run(DECL_PAIR),
        ErrorCode::InvalidArgument,
        &["decl.pair: operand 1 (b): expected dtype float64 (T, the dtype of operand 0 (a)), got float32"],
    );
}

#[test]
fn a_literal_size_is_checked() {
    let mut call =
        CallBuilder::new().arg(Arg::zeros::<f32>(&[2, 4])).arg(Arg::zeros::<f32>(&[2])).ret(Arg::zeros::<f32>(&[2]));
    expect_err(
        call.run(DECL_PAIR),
        ErrorCode::InvalidArgument,
        &["decl.pair: operand 0 (a): expected shape [2, 3] (`...b 3`), got [2, 4]"],
    );
    let mut call =
        CallBuilder::new().arg(Arg::zeros::<f32>(&[2, 3])).arg(Arg::zeros::<f32>(&[2])).ret(Arg::zeros::<f32>(&[2]));
    expect_ok(call.run(DECL_PAIR));
}

#[test]
fn infer_says_what_the_shim_says() {
    let sig = DECL_NORM.declaration.signature();
    let e = infer(&sig, &[vec![2, 4], vec![5]], &[DataType::F32, DataType::F32]).unwrap_err();
    assert_eq!(e.kind, ProblemKind::Shape);
    let mut call = norm_call(
        Arg::zeros::<f32>(&[2, 4]),
        Arg::zeros::<f32>(&[5]),
        Arg::zeros::<f32>(&[2, 4]),
        Arg::zeros::<f32>(&[2]),
    );
    let shim = expect_err(call.run(DECL_NORM), ErrorCode::InvalidArgument, &[&e.message]);
    assert_eq!(shim, e.message);

    let e =
        infer(&DECL_PAIR.declaration.signature(), &[vec![2, 3], vec![2]], &[DataType::F64, DataType::F32]).unwrap_err();
    assert_eq!(e.kind, ProblemKind::Dtype);
    let mut call =
        CallBuilder::new().arg(Arg::zeros::<f64>(&[2, 3])).arg(Arg::zeros::<f32>(&[2])).ret(Arg::zeros::<f32>(&[2]));
    assert_eq!(expect_err(call.run(DECL_PAIR), ErrorCode::InvalidArgument, &[]), e.message);

    // A dtype the element type refuses: the decoder's words.
    let e = infer(&sig, &[vec![2, 4], vec![4]], &[DataType::S32, DataType::F32]).unwrap_err();
    assert_eq!(e.kind, ProblemKind::Dtype);
    let mut call = norm_call(
        Arg::zeros::<i32>(&[2, 4]),
        Arg::zeros::<f32>(&[4]),
        Arg::zeros::<f32>(&[2, 4]),
        Arg::zeros::<f32>(&[2]),
    );
    assert_eq!(expect_err(call.run(DECL_NORM), ErrorCode::InvalidArgument, &[]), e.message);
}

#[test]
fn infer_gives_result_shapes_dtypes_and_the_batch_rank() {
    let sig = DECL_NORM.declaration.signature();
    let out = infer(&sig, &[vec![7, 2, 3, 4], vec![3, 4]], &[DataType::BF16, DataType::F16]).unwrap();
    assert_eq!(out.results, [(vec![7, 2, 3, 4], DataType::F32), (vec![7, 2], DataType::F32)]);
    assert_eq!(out.batch_rank, 2);
    let out = infer(&DECL_PAIR.declaration.signature(), &[vec![3], vec![]], &[DataType::F16, DataType::F16]).unwrap();
    assert_eq!(out.results, [(vec![], DataType::F32)]);
    assert_eq!(out.batch_rank, 0);
    let e = infer(&sig, &[vec![2, 4]], &[DataType::F32]).unwrap_err();
    assert_eq!(e.message, "decl.norm: expected 2 operands (x, weight), got 1 shapes and 1 dtypes");
}

#[test]
fn the_declaration_lists_every_parameter() {
    let d = DECL_NORM.declaration;
    assert_eq!(d.target, "decl.norm");
    assert_eq!(d.operands().map(|(n, _)| n).collect::<Vec<_>>(), ["x", "weight"]);
    assert_eq!(d.results().map(|(n, _)| n).collect::<Vec<_>>(), ["y", "inv_rms"]);
    assert_eq!(d.attributes().collect::<Vec<_>>(), [("eps", "f64".to_string(), false)]);
    assert_eq!(d.shapes, Some("...b ...n, ...n -> ...b ...n, ...b"));
    assert!(d.linear.is_empty() && d.transpose.is_none());
    let (_, accepts) = DECL_PAIR.declaration.results().next().unwrap();
    assert!(accepts(DataType::F32) && !accepts(DataType::F64));
}

/// An elementwise rule (one shape, one dtype for all) takes a shortcut when the call
/// fits; a call that does not still gets the general check's words.
#[handler(target = "decl.elementwise", shapes = "...b, ...b -> ...b", dtypes = "T, T -> T")]
fn decl_elementwise(a: Buffer<AnyFloat>, b: Buffer<AnyFloat>, out: ResultBuffer<AnyFloat>) -> Result<()> {
    let _ = (a, b, out);
    Ok(())
}

#[test]
fn an_elementwise_rule_checks_every_buffer() {
    let call = |a: Arg, b: Arg, out: Arg| CallBuilder::new().arg(a).arg(b).ret(out);
    let mut ok = call(Arg::zeros::<f16>(&[2, 3]), Arg::zeros::<f16>(&[2, 3]), Arg::zeros::<f16>(&[2, 3]));
    expect_ok(ok.run(DECL_ELEMENTWISE));
    let mut bad = call(Arg::zeros::<f32>(&[2, 3]), Arg::zeros::<f32>(&[2, 3]), Arg::zeros::<f32>(&[3, 2]));
    let msg = expect_err(bad.run(DECL_ELEMENTWISE), ErrorCode::InvalidArgument, &[]);
    assert_eq!(msg, "decl.elementwise: result 0 (out): expected shape [2, 3] (...b of operand 0 (a)), got [3, 2]");
    let mut bad = call(Arg::zeros::<f32>(&[2]), Arg::zeros::<f32>(&[2]), Arg::zeros::<f64>(&[2]));
    let msg = expect_err(bad.run(DECL_ELEMENTWISE), ErrorCode::InvalidArgument, &[]);
    assert_eq!(
        msg,
        "decl.elementwise: result 0 (out): expected dtype float32 (T, the dtype of operand 0 (a)), got float64"
    );
    let mut bad = call(Arg::zeros::<f32>(&[2]), Arg::zeros::<bf16>(&[2]), Arg::zeros::<f32>(&[2]));
    let msg = expect_err(bad.run(DECL_ELEMENTWISE), ErrorCode::InvalidArgument, &[]);
    assert_eq!(
        msg,
        "decl.elementwise: operand 1 (b): expected dtype float32 (T, the dtype of operand 0 (a)), got bfloat16"
    );
    // Vectors (compared with one compare as they are decoded), and ranks that differ.
    expect_ok(call(Arg::zeros::<f32>(&[4]), Arg::zeros::<f32>(&[4]), Arg::zeros::<f32>(&[4])).run(DECL_ELEMENTWISE));
    expect_ok(call(Arg::zeros::<f32>(&[]), Arg::zeros::<f32>(&[]), Arg::zeros::<f32>(&[])).run(DECL_ELEMENTWISE));
    for (a, b, out, want) in [
        (&[4][..], &[4][..], &[3][..], "result 0 (out): expected shape [4] (...b of operand 0 (a)), got [3]"),
        (&[4], &[5], &[4], "operand 1 (b): expected shape [4] (...b of operand 0 (a)), got [5]"),
        (&[4], &[4], &[4, 1], "result 0 (out): expected shape [4] (...b of operand 0 (a)), got [4, 1]"),
        (&[1], &[], &[1], "operand 1 (b): expected shape [1] (...b of operand 0 (a)), got []"),
        (&[], &[], &[1], "result 0 (out): expected shape [] (...b of operand 0 (a)), got [1]"),
    ] {
        let mut bad = call(Arg::zeros::<f32>(a), Arg::zeros::<f32>(b), Arg::zeros::<f32>(out));
        let msg = expect_err(bad.run(DECL_ELEMENTWISE), ErrorCode::InvalidArgument, &[]);
        assert_eq!(msg, format!("decl.elementwise: {want}"));
    }
}

/// A shape rule alone that gives every buffer one shape takes the same shortcut:
/// buffers alike in dtype and shape fit it, and a call whose dtypes differ (which
/// no rule forbids) is answered by the general check, which accepts it.
#[handler(target = "decl.same_shape", shapes = "...b, ...b -> ...b")]
fn decl_same_shape(a: Buffer<AnyFloat>, b: Buffer<AnyFloat>, out: ResultBuffer<AnyFloat>) -> Result<()> {
    let _ = (a, b, out);
    Ok(())
}

#[test]
fn a_shape_rule_alone_checks_every_shape_and_no_dtype() {
    let call = |a: Arg, b: Arg, out: Arg| CallBuilder::new().arg(a).arg(b).ret(out);
    expect_ok(
        call(Arg::zeros::<f32>(&[2, 3]), Arg::zeros::<f32>(&[2, 3]), Arg::zeros::<f32>(&[2, 3])).run(DECL_SAME_SHAPE),
    );
    expect_ok(
        call(Arg::zeros::<f32>(&[2, 3]), Arg::zeros::<bf16>(&[2, 3]), Arg::zeros::<f64>(&[2, 3])).run(DECL_SAME_SHAPE),
    );
    expect_ok(call(Arg::zeros::<f16>(&[]), Arg::zeros::<f16>(&[]), Arg::zeros::<f32>(&[])).run(DECL_SAME_SHAPE));
    for (a, b, out, want) in [
        (
            &[2, 3][..],
            &[2, 3][..],
            &[3, 2][..],
            "result 0 (out): expected shape [2, 3] (...b of operand 0 (a)), got [3, 2]",
        ),
        (&[4], &[5], &[4], "operand 1 (b): expected shape [4] (...b of operand 0 (a)), got [5]"),
        (&[], &[], &[1], "result 0 (out): expected shape [] (...b of operand 0 (a)), got [1]"),
    ] {
        // Alike dtypes (the shortcut's own case) and mixed ones: the same words.
        for mixed in [false, true] {
            let b_arg = if mixed { Arg::zeros::<f64>(b) } else { Arg::zeros::<f32>(b) };
            let mut bad = call(Arg::zeros::<f32>(a), b_arg, Arg::zeros::<f32>(out));
            let msg = expect_err(bad.run(DECL_SAME_SHAPE), ErrorCode::InvalidArgument, &[]);
            assert_eq!(msg, format!("decl.same_shape: {want}"));
        }
    }
}

/// Nine buffers under an elementwise rule: more than the decoder keeps for the
/// rule check's shortcut, so the frame is read again; both ways agree.
#[handler(
    target = "decl.nine",
    shapes = "...b, ...b, ...b, ...b, ...b, ...b, ...b, ...b -> ...b",
    dtypes = "T, T, T, T, T, T, T, T -> T"
)]
#[allow(clippy::too_many_arguments)]
fn decl_nine(
    a0: Buffer<f32>,
    a1: Buffer<f32>,
    a2: Buffer<f32>,
    a3: Buffer<f32>,
    a4: Buffer<f32>,
    a5: Buffer<f32>,
    a6: Buffer<f32>,
    a7: Buffer<f32>,
    out: ResultBuffer<f32>,
) -> Result<()> {
    let _ = (a0, a1, a2, a3, a4, a5, a6, a7, out);
    Ok(())
}

#[test]
fn an_elementwise_rule_over_many_buffers_checks_every_one() {
    let call = |last: Arg, out: Arg| {
        let mut c = CallBuilder::new();
        for _ in 0..7 {
            c = c.arg(Arg::zeros::<f32>(&[2, 3]));
        }
        c.arg(last).ret(out)
    };
    expect_ok(call(Arg::zeros::<f32>(&[2, 3]), Arg::zeros::<f32>(&[2, 3])).run(DECL_NINE));
    let msg = expect_err(
        call(Arg::zeros::<f32>(&[2, 3]), Arg::zeros::<f32>(&[2, 4])).run(DECL_NINE),
        ErrorCode::InvalidArgument,
        &[],
    );
    assert_eq!(msg, "decl.nine: result 0 (out): expected shape [2, 3] (...b of operand 0 (a0)), got [2, 4]");
    let msg = expect_err(
        call(Arg::zeros::<f32>(&[3, 2]), Arg::zeros::<f32>(&[2, 3])).run(DECL_NINE),
        ErrorCode::InvalidArgument,
        &[],
    );
    assert_eq!(msg, "decl.nine: operand 7 (a7): expected shape [2, 3] (...b of operand 0 (a0)), got [3, 2]");
}

/// The dtypes a built-in element spec lists for the macro's check are the ones it
/// accepts, and the bounds' mask and rank test read them.
#[test]
fn element_spec_dtypes_agree_with_accepts() {
    use xla_ffi::decl::BufferBounds;
    use xla_ffi::half::{bf16, f16};
    use xla_ffi::num_complex::Complex;
    use xla_ffi::{AnyComplex, AnyFloat, AnyType, DataType, ElementSpec, Pred, TokenSpec, ANY_RANK};
    fn agree<S: ElementSpec>() {
        let bounds = BufferBounds { dtypes: S::DTYPES, rank: 2 };
        for code in 0..64u32 {
            let d = DataType(code);
            let listed = S::DTYPES.is_none_or(|l| l.contains(&d));
            assert_eq!(listed, S::accepts(d), "{} and {d}", core::any::type_name::<S>());
            assert_eq!(bounds.dtype_mask() >> code & 1 == 1, listed);
        }
    }
    agree::<Pred>();
    agree::<i8>();
    agree::<i16>();
    agree::<i32>();
    agree::<i64>();
    agree::<u8>();
    agree::<u16>();
    agree::<u32>();
    agree::<u64>();
    agree::<f16>();
    agree::<bf16>();
    agree::<f32>();
    agree::<f64>();
    agree::<Complex<f32>>();
    agree::<Complex<f64>>();
    agree::<AnyFloat>();
    agree::<AnyComplex>();
    agree::<AnyType>();
    agree::<TokenSpec>();
    let b = BufferBounds { dtypes: None, rank: 2 };
    assert!(b.rank_fits(2, false) && !b.rank_fits(1, false) && !b.rank_fits(3, false));
    assert!(b.rank_fits(1, true) && b.rank_fits(2, true) && !b.rank_fits(3, true));
    assert!(BufferBounds::UNKNOWN.rank_fits(7, false));
    assert_eq!(BufferBounds::UNKNOWN.rank, ANY_RANK);
    assert_eq!(BufferBounds::UNKNOWN.dtype_mask(), !0);
}
