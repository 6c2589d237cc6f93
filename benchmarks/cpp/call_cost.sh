#!/usr/bin/env bash
# Instructions per call (callgrind, exact on a loaded machine) and nanoseconds per
# call of a trivial handler at N = 1 (`xla_ffi_rs.demo.sleep_scale`, y = 2 x), ours
# (`xla_ffi_handler__sync_sleep_scale`) against its C++ ffi.h twin
# (`BenchSleepScale`, benchmarks/cpp/bench_ffi.cc), both driven by benchmarks/cpp/call_cost.cc
# on the same synthetic call frame, warm (back to back: the best of 20 rounds) and
# cold (the instruction cache evicted before each call, as inside XLA, where the
# executor's own code runs between two custom calls: the median, in TSC ticks).
#   PY      a Python with jax (for jax.ffi.include_dir()); default python3
#   CALLS   calls per handler (default 400000)
# Needs valgrind for the instruction counts (skipped with a note without it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
PY="${PY:-python3}"
CALLS="${CALLS:-400000}"
inc="$("$PY" -c 'import jax.ffi; print(jax.ffi.include_dir())')"
mkdir -p "$here/build"
cpp_lib="$(PY="$PY" bash "$here/build.sh")"
"${CXX:-g++}" -std=c++17 -O2 -isystem "$inc" -o "$here/build/call_cost" "$here/call_cost.cc" -ldl
# Our handlers as a plain shared library (the ops crate, without Python).
(cd "$root" && cargo rustc --release -q -p xla-ffi-rs-ops --crate-type cdylib)
rust_lib="$root/target/release/libxla_ffi_rs_ops.so"
ours=xla_ffi_handler__sync_sleep_scale
twin=BenchSleepScale
run() { "$here/build/call_cost" "$1" "$2" "$CALLS" "${3:-}"; }
run "$rust_lib" "$ours"
run "$cpp_lib" "$twin"
# Cold: fewer calls (each runs through about 150 KB of other code first), ours and
# the twin taking turns call by call in one process.
"$here/build/call_cost" "$rust_lib" "$ours" "$(( CALLS / 20 > 0 ? CALLS / 20 : 1 ))" \
    cold "$cpp_lib" "$twin"
if ! command -v valgrind >/dev/null; then
    echo "valgrind not found: no instruction counts" >&2
    exit 0
fi
ir() {
    local out="$here/build/callgrind.$2.out"
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$2" \
        "$here/build/call_cost" "$1" "$2" "$CALLS" >/dev/null 2>&1
    # Calls made: CALLS (rounded down to 20 rounds) plus the warm-up call.
    awk -v n="$(( CALLS / 20 * 20 + 1 ))" '/^(summary|totals):/ {print $2 / n; exit}' "$out"
}
rust_ir="$(ir "$rust_lib" "$ours")"
cpp_ir="$(ir "$cpp_lib" "$twin")"
echo "instructions per call: ours $rust_ir, C++ ffi.h $cpp_ir (ratio $(awk -v a="$rust_ir" -v b="$cpp_ir" 'BEGIN {printf "%.2f", a / b}'))"
echo "per function: callgrind_annotate $here/build/callgrind.<symbol>.out"
