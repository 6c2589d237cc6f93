//! Declared rules in a `forbid(unsafe_code)` crate, with lifetimes, `mut`
//! parameters, a context and optional attributes.
#![forbid(unsafe_code)]
use xla_ffi::{handler, AnyFloat, Attr, Buffer, Context, Result, ResultBuffer};

#[handler(
    target = "ui.declared",
    shapes = "...b n, n -> ...b n, ()",
    dtypes = "X, W -> promote(X, W), float32",
    linear = "x",
    transpose = "ui.declared_t"
)]
pub fn declared<'f>(
    _ctx: Context<'f>,
    x: Buffer<'f, AnyFloat>,
    w: Buffer<'f, AnyFloat>,
    mut y: ResultBuffer<'f, AnyFloat>,
    s: ResultBuffer<'f, f32>,
    k: Attr<Option<f64>>,
    names: Attr<Vec<i64>>,
) -> Result<()> {
    let _ = (x, w, y.as_mut_ptr(), s, k, names);
    Ok(())
}

fn main() {
    let d = DECLARED.declaration;
    assert_eq!(d.transpose, Some("ui.declared_t"));
    let attrs: Vec<_> = d.attributes().collect();
    assert_eq!(attrs, [("k", "f64".to_string(), true), ("names", "array<i64>".to_string(), false)]);
}
