"""An op's declaration (written once, in the Rust ``#[handler(...)]``) read in Python.

``_native.declarations()`` (or a plugin module's ``declarations()``) gives one dict
per target; :class:`Declaration` checks its form and answers what
:func:`xla_ffi_rs.binding.op` needs: result avals and the batch rank (from the
native checker ``_native.infer``, so Python says what the Rust handler would),
which operands and results carry the batch ellipsis, the linear operands, and
the attributes, converted to the types the handler decodes.

Example:
    >>> d = Declaration({"target": "demo.scale", "shapes": "...b -> ...b", "batch": "b",
    ...     "operands": [{"name": "x", "dtypes": ["float32"], "dims": ["...b"], "dtype": None}],
    ...     "results": [{"name": "y", "dtypes": ["float32"], "dims": ["...b"], "dtype": None}],
    ...     "attributes": [{"name": "factor", "type": "f32", "optional": False}]})
    >>> d.batched_in, d.batched_out
    ([True], [True])
    >>> d.params({"factor": 2})
    {'factor': 2.0}
    >>> d.lowering_attributes({"factor": 2.0})
    {'factor': np.float32(2.0)}
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from xla_ffi_rs import _native
from xla_ffi_rs._compat import ShapedArray, Tracer
from xla_ffi_rs._validation import counted, traced_attribute
from xla_ffi_rs.binding import array_attributes, dict_attributes
from xla_ffi_rs.binding.symbolic_dims import SymbolicDims

__all__ = ["Declaration"]


_FLOATS = {"f32": np.float32, "f64": np.float64}
_INTS = {f"{k}{b}": np.dtype(f"{'i' if k == 'i' else 'u'}{b // 8}").type for k in ("i", "u") for b in (8, 16, 32, 64)}
_KEYS = ("target", "operands", "results", "attributes")


class Declaration:
    """A checked declaration dict (the format of ``_native.declarations()``)."""

    def __init__(self, declaration: Mapping[str, Any]) -> None:
        if not isinstance(declaration, Mapping):
            raise TypeError(f"binding.op: declaration: expected a dict, got {type(declaration).__name__}")
        missing = [k for k in _KEYS if k not in declaration]
        if missing:
            raise ValueError(f"binding.op: declaration: missing key(s) {', '.join(missing)}")
        self.raw = dict(declaration)
        self.target: str = str(declaration["target"])
        operands = [dict(o) for o in declaration["operands"]]
        results = [dict(r) for r in declaration["results"]]
        #: Where the token operand and result are in the call (``Token``,
        #: ``ResultToken``: dtype ``token``), or None. They are not the op's: the
        #: lowering threads JAX's ordered-effect token through them.
        self.tokens: tuple[int, int] | None = None
        token_in = [i for i, o in enumerate(operands) if _is_token(o)]
        token_out = [i for i, r in enumerate(results) if _is_token(r)]
        if token_in or token_out:
            if len(token_in) != 1 or len(token_out) != 1:
                raise ValueError(
                    f"binding.op: {declaration['target']}: a token op takes one Token operand and returns one "
                    f"ResultToken result, got {len(token_in)} and {len(token_out)}"
                )
            self.tokens = (token_in[0], token_out[0])
        #: The op's operands and results (the token ones left out).
        self.operands: list[dict[str, Any]] = [o for o in operands if not _is_token(o)]
        self.results: list[dict[str, Any]] = [r for r in results if not _is_token(r)]
        self.attributes: list[dict[str, Any]] = [dict(a) for a in declaration["attributes"]]
        self.batch: str | None = declaration.get("batch")
        self.linear: list[str] = list(declaration.get("linear") or [])
        self.transpose: str | None = declaration.get("transpose")
        #: How many operands the call must have: the optional ones (``Option<Buffer>``
        #: in Rust, a ``?`` spec in the rules) are the last ones.
        self.required = sum(1 for o in self.operands if not o.get("optional"))
        if declaration.get("shapes") is None or any(s.get("dims") is None for s in self.operands + self.results):
            raise ValueError(f"binding.op: {self.target}: the declaration has no shape rule (`shapes = ...`)")
        names = [o["name"] for o in self.operands]
        unknown = [n for n in self.linear if n not in names]
        if unknown:
            raise ValueError(f"binding.op: {self.target}: linear names {unknown}, not operands of {names}")
        self.linear_in = [i for i, n in enumerate(names) if n in self.linear]
        token = None if self.batch is None else "..." + self.batch
        self.batched_in = [bool(s["dims"]) and s["dims"][0] == token for s in self.operands]
        self.batched_out = [bool(s["dims"]) and s["dims"][0] == token for s in self.results]
        # One vmapped call is right when the batch ellipsis only ever starts a spec.
        self.one_call = token is not None and all(token not in s["dims"][1:] for s in self.operands + self.results)

    def __repr__(self) -> str:
        return f"Declaration({self.target!r})"

    # -- shapes and dtypes ----------------------------------------------------

    def present(self, operands: Sequence[Any]) -> tuple[Any, ...]:
        """The operands of a call, trailing optional ones passed as None left out;
        TypeError for None in place of a required operand, or for an optional
        operand left out (None) before one that is given."""
        n = len(operands)
        while n > self.required and operands[n - 1] is None:
            n -= 1
        for i, x in enumerate(operands[:n]):
            if x is None:
                name = self.operands[i]["name"] if i < len(self.operands) else "?"
                why = (
                    "it is not optional"
                    if i < self.required
                    else f"operand {n - 1} ({self.operands[n - 1]['name']}) is given, and optional operands are "
                    "left out from the end only"
                )
                raise TypeError(f"{self.target}: operand {i} ({name}) is None, but {why}")
        return tuple(operands[:n])

    def infer(self, *avals: ShapedArray) -> tuple[list[ShapedArray], int]:
        """Result avals and batch rank, or the handler's TypeError/ValueError."""
        if not self.required <= len(avals) <= len(self.operands):
            names = ", ".join(o["name"] + ("?" if o.get("optional") else "") for o in self.operands)
            count = (
                counted(len(self.operands), "operand")
                if self.required == len(self.operands)
                else f"{self.required} to {len(self.operands)} operands"
            )
            raise TypeError(f"{self.target}: expected {count} ({names}), got {len(avals)}")
        # jax.export's symbolic dimensions stand in the checker as integers of their own
        # (binding.symbolic_dims): the rule copies dimensions, it computes none.
        dims = SymbolicDims([a.shape for a in avals], self.raw.get("shapes"))
        shapes = list(dims.shapes)
        # The native checker names every dtype XLA FFI has (float8, int4, ...) and
        # refuses one an operand does not take, or one XLA FFI has not, in its words.
        dtypes = [np.dtype(a.dtype).name for a in avals]
        if self.tokens is not None:
            shapes.insert(self.tokens[0], ())
            dtypes.insert(self.tokens[0], "token")
        try:
            results, batch = _native.infer(self.raw, shapes, dtypes)
        except (TypeError, ValueError) as e:
            words = dims.message(str(e))
            if words == str(e):
                raise
            raise type(e)(words) from None
        if self.tokens is not None:
            del results[self.tokens[1]]
        return [ShapedArray(dims.restore(s), np.dtype(_dtype(d))) for s, d in results], int(batch)

    # -- attributes -----------------------------------------------------------

    def params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` checked against the declared attributes, as hashable Python
        values (float, int, bool, str, tuple, a dictionary frozen); TypeError/ValueError naming the
        target and the attribute otherwise. An optional attribute may be None."""
        declared = {a["name"]: a for a in self.attributes}
        for name in params:
            if name not in declared:
                close = difflib.get_close_matches(name, list(declared), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                takes = ", ".join(declared) or "no attributes"
                raise TypeError(f"{self.target}: unknown attribute {name!r}{hint}; this op takes: {takes}")
        out: dict[str, Any] = {}
        for name, a in declared.items():
            value = params.get(name)
            if value is None:
                if not a.get("optional"):
                    raise TypeError(f"{self.target}: attribute {name!r} ({a['type']}) is missing")
                out[name] = None
                continue
            if a.get("enum"):
                out[name] = _enum(self.target, name, a["enum"], value)
            else:
                out[name] = _convert(self.target, name, a["type"], value)
        return out

    def lowering_attributes(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """FFI attributes of the custom call: numpy scalars/arrays of the declared
        types; an optional attribute that is None is left out."""
        types = {a["name"]: a["type"] for a in self.attributes}
        return {k: _lowered(types[k], v) for k, v in params.items() if v is not None and k in types}


def _is_token(spec: Mapping[str, Any]) -> bool:
    return list(spec.get("dtypes") or ()) == ["token"]


def _dtype(name: str) -> Any:
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return name


def _what(value: Any) -> str:
    return type(value).__name__


def _convert(target: str, name: str, kind: str, value: Any, where: str | None = None) -> Any:
    where = where or f"{target}: attribute {name!r}"
    if isinstance(value, Tracer):
        raise traced_attribute(f"{where} ({kind})", _what(value))
    if kind == "dict":
        return dict_attributes.checked(target, name, value)
    is_array = kind.startswith("array<") and kind.endswith(">")
    if not is_array and isinstance(value, (np.ndarray, jax.Array)) and value.ndim == 0:
        # A concrete 0-d array is its one value, as an element of a sequence is (a
        # layer's attribute can arrive as one); bfloat16 and the other ml_dtypes as floats.
        value = np.asarray(value)[()]
        if not isinstance(value, (np.bool_, np.number)) and jnp.issubdtype(value.dtype, jnp.floating):
            value = float(value)
    if is_array:
        inner = kind[6:-1]
        if isinstance(value, (list, tuple)):
            fast = array_attributes.passed(inner, value)
            return fast if fast is not None else _convert_sequence(target, name, inner, value)
        try:
            items = np.asarray(value)
        except (TypeError, ValueError):
            raise TypeError(f"{where}: expected a sequence of {inner}, got {_what(value)}") from None
        if items.ndim != 1 or items.dtype.kind not in "biuf" or (items.dtype.kind == "b" and inner != "bool"):
            raise TypeError(f"{where}: expected a 1-D sequence of {inner}, got {_what(value)} {items.dtype.name}")
        fast = array_attributes.passed(inner, items)
        if fast is not None:
            return fast
        return tuple(_convert(target, name, inner, v.item(), where=f"{where} element {i}") for i, v in enumerate(items))
    is_bool = isinstance(value, (bool, np.bool_))
    if kind == "bool":
        if not is_bool:
            raise TypeError(f"{where}: expected a bool, got {_what(value)}")
        return bool(value)
    if kind == "str":
        if not isinstance(value, str):
            raise TypeError(f"{where}: expected a str, got {_what(value)}")
        check_utf8(where, value)
        return value
    if kind in _FLOATS:
        if is_bool or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{where}: expected a float ({kind}), got {_what(value)}")
        try:
            out = float(value)
        except OverflowError:
            raise ValueError(f"{where}: expected a float ({kind}), got an integer beyond the float64 range") from None
        if kind == "f32" and math.isfinite(out) and abs(out) > float(np.finfo(np.float32).max):
            raise ValueError(f"{where}: expected a float in the f32 range, got {out}")
        if kind == "f32" and out != 0.0 and float(np.float32(out)) == 0.0:
            # As the Rust decoder: a value float32 rounds to 0 keeps no digit.
            raise ValueError(f"{where}: expected a float in the f32 range, got {out} (float32 rounds it to 0)")
        held = float(np.float32(out)) if kind == "f32" else out
        if isinstance(value, (int, np.integer)) and int(held) != int(value):
            # As the Rust decoder: an integer is taken only where the float type holds it exactly.
            width = "float32" if kind == "f32" else "float64"
            raise ValueError(f"{where}: expected a float ({kind}), got integer {int(value)}, not exactly a {width}")
        return out
    if kind in _INTS:
        if is_bool or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{where}: expected an integer ({kind}), got {_what(value)}")
        info = np.iinfo(_INTS[kind])
        if not info.min <= int(value) <= info.max:
            raise ValueError(f"{where}: expected an integer in [{info.min}, {info.max}] ({kind}), got {int(value)}")
        return int(value)
    raise TypeError(f"{where}: attribute type {kind!r} is not supported by binding.op")


def _convert_sequence(target: str, name: str, inner: str, value: list[Any] | tuple[Any, ...]) -> tuple[Any, ...]:
    """A list or tuple for an ``array<inner>`` attribute, each element checked as a
    scalar attribute of type ``inner`` is (an integer a float type cannot hold
    exactly refused, not rounded): ``np.asarray`` would first make one dtype of
    them all, rounding ``[2**53 + 1, 0.5]`` to float64 before any check."""
    where = f"{target}: attribute {name!r}"
    out = []
    for i, v in enumerate(value):
        if not isinstance(v, (Tracer, str, bytes, int, float, complex, np.generic)) and hasattr(v, "__array__"):
            v = np.asarray(v)
            if v.ndim == 0:
                v = v[()]
        if isinstance(v, (list, tuple, np.ndarray)):
            raise TypeError(f"{where}: expected a 1-D sequence of {inner}, got a nested {_what(v)} at element {i}")
        if inner != "bool" and isinstance(v, (bool, np.bool_)):
            # NumPy reads a bool among numbers as 0 or 1; the handler would not.
            raise TypeError(f"{where}: expected a 1-D sequence of {inner}, got a bool at element {i}")
        out.append(_convert(target, name, inner, v, where=f"{where} element {i}"))
    return tuple(out)


def check_utf8(where: str, value: str) -> None:
    """ValueError naming ``where`` for a str UTF-8 cannot encode (a lone surrogate,
    from ``os.fsdecode`` of a non-UTF-8 file name, say): an MLIR string attribute is
    UTF-8, and JAX's conversion would refuse it in words that name a str as expected."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"{where}: expected a str UTF-8 can encode, got one with the lone surrogate "
            f"{value[e.start]!a} at index {e.start}"
        ) from None


def _enum(target: str, name: str, enum: Mapping[str, Any], value: Any) -> int:
    """An enum attribute's value (a variant's integer or name) as the variant's
    integer; TypeError for another type, ValueError for a value no variant has."""
    where = f"{target}: attribute {name!r}"
    if isinstance(value, Tracer):
        raise traced_attribute(f"{where} (enum {enum['name']})", _what(value))
    variants = [(str(n), int(v)) for n, v in enum["values"]]
    listed = ", ".join(f"{n} = {v}" for n, v in variants)
    if isinstance(value, str):
        found = [v for n, v in variants if n == value]
        got = repr(value)
    elif isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        found = [v for _, v in variants if v == int(value)]
        got = str(int(value))
    else:
        raise TypeError(
            f"{where}: expected enum {enum['name']}, one of {listed} (the integer or the name as a string), "
            f"got {_what(value)}"
        )
    if not found:
        raise ValueError(
            f"{where}: expected enum {enum['name']}, one of {listed} (the integer or the name as a string), got {got}"
        )
    return found[0]


def _lowered(kind: str, value: Any) -> Any:
    if kind == "dict":
        return dict_attributes.lowered(value)
    if kind.startswith("array<"):
        inner = kind[6:-1]
        return np.asarray(value, dtype=_scalar_type(inner))
    if kind == "i64" and isinstance(value, int) and value > np.iinfo(np.int64).max:
        return np.uint64(value)  # an enum discriminant beyond int64 (`#[repr(u64)]`); see op_class._wide_u64
    return _scalar_type(kind)(value) if kind not in ("str",) else value


def _scalar_type(kind: str) -> Any:
    if kind == "bool":
        return np.bool_
    return _FLOATS.get(kind) or _INTS[kind]
