//! Complex scalar attributes and pointer attributes (`ffi.h`'s
//! `std::complex<T>` attributes and `Pointer<T>`).

mod common;

use common::{expect_err, expect_ok};
use xla_ffi::num_complex::Complex;
use xla_ffi::testing::{AttrArg, CallBuilder};
use xla_ffi::{handler, Attr, ErrorCode, Pointer, Result};

#[handler(target = "as.complex")]
fn as_complex(a: Attr<Complex<f32>>, b: Attr<Complex<f64>>) -> Result<()> {
    assert_eq!(*a, Complex::new(1.5, -2.0));
    assert_eq!(*b, Complex::new(0.25, 3.0));
    Ok(())
}

#[test]
fn complex_scalars_decode_exactly() {
    let call = || CallBuilder::new().attr("a", AttrArg::scalar(Complex::new(1.5f32, -2.0)));
    expect_ok(call().attr("b", AttrArg::scalar(Complex::new(0.25f64, 3.0))).run(AS_COMPLEX));
    // complex64 widens to complex128 exactly.
    expect_ok(call().attr("b", AttrArg::scalar(Complex::new(0.25f32, 3.0))).run(AS_COMPLEX));
    // A float is not a complex, nor a complex128 a complex64.
    expect_err(
        call().attr("b", AttrArg::scalar(0.25f64)).run(AS_COMPLEX),
        ErrorCode::InvalidArgument,
        &["as.complex: attribute `b`: expected a complex128 (or complex64) scalar, got float64 scalar 0.25"],
    );
    expect_err(
        CallBuilder::new()
            .attr("a", AttrArg::scalar(Complex::new(1.5f64, -2.0)))
            .attr("b", AttrArg::scalar(Complex::new(0.25f64, 3.0)))
            .run(AS_COMPLEX),
        ErrorCode::InvalidArgument,
        &["attribute `a`: expected a complex64 scalar, got complex128 scalar"],
    );
}

#[handler(target = "as.pointer")]
fn as_pointer(p: Attr<Pointer<u64>>) -> Result<()> {
    // Only an address: reading through it would be the handler's own `unsafe`.
    assert_eq!(p.addr(), 0x2000);
    assert_eq!(p.as_ptr() as usize, 0x2000);
    Ok(())
}

#[test]
fn pointers_are_non_negative_integers() {
    expect_ok(CallBuilder::new().attr("p", AttrArg::scalar(0x2000i64)).run(AS_POINTER));
    expect_ok(CallBuilder::new().attr("p", AttrArg::scalar(0x2000u64)).run(AS_POINTER));
    for bad in [AttrArg::scalar(-1i64), AttrArg::scalar(1.5f64)] {
        expect_err(
            CallBuilder::new().attr("p", bad).run(AS_POINTER),
            ErrorCode::InvalidArgument,
            &["as.pointer: attribute `p`: expected an address (a non-negative 64-bit integer), got"],
        );
    }
}
