//! The derivative of the Kepler solver: the tangent map and its transpose.
//!
//! With `E - e sin E = M`, implicit differentiation gives
//! `dE = (dM + sin E de) / (1 - e cos E)`, `d sin E = cos E dE`,
//! `d cos E = -sin E dE`. At a fixed point `(e, sin E, cos E)` this is a linear
//! map `(dM, de) -> (d sin E, d cos E)`, elementwise, so its transpose is
//! elementwise too:
//!
//! * tangent: `(dM, de) -> (d sin E, d cos E)`, with `t = (dM + s de) / (1 - e c)`,
//!   `d sin E = c t`, `d cos E = -s t`;
//! * cotangent (the transpose): `(ct_sin, ct_cos) -> (ct_M, ct_e)`, with
//!   `t = (c ct_sin - s ct_cos) / (1 - e c)`, `ct_M = t`, `ct_e = s t`.
//!
//! Both read five arrays and write two with one division per element: they are
//! memory-bound.
//!
//! The denominator `1 - e cos E` cancels near the singular corner `e -> 1`,
//! `E -> 0`, where it is `(1 - e) + e (1 - cos E)` and both terms are small: formed
//! as `1 - e * c`, it carries `cos E`'s absolute rounding error (half an ulp of 1)
//! relative to a value as small as `1 - e`, so at `e = 0.9999` an `f32` derivative
//! was off by 2e-4 relative, at `e = 1 - 1e-12` an `f64` one by 5e-5. For
//! `cos E > 0` the maps use `1 - cos E = sin^2 E / (1 + cos E)` instead, with
//! `sin E` accurate relative to itself: `t = num (1 + c) / ((1 - e)(1 + c) + e s^2)`,
//! a sum of positive terms (one division still, and no cancellation). For
//! `cos E <= 0`, `1 - e cos E >= 1` and the plain form is exact to an ulp. The slice functions are compiled for AVX-512, AVX2 and AVX and
//! dispatched at run time like the solver.
//!
//! # Example
//! ```
//! use xla_ffi_rs_ops::kepler::tangent::{cotangent_one, tangent_one};
//!
//! // At E = pi/2 with e = 0.5: 1 - e cos E = 1, so dE = dM + sin E de = dM + de.
//! let (e, s, c) = (0.5, 1.0, 0.0);
//! // d sin E = cos E dE = 0, d cos E = -sin E dE = -5.
//! assert_eq!(tangent_one(2.0, 3.0, e, s, c), (0.0, -5.0));
//! // The transpose: <(ct_sin, ct_cos), T (dM, de)> = <T^T (ct_sin, ct_cos), (dM, de)>.
//! let (ct_m, ct_e) = cotangent_one(0.25, 4.0, e, s, c);
//! assert_eq!(0.25 * 0.0 + 4.0 * -5.0, ct_m * 2.0 + ct_e * 3.0);
//! ```

use core::mem::MaybeUninit;
use core::ops::{Add, Div, Mul, Neg, Sub};

use multiversion::multiversion;

use crate::slot::Slot;

/// Which of the two linear maps to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// `(dM, de) -> (d sin E, d cos E)`.
    Tangent,
    /// The transpose: `(ct_sin, ct_cos) -> (ct_M, ct_e)`.
    Cotangent,
}

/// The arithmetic the maps need (`f32` and `f64`).
pub trait Real:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + PartialOrd
{
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
}

impl Real for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
}

impl Real for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
}

/// `num / (1 - e c)` for `c = cos E`, `s = sin E`, without the cancellation of
/// `1 - e c` near `e -> 1`, `E -> 0` (see the module docs): for `c > 0`,
/// `num (1 + c) / ((1 - e)(1 + c) + e s^2)`; else `num / (1 - e c)`. Both sides are
/// computed and one is selected, so the loops still vectorize.
#[inline(always)]
fn over_one_minus_e_cos<T: Real>(num: T, e: T, s: T, c: T) -> T {
    let opc = T::ONE + c;
    let near = c > T::ZERO;
    let scale = if near { opc } else { T::ONE };
    let den = if near { (T::ONE - e) * opc + e * (s * s) } else { T::ONE - e * c };
    num * scale / den
}

/// One element of the tangent map: `(a, b) = (dM, de)` -> `(d sin E, d cos E)`.
#[inline(always)]
pub fn tangent_one<T: Real>(a: T, b: T, e: T, s: T, c: T) -> (T, T) {
    let t = over_one_minus_e_cos(a + s * b, e, s, c);
    (c * t, -(s * t))
}

/// One element of the cotangent map: `(a, b) = (ct_sin, ct_cos)` -> `(ct_M, ct_e)`.
#[inline(always)]
pub fn cotangent_one<T: Real>(a: T, b: T, e: T, s: T, c: T) -> (T, T) {
    let t = over_one_minus_e_cos(c * a - s * b, e, s, c);
    (t, s * t)
}

/// The linear operands `(a, b)`: `(dM, de)` or `(ct_sin, ct_cos)`.
pub type Linear<'a, T> = (&'a [T], &'a [T]);
/// The point the map is taken at: `(e, sin E, cos E)`.
pub type Point<'a, T> = (&'a [T], &'a [T], &'a [T]);
/// The two outputs.
pub type Out<'a, S> = (&'a mut [S], &'a mut [S]);

#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "x86_64+avx"))]
fn apply_dispatch<T: Real, S: Slot<T>>(
    dir: Direction,
    (a, b): Linear<'_, T>,
    (e, s, c): Point<'_, T>,
    (o0, o1): Out<'_, S>,
) {
    // One loop per direction, each with its map inlined: a function pointer chosen
    // here would be called per element, unvectorized (and compiled for the baseline
    // target, not this version's).
    match dir {
        Direction::Tangent => map_slices(tangent_one::<T>, (a, b), (e, s, c), (o0, o1)),
        Direction::Cotangent => map_slices(cotangent_one::<T>, (a, b), (e, s, c), (o0, o1)),
    }
}

/// `one` elementwise over the slices (all of `a`'s length).
#[inline(always)]
fn map_slices<T: Real, S: Slot<T>>(
    one: impl Fn(T, T, T, T, T) -> (T, T),
    (a, b): Linear<'_, T>,
    (e, s, c): Point<'_, T>,
    (o0, o1): Out<'_, S>,
) {
    let n = a.len();
    let (b, e, s, c, o0, o1) = (&b[..n], &e[..n], &s[..n], &c[..n], &mut o0[..n], &mut o1[..n]);
    // Indexing within equal, re-sliced lengths: the bounds checks fold away and
    // the loop vectorizes.
    for i in 0..n {
        let (x, y) = one(a[i], b[i], e[i], s[i], c[i]);
        o0[i].put(x);
        o1[i].put(y);
    }
}

fn check_lengths(n: [usize; 7]) {
    assert!(n.iter().all(|&k| k == n[0]), "kepler tangent: slice lengths differ ({n:?})");
}

/// Applies the map in direction `dir` elementwise; writes every output element.
///
/// # Panics
/// If the seven slices do not all have the same length.
fn apply<T: Real, S: Slot<T>>(dir: Direction, lin: Linear<'_, T>, at: Point<'_, T>, out: Out<'_, S>) {
    check_lengths([lin.0.len(), lin.1.len(), at.0.len(), at.1.len(), at.2.len(), out.0.len(), out.1.len()]);
    apply_dispatch(dir, lin, at, out);
}

/// The `f64` map, into uninitialized outputs (what the handler writes).
///
/// # Panics
/// If the seven slices do not all have the same length.
pub fn apply_f64(dir: Direction, lin: Linear<'_, f64>, at: Point<'_, f64>, out: Out<'_, MaybeUninit<f64>>) {
    apply(dir, lin, at, out);
}

/// The `f32` map, into uninitialized outputs.
///
/// # Panics
/// If the seven slices do not all have the same length.
pub fn apply_f32(dir: Direction, lin: Linear<'_, f32>, at: Point<'_, f32>, out: Out<'_, MaybeUninit<f32>>) {
    apply(dir, lin, at, out);
}

/// The four outputs of the fused forward + tangent: `(sin E, cos E, d sin E, d cos E)`.
pub type Out4<'a, S> = (&'a mut [S], &'a mut [S], &'a mut [S], &'a mut [S]);

#[cfg(test)]
mod tests {
    use super::*;

    /// `(e, E)` points, with `E` the solution the map is taken at.
    fn points() -> Vec<(f64, f64)> {
        let mut p = Vec::new();
        for &e in &[0.0, 0.1, 0.5, 0.9, 0.99, 0.9999] {
            for k in 0..=24 {
                p.push((e, -3.1 + 6.2 * k as f64 / 24.0));
            }
        }
        p
    }

    fn run(dir: Direction, a: &[f64], b: &[f64], e: &[f64], s: &[f64], c: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let (mut o0, mut o1) = (vec![f64::NAN; a.len()], vec![f64::NAN; a.len()]);
        apply::<f64, f64>(dir, (a, b), (e, s, c), (&mut o0, &mut o1));
        (o0, o1)
    }

    /// The tangent against central differences of `E(M, e)` from Kepler's equation
    /// (`M = E - e sin E`, so `E` at a perturbed `(M, e)` by Newton from `E`).
    #[test]
    fn tangent_matches_finite_differences() {
        fn solve(m: f64, e: f64, mut ea: f64) -> f64 {
            for _ in 0..50 {
                ea -= (ea - e * ea.sin() - m) / (1.0 - e * ea.cos());
            }
            ea
        }
        let pts = points();
        let n = pts.len();
        let e: Vec<f64> = pts.iter().map(|p| p.0).collect();
        let ea: Vec<f64> = pts.iter().map(|p| p.1).collect();
        let (s, c): (Vec<f64>, Vec<f64>) = ea.iter().map(|x| (x.sin(), x.cos())).unzip();
        let dm: Vec<f64> = (0..n).map(|i| 1.0 + 0.1 * (i % 7) as f64).collect();
        let de: Vec<f64> = (0..n).map(|i| -0.5 + 0.05 * (i % 5) as f64).collect();
        let (ds, dc) = run(Direction::Tangent, &dm, &de, &e, &s, &c);
        for i in 0..n {
            // A step small against the curvature near the corner e -> 1, E -> 0.
            let h = 1e-6 * (1.0 - e[i] * c[i]);
            let m = ea[i] - e[i] * s[i];
            let plus = solve(m + h * dm[i], e[i] + h * de[i], ea[i]);
            let minus = solve(m - h * dm[i], e[i] - h * de[i], ea[i]);
            let (fs, fc) = ((plus.sin() - minus.sin()) / (2.0 * h), (plus.cos() - minus.cos()) / (2.0 * h));
            let scale = 1.0 + fs.abs().max(fc.abs());
            assert!((ds[i] - fs).abs() <= 1e-5 * scale, "d sin at e={}, E={}: {} vs {fs}", e[i], ea[i], ds[i]);
            assert!((dc[i] - fc).abs() <= 1e-5 * scale, "d cos at e={}, E={}: {} vs {fc}", e[i], ea[i], dc[i]);
        }
    }

    /// Near the singular corner (`e -> 1`, `E -> 0`) both maps keep the relative
    /// accuracy of `1 / (1 - e cos E)`, against `(1 - e) + 2 e sin^2(E/2)` (no
    /// cancellation) in `f64`. `1 - e * c` lost up to 5e-5 (`f64`, `e = 1 - 1e-12`)
    /// and 2e-4 (`f32`, `e = 0.9999`) here.
    #[test]
    fn derivative_keeps_relative_accuracy_near_the_corner() {
        let exact = |e: f64, ea: f64| 1.0 / ((1.0 - e) + 2.0 * e * (0.5 * ea).sin().powi(2));
        let mut worst = (0.0f64, 0.0f64);
        for &e in &[0.9999, 1.0 - 1e-8, 1.0 - 1e-12, 1.0 - f64::EPSILON / 2.0] {
            for k in 0..60 {
                let ea = 1e-9 * 1.5f64.powi(k); // 1e-9 .. 2.4
                let (s, c) = (ea.sin(), ea.cos());
                let want = exact(e, ea);
                let (ds, dc) = tangent_one(1.0, 0.0, e, s, c);
                let (ct_m, ct_e) = cotangent_one(c, -s, e, s, c);
                for (got, w) in [(ds / c, want), (-dc / s, want), (ct_m, want), (ct_e / s, want)] {
                    worst.0 = worst.0.max(((got - w) / w).abs());
                }
            }
        }
        for k in 0..40 {
            let ea = 1e-4 * 1.3f64.powi(k); // 1e-4 .. 2.8
            let e32 = 0.9999f32;
            let (s, c) = ((ea as f32).sin(), (ea as f32).cos());
            let want = exact(e32 as f64, (ea as f32) as f64);
            let (ds, _) = tangent_one(1.0f32, 0.0, e32, s, c);
            let (ct_m, _) = cotangent_one(1.0f32, 0.0, e32, s, c);
            for got in [ds / c, ct_m / c] {
                worst.1 = worst.1.max(((got as f64 - want) / want).abs());
            }
        }
        assert!(worst.0 <= 1e-14, "f64: relative error {:e}", worst.0);
        assert!(worst.1 <= 2e-6, "f32: relative error {:e}", worst.1);
    }

    /// `<ct, T v> == <T^T ct, v>` elementwise: the cotangent map is the transpose.
    #[test]
    fn cotangent_is_the_transpose() {
        let pts = points();
        let n = pts.len();
        let e: Vec<f64> = pts.iter().map(|p| p.0).collect();
        let (s, c): (Vec<f64>, Vec<f64>) = pts.iter().map(|p| (p.1.sin(), p.1.cos())).unzip();
        let v0: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
        let v1: Vec<f64> = (0..n).map(|i| (i as f64 * 0.91).cos()).collect();
        let c0: Vec<f64> = (0..n).map(|i| (i as f64 * 1.3).cos()).collect();
        let c1: Vec<f64> = (0..n).map(|i| (i as f64 * 0.11).sin()).collect();
        let (t0, t1) = run(Direction::Tangent, &v0, &v1, &e, &s, &c);
        let (u0, u1) = run(Direction::Cotangent, &c0, &c1, &e, &s, &c);
        for i in 0..n {
            let lhs = c0[i] * t0[i] + c1[i] * t1[i];
            let rhs = u0[i] * v0[i] + u1[i] * v1[i];
            assert!((lhs - rhs).abs() <= 1e-12 * (1.0 + lhs.abs()), "at {i}: {lhs} vs {rhs}");
        }
    }

    /// Every length (the vector body and its remainder) gives what the one-element
    /// functions give, bit for bit, in both dtypes.
    #[test]
    fn slices_match_elements_at_every_length() {
        for n in [0usize, 1, 3, 7, 8, 9, 63, 64, 65, 200] {
            let f = |k: f64| (0..n).map(move |i| ((i as f64 + 1.0) * k).sin()).collect::<Vec<f64>>();
            let (a, b, s) = (f(0.7), f(1.1), f(0.3));
            let c: Vec<f64> = s.iter().map(|x| (1.0 - x * x).sqrt()).collect();
            let e: Vec<f64> = (0..n).map(|i| (i % 10) as f64 / 10.0).collect();
            for dir in [Direction::Tangent, Direction::Cotangent] {
                let (o0, o1) = run(dir, &a, &b, &e, &s, &c);
                let one = if dir == Direction::Tangent { tangent_one::<f64> } else { cotangent_one::<f64> };
                for i in 0..n {
                    assert_eq!((o0[i], o1[i]), one(a[i], b[i], e[i], s[i], c[i]), "{dir:?} n={n} i={i}");
                }
                let g = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
                let (a, b, e, s, c) = (g(&a), g(&b), g(&e), g(&s), g(&c));
                let (mut p0, mut p1) = (vec![f32::NAN; n], vec![f32::NAN; n]);
                apply::<f32, f32>(dir, (&a, &b), (&e, &s, &c), (&mut p0, &mut p1));
                let one = if dir == Direction::Tangent { tangent_one::<f32> } else { cotangent_one::<f32> };
                for i in 0..n {
                    assert_eq!((p0[i], p1[i]), one(a[i], b[i], e[i], s[i], c[i]), "f32 {dir:?} n={n} i={i}");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "slice lengths differ")]
    fn unequal_lengths_panic() {
        run(Direction::Tangent, &[1.0, 2.0], &[1.0], &[0.5, 0.5], &[0.0, 0.0], &[1.0, 1.0]);
    }
}
