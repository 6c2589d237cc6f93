//! The NumPy side of the `python_call` target: the `numpy` objects looked up once
//! per interpreter, the dtypes of XLA's element types (`ml_dtypes` for the ones
//! NumPy lacks), and the pool of flat `uint8` arrays that hold the copies of large
//! buffers.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;
use xla_ffi::{DataType, Error, Result};

use super::TARGET;

use crate::numpy_engine;

/// Buffers at least this large are copied into pooled NumPy arrays (reused while
/// no array the function kept refers to them): a fresh allocation this large is an
/// `mmap`, and unmapping it on every call costs more than the copy.
pub(super) const POOLED_MIN_BYTES: usize = 128 << 10;
/// The most bytes the pool keeps.
pub(super) const POOL_MAX_BYTES: usize = 256 << 20;

/// Flat `uint8` arrays of the copies of large buffers, free for reuse when only
/// the pool refers to them, each with the registry key of the function whose call
/// gave it back: they are dropped when that function is unregistered (its op was
/// freed, [`release`]), so the pool holds memory only for ops that live (a process
/// that made and dropped ops kept up to `POOL_MAX_BYTES` of their copies for good).
/// Any call may take any array. Touched with the GIL held.
pub(super) static POOL: Mutex<Vec<(Py<PyAny>, i64)>> = Mutex::new(Vec::new());

pub(super) fn pool() -> std::sync::MutexGuard<'static, Vec<(Py<PyAny>, i64)>> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A flat `uint8` array of `n` bytes that nothing else refers to: from the pool, or new.
pub(super) fn flat_array<'py>(py: Python<'py>, np: &NumPy, n: usize) -> PyResult<Bound<'py, PyAny>> {
    if n >= POOLED_MIN_BYTES {
        let mut pool = pool();
        let found = pool.iter().position(|(a, _)| {
            let a = a.bind(py);
            numpy_engine::refcount(a) == 1 && a.len().ok() == Some(n)
        });
        if let Some(i) = found {
            return Ok(pool.swap_remove(i).0.into_bound(py));
        }
    }
    np.empty.bind(py).call1((n, np.uint8.bind(py)))
}

/// `flat` (a flat `uint8` array of exactly the buffer's bytes, from [`flat_array`])
/// as an array of `dtype` and shape `dims`: `flat.view(dtype).reshape(dims)`, with
/// no `reshape` for one dimension, where the view already has that shape (one
/// element per `itemsize` bytes, which is the buffer's element count).
pub(super) fn typed_view<'py>(
    py: Python<'py>,
    flat: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyAny>,
    dims: &[i64],
) -> PyResult<Bound<'py, PyAny>> {
    let view = flat.call_method1(pyo3::intern!(py, "view"), (dtype,))?;
    if dims.len() == 1 {
        return Ok(view);
    }
    view.call_method1(pyo3::intern!(py, "reshape"), (PyTuple::new(py, dims)?,))
}

/// Gives `flat` back to the pool, as the array of the function registered under
/// `owner`, if nothing but this reference holds it and `owner` is still registered
/// (`registered`; a program can outlive its op, and its calls then keep nothing).
pub(super) fn recycle(py: Python<'_>, flat: Bound<'_, PyAny>, owner: i64, registered: bool) {
    let n = flat.len().unwrap_or(0);
    if n < POOLED_MIN_BYTES || numpy_engine::refcount(&flat) != 1 || !registered {
        return;
    }
    let mut pool = pool();
    let mut total: usize = pool.iter().map(|(a, _)| a.bind(py).len().unwrap_or(0)).sum::<usize>() + n;
    while total > POOL_MAX_BYTES && !pool.is_empty() {
        total -= pool[0].0.bind(py).len().unwrap_or(0);
        // Dropping a plain uint8 array runs no Python code.
        pool.remove(0);
    }
    if total <= POOL_MAX_BYTES {
        pool.push((flat.unbind(), owner));
    }
}

/// Drops the pooled arrays given back by the functions under `keys` (unregistered:
/// their ops were freed). Called with the GIL held; dropping a plain `uint8` array
/// runs no Python code, and they are dropped after the lock is released all the same.
pub(super) fn release(keys: &[i64]) {
    let dropped: Vec<(Py<PyAny>, i64)> = {
        let mut pool = pool();
        let (gone, kept) = std::mem::take(&mut *pool).into_iter().partition(|(_, k)| keys.contains(k));
        *pool = kept;
        gone
    };
    drop(dropped);
}

/// How many bytes the pool holds now (for leak checks).
pub(super) fn pooled_bytes(py: Python<'_>) -> usize {
    pool().iter().map(|(a, _)| a.bind(py).len().unwrap_or(0)).sum()
}

/// `numpy.ndarray`, `numpy.uint8` and the NumPy dtype of each XLA element type, looked up once.
pub(super) struct NumPy {
    pub(super) ndarray: Py<PyAny>,
    pub(super) empty: Py<PyAny>,
    pub(super) uint8: Py<PyAny>,
    dtypes: Vec<(DataType, Py<PyAny>)>,
}

pub(super) static NUMPY: PyOnceLock<NumPy> = PyOnceLock::new();

pub(super) fn numpy(py: Python<'_>) -> PyResult<&NumPy> {
    NUMPY.get_or_try_init(py, || {
        let np = py.import("numpy")?;
        let dtype = np.getattr("dtype")?;
        let mut dtypes = Vec::new();
        for t in numpy_engine::NUMPY_DTYPES {
            dtypes.push((t, dtype.call1((t.name(),))?.unbind()));
        }
        // An older ml_dtypes may lack some types: those stay unsupported.
        let ml = py.import("ml_dtypes")?;
        for t in numpy_engine::ML_DTYPES {
            if let Ok(d) = ml.getattr(t.name()).and_then(|d| dtype.call1((d,))) {
                dtypes.push((t, d.unbind()));
            }
        }
        Ok(NumPy {
            ndarray: np.getattr("ndarray")?.unbind(),
            empty: np.getattr("empty")?.unbind(),
            uint8: np.getattr("uint8")?.unbind(),
            dtypes,
        })
    })
}

/// The NumPy dtype of `role` `i` ("operand", "result"), or an error naming it.
pub(super) fn np_dtype<'py>(
    py: Python<'py>,
    np: &NumPy,
    op: &str,
    role: &str,
    i: usize,
    dtype: DataType,
) -> Result<Bound<'py, PyAny>> {
    np.dtypes.iter().find(|(t, _)| *t == dtype).map(|(_, d)| d.bind(py).clone()).ok_or_else(|| {
        Error::invalid_argument(format!(
            "{TARGET}: op {op:?}: {role} {i} has element type {dtype}, which python_op does not support \
             (NumPy has no such dtype, or it is packed below one byte per element)"
        ))
    })
}
