//! The CUDA handlers' way to their kernel: [`KernelFn::kernel`] picks the
//! instantiation from an op's table and checks the launch's parameters against it.

use xla_ffi::DataType;

use crate::kernels::{show, KernelFn};
use crate::registry::OpHandlers;

impl KernelFn {
    /// The launcher's kernel: the instantiation for the dtypes `key` of the
    /// operands the handler picks by, taking `args`. Errors (naming `target`) if
    /// the table has no such instantiation, or if `args` are not the declared
    /// parameters; in debug builds, also if `target` is an op's CUDA target and
    /// this kernel is not in that op's table.
    pub fn kernel(
        &'static self,
        target: &str,
        key: &[DataType],
        args: &[xla_ffi::cuda::Arg<'_>],
    ) -> xla_ffi::Result<xla_ffi::cuda::Kernel> {
        // A handler of an op launches only kernels of that op's table (which the
        // checks of `cuda/` compile); checked in debug builds, as the tests run it.
        if cfg!(debug_assertions) {
            if let Some(op) = OpHandlers::with_cuda_target(crate::OPS, target) {
                if !op.kernels.iter().any(|k| core::ptr::eq(*k, self)) {
                    return Err(xla_ffi::Error::internal(format!(
                        "{target}: kernel `{}` is not in the kernel table of {}",
                        self.name, op.module
                    )));
                }
            }
        }
        let inst = self.instance(key).ok_or_else(|| {
            xla_ffi::Error::unimplemented(format!(
                "{target}: no CUDA kernel `{}` for dtypes {} in the kernel table",
                self.name,
                show(key)
            ))
        })?;
        let kernel = xla_ffi::cuda::Kernel::new(inst.name(), args);
        if !kernel.params().iter().map(|p| p.cpp()).eq(self.cpp_params()) {
            let got: Vec<&str> = kernel.params().iter().map(|p| p.cpp()).collect();
            let want: Vec<&str> = self.cpp_params().collect();
            return Err(xla_ffi::Error::internal(format!(
                "{target}: kernel `{}` launched with parameters ({}), declared with ({})",
                self.name,
                got.join(", "),
                want.join(", ")
            )));
        }
        Ok(kernel)
    }
}
