#!/usr/bin/env bash
# The benchmark harness at tiny sizes (--quick): proves it runs, measures nothing.
# Needs the package installed in the venvs (.ci/python.sh does it).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
need_py312

log "benchmark harness (--quick: tiny sizes, proves it runs)"
XFR_PY312="$XFR_PY312" bash benchmarks/run.sh --quick >/dev/null
