//! Attributes: the static keyword arguments of an `ffi_call`.
//!
//! How Python values arrive (jax's `ffi_call` keyword arguments):
//! a Python `float` is a `float64` scalar, a Python `int` an `int64` scalar, a `bool`
//! a `bool` (PRED) scalar, `np.float32(x)` a `float32` scalar, a `str` a string, a
//! 1-D numpy array an array, a flat `dict` a dictionary.
//!
//! Numeric attributes convert where that loses nothing that matters:
//! * an integer type (`i8`..`u64`) takes any integer scalar whose value fits exactly;
//! * `f32` takes `float32`, a `float64` (rounded; an overflow to infinity is an error),
//!   or an integer that `f32` represents exactly;
//! * `f64` takes `float32`, `float64`, or an integer that `f64` represents exactly;
//! * a one-element array (how a 0-d numpy array arrives) counts as a scalar.
//!
//! So a handler that declares `eps: Attr<f32>` accepts `eps=1e-5`, `eps=np.float32(1e-5)`
//! and `eps=0`, and rejects `eps="small"` and `eps=1e300` with a message.

use core::ffi::c_void;
use core::fmt;
use core::marker::PhantomData;

use half::{bf16, f16};

use crate::dtype::{DataType, Element};
use crate::raw::{RawAttr, RawDict};

/// One attribute value, borrowed from the call frame.
#[derive(Clone, Copy)]
pub enum AttrValue<'f> {
    /// A scalar of some element type.
    Scalar(Scalar<'f>),
    /// A flat array (N-D numpy arrays arrive flattened).
    Array(Array<'f>),
    /// A byte string (a Python `str`).
    String(&'f [u8]),
    /// A dictionary (a Python `dict`).
    Dict(Dict<'f>),
}

impl fmt::Display for AttrValue<'_> {
    /// Describes the kind and type: `float64 scalar`, `int64 array`, `string`, `dictionary`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrValue::Scalar(s) => match s.number() {
                Some(n) => write!(f, "{} scalar {n}", s.dtype),
                None => write!(f, "{} scalar", s.dtype),
            },
            AttrValue::Array(a) => write!(f, "{} array of {} elements", a.dtype, a.len),
            AttrValue::String(_) => f.write_str("string"),
            AttrValue::Dict(_) => f.write_str("dictionary"),
        }
    }
}

/// A scalar attribute.
#[derive(Clone, Copy)]
pub struct Scalar<'f> {
    dtype: DataType,
    value: *const c_void,
    _life: PhantomData<&'f ()>,
}

/// A number read from an attribute, before conversion to the declared type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    /// Any integer type.
    Int(i128),
    /// Any float type, widened.
    Float(f64),
    /// PRED.
    Bool(bool),
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Number::Int(v) => write!(f, "{v}"),
            // `{:?}` keeps the point of a whole float: 1.0 reads `1.0`, not `1`.
            Number::Float(v) => write!(f, "{v:?}"),
            Number::Bool(v) => write!(f, "{v}"),
        }
    }
}

/// Reads element `i` of dtype `dtype` at `base` as a [`Number`].
///
/// # Safety
/// `base` must point to at least `i + 1` elements of `dtype`, alive for the call.
unsafe fn read_number(dtype: DataType, base: *const c_void, i: usize) -> Option<Number> {
    macro_rules! rd {
        ($t:ty) => {
            // SAFETY: guaranteed by the caller; unaligned reads make no alignment claim.
            unsafe { (base as *const $t).add(i).read_unaligned() }
        };
    }
    Some(match dtype {
        DataType::PRED => Number::Bool(rd!(u8) != 0),
        DataType::S8 => Number::Int(rd!(i8) as i128),
        DataType::S16 => Number::Int(rd!(i16) as i128),
        DataType::S32 => Number::Int(rd!(i32) as i128),
        DataType::S64 => Number::Int(rd!(i64) as i128),
        DataType::U8 => Number::Int(rd!(u8) as i128),
        DataType::U16 => Number::Int(rd!(u16) as i128),
        DataType::U32 => Number::Int(rd!(u32) as i128),
        DataType::U64 => Number::Int(rd!(u64) as i128),
        DataType::F16 => Number::Float(f16::from_bits(rd!(u16)).to_f64()),
        DataType::BF16 => Number::Float(bf16::from_bits(rd!(u16)).to_f64()),
        DataType::F32 => Number::Float(rd!(f32) as f64),
        DataType::F64 => Number::Float(rd!(f64)),
        _ => return None,
    })
}

impl<'f> Scalar<'f> {
    /// The element type.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }
    /// The address of the value (one element of [`dtype`](Self::dtype), alive for
    /// the call; NULL when XLA passed none).
    pub(crate) fn value_ptr(&self) -> *const c_void {
        self.value
    }
    /// The value, if it is a number or a bool.
    pub fn number(&self) -> Option<Number> {
        if self.value.is_null() {
            return None;
        }
        // SAFETY: XLA's scalar points to one value of `dtype`, alive for the call.
        unsafe { read_number(self.dtype, self.value, 0) }
    }
}

/// An array attribute (flat).
#[derive(Clone, Copy)]
pub struct Array<'f> {
    dtype: DataType,
    len: usize,
    data: *const c_void,
    _life: PhantomData<&'f ()>,
}

impl<'f> Array<'f> {
    /// The element type.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The elements as `&[T]`, if `T` is the array's type and the data is aligned.
    pub fn as_slice<T: Element>(&self) -> Option<&'f [T]> {
        if self.dtype != T::DTYPE {
            return None;
        }
        if self.len == 0 {
            return Some(&[]);
        }
        if self.data.is_null() || !(self.data as usize).is_multiple_of(core::mem::align_of::<T>()) {
            return None;
        }
        // SAFETY: XLA's array holds `len` elements of `dtype` == T, alive for the
        // call, aligned (checked), and nobody writes attributes during a call.
        Some(unsafe { core::slice::from_raw_parts(self.data as *const T, self.len) })
    }
    /// Element `i` as a [`Number`].
    pub fn number(&self, i: usize) -> Option<Number> {
        if i >= self.len || self.data.is_null() {
            return None;
        }
        // SAFETY: `i < len` elements of `dtype` at `data`, alive for the call.
        unsafe { read_number(self.dtype, self.data, i) }
    }
}

/// A dictionary of attributes: the whole attribute set of a call, or a nested `dict`.
#[derive(Clone, Copy)]
pub struct Dict<'f> {
    raw: RawDict<'f>,
}

impl<'f> Dict<'f> {
    pub(crate) fn new(raw: RawDict<'f>) -> Self {
        Dict { raw }
    }

    /// # Safety
    /// As [`RawDict::from_raw`].
    #[cfg(any(test, feature = "testing"))]
    pub(crate) unsafe fn from_raw(raw: &'f xla_ffi_sys::XLA_FFI_Attrs) -> Self {
        // SAFETY: forwarded from the caller.
        Dict { raw: unsafe { RawDict::from_raw(raw) } }
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name of entry `i` (entries are sorted by name).
    pub fn name_at(&self, i: usize) -> Option<&'f str> {
        core::str::from_utf8(self.raw.name(i)?).ok()
    }

    /// Entry `i`, or `None` if out of range, malformed, or of an unknown kind.
    #[inline]
    pub fn value_at(&self, i: usize) -> Option<AttrValue<'f>> {
        Some(match self.raw.value(i)? {
            RawAttr::Scalar { dtype, value } => AttrValue::Scalar(Scalar { dtype, value, _life: PhantomData }),
            RawAttr::Array { dtype, len, data } => AttrValue::Array(Array { dtype, len, data, _life: PhantomData }),
            RawAttr::String(b) => AttrValue::String(b),
            RawAttr::Dict(d) => AttrValue::Dict(Dict { raw: d }),
        })
    }

    /// Entry `i`: a scalar (most attributes) read inline, any other kind out of line
    /// ([`Dict::value_at`]'s answer either way).
    #[inline(always)]
    pub(crate) fn value_at_scalar_first(&self, i: usize) -> Option<AttrValue<'f>> {
        match self.raw.scalar(i) {
            Some((dtype, value)) => Some(AttrValue::Scalar(Scalar { dtype, value, _life: PhantomData })),
            None => self.value_at_other(i),
        }
    }

    /// [`Dict::value_at`], out of line.
    #[inline(never)]
    fn value_at_other(&self, i: usize) -> Option<AttrValue<'f>> {
        self.value_at(i)
    }

    /// The index and value of the entry called `name`.
    #[inline]
    pub fn find(&self, name: &str) -> Option<(usize, Option<AttrValue<'f>>)> {
        self.position(name).map(|i| (i, self.value_at(i)))
    }

    /// The index of the entry called `name`.
    #[inline(always)]
    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        // Bytes against bytes: `name` is UTF-8, so an equal name is too (the same
        // answer as comparing `name_at`, without validating every name first).
        self.raw.position(name.as_bytes())
    }

    /// The value called `name`, decoded as `T`.
    pub fn get<T: FromAttr<'f>>(&self, name: &str) -> Result<T, String> {
        decode_found(self.find(name))
    }

    /// The names, in order.
    pub fn names(&self) -> impl Iterator<Item = &'f str> + '_ {
        (0..self.len()).map(|i| self.name_at(i).unwrap_or("?"))
    }
}

/// What [`Dict::get`] answers for what [`Dict::find`] found.
pub(crate) fn decode_found<'f, T: FromAttr<'f>>(found: Option<(usize, Option<AttrValue<'f>>)>) -> Result<T, String> {
    match found {
        None => T::if_missing().ok_or_else(|| format!("missing (expected {})", T::expected())),
        Some((_, None)) => Err(format!("unsupported attribute kind (expected {})", T::expected())),
        Some((_, Some(v))) => T::from_attr(&v),
    }
}

/// An enum attribute's valid values: the enum's name and each variant's name and
/// discriminant, in declaration order (what `#[derive(AttrEnum)]` gives
/// [`FromAttr::enum_values`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnumValues {
    /// The enum's Rust name: `Mode`.
    pub name: &'static str,
    /// Each variant's name and discriminant: `[("Sum", 0), ("Max", 1)]`.
    pub variants: &'static [(&'static str, i128)],
}

/// A type an attribute value decodes into.
///
/// Implemented for `bool`, all integer types, `f32`, `f64`, `String`, `&'f str`,
/// `&'f [T]` (exact element type), `Vec<T>` (numeric, converted like scalars),
/// [`Dict`], `Option<T>` (absent → `None`), structs made with
/// [`attributes!`](crate::attributes), and enums with `#[derive(`[`AttrEnum`](crate::AttrEnum)`)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an attribute type",
    label = "not decodable from an attribute",
    note = "attribute types: bool, i8..i64, u8..u64 (not usize or isize: XLA's integers have a fixed width), \
            f32, f64, Complex<f32>, Complex<f64>, &str, String, &[T], Vec<T>, Option<T>, Dict, AttrValue, \
            Pointer<T>, an enum with #[derive(xla_ffi::AttrEnum)], or a struct declared with xla_ffi::attributes!"
)]
pub trait FromAttr<'f>: Sized {
    /// What is expected, for messages: `"a float scalar"`.
    fn expected() -> String;
    /// Decodes a value; `Err` says what was wrong (`"expected ..., got ..."`).
    fn from_attr(value: &AttrValue<'f>) -> Result<Self, String>;
    /// The value when the attribute is absent, or `None` if it is required.
    fn if_missing() -> Option<Self> {
        None
    }
    /// The type's name in an op's declaration: `f64`, `i32`, `bool`, `str`,
    /// `array<f64>`, `dict` (`other` by default).
    fn type_name() -> String {
        "other".into()
    }
    /// The enum's name and variants, for an enum attribute
    /// (`#[derive(`[`AttrEnum`](crate::AttrEnum)`)]`); `None` for other types. An op's
    /// declaration carries them, so Python checks the value before lowering.
    fn enum_values() -> Option<EnumValues> {
        None
    }
}

fn mismatch<T>(expected: String, got: &AttrValue<'_>) -> Result<T, String> {
    Err(format!("expected {expected}, got {got}"))
}

/// The single number in a scalar or a one-element array.
pub(crate) fn single_number(v: &AttrValue<'_>) -> Option<Number> {
    match v {
        AttrValue::Scalar(s) => s.number(),
        AttrValue::Array(a) if a.len() == 1 => a.number(0),
        _ => None,
    }
}

/// Conversion of a [`Number`] to a numeric Rust type, exact or harmless only.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a numeric attribute element",
    label = "`Vec<T>` and numeric attributes take numbers",
    note = "numeric element types: bool, i8..i64, u8..u64, f32, f64; an array attribute is numeric \
            (a string array or a list of strings is no XLA attribute)"
)]
pub trait FromNumber: Sized {
    /// The type's description for messages.
    const WHAT: &'static str;
    /// The type's name in an op's declaration (`f64`, `i32`, `bool`).
    const NAME: &'static str = "number";
    /// Converts, or says why not.
    fn from_number(n: Number) -> Result<Self, String>;
}

macro_rules! int_from_number {
    ($($t:ty),*) => {$(
        impl FromNumber for $t {
            const WHAT: &'static str = concat!("an integer scalar (", stringify!($t), ")");
            const NAME: &'static str = stringify!($t);
            fn from_number(n: Number) -> Result<Self, String> {
                match n {
                    Number::Int(v) => <$t>::try_from(v)
                        .map_err(|_| format!("{v} does not fit in {}", stringify!($t))),
                    other => Err(format!("expected {}, got {other}", Self::WHAT)),
                }
            }
        }
    )*};
}
int_from_number!(i8, i16, i32, i64, u8, u16, u32, u64);

impl FromNumber for f64 {
    const WHAT: &'static str = "a float scalar (float32 or float64)";
    const NAME: &'static str = "f64";
    fn from_number(n: Number) -> Result<Self, String> {
        match n {
            Number::Float(v) => Ok(v),
            Number::Int(v) if (v as f64) as i128 == v => Ok(v as f64),
            Number::Int(v) => Err(format!("integer {v} is not exactly representable as float64")),
            Number::Bool(b) => Err(format!("expected {}, got bool {b}", Self::WHAT)),
        }
    }
}

impl FromNumber for f32 {
    const WHAT: &'static str = "a float scalar (float32 or float64)";
    const NAME: &'static str = "f32";
    fn from_number(n: Number) -> Result<Self, String> {
        match n {
            Number::Float(v) => {
                let r = v as f32;
                if r.is_infinite() && v.is_finite() {
                    // `{:?}`: 1e300, not its 301 digits.
                    Err(format!("{v:?} overflows float32"))
                } else if r == 0.0 && v != 0.0 {
                    // Rounding that keeps no digit is not harmless (an `eps` of 0).
                    Err(format!("{v:?} underflows float32 (it would be 0)"))
                } else {
                    Ok(r)
                }
            }
            Number::Int(v) if (v as f32) as i128 == v => Ok(v as f32),
            Number::Int(v) => Err(format!("integer {v} is not exactly representable as float32")),
            Number::Bool(b) => Err(format!("expected {}, got bool {b}", Self::WHAT)),
        }
    }
}

impl FromNumber for bool {
    const WHAT: &'static str = "a bool scalar";
    const NAME: &'static str = "bool";
    fn from_number(n: Number) -> Result<Self, String> {
        match n {
            Number::Bool(b) => Ok(b),
            other => Err(format!("expected {}, got {other}", Self::WHAT)),
        }
    }
}

/// The value of a scalar of exactly `T`'s dtype, read as it is: what the conversion
/// through [`Number`] gives for it (every value of the dtype is exact in `T`), in
/// fewer steps, for the common case of an attribute passed with its declared type.
#[inline(always)]
fn exact_scalar<T: Element>(value: &AttrValue<'_>) -> Option<T> {
    match value {
        AttrValue::Scalar(s) if s.dtype == T::DTYPE && !s.value.is_null() => {
            // SAFETY: XLA's scalar points to one value of `dtype`, which is `T`'s (an
            // integer or float type: every bit pattern is a value), alive for the
            // call; the unaligned read makes no alignment claim.
            Some(unsafe { (s.value as *const T).read_unaligned() })
        }
        _ => None,
    }
}

/// A scalar attribute of another type than `T`'s (or a one-element array),
/// converted through [`Number`]: out of line, so that the read of a scalar of
/// `T`'s own dtype is all a handler's accepting path holds.
#[inline(never)]
fn converted_scalar<T: FromNumber>(value: &AttrValue<'_>) -> Result<T, String> {
    match single_number(value) {
        Some(n) => T::from_number(n),
        None => mismatch(T::WHAT.to_string(), value),
    }
}

macro_rules! scalar_from_attr {
    ($($t:ty => $exact:expr),*) => {$(
        impl<'f> FromAttr<'f> for $t {
            fn expected() -> String { <$t as FromNumber>::WHAT.to_string() }
            fn type_name() -> String { <$t as FromNumber>::NAME.to_string() }
            #[inline]
            fn from_attr(value: &AttrValue<'f>) -> Result<Self, String> {
                if let Some(v) = $exact(value) {
                    return Ok(v);
                }
                converted_scalar::<$t>(value)
            }
        }
    )*};
}
scalar_from_attr!(bool => |_: &AttrValue<'f>| None::<bool>, i8 => exact_scalar::<i8>, i16 => exact_scalar::<i16>,
    i32 => exact_scalar::<i32>, i64 => exact_scalar::<i64>, u8 => exact_scalar::<u8>, u16 => exact_scalar::<u16>,
    u32 => exact_scalar::<u32>, u64 => exact_scalar::<u64>, f32 => exact_scalar::<f32>, f64 => exact_scalar::<f64>);

impl<'f> FromAttr<'f> for &'f str {
    fn expected() -> String {
        "a string".into()
    }
    fn type_name() -> String {
        "str".into()
    }
    fn from_attr(value: &AttrValue<'f>) -> Result<Self, String> {
        match value {
            AttrValue::String(b) => core::str::from_utf8(b).map_err(|e| format!("string is not UTF-8: {e}")),
            other => mismatch(Self::expected(), other),
        }
    }
}

impl<'f> FromAttr<'f> for String {
    fn expected() -> String {
        "a string".into()
    }
    fn type_name() -> String {
        "str".into()
    }
    fn from_attr(value: &AttrValue<'f>) -> Result<Self, String> {
        <&str>::from_attr(value).map(str::to_owned)
    }
}

impl<'f, T: Element> FromAttr<'f> for &'f [T] {
    fn expected() -> String {
        // `an int64 array`, `a uint8 array`, `a float32 array`.
        let article = if T::DTYPE.name().starts_with("int") { "an" } else { "a" };
        format!("{article} {} array", T::DTYPE)
    }
    fn type_name() -> String {
        format!("array<{}>", short_name(T::DTYPE))
    }
    fn from_attr(value: &AttrValue<'f>) -> Result<Self, String> {
        match value {
            AttrValue::Array(a) => {
                a.as_slice::<T>().ok_or_else(|| format!("expected {}, got {value}", Self::expected()))
            }
            other => mismatch(Self::expected(), other),
        }
    }
}

impl<'f, T: FromNumber> FromAttr<'f> for Vec<T> {
    fn expected() -> String {
        // `an array of floats (float32 or float64)`, `an array of integers (i32)`.
        let what = T::WHAT.trim_start_matches("a ").trim_start_matches("an ");
        format!("an array of {}", what.replacen(" scalar", "s", 1))
    }
    fn type_name() -> String {
        format!("array<{}>", T::NAME)
    }
    fn from_attr(value: &AttrValue<'f>) -> Result<Self, String> {
        match value {
            AttrValue::Array(a) => (0..a.len())
                .map(|i| {
                    let n = a.number(i).ok_or_else(|| format!("unsupported array element type {}", a.dtype()))?;
                    T::from_number(n).map_err(|e| format!("element {i}: {e}"))
                })
                .collect(),
            other => mismatch(Self::expected(), other),
        }
    }
}

impl<'f> FromAttr<'f> for Dict<'f> {
    fn expected() -> String {
        "a dictionary".into()
    }
    fn type_name() -> String {
        "dict".into()
    }
    fn from_attr(value: &AttrValue<'f>) -> Result<Self, String> {
        match value {
            AttrValue::Dict(d) => Ok(*d),
            other => mismatch(Self::expected(), other),
        }
    }
}

impl<'f, T: FromAttr<'f>> FromAttr<'f> for Option<T> {
    fn expected() -> String {
        T::expected()
    }
    fn from_attr(value: &AttrValue<'f>) -> Result<Self, String> {
        T::from_attr(value).map(Some)
    }
    fn if_missing() -> Option<Self> {
        Some(None)
    }
    fn type_name() -> String {
        T::type_name()
    }
    fn enum_values() -> Option<EnumValues> {
        T::enum_values()
    }
}

/// A struct decoded from a dictionary of attributes, field by field, by name.
/// Made with [`attributes!`](crate::attributes).
pub trait FromAttrs<'f>: Sized {
    /// The field names.
    const NAMES: &'static [&'static str];
    /// Each field as an attribute of an op's declaration (name, type, whether it may
    /// be absent, enum values), for an [`Attrs`] parameter; none by default.
    fn field_decls() -> Vec<FieldDecl> {
        Vec::new()
    }
    /// Decodes the fields; each problem goes to `cx`.
    fn from_dict(dict: &Dict<'f>, cx: &mut FieldCx<'_>) -> Option<Self>;
}

/// `Attrs<Dict>`: the call's whole attribute dictionary, `ffi.h`'s `.Attrs()` bound
/// to a `Dictionary`. Every attribute of the call is bound by it, so none is refused
/// as unknown; read them with [`Dict::get`], [`Dict::find`], [`Dict::names`]. An
/// op's declaration lists no attribute for it (the keys are the call's own), so
/// `xla_ffi_rs.binding` refuses the attributes it does not declare: call such a
/// target with `jax.ffi.ffi_call`.
///
/// ```
/// use xla_ffi::testing::{Arg, AttrArg, CallBuilder};
/// use xla_ffi::{handler, Attrs, Dict, Error, Result, ResultBuffer};
///
/// /// `secret` (required) and the number of attributes the call passed.
/// #[handler(target = "demo.dictionary")]
/// fn demo_dictionary(attrs: Attrs<Dict>, mut secret: ResultBuffer<i32, 0>, mut count: ResultBuffer<i32, 0>) -> Result<()> {
///     let s: i32 = attrs.get("secret").map_err(|e| Error::invalid_argument(format!("attribute `secret`: {e}")))?;
///     secret.as_uninit()?[0].write(s);
///     count.as_uninit()?[0].write(attrs.len() as i32);
///     Ok(())
/// }
///
/// let mut call = CallBuilder::new()
///     .ret(Arg::zeros::<i32>(&[]))
///     .ret(Arg::zeros::<i32>(&[]))
///     .attr("secret", AttrArg::scalar(5i64))
///     .attr("other", AttrArg::Str("any".into()));
/// call.run(DEMO_DICTIONARY).unwrap();
/// assert_eq!((call.ret_as::<i32>(0), call.ret_as::<i32>(1)), (vec![5], vec![2]));
/// ```
impl<'f> FromAttrs<'f> for Dict<'f> {
    const NAMES: &'static [&'static str] = &[];
    fn from_dict(dict: &Dict<'f>, cx: &mut FieldCx<'_>) -> Option<Self> {
        for i in 0..dict.len() {
            cx.used.insert(i);
        }
        Some(*dict)
    }
}

/// One field of an [`attributes!`](crate::attributes) struct as an attribute of an
/// op's declaration ([`FromAttrs::field_decls`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldDecl {
    /// The attribute's name.
    pub name: &'static str,
    /// Its type's name, as [`FromAttr::type_name`].
    pub type_name: String,
    /// Whether the call may leave it out (a default, or an `Option`).
    pub optional: bool,
    /// An enum field's valid values.
    pub enum_values: Option<EnumValues>,
}

/// The attribute name of an [`attributes!`](crate::attributes) field: its
/// identifier without a raw prefix (`r#type` is the attribute `type`), as the
/// [`handler`](crate::handler) macro names `Attr` parameters.
#[doc(hidden)]
pub const fn field_name(ident: &'static str) -> &'static str {
    match ident.as_bytes() {
        [b'r', b'#', rest @ ..] => match core::str::from_utf8(rest) {
            Ok(name) => name,
            Err(_) => ident,
        },
        _ => ident,
    }
}

/// Collects what [`FromAttrs::from_dict`] finds.
#[doc(hidden)]
#[derive(Debug)]
pub struct FieldCx<'a> {
    /// The target the messages start with (`""`: none, for a nested dictionary).
    pub(crate) target: &'a str,
    pub(crate) problems: Vec<String>,
    pub(crate) used: UsedEntries,
}

impl<'a> FieldCx<'a> {
    pub(crate) fn new(target: &'a str) -> Self {
        FieldCx { target, problems: Vec::new(), used: UsedEntries::default() }
    }

    /// Decodes one field, or records why it failed.
    pub fn field<'f, T: FromAttr<'f>>(&mut self, dict: &Dict<'f>, name: &str, default: Option<T>) -> Option<T> {
        match dict.find(name) {
            Some((i, v)) => {
                self.used.insert(i);
                let r = match v {
                    Some(v) => T::from_attr(&v),
                    None => Err(format!("unsupported attribute kind (expected {})", T::expected())),
                };
                r.map_err(|e| self.problem(format!("attribute `{name}`: {e}"))).ok()
            }
            None => default.or_else(T::if_missing).or_else(|| {
                self.problem(format!("attribute `{name}`: missing (expected {})", T::expected()));
                None
            }),
        }
    }

    fn problem(&mut self, msg: String) {
        self.problems.push(if self.target.is_empty() { msg } else { format!("{}: {msg}", self.target) });
    }
}

/// The entries of a dictionary that fields asked for: a bit each for the first 128
/// (no allocation on a call), a list for any beyond.
#[derive(Debug, Default)]
pub(crate) struct UsedEntries {
    pub(crate) low: u128,
    high: Vec<usize>,
}

impl UsedEntries {
    /// The entries past the first 128 asked for.
    pub(crate) fn high(&self) -> &[usize] {
        &self.high
    }

    fn insert(&mut self, i: usize) {
        if i < 128 {
            self.low |= 1 << i;
        } else {
            self.high.push(i);
        }
    }

    fn contains(&self, i: usize) -> bool {
        if i < 128 {
            self.low & (1 << i) != 0
        } else {
            self.high.contains(&i)
        }
    }
}

/// A nested dictionary decodes into an [`attributes!`](crate::attributes) struct; it
/// must hold exactly the struct's fields.
pub fn struct_from_dict<'f, S: FromAttrs<'f>>(value: &AttrValue<'f>) -> Result<S, String> {
    let AttrValue::Dict(d) = value else {
        return mismatch("a dictionary".into(), value);
    };
    let mut cx = FieldCx::new("");
    let s = S::from_dict(d, &mut cx);
    let extra: Vec<&str> = (0..d.len()).filter(|&i| !cx.used.contains(i)).filter_map(|i| d.name_at(i)).collect();
    if !extra.is_empty() {
        cx.problems.push(format!(
            "unexpected key(s) {}; the dictionary takes: {}",
            extra.join(", "),
            S::NAMES.join(", ")
        ));
    }
    match (s, cx.problems.is_empty()) {
        (Some(s), true) => Ok(s),
        _ => Err(cx.problems.join("; ")),
    }
}

/// A handler parameter holding the attribute named like the parameter.
///
/// `eps: Attr<f32>` reads the attribute `eps`. An optional attribute is
/// `Attr<Option<T>>` (the `Option` goes inside): `None` when the call does not pass
/// it, an error when it is passed with the wrong type. Dereferences to the value.
///
/// ```
/// use xla_ffi::testing::{AttrArg, CallBuilder};
/// use xla_ffi::{handler, Attr, Result};
///
/// #[handler(target = "demo.opt")]
/// fn demo_opt(eps: Attr<f64>, axis: Attr<Option<i64>>) -> Result<()> {
///     assert!(*eps > 0.0);
///     let _axis: i64 = axis.unwrap_or(-1);
///     Ok(())
/// }
///
/// let with = CallBuilder::new().attr("eps", AttrArg::scalar(1e-5)).attr("axis", AttrArg::scalar(0i64)).run(DEMO_OPT);
/// let without = CallBuilder::new().attr("eps", AttrArg::scalar(1e-5)).run(DEMO_OPT);
/// assert!(with.is_ok() && without.is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attr<T>(pub T);

impl<T> core::ops::Deref for Attr<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A handler parameter holding all attributes, decoded into an
/// [`attributes!`](crate::attributes) struct. Dereferences to the struct.
#[derive(Clone, Debug)]
pub struct Attrs<S>(pub S);

impl<S> core::ops::Deref for Attrs<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.0
    }
}

/// Declares a struct decoded from attributes by field name.
///
/// Fields take any [`FromAttr`] type that owns its data (`f32`, `i64`, `bool`,
/// `String`, `Vec<T>`, `Option<T>`, another such struct). `= expr` gives a default for
/// an absent attribute. Use it as a whole-call parameter `attrs: Attrs<MyAttrs>`, or
/// as a nested `dict` attribute `cfg: Attr<MyAttrs>`.
///
/// ```
/// xla_ffi::attributes! {
///     /// Options of my op.
///     #[derive(Debug, Clone, PartialEq)]
///     pub struct NormOptions {
///         /// Added to the mean square.
///         pub eps: f32,
///         /// Optional: how many rows a task takes.
///         pub rows_per_task: i64 = 64,
///     }
/// }
/// ```
#[macro_export]
macro_rules! attributes {
    (
        $(#[$m:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fm:meta])* $fvis:vis $field:ident : $fty:ty $(= $default:expr)? ),* $(,)?
        }
    ) => {
        $(#[$m])*
        $vis struct $name { $( $(#[$fm])* $fvis $field: $fty, )* }

        // Every path is absolute (`::core`, `$crate`): user items named `Option`,
        // `Result`, `String`, `str` or a user `format!` in scope change nothing.
        impl<'f> $crate::FromAttrs<'f> for $name {
            const NAMES: &'static [&'static ::core::primitive::str] =
                &[$($crate::attr::field_name(::core::stringify!($field))),*];
            fn field_decls() -> $crate::__private::Vec<$crate::attr::FieldDecl> {
                $crate::__private::vec![$(
                    $crate::attr::FieldDecl {
                        name: $crate::attr::field_name(::core::stringify!($field)),
                        type_name: <$fty as $crate::FromAttr<'f>>::type_name(),
                        optional: ::core::option::Option::<$fty>::is_some(&$crate::__default!($($default)?))
                            || <$fty as $crate::FromAttr<'f>>::if_missing().is_some(),
                        enum_values: <$fty as $crate::FromAttr<'f>>::enum_values(),
                    }
                ),*]
            }
            fn from_dict(
                dict: &$crate::Dict<'f>,
                cx: &mut $crate::attr::FieldCx<'_>,
            ) -> ::core::option::Option<Self> {
                $(
                    let $field: ::core::option::Option<$fty> =
                        cx.field(
                            dict,
                            $crate::attr::field_name(::core::stringify!($field)),
                            $crate::__default!($($default)?),
                        );
                )*
                ::core::option::Option::Some($name { $( $field: $field?, )* })
            }
        }

        impl<'f> $crate::FromAttr<'f> for $name {
            fn type_name() -> $crate::__private::String {
                $crate::__private::String::from("dict")
            }
            fn expected() -> $crate::__private::String {
                $crate::__private::format!(
                    "a dictionary with keys {}",
                    <Self as $crate::FromAttrs<'f>>::NAMES.join(", ")
                )
            }
            fn from_attr(
                value: &$crate::AttrValue<'f>,
            ) -> ::core::result::Result<Self, $crate::__private::String> {
                $crate::attr::struct_from_dict(value)
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __default {
    () => {
        ::core::option::Option::None
    };
    ($e:expr) => {
        ::core::option::Option::Some($e)
    };
}

/// The Rust name of an element dtype, for declarations: `f64`, `i32`, `bool`.
fn short_name(d: DataType) -> &'static str {
    match d {
        DataType::PRED => "bool",
        DataType::S8 => "i8",
        DataType::S16 => "i16",
        DataType::S32 => "i32",
        DataType::S64 => "i64",
        DataType::U8 => "u8",
        DataType::U16 => "u16",
        DataType::U32 => "u32",
        DataType::U64 => "u64",
        DataType::F16 => "f16",
        DataType::BF16 => "bf16",
        DataType::F32 => "f32",
        DataType::F64 => "f64",
        _ => d.name(),
    }
}

// Debug: what a test or a log line needs (kind, dtype, value or length), read through
// the same checked accessors as the handler's own code.
impl fmt::Debug for AttrValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrValue::Scalar(s) => f.debug_tuple("Scalar").field(s).finish(),
            AttrValue::Array(a) => f.debug_tuple("Array").field(a).finish(),
            AttrValue::String(s) => f.debug_tuple("String").field(&String::from_utf8_lossy(s)).finish(),
            AttrValue::Dict(d) => f.debug_tuple("Dict").field(d).finish(),
        }
    }
}

impl fmt::Debug for Scalar<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scalar").field("dtype", &self.dtype).field("value", &self.number()).finish()
    }
}

impl fmt::Debug for Array<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Array").field("dtype", &self.dtype).field("len", &self.len).finish()
    }
}

impl fmt::Debug for Dict<'_> {
    /// The entries, name to value (nested dictionaries included).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (i, name) in self.names().enumerate() {
            map.entry(&name, &self.value_at(i));
        }
        map.finish()
    }
}
