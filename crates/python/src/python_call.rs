//! `xla_ffi_rs.python_call`: one CPU FFI target that runs Python functions.
//!
//! Python registers a callable with [`register`] and gets an integer key; an op
//! lowers to a custom call of this target with the key in its `callback`
//! attribute. When XLA compiles the program, the instantiate stage looks the key
//! up once per call site and keeps the entry as the call site's state ([`CallSite`]),
//! owned by the executable. On each call the handler takes the GIL (for real, also
//! on a thread whose own Python code is waiting for XLA:
//! [`crate::numpy_engine::with_interpreter`]) and calls `callable(operands, results, outputs)`:
//!
//! * `operands`: a tuple of read-only NumPy arrays holding **copies** of the
//!   operands (their memory is Python's: an array kept after the call stays valid,
//!   and keeps its values: a small copy is refilled by the next call only when
//!   nothing refers to it any more, see [`Reused`]);
//! * `results`: a tuple of `(shape, dtype)`, the results XLA expects;
//! * `outputs`: for a callable registered with `outputs=True`, a tuple of writable
//!   arrays of those shapes and dtypes to fill (Python's memory too), else `()`
//!   (also `()` when the first result has fewer elements than the registration's
//!   `outputs_min_elements`: a ufunc computes small results itself);
//!
//! with the shapes XLA gives (per shard under sharding). An op that needs no Python
//! wrapper (no static parameters or sharding) registers its function as `direct`
//! too, and the handler calls `function(*operands)` itself (`function(*operands,
//! *outputs)` for `takes_outputs=True`), checking and copying exact arrays here
//! (see [`Direct`]): one Python frame less per call, and no tuples to build and
//! take apart. An op whose function is a NumPy ufunc
//! without parameters registers it as `ufunc` too, and calls that get output
//! arrays first offer it [`crate::numpy_engine::call_ufunc`], which runs it on XLA's own
//! buffers where it can prove that no Python code sees them (else the copying path
//! below runs). No Python code ever sees
//! XLA's memory. Copies of buffers of 128 KiB or more live in flat `uint8` arrays
//! taken from a pool and given back after the call unless something the function
//! kept still refers to them (a fresh allocation that large is an `mmap`, and
//! unmapping it on every call would cost more than the copy).
//!
//! The callable returns `(0, arrays)` on success, one array per result, whose
//! bytes the handler copies into XLA's result buffers
//! ([`crate::numpy_engine::copy_into_result`]), or `(error_code, message)` for an
//! error that the handler hands to XLA (the Python side, `xla_ffi_rs.python_op`,
//! turns exceptions and wrong results into these).
//!
//! Keys: each key is new (never reused) and carries a number drawn once per
//! process, so a program lowered in another process (an exported or cached
//! artifact) finds no function instead of another one. [`unregister`] takes keys
//! out of the registry: the Python op does it when it is garbage collected. A
//! compiled program keeps its entries (so a computation still running on other
//! devices completes), and they are dropped with its executable; compiling a
//! program whose key is gone fails with `NOT_FOUND`.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyTuple};
use xla_ffi::{handler, Attr, DataType, Error, ErrorCode, RemainingArgs, RemainingRets, Result, State};

use crate::numpy_engine;

/// The FFI target name.
pub const TARGET: &str = "xla_ffi_rs.python_call";

/// One registered function: the callable and the op's name (for errors).
struct Entry {
    callable: Py<PyAny>,
    name: Arc<str>,
    /// Whether the callable takes output arrays (`takes_outputs=True`).
    outputs: bool,
    /// Output arrays are given only when the first result has at least this many
    /// elements (0: always); smaller calls get none (a ufunc computes those itself).
    outputs_min_elements: u64,
    /// The function to call directly, when the op needs no Python wrapper.
    direct: Option<Direct>,
    /// The function, when it is a NumPy ufunc called without parameters: run on
    /// XLA's own buffers when [`crate::numpy_engine::call_ufunc`] accepts the call
    /// (and output arrays are due), with no copy.
    ufunc: Option<Py<PyAny>>,
    /// The last call's copies of small operands, by operand index, for the next
    /// call to refill (see [`Reused`]); taken out while a call runs.
    reused: Mutex<Vec<Option<Reused>>>,
}

/// The copy of a small operand, kept for the next call of the same function: a
/// flat `uint8` array that owns its memory (`flat`) holding the operand's bytes,
/// and the read-only view of it of the operand's shape and dtype (`array`, of
/// `dims` and `dtype`) that the function gets. Making such an array costs more
/// than the function call itself at N = 1; refilling it costs one copy. It is
/// refilled only when nothing but this struct refers to either (their reference
/// counts are those measured when only this struct held them, `counts`): every
/// NumPy view, `memoryview` or buffer export of the operand refers to `array` or
/// to `flat` (the base of every view of an array that owns its memory), so an
/// array the function kept in any form keeps its values, and the next call makes
/// a new copy.
struct Reused {
    flat: Py<PyAny>,
    array: Py<PyAny>,
    counts: [isize; 2],
    dtype: DataType,
    dims: Vec<i64>,
}

impl Reused {
    /// A new copy of `b`'s bytes, of its shape and `dtype` (the NumPy dtype of `b`'s).
    fn new<'py>(
        py: Python<'py>,
        np: &NumPy,
        b: &xla_ffi::Buffer<'_, xla_ffi::AnyType>,
        bytes: &[u8],
        dtype: &Bound<'py, PyAny>,
    ) -> PyResult<Self> {
        let flat = np.empty.bind(py).call1((bytes.len(), np.uint8.bind(py)))?;
        fill(py, &flat, bytes)?;
        let array = flat
            .call_method1(pyo3::intern!(py, "view"), (dtype,))?
            .call_method1(pyo3::intern!(py, "reshape"), (PyTuple::new(py, b.dims())?,))?;
        array.call_method1(pyo3::intern!(py, "setflags"), (false,))?;
        let (flat, array) = (flat.unbind(), array.unbind());
        let mut reused = Reused { flat, array, counts: [0; 2], dtype: b.dtype(), dims: b.dims().to_vec() };
        reused.counts = reused.refcounts(py);
        Ok(reused)
    }

    fn refcounts(&self, py: Python<'_>) -> [isize; 2] {
        [numpy_engine::refcount(self.flat.bind(py)), numpy_engine::refcount(self.array.bind(py))]
    }

    /// Whether nothing but this struct refers to the array or its memory.
    fn unshared(&self, py: Python<'_>) -> bool {
        self.refcounts(py) == self.counts
    }

    /// Refills the copy with `b`'s bytes if it has `b`'s shape and element type and
    /// nothing else refers to it; returns whether it did.
    fn refill(&self, py: Python<'_>, b: &xla_ffi::Buffer<'_, xla_ffi::AnyType>, bytes: &[u8]) -> PyResult<bool> {
        if self.dtype != b.dtype() || self.dims.as_slice() != b.dims() || !self.unshared(py) {
            return Ok(false);
        }
        fill(py, self.flat.bind(py), bytes)?;
        Ok(true)
    }
}

/// Copies `bytes` into `flat`, a writable C-contiguous `uint8` array of that length.
fn fill(py: Python<'_>, flat: &Bound<'_, PyAny>, bytes: &[u8]) -> PyResult<()> {
    pyo3::buffer::PyBuffer::<u8>::get(flat)?.copy_from_slice(py, bytes)
}

/// A function the handler calls itself, `function(*operands)` (or, with
/// `outputs`, `function(*operands, *outputs)`: [`call_direct_outputs`]), with no
/// Python frame around it: an op without static parameters or sharding unit axes. Its result is checked and copied here when it is exactly what XLA
/// expects (exact `numpy.ndarray`s of the results' dtypes and shapes); anything
/// else (a list, a scalar, a wrong shape) and any exception go to
/// `settle(kind, value, extra)`, which returns what the registered callable would
/// have (`kind` 0: `value` is what the function returned and `extra` the results'
/// specs; 1: `value` is the exception and `extra` is `(specs, traceback)`).
struct Direct {
    function: Py<PyAny>,
    settle: Py<PyAny>,
    /// Whether the function returns one array (else a tuple, one per result).
    single: bool,
    /// Whether the function takes output arrays (`takes_outputs=True`): called as
    /// `function(*operands, *outputs)`, see [`call_direct_outputs`].
    outputs: bool,
}

/// Key -> function; keys are `process_tag << 32 | n` for n = 1, 2, ...
struct Registry {
    entries: HashMap<i64, Arc<Entry>>,
    next: i64,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn with_registry<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    // No code panics while holding the lock, but never let a poisoned lock stop calls.
    let mut guard = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(|| Registry { entries: HashMap::new(), next: 1 }))
}

/// A random 31-bit number, drawn once per process, in the high bits of every key.
fn process_tag() -> i64 {
    static TAG: OnceLock<i64> = OnceLock::new();
    *TAG.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u128(t.as_nanos());
        }
        (h.finish() & 0x7fff_ffff) as i64 | 1
    })
}

/// `register(fn, name, outputs=False, outputs_min_elements=0, direct=None, ufunc=None, direct_outputs=False) -> int`:
/// a new key under which the handler calls `fn`; `name` is the op's name, for error
/// messages; with `outputs`, `fn` gets output arrays to fill when the first result
/// has at least `outputs_min_elements` elements (else an empty tuple). `direct`,
/// `(function, settle, single)`, makes calls that get no output arrays call
/// `function(*operands)` instead (see [`Direct`]). `ufunc`, the op's function when
/// it is a NumPy ufunc called without parameters, makes calls that get output
/// arrays try it on XLA's buffers first ([`crate::numpy_engine::call_ufunc`]). With
/// `direct_outputs`, `direct`'s function takes output arrays, and every call that
/// gets them calls `function(*operands, *outputs)` (see [`call_direct_outputs`]).
#[pyfunction]
#[pyo3(signature = (callable, name, outputs = false, outputs_min_elements = 0, direct = None, ufunc = None, direct_outputs = false))]
pub fn register(
    callable: Bound<'_, PyAny>,
    name: String,
    outputs: bool,
    outputs_min_elements: u64,
    direct: Option<(Bound<'_, PyAny>, Bound<'_, PyAny>, bool)>,
    ufunc: Option<Bound<'_, PyAny>>,
    direct_outputs: bool,
) -> PyResult<i64> {
    let not_callable = |what: &str, obj: &Bound<'_, PyAny>| -> PyResult<()> {
        if obj.is_callable() {
            return Ok(());
        }
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "python_call.register expects {what} to be callable, got {}",
            obj.get_type().name()?
        )))
    };
    not_callable("the function", &callable)?;
    let direct = match direct {
        Some((function, settle, single)) => {
            not_callable("direct's function", &function)?;
            not_callable("direct's settle", &settle)?;
            Some(Direct { function: function.unbind(), settle: settle.unbind(), single, outputs: direct_outputs })
        }
        None => None,
    };
    let callable = callable.unbind();
    let ufunc = ufunc.map(Bound::unbind);
    let name: Arc<str> = name.into();
    with_registry(|reg| {
        if reg.next > u32::MAX as i64 {
            return Err(pyo3::exceptions::PyOverflowError::new_err("python_call.register: out of keys"));
        }
        let key = process_tag() << 32 | reg.next;
        reg.next += 1;
        reg.entries.insert(
            key,
            Arc::new(Entry {
                callable,
                name,
                outputs,
                outputs_min_elements,
                direct,
                ufunc,
                reused: Mutex::new(Vec::new()),
            }),
        );
        Ok(key)
    })
}

/// `unregister(keys)`: drops the functions under `keys` (unknown keys are ignored).
#[pyfunction]
pub fn unregister(keys: Vec<i64>) {
    // Drop the callables after the lock is released: dropping one may run Python
    // code (a `__del__`) that calls an op, which takes the lock again.
    let removed: Vec<Arc<Entry>> = with_registry(|reg| keys.iter().filter_map(|k| reg.entries.remove(k)).collect());
    drop(removed);
}

/// `registered() -> int`: how many callables the registry holds.
#[pyfunction]
pub fn registered() -> usize {
    with_registry(|reg| reg.entries.len())
}

/// The entry under `key` (shared: an `unregister` leaves it alive for the call sites
/// that hold it; a `Py` it holds that is dropped without the GIL is released at
/// the next call into Python, by PyO3's reference pool).
fn lookup(key: i64) -> Result<Arc<Entry>> {
    with_registry(|reg| reg.entries.get(&key).cloned()).ok_or_else(|| {
        let why = if key >> 32 == process_tag() {
            "its op was garbage collected"
        } else {
            "the program was lowered in another process (python ops cannot be exported or \
             loaded from a compilation cache written by another process)"
        };
        Error::new(ErrorCode::NotFound, format!("{TARGET}: no Python function is registered under key {key}: {why}"))
    })
}

/// Buffers at least this large are copied into pooled NumPy arrays (reused while
/// no array the function kept refers to them): a fresh allocation this large is an
/// `mmap`, and unmapping it on every call costs more than the copy.
const POOLED_MIN_BYTES: usize = 128 << 10;
/// The most bytes the pool keeps.
const POOL_MAX_BYTES: usize = 256 << 20;

/// Flat `uint8` arrays of the copies of large buffers, free for reuse when only
/// the pool refers to them. Touched with the GIL held.
static POOL: Mutex<Vec<Py<PyAny>>> = Mutex::new(Vec::new());

fn pool() -> std::sync::MutexGuard<'static, Vec<Py<PyAny>>> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A flat `uint8` array of `n` bytes that nothing else refers to: from the pool, or new.
fn flat_array<'py>(py: Python<'py>, np: &NumPy, n: usize) -> PyResult<Bound<'py, PyAny>> {
    if n >= POOLED_MIN_BYTES {
        let mut pool = pool();
        let found = pool.iter().position(|a| {
            let a = a.bind(py);
            numpy_engine::refcount(a) == 1 && a.len().ok() == Some(n)
        });
        if let Some(i) = found {
            return Ok(pool.swap_remove(i).into_bound(py));
        }
    }
    np.empty.bind(py).call1((n, np.uint8.bind(py)))
}

/// `flat` (a flat `uint8` array of exactly the buffer's bytes, from [`flat_array`])
/// as an array of `dtype` and shape `dims`: `flat.view(dtype).reshape(dims)`, with
/// no `reshape` for one dimension, where the view already has that shape (one
/// element per `itemsize` bytes, which is the buffer's element count).
fn typed_view<'py>(
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

/// Gives `flat` back to the pool if nothing but this reference holds it.
fn recycle(py: Python<'_>, flat: Bound<'_, PyAny>) {
    let n = flat.len().unwrap_or(0);
    if n < POOLED_MIN_BYTES || numpy_engine::refcount(&flat) != 1 {
        return;
    }
    let mut pool = pool();
    let mut total: usize = pool.iter().map(|a| a.bind(py).len().unwrap_or(0)).sum::<usize>() + n;
    while total > POOL_MAX_BYTES && !pool.is_empty() {
        total -= pool[0].bind(py).len().unwrap_or(0);
        // Dropping a plain uint8 array runs no Python code.
        pool.remove(0);
    }
    if total <= POOL_MAX_BYTES {
        pool.push(flat.unbind());
    }
}

/// `numpy.ndarray`, `numpy.uint8` and the NumPy dtype of each XLA element type, looked up once.
struct NumPy {
    ndarray: Py<PyAny>,
    empty: Py<PyAny>,
    uint8: Py<PyAny>,
    dtypes: Vec<(DataType, Py<PyAny>)>,
}

static NUMPY: PyOnceLock<NumPy> = PyOnceLock::new();

/// The one-byte (or wider) element types of `ml_dtypes` (a dependency of jax), by
/// their `ml_dtypes` names. Sub-byte types (int4, float4) are not here: their
/// packing in XLA's buffers is not NumPy's one element per byte.
const ML_DTYPES: [(DataType, &str); 9] = [
    (DataType::BF16, "bfloat16"),
    (DataType::F8E5M2, "float8_e5m2"),
    (DataType::F8E4M3FN, "float8_e4m3fn"),
    (DataType::F8E4M3B11FNUZ, "float8_e4m3b11fnuz"),
    (DataType::F8E5M2FNUZ, "float8_e5m2fnuz"),
    (DataType::F8E4M3FNUZ, "float8_e4m3fnuz"),
    (DataType::F8E4M3, "float8_e4m3"),
    (DataType::F8E3M4, "float8_e3m4"),
    (DataType::F8E8M0FNU, "float8_e8m0fnu"),
];

// Every dtype of the notation but `token` has a NumPy dtype: NumPy's own, or `ml_dtypes`'.
const _: () = {
    let mut i = 0;
    while i < xla_ffi_rules::DTYPES.len() {
        let code = xla_ffi_rules::DTYPES[i].1;
        let mut found = code == DataType::TOKEN.0;
        let mut j = 0;
        while j < numpy_engine::NUMPY_DTYPES.len() {
            found |= numpy_engine::NUMPY_DTYPES[j].0 == code;
            j += 1;
        }
        j = 0;
        while j < ML_DTYPES.len() {
            found |= ML_DTYPES[j].0 .0 == code;
            j += 1;
        }
        assert!(found, "a dtype of xla_ffi_rules::DTYPES has no NumPy dtype here");
        i += 1;
    }
};

fn numpy(py: Python<'_>) -> PyResult<&NumPy> {
    NUMPY.get_or_try_init(py, || {
        let np = py.import("numpy")?;
        let dtype = np.getattr("dtype")?;
        let mut dtypes = Vec::new();
        for t in numpy_engine::NUMPY_DTYPES {
            dtypes.push((t, dtype.call1((t.name(),))?.unbind()));
        }
        // An older ml_dtypes may lack some types: those stay unsupported.
        let ml = py.import("ml_dtypes")?;
        for (t, name) in ML_DTYPES {
            if let Ok(d) = ml.getattr(name).and_then(|d| dtype.call1((d,))) {
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
fn np_dtype<'py>(
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

/// How many calls of the handler are running, on any thread. Each holds one of
/// XLA:CPU's in-flight computation slots (32 per device) while its function runs, so
/// the Python side refuses an eager call made inside one of them that would wait for
/// a slot none of them frees.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// How many calls of the handler are running on this thread (nested ones).
    static HERE: Cell<usize> = const { Cell::new(0) };
}

/// Counts one running call in `ACTIVE` and `HERE` while it lives.
struct Running;

impl Running {
    fn start() -> Self {
        // SeqCst, paired with `close`: either `close` sees this call, or the call sees `CLOSED`.
        ACTIVE.fetch_add(1, Ordering::SeqCst);
        HERE.with(|h| h.set(h.get() + 1));
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        HERE.with(|h| h.set(h.get() - 1));
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Set when the interpreter starts to exit (see [`close`]): calls from then on
/// fail at once, without touching Python.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// `close()`: called at exit (`atexit`, before the interpreter finalizes): calls
/// that start from now on fail with `UNAVAILABLE` without calling Python, and this
/// waits, without the GIL, for the calls running on other threads to return. A
/// program still running on some devices when the main thread exits (the caller
/// never waited for it) calls Python functions on XLA's threads; one that took or
/// waited for the GIL while the interpreter finalized had its thread ended by
/// Python (`pthread_exit`), and the unwinding through XLA's frames aborted the
/// process.
///
/// The wait has no time limit (a function may run for long), but Ctrl-C ends it:
/// signals are checked every 100 ms, and `KeyboardInterrupt` is raised from here.
#[pyfunction]
pub fn close(py: Python<'_>) -> PyResult<()> {
    CLOSED.store(true, Ordering::SeqCst);
    let here = HERE.with(Cell::get);
    loop {
        let done = py.detach(|| {
            for _ in 0..100 {
                if ACTIVE.load(Ordering::SeqCst) <= here {
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            false
        });
        if done {
            return Ok(());
        }
        py.check_signals()?;
    }
}

/// `active_calls() -> (int, int)`: how many calls of the handler are running now, on
/// any thread and on the calling thread.
#[pyfunction]
pub fn active_calls() -> (usize, usize) {
    (ACTIVE.load(Ordering::Relaxed), HERE.with(Cell::get))
}

/// Runs `entry`'s callable on this call's buffers.
fn call(entry: &Entry, operands: &RemainingArgs<'_>, results: &mut RemainingRets<'_>) -> Result<()> {
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

fn call_attached(
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
    for flat in flats {
        recycle(py, flat);
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
fn result_specs<'py>(
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
fn call_direct(
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
fn call_direct_outputs<'py>(
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
fn store_exact(
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
fn same_shape(py: Python<'_>, value: &Bound<'_, PyAny>, dims: &[i64]) -> bool {
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
fn copy_array(
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
fn store(
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

fn with_op(op: &str, e: Error) -> Error {
    Error::new(e.code(), format!("{TARGET}: op {op:?}: {}", e.message()))
}

/// The state of one call site: the function registered under its `callback`
/// attribute when the program was compiled. The executable owns it (XLA frees it
/// with the executable), so a program keeps the functions it calls alive: a
/// computation still running when its op is garbage collected (on other devices,
/// after the caller stopped waiting) completes instead of failing.
pub struct CallSite(Arc<Entry>);

xla_ffi::state_type!(CallSite);

/// Looks up the function under the `callback` attribute once per call site, when
/// XLA compiles the program (`NOT_FOUND` if its op is gone).
#[handler(target = "xla_ffi_rs.python_call", stage = instantiate)]
pub fn xla_ffi_rs_python_call_instantiate(callback: Attr<i64>) -> Result<CallSite> {
    lookup(*callback).map(CallSite)
}

/// Calls the call site's Python function. The `callback` attribute is not bound
/// here: the instantiate stage consumed it.
#[handler(target = "xla_ffi_rs.python_call")]
pub fn xla_ffi_rs_python_call(
    operands: RemainingArgs,
    mut results: RemainingRets,
    site: State<CallSite>,
) -> Result<()> {
    call(&site.0, &operands, &mut results)
}
