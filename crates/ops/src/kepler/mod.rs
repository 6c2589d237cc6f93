//! Kepler's equation `M = E - e sin E`: the CPU solver ([`solver`]), its derivative
//! ([`tangent`]: the tangent map and its transpose), the two
//! fused in one pass ([`jvp`]), their
//! FFI handlers, and
//! (feature `cuda`) the CUDA handlers whose kernels are in `crates/ops/src/kepler/kepler.cu`.

mod cpu;
pub mod kernel_table;
pub mod jvp;
mod shapes;
pub mod solver;
pub mod tangent;

pub use cpu::{
    xla_ffi_rs_kepler_cotangent_cpu, xla_ffi_rs_kepler_cpu, xla_ffi_rs_kepler_jvp_const_cpu, xla_ffi_rs_kepler_jvp_cpu,
    xla_ffi_rs_kepler_jvp_dm_cpu, xla_ffi_rs_kepler_tangent_cpu, COTANGENT_CPU, CPU, JVP_CONST_CPU, JVP_CPU,
    JVP_DM_CPU, TANGENT_CPU,
};
pub use shapes::F32OrF64;

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "fixture")]
pub mod fixture;
#[cfg(feature = "cuda")]
pub use cuda::{
    xla_ffi_rs_kepler_cotangent_cuda, xla_ffi_rs_kepler_cuda, xla_ffi_rs_kepler_jvp_const_cuda,
    xla_ffi_rs_kepler_jvp_cuda, xla_ffi_rs_kepler_jvp_dm_cuda, xla_ffi_rs_kepler_tangent_cuda, COTANGENT_CUDA, CUDA,
    JVP_CONST_CUDA, JVP_CUDA, JVP_DM_CUDA, KEPLER_CU, TANGENT_CUDA,
};

/// This op's handlers and CUDA kernels (see [`crate::registry`]).
pub const OP: crate::registry::OpHandlers = crate::registry::OpHandlers {
    module: module_path!(),
    cpu: &[&CPU, &TANGENT_CPU, &COTANGENT_CPU, &JVP_CPU, &JVP_DM_CPU, &JVP_CONST_CPU],
    #[cfg(feature = "cuda")]
    cuda: &[&CUDA, &TANGENT_CUDA, &COTANGENT_CUDA, &JVP_CUDA, &JVP_DM_CUDA, &JVP_CONST_CUDA],
    #[cfg(not(feature = "cuda"))]
    cuda: &[],
    kernels: &[
        &kernel_table::KEPLER,
        &kernel_table::KEPLER_TANGENT,
        &kernel_table::KEPLER_COTANGENT,
        &kernel_table::KEPLER_JVP,
    ],
    #[cfg(feature = "cuda")]
    sources: &[&KEPLER_CU],
    #[cfg(feature = "fixture")]
    fixture: &fixture::FIXTURE,
};
