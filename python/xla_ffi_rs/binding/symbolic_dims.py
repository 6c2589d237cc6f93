"""``jax.export``'s symbolic dimensions (shape polymorphism) through the native
shape checker, which reads sizes as integers.

A declared shape rule (``"...b n, n -> ...b n"``) only binds names to operand
dimensions, checks that every use of a name sees equal dimensions, and copies
bound dimensions (or literal sizes) into the results: it computes no new size.
So a symbolic dimension can stand in the checker as a stand-in integer of its
own, one per distinct symbolic expression (JAX normalizes ``2*(2*k)`` and
``4*k`` to one expression), chosen to equal no concrete size of the call and no
literal of the rule: two dimensions the checker finds equal are then the same
expression, or the same integer, and the results' stand-ins map back to the
expressions. The checker's messages name the expressions, never a stand-in.

Example:
    >>> import jax
    >>> b, n = jax.export.symbolic_shape("b, n")
    >>> dims = SymbolicDims([(b, n), (n,)], rule="...b n, n -> ...b n")
    >>> dims.shapes[1] == (dims.shapes[0][1],)
    True
    >>> dims.restore(dims.shapes[0])
    (b, n)
    >>> dims.message(f"expected shape [{dims.shapes[0][1]}], got [8]")
    'expected shape [n], got [8] (`n` is a symbolic dimension of jax.export, equal only to the same expression)'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["SymbolicDims", "is_concrete"]

#: The first stand-in: far above any size a buffer has, and below int64's max.
_BASE = 9_000_000_000_000_001


def is_concrete(d: Any) -> bool:
    """Whether ``d`` is a known size (an int), not a symbolic dimension."""
    return isinstance(d, (int, np.integer))


class SymbolicDims:
    """Shapes with symbolic dimensions replaced by stand-in integers (``shapes``),
    and the way back (``restore`` for a result shape, ``message`` for the
    checker's error words)."""

    def __init__(self, shapes: Sequence[Sequence[Any]], rule: str | None = None) -> None:
        taken = {int(d) for s in shapes for d in s if is_concrete(d)}
        self._by_expr: dict[Any, int] = {}
        self._by_int: dict[int, Any] = {}
        nxt = _BASE
        out: list[tuple[int, ...]] = []
        for s in shapes:
            row = []
            for d in s:
                if is_concrete(d):
                    row.append(int(d))
                    continue
                if d not in self._by_expr:
                    while nxt in taken or (rule is not None and str(nxt) in rule):
                        nxt += 1
                    self._by_expr[d], self._by_int[nxt] = nxt, d
                    nxt += 1
                row.append(self._by_expr[d])
            out.append(tuple(row))
        #: The shapes with stand-ins, for the native checker.
        self.shapes = out

    def restore(self, shape: Sequence[int]) -> tuple[Any, ...]:
        """A result shape of the checker with its stand-ins mapped back."""
        return tuple(self._by_int.get(int(d), int(d)) for d in shape)

    def message(self, text: str) -> str:
        """The checker's message with the stand-ins mapped back to the expressions
        they stand for, and a note naming the symbolic dimensions it mentions."""
        named: list[str] = []

        def back(m: re.Match[str]) -> str:
            expr = self._by_int.get(int(m.group(0)))
            if expr is None:
                return m.group(0)
            if str(expr) not in named:
                named.append(str(expr))
            return str(expr)

        text = re.sub(r"\d{16,}", back, text)
        if not named:
            return text
        which = ", ".join(f"`{n}`" for n in named)
        is_are = "is a symbolic dimension" if len(named) == 1 else "are symbolic dimensions"
        # A size the rule needs equal to another: a symbolic one equals only itself.
        equal = ", equal only to the same expression" if "expected shape" in text else ""
        return f"{text} ({which} {is_are} of jax.export{equal})"
