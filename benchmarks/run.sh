#!/usr/bin/env bash
# `just bench`: each suite in its own process, same inputs for every contender.
# Prints tables and writes benchmarks/results/*.json. `--quick`: tiny sizes, 1 repeat.
set -euo pipefail
cd "$(dirname "$0")"
PY="${XFR_PY312:-}"
if [ -z "$PY" ]; then
    source ../scripts/env.sh
    XFR_SKIP_PY311=1 setup_venvs
    install_wheel "$XFR_PY312" "$(build_wheel)"
    PY="$XFR_PY312"
fi
for suite in bench_kepler.py bench_rms_norm.py bench_overhead.py; do
    "$PY" "$suite" "$@"
done
echo; echo "results in $(pwd)/results/"
