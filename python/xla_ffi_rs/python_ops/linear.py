"""Python ops from a function and its derivative functions, in one call each.

:func:`linear_op`, :func:`multilinear_op` and :func:`nonlinear_op` make a
:class:`~xla_ffi_rs.python_ops.PythonOp` whose ``jit``, ``vmap``, ``jvp``,
``vjp``, ``grad`` and ``jax.linear_transpose`` come from NumPy functions you
give (the function, its transpose, or its JVP and VJP); the derivative
functions are python ops themselves, so second order works where it is
defined (a linear op's transpose is linear again).

* **Fixed operands** (``fixed=``, operand indices): not differentiable.
  Differentiating with respect to one raises ``ValueError`` naming it; the
  derivative functions receive their values, never a tangent for them.
* **Symbolic zeros**: a tangent or cotangent that JAX knows to be zero reaches
  the derivative function as ``None`` (so it can skip the work); when all are
  zero the function is not called at all.
* **Batch axes** (``batch_axes=True``): under ``vmap`` the functions are
  called once, on the batched arrays as they are (no axis is moved), with a
  keyword ``batch_axes``: per operand, one entry per ``vmap`` level (innermost
  first), the axis of the operand that level maps over, or ``None`` for an
  operand that level does not map. Outside ``vmap`` every entry is ``()``. The
  abstract evaluation gets the same keyword, sees the batched shapes, and may
  say where each result's batch axes are by returning ``(aval, axes)`` pairs
  (``axes`` one int per level); a plain aval puts them where the first operand
  mapped at every level has them (an elementwise op, an FFT over the other axes).
  A transpose or VJP returns each cotangent with its operand's shape, summing over
  the batch axes the operand does not have.

Example, an FFT along the non-batch axes (``examples/fft_linear.py``):

    >>> import jax, jax.numpy as jnp, numpy as np
    >>> from xla_ffi_rs import linear_op
    >>> def fft(x, *, batch_axes):
    ...     axes = [a for a in range(x.ndim) if a not in batch_axes[0]]
    ...     return np.fft.fftn(x, axes=axes).astype(x.dtype)
    >>> op = linear_op(fft, fft, abstract_eval=lambda x, **_: x, abstract_eval_T=lambda x, **_: x,
    ...                batch_axes=True)
    >>> x = jnp.ones((3, 4), jnp.complex64)
    >>> bool(jnp.allclose(jax.vmap(op, in_axes=1, out_axes=1)(x), jnp.fft.fft(x, axis=0)))
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xla_ffi_rs.python_ops.op_class import PythonOp
from xla_ffi_rs.python_ops.roles import Role
from xla_ffi_rs.python_ops.rules import FixedIndices, fixed_indices, names_of

__all__ = ["linear_op", "multilinear_op", "nonlinear_op"]


def _qualname(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__)


def _check_common(what: str, fns: dict[str, Any], fixed: Any, batch_axes: Any, name: Any) -> tuple[int, ...]:
    for key, fn in fns.items():
        if not callable(fn):
            raise TypeError(f"{what}: {key} must be callable, got {type(fn).__name__}")
    if not isinstance(batch_axes, bool):
        raise TypeError(f"{what}: batch_axes must be a bool, got {type(batch_axes).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"{what}: name must be a str, got {type(name).__name__}")
    return fixed_indices(what, fixed)


def linear_op(
    f: Callable[..., Any],
    f_T: Callable[..., Any],
    *,
    abstract_eval: Callable[..., Any],
    abstract_eval_T: Callable[..., Any],
    fixed: FixedIndices = (),
    batch_axes: bool = False,
    name: str | None = None,
) -> PythonOp:
    """A python op linear in its non-fixed operands (jointly), from ``f`` and its
    transpose ``f_T``: ``jit``, ``vmap``, ``jvp``, ``vjp``, ``grad`` and
    ``jax.linear_transpose``, to any order.

    Args:
      f: ``f(*operands, **params)`` on NumPy arrays, returning one array or a tuple
        (as :func:`~xla_ffi_rs.python_op`'s ``fn``). In its JVP it is called with the
        fixed operands and the tangents of the others; a tangent JAX knows to be
        zero is ``None``.
      f_T: the transpose, ``f_T(*fixed_operands, *cotangents, **params)``, returning
        the cotangents of the non-fixed operands in order (one array if one); a
        zero cotangent is ``None``.
      abstract_eval: ``(*avals, **params)``: ``f``'s results (avals, or ``(aval,
        axes)`` pairs with ``batch_axes=True``; see :mod:`xla_ffi_rs.python_ops.axes`).
      abstract_eval_T: the same for ``f_T``, on the avals of its operands.
      fixed: indices of operands that are not differentiable (the op need not be
        linear in them); differentiating with respect to one raises ``ValueError``.
      batch_axes: ``vmap`` calls ``f`` once, on the arrays as they are, passing the
        keyword ``batch_axes`` (also to ``abstract_eval``); otherwise ``vmap`` calls
        it once per element.
      name: the op's name (default ``linear_op[<f's qualified name>]``); its
        transpose is ``<name>.T``.

    Example, a cumulative sum, whose transpose sums from the end:

        >>> import jax, jax.numpy as jnp, numpy as np
        >>> from xla_ffi_rs import linear_op
        >>> cumsum = linear_op(np.cumsum, lambda ct: np.cumsum(ct[::-1])[::-1],
        ...                    abstract_eval=lambda x: x, abstract_eval_T=lambda ct: ct)
        >>> jax.grad(lambda x: (cumsum(x) * jnp.arange(3.0)).sum())(jnp.ones(3)).tolist()
        [3.0, 3.0, 2.0]
    """
    fixed_ = _check_common(
        "linear_op",
        {"f": f, "f_T": f_T, "abstract_eval": abstract_eval, "abstract_eval_T": abstract_eval_T},
        fixed,
        batch_axes,
        name,
    )
    base = name or f"linear_op[{_qualname(f)}]"
    role = Role("linear", base, f, abstract_eval, fixed=fixed_, batch_axes=batch_axes, names=names_of(f))
    t = Role(
        "linear",
        f"{base}.T",
        f_T,
        abstract_eval_T,
        fixed=None,
        batch_axes=batch_axes,
        names=names_of(f_T),
        why_fixed=f"it is one of {base}'s fixed operands",
    )
    role.partner, t.partner = t, role
    return role.op


def multilinear_op(
    f: Callable[..., Any],
    transposes: Sequence[Callable[..., Any]],
    *,
    abstract_eval: Callable[..., Any],
    abstract_eval_T: Sequence[Callable[..., Any]],
    fixed: FixedIndices = (),
    batch_axes: bool = False,
    name: str | None = None,
) -> PythonOp:
    """A python op linear in each non-fixed operand separately (a product, a
    bilinear form), from ``f`` and one transpose per non-fixed operand.

    ``transposes[k]``, for the ``k``-th non-fixed operand ``i``, is
    ``T(*other_operands, *cotangents, **params)``, every operand but ``i`` in
    order, then the cotangents of ``f``'s results (``None`` where zero); it returns
    the cotangent of operand ``i``. ``abstract_eval_T[k]`` is its abstract
    evaluation. The JVP calls ``f`` once per operand with a non-zero tangent (in
    place of that operand) and sums; an operand JAX knows to be zero is not
    computed with. The transposes are linear in the cotangents (second order in
    the cotangents works; in the other operands, they are fixed). Other arguments
    as for :func:`linear_op`.

    Example, the elementwise product, linear in ``x`` and in ``y``:

        >>> import jax, jax.numpy as jnp, numpy as np
        >>> from xla_ffi_rs import multilinear_op
        >>> mul = multilinear_op(np.multiply, [lambda y, ct: ct * y, lambda x, ct: ct * x],
        ...                      abstract_eval=lambda x, y: x,
        ...                      abstract_eval_T=[lambda y, ct: y, lambda x, ct: x])
        >>> x, y = jnp.array([1.0, 2.0]), jnp.array([3.0, 4.0])
        >>> dx, dy = jax.grad(lambda x, y: mul(x, y).sum(), (0, 1))(x, y)
        >>> dx.tolist(), dy.tolist()
        ([3.0, 4.0], [1.0, 2.0])
    """
    for arg, value in (("transposes", transposes), ("abstract_eval_T", abstract_eval_T)):
        if callable(value) or not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
            raise TypeError(
                f"multilinear_op: {arg} must be a sequence (list or tuple) of callables, one per non-fixed "
                f"operand, got {type(value).__name__}"
            )
    transposes, abstract_eval_T = tuple(transposes), tuple(abstract_eval_T)
    fns = {"f": f, "abstract_eval": abstract_eval}
    fns.update({f"transposes[{k}]": t for k, t in enumerate(transposes)})
    fns.update({f"abstract_eval_T[{k}]": t for k, t in enumerate(abstract_eval_T)})
    fixed_ = _check_common("multilinear_op", fns, fixed, batch_axes, name)
    n = len(fixed_) + len(transposes)
    if len(abstract_eval_T) != len(transposes) or not transposes or any(i >= n for i in fixed_):
        raise ValueError(
            f"multilinear_op: give one transpose and one abstract_eval_T per non-fixed operand; got "
            f"{len(transposes)} transposes, {len(abstract_eval_T)} abstract_eval_T and fixed={fixed_!r}"
        )
    base = name or f"multilinear_op[{_qualname(f)}]"
    role = Role("multilinear", base, f, abstract_eval, fixed=fixed_, batch_axes=batch_axes, names=names_of(f))
    role.n_operands = n
    for k, i in enumerate(i for i in range(n) if i not in fixed_):
        t = Role(
            "multilinear_T",
            f"{base}.T{i}",
            transposes[k],
            abstract_eval_T[k],
            fixed=tuple(j if j < i else j - 1 for j in fixed_),
            batch_axes=batch_axes,
            names=names_of(transposes[k]),
            why_fixed=f"it is one of {base}'s fixed operands",
        )
        t.partner, t.partner_slot, t.n_others = role, i, n - 1
        role.transposes.append(t)
    return role.op


def nonlinear_op(
    f: Callable[..., Any],
    f_jvp: Callable[..., Any],
    f_vjp: Callable[..., Any],
    *,
    abstract_eval: Callable[..., Any],
    fixed: FixedIndices = (),
    batch_axes: bool = False,
    name: str | None = None,
) -> PythonOp:
    """A python op from ``f`` and NumPy functions for its JVP and VJP.

    ``f_jvp(*operands, *tangents, **params)`` gets every operand and the tangents
    of the non-fixed ones (``None`` where JAX knows it is zero; not called when all
    are) and returns the results' tangents; ``f_vjp(*operands, *cotangents,
    **params)`` gets every operand and the results' cotangents (``None`` where
    zero) and returns the cotangents of the non-fixed operands (one array if one).
    ``abstract_eval`` describes ``f``'s results (and so ``f_jvp``'s); ``f_vjp``'s
    look like the non-fixed operands. ``jvp``, ``vjp``, ``grad`` and ``vmap`` work;
    a second derivative with respect to the operands raises ``ValueError`` (the
    JVP is linear in the tangents only). Other arguments as for :func:`linear_op`.

    Example:

        >>> import jax, jax.numpy as jnp, numpy as np
        >>> from xla_ffi_rs import nonlinear_op
        >>> sin = nonlinear_op(np.sin, lambda x, t: np.cos(x) * t, lambda x, ct: np.cos(x) * ct,
        ...                    abstract_eval=lambda x: x)
        >>> x = jnp.array([0.0, 0.5])
        >>> bool(jnp.allclose(jax.grad(lambda x: sin(x).sum())(x), jnp.cos(x)))
        True
    """
    fixed_ = _check_common(
        "nonlinear_op",
        {"f": f, "f_jvp": f_jvp, "f_vjp": f_vjp, "abstract_eval": abstract_eval},
        fixed,
        batch_axes,
        name,
    )
    base = name or f"nonlinear_op[{_qualname(f)}]"
    role = Role("nonlinear", base, f, abstract_eval, fixed=fixed_, batch_axes=batch_axes, names=names_of(f))
    second = (
        f"{base} has no second derivative in its operands (its JVP {base}.jvp is linear in the tangents "
        "only; the operands are fixed there)"
    )
    jvp = Role(
        "jvp",
        f"{base}.jvp",
        f_jvp,
        abstract_eval,
        fixed=None,
        batch_axes=batch_axes,
        names=names_of(f_jvp),
        why_fixed=second,
    )
    vjp = Role(
        "vjp",
        f"{base}.vjp",
        f_vjp,
        abstract_eval,
        fixed=None,
        batch_axes=batch_axes,
        names=names_of(f_vjp),
        why_fixed=second,
    )
    vjp.primal_fixed = fixed_
    role.partner, jvp.partner, vjp.partner = jvp, vjp, jvp
    return role.op
