//! Handing handlers to JAX from a PyO3 module (feature `pyo3`).
//!
//! JAX wants each handler as a PyCapsule that holds the raw function pointer.
//! PyO3's `PyCapsule::new(value)` stores a *boxed value* instead, so JAX would read a
//! pointer to a pointer and crash; these helpers build the right capsule.
//!
//! ```ignore
//! #[pymodule]
//! fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
//!     let py = m.py();
//!     let targets = PyDict::new(py);
//!     targets.set_item("my_project.scale", xla_ffi::python::capsule(py, my_project_scale)?)?;
//!     m.add("targets", targets)
//! }
//! ```

use core::ffi::c_void;

use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};

use crate::{HandlerFn, StateType};

/// An unnamed capsule around a raw pointer, as `jax.ffi.pycapsule` makes.
fn raw_capsule(py: Python<'_>, ptr: *mut c_void) -> PyResult<Bound<'_, PyCapsule>> {
    // SAFETY: PyCapsule_New copies the pointer value (no ownership, no destructor);
    // the GIL is held (we have `py`); a NULL result sets a Python error, which
    // `from_owned_ptr_or_err` turns into `Err`.
    unsafe {
        let cap = pyo3::ffi::PyCapsule_New(ptr, core::ptr::null(), None);
        Ok(Bound::from_owned_ptr_or_err(py, cap)?.cast_into_unchecked())
    }
}

/// The capsule for one handler symbol, for `jax.ffi.register_ffi_target`.
pub fn capsule(py: Python<'_>, handler: HandlerFn) -> PyResult<Bound<'_, PyCapsule>> {
    raw_capsule(py, handler as *mut c_void)
}

/// A stage bundle `{"instantiate": ..., "execute": ...}` for a stateful handler.
pub fn bundle<'py>(py: Python<'py>, instantiate: HandlerFn, execute: HandlerFn) -> PyResult<Bound<'py, PyDict>> {
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
