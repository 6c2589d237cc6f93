//! Tests of the RMS-norm CPU kernels against f64 references (a child module of
//! `kernel.rs`, so they can run the kernels on initialized output buffers).

use half::{bf16, f16};

use super::super::convert::bf16_bits_to_f32;
use super::chunk::load;
use super::pairs::{load_pairs, narrow_pairs, pair, sum_sq_pairs, unpair};
use super::rows::{all_finite, products_have_no_nan, rows_body, scale_row, SrcSink};
use super::*;

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

/// A backward kernel into plain slices: `(dy, x, w, eps, dx, dw_acc)`.
type BwdKernel<Y, X, W> = fn(&[Y], &[X], &[W], <Y as Float>::Acc, &mut [X], &mut [<Y as Float>::Acc]);

/// The run-time-dispatched copies of the backward (AVX-512 for `bf16` rows, AVX2,
/// baseline) give the bits of the block kernel compiled for the baseline target,
/// `dx` and `dweight` alike.
fn check_bwd_copies<Y: Float, X: Float, W: Float>(rows: usize, n: usize, seed: u64) {
    let mut g = Lcg(seed);
    let (dy, x, w) = (g.vec::<Y>(rows * n), g.vec::<X>(rows * n), g.vec::<W>(n));
    let eps = Y::Acc::from_f64(1e-5);
    let run = |k: BwdKernel<Y, X, W>| {
        let (mut dx, mut dw) = (vec![X::default(); rows * n], vec![Y::Acc::from_f64(0.25); n]);
        k(&dy, &x, &w, eps, &mut dx, &mut dw);
        (
            f64s(&dx).iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            f64s(&dw).iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        )
    };
    let what = format!("bwd copies {:?}/{:?}/{:?} {rows}x{n}", Y::DTYPE, X::DTYPE, W::DTYPE);
    let want = run(bwd_block::<Y, X, W, X>);
    assert!(run(bwd_rows_bf16::<Y, X, W, X>) == want, "{what}: the bf16 (AVX-512) copy");
    assert!(run(bwd_rows_256::<Y, X, W, X>) == want, "{what}: the AVX2 copy");
}

#[test]
fn backward_copies_give_the_same_bits() {
    for (k, &(rows, n)) in SHAPES.iter().chain(&[(64, 512), (5, 4096)]).enumerate() {
        let s = k as u64 + 11;
        check_bwd_copies::<bf16, bf16, bf16>(rows, n, s);
        check_bwd_copies::<f32, bf16, f32>(rows, n, s);
        check_bwd_copies::<f32, bf16, bf16>(rows, n, s);
        check_bwd_copies::<f32, f32, f32>(rows, n, s);
        check_bwd_copies::<f16, f16, f16>(rows, n, s);
    }
}

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

/// The run-time-dispatched public forward (on x86-64 with AVX2, the loops that
/// prefetch the next row) gives the bits of the portable block kernel, out of
/// place and in place, `y` and `inv_rms` alike: one row, rows shorter than a
/// chunk, rows of a partial last chunk, and rows longer than a page.
fn check_fwd_copies<T: Float, W: Float>(rows: usize, n: usize, seed: u64) {
    let mut g = Lcg(seed);
    let (x, w) = (g.vec::<T>(rows * n), g.vec::<W>(n));
    let eps = T::Acc::from_f64(1e-5);
    let bits = |v: &[f64]| v.iter().map(|t| t.to_bits()).collect::<Vec<_>>();
    let (mut y, mut inv) = (vec![T::default(); rows * n], vec![T::Acc::default(); rows]);
    fwd_block::<T, W, T, _, T::Acc>((&x[..], &mut y[..]), &w, eps, &mut inv, plain_rows);
    let what = format!("fwd copies {:?}/{:?} {rows}x{n}", T::DTYPE, W::DTYPE);
    let (mut y2, mut inv2) = (vec![T::default(); rows * n], vec![T::Acc::default(); rows]);
    fwd_rows_io::<T, W, T, _, T::Acc>((&x[..], &mut y2[..]), &w, eps, &mut inv2);
    assert_eq!(bits(&f64s(&y2)), bits(&f64s(&y)), "{what}: y out of place");
    assert_eq!(bits(&f64s(&inv2)), bits(&f64s(&inv)), "{what}: inv_rms out of place");
    let (mut xy, mut inv3) = (x.clone(), vec![T::Acc::default(); rows]);
    fwd_rows_io::<T, W, T, _, T::Acc>(&mut xy[..], &w, eps, &mut inv3);
    assert_eq!(bits(&f64s(&xy)), bits(&f64s(&y)), "{what}: y in place");
    assert_eq!(bits(&f64s(&inv3)), bits(&f64s(&inv)), "{what}: inv_rms in place");
}

#[test]
fn forward_copies_give_the_same_bits() {
    for (k, &(rows, n)) in SHAPES.iter().chain(&[(64, 512), (5, 4096), (3, 1), (4, 33), (2, 1100)]).enumerate() {
        let s = k as u64 + 31;
        check_fwd_copies::<f32, f32>(rows, n, s);
        check_fwd_copies::<f32, bf16>(rows, n, s);
        check_fwd_copies::<f64, f64>(rows, n, s);
        check_fwd_copies::<f64, f32>(rows, n, s);
        check_fwd_copies::<f16, f16>(rows, n, s);
        check_fwd_copies::<bf16, bf16>(rows, n, s);
    }
}

/// The pair layout's sum of squares keeps the groups of the natural one bit for
/// bit, where the order of the group additions shows. Only the first lane is
/// nonzero: 512 in the first group, so the lane sums to 2^23 there, then 1/8 (a
/// whole group sums to 0.5, absorbed when added to 2^23 alone, as a tie), and 3/8
/// in a partial last chunk (whose 9/64 tips a partial group of 24 chunks, 3/8,
/// over the half). Rows whose partial last chunk closes a partial group, is a
/// group of its own, or is absent.
#[test]
fn pair_sum_adds_the_natural_sums_groups_in_order() {
    for n in [1024, 1025, 1056, 1797, 2048, 2079, 2080, 2111, 2821, 3072, 3103, 4096 + 17] {
        let whole = n / L * L;
        let value = |i: usize| match i {
            _ if !i.is_multiple_of(L) => 0.0,
            _ if i < L * GROUP => 512.0,
            _ if i < whole => 0.125,
            _ => 0.375,
        };
        let x: Vec<bf16> = (0..n).map(|i| bf16::from_f32(value(i))).collect();
        let (want, got) = (sum_sq::<bf16, f32>(&x), sum_sq_pairs::<bf16, f32>(&x));
        assert_eq!(got.to_bits(), want.to_bits(), "n={n}: pairs {got}, natural {want}");
    }
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
        fwd_block::<f64, f64, f64, _, f64>((&x[..], &mut y[..]), w, eps, &mut inv, plain_rows);
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

/// The chunk widening (`load`), which picks each dtype's conversion by downcasts,
/// gives `half`'s results on all 65536 `bf16` and `f16` values: `f16` bit for
/// bit; `bf16` as `convert`'s exact widening (tested against `half` there).
#[test]
fn chunk_widening_matches_half_on_every_16_bit_value() {
    let all: Vec<u16> = (0..=u16::MAX).step_by(STEP).collect();
    for start in (0..all.len()).step_by(L) {
        let bits = chunk_of(&all, start, 0);
        let (b, h) = (bits.map(bf16::from_bits), bits.map(f16::from_bits));
        let (bw, bd) = (load::<bf16, f32>(&b), load::<bf16, f64>(&b));
        let hw = load::<f16, f32>(&h);
        for i in 0..L {
            let what = format!("{:#06x}", bits[i]);
            assert_eq!(bw[i].to_bits(), bf16_bits_to_f32(bits[i]).to_bits(), "bf16 {what} -> f32");
            assert!(bd[i] == b[i].to_f64() || (bd[i].is_nan() && b[i].is_nan()), "bf16 {what} -> f64");
            assert_eq!(hw[i].to_bits(), h[i].to_f32().to_bits(), "f16 {what} -> f32");
        }
    }
}

/// The chunk narrowing (`narrow`) gives `half`'s `bf16` and `f16` bits on every
/// rounding case of `f32` (ties, overflow to infinity, subnormals, NaNs), with
/// NaN and non-NaN lanes mixed in one chunk.
#[test]
fn chunk_narrowing_matches_half() {
    let inputs = super::super::convert::tests::narrowing_inputs();
    for start in (0..inputs.len()).step_by(L) {
        let wide = chunk_of(&inputs, start, 0.0);
        let (b, h) = (narrow::<bf16, f32>(&wide), narrow::<f16, f32>(&wide));
        for i in 0..L {
            let what = format!("{:e} ({:#010x})", wide[i], wide[i].to_bits());
            assert_eq!(b[i].to_bits(), bf16::from_f32(wide[i]).to_bits(), "bf16 of {what}");
            assert_eq!(h[i].to_bits(), f16::from_f32(wide[i]).to_bits(), "f16 of {what}");
        }
    }
}

#[test]
fn chunk_conversions_round_trip() {
    let mut g = Lcg(3);
    let wide: [f32; L] = core::array::from_fn(|_| g.next() as f32 * 1000.0);
    let h: [f16; L] = narrow::<f16, f32>(&wide);
    let b: [bf16; L] = narrow::<bf16, f32>(&wide);
    let d: [f64; L] = load::<f32, f64>(&wide);
    for i in 0..L {
        assert_eq!(h[i], f16::from_f32(wide[i]));
        assert_eq!(b[i], bf16::from_f32(wide[i]));
        assert_eq!(d[i], wide[i] as f64);
    }
    let hw: [f32; L] = load::<f16, f32>(&h);
    let bw: [f64; L] = load::<bf16, f64>(&b);
    for i in 0..L {
        assert_eq!(hw[i], h[i].to_f32());
        assert_eq!(bw[i], b[i].to_f64());
    }
    let back: [bf16; L] = narrow::<bf16, f64>(&d);
    assert_eq!(back, b);
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

/// The pair layout's widening gives, lane by lane once put back in natural order,
/// the exact widening of every `bf16` value, in both halves of a pair word.
#[test]
fn pair_widening_matches_half_on_every_bf16() {
    let all: Vec<u16> = (0..=u16::MAX).step_by(STEP).collect();
    for shift in [0, 1] {
        for start in (0..all.len()).step_by(L) {
            let bits = chunk_of(&all, start + shift, 0);
            let b = bits.map(bf16::from_bits);
            let got = unpair(load_pairs::<bf16, f32>(&b));
            for i in 0..L {
                assert_eq!(got[i].to_bits(), bf16_bits_to_f32(bits[i]).to_bits(), "bf16 {:#06x}", bits[i]);
            }
        }
    }
}

/// The pair layout's narrowing gives `half`'s `bf16` bits on every rounding case
/// (NaNs included), in both halves of a pair word, and inverts the widening.
#[test]
fn pair_narrowing_matches_half() {
    let inputs = super::super::convert::tests::narrowing_inputs();
    for shift in [0, 1] {
        for start in (0..inputs.len()).step_by(L) {
            let wide = chunk_of(&inputs, start + shift, 0.0);
            let b = narrow_pairs::<bf16, f32>(&pair(wide));
            for i in 0..L {
                let what = format!("{:e} ({:#010x})", wide[i], wide[i].to_bits());
                assert_eq!(b[i].to_bits(), bf16::from_f32(wide[i]).to_bits(), "bf16 of {what}");
            }
            let back = narrow_pairs::<bf16, f32>(&load_pairs::<bf16, f32>(&b));
            assert_eq!(back.map(|v| v.to_bits()), b.map(|v| v.to_bits()), "round trip");
        }
    }
}

/// `bf16_avx512::narrow` where the CPU has AVX-512 BF16 (the dispatch picks the
/// copy compiled for it), else `None`.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl+avx512dq+avx512bf16"))]
fn narrow_pairs_bf16_instr(src: &[f32; L]) -> Option<[bf16; L]> {
    match_target! {
        "x86_64+avx512bf16" => Some(bf16_avx512::narrow::<bf16, f32>(src)),
        _ => {
            let _ = src;
            None
        }
    }
}

/// Whether this CPU has AVX-512 BF16 (and the other features of its copies).
fn has_avx512_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512dq") && has!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The AVX-512 BF16 narrowing (`vcvtne2ps2bf16`, and the integer rounding for a
/// chunk that holds a subnormal, which the instruction reads as zero) gives
/// `half`'s `bf16` bits on every rounding case (NaNs, infinities, overflow and
/// subnormals included), in both halves of a pair word. On a CPU without AVX-512
/// BF16 it checks only that the dispatch found none.
#[test]
fn avx512_bf16_narrowing_matches_half() {
    let inputs = super::super::convert::tests::narrowing_inputs();
    let (mut by_instruction, mut with_subnormal) = (0, 0);
    for shift in [0, 1] {
        for start in (0..inputs.len()).step_by(L) {
            let wide = chunk_of(&inputs, start + shift, 0.0);
            let Some(b) = narrow_pairs_bf16_instr(&pair(wide)) else {
                assert!(!has_avx512_bf16(), "the CPU has AVX-512 BF16 but its copy was not dispatched");
                return;
            };
            if wide.iter().any(|v| v.is_subnormal()) {
                with_subnormal += 1;
            } else {
                by_instruction += 1;
            }
            for i in 0..L {
                let what = format!("{:e} ({:#010x})", wide[i], wide[i].to_bits());
                assert_eq!(b[i].to_bits(), bf16::from_f32(wide[i]).to_bits(), "bf16 of {what}");
            }
        }
    }
    assert!(
        by_instruction > 1000 && with_subnormal > 100,
        "{by_instruction} chunks by the instruction, {with_subnormal} with a subnormal"
    );
}

/// `bf16_avx2::narrow_no_nan` where the CPU has AVX2 (the dispatch picks the copy
/// compiled for it), else `None`.
#[multiversion(targets("x86_64+avx2+fma"))]
fn narrow_pairs_avx2_no_nan(src: &[f32; L]) -> Option<[bf16; L]> {
    match_target! {
        "x86_64+avx2" => Some(bf16_avx2::narrow_no_nan::<bf16, f32>(src)),
        _ => {
            let _ = src;
            None
        }
    }
}

/// Whether this CPU has AVX2 and FMA (the features of the AVX2 copies).
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The AVX2 narrowing of the rows that cannot hold a NaN gives `half`'s `bf16`
/// bits on every rounding case but NaN (ties, infinities, values that round past
/// the largest `bf16` to infinity, subnormals, both signs), in both halves of a
/// pair word. On a CPU without AVX2 it checks only that the dispatch found none.
#[test]
fn avx2_no_nan_narrowing_matches_half() {
    let inputs: Vec<f32> =
        super::super::convert::tests::narrowing_inputs().into_iter().filter(|v| !v.is_nan()).collect();
    let overflows = |v: &f32| v.is_finite() && bf16::from_f32(*v).is_infinite();
    assert!(inputs.iter().any(|v| v.is_infinite()) && inputs.iter().any(overflows));
    let mut chunks = 0;
    for shift in [0, 1] {
        for start in (0..inputs.len()).step_by(L) {
            let wide = chunk_of(&inputs, start + shift, 0.0);
            let Some(b) = narrow_pairs_avx2_no_nan(&pair(wide)) else {
                assert!(!has_avx2(), "the CPU has AVX2 but its copy was not dispatched");
                return;
            };
            chunks += 1;
            for i in 0..L {
                let what = format!("{:e} ({:#010x})", wide[i], wide[i].to_bits());
                assert_eq!(b[i].to_bits(), bf16::from_f32(wide[i]).to_bits(), "bf16 of {what}");
            }
        }
    }
    assert!(chunks > 1000, "{chunks} chunks");
}

/// Which rows may narrow without the NaN case: rows of finite values with a
/// finite `r` and `eps >= 0`, whatever their products' size, and a weight with
/// no infinity or NaN; not a zero row with `eps` 0 (`r` infinite: `0 * r` is
/// NaN), an infinite or NaN `x`, a negative or NaN `eps`, or a weight with an
/// infinity.
#[test]
fn no_nan_rows_are_those_whose_products_cannot_be_nan() {
    let decide = |x: &[f32], eps: f32, w: &[f32]| {
        let s = x.iter().map(|v| v * v).sum::<f32>();
        products_have_no_nan(s, inv_rms(s, x.len(), eps), eps, all_finite(&pair_weight(w)))
    };
    let w = [1.0f32, -3e38, 0.0];
    assert!(decide(&[1.0, -2.0, 3.0], 1e-5, &w));
    assert!(decide(&[1e-30, 0.0, -1e-30], 1e-45, &w), "squares underflow, r huge, products small");
    assert!(decide(&[0.0; 3], 1e-5, &w));
    assert!(!decide(&[0.0; 3], 0.0, &w), "r infinite");
    assert!(!decide(&[1e30, 0.0, 1.0], 1e-5, &w), "a square overflows");
    assert!(!decide(&[f32::INFINITY, 0.0, 1.0], 1e-5, &w));
    assert!(!decide(&[f32::NAN, 0.0, 1.0], 1e-5, &w));
    assert!(!decide(&[1.0, 2.0, 3.0], -1e-5, &w));
    assert!(!decide(&[1.0, 2.0, 3.0], f32::NAN, &w));
    assert!(!decide(&[1.0, 2.0, 3.0], 1e-5, &[1.0, f32::INFINITY, 0.0]));
    assert!(!decide(&[1.0, 2.0, 3.0], 1e-5, &[1.0, f32::NAN, 0.0]));
    let long: Vec<f32> = (0..100).map(|i| i as f32).collect();
    assert!(all_finite(&long) && !all_finite(&[long.as_slice(), &[f32::NEG_INFINITY]].concat()));
}

/// The dispatched bf16 row loops (on an AVX2 CPU, the copy that narrows the rows
/// without a NaN without the NaN case) give the portable loops' bits at the edges
/// of that choice: products that overflow to infinity (weights near the largest
/// `f32`), squares that underflow to zero (with `eps` 0, `r` is infinite and the
/// products NaN; with the least positive `eps`, `r` is huge and the products
/// finite), squares that overflow, infinite and NaN inputs, a negative and a NaN
/// `eps`, and weights with an infinity or a NaN (one whose payload the rounding
/// would carry into the sign); in place and out of place.
#[test]
fn dispatched_pair_rows_give_the_portable_bits_at_the_edges_of_the_no_nan_rows() {
    let n = 67;
    let mut g = Lcg(90);
    let base: Vec<f32> = g.vec::<f32>(n);
    let scaled = |k: f32| base.iter().map(|v| bf16::from_f32(v * k)).collect::<Vec<_>>();
    let with = |v: f32| {
        let mut r = scaled(1.0);
        r[n / 2] = bf16::from_f32(v);
        r
    };
    let x: Vec<bf16> = [
        scaled(1.0),
        scaled(0.0),
        scaled(1e-38),
        scaled(1e18),
        scaled(1e30),
        with(f32::INFINITY),
        with(f32::NAN),
        scaled(1.0),
    ]
    .concat();
    let rows = x.len() / n;
    let w_rand: Vec<f32> = g.vec::<f32>(n);
    let huge: Vec<f32> = w_rand.iter().map(|v| v * 3e38).collect();
    let mut w_inf = w_rand.clone();
    w_inf[3] = f32::INFINITY;
    // NaNs whose low 16 bits are set (quiet, and signalling: the multiply quiets it),
    // which the rounding without the NaN case would carry into the sign bit.
    let mut w_nan = w_rand.clone();
    (w_nan[5], w_nan[40]) = (f32::from_bits(0x7FFF_FFFF), f32::from_bits(0xFFBF_FFFF));
    let (mut infinite, mut finite) = (0, 0);
    for w in [&w_rand, &huge, &w_inf, &w_nan] {
        let w = pair_weight(w);
        for eps in [1e-5f32, 0.0, f32::from_bits(1), -1e-5, f32::NAN] {
            let (mut want, mut want_inv) = (x.clone(), vec![0f32; rows]);
            let narrow = One(narrow_pairs::<bf16, f32>);
            rows_body(&mut want[..], &w, n, eps, &mut want_inv, Pairs, narrow, |_, _| {});
            let (mut got, mut got_inv) = (x.clone(), vec![0f32; rows]);
            pair_rows::<bf16, bf16, _, f32>(&mut got[..], &w, n, eps, &mut got_inv);
            let (mut y, mut y_inv) = (vec![bf16::ZERO; rows * n], vec![0f32; rows]);
            pair_rows::<bf16, bf16, _, f32>((&x[..], &mut y[..]), &w, n, eps, &mut y_inv);
            for (what, v, inv) in [("in place", &got, &got_inv), ("out of place", &y, &y_inv)] {
                assert!(bits_nan_as_one(v) == bits_nan_as_one(&want), "eps {eps:e}, {what}: y");
                assert!(bits_nan_as_one(inv) == bits_nan_as_one(&want_inv), "eps {eps:e}, {what}: inv_rms");
            }
            infinite += want.iter().filter(|v| v.is_infinite()).count();
            finite += want.iter().filter(|v| v.is_finite() && **v != bf16::ZERO).count();
        }
    }
    assert!(infinite > 100 && finite > 1000, "{infinite} infinite, {finite} finite nonzero outputs");
}

/// The bf16 forward (pair layout, in place and out of place) gives the bits of the
/// natural layout's row functions, on rows with NaNs, infinities, subnormals and
/// partial chunks (also at the end of a row longer than one group of the sums),
/// with a bf16 and an f32 weight.
#[test]
fn pair_layout_forward_gives_the_natural_layouts_bits() {
    fn natural(x: &[bf16], w: &[f32], n: usize, eps: f32) -> (Vec<bf16>, Vec<f32>) {
        let (mut y, mut inv) = (x.to_vec(), Vec::new());
        for row in y.chunks_exact_mut(n) {
            let r = inv_rms(sum_sq::<bf16, f32>(row), n, eps);
            inv.push(r);
            scale_row::<bf16, bf16, f32, _, Natural>(row, w, r, narrow::<bf16, f32>, |_| {});
        }
        (y, inv)
    }
    let specials = [0x7FC0u16, 0x7F81, 0xFF80, 0x7F80, 0x0001, 0x8000, 0x7F7F, 0x0080];
    for (k, &n) in [1usize, 2, 31, 32, 33, 63, 64, 100, 1025, 2049, 2079, 3000, 3103, 4096].iter().enumerate() {
        let rows = 3;
        let mut g = Lcg(40 + k as u64);
        let mut x = g.vec::<bf16>(rows * n);
        // Row 0 clean; row 1 with one special value; row 2 scaled to subnormals.
        if n > 1 {
            x[n + (n / 2)] = bf16::from_bits(specials[k % specials.len()]);
        }
        for v in &mut x[2 * n..] {
            *v = bf16::from_f32(v.to_f32() * 1e-39);
        }
        let wb = g.vec::<bf16>(n);
        let wf: Vec<f32> = g.vec::<f32>(n);
        let eps = 1e-5f32;
        for wide in [widen_weight::<bf16, f32>(&wb), wf.clone()] {
            let (want_y, want_inv) = natural(&x, &wide, n, eps);
            let mut xy = x.clone();
            let mut inv = vec![0f32; rows];
            if wide == wf {
                fwd_block::<bf16, f32, bf16, _, f32>(&mut xy[..], &wf, eps, &mut inv, plain_rows);
            } else {
                fwd_block::<bf16, bf16, bf16, _, f32>(&mut xy[..], &wb, eps, &mut inv, plain_rows);
                let (mut y, mut inv2) = (vec![bf16::ZERO; rows * n], vec![0f32; rows]);
                fwd_block::<bf16, bf16, bf16, _, f32>((&x[..], &mut y[..]), &wb, eps, &mut inv2, plain_rows);
                assert_eq!(
                    y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    xy.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "n={n}: out of place"
                );
                assert_eq!(
                    inv2.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    inv.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                );
            }
            let bits = |v: &[bf16]| v.iter().map(|b| b.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&xy), bits(&want_y), "n={n}: y");
            let fbits = |v: &[f32]| v.iter().map(|b| b.to_bits()).collect::<Vec<_>>();
            assert_eq!(fbits(&inv), fbits(&want_inv), "n={n}: inv_rms");
        }
    }
}

/// The bits of `v`, with every NaN as one canonical quiet NaN: a NaN's payload
/// after arithmetic is unspecified (LLVM may commute a multiply, and x86 keeps
/// the first operand's NaN), so copies compiled for different CPUs may differ in
/// it where two NaNs meet (a NaN `x` times a NaN `inv_rms`).
fn bits_nan_as_one<T: Float>(v: &[T]) -> Vec<u64> {
    v.iter().map(|t| if t.to_f64().is_nan() { u64::MAX } else { t.to_f64().to_bits() }).collect()
}

/// The dispatched bf16 row loops (on a CPU with AVX-512, its copy; with AVX-512
/// BF16 too, the copy that narrows with `vcvtne2ps2bf16`; with AVX2 alone, the copy
/// that prefetches the next row) give the bits of
/// the portable ones (compiled here for baseline x86-64, the fallback of CPUs
/// without it), in place and out of place, over every `bf16` value as input, rows
/// whose width is and is not a multiple of the chunk, and a random `f32` weight
/// (so the narrowing rounds arbitrary products); the outputs include NaN rows,
/// finite values and subnormals (checked). NaNs compare as NaNs (see
/// [`bits_nan_as_one`]); every other value bit for bit.
#[test]
fn dispatched_pair_rows_give_the_portable_bits_on_every_bf16() {
    let all: Vec<u16> = (0..=u16::MAX).step_by(STEP).collect();
    for (k, &n) in [32usize, 33, 100, 4095].iter().enumerate() {
        let rows = all.len().div_ceil(n);
        let x: Vec<bf16> = (0..rows * n).map(|i| bf16::from_bits(all[i % all.len()])).collect();
        let w = pair_weight(&Lcg(70 + k as u64).vec::<f32>(n));
        let eps = 1e-5f32;
        let (mut want, mut want_inv) = (x.clone(), vec![0f32; rows]);
        rows_body(&mut want[..], &w, n, eps, &mut want_inv, Pairs, One(narrow_pairs::<bf16, f32>), |_, _| {});
        let (want_bits, want_inv_bits) = (bits_nan_as_one(&want), bits_nan_as_one(&want_inv));
        let (mut got, mut got_inv) = (x.clone(), vec![0f32; rows]);
        pair_rows::<bf16, bf16, _, f32>(&mut got[..], &w, n, eps, &mut got_inv);
        assert!(bits_nan_as_one(&got) == want_bits, "n={n}: in place, y");
        assert!(bits_nan_as_one(&got_inv) == want_inv_bits, "n={n}: in place, inv_rms");
        for dispatched in [true, false] {
            let (mut y, mut y_inv) = (vec![bf16::ZERO; rows * n], vec![0f32; rows]);
            if dispatched {
                pair_rows::<bf16, bf16, _, f32>((&x[..], &mut y[..]), &w, n, eps, &mut y_inv);
            } else {
                let narrow = One(narrow_pairs::<bf16, f32>);
                rows_body((&x[..], &mut y[..]), &w, n, eps, &mut y_inv, Pairs, narrow, |_, _| {});
            }
            assert!(bits_nan_as_one(&y) == want_bits, "n={n}: out of place (dispatched {dispatched}), y");
            assert!(bits_nan_as_one(&y_inv) == want_inv_bits, "n={n}: out of place (dispatched {dispatched}), inv");
        }
        // The outputs are not degenerate: NaN rows, finite rows, subnormals.
        let has = |f: fn(&bf16) -> bool| want.iter().any(f);
        assert!(has(|v| v.is_nan()) && has(|v| v.is_finite() && *v != bf16::ZERO), "n={n}");
        assert!(has(|v| v.to_bits() & 0x7F80 == 0 && v.to_bits() & 0x7F != 0), "n={n}: a subnormal output");
    }
}
