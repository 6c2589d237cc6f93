"""The example targets, kept out of the production registration.

``xla_ffi_rs.examples.scale`` is the worked example of a stateful handler bundle
(instantiate + execute, ``crates/ops/src/scale_state.rs``): ``y = factor * x`` in
float32. Importing :mod:`xla_ffi_rs` does not register it; :func:`register` does.

Example:
    >>> import xla_ffi_rs
    >>> from xla_ffi_rs import examples
    >>> examples.register()["cpu"]
    'xla_ffi_rs.examples.scale'
"""

from __future__ import annotations

from xla_ffi_rs import _registration


def handlers(platform: str) -> dict[str, object]:
    """The native handlers of the example targets for ``platform`` (see
    :func:`xla_ffi_rs.handlers`); empty for "cuda".

    Raises:
        TypeError: if ``platform`` is not a string.
        ValueError: for a platform other than "cpu" and "cuda".
    """
    return _registration.example_handlers(platform)


def register() -> dict[str, str]:
    """Register the example targets (idempotent); return the platform -> name of
    the stateful scale example's target (:func:`xla_ffi_rs.target_names`)."""
    _registration.register_examples()
    (target,) = _registration.example_handlers("cpu")  # the one example target
    return _registration.target_names(target)
