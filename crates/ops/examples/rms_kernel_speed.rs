//! Single-thread speed of the RMS-norm CPU kernels (the public `kernel` functions,
//! as each handler's thread runs them), in ns per element: the forward in place
//! (`y` over `x`), the forward out of place, and the backward, for bf16 and f32,
//! on rows of 4096 that stay in cache (16 rows) and that stream from memory (8192
//! rows). Prints the median of 15 rounds, the kernels alternating in each round.
//!
//! `cargo run --release -p xla-ffi-rs-ops --example rms_kernel_speed [rows...]`
//! (`RMS_ONLY=k`: only the k-th kernel, 0 to 5 in the order printed)
//!
//! Built against two versions of the crate and run alternately, it gives a
//! speed ratio that a loaded machine disturbs less than the end-to-end benchmark.

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::time::Instant;

use half::bf16;
use xla_ffi_rs_ops::rms_norm::kernel;

const N: usize = 4096;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Buffers of one dtype (`bf16` or `f32`, each accumulating in `f32`) for `rows`
/// rows of [`N`], and the three kernels on them.
struct Case<T> {
    x: Vec<T>,
    w: Vec<T>,
    y: Vec<MaybeUninit<T>>,
    inv: Vec<MaybeUninit<f32>>,
    dw: Vec<f32>,
}

/// `Case::<$t>::{new, inplace, fresh, bwd}` for a concrete dtype (the kernels'
/// dtype traits stay out of this example).
macro_rules! case {
    ($t:ty, $from_f32:expr) => {
        impl Case<$t> {
            fn new(rows: usize) -> Self {
                let from_f32: fn(f32) -> $t = $from_f32;
                let x = (0..rows * N).map(|i| from_f32(((i * 7919) % 1000) as f32 / 300.0 - 1.5)).collect();
                let zero = from_f32(0.0);
                let (y, inv) = (vec![MaybeUninit::new(zero); rows * N], vec![MaybeUninit::new(0.7); rows]);
                Case { x, w: vec![from_f32(1.25); N], y, inv, dw: vec![0.0; N] }
            }
            fn inplace(&mut self) {
                kernel::fwd_rows_inplace::<$t, $t>(black_box(&mut self.x), &self.w, 1e-5, &mut self.inv);
            }
            fn fresh(&mut self) {
                kernel::fwd_rows::<$t, $t, $t>(black_box(&self.x), &self.w, 1e-5, &mut self.y, &mut self.inv);
            }
            fn bwd(&mut self) {
                let (x, w) = (black_box(&self.x), &self.w);
                kernel::bwd_rows::<$t, $t, $t>(x, x, w, 1e-5, &mut self.y, &mut self.dw);
            }
        }
    };
}
case!(bf16, bf16::from_f32);
case!(f32, |v| v);

/// This thread's CPU time in ns (the first field of `/proc/thread-self/schedstat`),
/// where Linux gives it.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// ns per element of `reps` calls of `f`: the thread's CPU time where Linux gives it
/// (time the thread waited for a core is left out), else wall time.
fn time(reps: usize, elems: usize, f: &mut dyn FnMut()) -> f64 {
    let (t, c) = (Instant::now(), thread_cpu_ns());
    for _ in 0..reps {
        f();
    }
    let ns = match (c, thread_cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64,
        _ => t.elapsed().as_secs_f64() * 1e9,
    };
    ns / (reps * elems) as f64
}

fn main() {
    let rows_list: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("rows")).collect();
    let rows_list = if rows_list.is_empty() { vec![16, 8192] } else { rows_list };
    let only: Option<usize> = std::env::var("RMS_ONLY").ok().map(|v| v.parse().expect("RMS_ONLY"));
    let scale: usize = std::env::var("RMS_REPS").ok().map_or(1, |v| v.parse().expect("RMS_REPS"));
    for rows in rows_list {
        let (mut b, mut f) = (Case::<bf16>::new(rows), Case::<f32>::new(rows));
        let len = rows * N;
        let reps = (64 * 4096 * 100 / len).max(3) * scale;
        let mut t: [Vec<f64>; 6] = Default::default();
        for _ in 0..15 {
            // RMS_ONLY=k runs only kernel k (0..6, in the order printed).
            let on = |k: usize| only.is_none_or(|o| o == k);
            for (k, tk) in t.iter_mut().enumerate() {
                let mut run = || match k {
                    0 => b.inplace(),
                    1 => f.inplace(),
                    2 => b.fresh(),
                    3 => f.fresh(),
                    4 => b.bwd(),
                    _ => f.bwd(),
                };
                tk.push(if on(k) { time(reps, len, &mut run) } else { f64::NAN });
            }
        }
        let show = |v: Vec<f64>| if v[0].is_nan() { "-".to_string() } else { format!("{:.3}", median(v)) };
        let m: Vec<String> = t.into_iter().map(show).collect();
        println!(
            "{rows}x{N} ns/elem: in place bf16 {} f32 {} | fresh bf16 {} f32 {} | bwd bf16 {} f32 {}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        );
    }
}
