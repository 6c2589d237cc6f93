//! `bf16` <-> `f32` conversions of whole chunks, written with integer operations
//! that LLVM vectorizes, bit-identical to `half`'s scalar `bf16::to_f32` and
//! `bf16::from_f32` on every input (finite, infinite and NaN).
//!
//! Widening is exact: the 16 bits become the high half of the `f32`. Narrowing
//! rounds to nearest, ties to even, by adding `0x7FFF` plus the lowest kept bit
//! and dropping the low 16 bits; an overflow carries into the exponent and gives
//! the infinity of the right sign, as it should. A NaN must not be rounded (its
//! payload could carry into the sign); it keeps its high 16 bits with the quiet
//! bit set. A chunk is first checked for NaNs (a vectorized OR of the lanes): a
//! chunk without one, the usual case, takes the rounding alone, and only a chunk
//! holding a NaN pays for the per-lane select.

#[cfg(test)]
mod tests;

/// The `bf16` with bits `b`, widened to `f32` (exact; a NaN stays the same NaN).
#[inline(always)]
pub(crate) fn bf16_bits_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// `v` narrowed to `bf16` bits, rounding to nearest even, for a `v` that is not
/// a NaN (for a NaN, the result is wrong).
#[inline(always)]
pub(crate) fn f32_to_bf16_bits_no_nan(v: f32) -> u16 {
    let x = v.to_bits();
    (x.wrapping_add(0x7FFF + ((x >> 16) & 1)) >> 16) as u16
}

/// `v` narrowed to `bf16` bits, rounding to nearest even; a NaN stays a NaN, with
/// the quiet bit set. Branch-free, so loops of it vectorize.
#[inline(always)]
pub(crate) fn f32_to_bf16_bits(v: f32) -> u16 {
    let quiet_nan = ((v.to_bits() >> 16) | 0x0040) as u16;
    if v.is_nan() {
        quiet_nan
    } else {
        f32_to_bf16_bits_no_nan(v)
    }
}

/// Widens a chunk of `bf16` bits to `f32`.
#[inline(always)]
pub(crate) fn widen_bf16<const N: usize>(src: &[u16; N]) -> [f32; N] {
    let mut out = [0f32; N];
    for i in 0..N {
        out[i] = bf16_bits_to_f32(src[i]);
    }
    out
}

/// Narrows a chunk of `f32` to `bf16` bits, each lane as [`f32_to_bf16_bits`].
#[inline(always)]
pub(crate) fn narrow_bf16<const N: usize>(src: &[f32; N]) -> [u16; N] {
    let mut out = [0u16; N];
    for i in 0..N {
        out[i] = f32_to_bf16_bits(src[i]);
    }
    out
}

/// Narrows a chunk of `f32` that holds no NaN to `bf16` bits, each lane as
/// [`f32_to_bf16_bits`] (rounding alone: for a NaN lane the result is wrong).
#[inline(always)]
pub(crate) fn narrow_bf16_no_nan<const N: usize>(src: &[f32; N]) -> [u16; N] {
    let mut out = [0u16; N];
    for i in 0..N {
        out[i] = f32_to_bf16_bits_no_nan(src[i]);
    }
    out
}
