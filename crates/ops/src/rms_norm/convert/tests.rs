//! Bit-exactness of the `bf16` conversions against `half`'s scalar ones, and the
//! `f32` inputs that every narrowing test runs over.

use super::*;
use half::bf16;

/// Under Miri (slow), every `step`-th case only.
const STEP: usize = if cfg!(miri) { 997 } else { 1 };

/// The low 16 bits that decide a rounding to `bf16` (and, shifted, to `f16`):
/// zero, just above zero, just below, at and just above the tie, the top.
const LOW_HALVES: [u32; 9] = [0x0000, 0x0001, 0x3FFF, 0x7FFF, 0x8000, 0x8001, 0xBFFF, 0xC000, 0xFFFF];

/// `f32` inputs for the narrowing tests: every high half (so every exponent,
/// both signs, zeros, subnormals, infinities and NaNs, signalling and quiet)
/// with each of [`LOW_HALVES`], every `f16` rounding boundary (the 13 low bits
/// at their tie, just below and just above, for every higher pattern that is
/// not a NaN), and pseudo-random bit patterns.
pub(crate) fn narrowing_inputs() -> Vec<f32> {
    // Zeros, subnormals, the normal boundary, one, the largest finite, infinity,
    // signalling and quiet NaNs, the NaN all ones; both signs. Always, also under
    // Miri, where the sweep below takes every STEP-th high half only.
    let special = [0x0000, 0x0001, 0x007F, 0x0080, 0x3F80, 0x3F81, 0x7F7F, 0x7F80, 0x7F81, 0x7FC0, 0x7FFF];
    let highs = special.iter().flat_map(|&h| [h, h | 0x8000]).chain((0..=u16::MAX as u32).step_by(STEP));
    let mut out = Vec::new();
    for hi in highs {
        out.extend(LOW_HALVES.iter().map(|lo| f32::from_bits(hi << 16 | lo)));
    }
    // f16 keeps 10 of f32's 23 mantissa bits: ties at 0x1000 in the low 13 bits.
    for hi in (0..1u32 << 19).step_by(STEP * 3) {
        for lo in [0x0FFF, 0x1000, 0x1001, 0x0000, 0x1FFF] {
            out.push(f32::from_bits(hi << 13 | lo));
        }
    }
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    for _ in (0..1_000_000).step_by(STEP) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        out.push(f32::from_bits((s >> 32) as u32));
    }
    out
}

#[test]
fn inputs_cover_the_special_cases() {
    let v = narrowing_inputs();
    let has = |f: fn(&f32) -> bool| v.iter().any(f);
    assert!(has(|x| x.is_nan() && x.to_bits() & 0x0040_0000 == 0), "a signalling NaN");
    assert!(has(|x| x.is_nan() && x.to_bits() & 0x0040_0000 != 0), "a quiet NaN");
    assert!(has(|x| x.is_subnormal()) && has(|x| x.is_infinite()) && has(|x| *x == 0.0));
    assert!(has(|x| x.to_bits() == 0x7F7F_FFFF), "f32::MAX");
    assert!(has(|x| x.to_bits() & 0xFFFF == 0x8000), "a bf16 tie");
}

/// All 65536 `bf16` values widen to `half`'s `f32`, bit for bit, but for the
/// signalling NaNs, which `half` quiets and the exact widening keeps signalling:
/// there the two differ in the quiet bit alone. (The kernels use every widened
/// value in arithmetic before anything is stored, and a NaN's payload after
/// arithmetic is unspecified in Rust anyway.)
#[test]
fn widening_matches_half_on_every_bf16() {
    let mut signalling = 0;
    for b in (0..=u16::MAX).step_by(STEP) {
        let (mine, theirs) = (bf16_bits_to_f32(b), bf16::from_bits(b).to_f32());
        assert_eq!(mine.to_bits(), (b as u32) << 16, "bf16 {b:#06x}: exact");
        if mine.is_nan() && mine.to_bits() & 0x0040_0000 == 0 {
            signalling += 1;
            assert_eq!(mine.to_bits() | 0x0040_0000, theirs.to_bits(), "bf16 {b:#06x}: quiet bit");
        } else {
            assert_eq!(mine.to_bits(), theirs.to_bits(), "bf16 {b:#06x}");
        }
    }
    assert!(signalling > 0 || cfg!(miri), "no signalling NaN was tried");
}

/// Narrowing gives `half`'s `bf16` bits on every rounding case.
#[test]
fn narrowing_matches_half() {
    for v in narrowing_inputs() {
        assert_eq!(f32_to_bf16_bits(v), bf16::from_f32(v).to_bits(), "{v:e} ({:#010x})", v.to_bits());
    }
}

/// The cases the rounding must get right, spelled out.
#[test]
fn narrowing_known_values() {
    let cases: [(u32, u16); 10] = [
        (0x3F80_8000, 0x3F80), // tie, even below: down
        (0x3F81_8000, 0x3F82), // tie, odd below: up
        (0x3F80_8001, 0x3F81), // just above the tie: up
        (0x3F80_7FFF, 0x3F80), // just below: down
        (0x7F7F_FFFF, 0x7F80), // f32::MAX rounds to infinity
        (0xFF7F_FFFF, 0xFF80), // and -f32::MAX to -infinity
        (0x7F80_0001, 0x7FC0), // signalling NaN, payload in the dropped bits: quiet, still a NaN
        (0x7FFF_FFFF, 0x7FFF), // NaN that rounding would carry into the sign
        (0xFF81_0000, 0xFFC1), // negative signalling NaN keeps sign and payload
        (0x0000_8001, 0x0001), // subnormal rounds up to the smallest bf16 subnormal
    ];
    for (x, want) in cases {
        assert_eq!(f32_to_bf16_bits(f32::from_bits(x)), want, "{x:#010x}");
    }
}
