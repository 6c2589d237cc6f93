//! Op declarations as Python dictionaries ([`declarations`]).

use pyo3::types::{PyDict, PyDictMethods, PyList, PyListMethods};
use pyo3::{Bound, PyResult, Python};

use crate::decl::{known_dtypes, Declaration, DtypeRule, ShapeRule};
use crate::{HandlerDescriptor, Stage};

/// `{target: declaration}` for the targets of `handlers`, each a dictionary:
///
/// ```python
/// {"target": "my.op",
///  "operands": [{"name": "x", "optional": False, "dtypes": ["float16", ...], "dims": ["...b", "n"] | None,
///                "dtype": "X" | None}],
///  "results": [...same keys...],
///  "attributes": [{"name": "eps", "type": "f64", "optional": False, "enum": None}],
///  "shapes": str | None, "dtypes": str | None, "batch": "b" | None,
///  "linear": ["x"], "transpose": "my.op_transpose" | None}
/// ```
///
/// An enum attribute (`#[derive(AttrEnum)]`) has type `i64` and its variants in
/// `"enum"`: `{"name": "Mode", "values": [("Sum", 0), ("Max", 1)]}`.
///
/// The stages of one target are merged: operands, results and rules come from the
/// execute stage, attributes from every stage (an instantiate stage's first).
/// Raises `ValueError` if a rule does not parse (the macro refuses that at compile
/// time, so only a hand-built declaration can).
pub fn declarations<'py>(py: Python<'py>, handlers: &[&HandlerDescriptor]) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let mut seen: Vec<&str> = Vec::new();
    for h in handlers {
        if seen.contains(&h.target) {
            continue;
        }
        seen.push(h.target);
        let stages: Vec<&HandlerDescriptor> = handlers.iter().copied().filter(|d| d.target == h.target).collect();
        let exec = stages.iter().find(|d| d.stage == Stage::Execute).unwrap_or(&stages[0]);
        let d = declaration(py, exec.declaration)?;
        let attrs = PyList::empty(py);
        let mut names: Vec<&str> = Vec::new();
        for s in &stages {
            for (name, ty, optional) in s.declaration.attributes() {
                if names.contains(&name) {
                    continue;
                }
                names.push(name);
                let a = PyDict::new(py);
                a.set_item("name", name)?;
                a.set_item("type", ty)?;
                a.set_item("optional", optional)?;
                match s.declaration.attribute_enum(name) {
                    Some(e) => {
                        let values: Vec<(&str, i128)> = e.variants.to_vec();
                        let d = PyDict::new(py);
                        d.set_item("name", e.name)?;
                        d.set_item("values", values)?;
                        a.set_item("enum", d)?;
                    }
                    None => a.set_item("enum", py.None())?,
                }
                attrs.append(a)?;
            }
        }
        d.set_item("attributes", attrs)?;
        out.set_item(h.target, d)?;
    }
    Ok(out)
}

fn value_error(e: String) -> pyo3::PyErr {
    pyo3::exceptions::PyValueError::new_err(e)
}

/// One declaration's dictionary (attributes of this stage only).
fn declaration<'py>(py: Python<'py>, decl: &Declaration) -> PyResult<Bound<'py, PyDict>> {
    let shape = decl.shapes.map(ShapeRule::parse).transpose().map_err(value_error)?;
    let dtype = decl.dtypes.map(DtypeRule::parse).transpose().map_err(value_error)?;
    let d = PyDict::new(py);
    d.set_item("target", decl.target)?;
    for (key, result) in [("operands", false), ("results", true)] {
        let list = PyList::empty(py);
        let bufs: Vec<_> = if result { decl.results().collect() } else { decl.operands().collect() };
        for (i, (name, accepts)) in bufs.into_iter().enumerate() {
            let b = PyDict::new(py);
            b.set_item("name", name)?;
            b.set_item("optional", decl.is_optional(result, name))?;
            let dtypes: Vec<&str> = known_dtypes().filter(|t| accepts(*t)).map(|t| t.name()).collect();
            b.set_item("dtypes", dtypes)?;
            let dims = shape.as_ref().and_then(|s| {
                let spec = if result { s.results.get(i) } else { s.operands.get(i) }?;
                Some(spec.iter().map(|t| s.token_text(*t)).collect::<Vec<_>>())
            });
            b.set_item("dims", dims)?;
            let expr = dtype.as_ref().and_then(|r| {
                let e = if result { r.results.get(i) } else { r.operands.get(i) }?;
                Some(r.expr_text(e))
            });
            b.set_item("dtype", expr)?;
            list.append(b)?;
        }
        d.set_item(key, list)?;
    }
    let attrs = PyList::empty(py);
    d.set_item("attributes", attrs)?;
    d.set_item("shapes", decl.shapes)?;
    d.set_item("dtypes", decl.dtypes)?;
    d.set_item("batch", shape.as_ref().and_then(|s| s.batch.map(|n| s.names[n].clone())))?;
    d.set_item("linear", decl.linear.to_vec())?;
    d.set_item("transpose", decl.transpose)?;
    Ok(d)
}
