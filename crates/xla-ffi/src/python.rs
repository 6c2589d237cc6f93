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
//! Any pyo3 from 0.25 to 0.30 works; this crate enables no pyo3 feature, so the
//! plugin chooses `extension-module` and its abi3 floor (or none).

use core::ffi::c_void;

use pyo3::types::{PyAnyMethods, PyDict, PyDictMethods, PyTuple};
use pyo3::{Bound, PyAny, PyErr, PyResult, Python};

mod declarations;
mod ufunc_lookups;
pub use declarations::declarations;
use ufunc_lookups::RaiseOnFpErrors;

use crate::{bundles, AnyType, Buffer, Error, Handler, HandlerDescriptor, ResultBuffer, Site, StateType};

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
pub fn with_interpreter<R>(f: impl FnOnce() -> R) -> Option<R> {
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

/// Copies the bytes of `src` into `result`: `src` is any object with the buffer
/// protocol whose memory is C-contiguous and whose format is one character (`bytes`,
/// a NumPy array of a built-in real dtype; for others pass
/// `a.reshape(-1).view(numpy.uint8)`), of exactly the result's byte size. Python code
/// never sees the result's memory: the bytes are copied from Rust, from a buffer
/// export of `src` released before this returns, with non-temporal stores for a
/// copy of several MiB (which would not stay in the caches anyway).
///
/// Fails with `INVALID_ARGUMENT` if `src` has no C-contiguous buffer or its size
/// differs, naming the result (`result 0 (name)`).
pub fn copy_into_result(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    result: &mut ResultBuffer<'_, AnyType>,
) -> crate::Result<()> {
    let site = result.site();
    let what = || format!("{} {} ({})", site.role, site.index, site.name);
    let py_err = |e: PyErr| Error::invalid_argument(format!("copying into {}: {e}", what()));
    let bytes = result.as_uninit_bytes()?;
    let copied = with_flat_buffer(py, src, |buf| {
        if buf.len_bytes() != bytes.len() {
            return Err(Error::invalid_argument(format!(
                "copying into {}: expected {} bytes, got {}",
                what(),
                bytes.len(),
                buf.len_bytes()
            )));
        }
        // Why the copy below is sound: the export `buf` keeps `src`'s `len_bytes()`
        // bytes (C-contiguous: `with_flat_buffer`) valid until it is released, after
        // this closure; the result's bytes live for the whole call and overlap no
        // other buffer of the call (checked by `as_uninit_bytes`), and `result` stays
        // mutably borrowed, so nothing else writes them; `copy_bytes` copies
        // overlapping ranges as `memmove` does. Another thread could write `src`
        // during the copy only through a buffer it exported itself with the GIL
        // released, which the memcpy of CPython's own copy (a memoryview slice
        // assignment) would race just the same.
        // SAFETY: as above; both ranges hold `bytes.len()` bytes (compared just
        // before), and MaybeUninit<u8> has the layout of u8.
        unsafe { crate::bulk_copy::copy_bytes(bytes.as_mut_ptr().cast(), buf.buf_ptr().cast(), bytes.len()) };
        Ok(())
    });
    copied.map_err(py_err)?
}

/// Calls `f` with a buffer export of `obj` as flat bytes (`memoryview(obj).cast("B")`,
/// which needs C-contiguous memory and a one-character format), and releases the
/// export (and any memoryview made for it) after it, also when it fails. No Python
/// code runs while the export exists.
///
/// An object that exports C-contiguous unsigned bytes itself (a flat `uint8` NumPy
/// array, `bytes`, `bytearray`) is exported directly, with no memoryview: the same
/// bytes, one export instead of two memoryviews and their releases.
fn with_flat_buffer<R>(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    f: impl FnOnce(&pyo3::buffer::PyBuffer<u8>) -> R,
) -> PyResult<R> {
    if let Ok(buf) = pyo3::buffer::PyBuffer::<u8>::get(obj) {
        if buf.is_c_contiguous() {
            let value = f(&buf);
            // (Released on drop; `release(py)` is not spelled alike in every pyo3 version.)
            drop(buf);
            return Ok(value);
        }
    }
    let view = pyo3::types::PyMemoryView::from(obj)?;
    let view = view.as_any();
    let release = |v: &Bound<'_, PyAny>| {
        let _ = v.call_method0(pyo3::intern!(py, "release"));
    };
    let flat = match view.call_method1(pyo3::intern!(py, "cast"), ("B",)) {
        Ok(flat) => flat,
        Err(e) => {
            release(view);
            return Err(e);
        }
    };
    let value = pyo3::buffer::PyBuffer::<u8>::get(&flat).map(|buf| {
        let value = f(&buf);
        drop(buf);
        value
    });
    release(&flat);
    release(view);
    value
}

/// The reference count of `obj` (1 when the caller's reference is the only one).
pub fn refcount(obj: &Bound<'_, PyAny>) -> isize {
    // SAFETY: `obj` is a live object and the thread is attached (it is `Bound`).
    unsafe { pyo3::ffi::Py_REFCNT(obj.as_ptr()) }
}

/// Copies `operand`'s bytes into `dst`: a writable object with the buffer protocol
/// whose memory is C-contiguous with a one-character format and exactly the
/// operand's byte size (a NumPy `uint8` array of that length). As in
/// [`copy_into_result`], the bytes are copied from Rust (no Python code sees the
/// operand's memory), with non-temporal stores for a copy of several MiB.
///
/// Fails with `INVALID_ARGUMENT` if `dst` is not such an object, naming the operand.
pub fn copy_from_operand(py: Python<'_>, operand: &Buffer<'_, AnyType>, dst: &Bound<'_, PyAny>) -> crate::Result<()> {
    let site = operand.site();
    let what = || format!("{} {} ({})", site.role, site.index, site.name);
    let py_err = |e: PyErr| Error::invalid_argument(format!("copying from {}: {e}", what()));
    let bytes = operand.as_bytes()?;
    let copied = with_flat_buffer(py, dst, |buf| {
        if buf.len_bytes() != bytes.len() || buf.readonly() {
            return Err(Error::invalid_argument(format!(
                "copying from {}: expected a writable buffer of {} bytes",
                what(),
                bytes.len()
            )));
        }
        // SAFETY: the writable export `buf` keeps `dst`'s `len_bytes()` bytes
        // (C-contiguous: `with_flat_buffer`) valid until it is released, after this
        // closure; the operand's bytes live for the whole call and nothing writes them
        // (no result overlaps them: checked by `as_bytes`); `copy_bytes` copies
        // overlapping ranges as `memmove` does. No Python code runs during the copy;
        // another thread could touch `dst` meanwhile only through a buffer it
        // exported itself with the GIL released, which the memcpy of CPython's own
        // copy (a memoryview slice assignment) would race just the same.
        unsafe { crate::bulk_copy::copy_bytes(buf.buf_ptr().cast(), bytes.as_ptr(), bytes.len()) };
        Ok(())
    });
    copied.map_err(py_err)?
}

/// Calls `f` with zero-copy memoryviews of a host call's buffers: a tuple of
/// read-only views of the operands' bytes, and a tuple of writable views of the
/// results' (uninitialised) bytes. Views are flat bytes; shape and dtype are the
/// caller's to attach (e.g. `numpy.ndarray(shape, dtype, buffer=view)`).
///
/// The views point into memory XLA owns only for the duration of the call, so
/// they live only inside `f`: afterwards each view is released
/// (`memoryview.release()`), and if Python code still holds one (say a NumPy
/// array made from it and stored in a global, whose `base` is the view), the call
/// fails with a `FAILED_PRECONDITION` error naming the buffer, because that array
/// would outlive the memory it shows. Arrays must not escape `f`; copy what is
/// needed later (`numpy.array(x)`).
///
/// Fails before calling `f` if a buffer is on a device, has no byte width, or
/// aliases another buffer.
///
/// # Safety
/// The check above catches a view that is still referenced, but cannot make
/// what was built from it safe: a NumPy array made from a view caches the
/// address, and after the call it reads and writes memory XLA has reused. The
/// caller must make sure that nothing `f` runs (including Python code it calls)
/// keeps a view, or any object made from one, past `f`. To hand buffers to code
/// you do not control, copy instead (`PyBytes::new(py, buffer.as_bytes()?)` for
/// an operand, [`copy_into_result`] for a result), as `xla_ffi_rs.python_op` does.
pub unsafe fn with_memoryviews<'py, R>(
    py: Python<'py>,
    operands: &[Buffer<'_, AnyType>],
    results: &mut [ResultBuffer<'_, AnyType>],
    f: impl FnOnce(Bound<'py, PyTuple>, Bound<'py, PyTuple>) -> R,
) -> crate::Result<R> {
    let py_err = |e: PyErr| Error::internal(format!("creating a memoryview: {e}"));
    let mut views: Vec<(Bound<'py, PyAny>, Site)> = Vec::with_capacity(operands.len() + results.len());
    for b in operands {
        let bytes = b.as_bytes()?;
        // SAFETY: the operand's bytes live for the whole call and nothing writes them
        // (no result overlaps them: checked by `as_bytes`); the view is read-only and
        // is released below, before this function returns.
        let view = unsafe { memoryview(py, bytes.as_ptr().cast_mut(), bytes.len(), false) }.map_err(py_err)?;
        views.push((view, b.site()));
    }
    for b in results.iter_mut() {
        let site = b.site();
        let bytes = b.as_uninit_bytes()?;
        // SAFETY: the result's bytes live for the whole call, overlap no other buffer
        // (checked by `as_uninit_bytes`), and `results` stays mutably borrowed until
        // the view is released below, so Python's writes are the only access.
        // MaybeUninit<u8> has the layout of u8.
        let view = unsafe { memoryview(py, bytes.as_mut_ptr().cast(), bytes.len(), true) }.map_err(py_err)?;
        views.push((view, site));
    }
    let n_in = operands.len();
    let ins = PyTuple::new(py, views[..n_in].iter().map(|(v, _)| v)).map_err(py_err)?;
    let outs = PyTuple::new(py, views[n_in..].iter().map(|(v, _)| v)).map_err(py_err)?;
    let value = f(ins, outs);
    // Only `views` may hold a view now; a higher count means Python kept one.
    let mut escaped = Vec::new();
    for (view, site) in &views {
        // SAFETY: `view` is a live object and the thread is attached (`py`).
        let kept = unsafe { pyo3::ffi::Py_REFCNT(view.as_ptr()) } > 1;
        let released = view.call_method0(pyo3::intern!(py, "release")).is_ok();
        if kept || !released {
            escaped.push(format!("{} {} ({})", site.role, site.index, site.name));
        }
    }
    if escaped.is_empty() {
        return Ok(value);
    }
    Err(Error::failed_precondition(format!(
        "Python code kept a view of {} after the call returned; the memory belongs to XLA \
         and is reused after the call: copy what you need to keep (numpy.array(x)), also \
         before handing a view to JAX, which may hold on to it",
        escaped.join(", ")
    )))
}

/// What [`call_ufunc`] did.
#[derive(Debug)]
pub enum UfuncCall {
    /// The ufunc ran and wrote every result.
    Done,
    /// The call does not qualify (see [`call_ufunc`]); nothing ran and no result
    /// was written.
    Declined,
    /// The ufunc raised (a floating-point error under `numpy.errstate(all="raise")`,
    /// a warning turned into an error); results may be partly written.
    Raised(PyErr),
}

/// NumPy's built-in numeric dtypes, by XLA element type (the ones whose ufunc loops
/// see nothing but numbers: no object, string or user-defined dtype).
const UFUNC_DTYPES: [(crate::DataType, &str); 14] = [
    (crate::DataType::PRED, "bool"),
    (crate::DataType::S8, "int8"),
    (crate::DataType::S16, "int16"),
    (crate::DataType::S32, "int32"),
    (crate::DataType::S64, "int64"),
    (crate::DataType::U8, "uint8"),
    (crate::DataType::U16, "uint16"),
    (crate::DataType::U32, "uint32"),
    (crate::DataType::U64, "uint64"),
    (crate::DataType::F16, "float16"),
    (crate::DataType::F32, "float32"),
    (crate::DataType::F64, "float64"),
    (crate::DataType::C64, "complex64"),
    (crate::DataType::C128, "complex128"),
];

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
pub fn call_ufunc(
    py: Python<'_>,
    ufunc: &Bound<'_, PyAny>,
    operands: &[Buffer<'_, AnyType>],
    results: &mut [ResultBuffer<'_, AnyType>],
) -> UfuncCall {
    match prepare_ufunc(py, ufunc, operands, results) {
        Ok(Some(name)) => run_ufunc(py, ufunc, name, operands, results),
        Ok(None) => UfuncCall::Declined,
        Err(e) => UfuncCall::Raised(e),
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
    let Some(lookups) = ufunc_lookups::lookups(py)? else {
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
    Ok(UFUNC_DTYPES.iter().find(|(t, _)| *t == dtype).map(|(_, name)| *name))
}

/// What [`prepare_ufunc`] compares of a buffer.
struct RawView<'a> {
    host: bool,
    dtype: crate::DataType,
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
    fn new(py: Python<'py>, lookups: &'static ufunc_lookups::Lookups) -> Self {
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
        "xla_ffi::python::call_ufunc: an array over XLA's memory outlived the ufunc call; aborting \
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
    let lookups = match ufunc_lookups::lookups(py) {
        Ok(Some(lookups)) => lookups,
        Ok(None) => return UfuncCall::Declined,
        Err(e) => return UfuncCall::Raised(e),
    };
    // Entered before any object over XLA's memory exists, left after the last is gone.
    let _raise = match RaiseOnFpErrors::new(py, lookups.numpy.bind(py)) {
        Ok(raise) => raise,
        Err(e) => return UfuncCall::Raised(e),
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
        if !ufunc_lookups::has_loop(ufunc, dtype, char, n_in, results.len())? {
            return Ok(UfuncCall::Declined);
        }
        let casting = PyDict::new(py);
        casting.set_item(pyo3::intern!(py, "casting"), pyo3::intern!(py, "no"))?;
        let args = PyTuple::new(py, &arrays)?;
        let called = ufunc.call(&args, Some(&casting)).map(drop);
        drop((args, casting));
        Ok(match called {
            Ok(()) => UfuncCall::Done,
            Err(e) => UfuncCall::Raised(e),
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
    outcome.unwrap_or_else(UfuncCall::Raised)
}
