#!/usr/bin/env bash
# Python lint, format check and type check of python/, tests/, examples/,
# benchmarks/ and cuda/check_ptx.py (settings in pyproject.toml). Installs its
# tools (pinned in scripts/env.sh) into the Python 3.12 test venv. `bash .ci/lint_python.sh`
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
XFR_SKIP_PY311=1 setup_venvs
"$XFR_PY312" -m pip install -q --disable-pip-version-check "$RUFF_PIN" "$MYPY_PIN"
paths=(python tests examples benchmarks cuda)
log "ruff check"
"$XFR_PY312" -m ruff check --no-cache "${paths[@]}"
log "ruff format --check"
"$XFR_PY312" -m ruff format --no-cache --check "${paths[@]}"
log "mypy"
"$XFR_PY312" -m mypy --no-incremental
