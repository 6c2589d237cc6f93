//! The rms_norm targets' fixture for the CUDA-against-CPU test (see [`crate::fixture`]).
//!
//! Tolerances, CUDA vs CPU, by the result's dtype, relative to `max(|cpu|, 0.1 *
//! max|cpu| of the result)`: f64 1e-12, f32 2e-5, f16 2e-3 (2 ulp), bf16 1.6e-2 (2
//! ulp). The kernels sum in another order than the CPU (a block-wide shuffle tree),
//! and a 16-bit result may round the other way. `dx = r w dy - x c` cancels almost
//! completely for short rows: its error is relative to `|r w dy|` too.
//!
//! The backward's workspace (a result outside the declaration) is `(B, n)` in the
//! accumulator dtype; any `B >= 1` gives the same answer, and `dweight` is the same
//! to the bit on every run.

use xla_ffi::decl::accumulator;
use xla_ffi::DataType;

use super::cuda::{dweight_launch_config, fwd_launch_config, pack_lanes, MAX_FWD_BLOCKS};
use super::{bwd_workspace_rows, BWD_CUDA, FWD_CUDA};
use crate::fixture::{
    all_dtypes, elements, no_bad_scratch, no_scratch, Attr, BadScratch, Buf, Group, Launch, Lcg, OpFixture, Sample,
    TargetFixture,
};

const F16: DataType = DataType::F16;
const BF16: DataType = DataType::BF16;
const F32: DataType = DataType::F32;
const F64: DataType = DataType::F64;

/// This op's fixture.
pub const FIXTURE: OpFixture = OpFixture {
    targets: &[
        TargetFixture {
            cuda: &FWD_CUDA,
            groups: || groups(false),
            probe,
            inputs: |s| {
                let (x, w, _) = inputs(s);
                vec![x, w]
            },
            tolerance: |s, _, cpu, k| relative(s.results[k].1, &cpu[k], &[]),
            scratch: no_scratch,
            bad_scratch: no_bad_scratch,
            launches: fwd_launches,
            deterministic: &[],
        },
        TargetFixture {
            cuda: &BWD_CUDA,
            groups: || groups(true),
            probe,
            inputs: |s| {
                let (x, w, dy) = inputs(s);
                vec![dy, x, w]
            },
            tolerance: bwd_tolerance,
            scratch: workspaces,
            bad_scratch: bad_workspaces,
            launches: bwd_launches,
            deterministic: &[1],
        },
    ],
};

/// The dtypes of `(x, weight)`: the last two operands of both targets.
fn xw(d: &[DataType]) -> (DataType, DataType) {
    (d[d.len() - 2], d[d.len() - 1])
}

/// `rows` rows of `n` (`...b = [rows]`, `...n = [n]`), each pair.
fn rows_of(rows: &[usize], ns: &[usize]) -> Vec<Vec<(&'static str, Vec<i64>)>> {
    rows.iter().flat_map(|&r| ns.iter().map(move |&n| vec![("b", vec![r as i64]), ("n", vec![n as i64])])).collect()
}

fn group(name: &'static str, shapes: Vec<Vec<(&'static str, Vec<i64>)>>, dtypes: fn(&[DataType]) -> bool) -> Group {
    Group { name, shapes, dtypes, attrs: vec![("eps", Attr::F64(1e-5))] }
}

fn groups(backward: bool) -> Vec<Group> {
    let mut out = vec![
        group("every dtype pair and row length", rows_of(&[1, 3], &[1, 31, 32, 33, 1000, 4097]), all_dtypes),
        // The forward grid-strides over rows beyond MAX_FWD_BLOCKS, the backward's
        // workspace is capped at 1024 blocks of rows.
        group("beyond one grid", rows_of(&[MAX_FWD_BLOCKS + 3], &[1, 33]), |d| {
            matches!(xw(d), (F32, F32) | (BF16, F16) | (F64, F16))
        }),
        // Row lengths at the backward's shared-memory boundary: n accumulators of 4
        // or 8 bytes next to the kernel's static shared memory, within 48 KiB or not.
        group("shared memory limit, f32", rows_of(&[3], &[12288, 12256]), |d| xw(d) == (F32, F32)),
        group("shared memory limit, f64", rows_of(&[3], &[6144]), |d| xw(d) == (F64, F32)),
        // More packs per thread than the kernels keep in registers (forward too).
        group("packs beyond the registers", rows_of(&[3], &[16384]), |d| xw(d) == (F64, BF16)),
    ];
    if backward {
        // Any workspace row count B >= 1 (see `workspaces`).
        out.push(Group {
            attrs: vec![("eps", Attr::F64(1e-6))],
            ..group("workspace rows", rows_of(&[37], &[45]), |d| xw(d) == (F32, F32))
        });
    }
    out
}

/// Small cases; the first has 3 workspace rows (the call-log test checks the grid).
fn probe() -> Group {
    group("probe", [rows_of(&[40], &[40]), rows_of(&[2, 3, 4], &[7, 64, 300])].concat(), |d| {
        matches!(xw(d), (BF16, F32) | (F64, F32) | (F32, BF16) | (F16, F16))
    })
}

/// `(rows, n)` of a case.
fn shape(s: &Sample) -> (usize, usize) {
    let w = &s.operands[s.operands.len() - 1].0;
    let x = elements(&s.operands[s.operands.len() - 2].0);
    let n = elements(w);
    (x.checked_div(n).unwrap_or(0), n)
}

/// `(x, weight, dy)`: `x` in `[-2, 2)` with a zero every 97 elements, `weight` in
/// `[0.5, 1.5)`, `dy` in `[-1, 1)`.
fn inputs(s: &Sample) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (rows, n) = shape(s);
    let mut g = Lcg((rows * 7919 + n) as u64);
    let x: Vec<f64> = (0..rows * n).map(|i| if i % 97 == 5 { 0.0 } else { 4.0 * g.next() - 2.0 }).collect();
    let w = g.uniform(n, 0.5, 1.5);
    let dy = g.uniform(rows * n, -1.0, 1.0);
    (x, w, dy)
}

fn rtol(d: DataType) -> f64 {
    match d {
        F64 => 1e-12,
        F32 => 2e-5,
        F16 => 2e-3,
        _ => 1.6e-2,
    }
}

/// `rtol(d)` of `max(|cpu|, 0.1 * max|cpu|, terms[i])`.
fn relative(d: DataType, cpu: &[f64], terms: &[f64]) -> Vec<f64> {
    let scale = cpu.iter().filter(|v| v.is_finite()).fold(0.0f64, |m, v| m.max(v.abs()));
    let at = |i: usize| terms.get(i).copied().unwrap_or(0.0);
    let t = rtol(d);
    cpu.iter().enumerate().map(|(i, c)| t * c.abs().max(0.1 * scale).max(at(i)).max(f64::MIN_POSITIVE)).collect()
}

/// `dx` relative also to `|r w_j dy_j|`, the size of the terms that cancel in it.
fn bwd_tolerance(s: &Sample, inputs: &[Vec<f64>], cpu: &[Vec<f64>], k: usize) -> Vec<f64> {
    if k != 0 {
        return relative(s.results[k].1, &cpu[k], &[]);
    }
    let (rows, n) = shape(s);
    let (dy, x, w) = (&inputs[0], &inputs[1], &inputs[2]);
    let eps = s.f64_attr("eps");
    let inv: Vec<f64> =
        (0..rows).map(|r| 1.0 / (x[r * n..(r + 1) * n].iter().map(|v| v * v).sum::<f64>() / n as f64 + eps).sqrt()).collect();
    let terms: Vec<f64> = (0..rows * n).map(|i| (inv[i / n] * w[i % n] * dy[i]).abs()).collect();
    relative(s.results[0].1, &cpu[0], &terms)
}

/// The workspace `(B, n)` in the accumulator dtype: the recommended `B`, or for
/// the group "workspace rows" one, a few, the row count and more.
fn workspaces(s: &Sample) -> Vec<Vec<Buf>> {
    let (rows, n) = shape(s);
    let (xd, wd) = xw(&s.operands.iter().map(|b| b.1).collect::<Vec<_>>());
    let acc = accumulator(xd, wd);
    let bs = if s.group == "workspace rows" { vec![1, 2, 7, 37, 50] } else { vec![bwd_workspace_rows(rows)] };
    bs.into_iter().map(|b| vec![(vec![b as i64, n as i64], acc)]).collect()
}

/// A workspace narrower than the accumulator dtype (it would be written out of
/// bounds), and one of the wrong width.
fn bad_workspaces(s: &Sample) -> Vec<BadScratch> {
    let (_, n) = shape(s);
    let acc = workspaces(s)[0][0].1;
    let narrow = if acc == F16 { BF16 } else { F16 };
    let mut out = vec![BadScratch {
        scratch: vec![(vec![1, n as i64], narrow)],
        words: vec!["workspace".into(), format!("expected dtype {acc}"), format!("got {narrow}")],
    }];
    if n > 1 {
        out.push(BadScratch {
            scratch: vec![(vec![1, n as i64 - 1], acc)],
            words: vec!["workspace".into(), format!("expected shape (B, {n})")],
        });
    }
    out
}

fn width(d: DataType) -> usize {
    d.byte_width().unwrap_or(8)
}

fn fwd_launches(s: &Sample, _: &[Buf]) -> Vec<Launch> {
    let (rows, n) = shape(s);
    if rows == 0 {
        return Vec::new();
    }
    let lanes = pack_lanes(&[width(s.operands[0].1), width(s.operands[1].1), width(s.results[0].1)]);
    vec![("rms_norm_fwd", fwd_launch_config(rows, n, lanes).grid)]
}

/// One block per workspace row, then the `dweight` reduction over them.
fn bwd_launches(s: &Sample, scratch: &[Buf]) -> Vec<Launch> {
    let (_, n) = shape(s);
    if n == 0 {
        return Vec::new();
    }
    let blocks = scratch[0].0[0].max(1) as u32;
    vec![("rms_norm_bwd", (blocks, 1, 1)), ("rms_norm_dweight", dweight_launch_config(n).grid)]
}
