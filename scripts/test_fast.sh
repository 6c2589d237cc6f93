#!/usr/bin/env bash
# The fast test loop for contributors: the Rust tests of the workspace (unit,
# integration, trybuild, doc tests with the README's and docs/'s Rust blocks),
# then the Python suite on Python 3.12 + jax 0.12 only. No root, no nightly, no
# second jax (how long: CONTRIBUTING.md). `bash scripts/test_fast.sh` or
# `just check`. The full CI is `bash .ci/run`.
#
#   bash scripts/test_fast.sh                    everything above
#   bash scripts/test_fast.sh tests/ops/kepler/test_kepler.py   the Rust tests, then one Python file
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
XFR_SKIP_PY311=1 setup_venvs
export PYO3_PYTHON="$XFR_PY312"
start=$(date +%s)

log "cargo test --workspace"
cargo test --workspace --quiet

install_wheel "$XFR_PY312" "$(build_wheel)"
if [ $# -gt 0 ]; then
    log "pytest $* (Python 3.12, jax 0.12)"
    "$XFR_PY312" -m pytest -q -p no:cacheprovider "$@"
else
    log "pytest tests/ (Python 3.12, jax 0.12)"
    "$XFR_PY312" -m pytest -q -p no:cacheprovider tests --ignore=tests/sharding
    XLA_FLAGS=--xla_force_host_platform_device_count=8 "$XFR_PY312" -m pytest -q -p no:cacheprovider tests/sharding
fi
log "fast checks passed in $(( $(date +%s) - start )) s"
