"""Python functions as JAX operations: :func:`python_op` (``xla_ffi_rs.python_op``),
and :func:`linear_op`, :func:`multilinear_op` and :func:`nonlinear_op`, which take
the derivative functions as NumPy functions too. :mod:`xla_ffi_rs.python_ops.op_class`
describes how they run.
"""

from __future__ import annotations

from xla_ffi_rs.python_ops.axes import core_axes
from xla_ffi_rs.python_ops.linear import linear_op, multilinear_op, nonlinear_op
from xla_ffi_rs.python_ops.op_class import TARGET, PythonOp, python_op, registered_functions

__all__ = [
    "TARGET",
    "PythonOp",
    "core_axes",
    "linear_op",
    "multilinear_op",
    "nonlinear_op",
    "python_op",
    "registered_functions",
]
