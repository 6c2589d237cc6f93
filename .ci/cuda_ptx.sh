#!/usr/bin/env bash
# Every CUDA kernel compiled to PTX and CUBIN for sm_80 and sm_90 with NVRTC from
# pip, and the static shared memory checked (cuda/check_ptx.py), with both NVRTCs
# the handlers can load at run time: NVRTC 13 (`nvidia-cuda-nvrtc`, what
# `jax[cuda13]` installs) and NVRTC 12 (`nvidia-cuda-nvrtc-cu12`, what `jax[cuda12]`
# installs; docs/gpu.md). No GPU, no CUDA toolkit.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
need_py312

log "CUDA sources -> PTX for sm_80 and sm_90 with NVRTC 13 (pip, no GPU needed)"
"$XFR_PY312" -m pip install -q --disable-pip-version-check "nvidia-cuda-nvrtc>=13,<14"
"$XFR_PY312" cuda/check_ptx.py

log "the same with NVRTC 12 (nvidia-cuda-nvrtc-cu12, what jax[cuda12] installs)"
mkdir -p target
nvrtc12="$PWD/target/nvrtc12/nvidia/cuda_nvrtc/lib"
[ -e "$nvrtc12/libnvrtc.so.12" ] ||
    "$XFR_PY312" -m pip install -q --disable-pip-version-check --target target/nvrtc12 "nvidia-cuda-nvrtc-cu12>=12,<13"
XLA_FFI_RS_NVRTC="$nvrtc12/libnvrtc.so.12" "$XFR_PY312" cuda/check_ptx.py --no-host | tee target/nvrtc12.log
grep -q "^NVRTC 12\." target/nvrtc12.log || { echo "error: the second run did not use NVRTC 12" >&2; exit 1; }
