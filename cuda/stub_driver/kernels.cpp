// Every kernel instantiation the CUDA handlers launch, compiled for the host with
// the CPU emulator (cuda/emu/cuda_emu.h), from the same .cu files NVRTC compiles.
// g++ and NVRTC mangle alike (Itanium ABI), so each entry's symbol name, read back
// with dladdr, is the lowered name NVRTC reports: the stand-in driver looks kernels
// up by that name. The sources and the instantiations come from the ops' kernel
// tables (crates/ops/src/*/kernel_table.rs), through `kernel_list.inc`, which build.sh
// writes with `cargo run -p xla-ffi-rs-ops --example kernel_list -- cpp`. Each entry
// is the NVRTC name expression, so a parameter list that differs from the kernel's
// C++ signature is a compile error here too.
#include "cuda_emu.h"

XFR_EMU_DYNAMIC_SHARED(smem_raw)

#define XFR_KERNEL_SOURCES
#include "kernel_list.inc"
#undef XFR_KERNEL_SOURCES

#include "kernels.h"

#define XFR_KERNEL(f) xfr_stub::describe(f),

namespace xfr_stub {
const std::vector<KernelInfo>& kernels() {
    static const std::vector<KernelInfo> all = {
#include "kernel_list.inc"
    };
    return all;
}
}  // namespace xfr_stub
