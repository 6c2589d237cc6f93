//! `_native.declarations()` and `_native.infer(...)`: the ops' declarations, and
//! result shapes/dtypes from them with the handlers' own checks (the same words).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use xla_ffi::decl::{describe_dtypes, dtype_by_name, infer as infer_rule, BufferSig, ProblemKind, Signature};
use xla_ffi::HandlerDescriptor;
use xla_ffi_rs_ops::{cpu_handlers, cuda_handlers, EXAMPLE_CPU_HANDLERS};

/// `declarations() -> dict[str, dict]`: the declaration of every production and
/// example target, keyed by target (see `xla_ffi::python::declarations`).
#[pyfunction]
pub fn declarations<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
    let all: Vec<&HandlerDescriptor> =
        cpu_handlers().into_iter().chain(cuda_handlers()).chain(EXAMPLE_CPU_HANDLERS.iter().copied()).collect();
    xla_ffi::python::declarations(py, &all)
}

fn item<'py>(d: &Bound<'py, PyDict>, key: &str, what: &str) -> PyResult<Bound<'py, PyAny>> {
    d.get_item(key)?.ok_or_else(|| PyTypeError::new_err(format!("{what}: missing key {key:?}")))
}

fn opt_str(d: &Bound<'_, PyDict>, key: &str, what: &str) -> PyResult<Option<String>> {
    match d.get_item(key)? {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => v
            .extract::<String>()
            .map(Some)
            .map_err(|_| PyTypeError::new_err(format!("{what}: {key:?} must be a str or None, got {}", type_name(&v)))),
    }
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

struct Buf {
    name: String,
    accepts: Vec<xla_ffi::DataType>,
}

fn buffers(decl: &Bound<'_, PyDict>, key: &str, target: &str) -> PyResult<Vec<Buf>> {
    let what = format!("{target}: declaration");
    let list = item(decl, key, &what)?;
    let list = list
        .cast_into::<PyList>()
        .map_err(|_| PyTypeError::new_err(format!("{what}: {key:?} must be a list of dicts")))?;
    let mut out = Vec::new();
    for (i, b) in list.iter().enumerate() {
        let b =
            b.cast_into::<PyDict>().map_err(|_| PyTypeError::new_err(format!("{what}: {key}[{i}] must be a dict")))?;
        let name: String = item(&b, "name", &what)?
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("{what}: {key}[{i}][\"name\"] must be a str")))?;
        let names: Vec<String> = item(&b, "dtypes", &what)?
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("{what}: {key}[{i}][\"dtypes\"] must be a list of str")))?;
        let accepts = names
            .iter()
            .map(|n| {
                dtype_by_name(n)
                    .ok_or_else(|| PyValueError::new_err(format!("{what}: {key}[{i}] accepts unknown dtype '{n}'")))
            })
            .collect::<PyResult<Vec<_>>>()?;
        out.push(Buf { name, accepts });
    }
    Ok(out)
}

/// `infer(declaration, shapes, dtypes) -> (list[tuple[tuple[int, ...], str]], int)`:
/// the result `(shape, dtype name)` of each result and the batch rank (the number
/// of axes the batch ellipsis binds, 0 without one), for operands of `shapes` and
/// `dtypes`. Raises `ValueError` for a shape and `TypeError` for a dtype problem,
/// with the handler's own message.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn infer<'py>(
    declaration: &Bound<'py, PyAny>,
    shapes: &Bound<'py, PyAny>,
    dtypes: &Bound<'py, PyAny>,
) -> PyResult<(Vec<(Bound<'py, PyTuple>, String)>, usize)> {
    let py = declaration.py();
    let decl = declaration.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!("infer: the declaration must be a dict, got {}", type_name(declaration)))
    })?;
    let target: String = item(decl, "target", "declaration")?
        .extract()
        .map_err(|_| PyTypeError::new_err("declaration: \"target\" must be a str"))?;
    let shapes: Vec<Vec<i64>> = shapes.extract().map_err(|_| {
        PyTypeError::new_err(format!("{target}: shapes must be a list of tuples of ints, got {}", type_name(shapes)))
    })?;
    let names: Vec<String> = dtypes.extract().map_err(|_| {
        PyTypeError::new_err(format!("{target}: dtypes must be a list of dtype names, got {}", type_name(dtypes)))
    })?;
    let operands = buffers(decl, "operands", &target)?;
    let results = buffers(decl, "results", &target)?;
    let what = format!("{target}: declaration");
    let shape_rule = opt_str(decl, "shapes", &what)?;
    let dtype_rule = opt_str(decl, "dtypes", &what)?;
    let mut types = Vec::new();
    for (i, n) in names.iter().enumerate() {
        match (dtype_by_name(n), operands.get(i)) {
            (Some(d), _) => types.push(d),
            // A name with no XLA FFI type (JAX's float6_e2m3fn, say): the operand's
            // words for a dtype it does not take, and why no operand takes it.
            (None, Some(b)) => {
                return Err(PyTypeError::new_err(format!(
                    "{target}: operand {i} ({}): expected dtype {}, got {n}, which XLA FFI has no type for",
                    b.name,
                    describe_dtypes(&b.accepts)
                )))
            }
            // An operand beyond the declared ones: the count's error, from `infer_rule`.
            (None, None) => types.push(xla_ffi::DataType::INVALID),
        }
    }
    fn sig(b: &Buf) -> BufferSig<'_> {
        BufferSig { name: &b.name, accepts: b.accepts.clone() }
    }
    let sig = Signature {
        target: &target,
        operands: operands.iter().map(sig).collect(),
        results: results.iter().map(sig).collect(),
        shapes: shape_rule.as_deref(),
        dtypes: dtype_rule.as_deref(),
    };
    match infer_rule(&sig, &shapes, &types) {
        Ok(out) => {
            let results = out
                .results
                .into_iter()
                .map(|(s, d)| Ok((PyTuple::new(py, s)?, d.name().to_string())))
                .collect::<PyResult<Vec<_>>>()?;
            Ok((results, out.batch_rank))
        }
        Err(e) if e.kind == ProblemKind::Dtype => Err(PyTypeError::new_err(e.message)),
        Err(e) => Err(PyValueError::new_err(e.message)),
    }
}
