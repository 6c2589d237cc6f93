//! Single-thread speed of the RMS-norm CPU kernels (the public `kernel` functions,
//! as each handler's thread runs them), in ns per element: the forward in place
//! (`y` over `x`), the forward out of place, and the backward, for bf16 and f32,
//! on rows of 4096 that stay in cache (16 rows) and that stream from memory (8192
//! rows). Prints the median of 15 rounds, the kernels alternating in each round.
//!
//! `cargo run --release -p xla-ffi-rs-ops --example rms_kernel_speed [rows...]`
//!
//! Built against two versions of the crate and run alternately, it gives a
//! speed ratio that a loaded machine disturbs less than the end-to-end benchmark.

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::time::Instant;

use half::bf16;
use xla_ffi::Float;
use xla_ffi_rs_ops::rms_norm::kernel;

const N: usize = 4096;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Buffers of one dtype for `rows` rows of [`N`].
struct Case<T: Float> {
    x: Vec<T>,
    w: Vec<T>,
    y: Vec<MaybeUninit<T>>,
    inv: Vec<MaybeUninit<T::Acc>>,
    inv_init: Vec<T::Acc>,
    dw: Vec<T::Acc>,
}

impl<T: Float> Case<T> {
    fn new(rows: usize) -> Self {
        let x = (0..rows * N).map(|i| T::from_f64(((i * 7919) % 1000) as f64 / 300.0 - 1.5)).collect();
        let inv_init = vec![T::Acc::from_f64(0.7); rows];
        let (y, inv) = (vec![MaybeUninit::new(T::default()); rows * N], vec![MaybeUninit::new(inv_init[0]); rows]);
        Case { x, w: vec![T::from_f64(1.25); N], y, inv, inv_init, dw: vec![T::Acc::default(); N] }
    }
    fn inplace(&mut self) {
        // Alternating signs keep the values bounded over repeated calls.
        kernel::fwd_rows_inplace::<T, T>(black_box(&mut self.x), &self.w, T::Acc::from_f64(1e-5), &mut self.inv);
    }
    fn fresh(&mut self) {
        kernel::fwd_rows::<T, T, T>(black_box(&self.x), &self.w, T::Acc::from_f64(1e-5), &mut self.y, &mut self.inv);
    }
    fn bwd(&mut self) {
        let (x, w, inv) = (black_box(&self.x), &self.w, &self.inv_init);
        kernel::bwd_rows::<T, T, T>(x, x, w, inv, &mut self.y, &mut self.dw);
    }
}

fn time(reps: usize, elems: usize, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    t.elapsed().as_secs_f64() * 1e9 / (reps * elems) as f64
}

fn main() {
    let rows_list: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("rows")).collect();
    let rows_list = if rows_list.is_empty() { vec![16, 8192] } else { rows_list };
    for rows in rows_list {
        let (mut b, mut f) = (Case::<bf16>::new(rows), Case::<f32>::new(rows));
        let len = rows * N;
        let reps = (64 * 4096 * 100 / len).max(3);
        let mut t: [Vec<f64>; 6] = Default::default();
        for _ in 0..15 {
            t[0].push(time(reps, len, || b.inplace()));
            t[1].push(time(reps, len, || f.inplace()));
            t[2].push(time(reps, len, || b.fresh()));
            t[3].push(time(reps, len, || f.fresh()));
            t[4].push(time(reps, len, || b.bwd()));
            t[5].push(time(reps, len, || f.bwd()));
        }
        let m: Vec<f64> = t.into_iter().map(median).collect();
        println!(
            "{rows}x{N} ns/elem: in place bf16 {:.3} f32 {:.3} | fresh bf16 {:.3} f32 {:.3} | bwd bf16 {:.3} f32 {:.3}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        );
    }
}
