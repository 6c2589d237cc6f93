//! What one N = 1 Kepler call costs in the Rust layer, without XLA or Python:
//! the handler on a synthetic frame, against a handler that decodes nothing on the same frame.
//!
//! `cargo run --release -p xla-ffi-rs-ops --example call_cost`
//!
//! Instructions per call, exact even on a loaded machine: each handler runs
//! 20 x 20,000 times, so run
//! `valgrind --tool=callgrind --toggle-collect=SYMBOL target/release/examples/call_cost`
//! with `SYMBOL` one of `decode_only`, `slices`, `xla_ffi_rs_kepler_cpu`, and divide
//! the total `Ir` by 400,000 (`callgrind_annotate` shows where they go; build with
//! `CARGO_PROFILE_RELEASE_DEBUG=line-tables-only` for source lines).
//!
//! Against the C++ `ffi.h` twin, on one call frame for both:
//! `bash benchmarks/cpp/call_cost.sh` (`benchmarks/cpp/call_cost.cc`).

use std::hint::black_box;
use std::time::Instant;

use xla_ffi::testing::{Arg, CallBuilder};

/// A handler that takes every buffer as it comes and returns at once: the harness's
/// own cost and the fixed cost of a checked call (frame and version checks, panic guard).
#[xla_ffi::handler(target = "cost.empty")]
fn empty(_args: xla_ffi::RemainingArgs, _rets: xla_ffi::RemainingRets) -> xla_ffi::Result<()> {
    Ok(())
}

/// The Kepler signature, decoded and checked, nothing done.
#[xla_ffi::handler(target = "cost.decode_only")]
fn decode_only(
    ctx: xla_ffi::Context,
    m: xla_ffi::Buffer<f64>,
    e: xla_ffi::Buffer<f64>,
    s: xla_ffi::ResultBuffer<f64>,
    c: xla_ffi::ResultBuffer<f64>,
) -> xla_ffi::Result<()> {
    black_box((&ctx, &m, &e, &s, &c));
    Ok(())
}

/// Decoded, and every buffer taken as a slice.
#[xla_ffi::handler(target = "cost.slices")]
fn slices(
    m: xla_ffi::Buffer<f64>,
    e: xla_ffi::Buffer<f64>,
    mut s: xla_ffi::ResultBuffer<f64>,
    mut c: xla_ffi::ResultBuffer<f64>,
) -> xla_ffi::Result<()> {
    black_box((m.as_slice()?, e.as_slice()?));
    black_box(s.as_uninit()?);
    black_box(c.as_uninit()?);
    Ok(())
}

fn best_ns(handler: xla_ffi::Handler, call: &mut CallBuilder) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..20 {
        let t = Instant::now();
        for _ in 0..20_000 {
            black_box(call.run(handler)).expect("call failed");
        }
        best = best.min(t.elapsed().as_nanos() as f64 / 20_000.0);
    }
    best
}

fn main() {
    let mut call = CallBuilder::new()
        .arg(Arg::from_slice(&[1.0f64], &[1]))
        .arg(Arg::from_slice(&[0.5f64], &[1]))
        .ret(Arg::zeros::<f64>(&[1]))
        .ret(Arg::zeros::<f64>(&[1]));
    let base = best_ns(EMPTY.handler, &mut call);
    println!("decode only {:.1} ns over it", best_ns(DECODE_ONLY.handler, &mut call) - base);
    println!("slices {:.1} ns over it", best_ns(SLICES.handler, &mut call) - base);
    let kepler = best_ns(xla_ffi_rs_ops::kepler::CPU.handler, &mut call);
    let t = Instant::now();
    let mut s = [core::mem::MaybeUninit::uninit()];
    let mut c = [core::mem::MaybeUninit::uninit()];
    for _ in 0..1_000_000 {
        xla_ffi_rs_ops::kepler::solver::solve_f64(black_box(&[1.0]), black_box(&[0.5]), &mut s, &mut c);
        black_box(&s);
    }
    let solve = t.elapsed().as_nanos() as f64 / 1e6;
    let t = Instant::now();
    for _ in 0..1_000_000 {
        black_box(xla_ffi_rs_ops::kepler::solver::solve_one_f64(black_box(1.0), black_box(0.5)));
    }
    println!("solve_one_f64 {:.1} ns", t.elapsed().as_nanos() as f64 / 1e6);
    println!("harness {base:.1} ns, kepler handler {:.1} ns over it, of which the solver {solve:.1} ns", kepler - base);
}
