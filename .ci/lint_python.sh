#!/usr/bin/env bash
# Python lint, format check and type check of python/, tests/, scripts/, examples/,
# benchmarks/ and cuda/check_ptx.py (settings in pyproject.toml), then
# `mypy --strict` over the package, tests/test_public_types.py and each op's
# tests/ops/<op>/test_<op>_types.py (the public API's types: results by assert_type, rejected calls by ignores that must be
# used). Installs its tools (pinned in scripts/env.sh) into the Python 3.12 test
# venv. `bash .ci/lint_python.sh`
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
XFR_SKIP_PY311=1 setup_venvs
"$XFR_PY312" -m pip install -q --disable-pip-version-check "$RUFF_PIN" "$MYPY_PIN"
paths=(python tests examples benchmarks cuda scripts .ci/wheel_smoke.py)
log "ruff check"
"$XFR_PY312" -m ruff check --no-cache "${paths[@]}"
log "ruff format --check"
"$XFR_PY312" -m ruff format --no-cache --check "${paths[@]}"
log "mypy"
"$XFR_PY312" -m mypy --no-incremental
log "mypy --strict (the package and its public types)"
"$XFR_PY312" -m mypy --no-incremental --strict python/xla_ffi_rs tests/test_public_types.py tests/ops/*/test_*_types.py
