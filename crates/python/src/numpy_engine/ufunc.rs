//! Exact NumPy ufuncs run on XLA's own buffers, with no copy, where no Python code
//! can see them ([`call_ufunc`]).

mod lookups;

use pyo3::types::{PyAnyMethods, PyDict, PyDictMethods, PyTuple};
use pyo3::{Bound, PyAny, PyResult, Python};
use xla_ffi::{AnyType, Buffer, DataType, ResultBuffer};

use super::interpreter::refcount;
use lookups::RaiseOnFpErrors;

/// A memoryview of `len` bytes at `ptr`, read-only or writable.
///
/// # Safety
/// `ptr..ptr+len` must stay valid (and, for `writable`, writable with no other
/// reference to it) until the memoryview is released.
unsafe fn memoryview<'py>(py: Python<'py>, ptr: *mut u8, len: usize, writable: bool) -> PyResult<Bound<'py, PyAny>> {
    let flags = if writable { pyo3::ffi::PyBUF_WRITE } else { pyo3::ffi::PyBUF_READ };
    let len = isize::try_from(len).map_err(|_| pyo3::exceptions::PyOverflowError::new_err("buffer too large"))?;
    // SAFETY: the attached thread (`py`) may call the C API; the memory contract is
    // the caller's; a NULL result sets a Python error, which becomes `Err`.
    unsafe { Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyMemoryView_FromMemory(ptr.cast(), len, flags)) }
}

/// What [`call_ufunc`] did.
#[derive(Debug)]
pub(crate) enum UfuncCall {
    /// The ufunc ran and wrote every result.
    Done,
    /// The call does not qualify (see [`call_ufunc`]); nothing ran and no result
    /// was written.
    Declined,
    /// The ufunc raised (a floating-point error under `numpy.errstate(all="raise")`,
    /// a warning turned into an error), or a lookup before it did; results may be
    /// partly written. The exception is dropped: the caller runs the call again on
    /// copies, under the user's own error state, and reports what that raises.
    Raised,
}

/// Whether `numpy.<name>` is NumPy's own C type of that name (a static type, not
/// a class defined in Python that replaced the module attribute).
fn numpy_c_type<'py>(numpy: &Bound<'py, PyAny>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    const HEAP_TYPE: u64 = 1 << 9; // Py_TPFLAGS_HEAPTYPE
    let t = numpy.getattr(name)?;
    // `is_instance_of`, not `cast`/`downcast`: the one spelling every pyo3 from 0.25 to 0.30 has.
    if !t.is_instance_of::<pyo3::types::PyType>() {
        return Ok(None);
    }
    // SAFETY: `t` is a live type object (checked above) and the thread is attached (`py`).
    let flags = unsafe { pyo3::ffi::PyType_GetFlags(t.as_ptr().cast()) } as u64;
    let named = t.getattr("__module__")?.extract::<String>().is_ok_and(|m| m == "numpy")
        && t.getattr("__name__")?.extract::<String>().is_ok_and(|n| n == name);
    Ok((flags & HEAP_TYPE == 0 && named).then_some(t))
}

/// Calls the NumPy ufunc `ufunc` on a host call's own buffers, with no copy:
/// `ufunc(*inputs, *outputs, casting="no")` where `inputs` are read-only flat
/// arrays over the operands' memory and `outputs` writable flat arrays over the
/// results'. Returns [`UfuncCall::Declined`], having run nothing, unless all of
/// these hold:
///
/// * `ufunc`'s type is exactly `numpy.ufunc` (NumPy's C type: no subclass, whose
///   `__call__` could be Python code), it is elementwise (`signature` is `None`),
///   with `nin` inputs for the operands and `nout` outputs for the results;
/// * every buffer is host memory of one element type that NumPy has as a
///   built-in numeric dtype (no object, string or user-defined dtype), with the
///   same dimensions and at least one element;
/// * `ufunc.types` lists a loop of exactly that dtype for every input and output
///   (so `frompyfunc` ufuncs, whose loops are object loops, are declined).
///
/// Operands that share memory with a result (`input_output_aliases`) are declined
/// too: a call that raised is run again by the caller on copies of the operands,
/// which must still hold their values.
///
/// Why no Python code can see the arrays over XLA's memory: they are exact
/// `numpy.ndarray`s (no `__array_ufunc__` override), handed to the ufunc's C code
/// from no Python frame; the loop NumPy picks for those dtypes under
/// `casting="no"` receives raw pointers, not arrays; floating-point errors raise
/// `FloatingPointError` from C (`numpy.errstate(all="raise")` is entered around
/// the call) instead of running the warnings machinery or an error callback, and
/// the garbage collector is disabled meanwhile (so no `__del__` of garbage runs).
/// The caller that gets [`UfuncCall::Raised`] can run the ufunc again on copies
/// under its own error state, for its warnings and messages. After the call every
/// array and memoryview must be referenced by this function alone, and the views
/// are released; should one be referenced elsewhere, the process aborts rather
/// than leave an array over memory that XLA reuses. Two things can cause that,
/// both outside what this function guards against (like `ctypes`): NumPy itself
/// replaced or changed, and another Python thread that searches the interpreter's
/// objects (`gc.get_objects()`, `gc.get_referrers()`) while the ufunc's loop runs
/// with the GIL released, and keeps an array from its argument tuple.
pub(crate) fn call_ufunc(
    py: Python<'_>,
    ufunc: &Bound<'_, PyAny>,
    operands: &[Buffer<'_, AnyType>],
    results: &mut [ResultBuffer<'_, AnyType>],
) -> UfuncCall {
    match prepare_ufunc(py, ufunc, operands, results) {
        Ok(Some(name)) => run_ufunc(py, ufunc, name, operands, results),
        Ok(None) => UfuncCall::Declined,
        Err(_) => UfuncCall::Raised,
    }
}

/// The NumPy dtype name of the call's common element type if [`call_ufunc`]'s
/// conditions on the ufunc and the buffers hold (the loop is checked later).
fn prepare_ufunc(
    py: Python<'_>,
    ufunc: &Bound<'_, PyAny>,
    operands: &[Buffer<'_, AnyType>],
    results: &[ResultBuffer<'_, AnyType>],
) -> PyResult<Option<&'static str>> {
    let Some(lookups) = lookups::lookups(py)? else {
        return Ok(None);
    };
    if !ufunc.get_type().is(lookups.ufunc.bind(py))
        || !ufunc.getattr(pyo3::intern!(py, "signature"))?.is_none()
        || ufunc.getattr(pyo3::intern!(py, "nin"))?.extract::<usize>()? != operands.len()
        || ufunc.getattr(pyo3::intern!(py, "nout"))?.extract::<usize>()? != results.len()
    {
        return Ok(None);
    }
    let Some(first) = operands.first() else {
        return Ok(None);
    };
    let (dtype, dims) = (first.dtype(), first.dims());
    let same = |b: &RawView<'_>| b.host && b.dtype == dtype && b.dims == dims;
    let views = operands.iter().map(RawView::of).chain(results.iter().map(RawView::of_result));
    if first.is_empty() || !views.clone().all(|v| same(&v)) {
        return Ok(None);
    }
    Ok(super::NUMPY_DTYPES.contains(&dtype).then(|| dtype.name()))
}

/// What [`prepare_ufunc`] compares of a buffer.
struct RawView<'a> {
    host: bool,
    dtype: DataType,
    dims: &'a [i64],
}

impl<'a> RawView<'a> {
    fn of(b: &'a Buffer<'_, AnyType>) -> Self {
        RawView { host: b.on_host(), dtype: b.dtype(), dims: b.dims() }
    }
    fn of_result(b: &'a ResultBuffer<'_, AnyType>) -> Self {
        RawView { host: b.on_host(), dtype: b.dtype(), dims: b.dims() }
    }
}

/// The garbage collector, disabled while this lives (if it was enabled); holds
/// `gc.enable`.
struct GcPaused<'py>(Option<Bound<'py, PyAny>>);

impl<'py> GcPaused<'py> {
    fn new(py: Python<'py>, lookups: &'static lookups::Lookups) -> Self {
        let paused = (|| -> PyResult<Option<Bound<'py, PyAny>>> {
            if !lookups.gc_isenabled.bind(py).call0()?.is_truthy()? {
                return Ok(None);
            }
            lookups.gc_disable.bind(py).call0()?;
            Ok(Some(lookups.gc_enable.bind(py).clone()))
        })();
        GcPaused(paused.ok().flatten())
    }
}

impl Drop for GcPaused<'_> {
    fn drop(&mut self) {
        if let Some(enable) = self.0.take() {
            let _ = enable.call0();
        }
    }
}

/// Aborts the process: an array over XLA's memory is still referenced after the
/// ufunc call (see [`call_ufunc`] for the only ways to get here), and nothing can
/// take it back.
#[cold]
fn escaped() -> ! {
    eprintln!(
        "xla_ffi_rs._native: call_ufunc: an array over XLA's memory outlived the ufunc call; aborting \
         rather than let it read or write memory that XLA reuses"
    );
    std::process::abort()
}

fn run_ufunc(
    py: Python<'_>,
    ufunc: &Bound<'_, PyAny>,
    dtype: &'static str,
    operands: &[Buffer<'_, AnyType>],
    results: &mut [ResultBuffer<'_, AnyType>],
) -> UfuncCall {
    let lookups = match lookups::lookups(py) {
        Ok(Some(lookups)) => lookups,
        Ok(None) => return UfuncCall::Declined,
        Err(_) => return UfuncCall::Raised,
    };
    // Entered before any object over XLA's memory exists, left after the last is gone.
    let _raise = match RaiseOnFpErrors::new(py, lookups.numpy.bind(py)) {
        Ok(raise) => raise,
        Err(_) => return UfuncCall::Raised,
    };
    // No collection (so no `__del__` of garbage) while objects over XLA's memory exist.
    let _gc = GcPaused::new(py, lookups);
    let mut views: Vec<Bound<'_, PyAny>> = Vec::with_capacity(operands.len() + results.len());
    let mut arrays: Vec<Bound<'_, PyAny>> = Vec::with_capacity(operands.len() + results.len());
    let outcome = (|| -> PyResult<UfuncCall> {
        let ndarray = lookups.ndarray.bind(py);
        let n_in = operands.len();
        for b in operands {
            let Ok(bytes) = b.as_bytes() else {
                return Ok(UfuncCall::Declined); // shares memory with a result
            };
            // SAFETY: the operand's bytes live for the whole call and nothing writes
            // them (no result overlaps them: checked by `as_bytes`); the view is
            // read-only. It and the array over it are gone before `call_ufunc` returns
            // (else the process aborts), and no Python code can reach them meanwhile
            // (see `call_ufunc`).
            views.push(unsafe { memoryview(py, bytes.as_ptr().cast_mut(), bytes.len(), false) }?);
        }
        for b in results.iter_mut() {
            let Ok(bytes) = b.as_uninit_bytes() else {
                return Ok(UfuncCall::Declined); // shares memory with another buffer
            };
            // SAFETY: the result's bytes live for the whole call and overlap no other
            // buffer (checked by `as_uninit_bytes`); `results` stays mutably borrowed
            // until the view is gone, so NumPy's C loop is the only writer, and it
            // only writes (no input overlaps). MaybeUninit<u8> has the layout of u8.
            // Gone before `call_ufunc` returns, as above.
            views.push(unsafe { memoryview(py, bytes.as_mut_ptr().cast(), bytes.len(), true) }?);
        }
        let len = operands[0].len();
        let kwargs = PyDict::new(py);
        kwargs.set_item(pyo3::intern!(py, "dtype"), dtype)?;
        for (i, view) in views.iter().enumerate() {
            kwargs.set_item(pyo3::intern!(py, "buffer"), view)?;
            let array = ndarray.call(((len,),), Some(&kwargs))?;
            if i < n_in {
                array.call_method1(pyo3::intern!(py, "setflags"), (false,))?;
            }
            arrays.push(array);
        }
        drop(kwargs);
        // The loop for exactly this dtype: `frompyfunc` and object loops are not it.
        let char = || arrays[0].getattr(pyo3::intern!(py, "dtype"))?.getattr(pyo3::intern!(py, "char"))?.extract();
        if !lookups::has_loop(ufunc, dtype, char, n_in, results.len())? {
            return Ok(UfuncCall::Declined);
        }
        let casting = PyDict::new(py);
        casting.set_item(pyo3::intern!(py, "casting"), pyo3::intern!(py, "no"))?;
        let args = PyTuple::new(py, &arrays)?;
        let called = ufunc.call(&args, Some(&casting)).map(drop);
        drop((args, casting));
        Ok(match called {
            Ok(()) => UfuncCall::Done,
            Err(_) => UfuncCall::Raised,
        })
    })();
    // Nothing but `arrays` may refer to an array now, and nothing but `views` and
    // the arrays' bases to a view: else Python code holds an array over XLA's
    // memory, which nothing can take back. (An array made with `buffer=` keeps no
    // buffer export of its view, so `release()` alone would not tell.)
    for array in arrays {
        if refcount(&array) != 1 {
            escaped();
        }
    }
    for view in views {
        if refcount(&view) != 1 || view.call_method0(pyo3::intern!(py, "release")).is_err() {
            escaped();
        }
    }
    outcome.unwrap_or(UfuncCall::Raised)
}
