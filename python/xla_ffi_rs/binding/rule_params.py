"""A hand-written rule of a declared op must take the call's attributes.

``Op.def_jvp`` and ``Op.def_transpose`` call the rule with the call's attributes as
keyword arguments (``rule(primals, tangents, lengthscale=0.8)``). A rule written
like the template's softplus rule, whose op has none, failed only when first
differentiated, with Python's ``_() got an unexpected keyword argument
'lengthscale'``, naming neither the op nor what to write.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["check_rule_takes_attributes"]


def check_rule_takes_attributes(target: str, kind: str, rule: Callable[..., Any], attributes: Sequence[str]) -> None:
    """TypeError naming the target, the rule and the attributes when ``rule`` cannot
    take each of ``attributes`` as a keyword argument (no ``**params``)."""
    if not attributes:
        return
    try:
        parameters = inspect.signature(rule).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: nothing to read
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    missing = [a for a in attributes if a not in named]
    if missing:
        name = getattr(rule, "__qualname__", None) or repr(rule)
        raise TypeError(
            f"{target}: the {kind} rule {name} is called with the call's attributes as keyword arguments "
            f"({', '.join(attributes)}), but it does not take {', '.join(missing)}: add **params to its "
            "parameters and pass them on to the op"
        )
