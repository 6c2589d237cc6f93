//! The AVX2 narrowing of the bf16 forward's rows that cannot hold a NaN, reached
//! from the AVX2 pair loops of `prefetch.rs` (calling a `#[target_feature]`
//! function from a function, or a closure in one, with the same features is safe,
//! and so are the `std::arch` intrinsics inside one: no `unsafe` here).
//!
//! [`super::pairs::narrow_pairs`] rounds each `f32` to nearest even with integer
//! operations and keeps a NaN a quiet NaN with a select: per 32 values LLVM emits
//! four compares, four ORs and four blends for that case, 12 of the scale loop's 74
//! instructions. Where a row's products cannot be NaN (decided once per row
//! by [`super::rows::products_have_no_nan`]: every `x` finite, `r` finite, `eps >= 0` and
//! every weight finite), [`narrow_no_nan`] rounds without that case: the same
//! integer rounding, and for an infinity or a product that rounds past the largest
//! bf16 it gives the same infinity, so the bits are those of
//! [`super::pairs::narrow_pairs`] on every value it is given (tested over every rounding
//! case and every finite `bf16` row input). On a 2-core AVX2 EPYC (Zen 2), one
//! thread on rows in cache went from about 0.30 to 0.25 CPU ns per element (least
//! of interleaved runs; `THREADS=1 cargo run --release -p xla-ffi-rs-ops --example
//! rms_bf16_threads 16 3`), two threads streaming 8192x4096 in place from 0.30-0.36
//! to 0.28-0.31 (`THREADS=2 ... 8192 2`); end to end, the aliased forward went from
//! 16-21 to 24-27 GB/s, the rate of the machine's in-place stream there.

use core::any::Any;
use core::arch::x86_64::{
    __m256i, _mm256_add_epi32, _mm256_and_si256, _mm256_blend_epi16, _mm256_set1_epi32, _mm256_srli_epi32,
};

use half::bf16;

use super::pairs::narrow_pairs;
use super::L;
use crate::float::{AccFloat, Float};

/// Eight `f32` (as bits, none a NaN) rounded to nearest even at bit 16: each
/// word's high half is the `bf16` (the rounding of `convert.rs` without the NaN
/// case), its low half is left unspecified.
#[inline]
#[target_feature(enable = "avx2")]
fn round_high(v: __m256i) -> __m256i {
    let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(v), _mm256_set1_epi32(1));
    _mm256_add_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(0x7FFF)), lsb)
}

/// Eight pair words from the `f32` of their low (`lo`, element `2k`) and high
/// (`hi`, element `2k + 1`) elements.
#[inline]
#[target_feature(enable = "avx2")]
fn pack(lo: __m256i, hi: __m256i) -> __m256i {
    _mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(round_high(lo)), round_high(hi))
}

/// A chunk of `f32` (as `A`) in the pair layout, none a NaN, narrowed to `bf16`
/// (as `T`): the bits of [`narrow_pairs`]. Only called where `T` is `bf16` and
/// `A` is `f32`, on rows where [`super::rows::products_have_no_nan`] holds; otherwise
/// [`narrow_pairs`].
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn narrow_no_nan<T: Float, A: AccFloat>(src: &[A; L]) -> [T; L] {
    let Some(f) = (src as &dyn Any).downcast_ref::<[f32; L]>() else { return narrow_pairs(src) };
    // Lanes 0..16 hold the low elements of the 16 pair words, lanes 16..32 the high.
    let [lo0, lo1, hi0, hi1]: [__m256i; 4] = zerocopy::transmute!(*f);
    let words: [bf16; L] = zerocopy::transmute!([pack(lo0, hi0), pack(lo1, hi1)]);
    match (&words as &dyn Any).downcast_ref::<[T; L]>() {
        Some(t) => *t,
        None => narrow_pairs(src),
    }
}
