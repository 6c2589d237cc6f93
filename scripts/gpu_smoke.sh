#!/usr/bin/env bash
# GPU smoke test: install the built abi3 wheel from dist/ and run the GPU suite.
#
#   bash scripts/gpu_smoke.sh            # on any machine with an NVIDIA GPU, no network
#
# Needs: python >= 3.12 with jax[cuda13] (or jax[cuda12]), numpy and pytest already
# installed (PYTHON=... to pick the interpreter), and a wheel in dist/ built with the
# `cuda` feature. Set XLA_FFI_RS_NVRTC to libnvrtc.so.* if NVRTC is not found
# automatically. Exit status: pytest's (0 = all passed).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

shopt -s nullglob
wheels=(dist/*.whl)
if [ ${#wheels[@]} -eq 0 ]; then
    echo "gpu_smoke: no wheel in dist/ (build one with the cuda feature first)" >&2
    exit 2
fi
"$PYTHON" -m pip install --no-index --no-deps --force-reinstall "${wheels[@]}"

"$PYTHON" - <<'PY'
import jax
try:
    gpus = jax.devices("gpu")
except RuntimeError as e:
    raise SystemExit(f"gpu_smoke: JAX sees no GPU ({e}); install jax[cuda13] and an NVIDIA driver")
print("gpu_smoke: JAX", jax.__version__, "GPUs:", gpus)
PY

# Outside the source tree's python/ folder, so the installed wheel is what is tested.
exec "$PYTHON" -m pytest -q -rs -p no:cacheprovider tests/gpu "$@"
