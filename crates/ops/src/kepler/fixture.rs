//! The Kepler targets' fixture for the CUDA-against-CPU test (see [`crate::fixture`]).
//!
//! Tolerances, CUDA vs CPU, where the CPU result is finite: the solver within 64
//! ulp(1) of the dtype times the condition number `1 / (1 - e)` of `E(M)`, whatever
//! `|M|` (both solvers reduce `M` modulo the real `2 pi` exactly); its tangents (the
//! fused targets) that times `(1 + |dM| + |de|) / (1 - e cos E)`; the derivative
//! targets, the same formula on both sides, within `1e-13` (f64) or `1e-5` (f32) of
//! `max(|cpu|, 1)`.

use xla_ffi::DataType;

use super::cuda::{launch_config, BLOCK, MAX_BLOCKS};
use super::{COTANGENT_CUDA, CUDA, JVP_CONST_CUDA, JVP_CUDA, JVP_DM_CUDA, TANGENT_CUDA};
use crate::fixture::{
    all_dtypes, elements, epsilon, no_bad_scratch, no_scratch, Group, Launch, Lcg, OpFixture, Sample,
    TargetFixture,
};

/// This op's fixture.
pub const FIXTURE: OpFixture = OpFixture {
    targets: &[
        TargetFixture {
            groups: || vec![sizes("solver", &[0, 1, 31, 255, 257, 1000, 4097, grid() + 333])],
            inputs: solver_inputs,
            tolerance: solver_tolerance,
            launches: |s, _| launch(s, "kepler"),
            ..target(&CUDA)
        },
        TargetFixture { launches: |s, _| launch(s, "kepler_tangent"), ..derivative(&TANGENT_CUDA) },
        TargetFixture { launches: |s, _| launch(s, "kepler_cotangent"), ..derivative(&COTANGENT_CUDA) },
        target(&JVP_CUDA),
        target(&JVP_DM_CUDA),
        target(&JVP_CONST_CUDA),
    ],
};

/// The fused targets' entry; the other targets override what differs.
const fn target(cuda: &'static xla_ffi::HandlerDescriptor) -> TargetFixture {
    TargetFixture {
        cuda,
        groups: || vec![sizes("fused", &[0, 1, 31, 257, 4097, grid() + 333])],
        probe: || sizes("probe", &[300, 100, 101]),
        inputs: jvp_inputs,
        tolerance: jvp_tolerance,
        scratch: no_scratch,
        bad_scratch: no_bad_scratch,
        launches: |s, _| launch(s, "kepler_jvp"),
        deterministic: &[],
    }
}

const fn derivative(cuda: &'static xla_ffi::HandlerDescriptor) -> TargetFixture {
    TargetFixture {
        groups: || vec![sizes("derivative", &[0, 1, 257, 4097, grid() + 333])],
        inputs: derivative_inputs,
        tolerance: derivative_tolerance,
        ..target(cuda)
    }
}

/// The elements of one full grid: beyond it the kernels stride.
fn grid() -> i64 {
    (BLOCK * MAX_BLOCKS) as i64
}

/// One case per length `n` (the batch `...b` = `[n]`), float32 and float64.
fn sizes(name: &'static str, ns: &[i64]) -> Group {
    Group { name, shapes: ns.iter().map(|&n| vec![("b", vec![n])]).collect(), dtypes: all_dtypes, attrs: Vec::new() }
}

/// One launch over the elements, none for an empty call.
fn launch(s: &Sample, kernel: &'static str) -> Vec<Launch> {
    let n = elements(&s.operands[0].0) as u64;
    if n == 0 {
        return Vec::new();
    }
    vec![(kernel, launch_config(n).grid)]
}

fn len(s: &Sample) -> usize {
    elements(&s.operands[0].0)
}

/// `(M, e)`: random, special `M` (huge, tiny, signed zeros, reduced exactly by
/// Payne-Hanek), `e` near 1, and NaN and infinite `M`, `e` outside `[0, 1)` or NaN.
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

/// 64 ulp(1) times the condition number `1 / (1 - e)` of `E(M)`.
fn kepler_tol(eps: f64, e: f64) -> f64 {
    64.0 * eps / (1.0 - e).max(eps)
}

fn solver_inputs(s: &Sample) -> Vec<Vec<f64>> {
    let n = len(s);
    let (m, e) = kepler_inputs(n, 42 + n as u64);
    vec![m, e]
}

fn solver_tolerance(s: &Sample, inputs: &[Vec<f64>], _: &[Vec<f64>], _: usize) -> Vec<f64> {
    let eps = epsilon(s.operands[0].1);
    inputs[1].iter().map(|&e| kepler_tol(eps, e)).collect()
}

/// `(a, b, e, sin E, cos E)`: tangents (or cotangents) in `[-2, 2)`, `e` in `[0, 0.99)`,
/// `E` in `[-3, 3)`.
fn derivative_inputs(s: &Sample) -> Vec<Vec<f64>> {
    let n = len(s);
    let mut r = Lcg(11 + n as u64);
    let angles = r.uniform(n, -3.0, 3.0);
    let (a, b, e) = (r.uniform(n, -2.0, 2.0), r.uniform(n, -2.0, 2.0), r.uniform(n, 0.0, 0.99));
    let (sin, cos): (Vec<f64>, Vec<f64>) = angles.iter().map(|x| (x.sin(), x.cos())).unzip();
    vec![a, b, e, sin, cos]
}

fn derivative_tolerance(s: &Sample, _: &[Vec<f64>], cpu: &[Vec<f64>], k: usize) -> Vec<f64> {
    let tol = if s.operands[0].1 == DataType::F64 { 1e-13 } else { 1e-5 };
    cpu[k].iter().map(|c| tol * c.abs().max(1.0)).collect()
}

/// The solver's inputs with tangents `dM` in `[-2, 2)` and `de` in `[-1, 1)`, or the
/// scalars `-1.25` and `0.75` where the operand's shape is `()`.
fn jvp_inputs(s: &Sample) -> Vec<Vec<f64>> {
    let n = len(s);
    let (m, e) = kepler_inputs(n, 7 + n as u64);
    let mut g = Lcg(3 + n as u64);
    let scalar = |k: usize| s.operands[k].0.is_empty();
    let dm = if scalar(2) { vec![-1.25] } else { g.uniform(n, -2.0, 2.0) };
    let de = if scalar(3) { vec![0.75] } else { g.uniform(n, -1.0, 1.0) };
    vec![m, e, dm, de]
}

/// The solver's tolerance; for the tangents, times `(1 + |dM| + |de|)` over
/// `1 - e cos E` (the tangent's condition).
fn jvp_tolerance(s: &Sample, inputs: &[Vec<f64>], cpu: &[Vec<f64>], k: usize) -> Vec<f64> {
    let eps = epsilon(s.operands[0].1);
    let at = |v: &[f64], i: usize| if v.len() == 1 { v[0] } else { v[i] };
    let (e, dm, de) = (&inputs[1], &inputs[2], &inputs[3]);
    (0..e.len())
        .map(|i| {
            let slope = 1.0 / (1.0 - e[i] * cpu[1][i]).max(eps);
            let scale = if k < 2 { 1.0 } else { (1.0 + at(dm, i).abs() + at(de, i).abs()) * slope };
            kepler_tol(eps, e[i]) * scale
        })
        .collect()
}
