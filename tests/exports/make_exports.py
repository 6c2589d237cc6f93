"""Writes the programs that tests/test_export_versions.py loads with other jax
versions: ``python tests/exports/make_exports.py`` (from the repository root, with
this branch's wheel installed) writes ``tests/exports/jax<version>/<name>.jaxexport``
for the jax it runs on. Run it with each development venv's Python when a tested
jax is added; keep the files of earlier versions (see the README).
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
# Source locations in the programs name files from the repository or the package
# (``tests/...``, ``xla_ffi_rs/...``), not from the machine that wrote them.
jax.config.update("jax_hlo_source_file_canonicalization_regex", r"^.*/(?=xla_ffi_rs/|tests/)")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import xla_ffi_rs as xr  # noqa: E402
from export_programs import PROGRAMS  # noqa: E402


def main() -> None:
    out = Path(__file__).resolve().parent / f"jax{jax.__version__}"
    out.mkdir(exist_ok=True)
    for name, (fn, args) in PROGRAMS.items():
        exported = jax.export.export(jax.jit(fn), disabled_checks=xr.export_checks())(*args())
        (out / f"{name}.jaxexport").write_bytes(exported.serialize(vjp_order=1))
    print(f"wrote {len(PROGRAMS)} programs to {out}")


if __name__ == "__main__":
    main()
