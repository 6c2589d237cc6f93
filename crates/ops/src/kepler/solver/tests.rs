//! Tests of the Kepler solver: accuracy against an independent bisection
//! reference, the domain, and bit-identity of the slice and scalar paths (a child
//! module of `solver.rs`, so it can run the slice solver on initialized buffers).

use super::real::*;
use super::reduce::{reduce_large, LARGE_M};
use super::*;
use core::f64::consts::{PI, TAU};

/// `E - e sin E`, accurate near `E = 0` (series for `E - sin E`).
fn kepler_lhs(ea: f64, e: f64) -> f64 {
    if ea.abs() < 0.5 {
        // E - sin E = E^3/3! - E^5/5! + ...
        let z = ea * ea;
        let (mut term, mut sum) = (ea, 0.0);
        for k in 1..20 {
            term *= -z / ((2 * k) as f64 * (2 * k + 1) as f64);
            sum -= term;
        }
        (1.0 - e) * ea + e * sum
    } else {
        ea - e * ea.sin()
    }
}

/// `x` wrapped to `(-pi, pi]`.
fn wrap(x: f64) -> f64 {
    x - TAU * (x / TAU).round()
}

/// Reference `E` for `m` in `[-pi, pi]` by bisection to the last bit (`E - e sin E`
/// is increasing), independent of the solver's starter and polynomials.
fn reference_e(m: f64, e: f64) -> f64 {
    let a = m.abs();
    let (mut lo, mut hi) = (0.0f64, PI);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if kepler_lhs(mid, e) < a {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (0.5 * (lo + hi)).copysign(m)
}

/// `M` reduced to `[-pi, pi]` with `2 pi` in double-double (exact products via
/// `mul_add`), independent of the solver's Cody-Waite constants.
fn reduce_ref(m: f64) -> f64 {
    const HI: f64 = TAU;
    const LO: f64 = 2.449_293_598_294_706_4e-16; // 2 pi - HI
    let k = (m / TAU).round();
    let p = k * HI;
    let p_err = k.mul_add(HI, -p); // k * HI = p + p_err exactly
    ((m - p) - p_err) - k * LO
}

fn m_grid() -> Vec<f64> {
    let mut ms: Vec<f64> = (0..=160).map(|i| -PI + TAU * i as f64 / 160.0).collect();
    ms.extend((0..=80).map(|i| -1e-3 + 2e-3 * i as f64 / 80.0));
    ms.extend((0..40).flat_map(|i| {
        let x = 10f64.powf(-3.0 - 0.3 * i as f64);
        [x, -x]
    }));
    ms.extend([0.0, PI, -PI, PI - 1e-4, 1e-4 - PI, 1e-300, 5e-324]);
    ms
}

fn e_grid(max: f64) -> Vec<f64> {
    let mut es: Vec<f64> = (0..=40).map(|i| 0.99 * i as f64 / 40.0).collect();
    es.extend((0..=30).map(|i| 0.99 + (max - 0.99) * i as f64 / 30.0));
    es.extend([0.5, 0.9, 0.999, max]);
    es
}

#[test]
fn f64_error_in_e_up_to_0_999() {
    let mut worst = (0.0f64, 0.0, 0.0);
    for &e in &e_grid(0.999) {
        for &m in &m_grid() {
            let err = (eccentric_anomaly_f64(m, e) - reference_e(m, e)).abs();
            if err > worst.0 {
                worst = (err, m, e);
            }
        }
    }
    assert!(worst.0 <= 1e-13, "max |E - E_ref| = {:e} at (M, e) = ({}, {})", worst.0, worst.1, worst.2);
}

#[test]
fn f64_backward_error_up_to_0_9999() {
    let mut worst = (0.0f64, 0.0, 0.0);
    for &e in &e_grid(0.9999) {
        for &m in &m_grid() {
            // From E itself and from the sin/cos outputs.
            let ea = eccentric_anomaly_f64(m, e);
            let (s, c) = solve_one_f64(m, e);
            for x in [ea, s.atan2(c)] {
                let be = wrap(kepler_lhs(x, e) - m).abs();
                if be > worst.0 {
                    worst = (be, m, e);
                }
            }
        }
    }
    assert!(worst.0 <= 1e-12, "max backward error {:e} at (M, e) = ({}, {})", worst.0, worst.1, worst.2);
}

#[test]
fn f64_singular_corner_dense() {
    let (mut be_max, mut ee_max) = (0.0f64, 0.0f64);
    for i in 0..=100 {
        let e = 0.99 + 0.0099 * i as f64 / 100.0;
        for j in 0..=100 {
            let m = -1e-3 + 2e-3 * j as f64 / 100.0;
            let ea = eccentric_anomaly_f64(m, e);
            be_max = be_max.max((kepler_lhs(ea, e) - m).abs());
            if e <= 0.999 {
                ee_max = ee_max.max((ea - reference_e(m, e)).abs());
            }
        }
    }
    assert!(be_max <= 1e-12, "corner backward error {be_max:e}");
    assert!(ee_max <= 1e-13, "corner error in E {ee_max:e}");
}

#[test]
fn f32_backward_error_up_to_0_9999() {
    let mut worst = (0.0f64, 0.0, 0.0);
    let mut ms: Vec<f32> = m_grid().iter().map(|&m| m as f32).collect();
    ms.extend((0..=100).map(|i| -1e-3 + 2e-3 * i as f32 / 100.0));
    for &e in &e_grid(0.9999) {
        let e = e as f32;
        for &m in &ms {
            let (s, c) = solve_one_f32(m, e);
            let x = (s as f64).atan2(c as f64);
            let be = wrap(kepler_lhs(x, e as f64) - m as f64).abs();
            if be > worst.0 {
                worst = (be, m as f64, e as f64);
            }
        }
    }
    assert!(worst.0 <= 2e-5, "f32 max backward error {:e} at (M, e) = ({}, {})", worst.0, worst.1, worst.2);
}

#[test]
fn sin_cos_consistent() {
    for &e in &[0.0, 0.3, 0.9, 0.9999] {
        for &m in &m_grid() {
            let (s, c) = solve_one_f64(m, e);
            assert!((s.mul_add(s, c * c) - 1.0).abs() <= 4.0 * f64::EPSILON, "f64 s^2+c^2 at ({m}, {e})");
            let ea = eccentric_anomaly_f64(m, e);
            assert!((s - ea.sin()).abs() <= 1e-15 && (c - ea.cos()).abs() <= 1e-15, "f64 sin/cos vs E at ({m}, {e})");
            let (s, c) = solve_one_f32(m as f32, e as f32);
            let n = (s as f64).mul_add(s as f64, c as f64 * c as f64);
            assert!((n - 1.0).abs() <= 4.0 * f32::EPSILON as f64, "f32 s^2+c^2 at ({m}, {e})");
        }
    }
}

#[test]
fn e_zero_gives_m() {
    for &m in &m_grid() {
        let (s, c) = solve_one_f64(m, 0.0);
        assert!((s - m.sin()).abs() <= 1e-15 && (c - m.cos()).abs() <= 1e-15, "e = 0 at M = {m}");
        assert!((eccentric_anomaly_f64(m, 0.0) - m).abs() <= 1e-15);
        let (s, c) = solve_one_f32(m as f32, 0.0);
        assert!((s - (m as f32).sin()).abs() <= 1e-6 && (c - (m as f32).cos()).abs() <= 1e-6);
    }
}

/// At `M = +0` the solution is `E = +0`: `sin E` is `+0`, as `sin(+0)` is (and as the
/// jnp reference gives), not `-0` (a sign test `m <= 0` instead of `m < 0` flipped it).
#[test]
fn m_zero_gives_positive_zero() {
    for &e in &[0.0, 0.3, 0.99] {
        let (s, c) = solve_one_f64(0.0, e);
        assert!(s == 0.0 && s.is_sign_positive() && c == 1.0, "e = {e}: ({s:?}, {c:?})");
        let ea = eccentric_anomaly_f64(0.0, e);
        assert!(ea == 0.0 && ea.is_sign_positive(), "e = {e}: E = {ea:?}");
        let (s, c) = solve_one_f32(0.0, e as f32);
        assert!(s == 0.0 && s.is_sign_positive() && c == 1.0, "f32, e = {e}: ({s:?}, {c:?})");
        // The block path too (a slice of one block and more).
        let n = 2 * BLOCK64 + 1;
        let (m, es) = (vec![0.0; n], vec![e; n]);
        let (mut so, mut co) = (vec![f64::NAN; n], vec![f64::NAN; n]);
        solve_dispatch::<f64, f64, BLOCK64>(&m, &es, &mut so, &mut co);
        assert!(so.iter().all(|v| *v == 0.0 && v.is_sign_positive()), "slice, e = {e}: {so:?}");
    }
}

#[test]
fn large_and_negative_m() {
    for &e in &[0.0, 0.2, 0.7, 0.99] {
        for &m0 in &[0.1, 1.0, 2.5, -3.0, 1e-4] {
            for &k in &[1.0, 17.0, -1000.0, 159_154.0, 3.0e6] {
                let m = m0 + TAU * k;
                let r = reduce_ref(m);
                let ea = eccentric_anomaly_f64(m, e);
                let be = wrap(kepler_lhs(ea, e) - r).abs();
                assert!(be <= 1e-12, "backward error {be:e} at M = {m}, e = {e}");
                let (s, c) = solve_one_f64(m, e);
                let (s0, c0) = solve_one_f64(r, e);
                assert!((s - s0).abs() <= 1e-13 && (c - c0).abs() <= 1e-13, "M = {m}, e = {e}");
                // f32: reduced relative to the f32 value of M.
                let m32 = m as f32;
                let (s, c) = solve_one_f32(m32, e as f32);
                let x = (s as f64).atan2(c as f64);
                let be = wrap(kepler_lhs(x, e as f32 as f64) - reduce_ref(m32 as f64)).abs();
                assert!(be <= 2e-5, "f32 backward error {be:e} at M = {m32}, e = {e}");
            }
        }
    }
    for m in [1e6, -1e6, 123_456.789] {
        let be = wrap(kepler_lhs(eccentric_anomaly_f64(m, 0.5), 0.5) - reduce_ref(m)).abs();
        assert!(be <= 1e-12, "M = {m}: {be:e}");
    }
    // Odd symmetry, exact.
    for &e in &[0.1, 0.95] {
        for &m in &m_grid() {
            let ((s, c), (sn, cn)) = (solve_one_f64(m, e), solve_one_f64(-m, e));
            if m.abs() < 3.1 {
                assert!(s == -sn && c == cn, "M = {m}");
            }
        }
    }
}

/// Large `M` that a reduction must get exactly: the decades the brief names,
/// the extremes, the double closest to a multiple of `pi / 2` (Kahan-McDonald),
/// the threshold of the exact path and its neighbours, and multiples of `2 pi`.
fn large_ms() -> Vec<f64> {
    let mut ms = vec![
        1e8,
        1e9,
        1e15,
        1e16,
        1e17,
        1e20,
        1e22,
        1e100,
        1e300,
        -1e300,
        f64::MAX,
        -f64::MAX,
        6_381_956_970_095_103.0 * 2f64.powi(797),
        LARGE_M,
        LARGE_M.next_down(),
        LARGE_M.next_up(),
        -LARGE_M,
        2f64.powi(52),
        2f64.powi(53),
        2f64.powi(63),
        2f64.powi(1023),
        TAU * 2f64.powi(40),
        TAU * 1e17,
        f32::MAX as f64,
        -(f32::MAX as f64),
    ];
    // Every binade from 2^20 to 2^1023, with a few mantissas each.
    let mut st = 0x2545_F491_4F6C_DD1Du64;
    for ex in 20..=1023 {
        for _ in 0..3 {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            let mant = f64::from_bits(0x3FF0_0000_0000_0000 | (st >> 12)); // [1, 2)
            let m = mant * 2f64.powi(ex);
            ms.push(if st & 1 == 0 { m } else { -m });
        }
    }
    ms
}

/// `M` reduced to `[-pi, pi]` by libm (its `sin`/`cos` reduce exactly, with
/// Payne-Hanek): an independent reference for the solver's reduction.
fn reduce_libm(m: f64) -> f64 {
    m.sin().atan2(m.cos())
}

#[test]
fn exact_reduction_matches_libm() {
    for &m in &large_ms() {
        let (r, want) = (reduce_large(m), reduce_libm(m));
        // Near +-pi the two may pick opposite ends of the same point.
        let diff = if (r - want).abs() > 6.0 { (r - want).abs() - TAU } else { r - want };
        assert!(diff.abs() <= 4.0 * f64::EPSILON * want.abs().max(1e-300), "M = {m:e}: reduced {r:e}, libm {want:e}");
    }
    // Where the Cody-Waite reduction is exact too, the two agree.
    for k in 0..2000 {
        let m = (k as f64 - 1000.0) * 67_108.863_9 + 0.123;
        let (fast, exact) = (<f64 as Real>::reduce_fast::<false>(m), reduce_large(m));
        assert!((fast - exact).abs() <= 2.0 * f64::EPSILON * exact.abs().max(1.0), "M = {m}: {fast:e} vs {exact:e}");
    }
    assert!(reduce_large(f64::INFINITY).is_nan() && reduce_large(f64::NAN).is_nan());
    assert_eq!(reduce_large(0.0), 0.0);
    assert_eq!(reduce_large(1e-5), 1e-5);
}

/// `|M| >= 2^27`: `e = 0` gives libm's `sin M`, `cos M` (so `E = M` modulo `2 pi`
/// exactly); for `e > 0`, `E - e sin E` is `M` on the circle. Scalar and slice
/// paths, `f64` and `f32`.
#[test]
fn large_m_is_exact() {
    let ms = large_ms();
    for &e in &[0.0, 0.5, 0.9] {
        // The slice path, over blocks that mix large and ordinary M.
        let mixed: Vec<f64> = ms.iter().enumerate().flat_map(|(i, &m)| [m, i as f64 * 0.37 - 3.0]).collect();
        let es = vec![e; mixed.len()];
        let (mut s, mut c) = (vec![0.0f64; mixed.len()], vec![0.0f64; mixed.len()]);
        solve_dispatch::<f64, f64, BLOCK64>(&mixed, &es, &mut s, &mut c);
        let m32: Vec<f32> = mixed.iter().map(|&m| m as f32).collect();
        let e32 = vec![e as f32; mixed.len()];
        let (mut s32, mut c32) = (vec![0.0f32; mixed.len()], vec![0.0f32; mixed.len()]);
        solve_dispatch::<f32, f32, BLOCK32>(&m32, &e32, &mut s32, &mut c32);
        for (i, &m) in mixed.iter().enumerate() {
            assert_eq!((s[i], c[i]), solve_one_f64(m, e), "slice vs scalar at M = {m:e}");
            let ea = s[i].atan2(c[i]);
            let lhs = ea - e * s[i];
            let tol = if e == 0.0 { 1e-15 } else { 2e-15 };
            assert!(
                (lhs.sin() - m.sin()).abs() <= tol && (lhs.cos() - m.cos()).abs() <= tol,
                "f64 M = {m:e}, e = {e}: E - e sin E = {lhs} but libm reduces M to {}",
                reduce_libm(m)
            );
            if e == 0.0 {
                assert!((s[i] - m.sin()).abs() <= 1e-15 && (c[i] - m.cos()).abs() <= 1e-15, "M = {m:e}");
            }
            // f32: the same against the f32 value of M (finite unless it overflowed).
            let mf = m32[i] as f64;
            if mf.is_finite() {
                assert_eq!((s32[i], c32[i]), solve_one_f32(m32[i], e as f32), "f32 slice vs scalar at M = {mf:e}");
                let (sf, cf) = (s32[i] as f64, c32[i] as f64);
                let lhs = sf.atan2(cf) - (e as f32 as f64) * sf;
                assert!(
                    (lhs.sin() - mf.sin()).abs() <= 2e-6 && (lhs.cos() - mf.cos()).abs() <= 2e-6,
                    "f32 M = {mf:e}, e = {e}: E - e sin E = {lhs} but libm reduces M to {}",
                    reduce_libm(mf)
                );
            } else {
                assert!(s32[i].is_nan() && c32[i].is_nan(), "f32 M = {mf}");
            }
        }
    }
    // E itself, in [-pi, pi].
    for &m in &ms {
        let ea = eccentric_anomaly_f64(m, 0.0);
        assert!(
            (ea - reduce_libm(m)).abs() <= 4.0 * f64::EPSILON * ea.abs().max(1e-300) || (ea.abs() - PI).abs() < 1e-15
        );
    }
}

#[test]
fn constants() {
    assert_eq!(<f32 as Real>::PIO2_A as f64, 1.570_796_966_552_734_4);
    assert_eq!(<f32 as Real>::PIO2_A.to_bits() & 0xF, 0); // n * PIO2_A exact for n <= 2
    assert_eq!(<f64 as Real>::PIO2_A.to_bits() & 0x7, 0); // n * PIO2_A exact for n <= 7
    assert_eq!(TWO_PI_A.to_bits() & ((1 << 25) - 1), 0);
    assert_eq!(TWO_PI_B.to_bits() & ((1 << 25) - 1), 0);
    assert!((TWO_PI_A + TWO_PI_B + TWO_PI_C - TAU).abs() <= 1e-15);
}

/// The literals of the algorithm that `f32` rounds from `f64` are the values `f32`
/// arithmetic gives; the `f32` reduction's `2 pi` in three parts sums to `2 pi`.
#[test]
fn f32_constants() {
    for (x, y) in
        [(1.0 / 3.0, 1.0f32 / 3.0), (1.0 / 6.0, 1.0 / 6.0), (-1.0 / 6.0, -1.0 / 6.0), (-1.0 / 24.0, -1.0 / 24.0)]
    {
        assert_eq!(f32::lit(x).to_bits(), y.to_bits(), "{x}");
    }
    assert_eq!(<f64 as Real>::SIN.len(), 7);
    assert_eq!(TWO_PI_A32, TAU as f32);
    assert_eq!(INV_TWO_PI32, INV_TWO_PI as f32);
    // Against the f64 three-part 2 pi (exact differences, by Sterbenz).
    let d = ((TWO_PI_A32 as f64 - TWO_PI_A) + (TWO_PI_B32 as f64 - TWO_PI_B)) + (TWO_PI_C32 as f64 - TWO_PI_C);
    assert!(d.abs() <= 1e-22, "f32 three-part 2 pi off by {d:e}");
}

/// The `f32` sine and cosine fits, evaluated in `f32` as the solver does, on
/// `[-pi/4, pi/4]` against `f64` `sin`, `cos`: within one `f32` ulp of 1.
#[test]
fn f32_sin_cos_fits() {
    let (mut ws, mut wc) = (0.0f64, 0.0f64);
    for i in 0..=200_000 {
        let x = (-PI / 4.0 + PI / 2.0 * i as f64 / 200_000.0) as f32;
        let z = x * x;
        let s = x + x * z * poly::<f32, true>(z, &SIN32);
        let c = 1.0 - z * (-z).mul_add(poly::<f32, true>(z, &COS32), 0.5);
        ws = ws.max((s as f64 - (x as f64).sin()).abs());
        wc = wc.max((c as f64 - (x as f64).cos()).abs());
    }
    assert!(ws <= 6e-8 && wc <= 8e-8, "f32 fits: sin off by {ws:e}, cos by {wc:e}");
}

/// `M` near an odd multiple of `pi` up to the end of the `f32` reduction with FMA
/// (`2^22`) and beyond: the product `M / 2pi` rounded in `f32` may put `k` one
/// off the nearest integer there, which the second reduction step corrects.
#[test]
fn f32_reduction_near_half_periods() {
    let mut worst = (0.0f64, 0.0f32);
    for i in 0..4000u64 {
        let k = (i * i * 7 + i * 13) % 700_000;
        for f in [0.5, 0.499_999_9, 0.500_000_1, 0.0, 1e-7, 0.25] {
            for sgn in [1.0, -1.0] {
                let m = (sgn * (k as f64 + f) * TAU) as f32;
                let (s, c) = solve_one_f32(m, 0.3);
                let x = (s as f64).atan2(c as f64);
                let be = wrap(kepler_lhs(x, 0.3f32 as f64) - reduce_ref(m as f64)).abs();
                if be > worst.0 {
                    worst = (be, m);
                }
            }
        }
    }
    assert!(worst.0 <= 2e-6, "f32 backward error {:e} at M = {}", worst.0, worst.1);
}

/// `f64` `M` within a few ulps of an odd multiple of `pi`, `|M|` from 10 to the end
/// of the Cody-Waite reduction (`2^27`): the product `M / 2pi` may round across a
/// half there, putting `k` one off the nearest integer and `M - 2 pi k` just
/// outside `[-pi, pi]`, which the second reduction step brings back (a clamp
/// answered `E = +-pi`, wrong by up to `ulp(M)`). `e = 0` gives libm's `sin M`,
/// `cos M`; `e > 0` satisfies Kepler's equation for libm's reduction of `M`.
/// Scalar and slice paths.
#[test]
fn f64_reduction_near_half_periods() {
    let mut ms = vec![5928.185337323939, 98668.00047129462, 9761968.241871824, 130152423.15181877];
    for i in 0..3000u64 {
        let k = 1 + (i * i * 7 + i * 13) % 21_000_000;
        let m0 = (k as f64 + 0.5) * TAU;
        for j in -4i64..=4 {
            let m = f64::from_bits((m0.to_bits() as i64 + j) as u64);
            if m.abs() < LARGE_M {
                ms.push(m);
                ms.push(-m);
            }
        }
    }
    for &e in &[0.0, 0.5, 0.9] {
        let es = vec![e; ms.len()];
        let (mut s, mut c) = (vec![0.0f64; ms.len()], vec![0.0f64; ms.len()]);
        solve_dispatch::<f64, f64, BLOCK64>(&ms, &es, &mut s, &mut c);
        for (i, &m) in ms.iter().enumerate() {
            let (s1, c1) = solve_one_f64(m, e);
            assert!(s1.to_bits() == s[i].to_bits() && c1.to_bits() == c[i].to_bits(), "M = {m:?}: scalar != slice");
            if e == 0.0 {
                let (ds, dc) = ((s[i] - m.sin()).abs(), (c[i] - m.cos()).abs());
                assert!(
                    ds <= 2e-15 && dc <= 2e-15,
                    "M = {m:?}: sin E {} cos E {}, libm {} {}",
                    s[i],
                    c[i],
                    m.sin(),
                    m.cos()
                );
            }
            let x = s[i].atan2(c[i]);
            let be = wrap(kepler_lhs(x, e) - reduce_libm(m)).abs();
            assert!(be <= 4e-15, "M = {m:?}, e = {e}: backward error {be:e} (E = {x:?})");
        }
    }
    // The reduction itself, against the exact one (either end of the circle at +-pi).
    for &m in &ms {
        let (fast, exact) = (<f64 as Real>::reduce_fast::<false>(m), reduce_large(m));
        let fused = <f64 as Real>::reduce_fast::<true>(m);
        for r in [fast, fused] {
            let diff = if (r - exact).abs() > 6.0 { (r - exact).abs() - TAU } else { r - exact };
            assert!(diff.abs() <= 4.0 * f64::EPSILON, "M = {m:?}: reduced {r:?}, exact {exact:?}");
        }
    }
}

#[test]
fn invalid_inputs_give_nan() {
    let bad = [
        (f64::NAN, 0.5),
        (1.0, f64::NAN),
        (1.0, 1.0),
        (1.0, 1.5),
        (1.0, -0.1),
        (1.0, f64::INFINITY),
        (f64::INFINITY, 0.5),
        (f64::NEG_INFINITY, 0.0),
    ];
    for &(m, e) in &bad {
        let (s, c) = solve_one_f64(m, e);
        assert!(s.is_nan() && c.is_nan(), "f64 ({m}, {e})");
        assert!(eccentric_anomaly_f64(m, e).is_nan());
        let (s, c) = solve_one_f32(m as f32, e as f32);
        assert!(s.is_nan() && c.is_nan(), "f32 ({m}, {e})");
    }
    // e just below 1 is valid.
    let (s, c) = solve_one_f64(1e-3, 1.0 - f64::EPSILON / 2.0);
    assert!(s.is_finite() && c.is_finite());
    let (s, c) = solve_one_f32(1e-3, 1.0 - f32::EPSILON / 2.0);
    assert!(s.is_finite() && c.is_finite());
}

/// Deterministic pseudo-random inputs, some invalid.
fn inputs(n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut st = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        st = st.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (st >> 11) as f64 / (1u64 << 53) as f64
    };
    let m: Vec<f64> = (0..n).map(|i| if i % 97 == 5 { f64::NAN } else { (next() - 0.5) * 40.0 }).collect();
    let e: Vec<f64> = (0..n).map(|i| if i % 89 == 3 { 1.2 } else { next() }).collect();
    (m, e)
}

/// Runs `f64s` and `f32s` (slice solvers into plain slices) on `n` elements of
/// [`inputs`] and asserts that each element has the one-element solver's bits.
fn assert_matches_scalar(
    n: usize,
    f64s: impl Fn(&[f64], &[f64], &mut [f64], &mut [f64]),
    f32s: impl Fn(&[f32], &[f32], &mut [f32], &mut [f32]),
) {
    let (m, e) = inputs(n);
    let (mut s, mut c) = (vec![7.0f64; n], vec![7.0f64; n]);
    f64s(&m, &e, &mut s, &mut c);
    for i in 0..n {
        let (s1, c1) = solve_one_f64(m[i], e[i]);
        assert_eq!((s[i].to_bits(), c[i].to_bits()), (s1.to_bits(), c1.to_bits()), "f64 n = {n}, i = {i}");
    }
    let (m, e): (Vec<f32>, Vec<f32>) = (m.iter().map(|&x| x as f32).collect(), e.iter().map(|&x| x as f32).collect());
    let (mut s, mut c) = (vec![7.0f32; n], vec![7.0f32; n]);
    f32s(&m, &e, &mut s, &mut c);
    for i in 0..n {
        let (s1, c1) = solve_one_f32(m[i], e[i]);
        assert_eq!((s[i].to_bits(), c[i].to_bits()), (s1.to_bits(), c1.to_bits()), "f32 n = {n}, i = {i}");
    }
}

#[test]
fn slices_match_scalar_bit_for_bit() {
    for n in [0, 1, 7, BLOCK64, BLOCK32 + 13, 3 * BLOCK32 + 5] {
        assert_matches_scalar(n, solve_dispatch::<f64, f64, BLOCK64>, solve_dispatch::<f32, f32, BLOCK32>);
    }
}

/// `solve_f64` and `solve_f32` take one of three paths by length (one element, fewer
/// than a block, whole blocks); each gives the one-element solver's bits. (`solve`
/// is theirs, here writing into plain slices that the test can read.)
#[test]
fn every_path_by_length_matches_scalar_bit_for_bit() {
    for n in [1, 2, BLOCK32 - 1, BLOCK64 - 1, BLOCK64, BLOCK64 + 1, BLOCK32 + 1] {
        assert_matches_scalar(
            n,
            |m, e, s, c| solve::<f64, f64, BLOCK64>(m, e, s, c, solve_one_f64),
            |m, e, s, c| solve::<f32, f32, BLOCK32>(m, e, s, c, solve_one_f32),
        );
    }
}

#[test]
#[should_panic(expected = "slice lengths differ (m: 1, e: 1, sin_e: 1, cos_e: 0)")]
fn length_mismatch_panics_for_one_element() {
    let mut s = [MaybeUninit::<f64>::uninit(); 1];
    solve_f64(&[0.5], &[0.1], &mut s, &mut []);
}

#[test]
fn public_slice_api_runs() {
    let n = 2 * BLOCK32 + 3;
    let (m, e) = inputs(n);
    let mut s = vec![MaybeUninit::<f64>::uninit(); n];
    let mut c = vec![MaybeUninit::<f64>::uninit(); n];
    solve_f64(&m, &e, &mut s, &mut c);
    solve_f64(&[], &[], &mut [], &mut []);
    let (m, e): (Vec<f32>, Vec<f32>) = (m.iter().map(|&x| x as f32).collect(), e.iter().map(|&x| x as f32).collect());
    let mut s = vec![MaybeUninit::<f32>::uninit(); n];
    let mut c = vec![MaybeUninit::<f32>::uninit(); n];
    solve_f32(&m, &e, &mut s, &mut c);
    solve_f32(&[], &[], &mut [], &mut []);
}

#[test]
#[should_panic(expected = "slice lengths differ")]
fn length_mismatch_panics() {
    let mut s = vec![MaybeUninit::<f64>::uninit(); 3];
    let mut c = vec![MaybeUninit::<f64>::uninit(); 2];
    solve_f64(&[0.0; 3], &[0.1; 3], &mut s, &mut c);
}

/// The block arrays start on a cache line wherever the stack is (see `Scratch`): a
/// local of the type, made at several stack depths, is 64-byte aligned.
#[test]
fn block_arrays_are_cache_line_aligned() {
    assert_eq!(core::mem::align_of::<Scratch<f32, BLOCK32>>(), 64);
    assert_eq!(core::mem::align_of::<Scratch<f64, BLOCK64>>(), 64);
    fn at_depth(depth: usize) {
        let pad = [0u8; 16];
        std::hint::black_box(&pad);
        if depth > 0 {
            return at_depth(depth - 1);
        }
        let z = Scratch([0.0f32; BLOCK32]);
        assert_eq!(std::hint::black_box(&z) as *const _ as usize % 64, 0);
    }
    for depth in 0..8 {
        at_depth(depth);
    }
}
