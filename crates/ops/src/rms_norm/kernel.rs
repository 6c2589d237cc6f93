//! Slice-level CPU kernels of RMS normalization, generic over the float dtypes.
//!
//! Forward, per row of `n` elements:
//! `inv_rms = 1/sqrt(mean(x^2) + eps)`, `y_j = x_j * inv_rms * w_j`.
//!
//! Backward, with `r = inv_rms` of the row:
//! `dx_j = r*w_j*dy_j - x_j * r^3/n * sum_k(dy_k*w_k*x_k)` and
//! `dweight_j = sum over rows of dy_j*x_j*r`.
//!
//! The kernels work on a contiguous block of rows; the caller splits the rows
//! over threads and sums the per-block `dweight` partials.
//!
//! # Numerics
//!
//! All arithmetic is done in the accumulator type `A` (`f32`, or `f64` when the
//! promoted dtype is `f64`), and the rounding is the same on every machine: plain
//! multiplies and adds (no FMA), and every sum kept in `L` (32) independent lanes
//! that are combined by a fixed pairwise tree at the end of the row. The lanes are
//! what lets LLVM vectorize the reductions without fast-math; the same order holds
//! in the AVX2+FMA copies that `multiversion` compiles of the public functions, so
//! results do not depend on the CPU the code runs on.
//!
//! # Layout of the code
//!
//! Each row is walked in chunks of `L` elements that are widened to `[A; L]`
//! (`load`), computed on as plain arrays, and narrowed back (`narrow`); a row's
//! last, partial chunk is padded with zeros, which add nothing to any sum. The
//! weight is widened to `A` once per call. The dtype-specific conversions are
//! chosen by [`Any`] downcasts of whole chunks, which the compiler resolves for
//! each monomorphisation (no run-time cost):
//! - `bf16` is converted with bit operations (a 16-bit shift to widen; round to
//!   nearest even, NaN kept quiet, to narrow), which vectorize;
//! - `f16` goes through `half`'s slice conversions, which use F16C when the CPU
//!   has it (detected at run time) — faster here than a branch-free bit-level
//!   conversion, which needs some twenty vector operations per eight values;
//! - `f32` and `f64` are plain casts.

use core::any::Any;
use core::mem::MaybeUninit;

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use multiversion::multiversion;
use xla_ffi::{AccFloat, Float};

/// Elements per chunk, and the number of independent partial sums per reduction.
const L: usize = 32;

// ---------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------

/// Widens `bf16` bits to `f32` (exact; a NaN stays a NaN).
#[inline(always)]
fn bf16_bits_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// Narrows `f32` to `bf16` bits, rounding to nearest even; a NaN stays a (quiet)
/// NaN. Bit-identical to `half::bf16::from_f32`, but branch-free so it vectorizes.
#[inline(always)]
fn f32_to_bf16_bits(v: f32) -> u16 {
    let x = v.to_bits();
    let rounded = x.wrapping_add(0x7FFF + ((x >> 16) & 1)) >> 16;
    let quiet_nan = (x >> 16) | 0x0040;
    (if v.is_nan() { quiet_nan } else { rounded }) as u16
}

/// One element of `T` as accumulator `A`: `to_acc` when `T::Acc` is `A`, else via
/// `f64` (exact for the widening cases that occur).
#[inline(always)]
fn widen<T: Float, A: AccFloat>(t: T) -> A {
    let wide = t.to_acc();
    match (&wide as &dyn Any).downcast_ref::<A>() {
        Some(a) => *a,
        None => A::from_f64(t.to_f64()),
    }
}

/// One accumulator value narrowed to `T`: `from_acc` when `T::Acc` is `A`, else
/// `from_f64` (a single rounding).
#[inline(always)]
fn narrow1<T: Float, A: AccFloat>(a: A) -> T {
    match (&a as &dyn Any).downcast_ref::<T::Acc>() {
        Some(v) => T::from_acc(*v),
        None => T::from_f64(a.to_f64()),
    }
}

/// Widens a chunk of `T` to the accumulator type.
#[inline(always)]
fn load<T: Float, A: AccFloat>(src: &[T; L]) -> [A; L] {
    let mut out = [A::ZERO; L];
    let any: &dyn Any = src;
    if let Some(b) = any.downcast_ref::<[bf16; L]>() {
        for i in 0..L {
            out[i] = A::from_f32(bf16_bits_to_f32(b[i].to_bits()));
        }
    } else if let Some(h) = any.downcast_ref::<[f16; L]>() {
        let mut f = [0f32; L];
        h.convert_to_f32_slice(&mut f);
        for i in 0..L {
            out[i] = A::from_f32(f[i]);
        }
    } else {
        for i in 0..L {
            out[i] = widen::<T, A>(src[i]);
        }
    }
    out
}

/// Widens a partial chunk (`src.len() < L`), padding with zeros.
#[inline(always)]
fn load_tail<T: Float, A: AccFloat>(src: &[T]) -> [A; L] {
    let mut buf = [T::default(); L];
    buf[..src.len()].copy_from_slice(src);
    load(&buf)
}

/// Narrows a chunk of accumulators to `T`, rounding to nearest even.
#[inline(always)]
fn narrow<T: Float, A: AccFloat>(src: &[A; L]) -> [T; L] {
    let mut out = [T::default(); L];
    if let Some(f) = (src as &dyn Any).downcast_ref::<[f32; L]>() {
        let any: &mut dyn Any = &mut out;
        if let Some(b) = any.downcast_mut::<[bf16; L]>() {
            for i in 0..L {
                b[i] = bf16::from_bits(f32_to_bf16_bits(f[i]));
            }
            return out;
        }
        if let Some(h) = any.downcast_mut::<[f16; L]>() {
            h.convert_from_f32_slice(f);
            return out;
        }
    }
    for i in 0..L {
        out[i] = narrow1::<T, A>(src[i]);
    }
    out
}

/// An output element: `MaybeUninit<T>` in the public kernels, plain `T` in the
/// tests (which have no safe way to read a `MaybeUninit`).
trait Out<T> {
    /// Stores `v`.
    fn put(&mut self, v: T);
}

impl<T> Out<T> for MaybeUninit<T> {
    #[inline(always)]
    fn put(&mut self, v: T) {
        self.write(v);
    }
}

impl<T> Out<T> for T {
    #[inline(always)]
    fn put(&mut self, v: T) {
        *self = v;
    }
}

/// Narrows a chunk and stores it into `dst` (`dst.len() <= L`: a row's last,
/// partial chunk stores only its first `dst.len()` elements).
#[inline(always)]
fn store<T: Float, A: AccFloat, O: Out<T>>(src: &[A; L], dst: &mut [O]) {
    let v = narrow::<T, A>(src);
    for (d, s) in dst.iter_mut().zip(v) {
        d.put(s);
    }
}

/// A partial chunk of accumulators (`src.len() < L`), padded with zeros.
#[inline(always)]
fn pad<A: AccFloat>(src: &[A]) -> [A; L] {
    let mut buf = [A::ZERO; L];
    buf[..src.len()].copy_from_slice(src);
    buf
}

/// The weight widened to the accumulator type, once per call: it is read once or
/// twice per row, so this saves converting it again for every row.
#[inline(always)]
fn widen_weight<W: Float, A: AccFloat>(w: &[W]) -> Vec<A> {
    let mut out = Vec::with_capacity(w.len());
    let mut chunks = w.chunks_exact(L);
    for c in &mut chunks {
        out.extend_from_slice(&load::<W, A>(arr(c)));
    }
    let tail = chunks.remainder();
    out.extend_from_slice(&load_tail::<W, A>(tail)[..tail.len()]);
    out
}

/// A slice of exactly [`L`] elements as an array reference.
#[inline(always)]
fn arr<T>(s: &[T]) -> &[T; L] {
    s.try_into().expect("chunk of L elements")
}

/// Sums the lanes by a fixed pairwise tree.
#[inline(always)]
fn reduce<A: AccFloat>(mut a: [A; L]) -> A {
    let mut half = L / 2;
    while half > 0 {
        for i in 0..half {
            a[i] += a[i + half];
        }
        half /= 2;
    }
    a[0]
}

// ---------------------------------------------------------------------------
// Row kernels
// ---------------------------------------------------------------------------

/// `acc + v * v`, lane by lane.
#[inline(always)]
fn add_sq<A: AccFloat>(mut acc: [A; L], v: [A; L]) -> [A; L] {
    for i in 0..L {
        acc[i] += v[i] * v[i];
    }
    acc
}

/// `sum(x^2)` of one row, in `A`.
#[inline(always)]
fn sum_sq<X: Float, A: AccFloat>(x: &[X]) -> A {
    let mut acc = [A::ZERO; L];
    let mut chunks = x.chunks_exact(L);
    for c in &mut chunks {
        acc = add_sq(acc, load::<X, A>(arr(c)));
    }
    if !chunks.remainder().is_empty() {
        acc = add_sq(acc, load_tail::<X, A>(chunks.remainder()));
    }
    reduce(acc)
}

/// `1/sqrt(sum_sq/n + eps)`; for `n == 0` the mean is taken as 0.
#[inline(always)]
fn inv_rms<A: AccFloat>(sum_sq: A, n: usize, eps: A) -> A {
    let mean = if n == 0 { A::ZERO } else { sum_sq / A::from_usize(n) };
    A::ONE / (mean + eps).sqrt()
}

/// `x * r * w` of one chunk.
#[inline(always)]
fn scale<A: AccFloat>(x: [A; L], w: [A; L], r: A) -> [A; L] {
    let mut y = x;
    for i in 0..L {
        y[i] = x[i] * r * w[i];
    }
    y
}

/// Writes `y = x * r * w` for one row.
#[inline(always)]
fn scale_row<X: Float, Y: Float, O: Out<Y>>(x: &[X], w: &[Y::Acc], r: Y::Acc, y: &mut [O]) {
    let mut xc = x.chunks_exact(L);
    let mut wc = w.chunks_exact(L);
    let mut yc = y.chunks_exact_mut(L);
    for ((xs, ws), ys) in (&mut xc).zip(&mut wc).zip(&mut yc) {
        let v = scale(load::<X, Y::Acc>(arr(xs)), *arr(ws), r);
        store::<Y, Y::Acc, O>(&v, ys);
    }
    let (xs, ws, ys) = (xc.remainder(), wc.remainder(), yc.into_remainder());
    if !xs.is_empty() {
        let v = scale(load_tail::<X, Y::Acc>(xs), pad(ws), r);
        store::<Y, Y::Acc, O>(&v, ys);
    }
}

/// Overwrites `xy` with `xy * r * w` for one row.
#[inline(always)]
fn scale_row_inplace<T: Float>(xy: &mut [T], w: &[T::Acc], r: T::Acc) {
    let mut xc = xy.chunks_exact_mut(L);
    let mut wc = w.chunks_exact(L);
    for (xs, ws) in (&mut xc).zip(&mut wc) {
        let v = scale(load::<T, T::Acc>(arr(xs)), *arr(ws), r);
        xs.copy_from_slice(&narrow::<T, T::Acc>(&v));
    }
    let (xs, ws) = (xc.into_remainder(), wc.remainder());
    if !xs.is_empty() {
        let v = scale(load_tail::<T, T::Acc>(xs), pad(ws), r);
        let len = xs.len();
        xs.copy_from_slice(&narrow::<T, T::Acc>(&v)[..len]);
    }
}

/// `acc + d * w * x`, lane by lane.
#[inline(always)]
fn add_dot3<A: AccFloat>(mut acc: [A; L], d: [A; L], x: [A; L], w: [A; L]) -> [A; L] {
    for i in 0..L {
        acc[i] += d[i] * w[i] * x[i];
    }
    acc
}

/// `sum_k dy_k * w_k * x_k` of one row, in `A`.
#[inline(always)]
fn dot3<Y: Float, X: Float, A: AccFloat>(dy: &[Y], x: &[X], w: &[A]) -> A {
    let mut acc = [A::ZERO; L];
    let (mut dc, mut xc, mut wc) = (dy.chunks_exact(L), x.chunks_exact(L), w.chunks_exact(L));
    for ((ds, xs), ws) in (&mut dc).zip(&mut xc).zip(&mut wc) {
        let (d, x) = (load::<Y, A>(arr(ds)), load::<X, A>(arr(xs)));
        acc = add_dot3(acc, d, x, *arr(ws));
    }
    if !dc.remainder().is_empty() {
        let d = load_tail::<Y, A>(dc.remainder());
        let x = load_tail::<X, A>(xc.remainder());
        acc = add_dot3(acc, d, x, pad(wc.remainder()));
    }
    reduce(acc)
}

/// One chunk of the backward pass: returns `dx = r*w*dy - x*c` and `dw + dy*x*r`.
#[inline(always)]
fn bwd_chunk<A: AccFloat>(dy: [A; L], x: [A; L], w: [A; L], r: A, c: A, mut dw: [A; L]) -> ([A; L], [A; L]) {
    let mut dx = x;
    for i in 0..L {
        dx[i] = r * (w[i] * dy[i]) - x[i] * c;
        dw[i] += dy[i] * x[i] * r;
    }
    (dx, dw)
}

/// Writes `dx` of one row and accumulates its `dweight` terms into `dw`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn bwd_row<Y: Float, X: Float, O: Out<X>>(
    dy: &[Y],
    x: &[X],
    w: &[Y::Acc],
    r: Y::Acc,
    c: Y::Acc,
    dx: &mut [O],
    dw: &mut [Y::Acc],
) {
    type A<Y> = <Y as Float>::Acc;
    let (mut dc, mut xc, mut wc) = (dy.chunks_exact(L), x.chunks_exact(L), w.chunks_exact(L));
    let (mut oc, mut gc) = (dx.chunks_exact_mut(L), dw.chunks_exact_mut(L));
    for ((((ds, xs), ws), os), gs) in (&mut dc).zip(&mut xc).zip(&mut wc).zip(&mut oc).zip(&mut gc) {
        let (v, g) = bwd_chunk(load::<Y, A<Y>>(arr(ds)), load::<X, A<Y>>(arr(xs)), *arr(ws), r, c, *arr(gs));
        gs.copy_from_slice(&g);
        store::<X, A<Y>, O>(&v, os);
    }
    let (os, gs) = (oc.into_remainder(), gc.into_remainder());
    if !os.is_empty() {
        let (v, g) = bwd_chunk(
            load_tail::<Y, A<Y>>(dc.remainder()),
            load_tail::<X, A<Y>>(xc.remainder()),
            pad(wc.remainder()),
            r,
            c,
            pad(gs),
        );
        let len = gs.len();
        gs.copy_from_slice(&g[..len]);
        store::<X, A<Y>, O>(&v, os);
    }
}

// ---------------------------------------------------------------------------
// Block kernels (generic over the output slots) and the public entry points
// ---------------------------------------------------------------------------

/// `rows * n`, checked.
fn elems(rows: usize, n: usize) -> usize {
    rows.checked_mul(n).expect("rms_norm kernel: rows * n overflows usize")
}

/// [`fwd_rows`], for any output slot type.
#[inline(always)]
fn fwd_block<X: Float, W: Float, Y: Float, O: Out<Y>, I: Out<Y::Acc>>(
    x: &[X],
    w: &[W],
    eps: Y::Acc,
    y: &mut [O],
    inv: &mut [I],
) {
    let (n, rows) = (w.len(), inv.len());
    let len = elems(rows, n);
    assert!(x.len() == len, "rms_norm fwd_rows: x has {} elements, expected rows {rows} * n {n}", x.len());
    assert!(y.len() == len, "rms_norm fwd_rows: y has {} elements, expected rows {rows} * n {n}", y.len());
    if n == 0 {
        let r = inv_rms(Y::Acc::ZERO, 0, eps);
        for i in inv.iter_mut() {
            i.put(r);
        }
        return;
    }
    let w = widen_weight::<W, Y::Acc>(w);
    for ((xr, yr), ir) in x.chunks_exact(n).zip(y.chunks_exact_mut(n)).zip(inv.iter_mut()) {
        let r = inv_rms(sum_sq::<X, Y::Acc>(xr), n, eps);
        ir.put(r);
        scale_row::<X, Y, O>(xr, &w, r, yr);
    }
}

/// [`fwd_rows_inplace`], for any `inv_rms` slot type.
#[inline(always)]
fn fwd_block_inplace<T: Float, W: Float, I: Out<T::Acc>>(xy: &mut [T], w: &[W], eps: T::Acc, inv: &mut [I]) {
    let (n, rows) = (w.len(), inv.len());
    let len = elems(rows, n);
    assert!(xy.len() == len, "rms_norm fwd_rows_inplace: xy has {} elements, expected rows {rows} * n {n}", xy.len());
    if n == 0 {
        let r = inv_rms(T::Acc::ZERO, 0, eps);
        for i in inv.iter_mut() {
            i.put(r);
        }
        return;
    }
    let w = widen_weight::<W, T::Acc>(w);
    for (row, ir) in xy.chunks_exact_mut(n).zip(inv.iter_mut()) {
        let r = inv_rms(sum_sq::<T, T::Acc>(row), n, eps);
        ir.put(r);
        scale_row_inplace(row, &w, r);
    }
}

/// [`bwd_rows`], for any `dx` slot type.
#[inline(always)]
fn bwd_block<Y: Float, X: Float, W: Float, O: Out<X>>(
    dy: &[Y],
    x: &[X],
    w: &[W],
    inv: &[Y::Acc],
    dx: &mut [O],
    dw_acc: &mut [Y::Acc],
) {
    let (n, rows) = (w.len(), inv.len());
    let len = elems(rows, n);
    assert!(dy.len() == len, "rms_norm bwd_rows: dy has {} elements, expected rows {rows} * n {n}", dy.len());
    assert!(x.len() == len, "rms_norm bwd_rows: x has {} elements, expected rows {rows} * n {n}", x.len());
    assert!(dx.len() == len, "rms_norm bwd_rows: dx has {} elements, expected rows {rows} * n {n}", dx.len());
    assert!(dw_acc.len() == n, "rms_norm bwd_rows: dw_acc has {} elements, expected n {n}", dw_acc.len());
    if n == 0 || rows == 0 {
        return;
    }
    let n_acc = Y::Acc::from_usize(n);
    let w = widen_weight::<W, Y::Acc>(w);
    let rows_iter = dy.chunks_exact(n).zip(x.chunks_exact(n)).zip(dx.chunks_exact_mut(n)).zip(inv);
    for (((dyr, xr), dxr), &r) in rows_iter {
        let s = dot3::<Y, X, Y::Acc>(dyr, xr, &w);
        let c = r * r * r / n_acc * s;
        bwd_row::<Y, X, O>(dyr, xr, &w, r, c, dxr, dw_acc);
    }
}

/// Forward RMS normalization of a block of rows, out of place.
///
/// `rows = inv.len()` and `n = w.len()`; `x` and `y` hold `rows * n` elements,
/// row-major. Writes `y = x * inv_rms * w` (dtype `Y`, computed in `Y::Acc`) and
/// `inv = inv_rms = 1/sqrt(mean(x^2) + eps)` per row. With `n == 0`, every
/// `inv_rms` is `1/sqrt(eps)`.
///
/// Compiled twice, for baseline x86-64 and for AVX2+FMA (chosen at run time); both
/// give bit-identical results.
///
/// # Panics
/// If the lengths disagree (a caller bug: the handlers validate shapes first).
#[multiversion(targets("x86_64+avx2+fma"))]
pub fn fwd_rows<X: Float, W: Float, Y: Float>(
    x: &[X],
    w: &[W],
    eps: Y::Acc,
    y: &mut [MaybeUninit<Y>],
    inv: &mut [MaybeUninit<Y::Acc>],
) {
    fwd_block::<X, W, Y, _, _>(x, w, eps, y, inv);
}

/// Forward RMS normalization of a block of rows, in place: `xy` holds `x` on entry
/// and `y` (same dtype `T`) on return. Otherwise as [`fwd_rows`], with `T::Acc` as
/// the accumulator (the caller takes this path only when `y`'s dtype is `x`'s).
/// Gives the same bits as [`fwd_rows`] with `Y = T`.
///
/// # Panics
/// If `xy.len() != inv.len() * w.len()`.
#[multiversion(targets("x86_64+avx2+fma"))]
pub fn fwd_rows_inplace<T: Float, W: Float>(xy: &mut [T], w: &[W], eps: T::Acc, inv: &mut [MaybeUninit<T::Acc>]) {
    fwd_block_inplace::<T, W, _>(xy, w, eps, inv);
}

/// Backward RMS normalization of a block of rows.
///
/// `rows = inv.len()`, `n = w.len()`; `dy`, `x` and `dx` hold `rows * n` elements
/// and `inv` the forward's `inv_rms`. Writes
/// `dx_j = r*w_j*dy_j - x_j * r^3/n * sum_k(dy_k*w_k*x_k)` (dtype `X`) and adds this
/// block's `dweight` terms `dy_j*x_j*r`, row by row in order, to `dw_acc` (`n`
/// accumulators, not cleared here). Computed in `Y::Acc`.
///
/// # Panics
/// If the lengths disagree.
#[multiversion(targets("x86_64+avx2+fma"))]
pub fn bwd_rows<Y: Float, X: Float, W: Float>(
    dy: &[Y],
    x: &[X],
    w: &[W],
    inv: &[Y::Acc],
    dx: &mut [MaybeUninit<X>],
    dw_acc: &mut [Y::Acc],
) {
    bwd_block::<Y, X, W, _>(dy, x, w, inv, dx, dw_acc);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator of values in [-2, 2).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        }
        fn vec<T: Float>(&mut self, len: usize) -> Vec<T> {
            (0..len).map(|_| T::from_f64(self.next())).collect()
        }
    }

    /// Relative tolerance of a dtype's final rounding plus the f32 arithmetic.
    fn tol<T: Float>() -> f64 {
        match core::mem::size_of::<T>() {
            8 => 1e-12,
            4 => 2e-5,
            _ if T::DTYPE == xla_ffi::DataType::F16 => 2.0f64.powi(-10),
            _ => 2.0f64.powi(-7),
        }
    }

    fn f64s<T: Float>(v: &[T]) -> Vec<f64> {
        v.iter().map(|t| t.to_f64()).collect()
    }

    /// The forward in f64: (y, inv_rms).
    fn fwd_ref(x: &[f64], w: &[f64], eps: f64) -> (Vec<f64>, Vec<f64>) {
        let n = w.len();
        let rows = x.len().checked_div(n).unwrap_or(0);
        let (mut y, mut inv) = (Vec::new(), Vec::new());
        for r in 0..rows {
            let row = &x[r * n..(r + 1) * n];
            let ms = row.iter().map(|v| v * v).sum::<f64>() / n as f64;
            let ir = 1.0 / (ms + eps).sqrt();
            inv.push(ir);
            y.extend(row.iter().zip(w).map(|(v, wj)| v * ir * wj));
        }
        (y, inv)
    }

    /// The backward in f64, from the analytic formula: (dx, dw, per-element scale
    /// of dx's terms, per-column scale of dw's terms) — the scales set tolerances.
    #[allow(clippy::type_complexity)]
    fn bwd_ref(dy: &[f64], x: &[f64], w: &[f64], inv: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let n = w.len();
        let (mut dx, mut dw, mut dx_scale, mut dw_scale) = (vec![], vec![0.0; n], vec![], vec![0.0; n]);
        for (r, &ir) in inv.iter().enumerate() {
            let (d, xr) = (&dy[r * n..(r + 1) * n], &x[r * n..(r + 1) * n]);
            let s: f64 = (0..n).map(|k| d[k] * w[k] * xr[k]).sum();
            let s_abs: f64 = (0..n).map(|k| (d[k] * w[k] * xr[k]).abs()).sum();
            let c = ir.powi(3) / n as f64;
            for j in 0..n {
                dx.push(ir * w[j] * d[j] - xr[j] * c * s);
                dx_scale.push((ir * w[j] * d[j]).abs() + (xr[j] * c * s_abs).abs());
                dw[j] += d[j] * xr[j] * ir;
                dw_scale[j] += (d[j] * xr[j] * ir).abs();
            }
        }
        (dx, dw, dx_scale, dw_scale)
    }

    fn assert_close(what: &str, got: &[f64], want: &[f64], scale: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, ((g, w), s)) in got.iter().zip(want).zip(scale).enumerate() {
            let bound = tol * s.abs().max(1e-30);
            assert!((g - w).abs() <= bound, "{what}[{i}]: got {g}, want {w} (|diff| {} > {bound})", (g - w).abs());
        }
    }

    /// Checks the forward for one dtype combination against the f64 reference, and
    /// the public in-place kernel against the out-of-place one where `Y == X`.
    fn check_fwd<X: Float, W: Float, Y: Float>(rows: usize, n: usize, seed: u64) {
        let mut g = Lcg(seed);
        let (x, w) = (g.vec::<X>(rows * n), g.vec::<W>(n));
        let eps = 1e-5;
        let mut y = vec![Y::default(); rows * n];
        let mut inv = vec![Y::Acc::default(); rows];
        fwd_block::<X, W, Y, Y, Y::Acc>(&x, &w, Y::Acc::from_f64(eps), &mut y, &mut inv);
        let (y_ref, inv_ref) = fwd_ref(&f64s(&x), &f64s(&w), eps);
        let what = format!("fwd {:?}/{:?}->{:?} {rows}x{n}", X::DTYPE, W::DTYPE, Y::DTYPE);
        assert_close(&format!("{what} inv"), &f64s(&inv), &inv_ref, &inv_ref, tol::<Y::Acc>());
        assert_close(&format!("{what} y"), &f64s(&y), &y_ref, &y_ref, tol::<Y>());
    }

    /// The in-place public kernel gives the same bits as the out-of-place block.
    fn check_inplace<T: Float, W: Float>(rows: usize, n: usize, seed: u64) {
        let mut g = Lcg(seed);
        let (x, w) = (g.vec::<T>(rows * n), g.vec::<W>(n));
        let eps = T::Acc::from_f64(1e-6);
        let mut y = vec![T::default(); rows * n];
        let mut inv = vec![T::Acc::default(); rows];
        fwd_block::<T, W, T, T, T::Acc>(&x, &w, eps, &mut y, &mut inv);
        let mut xy = x.clone();
        let mut inv_uninit = vec![MaybeUninit::new(T::Acc::default()); rows];
        fwd_rows_inplace::<T, W>(&mut xy, &w, eps, &mut inv_uninit);
        let bits = |v: &[T]| v.iter().map(|t| t.to_f64().to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&xy), bits(&y), "in place != out of place for {:?}/{:?} {rows}x{n}", T::DTYPE, W::DTYPE);
        // The in-place block with plain slots gives the same inv_rms.
        let mut xy2 = x.clone();
        let mut inv2 = vec![T::Acc::default(); rows];
        fwd_block_inplace::<T, W, T::Acc>(&mut xy2, &w, eps, &mut inv2);
        assert_eq!(bits(&xy2), bits(&y));
        assert_eq!(f64s(&inv2), f64s(&inv));
    }

    /// Checks the backward for one dtype combination against the analytic f64
    /// formula, and the public kernel's `dw_acc` against the block's.
    fn check_bwd<Y: Float, X: Float, W: Float>(rows: usize, n: usize, seed: u64) {
        let mut g = Lcg(seed);
        let (dy, x, w) = (g.vec::<Y>(rows * n), g.vec::<X>(rows * n), g.vec::<W>(n));
        let (_, inv64) = fwd_ref(&f64s(&x), &f64s(&w), 1e-5);
        let inv: Vec<Y::Acc> = inv64.iter().map(|&v| Y::Acc::from_f64(v)).collect();
        let inv64 = f64s(&inv);
        let mut dx = vec![X::default(); rows * n];
        let mut dw = vec![Y::Acc::from_f64(0.5); n];
        bwd_block::<Y, X, W, X>(&dy, &x, &w, &inv, &mut dx, &mut dw);
        let (dx_ref, dw_ref, dx_scale, dw_scale) = bwd_ref(&f64s(&dy), &f64s(&x), &f64s(&w), &inv64);
        let dw_ref: Vec<f64> = dw_ref.iter().map(|v| v + 0.5).collect();
        let dw_scale: Vec<f64> = dw_scale.iter().map(|v| v + 0.5).collect();
        let what = format!("bwd {:?}/{:?}/{:?} {rows}x{n}", Y::DTYPE, X::DTYPE, W::DTYPE);
        let t = tol::<X>().max(tol::<Y::Acc>());
        assert_close(&format!("{what} dx"), &f64s(&dx), &dx_ref, &dx_scale, t);
        assert_close(&format!("{what} dw"), &f64s(&dw), &dw_ref, &dw_scale, tol::<Y::Acc>());
        // Public kernel: same dweight bits.
        let mut dx_uninit = vec![MaybeUninit::new(X::default()); rows * n];
        let mut dw2 = vec![Y::Acc::from_f64(0.5); n];
        bwd_rows::<Y, X, W>(&dy, &x, &w, &inv, &mut dx_uninit, &mut dw2);
        assert_eq!(f64s(&dw2), f64s(&dw), "{what}: public dw_acc");
    }

    const SHAPES: &[(usize, usize)] = &[(1, 1), (3, 7), (2, 32), (3, 33), (2, 100), (1, 257)];

    #[test]
    fn forward_matches_f64_reference() {
        for (k, &(rows, n)) in SHAPES.iter().enumerate() {
            let s = k as u64 + 1;
            check_fwd::<f32, f32, f32>(rows, n, s);
            check_fwd::<f64, f64, f64>(rows, n, s);
            check_fwd::<bf16, bf16, bf16>(rows, n, s);
            check_fwd::<f16, f16, f16>(rows, n, s);
            check_fwd::<bf16, f32, f32>(rows, n, s);
            check_fwd::<f32, bf16, f32>(rows, n, s);
            check_fwd::<f16, bf16, f32>(rows, n, s);
            check_fwd::<bf16, f16, f32>(rows, n, s);
            check_fwd::<f64, f32, f64>(rows, n, s);
            check_fwd::<f32, f64, f64>(rows, n, s);
            check_fwd::<bf16, f64, f64>(rows, n, s);
            check_fwd::<f64, f16, f64>(rows, n, s);
        }
    }

    #[test]
    fn inplace_equals_out_of_place() {
        for (k, &(rows, n)) in SHAPES.iter().enumerate() {
            let s = k as u64 + 11;
            check_inplace::<f32, f32>(rows, n, s);
            check_inplace::<f32, bf16>(rows, n, s);
            check_inplace::<bf16, bf16>(rows, n, s);
            check_inplace::<f16, f16>(rows, n, s);
            check_inplace::<f64, f32>(rows, n, s);
            check_inplace::<f64, f64>(rows, n, s);
        }
    }

    #[test]
    fn backward_matches_analytic_f64() {
        for (k, &(rows, n)) in SHAPES.iter().enumerate() {
            let s = k as u64 + 21;
            check_bwd::<f32, f32, f32>(rows, n, s);
            check_bwd::<f64, f64, f64>(rows, n, s);
            check_bwd::<bf16, bf16, bf16>(rows, n, s);
            check_bwd::<f16, f16, f16>(rows, n, s);
            check_bwd::<f32, bf16, f32>(rows, n, s);
            check_bwd::<f32, f32, bf16>(rows, n, s);
            check_bwd::<f32, f16, bf16>(rows, n, s);
            check_bwd::<f64, f32, f64>(rows, n, s);
            check_bwd::<f64, bf16, f64>(rows, n, s);
            check_bwd::<f64, f64, f16>(rows, n, s);
        }
    }

    /// The backward is the gradient of the forward: central differences of
    /// `L = sum(y * g)` in f64 against `dx` and `dweight` from the kernels.
    #[test]
    fn backward_matches_finite_differences() {
        let (rows, n, eps) = (3, 37, 1e-3);
        let mut gen = Lcg(99);
        let (x, w, g) = (gen.vec::<f64>(rows * n), gen.vec::<f64>(n), gen.vec::<f64>(rows * n));
        let loss = |x: &[f64], w: &[f64]| {
            let mut y = vec![0.0; rows * n];
            let mut inv = vec![0.0; rows];
            fwd_block::<f64, f64, f64, f64, f64>(x, w, eps, &mut y, &mut inv);
            (y.iter().zip(&g).map(|(a, b)| a * b).sum::<f64>(), inv)
        };
        let (_, inv) = loss(&x, &w);
        let mut dx = vec![0.0; rows * n];
        let mut dw = vec![0.0; n];
        bwd_block::<f64, f64, f64, f64>(&g, &x, &w, &inv, &mut dx, &mut dw);
        let h = 1e-6;
        for j in 0..rows * n {
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[j] += h;
            xm[j] -= h;
            let fd = (loss(&xp, &w).0 - loss(&xm, &w).0) / (2.0 * h);
            assert!((fd - dx[j]).abs() <= 1e-6 * (1.0 + fd.abs()), "dx[{j}]: fd {fd}, kernel {}", dx[j]);
        }
        for j in 0..n {
            let (mut wp, mut wm) = (w.clone(), w.clone());
            wp[j] += h;
            wm[j] -= h;
            let fd = (loss(&x, &wp).0 - loss(&x, &wm).0) / (2.0 * h);
            assert!((fd - dw[j]).abs() <= 1e-6 * (1.0 + fd.abs()), "dw[{j}]: fd {fd}, kernel {}", dw[j]);
        }
    }

    /// Splitting rows into blocks that share one accumulator gives the same bits
    /// (rows are added in order), and the public kernels agree with the blocks.
    #[test]
    fn backward_blocks_accumulate_in_order() {
        let (rows, n) = (5, 45);
        let mut g = Lcg(7);
        let (dy, x, w) = (g.vec::<f32>(rows * n), g.vec::<bf16>(rows * n), g.vec::<f32>(n));
        let inv: Vec<f32> = (0..rows).map(|r| 0.5 + r as f32 * 0.1).collect();
        let mut dx = vec![bf16::ZERO; rows * n];
        let mut dw = vec![0f32; n];
        bwd_block::<f32, bf16, f32, bf16>(&dy, &x, &w, &inv, &mut dx, &mut dw);
        let mut dx2 = vec![bf16::ZERO; rows * n];
        let mut dw2 = vec![0f32; n];
        let split = 2 * n;
        bwd_block::<f32, bf16, f32, bf16>(&dy[..split], &x[..split], &w, &inv[..2], &mut dx2[..split], &mut dw2);
        bwd_block::<f32, bf16, f32, bf16>(&dy[split..], &x[split..], &w, &inv[2..], &mut dx2[split..], &mut dw2);
        assert_eq!(dw, dw2);
        assert_eq!(f64s(&dx), f64s(&dx2));
    }

    #[test]
    fn zero_width_rows() {
        let eps = 0.25f32;
        let mut inv = vec![MaybeUninit::new(0f32); 3];
        fwd_rows::<f32, f32, f32>(&[], &[], eps, &mut [], &mut inv);
        let mut inv_plain = vec![0f32; 3];
        fwd_block::<f32, f32, f32, f32, f32>(&[], &[], eps, &mut [], &mut inv_plain);
        assert_eq!(inv_plain, vec![2.0; 3]);
        let mut inv2 = vec![0f64; 2];
        fwd_block_inplace::<f64, bf16, f64>(&mut [], &[], 0.0, &mut inv2);
        assert_eq!(inv2, vec![f64::INFINITY; 2], "eps = 0, n = 0: 1/sqrt(0)");
        let mut dw: Vec<f32> = vec![];
        bwd_rows::<f32, bf16, f16>(&[], &[], &[], &[1.0, 2.0], &mut [], &mut dw);
        bwd_block::<f32, bf16, f16, bf16>(&[], &[], &[], &[1.0, 2.0], &mut [], &mut dw);
    }

    #[test]
    fn zero_rows() {
        let w = vec![1.5f32; 40];
        fwd_rows::<bf16, f32, f32>(&[], &w, 1e-6, &mut [], &mut []);
        fwd_rows_inplace::<f32, f32>(&mut [], &w, 1e-6, &mut []);
        let mut dw = vec![0f32; 40];
        bwd_rows::<f32, f32, f32>(&[], &[], &w, &[], &mut [], &mut dw);
        assert_eq!(dw, vec![0.0; 40]);
    }

    #[test]
    fn all_zero_row_gives_zero_output() {
        let (x, w) = (vec![0f32; 50], vec![1f32; 50]);
        let mut y = vec![1f32; 50];
        let mut inv = vec![0f32; 1];
        fwd_block::<f32, f32, f32, f32, f32>(&x, &w, 1e-6, &mut y, &mut inv);
        assert_eq!(y, vec![0.0; 50]);
        assert!((inv[0] - 1000.0).abs() < 1e-2, "inv {}", inv[0]);
    }

    #[test]
    fn bf16_narrowing_matches_half() {
        let mut g = Lcg(5);
        let specials = [
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            1e-40,
            -1e-40,
            f32::from_bits(0x7F80_0001),
            f32::from_bits(0xFFC0_0001),
            f32::from_bits(0x3F80_8000),
            f32::from_bits(0x3F81_8000),
            f32::from_bits(0x3F80_8001),
            f32::from_bits(0x7F7F_FFFF),
        ];
        let randoms = (0..20_000).map(|_| f32::from_bits((g.next().to_bits() >> 7) as u32));
        for v in specials.into_iter().chain(randoms) {
            assert_eq!(f32_to_bf16_bits(v), bf16::from_f32(v).to_bits(), "{v:e} ({:#x})", v.to_bits());
        }
        for b in (0..=u16::MAX).step_by(7) {
            let (mine, theirs) = (bf16_bits_to_f32(b), bf16::from_bits(b).to_f32());
            assert!(mine.to_bits() == theirs.to_bits() || (mine.is_nan() && theirs.is_nan()), "{b:#x}");
        }
    }

    #[test]
    fn chunk_conversions_round_trip() {
        let mut g = Lcg(3);
        let wide: [f32; L] = core::array::from_fn(|_| g.next() as f32 * 1000.0);
        let h: [f16; L] = narrow::<f16, f32>(&wide);
        let b: [bf16; L] = narrow::<bf16, f32>(&wide);
        let d: [f64; L] = load::<f32, f64>(&wide);
        for i in 0..L {
            assert_eq!(h[i], f16::from_f32(wide[i]));
            assert_eq!(b[i], bf16::from_f32(wide[i]));
            assert_eq!(d[i], wide[i] as f64);
        }
        let hw: [f32; L] = load::<f16, f32>(&h);
        let bw: [f64; L] = load::<bf16, f64>(&b);
        for i in 0..L {
            assert_eq!(hw[i], h[i].to_f32());
            assert_eq!(bw[i], b[i].to_f64());
        }
        let back: [bf16; L] = narrow::<bf16, f64>(&d);
        assert_eq!(back, b);
    }

    #[test]
    #[should_panic(expected = "x has 10 elements")]
    fn fwd_length_mismatch_panics() {
        let mut y = vec![MaybeUninit::new(0f32); 12];
        let mut inv = vec![MaybeUninit::new(0f32); 3];
        fwd_rows::<f32, f32, f32>(&[0.0; 10], &[1.0; 4], 1e-6, &mut y, &mut inv);
    }

    #[test]
    #[should_panic(expected = "dw_acc has 3 elements")]
    fn bwd_length_mismatch_panics() {
        let mut dx = vec![MaybeUninit::new(0f32); 8];
        bwd_rows::<f32, f32, f32>(&[0.0; 8], &[0.0; 8], &[1.0; 4], &[1.0; 2], &mut dx, &mut [0.0; 3]);
    }
}
