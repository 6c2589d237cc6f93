//! `xla_ffi_rs._native`: hands the Rust handlers to JAX.
//!
//! Python calls `targets(platform)` and registers each entry with
//! `jax.ffi.register_ffi_target`. The example targets are separate:
//! `example_targets(platform)`, and `state_types()` gives their state types, to
//! register first with `jax.ffi.register_ffi_type`; `async_demo_targets(platform)`
//! gives the async handler demos (tests and benchmarks).
//! The CPU targets include `xla_ffi_rs.python_call`, which runs Python functions
//! registered with `register(fn, name)` (see `python_call`).
//! `declarations()` gives every op's declaration and `infer(declaration, shapes,
//! dtypes)` its result shapes and dtypes, checked as the handlers check them.
//!
//! `unsafe` code lives in [`numpy_engine`] alone (Python's C API, buffer exports,
//! the streaming copy), each block with a `// SAFETY:` comment; the rest of the
//! crate is safe Rust over `xla-ffi`'s checked views.
#![deny(unsafe_code)]

mod declaration;
#[allow(unsafe_code)]
mod numpy_engine;
mod python_call;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use xla_ffi::python::type_registration;
use xla_ffi_rs_ops::{scale_state::ScaleState, EXAMPLE_CPU_HANDLERS, PROMOTION};

/// `targets(platform) -> dict[str, capsule | dict[str, capsule]]` for "cpu" or "cuda".
#[pyfunction]
fn targets<'py>(py: Python<'py>, platform: &str) -> PyResult<Bound<'py, PyDict>> {
    match platform {
        "cpu" => {
            let d = xla_ffi::python::targets(py, &xla_ffi_rs_ops::cpu_handlers(), "cpu")?;
            d.set_item(
                python_call::TARGET,
                xla_ffi::python::bundle(
                    py,
                    python_call::XLA_FFI_RS_PYTHON_CALL_INSTANTIATE.handler,
                    python_call::XLA_FFI_RS_PYTHON_CALL.handler,
                )?,
            )?;
            Ok(d)
        }
        "cuda" => xla_ffi::python::targets(py, &xla_ffi_rs_ops::cuda_handlers(), "cuda"),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "unknown platform {other:?}; expected \"cpu\" or \"cuda\""
        ))),
    }
}

/// `example_targets(platform) -> dict[str, capsule | dict[str, capsule]]`: the
/// example targets (not registered at import), for "cpu" or "cuda".
#[pyfunction]
fn example_targets<'py>(py: Python<'py>, platform: &str) -> PyResult<Bound<'py, PyDict>> {
    match platform {
        "cpu" => xla_ffi::python::targets(py, EXAMPLE_CPU_HANDLERS, "cpu"),
        "cuda" => Ok(PyDict::new(py)),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "unknown platform {other:?}; expected \"cpu\" or \"cuda\""
        ))),
    }
}

/// `async_demo_targets(platform) -> dict[str, capsule]`: the async demo targets
/// (`xla_ffi_rs.demo.*`, for tests and benchmarks; not registered at import), for
/// "cpu" or "cuda" (none).
#[pyfunction]
fn async_demo_targets<'py>(py: Python<'py>, platform: &str) -> PyResult<Bound<'py, PyDict>> {
    match platform {
        "cpu" => xla_ffi::python::targets(py, xla_ffi_rs_ops::async_demo::ASYNC_DEMO_CPU_HANDLERS, "cpu"),
        "cuda" => Ok(PyDict::new(py)),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "unknown platform {other:?}; expected \"cpu\" or \"cuda\""
        ))),
    }
}

/// `state_types() -> dict[str, dict]`: the `register_ffi_type` arguments of each state type.
#[pyfunction]
fn state_types<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("xla_ffi_rs.PythonCallSite", type_registration::<python_call::CallSite>(py)?)?;
    d.set_item("xla_ffi_rs.examples.ScaleState", type_registration::<ScaleState>(py)?)?;
    Ok(d)
}

/// `promotion_table() -> list[tuple[str, str, str, str]]`: `(x, w, result_type,
/// accumulator)` dtype names for every pair of float dtypes, the kernels' rule.
#[pyfunction]
fn promotion_table() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    PROMOTION.iter().map(|&(x, w, y, acc)| (x.name(), w.name(), y.name(), acc.name())).collect()
}

/// `bwd_workspace_rows(rows) -> int`: the row count of the CUDA `rms_norm_bwd`
/// workspace result for `rows` rows (the product of `x`'s leading axes).
#[pyfunction]
fn bwd_workspace_rows(rows: usize) -> usize {
    xla_ffi_rs_ops::rms_norm::bwd_workspace_rows(rows)
}

/// `kernel_floats() -> list[str]`: the float dtypes the float ops' buffers accept
/// (`AnyFloat`'s list, `xla_ffi::DataType::FLOATS`), in the notation's order.
#[pyfunction]
fn kernel_floats() -> Vec<&'static str> {
    xla_ffi::DataType::FLOATS.iter().map(|d| d.name()).collect()
}

/// `eps_problem(eps, x_dtype, weight_dtype) -> str | None`: what the rms_norm
/// handlers would say is wrong with attribute `eps` for `x` and `weight` of those
/// dtypes (the words after "attribute `eps`: "), or `None` if they accept it. The
/// handlers' own rule: `check_eps(eps, accumulator(x, weight))`.
#[pyfunction]
fn eps_problem(eps: f64, x_dtype: &str, weight_dtype: &str) -> PyResult<Option<String>> {
    let dtype = |name: &str| {
        xla_ffi::decl::dtype_by_name(name)
            .ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("unknown dtype {name:?}")))
    };
    let acc = xla_ffi::decl::accumulator(dtype(x_dtype)?, dtype(weight_dtype)?);
    Ok(xla_ffi_rs_ops::rms_norm::eps_problem(eps, acc))
}

/// What the package registered with XLA in this process (a platform and a group of
/// targets, as `targets_registered(what, done)` names them). The Python package's own record
/// lives in its modules, which a re-import (modules taken out of `sys.modules` and
/// imported again) makes anew, while XLA keeps the registrations for the process
/// and refuses some a second time (a stateful target: "Duplicate FFI handler
/// registration ... with different metadata"); this record lives as long as the
/// loaded library.
static REGISTERED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// `targets_registered(what, done=False) -> bool`: whether `what` was registered in this
/// process; with `done`, records that it is now.
#[pyfunction]
#[pyo3(signature = (what, done = false))]
fn targets_registered(what: String, done: bool) -> bool {
    let mut seen = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
    let was = seen.contains(&what);
    if done && !was {
        seen.push(what);
    }
    was
}

/// The lowest XLA FFI API version the handlers report, `(major, minor)`.
#[pyfunction]
fn min_api_version() -> (i32, i32) {
    xla_ffi::MIN_API_VERSION
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(targets, m)?)?;
    m.add_function(wrap_pyfunction!(example_targets, m)?)?;
    m.add_function(wrap_pyfunction!(async_demo_targets, m)?)?;
    m.add_function(wrap_pyfunction!(state_types, m)?)?;
    m.add_function(wrap_pyfunction!(min_api_version, m)?)?;
    m.add_function(wrap_pyfunction!(targets_registered, m)?)?;
    m.add_function(wrap_pyfunction!(promotion_table, m)?)?;
    m.add_function(wrap_pyfunction!(bwd_workspace_rows, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_floats, m)?)?;
    m.add_function(wrap_pyfunction!(eps_problem, m)?)?;
    m.add_function(wrap_pyfunction!(declaration::declarations, m)?)?;
    m.add_function(wrap_pyfunction!(declaration::infer, m)?)?;
    m.add_function(wrap_pyfunction!(python_call::register, m)?)?;
    m.add_function(wrap_pyfunction!(python_call::unregister, m)?)?;
    m.add_function(wrap_pyfunction!(python_call::registered, m)?)?;
    m.add_function(wrap_pyfunction!(python_call::pooled_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(python_call::active_calls, m)?)?;
    m.add_function(wrap_pyfunction!(python_call::close, m)?)?;
    m.add_function(wrap_pyfunction!(python_call::forked, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("has_cuda", cfg!(feature = "cuda"))?;
    Ok(())
}
