#!/usr/bin/env bash
# The demo, from a fresh clone: makes a Python 3.12 venv with jax, builds and
# installs the wheel, and runs examples/rv_fit.py, which fits an eccentric orbit's
# radial-velocity curve through xr.kepler, prints the parameters with their
# uncertainties, times the model, and writes the plot rv_fit.png in the current
# folder. `bash scripts/demo.sh` (`--plot PATH` to write the plot elsewhere)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
log "setting up .venv-ci/py312: Python 3.12 with jax, maturin and matplotlib (first run: about a minute)"
XFR_SKIP_PY311=1 setup_venvs
log "next: the wheel, a release build of the Rust crates (a few minutes the first time)"
wheel="$(build_wheel)"
log "installing $(basename "$wheel")"
install_wheel "$XFR_PY312" "$wheel"
log "running examples/rv_fit.py"
"$XFR_PY312" examples/rv_fit.py "$@"
