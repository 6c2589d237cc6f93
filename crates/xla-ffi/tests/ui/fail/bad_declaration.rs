//! Declared rules that cannot hold are compile errors: bad notation, a spec count
//! that differs from the buffers, `linear` naming a non-operand.
use xla_ffi::{handler, AnyFloat, Attr, Buffer, Result, ResultBuffer};

#[handler(target = "ui.unbalanced", dtypes = "T -> promote(T")]
fn unbalanced(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.unknown_factor", shapes = "n -> m")]
fn unknown_factor(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.two_ellipses", shapes = "...a ...b -> ...a")]
fn two_ellipses(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.bad_token", shapes = "x+1 -> x")]
fn bad_token(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.count", shapes = "...b, ...b -> ...b")]
fn spec_count(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.dtype_count", dtypes = "T -> T, T")]
fn dtype_count(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.linear_attr", shapes = "...b -> ...b", linear = "k")]
fn linear_attr(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>, k: Attr<f64>) -> Result<()> { let _ = (x, y, k); Ok(()) }

#[handler(target = "ui.linear_result", linear = "y")]
fn linear_result(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.linear_unknown", linear = "z")]
fn linear_unknown(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.not_a_string", shapes = 3)]
fn not_a_string(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>) -> Result<()> { let _ = (x, y); Ok(()) }

fn main() {}
