//! The pair layout of the bf16 rows of the forward.
//!
//! A chunk of L bf16 is read as L/2 little-endian 32-bit words, pair k holding
//! elements 2k and 2k+1, and widened with a shift and a mask (no shuffle): lane k
//! gets element 2k and lane L/2 + k element 2k+1. Narrowing packs the lanes back
//! the same way. The weight is widened once into the same order ([`pair_weight`]),
//! every operation between them is lane by lane, and the sum of squares is put
//! back in natural lane order ([`unpair`]) before the fixed tree: the results are
//! those of the natural layout, bit for bit.

use core::any::{Any, TypeId};

use half::bf16;

use super::super::convert::{bf16_pair_to_f32, f32_to_bf16_pair};
use super::chunk::{add_lanes, add_sq, arr, load, narrow, pad, reduce};
use super::{GROUP, L};
use crate::float::{AccFloat, Float};

/// Whether `T` is `bf16` (known when compiling: the test folds away).
#[inline(always)]
pub(super) fn is_bf16<T: 'static>() -> bool {
    TypeId::of::<T>() == TypeId::of::<bf16>()
}

/// Whether rows of `T` are walked in the pair layout (`T` is `bf16`).
#[inline(always)]
pub(super) fn is_pairs<T: 'static>() -> bool {
    is_bf16::<T>()
}

/// A chunk of `bf16` (as `T`) widened to `f32` (as `A`) in the pair layout.
/// Only called where `T` is `bf16` and `A` is `f32`; otherwise the natural [`load`].
#[inline(always)]
pub(super) fn load_pairs<T: Float, A: AccFloat>(src: &[T; L]) -> [A; L] {
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
pub(super) fn narrow_pairs<T: Float, A: AccFloat>(src: &[A; L]) -> [T; L] {
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
pub(super) fn pair<A: AccFloat>(a: [A; L]) -> [A; L] {
    let mut out = a;
    for k in 0..L / 2 {
        out[k] = a[2 * k];
        out[L / 2 + k] = a[2 * k + 1];
    }
    out
}

/// A chunk in the pair layout put back in natural order.
#[inline(always)]
pub(super) fn unpair<A: AccFloat>(a: [A; L]) -> [A; L] {
    let mut out = a;
    for k in 0..L / 2 {
        out[2 * k] = a[k];
        out[2 * k + 1] = a[L / 2 + k];
    }
    out
}

/// The widened weight in the pair layout, padded with zeros to whole chunks.
pub(super) fn pair_weight<A: AccFloat>(w: &[A]) -> Vec<A> {
    let mut out = Vec::with_capacity(w.len().next_multiple_of(L));
    for c in w.chunks(L) {
        out.extend_from_slice(&pair(pad(c)));
    }
    out
}

/// `sum(x^2)` of one row of `bf16` (as `T`), read in the pair layout; the same
/// bits as [`sum_sq`].
#[inline(always)]
pub(super) fn sum_sq_pairs<T: Float, A: AccFloat>(x: &[T]) -> A {
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
