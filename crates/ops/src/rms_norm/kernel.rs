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
//! chosen by [`Any`](core::any::Any) downcasts of whole chunks, which the compiler resolves for
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

//!
//! The files: `chunk.rs` (the widening and narrowing of a chunk, the weight
//! widened once, the lanes' fixed tree), `pairs.rs` (the pair layout of the bf16
//! forward's rows), `rows.rs` (the forward's one row driver, out of place and in
//! place, with the layout, the narrowing and the prefetch as strategies),
//! `bwd.rs` (the backward's row kernels); this file holds the block kernels and
//! the public entry points with their per-CPU copies.

use core::mem::MaybeUninit;

use crate::float::{AccFloat, Float};
use crate::slot::Slot;
use multiversion::multiversion;
use multiversion::target::match_target;

use self::bwd::{bwd_row, dot3};
use self::chunk::{narrow, widen_weight};
use self::pairs::{is_bf16, is_pairs, narrow_pairs, pair_weight};
use self::rows::{inv_rms, rows_body, sum_sq, Natural, One, Pairs, SrcSink};

#[cfg(target_arch = "x86_64")]
mod bf16_avx2;
#[cfg(target_arch = "x86_64")]
mod bf16_avx512;
mod bwd;
mod chunk;
mod pairs;
#[cfg(target_arch = "x86_64")]
mod prefetch;
mod rows;
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

// ---------------------------------------------------------------------------
// Block kernels (generic over the source and sink, and the output slots)
// ---------------------------------------------------------------------------

/// `rows * n`, checked.
fn elems(rows: usize, n: usize) -> usize {
    rows.checked_mul(n).expect("rms_norm kernel: rows * n overflows usize")
}

/// [`fwd_rows`] and [`fwd_rows_inplace`], over any source and sink (`(x, y)` or
/// `xy`, see [`SrcSink`]) and any `inv_rms` slots, with the loop over rows of the
/// natural layout given (see [`rows_body`]); the bf16 rows go to [`pair_rows`].
#[inline(always)]
fn fwd_block<X: Float, W: Float, Y: Float, S: SrcSink<X, Y>, I: Slot<Y::Acc>>(
    io: S,
    w: &[W],
    eps: Y::Acc,
    inv: &mut [I],
    natural_rows: impl FnOnce(S, &[Y::Acc], usize, Y::Acc, &mut [I]),
) {
    let (n, rows) = (w.len(), inv.len());
    io.assert_len(elems(rows, n), rows, n);
    if n == 0 {
        let r = inv_rms(Y::Acc::ZERO, 0, eps);
        for i in inv.iter_mut() {
            i.put(r);
        }
        return;
    }
    let w = widen_weight::<W, Y::Acc>(w);
    if is_pairs::<X>() && is_pairs::<Y>() {
        pair_rows::<X, Y, S, I>(io, &pair_weight(&w), n, eps, inv);
        return;
    }
    natural_rows(io, &w, n, eps, inv);
}

/// The rows of a `bf16` forward in the pair layout ([`rows_body`] with [`Pairs`]),
/// compiled also for AVX-512 with BF16 (narrowing with `vcvtne2ps2bf16` and
/// prefetching the next row, see `bf16_avx512.rs`), for AVX-512 without it (with
/// BW: LLVM packs the pair words with one `vpermt2w`) and for AVX2+FMA (prefetching
/// the next row, and narrowing the rows without NaN as `bf16_avx2.rs` does: see
/// `prefetch.rs`), chosen at run time; every copy gives the same bits (lane-wise
/// integer operations or the exact instruction, plain IEEE multiplies and adds in a
/// fixed order). The AVX-512 copies are for these loops only: on the natural
/// layout of `f32` rows LLVM's 512-bit cost model picks gathers and scatters,
/// several times slower.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx512dq+avx512bf16+avx2+fma",
    "x86_64+avx512f+avx512bw+avx512vl+avx512dq+avx2+fma",
    "x86_64+avx2+fma"
))]
fn pair_rows<X: Float, Y: Float, S: SrcSink<X, Y>, I: Slot<Y::Acc>>(
    io: S,
    w: &[Y::Acc],
    n: usize,
    eps: Y::Acc,
    inv: &mut [I],
) {
    match_target! {
        "x86_64+avx512bf16" => bf16_avx512::pair_rows::<X, Y, S, I>(io, w, n, eps, inv),
        "x86_64+avx512f" => rows_body(io, w, n, eps, inv, Pairs, One(narrow_pairs::<Y, Y::Acc>), |_, _| {}),
        "x86_64+avx2" => prefetch::pair_rows::<X, Y, S, I>(io, w, n, eps, inv),
        _ => rows_body(io, w, n, eps, inv, Pairs, One(narrow_pairs::<Y, Y::Acc>), |_, _| {}),
    }
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
        // r^3 s / n, with each product near its result's magnitude: `r * r * r`
        // overflows for a row of small norm and eps 0 (f32: rms below 1.4e-13)
        // where dx is finite, and underflows for a large one.
        let c = r * (r * (r * s / n_acc));
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
pub fn fwd_rows<X: Float, W: Float, Y: Float>(
    x: &[X],
    w: &[W],
    eps: Y::Acc,
    y: &mut [MaybeUninit<Y>],
    inv: &mut [MaybeUninit<Y::Acc>],
) {
    fwd_rows_io::<X, W, Y, _, _>((x, y), w, eps, inv);
}

/// Forward RMS normalization of a block of rows, in place: `xy` holds `x` on entry
/// and `y` (same dtype `T`) on return. Otherwise as [`fwd_rows`], with `T::Acc` as
/// the accumulator (the caller takes this path only when `y`'s dtype is `x`'s).
/// Gives the same bits as [`fwd_rows`] with `Y = T`.
///
/// # Panics
/// If `xy.len() != inv.len() * w.len()`.
pub fn fwd_rows_inplace<T: Float, W: Float>(xy: &mut [T], w: &[W], eps: T::Acc, inv: &mut [MaybeUninit<T::Acc>]) {
    fwd_rows_io::<T, W, T, _, _>(xy, w, eps, inv);
}

/// [`fwd_rows`] and [`fwd_rows_inplace`] over any source and sink and any
/// `inv_rms` slots, compiled for baseline x86-64 and for AVX2+FMA (chosen at run
/// time; that copy prefetches the next row, see `prefetch.rs`).
#[multiversion(targets("x86_64+avx2+fma"))]
fn fwd_rows_io<X: Float, W: Float, Y: Float, S: SrcSink<X, Y>, I: Slot<Y::Acc>>(
    io: S,
    w: &[W],
    eps: Y::Acc,
    inv: &mut [I],
) {
    match_target! {
        "x86_64+avx2" => fwd_block::<X, W, Y, S, I>(io, w, eps, inv, |io, w, n, eps, inv| {
            prefetch::rows(io, w, n, eps, inv)
        }),
        _ => fwd_block::<X, W, Y, S, I>(io, w, eps, inv, |io, w, n, eps, inv| {
            rows_body(io, w, n, eps, inv, Natural, One(narrow::<Y, Y::Acc>), |_, _| {})
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
/// narrowing of `bf16` run about 1.5 times faster in 512-bit lanes here (`cargo bench
/// -p xla-ffi-rs-ops --bench kernels`), while the `f32` rows
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
