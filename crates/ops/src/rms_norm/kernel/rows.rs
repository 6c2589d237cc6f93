//! The forward's row driver: one loop over the rows of a block ([`rows_body`])
//! and one over the chunks of a row ([`scale_row`]), for out of place and in place
//! alike. A row is read from a source and written to a sink ([`SrcSink`]): `x`
//! and `y` apart, or one buffer `xy` whose sink is its source. The layout of a
//! row's chunks ([`Natural`], [`Pairs`]), the narrowing of its products ([`One`],
//! [`Split`]) and the prefetch of the next row (a closure) are strategies passed
//! in: every copy monomorphises to its own loop, with no choice made at run time.
//!
//! In place, each chunk is read whole (widened into an array of accumulators)
//! before its narrowed products are written over it, and the row's sum of squares
//! reads it before its scale pass: safe Rust throughout, so no `&` and `&mut` to
//! the same elements exist at once (the borrow checker holds the driver to it).

use core::slice::ChunksExact;

use super::chunk::{add_lanes, add_sq, arr, load, load_tail, pad, reduce};
use super::pairs::{load_pairs, sum_sq_pairs};
use super::{GROUP, L};
use crate::float::{AccFloat, Float};
use crate::slot::Slot;

// ---------------------------------------------------------------------------
// Sources and sinks
// ---------------------------------------------------------------------------

/// Positions read as `X` (the source) and written as `Y` (the sink): `(x, y)`, two
/// buffers of the same length, or `xy`, one buffer in place (`X` and `Y` the same
/// type), where each position is read before it is written. A block, a row or a
/// chunk of either is the same type, so one loop serves both.
pub(super) trait SrcSink<X, Y>: Sized {
    /// The source.
    fn src(&self) -> &[X];
    /// The first `mid` positions (`mid <= self.src().len()`) and the rest.
    fn split_at(self, mid: usize) -> (Self, Self);
    /// The whole pieces of `size` positions, in order (a remainder is left out).
    fn pieces(self, size: usize) -> impl Iterator<Item = Self>;
    /// Writes `v` to the sink (`v` as long as the positions).
    fn put(self, v: &[Y]);
    /// Panics, naming the buffer, unless the positions are `len = rows * n`.
    fn assert_len(&self, len: usize, rows: usize, n: usize);
}

/// Out of place: `x` read, `y` (uninitialized slots in the handlers) written.
impl<'a, X, Y: Copy, O: Slot<Y>> SrcSink<X, Y> for (&'a [X], &'a mut [O]) {
    #[inline(always)]
    fn src(&self) -> &[X] {
        self.0
    }

    #[inline(always)]
    fn split_at(self, mid: usize) -> (Self, Self) {
        let ((x0, x1), (y0, y1)) = (self.0.split_at(mid), self.1.split_at_mut(mid));
        ((x0, y0), (x1, y1))
    }

    #[inline(always)]
    fn pieces(self, size: usize) -> impl Iterator<Item = Self> {
        self.0.chunks_exact(size).zip(self.1.chunks_exact_mut(size))
    }

    #[inline(always)]
    fn put(self, v: &[Y]) {
        for (d, s) in self.1.iter_mut().zip(v) {
            d.put(*s);
        }
    }

    fn assert_len(&self, len: usize, rows: usize, n: usize) {
        let (x, y) = (self.0.len(), self.1.len());
        assert!(x == len, "rms_norm fwd_rows: x has {x} elements, expected rows {rows} * n {n}");
        assert!(y == len, "rms_norm fwd_rows: y has {y} elements, expected rows {rows} * n {n}");
    }
}

/// In place: the sink is the source.
impl<T: Copy> SrcSink<T, T> for &mut [T] {
    #[inline(always)]
    fn src(&self) -> &[T] {
        self
    }

    #[inline(always)]
    fn split_at(self, mid: usize) -> (Self, Self) {
        self.split_at_mut(mid)
    }

    #[inline(always)]
    fn pieces(self, size: usize) -> impl Iterator<Item = Self> {
        self.chunks_exact_mut(size)
    }

    #[inline(always)]
    fn put(self, v: &[T]) {
        self.copy_from_slice(v);
    }

    fn assert_len(&self, len: usize, rows: usize, n: usize) {
        let xy = self.len();
        assert!(xy == len, "rms_norm fwd_rows_inplace: xy has {xy} elements, expected rows {rows} * n {n}");
    }
}

// ---------------------------------------------------------------------------
// Strategies: the layout of a row's chunks, and the narrowing of its products
// ---------------------------------------------------------------------------

/// How a row's chunks are laid out in the accumulator lanes: its sum of squares,
/// the widening of a chunk, and the weight's chunk for the row's last, partial one.
pub(super) trait Layout: Copy {
    /// `sum(x^2)` of one row.
    fn sum_sq<X: Float, A: AccFloat>(x: &[X]) -> A;
    /// A chunk widened to the accumulator type.
    fn load<X: Float, A: AccFloat>(c: &[X; L]) -> [A; L];
    /// The weight's chunk for a row's partial last chunk, from the weight's chunks
    /// left after the row's whole ones.
    fn weight_tail<A: AccFloat>(wc: ChunksExact<'_, A>) -> [A; L];
}

/// Elements in their natural order (every dtype but the bf16 rows of the
/// forward); the weight as [`super::chunk::widen_weight`] gives it.
#[derive(Clone, Copy)]
pub(super) struct Natural;

impl Layout for Natural {
    #[inline(always)]
    fn sum_sq<X: Float, A: AccFloat>(x: &[X]) -> A {
        sum_sq::<X, A>(x)
    }

    #[inline(always)]
    fn load<X: Float, A: AccFloat>(c: &[X; L]) -> [A; L] {
        load::<X, A>(c)
    }

    #[inline(always)]
    fn weight_tail<A: AccFloat>(wc: ChunksExact<'_, A>) -> [A; L] {
        pad(wc.remainder())
    }
}

/// The pair layout of `bf16` rows (`pairs.rs`); the weight from
/// [`super::pairs::pair_weight`], padded to whole chunks.
#[derive(Clone, Copy)]
pub(super) struct Pairs;

impl Layout for Pairs {
    #[inline(always)]
    fn sum_sq<X: Float, A: AccFloat>(x: &[X]) -> A {
        sum_sq_pairs::<X, A>(x)
    }

    #[inline(always)]
    fn load<X: Float, A: AccFloat>(c: &[X; L]) -> [A; L] {
        load_pairs::<X, A>(c)
    }

    #[inline(always)]
    fn weight_tail<A: AccFloat>(mut wc: ChunksExact<'_, A>) -> [A; L] {
        // The weight's last chunk, padded by `pair_weight`, goes with the row's tail.
        wc.next().map_or([A::ZERO; L], |c| *arr(c))
    }
}

/// How a row's products are narrowed: by `any` on every row, or, where `SPLIT`,
/// by `no_nan` on the rows whose products cannot be NaN
/// ([`products_have_no_nan`]). Both give the same bits where they are used.
pub(super) trait Narrow<A, Y>: Copy {
    /// Whether the rows without NaN products take [`Narrow::no_nan`].
    const SPLIT: bool;
    /// Narrows a chunk of any row.
    fn any(self, v: &[A; L]) -> [Y; L];
    /// Narrows a chunk of a row whose products cannot be NaN.
    fn no_nan(self, v: &[A; L]) -> [Y; L];
}

/// One narrowing for every row.
#[derive(Clone, Copy)]
pub(super) struct One<F>(pub(super) F);

impl<A, Y, F: Fn(&[A; L]) -> [Y; L] + Copy> Narrow<A, Y> for One<F> {
    const SPLIT: bool = false;

    #[inline(always)]
    fn any(self, v: &[A; L]) -> [Y; L] {
        (self.0)(v)
    }

    #[inline(always)]
    fn no_nan(self, v: &[A; L]) -> [Y; L] {
        (self.0)(v)
    }
}

/// `any` for the rows that may hold a NaN product, `no_nan` for the others (the
/// AVX2 pair loops narrow those without the NaN case: `bf16_avx2.rs`; other
/// architectures have no such loop, hence the `allow`).
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) struct Split<N, M> {
    pub(super) any: N,
    pub(super) no_nan: M,
}

impl<A, Y, N: Fn(&[A; L]) -> [Y; L] + Copy, M: Fn(&[A; L]) -> [Y; L] + Copy> Narrow<A, Y> for Split<N, M> {
    const SPLIT: bool = true;

    #[inline(always)]
    fn any(self, v: &[A; L]) -> [Y; L] {
        (self.any)(v)
    }

    #[inline(always)]
    fn no_nan(self, v: &[A; L]) -> [Y; L] {
        (self.no_nan)(v)
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
pub(super) fn products_have_no_nan<A: AccFloat>(sum_sq: A, r: A, eps: A, w_finite: bool) -> bool {
    w_finite && eps >= A::ZERO && sum_sq.to_f64().is_finite() && r.to_f64().is_finite()
}

/// Whether every element of `w` is finite: `v * 0` is ±0 for a finite `v` and NaN
/// otherwise, summed in `L` lanes (vectorized, no early exit; a call's rows are
/// many times longer than its weight).
#[inline(always)]
pub(super) fn all_finite<A: AccFloat>(w: &[A]) -> bool {
    let mut acc = [A::ZERO; L];
    let mut chunks = w.chunks_exact(L);
    for c in &mut chunks {
        for i in 0..L {
            acc[i] += c[i] * A::ZERO;
        }
    }
    reduce(acc) == A::ZERO && chunks.remainder().iter().all(|v| *v * A::ZERO == A::ZERO)
}

// ---------------------------------------------------------------------------
// Sums and the loops
// ---------------------------------------------------------------------------

/// `sum(x^2)` of one row, in `A`: in [`L`] lanes, group by group ([`GROUP`]), then
/// the lanes' fixed tree.
#[inline(always)]
pub(super) fn sum_sq<X: Float, A: AccFloat>(x: &[X]) -> A {
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
pub(super) fn inv_rms<A: AccFloat>(sum_sq: A, n: usize, eps: A) -> A {
    let mean = if n == 0 { A::ZERO } else { sum_sq / A::from_usize(n) };
    A::ONE / (mean + eps).sqrt()
}

/// `x * r * w` of one chunk.
#[inline(always)]
pub(super) fn scale<A: AccFloat>(x: [A; L], w: [A; L], r: A) -> [A; L] {
    let mut y = x;
    for i in 0..L {
        y[i] = x[i] * r * w[i];
    }
    y
}

/// Writes `x * r * w` of one row from its source to its sink (`w` widened, in the
/// row's layout), each chunk narrowed by `narrow`, calling `each(k)` before whole
/// chunk `k` (the copies that prefetch ask for the next row's chunk `k` there). A
/// partial last chunk is padded with zeros and stores only its own elements.
#[inline(always)]
pub(super) fn scale_row<X: Float, Y: Float, A: AccFloat, S: SrcSink<X, Y>, Lay: Layout>(
    row: S,
    w: &[A],
    r: A,
    narrow: impl Fn(&[A; L]) -> [Y; L],
    each: impl Fn(usize),
) {
    let whole = row.src().len() / L * L;
    let (body, tail) = row.split_at(whole);
    let mut wc = w.chunks_exact(L);
    for (k, (c, ws)) in body.pieces(L).zip(&mut wc).enumerate() {
        each(k);
        let v = scale(Lay::load::<X, A>(arr(c.src())), *arr(ws), r);
        c.put(&narrow(&v));
    }
    let len = tail.src().len();
    if len > 0 {
        let mut buf = [X::default(); L];
        buf[..len].copy_from_slice(tail.src());
        let v = scale(Lay::load::<X, A>(&buf), Lay::weight_tail(wc), r);
        tail.put(&narrow(&v)[..len]);
    }
}

/// The rows of a forward (`w` widened, in the layout `Lay`; `n > 0`): `inv_rms` of
/// each row into `inv`, then the row's `x * inv_rms * w` from `io`'s source to its
/// sink, narrowed by `narrow` (by `narrow.no_nan` where the strategy splits and
/// [`products_have_no_nan`] holds for the row), calling `fetch(next_row, k)` before
/// chunk `k` of each row's scale pass. Portable with [`Natural`] or [`Pairs`], the
/// plain narrowing and a `fetch` that does nothing; the copies compiled for AVX2 and
/// AVX-512 pass their own narrowings and the prefetch of the next row
/// (`prefetch.rs`, `bf16_avx512.rs`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn rows_body<X: Float, Y: Float, S: SrcSink<X, Y>, I: Slot<Y::Acc>, Lay: Layout, N: Narrow<Y::Acc, Y>>(
    io: S,
    w: &[Y::Acc],
    n: usize,
    eps: Y::Acc,
    inv: &mut [I],
    _layout: Lay,
    narrow: N,
    fetch: impl Fn(&[X], usize),
) {
    let w_finite = N::SPLIT && all_finite(w);
    let mut rows = io.pieces(n).zip(inv.iter_mut()).peekable();
    while let Some((row, ir)) = rows.next() {
        let s = Lay::sum_sq::<X, Y::Acc>(row.src());
        let r = inv_rms(s, n, eps);
        ir.put(r);
        let next: &[X] = rows.peek().map_or(&[], |(next, _)| next.src());
        if N::SPLIT && products_have_no_nan(s, r, eps, w_finite) {
            scale_row::<X, Y, Y::Acc, S, Lay>(row, w, r, |v| narrow.no_nan(v), |k| fetch(next, k));
        } else {
            scale_row::<X, Y, Y::Acc, S, Lay>(row, w, r, |v| narrow.any(v), |k| fetch(next, k));
        }
    }
}
