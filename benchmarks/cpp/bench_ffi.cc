// The C++ ffi.h twin of one trivial Rust handler, for the per-call cost comparison
// of the benchmarks only (nothing else builds or loads this file):
//   * BenchSleepScale  <- `xla_ffi_rs.demo.sleep_scale` (crates/ops/src/async_demo.rs):
//       one float32 operand, one float32 result of its shape, an int64 attribute
//       `delay_ms` checked to be in [0, 60000]; sleeps that long, then y = 2 x.
//       The same signature and the same work, so that "ours / C++" at N = 1 is the
//       cost of our binding layer (decoding the call frame, the checks, the error
//       path) against ffi.h's, and nothing else.
//   * BenchNumThreads  writes ThreadPool::num_threads() (the thread suite reads it
//       to show how many threads XLA gave the FFI).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

ffi::Error SleepScaleImpl(ffi::Buffer<ffi::F32> x, ffi::Result<ffi::Buffer<ffi::F32>> y, int64_t delay_ms) {
  if (delay_ms < 0 || delay_ms > 60000) {
    return ffi::Error::InvalidArgument("attribute `delay_ms`: expected 0 to 60000, got " + std::to_string(delay_ms));
  }
  if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  const float* in = x.typed_data();
  float* out = y->typed_data();
  size_t n = std::min(x.element_count(), y->element_count());
  for (size_t i = 0; i < n; ++i) out[i] = 2.0f * in[i];
  return ffi::Error::Success();
}

ffi::Error NumThreadsImpl(ffi::ThreadPool pool, ffi::Result<ffi::Buffer<ffi::S32>> out) {
  out->typed_data()[0] = static_cast<int32_t>(pool.num_threads());
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(BenchSleepScale, SleepScaleImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("delay_ms"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(BenchNumThreads, NumThreadsImpl,
                              ffi::Ffi::Bind().Ctx<ffi::ThreadPool>().Ret<ffi::Buffer<ffi::S32>>());
