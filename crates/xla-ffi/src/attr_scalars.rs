//! Attribute types beyond plain numbers: complex scalars (`ffi.h` decodes
//! `std::complex<float>` and `std::complex<double>` attributes), pointers passed
//! as 64-bit integers (`ffi.h`'s `Pointer<T>`), and any attribute as an
//! [`AttrValue`] (for `ffi.h`'s `std::variant<...>` attributes: match on it).

use core::marker::PhantomData;

use num_complex::Complex;

use crate::attr::{single_number, AttrValue, FromAttr, Number};
use crate::dtype::DataType;

/// Reads a complex scalar of dtype `want` (C64 or C128) as `T`.
fn complex_scalar<T: Copy>(value: &AttrValue<'_>, want: DataType, what: &str) -> Result<T, String> {
    match value {
        AttrValue::Scalar(s) if s.dtype() == want && !s.value_ptr().is_null() => {
            // SAFETY: XLA's scalar of dtype C64 (C128) points to one
            // `complex<float>` (`complex<double>`): two f32s (f64s), the layout of
            // `Complex<f32>` (`Complex<f64>`), alive for the call; the read makes
            // no alignment claim.
            Ok(unsafe { (s.value_ptr() as *const T).read_unaligned() })
        }
        other => Err(format!("expected {what}, got {other}")),
    }
}

/// A complex64 scalar attribute (exact dtype, as `ffi.h`). JAX's `ffi_call`
/// cannot lower complex attributes (`TypeError: Unsupported scalar attribute
/// type`); other XLA front ends can.
impl<'f> FromAttr<'f> for Complex<f32> {
    fn expected() -> String {
        "a complex64 scalar".into()
    }
    fn type_name() -> String {
        "complex64".into()
    }
    fn from_attr(value: &AttrValue<'f>) -> Result<Self, String> {
        complex_scalar(value, DataType::C64, &Self::expected())
    }
}

/// A complex128 scalar attribute; a complex64 one widens exactly.
impl<'f> FromAttr<'f> for Complex<f64> {
    fn expected() -> String {
        "a complex128 (or complex64) scalar".into()
    }
    fn type_name() -> String {
        "complex128".into()
    }
    fn from_attr(value: &AttrValue<'f>) -> Result<Self, String> {
        match complex_scalar::<Complex<f32>>(value, DataType::C64, "") {
            Ok(c) => Ok(Complex::new(c.re as f64, c.im as f64)),
            Err(_) => complex_scalar(value, DataType::C128, &Self::expected()),
        }
    }
}

/// An address passed as a 64-bit integer attribute (`ffi.h`'s `Pointer<T>`), e.g.
/// a host object's address from Python's `ctypes.addressof`.
///
/// Decoding checks only that the integer is a non-negative address that fits a
/// pointer; what it points to is the caller's promise, so reading through it is
/// the handler's own `unsafe`. Prefer [`UserData<T>`](crate::UserData) or
/// [`State<S>`](crate::State), which are typed.
///
/// ```
/// use xla_ffi::testing::{AttrArg, CallBuilder};
/// use xla_ffi::{handler, Attr, Pointer, Result};
///
/// #[handler(target = "demo.pointer")]
/// fn demo_pointer(table: Attr<Pointer<[f32; 4]>>) -> Result<()> {
///     assert_eq!(table.addr(), 0x1000);
///     assert!(!table.as_ptr().is_null());
///     Ok(())
/// }
///
/// CallBuilder::new().attr("table", AttrArg::scalar(0x1000i64)).run(DEMO_POINTER).unwrap();
/// let (_, msg) = CallBuilder::new().attr("table", AttrArg::scalar(-8i64)).run(DEMO_POINTER).unwrap_err();
/// assert!(msg.contains("attribute `table`: expected an address (a non-negative 64-bit integer), got -8"));
/// ```
pub struct Pointer<T: ?Sized> {
    addr: usize,
    _to: PhantomData<fn() -> *const T>,
}

impl<T: ?Sized> Clone for Pointer<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: ?Sized> Copy for Pointer<T> {}

impl<T: ?Sized> core::fmt::Debug for Pointer<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Pointer({:#x})", self.addr)
    }
}

impl<T> Pointer<T> {
    /// The address.
    pub fn addr(&self) -> usize {
        self.addr
    }
    /// The address as `*const T` (exposing its provenance: it came from outside).
    pub fn as_ptr(&self) -> *const T {
        core::ptr::with_exposed_provenance(self.addr)
    }
    /// The address as `*mut T`.
    pub fn as_mut_ptr(&self) -> *mut T {
        core::ptr::with_exposed_provenance_mut(self.addr)
    }
}

impl<'f, T> FromAttr<'f> for Pointer<T> {
    fn expected() -> String {
        "an address (a non-negative 64-bit integer)".into()
    }
    fn type_name() -> String {
        "pointer".into()
    }
    fn from_attr(value: &AttrValue<'f>) -> Result<Self, String> {
        match single_number(value) {
            Some(Number::Int(v)) => match usize::try_from(v) {
                Ok(addr) => Ok(Pointer { addr, _to: PhantomData }),
                Err(_) => Err(format!("expected {}, got {v}", Self::expected())),
            },
            _ => Err(format!("expected {}, got {value}", Self::expected())),
        }
    }
}

/// Any attribute, as it came: a scalar, an array, a string or a dictionary. Take
/// `Attr<AttrValue>` where `ffi.h` takes a `std::variant<...>` attribute, and match
/// on the kind (or try [`FromAttr`] types in turn).
///
/// ```
/// use xla_ffi::testing::{AttrArg, CallBuilder};
/// use xla_ffi::{handler, Attr, AttrValue, FromAttr, Result};
///
/// #[handler(target = "demo.variant")]
/// fn demo_variant(size: Attr<AttrValue>) -> Result<()> {
///     let n = match &*size {
///         AttrValue::String(b) => b.len() as i64,
///         other => i64::from_attr(other).map_err(xla_ffi::Error::invalid_argument)?,
///     };
///     assert_eq!(n, 3);
///     Ok(())
/// }
///
/// CallBuilder::new().attr("size", AttrArg::scalar(3i64)).run(DEMO_VARIANT).unwrap();
/// CallBuilder::new().attr("size", AttrArg::Str("abc".into())).run(DEMO_VARIANT).unwrap();
/// ```
impl<'f> FromAttr<'f> for AttrValue<'f> {
    fn expected() -> String {
        "any attribute".into()
    }
    fn from_attr(value: &AttrValue<'f>) -> Result<Self, String> {
        Ok(*value)
    }
}
