#!/usr/bin/env python3
"""Compile every CUDA kernel of xla-ffi-rs with NVRTC, without a GPU or a CUDA toolkit.

For each instantiation the Rust handlers launch, as the ops' kernel tables
(`crates/ops/src/*/kernel_table.rs`) declare it (this runs `cargo run -p xla-ffi-rs-ops
--example kernel_list -- json`, which refuses an incomplete table), this compiles its
source with NVRTC (loaded through ctypes from the `nvidia-cuda-nvrtc` pip package),
the kernels of one source and one set of template arguments together, for sm_80
and sm_90, twice: to PTX
(`compute_XX`) and to a CUBIN (`sm_XX`, what the handlers load at run time, so
ptxas runs too). Like the Rust launcher (`xla_ffi::cuda::Kernel`), it asks for each
kernel with the NVRTC name expression `static_cast<void(*)(params...)>(name<types>)`,
which instantiates the template and checks its signature, and checks that NVRTC's
lowered name is an entry point of the output. A `.cu` file under `crates/ops` with
no kernel in the table fails the check. Any error or warning fails the check
and prints the compiler log.

If a host C++ compiler is around (`c++`, `g++` or `clang++`), it also builds the
Kepler solver of `crates/ops/src/kepler/kepler.cu` for the host and checks its backward error on a few
million points (`--no-host` skips that).

    pip install nvidia-cuda-nvrtc      # NVRTC 13 (CUDA 13); or nvidia-cuda-nvrtc-cu12
    python cuda/check_ptx.py

Set XLA_FFI_RS_NVRTC to a libnvrtc.so file (or its folder) to use another NVRTC.
The last line is a summary: `check_ptx: OK: 72 compilations (...)` or `check_ptx: FAILED ...`.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OPS = HERE.parent / "crates" / "ops"
#: The folder of kepler.cu, which the host check (tests/kepler_host.cpp) includes.
KEPLER_DIR = OPS / "src" / "kepler"
ARCHS = ("80", "90")

#: What prints the kernel tables (crates/ops/src/*/kernel_table.rs), run from the repository root.
KERNEL_LIST = [
    "cargo",
    "run",
    "-q",
    "-p",
    "xla-ffi-rs-ops",
    "--features",
    "cuda",
    "--example",
    "kernel_list",
    "--",
    "json",
]


def kernel_table() -> list[dict[str, Any]]:
    """Every instantiation the CUDA handlers launch, as the kernel table declares
    them: `source` (relative to crates/ops), `kernel`, `name`, `dtypes`, `params`,
    `expression` (the NVRTC name expression)."""
    if shutil.which("cargo") is None:
        raise SystemExit(
            "check_ptx: FAILED: cargo not found; it prints the kernel tables (crates/ops/src/*/kernel_table.rs)"
        )
    r = subprocess.run(KERNEL_LIST, cwd=HERE.parent, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"check_ptx: FAILED: `{' '.join(KERNEL_LIST)}`:\n{r.stderr}")
    kernels: list[dict[str, Any]] = json.loads(r.stdout)["kernels"]
    return kernels


def instantiations(table: list[dict[str, Any]]) -> dict[str, list[tuple[str, list[str]]]]:
    """Per source file (relative to crates/ops): (label, name expressions) for each
    set of template arguments, every kernel of the file instantiated with it
    compiled in one program."""
    out: dict[str, dict[str, list[str]]] = {}
    for k in table:
        label = ",".join(k["dtypes"])
        out.setdefault(k["source"], {}).setdefault(label, []).append(k["expression"])
    return {src: list(groups.items()) for src, groups in out.items()}


def elf_shared_sizes(cubin: bytes) -> dict[str, int]:
    """Kernel -> size of its `.nv.shared.<kernel>` section in a CUBIN (ELF64)."""
    import struct

    (shoff,) = struct.unpack_from("<Q", cubin, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 58)
    sec = lambda i: shoff + i * shentsize  # noqa: E731
    (stroff,) = struct.unpack_from("<Q", cubin, sec(shstrndx) + 24)
    out = {}
    for i in range(shnum):
        (name_off,) = struct.unpack_from("<I", cubin, sec(i))
        (size,) = struct.unpack_from("<Q", cubin, sec(i) + 32)
        name = cubin[stroff + name_off : cubin.index(b"\0", stroff + name_off)].decode()
        if name.startswith(".nv.shared.") and not name.startswith(".nv.shared.reserved"):
            out[name[len(".nv.shared.") :]] = size
    return out


def ptxas_shared_sizes(log: str) -> dict[str, int]:
    """Kernel -> static shared memory from `ptxas -v` output."""
    out, current = {}, None
    for line in log.splitlines():
        if "Compiling entry function '" in line:
            current = line.split("'")[1]
            out[current] = 0
        elif current and "bytes smem" in line:
            out[current] = int(line.split("bytes smem")[0].split(",")[-1].strip())
    return out


def stand_in_static_smem(section: int, arch: int) -> int:
    """The stand-in driver's reading of a kernel's static shared memory (the rule in
    cuda/stub_driver/stub_driver.cpp): the section, less the 1 KiB system reserve
    that sm_90 CUBINs fold into it."""
    return section - 1024 if arch >= 90 and section >= 1024 else section


def find_nvrtc() -> str:
    env = os.environ.get("XLA_FFI_RS_NVRTC")
    cands: list[str] = []
    if env:
        p = Path(env)
        cands += sorted(glob.glob(str(p / "libnvrtc.so*"))) if p.is_dir() else [str(p)]
    try:
        import nvidia  # namespace package of the nvidia-* wheels

        for root in nvidia.__path__:
            cands += sorted(glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so.*")), reverse=True)
    except ImportError:
        pass
    cands += ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    for c in cands:
        if "builtins" in os.path.basename(c) or c.endswith(".alt"):
            continue
        try:
            ctypes.CDLL(c)
            return c
        except OSError:
            continue
    sys.exit("check_ptx: FAILED: libnvrtc not found; `pip install nvidia-cuda-nvrtc` or set XLA_FFI_RS_NVRTC")


class Nvrtc:
    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        self.path = path
        lib = self.lib
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._ok(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        self.version = (major.value, minor.value)

    def _ok(self, rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what}: {self.lib.nvrtcGetErrorString(rc).decode()}")

    def compile(
        self, src: str, name: str, opts: list[str], cubin: bool, exprs: list[str]
    ) -> tuple[bool, str, bytes, list[str]]:
        """(ok, log, output, lowered names of `exprs`)."""
        lib = self.lib
        prog = ctypes.c_void_p()
        self._ok(
            lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None, None), "nvrtcCreateProgram"
        )
        try:
            for e in exprs:
                self._ok(lib.nvrtcAddNameExpression(prog, e.encode()), f"nvrtcAddNameExpression({e})")
            arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
            rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
            size = ctypes.c_size_t()
            self._ok(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
            buf = ctypes.create_string_buffer(size.value)
            self._ok(lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
            log = buf.value.decode(errors="replace").strip()
            if rc != 0:
                return False, log or lib.nvrtcGetErrorString(rc).decode(), b"", []
            lowered = []
            for e in exprs:
                p = ctypes.c_char_p()
                self._ok(lib.nvrtcGetLoweredName(prog, e.encode(), ctypes.byref(p)), f"nvrtcGetLoweredName({e})")
                lowered.append((p.value or b"").decode())
            get_size, get = (
                (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN) if cubin else (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX)
            )
            self._ok(get_size(prog, ctypes.byref(size)), "get size")
            out = ctypes.create_string_buffer(size.value)
            self._ok(get(prog, out), "get output")
            return True, log, out.raw, lowered
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


def options(arch: str) -> list[str]:
    """The options the Rust side passes (xla_ffi::cuda::nvrtc::options)."""
    return ["--std=c++17", f"--gpu-architecture={arch}"]


def host_check() -> str:
    cxx = next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)
    if cxx is None:
        return "host check skipped (no C++ compiler)"
    test = HERE / "tests" / "kepler_host.cpp"
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "kepler_host")
        r = subprocess.run(
            [cxx, "-O2", "-std=c++17", f"-I{KEPLER_DIR}", "-o", exe, str(test)],
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode != 0:
            raise SystemExit(f"check_ptx: FAILED: host build of {test.name}:\n{r.stderr}")
        r = subprocess.run([exe], capture_output=True, text=True, check=False)
        print(r.stdout.rstrip())
        if r.returncode != 0:
            raise SystemExit(f"check_ptx: FAILED: {test.name}:\n{r.stderr}")
    return "host Kepler check passed"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-host", action="store_true", help="skip the host build of the Kepler solver")
    ap.add_argument("--no-cubin", action="store_true", help="PTX only (faster)")
    args = ap.parse_args()

    nv = Nvrtc(find_nvrtc())
    print(f"NVRTC {nv.version[0]}.{nv.version[1]} from {nv.path}")
    insts = instantiations(kernel_table())
    sources = sorted(OPS.rglob("*.cu"))
    missing = [str(s.relative_to(OPS)) for s in sources if str(s.relative_to(OPS)) not in insts]
    if missing:
        print(f"check_ptx: FAILED: no kernel of {missing} in the kernel tables (crates/ops/src/*/kernel_table.rs)")
        return 1
    # Every (source, instantiation, arch, PTX or CUBIN) compilation, on a thread per
    # core: NVRTC compiles programs independently, and ctypes lets go of the GIL.
    jobs = []
    for rel, groups in insts.items():
        src = OPS / rel
        code = src.read_text()
        for label, exprs in groups:
            for arch in ARCHS:
                kinds = [("compute_" + arch, False)] + ([] if args.no_cubin else [("sm_" + arch, True)])
                jobs += [(src, code, label, exprs, arch, arch_opt, cubin) for arch_opt, cubin in kinds]
    failures, smem_checked, t0 = [], 0, time.time()

    def run(job: tuple[Path, str, str, list[str], str, str, bool]) -> tuple[bool, str, bytes, list[str]]:
        src, code, _, exprs, _, arch_opt, cubin = job
        opts = options(arch_opt) + (["-Xptxas", "-v"] if cubin else [])
        return nv.compile(code, src.name, opts, cubin, exprs)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(pool.map(run, jobs))
    count = len(jobs)
    for (src, _, label, _, arch, arch_opt, cubin), (ok, log, out, lowered) in zip(jobs, results, strict=True):
        what = f"{src.name} [{label}] {arch_opt}"
        if ok and cubin:
            # ptxas -v's static shared memory must be what the stand-in
            # driver reads from the CUBIN.
            ptxas, elf = ptxas_shared_sizes(log), elf_shared_sizes(out)
            for k in lowered:
                got = stand_in_static_smem(elf.get(k, 0), int(arch))
                if ptxas.get(k) != got:
                    failures.append(f"{what}: {k}: ptxas -v says {ptxas.get(k)} bytes smem, the stand-in reads {got}")
            smem_checked += len(lowered)
            log = "\n".join(ln for ln in log.splitlines() if not ln.startswith("ptxas")).strip()
        if not ok or log:
            failures.append(f"{what}: {'error' if not ok else 'warning'}:\n{log}")
            continue
        absent = [e for e in lowered if e.encode() not in out]
        if absent:
            failures.append(f"{what}: entry points missing: {absent}")
    dt = time.time() - t0
    for f in failures:
        print(f, file=sys.stderr)
    host = "host check skipped (--no-host)" if args.no_host else host_check()
    n_inst = sum(len(groups) for groups in insts.values())
    if failures:
        print(f"check_ptx: FAILED: {len(failures)} of {count} compilations")
        return 1
    print(
        f"check_ptx: OK: {count} compilations ({len(insts)} files, {n_inst} dtype instantiations, "
        f"sm_{'/sm_'.join(ARCHS)}, PTX{'' if args.no_cubin else ' + CUBIN'}) with NVRTC {nv.version[0]}.{nv.version[1]} "
        f"in {dt:.1f}s, no warnings; static shared memory of {smem_checked} CUBIN kernels as the stand-in driver reads it; {host}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
