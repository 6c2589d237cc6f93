#!/usr/bin/env bash
# `just bench`: on each supported jax (Python 3.12 + jax 0.12, Python 3.11 +
# jax 0.10), builds the C++ ffi.h twin against that jaxlib's header, runs every
# suite in its own process on the same inputs, writes
# benchmarks/results/jax-<version>/*.json, then prints one combined table of the
# targets with a column per jax version. Everything it prints is also written to a
# dated file, benchmarks/results/run-<UTC date and time>[-quick].txt, the record of
# that run (results/ is not committed). Figures are medians of interleaved pairs
# (common.measure_pairs), with the best beside them; PASS/FAIL is on the medians.
# A full run of both versions then rewrites the table of docs/performance.md
# from the results (summary.py --write; the README quotes headline figures only).
#
#   bash benchmarks/run.sh            the full run (how long: CONTRIBUTING.md)
#   bash benchmarks/run.sh --quick    tiny sizes, 1 repeat: proves the harness runs
#
# Pythons: $XFR_PY312 and $XFR_PY311 if set, else .venv-ci/py3{12,11}/bin/python
# (scripts/env.sh makes them if one is missing); the wheel is built from the code as
# it is and installed into each (XFR_BENCH_NO_BUILD=1 skips that).
# XFR_BENCH_ONLY=py312 (or py311) runs one version only.
# Results go under $XFR_BENCH_RESULTS (default benchmarks/results).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
PY312="${XFR_PY312:-$root/.venv-ci/py312/bin/python}"
PY311="${XFR_PY311:-$root/.venv-ci/py311/bin/python}"
case "${XFR_BENCH_ONLY:-}" in
    py312) pys=("$PY312") ;;
    py311) pys=("$PY311") ;;
    "") pys=("$PY312" "$PY311") ;;
    *) echo "error: XFR_BENCH_ONLY must be py312 or py311" >&2; exit 2 ;;
esac
# The wheel of the code as it is now, in every venv measured (a venv keeps the
# wheel it was last given: without this a run after a change measures old code).
# XFR_BENCH_NO_BUILD=1 measures the wheels already installed.
if [ "${XFR_BENCH_NO_BUILD:-0}" != 1 ]; then
    # shellcheck source=/dev/null
    source "$root/scripts/env.sh"
    setup_venvs # makes a missing venv; sets PYO3_PYTHON for the build
    wheel="$(build_wheel)"
    for py in "${pys[@]}"; do
        install_wheel "$py" "$wheel"
    done
fi
args=("$@")
top="${XFR_BENCH_RESULTS:-$here/results}"
mkdir -p "$top"
case " ${args[*]:-} " in
    *" --quick "*) kind="-quick" ;;
    *) kind="" ;;
esac
report="$top/run-$(date -u +%Y-%m-%dT%H%M%SZ)$kind.txt"
: >"$report"
exec > >(tee -a "$report") 2> >(tee -a "$report" >&2)
echo "benchmarks/run.sh ${args[*]:-}: $(date -u +%Y-%m-%dT%H:%M:%SZ), code $(git -C "$root" describe --always --dirty 2>/dev/null || echo "(not a git checkout)")"
status=0
dirs=()
for PY in "${pys[@]}"; do
    ver="$("$PY" -c 'import jax; print(jax.__version__)')"
    out="$top/jax-$ver"
    dirs+=("$out")
    mkdir -p "$out"
    rm -f "$out"/*.json
    export XFR_BENCH_RESULTS="$out"
    echo; echo "################ jax $ver ($PY)"
    echo "==> building the C++ ffi.h twin against jax $ver's ffi.h"
    export XFR_BENCH_CPP_LIB="$out/cpp/libbench_ffi.so"
    mkdir -p "$out/cpp"
    if lib="$(PY="$PY" bash "$here/cpp/build.sh")"; then
        cp "$lib" "$XFR_BENCH_CPP_LIB"
        cp "$(dirname "$lib")/flags.txt" "$out/cpp/flags.txt"
    else
        echo "warning: C++ build failed; the C++ contender is skipped" >&2
        rm -f "$XFR_BENCH_CPP_LIB"
    fi
    # JAXbind is a contender of bench_python_call.py only: installed into the bench
    # venv here, never a dependency of the package.
    if ! "$PY" -c "import jaxbind" 2>/dev/null; then
        echo "==> installing jaxbind (benchmark contender only)"
        "$PY" -m pip install -q --disable-pip-version-check jaxbind \
            || echo "warning: jaxbind not installed; bench_python_call.py skips it" >&2
    fi
    cd "$here"
    for suite in bench_kepler.py bench_accuracy.py bench_overhead.py bench_rms_norm.py bench_rms_norm_tp.py bench_threads.py bench_alloc.py bench_python_call.py bench_async.py; do
        echo; echo "==> jax $ver: $suite ${args[*]:-}"
        start=$SECONDS
        if ! "$PY" "$suite" "${args[@]}"; then
            echo "error: $suite failed (jax $ver)" >&2
            status=1
        fi
        echo "($suite: $((SECONDS - start)) s)"
    done
    "$PY" summary.py "$out"
done
if [ "${#dirs[@]}" -gt 1 ]; then
    "${pys[0]}" summary.py "${dirs[@]}"
fi
# docs/performance.md's table, regenerated from these results
# (between their bench-table markers): after a full run of both versions in which
# every suite succeeded, never after --quick.
case " ${args[*]:-} " in
    *" --quick "*) echo "(--quick: docs/performance.md left as it is)" ;;
    *)
        if [ "$status" -eq 0 ] && [ "${#dirs[@]}" -gt 1 ]; then
            "${pys[0]}" summary.py "${dirs[@]}" --write "$root/docs/performance.md" >/dev/null
            echo "regenerated the benchmark table in docs/performance.md"
        else
            echo "(a suite failed or one jax version only: docs/performance.md left as it is)"
        fi
        ;;
esac
echo; echo "results in ${dirs[*]}; this output in $report"
exit $status
