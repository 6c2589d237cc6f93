#!/usr/bin/env bash
# Builds the abi3 wheel once and runs the Python suite (tests/, then tests/sharding
# in its own process with 8 forced CPU devices) on each Python named. With several,
# the versions run side by side (each suite is mostly one busy thread), each into
# its own log, printed whole when it ends:
#
#   bash .ci/python.sh            Python 3.12 + jax 0.12 and Python 3.11 + jax 0.10
#   bash .ci/python.sh 3.12       one of them (3.12 or 3.11)
#   bash .ci/python.sh 3.13       a pair of pair_python (scripts/env.sh): 3.13
#                                 (newest jax 0.12.x) or 3.12-jax0.11 (newest 0.11.x)
#
# XFR_WHEEL: a wheel already built (by .ci/run) to install instead of building one.
# XFR_SUITE=ops: only the op tests (OP_TESTS below: the ops, their derivatives,
# the declared bindings, the examples; OP_SHARDING_TESTS: the ops' own sharding
# tests), not the whole suite; what .ci/run runs on the pair of the newest jax,
# whose jax the full suite already ran on with Python 3.12 (the workflow runs every
# pair in full).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.12 3.11)
case " ${versions[*]} " in
    *" 3.11 "*) [ -n "${XFR_PY311:-}" ] || setup_venvs ;;
    *) [ -n "${XFR_PY312:-}" ] || XFR_SKIP_PY311=1 setup_venvs ;;
esac

OP_TESTS=(tests/ops tests/test_op_fixtures.py tests/test_public_types.py
    tests/test_binding_declared.py tests/test_examples.py tests/test_raw_targets.py tests/test_export.py)
OP_SHARDING_TESTS=(tests/sharding/test_kepler_sharding.py tests/sharding/test_kepler_derivatives_sharding.py
    tests/sharding/test_rms_norm_sharding.py)

# XLA's CPU backend compiles at LLVM's -O0, which takes about an eighth off the
# suites' CPU time (measured in CONTRIBUTING.md) without changing what they test: XLA's HLO
# passes, which decide fusion, layouts, aliasing and buffers, run as always, and
# the ops' kernels are our own release builds; only the machine code XLA makes for
# JAX's own operations is less optimized.
FAST_XLA=--xla_backend_optimization_level=0

# suite PYTHON: the whole suite on one Python (the wheel installed first).
suite() {
    local py="$1" tests=(tests --ignore=tests/sharding) sharding=(tests/sharding)
    if [ "${XFR_SUITE:-all}" = ops ]; then
        tests=("${OP_TESTS[@]}")
        sharding=("${OP_SHARDING_TESTS[@]}")
    fi
    log "pytest (${XFR_SUITE:-all}) with $("$py" -c 'import sys, jax; print(f"Python {sys.version.split()[0]}, jax {jax.__version__}")')"
    XLA_FLAGS="$FAST_XLA" "$py" -m pytest -q -p no:cacheprovider "${tests[@]}"
    log "sharding tests (8 forced CPU devices, own process)"
    XLA_FLAGS="--xla_force_host_platform_device_count=8 $FAST_XLA" "$py" -m pytest -q -p no:cacheprovider "${sharding[@]}"
}

wheel="${XFR_WHEEL:-$(build_wheel)}"
pys=()
for v in "${versions[@]}"; do
    case "$v" in
        3.12) pys+=("$XFR_PY312") ;;
        3.11) pys+=("$XFR_PY311") ;;
        *)
            # A pair's Python (3.13) may be missing outside CI: skipped, saying so.
            if ! find_python "${v%%-*}" >/dev/null 2>&1; then
                skip_step "the pair $v" "needs Python ${v%%-*} (pyenv install ${v%%-*})" && continue
                exit 1
            fi
            p="$(pair_python "$v")"
            pys+=("$p")
            ;;
    esac
    install_wheel "${pys[-1]}" "$wheel"
done
[ ${#pys[@]} -gt 0 ] || exit 0
if [ ${#pys[@]} -eq 1 ]; then
    suite "${pys[0]}"
    exit 0
fi
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
pids=()
for i in "${!pys[@]}"; do
    suite "${pys[$i]}" >"$logs/$i.log" 2>&1 &
    pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    cat "$logs/$i.log"
    if [ "$rc" != 0 ]; then
        echo "error: the suite on Python ${versions[$i]} failed (exit $rc)" >&2
        failed=1
    fi
done
exit "$failed"
