//! The pair layout of the bf16 forward: its sums, its widening and narrowings
//! (the portable one, AVX-512 BF16's and AVX2's without the NaN case) against
//! `half`, the rows without NaN products, and its row loops (dispatched and
//! portable, in place and out of place) against the natural layout's bits.

use super::super::pairs::{load_pairs, narrow_pairs, pair, sum_sq_pairs, unpair};
use super::super::rows::{all_finite, products_have_no_nan, rows_body, scale_row};
use crate::rms_norm::convert::bf16_bits_to_f32;
use super::*;

/// The pair layout's sum of squares keeps the groups of the natural one bit for
/// bit, where the order of the group additions shows. Only the first lane is
/// nonzero: 512 in the first group, so the lane sums to 2^23 there, then 1/8 (a
/// whole group sums to 0.5, absorbed when added to 2^23 alone, as a tie), and 3/8
/// in a partial last chunk (whose 9/64 tips a partial group of 24 chunks, 3/8,
/// over the half). Rows whose partial last chunk closes a partial group, is a
/// group of its own, or is absent.
#[test]
fn pair_sum_adds_the_natural_sums_groups_in_order() {
    for n in [1024, 1025, 1056, 1797, 2048, 2079, 2080, 2111, 2821, 3072, 3103, 4096 + 17] {
        let whole = n / L * L;
        let value = |i: usize| match i {
            _ if !i.is_multiple_of(L) => 0.0,
            _ if i < L * GROUP => 512.0,
            _ if i < whole => 0.125,
            _ => 0.375,
        };
        let x: Vec<bf16> = (0..n).map(|i| bf16::from_f32(value(i))).collect();
        let (want, got) = (sum_sq::<bf16, f32>(&x), sum_sq_pairs::<bf16, f32>(&x));
        assert_eq!(got.to_bits(), want.to_bits(), "n={n}: pairs {got}, natural {want}");
    }
}

/// The pair layout's widening gives, lane by lane once put back in natural order,
/// the exact widening of every `bf16` value, in both halves of a pair word.
#[test]
fn pair_widening_matches_half_on_every_bf16() {
    let all: Vec<u16> = (0..=u16::MAX).step_by(STEP).collect();
    for shift in [0, 1] {
        for start in (0..all.len()).step_by(L) {
            let bits = chunk_of(&all, start + shift, 0);
            let b = bits.map(bf16::from_bits);
            let got = unpair(load_pairs::<bf16, f32>(&b));
            for i in 0..L {
                assert_eq!(got[i].to_bits(), bf16_bits_to_f32(bits[i]).to_bits(), "bf16 {:#06x}", bits[i]);
            }
        }
    }
}

/// The pair layout's narrowing gives `half`'s `bf16` bits on every rounding case
/// (NaNs included), in both halves of a pair word, and inverts the widening.
#[test]
fn pair_narrowing_matches_half() {
    let inputs = crate::rms_norm::convert::tests::narrowing_inputs();
    for shift in [0, 1] {
        for start in (0..inputs.len()).step_by(L) {
            let wide = chunk_of(&inputs, start + shift, 0.0);
            let b = narrow_pairs::<bf16, f32>(&pair(wide));
            for i in 0..L {
                let what = format!("{:e} ({:#010x})", wide[i], wide[i].to_bits());
                assert_eq!(b[i].to_bits(), bf16::from_f32(wide[i]).to_bits(), "bf16 of {what}");
            }
            let back = narrow_pairs::<bf16, f32>(&load_pairs::<bf16, f32>(&b));
            assert_eq!(back.map(|v| v.to_bits()), b.map(|v| v.to_bits()), "round trip");
        }
    }
}

/// `bf16_avx512::narrow` where the CPU has AVX-512 BF16 (the dispatch picks the
/// copy compiled for it), else `None`.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl+avx512dq+avx512bf16"))]
fn narrow_pairs_bf16_instr(src: &[f32; L]) -> Option<[bf16; L]> {
    match_target! {
        "x86_64+avx512bf16" => Some(bf16_avx512::narrow::<bf16, f32>(src)),
        _ => {
            let _ = src;
            None
        }
    }
}

/// Whether this CPU has AVX-512 BF16 (and the other features of its copies).
fn has_avx512_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512dq") && has!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The AVX-512 BF16 narrowing (`vcvtne2ps2bf16`, and the integer rounding for a
/// chunk that holds a subnormal, which the instruction reads as zero) gives
/// `half`'s `bf16` bits on every rounding case (NaNs, infinities, overflow and
/// subnormals included), in both halves of a pair word. On a CPU without AVX-512
/// BF16 it checks only that the dispatch found none.
#[test]
fn avx512_bf16_narrowing_matches_half() {
    let inputs = crate::rms_norm::convert::tests::narrowing_inputs();
    let (mut by_instruction, mut with_subnormal) = (0, 0);
    for shift in [0, 1] {
        for start in (0..inputs.len()).step_by(L) {
            let wide = chunk_of(&inputs, start + shift, 0.0);
            let Some(b) = narrow_pairs_bf16_instr(&pair(wide)) else {
                assert!(!has_avx512_bf16(), "the CPU has AVX-512 BF16 but its copy was not dispatched");
                return;
            };
            if wide.iter().any(|v| v.is_subnormal()) {
                with_subnormal += 1;
            } else {
                by_instruction += 1;
            }
            for i in 0..L {
                let what = format!("{:e} ({:#010x})", wide[i], wide[i].to_bits());
                assert_eq!(b[i].to_bits(), bf16::from_f32(wide[i]).to_bits(), "bf16 of {what}");
            }
        }
    }
    assert!(
        by_instruction > 1000 && with_subnormal > 100,
        "{by_instruction} chunks by the instruction, {with_subnormal} with a subnormal"
    );
}

/// `bf16_avx2::narrow_no_nan` where the CPU has AVX2 (the dispatch picks the copy
/// compiled for it), else `None`.
#[multiversion(targets("x86_64+avx2+fma"))]
fn narrow_pairs_avx2_no_nan(src: &[f32; L]) -> Option<[bf16; L]> {
    match_target! {
        "x86_64+avx2" => Some(bf16_avx2::narrow_no_nan::<bf16, f32>(src)),
        _ => {
            let _ = src;
            None
        }
    }
}

/// Whether this CPU has AVX2 and FMA (the features of the AVX2 copies).
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The AVX2 narrowing of the rows that cannot hold a NaN gives `half`'s `bf16`
/// bits on every rounding case but NaN (ties, infinities, values that round past
/// the largest `bf16` to infinity, subnormals, both signs), in both halves of a
/// pair word. On a CPU without AVX2 it checks only that the dispatch found none.
#[test]
fn avx2_no_nan_narrowing_matches_half() {
    let inputs: Vec<f32> =
        crate::rms_norm::convert::tests::narrowing_inputs().into_iter().filter(|v| !v.is_nan()).collect();
    let overflows = |v: &f32| v.is_finite() && bf16::from_f32(*v).is_infinite();
    assert!(inputs.iter().any(|v| v.is_infinite()) && inputs.iter().any(overflows));
    let mut chunks = 0;
    for shift in [0, 1] {
        for start in (0..inputs.len()).step_by(L) {
            let wide = chunk_of(&inputs, start + shift, 0.0);
            let Some(b) = narrow_pairs_avx2_no_nan(&pair(wide)) else {
                assert!(!has_avx2(), "the CPU has AVX2 but its copy was not dispatched");
                return;
            };
            chunks += 1;
            for i in 0..L {
                let what = format!("{:e} ({:#010x})", wide[i], wide[i].to_bits());
                assert_eq!(b[i].to_bits(), bf16::from_f32(wide[i]).to_bits(), "bf16 of {what}");
            }
        }
    }
    assert!(chunks > 1000, "{chunks} chunks");
}

/// Which rows may narrow without the NaN case: rows of finite values with a
/// finite `r` and `eps >= 0`, whatever their products' size, and a weight with
/// no infinity or NaN; not a zero row with `eps` 0 (`r` infinite: `0 * r` is
/// NaN), an infinite or NaN `x`, a negative or NaN `eps`, or a weight with an
/// infinity.
#[test]
fn no_nan_rows_are_those_whose_products_cannot_be_nan() {
    let decide = |x: &[f32], eps: f32, w: &[f32]| {
        let s = x.iter().map(|v| v * v).sum::<f32>();
        products_have_no_nan(s, inv_rms(s, x.len(), eps), eps, all_finite(&pair_weight(w)))
    };
    let w = [1.0f32, -3e38, 0.0];
    assert!(decide(&[1.0, -2.0, 3.0], 1e-5, &w));
    assert!(decide(&[1e-30, 0.0, -1e-30], 1e-45, &w), "squares underflow, r huge, products small");
    assert!(decide(&[0.0; 3], 1e-5, &w));
    assert!(!decide(&[0.0; 3], 0.0, &w), "r infinite");
    assert!(!decide(&[1e30, 0.0, 1.0], 1e-5, &w), "a square overflows");
    assert!(!decide(&[f32::INFINITY, 0.0, 1.0], 1e-5, &w));
    assert!(!decide(&[f32::NAN, 0.0, 1.0], 1e-5, &w));
    assert!(!decide(&[1.0, 2.0, 3.0], -1e-5, &w));
    assert!(!decide(&[1.0, 2.0, 3.0], f32::NAN, &w));
    assert!(!decide(&[1.0, 2.0, 3.0], 1e-5, &[1.0, f32::INFINITY, 0.0]));
    assert!(!decide(&[1.0, 2.0, 3.0], 1e-5, &[1.0, f32::NAN, 0.0]));
    let long: Vec<f32> = (0..100).map(|i| i as f32).collect();
    assert!(all_finite(&long) && !all_finite(&[long.as_slice(), &[f32::NEG_INFINITY]].concat()));
}

/// The dispatched bf16 row loops (on an AVX2 CPU, the copy that narrows the rows
/// without a NaN without the NaN case) give the portable loops' bits at the edges
/// of that choice: products that overflow to infinity (weights near the largest
/// `f32`), squares that underflow to zero (with `eps` 0, `r` is infinite and the
/// products NaN; with the least positive `eps`, `r` is huge and the products
/// finite), squares that overflow, infinite and NaN inputs, a negative and a NaN
/// `eps`, and weights with an infinity or a NaN (one whose payload the rounding
/// would carry into the sign); in place and out of place.
#[test]
fn dispatched_pair_rows_give_the_portable_bits_at_the_edges_of_the_no_nan_rows() {
    let n = 67;
    let mut g = Lcg(90);
    let base: Vec<f32> = g.vec::<f32>(n);
    let scaled = |k: f32| base.iter().map(|v| bf16::from_f32(v * k)).collect::<Vec<_>>();
    let with = |v: f32| {
        let mut r = scaled(1.0);
        r[n / 2] = bf16::from_f32(v);
        r
    };
    let x: Vec<bf16> = [
        scaled(1.0),
        scaled(0.0),
        scaled(1e-38),
        scaled(1e18),
        scaled(1e30),
        with(f32::INFINITY),
        with(f32::NAN),
        scaled(1.0),
    ]
    .concat();
    let rows = x.len() / n;
    let w_rand: Vec<f32> = g.vec::<f32>(n);
    let huge: Vec<f32> = w_rand.iter().map(|v| v * 3e38).collect();
    let mut w_inf = w_rand.clone();
    w_inf[3] = f32::INFINITY;
    // NaNs whose low 16 bits are set (quiet, and signalling: the multiply quiets it),
    // which the rounding without the NaN case would carry into the sign bit.
    let mut w_nan = w_rand.clone();
    (w_nan[5], w_nan[40]) = (f32::from_bits(0x7FFF_FFFF), f32::from_bits(0xFFBF_FFFF));
    let (mut infinite, mut finite) = (0, 0);
    for w in [&w_rand, &huge, &w_inf, &w_nan] {
        let w = pair_weight(w);
        for eps in [1e-5f32, 0.0, f32::from_bits(1), -1e-5, f32::NAN] {
            let (mut want, mut want_inv) = (x.clone(), vec![0f32; rows]);
            let narrow = One(narrow_pairs::<bf16, f32>);
            rows_body(&mut want[..], &w, n, eps, &mut want_inv, Pairs, narrow, |_, _| {});
            let (mut got, mut got_inv) = (x.clone(), vec![0f32; rows]);
            pair_rows::<bf16, bf16, _, f32>(&mut got[..], &w, n, eps, &mut got_inv);
            let (mut y, mut y_inv) = (vec![bf16::ZERO; rows * n], vec![0f32; rows]);
            pair_rows::<bf16, bf16, _, f32>((&x[..], &mut y[..]), &w, n, eps, &mut y_inv);
            for (what, v, inv) in [("in place", &got, &got_inv), ("out of place", &y, &y_inv)] {
                assert!(bits_nan_as_one(v) == bits_nan_as_one(&want), "eps {eps:e}, {what}: y");
                assert!(bits_nan_as_one(inv) == bits_nan_as_one(&want_inv), "eps {eps:e}, {what}: inv_rms");
            }
            infinite += want.iter().filter(|v| v.is_infinite()).count();
            finite += want.iter().filter(|v| v.is_finite() && **v != bf16::ZERO).count();
        }
    }
    assert!(infinite > 100 && finite > 1000, "{infinite} infinite, {finite} finite nonzero outputs");
}

/// The bf16 forward (pair layout, in place and out of place) gives the bits of the
/// natural layout's row functions, on rows with NaNs, infinities, subnormals and
/// partial chunks (also at the end of a row longer than one group of the sums),
/// with a bf16 and an f32 weight.
#[test]
fn pair_layout_forward_gives_the_natural_layouts_bits() {
    fn natural(x: &[bf16], w: &[f32], n: usize, eps: f32) -> (Vec<bf16>, Vec<f32>) {
        let (mut y, mut inv) = (x.to_vec(), Vec::new());
        for row in y.chunks_exact_mut(n) {
            let r = inv_rms(sum_sq::<bf16, f32>(row), n, eps);
            inv.push(r);
            scale_row::<bf16, bf16, f32, _, Natural>(row, w, r, narrow::<bf16, f32>, |_| {});
        }
        (y, inv)
    }
    let specials = [0x7FC0u16, 0x7F81, 0xFF80, 0x7F80, 0x0001, 0x8000, 0x7F7F, 0x0080];
    for (k, &n) in [1usize, 2, 31, 32, 33, 63, 64, 100, 1025, 2049, 2079, 3000, 3103, 4096].iter().enumerate() {
        let rows = 3;
        let mut g = Lcg(40 + k as u64);
        let mut x = g.vec::<bf16>(rows * n);
        // Row 0 clean; row 1 with one special value; row 2 scaled to subnormals.
        if n > 1 {
            x[n + (n / 2)] = bf16::from_bits(specials[k % specials.len()]);
        }
        for v in &mut x[2 * n..] {
            *v = bf16::from_f32(v.to_f32() * 1e-39);
        }
        let wb = g.vec::<bf16>(n);
        let wf: Vec<f32> = g.vec::<f32>(n);
        let eps = 1e-5f32;
        for wide in [widen_weight::<bf16, f32>(&wb), wf.clone()] {
            let (want_y, want_inv) = natural(&x, &wide, n, eps);
            let mut xy = x.clone();
            let mut inv = vec![0f32; rows];
            if wide == wf {
                fwd_block::<bf16, f32, bf16, _, f32>(&mut xy[..], &wf, eps, &mut inv, plain_rows);
            } else {
                fwd_block::<bf16, bf16, bf16, _, f32>(&mut xy[..], &wb, eps, &mut inv, plain_rows);
                let (mut y, mut inv2) = (vec![bf16::ZERO; rows * n], vec![0f32; rows]);
                fwd_block::<bf16, bf16, bf16, _, f32>((&x[..], &mut y[..]), &wb, eps, &mut inv2, plain_rows);
                assert_eq!(
                    y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    xy.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "n={n}: out of place"
                );
                assert_eq!(
                    inv2.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    inv.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                );
            }
            let bits = |v: &[bf16]| v.iter().map(|b| b.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&xy), bits(&want_y), "n={n}: y");
            let fbits = |v: &[f32]| v.iter().map(|b| b.to_bits()).collect::<Vec<_>>();
            assert_eq!(fbits(&inv), fbits(&want_inv), "n={n}: inv_rms");
        }
    }
}

/// The bits of `v`, with every NaN as one canonical quiet NaN: a NaN's payload
/// after arithmetic is unspecified (LLVM may commute a multiply, and x86 keeps
/// the first operand's NaN), so copies compiled for different CPUs may differ in
/// it where two NaNs meet (a NaN `x` times a NaN `inv_rms`).
fn bits_nan_as_one<T: Float>(v: &[T]) -> Vec<u64> {
    v.iter().map(|t| if t.to_f64().is_nan() { u64::MAX } else { t.to_f64().to_bits() }).collect()
}

/// The dispatched bf16 row loops (on a CPU with AVX-512, its copy; with AVX-512
/// BF16 too, the copy that narrows with `vcvtne2ps2bf16`; with AVX2 alone, the copy
/// that prefetches the next row) give the bits of
/// the portable ones (compiled here for baseline x86-64, the fallback of CPUs
/// without it), in place and out of place, over every `bf16` value as input, rows
/// whose width is and is not a multiple of the chunk, and a random `f32` weight
/// (so the narrowing rounds arbitrary products); the outputs include NaN rows,
/// finite values and subnormals (checked). NaNs compare as NaNs (see
/// [`bits_nan_as_one`]); every other value bit for bit.
#[test]
fn dispatched_pair_rows_give_the_portable_bits_on_every_bf16() {
    let all: Vec<u16> = (0..=u16::MAX).step_by(STEP).collect();
    for (k, &n) in [32usize, 33, 100, 4095].iter().enumerate() {
        let rows = all.len().div_ceil(n);
        let x: Vec<bf16> = (0..rows * n).map(|i| bf16::from_bits(all[i % all.len()])).collect();
        let w = pair_weight(&Lcg(70 + k as u64).vec::<f32>(n));
        let eps = 1e-5f32;
        let (mut want, mut want_inv) = (x.clone(), vec![0f32; rows]);
        rows_body(&mut want[..], &w, n, eps, &mut want_inv, Pairs, One(narrow_pairs::<bf16, f32>), |_, _| {});
        let (want_bits, want_inv_bits) = (bits_nan_as_one(&want), bits_nan_as_one(&want_inv));
        let (mut got, mut got_inv) = (x.clone(), vec![0f32; rows]);
        pair_rows::<bf16, bf16, _, f32>(&mut got[..], &w, n, eps, &mut got_inv);
        assert!(bits_nan_as_one(&got) == want_bits, "n={n}: in place, y");
        assert!(bits_nan_as_one(&got_inv) == want_inv_bits, "n={n}: in place, inv_rms");
        for dispatched in [true, false] {
            let (mut y, mut y_inv) = (vec![bf16::ZERO; rows * n], vec![0f32; rows]);
            if dispatched {
                pair_rows::<bf16, bf16, _, f32>((&x[..], &mut y[..]), &w, n, eps, &mut y_inv);
            } else {
                let narrow = One(narrow_pairs::<bf16, f32>);
                rows_body((&x[..], &mut y[..]), &w, n, eps, &mut y_inv, Pairs, narrow, |_, _| {});
            }
            assert!(bits_nan_as_one(&y) == want_bits, "n={n}: out of place (dispatched {dispatched}), y");
            assert!(bits_nan_as_one(&y_inv) == want_inv_bits, "n={n}: out of place (dispatched {dispatched}), inv");
        }
        // The outputs are not degenerate: NaN rows, finite rows, subnormals.
        let has = |f: fn(&bf16) -> bool| want.iter().any(f);
        assert!(has(|v| v.is_nan()) && has(|v| v.is_finite() && *v != bf16::ZERO), "n={n}");
        assert!(has(|v| v.to_bits() & 0x7F80 == 0 && v.to_bits() & 0x7F != 0), "n={n}: a subnormal output");
    }
}
