"""Kepler's equation ``E - e sin E = M``, solved by the ``kepler`` target.

Three ops (see :mod:`xla_ffi_rs.binding`):

* ``kepler_op(M, e) -> (sin E, cos E)``: the solver.
* ``kepler_tangent_op(dM, de, e, sin E, cos E) -> (d sin E, d cos E)``: its
  derivative by implicit differentiation, linear in ``(dM, de)``, on the
  ``kepler_tangent`` target (forward mode: ``jvp`` runs the solver
  and this kernel, nothing else).
* ``kepler_cotangent_op(ct_sin, ct_cos, e, sin E, cos E) -> (ct_M, ct_e)``: the
  transpose of the tangent, on the ``kepler_cotangent`` target (reverse mode:
  ``grad`` runs the solver and this kernel).

All three are built from their handlers' declarations (``binding.ops``): the
operands, dtypes and shapes, vmap, sharding, and the transposes of the two
derivative ops into each other (``linear``, ``transpose``). By hand here: the
solver's JVP, and the derivative ops' JVP rules in jnp (they depend on the point
``(e, sin E, cos E)`` too), so every order of derivative works. Platforms without their targets lower the same formulas in
jnp: :func:`kepler_jnp`, :func:`kepler_tangent_jnp`, :func:`kepler_cotangent_jnp`
(public, as references).

Example:
    >>> import jax, jax.numpy as jnp
    >>> from xla_ffi_rs import kepler
    >>> sin_e, cos_e = kepler(jnp.linspace(0.0, 3.0, 4), 0.3)
    >>> sin_e.shape
    (4,)
    >>> dsin_dm = jax.grad(lambda m: kepler(m, 0.3)[0])(1.0)
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from xla_ffi_rs import _native, binding
from xla_ffi_rs._validation import array_like, check_real_or_integer

__all__ = [
    "kepler",
    "kepler_cotangent_jnp",
    "kepler_cotangent_op",
    "kepler_jnp",
    "kepler_op",
    "kepler_tangent_jnp",
    "kepler_tangent_op",
]

# -- jnp reference formulas (lowered where no target is registered) -------------

#: Halley steps after the starter; each at least triples the correct digits
#: once close, so 8 are plenty for f64 and any e < 1.
_KEPLER_STEPS = 8


def kepler_jnp(mean_anomaly: jax.Array, eccentricity: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The jnp reference of the ``kepler`` target: ``(sin E, cos E)`` with
    ``E - e sin E = M`` (M reduced modulo the real 2 pi as the kernels reduce it);
    NaN where e is not in [0, 1). Platforms without the target lower this.

    >>> import jax.numpy as jnp
    >>> s, c = kepler_jnp(jnp.float32(0.0), jnp.float32(0.5))
    >>> float(s), float(c)
    (0.0, 1.0)
    """
    m, e = mean_anomaly, eccentricity
    # M modulo the real 2 pi, in [-pi, pi], as the kernels reduce it, for every
    # finite M: XLA's sin and cos reduce their argument exactly.
    m = jnp.where(jnp.abs(m) <= np.pi, m, jnp.arctan2(jnp.sin(m), jnp.cos(m)))
    big_e = m + 0.85 * e * jnp.sign(jnp.sin(m))  # Danby's starter
    for _ in range(_KEPLER_STEPS):
        s, c = e * jnp.sin(big_e), e * jnp.cos(big_e)
        f, f1 = big_e - s - m, 1 - c
        big_e = big_e - f / (f1 - 0.5 * f * s / f1)
    ok = (e >= 0) & (e < 1)
    nan = jnp.asarray(np.nan, big_e.dtype)
    return jnp.where(ok, jnp.sin(big_e), nan), jnp.where(ok, jnp.cos(big_e), nan)


def kepler_tangent_jnp(
    d_mean_anomaly: jax.Array, d_eccentricity: jax.Array, e: jax.Array, sin_e: jax.Array, cos_e: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(d sin E, d cos E) as the ``kepler_tangent`` target computes them: with
    t = (dM + sin E de) / (1 - e cos E), (cos E t, -sin E t). Linear in (dM, de)."""
    t = (d_mean_anomaly + sin_e * d_eccentricity) / (1 - e * cos_e)
    return cos_e * t, -(sin_e * t)


def kepler_cotangent_jnp(
    ct_sin_e: jax.Array, ct_cos_e: jax.Array, e: jax.Array, sin_e: jax.Array, cos_e: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(ct_M, ct_e) as the ``kepler_cotangent`` target computes them (the transpose
    of :func:`kepler_tangent_jnp`): with t = (cos E ct_sin - sin E ct_cos) / (1 - e cos E),
    (t, sin E t)."""
    t = (cos_e * ct_sin_e - sin_e * ct_cos_e) / (1 - e * cos_e)
    return t, sin_e * t


Arrays = tuple[jax.Array, ...]


# Operands, dtypes, shapes (elementwise), linearity and the transposes into each
# other: all from the handlers' declarations (crates/ops/src/kepler).
_OPS = binding.ops(
    _native.declarations(),
    kepler={"jnp_impl": kepler_jnp},
    kepler_tangent={"jnp_impl": kepler_tangent_jnp},
    kepler_cotangent={"jnp_impl": kepler_cotangent_jnp},
)
kepler_op, kepler_tangent_op, kepler_cotangent_op = (_OPS[n] for n in ("kepler", "kepler_tangent", "kepler_cotangent"))
#: The dtypes the kernels take (others are computed in float32).
_KERNEL_DTYPES = tuple(jnp.dtype(d) for d in kepler_op.declaration.operands[0]["dtypes"])  # type: ignore[union-attr]


@kepler_op.def_jvp
def _kepler_jvp(primals: Arrays, tangents: Arrays) -> tuple[Arrays, Arrays]:
    """Implicit differentiation of E - e sin E = M, on the tangent target.

    dE = (dM + sin E de) / (1 - e cos E), d sin E = cos E dE, d cos E = -sin E dE:
    one linear op at the point (e, sin E, cos E), whose transpose is the
    cotangent op. (A tangent that is a symbolic zero arrives as zeros.)
    """
    (m, e), (dm, de) = primals, tangents
    sin_e, cos_e = kepler_op(m, e)
    return (sin_e, cos_e), kepler_tangent_op(dm, de, e, sin_e, cos_e)


def _jvp_of(op: binding.Op, formula: Callable[..., Arrays]) -> Callable[[Arrays, Arrays], tuple[Arrays, Arrays]]:
    """The JVP rule of a derivative op (second order): its kernel for the values,
    the jnp formula's JVP for the tangents (the op depends on the point too)."""

    def jvp(primals: Arrays, tangents: Arrays) -> tuple[Arrays, Arrays]:
        _, t_outs = jax.jvp(formula, primals, tangents)
        return op(*primals), t_outs

    return jvp


kepler_tangent_op.def_jvp(_jvp_of(kepler_tangent_op, kepler_tangent_jnp))
kepler_cotangent_op.def_jvp(_jvp_of(kepler_cotangent_op, kepler_cotangent_jnp))


def kepler(mean_anomaly: ArrayLike, eccentricity: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """Solve Kepler's equation for the eccentric anomaly E.

    Args:
      mean_anomaly: M, any real (float or integer, not bool) array-like, in
        radians, of any finite value: M is reduced modulo 2 pi exactly, so even
        ``M = 1e300`` gives the ``sin E``, ``cos E`` of that exact number. Where
        M is infinite or NaN the results are NaN.
      eccentricity: e, any real array-like broadcastable against M; where e is
        outside [0, 1) or NaN the results are NaN.

      Both are typed ``jax.typing.ArrayLike`` (arrays, NumPy scalars, Python
      numbers). Lists and tuples of numbers are accepted too, as by ``np.asarray``,
      but, as for ``jnp`` functions, they are outside that static type.

    Returns:
      ``(sin E, cos E)`` with the broadcast shape and the promoted dtype of the
      inputs (integers promote to the default float dtype). float16/bfloat16
      are computed in float32 and rounded.

    Raises:
      TypeError: for an argument that is not a real numeric array-like (a
        string, None, complex or bool values, an object array, ...).
      ValueError: for shapes that do not broadcast, or a Python int beyond the
        float64 range.

    Works under ``jit``, ``vmap`` (one vectorized kernel call), ``jvp`` (the
    solver and the ``kepler_tangent`` kernel), ``grad`` (the solver and the
    ``kepler_cotangent`` kernel) and higher orders.

    M is reduced modulo the real 2 pi, not modulo the float64 number
    ``2*np.pi``: ``M = 2*np.pi`` is 2.4e-16 below the real 2 pi and is solved
    as ``M = -2.4e-16``. At ``e = 1 - 1e-6`` that gives ``sin E = -2.45e-10``
    (``E = M / (1 - e)``) and a true anomaly with ``sin f = -3.5e-7``, where
    implementations that reduce with ``fmod(M, 2*np.pi)`` give 0. This is the
    exact solution for the given input, not an error; pass ``M % (2*np.pi)`` to
    get the ``fmod`` behaviour.

    >>> import jax.numpy as jnp
    >>> s, c = kepler(jnp.pi / 2, jnp.array([0.0, 0.5]))
    >>> [round(float(v), 4) for v in s]
    [1.0, 0.9004]
    """
    expected = "a real array (floats or integers)"
    mean_anomaly = array_like("kepler", "mean_anomaly", mean_anomaly, expected)
    eccentricity = array_like("kepler", "eccentricity", eccentricity, expected)
    check_real_or_integer("kepler", "mean_anomaly", jnp.result_type(mean_anomaly))
    check_real_or_integer("kepler", "eccentricity", jnp.result_type(eccentricity))
    dtype = jnp.result_type(mean_anomaly, eccentricity)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.result_type(float)
    compute = dtype if dtype in _KERNEL_DTYPES else jnp.dtype(jnp.float32)
    m, e = jnp.asarray(mean_anomaly, compute), jnp.asarray(eccentricity, compute)
    try:
        shape = jnp.broadcast_shapes(m.shape, e.shape)
    except ValueError:
        raise ValueError(
            f"kepler: mean_anomaly and eccentricity: expected broadcastable shapes, got {m.shape} and {e.shape}"
        ) from None
    m, e = jnp.broadcast_to(m, shape), jnp.broadcast_to(e, shape)
    sin_e, cos_e = kepler_op(m, e)
    return sin_e.astype(dtype), cos_e.astype(dtype)
