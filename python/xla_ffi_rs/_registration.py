"""Register the native FFI targets with XLA, once, at import.

For each platform, the state types of stateful targets (``_native.state_types()``)
are registered first, then every target of ``_native.targets(platform)``: a
PyCapsule (the execute handler) or a dict of stage name -> PyCapsule.

``jax.ffi.register_ffi_target`` only queues a registration until the backend of
that platform starts, so importing this package initializes no backend: users
may still call ``jax.distributed.initialize()`` or set ``XLA_FLAGS`` after
``import xla_ffi_rs``. A platform whose backend never starts (e.g. "cuda" on a
CPU-only install) just keeps its queued entries.

Example:
    >>> from xla_ffi_rs import _registration
    >>> _registration.target_names("xla_ffi_rs.kepler")["cpu"]
    'xla_ffi_rs.kepler'
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import jax

from xla_ffi_rs import _native

#: Platforms (JAX names) asked for handlers, in order.
PLATFORMS: tuple[str, ...] = ("cpu", "cuda")

_lock = threading.Lock()
_registered: dict[str, frozenset[str]] | None = None


def register_all() -> Mapping[str, frozenset[str]]:
    """Register every target of every platform (idempotent); return them.

    Returns a mapping platform -> names of the targets registered for it.
    """
    global _registered
    with _lock:
        if _registered is None:
            _registered = {p: frozenset(_register_platform(p)) for p in PLATFORMS}
        return _registered


def _register_platform(platform: str) -> list[str]:
    handlers = _native.targets(platform)
    if any(isinstance(h, Mapping) for h in handlers.values()):
        # Stateful targets (stage bundles) need their state types first.
        for type_name, registration in _state_types().items():
            jax.ffi.register_ffi_type(type_name, registration, platform=platform)
    for name, handler in handlers.items():
        jax.ffi.register_ffi_target(name, handler, platform=platform)
    return sorted(handlers)


def _state_types() -> Mapping[str, object]:
    state_types = getattr(_native, "state_types", None)
    return {} if state_types is None else state_types()


def target_names(name: str) -> dict[str, str]:
    """Platform -> target name, for the platforms where ``name`` is registered."""
    return {p: name for p, names in register_all().items() if name in names}
