//! Tests of the RMS-norm CPU kernels against f64 references (a child module of
//! `kernel.rs`, so they can run the kernels on initialized output buffers), and
//! the helpers the other test files share: `copies.rs` (the per-CPU copies give
//! the portable bits), `chunks.rs` (the chunk conversions against `half`),
//! `pairs.rs` (the bf16 pair layout).

use half::{bf16, f16};

use super::rows::{rows_body, SrcSink};
use super::*;

mod chunks;
mod copies;
mod pairs;

/// A small deterministic generator of values in [-2, 2).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
    }
    fn vec<T: Float>(&mut self, len: usize) -> Vec<T> {
        (0..len).map(|_| T::from_f64(self.next())).collect()
    }
}

/// Relative tolerance of a dtype's final rounding plus the f32 arithmetic.
fn tol<T: Float>() -> f64 {
    match core::mem::size_of::<T>() {
        8 => 1e-12,
        4 => 2e-5,
        _ if T::DTYPE == xla_ffi::DataType::F16 => 2.0f64.powi(-10),
        _ => 2.0f64.powi(-7),
    }
}

fn f64s<T: Float>(v: &[T]) -> Vec<f64> {
    v.iter().map(|t| t.to_f64()).collect()
}

/// The forward in f64: (y, inv_rms).
fn fwd_ref(x: &[f64], w: &[f64], eps: f64) -> (Vec<f64>, Vec<f64>) {
    let n = w.len();
    let rows = x.len().checked_div(n).unwrap_or(0);
    let (mut y, mut inv) = (Vec::new(), Vec::new());
    for r in 0..rows {
        let row = &x[r * n..(r + 1) * n];
        let ms = row.iter().map(|v| v * v).sum::<f64>() / n as f64;
        let ir = 1.0 / (ms + eps).sqrt();
        inv.push(ir);
        y.extend(row.iter().zip(w).map(|(v, wj)| v * ir * wj));
    }
    (y, inv)
}

/// The backward in f64, from the analytic formula: (dx, dw, per-element scale
/// of dx's terms, per-column scale of dw's terms) — the scales set tolerances.
#[allow(clippy::type_complexity)]
fn bwd_ref(dy: &[f64], x: &[f64], w: &[f64], inv: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = w.len();
    let (mut dx, mut dw, mut dx_scale, mut dw_scale) = (vec![], vec![0.0; n], vec![], vec![0.0; n]);
    for (r, &ir) in inv.iter().enumerate() {
        let (d, xr) = (&dy[r * n..(r + 1) * n], &x[r * n..(r + 1) * n]);
        let s: f64 = (0..n).map(|k| d[k] * w[k] * xr[k]).sum();
        let s_abs: f64 = (0..n).map(|k| (d[k] * w[k] * xr[k]).abs()).sum();
        let c = ir.powi(3) / n as f64;
        for j in 0..n {
            dx.push(ir * w[j] * d[j] - xr[j] * c * s);
            dx_scale.push((ir * w[j] * d[j]).abs() + (xr[j] * c * s_abs).abs());
            dw[j] += d[j] * xr[j] * ir;
            dw_scale[j] += (d[j] * xr[j] * ir).abs();
        }
    }
    (dx, dw, dx_scale, dw_scale)
}

fn assert_close(what: &str, got: &[f64], want: &[f64], scale: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, ((g, w), s)) in got.iter().zip(want).zip(scale).enumerate() {
        let bound = tol * s.abs().max(1e-30);
        assert!((g - w).abs() <= bound, "{what}[{i}]: got {g}, want {w} (|diff| {} > {bound})", (g - w).abs());
    }
}

/// Checks the forward for one dtype combination against the f64 reference, and
/// the public in-place kernel against the out-of-place one where `Y == X`.
fn check_fwd<X: Float, W: Float, Y: Float>(rows: usize, n: usize, seed: u64) {
    let mut g = Lcg(seed);
    let (x, w) = (g.vec::<X>(rows * n), g.vec::<W>(n));
    let eps = 1e-5;
    let mut y = vec![Y::default(); rows * n];
    let mut inv = vec![Y::Acc::default(); rows];
    fwd_block::<X, W, Y, _, Y::Acc>((&x[..], &mut y[..]), &w, Y::Acc::from_f64(eps), &mut inv, plain_rows);
    let (y_ref, inv_ref) = fwd_ref(&f64s(&x), &f64s(&w), eps);
    let what = format!("fwd {:?}/{:?}->{:?} {rows}x{n}", X::DTYPE, W::DTYPE, Y::DTYPE);
    assert_close(&format!("{what} inv"), &f64s(&inv), &inv_ref, &inv_ref, tol::<Y::Acc>());
    assert_close(&format!("{what} y"), &f64s(&y), &y_ref, &y_ref, tol::<Y>());
}

/// The in-place public kernel gives the same bits as the out-of-place block.
fn check_inplace<T: Float, W: Float>(rows: usize, n: usize, seed: u64) {
    let mut g = Lcg(seed);
    let (x, w) = (g.vec::<T>(rows * n), g.vec::<W>(n));
    let eps = T::Acc::from_f64(1e-6);
    let mut y = vec![T::default(); rows * n];
    let mut inv = vec![T::Acc::default(); rows];
    fwd_block::<T, W, T, _, T::Acc>((&x[..], &mut y[..]), &w, eps, &mut inv, plain_rows);
    let mut xy = x.clone();
    let mut inv_uninit = vec![MaybeUninit::new(T::Acc::default()); rows];
    fwd_rows_inplace::<T, W>(&mut xy, &w, eps, &mut inv_uninit);
    let bits = |v: &[T]| v.iter().map(|t| t.to_f64().to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&xy), bits(&y), "in place != out of place for {:?}/{:?} {rows}x{n}", T::DTYPE, W::DTYPE);
    // The in-place block with plain slots gives the same inv_rms.
    let mut xy2 = x.clone();
    let mut inv2 = vec![T::Acc::default(); rows];
    fwd_block::<T, W, T, _, T::Acc>(&mut xy2[..], &w, eps, &mut inv2, plain_rows);
    assert_eq!(bits(&xy2), bits(&y));
    assert_eq!(f64s(&inv2), f64s(&inv));
}

/// Checks the backward for one dtype combination against the analytic f64
/// formula, and the public kernel's `dw_acc` against the block's.
fn check_bwd<Y: Float, X: Float, W: Float>(rows: usize, n: usize, seed: u64) {
    let mut g = Lcg(seed);
    let (dy, x, w) = (g.vec::<Y>(rows * n), g.vec::<X>(rows * n), g.vec::<W>(n));
    // The kernel recomputes inv_rms from x; the reference's is exact.
    let (_, inv64) = fwd_ref(&f64s(&x), &f64s(&w), 1e-5);
    let eps = Y::Acc::from_f64(1e-5);
    let mut dx = vec![X::default(); rows * n];
    let mut dw = vec![Y::Acc::from_f64(0.5); n];
    bwd_block::<Y, X, W, X>(&dy, &x, &w, eps, &mut dx, &mut dw);
    let (dx_ref, dw_ref, dx_scale, dw_scale) = bwd_ref(&f64s(&dy), &f64s(&x), &f64s(&w), &inv64);
    let dw_ref: Vec<f64> = dw_ref.iter().map(|v| v + 0.5).collect();
    let dw_scale: Vec<f64> = dw_scale.iter().map(|v| v + 0.5).collect();
    let what = format!("bwd {:?}/{:?}/{:?} {rows}x{n}", Y::DTYPE, X::DTYPE, W::DTYPE);
    let t = tol::<X>().max(tol::<Y::Acc>());
    assert_close(&format!("{what} dx"), &f64s(&dx), &dx_ref, &dx_scale, t);
    assert_close(&format!("{what} dw"), &f64s(&dw), &dw_ref, &dw_scale, tol::<Y::Acc>());
    // Public kernel: same dweight bits.
    let mut dx_uninit = vec![MaybeUninit::new(X::default()); rows * n];
    let mut dw2 = vec![Y::Acc::from_f64(0.5); n];
    bwd_rows::<Y, X, W>(&dy, &x, &w, eps, &mut dx_uninit, &mut dw2);
    assert_eq!(f64s(&dw2), f64s(&dw), "{what}: public dw_acc");
}

const SHAPES: &[(usize, usize)] = &[(1, 1), (3, 7), (2, 32), (3, 33), (2, 100), (1, 257)];

/// The natural-layout row loop without prefetching, for the block kernels here
/// (the portable loop that every dispatched copy must match bit for bit), out of
/// place or in place.
fn plain_rows<X: Float, Y: Float, S: SrcSink<X, Y>, I: Slot<Y::Acc>>(
    io: S,
    w: &[Y::Acc],
    n: usize,
    eps: Y::Acc,
    inv: &mut [I],
) {
    rows_body(io, w, n, eps, inv, Natural, One(narrow::<Y, Y::Acc>), |_, _| {});
}

/// A long row's sums stay accurate: `inv_rms` (forward, through the public kernel)
/// and the backward's `dx` of rows of 16384 and 2^20 values, bf16 and f32, against
/// float64 formulas. With one running sum per lane the error grew with the row's
/// length (a relative 3e-6 in `inv_rms` at 2^20 bf16 values); the sums go group by
/// group ([`GROUP`]).
#[test]
fn long_rows_sum_accurately() {
    fn check<T: Float<Acc = f32>>(n: usize, seed: u64) {
        let mut g = Lcg(seed);
        let x: Vec<T> = (0..n).map(|_| T::from_f64(1.0 + 0.25 * g.next())).collect();
        let dy: Vec<T> = (0..n).map(|_| T::from_f64(1.0 + 0.2 * g.next())).collect();
        let w = vec![T::from_f64(1.0); n];
        let (xs, dys) = (f64s(&x), f64s(&dy));
        let ss: f64 = xs.iter().map(|v| v * v).sum();
        let r = 1.0 / (ss / n as f64 + 1e-5).sqrt();
        let (mut y, mut inv) = (vec![T::default(); n], vec![0f32; 1]);
        fwd_rows_io::<T, T, T, _, f32>((&x[..], &mut y[..]), &w, 1e-5, &mut inv);
        let err = (inv[0] as f64 - r).abs() / r;
        assert!(err <= 3e-7, "{:?} n = {n}: inv_rms relative error {err:e}", T::DTYPE);
        // The backward's dot product: dx_j = r w_j dy_j - x_j r^3 / n sum_k dy_k w_k x_k.
        let dot: f64 = dys.iter().zip(&xs).map(|(d, v)| d * v).sum();
        let c = r * r * r / n as f64 * dot;
        let mut dx = vec![0f32; n];
        let mut dw = vec![0f32; n];
        let xf: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
        let dyf: Vec<f32> = dys.iter().map(|&v| v as f32).collect();
        bwd_block::<f32, f32, f32, f32>(&dyf, &xf, &vec![1.0f32; n], 1e-5, &mut dx, &mut dw);
        let worst = (0..n)
            .map(|j| {
                let want = r * dys[j] - xs[j] * c;
                (dx[j] as f64 - want).abs() / (r * dys[j]).abs().max(xs[j] * c)
            })
            .fold(0.0, f64::max);
        assert!(worst <= 1e-6, "{:?} n = {n}: dx relative error {worst:e}", T::DTYPE);
    }
    for (k, n) in [16384, 1 << 20].into_iter().enumerate() {
        check::<bf16>(n, 41 + k as u64);
        check::<f32>(n, 51 + k as u64);
    }
}

#[test]
fn forward_matches_f64_reference() {
    for (k, &(rows, n)) in SHAPES.iter().enumerate() {
        let s = k as u64 + 1;
        check_fwd::<f32, f32, f32>(rows, n, s);
        check_fwd::<f64, f64, f64>(rows, n, s);
        check_fwd::<bf16, bf16, bf16>(rows, n, s);
        check_fwd::<f16, f16, f16>(rows, n, s);
        check_fwd::<bf16, f32, f32>(rows, n, s);
        check_fwd::<f32, bf16, f32>(rows, n, s);
        check_fwd::<f16, bf16, f32>(rows, n, s);
        check_fwd::<bf16, f16, f32>(rows, n, s);
        check_fwd::<f64, f32, f64>(rows, n, s);
        check_fwd::<f32, f64, f64>(rows, n, s);
        check_fwd::<bf16, f64, f64>(rows, n, s);
        check_fwd::<f64, f16, f64>(rows, n, s);
    }
}

#[test]
fn inplace_equals_out_of_place() {
    for (k, &(rows, n)) in SHAPES.iter().enumerate() {
        let s = k as u64 + 11;
        check_inplace::<f32, f32>(rows, n, s);
        check_inplace::<f32, bf16>(rows, n, s);
        check_inplace::<bf16, bf16>(rows, n, s);
        check_inplace::<f16, f16>(rows, n, s);
        check_inplace::<f64, f32>(rows, n, s);
        check_inplace::<f64, f64>(rows, n, s);
    }
}

#[test]
fn backward_matches_analytic_f64() {
    for (k, &(rows, n)) in SHAPES.iter().enumerate() {
        let s = k as u64 + 21;
        check_bwd::<f32, f32, f32>(rows, n, s);
        check_bwd::<f64, f64, f64>(rows, n, s);
        check_bwd::<bf16, bf16, bf16>(rows, n, s);
        check_bwd::<f16, f16, f16>(rows, n, s);
        check_bwd::<f32, bf16, f32>(rows, n, s);
        check_bwd::<f32, f32, bf16>(rows, n, s);
        check_bwd::<f32, f16, bf16>(rows, n, s);
        check_bwd::<f64, f32, f64>(rows, n, s);
        check_bwd::<f64, bf16, f64>(rows, n, s);
        check_bwd::<f64, f64, f16>(rows, n, s);
    }
}

/// The backward is the gradient of the forward: central differences of
/// `L = sum(y * g)` in f64 against `dx` and `dweight` from the kernels.
#[test]
fn backward_matches_finite_differences() {
    let (rows, n, eps) = (3, 37, 1e-3);
    let mut gen = Lcg(99);
    let (x, w, g) = (gen.vec::<f64>(rows * n), gen.vec::<f64>(n), gen.vec::<f64>(rows * n));
    let loss = |x: &[f64], w: &[f64]| {
        let mut y = vec![0.0; rows * n];
        let mut inv = vec![0.0; rows];
        fwd_block::<f64, f64, f64, _, f64>((x, &mut y[..]), w, eps, &mut inv, plain_rows);
        y.iter().zip(&g).map(|(a, b)| a * b).sum::<f64>()
    };
    let mut dx = vec![0.0; rows * n];
    let mut dw = vec![0.0; n];
    bwd_block::<f64, f64, f64, f64>(&g, &x, &w, eps, &mut dx, &mut dw);
    let h = 1e-6;
    for j in 0..rows * n {
        let (mut xp, mut xm) = (x.clone(), x.clone());
        xp[j] += h;
        xm[j] -= h;
        let fd = (loss(&xp, &w) - loss(&xm, &w)) / (2.0 * h);
        assert!((fd - dx[j]).abs() <= 1e-6 * (1.0 + fd.abs()), "dx[{j}]: fd {fd}, kernel {}", dx[j]);
    }
    for j in 0..n {
        let (mut wp, mut wm) = (w.clone(), w.clone());
        wp[j] += h;
        wm[j] -= h;
        let fd = (loss(&x, &wp) - loss(&x, &wm)) / (2.0 * h);
        assert!((fd - dw[j]).abs() <= 1e-6 * (1.0 + fd.abs()), "dw[{j}]: fd {fd}, kernel {}", dw[j]);
    }
}

/// Splitting rows into blocks that share one accumulator gives the same bits
/// (rows are added in order), and the public kernels agree with the blocks.
#[test]
fn backward_blocks_accumulate_in_order() {
    let (rows, n) = (5, 45);
    let mut g = Lcg(7);
    let (dy, x, w) = (g.vec::<f32>(rows * n), g.vec::<bf16>(rows * n), g.vec::<f32>(n));
    let mut dx = vec![bf16::ZERO; rows * n];
    let mut dw = vec![0f32; n];
    bwd_block::<f32, bf16, f32, bf16>(&dy, &x, &w, 1e-5, &mut dx, &mut dw);
    let mut dx2 = vec![bf16::ZERO; rows * n];
    let mut dw2 = vec![0f32; n];
    let split = 2 * n;
    bwd_block::<f32, bf16, f32, bf16>(&dy[..split], &x[..split], &w, 1e-5, &mut dx2[..split], &mut dw2);
    bwd_block::<f32, bf16, f32, bf16>(&dy[split..], &x[split..], &w, 1e-5, &mut dx2[split..], &mut dw2);
    assert_eq!(dw, dw2);
    assert_eq!(f64s(&dx), f64s(&dx2));
}

#[test]
fn zero_width_rows() {
    let eps = 0.25f32;
    let mut inv = vec![MaybeUninit::new(0f32); 3];
    fwd_rows::<f32, f32, f32>(&[], &[], eps, &mut [], &mut inv);
    let mut inv_plain = vec![0f32; 3];
    fwd_block::<f32, f32, f32, (&[f32], &mut [f32]), f32>((&[], &mut []), &[], eps, &mut inv_plain, plain_rows);
    assert_eq!(inv_plain, vec![2.0; 3]);
    let mut inv2 = vec![0f64; 2];
    fwd_block::<f64, bf16, f64, _, f64>(&mut [][..], &[], 0.0, &mut inv2, plain_rows);
    assert_eq!(inv2, vec![f64::INFINITY; 2], "eps = 0, n = 0: 1/sqrt(0)");
    let mut dw: Vec<f32> = vec![];
    bwd_rows::<f32, bf16, f16>(&[], &[], &[], eps, &mut [], &mut dw);
    bwd_block::<f32, bf16, f16, bf16>(&[], &[], &[], eps, &mut [], &mut dw);
}

/// The backward's inv_rms, recomputed from x, is the forward's to the bit: with
/// `dy = e_0` and `x_0 = 1`, a one-row call adds exactly `dy_0 * x_0 * r = r` to
/// `dweight_0`.
#[test]
fn backward_inv_rms_is_the_forwards_bit_for_bit() {
    fn check<T: Float>(n: usize, seed: u64) {
        let mut g = Lcg(seed);
        let eps = T::Acc::from_f64(1e-5);
        for _ in 0..20 {
            let mut x = g.vec::<T>(n);
            x[0] = T::from_f64(1.0);
            let w = g.vec::<T>(n);
            let (mut y, mut inv) = (vec![T::default(); n], vec![T::Acc::ZERO; 1]);
            fwd_block::<T, T, T, _, T::Acc>((&x[..], &mut y[..]), &w, eps, &mut inv, plain_rows);
            let mut dy = vec![T::from_f64(0.0); n];
            dy[0] = T::from_f64(1.0);
            let (mut dx, mut dw) = (vec![T::default(); n], vec![T::Acc::ZERO; n]);
            bwd_block::<T, T, T, T>(&dy, &x, &w, eps, &mut dx, &mut dw);
            assert_eq!(dw[0].to_f64().to_bits(), inv[0].to_f64().to_bits(), "{:?} n={n}", T::DTYPE);
        }
    }
    // Past 1024 the sums have two levels (`GROUP`): bf16 rows are summed in the pair
    // layout by the forward and in the natural one by the backward.
    for n in [1, 31, 32, 33, 100, 1000, 1024, 1025, 2048, 2049, 2079, 2080, 3000, 3103, 4096, 5000] {
        check::<f32>(n, 5);
        check::<f64>(n, 6);
        check::<bf16>(n, 7);
        check::<f16>(n, 8);
    }
}

/// Lengths that do not make whole rows are refused by the public kernel.
#[test]
#[should_panic(expected = "not a multiple of n")]
fn backward_refuses_a_partial_row() {
    let mut dw = vec![0f32; 4];
    bwd_rows::<f32, f32, f32>(&[0.0; 6], &[0.0; 6], &[1.0; 4], 1e-5, &mut [MaybeUninit::new(0.0); 6], &mut dw);
}

#[test]
fn zero_rows() {
    let w = vec![1.5f32; 40];
    fwd_rows::<bf16, f32, f32>(&[], &w, 1e-6, &mut [], &mut []);
    fwd_rows_inplace::<f32, f32>(&mut [], &w, 1e-6, &mut []);
    let mut dw = vec![0f32; 40];
    bwd_rows::<f32, f32, f32>(&[], &[], &w, 1e-6, &mut [], &mut dw);
    assert_eq!(dw, vec![0.0; 40]);
}

/// With eps 0, a row of small norm (f32: rms 1e-13, so inv_rms^3 = 1e39 is beyond
/// f32) has a finite gradient of order inv_rms; it came back inf.
#[test]
fn backward_of_a_tiny_row_with_eps_zero_is_finite() {
    let n = 8;
    let x: Vec<f32> = (0..n).map(|j| if j % 2 == 0 { 1e-13 } else { -5e-14 }).collect();
    let dy: Vec<f32> = (0..n).map(|j| 0.5 + j as f32 * 0.25).collect();
    let w = vec![1.0f32; n];
    let (mut dx, mut dw) = (vec![0f32; n], vec![0f32; n]);
    bwd_block::<f32, f32, f32, f32>(&dy, &x, &w, 0.0, &mut dx, &mut dw);
    let (xs, dys) = (f64s(&x), f64s(&dy));
    let (_, inv) = fwd_ref(&xs, &vec![1.0; n], 0.0);
    let (dx_ref, _, dx_scale, _) = bwd_ref(&dys, &xs, &vec![1.0; n], &inv);
    assert_close("dx of a tiny row", &f64s(&dx), &dx_ref, &dx_scale, 1e-5);
}

#[test]
fn all_zero_row_gives_zero_output() {
    let (x, w) = (vec![0f32; 50], vec![1f32; 50]);
    let mut y = vec![1f32; 50];
    let mut inv = vec![0f32; 1];
    fwd_block::<f32, f32, f32, _, f32>((&x[..], &mut y[..]), &w, 1e-6, &mut inv, plain_rows);
    assert_eq!(y, vec![0.0; 50]);
    assert!((inv[0] - 1000.0).abs() < 1e-2, "inv {}", inv[0]);
}

/// Under Miri (slow), every `STEP`-th 16-bit pattern only.
const STEP: usize = if cfg!(miri) { 251 } else { 1 };

/// A chunk of `inputs[start..]`, padded with `pad`.
fn chunk_of<T: Copy>(inputs: &[T], start: usize, pad: T) -> [T; L] {
    core::array::from_fn(|i| inputs.get(start + i).copied().unwrap_or(pad))
}

#[test]
#[should_panic(expected = "x has 10 elements")]
fn fwd_length_mismatch_panics() {
    let mut y = vec![MaybeUninit::new(0f32); 12];
    let mut inv = vec![MaybeUninit::new(0f32); 3];
    fwd_rows::<f32, f32, f32>(&[0.0; 10], &[1.0; 4], 1e-6, &mut y, &mut inv);
}

#[test]
#[should_panic(expected = "dw_acc has 3 elements")]
fn bwd_length_mismatch_panics() {
    let mut dx = vec![MaybeUninit::new(0f32); 8];
    bwd_rows::<f32, f32, f32>(&[0.0; 8], &[0.0; 8], &[1.0; 4], 1e-6, &mut dx, &mut [0.0; 3]);
}

