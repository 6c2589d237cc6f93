# Sourced by .ci/run, scripts/demo.sh and the justfile: finds the Pythons, makes
# the two virtual environments with jax, and builds the wheel. Building needs no
# libclang and no jaxlib (the FFI ABI is declared in Rust); only the bindgen checks
# of .ci/abi.sh call ensure_libclang.
#
#   XFR_VENV_DIR   where the venvs go (default: .venv-ci in the repo)
#   XFR_SKIP_PY311 set to 1 to make only the Python 3.12 / jax 0.12 venv
#
# Supported pairs: Python 3.12 + jax 0.12.0.1 (FFI API 0.5) and
#                  Python 3.11 + jax 0.10.2   (FFI API 0.3).

set -euo pipefail
XFR_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
XFR_VENV_DIR="${XFR_VENV_DIR:-$XFR_ROOT/.venv-ci}"
JAX_312="jax[cpu]==0.12.0.1"
JAX_311="jax[cpu]==0.10.2"

log() { printf '\n==> %s\n' "$*" >&2; }

# find_python 3.12 -> path of a python3.12 interpreter (PATH, then pyenv).
find_python() {
    local v="$1" p
    for p in "python$v" "$HOME/.pyenv/versions/$v"*/bin/python "/root/.pyenv/versions/$v"*/bin/python; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$v'.split('.')))" 2>/dev/null; then
            command -v "$p"
            return 0
        fi
    done
    if command -v pyenv >/dev/null 2>&1; then
        p="$(pyenv root)/versions/$(pyenv versions --bare | grep -E "^$v(\.|$)" | tail -n1)/bin/python"
        [ -x "$p" ] && { echo "$p"; return 0; }
    fi
    echo "error: no Python $v found (install it, e.g. 'pyenv install $v')" >&2
    return 1
}

# ensure_libclang: installs libclang for bindgen (the xla-ffi-sys `bindgen` feature).
ensure_libclang() {
    if ldconfig -p 2>/dev/null | grep -Eq 'libclang(-[0-9.]+)?\.so' || [ -n "${LIBCLANG_PATH:-}" ]; then
        return 0
    fi
    log "installing libclang (bindgen needs it)"
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev >/dev/null
    else
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev >/dev/null
    fi
}

# make_venv DIR PYTHON PACKAGES...
make_venv() {
    local dir="$1" py="$2"; shift 2
    if [ ! -x "$dir/bin/python" ]; then
        log "creating $dir with $("$py" --version)"
        "$py" -m venv "$dir"
    fi
    "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@"
}

setup_venvs() {
    make_venv "$XFR_VENV_DIR/py312" "$(find_python 3.12)" "$JAX_312" "maturin>=1.7,<2" pytest numpy flatbuffers matplotlib
    export XFR_PY312="$XFR_VENV_DIR/py312/bin/python"
    if [ "${XFR_SKIP_PY311:-0}" != 1 ]; then
        make_venv "$XFR_VENV_DIR/py311" "$(find_python 3.11)" "$JAX_311" pytest numpy flatbuffers matplotlib
        export XFR_PY311="$XFR_VENV_DIR/py311/bin/python"
    fi
    # The handlers report FFI API 0.3, so the one (abi3) wheel loads on both jaxlibs.
    export PYO3_PYTHON="$XFR_PY312"
}

# build_wheel -> prints the wheel path (one abi3 wheel for Python >= 3.11).
build_wheel() {
    rm -rf "$XFR_ROOT/dist"
    log "building the abi3 wheel"
    (cd "$XFR_ROOT" && "$XFR_VENV_DIR/py312/bin/maturin" build --release --out dist >&2)
    ls "$XFR_ROOT"/dist/xla_ffi_rs-*.whl
}

install_wheel() {
    local py="$1" wheel="$2"
    "$py" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheel"
}
