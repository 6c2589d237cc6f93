#!/usr/bin/env bash
# Everything a lent GPU is for, in one go and one call (it builds no wheel there): the
# GPU suite (scripts/gpu_smoke.sh), the end-to-end benchmark (benchmarks/gpu_bench.py),
# and, where nvcc is found, the kernels timed alone with CUDA events
# (benchmarks/gpu_rms_norm_candidates.cu: the shipped rms_norm kernels against the
# candidates; benchmarks/gpu_kernels.cu). Each step has its own time limit and its
# output goes to $OUT (default gpu_out/); a step that fails does not stop the next.
#
#   bash scripts/gpu_perf.sh                  # on the GPU machine, with the wheel in dist/
#   GPU_PERF_STEPS="kernels bench" bash scripts/gpu_perf.sh     # some steps only
#
# Steps: info, smoke, bench, kernels (default: all, in that order), with limits of
# 30, 240, 420 and 240 s: when one call may run 10 minutes, make it two calls, e.g.
# GPU_PERF_STEPS="info kernels smoke", then GPU_PERF_STEPS=bench. Needs what
# gpu_smoke.sh needs (python >= 3.12 with jax[cuda13], numpy, pytest; a cuda-feature
# wheel in dist/); nvcc on PATH, under /usr/local/cuda*/bin, or from pip's
# nvidia-cuda-nvcc for the kernels step. The last lines summarise each step.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
OUT="${OUT:-gpu_out}"
mkdir -p "$OUT"
steps=(${GPU_PERF_STEPS:-info smoke bench kernels})
summary=()

run_step() {  # run_step NAME LIMIT_S CMD...: the command's output to $OUT/NAME.log and here
    local name="$1" limit="$2" t0 rc
    shift 2
    t0=$(date +%s)
    echo "==> gpu_perf: $name (limit ${limit} s)"
    timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
    rc=${PIPESTATUS[0]}
    summary+=("$(printf '%-8s rc %-3d %4d s' "$name" "$rc" $(( $(date +%s) - t0 )))")
}

find_nvcc() {
    local c
    for c in "$(command -v nvcc)" /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc; do
        [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
    done
    "$PYTHON" - <<'PY' 2>/dev/null
import glob, os, nvidia
c = [p for r in nvidia.__path__ for p in glob.glob(os.path.join(r, "*", "bin", "nvcc"))]
print(sorted(c)[-1]) if c else exit(1)
PY
}

kernels() {
    local nvcc arch
    nvcc="$(find_nvcc)" || { echo "no nvcc found: the kernels step needs the CUDA toolkit's nvcc"; return 2; }
    arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '.')"
    arch="sm_${arch:-90}"
    echo "nvcc: $nvcc ($("$nvcc" --version | tail -n1)), $arch"
    "$nvcc" -O3 -std=c++17 -arch="$arch" -Xptxas -v -o "$OUT/gpu_rms_norm_candidates" \
        benchmarks/gpu_rms_norm_candidates.cu 2>"$OUT/ptxas.log" || { cat "$OUT/ptxas.log"; return 1; }
    grep -E "Compiling entry|registers|spill" "$OUT/ptxas.log" | grep -B1 -E "registers" | grep -E "rms_norm|registers" \
        >"$OUT/registers.log" || true
    "$OUT/gpu_rms_norm_candidates" || return 1
    "$nvcc" -O3 -std=c++17 -arch="$arch" -o "$OUT/gpu_kernels" benchmarks/gpu_kernels.cu && "$OUT/gpu_kernels"
}

for s in "${steps[@]}"; do
    case "$s" in
        info) run_step info 30 bash -c "nvidia-smi && $PYTHON -c 'import jax; print(jax.__version__, jax.devices())'" ;;
        smoke) run_step smoke 240 env GPU_SMOKE_OUT="$OUT/gpu_smoke.xml" PYTHON="$PYTHON" bash scripts/gpu_smoke.sh ;;
        bench) run_step bench 420 bash -c "$PYTHON -m pip install -q --no-index --no-deps --force-reinstall dist/*.whl &&
            $PYTHON benchmarks/gpu_bench.py --out '$OUT/gpu_bench.json'" ;;
        kernels) run_step kernels 240 bash -c "$(declare -f find_nvcc kernels); OUT='$OUT' PYTHON='$PYTHON' kernels" ;;
        *) echo "gpu_perf: unknown step $s (info, smoke, bench, kernels)"; exit 2 ;;
    esac
done
echo "==> gpu_perf: steps (rc 124 = over its limit)"
printf '  %s\n' "${summary[@]}"
