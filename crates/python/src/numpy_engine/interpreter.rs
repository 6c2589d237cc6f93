//! The interpreter, taken for real on any thread, and reference counts.

use pyo3::{Bound, PyAny};

/// Runs `f` on this thread while it really holds the interpreter (the GIL on a
/// regular build), whatever PyO3 believes: `PyGILState_Ensure` before, and
/// `PyGILState_Release` after (also when `f` panics). Returns `None`, without
/// calling `f`, when the interpreter is not initialized.
///
/// Use it around `Python::attach` in a handler that may run on a thread whose
/// Python code is itself waiting for XLA: when a Python function called by a
/// handler runs a JAX computation, jaxlib releases the GIL while the
/// computation runs, possibly on the same thread, but PyO3's per-thread count
/// still says "attached", so `Python::attach` alone would call the C API without
/// the GIL. Inside `f`, `Python::attach` is then right either way.
pub(crate) fn with_interpreter<R>(f: impl FnOnce() -> R) -> Option<R> {
    struct Release(pyo3::ffi::PyGILState_STATE);
    impl Drop for Release {
        fn drop(&mut self) {
            // SAFETY: pairs the `PyGILState_Ensure` below on the same thread (the
            // guard is a local of this function), in LIFO order.
            unsafe { pyo3::ffi::PyGILState_Release(self.0) }
        }
    }
    // SAFETY: `Py_IsInitialized` may be called at any time.
    if unsafe { pyo3::ffi::Py_IsInitialized() } == 0 {
        return None;
    }
    // SAFETY: the interpreter is initialized; `PyGILState_Ensure` may be called on
    // any thread, holding the GIL or not, and is released by `_release`.
    let _release = Release(unsafe { pyo3::ffi::PyGILState_Ensure() });
    Some(f())
}

/// The reference count of `obj` (1 when the caller's reference is the only one).
pub(crate) fn refcount(obj: &Bound<'_, PyAny>) -> isize {
    // SAFETY: `obj` is a live object and the thread is attached (it is `Bound`).
    unsafe { pyo3::ffi::Py_REFCNT(obj.as_ptr()) }
}
