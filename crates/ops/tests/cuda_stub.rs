//! The CUDA handlers end to end, without a GPU: synthetic device call frames
//! (`xla_ffi::testing`), the stand-in driver `cuda/stub_driver` as `libcuda.so.1`
//! (its kernels are the real `.cu` files compiled for the host with the emulator
//! `cuda/emu`), and real NVRTC from pip compiling the same files to CUBINs. Results
//! are compared with the CPU handlers.
//!
//! Run by `.ci/cuda_emu.sh`, which builds the stand-in and sets `XFR_STUB_DRIVER`
//! (its folder), `LD_LIBRARY_PATH` and `XLA_FFI_RS_NVRTC`. Without `XFR_STUB_DRIVER`
//! every test here returns at once (a plain `cargo test` has no driver).
//!
//! Tolerances, CUDA vs CPU, where the CPU result is finite:
//! * kepler: |diff| <= 64 ulp(1) of the dtype times the condition number
//!   1 / (1 - e) of E(M), with ulp(|M|) added for the argument reduction;
//! * rms_norm, by output dtype, relative to max(|cpu|, 0.1 * max|cpu| of the
//!   output): f64 1e-12, f32 2e-5, f16 2e-3 (2 ulp), bf16 1.6e-2 (2 ulp). The
//!   kernels sum in another order than the CPU (a block-wide shuffle tree), and
//!   a 16-bit output may round the other way.
#![cfg(feature = "cuda")]

use std::process::Command;

use half::{bf16, f16};
use xla_ffi::testing::cuda::{DeviceBuffer, Gpu};
use xla_ffi::testing::{Arg, AttrArg, CallBuilder, CallResult};
use xla_ffi::{DataType, ErrorCode, Handler};
use xla_ffi_rs_ops::{kepler, rms_norm};

fn stub() -> bool {
    std::env::var_os("XFR_STUB_DRIVER").is_some()
}

macro_rules! need_stub {
    () => {
        if !stub() {
            eprintln!("skipped: no stand-in driver (XFR_STUB_DRIVER unset; run .ci/cuda_emu.sh)");
            return;
        }
    };
}

fn gpu() -> &'static Gpu {
    Gpu::shared().expect("the stand-in driver")
}

/// A deterministic pseudo-random stream in [0, 1).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

// ---- typed values of any float dtype ----

#[derive(Clone, Debug)]
enum V {
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

const FLOATS: [DataType; 4] = [DataType::F16, DataType::BF16, DataType::F32, DataType::F64];

impl V {
    fn new(d: DataType, v: &[f64]) -> V {
        match d {
            DataType::F16 => V::F16(v.iter().map(|&x| f16::from_f64(x)).collect()),
            DataType::BF16 => V::BF16(v.iter().map(|&x| bf16::from_f64(x)).collect()),
            DataType::F32 => V::F32(v.iter().map(|&x| x as f32).collect()),
            _ => V::F64(v.to_vec()),
        }
    }
    fn arg(&self, dims: &[i64]) -> Arg {
        match self {
            V::F16(v) => Arg::from_slice(v, dims),
            V::BF16(v) => Arg::from_slice(v, dims),
            V::F32(v) => Arg::from_slice(v, dims),
            V::F64(v) => Arg::from_slice(v, dims),
        }
    }
    fn upload(&self) -> DeviceBuffer {
        match self {
            V::F16(v) => gpu().upload(v),
            V::BF16(v) => gpu().upload(v),
            V::F32(v) => gpu().upload(v),
            V::F64(v) => gpu().upload(v),
        }
        .unwrap()
    }
    fn f64s(&self) -> Vec<f64> {
        match self {
            V::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            V::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            V::F32(v) => v.iter().map(|&x| x as f64).collect(),
            V::F64(v) => v.clone(),
        }
    }
    fn bits(&self) -> Vec<u64> {
        match self {
            V::F16(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
            V::BF16(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
            V::F32(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
            V::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        }
    }
}

fn zeros(d: DataType, n: usize) -> V {
    V::new(d, &vec![0.0; n])
}
fn garbage(d: DataType, n: usize) -> DeviceBuffer {
    match d {
        DataType::F16 => gpu().garbage::<f16>(n),
        DataType::BF16 => gpu().garbage::<bf16>(n),
        DataType::F32 => gpu().garbage::<f32>(n),
        _ => gpu().garbage::<f64>(n),
    }
    .unwrap()
}
fn download(d: DataType, b: &DeviceBuffer) -> V {
    match d {
        DataType::F16 => V::F16(b.download().unwrap()),
        DataType::BF16 => V::BF16(b.download().unwrap()),
        DataType::F32 => V::F32(b.download().unwrap()),
        _ => V::F64(b.download().unwrap()),
    }
}
fn cpu_ret(call: &CallBuilder, i: usize, d: DataType) -> V {
    match d {
        DataType::F16 => V::F16(call.ret_as(i)),
        DataType::BF16 => V::BF16(call.ret_as(i)),
        DataType::F32 => V::F32(call.ret_as(i)),
        _ => V::F64(call.ret_as(i)),
    }
}

/// jnp.result_type of two float dtypes, and the accumulator (written out here, not
/// taken from the crate, as an independent reference).
fn promote(a: DataType, b: DataType) -> DataType {
    let rank = |d| match d {
        DataType::F64 => 2,
        DataType::F32 => 1,
        _ => 0,
    };
    if a == b {
        a
    } else if rank(a) == 0 && rank(b) == 0 {
        DataType::F32
    } else if rank(a) >= rank(b) {
        a
    } else {
        b
    }
}
fn acc(a: DataType, b: DataType) -> DataType {
    if a == DataType::F64 || b == DataType::F64 {
        DataType::F64
    } else {
        DataType::F32
    }
}
fn rtol(d: DataType) -> f64 {
    match d {
        DataType::F64 => 1e-12,
        DataType::F32 => 2e-5,
        DataType::F16 => 2e-3,
        _ => 1.6e-2,
    }
}

fn assert_close(what: &str, d: DataType, gpu: &V, cpu: &V) {
    assert_close_terms(what, d, gpu, cpu, &[]);
}

/// Like `assert_close`, with each element's tolerance also scaled by `terms[i]`, the
/// magnitude of the terms that cancel in it (dx = r w dy - x c cancels almost
/// completely for short rows: its error is relative to r w dy, not to dx).
fn assert_close_terms(what: &str, d: DataType, gpu: &V, cpu: &V, terms: &[f64]) {
    let (g, c) = (gpu.f64s(), cpu.f64s());
    assert_eq!(g.len(), c.len(), "{what}: length");
    let scale = c.iter().filter(|v| v.is_finite()).fold(0.0f64, |m, v| m.max(v.abs()));
    let tol = rtol(d);
    let mut worst: Option<(f64, usize)> = None;
    for (i, (&a, &b)) in g.iter().zip(&c).enumerate() {
        if !b.is_finite() {
            continue;
        }
        let term = terms.get(i).copied().unwrap_or(0.0);
        // A NaN from CUDA where the CPU is finite counts as an infinite error.
        let err = (a - b).abs() / b.abs().max(0.1 * scale).max(term).max(f64::MIN_POSITIVE);
        let err = if err.is_nan() { f64::INFINITY } else { err };
        if err > tol && worst.is_none_or(|(w, _)| err > w) {
            worst = Some((err, i));
        }
    }
    if let Some((err, i)) = worst {
        panic!("{what} ({d}): element {i}: cuda {} vs cpu {} (relative error {err:.3e} > {tol:e})", g[i], c[i]);
    }
}

fn no_panic_text(r: &CallResult) {
    if let Err((_, m)) = r {
        assert!(!m.contains("panicked"), "a panic message reached the error: {m}");
    }
}

// ---- kepler ----

fn kepler_inputs(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut g = Lcg(seed);
    let special_m = [
        0.0,
        -0.0,
        1e-30,
        -1e-12,
        1e-6,
        3.0,
        -3.2,
        1e3,
        12345678.9,
        -3e14,
        1e15,
        -1e15,
        // Reduced exactly (Payne-Hanek) by both solvers.
        134217728.0,
        1e16,
        -1e17,
        1e20,
        1e300,
        -1e300,
        f64::MAX,
        f32::MAX as f64,
    ];
    let special_e = [0.0, 0.5, 0.9, 0.99, 0.999999, 1.0 - 1e-7, 0.9999999];
    let mut m = Vec::with_capacity(n);
    let mut e = Vec::with_capacity(n);
    for i in 0..n {
        let (mi, ei) = match i % 5 {
            0 => (40.0 * g.next() - 20.0, 0.9999 * g.next()),
            1 => (special_m[(g.next() * special_m.len() as f64) as usize], special_e[i / 5 % special_e.len()]),
            2 => (1e-3 * (g.next() - 0.5), 0.99 + 0.0099 * g.next()),
            3 if i % 2 == 0 => (2e15 * (g.next() - 0.5), g.next()),
            3 => ((g.next() + 1.0) * 2f64.powi((g.next() * 1000.0) as i32) * (g.next() - 0.5).signum(), g.next()),
            _ => (10.0 * g.next() - 5.0, 0.999 + 0.000999 * g.next()),
        };
        m.push(mi);
        e.push(ei);
    }
    // NaN and infinite M, e outside [0, 1) or NaN.
    let bad = [
        (f64::NAN, 0.5),
        (f64::INFINITY, 0.5),
        (f64::NEG_INFINITY, 0.1),
        (1.0, -0.1),
        (1.0, 1.0),
        (1.0, 1.5),
        (1.0, f64::NAN),
        (f64::NAN, f64::NAN),
    ];
    for (k, (bm, be)) in bad.iter().enumerate() {
        if n > 16 + k {
            m[7 + 2 * k] = *bm;
            e[7 + 2 * k] = *be;
        }
    }
    (m, e)
}

/// The Kepler tolerance: 64 ulp(1) times the condition number 1 / (1 - e) of E(M),
/// whatever `|M|` (both solvers reduce M modulo the real 2 pi exactly).
fn kepler_tol(eps: f64, e: f64) -> f64 {
    64.0 * eps / (1.0 - e).max(eps)
}

fn kepler_case(d: DataType, n: usize) {
    let (m, e) = kepler_inputs(n, 42 + n as u64);
    let (vm, ve) = (V::new(d, &m), V::new(d, &e));
    let dims = [n as i64];
    let mut cpu = CallBuilder::new()
        .arg(vm.arg(&dims))
        .arg(ve.arg(&dims))
        .ret(zeros(d, n).arg(&dims))
        .ret(zeros(d, n).arg(&dims));
    cpu.run(kepler::CPU).unwrap();
    let (cs, cc) = (cpu_ret(&cpu, 0, d), cpu_ret(&cpu, 1, d));

    let (dm, de) = (vm.upload(), ve.upload());
    let (ds, dc) = (garbage(d, n), garbage(d, n));
    let mut call =
        CallBuilder::new().on_gpu(gpu()).arg(dm.arg(&dims)).arg(de.arg(&dims)).ret(ds.arg(&dims)).ret(dc.arg(&dims));
    let r = call.run(kepler::CUDA.handler);
    no_panic_text(&r);
    r.unwrap();
    let (gs, gc) = (download(d, &ds), download(d, &dc));

    let eps = if d == DataType::F64 { f64::EPSILON } else { f32::EPSILON as f64 };
    let (vmf, vef) = (vm.f64s(), ve.f64s());
    for (what, g, c) in [("sin E", gs.f64s(), cs.f64s()), ("cos E", gc.f64s(), cc.f64s())] {
        for i in 0..n {
            if !c[i].is_finite() {
                assert!(
                    !g[i].is_finite(),
                    "kepler {d} n={n} {what}[{i}] (M={}, e={}): cpu {} but cuda {}",
                    vmf[i],
                    vef[i],
                    c[i],
                    g[i]
                );
                continue;
            }
            let tol = kepler_tol(eps, vef[i]);
            assert!(
                (g[i] - c[i]).abs() <= tol,
                "kepler {d} n={n} {what}[{i}] (M={:e}, e={}): cuda {} vs cpu {} (tolerance {tol:e})",
                vmf[i],
                vef[i],
                g[i],
                c[i]
            );
        }
    }
}

#[test]
fn kepler_matches_cpu() {
    need_stub!();
    let grid = (kepler::cuda::BLOCK * kepler::cuda::MAX_BLOCKS) as usize;
    for d in [DataType::F32, DataType::F64] {
        for n in [0, 1, 31, 255, 257, 1000, 4097, grid + 333] {
            kepler_case(d, n);
        }
    }
}

/// The derivative targets (`kepler_tangent`, `kepler_cotangent`) on the stand-in
/// against the CPU handlers, the same operands: the same formula, so within a few
/// ulp of `max(|cpu|, 1)`; an operand of the wrong shape is an error naming it.
fn kepler_derivative_case(d: DataType, n: usize, cpu_handler: Handler, cuda_handler: Handler) {
    let mut r = Lcg(11 + n as u64);
    let angles: Vec<f64> = (0..n).map(|_| 6.0 * r.next() - 3.0).collect();
    let mut uniform = |lo: f64, hi: f64| (0..n).map(|_| lo + (hi - lo) * r.next()).collect::<Vec<f64>>();
    let (a, b, e) = (uniform(-2.0, 2.0), uniform(-2.0, 2.0), uniform(0.0, 0.99));
    let (s, c): (Vec<f64>, Vec<f64>) = angles.iter().map(|x| (x.sin(), x.cos())).unzip();
    let ops: Vec<V> = [a, b, e, s, c].iter().map(|v| V::new(d, v)).collect();
    let dims = [n as i64];
    let mut cpu = CallBuilder::new();
    for v in &ops {
        cpu = cpu.arg(v.arg(&dims));
    }
    let mut cpu = cpu.ret(zeros(d, n).arg(&dims)).ret(zeros(d, n).arg(&dims));
    cpu.run(cpu_handler).unwrap();
    let dev: Vec<DeviceBuffer> = ops.iter().map(V::upload).collect();
    let outs = (garbage(d, n), garbage(d, n));
    let mut call = CallBuilder::new().on_gpu(gpu());
    for b in &dev {
        call = call.arg(b.arg(&dims));
    }
    let mut call = call.ret(outs.0.arg(&dims)).ret(outs.1.arg(&dims));
    let r = call.run(cuda_handler);
    no_panic_text(&r);
    r.unwrap();
    let tol = if d == DataType::F64 { 1e-13 } else { 1e-5 };
    for (i, out) in [&outs.0, &outs.1].into_iter().enumerate() {
        let (g, c) = (download(d, out).f64s(), cpu_ret(&cpu, i, d).f64s());
        for k in 0..n {
            assert!(
                (g[k] - c[k]).abs() <= tol * c[k].abs().max(1.0),
                "{d} n={n} result {i}[{k}]: cuda {} vs cpu {}",
                g[k],
                c[k]
            );
        }
    }
    if n > 1 {
        // Operand 4 (cos_e) one element short: refused before any launch.
        let short = V::new(d, &vec![0.0; n - 1]).upload();
        let mut bad = CallBuilder::new().on_gpu(gpu());
        for b in &dev[..4] {
            bad = bad.arg(b.arg(&dims));
        }
        let mut bad = bad.arg(short.arg(&[n as i64 - 1])).ret(outs.0.arg(&dims)).ret(outs.1.arg(&dims));
        let (code, msg) = bad.run(cuda_handler).unwrap_err();
        assert_eq!(code, ErrorCode::InvalidArgument, "{msg}");
        assert!(msg.contains("xla_ffi_rs.kepler_") && msg.contains("operand 4 (cos_e)"), "{msg}");
    }
}

#[test]
fn kepler_derivatives_match_cpu() {
    need_stub!();
    let grid = (kepler::cuda::BLOCK * kepler::cuda::MAX_BLOCKS) as usize;
    for d in [DataType::F32, DataType::F64] {
        for n in [0, 1, 257, 4097, grid + 333] {
            kepler_derivative_case(d, n, kepler::TANGENT_CPU.handler, kepler::TANGENT_CUDA.handler);
            kepler_derivative_case(d, n, kepler::COTANGENT_CPU.handler, kepler::COTANGENT_CUDA.handler);
        }
    }
}

/// The fused forward + tangent (`kepler_jvp`, or with scalar tangents
/// `kepler_jvp_dm` and `kepler_jvp_const`: `scalars` says which of `(dM, de)` is
/// one) on the stand-in against the CPU handler, on the solver's inputs (special M,
/// NaN, e outside [0, 1)) with tangents: within the solver's tolerance times
/// `1 + |dM| + |de|` over `1 - e cos E`.
fn kepler_jvp_case(d: DataType, n: usize, scalars: (bool, bool), (cpu_h, cuda_h): (Handler, Handler)) {
    let (m, e) = kepler_inputs(n, 7 + n as u64);
    let mut g = Lcg(3 + n as u64);
    let dm: Vec<f64> = if scalars.0 { vec![-1.25] } else { (0..n).map(|_| 4.0 * g.next() - 2.0).collect() };
    let de: Vec<f64> = if scalars.1 { vec![0.75] } else { (0..n).map(|_| 2.0 * g.next() - 1.0).collect() };
    let ops: Vec<V> = [m, e, dm, de].iter().map(|v| V::new(d, v)).collect();
    let dims = [n as i64];
    let op_dims = |k: usize| -> &[i64] {
        if (k == 2 && scalars.0) || (k == 3 && scalars.1) {
            &[]
        } else {
            &dims
        }
    };
    let mut cpu = CallBuilder::new();
    for (k, v) in ops.iter().enumerate() {
        cpu = cpu.arg(v.arg(op_dims(k)));
    }
    for _ in 0..4 {
        cpu = cpu.ret(zeros(d, n).arg(&dims));
    }
    cpu.run(cpu_h).unwrap();
    let dev: Vec<DeviceBuffer> = ops.iter().map(V::upload).collect();
    let outs: Vec<DeviceBuffer> = (0..4).map(|_| garbage(d, n)).collect();
    let mut call = CallBuilder::new().on_gpu(gpu());
    for (k, b) in dev.iter().enumerate() {
        call = call.arg(b.arg(op_dims(k)));
    }
    for o in &outs {
        call = call.ret(o.arg(&dims));
    }
    let r = call.run(cuda_h);
    no_panic_text(&r);
    r.unwrap();
    let eps = if d == DataType::F64 { f64::EPSILON } else { f32::EPSILON as f64 };
    let f = |k: usize| ops[k].f64s();
    let (vm, ve, vdm, vde) = (f(0), f(1), f(2), f(3));
    let at = |v: &[f64], i: usize| if v.len() == 1 { v[0] } else { v[i] };
    let cpu_outs: Vec<Vec<f64>> = (0..4).map(|k| cpu_ret(&cpu, k, d).f64s()).collect();
    for (k, out) in outs.iter().enumerate() {
        let (g, c) = (download(d, out).f64s(), &cpu_outs[k]);
        for i in 0..n {
            if !c[i].is_finite() {
                assert!(!g[i].is_finite(), "kepler_jvp {d} n={n} result {k}[{i}]: cpu {} but cuda {}", c[i], g[i]);
                continue;
            }
            // The tangent's condition: 1 / (1 - e cos E) on top of the solver's.
            let slope = 1.0 / (1.0 - ve[i] * cpu_outs[1][i]).max(eps);
            let scale = if k < 2 { 1.0 } else { (1.0 + at(&vdm, i).abs() + at(&vde, i).abs()) * slope };
            let tol = kepler_tol(eps, ve[i]) * scale;
            assert!(
                (g[i] - c[i]).abs() <= tol,
                "kepler_jvp {scalars:?} {d} n={n} result {k}[{i}] (M={:e}, e={}): cuda {} vs cpu {} (tolerance {tol:e})",
                vm[i],
                ve[i],
                g[i],
                c[i]
            );
        }
    }
    if n > 1 {
        // Operand 3 (d_eccentricity) of the wrong shape (one element short, or an
        // array for a scalar): refused before any launch.
        let bad_len = if scalars.1 { n } else { n - 1 };
        let short = V::new(d, &vec![0.0; bad_len]).upload();
        let mut bad = CallBuilder::new().on_gpu(gpu());
        for (k, b) in dev[..3].iter().enumerate() {
            bad = bad.arg(b.arg(op_dims(k)));
        }
        bad = bad.arg(short.arg(&[bad_len as i64]));
        for o in &outs {
            bad = bad.ret(o.arg(&dims));
        }
        let (code, msg) = bad.run(cuda_h).unwrap_err();
        assert_eq!(code, ErrorCode::InvalidArgument, "{msg}");
        assert!(msg.contains("xla_ffi_rs.kepler_jvp") && msg.contains("operand 3 (d_eccentricity)"), "{msg}");
    }
}

#[test]
fn kepler_jvp_matches_cpu() {
    need_stub!();
    let grid = (kepler::cuda::BLOCK * kepler::cuda::MAX_BLOCKS) as usize;
    let targets = [
        ((false, false), (kepler::JVP_CPU.handler, kepler::JVP_CUDA.handler)),
        ((false, true), (kepler::JVP_DM_CPU.handler, kepler::JVP_DM_CUDA.handler)),
        ((true, true), (kepler::JVP_CONST_CPU.handler, kepler::JVP_CONST_CUDA.handler)),
    ];
    for d in [DataType::F32, DataType::F64] {
        for n in [0, 1, 31, 257, 4097, grid + 333] {
            for (scalars, handlers) in targets {
                kepler_jvp_case(d, n, scalars, handlers);
            }
        }
    }
}

// ---- rms_norm ----

struct RmsCase {
    xd: DataType,
    wd: DataType,
    rows: usize,
    n: usize,
}

fn rms_fwd_cpu(c: &RmsCase, x: &V, w: &V, eps: f64) -> (V, V) {
    let (yd, ad) = (promote(c.xd, c.wd), acc(c.xd, c.wd));
    let mut call = CallBuilder::new()
        .arg(x.arg(&[c.rows as i64, c.n as i64]))
        .arg(w.arg(&[c.n as i64]))
        .ret(zeros(yd, c.rows * c.n).arg(&[c.rows as i64, c.n as i64]))
        .ret(zeros(ad, c.rows).arg(&[c.rows as i64]))
        .attr("eps", AttrArg::scalar(eps));
    call.run(rms_norm::FWD_CPU).unwrap();
    (cpu_ret(&call, 0, yd), cpu_ret(&call, 1, ad))
}

fn rms_fwd_cuda(c: &RmsCase, x: &V, w: &V, eps: f64) -> (V, V) {
    let (yd, ad) = (promote(c.xd, c.wd), acc(c.xd, c.wd));
    let (dx, dw) = (x.upload(), w.upload());
    let (dy, di) = (garbage(yd, c.rows * c.n), garbage(ad, c.rows));
    let mut call = CallBuilder::new()
        .on_gpu(gpu())
        .arg(dx.arg(&[c.rows as i64, c.n as i64]))
        .arg(dw.arg(&[c.n as i64]))
        .ret(dy.arg(&[c.rows as i64, c.n as i64]))
        .ret(di.arg(&[c.rows as i64]))
        .attr("eps", AttrArg::scalar(eps));
    let r = call.run(rms_norm::FWD_CUDA.handler);
    no_panic_text(&r);
    r.unwrap();
    (download(yd, &dy), download(ad, &di))
}

fn rms_bwd_cpu(c: &RmsCase, dy: &V, x: &V, w: &V, eps: f64) -> (V, V) {
    let d2 = [c.rows as i64, c.n as i64];
    let mut call = CallBuilder::new()
        .arg(dy.arg(&d2))
        .arg(x.arg(&d2))
        .arg(w.arg(&[c.n as i64]))
        .ret(zeros(c.xd, c.rows * c.n).arg(&d2))
        .ret(zeros(c.wd, c.n).arg(&[c.n as i64]))
        .attr("eps", AttrArg::scalar(eps));
    call.run(rms_norm::BWD_CPU).unwrap();
    (cpu_ret(&call, 0, c.xd), cpu_ret(&call, 1, c.wd))
}

fn rms_bwd_cuda(c: &RmsCase, dy: &V, x: &V, w: &V, eps: f64, blocks: usize) -> (V, V) {
    let d2 = [c.rows as i64, c.n as i64];
    let ad = acc(c.xd, c.wd);
    let (ddy, dx, dw) = (dy.upload(), x.upload(), w.upload());
    let (odx, odw, ows) = (garbage(c.xd, c.rows * c.n), garbage(c.wd, c.n), garbage(ad, blocks * c.n));
    let mut call = CallBuilder::new()
        .on_gpu(gpu())
        .arg(ddy.arg(&d2))
        .arg(dx.arg(&d2))
        .arg(dw.arg(&[c.n as i64]))
        .ret(odx.arg(&d2))
        .ret(odw.arg(&[c.n as i64]))
        .ret(ows.arg(&[blocks as i64, c.n as i64]))
        .attr("eps", AttrArg::scalar(eps));
    let r = call.run(rms_norm::BWD_CUDA.handler);
    no_panic_text(&r);
    r.unwrap();
    (download(c.xd, &odx), download(c.wd, &odw))
}

fn rms_inputs(c: &RmsCase) -> (V, V, V) {
    let mut g = Lcg((c.rows * 7919 + c.n) as u64);
    let x: Vec<f64> = (0..c.rows * c.n).map(|i| if i % 97 == 5 { 0.0 } else { 4.0 * g.next() - 2.0 }).collect();
    let w: Vec<f64> = (0..c.n).map(|_| 0.5 + g.next()).collect();
    let dy: Vec<f64> = (0..c.rows * c.n).map(|_| 2.0 * g.next() - 1.0).collect();
    (V::new(c.xd, &x), V::new(c.wd, &w), V::new(promote(c.xd, c.wd), &dy))
}

/// |r w_j dy_j| per element of dx: the size of the terms that cancel in it.
fn dx_terms(c: &RmsCase, dy: &V, w: &V, inv: &V) -> Vec<f64> {
    let (dy, w, inv) = (dy.f64s(), w.f64s(), inv.f64s());
    (0..c.rows * c.n).map(|i| (inv[i / c.n] * w[i % c.n] * dy[i]).abs()).collect()
}

fn rms_case(c: &RmsCase) {
    let tag = format!("rms_norm x={} w={} rows={} n={}", c.xd, c.wd, c.rows, c.n);
    let eps = 1e-5;
    let (x, w, dy) = rms_inputs(c);
    let (cy, ci) = rms_fwd_cpu(c, &x, &w, eps);
    let (gy, gi) = rms_fwd_cuda(c, &x, &w, eps);
    assert_close(&format!("{tag}: y"), promote(c.xd, c.wd), &gy, &cy);
    assert_close(&format!("{tag}: inv_rms"), acc(c.xd, c.wd), &gi, &ci);

    // Each backward recomputes inv_rms from x (the CPU's is the dx terms' scale).
    let (cdx, cdw) = rms_bwd_cpu(c, &dy, &x, &w, eps);
    let blocks = rms_norm::bwd_workspace_rows(c.rows);
    let (gdx, gdw) = rms_bwd_cuda(c, &dy, &x, &w, eps, blocks);
    assert_close_terms(&format!("{tag}: dx"), c.xd, &gdx, &cdx, &dx_terms(c, &dy, &w, &ci));
    assert_close(&format!("{tag}: dweight"), c.wd, &gdw, &cdw);
    // dweight is the same to the bit on every run.
    let (_, gdw2) = rms_bwd_cuda(c, &dy, &x, &w, eps, blocks);
    assert_eq!(gdw.bits(), gdw2.bits(), "{tag}: dweight differs between two runs");
}

#[test]
fn rms_norm_matches_cpu_all_dtypes_and_row_lengths() {
    need_stub!();
    for xd in FLOATS {
        for wd in FLOATS {
            for rows in [1, 3] {
                for n in [1, 31, 32, 33, 1000, 4097] {
                    rms_case(&RmsCase { xd, wd, rows, n });
                }
            }
        }
    }
}

/// More rows than one grid: the forward grid-strides over rows beyond
/// MAX_FWD_BLOCKS, the backward's workspace is capped at 1024 blocks of rows.
#[test]
fn rms_norm_matches_cpu_beyond_one_grid() {
    need_stub!();
    let rows = rms_norm::cuda::MAX_FWD_BLOCKS + 3;
    for (xd, wd) in [(DataType::F32, DataType::F32), (DataType::BF16, DataType::F16), (DataType::F64, DataType::F16)] {
        for n in [1, 33] {
            rms_case(&RmsCase { xd, wd, rows, n });
        }
    }
}

/// Row lengths at the backward's shared-memory boundary: n accumulators of 4 or 8
/// bytes next to the kernel's static shared memory, within 48 KiB or not.
#[test]
fn rms_norm_matches_cpu_at_the_shared_memory_limit() {
    need_stub!();
    for (xd, wd, n) in [
        (DataType::F32, DataType::F32, 12288),
        (DataType::F32, DataType::F32, 12256),
        (DataType::F64, DataType::F32, 6144),
        // more packs per thread than the kernels keep in registers (forward too)
        (DataType::F64, DataType::BF16, 16384),
    ] {
        rms_case(&RmsCase { xd, wd, rows: 3, n });
    }
}

/// Handlers run concurrently from several threads (as XLA runs them): first calls
/// racing to compile and load the same modules, on one stream.
#[test]
fn concurrent_calls_from_threads() {
    need_stub!();
    let pairs = [(DataType::F32, DataType::BF16), (DataType::F16, DataType::F16), (DataType::F64, DataType::F32)];
    std::thread::scope(|s| {
        for t in 0..6 {
            let (xd, wd) = pairs[t % pairs.len()];
            s.spawn(move || {
                for n in [7, 64, 300] {
                    rms_case(&RmsCase { xd, wd, rows: 2 + t, n });
                }
                kepler_case(if t % 2 == 0 { DataType::F32 } else { DataType::F64 }, 100 + t);
            });
        }
    });
}

/// Any workspace row count B >= 1 gives the same answer (B = 1: one block does all
/// rows; B > rows: idle blocks write zero rows).
#[test]
fn rms_norm_bwd_workspace_sizes() {
    need_stub!();
    let c = RmsCase { xd: DataType::F32, wd: DataType::F32, rows: 37, n: 45 };
    let (x, w, dy) = rms_inputs(&c);
    let (_, ci) = rms_fwd_cpu(&c, &x, &w, 1e-6);
    let (cdx, cdw) = rms_bwd_cpu(&c, &dy, &x, &w, 1e-6);
    for blocks in [1, 2, 7, 37, 50] {
        let (gdx, gdw) = rms_bwd_cuda(&c, &dy, &x, &w, 1e-6, blocks);
        assert_close_terms(&format!("B={blocks}: dx"), c.xd, &gdx, &cdx, &dx_terms(&c, &dy, &w, &ci));
        assert_close(&format!("B={blocks}: dweight"), c.wd, &gdw, &cdw);
    }
}

// ---- bad operands: the CPU handlers' errors, before any driver call ----

#[test]
fn bad_operands_are_invalid_argument() {
    need_stub!();
    let m = gpu().upload(&[1.0f32; 4]).unwrap();
    let e = gpu().upload(&[0.5f64; 4]).unwrap();
    let o = gpu().garbage::<f32>(4).unwrap();
    let mut call = CallBuilder::new().on_gpu(gpu()).arg(m.arg(&[4])).arg(e.arg(&[4])).ret(o.arg(&[4])).ret(o.arg(&[4]));
    let r = call.run(kepler::CUDA.handler);
    no_panic_text(&r);
    let (code, msg) = r.unwrap_err();
    assert_eq!(code, ErrorCode::InvalidArgument, "{msg}");
    assert!(msg.contains("xla_ffi_rs.kepler") && msg.contains("eccentricity"), "{msg}");

    let x = gpu().upload(&[1.0f32; 6]).unwrap();
    let w = gpu().upload(&[1.0f32; 4]).unwrap();
    let y = gpu().garbage::<f32>(6).unwrap();
    let i = gpu().garbage::<f32>(2).unwrap();
    let mut call = CallBuilder::new()
        .on_gpu(gpu())
        .arg(x.arg(&[2, 3]))
        .arg(w.arg(&[4]))
        .ret(y.arg(&[2, 3]))
        .ret(i.arg(&[2]))
        .attr("eps", AttrArg::scalar(1e-6f64));
    let (code, msg) = call.run(rms_norm::FWD_CUDA.handler).unwrap_err();
    assert_eq!(code, ErrorCode::InvalidArgument, "{msg}");
    assert!(msg.contains("weight"), "{msg}");
}

/// The CUDA backward enforces its CPU twin's declared rules (the same words as the
/// CPU handler), and checks its workspace, outside those rules, by hand: a workspace
/// narrower than the accumulator dtype would be written out of bounds.
#[test]
fn rms_norm_bwd_checks_like_its_cpu_twin_and_checks_the_workspace() {
    need_stub!();
    let (rows, n) = (3usize, 4usize);
    let d2 = [rows as i64, n as i64];
    let f = |k: usize| gpu().upload(&vec![0.5f32; k]).unwrap();
    let (dy, x, w) = (f(rows * n), f(rows * n), f(n));
    let (dx, dw) = (gpu().garbage::<f32>(rows * n).unwrap(), gpu().garbage::<f32>(n + 1).unwrap());
    let run = |dw_dims: &[i64], ws: &DeviceBuffer, ws_dims: &[i64]| {
        let mut call = CallBuilder::new()
            .on_gpu(gpu())
            .arg(dy.arg(&d2))
            .arg(x.arg(&d2))
            .arg(w.arg(&[n as i64]))
            .ret(dx.arg(&d2))
            .ret(dw.arg(dw_dims))
            .ret(ws.arg(ws_dims))
            .attr("eps", AttrArg::scalar(1e-6f64));
        let r = call.run(rms_norm::BWD_CUDA.handler);
        no_panic_text(&r);
        r
    };
    let ws32 = gpu().garbage::<f32>(n).unwrap();
    // The shape rule of the CPU twin, with its message.
    let (code, msg) = run(&[n as i64 + 1], &ws32, &[1, n as i64]).unwrap_err();
    assert_eq!(code, ErrorCode::InvalidArgument, "{msg}");
    assert!(
        msg.contains(
            "xla_ffi_rs.rms_norm_bwd: result 1 (dweight): expected shape [4] (...n of operand 0 (dy)), got [5]"
        ),
        "{msg}"
    );
    let mut cpu = CallBuilder::new()
        .arg(Arg::from_slice(&[0.5f32; 12], &d2))
        .arg(Arg::from_slice(&[0.5f32; 12], &d2))
        .arg(Arg::from_slice(&[0.5f32; 4], &[n as i64]))
        .ret(Arg::from_slice(&[0f32; 12], &d2))
        .ret(Arg::from_slice(&[0f32; 5], &[n as i64 + 1]))
        .attr("eps", AttrArg::scalar(1e-6f64));
    let (_, cpu_msg) = cpu.run(rms_norm::BWD_CPU).unwrap_err();
    assert_eq!(msg, cpu_msg, "the CUDA and CPU handlers word it the same");
    // A float16 workspace for a float32 accumulator: refused before any launch.
    let ws16 = gpu().garbage::<f16>(2 * n).unwrap();
    let (code, msg) = run(&[n as i64], &ws16, &[1, n as i64]).unwrap_err();
    assert_eq!(code, ErrorCode::InvalidArgument, "{msg}");
    assert!(
        msg.contains("workspace") && msg.contains("expected dtype float32") && msg.contains("got float16"),
        "{msg}"
    );
    // A workspace of the wrong width.
    let (code, msg) = run(&[n as i64], &ws32, &[1, 3]).unwrap_err();
    assert_eq!(code, ErrorCode::InvalidArgument, "{msg}");
    assert!(msg.contains("workspace") && msg.contains("expected shape (B, 4)"), "{msg}");
    // And a good one runs.
    run(&[n as i64], &ws32, &[1, n as i64]).unwrap();
}

// ---- behaviour, from the stand-in's call log, each in a fresh process ----

/// Runs test `name` of this binary in a child process with `env`, and returns its
/// (success, stdout + stderr).
fn child(name: &str, env: &[(&str, &str)]) -> (bool, String) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"]).env("XFR_CHILD", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success() && text.contains("1 passed"), text)
}

fn in_child() -> bool {
    std::env::var_os("XFR_CHILD").is_some()
}

fn log_path(tag: &str) -> String {
    let dir = std::env::temp_dir().join(format!("xfr-stub-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{tag}.log")).to_string_lossy().into_owned()
}

fn log_lines() -> Vec<String> {
    let p = std::env::var("XFR_STUB_LOG").expect("XFR_STUB_LOG");
    std::fs::read_to_string(p).unwrap_or_default().lines().map(str::to_string).collect()
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// Two `Device`s of one call, used and dropped in creation order (not LIFO).
/// (`Device` has no `Drop` any more; the drops spell out the order that the old
/// push/pop design got wrong.)
#[allow(clippy::drop_non_drop)]
#[xla_ffi::handler(target = "test.two_devices", platform = device)]
fn two_devices(ctx: xla_ffi::Context) -> xla_ffi::Result<()> {
    let a = xla_ffi::cuda::Device::new(&ctx)?;
    let b = xla_ffi::cuda::Device::new(&ctx)?;
    a.compute_capability()?;
    b.compute_capability()?;
    drop(a);
    b.compute_capability()?;
    drop(b);
    Ok(())
}

/// A handler passing one result twice (`cuda::Arg` is `Copy`): the launch refuses it
/// before anything runs (two outputs of a kernel never overlap in XLA).
#[xla_ffi::handler(target = "test.result_twice", platform = device)]
fn result_twice(
    ctx: xla_ffi::Context,
    m: xla_ffi::Buffer<f32>,
    e: xla_ffi::Buffer<f32>,
    mut y: xla_ffi::ResultBuffer<f32>,
) -> xla_ffi::Result<()> {
    use xla_ffi::cuda::{Arg, Device};
    let out = Arg::from(&mut y);
    let args = [Arg::from(&m), Arg::from(&e), out, out, Arg::u64(m.len() as u64)];
    let kernel = kepler::kernel_table::KEPLER.kernel(ctx.target(), &[DataType::F32], &args)?;
    let dev = Device::new(&ctx)?;
    let module = dev.module(&kepler::KEPLER_CU, core::slice::from_ref(&kernel))?;
    dev.launch(&module, &kernel, kepler::cuda::launch_config(m.len() as u64), &args)
}

#[test]
fn one_result_passed_twice_is_refused() {
    need_stub!();
    let (m, e) = (gpu().upload(&[1.0f32; 4]).unwrap(), gpu().upload(&[0.5f32; 4]).unwrap());
    let y = gpu().garbage::<f32>(4).unwrap();
    let mut call = CallBuilder::new().on_gpu(gpu()).arg(m.arg(&[4])).arg(e.arg(&[4])).ret(y.arg(&[4]));
    let (code, msg) = call.run(RESULT_TWICE).unwrap_err();
    assert_eq!(code, ErrorCode::InvalidArgument, "{msg}");
    assert!(msg.contains("test.result_twice: launch of kepler<float>: two result arguments overlap"), "{msg}");
}

/// Dropping two `Device`s out of order leaves the thread's current context as it was
/// (the old push/pop design popped the wrong one).
#[test]
fn devices_dropped_out_of_order_restore_the_context() {
    need_stub!();
    let g = gpu();
    let mut call = CallBuilder::new().on_gpu(g);
    Gpu::clear_current().unwrap();
    call.run(TWO_DEVICES).unwrap();
    assert_eq!(Gpu::current().unwrap(), 0, "none was current before the call");
    g.make_current().unwrap();
    call.run(TWO_DEVICES).unwrap();
    assert_eq!(Gpu::current().unwrap(), g.context(), "XLA's context was current before the call");
}

/// A kepler call on `n` elements; with `unbind`, no context is current when the
/// handler starts (as on an XLA thread that never touched CUDA).
fn run_kepler_f32(n: usize, unbind: bool) -> CallResult {
    run_kepler_f32_on(gpu(), n, unbind)
}

fn run_kepler_f32_on(g: &Gpu, n: usize, unbind: bool) -> CallResult {
    let m = gpu().upload(&vec![1.0f32; n]).unwrap();
    let e = gpu().upload(&vec![0.5f32; n]).unwrap();
    let (s, c) = (gpu().garbage::<f32>(n).unwrap(), gpu().garbage::<f32>(n).unwrap());
    let d = [n as i64];
    let mut call = CallBuilder::new().on_gpu(g).arg(m.arg(&d)).arg(e.arg(&d)).ret(s.arg(&d)).ret(c.arg(&d));
    if unbind {
        Gpu::clear_current().unwrap();
    }
    let r = call.run(kepler::CUDA.handler);
    if unbind {
        assert_eq!(Gpu::current().unwrap(), 0, "the handler left a context current");
        gpu().make_current().unwrap();
    }
    r
}

#[test]
fn child_driver_behaviour() {
    if !in_child() {
        return;
    }
    let g = gpu();
    assert_eq!(xla_ffi::cuda::driver_version(), Some(12080));
    let c = RmsCase { xd: DataType::BF16, wd: DataType::F32, rows: 5, n: 40 };
    let (x, w, dy) = rms_inputs(&c);
    let before = log_lines().len();
    for _ in 0..2 {
        run_kepler_f32(300, true).unwrap();
        rms_fwd_cuda(&c, &x, &w, 1e-5);
        let c64 = RmsCase { xd: DataType::F64, ..c };
        let (x64, w64, _) = rms_inputs(&c64);
        rms_fwd_cuda(&c64, &x64, &w64, 1e-5);
        rms_bwd_cuda(&c, &dy, &x, &w, 1e-5, 3);
    }
    let lines = log_lines()[before..].to_vec();
    // A second context (another XLA client) loads its own module, once.
    let other = Gpu::new_context().unwrap();
    gpu().make_current().unwrap();
    let mark = log_lines().len();
    run_kepler_f32_on(&other, 100, false).unwrap();
    run_kepler_f32_on(&other, 100, false).unwrap();
    let other_lines = log_lines()[mark..].to_vec();
    let other_stream = format!("{:p}", other.stream() as *const u8);
    assert_eq!(other_lines.iter().filter(|l| l.starts_with("cuModuleLoadData module=")).count(), 1, "{other_lines:#?}");
    let other_launches: Vec<&String> = other_lines.iter().filter(|l| l.starts_with("cuLaunchKernel")).collect();
    assert_eq!(other_launches.len(), 2, "{other_lines:#?}");
    for l in &other_launches {
        assert_eq!(field(l, "stream"), Some(other_stream.as_str()), "{l}");
        assert_eq!(field(l, "ctx"), Some("2"), "a launch without the stream's context current: {l}");
    }

    let stream = format!("{:p}", g.stream() as *const u8);
    let launches: Vec<&String> = lines.iter().filter(|l| l.starts_with("cuLaunchKernel")).collect();
    // 2 x (kepler + 2 forwards + backward (2 launches)).
    assert_eq!(launches.len(), 10, "{lines:#?}");
    for l in &launches {
        assert_eq!(field(l, "stream"), Some(stream.as_str()), "a launch not on the frame's stream: {l}");
        assert_eq!(field(l, "ctx"), Some("1"), "a launch without XLA's context current: {l}");
    }
    assert!(!lines.iter().any(|l| l.contains("Synchronize")), "a handler synchronized: {lines:#?}");
    // One module per (context, kernels): kepler<float>, two forward dtype pairs, one backward.
    let loads = lines.iter().filter(|l| l.starts_with("cuModuleLoadData module=")).count();
    assert_eq!(loads, 4, "{lines:#?}");
    // The backward's first launch has one block per workspace row, the second reads it.
    let bwd: Vec<&&String> = launches.iter().filter(|l| l.contains("rms_norm_bwd")).collect();
    assert!(bwd.iter().all(|l| field(l, "grid") == Some("3,1,1")), "{bwd:#?}");
    assert!(
        launches.iter().any(|l| l.contains("rms_norm_dweight") && field(l, "grid") == Some("2,1,1")),
        "{launches:#?}"
    );
    // No device memory was allocated by the handlers.
    let allocs_during: usize = lines.iter().filter(|l| l.starts_with("cuMemAlloc")).count();
    let expected_test_allocs = 2 * (4 + 4 + 4 + 6);
    assert_eq!(allocs_during, expected_test_allocs, "a handler allocated device memory: {lines:#?}");
}

#[test]
fn driver_behaviour() {
    need_stub!();
    // A CUDA 12.8 driver, older than the NVRTC 13 that compiles the CUBINs: the
    // handlers need only CUDA 12.0's entry points.
    let (ok, out) = child(
        "child_driver_behaviour",
        &[("XFR_STUB_LOG", &log_path("behaviour")), ("XFR_STUB_DRIVER_VERSION", "12080")],
    );
    assert!(ok, "{out}");
}

/// One handler's first call in this (fresh) process, inside a stream capture, as
/// when XLA records a command buffer; then the graph is replayed and the results
/// compared with the CPU handler's. `XFR_HANDLER` picks the handler.
#[test]
fn child_first_call_inside_capture() {
    if !in_child() {
        return;
    }
    let handler = std::env::var("XFR_HANDLER").unwrap();
    let c = RmsCase { xd: DataType::F16, wd: DataType::BF16, rows: 4, n: 100 };
    let (x, w, dyv) = rms_inputs(&c);
    let (cy, ci) = rms_fwd_cpu(&c, &x, &w, 1e-5);
    let (yd, ad) = (promote(c.xd, c.wd), acc(c.xd, c.wd));
    let d2 = [c.rows as i64, c.n as i64];
    let keep: Vec<DeviceBuffer>;
    // (result buffer, dtype, CPU result) to compare after the replay.
    let mut outs: Vec<(usize, DataType, V)> = Vec::new();
    let mut kepler_in = (Vec::new(), Vec::new());
    let (mut call, f): (CallBuilder, Handler) = match handler.as_str() {
        "kepler" => {
            let (m, e) = kepler_inputs(1000, 7);
            kepler_in = (m.clone(), e.clone());
            let (vm, ve) = (V::new(DataType::F64, &m), V::new(DataType::F64, &e));
            let mut cpu = CallBuilder::new()
                .arg(vm.arg(&[1000]))
                .arg(ve.arg(&[1000]))
                .ret(zeros(DataType::F64, 1000).arg(&[1000]))
                .ret(zeros(DataType::F64, 1000).arg(&[1000]));
            cpu.run(kepler::CPU).unwrap();
            keep = vec![vm.upload(), ve.upload(), garbage(DataType::F64, 1000), garbage(DataType::F64, 1000)];
            outs.push((2, DataType::F64, cpu_ret(&cpu, 0, DataType::F64)));
            outs.push((3, DataType::F64, cpu_ret(&cpu, 1, DataType::F64)));
            let call = CallBuilder::new()
                .on_gpu(gpu())
                .arg(keep[0].arg(&[1000]))
                .arg(keep[1].arg(&[1000]))
                .ret(keep[2].arg(&[1000]))
                .ret(keep[3].arg(&[1000]));
            (call, kepler::CUDA.handler)
        }
        "fwd" => {
            keep = vec![x.upload(), w.upload(), garbage(yd, c.rows * c.n), garbage(ad, c.rows)];
            outs.push((2, yd, cy));
            outs.push((3, ad, ci));
            let call = CallBuilder::new()
                .on_gpu(gpu())
                .arg(keep[0].arg(&d2))
                .arg(keep[1].arg(&[c.n as i64]))
                .ret(keep[2].arg(&d2))
                .ret(keep[3].arg(&[c.rows as i64]))
                .attr("eps", AttrArg::scalar(1e-5f64));
            (call, rms_norm::FWD_CUDA.handler)
        }
        _ => {
            let (cdx, cdw) = rms_bwd_cpu(&c, &dyv, &x, &w, 1e-5);
            let blocks = rms_norm::bwd_workspace_rows(c.rows);
            keep = vec![
                dyv.upload(),
                x.upload(),
                w.upload(),
                garbage(c.xd, c.rows * c.n),
                garbage(c.wd, c.n),
                garbage(ad, blocks * c.n),
            ];
            outs.push((3, c.xd, cdx));
            outs.push((4, c.wd, cdw));
            let call = CallBuilder::new()
                .on_gpu(gpu())
                .arg(keep[0].arg(&d2))
                .arg(keep[1].arg(&d2))
                .arg(keep[2].arg(&[c.n as i64]))
                .ret(keep[3].arg(&d2))
                .ret(keep[4].arg(&[c.n as i64]))
                .ret(keep[5].arg(&[blocks as i64, c.n as i64]))
                .attr("eps", AttrArg::scalar(1e-5f64));
            (call, rms_norm::BWD_CUDA.handler)
        }
    };
    gpu().begin_capture().unwrap();
    let r = call.run(f);
    no_panic_text(&r);
    r.unwrap();
    gpu().end_capture_and_launch().unwrap();
    let lines = log_lines();
    assert!(!lines.iter().any(|l| l.starts_with("capture_violation")), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.starts_with("cuModuleLoadData module=")),
        "the first call loaded no module: {lines:#?}"
    );
    for (i, d, cpu) in outs {
        if handler == "kepler" {
            let g = download(d, &keep[i]).f64s();
            for (k, (a, b)) in g.iter().zip(cpu.f64s()).enumerate() {
                let tol = kepler_tol(f64::EPSILON, kepler_in.1[k]);
                assert!(!b.is_finite() || (a - b).abs() <= tol, "captured kepler output {i}[{k}]: {a} vs {b}");
            }
        } else {
            assert_close(&format!("captured {handler} result {i}"), d, &download(d, &keep[i]), &cpu);
        }
    }
}

#[test]
fn first_call_inside_capture() {
    need_stub!();
    for h in ["kepler", "fwd", "bwd"] {
        let (ok, out) = child(
            "child_first_call_inside_capture",
            &[("XFR_STUB_LOG", &log_path(&format!("capture-{h}"))), ("XFR_HANDLER", h)],
        );
        assert!(ok, "{h}: {out}");
    }
}

/// The text of a caught panic's payload.
fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    match p.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p.downcast_ref::<&str>().map(|s| s.to_string()).unwrap_or_default(),
    }
}

/// Device buffers never reach a CPU handler as host memory (the stand-in keeps device
/// memory inaccessible outside kernels, so a host read would fault): the test frame
/// refuses device buffers outside a device call, and on a device call the crate's
/// host guard refuses the CPU handler. (Before, a host frame carried them and the
/// CPU handler read them: SIGSEGV.)
#[test]
fn host_access_of_device_memory_is_refused() {
    need_stub!();
    let m = gpu().upload(&[1.0f32; 8]).unwrap();
    let e = gpu().upload(&[0.5f32; 8]).unwrap();
    let mut host =
        CallBuilder::new().arg(m.arg(&[8])).arg(e.arg(&[8])).ret(Arg::zeros::<f32>(&[8])).ret(Arg::zeros::<f32>(&[8]));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| host.run(kepler::CPU)));
    let msg = panic_text(r.expect_err("a device buffer on a host frame must be refused"));
    assert!(msg.contains("needs a device call"), "{msg}");
    let mut device = CallBuilder::new()
        .on_gpu(gpu())
        .arg(m.arg(&[8]))
        .arg(e.arg(&[8]))
        .ret(Arg::zeros::<f32>(&[8]))
        .ret(Arg::zeros::<f32>(&[8]));
    let (code, msg) = device.run(kepler::CPU).unwrap_err();
    assert_eq!(code, ErrorCode::FailedPrecondition, "{msg}");
    assert!(msg.contains("device platform"), "{msg}");
    // The sizes are checked too: 9 floats do not fit an 8-float allocation.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.arg(&[9])));
    let msg = panic_text(r.expect_err("dims past the allocation"));
    assert!(msg.contains("describe more than the 32 bytes allocated"), "{msg}");
}

/// The error paths, each in a fresh process: the handler's error code and message.
#[test]
fn child_error_path() {
    if !in_child() {
        return;
    }
    let want = std::env::var("XFR_WANT").unwrap();
    let (code, words) = want.split_once(':').unwrap();
    let d = [4i64];
    // SAFETY: each case fails before any kernel launch (no driver, an old driver, no
    // NVRTC), so the dummy address is never used.
    let args = || unsafe { Arg::device(DataType::F32, &d, 0x10_0000) };
    // SAFETY: this call runs only when `Gpu::new` fails (no usable driver or
    // context), so the handler fails before handing the dummy stream to a driver.
    let mut call = unsafe { CallBuilder::new().device_stream(0x2000) }.arg(args()).arg(args()).ret(args()).ret(args());
    let r = if Gpu::new().is_ok() { run_kepler_f32(4, false) } else { call.run(kepler::CUDA.handler) };
    no_panic_text(&r);
    let (c, msg) = r.unwrap_err();
    assert_eq!(format!("{c:?}"), code, "{msg}");
    for w in words.split('|') {
        assert!(msg.contains(w), "{w:?} not in {msg}");
    }
    println!("error path message: {msg}");
}

#[test]
fn error_paths() {
    need_stub!();
    let stub_dir = std::env::var("XFR_STUB_DRIVER").unwrap();
    type Case<'a> = (&'a str, Vec<(&'a str, String)>, &'a str);
    let cases: [Case; 3] = [
        (
            "missing driver",
            vec![("LD_LIBRARY_PATH", "/nonexistent".into())],
            "FailedPrecondition:xla_ffi_rs.kepler|CUDA driver library could not be loaded|jax[cuda13]",
        ),
        (
            "driver too old",
            vec![("LD_LIBRARY_PATH", format!("{stub_dir}/old"))],
            "FailedPrecondition:xla_ffi_rs.kepler|CUDA 11.8|lacks cuCtxGetId|CUDA 12.0 or newer",
        ),
        (
            "missing NVRTC",
            vec![("XLA_FFI_RS_NVRTC", "/nonexistent/libnvrtc.so.13".into())],
            "FailedPrecondition:xla_ffi_rs.kepler|NVRTC|pip install nvidia-cuda-nvrtc",
        ),
    ];
    for (what, env, want) in cases {
        let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        env.push(("XFR_WANT", want));
        let (ok, out) = child("child_error_path", &env);
        assert!(ok, "{what}: {out}");
    }
}
