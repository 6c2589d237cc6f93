"""Register the native FFI targets with XLA, once, at import.

For each platform, every target of ``_native.targets(platform)`` is registered:
a PyCapsule (the execute handler) or a dict of stage name -> PyCapsule. The
example targets (``_native.example_targets``, the stateful
``xla_ffi_rs.examples.scale``) are not: :func:`register_examples` registers
them, after their state types, when a user asks for them.

``jax.ffi.register_ffi_target`` only queues a registration until the backend of
that platform starts, so importing this package initializes no backend: users
may still call ``jax.distributed.initialize()`` or set ``XLA_FLAGS`` after
``import xla_ffi_rs``. A platform whose backend never starts (e.g. "cuda" on a
CPU-only install) just keeps its queued entries.

Example:
    >>> import xla_ffi_rs
    >>> xla_ffi_rs.target_names("xla_ffi_rs.kepler")["cpu"]
    'xla_ffi_rs.kepler'
"""

from __future__ import annotations

import ctypes
import functools
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax

from xla_ffi_rs import _native

#: Platforms (JAX names) asked for handlers, in order.
PLATFORMS: tuple[str, ...] = ("cpu", "cuda")

#: JAX platform name -> the name XLA's plugins register their handlers under
#: (``jax.ffi.register_ffi_target`` passes the platform through as given, and the
#: CUDA and ROCm plugins listen for "CUDA" and "ROCM" only: a target queued under
#: "cuda" never reaches the GPU).
_XLA_PLATFORM_NAMES: dict[str, str] = {"cuda": "CUDA", "gpu": "CUDA", "rocm": "ROCM"}

_lock = threading.Lock()
_registered: dict[str, frozenset[str]] = {}
_examples_registered = False
#: (XLA platform, state type name) pairs already given to ``jax.ffi.register_ffi_type``.
_types_registered: set[tuple[str, str]] = set()


def register_all() -> Mapping[str, frozenset[str]]:
    """Register every production target of every platform (idempotent).

    Returns a mapping platform -> names of the targets registered for it (the
    example targets included once :func:`register_examples` has run).
    """
    with _lock:
        if not _registered:
            for p in PLATFORMS:
                _registered[p] = frozenset(_register(p, _native.targets))
        return dict(_registered)


def register_examples() -> Mapping[str, frozenset[str]]:
    """Register the example targets and their state types too (idempotent)."""
    global _examples_registered
    register_all()
    with _lock:
        if not _examples_registered:
            for p in PLATFORMS:
                _registered[p] = _registered[p] | frozenset(_register(p, _native.example_targets))
            _examples_registered = True
        return dict(_registered)


#: The JAX platform names whose backends take FFI handlers: JAX installs a handler
#: registration for "cpu" and its CUDA and ROCm plugins for "CUDA" and "ROCM"; nothing
#: takes a handler queued for "tpu" (XLA:TPU runs no FFI handlers).
FFI_PLATFORMS = ("cpu", "cuda", "rocm")


def xla_platform(platform: str) -> str:
    """The platform name to give ``jax.ffi.register_ffi_target`` for a JAX platform
    name: "CUDA" for "cuda" (and "gpu"), "ROCM" for "rocm", others unchanged.

    Example:
        >>> from xla_ffi_rs._registration import xla_platform
        >>> xla_platform("cuda"), xla_platform("cpu")
        ('CUDA', 'cpu')
    """
    return _XLA_PLATFORM_NAMES.get(platform.lower(), platform)


def _register(platform: str, source: Callable[[str], Mapping[str, object]]) -> list[str]:
    handlers = source(platform)
    xla_name = xla_platform(platform)
    what = f"{xla_name} {source.__name__}"
    if _native.targets_registered(what):  # by an earlier import of this package (re-imported since)
        _addresses.update({(platform, name): _address_of(h) for name, h in handlers.items()})
        return sorted(handlers)
    if any(isinstance(h, Mapping) for h in handlers.values()):
        # Stateful targets (stage bundles) need their state types first.
        for type_name, registration in _native.state_types().items():
            if (xla_name, type_name) not in _types_registered:
                jax.ffi.register_ffi_type(type_name, registration, platform=xla_name)
                _types_registered.add((xla_name, type_name))
    for name, handler in handlers.items():
        jax.ffi.register_ffi_target(name, handler, platform=xla_name)
        _addresses[(platform, name)] = _address_of(handler)
    _native.targets_registered(what, done=True)
    return sorted(handlers)


#: (JAX platform, target name) -> the function address(es) registered for it
#: (:func:`_address_of`): XLA takes a name once per platform, and a second, other
#: handler for it fails the backend's start (``Duplicate FFI handler registration``).
_addresses: dict[tuple[str, str], object] = {}


def _address_of(handler: Any) -> object:
    """The function address a PyCapsule holds, or for a bundle the sorted (stage,
    address) pairs: what XLA compares when a name is registered again."""
    if isinstance(handler, Mapping):
        return tuple(sorted((stage, _address_of(h)) for stage, h in handler.items()))
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(handler, get_name(handler))


def register_targets(handlers: Mapping[str, Any], platform: str = "cpu") -> None:
    """Register another library's handlers with JAX for ``platform``, so that
    :func:`target_names` (hence :func:`xla_ffi_rs.binding.op`'s default
    ``targets``) finds them.

    Args:
        handlers: target name -> PyCapsule (or dict of stage name -> PyCapsule),
            e.g. the ``targets()`` of a plugin's PyO3 module
            (``xla_ffi::python::targets``).
        platform: a JAX platform name whose backend takes FFI handlers: "cpu",
            "cuda" or "rocm" (XLA:TPU runs none).

    Raises:
        TypeError: for ``handlers`` that is not a mapping of str to PyCapsules or
            bundles of them, or a ``platform`` that is not a str, before anything
            is registered (JAX would take the entry and fail to start the backend
            at its next use: ``Unable to initialize backend 'cpu'``).
        ValueError: for a bundle without an ``"execute"`` stage (the same), or
            another ``platform`` name (JAX would fail at the first lowering:
            ``unknown platform CPU``; a handler queued for "tpu" is never taken).
        ValueError: for a name already registered for ``platform`` with another
            handler (XLA refuses a second handler for one name, and the backend
            would fail to start: ``Duplicate FFI handler registration``), before
            anything is registered. The same handler again is accepted.
        ValueError: also for a bundle with a ``"record"`` stage on a jaxlib whose XLA
            FFI API is older than 0.4 (jaxlib 0.10 has 0.3 and would silently
            ignore the entry), before anything is registered.

    Example:
        >>> import xla_ffi_rs
        >>> xla_ffi_rs.register_targets({})  # e.g. plugin_native.targets()
    """
    if not isinstance(handlers, Mapping):
        raise TypeError(
            f"register_targets: handlers: expected a dict of target name -> capsule, got {type(handlers).__name__}"
        )
    if bad_keys := [k for k in handlers if not isinstance(k, str)]:
        raise TypeError(
            f"register_targets: handlers: expected a dict of target name (str) -> capsule, got the key "
            f"{bad_keys[0]!r:.80} ({type(bad_keys[0]).__name__})"
        )
    if not isinstance(platform, str):
        raise TypeError(f"register_targets: platform: expected a str, got {type(platform).__name__}")
    if platform not in FFI_PLATFORMS:
        raise ValueError(
            f"register_targets: platform: expected one of {', '.join(map(repr, FFI_PLATFORMS))} (JAX's lowercase "
            f"names of the platforms that run FFI handlers), got {platform!r}"
        )
    recorded = [name for name, h in handlers.items() if isinstance(h, Mapping) and "record" in h]
    api = runtime_ffi_api()
    if recorded and api is not None and api < (0, 4):
        raise ValueError(
            f"register_targets: {recorded[0]}: a record-stage handler needs XLA FFI API 0.4 or newer; this jaxlib "
            f"has FFI API {api[0]}.{api[1]}, which ignores the record entry of a bundle (drop it, or use a newer jaxlib)"
        )
    for name, h in handlers.items():
        _check_handler(name, h)
    register_all()
    with _lock:
        addresses = {name: _address_of(h) for name, h in handlers.items()}
        for name, address in addresses.items():
            if _addresses.get((platform, name), address) != address:
                raise ValueError(
                    f"register_targets: {name}: already registered for {platform!r} with another handler (XLA takes "
                    f"one handler per name and platform; register this one under another name)"
                )
        for name, handler in handlers.items():
            if _addresses.get((platform, name)) == addresses[name]:
                # Registered already. Not again: once a stateful handler has run, XLA
                # has filled in its state type and refused the same handler as a
                # "Duplicate FFI handler registration ... with different metadata".
                continue
            jax.ffi.register_ffi_target(name, handler, platform=xla_platform(platform))
            _addresses[(platform, name)] = addresses[name]
        _registered[platform] = _registered.get(platform, frozenset()) | frozenset(handlers)


def _is_capsule(x: object) -> bool:
    return type(x).__name__ == "PyCapsule"


def _check_handler(name: str, handler: object) -> None:
    """TypeError (ValueError for a bundle without ``"execute"``) naming the target
    unless ``handler`` is a PyCapsule or a dict of stage name -> PyCapsule."""
    if isinstance(handler, Mapping):
        bad = [f"{k!r}: {type(v).__name__}" for k, v in handler.items() if not (isinstance(k, str) and _is_capsule(v))]
        if bad:
            raise TypeError(
                f"register_targets: {name}: expected a bundle of stage name -> PyCapsule, got {', '.join(bad)}"
            )
        if "execute" not in handler:
            raise ValueError(
                f"register_targets: {name}: a bundle needs an 'execute' stage, got stages {sorted(handler)}"
            )
    elif not _is_capsule(handler):
        raise TypeError(
            f"register_targets: {name}: expected a PyCapsule (or a dict of stage name -> PyCapsule), "
            f"got {type(handler).__name__}"
        )


@functools.cache
def runtime_ffi_api() -> tuple[int, int] | None:
    """The XLA FFI API version (major, minor) of the installed jaxlib, read from the
    C header it ships (``jax.ffi.include_dir()``), which describes that runtime; None
    when the header cannot be read.

    Example:
        >>> import xla_ffi_rs
        >>> xla_ffi_rs.runtime_ffi_api() in {(0, 3), (0, 5)}
        True
    """
    try:
        # Bytes, not text: the locale's encoding (cp1252 on Windows) could fail on a
        # non-ASCII comment in the header, and only its ASCII defines are read.
        text = (Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h").read_bytes()
    except OSError:
        return None
    found = [re.search(rb"#define XLA_FFI_API_%s (\d+)" % part, text) for part in (b"MAJOR", b"MINOR")]
    if found[0] is None or found[1] is None:
        return None
    return int(found[0].group(1)), int(found[1].group(1))


def handlers(platform: str) -> dict[str, object]:
    """The native handlers of every production target for ``platform``: target
    name -> a PyCapsule (the execute handler) or a dict of stage name -> PyCapsule,
    what ``jax.ffi.register_ffi_target`` takes. Importing the package registers
    them already; this is for registering them again, e.g. under another name.

    Raises:
        TypeError: if ``platform`` is not a string.
        ValueError: for a platform other than "cpu" and "cuda" (the message names both).

    Example:
        >>> import xla_ffi_rs
        >>> sorted(xla_ffi_rs.handlers("cpu"))[:2]
        ['xla_ffi_rs.kepler', 'xla_ffi_rs.kepler_cotangent']
    """
    return _native_targets("handlers", _native.targets, platform)


def example_handlers(platform: str) -> dict[str, object]:
    """As :func:`handlers`, for the example targets (registered only by
    ``xla_ffi_rs.examples.register()``)."""
    return _native_targets("examples.handlers", _native.example_targets, platform)


def _native_targets(fn: str, targets: Any, platform: object) -> dict[str, object]:
    try:
        return dict(targets(_platform(fn, platform)))
    except ValueError as e:  # the native words name the platforms, not the function
        raise ValueError(f"{fn}: platform: {e}") from None


def _platform(fn: str, platform: object) -> str:
    if not isinstance(platform, str):
        raise TypeError(f"{fn}: platform: expected a platform name (str), got {type(platform).__name__}")
    return platform


def registered_names() -> frozenset[str]:
    """Every target name registered for any platform."""
    return frozenset().union(*register_all().values())


def declarations() -> dict[str, dict[str, Any]]:
    """Target -> declaration of every target of this package (the example targets
    too): its operands, results and attributes with their names, accepted dtypes
    and shape specs, its shape and dtype rules, its linear operands and transpose
    target, as written in the Rust ``#[handler(...)]``. What
    :func:`xla_ffi_rs.binding.op` builds an op from.

    Example:
        >>> import xla_ffi_rs
        >>> d = xla_ffi_rs.declarations()["xla_ffi_rs.rms_norm_fwd"]
        >>> d["shapes"], [o["name"] for o in d["operands"]]
        ('...b ...n, ...n -> ...b ...n, ...b', ['x', 'weight'])
    """
    return _native.declarations()


def target_names(name: str) -> dict[str, str]:
    """Platform -> FFI target name, for each platform where ``name`` is registered.

    This is the ``targets=`` argument of :class:`xla_ffi_rs.binding.Op` for a
    target of this package.

    Args:
        name: a registered target, e.g. ``"xla_ffi_rs.kepler"``.

    Raises:
        TypeError: if ``name`` is not a string.
        ValueError: if ``name`` is registered for no platform (the message lists
            the registered names; the example targets need
            ``xla_ffi_rs.examples.register()`` first).

    Example:
        >>> import xla_ffi_rs
        >>> xla_ffi_rs.target_names("xla_ffi_rs.rms_norm_fwd")["cpu"]
        'xla_ffi_rs.rms_norm_fwd'
    """
    if not isinstance(name, str):
        raise TypeError(f"target_names: name: expected a target name (str), got {type(name).__name__}")
    found = {p: name for p, names in register_all().items() if name in names}
    if not found:
        known = ", ".join(sorted(registered_names()))
        hint = " (call xla_ffi_rs.examples.register() first)" if name.startswith("xla_ffi_rs.examples.") else ""
        raise ValueError(f"target_names: {name!r} is not a registered target{hint}; registered: {known}")
    return found
