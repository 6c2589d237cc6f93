#!/usr/bin/env bash
# Handlers outside Python: builds xla-ffi-run and the Python-free handler
# libraries (crates/ops, examples/plugin without `python`), gets CPU PJRT plugins
# from PyPI (lammps-jax-pjrt-cpu 0.11.2: PJRT 0.115, FFI 0.4; xla-cpu-pjrt 0.0.1:
# FFI 0.2, for the "too old" error; fastatomstruct-xla-cpu 2026.6.23: StableHLO
# 1.16, for "bytecode too new" and the text form), exports the test programs with jax 0.12 and
# this branch's wheel (tests/host/make_exports.py), and runs tests/host (the
# runner as a subprocess: results against JAX's, the committed export, each error,
# the commands of docs/outside-python.md) and the Rust host test of xla-ffi-pjrt.
# Installs the wheel XFR_WHEEL when set (.ci/run builds it once), else builds one.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
need_py312

log "xla-ffi-run and the ops library (release)"
cargo build --release -p xla-ffi-run -p xla-ffi-rs-ops-cdylib
log "examples/plugin without its python feature"
cargo build --release --manifest-path examples/plugin/Cargo.toml

plugins="$XFR_ROOT/target/pjrt-plugins"
get_plugin() {  # get_plugin NAME==VERSION: downloads (pip cache) and unpacks the wheel
    local spec="$1" dir="$plugins/${1%%==*}"
    if [ ! -d "$dir" ]; then
        if ! "$XFR_PY312" -m pip download -q --disable-pip-version-check --no-deps "$spec" -d "$plugins/wheels"; then
            skip_step "tests/host" "cannot download $spec from PyPI" && exit 0
            echo "error: cannot download $spec" >&2
            exit 1
        fi
        mkdir -p "$dir"
        "$XFR_PY312" -m zipfile -e "$plugins/wheels/$(echo "${spec%%==*}" | tr - _)-${spec##*==}-"*.whl "$dir"
    fi
}
log "CPU PJRT plugins from PyPI"
get_plugin lammps-jax-pjrt-cpu==0.11.2
get_plugin xla-cpu-pjrt==0.0.1
get_plugin fastatomstruct-xla-cpu==2026.6.23

if [ -n "${XFR_WHEEL:-}" ]; then
    install_wheel "$XFR_PY312" "$XFR_WHEEL"
else
    install_wheel "$XFR_PY312" "$(build_wheel)"
fi

exports="$(mktemp -d)"
trap 'rm -rf "$exports"' EXIT
log "exporting the test programs (jax $("$XFR_PY312" -c 'import jax; print(jax.__version__)'))"
"$XFR_PY312" tests/host/make_exports.py "$exports"

log "tests/host: xla-ffi-run against JAX's results"
export XFR_HOST_REQUIRED=1
export XFR_RUNNER="$XFR_ROOT/target/release/xla-ffi-run"
export XFR_PJRT_PLUGIN="$plugins/lammps-jax-pjrt-cpu/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"
export XFR_OLD_PJRT_PLUGIN="$plugins/xla-cpu-pjrt/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"
export XFR_STABLEHLO_1_16_PLUGIN="$plugins/fastatomstruct-xla-cpu/fastatomstruct_xla_cpu/libpjrt_cpu.so"
export XFR_OPS_LIB="$XFR_ROOT/target/release/libxla_ffi_rs_ops.so"
export XFR_PLUGIN_LIB="$XFR_ROOT/examples/plugin/target/release/libxla_ffi_plugin_example.so"
export XFR_HOST_EXPORTS="$exports"
"$XFR_PY312" -m pytest -q -p no:cacheprovider tests/host

log "a Rust host: linked handlers, user data through an execute context, jax.export files from threads (xla-ffi-pjrt/tests/host_*.rs)"
cargo test --release -p xla-ffi-pjrt --test host_plugin --test host_exported
