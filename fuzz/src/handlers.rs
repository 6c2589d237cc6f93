//! Handlers of several signatures. Each body reads every element it is given and
//! writes every element of its results, and records each view with [`saw`], so
//! the sanitizer and [`check_views`](crate::check_views) see any view that is out
//! of bounds.

use core::mem::MaybeUninit;

use xla_ffi::{
    dispatch_float, handler, AnyFloat, AnyType, Attr, Attrs, Buffer, Context, DataType, Dict, InOut, Parts,
    Pred, Result, ResultBuffer,
};

use crate::saw;

fn len_of(dims: &[i64]) -> usize {
    dims.iter().map(|&d| d as usize).product()
}

fn fill<T: Copy>(out: &mut [MaybeUninit<T>], v: T) {
    saw(out);
    out.iter_mut().for_each(|o| {
        o.write(v);
    });
}

fn sum<T: Copy + Into<f64>>(x: &[T]) -> f64 {
    saw(x);
    x.iter().map(|&v| v.into()).sum()
}

#[handler(target = "fz.add")]
pub fn fz_add(x: Buffer<f32>, y: Buffer<f32, 1>, mut out: ResultBuffer<f32>) -> Result<()> {
    let (xs, ys) = (x.as_slice()?, y.as_slice()?);
    assert_eq!(xs.len(), len_of(x.dims()));
    let s = (sum(xs) + sum(ys)) as f32;
    let o = out.as_uninit()?;
    fill(o, s);
    Ok(())
}

#[handler(target = "fz.any")]
pub fn fz_any(x: Buffer<AnyFloat, 2>, p: Buffer<Pred>, mut out: ResultBuffer<AnyType>) -> Result<()> {
    let s = dispatch_float!(x.dtype(), T => sum::<T>(x.typed()?), else d => unreachable!("{d}"));
    let flags = p.as_slice()?;
    saw(flags);
    let t = flags.iter().filter(|b| b.get()).count() as f64 + s;
    match out.dtype() {
        DataType::F32 => fill(out.typed_uninit::<f32>()?, t as f32),
        DataType::F64 => fill(out.typed_uninit::<f64>()?, t),
        DataType::PRED => fill(out.typed_uninit::<Pred>()?, Pred::from(t > 0.0)),
        DataType::U8 => fill(out.typed_uninit::<u8>()?, t as u8),
        d => return Err(out.error(format!("unsupported dtype {d}"))),
    }
    Ok(())
}

#[handler(target = "fz.inplace")]
pub fn fz_inplace(x: Buffer<f64>, mut y: ResultBuffer<f64>) -> Result<()> {
    match y.with_input::<f64, _, { xla_ffi::ANY_RANK }>(&x)? {
        InOut::InPlace(xy) => {
            saw(xy);
            xy.iter_mut().for_each(|v| *v = -*v);
        }
        InOut::Separate { input, output } => {
            saw(input);
            saw(output);
            for (o, &v) in output.iter_mut().zip(input) {
                o.write(-v);
            }
        }
    }
    Ok(())
}

fn walk(d: &Dict<'_>, depth: u32) -> usize {
    let mut n = 0;
    for i in 0..d.len() {
        n += d.name_at(i).map_or(0, str::len);
        if let Some(xla_ffi::AttrValue::Dict(inner)) = d.value_at(i) {
            if depth < 8 {
                n += walk(&inner, depth + 1);
            }
        }
    }
    n
}

#[allow(clippy::too_many_arguments)]
#[handler(target = "fz.attrs")]
pub fn fz_attrs(
    eps: Attr<f32>,
    n: Attr<Option<i64>>,
    name: Attr<Option<&str>>,
    v: Attr<Option<Vec<f64>>>,
    flags: Attr<Option<&[Pred]>>,
    cfg: Attr<Option<Dict>>,
    mut out: ResultBuffer<f32>,
) -> Result<()> {
    let mut t = *eps + n.unwrap_or(0) as f32 + name.map_or(0, str::len) as f32;
    t += v.as_deref().unwrap_or(&[]).iter().sum::<f64>() as f32;
    if let Some(f) = *flags {
        // An attribute, not a buffer: the sanitizer checks it, not `check_views`.
        t += f.iter().filter(|b| b.get()).count() as f32;
    }
    if let Some(d) = *cfg {
        t += walk(&d, 0) as f32;
    }
    fill(out.as_uninit()?, t);
    Ok(())
}

xla_ffi::attributes! {
    /// A struct of attributes, nested.
    pub struct Inner {
        /// Required.
        pub k: i32,
        /// Optional.
        pub name: Option<String>,
    }
}

xla_ffi::attributes! {
    /// The whole attribute set of `fz.struct`.
    pub struct Opts {
        /// Required.
        pub eps: f64,
        /// Defaulted.
        pub rows: i64 = 4,
        /// A nested dictionary.
        pub inner: Option<Inner>,
        /// An array.
        pub v: Option<Vec<i32>>,
    }
}

#[handler(target = "fz.struct")]
pub fn fz_struct(opts: Attrs<Opts>, x: Buffer<f32>, mut out: ResultBuffer<f32>) -> Result<()> {
    let xs = x.as_slice()?;
    let k = opts.inner.as_ref().map_or(0, |i| i.k + i.name.as_deref().map_or(0, |s| s.len() as i32));
    let t = sum(xs) as f32 + opts.eps as f32 + opts.rows as f32 + k as f32 + opts.v.as_ref().map_or(0, Vec::len) as f32;
    fill(out.as_uninit()?, t);
    Ok(())
}

#[handler(target = "fz.pool")]
pub fn fz_pool(ctx: Context, x: Buffer<f32, 1>, mut out: ResultBuffer<f32, 1>) -> Result<()> {
    let xs = x.as_slice()?;
    saw(xs);
    out.expect_dims(x.dims(), "the shape of x")?;
    let o = out.as_uninit()?;
    saw(o);
    let parts = Parts::new(o, 3);
    ctx.thread_pool().for_each(parts.len(), |i| {
        let (start, chunk) = parts.take(i);
        for (k, slot) in chunk.iter_mut().enumerate() {
            slot.write(xs[start + k] * 2.0);
        }
    })
}

#[handler(target = "fz.device", platform = device)]
pub fn fz_device(x: Buffer<f32>, mut out: ResultBuffer<f32>) -> Result<()> {
    // A device handler gets addresses only; asking for a slice must fail.
    assert!(x.as_slice().is_err() && out.as_uninit().is_err());
    let _ = (x.as_ptr(), out.as_mut_ptr());
    Ok(())
}

#[handler(target = "fz.noop")]
pub fn fz_noop() -> Result<()> {
    Ok(())
}
