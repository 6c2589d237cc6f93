//! Optional operands and results beside `shapes`/`dtypes` (specs marked `?`): the
//! shim checks the rule without the absent ones, the declaration marks them
//! optional, and `decl::infer` takes calls with or without them.

mod common;

use common::{expect_err, expect_ok};
use xla_ffi::decl::{infer, ProblemKind, Rules, ShapeRule};
use xla_ffi::testing::{Arg, CallBuilder};
use xla_ffi::{handler, AnyFloat, Buffer, DataType, ErrorCode, Result, ResultBuffer};

/// y[b, i] = x[b, i] + bias[i] (bias optional, zero without); `count`, optional,
/// gets the number of rows.
#[handler(target = "optrules.add_bias", shapes = "...b n, n? -> ...b n, ()?", dtypes = "T, T? -> T, int64?")]
fn add_bias(
    x: Buffer<AnyFloat>,
    bias: Option<Buffer<AnyFloat>>,
    mut y: ResultBuffer<AnyFloat>,
    rows: Option<ResultBuffer<i64>>,
) -> Result<()> {
    let n = *x.dims().last().unwrap_or(&1) as usize;
    let x = x.typed::<f32>()?;
    let bias: Vec<f32> = match &bias {
        Some(b) => b.typed::<f32>()?.to_vec(),
        None => vec![0.0; n],
    };
    for (i, (o, v)) in y.typed_uninit::<f32>()?.iter_mut().zip(x.iter()).enumerate() {
        o.write(v + bias[i % n]);
    }
    if let Some(mut r) = rows {
        r.as_uninit()?[0].write((x.len() / n.max(1)) as i64);
    }
    Ok(())
}

fn x() -> Arg {
    Arg::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
}

#[test]
fn with_and_without_the_optional_operand_and_result() {
    let bias = [10.0f32, 20.0, 30.0];
    let reference = |b: Option<&[f32]>| -> Vec<f32> {
        let xs = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        xs.iter().enumerate().map(|(i, v)| v + b.map_or(0.0, |b| b[i % 3])).collect()
    };
    let mut all = CallBuilder::new()
        .arg(x())
        .arg(Arg::from_slice(&bias, &[3]))
        .ret(Arg::zeros::<f32>(&[2, 3]))
        .ret(Arg::zeros::<i64>(&[]));
    expect_ok(all.run(ADD_BIAS));
    assert_eq!(all.ret_as::<f32>(0), reference(Some(&bias)));
    assert_eq!(all.ret_as::<i64>(1), [2]);

    let mut no_bias = CallBuilder::new().arg(x()).ret(Arg::zeros::<f32>(&[2, 3])).ret(Arg::zeros::<i64>(&[]));
    expect_ok(no_bias.run(ADD_BIAS));
    assert_eq!(no_bias.ret_as::<f32>(0), reference(None));

    let mut bare = CallBuilder::new().arg(x()).ret(Arg::zeros::<f32>(&[2, 3]));
    expect_ok(bare.run(ADD_BIAS));
    assert_eq!(bare.ret_as::<f32>(0), reference(None));
}

#[test]
fn the_rule_checks_a_present_optional_operand_and_result() {
    // A bias of the wrong length: the shape rule names it.
    let r = CallBuilder::new()
        .arg(x())
        .arg(Arg::from_slice(&[1.0f32, 2.0], &[2]))
        .ret(Arg::zeros::<f32>(&[2, 3]))
        .run(ADD_BIAS);
    expect_err(
        r,
        ErrorCode::InvalidArgument,
        &["optrules.add_bias: operand 1 (bias)", "expected shape [3]", "got [2]"],
    );
    // A bias of another dtype: the dtype rule names it.
    let r = CallBuilder::new()
        .arg(x())
        .arg(Arg::from_slice(&[1.0f64, 2.0, 3.0], &[3]))
        .ret(Arg::zeros::<f32>(&[2, 3]))
        .run(ADD_BIAS);
    expect_err(r, ErrorCode::InvalidArgument, &["operand 1 (bias)", "expected dtype float32", "got float64"]);
    // The optional result of the wrong shape, with the bias absent.
    let r = CallBuilder::new().arg(x()).ret(Arg::zeros::<f32>(&[2, 3])).ret(Arg::zeros::<i64>(&[1])).run(ADD_BIAS);
    expect_err(r, ErrorCode::InvalidArgument, &["result 1 (rows)", "expected shape []", "got [1]"]);
    // The required operand still checked without the optional ones.
    let r = CallBuilder::new().arg(x()).ret(Arg::zeros::<f32>(&[3, 2])).run(ADD_BIAS);
    expect_err(r, ErrorCode::InvalidArgument, &["result 0 (y)", "expected shape [2, 3]", "got [3, 2]"]);
}

#[test]
fn the_declaration_marks_the_optional_buffers() {
    let d = ADD_BIAS.declaration;
    assert!(!d.is_optional(false, "x") && d.is_optional(false, "bias"));
    assert!(!d.is_optional(true, "y") && d.is_optional(true, "rows"));
    assert_eq!(d.operands().count(), 2);
    assert_eq!(d.results().count(), 2);
}

#[test]
fn infer_takes_calls_with_and_without_the_optional_operand() {
    let sig = ADD_BIAS.declaration.signature();
    let with = infer(&sig, &[vec![4, 3], vec![3]], &[DataType::F32, DataType::F32]).unwrap();
    assert_eq!(with.results, [(vec![4, 3], DataType::F32), (vec![], DataType::S64)]);
    assert_eq!(with.batch_rank, 1);
    let without = infer(&sig, &[vec![4, 3]], &[DataType::F32]).unwrap();
    assert_eq!(without.results, with.results);
    let e = infer(&sig, &[vec![4, 3], vec![2]], &[DataType::F32, DataType::F32]).unwrap_err();
    assert_eq!(e.kind, ProblemKind::Shape);
    assert!(e.message.contains("operand 1 (bias): expected shape [3]"), "{}", e.message);
    let e = infer(&sig, &[], &[]).unwrap_err();
    assert_eq!(
        e.message,
        "optrules.add_bias: expected 1 to 2 operands (`bias` optional) (x, bias), got 0 shapes and 0 dtypes"
    );
}

#[test]
fn optional_marks_in_the_notation() {
    let r = ShapeRule::parse("...b n, n?, ()? -> ...b n").unwrap();
    assert_eq!((r.optional_operands, r.optional_results), (2, 0));
    let w = r.without(1, 0).unwrap();
    assert_eq!(w.operands.len(), 2);
    assert!(r.without(3, 0).is_err());
    // Optional specs come last, and the rule must hold without them.
    let e = ShapeRule::parse("n?, n -> n").unwrap_err();
    assert!(e.contains("operand 1 (`n`) follows an optional operand (`?`)"), "{e}");
    let e = ShapeRule::parse("n, m? -> n m").unwrap_err();
    assert!(e.contains("with operand 1 absent: result 0 uses `m`, which no operand spec binds"), "{e}");
    let e = xla_ffi::decl::DtypeRule::parse("T, W? -> promote(T, W)").unwrap_err();
    assert!(e.contains("with operand 1 absent: result 0 uses `W`"), "{e}");
    let e = Rules::parse(Some("n, n? -> n"), Some("T, T -> T")).unwrap_err();
    assert!(e.contains("the shape rule marks 1 operand(s) and 0 result(s) optional"), "{e}");
}
