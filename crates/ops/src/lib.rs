//! The xla-ffi-rs ops, as XLA FFI handlers built on the [`xla_ffi`] crate:
//!
//! | target | CPU handler | CUDA handler |
//! |---|---|---|
//! | `xla_ffi_rs.kepler` | [`kepler::xla_ffi_rs_kepler_cpu`] | `kepler::xla_ffi_rs_kepler_cuda` (feature `cuda`) |
//! | `xla_ffi_rs.kepler_tangent` | [`kepler::xla_ffi_rs_kepler_tangent_cpu`] | `kepler::xla_ffi_rs_kepler_tangent_cuda` |
//! | `xla_ffi_rs.kepler_cotangent` | [`kepler::xla_ffi_rs_kepler_cotangent_cpu`] | `kepler::xla_ffi_rs_kepler_cotangent_cuda` |
//! | `xla_ffi_rs.kepler_jvp` | [`kepler::xla_ffi_rs_kepler_jvp_cpu`] | `kepler::xla_ffi_rs_kepler_jvp_cuda` |
//! | `xla_ffi_rs.kepler_jvp_dm` | [`kepler::xla_ffi_rs_kepler_jvp_dm_cpu`] | `kepler::xla_ffi_rs_kepler_jvp_dm_cuda` |
//! | `xla_ffi_rs.kepler_jvp_const` | [`kepler::xla_ffi_rs_kepler_jvp_const_cpu`] | `kepler::xla_ffi_rs_kepler_jvp_const_cuda` |
//! | `xla_ffi_rs.rms_norm_fwd` | [`rms_norm::xla_ffi_rs_rms_norm_fwd_cpu`] | `rms_norm::xla_ffi_rs_rms_norm_fwd_cuda` |
//! | `xla_ffi_rs.rms_norm_bwd` | [`rms_norm::xla_ffi_rs_rms_norm_bwd_cpu`] | `rms_norm::xla_ffi_rs_rms_norm_bwd_cuda` |
//!
//! The numerics live next to their handlers: `kepler/solver.rs` (CPU solver),
//! `kepler/tangent.rs` (its derivative), `kepler/jvp.rs` (the two in one pass),
//! `rms_norm/kernel.rs` (CPU kernels), and their CUDA twins beside them
//! (`kepler/kepler.cu`, `rms_norm/rms_norm.cu`); `float.rs` holds the [`Float`] types and the
//! accumulators the kernels compute in. [`CPU_HANDLERS`] and [`CUDA_HANDLERS`] list what to register;
//! [`kernels::KERNELS`] lists every CUDA kernel instantiation the CUDA handlers launch.
//!
//! [`EXAMPLE_CPU_HANDLERS`] holds the worked example of a stateful handler bundle,
//! `xla_ffi_rs.examples.scale` ([`scale_state`]). It is not part of the production
//! tables: Python registers it only when asked (`xla_ffi_rs.examples.register()`).
#![forbid(unsafe_code)]

pub mod async_demo;
mod float;
pub mod kepler;
pub mod kernels;
mod parallel;
mod promote;
pub mod rms_norm;
pub mod scale_state;
mod slot;

pub use float::{AccFloat, Float};
pub use promote::{Promote, PROMOTION};

use xla_ffi::HandlerDescriptor;

/// The handlers for platform `"cpu"`. Each is the descriptor the handler macro emitted;
/// group them into registration bundles with [`xla_ffi::bundles`] (or
/// `xla_ffi::python::targets`).
pub const CPU_HANDLERS: &[&HandlerDescriptor] = &[
    &kepler::CPU,
    &kepler::TANGENT_CPU,
    &kepler::COTANGENT_CPU,
    &kepler::JVP_CPU,
    &kepler::JVP_DM_CPU,
    &kepler::JVP_CONST_CPU,
    &rms_norm::FWD_CPU,
    &rms_norm::BWD_CPU,
];

/// The example handlers for platform `"cpu"`, kept out of [`CPU_HANDLERS`]: the
/// stateful `xla_ffi_rs.examples.scale` (state type [`scale_state::ScaleState`]).
pub const EXAMPLE_CPU_HANDLERS: &[&HandlerDescriptor] = &[&scale_state::INSTANTIATE, &scale_state::EXECUTE];

/// The handlers for platform `"cuda"` (empty without the `cuda` feature).
#[cfg(feature = "cuda")]
pub const CUDA_HANDLERS: &[&HandlerDescriptor] = &[
    &kepler::CUDA,
    &kepler::TANGENT_CUDA,
    &kepler::COTANGENT_CUDA,
    &kepler::JVP_CUDA,
    &kepler::JVP_DM_CUDA,
    &kepler::JVP_CONST_CUDA,
    &rms_norm::FWD_CUDA,
    &rms_norm::BWD_CUDA,
];

/// The handlers for platform `"cuda"` (empty without the `cuda` feature).
#[cfg(not(feature = "cuda"))]
pub const CUDA_HANDLERS: &[&HandlerDescriptor] = &[];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_group_into_one_bundle_per_target() {
        let cpu = xla_ffi::bundles(CPU_HANDLERS, "cpu").unwrap();
        let names: Vec<_> = cpu.iter().map(|b| b.target).collect();
        assert_eq!(
            names,
            [
                "xla_ffi_rs.kepler",
                "xla_ffi_rs.kepler_tangent",
                "xla_ffi_rs.kepler_cotangent",
                "xla_ffi_rs.kepler_jvp",
                "xla_ffi_rs.kepler_jvp_dm",
                "xla_ffi_rs.kepler_jvp_const",
                "xla_ffi_rs.rms_norm_fwd",
                "xla_ffi_rs.rms_norm_bwd"
            ]
        );
        assert!(cpu.iter().all(|b| b.execute_only().is_some()));
        let examples = xla_ffi::bundles(EXAMPLE_CPU_HANDLERS, "cpu").unwrap();
        assert_eq!(examples.len(), 1);
        assert_eq!(examples[0].stages.len(), 2);
        let cuda = xla_ffi::bundles(CUDA_HANDLERS, "cuda").unwrap();
        assert_eq!(cuda.len(), if cfg!(feature = "cuda") { 8 } else { 0 });
        assert!(CPU_HANDLERS.iter().all(|h| h.platform == xla_ffi::Platform::Host));
    }

    /// Every target declares its rules, and each CUDA handler takes its CPU twin's
    /// (`op = super::cpu::...`): the same rules and parameter names (the backward's
    /// workspace is `scratch`, outside the declaration).
    #[test]
    fn cpu_and_cuda_declare_the_same_op() {
        for h in CPU_HANDLERS {
            let d = h.declaration;
            assert!(d.shapes.is_some() && d.dtypes.is_some(), "{}", h.target);
        }
        for c in CUDA_HANDLERS {
            let cpu = CPU_HANDLERS.iter().find(|h| h.target == c.target).expect("a CPU twin");
            let (a, b) = (cpu.declaration, c.declaration);
            let names = |d: &xla_ffi::Declaration| d.params.iter().map(|(n, _)| *n).collect::<Vec<_>>();
            assert_eq!(b.target, c.target);
            assert_eq!((a.linear, a.transpose), (b.linear, b.transpose), "{}", c.target);
            assert_eq!((a.shapes, a.dtypes), (b.shapes, b.dtypes), "{}", c.target);
            assert_eq!(names(a), names(b), "{}", c.target);
        }
    }
}
