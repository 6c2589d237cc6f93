"""``jax.export`` support: the safety checks to disable for this package's targets.

``jax.export`` refuses a custom call unless its target is known to be stable or
the check is disabled for it (``DisabledSafetyCheck.custom_call(name)``).
:func:`export_checks` returns those for every target of the package, so a model
that uses these ops serializes with one argument.

Example:
    >>> import jax, jax.numpy as jnp
    >>> import xla_ffi_rs as xr
    >>> f = jax.jit(lambda m: xr.kepler(m, 0.5)[0])
    >>> exported = jax.export.export(f, disabled_checks=xr.export_checks())(jnp.zeros(3))
    >>> restored = jax.export.deserialize(exported.serialize())
    >>> restored.call(jnp.zeros(3)).tolist()
    [0.0, 0.0, 0.0]
"""

from __future__ import annotations

from jax.export import DisabledSafetyCheck

from xla_ffi_rs import _registration

#: Never exportable: ``xla_ffi_rs.python_call`` runs a Python function of this
#: process, found by a key that means nothing in another process.
_NOT_EXPORTABLE = frozenset({"xla_ffi_rs.python_call"})


def export_checks() -> list[DisabledSafetyCheck]:
    """``DisabledSafetyCheck.custom_call`` for every target this package registered,
    except ``xla_ffi_rs.python_call``: a program that uses a
    :func:`~xla_ffi_rs.python_op` is refused by ``jax.export`` (its function cannot
    be serialized; forcing the check off gives an artifact whose call fails with
    ``NOT_FOUND`` in any other process).

    Pass the result as ``jax.export.export(f, disabled_checks=...)``. The list
    covers every platform's targets (and the example targets once
    ``xla_ffi_rs.examples.register()`` has run), and the targets of other libraries
    registered with :func:`~xla_ffi_rs.register_targets`. The serialized artifact calls the
    targets by name, so the process that deserializes and runs it must have
    imported ``xla_ffi_rs`` (of a version with the same targets and attributes).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import xla_ffi_rs as xr
        >>> x, w = jnp.ones((2, 4)), jnp.ones(4)
        >>> exported = jax.export.export(jax.jit(xr.rms_norm), disabled_checks=xr.export_checks())(x, w)
        >>> exported.call(x, w).shape
        (2, 4)
    """
    names = sorted(_registration.registered_names() - _NOT_EXPORTABLE)
    return [DisabledSafetyCheck.custom_call(name) for name in names]
