//! `bf16` <-> `f32` conversions of one value, written with integer operations
//! and a select, so that loops of them vectorize (`half`'s `bf16::from_f32`
//! branches). Bit-identical to `half`'s `bf16::to_f32` and `bf16::from_f32` on
//! every input, finite, infinite and NaN (`convert/tests.rs` checks all 65536
//! `bf16` values and every rounding case of `f32`).
//!
//! Widening is exact: the 16 bits become the high half of the `f32`. Narrowing
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
    let x = v.to_bits();
    let rounded = x.wrapping_add(0x7FFF + ((x >> 16) & 1)) >> 16;
    let quiet_nan = (x >> 16) | 0x0040;
    (if v.is_nan() { quiet_nan } else { rounded }) as u16
}
