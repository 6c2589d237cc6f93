//! The rule parsers on good and hostile strings, and the checker on shapes.

use super::check::{bind_operands, Who, NO_BINDS};
use super::*;
use crate::DataType;

fn shape_err(text: &str) -> String {
    ShapeRule::parse(text).expect_err(text)
}

fn dtype_err(text: &str) -> String {
    DtypeRule::parse(text).expect_err(text)
}

#[test]
fn shape_rules_parse() {
    let r = ShapeRule::parse("...b ...n, ...n -> ...b ...n, ...b").unwrap();
    assert_eq!(r.names, ["b", "n"]);
    assert_eq!(r.operands, [vec![Tok::Ellipsis(0), Tok::Ellipsis(1)], vec![Tok::Ellipsis(1)]]);
    assert_eq!(r.results.len(), 2);
    assert_eq!(r.batch, Some(0));
    // Scalars, literals, factors; no batch ellipsis when operand 0 starts otherwise.
    let r = ShapeRule::parse("(), m 3 -> m, ()").unwrap();
    assert_eq!(r.operands[0], []);
    assert_eq!(r.operands[1], [Tok::Factor(0), Tok::Literal(3)]);
    assert_eq!(r.results[1], []);
    assert_eq!(r.batch, None);
    assert_eq!(r.spec_text(&r.operands[0]), "()");
    // No operands at all, and no results.
    assert!(ShapeRule::parse(" -> ").unwrap().operands.is_empty());
}

#[test]
fn hostile_shape_rules_are_refused_with_a_reason() {
    assert!(shape_err("...b").contains("expected one `->`"));
    assert!(shape_err("a -> a -> a").contains("expected one `->`"));
    assert!(shape_err("(a -> a").contains("`(a`"));
    assert!(shape_err("a) -> a").contains("`a)`"));
    assert!(shape_err("a, , b -> a").contains("empty spec; write `()` for a scalar"));
    assert!(shape_err("a -> b").contains("result 0 uses `b`, which no operand spec binds"));
    assert!(shape_err("...a -> ...b").contains("`...b`, which no operand spec binds"));
    let e = shape_err("...a ...b -> ...a");
    assert!(e.contains("operand 0 (`...a ...b`) is ambiguous") && e.contains("...a or ...b"), "{e}");
    assert!(shape_err("...a a -> a").contains("used both as `...a`"));
    assert!(shape_err("...a ...a -> ...a").contains("`...a` appears twice"));
    assert!(shape_err("... -> ...").contains("an ellipsis is `...name`"));
    assert!(shape_err("....a -> a").contains("an ellipsis is `...name`"));
    assert!(shape_err("-3 -> -3").contains("`-3`"));
    assert!(shape_err("99999999999999999999 -> ()").contains("a size too large"));
    assert!(shape_err("a+b -> a").contains("`a+b`"));
    assert!(shape_err("é -> é").contains("`é`"));
    let many: Vec<String> = (0..40).map(|i| format!("n{i}")).collect();
    assert!(shape_err(&format!("{} -> ()", many.join(" "))).contains("more than 16 names"));
}

#[test]
fn an_ellipsis_fixed_by_a_later_operand_resolves() {
    // Operand 0 has two ellipses; operand 1 fixes one of them.
    ShapeRule::parse("...b ...n, ...n -> ...b").unwrap();
    // A chain: operand 2 fixes c, then operand 1 fixes b, then operand 0 fixes a.
    ShapeRule::parse("...a ...b, ...b ...c, ...c -> ...a").unwrap();
}

#[test]
fn dtype_rules_parse() {
    let r = DtypeRule::parse("X, W -> promote(X, W), acc(X, W)").unwrap();
    assert_eq!(r.vars, ["X", "W"]);
    assert_eq!(r.operands, [Expr::Var(0), Expr::Var(1)]);
    assert_eq!(r.expr_text(&r.results[0]), "promote(X, W)");
    // A dtype name is not a variable; an operand may be checked against later bindings.
    let r = DtypeRule::parse("promote(X, W), X, W, float32 -> X, int64").unwrap();
    assert_eq!(r.operands[3], Expr::Dtype(DTYPE_NAMES.iter().position(|n| *n == "float32").unwrap()));
    assert_eq!(r.expr_text(&r.results[1]), "int64");
}

#[test]
fn hostile_dtype_rules_are_refused_with_a_reason() {
    assert!(dtype_err("T").contains("expected one `->`"));
    assert!(dtype_err("T -> U").contains("result 0 uses `U`, which no operand binds"));
    assert!(dtype_err("promote(T, U), T -> T").contains("operand 0 uses `U`, which no operand binds"));
    assert!(dtype_err("T -> promote(T").contains("unbalanced parentheses"));
    assert!(dtype_err("T -> promote T").contains("`promote` takes arguments in parentheses"));
    assert!(dtype_err("T -> cast(T)").contains("unknown function `cast`"));
    assert!(dtype_err("T -> T)").contains("unexpected `)`"));
    assert!(dtype_err("T, -> T").contains("missing expression"));
    assert!(dtype_err("T -> promote()").contains("unexpected `)`"));
    assert!(dtype_err("T T -> T").contains("unexpected `T`"));
}

#[test]
fn promotion_is_jax_float_promotion() {
    let f = [DataType::F16, DataType::BF16, DataType::F32, DataType::F64];
    for a in f {
        for b in f {
            let want = if a == b {
                a
            } else if matches!((a, b), (DataType::F16, DataType::BF16) | (DataType::BF16, DataType::F16)) {
                DataType::F32
            } else if a.byte_width() > b.byte_width() {
                a
            } else {
                b
            };
            assert_eq!(promote(a, b), Some(want), "{a} {b}");
            assert_eq!(promote(b, a), Some(want), "{b} {a}");
            let acc = if a == DataType::F64 || b == DataType::F64 { DataType::F64 } else { DataType::F32 };
            assert_eq!(accumulator(a, b), acc);
        }
    }
    assert_eq!(promote(DataType::S32, DataType::S32), Some(DataType::S32));
    assert_eq!(promote(DataType::S32, DataType::F32), None);
}

fn check(rule: &str, shapes: &[&[i64]]) -> Result<(), String> {
    let r = ShapeRule::parse(rule).unwrap();
    let name = |_: bool, i: usize| ["a", "b", "c"][i.min(2)];
    let who = Who { target: "t", name: &name };
    let dims = |i: usize| shapes[i];
    let mut b = NO_BINDS;
    bind_operands(&r, &who, &dims, &mut b).map_err(|e| e.message)
}

#[test]
fn the_checker_binds_and_compares() {
    check("...b ...n, ...n -> ...b", &[&[2, 3, 4], &[3, 4]]).unwrap();
    check("n n -> n", &[&[3, 3]]).unwrap();
    assert_eq!(
        check("n n -> n", &[&[3, 4]]).unwrap_err(),
        "t: operand 0 (a): expected shape [3, 3] (n of operand 0 (a)), got [3, 4]"
    );
    assert_eq!(check("(), () -> ()", &[&[], &[1]]).unwrap_err(), "t: operand 1 (b): expected shape [] (`()`), got [1]");
    assert_eq!(
        check("2 n -> n", &[&[3, 4]]).unwrap_err(),
        "t: operand 0 (a): expected shape [2, 4] (`2 n`), got [3, 4]"
    );
    assert_eq!(
        check("m n -> n", &[&[3]]).unwrap_err(),
        "t: operand 0 (a): expected rank 2 (`m n`), got rank 1 (shape [3])"
    );
    let e = check("...b ...n, ...n -> ...b", &[&[4], &[3, 4]]).unwrap_err();
    assert_eq!(
        e,
        "t: operand 0 (a): expected rank at least 2 (`...b ...n`, with ...n of rank 2), got rank 1 (shape [4])"
    );
    // Zero-size axes are sizes like any other.
    check("...b, ...b -> ...b", &[&[0, 3], &[0, 3]]).unwrap();
    assert!(check("...b, ...b -> ...b", &[&[0, 3], &[3, 0]]).is_err());
}

/// Every shape of rank <= 3 with sizes 0..3, against rules of every token kind: the
/// checker answers (Ok or an error), never panics, and a success infers result shapes.
#[test]
fn the_checker_never_panics() {
    let rules = [
        "...b ...n, ...n -> ...b ...n, ...b",
        "...b, ...b -> ...b",
        "n n, ...b -> n, ...b n",
        "2 n, () -> n 2",
        "...a 1 m, m ...a -> ...a, m",
    ];
    let mut shapes: Vec<Vec<i64>> = vec![vec![]];
    // Miri runs these tests too: rank <= 1 there.
    for _ in 0..if cfg!(miri) { 1 } else { 3 } {
        let more: Vec<Vec<i64>> =
            shapes.iter().flat_map(|s| (0..3).map(move |d| [s.clone(), vec![d]].concat())).collect();
        shapes.extend(more);
    }
    shapes.dedup();
    let f = vec![DataType::F32];
    for rule in rules {
        let r = ShapeRule::parse(rule).unwrap();
        let sig = Signature {
            target: "t",
            operands: (0..r.operands.len()).map(|_| BufferSig { name: "x", accepts: f.clone() }).collect(),
            results: (0..r.results.len()).map(|_| BufferSig { name: "y", accepts: f.clone() }).collect(),
            shapes: Some(rule),
            dtypes: None,
        };
        for a in &shapes {
            for b in &shapes {
                let out = infer(&sig, &[a.clone(), b.clone()], &[DataType::F32, DataType::F32]);
                if let Ok(out) = out {
                    assert_eq!(out.results.len(), r.results.len());
                }
            }
        }
    }
}

#[test]
fn notation_dtypes_follow_the_names() {
    assert_eq!(NOTATION_DTYPES.len(), DTYPE_NAMES.len());
    for (d, n) in NOTATION_DTYPES.iter().zip(DTYPE_NAMES) {
        assert_eq!(d.name(), *n);
        assert_eq!(dtype_by_name(n), Some(*d));
    }
    assert_eq!(dtype_by_name("float8"), None);
}
