#!/usr/bin/env bash
# The benchmark harness at tiny sizes (--quick), and the per-call cost harness for
# 20 calls: proves they run, measures nothing.
# Needs the package installed in the venvs (.ci/python.sh does it).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
need_py312

log "benchmark harness (--quick: tiny sizes, proves it runs)"
XFR_PY312="$XFR_PY312" bash benchmarks/run.sh --quick >/dev/null

log "per-call cost harness: ours and the C++ ffi.h twin on one call frame (20 calls)"
CALLS=20 PY="$XFR_PY312" bash benchmarks/cpp/call_cost.sh
