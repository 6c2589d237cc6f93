//! The CUDA handlers end to end, without a GPU: synthetic device call frames
//! (`xla_ffi::testing`), the stand-in driver `cuda/stub_driver` as `libcuda.so.1`
//! (its kernels are the real `.cu` files compiled for the host with the emulator
//! `cuda/emu`), and real NVRTC from pip compiling the same files to CUBINs.
//!
//! Nothing here names an op: every CUDA handler of every op in `OPS` is run against
//! its CPU twin over the cases its declaration and its fixture
//! (`crates/ops/src/<op>/fixture.rs`, feature `fixture`; see
//! `xla_ffi_rs_ops::fixture`) make, within the tolerances the fixture states
//! ([`matrix`]); the driver's behaviour is checked with each handler's probe cases
//! ([`driver`], [`log`]).
//!
//! Run by `.ci/cuda_emu.sh`, which builds the stand-in and sets `XFR_STUB_DRIVER`
//! (its folder), `LD_LIBRARY_PATH` and `XLA_FFI_RS_NVRTC`. Without `XFR_STUB_DRIVER`
//! every test here but the check that each op's fixture makes cases returns at once
//! (a plain `cargo test` has no driver). `XFR_STUB_CASES=i/n` runs every n-th case of
//! the CPU-twin matrix from the i-th, for n processes side by side (`.ci/cuda_emu.sh`
//! runs two).
#![cfg(feature = "fixture")]

mod cases;
mod driver;
mod errors;
mod log;
mod matrix;
mod values;

use xla_ffi::testing::cuda::Gpu;

fn stub() -> bool {
    std::env::var_os("XFR_STUB_DRIVER").is_some()
}

/// Returns from the test when there is no stand-in driver.
#[macro_export]
macro_rules! need_stub {
    () => {
        if !$crate::stub() {
            eprintln!("skipped: no stand-in driver (XFR_STUB_DRIVER unset; run .ci/cuda_emu.sh)");
            return;
        }
    };
}

/// The test process's context and stream on the stand-in.
fn gpu() -> &'static Gpu {
    Gpu::shared().expect("the stand-in driver")
}
