#!/usr/bin/env bash
# The CUDA path without a GPU or a CUDA toolkit:
#   0. the emulator's self-test; the candidate rms_norm kernels of the GPU
#      benchmark (benchmarks/rms_norm_candidates.cuh) against the shipped ones, and
#      that benchmark's program on small shapes (cuda/emu/run_cu.py);
#   1. the stand-in driver (cuda/stub_driver) with the kernels of crates/ops/src/*/*.cu
#      compiled for the CPU by g++ with the emulator header (cuda/emu);
#   2. NVRTC from pip (nvidia-cuda-nvrtc 13), found through XLA_FFI_RS_NVRTC only,
#      and then NVRTC 12 (nvidia-cuda-nvrtc-cu12) for the handlers' test again;
#   3. the CUDA handlers driven end to end against their CPU twins (crates/ops/tests/cuda_stub/,
#      with each op's fixture, feature `fixture`), and
#      the xla-ffi CUDA unit tests.
# Needs: g++; the Python 3.12 venv of scripts/env.sh (XFR_PY312, made if unset).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target
if [ -z "${XFR_PY312:-}" ]; then
    source scripts/env.sh
    XFR_SKIP_PY311=1 setup_venvs
fi
py="$XFR_PY312"
start=$(date +%s)

"$py" -m pip install -q --disable-pip-version-check "nvidia-cuda-nvrtc>=13,<14"
nvrtc="$("$py" - <<'PY'
import glob, os, nvidia
c = [p for r in nvidia.__path__ for p in glob.glob(os.path.join(r, "*", "lib", "libnvrtc.so.1*"))
     if "builtins" not in p and not p.endswith(".alt")]
print(sorted(c)[-1])
PY
)"
g++ -std=c++17 -O2 -fno-extern-tls-init -Icuda/emu cuda/emu/tests/emu_selftest.cpp cuda/emu/cuda_emu.cpp \
    -o target/emu_selftest
target/emu_selftest 2>/dev/null
# The candidate rms_norm kernels the GPU benchmark times (benchmarks/gpu_rms_norm_candidates.cu)
# give the shipped kernels' bits.
g++ -std=c++17 -O2 -fno-extern-tls-init -Icuda/emu benchmarks/rms_norm_candidates_emu.cpp cuda/emu/cuda_emu.cpp \
    -o target/rms_norm_candidates_emu
target/rms_norm_candidates_emu >target/rms_norm_candidates_emu.log || { cat target/rms_norm_candidates_emu.log; exit 1; }
tail -n 1 target/rms_norm_candidates_emu.log
# The GPU benchmark that times them runs, on small shapes, on the emulator.
"$py" cuda/emu/run_cu.py benchmarks/gpu_rms_norm_candidates.cu --quick >target/gpu_rms_norm_candidates.log ||
    { cat target/gpu_rms_norm_candidates.log; exit 1; }
echo "cuda_emu: benchmarks/gpu_rms_norm_candidates.cu ran on the emulator ($(grep -c ' of copy' target/gpu_rms_norm_candidates.log) lines)"

stub="$PWD/target/stub_driver"
bash cuda/stub_driver/build.sh "$stub" >/dev/null
echo "cuda_emu: stand-in driver in $stub, NVRTC $nvrtc"

export XFR_STUB_DRIVER="$stub" XLA_FFI_RS_NVRTC="$nvrtc"
export LD_LIBRARY_PATH="$stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Debug build (the one .ci/run's cargo test made): the emulated kernels are C++
# compiled with -O2 in the stand-in, so only the CPU reference runs unoptimised.
# The stand-in runs one kernel at a time per process, so the CPU-twin matrix (most of
# the time here) is split between two processes side by side: this one runs every
# test with the even cases, a second one the matrix's odd cases.
stub_test=(cargo test -p xla-ffi-rs-ops --features fixture --test cuda_stub)
"${stub_test[@]}" --no-run
odd_log="$(mktemp)"
trap 'rm -f "$odd_log"' EXIT
XFR_STUB_CASES=1/2 "${stub_test[@]}" -- --exact matrix::every_cuda_target_matches_its_cpu_twin >"$odd_log" 2>&1 &
odd_pid=$!
odd_rc=0
XFR_STUB_CASES=0/2 "${stub_test[@]}" -- --test-threads=2 || { wait "$odd_pid" || true; cat "$odd_log"; exit 1; }
wait "$odd_pid" || odd_rc=$?
cat "$odd_log"
[ "$odd_rc" = 0 ] || { echo "error: the matrix's odd cases failed (exit $odd_rc)" >&2; exit 1; }
cargo test -p xla-ffi --features cuda,testing --lib cuda
# The handlers again with NVRTC 12 (nvidia-cuda-nvrtc-cu12, what jax[cuda12]
# installs): the loader takes libnvrtc.so.12 (docs/gpu.md, "CUDA 12 and 13"). The
# driver test calls every CUDA target once, so every kernel is compiled by NVRTC 12
# and run; the value matrix above does not depend on which NVRTC compiled it.
nvrtc12="$PWD/target/nvrtc12/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"
[ -e "$nvrtc12" ] ||
    "$py" -m pip install -q --disable-pip-version-check --target target/nvrtc12 "nvidia-cuda-nvrtc-cu12>=12,<13"
XLA_FFI_RS_NVRTC="$nvrtc12" cargo test -p xla-ffi-rs-ops --features fixture --test cuda_stub -- --test-threads=2 driver_behaviour
echo "cuda_emu: passed in $(( $(date +%s) - start )) s"
