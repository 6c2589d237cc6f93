#!/usr/bin/env python3
"""Compile a CUDA benchmark (a .cu file with host code) for the CPU emulator and run it.

Rewrites each `kernel<<<grid, block[, smem]>>>(args);` into a launch on the emulator
(cuda_runtime_emu.h stands in for <cuda_runtime.h>), compiles with g++ and runs the
program with the given arguments: the benchmark's host code and kernels run on small
shapes, so that a mistake shows here and not on a lent GPU.

    python cuda/emu/run_cu.py benchmarks/gpu_rms_norm_candidates.cu --quick
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# name<targs><<<config>>>(args);  (one statement on one line)
LAUNCH = re.compile(r"([A-Za-z_][\w:]*(?:<[^;]*?>)?)<<<(.*?)>>>\((.*)\);")


def rewrite(src: str) -> str:
    def sub(m: re.Match[str]) -> str:
        cfg = [c.strip() for c in split_top(m.group(2))]
        grid, block, smem = [*cfg, "0"][:3]
        return f"xfr_emu::launch_rewritten({grid}, {block}, {smem}, [&] {{ {m.group(1)}({m.group(3)}); }});"

    src = src.replace("#include <cuda_runtime.h>", '#include "cuda_runtime_emu.h"\nXFR_EMU_DYNAMIC_SHARED(smem_raw)')
    out = LAUNCH.sub(sub, src)
    if "<<<" in out:
        sys.exit(
            "run_cu: a launch this script cannot rewrite (one statement per line): "
            + next(line for line in out.splitlines() if "<<<" in line).strip()
        )
    return out


def split_top(s: str) -> list[str]:
    """Split at commas outside parentheses and angle brackets."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [*parts, cur]


def main() -> int:
    cu = Path(sys.argv[1]).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / (cu.stem + "_emu.cpp")
        src.write_text(f'#line 1 "{cu}"\n' + rewrite(cu.read_text()))
        exe = Path(tmp) / cu.stem
        cmd = [
            "g++",
            "-std=c++20",
            "-O2",
            "-fno-extern-tls-init",
            f"-I{HERE}",
            f"-I{cu.parent}",
            str(src),
            str(HERE / "cuda_emu.cpp"),
            "-o",
            str(exe),
        ]
        subprocess.run(cmd, check=True)
        return subprocess.run([str(exe), *sys.argv[2:]], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
