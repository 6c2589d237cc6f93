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

from xla_ffi_rs import _native, _registration

__all__ = ["handlers", "register", "register_async"]


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


_async_registered: list[str] = []


def register_async() -> list[str]:
    """Register the async demo targets on the CPU (idempotent) and return their
    names: ``xla_ffi_rs.demo.async_sleep_scale`` (``y = 2 x`` after ``delay_ms``,
    finished on a thread of its own), ``xla_ffi_rs.demo.sleep_scale`` (its
    synchronous twin, sleeping on XLA's thread), and ``xla_ffi_rs.demo.async_fail``,
    ``async_panic`` and ``async_drop``, whose asynchronous part ends the call with
    an error, a panic or a dropped promise (``crates/ops/src/async_demo.rs``).

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np
        >>> from xla_ffi_rs import examples
        >>> "xla_ffi_rs.demo.async_sleep_scale" in examples.register_async()
        True
        >>> call = jax.ffi.ffi_call("xla_ffi_rs.demo.async_sleep_scale", jax.ShapeDtypeStruct((2,), jnp.float32))
        >>> call(jnp.array([1.0, 2.0], jnp.float32), delay_ms=np.int64(1)).tolist()
        [2.0, 4.0]
    """
    if not _async_registered:
        import jax

        for name, capsule in _native.async_demo_targets("cpu").items():
            jax.ffi.register_ffi_target(name, capsule, platform="cpu")
            _registration._addresses[("cpu", name)] = _registration._address_of(capsule)
            _async_registered.append(name)
    return sorted(_async_registered)
