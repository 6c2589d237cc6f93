//! The chunk conversions (`load`, `narrow`) of every dtype against `half`, and
//! their round trips.

use super::super::chunk::load;
use crate::rms_norm::convert::bf16_bits_to_f32;
use super::*;

/// The chunk widening (`load`), which picks each dtype's conversion by downcasts,
/// gives `half`'s results on all 65536 `bf16` and `f16` values: `f16` bit for
/// bit; `bf16` as `convert`'s exact widening (tested against `half` there).
#[test]
fn chunk_widening_matches_half_on_every_16_bit_value() {
    let all: Vec<u16> = (0..=u16::MAX).step_by(STEP).collect();
    for start in (0..all.len()).step_by(L) {
        let bits = chunk_of(&all, start, 0);
        let (b, h) = (bits.map(bf16::from_bits), bits.map(f16::from_bits));
        let (bw, bd) = (load::<bf16, f32>(&b), load::<bf16, f64>(&b));
        let hw = load::<f16, f32>(&h);
        for i in 0..L {
            let what = format!("{:#06x}", bits[i]);
            assert_eq!(bw[i].to_bits(), bf16_bits_to_f32(bits[i]).to_bits(), "bf16 {what} -> f32");
            assert!(bd[i] == b[i].to_f64() || (bd[i].is_nan() && b[i].is_nan()), "bf16 {what} -> f64");
            assert_eq!(hw[i].to_bits(), h[i].to_f32().to_bits(), "f16 {what} -> f32");
        }
    }
}

/// The chunk narrowing (`narrow`) gives `half`'s `bf16` and `f16` bits on every
/// rounding case of `f32` (ties, overflow to infinity, subnormals, NaNs), with
/// NaN and non-NaN lanes mixed in one chunk.
#[test]
fn chunk_narrowing_matches_half() {
    let inputs = crate::rms_norm::convert::tests::narrowing_inputs();
    for start in (0..inputs.len()).step_by(L) {
        let wide = chunk_of(&inputs, start, 0.0);
        let (b, h) = (narrow::<bf16, f32>(&wide), narrow::<f16, f32>(&wide));
        for i in 0..L {
            let what = format!("{:e} ({:#010x})", wide[i], wide[i].to_bits());
            assert_eq!(b[i].to_bits(), bf16::from_f32(wide[i]).to_bits(), "bf16 of {what}");
            assert_eq!(h[i].to_bits(), f16::from_f32(wide[i]).to_bits(), "f16 of {what}");
        }
    }
}

#[test]
fn chunk_conversions_round_trip() {
    let mut g = Lcg(3);
    let wide: [f32; L] = core::array::from_fn(|_| g.next() as f32 * 1000.0);
    let h: [f16; L] = narrow::<f16, f32>(&wide);
    let b: [bf16; L] = narrow::<bf16, f32>(&wide);
    let d: [f64; L] = load::<f32, f64>(&wide);
    for i in 0..L {
        assert_eq!(h[i], f16::from_f32(wide[i]));
        assert_eq!(b[i], bf16::from_f32(wide[i]));
        assert_eq!(d[i], wide[i] as f64);
    }
    let hw: [f32; L] = load::<f16, f32>(&h);
    let bw: [f64; L] = load::<bf16, f64>(&b);
    for i in 0..L {
        assert_eq!(hw[i], h[i].to_f32());
        assert_eq!(bw[i], b[i].to_f64());
    }
    let back: [bf16; L] = narrow::<bf16, f64>(&d);
    assert_eq!(back, b);
}
