//! The CUDA handlers of `xla_ffi_rs.kepler`, of its derivative targets
//! `xla_ffi_rs.kepler_tangent` and `xla_ffi_rs.kepler_cotangent`, and of the fused
//! `xla_ffi_rs.kepler_jvp` and its scalar-tangent variants `xla_ffi_rs.kepler_jvp_dm`
//! and `xla_ffi_rs.kepler_jvp_const` (one kernel, each tangent with its step); the kernels are
//! in `crates/ops/src/kepler/kepler.cu`, their instantiations in [`super::kernel_table`].
//!
//! Same operands, results, checks and error messages as the CPU handlers: each
//! takes its target and rules from its CPU twin (`op = super::cpu::...`). The
//! solver (Markley's starter plus a fixed number of fifth-order corrections) runs
//! one element per thread, grid-stride; nothing is allocated and the launch depends
//! only on the shape, so the handler is command-buffer compatible.

use xla_ffi::cuda::{Arg, Device, LaunchConfig, Source};
use xla_ffi::{handler, Buffer, Context, Result, ResultBuffer, Traits};

use super::shapes::{F32OrF64, JvpVariant};
use super::kernel_table::{KEPLER, KEPLER_COTANGENT, KEPLER_JVP, KEPLER_TANGENT};
use crate::kernels::KernelFn;

/// The CUDA source, compiled with NVRTC once per CUDA context and dtype.
pub static KEPLER_CU: Source = xla_ffi::trusted_cuda_source!("kepler.cu", "kepler.cu");

/// Threads per block.
pub const BLOCK: u32 = 256;
/// At most this many blocks (a million threads, several waves on any GPU); the
/// kernel loops over the rest, grid-stride.
pub const MAX_BLOCKS: u32 = 1 << 12;

/// The launch of `kepler` for `n` elements: what the handler uses, and what the
/// emulator tests use.
pub fn launch_config(n: u64) -> LaunchConfig {
    LaunchConfig::linear(n, BLOCK, MAX_BLOCKS)
}

/// Solves Kepler's equation elementwise on the GPU.
///
/// Operands `(mean_anomaly, eccentricity)`, same shape, both `float32` or both
/// `float64`; results `(sin_E, cos_E)` of that shape and dtype. An eccentricity
/// outside `[0, 1)`, or a NaN, gives NaN for that element.
#[handler(
    op = super::cpu::CPU,
    platform = device,
    traits = Traits::COMMAND_BUFFER_COMPATIBLE,
    descriptor = CUDA
)]
pub fn xla_ffi_rs_kepler_cuda(
    ctx: Context,
    mean_anomaly: Buffer<F32OrF64>,
    eccentricity: Buffer<F32OrF64>,
    mut sin_e: ResultBuffer<F32OrF64>,
    mut cos_e: ResultBuffer<F32OrF64>,
) -> Result<()> {
    // The declared rules checked that every buffer has the shape and dtype of operand 0.
    let dtype = mean_anomaly.dtype();
    let n = mean_anomaly.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let args =
        [Arg::from(&mean_anomaly), Arg::from(&eccentricity), Arg::from(&mut sin_e), Arg::from(&mut cos_e), Arg::u64(n)];
    let kernel = KEPLER.kernel(ctx.target(), &[dtype], &args)?;
    let dev = Device::new(&ctx)?;
    let module = dev.module(&KEPLER_CU, core::slice::from_ref(&kernel))?;
    dev.launch(&module, &kernel, launch_config(n), &args)
}

/// Both derivative handlers: check like the CPU ones, then launch `kernel`'s
/// instantiation for the dtype over the five operands and two results.
fn launch_derivative(
    ctx: &Context<'_>,
    ops: [&Buffer<'_, F32OrF64>; 5],
    (mut r0, mut r1): (ResultBuffer<'_, F32OrF64>, ResultBuffer<'_, F32OrF64>),
    kernel: &'static KernelFn,
) -> Result<()> {
    // The declared rules checked that every buffer has the shape and dtype of operand 0.
    let (first, dtype) = (ops[0], ops[0].dtype());
    let n = first.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let [a, b, e, s, c] = ops.map(Arg::from);
    let args = [a, b, e, s, c, Arg::from(&mut r0), Arg::from(&mut r1), Arg::u64(n)];
    let kernel = kernel.kernel(ctx.target(), &[dtype], &args)?;
    let dev = Device::new(ctx)?;
    let module = dev.module(&KEPLER_CU, core::slice::from_ref(&kernel))?;
    dev.launch(&module, &kernel, launch_config(n), &args)
}

/// The derivative of the solver (forward mode) on the GPU: the CPU handler's
/// operands `(d_mean_anomaly, d_eccentricity, eccentricity, sin_e, cos_e)`,
/// results `(d_sin_e, d_cos_e)` and checks.
#[handler(
    op = super::cpu::TANGENT_CPU,
    platform = device,
    traits = Traits::COMMAND_BUFFER_COMPATIBLE,
    descriptor = TANGENT_CUDA
)]
pub fn xla_ffi_rs_kepler_tangent_cuda(
    ctx: Context,
    d_mean_anomaly: Buffer<F32OrF64>,
    d_eccentricity: Buffer<F32OrF64>,
    eccentricity: Buffer<F32OrF64>,
    sin_e: Buffer<F32OrF64>,
    cos_e: Buffer<F32OrF64>,
    d_sin_e: ResultBuffer<F32OrF64>,
    d_cos_e: ResultBuffer<F32OrF64>,
) -> Result<()> {
    let ops = [&d_mean_anomaly, &d_eccentricity, &eccentricity, &sin_e, &cos_e];
    launch_derivative(&ctx, ops, (d_sin_e, d_cos_e), &KEPLER_TANGENT)
}

/// The transpose of `xla_ffi_rs.kepler_tangent` on the GPU: the CPU handler's
/// operands `(ct_sin_e, ct_cos_e, eccentricity, sin_e, cos_e)`, results
/// `(ct_mean_anomaly, ct_eccentricity)` and checks.
#[handler(
    op = super::cpu::COTANGENT_CPU,
    platform = device,
    traits = Traits::COMMAND_BUFFER_COMPATIBLE,
    descriptor = COTANGENT_CUDA
)]
pub fn xla_ffi_rs_kepler_cotangent_cuda(
    ctx: Context,
    ct_sin_e: Buffer<F32OrF64>,
    ct_cos_e: Buffer<F32OrF64>,
    eccentricity: Buffer<F32OrF64>,
    sin_e: Buffer<F32OrF64>,
    cos_e: Buffer<F32OrF64>,
    ct_mean_anomaly: ResultBuffer<F32OrF64>,
    ct_eccentricity: ResultBuffer<F32OrF64>,
) -> Result<()> {
    let ops = [&ct_sin_e, &ct_cos_e, &eccentricity, &sin_e, &cos_e];
    launch_derivative(&ctx, ops, (ct_mean_anomaly, ct_eccentricity), &KEPLER_COTANGENT)
}

/// Every fused handler, by `variant` (which tangents are scalars): launches
/// `kepler_jvp<T>` with the tangents' steps (1: an array, 0: a scalar).
fn launch_jvp(
    ctx: &Context<'_>,
    variant: JvpVariant,
    [m, e, dm, de]: [Buffer<'_, F32OrF64>; 4],
    [mut s, mut c, mut ds, mut dc]: [ResultBuffer<'_, F32OrF64>; 4],
) -> Result<()> {
    // The declared rules checked that every buffer has the dtype of operand 0 and
    // the array operands its shape.
    let dtype = m.dtype();
    let n = m.len() as u64;
    if n == 0 {
        return Ok(());
    }
    let (dm_all, de_all) = variant.scalars();
    let step = |all: bool| Arg::u64(if all { 0 } else { 1 });
    let args = [
        Arg::from(&m),
        Arg::from(&e),
        Arg::from(&dm),
        Arg::from(&de),
        Arg::from(&mut s),
        Arg::from(&mut c),
        Arg::from(&mut ds),
        Arg::from(&mut dc),
        Arg::u64(n),
        step(dm_all),
        step(de_all),
    ];
    let kernel = KEPLER_JVP.kernel(ctx.target(), &[dtype], &args)?;
    let dev = Device::new(ctx)?;
    let module = dev.module(&KEPLER_CU, core::slice::from_ref(&kernel))?;
    dev.launch(&module, &kernel, launch_config(n), &args)
}

/// The solver and its tangent in one pass on the GPU: the CPU handler's operands
/// `(mean_anomaly, eccentricity, d_mean_anomaly, d_eccentricity)`, results
/// `(sin_e, cos_e, d_sin_e, d_cos_e)` and checks.
#[handler(
    op = super::cpu::JVP_CPU,
    platform = device,
    traits = Traits::COMMAND_BUFFER_COMPATIBLE,
    descriptor = JVP_CUDA
)]
#[allow(clippy::too_many_arguments)]
pub fn xla_ffi_rs_kepler_jvp_cuda(
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
    launch_jvp(&ctx, JvpVariant::Arrays, ops, [sin_e, cos_e, d_sin_e, d_cos_e])
}

/// `xla_ffi_rs.kepler_jvp_dm` on the GPU (a scalar `d_eccentricity`): the CPU
/// handler's operands, results and checks.
#[handler(
    op = super::cpu::JVP_DM_CPU,
    platform = device,
    traits = Traits::COMMAND_BUFFER_COMPATIBLE,
    descriptor = JVP_DM_CUDA
)]
#[allow(clippy::too_many_arguments)]
pub fn xla_ffi_rs_kepler_jvp_dm_cuda(
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
    launch_jvp(&ctx, JvpVariant::ScalarDe, ops, [sin_e, cos_e, d_sin_e, d_cos_e])
}

/// `xla_ffi_rs.kepler_jvp_const` on the GPU (scalar tangents): the CPU handler's
/// operands, results and checks.
#[handler(
    op = super::cpu::JVP_CONST_CPU,
    platform = device,
    traits = Traits::COMMAND_BUFFER_COMPATIBLE,
    descriptor = JVP_CONST_CUDA
)]
#[allow(clippy::too_many_arguments)]
pub fn xla_ffi_rs_kepler_jvp_const_cuda(
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
    launch_jvp(&ctx, JvpVariant::Scalars, ops, [sin_e, cos_e, d_sin_e, d_cos_e])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_config_covers_n_and_caps_the_grid() {
        for n in [1u64, 255, 256, 257, 1 << 20, (BLOCK * MAX_BLOCKS) as u64 + 1, 1 << 40] {
            let cfg = launch_config(n);
            cfg.validate(0).unwrap();
            let threads = cfg.grid.0 as u64 * cfg.block.0 as u64;
            assert!(threads >= n.min((BLOCK * MAX_BLOCKS) as u64), "n = {n}");
            assert!(cfg.grid.0 <= MAX_BLOCKS);
        }
    }
}
