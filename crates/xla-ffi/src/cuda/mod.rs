//! Launching CUDA kernels from `platform = device` handlers, safely (feature `cuda`).
//!
//! A GPU handler gets device addresses, never slices ([`Buffer::as_ptr`](crate::Buffer::as_ptr)).
//! This module turns them into kernel launches on the stream XLA hands the handler:
//!
//! ```ignore
//! static SCALE_CU: Source = xla_ffi::trusted_cuda_source!("scale.cu", "../cuda/scale.cu");
//!
//! #[handler(target = "demo.scale", platform = device, traits = Traits::COMMAND_BUFFER_COMPATIBLE)]
//! fn demo_scale_cuda(ctx: Context, x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
//!     let n = x.len() as u64;
//!     let args = [Arg::from(&x), Arg::from(&mut y), Arg::u64(n)];
//!     let kernel = Kernel::new("scale<float>", &args);      // template instantiation
//!     let dev = Device::new(&ctx)?;                          // XLA's stream and context
//!     let module = dev.module(&SCALE_CU, &[kernel.clone()])?; // compiled once per context
//!     dev.launch(&module, &kernel, LaunchConfig::linear(n, 256, 4096), &args)
//! }
//! ```
//!
//! The parts: [`loader`] finds `libcuda`/`libnvrtc` and checks the driver's entry
//! points; [`nvrtc`] holds [`Source`] and the compilation; [`launch`] holds
//! [`Device`], [`Module`], [`Kernel`], [`Arg`] and [`LaunchConfig`].
//!
//! # What is checked, and what is trusted
//!
//! Launching a kernel is `unsafe` in CUDA: the kernel may read and write any device
//! memory. [`Device::launch`] is a safe function because of these rules:
//!
//! * **Pointers come only from this call's buffers.** An [`Arg`] holding an address
//!   is made only from a decoded [`Buffer`](crate::Buffer) (read-only, `const void*`)
//!   or [`ResultBuffer`](crate::ResultBuffer) (`void*`) of the current call frame
//!   (the lifetime `'f` ties it to the call). Each is passed to the kernel as **two
//!   parameters**: the address and the buffer's exact size in bytes (`unsigned long
//!   long`), taken from the decoded shape and dtype, not from the handler.
//! * **The kernel's C++ signature is checked by the compiler.** A [`Kernel`] is a
//!   name (template arguments included) plus the parameter list its arguments
//!   expand to. The module is compiled with the NVRTC name expression
//!   `static_cast<void(*)(params...)>(name)`, which fails to compile unless the
//!   kernel's signature is exactly that list, and the launch looks the kernel up by
//!   NVRTC's lowered name of that expression. A launch whose arguments differ from
//!   the [`Kernel`]'s list is refused before anything runs.
//! * **The kernel source is trusted.** A [`Source`] is CUDA C++ shipped with the
//!   crate that uses it, and is trusted like a linked C library: its kernels must
//!   touch only `[ptr, ptr + bytes)` of each buffer, write only through `void*`
//!   (result) parameters, and stay correct when an input is the same memory as a
//!   result (XLA aliases them for in-place calls; two results never overlap, which
//!   the launch checks). This is the contract of the `unsafe` [`Source::new`], or
//!   of the [`trusted_cuda_source!`](crate::trusted_cuda_source) macro for a file of
//!   the calling crate. The kernels of this project check every extent they derive
//!   from scalar arguments against the byte sizes before touching memory.
//! * **Launch configurations** are validated against the driver's limits (block and
//!   grid dimensions, static plus dynamic shared memory within 48 KiB, with the
//!   static size read from the compiled kernel); anything else the driver rejects is
//!   returned as an error.
//! * **Nothing is read on the host and nothing synchronises.** Work is enqueued on
//!   XLA's stream, which orders it with XLA's own work. XLA's context is current
//!   only during each driver call that needs it, and the previous one is restored.
//!
//! # Libraries, errors and caching
//!
//! cudarc loads `libcuda` and `libnvrtc` dynamically, so this builds and runs on
//! machines without CUDA; a missing library, or a driver lacking an entry point this
//! module calls (it needs CUDA 12.0 or newer), is a `FAILED_PRECONDITION` error that
//! says what to install, never a panic. NVRTC from the `nvidia-cuda-nvrtc` wheel is
//! not on the default library path; it is found through [`set_nvrtc_search_path`],
//! the `XLA_FFI_RS_NVRTC` environment variable, or next to any `nvidia/*/lib`
//! library the process has already loaded (jax's CUDA plugin loads several).
//!
//! A [`Source`] is compiled with NVRTC to a CUBIN for the device's exact
//! architecture (`sm_XY`) once per (source, kernels, architecture), and loaded once
//! per CUDA context; later calls find it in a process-wide cache. The first call's
//! module load may happen while XLA captures its stream into a CUDA graph: it runs
//! in the relaxed capture mode, which allows it. No device memory is allocated and
//! the same launches happen on every call with the same shapes, so handlers built on
//! this are command-buffer (CUDA graph) compatible.

pub mod kernel;
pub mod launch;
pub mod loader;
pub mod nvrtc;

pub use launch::{Arg, Device, Kernel, LaunchConfig, Module, Param};
pub use loader::{driver_available, driver_version, nvrtc_available, set_nvrtc_search_path, NVRTC_ENV};
pub use nvrtc::Source;

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a driver (as on CI), the library checks answer, never panic.
    #[test]
    fn missing_libraries_are_errors_not_panics() {
        let _ = driver_available();
        let _ = nvrtc_available();
    }
}
