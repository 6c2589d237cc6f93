"""Programs exported with one jax, loaded with another: tests/exports/jax<version>/
holds the programs of tests/export_programs.py as each tested jax exported them
(tests/exports/make_exports.py). An older jax's export is called and differentiated
by a newer one with this project's targets (their names and attributes are part of
the program); a newer jax's export is refused by an older jaxlib, and that refusal
is jax's own (it reads no custom call of ours)."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

import xla_ffi_rs  # noqa: F401  (registers the targets the programs call)
from export_programs import (
    EXPORT_VERSIONS,
    PROGRAMS,
    scalar_reference,
    vmapped_reference,
)

EXPORTS = Path(__file__).resolve().parent / "exports"


def version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


RUNNING = version(jax.__version__)
OLDER = [v for v in EXPORT_VERSIONS if version(v) <= RUNNING]
NEWER = [v for v in EXPORT_VERSIONS if version(v)[:2] > RUNNING[:2]]  # a newer minor


def load(jax_version: str, name: str) -> jax.export.Exported:
    return jax.export.deserialize(bytearray((EXPORTS / f"jax{jax_version}" / f"{name}.jaxexport").read_bytes()))


def test_every_tested_jax_has_its_exports() -> None:
    for v in EXPORT_VERSIONS:
        assert sorted(p.stem for p in (EXPORTS / f"jax{v}").glob("*.jaxexport")) == sorted(PROGRAMS), v


def test_the_saved_exports_name_no_machine_path() -> None:
    """Their source locations are relative to the repository or the package, so
    the files do not change with the checkout that wrote them."""
    for path in EXPORTS.glob("jax*/*.jaxexport"):
        data = path.read_bytes()
        assert b"site-packages" not in data and b"xla_ffi_rs/" in data, path
        assert b'"/' not in data and b"\x00/" not in data, path


@pytest.mark.parametrize("made_with", OLDER)
def test_an_export_of_an_older_or_the_same_jax_is_called_and_differentiated(made_with: str) -> None:
    restored = load(made_with, "scalar_model")
    args = PROGRAMS["scalar_model"][1]()
    value, grads = scalar_reference(*args)
    np.testing.assert_allclose(float(restored.call(*args)), value, rtol=1e-10)
    got = jax.grad(restored.call, argnums=(0, 1, 2, 3))(*args)
    for g, want in zip(got, grads, strict=True):
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("made_with", OLDER)
def test_an_exported_gradient_of_an_older_or_the_same_jax_runs(made_with: str) -> None:
    args = PROGRAMS["exported_grad"][1]()
    _, grads = scalar_reference(*args)
    got = load(made_with, "exported_grad").call(*args)
    for g, want in zip(got, grads, strict=True):
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("made_with", OLDER)
def test_a_vmapped_export_of_an_older_or_the_same_jax_runs(made_with: str) -> None:
    args = PROGRAMS["vmapped"][1]()
    got = load(made_with, "vmapped").call(*args)
    for g, want in zip(got, vmapped_reference(*args), strict=True):
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("made_with", NEWER or [pytest.param("none", marks=pytest.mark.skip("no newer jax"))])
def test_an_export_of_a_newer_jax_is_refused_by_jax_not_run(made_with: str) -> None:
    """jax keeps a few weeks of forward compatibility: the StableHLO of a jax two
    minors newer does not deserialize (jax's error, for any custom call)."""
    restored = load(made_with, "scalar_model")
    with pytest.raises(jax.errors.JaxRuntimeError, match="Failed to deserialize StableHLO"):
        restored.call(*PROGRAMS["scalar_model"][1]())
