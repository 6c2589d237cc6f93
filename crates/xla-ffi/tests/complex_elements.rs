//! complex64 and complex128 elements (`Complex<f32>`, `Complex<f64>`): every path
//! that takes a typed buffer (static element type, `typed`, `AnyComplex` with
//! `dispatch_complex!`, in-place aliasing, bytes), and the checks on each.

mod common;

use common::{expect_err, expect_ok};
use xla_ffi::decl::{infer, ProblemKind};
use xla_ffi::num_complex::Complex;
use xla_ffi::testing::{Arg, AttrArg, CallBuilder};
use xla_ffi::{
    dispatch_complex, handler, AnyComplex, Attr, Buffer, DataType, Element, ErrorCode, InOut, Result, ResultBuffer,
    ANY_RANK,
};

type C32 = Complex<f32>;
type C64 = Complex<f64>;

/// The product written out by hand, independent of num-complex's `Mul`.
fn mul_ref(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

/// out = x * w, complex64.
#[handler(target = "cx.mul")]
fn cx_mul(x: Buffer<C32>, w: Buffer<C32, 1>, mut out: ResultBuffer<C32>) -> Result<()> {
    let (x, w) = (x.as_slice()?, w.as_slice()?);
    for ((o, &a), &b) in out.as_uninit()?.iter_mut().zip(x).zip(w) {
        o.write(a * b);
    }
    Ok(())
}

#[test]
fn complex64_typed_operands_and_result() {
    let x = [C32::new(1.0, 2.0), C32::new(-0.5, 3.0), C32::new(0.0, -1.0)];
    let w = [C32::new(2.0, -1.0), C32::new(4.0, 0.25), C32::new(-1.0, 0.0)];
    let mut call =
        CallBuilder::new().arg(Arg::from_slice(&x, &[3])).arg(Arg::from_slice(&w, &[3])).ret(Arg::zeros::<C32>(&[3]));
    expect_ok(call.run(CX_MUL));
    let got = call.ret_as::<C32>(0);
    for ((g, a), b) in got.iter().zip(x).zip(w) {
        let (re, im) = mul_ref((a.re as f64, a.im as f64), (b.re as f64, b.im as f64));
        assert_eq!((g.re as f64, g.im as f64), (re, im));
    }
    // Stored as XLA stores complex64: real then imaginary, little-endian f32 each.
    let mut bytes = 1.0f32.to_le_bytes().to_vec();
    bytes.extend(2.0f32.to_le_bytes());
    assert_eq!(&Arg::from_slice(&x[..1], &[1]).bytes()[..8], &bytes[..]);
}

#[test]
fn complex64_parameter_refuses_complex128_and_float32() {
    let mut call = CallBuilder::new()
        .arg(Arg::from_slice(&[C64::new(1.0, 0.0)], &[1]))
        .arg(Arg::from_slice(&[1.0f32, 0.0], &[2]))
        .ret(Arg::zeros::<C32>(&[1]));
    let msg = expect_err(call.run(CX_MUL), ErrorCode::InvalidArgument, &["cx.mul", "operand 0 (x)"]);
    assert!(msg.contains("expected dtype complex64, got complex128"), "{msg}");
    assert!(msg.contains("operand 1 (w): expected dtype complex64, got float32"), "{msg}");
}

#[test]
fn complex_rank_is_checked() {
    let mut call = CallBuilder::new()
        .arg(Arg::from_slice(&[C32::new(1.0, 0.0)], &[1, 1]))
        .arg(Arg::from_slice(&[C32::new(1.0, 0.0)], &[1, 1]))
        .ret(Arg::zeros::<C32>(&[1, 1]));
    expect_err(call.run(CX_MUL), ErrorCode::InvalidArgument, &["cx.mul", "operand 1 (w): expected rank 1, got rank 2"]);
}

/// y = x * i, complex128, through `typed` / `typed_uninit` on untyped buffers.
#[handler(target = "cx.rot")]
fn cx_rot(x: Buffer, mut y: ResultBuffer) -> Result<()> {
    let x = x.typed::<C64>()?;
    for (o, &v) in y.typed_uninit::<C64>()?.iter_mut().zip(x) {
        o.write(C64::new(-v.im, v.re));
    }
    Ok(())
}

#[test]
fn complex128_through_typed() {
    let x = [C64::new(1.5, -2.0), C64::new(f64::MAX, f64::MIN_POSITIVE)];
    let mut call = CallBuilder::new().arg(Arg::from_slice(&x, &[2])).ret(Arg::zeros::<C64>(&[2]));
    expect_ok(call.run(CX_ROT));
    assert_eq!(call.ret_as::<C64>(0), vec![C64::new(2.0, 1.5), C64::new(-f64::MIN_POSITIVE, f64::MAX)]);
}

#[test]
fn typed_with_the_other_complex_width_is_an_error() {
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[C32::new(1.0, 2.0)], &[1])).ret(Arg::zeros::<C64>(&[1]));
    expect_err(call.run(CX_ROT), ErrorCode::InvalidArgument, &["cx.rot", "operand 0", "is complex64, not complex128"]);
}

#[test]
fn misaligned_complex128_is_an_error_but_complex64_needs_only_4_bytes() {
    let mut call =
        CallBuilder::new().arg(Arg::from_slice(&[C64::new(1.0, 2.0)], &[1]).misaligned(4)).ret(Arg::zeros::<C64>(&[1]));
    expect_err(call.run(CX_ROT), ErrorCode::InvalidArgument, &["cx.rot", "operand 0", "not aligned to 8 bytes"]);
    let x = [C32::new(1.0, 2.0), C32::new(3.0, 4.0)];
    let mut call = CallBuilder::new()
        .arg(Arg::from_slice(&x, &[2]).misaligned(4))
        .arg(Arg::from_slice(&x, &[2]))
        .ret(Arg::zeros::<C32>(&[2]).misaligned(4));
    expect_ok(call.run(CX_MUL));
}

trait Conj: Element {
    fn conj(self) -> Self;
}
impl Conj for C32 {
    fn conj(self) -> Self {
        Complex::conj(&self)
    }
}
impl Conj for C64 {
    fn conj(self) -> Self {
        Complex::conj(&self)
    }
}

fn conj<T: Conj>(x: &Buffer<AnyComplex>, y: &mut ResultBuffer<AnyComplex>) -> Result<()> {
    match y.with_input::<T, _, ANY_RANK>(x)? {
        InOut::Separate { input, output } => {
            for (o, &v) in output.iter_mut().zip(input) {
                o.write(v.conj());
            }
        }
        InOut::InPlace(xy) => xy.iter_mut().for_each(|v| *v = v.conj()),
    }
    Ok(())
}

/// y = conj(x) for either complex type; in place when aliased.
#[handler(target = "cx.conj")]
fn cx_conj(x: Buffer<AnyComplex>, mut y: ResultBuffer<AnyComplex>) -> Result<()> {
    y.expect_dims(x.dims(), "the shape of x")?;
    dispatch_complex!(x.dtype(), T => conj::<T>(&x, &mut y), else d => Err(x.error(format!("unreachable {d}"))))
}

#[test]
fn any_complex_dispatches_both_widths_separate_and_in_place() {
    let x32 = [C32::new(1.0, 2.0), C32::new(-3.0, -4.0)];
    let x64 = [C64::new(0.5, -0.25), C64::new(0.0, 7.0), C64::new(-1.0, 0.0)];
    let want32: Vec<C32> = x32.iter().map(|v| C32::new(v.re, -v.im)).collect();
    let want64: Vec<C64> = x64.iter().map(|v| C64::new(v.re, -v.im)).collect();

    let mut call = CallBuilder::new().arg(Arg::from_slice(&x32, &[2])).ret(Arg::zeros::<C32>(&[2]));
    expect_ok(call.run(CX_CONJ));
    assert_eq!(call.ret_as::<C32>(0), want32);
    assert_eq!(call.arg_as::<C32>(0), x32, "the operand is unchanged");

    let mut call = CallBuilder::new().arg(Arg::from_slice(&x64, &[3])).ret(Arg::zeros::<C64>(&[3]));
    expect_ok(call.run(CX_CONJ));
    assert_eq!(call.ret_as::<C64>(0), want64);

    let mut call = CallBuilder::new().arg(Arg::from_slice(&x32, &[2])).ret(Arg::zeros::<C32>(&[2])).alias(0, 0);
    expect_ok(call.run(CX_CONJ));
    assert_eq!(call.arg_as::<C32>(0), want32);

    let mut call = CallBuilder::new().arg(Arg::from_slice(&x64, &[3])).ret(Arg::zeros::<C64>(&[3])).alias(0, 0);
    expect_ok(call.run(CX_CONJ));
    assert_eq!(call.arg_as::<C64>(0), want64);
}

#[test]
fn any_complex_refuses_real_types() {
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f64], &[1])).ret(Arg::zeros::<f64>(&[1]));
    expect_err(
        call.run(CX_CONJ),
        ErrorCode::InvalidArgument,
        &["cx.conj", "operand 0 (x): expected dtype complex64 or complex128, got float64", "result 0 (y)"],
    );
}

/// As `cx.conj`, without its shape check, so that `with_input` sees the mismatch.
#[handler(target = "cx.conj_unchecked")]
fn cx_conj_unchecked(x: Buffer<AnyComplex>, mut y: ResultBuffer<AnyComplex>) -> Result<()> {
    dispatch_complex!(x.dtype(), T => conj::<T>(&x, &mut y), else d => Err(x.error(format!("unreachable {d}"))))
}

#[test]
fn aliased_complex_of_another_width_is_an_error() {
    // A complex128 operand aliased to a complex64 result of the same 16 bytes.
    let call = || {
        CallBuilder::new().arg(Arg::from_slice(&[C64::new(1.0, 2.0)], &[1])).ret(Arg::zeros::<C32>(&[2])).alias(0, 0)
    };
    expect_err(call().run(CX_CONJ), ErrorCode::InvalidArgument, &["cx.conj", "result 0 (y)", "expected shape [1]"]);
    let mut call = call();
    expect_err(
        call.run(CX_CONJ_UNCHECKED),
        ErrorCode::InvalidArgument,
        &["cx.conj_unchecked", "result 0 (y)", "aliases operand 0 (x) but differs in dtype or size"],
    );
    assert_eq!(call.arg_as::<C64>(0), vec![C64::new(1.0, 2.0)], "nothing was written");
}

/// An aliased result with a static complex type: `with_input` without dispatch.
#[handler(target = "cx.scale_in_place")]
fn cx_scale_in_place(x: Buffer<C64>, mut y: ResultBuffer<C64>, k: Attr<f64>) -> Result<()> {
    match y.with_input::<C64, _, ANY_RANK>(&x)? {
        InOut::Separate { input, output } => {
            for (o, &v) in output.iter_mut().zip(input) {
                o.write(v * *k);
            }
        }
        InOut::InPlace(xy) => xy.iter_mut().for_each(|v| *v *= *k),
    }
    Ok(())
}

#[test]
fn complex_operand_aliased_to_a_result_is_never_a_shared_slice() {
    let x = [C64::new(1.0, -1.0), C64::new(2.0, 0.5)];
    let mut call = CallBuilder::new()
        .arg(Arg::from_slice(&x, &[2]))
        .ret(Arg::zeros::<C64>(&[2]))
        .attr("k", AttrArg::scalar(3.0f64))
        .alias(0, 0);
    expect_ok(call.run(CX_SCALE_IN_PLACE));
    assert_eq!(call.arg_as::<C64>(0), vec![C64::new(3.0, -3.0), C64::new(6.0, 1.5)]);
    // The same aliased frame through `as_slice` is refused, not handed out twice.
    let mut call = CallBuilder::new().arg(Arg::from_slice(&x, &[2])).ret(Arg::zeros::<C64>(&[2])).alias(0, 0);
    expect_err(call.run(CX_ROT), ErrorCode::InvalidArgument, &["cx.rot", "shares memory with result 0"]);
}

/// The bytes of a complex buffer: 8 or 16 per element.
#[handler(target = "cx.bytes")]
fn cx_bytes(x: Buffer<AnyComplex>, mut n: ResultBuffer<u64>) -> Result<()> {
    n.as_uninit()?[0].write(x.as_bytes()?.len() as u64 + 1000 * x.size_bytes() as u64);
    Ok(())
}

#[test]
fn complex_byte_views_and_sizes() {
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[C32::default(); 3], &[3])).ret(Arg::zeros::<u64>(&[]));
    expect_ok(call.run(CX_BYTES));
    assert_eq!(call.ret_as::<u64>(0), vec![24 + 24_000]);
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[C64::default(); 3], &[3])).ret(Arg::zeros::<u64>(&[]));
    expect_ok(call.run(CX_BYTES));
    assert_eq!(call.ret_as::<u64>(0), vec![48 + 48_000]);
}

#[test]
fn complex_element_codes_and_dispatch() {
    assert_eq!(<C32 as Element>::DTYPE, DataType::C64);
    assert_eq!(<C64 as Element>::DTYPE, DataType::C128);
    assert_eq!(DataType::C64.to_string(), "complex64");
    assert!(DataType::C128.is_complex() && !DataType::F64.is_complex());
    let width = |d: DataType| dispatch_complex!(d, T => Some(core::mem::size_of::<T>()), else _d => None);
    assert_eq!(width(DataType::C64), Some(8));
    assert_eq!(width(DataType::C128), Some(16));
    assert_eq!(width(DataType::F32), None);
    assert_eq!(DataType::C64.byte_width(), Some(8));
    assert_eq!(DataType::C128.byte_width(), Some(16));
}

/// A declared op over complex buffers: a shared variable and a fixed complex dtype.
#[handler(target = "cx.decl", shapes = "...b n, n -> ...b", dtypes = "T, T -> complex128")]
fn cx_decl(a: Buffer<AnyComplex>, b: Buffer<AnyComplex>, out: ResultBuffer<C64>) -> Result<()> {
    let _ = (a, b, out);
    Ok(())
}

#[test]
fn declared_rules_over_complex_dtypes() {
    let d = CX_DECL.declaration;
    let (_, accepts) = d.operands().next().unwrap();
    assert!(accepts(DataType::C64) && accepts(DataType::C128) && !accepts(DataType::F32));
    let (_, accepts) = d.results().next().unwrap();
    assert!(accepts(DataType::C128) && !accepts(DataType::C64));

    let sig = d.signature();
    let out = infer(&sig, &[vec![5, 3], vec![3]], &[DataType::C64, DataType::C64]).unwrap();
    assert_eq!(out.results, [(vec![5], DataType::C128)]);
    let e = infer(&sig, &[vec![5, 3], vec![3]], &[DataType::C64, DataType::C128]).unwrap_err();
    assert_eq!(e.kind, ProblemKind::Dtype);

    let mut call =
        CallBuilder::new().arg(Arg::zeros::<C32>(&[5, 3])).arg(Arg::zeros::<C64>(&[3])).ret(Arg::zeros::<C64>(&[5]));
    let msg = expect_err(
        call.run(CX_DECL),
        ErrorCode::InvalidArgument,
        &["cx.decl: operand 1 (b): expected dtype complex64 (T, the dtype of operand 0 (a)), got complex128"],
    );
    assert_eq!(msg, e.message);
    let mut call =
        CallBuilder::new().arg(Arg::zeros::<C32>(&[5, 3])).arg(Arg::zeros::<C32>(&[3])).ret(Arg::zeros::<C64>(&[5]));
    expect_ok(call.run(CX_DECL));
}
