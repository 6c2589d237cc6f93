//! Enum attributes: the run-time half of [`AttrEnum`] (the derive lives in
//! `xla-ffi-macros`), like `ffi.h`'s `XLA_FFI_REGISTER_ENUM_ATTR_DECODING`.

use crate::attr::{single_number, AttrValue, Number};

/// Decodes a fieldless enum from an attribute: an integer equal to a variant's
/// discriminant, or a string equal to a variant's name.
///
/// `#[derive(AttrEnum)]` implements [`FromAttr`](crate::FromAttr), so the enum goes in
/// `Attr<E>`, `Attr<Option<E>>`, or an [`attributes!`](crate::attributes) field.
/// Discriminants may be explicit and of any integer `#[repr]`, but each must fit in an
/// `i64`, the attribute's type in the declaration (see below); the integer may arrive in any
/// integer width (`np.int8(1)`, a Python `int` as int64, `np.uint32(1)`) and must equal
/// a discriminant exactly. The string form is the variant's Rust name, exactly
/// (`mode="Max"`). Bools, floats, arrays and dictionaries are refused. A bad value is
/// an error naming the target, the attribute, every valid value and what was got:
/// `demo.reduce: attribute `mode`: expected enum Mode, one of Sum = 0, Max = 1,
/// Mean = 7 (the integer or the name as a string), got int64 scalar 3`.
///
/// In a declaration the attribute's type is `i64`, and the declaration carries the
/// variants ([`FromAttr::enum_values`](crate::FromAttr::enum_values),
/// [`Declaration::attribute_enum`](crate::Declaration::attribute_enum)): Python's
/// `binding.op` accepts a variant's integer or name, passes the integer, and raises
/// `ValueError` naming the attribute, the target and the valid values for anything
/// else before lowering (`TypeError` for a value that is no integer or string).
///
/// ```
/// use xla_ffi::testing::{Arg, AttrArg, CallBuilder};
/// use xla_ffi::{handler, Attr, AttrEnum, Buffer, ErrorCode, Result, ResultBuffer};
///
/// #[derive(AttrEnum, Clone, Copy, Debug, PartialEq)]
/// enum Mode {
///     Sum = 0,
///     Max = 1,
///     Mean = 7,
/// }
///
/// #[handler(target = "demo.reduce")]
/// fn demo_reduce(x: Buffer<f32>, mut y: ResultBuffer<f32>, mode: Attr<Mode>) -> Result<()> {
///     let v = x.as_slice()?;
///     let r = match *mode {
///         Mode::Sum => v.iter().sum(),
///         Mode::Max => v.iter().copied().fold(f32::MIN, f32::max),
///         Mode::Mean => v.iter().sum::<f32>() / v.len() as f32,
///     };
///     y.as_uninit()?[0].write(r);
///     Ok(())
/// }
///
/// let call = |mode: AttrArg| {
///     let mut c = CallBuilder::new()
///         .arg(Arg::from_slice(&[1.0f32, 5.0, 3.0], &[3]))
///         .ret(Arg::zeros::<f32>(&[1]))
///         .attr("mode", mode);
///     c.run(DEMO_REDUCE).map(|()| c.ret_as::<f32>(0)[0])
/// };
/// assert_eq!(call(AttrArg::scalar(1i64)), Ok(5.0)); // by discriminant
/// assert_eq!(call(AttrArg::scalar(7i8)), Ok(3.0)); // any integer width
/// assert_eq!(call(AttrArg::Str("Sum".into())), Ok(9.0)); // by name
/// let (code, msg) = call(AttrArg::scalar(3i64)).unwrap_err();
/// assert_eq!(code, ErrorCode::InvalidArgument);
/// assert!(msg.contains("attribute `mode`") && msg.contains("Sum = 0, Max = 1, Mean = 7"));
/// assert!(msg.contains("got int64 scalar 3"));
/// ```
///
/// The derive refuses (at compile time) a struct, an enum whose variants have
/// fields, an enum without variants, a generic enum, and a discriminant no `i64`
/// holds (`#[repr(u64)] enum Mode { A = 0, Huge = u64::MAX }`, or `1 << 63`, or a
/// `const` above `i64::MAX`): Python passes the variant's integer as an int64. If `xla_ffi` is renamed in
/// the dependent crate, name it: `#[attr_enum(crate = "my_xla_ffi")]`.
pub use xla_ffi_macros::AttrEnum;

/// What an enum attribute expects, for messages: `enum Mode, one of Sum = 0, Max = 1
/// (the integer or the name as a string)`.
#[doc(hidden)]
pub fn enum_expected(name: &str, variants: &[(&str, i128)]) -> String {
    let list: Vec<String> = variants.iter().map(|(n, v)| format!("{n} = {v}")).collect();
    format!("enum {name}, one of {} (the integer or the name as a string)", list.join(", "))
}

/// The index in `variants` of the variant that `value` names (by discriminant or
/// by name), or a message saying what was expected and what was got.
#[doc(hidden)]
pub fn enum_index(name: &str, variants: &[(&str, i128)], value: &AttrValue<'_>) -> Result<usize, String> {
    let found = match value {
        AttrValue::String(b) => variants.iter().position(|(n, _)| n.as_bytes() == *b),
        _ => match single_number(value) {
            Some(Number::Int(i)) => variants.iter().position(|(_, v)| *v == i),
            _ => None,
        },
    };
    found.ok_or_else(|| {
        let got = match value {
            AttrValue::String(b) => {
                let s = String::from_utf8_lossy(b);
                let s: String = s.chars().take(64).collect();
                format!("string {s:?}")
            }
            other => other.to_string(),
        };
        format!("expected {}, got {got}", enum_expected(name, variants))
    })
}
