//! What [`super::call_ufunc`] looks up once per process instead of on every call:
//! NumPy's C types `ndarray` and `ufunc` (checked to be NumPy's own, as before),
//! the `gc` module's switches, the ufunc loops already found, and NumPy's
//! error state for `errstate(all="raise")`. Each is kept in a `OnceLock` set
//! only after a lookup succeeded (a failed one is repeated on the next call, as
//! before, and declines it), and never blocks: two threads that look up at once
//! both compute, and the second result is dropped.

use std::sync::{Mutex, OnceLock};

use pyo3::types::{PyAnyMethods, PyDict, PyDictMethods};
use pyo3::{Bound, Py, PyAny, PyResult, Python};

/// NumPy's module and C types, and the `gc` functions, looked up once.
pub(super) struct Lookups {
    pub(super) numpy: Py<PyAny>,
    pub(super) ndarray: Py<PyAny>,
    pub(super) ufunc: Py<PyAny>,
    pub(super) gc_isenabled: Py<PyAny>,
    pub(super) gc_disable: Py<PyAny>,
    pub(super) gc_enable: Py<PyAny>,
}

static LOOKUPS: OnceLock<Lookups> = OnceLock::new();

/// The process's [`Lookups`], or `None` if `numpy.ndarray` or `numpy.ufunc` is not
/// NumPy's own C type (then `call_ufunc` declines, and the next call looks again).
pub(super) fn lookups(py: Python<'_>) -> PyResult<Option<&'static Lookups>> {
    if let Some(found) = LOOKUPS.get() {
        return Ok(Some(found));
    }
    let numpy = py.import(pyo3::intern!(py, "numpy"))?.into_any();
    let Some(ndarray) = super::numpy_c_type(&numpy, "ndarray")? else {
        return Ok(None);
    };
    let Some(ufunc) = super::numpy_c_type(&numpy, "ufunc")? else {
        return Ok(None);
    };
    let gc = py.import(pyo3::intern!(py, "gc"))?;
    let found = Lookups {
        ndarray: ndarray.unbind(),
        ufunc: ufunc.unbind(),
        gc_isenabled: gc.getattr("isenabled")?.unbind(),
        gc_disable: gc.getattr("disable")?.unbind(),
        gc_enable: gc.getattr("enable")?.unbind(),
        numpy: numpy.unbind(),
    };
    // Another thread may have set it meanwhile: ours is dropped (the GIL is held).
    let _ = LOOKUPS.set(found);
    Ok(LOOKUPS.get())
}

/// The most `(ufunc, dtype)` loops remembered.
const LOOPS_MAX: usize = 256;

/// `(ufunc, dtype name)` pairs whose ufunc has a loop of exactly that dtype for
/// every input and output. The ufunc is held, so its address names no other
/// object; a ufunc's loops are only ever added, so a found loop stays there.
static LOOPS: Mutex<Vec<(Py<PyAny>, &'static str)>> = Mutex::new(Vec::new());

/// Whether `ufunc` (an exact `numpy.ufunc` with `nin` inputs and `nout` outputs)
/// lists the loop `dtype...->dtype...` in `ufunc.types`; `char` is the dtype's
/// one-letter code. Found loops are remembered.
pub(super) fn has_loop(
    ufunc: &Bound<'_, PyAny>,
    dtype: &'static str,
    char: impl FnOnce() -> PyResult<String>,
    nin: usize,
    nout: usize,
) -> PyResult<bool> {
    let py = ufunc.py();
    let known =
        |loops: &[(Py<PyAny>, &'static str)]| loops.iter().any(|(u, d)| u.as_ptr() == ufunc.as_ptr() && *d == dtype);
    if known(&LOOPS.lock().unwrap_or_else(|p| p.into_inner())) {
        return Ok(true);
    }
    let char = char()?;
    let wanted = format!("{}->{}", char.repeat(nin), char.repeat(nout));
    let types: Vec<String> = ufunc.getattr(pyo3::intern!(py, "types"))?.extract()?;
    if !types.contains(&wanted) {
        return Ok(false);
    }
    let mut loops = LOOPS.lock().unwrap_or_else(|p| p.into_inner());
    if loops.len() < LOOPS_MAX && !known(&loops) {
        loops.push((ufunc.clone().unbind(), dtype));
    }
    Ok(true)
}

/// NumPy's error-state context variable and its value under
/// `numpy.errstate(all="raise")`, read once (NumPy 2 keeps the error state in
/// `numpy._core._ufunc_config._extobj_contextvar`; `errstate` sets and resets it).
pub(super) struct RaiseAll {
    var: Py<PyAny>,
    raise_all: Py<PyAny>,
}

static RAISE_ALL: OnceLock<RaiseAll> = OnceLock::new();

fn raise_all<'py>(py: Python<'py>, numpy: &Bound<'py, PyAny>) -> Option<&'static RaiseAll> {
    if let Some(found) = RAISE_ALL.get() {
        return Some(found);
    }
    let found = (|| -> PyResult<Option<RaiseAll>> {
        let var = py.import("numpy._core._ufunc_config")?.getattr("_extobj_contextvar")?;
        let context_var = py.import("contextvars")?.getattr("ContextVar")?;
        if !var.get_type().is(&context_var) {
            return Ok(None);
        }
        let state = errstate_raise(py, numpy)?;
        state.call_method0("__enter__")?;
        let raise_all = var.call_method0("get");
        let none = py.None();
        state.call_method1("__exit__", (&none, &none, &none))?;
        // NumPy's own C object (a capsule), whose setting runs no Python code.
        let raise_all = raise_all?;
        if !raise_all.is_instance_of::<pyo3::types::PyCapsule>() {
            return Ok(None);
        }
        Ok(Some(RaiseAll { var: var.unbind(), raise_all: raise_all.unbind() }))
    })();
    let _ = RAISE_ALL.set(found.ok().flatten()?);
    RAISE_ALL.get()
}

/// `numpy.errstate(all="raise")`, not entered.
fn errstate_raise<'py>(py: Python<'py>, numpy: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(py);
    kwargs.set_item(pyo3::intern!(py, "all"), pyo3::intern!(py, "raise"))?;
    numpy.getattr(pyo3::intern!(py, "errstate"))?.call((), Some(&kwargs))
}

/// `numpy.errstate(all="raise")`, entered while this lives: a floating-point error
/// raises `FloatingPointError` from C instead of running the warnings machinery
/// (whose hooks are Python code) or an error callback. With NumPy 2 the context
/// variable `errstate` sets is set directly to the value it would set
/// (`ContextVar.set` and `reset`: C methods, no Python frame); else `errstate`
/// itself is entered.
pub(super) enum RaiseOnFpErrors<'py> {
    Var(&'static RaiseAll, Bound<'py, PyAny>),
    State(Bound<'py, PyAny>),
}

impl<'py> RaiseOnFpErrors<'py> {
    pub(super) fn new(py: Python<'py>, numpy: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Some(raise) = raise_all(py, numpy) {
            let token = raise.var.bind(py).call_method1(pyo3::intern!(py, "set"), (raise.raise_all.bind(py),))?;
            return Ok(RaiseOnFpErrors::Var(raise, token));
        }
        let state = errstate_raise(py, numpy)?;
        state.call_method0(pyo3::intern!(py, "__enter__"))?;
        Ok(RaiseOnFpErrors::State(state))
    }
}

impl Drop for RaiseOnFpErrors<'_> {
    fn drop(&mut self) {
        match self {
            RaiseOnFpErrors::Var(raise, token) => {
                let py = token.py();
                let _ = raise.var.bind(py).call_method1(pyo3::intern!(py, "reset"), (&*token,));
            }
            RaiseOnFpErrors::State(state) => {
                let py = state.py();
                let none = py.None();
                let _ = state.call_method1(pyo3::intern!(py, "__exit__"), (&none, &none, &none));
            }
        }
    }
}
