#!/usr/bin/env bash
# Builds benchmarks/cpp/build/libbench_ffi.so, the C++ ffi.h twin of our handlers.
#   PY            a Python with jax (for jax.ffi.include_dir()); default python3
#   CXX           the compiler (default g++)
#   BENCH_ARCH    target flags (default: -march=native -mprefer-vector-width=512).
#                 Native, because the Rust kernels pick the widest ISA at run time
#                 (multiversion: AVX-512, AVX2+FMA, AVX, baseline); a portable
#                 alternative is BENCH_ARCH="-mavx2 -mfma".
# -ffp-contract=off: no implicit FMA contraction (the Rust code fuses only where it
# calls mul_add, which the C++ mirrors with __builtin_fma); -fno-math-errno lets
# sqrt vectorize (Rust's sqrt never sets errno). Prints the library path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
PY="${PY:-python3}"
CXX="${CXX:-g++}"
ARCH="${BENCH_ARCH:--march=native -mprefer-vector-width=512}"
inc="$("$PY" -c 'import jax.ffi; print(jax.ffi.include_dir())')"
mkdir -p "$here/build"
out="$here/build/libbench_ffi.so"
# shellcheck disable=SC2086
"$CXX" -std=c++17 -O3 $ARCH -ffp-contract=off -fno-math-errno -fPIC -shared \
    -isystem "$inc" -o "$out.tmp" "$here/bench_ffi.cc"
mv "$out.tmp" "$out"
echo "$ARCH" > "$here/build/flags.txt"
echo "$out"
