//! The CPU handlers of `xla_ffi_rs.kepler`, of its derivative targets
//! `xla_ffi_rs.kepler_tangent` and `xla_ffi_rs.kepler_cotangent`, and of the fused
//! forward + tangent `xla_ffi_rs.kepler_jvp` (with its scalar-tangent variants
//! `xla_ffi_rs.kepler_jvp_dm` and `xla_ffi_rs.kepler_jvp_const`).

use core::mem::MaybeUninit;

use xla_ffi::{handler, Buffer, Context, DataType, Element, Parts, Result, ResultBuffer};

use super::jvp;
use super::shapes::{F32OrF64, JvpVariant};
use super::solver;
use super::tangent::{self, Direction};
use crate::parallel::{block_count, block_len, run_blocks};

/// The cost of one element of the solver relative to a memory pass, for blocking.
const WORK_PER_ELEMENT: usize = 16;
/// The same for the tangent maps (one division, memory-bound).
const TANGENT_WORK_PER_ELEMENT: usize = 2;

/// Runs `f(start, end, out0, out1)` over `[0, n)`, split into blocks on XLA's pool
/// when the call is large enough to pay for it; `out0`, `out1` are the two results'
/// elements `start..end`. Both results get the huge-page advice first (fresh
/// results fault page by page on first write; see `advise_huge_pages`).
fn two_results_parallel<T: Element + Send + Sync>(
    ctx: &Context<'_>,
    n: usize,
    work_per_element: usize,
    (r0, r1): Results<'_, '_, '_>,
    f: impl Fn(usize, usize, &mut [MaybeUninit<T>], &mut [MaybeUninit<T>]) + Sync,
) -> Result<()> {
    r0.advise_huge_pages();
    r1.advise_huge_pages();
    let (o0, o1) = (r0.typed_uninit::<T>()?, r1.typed_uninit::<T>()?);
    let blocks = block_count(ctx, n, work_per_element);
    if blocks <= 1 {
        // Small calls: no parts, no pool (what a call costs matters here).
        f(0, n, o0, o1);
        return Ok(());
    }
    split_two_results(ctx, n, blocks, (o0, o1), f)
}

/// [`two_results_parallel`] for a call split into `blocks` on XLA's pool. Out of
/// line: the small call's code stays together.
#[inline(never)]
fn split_two_results<T: Element + Send + Sync>(
    ctx: &Context<'_>,
    n: usize,
    blocks: usize,
    (o0, o1): (&mut [MaybeUninit<T>], &mut [MaybeUninit<T>]),
    f: impl Fn(usize, usize, &mut [MaybeUninit<T>], &mut [MaybeUninit<T>]) + Sync,
) -> Result<()> {
    let len = block_len(n, blocks);
    let (p0, p1) = (Parts::new(o0, len), Parts::new(o1, len));
    run_blocks(ctx, p0.len(), |i| {
        let ((start, o0), (_, o1)) = (p0.take(i), p1.take(i));
        f(start, start + o0.len(), o0, o1);
    })
}

/// The two results, borrowed (the views stay where the shim decoded them).
type Results<'a, 'f, 'g> = (&'a mut ResultBuffer<'f, F32OrF64>, &'a mut ResultBuffer<'g, F32OrF64>);

/// A slice solver: `(M, e, sin E, cos E)`.
type Solve<T> = fn(&[T], &[T], &mut [MaybeUninit<T>], &mut [MaybeUninit<T>]);

/// Runs `solve` over the whole call on XLA's pool.
fn solve_parallel<T: Element + Sync + Send>(
    ctx: &Context<'_>,
    solve: Solve<T>,
    (m, e): (&Buffer<'_, F32OrF64>, &Buffer<'_, F32OrF64>),
    results: Results<'_, '_, '_>,
) -> Result<()> {
    let (m, e) = (m.typed::<T>()?, e.typed::<T>()?);
    two_results_parallel(ctx, m.len(), WORK_PER_ELEMENT, results, |start, end, s, c| {
        solve(&m[start..end], &e[start..end], s, c)
    })
}

/// Solves Kepler's equation elementwise on XLA's CPU thread pool.
///
/// Operands `(mean_anomaly, eccentricity)`, same shape, both `float32` or both
/// `float64`; results `(sin_E, cos_E)` of that shape and dtype. An eccentricity
/// outside `[0, 1)`, or a NaN, gives NaN for that element.
#[handler(
    target = "xla_ffi_rs.kepler",
    descriptor = CPU,
    shapes = "...b, ...b -> ...b, ...b",
    dtypes = "T, T -> T, T"
)]
pub fn xla_ffi_rs_kepler_cpu(
    ctx: Context,
    mean_anomaly: Buffer<F32OrF64>,
    eccentricity: Buffer<F32OrF64>,
    mut sin_e: ResultBuffer<F32OrF64>,
    mut cos_e: ResultBuffer<F32OrF64>,
) -> Result<()> {
    // The declared rules checked that every buffer has the shape and dtype of operand 0.
    let results = (&mut sin_e, &mut cos_e);
    if mean_anomaly.dtype() == DataType::F64 {
        solve_parallel(&ctx, solver::solve_f64, (&mean_anomaly, &eccentricity), results)
    } else {
        solve_parallel(&ctx, solver::solve_f32, (&mean_anomaly, &eccentricity), results)
    }
}

/// The five operands of a derivative target: two linear ones, then `(e, sin E, cos E)`.
type Operands<'a, 'f> = [&'a Buffer<'f, F32OrF64>; 5];

/// A slice map: `tangent::apply_f64` or `tangent::apply_f32`.
type Apply<T> = fn(Direction, tangent::Linear<'_, T>, tangent::Point<'_, T>, tangent::Out<'_, MaybeUninit<T>>);

/// Applies the tangent map (or its transpose) in `T` on XLA's pool.
fn map_parallel<T: Element + Send + Sync>(
    ctx: &Context<'_>,
    dir: Direction,
    apply: Apply<T>,
    ops: Operands<'_, '_>,
    results: Results<'_, '_, '_>,
) -> Result<()> {
    let [a, b, e, s, c] = ops;
    let (a, b, e, s, c) = (a.typed::<T>()?, b.typed::<T>()?, e.typed::<T>()?, s.typed::<T>()?, c.typed::<T>()?);
    two_results_parallel(ctx, a.len(), TANGENT_WORK_PER_ELEMENT, results, |i, j, o0, o1| {
        apply(dir, (&a[i..j], &b[i..j]), (&e[i..j], &s[i..j], &c[i..j]), (o0, o1))
    })
}

/// Both derivative handlers: check, then apply the map of `dir` in the operands' dtype.
fn derivative(ctx: &Context<'_>, dir: Direction, ops: Operands<'_, '_>, results: Results<'_, '_, '_>) -> Result<()> {
    // The declared rules checked that every buffer has the shape and dtype of operand 0.
    if ops[0].dtype() == DataType::F64 {
        map_parallel(ctx, dir, tangent::apply_f64, ops, results)
    } else {
        map_parallel(ctx, dir, tangent::apply_f32, ops, results)
    }
}

/// The derivative of the solver (forward mode), elementwise on XLA's CPU thread pool.
///
/// Operands `(d_mean_anomaly, d_eccentricity, eccentricity, sin_e, cos_e)`, all of
/// one shape, all `float32` or all `float64` (`sin_e`, `cos_e`: what
/// `xla_ffi_rs.kepler` returned for `eccentricity`). Results `(d_sin_e, d_cos_e)`:
/// with `t = (dM + sin E de) / (1 - e cos E)`, `d sin E = cos E t`, `d cos E = -sin E t`.
/// Linear in the first two operands; its transpose is `xla_ffi_rs.kepler_cotangent`.
#[handler(
    target = "xla_ffi_rs.kepler_tangent",
    descriptor = TANGENT_CPU,
    shapes = "...b, ...b, ...b, ...b, ...b -> ...b, ...b",
    dtypes = "T, T, T, T, T -> T, T",
    linear = "d_mean_anomaly, d_eccentricity",
    transpose = "xla_ffi_rs.kepler_cotangent"
)]
pub fn xla_ffi_rs_kepler_tangent_cpu(
    ctx: Context,
    d_mean_anomaly: Buffer<F32OrF64>,
    d_eccentricity: Buffer<F32OrF64>,
    eccentricity: Buffer<F32OrF64>,
    sin_e: Buffer<F32OrF64>,
    cos_e: Buffer<F32OrF64>,
    mut d_sin_e: ResultBuffer<F32OrF64>,
    mut d_cos_e: ResultBuffer<F32OrF64>,
) -> Result<()> {
    let ops = [&d_mean_anomaly, &d_eccentricity, &eccentricity, &sin_e, &cos_e];
    derivative(&ctx, Direction::Tangent, ops, (&mut d_sin_e, &mut d_cos_e))
}

/// The transpose of `xla_ffi_rs.kepler_tangent` (reverse mode), elementwise on
/// XLA's CPU thread pool.
///
/// Operands `(ct_sin_e, ct_cos_e, eccentricity, sin_e, cos_e)`, all of one shape,
/// all `float32` or all `float64`. Results `(ct_mean_anomaly, ct_eccentricity)`:
/// with `t = (cos E ct_sin - sin E ct_cos) / (1 - e cos E)`, `ct_M = t`,
/// `ct_e = sin E t`.
#[handler(
    target = "xla_ffi_rs.kepler_cotangent",
    descriptor = COTANGENT_CPU,
    shapes = "...b, ...b, ...b, ...b, ...b -> ...b, ...b",
    dtypes = "T, T, T, T, T -> T, T",
    linear = "ct_sin_e, ct_cos_e",
    transpose = "xla_ffi_rs.kepler_tangent"
)]
pub fn xla_ffi_rs_kepler_cotangent_cpu(
    ctx: Context,
    ct_sin_e: Buffer<F32OrF64>,
    ct_cos_e: Buffer<F32OrF64>,
    eccentricity: Buffer<F32OrF64>,
    sin_e: Buffer<F32OrF64>,
    cos_e: Buffer<F32OrF64>,
    mut ct_mean_anomaly: ResultBuffer<F32OrF64>,
    mut ct_eccentricity: ResultBuffer<F32OrF64>,
) -> Result<()> {
    let ops = [&ct_sin_e, &ct_cos_e, &eccentricity, &sin_e, &cos_e];
    derivative(&ctx, Direction::Cotangent, ops, (&mut ct_mean_anomaly, &mut ct_eccentricity))
}

/// The four results of the fused targets.
type Results4<'a> = [ResultBuffer<'a, F32OrF64>; 4];

/// A fused slice function: `jvp::solve_jvp_f64` or `jvp::solve_jvp_f32`.
type SolveJvp<T> = fn(&[T], &[T], jvp::Tangents<'_, T>, tangent::Out4<'_, MaybeUninit<T>>);

/// A tangent operand of a fused target: an array of the operands' shape, or a
/// scalar (shape `()`) for every element.
#[derive(Clone, Copy)]
enum TangentOperand<'a, 'f> {
    Each(&'a Buffer<'f, F32OrF64>),
    All(&'a Buffer<'f, F32OrF64>),
}

impl<'f> TangentOperand<'_, 'f> {
    /// Its elements in `T` (the declared rules checked the dtype and shape).
    fn typed<T: Element>(self) -> Result<jvp::Tangent<'f, T>> {
        Ok(match self {
            TangentOperand::Each(b) => jvp::Tangent::Each(b.typed::<T>()?),
            // A shape-() buffer holds one element.
            TangentOperand::All(b) => jvp::Tangent::All(b.typed::<T>()?[0]),
        })
    }
}

/// The fused forward + tangent in `T` on XLA's pool: `jvp::solve_jvp_f64` or `_f32`.
fn jvp_parallel<T: Element + Send + Sync>(
    ctx: &Context<'_>,
    solve: SolveJvp<T>,
    (m, e): (&Buffer<'_, F32OrF64>, &Buffer<'_, F32OrF64>),
    (dm, de): (TangentOperand<'_, '_>, TangentOperand<'_, '_>),
    results: Results4<'_>,
) -> Result<()> {
    let (m, e, dm, de) = (m.typed::<T>()?, e.typed::<T>()?, dm.typed::<T>()?, de.typed::<T>()?);
    let [mut r0, mut r1, mut r2, mut r3] = results;
    for r in [&mut r0, &mut r1, &mut r2, &mut r3] {
        r.advise_huge_pages();
    }
    let (o0, o1) = (r0.typed_uninit::<T>()?, r1.typed_uninit::<T>()?);
    let (o2, o3) = (r2.typed_uninit::<T>()?, r3.typed_uninit::<T>()?);
    let n = m.len();
    let blocks = block_count(ctx, n, WORK_PER_ELEMENT);
    if blocks <= 1 {
        solve(m, e, (dm, de), (o0, o1, o2, o3));
        return Ok(());
    }
    let len = block_len(n, blocks);
    let (p0, p1, p2, p3) = (Parts::new(o0, len), Parts::new(o1, len), Parts::new(o2, len), Parts::new(o3, len));
    run_blocks(ctx, p0.len(), |i| {
        let ((a, o0), (_, o1), (_, o2), (_, o3)) = (p0.take(i), p1.take(i), p2.take(i), p3.take(i));
        let b = a + o0.len();
        solve(&m[a..b], &e[a..b], (dm.slice(a, b), de.slice(a, b)), (o0, o1, o2, o3));
    })
}

/// The four operands of a fused target: `(M, e, dM, de)`.
type FusedOperands<'f> = [Buffer<'f, F32OrF64>; 4];

/// Every fused handler, by `variant` (which tangents are scalars): the solver and
/// its tangent in the operands' dtype.
fn fused(ctx: &Context<'_>, variant: JvpVariant, ops: FusedOperands<'_>, results: Results4<'_>) -> Result<()> {
    // The declared rules checked that every buffer has the dtype of operand 0 and
    // the array operands its shape.
    let [m, e, dm, de] = &ops;
    let (dm_all, de_all) = variant.scalars();
    let tangent = |b, all| if all { TangentOperand::All(b) } else { TangentOperand::Each(b) };
    let tangents = (tangent(dm, dm_all), tangent(de, de_all));
    if m.dtype() == DataType::F64 {
        jvp_parallel(ctx, jvp::solve_jvp_f64, (m, e), tangents, results)
    } else {
        jvp_parallel(ctx, jvp::solve_jvp_f32, (m, e), tangents, results)
    }
}

/// The solver and its tangent in one pass, elementwise on XLA's CPU thread pool
/// (what the JVP of `xla_ffi_rs.kepler` runs: the inputs are read once, where the
/// solver followed by `xla_ffi_rs.kepler_tangent` makes a second pass over five
/// arrays).
///
/// Operands `(mean_anomaly, eccentricity, d_mean_anomaly, d_eccentricity)`, all of
/// one shape, all `float32` or all `float64`. Results `(sin_e, cos_e, d_sin_e,
/// d_cos_e)`: those of `xla_ffi_rs.kepler` and of `xla_ffi_rs.kepler_tangent` at
/// them, bit for bit. Not linear in anything as a whole: reverse mode uses the
/// solver and `xla_ffi_rs.kepler_tangent`, whose transpose is declared.
#[handler(
    target = "xla_ffi_rs.kepler_jvp",
    descriptor = JVP_CPU,
    shapes = "...b, ...b, ...b, ...b -> ...b, ...b, ...b, ...b",
    dtypes = "T, T, T, T -> T, T, T, T"
)]
#[allow(clippy::too_many_arguments)]
pub fn xla_ffi_rs_kepler_jvp_cpu(
    ctx: Context,
    mean_anomaly: Buffer<F32OrF64>,
    eccentricity: Buffer<F32OrF64>,
    d_mean_anomaly: Buffer<F32OrF64>,
    d_eccentricity: Buffer<F32OrF64>,
    sin_e: ResultBuffer<F32OrF64>,
    cos_e: ResultBuffer<F32OrF64>,
    d_sin_e: ResultBuffer<F32OrF64>,
    d_cos_e: ResultBuffer<F32OrF64>,
) -> Result<()> {
    let ops = [mean_anomaly, eccentricity, d_mean_anomaly, d_eccentricity];
    fused(&ctx, JvpVariant::Arrays, ops, [sin_e, cos_e, d_sin_e, d_cos_e])
}

/// `xla_ffi_rs.kepler_jvp` with the same `d_eccentricity` for every element: a
/// scalar operand (shape `()`), never materialized. What `jax.jvp` runs for a
/// tangent of `M` alone (`d_eccentricity` a symbolic zero, passed as `0`) or an
/// eccentricity tangent built in the program as a constant.
///
/// Operands `(mean_anomaly, eccentricity, d_mean_anomaly)` of one shape and
/// `d_eccentricity` of shape `()`, all `float32` or all `float64`; results as
/// `xla_ffi_rs.kepler_jvp`'s, bit for bit those it gives for `d_eccentricity`
/// broadcast.
#[handler(
    target = "xla_ffi_rs.kepler_jvp_dm",
    descriptor = JVP_DM_CPU,
    shapes = "...b, ...b, ...b, () -> ...b, ...b, ...b, ...b",
    dtypes = "T, T, T, T -> T, T, T, T"
)]
#[allow(clippy::too_many_arguments)]
pub fn xla_ffi_rs_kepler_jvp_dm_cpu(
    ctx: Context,
    mean_anomaly: Buffer<F32OrF64>,
    eccentricity: Buffer<F32OrF64>,
    d_mean_anomaly: Buffer<F32OrF64>,
    d_eccentricity: Buffer<F32OrF64>,
    sin_e: ResultBuffer<F32OrF64>,
    cos_e: ResultBuffer<F32OrF64>,
    d_sin_e: ResultBuffer<F32OrF64>,
    d_cos_e: ResultBuffer<F32OrF64>,
) -> Result<()> {
    let ops = [mean_anomaly, eccentricity, d_mean_anomaly, d_eccentricity];
    fused(&ctx, JvpVariant::ScalarDe, ops, [sin_e, cos_e, d_sin_e, d_cos_e])
}

/// `xla_ffi_rs.kepler_jvp` with both tangents the same for every element: two
/// scalar operands (shape `()`), never materialized. What `jax.jvp` runs for
/// tangents built in the program as constants (`ones_like`, `full_like`, symbolic
/// zeros).
///
/// Operands `(mean_anomaly, eccentricity)` of one shape and `(d_mean_anomaly,
/// d_eccentricity)` of shape `()`, all `float32` or all `float64`; results as
/// `xla_ffi_rs.kepler_jvp`'s, bit for bit those it gives for the tangents
/// broadcast.
#[handler(
    target = "xla_ffi_rs.kepler_jvp_const",
    descriptor = JVP_CONST_CPU,
    shapes = "...b, ...b, (), () -> ...b, ...b, ...b, ...b",
    dtypes = "T, T, T, T -> T, T, T, T"
)]
#[allow(clippy::too_many_arguments)]
pub fn xla_ffi_rs_kepler_jvp_const_cpu(
    ctx: Context,
    mean_anomaly: Buffer<F32OrF64>,
    eccentricity: Buffer<F32OrF64>,
    d_mean_anomaly: Buffer<F32OrF64>,
    d_eccentricity: Buffer<F32OrF64>,
    sin_e: ResultBuffer<F32OrF64>,
    cos_e: ResultBuffer<F32OrF64>,
    d_sin_e: ResultBuffer<F32OrF64>,
    d_cos_e: ResultBuffer<F32OrF64>,
) -> Result<()> {
    let ops = [mean_anomaly, eccentricity, d_mean_anomaly, d_eccentricity];
    fused(&ctx, JvpVariant::Scalars, ops, [sin_e, cos_e, d_sin_e, d_cos_e])
}
