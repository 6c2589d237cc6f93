//! `bf16` <-> `f32` conversions of one value, written with integer operations
//! and a select, so that loops of them vectorize (`half`'s `bf16::from_f32`
//! branches). Bit-identical to `half`'s `bf16::to_f32` and `bf16::from_f32` on
//! every input, finite, infinite and NaN (`convert/tests.rs` checks all 65536
//! `bf16` values and every rounding case of `f32`).
//!
//! Widening is exact: the 16 bits become the high half of the `f32`. The pair
//! functions do the same for two `bf16` read as one 32-bit word, with shifts and
//! masks only (no shuffle), for the kernels' pair layout. Narrowing
//! rounds to nearest, ties to even, by adding `0x7FFF` plus the lowest kept bit
//! and dropping the low 16 bits; an overflow carries into the exponent and gives
//! the infinity of the right sign, as it should. A NaN must not be rounded (its
//! payload could carry into the exponent and the sign): it keeps its high 16 bits,
//! with the quiet bit set.

#[cfg(test)]
pub(crate) mod tests;

/// The `bf16` with bits `b`, widened to `f32` (exact; a NaN stays the same NaN).
#[inline(always)]
pub(crate) fn bf16_bits_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// `v` narrowed to `bf16` bits, rounding to nearest even; a NaN stays a NaN, with
/// the quiet bit set. Branch-free, so loops of it vectorize.
#[inline(always)]
pub(crate) fn f32_to_bf16_bits(v: f32) -> u16 {
    (f32_to_bf16_high(v) >> 16) as u16
}

/// [`f32_to_bf16_bits`] in the high 16 bits of a word (the low 16 bits are left
/// unspecified): what the pair layout stores without a shift for odd elements.
#[inline(always)]
pub(crate) fn f32_to_bf16_high(v: f32) -> u32 {
    let x = v.to_bits();
    let rounded = x.wrapping_add(0x7FFF + ((x >> 16) & 1));
    let quiet_nan = x | 0x0040_0000;
    if v.is_nan() {
        quiet_nan
    } else {
        rounded
    }
}

/// A bf16 pair read as one little-endian 32-bit word (element `2k` in the low
/// half, `2k + 1` in the high half), widened to two `f32` with no shuffle: the low
/// one is `w << 16`, the high one `w & 0xFFFF_0000`.
#[inline(always)]
pub(crate) fn bf16_pair_to_f32(w: u32) -> (f32, f32) {
    (f32::from_bits(w << 16), f32::from_bits(w & 0xFFFF_0000))
}

/// Two `f32` narrowed to a bf16 pair word (as [`bf16_pair_to_f32`] reads it),
/// each rounded as [`f32_to_bf16_bits`] rounds it.
#[inline(always)]
pub(crate) fn f32_to_bf16_pair(lo: f32, hi: f32) -> u32 {
    (f32_to_bf16_high(lo) >> 16) | (f32_to_bf16_high(hi) & 0xFFFF_0000)
}
