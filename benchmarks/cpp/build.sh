#!/usr/bin/env bash
# Builds benchmarks/cpp/build/libbench_ffi.so, the C++ ffi.h twin of our trivial
# handler (per-call cost only; see bench_ffi.cc), against the ffi.h of $PY's jaxlib.
#   PY            a Python with jax (for jax.ffi.include_dir()); default python3
#   CXX           the compiler (default g++)
# Prints the library path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
PY="${PY:-python3}"
CXX="${CXX:-g++}"
inc="$("$PY" -c 'import jax.ffi; print(jax.ffi.include_dir())')"
mkdir -p "$here/build"
out="$here/build/libbench_ffi.so"
flags="-std=c++17 -O2 -fPIC -shared"
# shellcheck disable=SC2086
"$CXX" $flags -isystem "$inc" -o "$out.tmp" "$here/bench_ffi.cc"
mv "$out.tmp" "$out"
echo "$flags" > "$here/build/flags.txt"
echo "$out"
