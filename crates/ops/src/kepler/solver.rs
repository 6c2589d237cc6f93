//! A branch-free, vectorizable solver for Kepler's equation `M = E - e sin E`.
//!
//! Given the mean anomaly `M` (any real) and the eccentricity `e` in `[0, 1)`, the
//! solver returns `sin E` and `cos E` of the eccentric anomaly `E`. Everything is
//! straight-line arithmetic (selects instead of branches, no libm calls), so the
//! slice functions auto-vectorize. They are compiled several times with
//! [`multiversion`](mod@multiversion) (AVX-512, AVX2+FMA, AVX, baseline) and dispatched at run time;
//! `mul_add` is used only in the versions whose target has FMA: the x86 versions
//! with `fma`, and every aarch64 build (fused multiply-add is part of its base
//! instruction set, NEON's `fmla`), whose one version the compiler vectorizes
//! with NEON.
//!
//! # Method
//!
//! 1. **Range reduction.** `M` is reduced to `m` in `[-pi, pi]` modulo the real
//!    `2 pi`, to about 1 ulp of `m`, for every finite `M`. Below `|M| = 2^27`
//!    this is Cody-Waite reduction with `2 pi` split into three parts (the first
//!    two have 28 significant bits, so `k * part` is exact for `|k| < 2^25`);
//!    from `2^27` on it is Payne-Hanek reduction in integer arithmetic with 1280
//!    bits of `1 / (2 pi)` (`solver/reduce.rs`), which only the elements that
//!    need it take (the slice functions check a block for them after the
//!    vectorized pass). `E(-m) = -E(m)`, so the solver works on `|m|`
//!    in `[0, pi]` and flips the sign of `sin E` (and `E`) at the end.
//! 2. **Starter.** Markley's starter (F. L. Markley, "Kepler Equation Solver",
//!    Celestial Mechanics and Dynamical Astronomy 63, 101-111, 1995): `sin E` is
//!    replaced by a rational approximation, which turns Kepler's equation into a
//!    cubic in `E`, solved in closed form (Cardano, in Markley's cancellation-free
//!    form). The starter is uniformly good, including the singular corner
//!    `e -> 1`, `M -> 0`: its error is below `4.4e-4` rad everywhere. Markley's
//!    empirical `alpha` needs `1 / (1 + e)`, taken from a degree-5 polynomial
//!    (relative error 5e-5; this moves `alpha` by < 1e-5 relative). The cube root
//!    comes from the exponent bits, a cubic polynomial and two division-free
//!    Newton steps for `x^(-1/3)` (in `f32`: a cubic for `x^(1/3)` and one Halley
//!    step).
//! 3. **One fifth-order correction.** With `f(E) = E - e sin E - m` and its
//!    derivatives at the starter `E1`, the correction solves the quartic Taylor
//!    model `f0 + f1 d + f2 d^2/2 + f3 d^3/6 + f4 d^4/24 = 0` by series reversion
//!    (`d = u - b2 u^2 + (2 b2^2 - b3) u^3 + (5 b2 b3 - 5 b2^3 - b4) u^4`,
//!    `u = -f0/f1`, `bk = fk / (k! f1)`). This has the order of Markley's nested
//!    `delta_3, delta_4, delta_5` but costs one division instead of three; with
//!    the starter's error below `4.4e-4`, the truncation error is far below
//!    rounding. For `E1 < pi/4`, `f0` and `f1` are evaluated as
//!    `(1-e) E + e (E - sin E) - m` and `(1-e) + e (1 - cos E)` from the
//!    polynomial tails, avoiding the cancellation of the naive forms near the
//!    singular corner.
//! 4. **sin and cos.** `sin E1`, `cos E1` come from Taylor polynomials on
//!    `[-pi/4, pi/4]` after a quadrant reduction (`pi/2` in two parts); the
//!    final `sin E`, `cos E` follow from the angle-addition formulas with short
//!    series for `sin d` and `1 - cos d`, so `sin E` and `cos E` are consistent
//!    (`sin^2 + cos^2 = 1` to a few ulp).
//!
//! One generic solver serves both dtypes (over the private trait `Real`): only the
//! constants, the range reduction, `1 / (1 + e)`, the exponent-bit handling of the
//! cube root and the order of the correction differ per type. The `f32` path
//! computes in `f32` lanes throughout: with FMA it reduces `M` below `|M| = 2^22`
//! in `f32` (three-part `2 pi`, exact first step, one correcting step), beyond
//! that and without FMA in `f64` as above; it takes `1 / (1 + e)` by a division,
//! three-term fitted polynomials for `sin` and `cos`, and a third-order
//! (Halley-class) correction. (The divider has room in the `f32` solver, so a
//! division that replaces FMAs pays there.)
//!
//! # Speed
//!
//! The slice functions run each stage (reduction + starter, cube root, `sin`/`cos`,
//! correction) over a block of 64 (`f64`) or 128 (`f32`) elements before the
//! next: one fused loop body is a single ~300-cycle dependency chain, and the
//! blocks give the out-of-order core many independent vectors (the range
//! reduction has a loop of its own: chained into the starter, the chain was still
//! too long). Measured on one Zen 4 core (AVX-512) in cache: about 5.4
//! ns/element `f64` and 2.3 ns `f32` (`cargo bench -p xla-ffi-rs-ops --bench kernels`), against 17-22 ns
//! (`f64`) and 6-8 ns (`f32`) for glibc's scalar `sin` + `cos`, which is what
//! XLA's CPU backend calls for `jnp.sin`, `jnp.cos`.
//!
//! # Accuracy (checked by `solver/tests.rs`)
//!
//! * `f64`: `|E - e sin E - m| <= 1e-12` for `e <= 0.9999` and
//!   `|E - E_ref| <= 1e-13` for `e <= 0.999` (both about `1e-15` measured), on
//!   grids that include the corner `|M| <= 1e-3`, `e` in `[0.99, 0.9999]`.
//! * `f32`: backward error `<= 2e-5` (about `3e-7` measured, in `f64` from the
//!   `f32` outputs) for `e <= 0.9999`.
//!
//! An eccentricity outside `[0, 1)`, a NaN, or an infinite `M` gives NaN for
//! both outputs of that element. Any finite `M` is solved, up to `f64::MAX`.

use core::mem::MaybeUninit;

use multiversion::multiversion;

use crate::slot::Slot;

mod real;
mod reduce;
#[cfg(test)]
mod tests;

pub(crate) use real::Real;
use real::{fma, mask, poly, round, valid};

/// Elements per block in the slice functions (512 bytes of each input).
pub(crate) const BLOCK64: usize = 64;
pub(crate) const BLOCK32: usize = 128;

/// A block's worth of one intermediate, on the stack, aligned to a cache line.
///
/// Without the alignment a `[T; L]` local is aligned to 16 bytes at most, and where it
/// lands depends on the caller's stack: the block loops' 64-byte vector loads and
/// stores then cross two cache lines at three stack positions in four. Measured on the
/// fused forward + JVP (f32, 16384 elements, in cache, 64-byte aligned buffers as XLA
/// gives), with the stack moved 16 bytes at a time: fused / forward 1.01–1.08 at one
/// position in four and 1.16–1.45 at the others before; 1.03–1.06 at every one with it.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Scratch<T, const L: usize>(pub(crate) [T; L]);

impl<T, const L: usize> core::ops::Deref for Scratch<T, L> {
    type Target = [T; L];
    #[inline(always)]
    fn deref(&self) -> &[T; L] {
        &self.0
    }
}

impl<T, const L: usize> core::ops::DerefMut for Scratch<T, L> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T; L] {
        &mut self.0
    }
}


// ---------------------------------------------------------------------------
// The kernel, in four stages. A stage is a short dependency chain; the slice
// functions run each stage over a block of elements before the next, so the
// vectorized loop of every stage has several independent vectors in flight (a
// single fused loop body is one ~300-cycle chain and stalls on latency). The
// scalar functions run the same stages in sequence, so they give bit-identical
// results.

/// `M` reduced to `[-pi, pi]`: Cody-Waite, or Payne-Hanek for large `M`.
#[inline(always)]
fn reduce<T: Real, const F: bool>(m: T) -> T {
    if T::is_large(m) {
        T::reduce_exact(m)
    } else {
        T::reduce_fast::<F>(m)
    }
}

/// Whether any element of `m` needs the exact reduction (no early exit, so the
/// loop vectorizes).
#[inline(always)]
fn any_large<T: Real>(m: &[T]) -> bool {
    m.iter().fold(false, |acc, &x| acc | T::is_large(x))
}

/// Stage 1: Markley's starter up to the cube root, for `m` = `M` reduced to
/// `[-pi, pi]`. Returns `(m, d, q, r, y)`; the starter needs `w = y^(2/3)`.
#[inline(always)]
fn stage1<T: Real, const F: bool>(m: T, e: T) -> (T, T, T, T, T) {
    let a = m.abs();
    // Markley (1995): the cubic  d E^3 ... with alpha, d, q, r as in the paper.
    let ome = T::ONE - e;
    let alpha = fma::<T, F>(T::ALPHA1 * (T::PI - a), T::recip_1pe::<F>(e), T::ALPHA0);
    let d = fma::<T, F>(alpha, e, T::lit(3.0) * ome);
    let ad = alpha * d;
    let q = fma::<T, F>(T::lit(2.0) * ad, ome, -a * a);
    let r = a * fma::<T, F>(T::lit(3.0) * ad, d - ome, a * a);
    let q2 = q * q;
    let y = r + fma::<T, F>(q2, q, r * r).sqrt();
    (m, d, q, r, y)
}

/// Stage 3: the starter `E1`, its sine and cosine, and `f0 = E1 - e sin E1 - a`,
/// `f1 = 1 - e cos E1`. Returns `(E1, sin E1, cos E1, f0, f1)`.
#[inline(always)]
fn stage3<T: Real, const F: bool>(m: T, e: T, d: T, q: T, r: T, w: T) -> (T, T, T, T, T) {
    let a = m.abs();
    let ome = T::ONE - e;
    let wd = fma::<T, F>(w, w + q, q * q); // w^2 + w q + q^2 > 0
                                           // E1 = (2 r w / wd + a) / d, with one division.
    let e1 = fma::<T, F>(a, wd, T::lit(2.0) * r * w) / (wd * d);
    // Quadrant n in {0, 1, 2} (E1 in [0, ~pi]) and x = E1 - n pi/2 in [-pi/4, pi/4].
    let n = round(e1 * T::TWO_OVER_PI);
    let x = fma::<T, F>(-n, T::PIO2_B, fma::<T, F>(-n, T::PIO2_A, e1));
    let z = x * x;
    let xs = x * z * poly::<T, F>(z, T::SIN); // sin x - x
    let zc = z * fma::<T, F>(-z, poly::<T, F>(z, T::COS), T::lit(0.5)); // 1 - cos x
    let sx = x + xs;
    let cx = T::ONE - zc;
    let q0 = n == T::ZERO;
    let q1 = n == T::ONE;
    let s1 = if q0 {
        sx
    } else if q1 {
        cx
    } else {
        -sx
    };
    let c1 = if q0 {
        cx
    } else if q1 {
        -sx
    } else {
        -cx
    };
    // For n = 0 (then x == E1) use the cancellation-free forms
    // f0 = (1-e) E - e (sin E - E) - a and f1 = (1-e) + e (1 - cos E).
    let f0 = if q0 { fma::<T, F>(ome, e1, -e * xs) - a } else { (e1 - e * s1) - a };
    let f1 = if q0 { fma::<T, F>(e, zc, ome) } else { fma::<T, F>(-e, c1, T::ONE) };
    (e1, s1, c1, f0, f1)
}

/// Stage 4: the correction and the final `(E, sin E, cos E)`, `E` in `[-pi, pi]`
/// with the sign of the reduced `m`.
#[inline(always)]
fn stage4<T: Real, const F: bool>(m: T, e: T, e1: T, s1: T, c1: T, f0: T, f1: T) -> (T, T, T) {
    // Series reversion of f0 + f1 d + f2 d^2/2 + f3 d^3/6 + f4 d^4/24 = 0 with
    // f2 = e sin E1, f3 = e cos E1, f4 = -f2:  u = -f0/f1, bk = fk/(k! f1),
    // d = u - b2 u^2 + (2 b2^2 - b3) u^3 [+ (-5 b2^3 + 5 b2 b3 - b4) u^4 at fifth order].
    let inv = T::ONE / f1;
    let u = -f0 * inv;
    let b2 = T::lit(0.5) * e * s1 * inv;
    let b3 = e * c1 * inv * T::lit(1.0 / 6.0);
    let c3 = fma::<T, F>(T::lit(2.0) * b2, b2, -b3);
    let c3 = if T::FIFTH_ORDER {
        let c4 = b2 * fma::<T, F>(T::lit(5.0), b3 - b2 * b2, T::lit(1.0 / 12.0)); // b4 = -b2/12
        fma::<T, F>(c4, u, c3)
    } else {
        c3
    };
    let delta = fma::<T, F>(u * u, fma::<T, F>(c3, u, -b2), u);
    // Angle addition; |delta| < 5e-4, so sin delta = delta - delta^3/6 and
    // 1 - cos delta = delta^2/2 - delta^4/24 are exact to below 1e-19.
    let d2 = delta * delta;
    let sd = fma::<T, F>(delta * d2, T::lit(-1.0 / 6.0), delta);
    let omcd = d2 * fma::<T, F>(d2, T::lit(-1.0 / 24.0), T::lit(0.5));
    let sin_e = s1 + fma::<T, F>(c1, sd, -s1 * omcd);
    let cos_e = c1 - fma::<T, F>(s1, sd, c1 * omcd);
    let sgn = if m < T::ZERO { -T::ONE } else { T::ONE };
    (sgn * (e1 + delta), sgn * sin_e, cos_e)
}

/// All stages for one element: `(E, sin E, cos E)`; garbage (never a panic) for
/// invalid inputs, which the callers mask.
#[inline(always)]
fn kernel<T: Real, const F: bool>(m_in: T, e: T) -> (T, T, T) {
    let (m, d, q, r, y) = stage1::<T, F>(reduce::<T, F>(m_in), e);
    let w = T::pow_two_thirds::<F>(y);
    let (e1, s1, c1, f0, f1) = stage3::<T, F>(m, e, d, q, r, w);
    stage4::<T, F>(m, e, e1, s1, c1, f0, f1)
}

/// `(sin E, cos E)` of one element, NaN outside the domain.
#[inline(always)]
pub(crate) fn solve_masked<T: Real, const F: bool>(m: T, e: T) -> (T, T) {
    let (_, s, c) = kernel::<T, F>(m, e);
    let ok = valid(m, e);
    (mask(ok, s), mask(ok, c))
}

/// One block of `L` elements, stage by stage; `out(i, sin E, cos E)` takes element
/// `i`'s results (NaN outside the domain) as the last stage computes them, so a
/// caller's own work on them and its stores run in that loop (the fused JVP writes
/// its four outputs there: one streaming pass, no burst of stores after a chunk).
#[inline(always)]
pub(crate) fn block_with<T: Real, const F: bool, const L: usize>(
    m: &[T; L],
    e: &[T; L],
    mut out: impl FnMut(usize, T, T),
) {
    let z = Scratch([T::ZERO; L]);
    let (mut mr, mut d, mut q, mut r, mut y) = (z, z, z, z, z);
    // The reduction in a loop of its own: its chain (two rounding steps) and the
    // starter's (a division and a square root) in one loop body are too long for
    // the out-of-order window to overlap several vectors.
    for i in 0..L {
        mr[i] = T::reduce_fast::<F>(m[i]);
    }
    for i in 0..L {
        (mr[i], d[i], q[i], r[i], y[i]) = stage1::<T, F>(mr[i], e[i]);
    }
    if any_large(m) {
        // The rare elements whose Cody-Waite reduction is not exact: again,
        // exactly (what `reduce` does for one element, so the results match).
        for i in 0..L {
            if T::is_large(m[i]) {
                (mr[i], d[i], q[i], r[i], y[i]) = stage1::<T, F>(T::reduce_exact(m[i]), e[i]);
            }
        }
    }
    let mut w = z;
    for i in 0..L {
        w[i] = T::pow_two_thirds::<F>(y[i]);
    }
    let (mut e1, mut s1, mut c1, mut f0, mut f1) = (z, z, z, z, z);
    for i in 0..L {
        (e1[i], s1[i], c1[i], f0[i], f1[i]) = stage3::<T, F>(mr[i], e[i], d[i], q[i], r[i], w[i]);
    }
    for i in 0..L {
        let (_, s, c) = stage4::<T, F>(mr[i], e[i], e1[i], s1[i], c1[i], f0[i], f1[i]);
        let ok = valid(m[i], e[i]);
        out(i, mask(ok, s), mask(ok, c));
    }
}

/// One block of `L` elements into `(sin E, cos E)`.
#[inline(always)]
fn block<T: Real, const F: bool, S: Slot<T>, const L: usize>(m: &[T], e: &[T], sin_e: &mut [S], cos_e: &mut [S]) {
    let (m, e): (&[T; L], &[T; L]) = (m.try_into().unwrap(), e.try_into().unwrap());
    let (sin_e, cos_e): (&mut [S; L], &mut [S; L]) = (sin_e.try_into().unwrap(), cos_e.try_into().unwrap());
    block_with::<T, F, L>(m, e, |i, s, c| {
        sin_e[i].put(s);
        cos_e[i].put(c);
    });
}

// ---------------------------------------------------------------------------
// Dispatch and the public API.

#[inline(always)]
fn check_lengths(m: usize, e: usize, s: usize, c: usize) {
    if !(m == e && m == s && m == c) {
        lengths_differ(m, e, s, c);
    }
}

/// The panic of [`check_lengths`], out of line: formatting its message would
/// otherwise give every caller a stack frame.
#[cold]
#[inline(never)]
fn lengths_differ(m: usize, e: usize, s: usize, c: usize) -> ! {
    panic!("kepler solver: slice lengths differ (m: {m}, e: {e}, sin_e: {s}, cos_e: {c})");
}

/// The slice solver: whole blocks of `L`, then the remainder element by element.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "x86_64+avx"))]
fn solve_dispatch<T: Real, S: Slot<T>, const L: usize>(m: &[T], e: &[T], sin_e: &mut [S], cos_e: &mut [S]) {
    const FMA: bool = multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64"));
    let mut mc = m.chunks_exact(L);
    let mut ec = e.chunks_exact(L);
    let mut sc = sin_e.chunks_exact_mut(L);
    let mut cc = cos_e.chunks_exact_mut(L);
    for (((m, e), s), c) in (&mut mc).zip(&mut ec).zip(&mut sc).zip(&mut cc) {
        block::<T, FMA, S, L>(m, e, s, c);
    }
    let (m, e) = (mc.remainder(), ec.remainder());
    for (((m, e), s), c) in m.iter().zip(e).zip(sc.into_remainder()).zip(cc.into_remainder()) {
        let (sv, cv) = solve_masked::<T, FMA>(*m, *e);
        s.put(sv);
        c.put(cv);
    }
}

/// [`solve_f64`] and [`solve_f32`]: `one` is the dispatched one-element solver.
///
/// One element (what an N = 1 call from JAX asks) is solved here, with nothing kept
/// across the call to `one` but the two output slots; a few elements and whole
/// blocks each take a function of their own that is never inlined, so this one sets
/// up neither the loop's registers nor the block function's large stack frame.
#[inline(always)]
fn solve<T: Real, S: Slot<T>, const L: usize>(
    m: &[T],
    e: &[T],
    sin_e: &mut [S],
    cos_e: &mut [S],
    one: fn(T, T) -> (T, T),
) {
    check_lengths(m.len(), e.len(), sin_e.len(), cos_e.len());
    if let ([m], [e], [s], [c]) = (m, e, &mut *sin_e, &mut *cos_e) {
        let (sv, cv) = one(*m, *e);
        s.put(sv);
        c.put(cv);
    } else if m.len() < L {
        solve_few(m, e, sin_e, cos_e, one);
    } else {
        solve_blocks::<T, S, L>(m, e, sin_e, cos_e);
    }
}

/// Fewer elements than one block: element by element.
#[inline(never)]
fn solve_few<T: Real, S: Slot<T>>(m: &[T], e: &[T], sin_e: &mut [S], cos_e: &mut [S], one: fn(T, T) -> (T, T)) {
    for (((&m, &e), s), c) in m.iter().zip(e).zip(sin_e).zip(cos_e) {
        let (sv, cv) = one(m, e);
        s.put(sv);
        c.put(cv);
    }
}

/// [`solve_dispatch`] behind a call that is never inlined, so that the block
/// function's large stack frame is set up only when there is a block to solve.
#[inline(never)]
fn solve_blocks<T: Real, S: Slot<T>, const L: usize>(m: &[T], e: &[T], sin_e: &mut [S], cos_e: &mut [S]) {
    solve_dispatch::<T, S, L>(m, e, sin_e, cos_e);
}

/// Solves `M = E - e sin E` elementwise and writes `sin E` and `cos E`.
///
/// Every output element is written. An `e` outside `[0, 1)`, a NaN in `m` or
/// `e`, or an infinite `m` gives NaN in both outputs for that element.
///
/// `M` is reduced modulo the real `2 pi`, not modulo the `f64` nearest to it:
/// `M = 2.0 * PI` (about `2.4e-16` below the real `2 pi`) is solved as
/// `M = -2.4e-16`, whose `sin E` is small and negative. This is the exact
/// solution for the given input; see the README's section on Kepler.
///
/// # Panics
/// If the four slices do not all have the same length.
///
/// # Example
/// ```
/// use core::mem::MaybeUninit;
/// use xla_ffi_rs_ops::kepler::solver::{solve_f64, solve_one_f64};
///
/// let (m, e) = ([0.5, 1.0, 3.0], [0.1, 0.5, 0.9]);
/// let mut s = [MaybeUninit::uninit(); 3];
/// let mut c = [MaybeUninit::uninit(); 3];
/// solve_f64(&m, &e, &mut s, &mut c);
/// // One element: E from (sin E, cos E) solves Kepler's equation.
/// let (sin_e, cos_e) = solve_one_f64(1.0, 0.5);
/// let ea = sin_e.atan2(cos_e);
/// assert!((ea - 0.5 * ea.sin() - 1.0).abs() < 1e-15);
/// ```
pub fn solve_f64(m: &[f64], e: &[f64], sin_e: &mut [MaybeUninit<f64>], cos_e: &mut [MaybeUninit<f64>]) {
    solve::<f64, _, BLOCK64>(m, e, sin_e, cos_e, solve_one_f64);
}

/// The `f32` twin of [`solve_f64`] (backward error `<= 2e-5` for `e <= 0.9999`).
///
/// # Panics
/// If the four slices do not all have the same length.
pub fn solve_f32(m: &[f32], e: &[f32], sin_e: &mut [MaybeUninit<f32>], cos_e: &mut [MaybeUninit<f32>]) {
    solve::<f32, _, BLOCK32>(m, e, sin_e, cos_e, solve_one_f32);
}

/// One element of [`solve_f64`]: returns `(sin E, cos E)` (NaNs outside the
/// domain). Dispatched like the slice version, so the results are bit-identical.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "x86_64+avx"))]
pub fn solve_one_f64(m: f64, e: f64) -> (f64, f64) {
    const FMA: bool = multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64"));
    solve_masked::<f64, FMA>(m, e)
}

/// One element of [`solve_f32`]: returns `(sin E, cos E)` (NaNs outside the
/// domain). Dispatched like the slice version, so the results are bit-identical.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "x86_64+avx"))]
pub fn solve_one_f32(m: f32, e: f32) -> (f32, f32) {
    const FMA: bool = multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64"));
    solve_masked::<f32, FMA>(m, e)
}

/// The eccentric anomaly `E` itself, in `[-pi, pi]`: the solution for `M`
/// reduced to `[-pi, pi]` (so `E` has the sign of the reduced `M`). NaN outside
/// the domain. Same algorithm and dispatch as [`solve_f64`].
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "x86_64+avx"))]
pub fn eccentric_anomaly_f64(m: f64, e: f64) -> f64 {
    const FMA: bool = multiversion::target::target_cfg_f!(any(target_feature = "fma", target_arch = "aarch64"));
    let (ea, _, _) = kernel::<f64, FMA>(m, e);
    mask(valid(m, e), ea)
}
