"""xla_ffi_rs: JAX operations whose kernels are Rust handlers for XLA's typed FFI.

Importing the package registers the native targets (``xla_ffi_rs.kepler``, its
derivatives ``xla_ffi_rs.kepler_tangent`` and ``xla_ffi_rs.kepler_cotangent``, the
fused ``xla_ffi_rs.kepler_jvp`` with its scalar-tangent variants
``xla_ffi_rs.kepler_jvp_dm`` and ``xla_ffi_rs.kepler_jvp_const``,
``xla_ffi_rs.rms_norm_fwd``, ``xla_ffi_rs.rms_norm_bwd``, and
``xla_ffi_rs.python_call``, which runs :func:`python_op` functions) for "cpu", and
the same ops' targets (all but ``xla_ffi_rs.python_call``) for "cuda" when the native
module was built with CUDA. Registration is queued by
JAX until the backend starts, so no backend is initialized by the import.

Example:
    >>> import jax.numpy as jnp
    >>> import xla_ffi_rs
    >>> sin_e, cos_e = xla_ffi_rs.kepler(jnp.array([0.5, 1.0]), 0.1)
    >>> y = xla_ffi_rs.rms_norm(jnp.ones((2, 4)), jnp.ones(4))

The functions ``kepler``, ``rms_norm``, ``rms_norm_inplace`` and ``python_op`` are
attributes of the package; their modules are :mod:`xla_ffi_rs.ops.kepler`,
:mod:`xla_ffi_rs.ops.rms_norm`, :mod:`xla_ffi_rs.ops.rms_norm_inplace` (the ops, their
rules and their jnp reference formulas) and :mod:`xla_ffi_rs.python_ops` (with
``linear_op``, ``multilinear_op`` and ``nonlinear_op``). Building blocks
for ops of your own: :mod:`xla_ffi_rs.binding`, :mod:`xla_ffi_rs.sharding`,
:mod:`xla_ffi_rs.dtypes`.

``xla_ffi_rs.export_checks()`` gives the ``jax.export`` safety checks to disable
for these targets; ``xla_ffi_rs.target_names(name)`` the ``targets=`` of a
:class:`xla_ffi_rs.binding.Op`; ``xla_ffi_rs.handlers(platform)`` the native handlers;
``xla_ffi_rs.declarations()`` what each target declares, which
:func:`xla_ffi_rs.binding.op` builds an op from.
"""

# No ``from __future__ import annotations`` here: it would leave a public-looking
# ``xla_ffi_rs.annotations`` in ``dir(xla_ffi_rs)``; the annotations below run as they are.
from xla_ffi_rs import _compat, _native, _registration, _versions
from xla_ffi_rs._registration import declarations, handlers, register_targets, runtime_ffi_api, target_names

# The package's frames are not the user's: an op's source location in the HLO is the
# user's line, and a filtered traceback ends there (docs/python-api.md, "Debugging").
_compat.hide_frames(__path__[0])
_versions.warn_if_unsupported()
_registration.register_all()

# The public modules by name, so that ``xla_ffi_rs.ops.kepler``, ``xla_ffi_rs.sharding``
# and the others are attributes for type checkers too (they are imported anyway).
from xla_ffi_rs import binding, dtypes, ops, python_ops, sharding  # noqa: E402
from xla_ffi_rs._export import export_checks  # noqa: E402
from xla_ffi_rs.ops.kepler import kepler  # noqa: E402
from xla_ffi_rs.ops.rms_norm import rms_norm  # noqa: E402
from xla_ffi_rs.ops.rms_norm_inplace import rms_norm_inplace  # noqa: E402
from xla_ffi_rs.python_ops import linear_op, multilinear_op, nonlinear_op, python_op  # noqa: E402

__version__: str = _native.__version__

# The functions defined in private modules are documented (help(), IDEs, Sphinx) as
# the package's own: their __module__ names where users find them.
for _function in (declarations, export_checks, handlers, register_targets, runtime_ffi_api, target_names):
    _function.__module__ = __name__
del _function

#: Whether the native module was built with the CUDA handlers (feature ``cuda``).
has_cuda: bool = bool(_native.has_cuda)


def min_api_version() -> tuple[int, int]:
    """The lowest XLA FFI API version ``(major, minor)`` the native handlers report:
    a jaxlib whose FFI is older than this cannot run them.

    >>> import xla_ffi_rs
    >>> xla_ffi_rs.min_api_version() >= (0, 1)
    True
    """
    major, minor = _native.min_api_version()
    return (major, minor)


__all__ = [
    "__version__",
    "binding",
    "declarations",
    "dtypes",
    "export_checks",
    "handlers",
    "has_cuda",
    "kepler",
    "linear_op",
    "min_api_version",
    "multilinear_op",
    "nonlinear_op",
    "ops",
    "python_op",
    "python_ops",
    "register_targets",
    "rms_norm",
    "rms_norm_inplace",
    "runtime_ffi_api",
    "sharding",
    "target_names",
]
