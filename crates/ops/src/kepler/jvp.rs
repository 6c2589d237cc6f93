//! The fused forward + tangent of the solver (`xla_ffi_rs.kepler_jvp`): `sin E`,
//! `cos E` and the tangent `(d sin E, d cos E)` of `(dM, de)` in one pass.
//!
//! The solver's blocks (`solver::block_with`) hand each element's `(sin E, cos E)`
//! to the tangent map (`super::tangent::tangent_one`) in their last stage, which
//! writes all four outputs there: the inputs are read once, nothing is read back,
//! and the stores stream out at the pace of the solver, as the forward's two do
//! (where the solver followed by `xla_ffi_rs.kepler_tangent` reads five arrays and
//! writes two more in a second pass). The results are bit-identical to that pair.
//!
//! Each tangent is [`Tangent::Each`] (one value per element) or [`Tangent::All`]
//! (one value for every element: a tangent built in the program as a constant, or a
//! symbolic zero), which is never materialized: a block reads it from a stack
//! array filled once.

use core::mem::MaybeUninit;

use multiversion::multiversion;

use super::solver::{self, BLOCK32, BLOCK64};
use super::tangent::{self, tangent_one, Out4};
use crate::slot::Slot;

/// One tangent operand of the fused kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tangent<'a, T> {
    /// One value per element.
    Each(&'a [T]),
    /// The same value for every element (a broadcast scalar).
    All(T),
}

impl<'a, T: Copy> Tangent<'a, T> {
    /// Elements `start..end` of it (the same scalar for [`Tangent::All`]).
    ///
    /// # Panics
    /// If the range is outside an [`Tangent::Each`] slice.
    pub fn slice(self, start: usize, end: usize) -> Self {
        match self {
            Tangent::Each(v) => Tangent::Each(&v[start..end]),
            all => all,
        }
    }

    /// Whether it covers `n` elements (a scalar covers any number).
    fn covers(self, n: usize) -> bool {
        match self {
            Tangent::Each(v) => v.len() == n,
            Tangent::All(_) => true,
        }
    }

    /// Element `i`.
    #[inline(always)]
    fn at(self, i: usize) -> T {
        match self {
            Tangent::Each(v) => v[i],
            Tangent::All(v) => v,
        }
    }
}

/// The two tangents `(dM, de)` of the fused kernel.
pub type Tangents<'a, T> = (Tangent<'a, T>, Tangent<'a, T>);

/// Block `start..start + L` of `t`, or the block-sized stack array `all` holds its scalar in.
#[inline(always)]
fn block_of<'a, T, const L: usize>(t: Tangent<'a, T>, all: &'a [T; L], start: usize) -> &'a [T; L] {
    match t {
        Tangent::Each(v) => v[start..start + L].try_into().unwrap(),
        Tangent::All(_) => all,
    }
}

/// The fused kernel over equal-length slices: whole solver blocks of `L`, then the
/// remainder element by element (as the solver's own slice function).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "x86_64+avx"))]
fn jvp_dispatch<T: solver::Real + tangent::Real, S: Slot<T>, const L: usize>(
    m: &[T],
    e: &[T],
    (dm, de): Tangents<'_, T>,
    (o0, o1, o2, o3): Out4<'_, S>,
) {
    const FMA: bool = multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64"));
    let n = m.len();
    // Cache-line aligned, as the solver's own block arrays (see `solver::Scratch`).
    let fill =
        |t: Tangent<'_, T>| solver::Scratch([if let Tangent::All(v) = t { v } else { <T as tangent::Real>::ONE }; L]);
    let (dm_all, de_all) = (fill(dm), fill(de));
    let whole = n - n % L;
    let mut start = 0;
    while start < whole {
        let end = start + L;
        let (mb, eb): (&[T; L], &[T; L]) = (m[start..end].try_into().unwrap(), e[start..end].try_into().unwrap());
        let (dmb, deb) = (block_of(dm, &dm_all.0, start), block_of(de, &de_all.0, start));
        let o0: &mut [S; L] = (&mut o0[start..end]).try_into().unwrap();
        let o1: &mut [S; L] = (&mut o1[start..end]).try_into().unwrap();
        let o2: &mut [S; L] = (&mut o2[start..end]).try_into().unwrap();
        let o3: &mut [S; L] = (&mut o3[start..end]).try_into().unwrap();
        solver::block_with::<T, FMA, L>(mb, eb, |i, s, c| {
            let (x, y) = tangent_one(dmb[i], deb[i], eb[i], s, c);
            o0[i].put(s);
            o1[i].put(c);
            o2[i].put(x);
            o3[i].put(y);
        });
        start = end;
    }
    for i in whole..n {
        let (s, c) = solver::solve_masked::<T, FMA>(m[i], e[i]);
        let (x, y) = tangent_one(dm.at(i), de.at(i), e[i], s, c);
        o0[i].put(s);
        o1[i].put(c);
        o2[i].put(x);
        o3[i].put(y);
    }
}

fn solve_jvp<T: solver::Real + tangent::Real, S: Slot<T>, const L: usize>(
    m: &[T],
    e: &[T],
    (dm, de): Tangents<'_, T>,
    out: Out4<'_, S>,
) {
    let n = m.len();
    let lens = [e.len(), out.0.len(), out.1.len(), out.2.len(), out.3.len()];
    assert!(
        lens.iter().all(|&k| k == n) && dm.covers(n) && de.covers(n),
        "kepler jvp: slice lengths differ (m: {n}, others: {lens:?})"
    );
    jvp_dispatch::<T, S, L>(m, e, (dm, de), out);
}

/// `(sin E, cos E, d sin E, d cos E)` for `M = E - e sin E` and the tangents
/// `(dM, de)`, elementwise; writes every output element. The outputs are those of
/// `solver::solve_f64` and `tangent::apply_f64` (direction `Tangent`), bit for bit:
/// NaN where `e` is outside `[0, 1)` or `M` is not finite. A [`Tangent::All`]
/// gives what a slice of that value gives.
///
/// # Panics
/// If the slices (`M`, `e`, the outputs and the [`Tangent::Each`] tangents) do not
/// all have the same length.
pub fn solve_jvp_f64(m: &[f64], e: &[f64], tangents: Tangents<'_, f64>, out: Out4<'_, MaybeUninit<f64>>) {
    solve_jvp::<f64, _, BLOCK64>(m, e, tangents, out);
}

/// The `f32` twin of [`solve_jvp_f64`].
///
/// # Panics
/// If the slices do not all have the same length.
pub fn solve_jvp_f32(m: &[f32], e: &[f32], tangents: Tangents<'_, f32>, out: Out4<'_, MaybeUninit<f32>>) {
    solve_jvp::<f32, _, BLOCK32>(m, e, tangents, out);
}

#[cfg(test)]
mod tests {
    use super::super::solver::{solve_one_f32, solve_one_f64};
    use super::super::tangent::tangent_one;
    use super::*;

    fn inputs(n: usize) -> [Vec<f64>; 4] {
        let f = |k: f64, a: f64, b: f64| (0..n).map(|i| a + b * ((i as f64 + 1.0) * k).sin()).collect::<Vec<f64>>();
        let mut m = f(0.7, 0.0, 10.0);
        if n > 3 {
            m[3] = 1e18; // the exact (Payne-Hanek) reduction inside a block
        }
        [m, f(0.3, 0.5, 0.4999), f(1.1, 0.0, 2.0), f(0.9, 0.0, 1.0)]
    }

    /// Every length (both dtypes' blocks, remainders) gives the solver's and the tangent
    /// map's one-element results, bit for bit, in both dtypes.
    #[test]
    fn fused_matches_solver_and_tangent_at_every_length() {
        for n in [0usize, 1, 5, 63, 64, 65, 127, 128, 129, 255, 256, 257, 700] {
            let [m, e, dm, de] = inputs(n);
            let mut o = [vec![f64::NAN; n], vec![f64::NAN; n], vec![f64::NAN; n], vec![f64::NAN; n]];
            let [o0, o1, o2, o3] = &mut o;
            solve_jvp::<f64, f64, BLOCK64>(&m, &e, (Tangent::Each(&dm), Tangent::Each(&de)), (o0, o1, o2, o3));
            for i in 0..n {
                let (s, c) = solve_one_f64(m[i], e[i]);
                let (x, y) = tangent_one(dm[i], de[i], e[i], s, c);
                assert_eq!([o[0][i], o[1][i], o[2][i], o[3][i]], [s, c, x, y], "f64 n={n} i={i}");
            }
            let g = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            let (m, e, dm, de) = (g(&m), g(&e), g(&dm), g(&de));
            let mut p = [vec![f32::NAN; n], vec![f32::NAN; n], vec![f32::NAN; n], vec![f32::NAN; n]];
            let [p0, p1, p2, p3] = &mut p;
            solve_jvp::<f32, f32, BLOCK32>(&m, &e, (Tangent::Each(&dm), Tangent::Each(&de)), (p0, p1, p2, p3));
            for i in 0..n {
                let (s, c) = solve_one_f32(m[i], e[i]);
                let (x, y) = tangent_one(dm[i], de[i], e[i], s, c);
                assert_eq!(
                    [p[0][i], p[1][i], p[2][i], p[3][i]].map(f32::to_bits),
                    [s, c, x, y].map(f32::to_bits),
                    "f32 n={n} i={i}"
                );
            }
        }
    }

    #[test]
    fn outside_the_domain_is_nan() {
        let (m, e) = ([1.0, f64::INFINITY, 1.0], [1.0, 0.5, f64::NAN]);
        let mut o = [[0.0f64; 3]; 4];
        let [o0, o1, o2, o3] = &mut o;
        solve_jvp::<f64, f64, BLOCK64>(&m, &e, (Tangent::Each(&[1.0; 3]), Tangent::All(1.0)), (o0, o1, o2, o3));
        assert!(o.iter().flatten().all(|x| x.is_nan()), "{o:?}");
    }

    #[test]
    #[should_panic(expected = "slice lengths differ")]
    fn unequal_lengths_panic() {
        let mut o = [[0.0f64; 2]; 4];
        let [o0, o1, o2, o3] = &mut o;
        let t = (Tangent::Each(&[1.0][..]), Tangent::All(1.0));
        solve_jvp::<f64, f64, BLOCK64>(&[1.0, 2.0], &[0.5, 0.5], t, (o0, o1, o2, o3));
    }

    /// A scalar tangent gives what a slice of that value gives, bit for bit, with the
    /// other tangent a slice or a scalar, at every length.
    #[test]
    fn scalar_tangents_match_broadcast_slices() {
        for n in [0usize, 1, 5, 255, 256, 257, 700] {
            let [m, e, dm, _] = inputs(n);
            let (a, b) = (0.75, -0.25);
            let (va, vb) = (vec![a; n], vec![b; n]);
            let run = |t: Tangents<'_, f64>| {
                let mut o = [vec![f64::NAN; n], vec![f64::NAN; n], vec![f64::NAN; n], vec![f64::NAN; n]];
                let [o0, o1, o2, o3] = &mut o;
                solve_jvp::<f64, f64, BLOCK64>(&m, &e, t, (o0, o1, o2, o3));
                o.map(|v| v.into_iter().map(f64::to_bits).collect::<Vec<_>>())
            };
            let dense = run((Tangent::Each(&dm), Tangent::Each(&vb)));
            assert_eq!(run((Tangent::Each(&dm), Tangent::All(b))), dense, "n={n}");
            let dense = run((Tangent::Each(&va), Tangent::Each(&vb)));
            assert_eq!(run((Tangent::All(a), Tangent::All(b))), dense, "n={n}");
            assert_eq!(run((Tangent::All(a), Tangent::Each(&vb))), dense, "n={n}");
            assert_eq!(Tangent::All(a).slice(0, n), Tangent::All(a));
            assert!(Tangent::Each(&m[..]).slice(n / 2, n).covers(n - n / 2));
        }
    }
}
