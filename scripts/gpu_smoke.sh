#!/usr/bin/env bash
# GPU smoke test: install the built abi3 wheel from dist/, run the GPU suite, and
# print one summary line: `gpu_smoke: PASS (...)` or `gpu_smoke: FAIL (...)`.
#
#   bash scripts/gpu_smoke.sh            # on any machine with an NVIDIA GPU, no network
#
# Needs: python >= 3.12 with jax[cuda13] (or jax[cuda12]), numpy and pytest already
# installed (PYTHON=... to pick the interpreter), and a wheel in dist/ built with the
# `cuda` feature. Set XLA_FFI_RS_NVRTC to libnvrtc.so.* if NVRTC is not found
# automatically. Writes pytest's JUnit XML to $GPU_SMOKE_OUT (default
# gpu_smoke.xml). Exit status: 0 = PASS; 1 = tests failed; 2 = could not run
# (no wheel, no GPU): a run that could not happen is never a PASS.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
OUT="${GPU_SMOKE_OUT:-gpu_smoke.xml}"

fail() { echo "gpu_smoke: FAIL ($1)"; exit "${2:-1}"; }

shopt -s nullglob
wheels=(dist/*.whl)
[ ${#wheels[@]} -gt 0 ] || fail "no wheel in dist/: build one with the cuda feature first" 2
"$PYTHON" -m pip install -q --no-index --no-deps --force-reinstall "${wheels[@]}" || fail "the wheel did not install" 2

gpu_info="$("$PYTHON" - <<'PY'
import sys
import jax
try:
    gpus = jax.devices("gpu")
except RuntimeError as e:
    sys.exit(f"JAX sees no GPU ({e}); install jax[cuda13] and an NVIDIA driver")
print(f"jax {jax.__version__}, {len(gpus)} GPU(s): {gpus[0].device_kind}")
PY
)" || fail "$gpu_info" 2
echo "gpu_smoke: $gpu_info"

# Outside the source tree's python/ folder, so the installed wheel is what is tested.
# The generic GPU-against-CPU checks of every op (tests/gpu), then each op's own.
"$PYTHON" -m pytest -q -rs -p no:cacheprovider --junitxml="$OUT" tests/gpu tests/ops/*/test_*_gpu.py "$@"
rc=$?
summary="$("$PYTHON" - "$OUT" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    r = ET.parse(sys.argv[1]).getroot()
    s = r if r.tag == "testsuite" else r.find("testsuite")
    t, f, e, k = (int(s.get(a, 0)) for a in ("tests", "failures", "errors", "skipped"))
    print(f"{t - f - e - k} passed, {f} failed, {e} errors, {k} skipped")
except Exception as ex:  # no report: pytest could not start
    print(f"no test report ({ex})")
PY
)"
if [ "$rc" -eq 0 ] && [[ "$summary" == *" passed, 0 failed, 0 errors, 0 skipped" ]] && [[ "$summary" != "0 passed"* ]]; then
    echo "gpu_smoke: PASS ($summary; $gpu_info)"
    exit 0
fi
fail "$summary; pytest exit $rc; $gpu_info"
