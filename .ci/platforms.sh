#!/usr/bin/env bash
# The other platforms JAX's CPU wheels serve, checked from this Linux x86_64
# machine (docs/platforms.md says what runs here and what only the workflow's
# macOS, Windows and arm runners run):
#
#   1. clippy, warnings denied, for aarch64-apple-darwin and x86_64-pc-windows-msvc
#      (the lint feature set of .ci/lint_rust.sh; clippy includes cargo check), and
#      for the template examples/plugin;
#   2. the core and ops crates' Rust tests cross-built for aarch64-unknown-linux-gnu
#      (Debian's gcc-aarch64-linux-gnu) and run under qemu-aarch64, the kernels'
#      bit-for-bit tests among them;
#   3. the aarch64 manylinux_2_28 wheel (maturin --zig), run under qemu on Debian's
#      arm64 Python 3.11 (a debootstrap'ed root, unpacked, not chrooted) with jax
#      0.10.2's aarch64 wheels: .ci/wheel_smoke.py and a named subset of the
#      Kepler and rms_norm test files (ARM_TESTS);
#   4. the kernels' hot loops checked for NEON vector arithmetic in the aarch64
#      disassembly of that wheel's library (built with its symbols);
#   5. the macOS arm64 wheel (maturin --zig, no macOS SDK) and its exported and
#      imported symbols.
#
# Each part prints its time. Needs root (apt-get) for the cross compiler, qemu and
# debootstrap; outside CI without them it is skipped. `bash .ci/platforms.sh [PART...]`
# runs some parts only (clippy, qemu_tests, arm_wheel, neon, mac_wheel; neon alone
# builds the aarch64 wheel first).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
need_py312
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(clippy qemu_tests arm_wheel neon mac_wheel)

# One target folder for every cross build (kept between runs outside CI), with the
# arm64 Python root, its site-packages and their bytecode beside it.
export CARGO_TARGET_DIR="$XFR_ROOT/target/platforms" LIBCLANG_PATH=/nonexistent CARGO_TERM_COLOR=never
ARM_ROOT="$CARGO_TARGET_DIR/arm64-root"
ARM_SITE="$CARGO_TARGET_DIR/arm64-site-jax0.10.2"
ARM_GNU=aarch64-unknown-linux-gnu
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
ARM_TESTS="residual_float or jit_matches_eager or grad_matches_finite or vmap_of_grad_and_grad_of_vmap \
or forward_accuracy or jit_is_one_forward or grad_uses_bwd or grad_low_precision or vmap_of_grad_per_example"
VENV_BIN="$(dirname "$XFR_PY312")"
LLVM_BIN="$(rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin"
# Debian's archive key (debootstrap checks the arm64 packages against it; on an
# Ubuntu runner it comes with the debian-archive-keyring package).
DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# The crates' licence files are copies of the root's (symbolic links break in a
# Windows checkout without symlink support).
log "crates' LICENSE-* files equal the root's"
for f in ffi/LICENSE-* crates/*/LICENSE-*; do
    if [ -L "$f" ] || ! cmp -s "$f" "$(basename "$f")"; then
        echo "error: $f is a link or differs from the root's $(basename "$f"): copy it" >&2
        exit 1
    fi
done

have_tools() {
    command -v aarch64-linux-gnu-gcc && command -v aarch64-linux-gnu-objdump && command -v qemu-aarch64 &&
        command -v debootstrap && command -v dpkg-deb && [ -f "$DEBIAN_KEYRING" ]
} >/dev/null 2>&1
if ! have_tools; then
    if can_root || in_ci; then
        log "installing the aarch64 cross compiler, qemu-user and debootstrap"
        apt_install gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu qemu-user debootstrap \
            debian-archive-keyring
    else
        skip_step "the platform checks" "need gcc-aarch64-linux-gnu, qemu-user and debootstrap (apt-get, as root)" && exit 0
    fi
fi
log "rust targets: aarch64-apple-darwin, x86_64-pc-windows-msvc, $ARM_GNU; llvm-tools"
rustup target add aarch64-apple-darwin x86_64-pc-windows-msvc "$ARM_GNU" >&2
rustup component add llvm-tools >&2
"$XFR_PY312" -m pip install -q --disable-pip-version-check "$ZIGLANG_PIN"

times=()
timed() {
    local name="$1" t0
    shift
    t0=$(date +%s)
    "$@"
    times+=("$(printf '%-11s %4d s' "$name" $(( $(date +%s) - t0 )))")
}
trap 'printf "\n==> platforms: part times\n" >&2; printf "  %s\n" "${times[@]}" >&2' EXIT

clippy() {
    local t zig="$CARGO_TARGET_DIR/zig-tools"
    # A dev-dependency's build script (criterion's `alloca`) compiles C for the
    # target: zig's clang stands in for Apple's and Microsoft's compilers here.
    mkdir -p "$zig"
    # (cc-rs adds a clang --target= that zig names differently: the wrapper drops it.)
    local drop='for a; do shift; case "$a" in --target=*) ;; *) set -- "$@" "$a" ;; esac; done'
    printf '#!/bin/sh\n%s\nexec "%s" -m ziglang cc -target aarch64-macos "$@"\n' "$drop" "$XFR_PY312" >"$zig/cc-macos"
    printf '#!/bin/sh\n%s\nexec "%s" -m ziglang cc -target x86_64-windows-gnu "$@"\n' "$drop" "$XFR_PY312" >"$zig/cc-windows"
    printf '#!/bin/sh\nexec "%s" -m ziglang ar "$@"\n' "$XFR_PY312" >"$zig/ar"
    # For the MSVC target cc-rs calls lib.exe's way (-out:LIB -nologo OBJECTS).
    printf '#!/bin/sh\nout=\nfor a; do shift; case "$a" in -out:*) out="${a#-out:}" ;; -nologo) ;; *) set -- "$@" "$a" ;; esac; done\nexec "%s" -m ziglang ar crs "$out" "$@"\n' "$XFR_PY312" >"$zig/lib-windows"
    chmod +x "$zig"/*
    for t in aarch64-apple-darwin x86_64-pc-windows-msvc; do
        log "cargo clippy --target $t, warnings denied"
        CC_aarch64_apple_darwin="$zig/cc-macos" AR_aarch64_apple_darwin="$zig/ar" \
            CC_x86_64_pc_windows_msvc="$zig/cc-windows" AR_x86_64_pc_windows_msvc="$zig/lib-windows" \
            cargo clippy --target "$t" --workspace --all-targets --features xla-ffi/testing,xla-ffi-rs-ops/cuda -- -D warnings
        # The template, which users build on their own platform (outside the
        # workspace; its library with and without the PyO3 module).
        log "cargo clippy --target $t of examples/plugin (--features python), warnings denied"
        cargo clippy --manifest-path examples/plugin/Cargo.toml --target "$t" --lib --features python -- -D warnings
    done
}

qemu_tests() {
    log "cargo test -p xla-ffi -p xla-ffi-rs-ops for $ARM_GNU, under qemu-aarch64"
    # The compile-fail test (trybuild) checks compiler messages, not the target.
    cargo test --target "$ARM_GNU" -p xla-ffi -p xla-ffi-rs-ops --lib --tests -- --skip compile_time_guarantees
}

# arm_python: Debian 12's arm64 Python 3.11, unpacked from a debootstrap download
# (no chroot, no binfmt: qemu-aarch64 -L runs it), and jax 0.10.2's aarch64 wheels
# installed beside it by this machine's pip.
arm_python() {
    if [ ! -x "$ARM_ROOT/usr/bin/python3.11" ]; then
        log "debootstrap: Debian 12 arm64 with python3.11 (downloaded and unpacked)"
        # debootstrap runs as root (through sudo on a runner); the root is then ours.
        local sudo=()
        [ "$(id -u)" = 0 ] || sudo=(sudo -n)
        "${sudo[@]}" rm -rf "$ARM_ROOT"
        "${sudo[@]}" debootstrap --arch=arm64 --foreign --variant=minbase --include=python3.11,libstdc++6 \
            --keyring "$DEBIAN_KEYRING" bookworm "$ARM_ROOT" http://deb.debian.org/debian >/dev/null
        "${sudo[@]}" chown -R "$(id -u):$(id -g)" "$ARM_ROOT"
        local d
        for d in "$ARM_ROOT"/var/cache/apt/archives/*.deb; do dpkg-deb -x "$d" "$ARM_ROOT"; done
        rm -rf "$ARM_ROOT"/var/cache/apt/archives/*.deb
    fi
    if [ ! -d "$ARM_SITE/jaxlib" ]; then
        log "jax 0.10.2, numpy, pytest: aarch64 wheels for CPython 3.11"
        "$XFR_PY312" -m pip install -q --disable-pip-version-check --target "$ARM_SITE" \
            --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
            --platform manylinux_2_28_aarch64 --platform manylinux_2_27_aarch64 --platform manylinux2014_aarch64 \
            --only-binary=:all: "$JAX_311" pytest numpy
    fi
}
# Its bytecode goes to a folder of its own beside the root (the checkout stays
# clean): Debian's packages come without it (their install scripts, which compile
# it, are not run) and pip's is Python 3.12's, so without it each process compiles
# the standard library's and jax's modules again under qemu (about 8 s).
arm_py() {
    env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX="$CARGO_TARGET_DIR/arm64-pycache" \
        qemu-aarch64 -L "$ARM_ROOT" "$ARM_ROOT/usr/bin/python3.11" "$@"
}

# arm_wheel_build: the aarch64 manylinux_2_28 wheel, once per run: $ARM_WHEEL, and
# $ARM_LIB, its library as the linker wrote it. zig links it (against glibc 2.28),
# not the cross gcc of the tests; in a target folder of its own, so that the two
# linkers do not rebuild each other's output. `-C strip=none` (for the final crate
# only: the dependencies are not rebuilt for it) keeps the symbol table, which the
# NEON check reads: with cargo's default (strip debug info) zig strips every symbol.
ARM_WHEEL= ARM_LIB="$CARGO_TARGET_DIR/zig/$ARM_GNU/release/lib_native.so"
arm_wheel_build() {
    [ -z "$ARM_WHEEL" ] || return 0
    local out="$CARGO_TARGET_DIR/zig/wheel-$ARM_GNU"
    rm -rf "$out"
    log "aarch64 manylinux_2_28 wheel (maturin --zig), with its symbols"
    env -u CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER CARGO_TARGET_DIR="$CARGO_TARGET_DIR/zig" \
        PATH="$VENV_BIN:$PATH" "$VENV_BIN/maturin" build --release --zig --compatibility manylinux_2_28 \
        --target "$ARM_GNU" --out "$out" -- -C strip=none >&2
    ARM_WHEEL="$(ls "$out"/xla_ffi_rs-*-cp311-abi3-manylinux_2_28_aarch64.whl)"
}

# neon_check BIN SYMBOL-PATTERN MIN-FUNCTIONS MIN-EACH WHAT: at least MIN-FUNCTIONS
# functions of BIN have a (demangled) name that matches the pattern, and each holds
# at least MIN-EACH NEON vector floating-point instructions (on 2 x f64 or 4 x f32
# lanes).
neon_check() {
    local bin="$1" pat="$2" min_fns="$3" min_each="$4" what="$5" counts nfn low
    counts="$(aarch64-linux-gnu-objdump -d --no-show-raw-insn -C "$bin" |
        awk -v pat="$pat" '
            /^[0-9a-f]+ <.*>:$/ { on = ($0 ~ pat); if (on) { f = $1; n[f] = 0 } next }
            on && /[[:space:]](fmla|fmls|fmul|fadd|fsub|fdiv|fsqrt|fmax|fmin|fcm[a-z]+|frint[a-z]+)[[:space:]]+v[0-9]+\.(2d|4s)/ { n[f]++ }
            END { for (f in n) print n[f] }' | sort -n)"
    nfn="$(grep -c . <<<"$counts" || true)"
    low="$(head -n1 <<<"$counts")"
    echo "  $what: $nfn functions, $(( $(tr '\n' '+' <<<"$counts")0 )) NEON vector floating-point instructions (fmla, fmul, fadd, ... on v registers), the fewest in one function ${low:-0}" >&2
    [ "$nfn" -ge "$min_fns" ] || { echo "error: $what: $nfn functions named like /$pat/ in $bin, not at least $min_fns (inlined or renamed?)" >&2; return 1; }
    [ "$low" -ge "$min_each" ] || { echo "error: $what does not vectorize on aarch64 (a function with $low such instructions, fewer than $min_each)" >&2; return 1; }
}

# neon: the kernels' hot loops vectorize with NEON, read in the disassembly of the
# aarch64 wheel's library (the arm_wheel part's build, with its symbols): Kepler's
# block loops (`solve_blocks` for f64 and f32, with `block` inlined; fused `fmla`
# expected) and the rms_norm kernels: the backward kernel `bwd_rows` (one copy per
# dtype combination) and the forward loops, which are inlined into the handler's
# `fwd` and `fwd_separate` (one copy each per dtype combination).
neon() {
    arm_wheel_build
    log "NEON in the hot loops of the aarch64 wheel's library: aarch64-linux-gnu-objdump"
    neon_check "$ARM_LIB" 'kepler::solver::solve_blocks>' 2 100 "Kepler solver blocks"
    local fused
    fused="$(aarch64-linux-gnu-objdump -d --no-show-raw-insn -C "$ARM_LIB" |
        awk '/^[0-9a-f]+ <.*>:$/ { on = ($0 ~ /kepler::solver::solve_blocks>/) } on' | grep -cE '\sfmla\s+v' || true)"
    echo "  Kepler solver blocks: $fused fused fmla" >&2
    [ "$fused" -ge 40 ] || { echo "error: Kepler's blocks have $fused fused fmla: FMA is off on aarch64" >&2; return 1; }
    neon_check "$ARM_LIB" 'rms_norm::kernel::bwd_rows>' 2 100 "rms_norm backward kernel"
    neon_check "$ARM_LIB" 'rms_norm::cpu::fwd(_separate)?>' 2 50 "rms_norm forward loops"
}

arm_wheel() {
    local out
    arm_wheel_build
    out="$(mktemp -d)"
    "$XFR_PY312" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$ARM_WHEEL" "$out/site"
    arm_python
    log "the aarch64 wheel under qemu: Python $(arm_py -c 'import sys; print(sys.version.split()[0])'), jax 0.10.2"
    # The smoke test and the op tests side by side: each is one busy thread under
    # qemu (the interpreter, XLA's compiles), so two cores run both. The smoke test
    # runs from a scratch folder, so that only the wheel's xla_ffi_rs can be
    # imported; its output is printed when the op tests end.
    cp .ci/wheel_smoke.py "$out/"
    (cd "$out" && PYTHONPATH="$out/site:$ARM_SITE" arm_py wheel_smoke.py) >"$out/smoke.log" 2>&1 &
    local smoke_pid=$! smoke_rc=0 tests_rc=0
    # A named subset of the two op test files (the whole files take too long under
    # qemu): accuracy in every dtype, jit, grad, vmap of grad; the whole suite runs
    # on aarch64 on the workflow's arm runner.
    log "op tests on the aarch64 wheel under qemu (and .ci/wheel_smoke.py beside them): $ARM_TESTS"
    # XLA at LLVM's -O0, as in .ci/python.sh: XLA's compiles are most of the time.
    PYTHONPATH="$out/site:$ARM_SITE" XLA_FLAGS=--xla_backend_optimization_level=0 arm_py -m pytest -q -p no:cacheprovider \
        tests/ops/kepler/test_kepler.py tests/ops/rms_norm/test_rms_norm.py -k "$ARM_TESTS" || tests_rc=$?
    wait "$smoke_pid" || smoke_rc=$?
    log ".ci/wheel_smoke.py on the aarch64 wheel under qemu (exit $smoke_rc)"
    cat "$out/smoke.log"
    [ "$tests_rc" = 0 ] && [ "$smoke_rc" = 0 ] || { echo "error: the op tests (exit $tests_rc) or the smoke test (exit $smoke_rc) failed under qemu" >&2; return 1; }
    rm -rf "$out"
}

mac_wheel() {
    local out
    out="$(mktemp -d)"
    # zig links for macOS without the SDK (rustc warns that xcrun is missing; the
    # SDK version in the binary is then zig's default).
    log "macOS arm64 wheel (maturin --zig, no macOS SDK)"
    CARGO_TARGET_DIR="$CARGO_TARGET_DIR/zig" PATH="$VENV_BIN:$PATH" \
        "$VENV_BIN/maturin" build --release --zig --target aarch64-apple-darwin --out "$out" >&2
    local wheel so
    wheel="$(ls "$out"/xla_ffi_rs-*-cp311-abi3-macosx_11_0_arm64.whl)"
    "$XFR_PY312" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$wheel" "$out/site"
    so="$out/site/xla_ffi_rs/_native.abi3.so"
    log "its symbols ($(basename "$wheel"))"
    file "$so" >&2 || true
    "$LLVM_BIN/llvm-nm" -g --defined-only "$so" | awk '{print $3}' >"$out/exported"
    "$LLVM_BIN/llvm-nm" -g -u "$so" | awk '{print $NF}' >"$out/imported"
    "$LLVM_BIN/llvm-objdump" --macho --dylibs-used "$so" | tail -n +2 | awk '{print $1}' >"$out/dylibs"
    grep -qx _PyInit__native "$out/exported" || { echo "error: no PyInit__native in $so" >&2; return 1; }
    # C-named exports: the module's init, the handlers' C entry points
    # (#[no_mangle]), and what every Mach-O dylib or Rust cdylib has.
    local unexpected
    unexpected="$(grep -vE '^(_PyInit__native|_xla_ffi_handler__[A-Za-z0-9_]+|_rust_eh_personality|___dso_handle|__mh_dylib_header|__R.*|__ZN.*)$' "$out/exported" || true)"
    [ -z "$unexpected" ] || { echo "error: unexpected exports: $unexpected" >&2; return 1; }
    # Python symbols come from the interpreter at load time (-undefined dynamic_lookup);
    # only system libraries are linked.
    local bad_dylibs
    bad_dylibs="$(grep -vE '^(@rpath/xla_ffi_rs\._native\.abi3\.so|/usr/lib/libSystem\.B\.dylib|/usr/lib/libiconv\.2\.dylib|/usr/lib/libcharset\.1\.dylib)$' "$out/dylibs" || true)"
    [ -z "$bad_dylibs" ] || { echo "error: links libraries besides the system's: $bad_dylibs" >&2; return 1; }
    printf '  PyInit__native exported; %d handler entry points; %d Rust-mangled exports; %d Python symbols imported; links %s\n' \
        "$(grep -c '^_xla_ffi_handler__' "$out/exported")" "$(grep -cE '^__(R|ZN)' "$out/exported" || true)" \
        "$(grep -cE '^_{1,2}Py' "$out/imported")" "$(tr '\n' ' ' <"$out/dylibs")" >&2
    rm -rf "$out"
}

for p in "${parts[@]}"; do
    case "$p" in
        clippy | qemu_tests | arm_wheel | neon | mac_wheel) timed "$p" "$p" ;;
        *) echo "error: unknown part $p (clippy, qemu_tests, arm_wheel, neon, mac_wheel)" >&2; exit 2 ;;
    esac
done
