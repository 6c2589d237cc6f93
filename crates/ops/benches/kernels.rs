//! Single-thread speed of the CPU kernels, as each handler's thread runs them, with
//! criterion's statistics (elements per second; `--save-baseline NAME` on one build
//! and `--baseline NAME` on another compares two versions of the crate):
//!
//! * `kepler/{f64,f32}/e<{0.9,0.999}`: the forward solver (`solver::solve_f64`,
//!   `solver::solve_f32`) on 16384 elements (in L2: the arithmetic alone), `M` in
//!   `[0, 2 pi)`, `e` in `[0, emax)` (the inputs of `benchmarks/bench_kepler.py`);
//! * `rms_norm/{in place,fresh,bwd}/{bf16,f32}/{16,8192} rows`: the RMS-norm
//!   kernels on rows of 4096, 16 rows (in cache) and 8192 rows (streaming).
//!
//! `cargo bench -p xla-ffi-rs-ops --bench kernels [-- FILTER]`, e.g. `-- kepler/f64`.

use std::hint::black_box;
use std::mem::MaybeUninit;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::bf16;
use xla_ffi_rs_ops::kepler::solver;
use xla_ffi_rs_ops::rms_norm::kernel;

/// Quasi-random inputs: `M` in `[0, 2 pi)`, `e` in `[0, emax)`.
fn kepler_inputs(n: usize, emax: f64) -> (Vec<f64>, Vec<f64>) {
    let m = (0..n).map(|i| ((i * 7919) % 100_003) as f64 * (core::f64::consts::TAU / 100_003.0)).collect();
    let e = (0..n).map(|i| ((i * 104_729) % 100_019) as f64 * (emax / 100_019.0)).collect();
    (m, e)
}

fn kepler(c: &mut Criterion) {
    const N: usize = 16_384;
    let mut g = c.benchmark_group("kepler");
    g.throughput(Throughput::Elements(N as u64));
    for emax in [0.9, 0.999] {
        let (m, e) = kepler_inputs(N, emax);
        let (mut s, mut co) = (vec![MaybeUninit::new(0.0f64); N], vec![MaybeUninit::new(0.0f64); N]);
        g.bench_function(BenchmarkId::new("f64", format!("e<{emax}")), |b| {
            b.iter(|| solver::solve_f64(black_box(&m), &e, &mut s, &mut co))
        });
        let (m, e): (Vec<f32>, Vec<f32>) =
            (m.iter().map(|&x| x as f32).collect(), e.iter().map(|&x| x as f32).collect());
        let (mut s, mut co) = (vec![MaybeUninit::new(0.0f32); N], vec![MaybeUninit::new(0.0f32); N]);
        g.bench_function(BenchmarkId::new("f32", format!("e<{emax}")), |b| {
            b.iter(|| solver::solve_f32(black_box(&m), &e, &mut s, &mut co))
        });
    }
    g.finish();
}

/// Row length of the RMS-norm cases.
const ROW: usize = 4096;

/// `x` (rows of [`ROW`]), the weight, and the outputs, in one dtype.
struct Rows<T> {
    x: Vec<T>,
    w: Vec<T>,
    y: Vec<MaybeUninit<T>>,
    inv: Vec<MaybeUninit<f32>>,
    dw: Vec<f32>,
}

impl<T: Copy> Rows<T> {
    fn new(rows: usize, from_f32: fn(f32) -> T) -> Self {
        let x = (0..rows * ROW).map(|i| from_f32(((i * 7919) % 1000) as f32 / 300.0 - 1.5)).collect();
        let y = vec![MaybeUninit::new(from_f32(0.0)); rows * ROW];
        Rows { x, w: vec![from_f32(1.25); ROW], y, inv: vec![MaybeUninit::new(0.7); rows], dw: vec![0.0; ROW] }
    }
}

/// The three kernels of one concrete dtype (their dtype traits stay out of this file).
macro_rules! rms_cases {
    ($g:expr, $rows:expr, $t:ty, $name:literal, $from_f32:expr) => {{
        let mut r = Rows::<$t>::new($rows, $from_f32);
        let id = |kernel: &str| BenchmarkId::new(format!("{kernel}/{}", $name), format!("{} rows", $rows));
        $g.bench_function(id("in place"), |b| {
            b.iter(|| kernel::fwd_rows_inplace::<$t, $t>(black_box(&mut r.x), &r.w, 1e-5, &mut r.inv))
        });
        $g.bench_function(id("fresh"), |b| {
            b.iter(|| kernel::fwd_rows::<$t, $t, $t>(black_box(&r.x), &r.w, 1e-5, &mut r.y, &mut r.inv))
        });
        $g.bench_function(id("bwd"), |b| {
            b.iter(|| {
                let x = black_box(&r.x);
                kernel::bwd_rows::<$t, $t, $t>(x, x, &r.w, 1e-5, &mut r.y, &mut r.dw)
            })
        });
    }};
}

fn rms_norm(c: &mut Criterion) {
    let mut g = c.benchmark_group("rms_norm");
    for rows in [16, 8192] {
        g.throughput(Throughput::Elements((rows * ROW) as u64));
        rms_cases!(g, rows, bf16, "bf16", bf16::from_f32);
        rms_cases!(g, rows, f32, "f32", |v| v);
    }
    g.finish();
}

criterion_group!(benches, kepler, rms_norm);
criterion_main!(benches);
