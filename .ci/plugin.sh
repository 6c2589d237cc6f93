#!/usr/bin/env bash
# examples/plugin, built as a user's crate outside the workspace, with libclang made
# unavailable (the ABI is declared in Rust; no header, no bindgen): its Rust tests,
# then its Python tests through ctypes and PyO3 on both development jax versions,
# and the blocks of the docs that use it (tests/test_docs.py -k plugin); then the
# template as a package: `pip install examples/plugin` into a fresh venv, its
# tests/ and the docs' blocks that import it (-k package); and two copies made as its
# README's "Making it yours" says, installed side by side (.ci/plugin_copies.sh).
# Makes the venvs of scripts/env.sh unless XFR_PY312 / XFR_PY311 are set.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
[ -n "${XFR_PY312:-}" ] && [ -n "${XFR_PY311:-}" ] || setup_venvs
# The project's wheel (XFR_WHEEL: the one .ci/run built), in both venvs.
wheel="${XFR_WHEEL:-$(build_wheel)}"
install_wheel "$XFR_PY312" "$wheel"
install_wheel "$XFR_PY311" "$wheel"
cd examples/plugin
unset XLA_FFI_INCLUDE_DIR
export LIBCLANG_PATH=/nonexistent
export PYO3_PYTHON="$XFR_PY312"

# No lock file is committed: it resolves like a new user's crate (pyo3 0.25.x).
cargo fmt --check
cargo clippy --all-targets --features python -- -D warnings
cargo test
cargo build --release
CARGO_TARGET_DIR=target/python cargo build --release --features python
export PLUGIN_CTYPES_LIB="$PWD/target/release/libxla_ffi_plugin_example.so"
export PLUGIN_PYO3_LIB="$PWD/target/python/release/libxla_ffi_plugin_example.so"
for py in "$XFR_PY312" "$XFR_PY311"; do
    "$py" -m pytest -q -p no:cacheprovider test_plugin.py test_features.py
    # The docs' blocks that register this plugin (docs/handlers.md), as written.
    XFR_DOCS_PLUGIN=1 "$py" -m pytest -q -p no:cacheprovider ../../tests/test_docs.py -k "plugin and not package"
done

# The template as a package: the project's wheel, then `pip install examples/plugin`
# into a FRESH venv (as a user does: maturin builds the crate with feature `python`),
# its tests from the installed package, and the docs' blocks that import it.
cd ../..
log "pip install examples/plugin into a fresh venv, its tests, the docs' package blocks"
t0=$(date +%s)
fresh="$(mktemp -d)/venv"
"$(find_python 3.12)" -m venv "$fresh"
trap 'rm -rf "$(dirname "$fresh")"' EXIT
"$fresh/bin/python" -m pip install -q --disable-pip-version-check "$wheel" "$JAX_312"
# No lock file: the build resolves like a user's; the cargo cache of target/python is reused.
CARGO_TARGET_DIR="$PWD/examples/plugin/target/python" \
    "$fresh/bin/python" -m pip install -q --disable-pip-version-check "./examples/plugin[test]"
(cd examples/plugin && "$fresh/bin/python" -m pytest -q -p no:cacheprovider tests)
# The README's export block serializes, which needs flatbuffers: installed as it says.
"$fresh/bin/python" -m pip install -q --disable-pip-version-check flatbuffers
XFR_DOCS_PACKAGE=1 "$fresh/bin/python" -m pytest -q -p no:cacheprovider tests/test_docs.py -k package
# Two packages made from the template as its README's "Making it yours" says, side by
# side in the same venv (their names must not clash).
bash .ci/plugin_copies.sh "$fresh/bin/python" "$PWD/examples/plugin/target/python"
log "the template package: $(( $(date +%s) - t0 )) s"
