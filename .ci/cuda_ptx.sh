#!/usr/bin/env bash
# Every CUDA kernel compiled to PTX for sm_80 and sm_90 with NVRTC from pip, and
# the static shared memory checked (cuda/check_ptx.py). No GPU, no CUDA toolkit.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
need_py312

log "CUDA sources -> PTX for sm_80 and sm_90 (NVRTC from pip, no GPU needed)"
"$XFR_PY312" -m pip install -q --disable-pip-version-check "nvidia-cuda-nvrtc>=13,<14"
"$XFR_PY312" cuda/check_ptx.py
