#!/usr/bin/env bash
# The minimum Rust version stated in Cargo.toml (`rust-version` of
# [workspace.package], 1.89): `cargo check` of the crates a plugin depends on
# (xla-ffi with its CUDA, PyO3 and testing features, xla-ffi-sys, the macro and
# rule crates) and of examples/plugin (feature `python`) with that toolchain. The
# two crates of this repository's own wheel (xla-ffi-rs-ops, xla-ffi-rs-python)
# state a newer one of their own (1.95, the oldest toolchain tested on them:
# Rust 1.89 still marks x86 intrinsics they call unsafe), checked here with it.
# Installs 1.89 under CI (rustup); outside CI it runs when the toolchain is there
# and is skipped otherwise. `bash .ci/msrv.sh`
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
msrv="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)"
[ -n "$msrv" ] || { echo "error: no rust-version in Cargo.toml" >&2; exit 1; }
if ! rustup run "$msrv" rustc --version >/dev/null 2>&1; then
    if in_ci; then
        rustup toolchain install "$msrv" --profile minimal
    else
        skip_step "the MSRV check" "needs Rust $msrv (rustup toolchain install $msrv)" && exit 0
    fi
fi
need_py312
log "cargo +$msrv check (xla-ffi and the crates under it, examples/plugin)"
export CARGO_TARGET_DIR="$PWD/target/msrv"
cargo "+$msrv" check --locked -p xla-ffi -p xla-ffi-sys -p xla-ffi-macros -p xla-ffi-rules \
    --features xla-ffi/cuda,xla-ffi/pyo3,xla-ffi/testing
(cd examples/plugin && LIBCLANG_PATH=/nonexistent cargo "+$msrv" check --features python)
ops_msrv="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' crates/ops/Cargo.toml)"
if rustup run "$ops_msrv" rustc --version >/dev/null 2>&1 || in_ci; then
    in_ci && rustup toolchain install "$ops_msrv" --profile minimal
    cargo "+$ops_msrv" check --locked -p xla-ffi-rs-ops -p xla-ffi-rs-python --features xla-ffi-rs-ops/cuda
fi
log "Rust $msrv builds the crates a plugin depends on, and the plugin"
