//! Attributes: scalars of every type, the lenient numeric conversions, strings,
//! arrays, nested dictionaries, `attributes!` structs, and missing / mistyped /
//! unexpected attributes.

mod common;

use common::{expect_err, expect_ok};
use xla_ffi::testing::{Arg, AttrArg, CallBuilder};
use xla_ffi::{handler, Attr, Attrs, Buffer, Dict, Error, ErrorCode, Result, ResultBuffer};

// ---- every scalar type, exact dtype ----

#[handler(target = "attr.ints")]
fn attr_ints(
    a: Attr<i8>,
    b: Attr<i16>,
    c: Attr<i32>,
    d: Attr<i64>,
    e: Attr<u8>,
    f: Attr<u16>,
    g: Attr<u32>,
    h: Attr<u64>,
    mut out: ResultBuffer<i64>,
) -> Result<()> {
    let v = [*a as i64, *b as i64, *c as i64, *d, *e as i64, *f as i64, *g as i64, *h as i64];
    for (o, v) in out.as_uninit()?.iter_mut().zip(v) {
        o.write(v);
    }
    Ok(())
}

#[test]
fn every_integer_type_exact() {
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<i64>(&[8]))
        .attr("a", AttrArg::scalar(i8::MIN))
        .attr("b", AttrArg::scalar(-300i16))
        .attr("c", AttrArg::scalar(i32::MAX))
        .attr("d", AttrArg::scalar(i64::MIN))
        .attr("e", AttrArg::scalar(u8::MAX))
        .attr("f", AttrArg::scalar(60000u16))
        .attr("g", AttrArg::scalar(u32::MAX))
        .attr("h", AttrArg::scalar(u64::MAX));
    expect_ok(call.run(ATTR_INTS));
    assert_eq!(
        call.ret_as::<i64>(0),
        vec![-128, -300, i32::MAX as i64, i64::MIN, 255, 60000, u32::MAX as i64, -1 /* u64::MAX bits */]
    );
}

#[test]
fn integers_convert_between_types_when_they_fit() {
    // Python ints arrive as int64; smaller and unsigned types take them when they fit.
    let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[8]));
    for (name, v) in [
        ("a", -5i64),
        ("b", 1000),
        ("c", -70000),
        ("d", 1 << 40),
        ("e", 200),
        ("f", 65535),
        ("g", 1 << 31),
        ("h", 12345),
    ] {
        call = call.attr(name, AttrArg::scalar(v));
    }
    expect_ok(call.run(ATTR_INTS));
    assert_eq!(call.ret_as::<i64>(0), vec![-5, 1000, -70000, 1 << 40, 200, 65535, 1 << 31, 12345]);
}

#[test]
fn integers_that_do_not_fit_are_rejected_together() {
    let call = CallBuilder::new().ret(Arg::zeros::<i64>(&[8]));
    let mut call = call
        .attr("a", AttrArg::scalar(128i64))
        .attr("b", AttrArg::scalar(1i64))
        .attr("c", AttrArg::scalar(1i64))
        .attr("d", AttrArg::scalar(u64::MAX))
        .attr("e", AttrArg::scalar(-1i64))
        .attr("f", AttrArg::scalar(1i64))
        .attr("g", AttrArg::scalar(1i64))
        .attr("h", AttrArg::scalar(-1i8));
    expect_err(
        call.run(ATTR_INTS),
        ErrorCode::InvalidArgument,
        &[
            "attr.ints",
            "4 problems",
            "attribute `a`: 128 does not fit in i8",
            &format!("attribute `d`: {} does not fit in i64", u64::MAX),
            "attribute `e`: -1 does not fit in u8",
            "attribute `h`: -1 does not fit in u64",
        ],
    );
}

#[handler(target = "attr.floats")]
fn attr_floats(x: Attr<f32>, y: Attr<f64>, z: Attr<bool>, mut out: ResultBuffer<f64>) -> Result<()> {
    let v = [*x as f64, *y, if *z { 1.0 } else { 0.0 }];
    for (o, v) in out.as_uninit()?.iter_mut().zip(v) {
        o.write(v);
    }
    Ok(())
}

fn floats(x: AttrArg, y: AttrArg, z: AttrArg) -> (CallBuilder, xla_ffi::testing::CallResult) {
    let mut call = CallBuilder::new().ret(Arg::zeros::<f64>(&[3])).attr("x", x).attr("y", y).attr("z", z);
    let r = call.run(ATTR_FLOATS);
    (call, r)
}

#[test]
fn f32_f64_bool_exact() {
    let (call, r) = floats(AttrArg::scalar(1.5f32), AttrArg::scalar(-2.25f64), AttrArg::bool(true));
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0), vec![1.5, -2.25, 1.0]);
    let (call, r) = floats(AttrArg::scalar(0.0f32), AttrArg::scalar(1e300f64), AttrArg::bool(false));
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0), vec![0.0, 1e300, 0.0]);
    // Non-finite values and the extremes of each type, read as they are.
    let (call, r) = floats(AttrArg::scalar(f32::NEG_INFINITY), AttrArg::scalar(f64::NAN), AttrArg::bool(true));
    expect_ok(r);
    let got = call.ret_as::<f64>(0);
    assert!(got[0] == f64::NEG_INFINITY && got[1].is_nan(), "{got:?}");
    let (call, r) = floats(AttrArg::scalar(f32::MIN_POSITIVE / 8.0), AttrArg::scalar(f64::MAX), AttrArg::bool(true));
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0), vec![(f32::MIN_POSITIVE / 8.0) as f64, f64::MAX, 1.0]);
}

#[test]
fn f64_to_f32_accepted_rounded() {
    let (call, r) = floats(AttrArg::scalar(0.1f64), AttrArg::scalar(0.5f32), AttrArg::bool(true));
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0), vec![0.1f32 as f64, 0.5, 1.0]);
}

#[test]
fn f64_overflowing_f32_is_rejected() {
    let (_, r) = floats(AttrArg::scalar(1e300f64), AttrArg::scalar(1.0f64), AttrArg::bool(true));
    let msg = expect_err(r, ErrorCode::InvalidArgument, &["attr.floats", "attribute `x`", "1e300 overflows float32"]);
    assert!(msg.len() < 200, "the value is written short: {msg}");
}

/// Before the fix 1e-50 became 0.0f32 without a word: an `eps` of 0.
#[test]
fn f64_underflowing_f32_to_zero_is_rejected() {
    for v in [1e-50f64, -1e-46] {
        let (_, r) = floats(AttrArg::scalar(v), AttrArg::scalar(1.0f64), AttrArg::bool(true));
        expect_err(r, ErrorCode::InvalidArgument, &["attr.floats", "attribute `x`", "underflows float32"]);
    }
    // A subnormal float32 keeps some digits, and zero stays zero: accepted.
    let (call, r) = floats(AttrArg::scalar(1e-40f64), AttrArg::scalar(-0.0f64), AttrArg::bool(true));
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0)[0], 1e-40f32 as f64);
    let (call, r) = floats(AttrArg::scalar(-0.0f64), AttrArg::scalar(0.0f64), AttrArg::bool(true));
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0)[0], 0.0);
}

#[test]
fn infinity_and_nan_pass_through_to_f32() {
    let (call, r) = floats(AttrArg::scalar(f64::INFINITY), AttrArg::scalar(f64::NAN), AttrArg::bool(true));
    expect_ok(r);
    let got = call.ret_as::<f64>(0);
    assert_eq!(got[0], f64::INFINITY);
    assert!(got[1].is_nan());
}

#[test]
fn ints_to_floats_when_exact() {
    let (call, r) = floats(AttrArg::scalar(3i64), AttrArg::scalar(1i64 << 53), AttrArg::bool(true));
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0), vec![3.0, 9007199254740992.0, 1.0]);
    let (call, r) = floats(AttrArg::scalar(-7i32), AttrArg::scalar(-(1i64 << 62)), AttrArg::bool(true));
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0), vec![-7.0, -((1u64 << 62) as f64), 1.0]);
}

#[test]
fn ints_at_the_edge_of_i64_to_f64() {
    // -2^63 and 2^63 are exact in f64; u64::MAX (2^64 - 1) is not.
    let (call, r) = floats(AttrArg::scalar(1i64), AttrArg::scalar(i64::MIN), AttrArg::bool(true));
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0)[1], -((1u64 << 63) as f64));
    let (call, r) = floats(AttrArg::scalar(1i64), AttrArg::scalar(1u64 << 63), AttrArg::bool(true));
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0)[1], (1u64 << 63) as f64);
    let (_, r) = floats(AttrArg::scalar(1i64), AttrArg::scalar(u64::MAX), AttrArg::bool(true));
    expect_err(r, ErrorCode::InvalidArgument, &["attribute `y`", "not exactly representable as float64"]);
}

#[test]
fn inexact_ints_to_floats_are_rejected() {
    let (_, r) = floats(AttrArg::scalar((1i64 << 24) + 1), AttrArg::scalar((1i64 << 53) + 1), AttrArg::bool(true));
    expect_err(
        r,
        ErrorCode::InvalidArgument,
        &[
            "2 problems",
            "attribute `x`: integer 16777217 is not exactly representable as float32",
            "attribute `y`: integer 9007199254740993 is not exactly representable as float64",
        ],
    );
}

#[test]
fn bools_and_numbers_do_not_mix() {
    let (_, r) = floats(AttrArg::bool(true), AttrArg::bool(false), AttrArg::scalar(1i64));
    expect_err(
        r,
        ErrorCode::InvalidArgument,
        &[
            "3 problems",
            "attribute `x`: expected",
            "got bool true",
            "attribute `y`",
            "attribute `z`: expected a bool scalar, got 1",
        ],
    );
}

#[test]
fn float_to_int_is_rejected() {
    let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[8]));
    for name in ["a", "b", "d", "e", "f", "g", "h"] {
        call = call.attr(name, AttrArg::scalar(1i64));
    }
    let mut call = call.attr("c", AttrArg::scalar(1.0f64));
    expect_err(
        call.run(ATTR_INTS),
        ErrorCode::InvalidArgument,
        &["attr.ints", "attribute `c`", "expected an integer scalar (i32), got 1.0"],
    );
}

#[test]
fn one_element_array_counts_as_a_scalar() {
    let (call, r) =
        floats(AttrArg::array(&[2.5f64]), AttrArg::array(&[4i64]), AttrArg::array(&[xla_ffi::Pred::from(true)]));
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0), vec![2.5, 4.0, 1.0]);
    let (_, r) = floats(AttrArg::array(&[2.5f64, 1.0]), AttrArg::array::<f64>(&[]), AttrArg::bool(true));
    expect_err(
        r,
        ErrorCode::InvalidArgument,
        &[
            "2 problems",
            "attribute `x`: expected a float scalar (float32 or float64), got float64 array of 2 elements",
            "attribute `y`: expected a float scalar (float32 or float64), got float64 array of 0 elements",
        ],
    );
}

#[test]
fn string_where_float_expected() {
    let (_, r) = floats(AttrArg::Str("small".into()), AttrArg::scalar(1.0f64), AttrArg::bool(true));
    expect_err(
        r,
        ErrorCode::InvalidArgument,
        &["attr.floats", "attribute `x`", "expected a float scalar", "got string"],
    );
}

#[test]
fn missing_attribute() {
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<f64>(&[3]))
        .attr("x", AttrArg::scalar(1.0f32))
        .attr("z", AttrArg::bool(true));
    let msg = expect_err(
        call.run(ATTR_FLOATS),
        ErrorCode::InvalidArgument,
        &["attr.floats", "attribute `y`", "missing", "expected a float scalar"],
    );
    assert!(!msg.contains("`x`") && !msg.contains("`z`"), "{msg}");
}

#[test]
fn unexpected_extra_attribute() {
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<f64>(&[3]))
        .attr("x", AttrArg::scalar(1.0f32))
        .attr("y", AttrArg::scalar(1.0f64))
        .attr("z", AttrArg::bool(true))
        .attr("extra", AttrArg::scalar(1i64));
    expect_err(
        call.run(ATTR_FLOATS),
        ErrorCode::InvalidArgument,
        &["attr.floats: unknown attribute `extra`; this handler takes: x, y, z"],
    );
}

#[test]
fn several_unexpected_attributes() {
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<f64>(&[3]))
        .attr("x", AttrArg::scalar(1.0f32))
        .attr("y", AttrArg::scalar(1.0f64))
        .attr("z", AttrArg::bool(true))
        .attr("zz", AttrArg::Str("s".into()))
        .attr("aa", AttrArg::scalar(1i64));
    expect_err(
        call.run(ATTR_FLOATS),
        ErrorCode::InvalidArgument,
        &["unknown attributes `aa`, `zz`; this handler takes: x, y, z (did you mean `z` for `zz`?)"],
    );
}

/// Before the fix the second `x` read "unknown attribute `x`; this handler takes: x,
/// y, z (did you mean `x`?)".
#[test]
fn an_attribute_given_twice_is_named_as_such() {
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<f64>(&[3]))
        .attr("x", AttrArg::scalar(1.0f32))
        .attr("y", AttrArg::scalar(1.0f64))
        .attr("z", AttrArg::bool(true))
        .attr("x", AttrArg::scalar(2.0f32))
        .attr("other", AttrArg::scalar(1i64));
    let msg = expect_err(
        call.run(ATTR_FLOATS),
        ErrorCode::InvalidArgument,
        &[
            "attr.floats: 2 problems",
            "attribute `x` is given more than once",
            "unknown attribute `other`; this handler takes: x, y, z",
        ],
    );
    assert!(!msg.contains("did you mean `x`"), "{msg}");
}

// ---- names that differ in length or in one byte ----

#[handler(target = "attr.near_names")]
fn attr_near_names(
    delay_m: Attr<i64>,
    delay_ms: Attr<i64>,
    delay_mt: Attr<i64>,
    delay_ms2: Attr<i64>,
    mut out: ResultBuffer<i64>,
) -> Result<()> {
    for (o, v) in out.as_uninit()?.iter_mut().zip([*delay_m, *delay_ms, *delay_mt, *delay_ms2]) {
        o.write(v);
    }
    Ok(())
}

/// Each declared name finds its own entry among names one byte shorter or longer,
/// or of its length with another last byte (the lookup compares lengths, then bytes).
#[test]
fn each_name_finds_its_own_entry_among_near_names() {
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<i64>(&[4]))
        .attr("delay_mt", AttrArg::scalar(3i64))
        .attr("delay_ms2", AttrArg::scalar(4i64))
        .attr("delay_m", AttrArg::scalar(1i64))
        .attr("delay_ms", AttrArg::scalar(2i64));
    expect_ok(call.run(ATTR_NEAR_NAMES));
    assert_eq!(call.ret_as::<i64>(0), vec![1, 2, 3, 4]);
}

// ---- Option ----

#[handler(target = "attr.optional")]
fn attr_optional(k: Attr<Option<i64>>, mut out: ResultBuffer<i64>) -> Result<()> {
    out.as_uninit()?[0].write(k.unwrap_or(-1));
    Ok(())
}

#[test]
fn optional_attribute() {
    let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[1]));
    expect_ok(call.run(ATTR_OPTIONAL));
    assert_eq!(call.ret_as::<i64>(0), vec![-1]);
    let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[1])).attr("k", AttrArg::scalar(9i64));
    expect_ok(call.run(ATTR_OPTIONAL));
    assert_eq!(call.ret_as::<i64>(0), vec![9]);
    // Present but mistyped is still an error.
    let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[1])).attr("k", AttrArg::Str("9".into()));
    expect_err(
        call.run(ATTR_OPTIONAL),
        ErrorCode::InvalidArgument,
        &["attribute `k`", "expected an integer scalar (i64), got string"],
    );
}

// ---- strings ----

/// out = bytes of "{name}|{owned}" (zero-padded).
#[handler(target = "attr.strings")]
fn attr_strings(name: Attr<&str>, owned: Attr<String>, mut out: ResultBuffer<u8>) -> Result<()> {
    let text = format!("{}|{}", *name, *owned);
    let out = out.as_uninit()?;
    if text.len() > out.len() {
        return Err(Error::invalid_argument("too long"));
    }
    for (i, o) in out.iter_mut().enumerate() {
        o.write(text.as_bytes().get(i).copied().unwrap_or(0));
    }
    Ok(())
}

#[test]
fn string_attributes() {
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<u8>(&[32]))
        .attr("name", AttrArg::Str("héllo 中".into()))
        .attr("owned", AttrArg::Str(String::new()));
    expect_ok(call.run(ATTR_STRINGS));
    let bytes: Vec<u8> = call.ret_as::<u8>(0).into_iter().take_while(|&b| b != 0).collect();
    assert_eq!(String::from_utf8(bytes).unwrap(), "héllo 中|");
}

#[test]
fn number_where_string_expected() {
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<u8>(&[32]))
        .attr("name", AttrArg::scalar(1i64))
        .attr("owned", AttrArg::array(&[1u8, 2]));
    expect_err(
        call.run(ATTR_STRINGS),
        ErrorCode::InvalidArgument,
        &[
            "2 problems",
            "attribute `name`: expected a string, got int64 scalar 1",
            "attribute `owned`: expected a string, got uint8 array of 2 elements",
        ],
    );
}

// ---- arrays ----

/// out = shape ++ perm, zero-padded.
#[handler(target = "attr.arrays")]
fn attr_arrays(shape: Attr<&[i64]>, perm: Attr<Vec<i32>>, mut out: ResultBuffer<i64>) -> Result<()> {
    let all: Vec<i64> = shape.iter().copied().chain(perm.iter().map(|&p| p as i64)).collect();
    for (i, o) in out.as_uninit()?.iter_mut().enumerate() {
        o.write(all.get(i).copied().unwrap_or(0));
    }
    Ok(())
}

fn arrays(shape: AttrArg, perm: AttrArg) -> (CallBuilder, xla_ffi::testing::CallResult) {
    let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[6])).attr("shape", shape).attr("perm", perm);
    let r = call.run(ATTR_ARRAYS);
    (call, r)
}

#[test]
fn array_attributes() {
    let (call, r) = arrays(AttrArg::array(&[2i64, 3, 4]), AttrArg::array(&[2i64, 0, 1]));
    expect_ok(r);
    assert_eq!(call.ret_as::<i64>(0), vec![2, 3, 4, 2, 0, 1]);
    // Vec<i32> takes any integer array whose values fit; &[i64] takes an empty array.
    let (call, r) = arrays(AttrArg::array::<i64>(&[]), AttrArg::array(&[5u8, 6]));
    expect_ok(r);
    assert_eq!(call.ret_as::<i64>(0), vec![5, 6, 0, 0, 0, 0]);
}

#[test]
fn array_attribute_errors() {
    let (_, r) = arrays(AttrArg::array(&[2i32, 3]), AttrArg::array(&[0i64, 1 << 40]));
    expect_err(
        r,
        ErrorCode::InvalidArgument,
        &[
            "attr.arrays",
            "2 problems",
            "attribute `shape`: expected an int64 array, got int32 array of 2 elements",
            "attribute `perm`: element 1: 1099511627776 does not fit in i32",
        ],
    );
    let (_, r) = arrays(AttrArg::scalar(3i64), AttrArg::array(&[1.5f64]));
    expect_err(
        r,
        ErrorCode::InvalidArgument,
        &[
            "attribute `shape`: expected an int64 array, got int64 scalar 3",
            "attribute `perm`: element 0: expected an integer scalar (i32), got 1.5",
        ],
    );
    // Before the fix: "expected an array of integer scalar (i32)".
    let (_, r) = arrays(AttrArg::array(&[1i64]), AttrArg::Str("0, 1".into()));
    expect_err(r, ErrorCode::InvalidArgument, &["attribute `perm`: expected an array of integers (i32), got string"]);
}

// ---- nested dictionaries ----

xla_ffi::attributes! {
    /// A nested configuration.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Inner {
        /// Required.
        pub alpha: f32,
        /// Defaulted.
        pub n: i64 = 3,
        /// Optional.
        pub label: Option<String>,
    }
}

/// out = [alpha, n, label length or -1, raw dict size, raw["k"]]
#[handler(target = "attr.nested")]
fn attr_nested(cfg: Attr<Inner>, raw: Attr<Dict<'_>>, mut out: ResultBuffer<f64>) -> Result<()> {
    let k: i64 = raw.get("k").map_err(Error::invalid_argument)?;
    let label = cfg.label.as_ref().map_or(-1.0, |l| l.len() as f64);
    let v = [cfg.alpha as f64, cfg.n as f64, label, raw.len() as f64, k as f64];
    for (o, v) in out.as_uninit()?.iter_mut().zip(v) {
        o.write(v);
    }
    Ok(())
}

fn nested(cfg: Vec<(&str, AttrArg)>, raw: Vec<(&str, AttrArg)>) -> (CallBuilder, xla_ffi::testing::CallResult) {
    let d = |v: Vec<(&str, AttrArg)>| AttrArg::Dict(v.into_iter().map(|(k, v)| (k.to_string(), v)).collect());
    let mut call = CallBuilder::new().ret(Arg::zeros::<f64>(&[5])).attr("cfg", d(cfg)).attr("raw", d(raw));
    let r = call.run(ATTR_NESTED);
    (call, r)
}

#[test]
fn nested_dict_and_struct() {
    let (call, r) = nested(
        vec![("alpha", AttrArg::scalar(0.5f64)), ("label", AttrArg::Str("abc".into()))],
        vec![("k", AttrArg::scalar(11i64)), ("other", AttrArg::Str("x".into()))],
    );
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0), vec![0.5, 3.0, 3.0, 2.0, 11.0]);
    let (call, r) = nested(
        vec![("n", AttrArg::scalar(7i64)), ("alpha", AttrArg::scalar(2.0f32))],
        vec![("k", AttrArg::array(&[4i32]))],
    );
    expect_ok(r);
    assert_eq!(call.ret_as::<f64>(0), vec![2.0, 7.0, -1.0, 1.0, 4.0]);
}

#[test]
fn nested_struct_errors() {
    let (_, r) = nested(
        vec![("n", AttrArg::Str("seven".into())), ("bogus", AttrArg::scalar(1i64))],
        vec![("k", AttrArg::scalar(1i64))],
    );
    expect_err(
        r,
        ErrorCode::InvalidArgument,
        &[
            "attr.nested",
            "attribute `cfg`",
            "attribute `alpha`: missing",
            "attribute `n`: expected an integer scalar (i64), got string",
            "unexpected key(s) bogus; the dictionary takes: alpha, n, label",
        ],
    );
    // Not a dictionary at all.
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<f64>(&[5]))
        .attr("cfg", AttrArg::scalar(1.0f64))
        .attr("raw", AttrArg::Dict(vec![]));
    expect_err(
        call.run(ATTR_NESTED),
        ErrorCode::InvalidArgument,
        &["attribute `cfg`: expected a dictionary, got float64 scalar 1.0"],
    );
}

// ---- Attrs<Struct> for the whole call ----

xla_ffi::attributes! {
    /// All attributes of attr.opts.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Opts {
        /// Required.
        pub eps: f32,
        /// Defaulted.
        pub iters: i64 = 10,
        /// Optional.
        pub tag: Option<String>,
        /// Nested struct.
        pub inner: Option<Inner>,
    }
}

/// out = [eps, iters, tag length or -1, inner.alpha or -1, x[0]]
#[handler(target = "attr.opts")]
fn attr_opts(x: Buffer<f32>, mut out: ResultBuffer<f64>, opts: Attrs<Opts>) -> Result<()> {
    let x0 = x.as_slice()?.first().copied().unwrap_or(0.0);
    let v = [
        opts.eps as f64,
        opts.iters as f64,
        opts.tag.as_ref().map_or(-1.0, |t| t.len() as f64),
        opts.inner.as_ref().map_or(-1.0, |i| i.alpha as f64),
        x0 as f64,
    ];
    for (o, v) in out.as_uninit()?.iter_mut().zip(v) {
        o.write(v);
    }
    Ok(())
}

fn opts_call() -> CallBuilder {
    CallBuilder::new().arg(Arg::from_slice(&[4.0f32], &[1])).ret(Arg::zeros::<f64>(&[5]))
}

#[test]
fn attrs_struct_defaults_and_options() {
    let mut call = opts_call().attr("eps", AttrArg::scalar(0.25f64));
    expect_ok(call.run(ATTR_OPTS));
    assert_eq!(call.ret_as::<f64>(0), vec![0.25, 10.0, -1.0, -1.0, 4.0]);
    let mut call = opts_call()
        .attr("eps", AttrArg::scalar(0.5f32))
        .attr("iters", AttrArg::scalar(3i64))
        .attr("tag", AttrArg::Str("hello".into()))
        .attr("inner", AttrArg::Dict(vec![("alpha".into(), AttrArg::scalar(8i64))]));
    expect_ok(call.run(ATTR_OPTS));
    assert_eq!(call.ret_as::<f64>(0), vec![0.5, 3.0, 5.0, 8.0, 4.0]);
}

#[test]
fn attrs_struct_missing_mistyped_and_extra() {
    let mut call = opts_call().attr("iters", AttrArg::scalar(1i64));
    expect_err(call.run(ATTR_OPTS), ErrorCode::InvalidArgument, &["attr.opts", "attribute `eps`", "missing"]);
    let mut call = opts_call().attr("eps", AttrArg::Str("small".into()));
    expect_err(
        call.run(ATTR_OPTS),
        ErrorCode::InvalidArgument,
        &["attr.opts", "attribute `eps`", "expected a float scalar (float32 or float64), got string"],
    );
    let mut call = opts_call().attr("eps", AttrArg::scalar(1.0f64)).attr("epsilon", AttrArg::scalar(1.0f64));
    expect_err(
        call.run(ATTR_OPTS),
        ErrorCode::InvalidArgument,
        &[
            "attr.opts",
            "unknown attribute `epsilon`; this handler takes: eps, iters, tag, inner",
            "(did you mean `eps`?)",
        ],
    );
}

/// A misspelt keyword alone (`epsilon` for `eps`): the error lists the attributes the
/// handler declares, not the ones the call happened to bind (before, it said "this
/// handler takes no other attributes").
#[test]
fn misspelt_attribute_lists_what_the_handler_declares() {
    let mut call = opts_call().attr("epsilon", AttrArg::scalar(1.0f64));
    let msg = expect_err(
        call.run(ATTR_OPTS),
        ErrorCode::InvalidArgument,
        &[
            "attr.opts",
            "attribute `eps`: missing",
            "unknown attribute `epsilon`; this handler takes: eps, iters, tag, inner",
        ],
    );
    assert!(msg.contains("(did you mean `eps`?)") && !msg.contains("no other"), "{msg}");
    // One `Attr` parameter per attribute: the same list, from the parameter names.
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<f64>(&[3]))
        .attr("X", AttrArg::scalar(1.0f32))
        .attr("y", AttrArg::scalar(1.0f64))
        .attr("z", AttrArg::bool(true));
    expect_err(
        call.run(ATTR_FLOATS),
        ErrorCode::InvalidArgument,
        &["attribute `x`: missing", "unknown attribute `X`; this handler takes: x, y, z (did you mean `x`?)"],
    );
    // Nothing close: no guess.
    let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[1])).attr("unrelated", AttrArg::scalar(1i64));
    let msg = expect_err(
        call.run(ATTR_OPTIONAL),
        ErrorCode::InvalidArgument,
        &["attr.optional: unknown attribute `unrelated`; this handler takes: k"],
    );
    assert!(!msg.contains("did you mean"), "{msg}");
}

#[test]
fn attrs_struct_problems_reported_with_buffer_problems() {
    let mut call = CallBuilder::new()
        .arg(Arg::from_slice(&[4i32], &[1]))
        .ret(Arg::zeros::<f64>(&[5]))
        .attr("iters", AttrArg::Str("x".into()));
    expect_err(
        call.run(ATTR_OPTS),
        ErrorCode::InvalidArgument,
        &[
            "3 problems",
            "operand 0 (x): expected dtype float32, got int32",
            "attribute `eps`: missing",
            "attribute `iters`: expected an integer scalar",
        ],
    );
}

// ---- raw identifiers ----

xla_ffi::attributes! {
    /// Fields named by Rust keywords, as attributes `type` and `match`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Keywords {
        /// Required.
        pub r#type: i64,
        /// Defaulted.
        pub r#match: bool = false,
    }
}

/// out = [type, match]
#[handler(target = "attr.keywords")]
fn attr_keywords(mut out: ResultBuffer<i64>, kw: Attrs<Keywords>) -> Result<()> {
    for (o, v) in out.as_uninit()?.iter_mut().zip([kw.r#type, kw.r#match as i64]) {
        o.write(v);
    }
    Ok(())
}

/// Before the fix an `attributes!` field `r#type` was the attribute `r#type`, which
/// no call can pass (`type=3` was "unknown attribute `type`"), unlike a handler's
/// `r#type: Attr<i64>` parameter, which is `type`.
#[test]
fn raw_identifier_fields_are_the_plain_names() {
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<i64>(&[2]))
        .attr("type", AttrArg::scalar(3i64))
        .attr("match", AttrArg::bool(true));
    expect_ok(call.run(ATTR_KEYWORDS));
    assert_eq!(call.ret_as::<i64>(0), vec![3, 1]);
    let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[2])).attr("r#type", AttrArg::scalar(3i64));
    expect_err(
        call.run(ATTR_KEYWORDS),
        ErrorCode::InvalidArgument,
        &["attr.keywords", "attribute `type`: missing", "unknown attribute `r#type`"],
    );
    assert_eq!(<Keywords as xla_ffi::FromAttrs<'_>>::NAMES, ["type", "match"]);
}

/// Binds the first 128 attributes by index and one named `z_last` by name, as a
/// custom decoder would: the call's bit set covers 128 entries, later ones are
/// tracked apart.
struct First128;

impl<'f> xla_ffi::Decode<'f> for First128 {
    fn decode(call: &mut xla_ffi::Call<'f>, _name: &'static str) -> Option<Self> {
        for i in 0..128 {
            call.use_attr(i);
        }
        Some(First128)
    }
}

#[handler(target = "attr.many")]
fn attr_many(_first: First128, z_last: Attr<i64>) -> Result<()> {
    let _ = *z_last;
    Ok(())
}

fn many(extra: &[&str]) -> CallBuilder {
    let mut c = CallBuilder::new().attr("z_last", AttrArg::scalar(1i64));
    for i in 0..128 {
        c = c.attr(&format!("a{i:03}"), AttrArg::scalar(1i64));
    }
    for name in extra {
        c = c.attr(name, AttrArg::scalar(1i64));
    }
    c
}

/// Before the fix an attribute sorted after the first 128 was never checked: a
/// misspelt one there was accepted in silence.
#[test]
fn attributes_past_the_first_128_are_checked() {
    expect_ok(many(&[]).run(ATTR_MANY));
    let err = expect_err(many(&["zz_typo"]).run(ATTR_MANY), ErrorCode::InvalidArgument, &["attr.many", "`zz_typo`"]);
    assert!(!err.contains("`z_last`") && !err.contains("`a127`"), "{err}");
    // Past 128 by name: 130 entries, all bound.
    let mut c = CallBuilder::new();
    for i in 0..130 {
        c = c.attr(&format!("f{i:03}"), AttrArg::scalar(i as i64));
    }
    expect_ok(c.run(ATTR_FIELDS_130));
    let mut c = c.attr("g_typo", AttrArg::scalar(1i64));
    expect_err(c.run(ATTR_FIELDS_130), ErrorCode::InvalidArgument, &["attr.fields_130", "`g_typo`"]);
}

xla_ffi::attributes! {
    /// 130 fields, `f000` to `f129`, bound through one `Attrs` parameter.
    struct Fields130 {
        f000: i64, f001: i64, f002: i64, f003: i64, f004: i64, f005: i64, f006: i64, f007: i64, f008: i64, f009: i64,
        f010: i64, f011: i64, f012: i64, f013: i64, f014: i64, f015: i64, f016: i64, f017: i64, f018: i64, f019: i64,
        f020: i64, f021: i64, f022: i64, f023: i64, f024: i64, f025: i64, f026: i64, f027: i64, f028: i64, f029: i64,
        f030: i64, f031: i64, f032: i64, f033: i64, f034: i64, f035: i64, f036: i64, f037: i64, f038: i64, f039: i64,
        f040: i64, f041: i64, f042: i64, f043: i64, f044: i64, f045: i64, f046: i64, f047: i64, f048: i64, f049: i64,
        f050: i64, f051: i64, f052: i64, f053: i64, f054: i64, f055: i64, f056: i64, f057: i64, f058: i64, f059: i64,
        f060: i64, f061: i64, f062: i64, f063: i64, f064: i64, f065: i64, f066: i64, f067: i64, f068: i64, f069: i64,
        f070: i64, f071: i64, f072: i64, f073: i64, f074: i64, f075: i64, f076: i64, f077: i64, f078: i64, f079: i64,
        f080: i64, f081: i64, f082: i64, f083: i64, f084: i64, f085: i64, f086: i64, f087: i64, f088: i64, f089: i64,
        f090: i64, f091: i64, f092: i64, f093: i64, f094: i64, f095: i64, f096: i64, f097: i64, f098: i64, f099: i64,
        f100: i64, f101: i64, f102: i64, f103: i64, f104: i64, f105: i64, f106: i64, f107: i64, f108: i64, f109: i64,
        f110: i64, f111: i64, f112: i64, f113: i64, f114: i64, f115: i64, f116: i64, f117: i64, f118: i64, f119: i64,
        f120: i64, f121: i64, f122: i64, f123: i64, f124: i64, f125: i64, f126: i64, f127: i64, f128: i64, f129: i64,
    }
}

#[handler(target = "attr.fields_130")]
fn attr_fields_130(a: Attrs<Fields130>) -> Result<()> {
    assert_eq!((a.f000, a.f129), (0, 129));
    Ok(())
}

// ---- Attrs<Struct> in the declaration ----

#[derive(xla_ffi::AttrEnum, Clone, Copy, Debug, PartialEq)]
pub enum Pick {
    Low = 0,
    High = 1,
}

xla_ffi::attributes! {
    /// Fields of every kind an op's declaration shows.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Declared {
        /// Required.
        pub eps: f32,
        /// Defaulted.
        pub iters: i64 = 10,
        /// Optional.
        pub tag: Option<String>,
        /// An enum.
        pub pick: Pick,
        /// A nested struct.
        pub inner: Inner,
    }
}

#[handler(target = "attr.declared")]
fn attr_declared(k: Attr<f64>, opts: Attrs<Declared>) -> Result<()> {
    let _ = (k, opts);
    Ok(())
}

#[test]
fn attrs_fields_are_attributes_of_the_declaration() {
    // What Python's binding.op checks before lowering: without them a handler taking
    // Attrs<S> declared no attributes, and binding.op refused every keyword.
    let got: Vec<(&str, String, bool)> = ATTR_DECLARED.declaration.attributes().collect();
    let want = [
        ("k", "f64", false),
        ("eps", "f32", false),
        ("iters", "i64", true),
        ("tag", "str", true),
        ("pick", "i64", false),
        ("inner", "dict", false),
    ];
    let want: Vec<(&str, String, bool)> = want.iter().map(|&(n, t, o)| (n, t.to_string(), o)).collect();
    assert_eq!(got, want);
    let e = ATTR_DECLARED.declaration.attribute_enum("pick").expect("pick is an enum");
    assert_eq!((e.name, e.variants), ("Pick", &[("Low", 0), ("High", 1)][..]));
    assert!(ATTR_DECLARED.declaration.attribute_enum("eps").is_none());
    // The fields decode as before.
    let mut call = CallBuilder::new()
        .attr("k", AttrArg::scalar(1.0f64))
        .attr("eps", AttrArg::scalar(0.5f32))
        .attr("pick", AttrArg::Str("High".into()))
        .attr("inner", AttrArg::Dict(vec![("alpha".into(), AttrArg::scalar(1.0f32))]));
    call.run(ATTR_DECLARED).unwrap();
}

// ---- the whole attribute dictionary (`ffi.h`'s `.Attrs()` as a `Dictionary`) ----

/// jax's `cpu_examples.cc` `DictionaryAttr`: `secret` and how many attributes came.
#[handler(target = "attr.whole_dict")]
fn attr_whole_dict(
    attrs: Attrs<Dict>,
    mut secret: ResultBuffer<i32, 0>,
    mut count: ResultBuffer<i32, 0>,
) -> Result<()> {
    let s: i64 = attrs.get("secret").map_err(|e| Error::invalid_argument(format!("attribute `secret`: {e}")))?;
    secret.as_uninit()?[0].write(s as i32);
    count.as_uninit()?[0].write(attrs.len() as i32);
    Ok(())
}

fn whole_dict_call() -> CallBuilder {
    CallBuilder::new().ret(Arg::zeros::<i32>(&[])).ret(Arg::zeros::<i32>(&[]))
}

#[test]
fn whole_dictionary_binds_every_attribute() {
    let mut call = whole_dict_call()
        .attr("secret", AttrArg::scalar(7i64))
        .attr("a", AttrArg::scalar(1.5f32))
        .attr("b", AttrArg::Str("x".into()))
        .attr("nested", AttrArg::Dict(vec![("k".into(), AttrArg::scalar(1i32))]));
    expect_ok(call.run(ATTR_WHOLE_DICT));
    assert_eq!(call.ret_as::<i32>(0), vec![7]);
    assert_eq!(call.ret_as::<i32>(1), vec![4]);
}

#[test]
fn whole_dictionary_missing_key_is_the_handlers_error() {
    let r = whole_dict_call().attr("other", AttrArg::scalar(1i64)).run(ATTR_WHOLE_DICT);
    expect_err(r, ErrorCode::InvalidArgument, &["attr.whole_dict", "attribute `secret`", "missing"]);
    let r = whole_dict_call().attr("secret", AttrArg::Str("5".into())).run(ATTR_WHOLE_DICT);
    expect_err(r, ErrorCode::InvalidArgument, &["attribute `secret`", "got string"]);
}

#[handler(target = "attr.whole_dict_and_named")]
fn attr_whole_dict_and_named(eps: Attr<f32>, attrs: Attrs<Dict>, mut n: ResultBuffer<f32, 0>) -> Result<()> {
    n.as_uninit()?[0].write(*eps + attrs.len() as f32);
    Ok(())
}

#[test]
fn whole_dictionary_beside_a_named_attribute() {
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<f32>(&[]))
        .attr("eps", AttrArg::scalar(0.5f32))
        .attr("extra", AttrArg::scalar(1i64));
    expect_ok(call.run(ATTR_WHOLE_DICT_AND_NAMED));
    assert_eq!(call.ret_as::<f32>(0), vec![2.5]);
    // The named attribute is still checked.
    let r = CallBuilder::new()
        .ret(Arg::zeros::<f32>(&[]))
        .attr("extra", AttrArg::scalar(1i64))
        .run(ATTR_WHOLE_DICT_AND_NAMED);
    expect_err(r, ErrorCode::InvalidArgument, &["attribute `eps`", "missing"]);
}

/// The whole dictionary in an async handler: decoded from the shim's copy of it.
#[handler(target = "attr.whole_dict_async", async)]
fn attr_whole_dict_async(attrs: Attrs<Dict>, mut count: ResultBuffer<i32, 0>) -> Result<()> {
    let names: Vec<&str> = attrs.names().collect();
    let nested: Dict = attrs.get("c").map_err(Error::invalid_argument)?;
    let arr: Vec<i32> = nested.get("v").map_err(Error::invalid_argument)?;
    let ok = names == ["a", "b", "c"] && attrs.get::<String>("b").as_deref() == Ok("x") && arr == [4, 5];
    count.as_uninit()?[0].write(if ok { attrs.len() as i32 } else { -1 });
    Ok(())
}

#[test]
fn whole_dictionary_in_an_async_handler() {
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<i32>(&[]))
        .attr("b", AttrArg::Str("x".into()))
        .attr("a", AttrArg::scalar(1i64))
        .attr("c", AttrArg::Dict(vec![("v".into(), AttrArg::array(&[4i32, 5]))]));
    expect_ok(call.run(ATTR_WHOLE_DICT_ASYNC));
    assert_eq!(call.ret_as::<i32>(0), vec![3]);
}

/// Element `i` of the first attribute, an array, for `i` up to one past its end: `out`
/// holds one more element than the array, and `Array::number` must give `None`
/// (written as NaN) there, never read past the array.
#[handler(target = "attr.array_number")]
fn attr_array_number(attrs: Attrs<Dict>, mut out: ResultBuffer<f64, 1>) -> Result<()> {
    let Some(xla_ffi::AttrValue::Array(a)) = attrs.value_at(0) else {
        return Err(Error::invalid_argument("expected an array attribute"));
    };
    for (i, o) in out.as_uninit()?.iter_mut().enumerate() {
        o.write(match a.number(i) {
            Some(xla_ffi::Number::Int(v)) => v as f64,
            Some(xla_ffi::Number::Float(v)) => v,
            Some(xla_ffi::Number::Bool(b)) => f64::from(u8::from(b)),
            None => f64::NAN,
        });
    }
    Ok(())
}

#[test]
fn array_number_is_none_past_the_end() {
    for (arr, want) in [
        (AttrArg::array(&[7i64, -2, 5]), vec![7.0, -2.0, 5.0]),
        (AttrArg::array(&[1.5f32]), vec![1.5]),
        (AttrArg::array::<i32>(&[]), vec![]),
    ] {
        let n = want.len() as i64 + 1;
        let mut call = CallBuilder::new().ret(Arg::zeros::<f64>(&[n])).attr("v", arr);
        expect_ok(call.run(ATTR_ARRAY_NUMBER));
        let got = call.ret_as::<f64>(0);
        assert_eq!(&got[..want.len()], &want[..]);
        assert!(got[want.len()].is_nan(), "element {} of {want:?}: {got:?}", want.len());
    }
}
