#!/usr/bin/env bash
# Builds the abi3 wheel once and runs the Python suite (tests/, then tests/sharding
# in its own process with 8 forced CPU devices) on each Python named:
#
#   bash .ci/python.sh            Python 3.12 + jax 0.12, then Python 3.11 + jax 0.10
#   bash .ci/python.sh 3.12       one of them (3.12 or 3.11)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.12 3.11)
case " ${versions[*]} " in
    *" 3.11 "*) [ -n "${XFR_PY311:-}" ] || setup_venvs ;;
    *) [ -n "${XFR_PY312:-}" ] || XFR_SKIP_PY311=1 setup_venvs ;;
esac

wheel=$(build_wheel)
for v in "${versions[@]}"; do
    case "$v" in
        3.12) py="$XFR_PY312" ;;
        3.11) py="$XFR_PY311" ;;
        *) echo "error: unsupported Python $v (3.12 or 3.11)" >&2; exit 2 ;;
    esac
    log "pytest with $("$py" -c 'import sys, jax; print(f"Python {sys.version.split()[0]}, jax {jax.__version__}")')"
    install_wheel "$py" "$wheel"
    "$py" -m pytest -q -p no:cacheprovider tests --ignore=tests/sharding
    log "sharding tests (8 forced CPU devices, own process)"
    XLA_FLAGS=--xla_force_host_platform_device_count=8 "$py" -m pytest -q -p no:cacheprovider tests/sharding
done
