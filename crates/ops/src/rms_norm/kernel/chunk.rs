//! Chunk-level helpers of the RMS-norm kernels: the widening of a chunk of `L`
//! elements to the accumulator type and its narrowing back (the dtype-specific
//! conversions, chosen by [`Any`] downcasts that fold away per monomorphisation:
//! see the parent module's docs), the weight widened once per call, and the
//! lane arithmetic shared by the sums (`add_lanes`, the fixed tree of `reduce`).

use core::any::Any;

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use super::super::convert::{bf16_bits_to_f32, f32_to_bf16_bits};
use super::L;
use crate::float::{AccFloat, Float};
use crate::slot::Slot;

/// `a + b`, lane by lane.
#[inline(always)]
pub(super) fn add_lanes<A: AccFloat>(mut a: [A; L], b: [A; L]) -> [A; L] {
    for i in 0..L {
        a[i] += b[i];
    }
    a
}

/// `acc + v * v`, lane by lane.
#[inline(always)]
pub(super) fn add_sq<A: AccFloat>(mut acc: [A; L], v: [A; L]) -> [A; L] {
    for i in 0..L {
        acc[i] += v[i] * v[i];
    }
    acc
}

/// One element of `T` as accumulator `A`: `to_acc` when `T::Acc` is `A`, else via
/// `f64` (exact for the widening cases that occur).
#[inline(always)]
pub(super) fn widen<T: Float, A: AccFloat>(t: T) -> A {
    let wide = t.to_acc();
    match (&wide as &dyn Any).downcast_ref::<A>() {
        Some(a) => *a,
        None => A::from_f64(t.to_f64()),
    }
}

/// One accumulator value narrowed to `T`: `from_acc` when `T::Acc` is `A`, else
/// `from_f64` (a single rounding).
#[inline(always)]
pub(super) fn narrow1<T: Float, A: AccFloat>(a: A) -> T {
    match (&a as &dyn Any).downcast_ref::<T::Acc>() {
        Some(v) => T::from_acc(*v),
        None => T::from_f64(a.to_f64()),
    }
}

/// Widens a chunk of `T` to the accumulator type.
#[inline(always)]
pub(super) fn load<T: Float, A: AccFloat>(src: &[T; L]) -> [A; L] {
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
pub(super) fn load_tail<T: Float, A: AccFloat>(src: &[T]) -> [A; L] {
    let mut buf = [T::default(); L];
    buf[..src.len()].copy_from_slice(src);
    load(&buf)
}

/// Narrows a chunk of accumulators to `T`, rounding to nearest even.
#[inline(always)]
pub(super) fn narrow<T: Float, A: AccFloat>(src: &[A; L]) -> [T; L] {
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
pub(super) fn store<T: Float, A: AccFloat, O: Slot<T>>(src: &[A; L], dst: &mut [O]) {
    let v = narrow::<T, A>(src);
    for (d, s) in dst.iter_mut().zip(v) {
        d.put(s);
    }
}

/// A chunk of up to `L` accumulators (a row's or a weight's last, partial chunk),
/// padded with zeros.
#[inline(always)]
pub(super) fn pad<A: AccFloat>(src: &[A]) -> [A; L] {
    let mut buf = [A::ZERO; L];
    buf[..src.len()].copy_from_slice(src);
    buf
}

/// The weight widened to the accumulator type, once per call: it is read once or
/// twice per row, so this saves converting it again for every row.
#[inline(always)]
pub(super) fn widen_weight<W: Float, A: AccFloat>(w: &[W]) -> Vec<A> {
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
pub(super) fn arr<T>(s: &[T]) -> &[T; L] {
    s.try_into().expect("chunk of L elements")
}

/// Sums the lanes by a fixed pairwise tree.
#[inline(always)]
pub(super) fn reduce<A: AccFloat>(mut a: [A; L]) -> A {
    let mut half = L / 2;
    while half > 0 {
        for i in 0..half {
            a[i] += a[i + half];
        }
        half /= 2;
    }
    a[0]
}
