"""An independent Python reading of the declaration notation (shapes and dtypes),
for the tests: a reference that the native checker (``binding.infer``) is compared with.

``infer(declaration, shapes, dtypes) -> (results, batch_rank)`` as ``binding.infer``:
results are ``(shape, dtype name)`` pairs; TypeError for a dtype, ValueError for a
shape. Its messages have the same key words (target, role, index and name,
"expected", "got"), not necessarily the same text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

FLOAT_ORDER = ("float16", "bfloat16", "float32", "float64")


def promote(*names: str) -> str:
    """JAX's float promotion: float16 + bfloat16 -> float32, else the wider."""
    if "float64" in names:
        return "float64"
    if "float32" in names or ("float16" in names and "bfloat16" in names):
        return "float32"
    return names[0]


def acc(*names: str) -> str:
    return "float64" if "float64" in names else "float32"


def _split_args(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _eval(expr: str, env: dict[str, str]) -> str:
    expr = expr.strip()
    for fn, rule in (("promote(", promote), ("acc(", acc)):
        if expr.startswith(fn) and expr.endswith(")"):
            return rule(*(_eval(a, env) for a in _split_args(expr[len(fn) : -1])))
    return env.get(expr, expr)


def _who(role: str, i: int, spec: dict[str, Any]) -> str:
    return f"{role} {i} ({spec['name']})"


def infer(
    decl: dict[str, Any], shapes: Sequence[tuple[int, ...]], dtypes: Sequence[str]
) -> tuple[list[tuple[tuple[int, ...], str]], int]:
    target, operands, results = decl["target"], decl["operands"], decl["results"]
    if len(shapes) != len(operands) or len(dtypes) != len(operands):
        raise ValueError(f"{target}: expected {len(operands)} operands, got {len(shapes)}")
    env_t: dict[str, str] = {}
    for i, (spec, dt) in enumerate(zip(operands, dtypes, strict=True)):
        if dt not in spec["dtypes"]:
            raise TypeError(f"{target}: {_who('operand', i, spec)}: expected {', '.join(spec['dtypes'])}, got {dt}")
        var = spec.get("dtype")
        if var is not None and var not in FLOAT_ORDER and var not in ("int32", "int64"):
            if var in env_t and env_t[var] != dt:
                raise TypeError(f"{target}: {_who('operand', i, spec)}: expected dtype {env_t[var]} ({var}), got {dt}")
            env_t.setdefault(var, dt)
    env: dict[str, tuple[int, ...]] = {}
    bound_by: dict[str, str] = {}
    done = [spec["dims"] is None for spec in operands]
    changed = True
    while changed:
        changed = False
        for i, (spec, shape) in enumerate(zip(operands, shapes, strict=True)):
            if done[i]:
                continue
            toks = spec["dims"]
            unbound = [t for t in toks if t.startswith("...") and t[3:] not in env]
            if len(unbound) > 1:
                continue
            fixed = sum(len(env[t[3:]]) if t.startswith("...") else 1 for t in toks if t not in unbound)
            free = len(shape) - fixed
            if free < 0 or (not unbound and free != 0):
                raise ValueError(
                    f"{target}: {_who('operand', i, spec)}: expected rank {fixed}+, got shape {list(shape)}"
                )
            pos = 0
            for t in toks:
                if t.startswith("..."):
                    n = free if t in unbound else len(env[t[3:]])
                    got, key = tuple(shape[pos : pos + n]), t[3:]
                elif t.isdigit():
                    n, got, key = 1, (shape[pos],), None
                    if got != (int(t),):
                        raise ValueError(f"{target}: {_who('operand', i, spec)}: expected [{t}], got {list(shape)}")
                else:
                    n, got, key = 1, (shape[pos],), t
                if key is not None:
                    if key in env and env[key] != got:
                        raise ValueError(
                            f"{target}: {_who('operand', i, spec)}: expected shape {list(env[key])} "
                            f"({t} of {bound_by[key]}), got {list(got)}"
                        )
                    if key not in env:
                        env[key], bound_by[key] = got, _who("operand", i, spec)
                pos += n
            done[i] = changed = True
    if not all(done):
        raise ValueError(f"{target}: shapes are ambiguous")
    outs = []
    for spec in results:
        out: tuple[int, ...] = ()
        for t in spec["dims"]:
            out += env[t[3:]] if t.startswith("...") else (int(t),) if t.isdigit() else env[t]
        dtype = _eval(spec["dtype"], env_t) if spec.get("dtype") else spec["dtypes"][0]
        outs.append((out, dtype))
    batch = decl.get("batch")
    return outs, len(env.get(batch, ())) if batch else 0
