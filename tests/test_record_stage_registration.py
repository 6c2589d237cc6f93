"""A bundle's "record" stage (XLA FFI API 0.4) on each jaxlib: jaxlib 0.10 (API 0.3)
would silently ignore the entry, so ``register_targets`` refuses it there, naming
the target and both versions, before anything is registered."""

from __future__ import annotations

import jax
import pytest

import xla_ffi_rs
from xla_ffi_rs import runtime_ffi_api

# The FFI API version each supported jaxlib ships (an independent reference: the
# facts checked against both installs).
EXPECTED_API = {"0.10.2": (0, 3), "0.12.0.1": (0, 5)}
pytestmark = pytest.mark.skipif(jax.__version__ not in EXPECTED_API, reason="not a supported jaxlib")


def test_runtime_ffi_api_is_the_installed_jaxlibs() -> None:
    assert runtime_ffi_api() == EXPECTED_API[jax.__version__]


@pytest.mark.skipif(EXPECTED_API.get(jax.__version__, (0, 5)) >= (0, 4), reason="this jaxlib has the record stage")
def test_a_record_bundle_is_refused_before_api_0_4() -> None:
    bundle = {"execute": object(), "record": object()}
    with pytest.raises(
        ValueError,
        match=r"register_targets: plugin\.recorded: a record-stage handler needs XLA FFI API 0\.4 or newer; "
        r"this jaxlib has FFI API 0\.3",
    ):
        xla_ffi_rs.register_targets({"plugin.ok": {"execute": object()}, "plugin.recorded": bundle})
    # Nothing was registered, not even the target before it.
    with pytest.raises(ValueError, match="not a registered target"):
        xla_ffi_rs.target_names("plugin.ok")


def test_runtime_ffi_api_reads_a_header_in_any_encoding(tmp_path, monkeypatch) -> None:
    # A comment that is neither ASCII nor valid in the locale's encoding (a stray
    # byte 0xff fails UTF-8 here as it can fail cp1252 on Windows) must not stop
    # the version being read.
    header = tmp_path / "xla" / "ffi" / "api" / "c_api.h"
    header.parent.mkdir(parents=True)
    header.write_bytes(
        "// XLA FFI \u2014 caf\u00e9\n".encode()
        + b"// \xff\x81\n#define XLA_FFI_API_MAJOR 7\n#define XLA_FFI_API_MINOR 42\n"
    )
    monkeypatch.setattr(jax.ffi, "include_dir", lambda: str(tmp_path))
    runtime_ffi_api.cache_clear()
    try:
        assert runtime_ffi_api() == (7, 42)
        header.write_bytes(b"#define XLA_FFI_API_MAJOR 7\n")  # no minor: unknown
        runtime_ffi_api.cache_clear()
        assert runtime_ffi_api() is None
    finally:
        runtime_ffi_api.cache_clear()
