// The per-call cost of one XLA FFI handler symbol, outside XLA and Python: the
// same synthetic call frame (the signature of `xla_ffi_rs.demo.sleep_scale` at
// N = 1: one float32 operand of shape [1], one float32 result, the int64
// attribute delay_ms = 0) handed to any handler symbol of any shared library, so
// that our Rust handler and its C++ ffi.h twin are measured by one harness.
//
//   call_cost LIB SYMBOL [CALLS] [cold [LIB2 SYMBOL2 ...]]
//
// runs SYMBOL from LIB (dlopen) CALLS times (default 400000) and prints the best
// nanoseconds per call over 20 rounds. With `cold`, each call is preceded by a run
// through 2048 small functions (about 150 KB of code, more than any L1
// instruction cache, and as many branches): the handler then starts with its code
// out of the instruction cache and branch predictor, as it does inside XLA, where
// the executor's own code runs between two custom calls. Only the call is timed
// (TSC between fences), and the median over the calls is printed, in TSC ticks.
// Further LIB SYMBOL pairs after `cold` are measured in the same process, the
// handlers taking turns call by call (a paired comparison on a noisy machine). Under
//   valgrind --tool=callgrind --toggle-collect=SYMBOL call_cost LIB SYMBOL
// the collected instruction count divided by CALLS is the exact instructions per
// call (benchmarks/cpp/call_cost.sh does both handlers and prints the table).
//
// The API table is zeroed except its version, struct size and the thread-pool
// size query (which XLA:CPU answers, and our host-platform guard asks once per
// table): neither handler creates an error on this frame, and a handler that
// fails makes the harness stop with a message.

#include <dlfcn.h>
#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "xla/ffi/api/c_api.h"

namespace {

XLA_FFI_Error* NumThreads(XLA_FFI_ThreadPool_NumThreads_Args* args) {
  *args->num_threads = 1;
  return nullptr;
}

XLA_FFI_Error* CreateError(XLA_FFI_Error_Create_Args* args) {
  std::fprintf(stderr, "call_cost: the handler failed: %s\n", args->message);
  std::exit(1);
}

// One of the functions the cold mode runs through between calls: distinct code
// and distinct branches per N.
template <int N>
__attribute__((noinline)) uint64_t Evict(uint64_t x) {
  x = (x & (uint64_t{1} << (N % 13))) ? x * (2 * N + 3) + N : x ^ (7 * N + 1);
  if ((x >> (N % 7)) & 1) x += N;
  return x;
}

template <int... N>
uint64_t EvictAll(uint64_t x, std::integer_sequence<int, N...>) {
  ((x = Evict<N>(x)), ...);
  return x;
}

using Handler = XLA_FFI_Error* (*)(XLA_FFI_CallFrame*);

// The median ticks per call of each handler, with the instruction cache evicted
// before each call; the handlers take turns call by call, so that a change of the
// machine's speed meets all of them.
int ColdCalls(const std::vector<Handler>& handlers, const std::vector<const char*>& names,
              const std::vector<const char*>& libs, XLA_FFI_CallFrame* frame, long calls) {
  std::vector<std::vector<uint64_t>> ticks(handlers.size());
  volatile uint64_t sink = 0;
  for (long i = 0; i < calls; ++i) {
    for (size_t k = 0; k < handlers.size(); ++k) {
      sink = sink + EvictAll(i, std::make_integer_sequence<int, 2048>{});
      _mm_lfence();
      uint64_t t0 = __rdtsc();
      _mm_lfence();
      if (handlers[k](frame) != nullptr) return 1;
      _mm_lfence();
      uint64_t t1 = __rdtsc();
      ticks[k].push_back(t1 - t0);
    }
  }
  for (size_t k = 0; k < handlers.size(); ++k) {
    std::vector<uint64_t>& t = ticks[k];
    std::sort(t.begin(), t.end());
    std::printf("%s (%s): cold %lu TSC ticks per call (median of %ld; quartiles %lu, %lu)\n", names[k], libs[k],
                (unsigned long)t[t.size() / 2], calls, (unsigned long)t[t.size() / 4],
                (unsigned long)t[3 * t.size() / 4]);
  }
  return 0;
}

// The handler SYMBOL of the shared library LIB, or null after a message.
Handler Load(const char* lib_path, const char* symbol) {
  void* lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "call_cost: %s\n", dlerror());
    return nullptr;
  }
  auto handler = reinterpret_cast<Handler>(dlsym(lib, symbol));
  if (!handler) std::fprintf(stderr, "call_cost: no symbol %s in %s\n", symbol, lib_path);
  return handler;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s LIB SYMBOL [CALLS] [cold [LIB2 SYMBOL2 ...]]\n", argv[0]);
    return 2;
  }
  long calls = argc > 3 ? std::atol(argv[3]) : 400000;
  Handler handler = Load(argv[1], argv[2]);
  if (!handler) return 1;
  bool cold = argc > 4 && std::strcmp(argv[4], "cold") == 0;
  // In cold mode, more LIB SYMBOL pairs may follow: all are measured, call by call in turn.
  std::vector<Handler> handlers{handler};
  std::vector<const char*> names{argv[2]};
  std::vector<const char*> libs{argv[1]};
  for (int a = 5; cold && a + 1 < argc; a += 2) {
    Handler h = Load(argv[a], argv[a + 1]);
    if (!h) return 1;
    handlers.push_back(h);
    names.push_back(argv[a + 1]);
    libs.push_back(argv[a]);
  }

  static XLA_FFI_Api api;
  std::memset(&api, 0, sizeof api);
  api.struct_size = XLA_FFI_Api_STRUCT_SIZE;
  api.api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  api.api_version.major_version = XLA_FFI_API_MAJOR;
  api.api_version.minor_version = XLA_FFI_API_MINOR;
  api.XLA_FFI_Error_Create = CreateError;
  api.XLA_FFI_ThreadPool_NumThreads = NumThreads;

  float x = 1.5f, y = 0.0f;
  int64_t dims[1] = {1};
  XLA_FFI_Buffer bufs[2] = {
      XLA_FFI_Buffer{XLA_FFI_Buffer_STRUCT_SIZE, nullptr, XLA_FFI_DataType_F32, &x, 1, dims},
      XLA_FFI_Buffer{XLA_FFI_Buffer_STRUCT_SIZE, nullptr, XLA_FFI_DataType_F32, &y, 1, dims},
  };
  void* args[1] = {&bufs[0]};
  void* rets[1] = {&bufs[1]};
  XLA_FFI_ArgType arg_types[1] = {XLA_FFI_ArgType_BUFFER};
  XLA_FFI_RetType ret_types[1] = {XLA_FFI_RetType_BUFFER};
  int64_t delay_ms = 0;
  XLA_FFI_Scalar delay{XLA_FFI_DataType_S64, &delay_ms};
  static const char kDelay[] = "delay_ms";
  XLA_FFI_ByteSpan delay_name{kDelay, sizeof kDelay - 1};
  XLA_FFI_AttrType attr_types[1] = {XLA_FFI_AttrType_SCALAR};
  XLA_FFI_ByteSpan* attr_names[1] = {&delay_name};
  void* attrs[1] = {&delay};

  XLA_FFI_CallFrame frame;
  std::memset(&frame, 0, sizeof frame);
  frame.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  frame.api = &api;
  // A non-null context the handlers only pass on (neither reads it).
  static char ctx_bytes[64];
  // (The context's type was renamed between jaxlib 0.10 and 0.12.)
  frame.ctx = reinterpret_cast<decltype(frame.ctx)>(ctx_bytes);
  frame.stage = XLA_FFI_ExecutionStage_EXECUTE;
  frame.args = XLA_FFI_Args{XLA_FFI_Args_STRUCT_SIZE, nullptr, 1, arg_types, args};
  frame.rets = XLA_FFI_Rets{XLA_FFI_Rets_STRUCT_SIZE, nullptr, 1, ret_types, rets};
  frame.attrs = XLA_FFI_Attrs{XLA_FFI_Attrs_STRUCT_SIZE, nullptr, 1, attr_types, attr_names, attrs};

  // One call outside the measured loop: the first call answers one-time questions
  // (our host-platform guard, the rules parsed once).
  for (Handler h : handlers)
    if (h(&frame) != nullptr) return 1;
  if (cold) return ColdCalls(handlers, names, libs, &frame, calls);
  double best = 1e300;
  long per_round = calls / 20 > 0 ? calls / 20 : 1;
  for (int r = 0; r < 20; ++r) {
    auto t = std::chrono::steady_clock::now();
    for (long i = 0; i < per_round; ++i) {
      if (handler(&frame) != nullptr) return 1;
      asm volatile("" ::: "memory");
    }
    double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t).count() / per_round;
    if (ns < best) best = ns;
  }
  std::printf("%s: %.1f ns per call (best of 20 rounds of %ld; y = %g)\n", argv[2], best, per_round, y);
  if (y != 2.0f * x) {
    std::fprintf(stderr, "call_cost: %s wrote y = %g, expected %g\n", argv[2], y, 2.0f * x);
    return 1;
  }
  return 0;
}
