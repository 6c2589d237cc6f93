# The one place for environment set-up, sourced by every .ci/*.sh script,
# scripts/*.sh, the justfile and the GitHub workflows (through those scripts):
# finds the Pythons, makes the two virtual environments with jax, builds the
# wheel, holds the tool pins, installs the nightly toolchain, and decides whether
# a step that needs root or nightly runs or is skipped. Building needs no libclang
# and no jaxlib (the FFI ABI is declared in Rust); only the bindgen checks of
# .ci/abi.sh and .ci/package.sh need libclang.
#
#   XFR_VENV_DIR   where the venvs go (default: .venv-ci in the repo)
#   XFR_SKIP_PY311 set to 1 to make only the Python 3.12 / jax 0.12 venv
#   CI             "true" (set by GitHub Actions): steps needing root or nightly
#                  install what they need and fail if they cannot; otherwise they
#                  print "skipping ...: needs ..." and are skipped.
#
# Tested Python x jax pairs (docs/versions.md states the policy; each is a job of
# .github/workflows/ci.yml, and the README's table lists them):
#   the two development venvs (setup_venvs; XFR_PY312, XFR_PY311):
#     Python 3.12 + jax 0.12.0.1           (FFI API 0.5)
#     Python 3.11 + jax 0.10.2             (FFI API 0.3)
#   the other pairs (pair_python LABEL; made on first use):
#     3.12-jax0.11: Python 3.12 + the newest jax 0.11.x
#     3.13:         Python 3.13 + the newest jax 0.12.x

set -euo pipefail
XFR_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
XFR_VENV_DIR="${XFR_VENV_DIR:-$XFR_ROOT/.venv-ci}"
JAX_312="jax[cpu]==0.12.0.1"
JAX_311="jax[cpu]==0.10.2"
# Ranges, not pins: pip resolves the newest patch release in each, so a new patch
# release is tested by the next run (the version policy of docs/versions.md).
JAX_011="jax[cpu]>=0.11,<0.12"
JAX_NEWEST="jax[cpu]>=0.12,<0.13"
TEST_PACKAGES=(pytest numpy flatbuffers matplotlib)
# Tool pins (Python lint and type check; the workflow validator).
RUFF_PIN="ruff==0.17.5"
MYPY_PIN="mypy==2.4.1"
CHECK_JSONSCHEMA_PIN="check-jsonschema>=0.29,<1"
ZIGLANG_PIN="ziglang>=0.13,<0.18"

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

in_ci() { [ "${CI:-}" = true ]; }

# skip_step WHAT WHY: outside CI, prints "skipping WHAT: WHY" and succeeds (the
# caller then skips the step); under CI=true it fails, so the step runs and fails
# if it cannot. Usage: `have_x || skip_step "Miri" "needs nightly" && exit 0`.
skip_step() {
    if in_ci; then
        return 1
    fi
    echo "skipping $1: $2 (runs under CI=true)" >&2
    return 0
}

# can_root: root, or sudo without a password.
can_root() { [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }

# apt_install PACKAGES...: apt-get as root (or through sudo).
apt_install() {
    local sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo -n)
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

have_libclang() {
    ldconfig -p 2>/dev/null | grep -Eq 'libclang(-[0-9.]+)?\.so' || [ -n "${LIBCLANG_PATH:-}" ]
}

# ensure_libclang: installs libclang for bindgen (the xla-ffi-sys `bindgen` feature).
# Returns 1 when it is missing and cannot be installed (no root) outside CI.
ensure_libclang() {
    have_libclang && return 0
    if ! can_root && ! in_ci; then
        return 1
    fi
    log "installing libclang (bindgen needs it)"
    apt_install libclang-dev
}

# ensure_nightly [COMPONENT...]: the one nightly toolchain of Miri, fuzzing,
# sanitizers and the docs.rs build (with Miri and rust-src, so one install serves
# all). Installs it under CI or when a nightly is already there (rustup adds the
# components); returns 1 when there is no nightly outside CI.
ensure_nightly() {
    if ! in_ci && ! rustup run nightly rustc --version >/dev/null 2>&1; then
        return 1
    fi
    rustup toolchain install nightly --profile minimal --component miri --component rust-src --allow-downgrade >&2
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
    local py311_pid=""
    # The two venvs side by side: each is mostly one pip process.
    if [ "${XFR_SKIP_PY311:-0}" != 1 ]; then
        make_venv "$XFR_VENV_DIR/py311" "$(find_python 3.11)" "$JAX_311" pytest numpy flatbuffers matplotlib &
        py311_pid=$!
    fi
    make_venv "$XFR_VENV_DIR/py312" "$(find_python 3.12)" "$JAX_312" "maturin>=1.7,<2" pytest numpy flatbuffers matplotlib
    export XFR_PY312="$XFR_VENV_DIR/py312/bin/python"
    if [ -n "$py311_pid" ]; then
        wait "$py311_pid" || return
        export XFR_PY311="$XFR_VENV_DIR/py311/bin/python"
    fi
    # The handlers report FFI API 0.3, so the one (abi3) wheel loads on both jaxlibs.
    export PYO3_PYTHON="$XFR_PY312"
}

# pair_python LABEL -> prints the path of the Python of a tested pair beyond the
# development venvs (made, or brought to the newest release in its range, first):
# 3.12-jax0.11 (Python 3.12 + newest jax 0.11.x), 3.13 (Python 3.13 + newest 0.12.x).
pair_python() {
    local dir py jax
    case "$1" in
        3.12-jax0.11) dir=py312-jax011 py=3.12 jax="$JAX_011" ;;
        3.13) dir=py313 py=3.13 jax="$JAX_NEWEST" ;;
        *) echo "error: no tested pair named $1 (3.12-jax0.11 or 3.13)" >&2; return 2 ;;
    esac
    make_venv "$XFR_VENV_DIR/$dir" "$(find_python "$py")" "$jax" "${TEST_PACKAGES[@]}" >&2
    echo "$XFR_VENV_DIR/$dir/bin/python"
}

# need_py312: the Python 3.12 venv (made if this script runs alone, not from .ci/run),
# also as the Python that pyo3's build script inspects.
need_py312() {
    [ -n "${XFR_PY312:-}" ] || XFR_SKIP_PY311=1 setup_venvs
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
