//! The rule parsers on good and hostile strings.

use crate::*;

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
fn other_spellings_of_a_dtype_are_refused_not_made_variables() {
    // Each would otherwise be a variable that any dtype binds: `"f32 -> f32"` would
    // accept a float64 operand.
    for (word, name) in [("f32", "float32"), ("bf16", "bfloat16"), ("i64", "int64"), ("Float32", "float32")] {
        let e = dtype_err(&format!("{word} -> {word}"));
        assert!(e.contains(&format!("`{word}` is not a dtype")) && e.contains(&format!("write `{name}`")), "{e}");
    }
    assert!(dtype_err("T -> double").contains("write `float64`"));
    assert!(dtype_err("X, W -> promote(X, pred)").contains("write `bool`"));
    // Variables that spell no dtype, and the NumPy names themselves, stay as they were.
    assert_eq!(DtypeRule::parse("F, T32 -> F").unwrap().vars, ["F", "T32"]);
    assert!(DtypeRule::parse("float32 -> float32").unwrap().vars.is_empty());
}

#[test]
fn the_float8_float4_and_sub_byte_names_are_dtypes_not_variables() {
    // Before they were listed, `float8_e4m3fn` in a rule was a variable any dtype binds.
    let r = DtypeRule::parse("float8_e4m3fn, int4 -> float4_e2m1fn").unwrap();
    assert!(r.vars.is_empty());
    assert_eq!(r.expr_text(&r.operands[0]), "float8_e4m3fn");
    assert_eq!(r.expr_text(&r.results[0]), "float4_e2m1fn");
    // XLA FFI's codes (c_api.h), by the ml_dtypes names.
    for (name, code) in [
        ("float8_e5m2", 19),
        ("float8_e4m3fn", 20),
        ("int4", 21),
        ("uint4", 22),
        ("float8_e4m3b11fnuz", 23),
        ("float8_e5m2fnuz", 24),
        ("float8_e4m3fnuz", 25),
        ("int2", 26),
        ("uint2", 27),
        ("float8_e4m3", 28),
        ("float8_e3m4", 29),
        ("int1", 30),
        ("uint1", 31),
        ("float4_e2m1fn", 32),
        ("float8_e8m0fnu", 33),
    ] {
        assert_eq!(dtype_code(name), Some(code), "{name}");
    }
    // Every code of XLA FFI's enum but INVALID (0) has a name: 1 to 33, but for
    // xla::PrimitiveType's TUPLE (13) and OPAQUE_TYPE (14), which it has not.
    let mut codes: Vec<u32> = DTYPES.iter().map(|&(_, c)| c).collect();
    codes.sort_unstable();
    assert_eq!(codes, (1..=33).filter(|c| *c != 13 && *c != 14).collect::<Vec<_>>());
    assert_eq!(dtype_code("float6_e2m3fn"), None);
}
