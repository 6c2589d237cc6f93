//! Rules that some call can satisfy compile, whatever the rank and element
//! parameters: any-rank buffers, ellipsis specs on fixed ranks, dtypes in an element
//! set, a variable over sets with a dtype in common, an element set that lists no
//! dtypes (not checked), tokens and optional buffers.
use xla_ffi::{
    handler, AnyFloat, AnyType, Buffer, DataType, ElementSpec, Result, ResultBuffer, ResultToken, Token, ANY_RANK,
};

#[handler(target = "ui.any_rank", shapes = "n m 3 -> n m", dtypes = "float32 -> float32")]
fn any_rank_buffers(x: Buffer<f32>, y: ResultBuffer<f32, ANY_RANK>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.ellipsis", shapes = "...b n, ...c -> ...b n, ...c")]
fn ellipsis(x: Buffer<f64, 1>, w: Buffer<f64, 3>, y: ResultBuffer<f64, 4>, z: ResultBuffer<f64, 0>) -> Result<()> {
    let _ = (x, w, y, z);
    Ok(())
}

#[handler(target = "ui.fixed", shapes = "n m, () -> m", dtypes = "T, float64 -> T")]
fn fixed(x: Buffer<AnyFloat, 2>, s: Buffer<f64, 0>, y: ResultBuffer<AnyType, 1>) -> Result<()> {
    let _ = (x, s, y);
    Ok(())
}

#[handler(target = "ui.variable", dtypes = "T, T -> T, acc(T)")]
fn variable(x: Buffer<AnyFloat>, w: Buffer<f32>, y: ResultBuffer<AnyType>, a: ResultBuffer<f32>) -> Result<()> {
    let _ = (x, w, y, a);
    Ok(())
}

/// Accepts float32 at run time, and lists no dtypes: the macro cannot check it.
pub struct Unlisted;
impl ElementSpec for Unlisted {
    fn accepts(dtype: DataType) -> bool {
        dtype == DataType::F32
    }
    fn describe() -> String {
        "float32".into()
    }
}

#[handler(target = "ui.unlisted", dtypes = "float16 -> float16")]
fn unlisted(x: Buffer<Unlisted>, y: ResultBuffer<Unlisted>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.tokens", shapes = "(), ...b -> (), ...b", dtypes = "token, T -> token, T")]
fn tokens(t: Token, x: Buffer<f32>, u: ResultToken, y: ResultBuffer<f32>) -> Result<()> {
    let _ = (t, x, u, y);
    Ok(())
}

#[handler(target = "ui.optional", shapes = "...b, ...b? -> ...b", dtypes = "T, T? -> T")]
fn optional(x: Buffer<f32>, b: Option<Buffer<AnyFloat, 2>>, y: ResultBuffer<f32>) -> Result<()> {
    let _ = (x, b, y);
    Ok(())
}

fn main() {}
