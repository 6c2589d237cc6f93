#!/usr/bin/env bash
# The minimum Rust version stated in Cargo.toml (`rust-version`, workspace.package):
# `cargo check` of the workspace (every crate, all features that build without a
# GPU or libclang) and of examples/plugin (feature `python`) with that toolchain.
# Installs it under CI (rustup); outside CI it runs when the toolchain is there and
# is skipped otherwise. `bash .ci/msrv.sh`
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
log "cargo +$msrv check (the workspace and examples/plugin)"
export CARGO_TARGET_DIR="$PWD/target/msrv"
cargo "+$msrv" check --workspace --locked
cargo "+$msrv" check --workspace --locked --features xla-ffi/cuda,xla-ffi/pyo3,xla-ffi/testing
(cd examples/plugin && LIBCLANG_PATH=/nonexistent cargo "+$msrv" check --features python)
log "Rust $msrv builds the workspace and the plugin"
