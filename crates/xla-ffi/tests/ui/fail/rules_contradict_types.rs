//! A declared rule that contradicts the handler's own parameter types compiles to an
//! op no call can pass: each is an error on the rule. The check reads the types (a
//! dtype the element type does not accept, a rank other than the spec's, one
//! variable on types with no dtype in common), aliases included.
use xla_ffi::{handler, AnyComplex, AnyFloat, Buffer, Result, ResultBuffer};

#[handler(target = "ui.dtype_operand", dtypes = "float32 -> float64")]
fn dtype_operand(x: Buffer<f64>, y: ResultBuffer<f64>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.dtype_result", dtypes = "float64 -> float32")]
fn dtype_result(x: Buffer<f64>, y: ResultBuffer<f64>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.dtype_any_float", dtypes = "int32 -> int32")]
fn dtype_any_float(x: Buffer<AnyFloat>, y: ResultBuffer<i32>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.dtype_optional", dtypes = "T, float32? -> T")]
fn dtype_optional(x: Buffer<f32>, b: Option<Buffer<f64>>, y: ResultBuffer<f32>) -> Result<()> { let _ = (x, b, y); Ok(()) }

#[handler(target = "ui.rank_operand", shapes = "n m -> n m")]
fn rank_operand(x: Buffer<f64, 1>, y: ResultBuffer<f64, 2>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.rank_result", shapes = "n -> n")]
fn rank_result(x: Buffer<f64, 1>, y: ResultBuffer<f64, 2>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.rank_below_ellipsis", shapes = "...b n m -> ...b")]
fn rank_below_ellipsis(x: Buffer<f32, 1>, y: ResultBuffer<f32>) -> Result<()> { let _ = (x, y); Ok(()) }

type Row<'f> = Buffer<'f, f32, 1>;

#[handler(target = "ui.rank_alias", shapes = "n m -> ()")]
fn rank_alias(x: Row<'_>, y: ResultBuffer<f32>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.variable_operands", dtypes = "T, T -> T")]
fn variable_operands(x: Buffer<f32>, w: Buffer<f64>, y: ResultBuffer<f32>) -> Result<()> { let _ = (x, w, y); Ok(()) }

#[handler(target = "ui.variable_result", dtypes = "T -> T")]
fn variable_result(x: Buffer<AnyFloat>, y: ResultBuffer<AnyComplex>) -> Result<()> { let _ = (x, y); Ok(()) }

fn main() {}
