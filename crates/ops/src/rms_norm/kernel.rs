//! Slice-level CPU kernels of RMS normalization, generic over the float dtypes.
//!
//! Forward, per row of `n` elements:
//! `inv_rms = 1/sqrt(mean(x^2) + eps)`, `y_j = x_j * inv_rms * w_j`.
//!
//! Backward, with `r = inv_rms` of the row, recomputed from `x` while the row is
//! in cache (the backward reads every row anyway, so it needs nothing from the
//! forward; a pass for the sum of squares, then one for `sum_k(dy_k*w_k*x_k)`,
//! measured faster than one fused pass):
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
//! multiplies and adds (no FMA), and every sum kept in `L` (32) independent lanes,
//! added group by group (`GROUP` chunks, 1024 elements: two levels, so the error
//! of a long row's sum grows far slower than with one running sum per lane), and
//! combined by a fixed pairwise tree at the end of the row. The lanes are
//! what lets LLVM vectorize the reductions without fast-math; the same order holds
//! in the AVX2+FMA copies that `multiversion` compiles of the public functions (and
//! in the AVX-512 and AVX-512 BF16 copies of the bf16 forward's row loops), so
//! results do not depend on the CPU the code runs on, but for the payload of a NaN
//! where two NaNs meet in a multiply (x86 keeps the first operand's, and LLVM may
//! commute the operands).
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
//!   nearest even, NaN kept quiet, to narrow), which vectorize (in `convert.rs`,
//!   tested bit for bit against `half`); where the CPU has AVX-512 BF16 the
//!   forward narrows with `vcvtne2ps2bf16` instead, the same bits (see
//!   `bf16_avx512.rs`), and on an AVX2 CPU without it the rows whose products
//!   cannot be NaN are narrowed without the NaN case, the same bits there (see
//!   `bf16_avx2.rs`);
//! - `f16` goes through `half`'s slice conversions, which use F16C when the CPU
//!   has it (detected at run time) — faster here than a branch-free bit-level
//!   conversion, which needs some twenty vector operations per eight values;
//! - `f32` and `f64` are plain casts.

use core::any::{Any, TypeId};
use core::mem::MaybeUninit;

use crate::float::{AccFloat, Float};
use crate::slot::Slot;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use multiversion::multiversion;
use multiversion::target::match_target;

use super::convert::{bf16_bits_to_f32, bf16_pair_to_f32, f32_to_bf16_bits, f32_to_bf16_pair};

#[cfg(target_arch = "x86_64")]
mod bf16_avx2;
#[cfg(target_arch = "x86_64")]
mod bf16_avx512;
#[cfg(target_arch = "x86_64")]
mod prefetch;
#[cfg(test)]
mod tests;

/// Elements per chunk, and the number of independent partial sums per reduction.
const L: usize = 32;

/// Chunks per group of a row's sums: each lane adds at most this many values before
/// the group's lanes are added into the row's, so the rounding error of a sum over a
/// row of `n` grows with `GROUP + n / (L * GROUP)` additions per lane, not `n / L`
/// (at 65536 elements about 20 times less). Rows of up to `L * GROUP` (1024)
/// elements are one group: their sums are those of a single level.
const GROUP: usize = 32;

/// `a + b`, lane by lane.
#[inline(always)]
fn add_lanes<A: AccFloat>(mut a: [A; L], b: [A; L]) -> [A; L] {
    for i in 0..L {
        a[i] += b[i];
    }
    a
}

// ---------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------

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

/// Narrows a chunk and stores it into `dst` (`dst.len() <= L`: a row's last,
/// partial chunk stores only its first `dst.len()` elements).
#[inline(always)]
fn store<T: Float, A: AccFloat, O: Slot<T>>(src: &[A; L], dst: &mut [O]) {
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
// The pair layout (bf16 rows of the forward)
// ---------------------------------------------------------------------------
//
// A chunk of L bf16 is read as L/2 little-endian 32-bit words, pair k holding
// elements 2k and 2k+1, and widened with a shift and a mask (no shuffle): lane k
// gets element 2k and lane L/2 + k element 2k+1. Narrowing packs the lanes back
// the same way. The weight is widened once into the same order ([`pair_weight`]),
// every operation between them is lane by lane, and the sum of squares is put
// back in natural lane order ([`unpair`]) before the fixed tree: the results are
// those of the natural layout, bit for bit.

/// Whether `T` is `bf16` (known when compiling: the test folds away).
#[inline(always)]
fn is_bf16<T: 'static>() -> bool {
    TypeId::of::<T>() == TypeId::of::<bf16>()
}

/// Whether rows of `T` are walked in the pair layout (`T` is `bf16`).
#[inline(always)]
fn is_pairs<T: 'static>() -> bool {
    is_bf16::<T>()
}

/// A chunk of `bf16` (as `T`) widened to `f32` (as `A`) in the pair layout.
/// Only called where `T` is `bf16` and `A` is `f32`; otherwise the natural [`load`].
#[inline(always)]
fn load_pairs<T: Float, A: AccFloat>(src: &[T; L]) -> [A; L] {
    let mut out = [A::ZERO; L];
    let (b, o) = ((src as &dyn Any).downcast_ref::<[bf16; L]>(), (&mut out as &mut dyn Any).downcast_mut::<[f32; L]>());
    let (Some(b), Some(o)) = (b, o) else { return load(src) };
    let words: [u32; L / 2] = zerocopy::transmute!(*b);
    for k in 0..L / 2 {
        (o[k], o[L / 2 + k]) = bf16_pair_to_f32(u32::from_le(words[k]));
    }
    out
}

/// A chunk of `f32` (as `A`) in the pair layout narrowed to `bf16` (as `T`), the
/// inverse of [`load_pairs`]. Only called where `T` is `bf16` and `A` is `f32`.
#[inline(always)]
fn narrow_pairs<T: Float, A: AccFloat>(src: &[A; L]) -> [T; L] {
    let mut out = [T::default(); L];
    let (f, o) = ((src as &dyn Any).downcast_ref::<[f32; L]>(), (&mut out as &mut dyn Any).downcast_mut::<[bf16; L]>());
    let (Some(f), Some(o)) = (f, o) else { return narrow(src) };
    let mut words = [0u32; L / 2];
    for k in 0..L / 2 {
        words[k] = f32_to_bf16_pair(f[k], f[L / 2 + k]).to_le();
    }
    *o = zerocopy::transmute!(words);
    out
}

/// A chunk in natural order rearranged into the pair layout.
#[inline(always)]
fn pair<A: AccFloat>(a: [A; L]) -> [A; L] {
    let mut out = a;
    for k in 0..L / 2 {
        out[k] = a[2 * k];
        out[L / 2 + k] = a[2 * k + 1];
    }
    out
}

/// A chunk in the pair layout put back in natural order.
#[inline(always)]
fn unpair<A: AccFloat>(a: [A; L]) -> [A; L] {
    let mut out = a;
    for k in 0..L / 2 {
        out[2 * k] = a[k];
        out[2 * k + 1] = a[L / 2 + k];
    }
    out
}

/// The widened weight in the pair layout, padded with zeros to whole chunks.
fn pair_weight<A: AccFloat>(w: &[A]) -> Vec<A> {
    let mut out = Vec::with_capacity(w.len().next_multiple_of(L));
    for c in w.chunks(L) {
        out.extend_from_slice(&pair(pad_or_copy(c)));
    }
    out
}

/// A chunk of up to `L` accumulators, padded with zeros.
#[inline(always)]
fn pad_or_copy<A: AccFloat>(src: &[A]) -> [A; L] {
    let mut buf = [A::ZERO; L];
    buf[..src.len()].copy_from_slice(src);
    buf
}

/// `sum(x^2)` of one row of `bf16` (as `T`), read in the pair layout; the same
/// bits as [`sum_sq`].
#[inline(always)]
fn sum_sq_pairs<T: Float, A: AccFloat>(x: &[T]) -> A {
    // The groups of [`sum_sq`]: whole chunks group by group, each group's lanes added
    // into `total` one group late, so that a partial chunk at the row's end joins the
    // last group as in `sum_sq` (a group's partial chunk inside the group loop, or a
    // counter in one loop over all chunks, compiled to slower code here).
    let whole = x.len() / L * L;
    let (body, tail) = x.split_at(whole);
    let mut total = [A::ZERO; L];
    let mut acc = [A::ZERO; L];
    for group in body.chunks(L * GROUP) {
        total = add_lanes(total, acc);
        acc = [A::ZERO; L];
        for c in group.chunks_exact(L) {
            acc = add_sq(acc, load_pairs::<T, A>(arr(c)));
        }
    }
    if !tail.is_empty() {
        if whole.is_multiple_of(L * GROUP) {
            // The last group is full (or there is none): the partial chunk is a group.
            total = add_lanes(total, acc);
            acc = [A::ZERO; L];
        }
        let mut buf = [T::default(); L];
        buf[..tail.len()].copy_from_slice(tail);
        acc = add_sq(acc, load_pairs::<T, A>(&buf));
    }
    reduce(unpair(add_lanes(total, acc)))
}

/// Overwrites a `bf16` row (as `T`) with `xy * r * w` in the pair layout (`w` from
/// [`pair_weight`]), each chunk narrowed by `narrow` ([`narrow_pairs`], the
/// AVX-512 BF16 one of `bf16_avx512.rs`, or on a row that cannot hold a NaN the
/// AVX2 one of `bf16_avx2.rs`: the same bits). `each(k)` runs before
/// whole chunk `k` (the AVX-512 BF16 and AVX2 loops prefetch the next row there).
#[inline(always)]
fn scale_row_pairs_inplace<T: Float, A: AccFloat>(
    xy: &mut [T],
    w: &[A],
    r: A,
    narrow: impl Fn(&[A; L]) -> [T; L],
    each: impl Fn(usize),
) {
    let mut xc = xy.chunks_exact_mut(L);
    let mut wc = w.chunks_exact(L);
    for (k, (xs, ws)) in (&mut xc).zip(&mut wc).enumerate() {
        each(k);
        let v = scale(load_pairs::<T, A>(arr(xs)), *arr(ws), r);
        xs.copy_from_slice(&narrow(&v));
    }
    // The weight's last chunk, padded by `pair_weight`, goes with the row's tail.
    let xs = xc.into_remainder();
    if let Some(ws) = wc.next() {
        let len = xs.len();
        let mut buf = [T::default(); L];
        buf[..len].copy_from_slice(xs);
        let v = scale(load_pairs::<T, A>(&buf), *arr(ws), r);
        xs.copy_from_slice(&narrow(&v)[..len]);
    }
}

/// Writes `y = x * r * w` for one row, `x` and `y` both `bf16` (as `X`, `Y`), in
/// the pair layout (`w` from [`pair_weight`]), narrowed by `narrow` and calling
/// `each` (as in [`scale_row_pairs_inplace`]).
#[inline(always)]
fn scale_row_pairs<X: Float, Y: Float, O: Slot<Y>>(
    x: &[X],
    w: &[Y::Acc],
    r: Y::Acc,
    y: &mut [O],
    narrow: impl Fn(&[Y::Acc; L]) -> [Y; L],
    each: impl Fn(usize),
) {
    let mut xc = x.chunks_exact(L);
    let mut wc = w.chunks_exact(L);
    let mut yc = y.chunks_exact_mut(L);
    for (k, ((xs, ws), ys)) in (&mut xc).zip(&mut wc).zip(&mut yc).enumerate() {
        each(k);
        let v = scale(load_pairs::<X, Y::Acc>(arr(xs)), *arr(ws), r);
        for (d, s) in ys.iter_mut().zip(narrow(&v)) {
            d.put(s);
        }
    }
    // The weight's last chunk, padded by `pair_weight`, goes with the row's tail.
    let (xs, ys) = (xc.remainder(), yc.into_remainder());
    if let Some(ws) = wc.next() {
        let mut buf = [X::default(); L];
        buf[..xs.len()].copy_from_slice(xs);
        let v = scale(load_pairs::<X, Y::Acc>(&buf), *arr(ws), r);
        for (d, s) in ys.iter_mut().zip(narrow(&v)) {
            d.put(s);
        }
    }
}

/// The narrowings of a pair-layout row loop: `any` for every row, `no_nan` for
/// the rows whose products cannot be NaN ([`products_have_no_nan`]). Both give the
/// bits of [`narrow_pairs`] where they are used: the AVX2 loops narrow those rows
/// without the NaN case (`bf16_avx2.rs`); elsewhere the two are one function.
#[derive(Clone, Copy)]
struct Narrowing<N, M> {
    any: N,
    no_nan: M,
}

impl<N: Copy> Narrowing<N, N> {
    /// One narrowing for every row.
    #[inline(always)]
    fn one(f: N) -> Self {
        Narrowing { any: f, no_nan: f }
    }
}

/// Whether no product `x * r * w` of a row can be NaN, from the row's sum of
/// squares `sum_sq`, its `r = inv_rms(sum_sq, n, eps)` and whether every weight is
/// finite. A finite `sum_sq` means every `x` is finite; with `eps >= 0` and `r`
/// finite, `|x * r| <= sqrt(n)` (up to rounding, as `r^2 * x^2 / n <= r^2 * mean
/// <= 1`), so `x * r` is finite, and a finite times a finite weight is finite or
/// an infinity, never NaN. Otherwise (a NaN or infinite `x`, a zero row with `eps`
/// of 0, a negative or NaN `eps`) the row takes the narrowing with the NaN case.
#[inline(always)]
fn products_have_no_nan<A: AccFloat>(sum_sq: A, r: A, eps: A, w_finite: bool) -> bool {
    w_finite && eps >= A::ZERO && sum_sq.to_f64().is_finite() && r.to_f64().is_finite()
}

/// Whether every element of `w` (a pair weight: whole chunks) is finite: `v * 0`
/// is ±0 for a finite `v` and NaN otherwise, summed in `L` lanes (vectorized, no
/// early exit; a call's rows are many times longer than its weight).
#[inline(always)]
fn all_finite<A: AccFloat>(w: &[A]) -> bool {
    let mut acc = [A::ZERO; L];
    let mut chunks = w.chunks_exact(L);
    for c in &mut chunks {
        for i in 0..L {
            acc[i] += c[i] * A::ZERO;
        }
    }
    reduce(acc) == A::ZERO && chunks.remainder().iter().all(|v| *v * A::ZERO == A::ZERO)
}

/// The rows of a `bf16` forward in place, in the pair layout (`w` from
/// [`pair_weight`], `n > 0`): `inv_rms` of each row, then the row overwritten
/// with `x * inv_rms * w`, each chunk narrowed by `narrow.no_nan` where
/// [`products_have_no_nan`] holds for the row and by `narrow.any` elsewhere,
/// calling `fetch(next_row, k)` before chunk `k` of each row's scale pass (as
/// [`rows_body`]). Portable with [`narrow_pairs`] and no prefetch;
/// [`pair_rows_inplace`] runs it compiled for AVX-512 where the CPU has it (with the
/// AVX-512 BF16 narrowing and the prefetch of the next row where it has that too:
/// `bf16_avx512.rs`), else for AVX2 with that prefetch and the narrowing of
/// `bf16_avx2.rs` for the rows without NaN (`prefetch.rs`).
#[inline(always)]
fn pair_rows_inplace_body<T: Float, I: Slot<T::Acc>>(
    xy: &mut [T],
    w: &[T::Acc],
    n: usize,
    eps: T::Acc,
    inv: &mut [I],
    narrow: Narrowing<impl Fn(&[T::Acc; L]) -> [T; L] + Copy, impl Fn(&[T::Acc; L]) -> [T; L] + Copy>,
    fetch: impl Fn(&[T], usize),
) {
    let w_finite = all_finite(w);
    let mut rows = xy.chunks_exact_mut(n).zip(inv.iter_mut()).peekable();
    while let Some((row, ir)) = rows.next() {
        let s = sum_sq_pairs::<T, T::Acc>(row);
        let r = inv_rms(s, n, eps);
        ir.put(r);
        let next: &[T] = rows.peek().map_or(&[], |(next, _)| next);
        if products_have_no_nan(s, r, eps, w_finite) {
            scale_row_pairs_inplace(row, w, r, narrow.no_nan, |k| fetch(next, k));
        } else {
            scale_row_pairs_inplace(row, w, r, narrow.any, |k| fetch(next, k));
        }
    }
}

/// [`pair_rows_inplace_body`], compiled also for AVX-512 with BF16 (narrowing with
/// `vcvtne2ps2bf16`, see `bf16_avx512.rs`), for AVX-512 without it (with BW: LLVM
/// packs the pair words with one `vpermt2w`) and for AVX2+FMA, chosen at run time;
/// every copy gives the same bits (lane-wise integer operations or the exact
/// instruction, plain IEEE multiplies and adds in a fixed order). The AVX-512
/// copies are for these loops only: on the natural layout of `f32` rows LLVM's
/// 512-bit cost model picks gathers and scatters, several times slower.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx512dq+avx512bf16+avx2+fma",
    "x86_64+avx512f+avx512bw+avx512vl+avx512dq+avx2+fma",
    "x86_64+avx2+fma"
))]
fn pair_rows_inplace<T: Float, I: Slot<T::Acc>>(xy: &mut [T], w: &[T::Acc], n: usize, eps: T::Acc, inv: &mut [I]) {
    match_target! {
        "x86_64+avx512bf16" => bf16_avx512::pair_rows_inplace::<T, I>(xy, w, n, eps, inv),
        "x86_64+avx512f" => pair_rows_inplace_body::<T, I>(xy, w, n, eps, inv, Narrowing::one(narrow_pairs::<T, T::Acc>), |_, _| {}),
        "x86_64+avx2" => prefetch::pair_rows_inplace::<T, I>(xy, w, n, eps, inv),
        _ => pair_rows_inplace_body::<T, I>(xy, w, n, eps, inv, Narrowing::one(narrow_pairs::<T, T::Acc>), |_, _| {}),
    }
}

/// The rows of a `bf16` forward out of place, in the pair layout (as
/// [`pair_rows_inplace_body`], writing `y`). Portable with [`narrow_pairs`] and no
/// prefetch; see [`pair_rows`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn pair_rows_body<X: Float, Y: Float, O: Slot<Y>, I: Slot<Y::Acc>>(
    x: &[X],
    w: &[Y::Acc],
    n: usize,
    eps: Y::Acc,
    y: &mut [O],
    inv: &mut [I],
    narrow: Narrowing<impl Fn(&[Y::Acc; L]) -> [Y; L] + Copy, impl Fn(&[Y::Acc; L]) -> [Y; L] + Copy>,
    fetch: impl Fn(&[X], usize),
) {
    let w_finite = all_finite(w);
    let mut rows = x.chunks_exact(n).zip(y.chunks_exact_mut(n)).zip(inv.iter_mut()).peekable();
    while let Some(((xr, yr), ir)) = rows.next() {
        let s = sum_sq_pairs::<X, Y::Acc>(xr);
        let r = inv_rms(s, n, eps);
        ir.put(r);
        let next: &[X] = rows.peek().map_or(&[], |((next, _), _)| next);
        if products_have_no_nan(s, r, eps, w_finite) {
            scale_row_pairs::<X, Y, O>(xr, w, r, yr, narrow.no_nan, |k| fetch(next, k));
        } else {
            scale_row_pairs::<X, Y, O>(xr, w, r, yr, narrow.any, |k| fetch(next, k));
        }
    }
}

/// [`pair_rows_body`], compiled as [`pair_rows_inplace`] is.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx512dq+avx512bf16+avx2+fma",
    "x86_64+avx512f+avx512bw+avx512vl+avx512dq+avx2+fma",
    "x86_64+avx2+fma"
))]
fn pair_rows<X: Float, Y: Float, O: Slot<Y>, I: Slot<Y::Acc>>(
    x: &[X],
    w: &[Y::Acc],
    n: usize,
    eps: Y::Acc,
    y: &mut [O],
    inv: &mut [I],
) {
    match_target! {
        "x86_64+avx512bf16" => bf16_avx512::pair_rows::<X, Y, O, I>(x, w, n, eps, y, inv),
        "x86_64+avx512f" => pair_rows_body::<X, Y, O, I>(x, w, n, eps, y, inv, Narrowing::one(narrow_pairs::<Y, Y::Acc>), |_, _| {}),
        "x86_64+avx2" => prefetch::pair_rows::<X, Y, O, I>(x, w, n, eps, y, inv),
        _ => pair_rows_body::<X, Y, O, I>(x, w, n, eps, y, inv, Narrowing::one(narrow_pairs::<Y, Y::Acc>), |_, _| {}),
    }
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

/// `sum(x^2)` of one row, in `A`: in [`L`] lanes, group by group ([`GROUP`]), then
/// the lanes' fixed tree.
#[inline(always)]
fn sum_sq<X: Float, A: AccFloat>(x: &[X]) -> A {
    let mut total = [A::ZERO; L];
    for group in x.chunks(L * GROUP) {
        let mut acc = [A::ZERO; L];
        let mut chunks = group.chunks_exact(L);
        for c in &mut chunks {
            acc = add_sq(acc, load::<X, A>(arr(c)));
        }
        if !chunks.remainder().is_empty() {
            acc = add_sq(acc, load_tail::<X, A>(chunks.remainder()));
        }
        total = add_lanes(total, acc);
    }
    reduce(total)
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

/// Writes `y = x * r * w` for one row, calling `each(k)` before whole chunk `k`
/// (the forward prefetches the next row there).
#[inline(always)]
fn scale_row<X: Float, Y: Float, O: Slot<Y>>(x: &[X], w: &[Y::Acc], r: Y::Acc, y: &mut [O], each: impl Fn(usize)) {
    let mut xc = x.chunks_exact(L);
    let mut wc = w.chunks_exact(L);
    let mut yc = y.chunks_exact_mut(L);
    for (k, ((xs, ws), ys)) in (&mut xc).zip(&mut wc).zip(&mut yc).enumerate() {
        each(k);
        let v = scale(load::<X, Y::Acc>(arr(xs)), *arr(ws), r);
        store::<Y, Y::Acc, O>(&v, ys);
    }
    let (xs, ws, ys) = (xc.remainder(), wc.remainder(), yc.into_remainder());
    if !xs.is_empty() {
        let v = scale(load_tail::<X, Y::Acc>(xs), pad(ws), r);
        store::<Y, Y::Acc, O>(&v, ys);
    }
}

/// Overwrites `xy` with `xy * r * w` for one row, calling `each(k)` before whole
/// chunk `k` (as [`scale_row`]).
#[inline(always)]
fn scale_row_inplace<T: Float>(xy: &mut [T], w: &[T::Acc], r: T::Acc, each: impl Fn(usize)) {
    let mut xc = xy.chunks_exact_mut(L);
    let mut wc = w.chunks_exact(L);
    for (k, (xs, ws)) in (&mut xc).zip(&mut wc).enumerate() {
        each(k);
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

/// `sum_k dy_k * w_k * x_k` of one row, in `A`, grouped as [`sum_sq`].
#[inline(always)]
fn dot3<Y: Float, X: Float, A: AccFloat>(dy: &[Y], x: &[X], w: &[A]) -> A {
    let mut total = [A::ZERO; L];
    let groups = dy.chunks(L * GROUP).zip(x.chunks(L * GROUP)).zip(w.chunks(L * GROUP));
    for ((dy, x), w) in groups {
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
        total = add_lanes(total, acc);
    }
    reduce(total)
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
fn bwd_row<Y: Float, X: Float, O: Slot<X>>(
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

/// The rows of a forward out of place in the natural layout (every dtype but the
/// bf16 pairs; `w` widened, `n > 0`): `inv_rms` of each row, then `y = x * inv_rms *
/// w`, calling `fetch(next_row, k)` before chunk `k` of each row's scale pass (the
/// AVX2 copy prefetches the next row there, see `prefetch.rs`; elsewhere it does
/// nothing).
#[inline(always)]
fn rows_body<X: Float, Y: Float, O: Slot<Y>, I: Slot<Y::Acc>>(
    x: &[X],
    w: &[Y::Acc],
    n: usize,
    eps: Y::Acc,
    y: &mut [O],
    inv: &mut [I],
    fetch: impl Fn(&[X], usize),
) {
    let mut rows = x.chunks_exact(n).zip(y.chunks_exact_mut(n)).zip(inv.iter_mut()).peekable();
    while let Some(((xr, yr), ir)) = rows.next() {
        let r = inv_rms(sum_sq::<X, Y::Acc>(xr), n, eps);
        ir.put(r);
        let next: &[X] = rows.peek().map_or(&[], |((next, _), _)| next);
        scale_row::<X, Y, O>(xr, w, r, yr, |k| fetch(next, k));
    }
}

/// The rows of a forward in place in the natural layout, as [`rows_body`].
#[inline(always)]
fn rows_inplace_body<T: Float, I: Slot<T::Acc>>(
    xy: &mut [T],
    w: &[T::Acc],
    n: usize,
    eps: T::Acc,
    inv: &mut [I],
    fetch: impl Fn(&[T], usize),
) {
    let mut rows = xy.chunks_exact_mut(n).zip(inv.iter_mut()).peekable();
    while let Some((row, ir)) = rows.next() {
        let r = inv_rms(sum_sq::<T, T::Acc>(row), n, eps);
        ir.put(r);
        let next: &[T] = rows.peek().map_or(&[], |(next, _)| next);
        scale_row_inplace(row, w, r, |k| fetch(next, k));
    }
}

/// `rows * n`, checked.
fn elems(rows: usize, n: usize) -> usize {
    rows.checked_mul(n).expect("rms_norm kernel: rows * n overflows usize")
}

/// [`fwd_rows`], for any output slot type, with the loop over rows of the natural
/// layout given (see [`rows_body`]).
#[inline(always)]
fn fwd_block<X: Float, W: Float, Y: Float, O: Slot<Y>, I: Slot<Y::Acc>>(
    x: &[X],
    w: &[W],
    eps: Y::Acc,
    y: &mut [O],
    inv: &mut [I],
    natural_rows: impl FnOnce(&[X], &[Y::Acc], usize, Y::Acc, &mut [O], &mut [I]),
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
    if is_pairs::<X>() && is_pairs::<Y>() {
        pair_rows::<X, Y, O, I>(x, &pair_weight(&w), n, eps, y, inv);
        return;
    }
    natural_rows(x, &w, n, eps, y, inv);
}

/// [`fwd_rows_inplace`], for any `inv_rms` slot type, with the loop over rows of the
/// natural layout given (see [`rows_inplace_body`]).
#[inline(always)]
fn fwd_block_inplace<T: Float, W: Float, I: Slot<T::Acc>>(
    xy: &mut [T],
    w: &[W],
    eps: T::Acc,
    inv: &mut [I],
    natural_rows_inplace: impl FnOnce(&mut [T], &[T::Acc], usize, T::Acc, &mut [I]),
) {
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
    if is_pairs::<T>() {
        pair_rows_inplace::<T, I>(xy, &pair_weight(&w), n, eps, inv);
        return;
    }
    natural_rows_inplace(xy, &w, n, eps, inv);
}

/// [`bwd_rows`], for any `dx` slot type.
#[inline(always)]
fn bwd_block<Y: Float, X: Float, W: Float, O: Slot<X>>(
    dy: &[Y],
    x: &[X],
    w: &[W],
    eps: Y::Acc,
    dx: &mut [O],
    dw_acc: &mut [Y::Acc],
) {
    let n = w.len();
    let len = x.len();
    assert!(n > 0 || len == 0, "rms_norm bwd_rows: x has {len} elements, expected 0 for n 0");
    assert!(n == 0 || len.is_multiple_of(n), "rms_norm bwd_rows: x has {len} elements, not a multiple of n {n}");
    assert!(dy.len() == len, "rms_norm bwd_rows: dy has {} elements, expected x's {len}", dy.len());
    assert!(dx.len() == len, "rms_norm bwd_rows: dx has {} elements, expected x's {len}", dx.len());
    assert!(dw_acc.len() == n, "rms_norm bwd_rows: dw_acc has {} elements, expected n {n}", dw_acc.len());
    if len == 0 {
        return;
    }
    let n_acc = Y::Acc::from_usize(n);
    let w = widen_weight::<W, Y::Acc>(w);
    let rows_iter = dy.chunks_exact(n).zip(x.chunks_exact(n)).zip(dx.chunks_exact_mut(n));
    for ((dyr, xr), dxr) in rows_iter {
        // The row is in L1 after the first of these two passes (measured faster
        // than one fused pass, whose two accumulator arrays LLVM keeps worse).
        let r = inv_rms(sum_sq::<X, Y::Acc>(xr), n, eps);
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
/// Compiled twice, for baseline x86-64 and for AVX2+FMA (chosen at run time), and
/// the loops over bf16 rows (`X` and `Y` both `bf16`) also for AVX-512; all give
/// the same results, bit for bit (NaN payloads aside, see the module docs).
///
/// # Panics
/// If the lengths disagree (a caller bug: the handlers validate shapes first).
pub fn fwd_rows<X: Float, W: Float, Y: Float>(
    x: &[X],
    w: &[W],
    eps: Y::Acc,
    y: &mut [MaybeUninit<Y>],
    inv: &mut [MaybeUninit<Y::Acc>],
) {
    fwd_rows_slots::<X, W, Y, _, _>(x, w, eps, y, inv);
}

/// [`fwd_rows`] into any output slots, compiled for baseline x86-64 and for
/// AVX2+FMA (chosen at run time; that copy prefetches the next row, see
/// `prefetch.rs`).
#[multiversion(targets("x86_64+avx2+fma"))]
fn fwd_rows_slots<X: Float, W: Float, Y: Float, O: Slot<Y>, I: Slot<Y::Acc>>(
    x: &[X],
    w: &[W],
    eps: Y::Acc,
    y: &mut [O],
    inv: &mut [I],
) {
    match_target! {
        "x86_64+avx2" => fwd_block::<X, W, Y, O, I>(x, w, eps, y, inv, |x, w, n, eps, y, inv| {
            prefetch::rows(x, w, n, eps, y, inv)
        }),
        _ => fwd_block::<X, W, Y, O, I>(x, w, eps, y, inv, |x, w, n, eps, y, inv| {
            rows_body(x, w, n, eps, y, inv, |_, _| {})
        }),
    }
}

/// Forward RMS normalization of a block of rows, in place: `xy` holds `x` on entry
/// and `y` (same dtype `T`) on return. Otherwise as [`fwd_rows`], with `T::Acc` as
/// the accumulator (the caller takes this path only when `y`'s dtype is `x`'s).
/// Gives the same bits as [`fwd_rows`] with `Y = T`.
///
/// # Panics
/// If `xy.len() != inv.len() * w.len()`.
pub fn fwd_rows_inplace<T: Float, W: Float>(xy: &mut [T], w: &[W], eps: T::Acc, inv: &mut [MaybeUninit<T::Acc>]) {
    fwd_rows_inplace_slots::<T, W, _>(xy, w, eps, inv);
}

/// [`fwd_rows_inplace`] into any `inv_rms` slots, compiled as [`fwd_rows_slots`].
#[multiversion(targets("x86_64+avx2+fma"))]
fn fwd_rows_inplace_slots<T: Float, W: Float, I: Slot<T::Acc>>(xy: &mut [T], w: &[W], eps: T::Acc, inv: &mut [I]) {
    match_target! {
        "x86_64+avx2" => fwd_block_inplace::<T, W, I>(xy, w, eps, inv, |xy, w, n, eps, inv| {
            prefetch::rows_inplace(xy, w, n, eps, inv)
        }),
        _ => fwd_block_inplace::<T, W, I>(xy, w, eps, inv, |xy, w, n, eps, inv| {
            rows_inplace_body(xy, w, n, eps, inv, |_, _| {})
        }),
    }
}

/// Backward RMS normalization of a block of rows.
///
/// `n = w.len()`; `dy`, `x` and `dx` hold `rows * n` elements, row-major. Each
/// row's `r = inv_rms = 1/sqrt(mean(x^2) + eps)` is computed here, bit for bit as
/// [`fwd_rows`] computes it, while the row is in cache for the dot product.
/// Writes `dx_j = r*w_j*dy_j - x_j * r^3/n * sum_k(dy_k*w_k*x_k)` (dtype `X`) and
/// adds this block's `dweight` terms `dy_j*x_j*r`, row by row in order, to
/// `dw_acc` (`n` accumulators, not cleared here). Computed in `Y::Acc`.
///
/// # Panics
/// If the lengths disagree (`x.len()` not a multiple of `n`, or `dy`, `dx` not of
/// `x`'s length, or `dw_acc` not of `n`).
pub fn bwd_rows<Y: Float, X: Float, W: Float>(
    dy: &[Y],
    x: &[X],
    w: &[W],
    eps: Y::Acc,
    dx: &mut [MaybeUninit<X>],
    dw_acc: &mut [Y::Acc],
) {
    if is_bf16::<X>() || is_bf16::<Y>() {
        bwd_rows_bf16(dy, x, w, eps, dx, dw_acc);
    } else {
        bwd_rows_256(dy, x, w, eps, dx, dw_acc);
    }
}

/// [`bwd_rows`] with `bf16` rows, also compiled for AVX-512: the widening and
/// narrowing of `bf16` run about 1.5 times faster in 512-bit lanes here (`cargo run
/// --release -p xla-ffi-rs-ops --example rms_kernel_speed`), while the `f32` rows
/// gain nothing, so they keep [`bwd_rows_256`]. Same bits either way (NaN payloads
/// aside, see the module docs): lane-wise IEEE operations in a fixed order.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma"))]
fn bwd_rows_bf16<Y: Float, X: Float, W: Float, O: Slot<X>>(
    dy: &[Y],
    x: &[X],
    w: &[W],
    eps: Y::Acc,
    dx: &mut [O],
    dw_acc: &mut [Y::Acc],
) {
    bwd_block::<Y, X, W, O>(dy, x, w, eps, dx, dw_acc);
}

/// [`bwd_rows`] for rows of any other dtype.
#[multiversion(targets("x86_64+avx2+fma"))]
fn bwd_rows_256<Y: Float, X: Float, W: Float, O: Slot<X>>(
    dy: &[Y],
    x: &[X],
    w: &[W],
    eps: Y::Acc,
    dx: &mut [O],
    dw_acc: &mut [Y::Acc],
) {
    bwd_block::<Y, X, W, O>(dy, x, w, eps, dx, dw_acc);
}
