//! The xla-ffi-rs ops, as XLA FFI handlers built on the [`xla_ffi`] crate.
//!
//! Each op is one folder, `src/<op>/`: its CPU handlers (`cpu.rs`), its CUDA handlers
//! (`cuda.rs`, feature `cuda`) with their `.cu` source, the table of the CUDA kernel
//! instantiations they launch (`kernel_table.rs`), its numerics, and in `mod.rs` one
//! [`registry::OpHandlers`] constant, `OP`, that lists them. Each target is named
//! once, by its CPU handler (`#[handler(target = ...)]` in `cpu.rs`); the CUDA
//! handler takes it from there (`op = super::cpu::...`). The `ops!` line below is the one place an op is named: [`OPS`] holds
//! every op's `OP`, and [`cpu_handlers`], [`cuda_handlers`] and [`kernels::all`] are
//! gathered from it. `float.rs` holds the [`Float`] types and the accumulators the
//! kernels compute in; [`kernels`] the types the kernel tables are written in.
//!
//! [`EXAMPLE_CPU_HANDLERS`] holds the worked example of a stateful handler bundle,
//! `xla_ffi_rs.examples.scale` ([`scale_state`]). It is not an op of [`OPS`]:
//! Python registers it only when asked (`xla_ffi_rs.examples.register()`).
#![forbid(unsafe_code)]

pub mod async_demo;
#[cfg(feature = "fixture")]
#[doc(hidden)]
pub mod fixture;
mod float;
#[cfg(feature = "cuda")]
mod kernel_launch;
pub mod kernels;
mod parallel;
mod promote;
pub mod registry;
pub mod scale_state;
mod slot;

pub use float::{AccFloat, Float};
pub use promote::{Promote, PROMOTION};

use xla_ffi::HandlerDescriptor;

registry::ops! { kepler, rms_norm }

/// The handlers for platform `"cpu"`, of every op in [`OPS`]. Each is the descriptor
/// the handler macro emitted; group them into registration bundles with
/// [`xla_ffi::bundles`] (or `xla_ffi::python::targets`).
pub fn cpu_handlers() -> Vec<&'static HandlerDescriptor> {
    OPS.iter().flat_map(|op| op.cpu.iter().copied()).collect()
}

/// The handlers for platform `"cuda"`, of every op in [`OPS`] (none without the
/// `cuda` feature).
pub fn cuda_handlers() -> Vec<&'static HandlerDescriptor> {
    OPS.iter().flat_map(|op| op.cuda.iter().copied()).collect()
}

/// The example handlers for platform `"cpu"`, kept out of [`OPS`]: the
/// stateful `xla_ffi_rs.examples.scale` (state type [`scale_state::ScaleState`]).
pub const EXAMPLE_CPU_HANDLERS: &[&HandlerDescriptor] = &[&scale_state::INSTANTIATE, &scale_state::EXECUTE];

#[cfg(test)]
mod tests {
    use super::*;

    /// Each handler is its own target: the CPU handlers make one execute-only bundle
    /// per target, the CUDA ones too, and no two ops share a target.
    #[test]
    fn tables_group_into_one_bundle_per_target() {
        let cpu = xla_ffi::bundles(&cpu_handlers(), "cpu").unwrap();
        assert_eq!(cpu.len(), cpu_handlers().len());
        assert!(cpu.iter().all(|b| b.execute_only().is_some()));
        assert!(cpu_handlers().iter().all(|h| h.platform == xla_ffi::Platform::Host));
        let cuda = xla_ffi::bundles(&cuda_handlers(), "cuda").unwrap();
        assert_eq!(cuda.len(), cuda_handlers().len());
        assert!(cuda.iter().all(|b| b.execute_only().is_some()));
        if !cfg!(feature = "cuda") {
            assert!(cuda.is_empty());
        }
        let mut targets: Vec<&str> = cpu_handlers().iter().map(|h| h.target).collect();
        targets.sort_unstable();
        let n = targets.len();
        targets.dedup();
        assert_eq!(targets.len(), n, "a target named twice");
        for op in OPS {
            assert!(!op.cpu.is_empty(), "{}: no CPU handler", op.module);
        }
        let examples = xla_ffi::bundles(EXAMPLE_CPU_HANDLERS, "cpu").unwrap();
        assert_eq!(examples.len(), 1);
        assert_eq!(examples[0].stages.len(), 2);
    }

    /// Every target declares its rules, and each CUDA handler takes its CPU twin's
    /// (`op = super::cpu::...`), of its own op: the same rules and parameter names
    /// (the backward's workspace is `scratch`, outside the declaration).
    #[test]
    fn cpu_and_cuda_declare_the_same_op() {
        for op in OPS {
            for h in op.cpu {
                let d = h.declaration;
                assert!(d.shapes.is_some() && d.dtypes.is_some(), "{}", h.target);
                assert_eq!(d.target, h.target);
            }
            for c in op.cuda {
                let cpu = op.cpu.iter().find(|h| h.target == c.target).expect("a CPU twin in the same op");
                let (a, b) = (cpu.declaration, c.declaration);
                let names = |d: &xla_ffi::Declaration| d.params.iter().map(|(n, _)| *n).collect::<Vec<_>>();
                assert_eq!(b.target, c.target);
                assert_eq!((a.linear, a.transpose), (b.linear, b.transpose), "{}", c.target);
                assert_eq!((a.shapes, a.dtypes), (b.shapes, b.dtypes), "{}", c.target);
                assert_eq!(names(a), names(b), "{}", c.target);
            }
        }
    }
}
