"""Kepler's equation ``E - e sin E = M``, solved by the ``kepler`` target.

Four ops (see :mod:`xla_ffi_rs.binding`):

* ``kepler_op(M, e) -> (sin E, cos E)``: the solver.
* ``kepler_tangent_op(dM, de, e, sin E, cos E) -> (d sin E, d cos E)``: its
  derivative by implicit differentiation, linear in ``(dM, de)``, on the
  ``kepler_tangent`` target (what ``linearize`` and ``grad`` transpose).
* ``kepler_jvp_op(M, e, dM, de) -> (sin E, cos E, d sin E, d cos E)``: the two in
  one pass, on the ``kepler_jvp`` target (forward mode: ``jvp`` runs this
  kernel, nothing else); ``kepler_jvp_dm_op`` (``de`` a scalar) and
  ``kepler_jvp_const_op`` (``dM`` and ``de`` scalars) are the same with tangents
  that are one value for every element, never materialized (``kepler_jvp_dm`` and
  ``kepler_jvp_const`` targets): what ``jvp`` runs for a symbolic-zero tangent or
  one built in the program as a constant (``ones_like``, ``full_like``).
* ``kepler_cotangent_op(ct_sin, ct_cos, e, sin E, cos E) -> (ct_M, ct_e)``: the
  transpose of the tangent, on the ``kepler_cotangent`` target (reverse mode:
  ``grad`` runs the solver and this kernel).

What the targets compute (operands of one shape, all float32 or all float64):
``kepler``: ``sin E``, ``cos E`` of the solution ``E`` of ``M = E - e sin E``;
``kepler_tangent``: ``d sin E = cos E t``, ``d cos E = -sin E t`` with
``t = (dM + sin E de) / (1 - e cos E)``; ``kepler_cotangent`` (its transpose):
``ct_M = t``, ``ct_e = sin E t`` with ``t = (cos E ct_sin - sin E ct_cos) / (1 - e cos E)``;
``kepler_jvp``: those of ``kepler`` and of ``kepler_tangent`` at them, in one pass
(``kepler_jvp_dm``: ``de`` of shape ``()``; ``kepler_jvp_const``: ``dM`` and ``de``).
For ``cos E > 0`` the division by ``1 - e cos E`` is taken as ``(1 + cos E) / ((1 - e)
(1 + cos E) + e sin^2 E)``, which does not cancel near ``e -> 1``, ``E -> 0``, so the
derivatives keep their relative accuracy there.

All three are built from their handlers' declarations (``binding.ops``): the
operands, dtypes and shapes, vmap, sharding, and the transposes of the two
derivative ops into each other (``linear``, ``transpose``). By hand here: the
solver's JVP (the fused op) and its linearization (the solver, then the tangent
op: ``grad`` needs the tangent as a linear op of its own, which it transposes),
and the derivative ops' JVP rules in jnp (they depend on the point
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

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Var
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike

from xla_ffi_rs import _native, binding
from xla_ffi_rs._compat import (
    Tracer,
    ad,
    batching_rule,
    closed_call_p,
    defining_equation,
    linearize_with,
    literal_value,
    pe,
    set_batching_rule,
    standard_numpy,
)
from xla_ffi_rs._validation import array_like, check_real_or_integer, weak_if_all_weak
from xla_ffi_rs.binding.batch_split import mesh_of
from xla_ffi_rs.binding.op_class import explicit_spec

__all__ = [
    "kepler",
    "kepler_cotangent_jnp",
    "kepler_cotangent_op",
    "kepler_jnp",
    "kepler_jvp_const_op",
    "kepler_jvp_dm_op",
    "kepler_jvp_jnp",
    "kepler_jvp_op",
    "kepler_op",
    "kepler_tangent_jnp",
    "kepler_tangent_op",
]

# -- jnp reference formulas (lowered where no target is registered) -------------

#: Halley steps after the starter; each at least triples the correct digits
#: once close, so 8 are plenty for f64 and any e < 1.
_KEPLER_STEPS = 8


@standard_numpy()
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


def _over_one_minus_e_cos(num: jax.Array, e: jax.Array, sin_e: jax.Array, cos_e: jax.Array) -> jax.Array:
    """num / (1 - e cos E) as the derivative targets compute it: for cos E > 0,
    num (1 + cos E) / ((1 - e)(1 + cos E) + e sin^2 E), which does not cancel near
    e -> 1, E -> 0 (1 - cos E = sin^2 E / (1 + cos E)); else num / (1 - e cos E)."""
    near = cos_e > 0
    opc = 1 + cos_e
    scale = jnp.where(near, opc, jnp.ones_like(opc))
    den = jnp.where(near, (1 - e) * opc + e * (sin_e * sin_e), 1 - e * cos_e)
    return num * scale / den


@standard_numpy()
def kepler_tangent_jnp(
    d_mean_anomaly: jax.Array, d_eccentricity: jax.Array, e: jax.Array, sin_e: jax.Array, cos_e: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(d sin E, d cos E) as the ``kepler_tangent`` target computes them: with
    t = (dM + sin E de) / (1 - e cos E), (cos E t, -sin E t). Linear in (dM, de)."""
    t = _over_one_minus_e_cos(d_mean_anomaly + sin_e * d_eccentricity, e, sin_e, cos_e)
    return cos_e * t, -(sin_e * t)


@standard_numpy()
def kepler_cotangent_jnp(
    ct_sin_e: jax.Array, ct_cos_e: jax.Array, e: jax.Array, sin_e: jax.Array, cos_e: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(ct_M, ct_e) as the ``kepler_cotangent`` target computes them (the transpose
    of :func:`kepler_tangent_jnp`): with t = (cos E ct_sin - sin E ct_cos) / (1 - e cos E),
    (t, sin E t)."""
    t = _over_one_minus_e_cos(cos_e * ct_sin_e - sin_e * ct_cos_e, e, sin_e, cos_e)
    return t, sin_e * t


@standard_numpy()
def kepler_jvp_jnp(
    mean_anomaly: jax.Array, eccentricity: jax.Array, d_mean_anomaly: jax.Array, d_eccentricity: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """(sin E, cos E, d sin E, d cos E) as the ``kepler_jvp`` target computes them:
    :func:`kepler_jnp`, then :func:`kepler_tangent_jnp` at its result. The tangents
    may be scalars (the ``kepler_jvp_dm`` and ``kepler_jvp_const`` targets)."""
    s, c = kepler_jnp(mean_anomaly, eccentricity)
    ds, dc = kepler_tangent_jnp(d_mean_anomaly, d_eccentricity, eccentricity, s, c)
    return s, c, ds, dc


Arrays = tuple[jax.Array, ...]


# Operands, dtypes, shapes (elementwise), linearity and the transposes into each
# other: all from the handlers' declarations (crates/ops/src/kepler).
_OPS = binding.ops(
    _native.declarations(),
    kepler={"jnp_impl": kepler_jnp},
    kepler_tangent={"jnp_impl": kepler_tangent_jnp},
    kepler_cotangent={"jnp_impl": kepler_cotangent_jnp},
    kepler_jvp={"jnp_impl": kepler_jvp_jnp},
    kepler_jvp_dm={"jnp_impl": kepler_jvp_jnp},
    kepler_jvp_const={"jnp_impl": kepler_jvp_jnp},
)
kepler_op, kepler_tangent_op, kepler_cotangent_op, kepler_jvp_op, kepler_jvp_dm_op, kepler_jvp_const_op = (
    _OPS[n] for n in ("kepler", "kepler_tangent", "kepler_cotangent", "kepler_jvp", "kepler_jvp_dm", "kepler_jvp_const")
)
#: The fused ops, and which of their tangents (dM, de) are scalars.
_FUSED = {kepler_jvp_op: (False, False), kepler_jvp_dm_op: (False, True), kepler_jvp_const_op: (True, True)}
#: The dtypes the kernels take (others are computed in float32).
_KERNEL_DTYPES = tuple(jnp.dtype(d) for d in kepler_op.declaration.operands[0]["dtypes"])  # type: ignore[union-attr]


def _dense(tangent: jax.Array | ad.Zero) -> jax.Array:
    """A tangent as an array (a symbolic zero becomes zeros of its type)."""
    dense: jax.Array = ad.instantiate_zeros(tangent)
    return dense


#: The primitives a constant tangent is traced through: a scalar broadcast, and
#: dtype conversions (``full_like`` of a Python number, ``kepler``'s cast).
_CONSTANT_FORMING = ("broadcast_in_dim", "convert_element_type")


def _constant_tangent(tangent: jax.Array | ad.Zero, dtype: Any) -> np.ndarray | None:
    """The value of a tangent that is one value for every element and known while
    tracing, as a scalar of ``dtype``: a symbolic zero, or (under ``jit``) a literal
    scalar broadcast and converted (``ones_like``, ``zeros_like``, ``full_like`` with
    a number). None for anything else (the tangent is then passed as an array)."""
    if isinstance(tangent, ad.Zero):
        return np.zeros((), dtype)
    t: Any = tangent
    for _ in range(8):
        value = literal_value(t)
        if value is not None:
            return np.asarray(value).astype(dtype) if np.ndim(value) == 0 else None
        eqn = defining_equation(t)
        if eqn is None or eqn[0] not in _CONSTANT_FORMING or len(eqn[1]) != 1:
            return None
        t = eqn[1][0]
    return None


def _kepler_jvp(
    primals: Arrays, tangents: tuple[jax.Array | ad.Zero, ...], **params: object
) -> tuple[list[jax.Array], list[jax.Array]]:
    """Forward mode: a fused kernel, one pass for sin E, cos E and the tangent.

    dE = (dM + sin E de) / (1 - e cos E), d sin E = cos E dE, d cos E = -sin E dE.
    JAX calls this rule only when some tangent is nonzero. A tangent that is one
    known value for every element (a symbolic zero, e.g. ``jax.jvp(lambda m:
    kepler(m, e), ...)``, or a constant built in the program under ``jit``) is
    passed as a scalar: ``kepler_jvp_const`` for two such, ``kepler_jvp_dm`` for
    ``de`` alone; else ``kepler_jvp`` with both as arrays.
    """
    (m, e), (dm, de) = primals, tangents
    c_dm, c_de = _constant_tangent(dm, m.dtype), _constant_tangent(de, e.dtype)
    if c_dm is not None and c_de is not None:
        out = kepler_jvp_const_op(m, e, c_dm, c_de)
    elif c_de is not None:
        out = kepler_jvp_dm_op(m, e, _dense(dm), c_de)
    else:
        out = kepler_jvp_op(m, e, _dense(dm), _dense(de))
    sin_e, cos_e, d_sin, d_cos = out
    return [sin_e, cos_e], [d_sin, d_cos]


def _broadcast_tangents(op: binding.Op, m: Any, dm: Any, de: Any) -> tuple[Any, Any]:
    """The tangents of fused op ``op`` as arrays of ``m``'s shape."""
    (dm_scalar, de_scalar), shape = _FUSED[op], jnp.shape(m)
    return (jnp.broadcast_to(dm, shape) if dm_scalar else dm, jnp.broadcast_to(de, shape) if de_scalar else de)


def _kepler_linear_jvp(
    primals: Arrays, tangents: tuple[jax.Array | ad.Zero, ...], **params: object
) -> tuple[list[jax.Array], list[jax.Array]]:
    """The JVP that linearization (``linearize``, ``grad``, ``vjp``) traces: the
    solver on the primals, then the tangent op, linear in the tangents alone, so
    partial evaluation keeps the solver in the forward pass and transposes the
    tangent op into the cotangent op. (The fused kernel takes the tangents as
    operands: partial evaluation would move the whole solver into the linear part.)
    """
    (m, e), (dm, de) = primals, tangents
    sin_e, cos_e = kepler_op(m, e)
    return [sin_e, cos_e], list(kepler_tangent_op(_dense(dm), _dense(de), e, sin_e, cos_e))


ad.primitive_jvps[kepler_op.primitive] = _kepler_jvp
# Linearization runs the unfused JVP (jax 0.10 and 0.12 always linearize directly:
# `jax_use_direct_linearize` is declared but read nowhere); the fused ops' jaxpr
# partial-evaluation rule below splits them the same way under `checkpoint`.
linearize_with(kepler_op.primitive, _kepler_linear_jvp)


def _broadcast_tangent_call(op: binding.Op, avals: Sequence[Any]) -> Any:
    """A closed jaxpr of (dM, de, e, sin E, cos E) -> the tangent op, with the
    scalar tangents of fused op ``op`` broadcast first (the staged side of
    :func:`_fused_partial_eval_jaxpr`)."""

    def call(dm: Any, de: Any, e: Any, s: Any, c: Any) -> Any:
        return kepler_tangent_op(*_broadcast_tangents(op, e, dm, de), e, s, c)

    return jax.make_jaxpr(call)(*(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals))


def _fused_partial_eval_jaxpr(op: binding.Op) -> Callable[..., Any]:
    """The same split on a jaxpr (``checkpoint``'s linearization): with the
    primals known and a tangent unknown, a known ``kepler`` equation and a staged
    ``kepler_tangent`` one (for scalar tangents, a call that broadcasts them
    first), whose residuals are ``(e, sin E, cos E)`` and any known tangent.
    Otherwise what jax does by default for an equation without a rule."""

    def rule(
        saveable: Any, unks_in: Sequence[bool], inst_in: Sequence[bool], eqn: Any
    ) -> tuple[Any, Any, list[bool], list[bool], list[Any]]:
        m, e, dm, de = eqn.invars
        n = len(eqn.outvars)
        if not any(unks_in):
            return eqn, None, [False] * n, [False] * n, []
        if unks_in[0] or unks_in[1] or any(u for u, sc in zip(unks_in[2:], _FUSED[op], strict=True) if sc):
            res = [v for v, inst in zip(eqn.invars, inst_in, strict=True) if isinstance(v, Var) and not inst]
            return None, eqn, [True] * n, [True] * n, res
        sin_e, cos_e, d_sin, d_cos = eqn.outvars
        known = eqn.replace(primitive=kepler_op.primitive, invars=[m, e], outvars=[sin_e, cos_e], params={})
        invars = [dm, de, e, sin_e, cos_e]
        if op is kepler_jvp_op:
            staged = eqn.replace(
                primitive=kepler_tangent_op.primitive, invars=invars, outvars=[d_sin, d_cos], params={}
            )
        else:
            call = _broadcast_tangent_call(op, [v.aval for v in invars])
            staged = eqn.replace(
                primitive=closed_call_p, invars=invars, outvars=[d_sin, d_cos], params={"call_jaxpr": call}
            )
        res = [v for v, inst in zip((dm, de, e), inst_in[1:], strict=True) if isinstance(v, Var) and not inst]
        return known, staged, [False, False, True, True], [False, False, True, True], [*res, sin_e, cos_e]

    return rule


def _fused_partial_eval(op: binding.Op) -> Callable[..., Any]:
    """The same split on partial-evaluation tracers: what ``jax.grad`` of a
    ``jax.custom_jvp`` function runs on its JVP rule (``linearize_from_jvp``), where
    a rule calling ``jax.jvp`` of ``kepler`` binds a fused op with the primals
    known and a tangent unknown. The solver runs on the known primals and the
    ``kepler_tangent`` op is staged on the tangents (a scalar tangent is then a
    known value, broadcast first). Otherwise what jax does by default."""

    def rule(trace: Any, *tracers: Any, **params: Any) -> Any:
        m, e, dm, de = (t.pval.get_known() for t in tracers)
        scalar_unknown = any(k is None for k, sc in zip((dm, de), _FUSED[op], strict=True) if sc)
        if m is None or e is None or scalar_unknown or (dm is not None and de is not None):
            return trace.default_process_primitive(op.primitive, tracers, params)
        sin_e, cos_e = kepler_op(m, e)
        dm_b, de_b = _broadcast_tangents(op, m, tracers[2] if dm is None else dm, tracers[3] if de is None else de)
        d_sin, d_cos = trace.default_process_primitive(kepler_tangent_op.primitive, (dm_b, de_b, e, sin_e, cos_e), {})
        return [sin_e, cos_e, d_sin, d_cos]

    return rule


for _op in _FUSED:
    pe.partial_eval_jaxpr_custom_rules[_op.primitive] = _fused_partial_eval_jaxpr(_op)
    pe.custom_partial_eval_rules[_op.primitive] = _fused_partial_eval(_op)


_declared_jvp_batcher = batching_rule(kepler_jvp_op.primitive)


def _kepler_jvp_batch(axis_data: Any, operands: Sequence[Any], dims: Sequence[Any], **params: Any) -> tuple[Any, Any]:
    """vmap of the fused op: the declared rule (one batched call), except where
    only the tangents are batched (``jacfwd``: many tangents at one point). There
    the solution must stay unbatched, so the solver runs once, unbatched, and the
    tangent op once over the batch."""
    m, e, dm, de = operands
    if dims[0] is not None or dims[1] is not None or (dims[2] is None and dims[3] is None):
        declared: tuple[Any, Any] = _declared_jvp_batcher(axis_data, operands, dims, **params)
        return declared
    sin_e, cos_e = kepler_op(m, e)
    in_axes = (dims[2], dims[3], None, None, None)
    d_sin, d_cos = jax.vmap(kepler_tangent_op, in_axes=in_axes)(dm, de, e, sin_e, cos_e)
    return [sin_e, cos_e, d_sin, d_cos], [None, None, 0, 0]


set_batching_rule(kepler_jvp_op.primitive, _kepler_jvp_batch)


def _scalar_tangent_batch(op: binding.Op) -> Callable[..., tuple[Any, Any]]:
    """vmap of a fused op with scalar tangents: its declared rule (one batched call)
    where the primals are batched and the scalars are not; otherwise (a batched
    scalar, or the tangents alone batched) the scalars are broadcast and the call
    batched as ``kepler_jvp``'s."""
    declared = batching_rule(op.primitive)

    def rule(axis_data: Any, operands: Sequence[Any], dims: Sequence[Any], **params: Any) -> tuple[Any, Any]:
        scalars = [d for d, sc in zip(dims[2:], _FUSED[op], strict=True) if sc]
        if (dims[0] is not None or dims[1] is not None) and all(d is None for d in scalars):
            batched: tuple[Any, Any] = declared(axis_data, operands, dims, **params)
            return batched
        ops = [x if d is None else jnp.moveaxis(x, d, 0) for x, d in zip(operands, dims, strict=True)]
        dims0 = [None if d is None else 0 for d in dims]
        m = ops[0]
        shape = m.shape[1:] if dims0[0] == 0 else m.shape
        for k, sc in ((2, _FUSED[op][0]), (3, _FUSED[op][1])):
            if sc:
                x = ops[k]
                ops[k] = jnp.broadcast_to(
                    x if dims0[k] is None else x.reshape(x.shape + (1,) * len(shape)), x.shape + shape
                )
        return _kepler_jvp_batch(axis_data, ops, dims0, **params)

    return rule


for _op in (kepler_jvp_dm_op, kepler_jvp_const_op):
    set_batching_rule(_op.primitive, _scalar_tangent_batch(_op))


def _fused_jvp(op: binding.Op) -> Callable[[Arrays, Arrays], tuple[Arrays, Arrays]]:
    """Second order of a fused op: the op for the values; for the tangents, the
    tangent op at the solution (for sin E, cos E) and the JVP of the tangent formula
    (for d sin E, d cos E, which depend on the point too; scalar tangents broadcast
    in it). All linear in the tangents with the fused op's primal inputs alone, so
    linearization keeps it forward."""

    def jvp(primals: Arrays, tangents: Arrays) -> tuple[Arrays, Arrays]:
        (m, e, dm, de), (t_m, t_e, t_dm, t_de) = primals, tangents
        sin_e, cos_e, d_sin, d_cos = op(m, e, dm, de)
        t_sin, t_cos = kepler_tangent_op(t_m, t_e, e, sin_e, cos_e)
        _, (t_dsin, t_dcos) = jax.jvp(kepler_tangent_jnp, (dm, de, e, sin_e, cos_e), (t_dm, t_de, t_e, t_sin, t_cos))
        return (sin_e, cos_e, d_sin, d_cos), (t_sin, t_cos, t_dsin, t_dcos)

    return jvp


for _op in _FUSED:
    _op.def_jvp(_fused_jvp(_op))


def _jvp_of(op: binding.Op, formula: Callable[..., Arrays]) -> Callable[[Arrays, Arrays], tuple[Arrays, Arrays]]:
    """The JVP rule of a derivative op (second order): its kernel for the values,
    the jnp formula's JVP for the tangents (the op depends on the point too)."""

    def jvp(primals: Arrays, tangents: Arrays) -> tuple[Arrays, Arrays]:
        _, t_outs = jax.jvp(formula, primals, tangents)
        return op(*primals), t_outs

    return jvp


kepler_tangent_op.def_jvp(_jvp_of(kepler_tangent_op, kepler_tangent_jnp))
kepler_cotangent_op.def_jvp(_jvp_of(kepler_cotangent_op, kepler_cotangent_jnp))


def _result_type(fn: Any, *args: jax.Array) -> Any:
    """The type (with its sharding) of ``fn(*args)``, computed without running it.
    ``jax.eval_shape`` drops the sharding on a mesh that mixes explicit and auto
    axes, which made ``kepler`` gather a split ``M`` there."""
    return jax.make_jaxpr(fn)(*args).out_avals[0]


def _broadcast_alike(m: jax.Array, e: jax.Array, shape: tuple[int, ...]) -> tuple[jax.Array, jax.Array]:
    """``m`` and ``e`` broadcast to ``shape`` and, on a mesh with explicit axes, split
    alike: as jax splits ``m + e`` (``m``'s split where the two conflict). The
    targets take elementwise operands, and their derivative ops type each result
    like the operands: a replicated or differently split ``e`` (one eccentricity
    for many times) would give ``grad`` a cotangent of ``e``'s broadcast typed
    unlike it, which JAX refuses. An operand of fewer elements is broadcast straight
    into the split layout, so its cotangent is summed shard by shard (one small
    all-reduce), never gathered. Elsewhere (auto axes, one device) plain broadcasts."""
    specs = [explicit_spec(jax.typeof(a)) for a in (m, e)]
    if specs == [None, None]:
        return jnp.broadcast_to(m, shape), jnp.broadcast_to(e, shape)
    try:
        spec = explicit_spec(_result_type(jnp.add, m, e))
    except Exception:  # splits jax cannot combine: m's
        spec = explicit_spec(_result_type(lambda m: jnp.broadcast_to(m, shape), m))
    split = m if specs[0] is not None else e
    mesh = mesh_of(split, jax.typeof(split))  # eager: the devices' mesh, to place a host array on
    sharding = NamedSharding(mesh, P(*(spec or ())))

    def alike(a: jax.Array, a_spec: Any) -> jax.Array:
        if tuple(a.shape) == shape and a_spec == spec:
            return a
        if not isinstance(a, Tracer):
            # A concrete array in an eager call: placed like the other (jax 0.10 neither
            # broadcasts nor reshards one onto the devices of another's split); beside a
            # traced one whose mesh has no devices (an eager vmap), broadcast and left
            # off the mesh: nothing traces it, so no cotangent must be typed like it.
            if isinstance(mesh, jax.sharding.AbstractMesh):
                return jnp.broadcast_to(a, shape)
            placed: jax.Array = jax.device_put(jnp.broadcast_to(a, shape), sharding)
            return placed
        if tuple(a.shape) != shape:
            out: jax.Array = jnp.broadcast_to(a, shape, out_sharding=sharding)
            return out
        moved: jax.Array = jax.sharding.reshard(a, sharding)
        return moved

    return alike(m, specs[0]), alike(e, specs[1])


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
      are computed in float32 and rounded. When both inputs are weakly typed
      (Python numbers, or arrays made from them) so are the results, as
      ``jnp.sin(1.0)`` is: ``kepler(1.0, 0.3)[0] * x`` keeps ``x``'s dtype.

    Raises:
      TypeError: for an argument that is not a real numeric array-like (a
        string, None, complex or bool values, an object array, ...), or of a
        dtype without a kernel (float8, int4).
      ValueError: for shapes that do not broadcast, or a Python int beyond the
        float64 range.

    Works under ``jit``, ``vmap`` (one vectorized kernel call), ``jvp`` (one
    ``kepler_jvp`` kernel: the solver and its tangent in one pass), ``linearize``
    (the solver and the ``kepler_tangent`` kernel), ``grad`` (the solver and the
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
    try:
        dtype = jnp.result_type(mean_anomaly, eccentricity)
    except jax.dtypes.TypePromotionError as err:  # jax_numpy_dtype_promotion="strict": as jnp's own functions
        raise jax.dtypes.TypePromotionError(f"kepler: mean_anomaly and eccentricity: {err}") from None
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
    m, e = _broadcast_alike(m, e, tuple(shape))
    sin_e, cos_e = kepler_op(m, e)
    sin_e, cos_e = weak_if_all_weak((mean_anomaly, eccentricity), (sin_e.astype(dtype), cos_e.astype(dtype)))
    return sin_e, cos_e
