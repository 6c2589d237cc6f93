//! Single-thread speed of the Kepler CPU kernels (the public slice functions, as
//! each of the handler's threads runs them), in ns per element, f64 and f32, at
//! 1e6 elements (e in [0, 0.9)): the forward (`solver::solve_*`), the fused
//! forward + tangent (`jvp::solve_jvp_*`, with array tangents and with scalar ones:
//! `kepler_jvp_const`), and the tangent map alone
//! (`tangent::apply_*`, the second pass the fused kernel replaces). Prints the
//! median of 15 rounds, the kernels alternating in each round, and the ratios
//! fused / forward (array and scalar tangents) and (forward + tangent pass) / forward.
//!
//! `cargo run --release -p xla-ffi-rs-ops --example kepler_jvp_speed [n] [stack]`
//!
//! With `stack`: fused / forward only, the kernels called from four stack depths 16
//! bytes apart (what the alignment of the solver's block arrays is for).
//!
//! Every buffer starts on a 64-byte boundary, as XLA's do (an unaligned `Vec` makes
//! each vector access of a loop straddle two cache lines, which XLA's buffers never
//! do). Smaller `n` runs more rounds (up to 400), so that the medians hold.
//!
//! Per-thread time on reused outputs: a loaded machine disturbs it less than the
//! end-to-end benchmark (benchmarks/bench_kepler.py --jvp), which also pays XLA's
//! fresh outputs and, for tangents built in the program, their materialization.

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::time::Instant;

use xla_ffi_rs_ops::kepler::tangent::Direction;
use xla_ffi_rs_ops::kepler::{jvp, solver, tangent};

/// `n` copies of `x` in a vector, and the offset where the 64-byte aligned run starts.
fn aligned<T: Copy>(n: usize, x: T) -> (Vec<T>, usize) {
    let v = vec![x; n + 64];
    let k = v.as_ptr().align_offset(64);
    (v, k)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Inputs and outputs of one dtype, and the three kernels on them.
macro_rules! run {
    ($t:ty, $n:expr, $solve:path, $fused:path, $apply:path) => {{
        let n = $n;
        let fill = |f: &dyn Fn(usize) -> $t| {
            let (mut v, k) = aligned(n, 0.0 as $t);
            for i in 0..n {
                v[k + i] = f(i);
            }
            (v, k)
        };
        let (mv, mk) = fill(&|i| ((i * 7919) % 100_000) as $t * (6.0 / 100_000.0));
        let (ev, ek) = fill(&|i| ((i * 104_729) % 100_000) as $t * (0.9 / 100_000.0));
        let (m, e) = (&mv[mk..mk + n], &ev[ek..ek + n]);
        let ((dmv, dmk), (dev, dek)) = (fill(&|_| 1.0), fill(&|_| 0.5));
        let (dm, de) = (&dmv[dmk..dmk + n], &dev[dek..dek + n]);
        // The point of the tangent map: (e, sin E, cos E) as initialized values.
        let ((sv, sk), (cv, ck)) = (fill(&|i| m[i].sin()), fill(&|i| m[i].cos()));
        let (s, c) = (&sv[sk..sk + n], &cv[ck..ck + n]);
        let mut ov: Vec<(Vec<MaybeUninit<$t>>, usize)> =
            (0..4).map(|_| aligned(n, MaybeUninit::new(0.0 as $t))).collect();
        let mut o: Vec<&mut [MaybeUninit<$t>]> = ov.iter_mut().map(|(v, k)| &mut v[*k..*k + n]).collect();
        let mut t = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..(15 * 1_000_000 / n.max(1)).clamp(15, 400) {
            let [o0, o1, o2, o3] = &mut o[..] else { unreachable!() };
            let t0 = Instant::now();
            $solve(black_box(m), e, o0, o1);
            let t1 = Instant::now();
            $fused(black_box(m), e, (jvp::Tangent::Each(dm), jvp::Tangent::Each(de)), (o0, o1, o2, o3));
            let t2 = Instant::now();
            $apply(Direction::Tangent, (black_box(dm), de), (e, s, c), (o2, o3));
            let t3 = Instant::now();
            let scalars = (jvp::Tangent::All(1.0), jvp::Tangent::All(0.5));
            $fused(black_box(m), e, scalars, (o0, o1, o2, o3));
            let t4 = Instant::now();
            for (k, d) in [t1 - t0, t2 - t1, t3 - t2, t4 - t3].into_iter().enumerate() {
                t[k].push(d.as_secs_f64() * 1e9 / n as f64);
            }
        }
        let [fwd, fused, pass, scalar] = t.map(median);
        println!(
            "{:>3}: forward {fwd:.2} ns/el, fused {fused:.2}, fused with scalar tangents {scalar:.2}, tangent pass \
             {pass:.2}; fused / forward {:.3}, scalar / forward {:.3}, (forward + tangent pass) / forward {:.3}",
            stringify!($t),
            fused / fwd,
            scalar / fwd,
            (fwd + pass) / fwd
        );
    }};
}

/// Runs `f` with the stack `K` bytes deeper than at the call (for `stack`).
#[inline(never)]
fn shifted<const K: usize>(f: &mut dyn FnMut()) {
    let pad = [0u8; K];
    black_box(&pad);
    f();
    black_box(&pad);
}

/// `f` with the stack 0, 16, 32 and 48 bytes deeper (`k` = 0..4).
fn at_shift(k: usize, f: &mut dyn FnMut()) {
    match k {
        0 => shifted::<64>(f),
        1 => shifted::<80>(f),
        2 => shifted::<96>(f),
        _ => shifted::<112>(f),
    }
}

/// `stack`: fused (scalar tangents) / forward with the kernels called from four stack
/// depths 16 bytes apart, medians of per-round ratios (the kernels' stack arrays are
/// 64-byte aligned, so the four should agree).
macro_rules! stack_shifts {
    ($t:ty, $n:expr, $solve:path, $fused:path) => {{
        let n = $n;
        let (mv, mk) = aligned(n, 0.0 as $t);
        let (mut ev, ek) = aligned(n, 0.0 as $t);
        let mut mv = mv;
        for i in 0..n {
            mv[mk + i] = ((i * 7919) % 100_000) as $t * (6.0 / 100_000.0);
            ev[ek + i] = ((i * 104_729) % 100_000) as $t * (0.9 / 100_000.0);
        }
        let (m, e) = (&mv[mk..mk + n], &ev[ek..ek + n]);
        let mut ov: Vec<(Vec<MaybeUninit<$t>>, usize)> =
            (0..4).map(|_| aligned(n, MaybeUninit::new(0.0 as $t))).collect();
        let mut o: Vec<&mut [MaybeUninit<$t>]> = ov.iter_mut().map(|(v, k)| &mut v[*k..*k + n]).collect();
        let [o0, o1, o2, o3] = &mut o[..] else { unreachable!() };
        let mut ratios = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..200 {
            for (k, r) in ratios.iter_mut().enumerate() {
                let t0 = Instant::now();
                at_shift(k, &mut || $solve(black_box(m), e, o0, o1));
                let t1 = Instant::now();
                let scalars = (jvp::Tangent::All(1.0), jvp::Tangent::All(0.5));
                at_shift(k, &mut || $fused(black_box(m), e, scalars, (o0, o1, o2, o3)));
                r.push((Instant::now() - t1).as_secs_f64() / (t1 - t0).as_secs_f64());
            }
        }
        let r = ratios.map(median);
        println!(
            "{:>3}: fused / forward with the stack 0, 16, 32, 48 bytes deeper: {:.3}, {:.3}, {:.3}, {:.3}",
            stringify!($t),
            r[0],
            r[1],
            r[2],
            r[3]
        );
    }};
}

fn main() {
    let n = std::env::args().nth(1).map_or(1_000_000, |a| a.parse().expect("n: an integer"));
    if std::env::args().nth(2).as_deref() == Some("stack") {
        stack_shifts!(f64, n, solver::solve_f64, jvp::solve_jvp_f64);
        stack_shifts!(f32, n, solver::solve_f32, jvp::solve_jvp_f32);
        return;
    }
    run!(f64, n, solver::solve_f64, jvp::solve_jvp_f64, tangent::apply_f64);
    run!(f32, n, solver::solve_f32, jvp::solve_jvp_f32, tangent::apply_f32);
}
