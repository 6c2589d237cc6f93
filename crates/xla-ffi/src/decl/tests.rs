//! The checker on shapes and dtypes, and the notation's dtypes as `DataType`s (the
//! parsers' own tests are in `xla-ffi-rules`).

use super::check::{bind_operands, Who, NO_BINDS};
use super::*;
use crate::DataType;

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
#[cfg_attr(miri, ignore = "safe code over plain shapes (the rules crate forbids unsafe): nothing for Miri to check")]
fn the_checker_never_panics() {
    let rules = [
        "...b ...n, ...n -> ...b ...n, ...b",
        "...b, ...b -> ...b",
        "n n, ...b -> n, ...b n",
        "2 n, () -> n 2",
        "...a 1 m, m ...a -> ...a, m",
    ];
    let mut shapes: Vec<Vec<i64>> = vec![vec![]];
    for _ in 0..3 {
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
