#!/usr/bin/env bash
# The benchmark harness at tiny sizes (--quick, Python 3.12 + jax 0.12), the GPU
# benchmark on the CPU (--device cpu --quick: every line, and its check that the
# chained calls stay apart in the compiled HLO), and the per-call cost harness for
# 20 calls: proves they run, measures nothing.
# XFR_WHEEL: the wheel .ci/run built (installed here; built only when it is unset).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
need_py312
# XFR_WHEEL_INSTALLED=1 (.ci/run): the wheel is installed in Python 3.12's venv already.
[ -n "${XFR_WHEEL_INSTALLED:-}" ] || install_wheel "$XFR_PY312" "${XFR_WHEEL:-$(build_wheel)}"

log "benchmark harness (--quick: tiny sizes, proves it runs)"
XFR_BENCH_NO_BUILD=1 XFR_BENCH_ONLY=py312 XFR_PY312="$XFR_PY312" bash benchmarks/run.sh --quick >/dev/null

log "GPU benchmark on the CPU (benchmarks/gpu_bench.py --device cpu --quick)"
"$XFR_PY312" benchmarks/gpu_bench.py --device cpu --quick --out target/gpu_bench_quick.json | grep "chain check"

log "per-call cost harness: ours and the C++ ffi.h twin on one call frame (20 calls)"
CALLS=20 PY="$XFR_PY312" bash benchmarks/cpp/call_cost.sh
