//! The `xla_ffi_rs.rms_norm_fwd` and `xla_ffi_rs.rms_norm_bwd` handlers for CPU.

use core::mem::MaybeUninit;

use xla_ffi::{dispatch_float, handler, AnyFloat, Attr, Buffer, Context, InOut, Parts, Result, ResultBuffer};

use super::kernel;
use super::shapes::{check_eps, rows, Rows};
use crate::float::{AccFloat, Float};
use crate::parallel::{block_count, block_len, run_blocks};
use crate::promote::Promote;

/// Rows per block of the backward pass. It depends on the row count only, never on
/// the thread count, so `dweight` sums in the same order on every run and machine.
fn bwd_block_rows(rows: usize) -> usize {
    (rows / 256).max(64)
}

/// Runs the forward kernel over row blocks, out of place.
fn fwd_separate<X: Float, W: Float, Y: Float>(
    ctx: &Context<'_>,
    shape: Rows,
    x: &[X],
    w: &[W],
    eps: Y::Acc,
    y: &mut [MaybeUninit<Y>],
    inv: &mut [MaybeUninit<Y::Acc>],
) -> Result<()> {
    if shape.n == 0 || shape.rows == 0 {
        kernel::fwd_rows(x, w, eps, y, inv);
        return Ok(());
    }
    let rows_per = block_len(shape.rows, block_count(ctx, shape.rows, shape.n));
    let (yp, ip) = (Parts::new(y, rows_per * shape.n), Parts::new(inv, rows_per));
    run_blocks(ctx, ip.len(), |b| {
        let ((y0, y), (_, inv)) = (yp.take(b), ip.take(b));
        kernel::fwd_rows(&x[y0..y0 + y.len()], w, eps, y, inv);
    })
}

/// Runs the forward kernel over row blocks, in place (`y` aliases `x`).
fn fwd_in_place<T: Float, W: Float>(
    ctx: &Context<'_>,
    shape: Rows,
    xy: &mut [T],
    w: &[W],
    eps: T::Acc,
    inv: &mut [MaybeUninit<T::Acc>],
) -> Result<()> {
    if shape.n == 0 || shape.rows == 0 {
        kernel::fwd_rows_inplace(xy, w, eps, inv);
        return Ok(());
    }
    let rows_per = block_len(shape.rows, block_count(ctx, shape.rows, shape.n));
    let (xp, ip) = (Parts::new(xy, rows_per * shape.n), Parts::new(inv, rows_per));
    run_blocks(ctx, ip.len(), |b| kernel::fwd_rows_inplace(xp.take(b).1, w, eps, ip.take(b).1))
}

#[allow(clippy::too_many_arguments)]
fn fwd<'f, X: Promote<W>, W: Float>(
    ctx: &Context<'f>,
    shape: Rows,
    x: &Buffer<'f, AnyFloat>,
    w: &Buffer<'f, AnyFloat>,
    y: &mut ResultBuffer<'f, AnyFloat>,
    inv: &mut ResultBuffer<'f, AnyFloat>,
    eps: f64,
) -> Result<()> {
    type Acc<T> = <T as Float>::Acc;
    let w = w.typed::<W>()?;
    // A fresh result would fault page by page on first write (see advise_huge_pages).
    y.advise_huge_pages();
    if X::DTYPE == y.dtype() {
        // y may alias x (input_output_aliases): take them as a pair.
        let inv = inv.typed_uninit::<Acc<X>>()?;
        let eps = Acc::<X>::from_f64(eps);
        match y.with_input::<X, _, { xla_ffi::ANY_RANK }>(x)? {
            InOut::Separate { input, output } => fwd_separate(ctx, shape, input, w, eps, output, inv),
            InOut::InPlace(xy) => fwd_in_place(ctx, shape, xy, w, eps, inv),
        }
    } else {
        type Y<X, W> = <X as Promote<W>>::Output;
        let inv = inv.typed_uninit::<Acc<Y<X, W>>>()?;
        let eps = Acc::<Y<X, W>>::from_f64(eps);
        fwd_separate(ctx, shape, x.typed::<X>()?, w, eps, y.typed_uninit::<Y<X, W>>()?, inv)
    }
}

/// RMS normalization over the trailing `weight.ndim` axes of `x`.
///
/// Operands `(x, weight)`, each float16, bfloat16, float32 or float64; attribute
/// `eps` (a float >= 0 within the accumulator dtype's range). Results `(y, inv_rms)`: `y` of `x`'s shape and dtype
/// `result_type(x, weight)`; `inv_rms` of shape `x.shape[:-weight.ndim]`, float32
/// (float64 when `x` or `weight` is). `y` may alias `x`.
#[handler(
    target = "xla_ffi_rs.rms_norm_fwd",
    descriptor = FWD_CPU,
    shapes = "...b ...n, ...n -> ...b ...n, ...b",
    dtypes = "X, W -> promote(X, W), acc(X, W)"
)]
pub fn xla_ffi_rs_rms_norm_fwd_cpu<'f>(
    ctx: Context<'f>,
    x: Buffer<'f, AnyFloat>,
    weight: Buffer<'f, AnyFloat>,
    mut y: ResultBuffer<'f, AnyFloat>,
    mut inv_rms: ResultBuffer<'f, AnyFloat>,
    eps: Attr<f64>,
) -> Result<()> {
    check_eps(*eps, xla_ffi::decl::accumulator(x.dtype(), weight.dtype()))?;
    let shape = rows(&x, &weight);
    dispatch_float!(x.dtype(), X => dispatch_float!(weight.dtype(), W =>
        fwd::<X, W>(&ctx, shape, &x, &weight, &mut y, &mut inv_rms, *eps),
        else d => unreachable!("checked float dtype {d}")),
        else d => unreachable!("checked float dtype {d}"))
}

#[allow(clippy::too_many_arguments)]
fn bwd<X: Promote<W>, W: Float>(
    ctx: &Context<'_>,
    shape: Rows,
    dy: &Buffer<'_, AnyFloat>,
    x: &Buffer<'_, AnyFloat>,
    w: &Buffer<'_, AnyFloat>,
    dx: &mut ResultBuffer<'_, AnyFloat>,
    dw: &mut ResultBuffer<'_, AnyFloat>,
    eps: f64,
) -> Result<()> {
    type Y<X, W> = <X as Promote<W>>::Output;
    type Acc<X, W> = <Y<X, W> as Float>::Acc;
    let (n, rows) = (shape.n, shape.rows);
    let (dy, x, w) = (dy.typed::<Y<X, W>>()?, x.typed::<X>()?, w.typed::<W>()?);
    let eps = Acc::<X, W>::from_f64(eps);
    dx.advise_huge_pages();
    let (dx, dw) = (dx.typed_uninit::<X>()?, dw.typed_uninit::<W>()?);
    let block = bwd_block_rows(rows);
    let blocks = rows.div_ceil(block);
    // One partial dweight per row block, summed below in block order.
    let mut partial = vec![Acc::<X, W>::ZERO; blocks * n];
    if n > 0 && blocks > 0 {
        let (pp, dxp) = (Parts::new(&mut partial, n), Parts::new(dx, block * n));
        run_blocks(ctx, blocks, |b| {
            let ((_, acc), (x0, dx)) = (pp.take(b), dxp.take(b));
            let span = x0..x0 + dx.len();
            kernel::bwd_rows(&dy[span.clone()], &x[span], w, eps, dx, acc);
        })?;
    }
    let col_len = block_len(n, block_count(ctx, n, blocks.max(1)));
    let dwp = Parts::new(dw, col_len);
    run_blocks(ctx, dwp.len(), |c| {
        let (j0, out) = dwp.take(c);
        for (k, o) in out.iter_mut().enumerate() {
            let mut s = Acc::<X, W>::ZERO;
            for b in 0..blocks {
                s += partial[b * n + j0 + k];
            }
            o.write(W::from_f64(s.to_f64()));
        }
    })
}

/// The backward pass of `rms_norm_fwd`.
///
/// Operands `(dy, x, weight)` with the forward's conventions and the forward's
/// attribute `eps`; results `(dx, dweight)` with the dtypes and shapes of `x` and
/// `weight`. Each row's `inv_rms` is recomputed from `x` (bit for bit the
/// forward's) while the row is in cache for the dot product, so nothing of the
/// forward is needed. `dweight` sums over the leading axes in a fixed order: the
/// result is the same on every run.
#[handler(
    target = "xla_ffi_rs.rms_norm_bwd",
    descriptor = BWD_CPU,
    shapes = "...b ...n, ...b ...n, ...n -> ...b ...n, ...n",
    dtypes = "promote(X, W), X, W -> X, W"
)]
pub fn xla_ffi_rs_rms_norm_bwd_cpu(
    ctx: Context,
    dy: Buffer<AnyFloat>,
    x: Buffer<AnyFloat>,
    weight: Buffer<AnyFloat>,
    mut dx: ResultBuffer<AnyFloat>,
    mut dweight: ResultBuffer<AnyFloat>,
    eps: Attr<f64>,
) -> Result<()> {
    check_eps(*eps, xla_ffi::decl::accumulator(x.dtype(), weight.dtype()))?;
    let shape = rows(&x, &weight);
    dispatch_float!(x.dtype(), X => dispatch_float!(weight.dtype(), W =>
        bwd::<X, W>(&ctx, shape, &dy, &x, &weight, &mut dx, &mut dweight, *eps),
        else d => unreachable!("checked float dtype {d}")),
        else d => unreachable!("checked float dtype {d}"))
}
