//! The bf16 forward's row loops for CPUs with AVX-512 BF16, reached from the copy
//! of [`super::pair_rows`] that `multiversion`
//! compiles for those features (calling a `#[target_feature]` function from a
//! function with the same features is safe, and so are the `std::arch`
//! intrinsics inside one: no `unsafe` here).
//!
//! The loops are the portable ones ([`super::rows::rows_body`] with
//! [`super::rows::Pairs`]: the same
//! pair layout, widening and arithmetic), with one difference: a chunk of 32
//! products is narrowed by one `vcvtne2ps2bf16` and one `vpermw` (back into the
//! pair words), not by the integer rounding of [`super::pairs::narrow_pairs`]. The
//! instruction rounds to nearest even and keeps a NaN's high 16 bits with the
//! quiet bit set, as `half` does, but it reads a subnormal `f32` as zero: a chunk
//! holding one (found with one `vfpclassps` per 16 values) is narrowed by
//! [`super::pairs::narrow_pairs`] instead. So the bits are the portable loops', on every
//! input (tested over every rounding case and every `bf16` row input).
//!
//! The row loops also prefetch the next row of `x` while the current one is
//! scaled (that pass reads the row from L1 and nothing from memory, so the
//! hardware prefetcher would otherwise stall until the next row's first misses):
//! one `prefetcht1` per chunk of the scale pass, the chunk's cache line of the
//! next row (`prefetch.rs`, which the natural-layout rows use too), so the row
//! streams into L2 while the pass computes. Prefetching the whole row at once into
//! L1 at the row's start (the first version) stalled the pass behind the misses and
//! evicted the weight; streaming 8192x4096 on two threads the per-chunk
//! `prefetcht1` took about a third off the CPU time per element (see
//! docs/performance.md, "Tried and not kept"). `prefetcht1`, not `prefetcht0`, measured faster: the sum of
//! squares reads the row once (from L2 then) and the scale pass from L1, and a row
//! fetched into the 32 KB L1 a row early competes there with the current row and
//! the 16 KB weight.

use core::any::Any;
use core::arch::x86_64::{__m512, __m512i, _mm512_cvtne2ps_pbh, _mm512_fpclass_ps_mask, _mm512_permutexvar_epi16};

use half::bf16;

use super::prefetch::prefetch_chunk;
use super::pairs::narrow_pairs;
use super::rows::{rows_body, One, Pairs, SrcSink};
use super::L;
use crate::float::{AccFloat, Float};
use crate::slot::Slot;

/// `vfpclassps` class bit of a subnormal (denormal) value.
const SUBNORMAL: i32 = 0x20;

/// The `vpermw` indices that take `vcvtne2ps2bf16`'s halves (the 16 even
/// elements, then the 16 odd ones) to the pair order: word `2k` from `k`, word
/// `2k + 1` from `16 + k`.
const PAIR_ORDER: [u16; L] = {
    let mut idx = [0u16; L];
    let mut k = 0;
    while k < L / 2 {
        idx[2 * k] = k as u16;
        idx[2 * k + 1] = (L / 2 + k) as u16;
        k += 1;
    }
    idx
};

/// A chunk of `f32` (as `A`) in the pair layout narrowed to `bf16` (as `T`): the
/// bits of [`narrow_pairs`], with `vcvtne2ps2bf16` unless a value is subnormal.
/// Only called where `T` is `bf16` and `A` is `f32`; otherwise [`narrow_pairs`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512bf16")]
pub(super) fn narrow<T: Float, A: AccFloat>(src: &[A; L]) -> [T; L] {
    let Some(f) = (src as &dyn Any).downcast_ref::<[f32; L]>() else { return narrow_pairs(src) };
    let [even, odd]: [__m512; 2] = zerocopy::transmute!(*f);
    if _mm512_fpclass_ps_mask::<SUBNORMAL>(even) | _mm512_fpclass_ps_mask::<SUBNORMAL>(odd) != 0 {
        return narrow_pairs(src);
    }
    let halves: __m512i = zerocopy::transmute!(_mm512_cvtne2ps_pbh(odd, even));
    let idx: __m512i = zerocopy::transmute!(PAIR_ORDER);
    let words: [bf16; L] = zerocopy::transmute!(_mm512_permutexvar_epi16(idx, halves));
    match (&words as &dyn Any).downcast_ref::<[T; L]>() {
        Some(t) => *t,
        None => narrow_pairs(src),
    }
}

/// [`super::rows::rows_body`] in the pair layout, out of place or in place, with
/// [`narrow`], prefetching the next row one cache line per chunk of the scale pass.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
pub(super) fn pair_rows<X: Float, Y: Float, S: SrcSink<X, Y>, I: Slot<Y::Acc>>(
    io: S,
    w: &[Y::Acc],
    n: usize,
    eps: Y::Acc,
    inv: &mut [I],
) {
    let narrow = One(|v: &[Y::Acc; L]| narrow::<Y, Y::Acc>(v));
    rows_body(io, w, n, eps, inv, Pairs, narrow, |next, k| prefetch_chunk(next, k));
}
