#!/usr/bin/env bash
# Builds the stand-in CUDA driver (tests only) into $1 (default target/stub_driver):
#   $1/libcuda.so.1, $1/libcuda.so   a CUDA 13.0 driver
#   $1/old/libcuda.so.1, ...         a CUDA 11.8 driver without cuCtxGetId
#   $1/gen/kernel_list.inc           the kernels they hold (from the kernel table; needs cargo)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
out="${1:-$root/target/stub_driver}"
mkdir -p "$out/old"
CXX="${CXX:-g++}"
# The kernel sources and instantiations, from the kernel tables (crates/ops/src/*/kernel_table.rs).
mkdir -p "$out/gen"
(cd "$root" && cargo run -q -p xla-ffi-rs-ops --features cuda --example kernel_list -- cpp) >"$out/gen/kernel_list.inc.tmp"
mv "$out/gen/kernel_list.inc.tmp" "$out/gen/kernel_list.inc"
flags=(-std=c++17 -O2 -g -fPIC -shared -fno-extern-tls-init -Wall -Wextra -Wno-unused-parameter -I"$here/../emu" -I"$root/crates/ops" -I"$out/gen")
srcs=("$here/stub_driver.cpp" "$here/kernels.cpp" "$here/../emu/cuda_emu.cpp")
"$CXX" "${flags[@]}" -Wl,-soname,libcuda.so.1 -o "$out/libcuda.so.1" "${srcs[@]}" -ldl &
pid=$!
"$CXX" "${flags[@]}" -DXFR_STUB_OLD -Wl,-soname,libcuda.so.1 -o "$out/old/libcuda.so.1" "${srcs[@]}" -ldl
wait "$pid"  # a failure of the first build fails the script too
ln -sf libcuda.so.1 "$out/libcuda.so"
ln -sf libcuda.so.1 "$out/old/libcuda.so"
echo "$out"
