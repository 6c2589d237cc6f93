//! The `xla_ffi_rs.rms_norm_fwd` and `xla_ffi_rs.rms_norm_bwd` handlers for CUDA; the
//! kernels are `crates/ops/src/rms_norm/rms_norm.cu`.
//!
//! Shapes, dtypes and error messages are those of the CPU handlers: each handler
//! takes its target and rules from its CPU twin (`op = super::cpu::...`); the
//! backward's extra trailing result, the workspace, is outside those rules
//! (`scratch = "workspace"`) and checked by hand. Each dtype combination of `(x, weight)` is its own
//! NVRTC module (the kernel templates instantiated for it, as [`super::kernel_table`]
//! declares), compiled once per CUDA context at first use. The launch configurations are the plain functions
//! [`fwd_launch_config`], [`bwd_launch_config`] and [`dweight_launch_config`], which
//! the emulator tests call too.
//!
//! # The backward pass and its workspace
//!
//! `dweight` sums over all rows. To make that sum **bit-identical run to run** (no
//! atomics), it is done in two launches with a fixed order: block `b` of the first
//! kernel sums its contiguous slice of rows into row `b` of a workspace, and a
//! second kernel adds the workspace rows in a fixed tree. The workspace is a third
//! **result** of the CUDA target, which the Python side discards:
//!
//! `rms_norm_bwd(dy, x, weight; eps) -> (dx, dweight, workspace)`, with
//! `workspace: (B, weight.size)` in the accumulator dtype (float32, or float64 when
//! `x` or `weight` is), `B >= 1` the number of row blocks; [`bwd_workspace_rows`] gives the
//! recommended `B = clamp(ceil(rows / 16), 1, 1024)`.
//!
//! Why a result and not `ctx.scratch()`: XLA's scratch memory is allocated inside the
//! handler and freed when it returns, which a CUDA graph cannot capture (the address
//! would be baked into the graph and then freed), so a scratch-using handler could
//! not be command-buffer compatible. A result is allocated by XLA's buffer
//! assignment, once per executable, like any other buffer: no allocation in the
//! handler, same launches every call, and graph capture is fine. It costs
//! `B * n * 4` bytes (8 MiB for 8192 x 4096), about 4% of the pass's traffic.

use xla_ffi::cuda::{Arg, Device, LaunchConfig, Source};
use xla_ffi::{handler, AnyFloat, Attr, Buffer, Context, Result, ResultBuffer, Traits};

use super::shapes::{bwd_workspace_rows, check_eps, rows};
use super::kernel_table::{RMS_NORM_BWD, RMS_NORM_DWEIGHT, RMS_NORM_FWD};

/// The CUDA source, compiled with NVRTC once per CUDA context and dtype combination.
pub static RMS_NORM_CU: Source = xla_ffi::trusted_cuda_source!("rms_norm.cu", "rms_norm.cu");

/// At most this many row blocks in the forward pass; the kernel loops over the rest.
pub const MAX_FWD_BLOCKS: usize = 65535;

/// Packs of a row per thread of the packed kernels (the first 4, `KEEP` in
/// `rms_norm.cu`, stay in registers between the two passes over the row; the rest are
/// read again). Measured on an H200, rows of 4096: the forward reached 80 % of a copy's
/// bandwidth in bfloat16 with 8 packs per thread (64 threads; 4 packs: 76 %, 1: 49 %),
/// and in float32 with 4 (256 threads: 105 % of our copy kernel; 8: 99 %); the backward was fastest with
/// 4 in both. A different value only costs speed, never correctness.
fn packs_per_thread(lanes: usize, forward: bool) -> usize {
    if forward && lanes >= 8 {
        8
    } else {
        4
    }
}

/// Elements per 16-byte pack for buffers of these byte widths: 16 / the widest.
pub fn pack_lanes(widths: &[usize]) -> usize {
    16 / widths.iter().copied().max().unwrap_or(1).clamp(1, 16)
}

/// Threads per row block, a multiple of 32. When `n` is a multiple of `lanes`, the
/// kernels read rows in packs of `lanes` elements (XLA's buffers are aligned), and
/// each thread gets [`packs_per_thread`] packs: enough loads in flight per thread to
/// reach the memory's bandwidth. Otherwise about 8 elements per thread.
fn row_block(n: usize, lanes: usize, forward: bool, max: u32) -> u32 {
    let per_thread = if lanes > 1 && n.is_multiple_of(lanes) { lanes * packs_per_thread(lanes, forward) } else { 8 };
    let t = n.div_ceil(per_thread).next_multiple_of(32).clamp(32, max as usize);
    t as u32
}

/// The forward launch for `rows` rows of `n` elements in packs of `lanes` (see
/// [`pack_lanes`]): one block per row (grid-stride beyond [`MAX_FWD_BLOCKS`]).
pub fn fwd_launch_config(rows: usize, n: usize, lanes: usize) -> LaunchConfig {
    LaunchConfig {
        grid: (rows.clamp(1, MAX_FWD_BLOCKS) as u32, 1, 1),
        block: (row_block(n, lanes, true, 1024), 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The backward launch (`rms_norm_bwd`) with `blocks` workspace rows for rows of `n`
/// elements in packs of `lanes`: the per-block `dweight` accumulators go to dynamic shared memory when
/// `n` of them (`acc_bytes` each) fit beside the kernel's `static_smem` bytes within
/// 48 KiB, else the kernel accumulates in its workspace row.
pub fn bwd_launch_config(blocks: u32, n: usize, lanes: usize, acc_bytes: usize, static_smem: u32) -> LaunchConfig {
    let room = (LaunchConfig::MAX_SHARED as usize).saturating_sub(static_smem as usize);
    let smem = n.saturating_mul(acc_bytes);
    let smem = if smem <= room { smem as u32 } else { 0 };
    LaunchConfig { grid: (blocks.max(1), 1, 1), block: (row_block(n, lanes, false, 512), 1, 1), shared_mem_bytes: smem }
}

/// The `rms_norm_dweight` launch for `n` weight elements: 32 columns per block, 16
/// partial sums each.
pub fn dweight_launch_config(n: usize) -> LaunchConfig {
    // Beyond u32 the grid saturates, and the launch's validation refuses it.
    let grid = u32::try_from(n.div_ceil(32).max(1)).unwrap_or(u32::MAX);
    LaunchConfig { grid: (grid, 1, 1), block: (32, 16, 1), shared_mem_bytes: 0 }
}

fn to_u32(v: usize, what: &str, target: &str) -> Result<u32> {
    u32::try_from(v)
        .map_err(|_| xla_ffi::Error::invalid_argument(format!("{target}: {what} = {v} is too large for one launch")))
}

/// RMS normalization over the trailing `weight.ndim` axes of `x`, on the GPU.
///
/// Operands `(x, weight)`, each float16, bfloat16, float32 or float64; attribute
/// `eps` (a float >= 0 within the accumulator dtype's range). Results `(y, inv_rms)`: `y` of `x`'s shape and dtype
/// `result_type(x, weight)`; `inv_rms` of shape `x.shape[:-weight.ndim]`, float32
/// (float64 when `x` or `weight` is). `y` may alias `x`.
#[handler(
    op = super::cpu::FWD_CPU,
    platform = device,
    traits = Traits::COMMAND_BUFFER_COMPATIBLE,
    descriptor = FWD_CUDA
)]
pub fn xla_ffi_rs_rms_norm_fwd_cuda(
    ctx: Context,
    x: Buffer<AnyFloat>,
    weight: Buffer<AnyFloat>,
    mut y: ResultBuffer<AnyFloat>,
    mut inv_rms: ResultBuffer<AnyFloat>,
    eps: Attr<f64>,
) -> Result<()> {
    check_eps(*eps, xla_ffi::decl::accumulator(x.dtype(), weight.dtype()))?;
    let shape = rows(&x, &weight);
    if shape.rows == 0 {
        return Ok(());
    }
    let (xd, wd) = (x.dtype(), weight.dtype());
    let lanes = pack_lanes(&[width(xd), width(wd), width(y.dtype())]);
    let args = [
        Arg::from(&x),
        Arg::from(&weight),
        Arg::from(&mut y),
        Arg::from(&mut inv_rms),
        Arg::u64(shape.rows as u64),
        Arg::u64(shape.n as u64),
        Arg::f64(*eps),
    ];
    let kernel = RMS_NORM_FWD.kernel(ctx.target(), &[xd, wd], &args)?;
    let dev = Device::new(&ctx)?;
    let module = dev.module(&RMS_NORM_CU, core::slice::from_ref(&kernel))?;
    dev.launch(&module, &kernel, fwd_launch_config(shape.rows, shape.n, lanes), &args)
}

/// The backward pass of `rms_norm_fwd`, on the GPU.
///
/// Operands `(dy, x, weight)` and attribute `eps` with the forward's conventions;
/// each row's `inv_rms` is recomputed from `x` in the pass that reads the row for
/// the dot product. Results `(dx, dweight, workspace)`: `dx` and `dweight` with the
/// dtypes and shapes of `x` and `weight`, and a scratch `workspace` of shape
/// `(B, weight.size)` in the accumulator dtype (see the module docs; discard it). `dweight` sums over the
/// leading axes in a fixed order: the result is the same on every run.
#[handler(
    op = super::cpu::BWD_CPU,
    scratch = "workspace",
    platform = device,
    traits = Traits::COMMAND_BUFFER_COMPATIBLE,
    descriptor = BWD_CUDA
)]
pub fn xla_ffi_rs_rms_norm_bwd_cuda(
    ctx: Context,
    dy: Buffer<AnyFloat>,
    x: Buffer<AnyFloat>,
    weight: Buffer<AnyFloat>,
    mut dx: ResultBuffer<AnyFloat>,
    mut dweight: ResultBuffer<AnyFloat>,
    mut workspace: ResultBuffer<AnyFloat, 2>,
    eps: Attr<f64>,
) -> Result<()> {
    let target = ctx.target();
    check_eps(*eps, xla_ffi::decl::accumulator(x.dtype(), weight.dtype()))?;
    // The CPU twin's rules checked every buffer but the workspace, which is outside them.
    let shape = rows(&x, &weight);
    let (xd, wd) = (x.dtype(), weight.dtype());
    let acc = xla_ffi::decl::accumulator(xd, wd);
    if workspace.dtype() != acc {
        return Err(workspace.error(format!(
            "expected dtype {acc} (the accumulator dtype of x {xd} and weight {wd}), got {}",
            workspace.dtype()
        )));
    }
    let ws = workspace.dims();
    if ws[0] < 1 || ws[1] != shape.n as i64 {
        return Err(workspace.error(format!(
            "expected shape (B, {}) with B >= 1 (B = {} recommended), got {ws:?}",
            shape.n,
            bwd_workspace_rows(shape.rows)
        )));
    }
    if shape.n == 0 {
        return Ok(());
    }
    let blocks = to_u32(ws[0] as usize, "workspace rows", target)?;
    let acc_bytes = acc.byte_width().unwrap_or(8);
    let lanes = pack_lanes(&[width(dy.dtype()), width(xd), width(wd)]);
    let bwd_args = [
        Arg::from(&dy),
        Arg::from(&x),
        Arg::from(&weight),
        Arg::from(&mut dx),
        Arg::from(&mut workspace),
        Arg::u64(shape.rows as u64),
        Arg::u64(shape.n as u64),
        Arg::f64(*eps),
    ];
    // The workspace, written by the first launch on the same stream, is the
    // second one's input.
    let dw_args = [
        Arg::from(&mut workspace).read_only(),
        Arg::from(&mut dweight),
        Arg::u64(blocks as u64),
        Arg::u64(shape.n as u64),
    ];
    let bwd = RMS_NORM_BWD.kernel(target, &[xd, wd], &bwd_args)?;
    let dw = RMS_NORM_DWEIGHT.kernel(target, &[xd, wd], &dw_args)?;
    let dev = Device::new(&ctx)?;
    let module = dev.module(&RMS_NORM_CU, &[bwd.clone(), dw.clone()])?;
    let static_smem = dev.static_shared_bytes(&module, &bwd)?;
    dev.launch(&module, &bwd, bwd_launch_config(blocks, shape.n, lanes, acc_bytes, static_smem), &bwd_args)?;
    dev.launch(&module, &dw, dweight_launch_config(shape.n), &dw_args)
}

/// A float dtype's byte width (8 for anything unexpected: fewer lanes, never a wrong
/// access; the kernels check the alignment themselves).
fn width(d: xla_ffi::DataType) -> usize {
    d.byte_width().unwrap_or(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every configuration the handlers compute is one the driver accepts (the
    /// static shared memory of the kernels: 128 or 256 bytes for `rms_norm_bwd`).
    #[test]
    fn launch_configs_are_within_the_driver_limits() {
        for rows in [1usize, 3, 31, 32, 33, 1000, 65535, 65536, 1 << 20, 1 << 31] {
            for n in [1usize, 31, 32, 33, 1000, 4097, 6144, 12288, 1 << 20] {
                for lanes in [1usize, 2, 4, 8] {
                    fwd_launch_config(rows, n, lanes).validate(256).unwrap();
                    for acc in [4usize, 8] {
                        let blocks = bwd_workspace_rows(rows) as u32;
                        let cfg = bwd_launch_config(blocks, n, lanes, acc, 32 * acc as u32);
                        cfg.validate(32 * acc as u32).unwrap();
                        assert!(cfg.shared_mem_bytes == 0 || cfg.shared_mem_bytes as usize == n * acc);
                    }
                }
                dweight_launch_config(n).validate(16 * 33 * 8).unwrap();
            }
        }
        assert_eq!(fwd_launch_config(1 << 20, 8, 8).grid.0 as usize, MAX_FWD_BLOCKS);
        assert_eq!(bwd_launch_config(3, 12288, 4, 4, 128).shared_mem_bytes, 0, "48 KiB + 128 B does not fit");
        assert_eq!(bwd_launch_config(3, 12256, 4, 4, 128).shared_mem_bytes, 12256 * 4);
        // bf16 rows of 4096 in packs of 8: 64 threads of 8 packs forward, 128 of 4
        // backward; float32: 256 threads of 4 packs; a row that packs do
        // not divide: about 8 elements per thread
        assert_eq!(pack_lanes(&[2, 2, 2]), 8);
        assert_eq!(pack_lanes(&[2, 4, 4]), 4);
        assert_eq!(fwd_launch_config(1, 4096, 8).block.0, 64);
        assert_eq!(fwd_launch_config(1, 4096, 4).block.0, 256);
        assert_eq!(bwd_launch_config(512, 4096, 8, 4, 128).block.0, 128);
        assert_eq!(fwd_launch_config(1, 4100, 8).block.0, 544);
        assert!(dweight_launch_config(1 << 40).validate(0).is_err(), "a grid beyond the limit is refused");
    }
}
