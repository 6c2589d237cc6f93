//! What runs at each call of the `python_call` target: the GIL taken, the
//! operands copied into NumPy arrays, the registered callable (or its `direct`
//! function, or its ufunc on XLA's own buffers) called, and its results checked
//! and copied into XLA's result buffers.

use std::sync::atomic::Ordering;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use xla_ffi::{Error, ErrorCode, RemainingArgs, RemainingRets, Result};

use super::arrays::{flat_array, np_dtype, numpy, recycle, typed_view, NumPy, POOLED_MIN_BYTES};
use super::{Direct, Entry, Reused, Running, CLOSED, TARGET};
use crate::numpy_engine;

/// Runs `entry`'s callable on this call's buffers.
pub(super) fn call(entry: &Entry, operands: &RemainingArgs<'_>, results: &mut RemainingRets<'_>) -> Result<()> {
    let _running = Running::start();
    if CLOSED.load(Ordering::SeqCst) {
        return Err(Error::new(ErrorCode::Unavailable, format!("{TARGET}: the Python interpreter is shutting down")));
    }
    let attached =
        numpy_engine::with_interpreter(|| Python::try_attach(|py| call_attached(py, entry, operands, results)));
    attached.flatten().unwrap_or_else(|| {
        Err(Error::new(ErrorCode::Unavailable, format!("{TARGET}: the Python interpreter is shutting down")))
    })
}

pub(super) fn call_attached(
    py: Python<'_>,
    entry: &Entry,
    operands: &RemainingArgs<'_>,
    results: &mut RemainingRets<'_>,
) -> Result<()> {
    let op: &str = &entry.name;
    let outputs = entry.outputs
        && results.iter().next().is_none_or(|b| {
            b.dims().iter().map(|&d| u64::try_from(d).unwrap_or(0)).product::<u64>() >= entry.outputs_min_elements
        });
    if let Some(ufunc) = entry.ufunc.as_ref().filter(|_| outputs) {
        for r in results.iter_mut() {
            // Large results are fresh memory: fault them in 2 MiB pages, not 4 KiB ones.
            r.advise_huge_pages();
        }
        // Anything but `Done` (declined, or raised) takes the copying path below,
        // which checks and reports as it always has.
        let ran = numpy_engine::call_ufunc(py, ufunc.bind(py), operands.as_slice(), results.as_mut_slice());
        if matches!(ran, numpy_engine::UfuncCall::Done) {
            return Ok(());
        }
    }
    let internal = |e: PyErr| Error::internal(format!("{TARGET}: op {op:?}: {e}"));
    let np = numpy(py).map_err(internal)?;
    // The flat arrays behind large copies, recycled after the call.
    let mut flats = Vec::new();
    // The last call's copies of small operands, refilled where nothing kept them,
    // and this call's, offered to the next call after this one.
    let mut last = std::mem::take(&mut *entry.reused.lock().unwrap_or_else(|p| p.into_inner()));
    let mut copies: Vec<Option<Reused>> = Vec::with_capacity(operands.len());
    let mut args = Vec::with_capacity(operands.len());
    for (i, b) in operands.iter().enumerate() {
        let dtype = np_dtype(py, np, op, "operand", i, b.dtype())?;
        let bytes = b.as_bytes()?;
        let arg = if bytes.len() < POOLED_MIN_BYTES {
            let copy = match last.get_mut(i).and_then(Option::take) {
                Some(r) if r.refill(py, b, bytes).map_err(internal)? => r,
                _ => Reused::new(py, np, b, bytes, &dtype).map_err(internal)?,
            };
            let arg = copy.array.bind(py).clone();
            copies.push(Some(copy));
            arg
        } else {
            copies.push(None);
            let flat = flat_array(py, np, bytes.len()).map_err(internal)?;
            numpy_engine::copy_from_operand(py, b, &flat).map_err(|e| with_op(op, e))?;
            let arr = typed_view(py, &flat, &dtype, b.dims()).map_err(internal)?;
            arr.call_method1(pyo3::intern!(py, "setflags"), (false,)).map_err(internal)?;
            flats.push(flat);
            arr
        };
        args.push(arg);
    }
    drop(last);
    let stored = match &entry.direct {
        Some(direct) if direct.outputs && outputs => call_direct_outputs(py, np, op, direct, args, results, &mut flats),
        Some(direct) if !outputs && !direct.outputs => {
            let dtypes = (results.iter().enumerate())
                .map(|(i, b)| np_dtype(py, np, op, "result", i, b.dtype()))
                .collect::<Result<Vec<_>>>()?;
            call_direct(py, np, op, direct, args, &dtypes, results)
        }
        _ => {
            let specs = result_specs(py, np, op, results)?;
            let mut outs = Vec::new();
            if outputs {
                for (spec, b) in specs.iter().zip(results.iter()) {
                    let (dims, dtype): (Bound<'_, PyAny>, Bound<'_, PyAny>) = spec.extract().map_err(internal)?;
                    let flat = flat_array(py, np, b.size_bytes()).map_err(internal)?;
                    let arr = flat
                        .call_method1(pyo3::intern!(py, "view"), (dtype,))
                        .and_then(|a| a.call_method1(pyo3::intern!(py, "reshape"), (dims,)))
                        .map_err(internal)?;
                    flats.push(flat);
                    outs.push(arr);
                }
            }
            let args = PyTuple::new(py, args).map_err(internal)?;
            let outs = PyTuple::new(py, outs).map_err(internal)?;
            let returned = entry.callable.bind(py).call1((args, specs, outs)).map_err(internal)?;
            store(py, np, op, returned, results)
        }
    };
    // The calls consumed our references to the arrays (and `store` consumes what
    // was returned): what still refers to a flat array now is what the function kept.
    let registered = entry.registered.load(Ordering::SeqCst);
    for flat in flats {
        recycle(py, flat, entry.key, registered);
    }
    // What the function kept stays its own (the next call makes a new copy).
    for c in copies.iter_mut() {
        if c.as_ref().is_some_and(|c| !c.unshared(py)) {
            *c = None;
        }
    }
    let mut slot = entry.reused.lock().unwrap_or_else(|p| p.into_inner());
    if slot.is_empty() {
        // (Else a call that ran meanwhile, inside this one or on another thread, put its own.)
        *slot = copies;
    }
    drop(slot);
    stored
}

/// `((dims, dtype), ...)`, the results XLA expects.
pub(super) fn result_specs<'py>(
    py: Python<'py>,
    np: &NumPy,
    op: &str,
    results: &RemainingRets<'_>,
) -> Result<Bound<'py, PyTuple>> {
    let internal = |e: PyErr| Error::internal(format!("{TARGET}: op {op:?}: {e}"));
    let mut specs = Vec::with_capacity(results.len());
    for (i, b) in results.iter().enumerate() {
        let dtype = np_dtype(py, np, op, "result", i, b.dtype())?;
        let dims = PyTuple::new(py, b.dims()).map_err(internal)?;
        specs.push(PyTuple::new(py, [dims.into_any(), dtype]).map_err(internal)?);
    }
    PyTuple::new(py, specs).map_err(internal)
}

/// Calls `direct.function(*args)` and stores what it returns (see [`Direct`]).
pub(super) fn call_direct(
    py: Python<'_>,
    np: &NumPy,
    op: &str,
    direct: &Direct,
    args: Vec<Bound<'_, PyAny>>,
    dtypes: &[Bound<'_, PyAny>],
    results: &mut RemainingRets<'_>,
) -> Result<()> {
    let internal = |e: PyErr| Error::internal(format!("{TARGET}: op {op:?}: {e}"));
    let function = direct.function.bind(py);
    // Up to three operands by vectorcall, with no tuple made.
    let called = match args.as_slice() {
        [a] => function.call1((a,)),
        [a, b] => function.call1((a, b)),
        [a, b, c] => function.call1((a, b, c)),
        _ => PyTuple::new(py, &args).and_then(|t| function.call1(t)),
    };
    // The function's references to the operand copies are gone: drop ours too
    // (a copy is reused only when nothing else refers to it).
    drop(args);
    let settled = match called {
        Ok(value) => {
            if store_exact(py, np, op, direct.single, &value, dtypes, results)? {
                return Ok(());
            }
            let specs = result_specs(py, np, op, results)?;
            direct.settle.bind(py).call1((0, value, specs))
        }
        Err(e) => {
            let specs = result_specs(py, np, op, results)?;
            direct.settle.bind(py).call1((1, e.value(py), (specs, e.traceback(py))))
        }
    };
    store(py, np, op, settled.map_err(internal)?, results)
}

/// Calls `direct.function(*args, *outputs)`, a function with `takes_outputs=True`,
/// where `outputs` are writable arrays of the results' shapes and dtypes over
/// pooled flat arrays (pushed to `flats`, recycled by the caller unless the
/// function kept them), and copies the outputs into the results when it returned
/// `None`, the output array or the tuple of them, and they still are exact arrays
/// of the results' dtypes and shapes. Anything else, and any exception, goes to
/// `settle(kind, value, extra)` with `extra` the results' specs and the outputs
/// (`(specs, outputs)`, or `((specs, outputs), traceback)` for an exception), which
/// returns what the registered callable would have.
pub(super) fn call_direct_outputs<'py>(
    py: Python<'py>,
    np: &NumPy,
    op: &str,
    direct: &Direct,
    mut args: Vec<Bound<'py, PyAny>>,
    results: &mut RemainingRets<'_>,
    flats: &mut Vec<Bound<'py, PyAny>>,
) -> Result<()> {
    let internal = |e: PyErr| Error::internal(format!("{TARGET}: op {op:?}: {e}"));
    let mut dtypes = Vec::with_capacity(results.len());
    let mut outs = Vec::with_capacity(results.len());
    for (i, b) in results.iter().enumerate() {
        let dtype = np_dtype(py, np, op, "result", i, b.dtype())?;
        let flat = flat_array(py, np, b.size_bytes()).map_err(internal)?;
        let arr = typed_view(py, &flat, &dtype, b.dims()).map_err(internal)?;
        flats.push(flat);
        dtypes.push(dtype);
        outs.push(arr);
    }
    let function = direct.function.bind(py);
    let called = match (args.as_slice(), outs.as_slice()) {
        ([a], [o]) => function.call1((a, o)),
        ([a, b], [o]) => function.call1((a, b, o)),
        _ => {
            args.extend(outs.iter().cloned());
            PyTuple::new(py, &args).and_then(|t| function.call1(t))
        }
    };
    // The function's references to the operand copies are gone: drop ours too.
    drop(args);
    let outs = PyTuple::new(py, outs).map_err(internal)?;
    let settled = match called {
        Ok(value) => {
            let theirs = value.is_none()
                || (results.len() == 1 && value.is(outs.get_item(0).map_err(internal)?))
                || value
                    .cast::<PyTuple>()
                    .is_ok_and(|t| t.len() == outs.len() && t.iter().zip(outs.iter()).all(|(a, b)| a.is(&b)))
                || value
                    .cast::<pyo3::types::PyList>()
                    .is_ok_and(|l| l.len() == outs.len() && l.iter().zip(outs.iter()).all(|(a, b)| a.is(&b)));
            if theirs && store_exact(py, np, op, false, outs.as_any(), &dtypes, results)? {
                return Ok(());
            }
            let specs = result_specs(py, np, op, results)?;
            direct.settle.bind(py).call1((0, value, (specs, &outs)))
        }
        Err(e) => {
            let specs = result_specs(py, np, op, results)?;
            direct.settle.bind(py).call1((1, e.value(py), ((specs, &outs), e.traceback(py))))
        }
    };
    store(py, np, op, settled.map_err(internal)?, results)
}

/// Copies `value` (`single`: one array, else a tuple of them) into the results if
/// it is exactly what XLA expects: exact `numpy.ndarray`s of the results' dtypes
/// (`dtypes`, by identity) and shapes. Returns false, having copied nothing, for
/// anything else.
pub(super) fn store_exact(
    py: Python<'_>,
    np: &NumPy,
    op: &str,
    single: bool,
    value: &Bound<'_, PyAny>,
    dtypes: &[Bound<'_, PyAny>],
    results: &mut RemainingRets<'_>,
) -> Result<bool> {
    let n = results.len();
    let values: Vec<Bound<'_, PyAny>> = if single {
        if n != 1 {
            return Ok(false);
        }
        vec![value.clone()]
    } else {
        match value.cast_exact::<PyTuple>() {
            Ok(t) if t.len() == n => t.iter().collect(),
            _ => return Ok(false),
        }
    };
    let ndarray = np.ndarray.bind(py);
    for ((v, dtype), r) in values.iter().zip(dtypes).zip(results.iter()) {
        if !v.get_type().is(ndarray) || !v.getattr(pyo3::intern!(py, "dtype")).is_ok_and(|d| d.is(dtype)) {
            return Ok(false);
        }
        if !same_shape(py, v, r.dims()) {
            return Ok(false);
        }
    }
    for (v, r) in values.iter().zip(results.as_mut_slice()) {
        copy_array(py, np, op, v, r)?;
    }
    Ok(true)
}

/// Whether `value.shape` is a tuple of exactly `dims` (with no list made).
pub(super) fn same_shape(py: Python<'_>, value: &Bound<'_, PyAny>, dims: &[i64]) -> bool {
    let Ok(shape) = value.getattr(pyo3::intern!(py, "shape")) else {
        return false;
    };
    let Ok(shape) = shape.cast_exact::<PyTuple>() else {
        return false;
    };
    shape.len() == dims.len() && shape.iter().zip(dims).all(|(s, &d)| s.extract::<i64>().is_ok_and(|s| s == d))
}

/// Copies the bytes of `value`, an exact `numpy.ndarray` of the result's dtype and
/// shape, into the result, in C order: small ones through `tobytes()` (one call),
/// large ones as flat bytes from a buffer export (one copy, and no temporary when
/// the array is C-contiguous).
pub(super) fn copy_array(
    py: Python<'_>,
    np: &NumPy,
    op: &str,
    value: &Bound<'_, PyAny>,
    result: &mut xla_ffi::ResultBuffer<'_, xla_ffi::AnyType>,
) -> Result<()> {
    let internal = |e: PyErr| Error::internal(format!("{TARGET}: op {op:?}: {e}"));
    if result.size_bytes() >= POOLED_MIN_BYTES {
        // Large results are fresh memory: fault them in 2 MiB pages, not 4 KiB ones.
        result.advise_huge_pages();
        // `ravel()` is a view of a C-contiguous array and a C-order copy of any other
        // (`reshape(-1)` keeps a strided 1-D array strided, which `view` refuses).
        let flat = value
            .call_method0(pyo3::intern!(py, "ravel"))
            .and_then(|f| f.call_method1(pyo3::intern!(py, "view"), (np.uint8.bind(py),)))
            .map_err(internal)?;
        return numpy_engine::copy_into_result(py, &flat, result).map_err(|e| with_op(op, e));
    }
    let bytes = value.call_method0(pyo3::intern!(py, "tobytes")).map_err(internal)?;
    let bytes = bytes.cast::<PyBytes>().map_err(|e| internal(e.into()))?.as_bytes();
    let dst = result.as_uninit_bytes()?;
    if bytes.len() != dst.len() {
        return Err(Error::invalid_argument(format!(
            "{TARGET}: op {op:?}: expected {} bytes for a result, got {}",
            dst.len(),
            bytes.len()
        )));
    }
    for (d, s) in dst.iter_mut().zip(bytes) {
        d.write(*s);
    }
    Ok(())
}

/// Copies the function's returned arrays into the results.
pub(super) fn store(
    py: Python<'_>,
    np: &NumPy,
    op: &str,
    returned: Bound<'_, PyAny>,
    results: &mut RemainingRets<'_>,
) -> Result<()> {
    let internal = |e: PyErr| Error::internal(format!("{TARGET}: op {op:?}: {e}"));
    let (code, payload): (u32, Bound<'_, PyAny>) = returned.extract().map_err(internal)?;
    if code != 0 {
        let message = match payload.extract::<String>() {
            Ok(m) => m,
            Err(_) => payload.str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
        };
        return Err(Error::new(ErrorCode::from_raw(code), format!("{TARGET}: {message}")));
    }
    let values: Vec<Bound<'_, PyAny>> = payload.extract().map_err(internal)?;
    if values.len() != results.len() {
        return Err(internal(pyo3::exceptions::PyValueError::new_err(format!(
            "{} values for {} results",
            values.len(),
            results.len()
        ))));
    }
    let ndarray = np.ndarray.bind(py);
    for (value, result) in values.iter().zip(results.as_mut_slice()) {
        // Only exact ndarrays (no subclass hooks); viewed as flat bytes, which any dtype allows.
        if !value.get_type().is(ndarray) {
            return Err(internal(pyo3::exceptions::PyTypeError::new_err(format!(
                "expected a numpy.ndarray, got {}",
                value.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            ))));
        }
        copy_array(py, np, op, value, result)?;
    }
    Ok(())
}

pub(super) fn with_op(op: &str, e: Error) -> Error {
    Error::new(e.code(), format!("{TARGET}: op {op:?}: {}", e.message()))
}
