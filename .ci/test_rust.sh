#!/usr/bin/env bash
# cargo test of the whole workspace: unit and integration tests, the trybuild
# suite (crates/xla-ffi/tests/ui.rs) and the doc tests, which include the Rust
# blocks of README.md and docs/*.md. The ABI is the one declared in Rust: no
# libclang, no header. `bash .ci/test_rust.sh`
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
need_py312

log "cargo test (the ABI declared in Rust; no libclang, no header)"
LIBCLANG_PATH=/nonexistent cargo test --workspace --features xla-ffi-rs-ops/cuda
