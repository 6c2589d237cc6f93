//! CPU time per element of the bf16 forward in place (`y` over `x`, the aliased
//! forward of `bench_rms_norm.py`) on rows of 4096, with the rows split over
//! `THREADS` threads (default 1) as the handler splits them over XLA's pool: the
//! threads' CPU time (from `/proc/thread-self/schedstat`) summed, per element. CPU
//! time, not wall-clock time, so that other load on the machine disturbs it less;
//! memory stalls count in it (the kernel reads it at scheduler ticks: each round
//! runs about 4e9 elements). Prints the least and the median of the rounds.
//!
//! `cargo run --release -p xla-ffi-rs-ops --example rms_bf16_threads [rows] [rounds]`
//! (default 8192 rows, streaming from memory; 16 rows stay in cache)

use std::hint::black_box;
use std::mem::MaybeUninit;

use half::bf16;
use xla_ffi_rs_ops::rms_norm::kernel;

const N: usize = 4096;

/// This thread's CPU time so far, in ns.
fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("/proc/thread-self/schedstat");
    s.split_whitespace().next().and_then(|v| v.parse().ok()).expect("schedstat's first field")
}

fn arg(i: usize, default: usize) -> usize {
    std::env::args().nth(i).map_or(default, |a| a.parse().expect("a count"))
}

fn main() {
    let threads: usize = std::env::var("THREADS").map_or(1, |v| v.parse().expect("THREADS"));
    let (rows, rounds) = (arg(1, 8192), arg(2, 15));
    assert!(threads > 0 && rows % threads == 0, "rows must split evenly over THREADS");
    let len = rows * N;
    let mut x: Vec<bf16> = (0..len).map(|i| bf16::from_f32(((i * 7919) % 1000) as f32 / 300.0 - 1.5)).collect();
    let w = vec![bf16::from_f32(1.25); N];
    let mut inv = vec![MaybeUninit::new(0.0f32); rows];
    // About 4e9 elements a round: the kernel's CPU time is read at scheduler ticks.
    let reps = ((1usize << 32) / len).max(3);
    let mut t = Vec::new();
    for _ in 0..rounds {
        let ns: u64 = std::thread::scope(|s| {
            let jobs = x.chunks_mut(len / threads).zip(inv.chunks_mut(rows / threads));
            let handles: Vec<_> = jobs
                .map(|(xs, is)| {
                    let w = &w;
                    s.spawn(move || {
                        let c = cpu_ns();
                        for _ in 0..reps {
                            kernel::fwd_rows_inplace::<bf16, bf16>(black_box(&mut *xs), w, 1e-5, &mut *is);
                        }
                        cpu_ns() - c
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("no panic")).sum()
        });
        t.push(ns as f64 / (reps * len) as f64);
    }
    t.sort_by(f64::total_cmp);
    println!(
        "{rows}x{N} bf16 in place, {threads} thread(s): CPU ns/elem least {:.4} median {:.4}",
        t[0],
        t[t.len() / 2]
    );
}
