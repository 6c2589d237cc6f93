//! What an op hands to the crate: its handlers and its CUDA kernels, in one
//! [`OpHandlers`] constant (`OP`) in the op's own folder.
//!
//! `lib.rs` names each op once, in `ops! { ... }`, which declares its module and
//! collects its `OP` into [`OPS`](crate::OPS). Everything else is derived from that
//! list: [`cpu_handlers`](crate::cpu_handlers), [`cuda_handlers`](crate::cuda_handlers)
//! and [`kernels::all`](crate::kernels::all). Plain constants, no linker sections:
//! the tables survive LTO in any crate type on any platform.

use xla_ffi::HandlerDescriptor;

use crate::kernels::KernelFn;

/// One op: its handlers for each platform and the CUDA kernels those launch.
#[derive(Debug)]
pub struct OpHandlers {
    /// The op's module (`module_path!()`), for messages.
    pub module: &'static str,
    /// Its handlers for platform `"cpu"`.
    pub cpu: &'static [&'static HandlerDescriptor],
    /// Its handlers for platform `"cuda"`: empty without the `cuda` feature. Each takes
    /// its target and rules from a CPU handler of [`cpu`](Self::cpu) (`op = super::cpu::...`).
    pub cuda: &'static [&'static HandlerDescriptor],
    /// Every `__global__` template its CUDA handlers launch, with its instantiations
    /// (there even without the `cuda` feature: the checks of `cuda/` print it).
    pub kernels: &'static [&'static KernelFn],
    /// The CUDA sources its handlers compile: the file of each kernel's `source`.
    #[cfg(feature = "cuda")]
    pub sources: &'static [&'static xla_ffi::cuda::Source],
    /// What the test of its CUDA handlers against their CPU twins needs beyond the
    /// declarations (`src/<op>/fixture.rs`; feature `fixture`, for this crate's tests).
    #[cfg(feature = "fixture")]
    pub fixture: &'static crate::fixture::OpFixture,
}

impl OpHandlers {
    /// The op whose CUDA handler serves `target`, if any.
    pub fn with_cuda_target(ops: &[&'static OpHandlers], target: &str) -> Option<&'static OpHandlers> {
        ops.iter().copied().find(|op| op.cuda.iter().any(|h| h.target == target))
    }
}

/// Declares each op's module (`pub mod name;`, the folder `src/name/`) and collects
/// its `name::OP` into `pub const OPS`.
macro_rules! ops {
    ($($(#[$attr:meta])* $op:ident),* $(,)?) => {
        $($(#[$attr])* pub mod $op;)*

        /// Every op of the crate, in registration order (see [`registry`]).
        pub const OPS: &[&registry::OpHandlers] = &[$(&$op::OP),*];
    };
}
pub(crate) use ops;
