//! Enum attributes (`#[derive(AttrEnum)]`): decoded by discriminant in every integer
//! width or by name, optional and nested in `attributes!` structs, and every refusal
//! naming the target, the attribute, the valid values and what was got.

mod common;

use common::{expect_err, expect_ok};
use xla_ffi::testing::{Arg, AttrArg, CallBuilder};
use xla_ffi::{handler, Attr, AttrEnum, Attrs, ErrorCode, Result, ResultBuffer};

#[derive(AttrEnum, Clone, Copy, Debug, PartialEq)]
enum Mode {
    Sum = 0,
    Max = 1,
    Mean = 7,
}

/// The widest discriminant an enum attribute takes: the declaration's type is
/// `i64` (the derive refuses `u64::MAX`: UI test `attr_enum_beyond_i64`).
#[derive(AttrEnum, Clone, Copy, Debug, PartialEq)]
#[repr(u64)]
enum Wide {
    Low = 1,
    High = i64::MAX as u64,
}

#[derive(AttrEnum, Clone, Copy, Debug, PartialEq)]
#[repr(i8)]
enum Signed {
    Neg = -3,
    Zero,
    Pos,
}

/// Writes the decoded variants' discriminants, so each call's decoding is visible.
#[handler(target = "enum.modes")]
fn enum_modes(mode: Attr<Mode>, wide: Attr<Option<Wide>>, mut out: ResultBuffer<i64>) -> Result<()> {
    let w = match *wide {
        None => -1,
        Some(Wide::Low) => 1,
        Some(Wide::High) => 2,
    };
    let o = out.as_uninit()?;
    o[0].write(*mode as i64);
    o[1].write(w);
    Ok(())
}

fn run_modes(attrs: &[(&str, AttrArg)]) -> (CallBuilder, xla_ffi::testing::CallResult) {
    let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[2]));
    for (n, v) in attrs {
        call = call.attr(n, v.clone());
    }
    let r = call.run(ENUM_MODES);
    (call, r)
}

#[test]
fn decodes_by_discriminant_in_every_integer_width() {
    let cases = [
        (AttrArg::scalar(7i8), 7),
        (AttrArg::scalar(1i16), 1),
        (AttrArg::scalar(0i32), 0),
        (AttrArg::scalar(7i64), 7),
        (AttrArg::scalar(1u8), 1),
        (AttrArg::scalar(7u16), 7),
        (AttrArg::scalar(0u32), 0),
        (AttrArg::scalar(1u64), 1),
        // A 0-d numpy array arrives as a one-element array.
        (AttrArg::array(&[7i64]), 7),
    ];
    for (v, want) in cases {
        let (call, r) = run_modes(&[("mode", v.clone())]);
        expect_ok(r);
        assert_eq!(call.ret_as::<i64>(0), vec![want, -1], "{v:?}");
    }
}

#[test]
fn decodes_by_name() {
    for (name, want) in [("Sum", 0), ("Max", 1), ("Mean", 7)] {
        let (call, r) = run_modes(&[("mode", AttrArg::Str(name.into()))]);
        expect_ok(r);
        assert_eq!(call.ret_as::<i64>(0), vec![want, -1]);
    }
}

#[test]
fn optional_enum_absent_or_present_and_wide_discriminants() {
    // i64::MAX, as the int64 Python passes and as a uint64.
    for v in [AttrArg::scalar(i64::MAX), AttrArg::scalar(i64::MAX as u64)] {
        let (call, r) = run_modes(&[("mode", AttrArg::scalar(0i64)), ("wide", v)]);
        expect_ok(r);
        assert_eq!(call.ret_as::<i64>(0), vec![0, 2]);
    }
    let (call, r) = run_modes(&[("mode", AttrArg::scalar(0i64)), ("wide", AttrArg::Str("Low".into()))]);
    expect_ok(r);
    assert_eq!(call.ret_as::<i64>(0), vec![0, 1]);
    // A value past i64::MAX names no variant, nor do its bits as an int64 (-1).
    for (v, got) in [
        (AttrArg::scalar(u64::MAX), "got uint64 scalar 18446744073709551615"),
        (AttrArg::scalar(-1i64), "got int64 scalar -1"),
    ] {
        let (_, r) = run_modes(&[("mode", AttrArg::scalar(0i64)), ("wide", v)]);
        expect_err(
            r,
            ErrorCode::InvalidArgument,
            &["enum.modes", "attribute `wide`", "enum Wide, one of Low = 1, High = 9223372036854775807", got],
        );
    }
}

#[test]
fn refuses_values_that_name_no_variant() {
    let valid = "expected enum Mode, one of Sum = 0, Max = 1, Mean = 7 (the integer or the name as a string)";
    let cases: [(AttrArg, &str); 8] = [
        (AttrArg::scalar(3i64), "got int64 scalar 3"),
        (AttrArg::scalar(-1i32), "got int32 scalar -1"),
        (AttrArg::scalar(257u16), "got uint16 scalar 257"),
        (AttrArg::Str("sum".into()), "got string \"sum\""),
        (AttrArg::scalar(1.0f64), "got float64 scalar 1.0"),
        (AttrArg::bool(true), "got bool scalar true"),
        (AttrArg::array(&[0i64, 1]), "got int64 array of 2 elements"),
        (AttrArg::Dict(vec![("a".into(), AttrArg::scalar(0i64))]), "got dictionary"),
    ];
    for (v, got) in cases {
        let (_, r) = run_modes(&[("mode", v)]);
        expect_err(r, ErrorCode::InvalidArgument, &["enum.modes", "attribute `mode`", valid, got]);
    }
}

#[test]
fn missing_required_enum_names_the_values() {
    let (_, r) = run_modes(&[]);
    expect_err(
        r,
        ErrorCode::InvalidArgument,
        &["enum.modes", "attribute `mode`", "missing", "enum Mode, one of Sum = 0, Max = 1, Mean = 7"],
    );
}

#[test]
fn implicit_discriminants_follow_explicit_ones() {
    #[handler(target = "enum.signed")]
    fn enum_signed(s: Attr<Signed>, mut out: ResultBuffer<i64>) -> Result<()> {
        out.as_uninit()?[0].write(*s as i64);
        Ok(())
    }
    for (v, want) in [(-3i64, -3), (-2, -2), (-1, -1)] {
        let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[1])).attr("s", AttrArg::scalar(v));
        expect_ok(call.run(ENUM_SIGNED));
        assert_eq!(call.ret_as::<i64>(0), vec![want]);
    }
    let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[1])).attr("s", AttrArg::scalar(0i64));
    expect_err(
        call.run(ENUM_SIGNED),
        ErrorCode::InvalidArgument,
        &["Neg = -3, Zero = -2, Pos = -1", "got int64 scalar 0"],
    );
}

xla_ffi::attributes! {
    struct Opts {
        mode: Mode,
        fallback: Mode = Mode::Max,
    }
}

#[test]
fn enum_fields_of_attribute_structs() {
    #[handler(target = "enum.opts")]
    fn enum_opts(a: Attrs<Opts>, mut out: ResultBuffer<i64>) -> Result<()> {
        let o = out.as_uninit()?;
        o[0].write(a.mode as i64);
        o[1].write(a.fallback as i64);
        Ok(())
    }
    let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[2])).attr("mode", AttrArg::Str("Mean".into()));
    expect_ok(call.run(ENUM_OPTS));
    assert_eq!(call.ret_as::<i64>(0), vec![7, 1]);
    let mut call = CallBuilder::new()
        .ret(Arg::zeros::<i64>(&[2]))
        .attr("mode", AttrArg::scalar(0i64))
        .attr("fallback", AttrArg::scalar(9i64));
    expect_err(
        call.run(ENUM_OPTS),
        ErrorCode::InvalidArgument,
        &["attribute `fallback`", "enum Mode", "got int64 scalar 9"],
    );
}

#[test]
fn declaration_types_an_enum_attribute_as_i64() {
    // Python's `binding.op` passes an integer for an `i64` attribute.
    let attrs: Vec<_> = ENUM_MODES.declaration.attributes().collect();
    assert_eq!(attrs, vec![("mode", "i64".to_string(), false), ("wide", "i64".to_string(), true)]);
}

#[test]
fn declaration_carries_the_enum_values() {
    // What Python's `binding.op` checks a value against before lowering: the
    // variants in order, `Attr<Option<E>>` too, discriminants up to i64::MAX kept.
    let d = ENUM_MODES.declaration;
    let mode = d.attribute_enum("mode").expect("mode is an enum");
    assert_eq!(mode.name, "Mode");
    assert_eq!(mode.variants, [("Sum", 0), ("Max", 1), ("Mean", 7)]);
    let wide = d.attribute_enum("wide").expect("wide is an enum");
    assert_eq!(wide.variants, [("Low", 1), ("High", i64::MAX as i128)]);
    assert_eq!(
        <Signed as xla_ffi::FromAttr>::enum_values().unwrap().variants,
        [("Neg", -3), ("Zero", -2), ("Pos", -1)]
    );
    assert!(<f64 as xla_ffi::FromAttr>::enum_values().is_none());
    assert!(d.attribute_enum("out").is_none() && d.attribute_enum("nope").is_none());
}
