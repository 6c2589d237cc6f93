#!/usr/bin/env bash
# The hand-declared ABI of xla-ffi-sys against bindgen's output from the API 0.5
# (jax 0.12) and 0.3 (jax 0.10) headers: sizes, alignments, field offsets and
# constants; then the core's tests on the bindgen-generated 0.3 bindings.
# Needs libclang (installed here as root or under CI=true; otherwise skipped with
# a printed line) and the two venvs.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
if ! ensure_libclang; then
    skip_step "the bindgen ABI checks" "need libclang (apt-get install libclang-dev, as root)" && exit 0
    exit 1
fi
[ -n "${XFR_PY312:-}" ] && [ -n "${XFR_PY311:-}" ] || setup_venvs
inc() { "$1" -c 'import jax.ffi; print(jax.ffi.include_dir())'; }

log "layout tests: hand-declared ABI vs bindgen, API 0.5 header (jax 0.12)"
XLA_FFI_INCLUDE_DIR="$(inc "$XFR_PY312")" CARGO_TARGET_DIR=target/bindgen-0.5 \
    cargo test -p xla-ffi-sys --features bindgen

log "layout tests: hand-declared ABI vs bindgen, API 0.3 header (jax 0.10)"
XLA_FFI_INCLUDE_DIR="$(inc "$XFR_PY311")" CARGO_TARGET_DIR=target/bindgen-0.3 \
    cargo test -p xla-ffi-sys --features bindgen

log "cargo test of the core on bindgen's API 0.3 bindings (jax 0.10)"
XLA_FFI_INCLUDE_DIR="$(inc "$XFR_PY311")" CARGO_TARGET_DIR=target/bindgen-0.3 \
    cargo test -p xla-ffi --features bindgen,testing -- --skip compile_time_guarantees
