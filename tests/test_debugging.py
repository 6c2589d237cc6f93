"""What a user debugging or profiling a program with these ops sees: the source
location XLA records for each op (the HLO metadata a profiler shows, the MLIR
``loc``) is the user's line that called it, as JAX gives it for a ``jnp`` op, not a
line inside ``xla_ffi_rs``; the op's name and the user's ``named_scope`` in the
metadata; and a traceback that JAX filters ends at the user's line, the package's
own frames hidden as JAX hides its own (``jax_traceback_filtering="off"`` shows them).
"""

from __future__ import annotations

import inspect
import os
import re
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr
from xla_ffi_rs import binding, examples

PACKAGE_DIR = os.path.dirname(os.path.abspath(xr.__file__))
HERE = os.path.abspath(__file__)

_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)$")
_FILE_LOC = re.compile(r'^"([^"]*)":(\d+):\d+')


def _loc_table(text: str) -> dict[str, str]:
    return {m[1]: m[2] for line in text.splitlines() if (m := _LOC_DEF.match(line))}


def _leaf_frame(loc: str, table: dict[str, str]) -> tuple[str, int] | None:
    """The innermost frame (file, line) of an MLIR location: what XLA records as the
    top of the op's stack (``source_file``/``source_line`` of its metadata)."""
    for _ in range(100):
        if m := _FILE_LOC.match(loc):
            return m[1], int(m[2])
        if m := re.match(r"^callsite\((#loc\d*) at (#loc\d*)\)$", loc):
            loc = table[m[1]]  # the callee, inside the caller
        elif m := re.match(r'^"[^"]*"\((#loc\d*)\)$', loc):
            loc = table[m[1]]  # a name (op or function) around a location
        elif re.match(r"^#loc\d*$", loc):
            loc = table[loc]
        else:
            return None
    return None


def _custom_call_frames(text: str) -> dict[str, list[tuple[str, int] | None]]:
    """The innermost frame of the location of each custom call, by target."""
    table = _loc_table(text)
    frames: dict[str, list[tuple[str, int] | None]] = {}
    for line in text.splitlines():
        m = re.search(r"stablehlo\.custom_call @([\w.]+)\(.*loc\((#loc\d*)\)\s*$", line)
        if m:
            frames.setdefault(m[1], []).append(_leaf_frame(table[m[2]], table))
    return frames


@contextmanager
def _flag(mode: str) -> Iterator[None]:
    """``jax_traceback_filtering`` set to ``mode`` for a block."""
    old = jax.config.jax_traceback_filtering
    jax.config.update("jax_traceback_filtering", mode)
    try:
        yield
    finally:
        jax.config.update("jax_traceback_filtering", old)


def _line_of(fn: Callable[..., object], marker: str) -> int:
    """The line of ``fn``'s source ending with ``marker`` (a comment on the call)."""
    lines, start = inspect.getsourcelines(fn)
    (offset,) = [i for i, text in enumerate(lines) if text.rstrip().endswith(marker)]
    return start + offset


def _scale_op() -> binding.Op:
    examples.register()
    return binding.op(xr.declarations()["xla_ffi_rs.examples.scale"])


def _program(x: jax.Array, w: jax.Array) -> jax.Array:
    scale_op = _scale_op()
    sine = xr.python_op(np.sin, abstract_eval=lambda x: x, name="user_sine")
    with jax.named_scope("user_scope"):
        a, _ = xr.kepler(x, 0.1)  # call: kepler
        b = xr.rms_norm(x, w)  # call: rms_norm
        c = xr.rms_norm_inplace(x, w)  # call: rms_norm_inplace
        (d,) = scale_op(x, factor=2.0)  # call: scale
        e = sine(x)  # call: python_op
        f = jnp.sin(x)  # call: jnp
    return a + b + c + d + e + f


#: Each target and the calls that lower to it (rms_norm_inplace is rms_norm's target).
CALLS = {
    "xla_ffi_rs.kepler": ["call: kepler"],
    "xla_ffi_rs.rms_norm_fwd": ["call: rms_norm", "call: rms_norm_inplace"],
    "xla_ffi_rs.examples.scale": ["call: scale"],
    "xla_ffi_rs.python_call": ["call: python_op"],
}


def _lowered_text() -> str:
    x, w = jnp.linspace(0.1, 1.0, 8, dtype=jnp.float32).reshape(2, 4), jnp.ones(4, jnp.float32)
    return jax.jit(_program).lower(x, w).as_text(debug_info=True)


def test_the_hlo_location_of_each_op_is_the_users_line() -> None:
    text = _lowered_text()
    frames = _custom_call_frames(text)
    for target, markers in CALLS.items():
        expected = sorted((HERE, _line_of(_program, m)) for m in markers)
        assert sorted(frames.get(target, []), key=str) == expected, (target, frames.get(target))
    # As for a jnp op: no frame of the package in any location.
    assert PACKAGE_DIR + os.sep not in text


def test_the_op_names_and_named_scope_in_the_hlo_metadata() -> None:
    text = _lowered_text()
    for name in ("kepler", "rms_norm_fwd", "scale", "user_sine", "sin"):
        assert f'"jit(_program)/user_scope/{name}"' in text, name


def _raising_program(x: jax.Array) -> jax.Array:
    return _scale_op()(x, factor=2.0)[0]  # call: bad dtype


@pytest.mark.parametrize("mode", ["remove_frames", "off"])
def test_a_filtered_traceback_ends_at_the_users_line(mode: str) -> None:
    x = jnp.ones(3, jnp.int32)
    message = r"xla_ffi_rs\.examples\.scale: operand 0 \(x\).*float32.*int32"
    with _flag(mode), pytest.raises(TypeError, match=message) as info:
        jax.jit(_raising_program)(x)
    frames = traceback.extract_tb(info.value.__traceback__)
    files = [f.filename for f in frames]
    assert (HERE, _line_of(_raising_program, "call: bad dtype")) in [(f.filename, f.lineno) for f in frames]
    ours = [f for f in files if f.startswith(PACKAGE_DIR + os.sep)]
    if mode == "off":
        assert ours  # the package's frames are there, unfiltered
    else:
        assert ours == [], ours


def _failing_fft(x: np.ndarray, *, batch_axes: object) -> np.ndarray:
    raise ValueError("the user's fft failed")  # raise: fft


@pytest.mark.parametrize("mode", ["remove_frames", "off"])
def test_a_python_op_error_shows_the_users_frames_not_the_packages(mode: str) -> None:
    # linear_op runs the function inside a wrapper of the package (roles.py): the
    # frames in the message are the user's, the wrapper's only with filtering off.
    op = xr.linear_op(
        _failing_fft,
        _failing_fft,
        abstract_eval=lambda x, **_: x,
        abstract_eval_T=lambda x, **_: x,
        batch_axes=True,
    )
    with (
        _flag(mode),
        pytest.raises(jax.errors.JaxRuntimeError, match=r"op 'linear_op\[_failing_fft\]' raised ValueError") as info,
    ):
        jax.block_until_ready(jax.jit(op)(jnp.ones((3, 4), jnp.complex64)))
    message = str(info.value)
    assert f'File "{HERE}", line {_line_of(_failing_fft, "raise: fft")}, in _failing_fft' in message
    assert (PACKAGE_DIR + os.sep in message) == (mode == "off"), message


def _bad_shape_program(x: jax.Array) -> jax.Array:
    return xr.rms_norm(x, jnp.ones(3))  # call: bad shape


def test_a_filtered_traceback_of_an_ops_function_holds_the_users_frames_only() -> None:
    # rms_norm and kepler are plain functions (their jnp promotion rules set by a
    # decorator of the package): no frame of a wrapper between the user's and the error.
    with _flag("remove_frames"), pytest.raises(ValueError, match=r"rms_norm_fwd: operand 1 \(weight\)") as info:
        jax.jit(_bad_shape_program)(jnp.ones((2, 4)))
    frames = traceback.extract_tb(info.value.__traceback__)
    assert {f.filename for f in frames} == {HERE}, [(f.filename, f.name) for f in frames]
    assert frames[-1].lineno == _line_of(_bad_shape_program, "call: bad shape")
