"""The ops' declarations as Python sees them (``xla_ffi_rs.declarations()``), and
``binding.infer`` (the native checker): result shapes and dtypes from the declared rules, with the
messages of the handlers' own checks (ValueError for shapes, TypeError for dtypes)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs
from helpers import KEPLER, RMS_FWD
from xla_ffi_rs import binding

FLOATS = ["float16", "bfloat16", "float32", "float64"]


def decl(target: str) -> dict[str, Any]:
    d: dict[str, Any] = xla_ffi_rs.declarations()[target]
    return d


def test_rms_norm_fwd_declaration_contents() -> None:
    d = decl(RMS_FWD)
    assert d["target"] == RMS_FWD
    assert [o["name"] for o in d["operands"]] == ["x", "weight"]
    assert [r["name"] for r in d["results"]] == ["y", "inv_rms"]
    x = {"name": "x", "optional": False, "dtypes": FLOATS, "dims": ["...b", "...n"], "dtype": "X"}
    assert d["operands"][0] == x
    assert d["operands"][1]["dims"] == ["...n"]
    assert d["results"][0]["dtype"] == "promote(X, W)"
    inv_rms = {"name": "inv_rms", "optional": False, "dtypes": FLOATS, "dims": ["...b"], "dtype": "acc(X, W)"}
    assert d["results"][1] == inv_rms
    assert d["attributes"] == [{"name": "eps", "type": "f64", "optional": False, "enum": None}]
    assert d["shapes"] == "...b ...n, ...n -> ...b ...n, ...b"
    assert d["dtypes"] == "X, W -> promote(X, W), acc(X, W)"
    assert d["batch"] == "b"
    assert d["linear"] == [] and d["transpose"] is None


def test_kepler_declarations_name_their_transposes() -> None:
    d = xla_ffi_rs.declarations()
    assert d[KEPLER]["operands"][1]["dtypes"] == ["float32", "float64"]
    assert d[KEPLER]["attributes"] == []
    tangent, cotangent = d["xla_ffi_rs.kepler_tangent"], d["xla_ffi_rs.kepler_cotangent"]
    assert tangent["linear"] == ["d_mean_anomaly", "d_eccentricity"]
    assert tangent["transpose"] == "xla_ffi_rs.kepler_cotangent"
    assert cotangent["linear"] == ["ct_sin_e", "ct_cos_e"]
    assert cotangent["transpose"] == "xla_ffi_rs.kepler_tangent"
    # The transpose's operands: this op's result cotangents, then its non-linear operands.
    names = [o["name"] for o in tangent["operands"] if o["name"] not in tangent["linear"]]
    assert [o["name"] for o in cotangent["operands"]][2:] == names


def test_the_stateful_example_merges_its_stages() -> None:
    d = decl("xla_ffi_rs.examples.scale")
    assert [o["name"] for o in d["operands"]] == ["x"]
    assert d["attributes"] == [{"name": "factor", "type": "f32", "optional": False, "enum": None}]
    assert d["linear"] == ["x"] and d["transpose"] == "xla_ffi_rs.examples.scale"
    assert d["dtypes"] is None and d["results"][0]["dtypes"] == ["float32"]


@pytest.mark.parametrize(
    ("x", "w"),
    [((2, 3, 4), (4,)), ((5, 4), (5, 4)), ((7,), (7,)), ((0, 3), (3,))],
)
@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("bfloat16", "float16"), ("float64", "bfloat16")])
def test_infer_rms_norm_matches_jnp(x: tuple[int, ...], w: tuple[int, ...], dtypes: tuple[str, str]) -> None:
    results, batch_rank = binding.infer(decl(RMS_FWD), [x, w], list(dtypes))
    y_dtype = jnp.result_type(jnp.dtype(dtypes[0]), jnp.dtype(dtypes[1]))
    acc = "float64" if "float64" in dtypes else "float32"
    assert results == [(x, str(y_dtype)), (x[: len(x) - len(w)], acc)]
    assert batch_rank == len(x) - len(w)


def test_infer_kepler() -> None:
    results, batch_rank = binding.infer(decl(KEPLER), [(3, 2), (3, 2)], ["float32", "float32"])
    assert results == [((3, 2), "float32"), ((3, 2), "float32")]
    assert batch_rank == 2


def test_infer_shape_errors_are_value_errors_naming_target_operand_expected_got() -> None:
    with pytest.raises(ValueError) as e:
        binding.infer(decl(RMS_FWD), [(2, 4), (5,)], ["float32", "float32"])
    assert str(e.value) == f"{RMS_FWD}: operand 1 (weight): expected shape [4] (...n of operand 0 (x)), got [5]"
    with pytest.raises(ValueError, match=r"operand 1 \(eccentricity\): expected shape \[3\] .*got \[4\]"):
        binding.infer(decl(KEPLER), [(3,), (4,)], ["float64", "float64"])
    with pytest.raises(ValueError, match=r"operand 0 \(x\): expected rank at least 2 .*got rank 1"):
        binding.infer(decl(RMS_FWD), [(4,), (3, 4)], ["float32", "float32"])
    with pytest.raises(ValueError, match=r"expected 2 operands \(x, weight\), got 1 shapes"):
        binding.infer(decl(RMS_FWD), [(4,)], ["float32"])
    with pytest.raises(ValueError, match=r"operand 0 \(x\): invalid shape \[-1\]"):
        binding.infer(decl(RMS_FWD), [(-1,), (1,)], ["float32", "float32"])


def test_infer_dtype_errors_are_type_errors() -> None:
    with pytest.raises(TypeError) as e:
        binding.infer(decl(KEPLER), [(3,), (3,)], ["float64", "float32"])
    assert str(e.value) == (
        f"{KEPLER}: operand 1 (eccentricity): expected dtype float64 (T, the dtype of operand 0 (mean_anomaly)), "
        "got float32"
    )
    with pytest.raises(TypeError, match=r"operand 0 \(mean_anomaly\): expected dtype float32 or float64, got float16"):
        binding.infer(decl(KEPLER), [(3,), (3,)], ["float16", "float16"])
    with pytest.raises(
        TypeError,
        match=r"operand 1 \(weight\): expected dtype float16, bfloat16, float32 or float64, got float31, "
        "which XLA FFI has no type for",
    ):
        binding.infer(decl(RMS_FWD), [(3,), (3,)], ["float32", "float31"])


def test_infer_says_what_the_handler_says() -> None:
    """The same check runs in the handler: a raw call with the same bad shapes fails with the same words."""
    x, w = np.ones((2, 4), np.float32), np.ones(5, np.float32)
    with pytest.raises(ValueError) as inferred:
        binding.infer(decl(RMS_FWD), [x.shape, w.shape], ["float32", "float32"])
    out = (jax.ShapeDtypeStruct((2, 4), np.float32), jax.ShapeDtypeStruct((2,), np.float32))
    with pytest.raises(jax.errors.JaxRuntimeError) as raw:
        jax.ffi.ffi_call(RMS_FWD, out)(x, w, eps=1e-6)
    assert str(inferred.value) in str(raw.value)


@pytest.mark.parametrize(
    ("declaration", "shapes", "dtypes", "error", "words"),
    [
        ("not a dict", [], [], TypeError, r"infer: the declaration must be a dict, got str"),
        ({"target": "t"}, [], [], TypeError, r"t: declaration: missing key \"operands\""),
        (
            {"target": "t", "operands": [{"name": "x"}], "results": []},
            [(1,)],
            ["float32"],
            TypeError,
            r"t: declaration: missing key \"dtypes\"",
        ),
        (
            {"target": "t", "operands": [], "results": [], "shapes": 3},
            [],
            [],
            TypeError,
            r"t: declaration: \"shapes\" must be a str or None, got int",
        ),
        (
            {"target": "t", "operands": [], "results": [], "shapes": "a -> b"},
            [],
            [],
            ValueError,
            r"t: shape rule `a -> b`: result 0 uses `b`, which no operand spec binds",
        ),
        (
            None,
            "not a list",
            ["float32", "float32"],
            TypeError,
            r"rms_norm_fwd: shapes must be a list of tuples of ints, got str",
        ),
        (None, [(2, 3), (3,)], "float32", TypeError, r"rms_norm_fwd: dtypes must be a list of dtype names, got str"),
    ],
)
def test_infer_refuses_malformed_input(declaration: Any, shapes: Any, dtypes: Any, error: type, words: str) -> None:
    """Each malformed input is refused with the words that name what is wrong (not any error of the type)."""
    with pytest.raises(error, match=words):
        binding.infer(decl(RMS_FWD) if declaration is None else declaration, shapes, dtypes)


def test_infer_takes_numpy_and_jax_dtypes() -> None:
    """A NumPy or JAX dtype (or scalar type) is read as its name (before: 'dtypes must
    be a list of dtype names, got list')."""
    want = binding.infer(decl(RMS_FWD), [(8, 4), (4,)], ["bfloat16", "float32"])
    assert binding.infer(decl(RMS_FWD), [(8, 4), (4,)], [jnp.bfloat16, np.float32]) == want
    assert binding.infer(decl(RMS_FWD), [(8, 4), (4,)], [jnp.dtype(jnp.bfloat16), np.dtype("float32")]) == want
    shapes: Any = [np.array([8, 4]), [np.int64(4)]]  # sequences of integers, as np.shape-like values are
    assert binding.infer(decl(RMS_FWD), shapes, ["bfloat16", "float32"]) == want


@pytest.mark.parametrize(
    ("shapes", "dtypes", "error", "words"),
    [
        ([(3,), (3,)], ["float32", None], TypeError, "operand 1 (eccentricity): expected a dtype (a NumPy name"),
        ([(3,), (3,)], [object(), "float32"], TypeError, "operand 0 (mean_anomaly): expected a dtype"),
        (
            [3, (3,)],
            ["float32", "float32"],
            TypeError,
            "operand 0 (mean_anomaly): expected a shape (a tuple of ints), got 3",
        ),
        (
            [(3,), (3.0,)],
            ["float32", "float32"],
            TypeError,
            "operand 1 (eccentricity): expected a shape (a tuple of ints), got (3.0,)",
        ),
        (
            [(2**64,), (2**64,)],
            ["float32", "float32"],
            ValueError,
            "operand 0 (mean_anomaly): shape (18446744073709551616,) has a dimension beyond int64",
        ),
    ],
)
def test_infer_names_the_operand_of_a_bad_shape_or_dtype(shapes: Any, dtypes: Any, error: type, words: str) -> None:
    with pytest.raises(error) as info:
        binding.infer(decl(KEPLER), shapes, dtypes)
    assert str(info.value).startswith(f"{KEPLER}: "), str(info.value)
    assert words in str(info.value), str(info.value)
