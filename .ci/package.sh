#!/usr/bin/env bash
# crates.io readiness: the docs build without warnings with every feature, and as
# docs.rs builds them; each publishable crate packages and builds from its .crate
# file alone (no libclang: the ABI is declared in Rust).
#
# `--all-features` includes xla-ffi-sys's `bindgen`, which needs libclang and a
# jaxlib header: this script installs libclang when missing (as root or under
# CI=true; otherwise that step is skipped with a printed line) and takes the
# header from the Python 3.12 venv's jaxlib. The docs.rs build needs nightly
# (skipped likewise when there is none outside CI).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
XFR_SKIP_PY311=1 setup_venvs >/dev/null
crates=(-p xla-ffi-sys -p xla-ffi-rules -p xla-ffi-macros -p xla-ffi -p xla-ffi-rs-ops)

if ensure_libclang; then
    log "cargo doc --all-features, warnings denied (bindgen's bindings from jax $("$XFR_PY312" -c 'import jax; print(jax.__version__)'))"
    XLA_FFI_INCLUDE_DIR="$("$XFR_PY312" -c 'import jax.ffi; print(jax.ffi.include_dir())')" \
        CARGO_TARGET_DIR=target/doc-all-features RUSTDOCFLAGS="-D warnings" \
        cargo doc --no-deps --all-features "${crates[@]}"
else
    skip_step "cargo doc --all-features" "needs libclang (apt-get install libclang-dev, as root)" || exit 1
fi

log "cargo doc as the README says (stable; every module but bindgen's), warnings denied"
CARGO_TARGET_DIR=target/doc RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p xla-ffi --features testing,pyo3,cuda
# `testing` alone: a doc link to a `cuda`-only item breaks there.
CARGO_TARGET_DIR=target/doc RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p xla-ffi --features testing
CARGO_TARGET_DIR=target/doc RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p xla-ffi-pjrt --features testing

# docs.rs: nightly rustdoc with --cfg docsrs (doc(cfg) badges on feature-gated
# items) and each crate's [package.metadata.docs.rs] features; no libclang, no header.
if ensure_nightly; then
    log "cargo +nightly doc as docs.rs builds it (--cfg docsrs)"
    (unset XLA_FFI_INCLUDE_DIR
     export LIBCLANG_PATH=/nonexistent CARGO_TARGET_DIR=target/docsrs RUSTDOCFLAGS="--cfg docsrs -D warnings"
     cargo +nightly doc --no-deps -p xla-ffi-sys -p xla-ffi-rules -p xla-ffi-macros
     cargo +nightly doc --no-deps -p xla-ffi --features pyo3,testing,cuda
     cargo +nightly doc --no-deps -p xla-ffi-pjrt --features testing
     cargo +nightly doc --no-deps -p xla-ffi-rs-ops --features cuda)
else
    skip_step "the docs.rs build" "needs the nightly toolchain (rustup toolchain install nightly)" || exit 1
fi
unset XLA_FFI_INCLUDE_DIR

log "cargo package (each crate builds from its .crate file)"
# Cargo unpacks the packaged crates under $CARGO_HOME/registry/src/-<hash of the
# temporary registry's path>/ and reuses an unpacked copy of the same name and
# version: a run from a checkout at the same path as an earlier one would verify the
# earlier run's sources. Remove those copies first (they are only ever ours).
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/xla-ffi-*
# Packaged together, so that crates not yet on crates.io resolve to each other's
# .crate files (cargo >= 1.90).
LIBCLANG_PATH=/nonexistent cargo package --allow-dirty \
    "${crates[@]}"

# The release wheel: abi3, manylinux_2_28 (glibc 2.28), as release.yml builds it.
# maturin --zig links against glibc 2.28 and checks the symbol versions itself; the
# wheel is then imported from a scratch folder and runs one op.
log "abi3 wheel for manylinux_2_28 (maturin --zig), imported and run"
"$XFR_PY312" -m pip install -q --disable-pip-version-check "$ZIGLANG_PIN"
wheels="$(mktemp -d)"
PATH="$(dirname "$XFR_PY312"):$PATH" "$(dirname "$XFR_PY312")/maturin" build --release --zig \
    --compatibility manylinux_2_28 --out "$wheels" >&2
wheel="$(ls "$wheels"/xla_ffi_rs-*-cp311-abi3-manylinux_2_28_x86_64.whl)"
"$XFR_PY312" -m pip install -q --disable-pip-version-check --no-deps --target "$wheels/site" "$wheel"
(cd "$wheels" && PYTHONPATH="$wheels/site" "$XFR_PY312" -c '
import jax.numpy as jnp, numpy as np, xla_ffi_rs as xr
s, c = xr.kepler(jnp.array([1.0]), 0.0)
assert xr.__file__.startswith("'"$wheels"'"), xr.__file__
np.testing.assert_allclose([float(s[0]), float(c[0])], [np.sin(1.0), np.cos(1.0)], rtol=1e-6)
print("manylinux_2_28 wheel:", xr.__file__)')
rm -rf "$wheels"
