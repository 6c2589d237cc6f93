//! Single-thread speed of the Kepler forward solver (`solver::solve_f64`,
//! `solver::solve_f32`, as each of the handler's threads runs them), in ns per
//! element, for `e` in `[0, 0.9)` and `[0, 0.999)`, `M` in `[0, 2 pi)` (the inputs
//! of `benchmarks/bench_kepler.py`). Prints the median of `rounds` rounds, the
//! four cases alternating in each round, on reused outputs, and the fastest round
//! (on a shared machine the fastest is the least disturbed).
//!
//! `cargo run --release -p xla-ffi-rs-ops --example kepler_speed [n] [rounds]`
//!
//! With `n` = 16384 (the default) the arrays stay in L2 and the figure is the
//! arithmetic alone; n = 1000000 adds the memory traffic of the end-to-end case.

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::time::Instant;

use xla_ffi_rs_ops::kepler::solver;

/// `(median, min)`.
fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0])
}

/// Quasi-random inputs: `M` in `[0, 2 pi)`, `e` in `[0, emax)`.
fn inputs(n: usize, emax: f64) -> (Vec<f64>, Vec<f64>) {
    let m = (0..n).map(|i| ((i * 7919) % 100_003) as f64 * (core::f64::consts::TAU / 100_003.0)).collect();
    let e = (0..n).map(|i| ((i * 104_729) % 100_019) as f64 * (emax / 100_019.0)).collect();
    (m, e)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(16_384, |a| a.parse().expect("n: an integer"));
    let rounds: usize = args.next().map_or(31, |a| a.parse().expect("rounds: an integer"));
    let emaxes = [0.9, 0.999];
    let c64: Vec<_> = emaxes.iter().map(|&x| inputs(n, x)).collect();
    let c32: Vec<(Vec<f32>, Vec<f32>)> = c64
        .iter()
        .map(|(m, e)| (m.iter().map(|&x| x as f32).collect(), e.iter().map(|&x| x as f32).collect()))
        .collect();
    let (mut s64, mut c64o) = (vec![MaybeUninit::new(0.0f64); n], vec![MaybeUninit::new(0.0f64); n]);
    let (mut s32, mut c32o) = (vec![MaybeUninit::new(0.0f32); n], vec![MaybeUninit::new(0.0f32); n]);
    let mut t = vec![Vec::new(); 4];
    for _ in 0..rounds {
        for k in 0..2 {
            let t0 = Instant::now();
            solver::solve_f64(black_box(&c64[k].0), &c64[k].1, &mut s64, &mut c64o);
            let t1 = Instant::now();
            solver::solve_f32(black_box(&c32[k].0), &c32[k].1, &mut s32, &mut c32o);
            let t2 = Instant::now();
            t[2 * k].push((t1 - t0).as_secs_f64() * 1e9 / n as f64);
            t[2 * k + 1].push((t2 - t1).as_secs_f64() * 1e9 / n as f64);
        }
    }
    let t: Vec<(f64, f64)> = t.into_iter().map(stats).collect();
    for (k, emax) in emaxes.iter().enumerate() {
        let (a, b) = (t[2 * k], t[2 * k + 1]);
        println!(
            "e < {emax}: f64 {:.2} ns/el (min {:.2}), f32 {:.2} (min {:.2}); f32 / f64 {:.3} (min {:.3})",
            a.0,
            a.1,
            b.0,
            b.1,
            b.0 / a.0,
            b.1 / a.1
        );
    }
}
