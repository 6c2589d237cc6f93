//! Handing handlers to JAX from a PyO3 module (feature `pyo3`).
//!
//! JAX wants each handler as a PyCapsule that holds the raw function pointer.
//! PyO3's `PyCapsule::new(value)` stores a *boxed value* instead, so JAX would read a
//! pointer to a pointer and crash; these helpers build the right capsule.
//!
//! A PyO3 module that hands its handlers to Python (`examples/plugin` in the
//! repository builds and tests exactly this, with pyo3 0.25):
//!
//! ```ignore
//! use pyo3::prelude::*;
//! use xla_ffi::{handler, Buffer, Result, ResultBuffer};
//!
//! #[handler(target = "my_project.copy")]
//! fn my_project_copy(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
//!     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
//!         o.write(v);
//!     }
//!     Ok(())
//! }
//!
//! /// `{target: capsule or {stage: capsule}}` for `jax.ffi.register_ffi_target`.
//! #[pyfunction]
//! fn targets(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
//!     xla_ffi::python::targets(py, &[&MY_PROJECT_COPY], "cpu")
//! }
//!
//! #[pymodule]
//! fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
//!     m.add_function(wrap_pyfunction!(targets, m)?)
//! }
//! ```
//!
//! In Python: `for name, fn in _native.targets().items(): jax.ffi.register_ffi_target(name, fn, platform="cpu")`.
//!
//! [`declarations`] gives each target's declaration (operands, results, attributes,
//! rules) as a dictionary, for building the JAX op from it.
//!
//! The module runs no Python code of its own and holds no NumPy code: a handler
//! that hands buffers to Python copies them with the safe byte views
//! ([`Buffer::as_bytes`](crate::Buffer::as_bytes),
//! [`ResultBuffer::as_uninit_bytes`](crate::ResultBuffer::as_uninit_bytes)), as the
//! `xla_ffi_rs` package's own extension does for `python_op`.
//!
//! Any pyo3 from 0.25 to 0.30 works; this crate enables no pyo3 feature, so the
//! plugin chooses `extension-module` and its abi3 floor (or none).

use core::ffi::c_void;

use pyo3::types::{PyDict, PyDictMethods};
use pyo3::{Bound, PyAny, PyResult, Python};

mod declarations;
pub use declarations::declarations;

use crate::{bundles, Handler, HandlerDescriptor, StateType};

/// An unnamed capsule around a raw pointer, as `jax.ffi.pycapsule` makes.
///
/// It is returned as `PyAny` (it is a `PyCapsule`) so that the same code builds with
/// every pyo3 version this crate accepts.
fn raw_capsule(py: Python<'_>, ptr: *mut c_void) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: PyCapsule_New copies the pointer value (no ownership, no destructor);
    // the GIL is held (we have `py`); a NULL result sets a Python error, which
    // `from_owned_ptr_or_err` turns into `Err`.
    unsafe {
        let cap = pyo3::ffi::PyCapsule_New(ptr, core::ptr::null(), None);
        Bound::from_owned_ptr_or_err(py, cap)
    }
}

/// The capsule for one handler symbol, for `jax.ffi.register_ffi_target`.
pub fn capsule(py: Python<'_>, handler: impl Into<Handler>) -> PyResult<Bound<'_, PyAny>> {
    raw_capsule(py, handler.into().as_raw() as *mut c_void)
}

/// A stage bundle `{"instantiate": ..., "execute": ...}` for a stateful handler.
pub fn bundle<'py>(
    py: Python<'py>,
    instantiate: impl Into<Handler>,
    execute: impl Into<Handler>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("instantiate", capsule(py, instantiate)?)?;
    d.set_item("execute", capsule(py, execute)?)?;
    Ok(d)
}

/// `{"type_id": ..., "type_info": ...}` for `jax.ffi.register_ffi_type`.
pub fn type_registration<S: StateType>(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let reg = S::registration();
    let d = PyDict::new(py);
    d.set_item("type_id", raw_capsule(py, reg.type_id_ptr())?)?;
    d.set_item("type_info", raw_capsule(py, reg.type_info_ptr())?)?;
    Ok(d)
}

/// `{target: capsule, or {stage: capsule}}` for the `handlers` of `platform` (JAX's
/// platform name, `"cpu"` or `"cuda"`), ready for
/// `jax.ffi.register_ffi_target(name, value, platform=...)` with XLA's name for the
/// platform: `"cpu"`, or `"CUDA"` for `"cuda"` (a registration under `"cuda"` never
/// reaches XLA's CUDA plugin; `xla_ffi_rs.register_targets` translates the name).
///
/// A target served only by an execute handler maps to its capsule; one with more
/// stages maps to a bundle dictionary keyed by stage (`"instantiate"`, `"prepare"`,
/// `"initialize"`, `"execute"`, `"record"`: [`Stage::key`](crate::Stage::key)). XLA:CPU
/// runs only the instantiate and execute entries; jaxlib 0.10 ignores `"record"`.
/// Raises `ValueError` if a target has no execute handler or two for one stage.
pub fn targets<'py>(py: Python<'py>, handlers: &[&HandlerDescriptor], platform: &str) -> PyResult<Bound<'py, PyDict>> {
    let groups = bundles(handlers, platform).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    for b in groups {
        match b.execute_only() {
            Some(f) => d.set_item(b.target, capsule(py, f)?)?,
            None => {
                let stages = PyDict::new(py);
                for (stage, f) in &b.stages {
                    stages.set_item(stage.key(), capsule(py, *f)?)?;
                }
                d.set_item(b.target, stages)?;
            }
        }
    }
    Ok(d)
}
