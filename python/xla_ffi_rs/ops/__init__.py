"""The package's ops, one module each: :mod:`xla_ffi_rs.ops.kepler`,
:mod:`xla_ffi_rs.ops.rms_norm` and :mod:`xla_ffi_rs.ops.rms_norm_inplace`.

Each module holds its op's JAX primitives (``*_op``), their rules, its jnp
reference formulas (``*_jnp``, what platforms without the target lower) and the
public function, which the package re-exports: ``xla_ffi_rs.kepler``,
``xla_ffi_rs.rms_norm``, ``xla_ffi_rs.rms_norm_inplace``. This package itself
defines no names but its modules, so ``xla_ffi_rs.ops.kepler`` is always the module.
:mod:`xla_ffi_rs.ops.rms_norm_tp` holds rms_norm's tensor-parallel path (x split
along its normalized axes), which ``xla_ffi_rs.rms_norm`` takes by itself.

Example:
    >>> import xla_ffi_rs.ops.kepler as m
    >>> m.kepler_op.name
    'kepler'
"""

# The op modules by name (and no other names), so that ``xla_ffi_rs.ops.kepler``
# is the module for type checkers too, after ``import xla_ffi_rs`` alone.
from xla_ffi_rs.ops import kepler, rms_norm, rms_norm_inplace, rms_norm_tp

__all__ = ["kepler", "rms_norm", "rms_norm_inplace", "rms_norm_tp"]
