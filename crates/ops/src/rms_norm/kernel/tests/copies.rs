//! The run-time-dispatched copies of the kernels (compiled for AVX2, AVX-512 and
//! the baseline, chosen by the CPU) give the bits of the portable block kernels,
//! forward and backward.

use super::*;

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
