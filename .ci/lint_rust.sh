#!/usr/bin/env bash
# Rust format check and clippy with warnings denied, over the whole workspace
# (the CUDA, testing and fixture features included). `bash .ci/lint_rust.sh`
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
need_py312

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --features xla-ffi/testing,xla-ffi-rs-ops/fixture -- -D warnings
