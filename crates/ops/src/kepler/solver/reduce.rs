//! Exact reduction of a large `M` modulo `2 pi` (Payne-Hanek), in integer
//! arithmetic.
//!
//! A finite `f64` is `M = m 2^q` with an integer `m < 2^53`. With the bits of
//! `1 / (2 pi) = sum t_i 2^-i`, `M / (2 pi) = m sum t_i 2^(q - i)`; the terms
//! with `i <= q` are integers, so the fractional part of `M / (2 pi)` is that of
//! `m` times the 256 bits `t_(q+1) .. t_(q+256)` of the table (what is left off
//! is below `2^(53 - 256)`). Rounded to the nearest integer, the fraction `f` is
//! in `[-1/2, 1/2)`, and `M - 2 pi k = 2 pi f` exactly, for the integer `k`
//! nearest to `M / (2 pi)`. The closest a finite `f64` comes to a multiple of
//! `2 pi` is about `2^-62` (Kahan-McDonald bound for `pi / 2`), so `f` has at
//! least 130 significant bits and the reduced value is right to about 1 ulp.
//!
//! The slow path of the solver: the Cody-Waite reduction in `solver.rs` is exact
//! below [`LARGE_M`], and only elements at or above it come here.

/// `|M|` from which [`reduce_large`] is used: below it, the three-part Cody-Waite
/// reduction (`k < 2^25`, so `k * TWO_PI_A` and `k * TWO_PI_B` are exact) is
/// accurate to about 1 ulp of the result.
pub(super) const LARGE_M: f64 = 134_217_728.0; // 2^27

/// `1 / (2 pi)` in binary, 64 bits a word, most significant first, after one word
/// of zeros (so that the window for `q < 0` starts inside the table). Computed
/// with Machin's formula in integer arithmetic (its bits are those of the
/// `2 / pi` table of fdlibm, shifted by two).
const INV_TWO_PI_BITS: [u64; 21] = [
    0,
    0x28BE_60DB_9391_054A,
    0x7F09_D5F4_7D4D_3770,
    0x36D8_A566_4F10_E410,
    0x7F94_58EA_F7AE_F158,
    0x6DC9_1B8E_9093_74B8,
    0x0192_4BBA_8274_6487,
    0x3F87_7AC7_2C4A_69CF,
    0xBA20_8D7D_4BAE_D121,
    0x3A67_1C09_AD17_DF90,
    0x4E64_758E_60D4_CE7D,
    0x2721_17E2_EF7E_4A0E,
    0xC7FE_25FF_F781_6603,
    0xFBCB_C462_D682_9B47,
    0xDB4D_9FB3_C9F2_C26D,
    0xD3D1_8FD9_A797_FA8B,
    0x5D49_EEB1_FAF9_7C5E,
    0xCF41_CE7D_E294_A4BA,
    0x9AFE_D7EC_47E3_5742,
    0x1580_CC11_BF1E_DAEA,
    0xFC33_EF08_26BD_0D87,
];

/// `2 pi * 2^61`, rounded to the nearest integer.
const TWO_PI_FIX61: u64 = 0xC90F_DAA2_2168_C235;

/// The 64 bits of `INV_TWO_PI_BITS` starting at bit `s` (0 = the top bit of word 0).
#[inline(always)]
fn window_word(s: usize) -> u64 {
    let (w, b) = (s / 64, s % 64);
    let hi = INV_TWO_PI_BITS.get(w).copied().unwrap_or(0);
    if b == 0 {
        hi
    } else {
        let lo = INV_TWO_PI_BITS.get(w + 1).copied().unwrap_or(0);
        (hi << b) | (lo >> (64 - b))
    }
}

/// `M` reduced to `[-pi, pi]` exactly (to about 1 ulp of the result), for any
/// finite `M` (meant for `|M| >= LARGE_M`; smaller `M` are also right). For an
/// infinite or NaN `M` the result is some value (never a panic), which the
/// solver masks.
pub(super) fn reduce_large(x: f64) -> f64 {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7FF) as i64;
    let frac_bits = bits & ((1u64 << 52) - 1);
    if biased == 0x7FF {
        return f64::NAN;
    }
    // x = m 2^q (subnormals: no implicit bit, q = -1074).
    let (m, q) = if biased == 0 { (frac_bits, -1074) } else { (frac_bits | (1 << 52), biased - 1075) };
    if q < -64 {
        // |x| < 2^-11: no reduction needed (and the window would start before the table).
        return x;
    }
    // Bits t_(q+1) .. t_(q+256) start at bit q + 64 of the table (word 0 is padding).
    let s = (q + 64) as usize;
    let w: [u64; 4] = [window_word(s), window_word(s + 64), window_word(s + 128), window_word(s + 192)];
    // The low 256 bits of m * W (W = w[0] w[1] w[2] w[3], most significant first).
    let mut acc = [0u64; 4]; // least significant first
    let mut carry = 0u128;
    for i in 0..4 {
        let p = (m as u128) * (w[3 - i] as u128) + carry;
        acc[i] = p as u64;
        carry = p >> 64;
    }
    // Round to the nearest integer: the fraction as a signed 256-bit number.
    let negative = acc[3] >> 63 == 1;
    if negative {
        // Two's complement negation of acc.
        let mut c = 1u128;
        for a in acc.iter_mut() {
            let v = (!*a) as u128 + c;
            *a = v as u64;
            c = v >> 64;
        }
    }
    // |f| 2^256 = acc < 2^255. Normalize: the top 64 bits after the leading zeros.
    let (mut lz, mut top) = (0u32, 0u64);
    for i in (0..4).rev() {
        if acc[i] != 0 {
            let z = acc[i].leading_zeros();
            let below = if i > 0 { acc[i - 1] } else { 0 };
            top = if z == 0 { acc[i] } else { (acc[i] << z) | (below >> (64 - z)) };
            lz += z;
            break;
        }
        lz += 64;
    }
    if top == 0 {
        return 0.0f64.copysign(x);
    }
    // |f| = top 2^(-64 - lz) (to 64 bits); |r| = 2 pi |f| = top TWO_PI_FIX61 2^(-125 - lz).
    let prod = (top as u128) * (TWO_PI_FIX61 as u128);
    // 2^(-125 - lz) with lz < 256: a normal f64 (exponent >= -381).
    let scale = f64::from_bits(((1023 - 125 - lz as i64) as u64) << 52);
    let r = (prod as f64) * scale;
    // The sign: that of x, flipped when the fraction was rounded up.
    if negative != (x < 0.0) {
        -r
    } else {
        r
    }
}
