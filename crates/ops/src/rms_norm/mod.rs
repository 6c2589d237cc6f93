//! RMS normalization over the trailing axes: `y = x * inv_rms * weight`, with
//! `inv_rms = 1/sqrt(mean(x^2) + eps)`. The CPU kernels ([`kernel`]), their FFI
//! handlers, and (feature `cuda`) the CUDA handlers, whose kernels are
//! `crates/ops/src/rms_norm/rms_norm.cu`.

mod convert;
mod cpu;
pub mod kernel_table;
pub mod kernel;
mod shapes;

pub use cpu::{xla_ffi_rs_rms_norm_bwd_cpu, xla_ffi_rs_rms_norm_fwd_cpu, BWD_CPU, FWD_CPU};
pub use shapes::{bwd_workspace_rows, check_eps, eps_problem, rows, Rows};

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "fixture")]
pub mod fixture;
#[cfg(feature = "cuda")]
pub use cuda::{xla_ffi_rs_rms_norm_bwd_cuda, xla_ffi_rs_rms_norm_fwd_cuda, BWD_CUDA, FWD_CUDA, RMS_NORM_CU};

/// This op's handlers and CUDA kernels (see [`crate::registry`]).
pub const OP: crate::registry::OpHandlers = crate::registry::OpHandlers {
    module: module_path!(),
    cpu: &[&FWD_CPU, &BWD_CPU],
    #[cfg(feature = "cuda")]
    cuda: &[&FWD_CUDA, &BWD_CUDA],
    #[cfg(not(feature = "cuda"))]
    cuda: &[],
    kernels: &[&kernel_table::RMS_NORM_FWD, &kernel_table::RMS_NORM_BWD, &kernel_table::RMS_NORM_DWEIGHT],
    #[cfg(feature = "cuda")]
    sources: &[&RMS_NORM_CU],
    #[cfg(feature = "fixture")]
    fixture: &fixture::FIXTURE,
};
