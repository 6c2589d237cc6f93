#!/usr/bin/env bash
# Sanitizers:
#  1. the core crate's tests, and the PyO3 crate's streaming copy (tests/bulk_copy.rs),
#     under AddressSanitizer (nightly -Zsanitizer=address);
#  2. the same test binaries under valgrind memcheck;
#  3. the Python raw-target suite (tests/test_raw_targets.py) with the extension
#     module built under AddressSanitizer and libasan preloaded into Python.
# The trybuild tests are skipped here: they only run rustc (and their expected
# messages are stable rustc's, not nightly's).
# Needs the nightly toolchain and valgrind (apt-get, as root): under CI=true they
# are installed; elsewhere a step whose tool is missing is skipped with a line.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
if [ -z "${XFR_PY312:-}" ]; then XFR_SKIP_PY311=1 setup_venvs; fi
host="$(rustc -vV | sed -n 's/^host: //p')"
if ! ensure_nightly; then
    skip_step "sanitizers" "need the nightly toolchain (rustup toolchain install nightly)" && exit 0
    exit 1
fi
asan=(env RUSTFLAGS="-Zsanitizer=address" CARGO_TARGET_DIR=target/asan)
skip=(--skip compile_time_guarantees)

log "AddressSanitizer: cargo test -p xla-ffi"
# --target keeps the sanitizer off build scripts (bindgen).
ASAN_OPTIONS=detect_leaks=1 "${asan[@]}" cargo +nightly test -p xla-ffi --target "$host" --tests -- "${skip[@]}"
log "AddressSanitizer: cargo test -p xla-ffi-rs-python --test bulk_copy"
ASAN_OPTIONS=detect_leaks=1 "${asan[@]}" cargo +nightly test -p xla-ffi-rs-python --target "$host" --test bulk_copy

log "valgrind memcheck: the core test binaries"
bins=()
if ! command -v valgrind >/dev/null && { can_root || in_ci; }; then
    apt_install valgrind
fi
if command -v valgrind >/dev/null; then
    mapfile -t bins < <({
        cargo test -p xla-ffi --tests --no-run --message-format=json
        cargo test -p xla-ffi-rs-python --test bulk_copy --no-run --message-format=json
    } 2>/dev/null |
        python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] != ["bin"]:
        print(m["executable"])')
else
    skip_step "valgrind memcheck" "needs valgrind (apt-get install valgrind, as root)" || exit 1
fi
for b in "${bins[@]+"${bins[@]}"}"; do
    echo "valgrind $(basename "$b")"
    valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-possibly-lost=no \
        "$b" -q "${skip[@]}" --test-threads=2
done

log "AddressSanitizer: Python raw-target suite with the extension under ASan"
# The dev profile reuses the core crates built for the tests above (a release
# build with LTO would take minutes more); the raw-target suite uses small inputs.
"${asan[@]}" cargo +nightly build -p xla-ffi-rs-python --target "$host"
pkg="$(mktemp -d)"
trap 'rm -rf "$pkg"' EXIT
cp -r python/xla_ffi_rs "$pkg/"
cp "target/asan/$host/debug/lib_native.so" "$pkg/xla_ffi_rs/_native.abi3.so"
# Python and jaxlib are not instrumented: leaks are theirs to keep, and
# container-overflow checks need every module instrumented. libstdc++ is preloaded
# too, so that ASan's __cxa_throw interceptor finds the real one (jaxlib throws
# C++ exceptions; Python itself does not link libstdc++).
PYTHONPATH="$pkg" LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
    ASAN_OPTIONS=detect_leaks=0:detect_container_overflow=0:abort_on_error=1 \
    "${XFR_PY312:?}" -m pytest -q -p no:cacheprovider tests/test_raw_targets.py
