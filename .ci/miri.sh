#!/usr/bin/env bash
# Miri over the core crate's tests, the PJRT crate's registration (on a fake
# plugin) and the PyO3 crate's streaming copy: undefined behaviour, Stacked Borrows
# (Miri's default aliasing rules), data races and leaks, in every synthetic frame.
# Needs the nightly toolchain (ensure_nightly in scripts/env.sh: installed under
# CI=true; skipped with a printed line elsewhere when there is no nightly).
# How long: CONTRIBUTING.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

log "Miri: nightly with miri"
if ! ensure_nightly; then
    skip_step "Miri" "needs the nightly toolchain (rustup toolchain install nightly)" && exit 0
    exit 1
fi
cargo +nightly miri setup

log "Miri: cargo miri test -p xla-ffi"
cargo +nightly miri test -p xla-ffi

# The PJRT crate's loading layer, against its fake plugin (`xla_ffi_pjrt::testing`).
log "Miri: cargo miri test -p xla-ffi-pjrt"
cargo +nightly miri test -p xla-ffi-pjrt

# The PyO3 crate's NumPy engine: its streaming copy, compiled alone (the rest of the
# engine calls Python's C API, which Miri cannot run; tested from Python instead).
log "Miri: cargo miri test -p xla-ffi-rs-python --test bulk_copy"
PYO3_PYTHON="${PYO3_PYTHON:-${XFR_PY312:-python3}}" cargo +nightly miri test -p xla-ffi-rs-python --test bulk_copy
