//! Element types: XLA's `XLA_FFI_DataType` codes, the Rust types that match them
//! ([`Element`]), and [`dispatch_float!`](crate::dispatch_float) and
//! [`dispatch_complex!`](crate::dispatch_complex) from a float or complex code to its
//! Rust type.
//!
//! Arithmetic over those types (widening, accumulators) is the kernels' business, not
//! the FFI's: `xla-ffi-rs-ops` has its own `Float` trait, and a plugin can use
//! `num_traits::Float` (`half` implements it with its `num-traits` feature) or its own.

use core::fmt;
use half::{bf16, f16};
use num_complex::Complex;
use xla_ffi_sys as sys;

/// An XLA element type, as the runtime reports it for a buffer or attribute.
///
/// This is a plain code, not a Rust `enum`, so a type this crate does not know
/// (a newer FP8 format, say) is a value like any other and prints as `dtype(N)`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataType(pub u32);

/// The constants of the codes XLA's header names. A name is the one of
/// `xla_ffi_rules::DTYPES`, the list the `#[handler]` macro's dtype rules also read,
/// checked at compile time (`invalid` is not a dtype of the notation), and that list
/// has no code without a constant here.
macro_rules! dtypes {
    ($($name:ident = $sys:ident, $text:literal;)*) => {
        impl DataType {
            $(
                #[doc = concat!("`", $text, "`")]
                pub const $name: DataType = DataType(sys::$sys as u32);
            )*
            /// The name NumPy, `ml_dtypes` and `jax.numpy` give the type (`float32`,
            /// `bfloat16`, `float8_e4m3fn`, `int4`, ...): `xla_ffi_rules::DTYPES`'s;
            /// `invalid` for [`INVALID`](Self::INVALID), `unknown` for a code XLA's
            /// header does not name.
            pub fn name(self) -> &'static str {
                if self == Self::INVALID {
                    return "invalid";
                }
                match xla_ffi_rules::DTYPES.iter().find(|&&(_, code)| code == self.0) {
                    Some(&(name, _)) => name,
                    None => "unknown",
                }
            }
        }
        $(const _: () = assert!(
            str_eq($text, "invalid") || listed($text, DataType::$name.0),
            concat!("`", $text, "` is not xla_ffi_rules::DTYPES's name of its code"),
        );)*
        // Each constant but INVALID is listed, by a code of its own: as many as listed.
        const _: () = assert!(
            [$($text),*].len() - 1 == xla_ffi_rules::DTYPES.len(),
            "xla_ffi_rules::DTYPES lists a code without a DataType constant",
        );
    };
}

/// Whether `xla_ffi_rules::DTYPES` lists `name` with `code`.
const fn listed(name: &str, code: u32) -> bool {
    let mut i = 0;
    while i < xla_ffi_rules::DTYPES.len() {
        if xla_ffi_rules::DTYPES[i].1 == code && str_eq(xla_ffi_rules::DTYPES[i].0, name) {
            return true;
        }
        i += 1;
    }
    false
}

/// `a == b` in a const context.
pub(crate) const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

dtypes! {
    INVALID = XLA_FFI_DataType_INVALID, "invalid";
    PRED = XLA_FFI_DataType_PRED, "bool";
    S8 = XLA_FFI_DataType_S8, "int8";
    S16 = XLA_FFI_DataType_S16, "int16";
    S32 = XLA_FFI_DataType_S32, "int32";
    S64 = XLA_FFI_DataType_S64, "int64";
    U8 = XLA_FFI_DataType_U8, "uint8";
    U16 = XLA_FFI_DataType_U16, "uint16";
    U32 = XLA_FFI_DataType_U32, "uint32";
    U64 = XLA_FFI_DataType_U64, "uint64";
    F16 = XLA_FFI_DataType_F16, "float16";
    F32 = XLA_FFI_DataType_F32, "float32";
    F64 = XLA_FFI_DataType_F64, "float64";
    BF16 = XLA_FFI_DataType_BF16, "bfloat16";
    C64 = XLA_FFI_DataType_C64, "complex64";
    C128 = XLA_FFI_DataType_C128, "complex128";
    TOKEN = XLA_FFI_DataType_TOKEN, "token";
    F8E5M2 = XLA_FFI_DataType_F8E5M2, "float8_e5m2";
    F8E4M3FN = XLA_FFI_DataType_F8E4M3FN, "float8_e4m3fn";
    S4 = XLA_FFI_DataType_S4, "int4";
    U4 = XLA_FFI_DataType_U4, "uint4";
    F8E4M3B11FNUZ = XLA_FFI_DataType_F8E4M3B11FNUZ, "float8_e4m3b11fnuz";
    F8E5M2FNUZ = XLA_FFI_DataType_F8E5M2FNUZ, "float8_e5m2fnuz";
    F8E4M3FNUZ = XLA_FFI_DataType_F8E4M3FNUZ, "float8_e4m3fnuz";
    S2 = XLA_FFI_DataType_S2, "int2";
    U2 = XLA_FFI_DataType_U2, "uint2";
    F8E4M3 = XLA_FFI_DataType_F8E4M3, "float8_e4m3";
    F8E3M4 = XLA_FFI_DataType_F8E3M4, "float8_e3m4";
    S1 = XLA_FFI_DataType_S1, "int1";
    U1 = XLA_FFI_DataType_U1, "uint1";
    F4E2M1FN = XLA_FFI_DataType_F4E2M1FN, "float4_e2m1fn";
    F8E8M0FNU = XLA_FFI_DataType_F8E8M0FNU, "float8_e8m0fnu";
}

impl DataType {
    /// Bytes per element, as XLA's `ffi.h` counts them: 1 for the FP8/FP4 and
    /// sub-byte types (a byte each, or less when packed: never more), 0 for tokens;
    /// `None` for `INVALID` and codes this crate does not know, whose memory must be
    /// assumed to be anywhere.
    #[inline]
    pub fn byte_width(self) -> Option<usize> {
        // One load from a table (made at compile time by `width_of`), not a match:
        // every buffer of every call asks.
        match BYTE_WIDTHS.get(self.0 as usize) {
            Some(&w) if w != NO_WIDTH => Some(w as usize),
            _ => None,
        }
    }

    /// Whether this is one of the floating types [`AnyFloat`](crate::AnyFloat) accepts:
    /// [`FLOATS`](Self::FLOATS).
    #[inline]
    pub fn is_float(self) -> bool {
        Self::FLOATS.contains(&self)
    }

    /// Whether this is one of the complex types [`AnyComplex`](crate::AnyComplex)
    /// accepts: [`COMPLEXES`](Self::COMPLEXES).
    #[inline]
    pub fn is_complex(self) -> bool {
        Self::COMPLEXES.contains(&self)
    }

    /// The floating types [`AnyFloat`](crate::AnyFloat) accepts and
    /// [`dispatch_float!`](crate::dispatch_float) dispatches on, in the notation's
    /// order: the one list of them (`AnyFloat::DTYPES`, its message and
    /// `xla_ffi_rs._native.kernel_floats()` read it).
    pub const FLOATS: [DataType; 4] = [Self::F16, Self::BF16, Self::F32, Self::F64];

    /// The complex types [`AnyComplex`](crate::AnyComplex) accepts and
    /// [`dispatch_complex!`](crate::dispatch_complex) dispatches on.
    pub const COMPLEXES: [DataType; 2] = [Self::C64, Self::C128];
}

/// `dtypes` for a message, as [`ElementSpec::describe`](crate::ElementSpec::describe)
/// and the handlers' checks say them: "float16, bfloat16, float32 or float64",
/// "complex64", "nothing".
///
/// ```
/// use xla_ffi::{decl::describe_dtypes, DataType};
/// assert_eq!(describe_dtypes(&[DataType::F32, DataType::F8E4M3FN]), "float32 or float8_e4m3fn");
/// ```
pub fn describe(dtypes: &[DataType]) -> String {
    let names: Vec<&str> = dtypes.iter().map(|d| d.name()).collect();
    match names.split_last() {
        None => "nothing".into(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// [`DataType::byte_width`] by code, for the codes below [`BYTE_WIDTHS`]'s length;
/// [`NO_WIDTH`] where the width is unknown.
const BYTE_WIDTHS: [u8; 64] = {
    let mut table = [NO_WIDTH; 64];
    let mut code = 0;
    while code < table.len() {
        table[code] = width_of(DataType(code as u32));
        code += 1;
    }
    table
};

/// The mark of an unknown width in [`BYTE_WIDTHS`].
const NO_WIDTH: u8 = u8::MAX;

/// No [`DataType::byte_width`] is larger (checked over the table at compile time).
pub(crate) const MAX_BYTE_WIDTH: usize = 16;

const _: () = {
    let mut code = 0;
    while code < BYTE_WIDTHS.len() {
        let w = BYTE_WIDTHS[code];
        assert!(w == NO_WIDTH || w as usize <= MAX_BYTE_WIDTH);
        code += 1;
    }
};

/// The width table's one source: bytes per element, or [`NO_WIDTH`].
const fn width_of(dtype: DataType) -> u8 {
    match dtype {
        DataType::TOKEN => 0,
        DataType::PRED | DataType::S8 | DataType::U8 => 1,
        DataType::F8E5M2 | DataType::F8E4M3FN | DataType::F8E4M3B11FNUZ | DataType::F8E5M2FNUZ => 1,
        DataType::F8E4M3FNUZ | DataType::F8E4M3 | DataType::F8E3M4 | DataType::F8E8M0FNU | DataType::F4E2M1FN => 1,
        DataType::S4 | DataType::U4 | DataType::S2 | DataType::U2 | DataType::S1 | DataType::U1 => 1,
        DataType::S16 | DataType::U16 | DataType::F16 | DataType::BF16 => 2,
        DataType::S32 | DataType::U32 | DataType::F32 => 4,
        DataType::S64 | DataType::U64 | DataType::F64 | DataType::C64 => 8,
        DataType::C128 => 16,
        _ => NO_WIDTH,
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            "unknown" => write!(f, "dtype({})", self.0),
            n => f.write_str(n),
        }
    }
}

impl fmt::Debug for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// An element of a PRED (boolean) buffer or attribute: one byte, true when non-zero.
///
/// XLA passes PRED bytes through unchanged, so a PRED buffer may hold any byte
/// (`np.frombuffer(b"\x02", np.bool_)` reaches a handler as 2). A Rust `bool`
/// holding 2 is undefined behaviour, so PRED is never viewed as `bool`: read it
/// with [`Pred::get`], which is `byte != 0`, as numpy and XLA read it.
///
/// ```
/// use xla_ffi::Pred;
/// let bytes = [Pred::from(true), Pred::from(false), Pred::from_byte(2)];
/// assert_eq!(bytes.map(|b| b.get()), [true, false, true]);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Pred(u8);

impl Pred {
    /// The element holding `byte` (any value: non-zero is true).
    pub const fn from_byte(byte: u8) -> Self {
        Pred(byte)
    }
    /// The truth value: `byte != 0`.
    pub const fn get(self) -> bool {
        self.0 != 0
    }
    /// The raw byte.
    pub const fn byte(self) -> u8 {
        self.0
    }
}

impl From<bool> for Pred {
    fn from(b: bool) -> Self {
        Pred(b as u8)
    }
}

impl From<Pred> for bool {
    fn from(p: Pred) -> bool {
        p.get()
    }
}

impl fmt::Debug for Pred {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.get(), f)
    }
}

/// A Rust type whose values can be viewed directly in an XLA buffer.
///
/// Implemented for [`Pred`] (PRED), the signed and unsigned integers, `f16`, `bf16`,
/// `f32`, `f64`, and [`Complex<f32>`](num_complex::Complex) (complex64) and
/// `Complex<f64>` (complex128): plain types without padding, of the size XLA gives
/// the dtype, for which every bit pattern is a valid value, since XLA hands over
/// whatever bytes the buffer holds. Not for `bool`. Sealed: the set is XLA's, not
/// ours to extend.
///
/// `num_complex::Complex<T>` is `#[repr(C)] { re: T, im: T }`, the layout of C's
/// `float _Complex` and C++'s `std::complex<float>` that XLA stores (real part
/// first), with the alignment of `T`; the crate is re-exported as
/// [`xla_ffi::num_complex`](crate::num_complex).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an XLA element type",
    label = "not an element type",
    note = "element types: Pred (PRED: a byte, which may hold values other than 0 and 1, so never `bool`), \
            i8..i64, u8..u64, half::f16, half::bf16, f32, f64, Complex<f32>, Complex<f64>; for a buffer of \
            any float, complex or dtype: AnyFloat, AnyComplex, AnyType"
)]
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The XLA type code of `Self`.
    const DTYPE: DataType;
}

macro_rules! elements {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const DTYPE: DataType = DataType::$d; }
    )*};
}
elements!(Pred => PRED, i8 => S8, i16 => S16, i32 => S32, i64 => S64,
          u8 => U8, u16 => U16, u32 => U32, u64 => U64,
          f16 => F16, bf16 => BF16, f32 => F32, f64 => F64,
          Complex<f32> => C64, Complex<f64> => C128);

// The buffer views make `&[T]` of `len * byte_width` bytes: the Rust type must be
// exactly the dtype's width, with no padding, for every `Element`.
const _: () = {
    assert!(core::mem::size_of::<Complex<f32>>() == 8 && core::mem::align_of::<Complex<f32>>() == 4);
    assert!(core::mem::size_of::<Complex<f64>>() == 16 && core::mem::align_of::<Complex<f64>>() == 8);
};

/// Calls a generic function with the Rust type that matches a float [`DataType`].
///
/// `$T` is bound to `f16`, `bf16`, `f32` or `f64` in turn, and the body is
/// monomorphised for each. A non-float dtype evaluates the `else` arm.
///
/// ```
/// use xla_ffi::{dispatch_float, DataType, Element};
/// fn width<T: Element>() -> usize { core::mem::size_of::<T>() }
/// let w = dispatch_float!(DataType::BF16, T => width::<T>(), else d => panic!("{d}"));
/// assert_eq!(w, 2);
/// ```
#[macro_export]
macro_rules! dispatch_float {
    ($dtype:expr, $T:ident => $body:expr, else $d:ident => $other:expr) => {
        match $dtype {
            $crate::DataType::F32 => {
                type $T = ::core::primitive::f32;
                $body
            }
            $crate::DataType::F64 => {
                type $T = ::core::primitive::f64;
                $body
            }
            $crate::DataType::F16 => {
                type $T = $crate::half::f16;
                $body
            }
            $crate::DataType::BF16 => {
                type $T = $crate::half::bf16;
                $body
            }
            $d => $other,
        }
    };
}

/// Calls a generic function with the Rust type that matches a complex [`DataType`].
///
/// `$T` is bound to `Complex<f32>` (complex64) or `Complex<f64>` (complex128) in
/// turn, and the body is monomorphised for each; pair it with
/// [`AnyComplex`](crate::AnyComplex). Any other dtype evaluates the `else` arm.
///
/// ```
/// use xla_ffi::num_complex::Complex;
/// use xla_ffi::testing::{Arg, CallBuilder};
/// use xla_ffi::{dispatch_complex, handler, AnyComplex, Buffer, Element, InOut, Result, ResultBuffer, ANY_RANK};
///
/// trait Conj: Element {
///     fn conj(self) -> Self;
/// }
/// impl Conj for Complex<f32> {
///     fn conj(self) -> Self { Complex::conj(&self) }
/// }
/// impl Conj for Complex<f64> {
///     fn conj(self) -> Self { Complex::conj(&self) }
/// }
///
/// fn conj<T: Conj>(x: &Buffer<AnyComplex>, y: &mut ResultBuffer<AnyComplex>) -> Result<()> {
///     match y.with_input::<T, _, ANY_RANK>(x)? {
///         InOut::Separate { input, output } => {
///             for (o, &v) in output.iter_mut().zip(input) {
///                 o.write(v.conj());
///             }
///         }
///         InOut::InPlace(xy) => xy.iter_mut().for_each(|v| *v = v.conj()),
///     }
///     Ok(())
/// }
///
/// /// y = conj(x), in complex64 or complex128; in place when XLA aliases y to x.
/// #[handler(target = "demo.conj", dtypes = "T -> T")]
/// fn demo_conj(x: Buffer<AnyComplex>, mut y: ResultBuffer<AnyComplex>) -> Result<()> {
///     y.expect_dims(x.dims(), "the shape of x")?;
///     dispatch_complex!(x.dtype(), T => conj::<T>(&x, &mut y), else d => Err(x.error(format!("unexpected {d}"))))
/// }
///
/// let x = [Complex::new(1.0f64, 2.0), Complex::new(-3.0, 0.5)];
/// let mut call = CallBuilder::new().arg(Arg::from_slice(&x, &[2])).ret(Arg::zeros::<Complex<f64>>(&[2]));
/// call.run(DEMO_CONJ).unwrap();
/// assert_eq!(call.ret_as::<Complex<f64>>(0), vec![Complex::new(1.0, -2.0), Complex::new(-3.0, -0.5)]);
/// ```
#[macro_export]
macro_rules! dispatch_complex {
    ($dtype:expr, $T:ident => $body:expr, else $d:ident => $other:expr) => {
        match $dtype {
            $crate::DataType::C64 => {
                type $T = $crate::num_complex::Complex<::core::primitive::f32>;
                $body
            }
            $crate::DataType::C128 => {
                type $T = $crate::num_complex::Complex<::core::primitive::f64>;
                $body
            }
            $d => $other,
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dtype `dispatch_float!` binds for `d`, if any.
    fn float_dispatch(d: DataType) -> Option<DataType> {
        crate::dispatch_float!(d, T => Some(<T as Element>::DTYPE), else _d => None)
    }

    fn complex_dispatch(d: DataType) -> Option<DataType> {
        crate::dispatch_complex!(d, T => Some(<T as Element>::DTYPE), else _d => None)
    }

    #[test]
    fn float_and_complex_lists_match_the_dispatch_macros() {
        for &(name, code) in xla_ffi_rules::DTYPES.iter() {
            let d = DataType(code);
            assert_eq!(d.name(), name);
            assert_eq!(float_dispatch(d).is_some(), DataType::FLOATS.contains(&d), "{name}");
            assert_eq!(complex_dispatch(d).is_some(), DataType::COMPLEXES.contains(&d), "{name}");
        }
        for d in DataType::FLOATS {
            assert_eq!(float_dispatch(d), Some(d));
            assert!(d.is_float() && !d.is_complex());
        }
        for d in DataType::COMPLEXES {
            assert_eq!(complex_dispatch(d), Some(d));
            assert!(d.is_complex() && !d.is_float());
        }
        assert_eq!(describe(&DataType::FLOATS), "float16, bfloat16, float32 or float64");
        assert_eq!(describe(&DataType::COMPLEXES), "complex64 or complex128");
        assert_eq!(describe(&[]), "nothing");
    }
}
