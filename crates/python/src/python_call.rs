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
//! program whose key is gone fails with `NOT_FOUND`. The pooled copies that an
//! unregistered function's calls gave back are dropped with it.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use xla_ffi::{handler, Attr, DataType, Error, ErrorCode, RemainingArgs, RemainingRets, Result, State};

use crate::numpy_engine;

mod arrays;
mod call;

use arrays::NumPy;
use call::call;

/// The FFI target name.
pub const TARGET: &str = "xla_ffi_rs.python_call";

/// One registered function: the callable and the op's name (for errors).
struct Entry {
    callable: Py<PyAny>,
    name: Arc<str>,
    /// The key it is registered under, and whether it still is (its pooled copies
    /// are dropped when it is unregistered, and its calls pool none after that).
    key: i64,
    registered: AtomicBool,
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
/// `outputs`, `function(*operands, *outputs)`: [`call::call_direct_outputs`]), with no
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
    /// `function(*operands, *outputs)`, see [`call::call_direct_outputs`].
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
/// gets them calls `function(*operands, *outputs)` (see [`call::call_direct_outputs`]).
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
                key,
                registered: AtomicBool::new(true),
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

/// `unregister(keys)`: drops the functions under `keys` (unknown keys are ignored)
/// and the pooled copies their calls gave back.
#[pyfunction]
pub fn unregister(keys: Vec<i64>) {
    // Drop the callables after the lock is released: dropping one may run Python
    // code (a `__del__`) that calls an op, which takes the lock again.
    let removed: Vec<Arc<Entry>> = with_registry(|reg| keys.iter().filter_map(|k| reg.entries.remove(k)).collect());
    for entry in &removed {
        entry.registered.store(false, Ordering::SeqCst);
    }
    arrays::release(&keys);
    drop(removed);
}

/// `pooled_bytes() -> int`: how many bytes the pool of large copies holds (for leak checks).
#[pyfunction]
pub fn pooled_bytes(py: Python<'_>) -> usize {
    arrays::pooled_bytes(py)
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

/// `forked()`: called in the child process after `os.fork()` (the Python side
/// registers it with `os.register_at_fork`). Only the forking thread lives on in
/// the child, so of the calls running in the parent just this thread's own are
/// running here: `ACTIVE` is set to them. A child forked while a call ran on
/// another thread kept it counted, and its `close()` at exit waited for it forever.
#[pyfunction]
pub fn forked() {
    ACTIVE.store(HERE.with(Cell::get), Ordering::SeqCst);
}

/// `active_calls() -> (int, int)`: how many calls of the handler are running now, on
/// any thread and on the calling thread.
#[pyfunction]
pub fn active_calls() -> (usize, usize) {
    (ACTIVE.load(Ordering::Relaxed), HERE.with(Cell::get))
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
