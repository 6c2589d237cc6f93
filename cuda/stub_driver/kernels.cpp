// Every kernel instantiation the CUDA handlers launch, compiled for the host with
// the CPU emulator (cuda/emu/cuda_emu.h), from the same .cu files NVRTC compiles.
// g++ and NVRTC mangle alike (Itanium ABI), so each entry's symbol name, read back
// with dladdr, is the lowered name NVRTC reports: the stand-in driver looks kernels
// up by that name. The list covers what the handlers launch: `kepler<T>`,
// `kepler_tangent<T>` and `kepler_cotangent<T>` for float and double; the rms_norm kernels for every (x, weight) dtype pair with
// Y = result_type(x, weight) and ACC = float, or double when either is double
// (the same rules as crates/ops/src/promote.rs). Generated once by hand from those
// rules; a missing entry is a "kernel not found" error in the tests.
#include "cuda_emu.h"

XFR_EMU_DYNAMIC_SHARED(smem_raw)

#include "kepler.cu"
#include "rms_norm.cu"

#include "kernels.h"

#define KERNEL(f) xfr_stub::describe(f)

namespace xfr_stub {
const std::vector<KernelInfo>& kernels() {
    static const std::vector<KernelInfo> all = {
    KERNEL(kepler<float>), KERNEL(kepler<double>),
    KERNEL(kepler_tangent<float>), KERNEL(kepler_tangent<double>),
    KERNEL(kepler_cotangent<float>), KERNEL(kepler_cotangent<double>),
    KERNEL((rms_norm_fwd<half_t, half_t, half_t, float>)), KERNEL((rms_norm_bwd<half_t, half_t, half_t, float>)), KERNEL((rms_norm_dweight<half_t, half_t, half_t, float>)),
    KERNEL((rms_norm_fwd<half_t, bhalf_t, float, float>)), KERNEL((rms_norm_bwd<half_t, bhalf_t, float, float>)), KERNEL((rms_norm_dweight<half_t, bhalf_t, float, float>)),
    KERNEL((rms_norm_fwd<half_t, float, float, float>)), KERNEL((rms_norm_bwd<half_t, float, float, float>)), KERNEL((rms_norm_dweight<half_t, float, float, float>)),
    KERNEL((rms_norm_fwd<half_t, double, double, double>)), KERNEL((rms_norm_bwd<half_t, double, double, double>)), KERNEL((rms_norm_dweight<half_t, double, double, double>)),
    KERNEL((rms_norm_fwd<bhalf_t, half_t, float, float>)), KERNEL((rms_norm_bwd<bhalf_t, half_t, float, float>)), KERNEL((rms_norm_dweight<bhalf_t, half_t, float, float>)),
    KERNEL((rms_norm_fwd<bhalf_t, bhalf_t, bhalf_t, float>)), KERNEL((rms_norm_bwd<bhalf_t, bhalf_t, bhalf_t, float>)), KERNEL((rms_norm_dweight<bhalf_t, bhalf_t, bhalf_t, float>)),
    KERNEL((rms_norm_fwd<bhalf_t, float, float, float>)), KERNEL((rms_norm_bwd<bhalf_t, float, float, float>)), KERNEL((rms_norm_dweight<bhalf_t, float, float, float>)),
    KERNEL((rms_norm_fwd<bhalf_t, double, double, double>)), KERNEL((rms_norm_bwd<bhalf_t, double, double, double>)), KERNEL((rms_norm_dweight<bhalf_t, double, double, double>)),
    KERNEL((rms_norm_fwd<float, half_t, float, float>)), KERNEL((rms_norm_bwd<float, half_t, float, float>)), KERNEL((rms_norm_dweight<float, half_t, float, float>)),
    KERNEL((rms_norm_fwd<float, bhalf_t, float, float>)), KERNEL((rms_norm_bwd<float, bhalf_t, float, float>)), KERNEL((rms_norm_dweight<float, bhalf_t, float, float>)),
    KERNEL((rms_norm_fwd<float, float, float, float>)), KERNEL((rms_norm_bwd<float, float, float, float>)), KERNEL((rms_norm_dweight<float, float, float, float>)),
    KERNEL((rms_norm_fwd<float, double, double, double>)), KERNEL((rms_norm_bwd<float, double, double, double>)), KERNEL((rms_norm_dweight<float, double, double, double>)),
    KERNEL((rms_norm_fwd<double, half_t, double, double>)), KERNEL((rms_norm_bwd<double, half_t, double, double>)), KERNEL((rms_norm_dweight<double, half_t, double, double>)),
    KERNEL((rms_norm_fwd<double, bhalf_t, double, double>)), KERNEL((rms_norm_bwd<double, bhalf_t, double, double>)), KERNEL((rms_norm_dweight<double, bhalf_t, double, double>)),
    KERNEL((rms_norm_fwd<double, float, double, double>)), KERNEL((rms_norm_bwd<double, float, double, double>)), KERNEL((rms_norm_dweight<double, float, double, double>)),
    KERNEL((rms_norm_fwd<double, double, double, double>)), KERNEL((rms_norm_bwd<double, double, double, double>)), KERNEL((rms_norm_dweight<double, double, double, double>)),
    };
    return all;
}
}  // namespace xfr_stub
