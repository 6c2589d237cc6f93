//! XLA's intra-op CPU thread pool, as a scoped parallel-for.
//!
//! [`ThreadPool::for_each`] runs `f(0), f(1), ..., f(n-1)` on the calling thread and
//! on XLA's own pool (`XLA_FFI_ThreadPool_Schedule`), and returns when all are done.
//! It never creates threads of its own, so it never oversubscribes XLA's pool.
//!
//! The calling thread claims tasks too, so the call finishes even if the pool never
//! runs what was scheduled (all its threads busy with other handlers, say). A pool
//! task that starts after everything is done finds no task to claim and touches only
//! its reference-counted bookkeeping, never the (by then gone) closure.

use core::ffi::c_void;
use core::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use xla_ffi_sys as sys;

use crate::error::{Error, Result};
use crate::frame::{api_slot, Frame};
use crate::panic::{drop_payload, panic_message};

/// XLA's CPU thread pool for this call. Get it from
/// [`Context::thread_pool`](crate::Context::thread_pool).
#[derive(Clone, Copy)]
pub struct ThreadPool<'f> {
    frame: &'f Frame<'f>,
    target: &'static str,
}

/// The job, with its lifetime erased; valid while `done < n` (see module docs).
type Job = *const (dyn Fn(usize) + Sync);

struct Shared {
    job: Job,
    n: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    panic: Mutex<Option<String>>,
    /// Guards the waits on `cv` for `done` to grow.
    finished: Mutex<()>,
    cv: Condvar,
}

// SAFETY: `job` points to a `Sync` closure and is only called while the owning
// `for_each` waits for it; everything else is atomics and mutexes.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

/// Counts a claimed task as done when dropped, even while unwinding, so that
/// `for_each` never waits for a task that will not finish.
struct CountDone<'a>(&'a Shared);

impl Drop for CountDone<'_> {
    fn drop(&mut self) {
        let s = self.0;
        s.done.fetch_add(1, Ordering::AcqRel);
        // Wake the waiter on every completion: it waits for the claimed tasks,
        // which are all of them unless it is unwinding (see `WaitForClaimed`).
        let _f = s.finished.lock().unwrap_or_else(|e| e.into_inner());
        s.cv.notify_all();
    }
}

/// Runs `f`, and turns a panic into its message. The payload is dropped with
/// [`drop_payload`]: its `Drop` is user code that may panic again.
fn catch_message(f: impl FnOnce()) -> Option<String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => None,
        Err(payload) => {
            let msg = catch_unwind(AssertUnwindSafe(|| panic_message(&*payload)))
                .unwrap_or_else(|_| "panic while formatting a panic".into());
            drop_payload(payload);
            Some(msg)
        }
    }
}

impl Shared {
    /// Claims and runs tasks until none are left. Never unwinds.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            if i >= self.n {
                return;
            }
            let _count = CountDone(self);
            // SAFETY: `i < n` was claimed, so `done` stays below the number of
            // claimed tasks until `_count` drops, and `for_each` keeps the closure
            // alive until every claimed task is counted.
            let job = unsafe { &*self.job };
            if let Some(msg) = catch_message(|| job(i)) {
                let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(msg);
            }
        }
    }
}

/// Waits, when dropped (also while unwinding), until every task claimed so far
/// is done, after claiming all the rest so that none starts later. This is what
/// keeps the borrowed closure alive for as long as a pool thread may call it.
struct WaitForClaimed<'a>(&'a Shared);

impl Drop for WaitForClaimed<'_> {
    fn drop(&mut self) {
        let s = self.0;
        let claimed = s.next.fetch_max(s.n, Ordering::AcqRel).min(s.n);
        let mut f = s.finished.lock().unwrap_or_else(|e| e.into_inner());
        while s.done.load(Ordering::Acquire) < claimed {
            f = s.cv.wait(f).unwrap_or_else(|e| e.into_inner());
        }
    }
}

unsafe extern "C" fn run_task(data: *mut c_void) {
    // SAFETY: `data` is an `Arc<Shared>` leaked for this task by `for_each`.
    let shared = unsafe { Arc::from_raw(data as *const Shared) };
    // `work` does not unwind; this is a second line of defence (and contains any
    // panic of a payload's Drop inside `extern "C"`).
    let _ = catch_message(|| shared.work());
}

impl<'f> ThreadPool<'f> {
    pub(crate) fn new(frame: &'f Frame<'f>, target: &'static str) -> Self {
        ThreadPool { frame, target }
    }

    /// The number of threads in XLA's pool, or 1 where there is none (GPU handlers).
    pub fn num_threads(&self) -> usize {
        let api = self.frame.api;
        let Some(f) = api_slot!(api, XLA_FFI_ThreadPool_NumThreads) else {
            return 1;
        };
        let mut n: i64 = 0;
        let mut args = sys::XLA_FFI_ThreadPool_NumThreads_Args {
            struct_size: sys::XLA_FFI_ThreadPool_NumThreads_Args_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            ctx: self.frame.ctx,
            num_threads: &mut n,
        };
        // SAFETY: runtime function with fully initialised args; `n` outlives the call.
        let err = unsafe { f(&mut args) };
        match api.take_error(err) {
            Ok(()) => usize::try_from(n).unwrap_or(1).max(1),
            Err(_) => 1,
        }
    }

    /// Runs `f(i)` for every `i` in `0..n` on this thread and XLA's pool; returns when
    /// all have run. A panic in `f` becomes an `INTERNAL` error.
    ///
    /// This thread and up to `num_threads() - 1` helpers scheduled on XLA's pool (one
    /// scheduling call each) claim tasks one at a time from a shared counter, so a
    /// task costs one atomic increment. A helper may start late or not at all (the
    /// pool may be busy); split work into a few tasks per thread (contiguous row
    /// blocks, say) so that the threads finish close together.
    pub fn for_each(&self, n: usize, f: impl Fn(usize) + Sync) -> Result<()> {
        let helpers = self.num_threads().min(n).saturating_sub(1);
        if helpers == 0 {
            // No pool, or one task: run inline. Like the pooled path, every task runs
            // even if one panics, and the first panic is reported.
            let mut panicked = None;
            for i in 0..n {
                if let Some(msg) = catch_message(|| f(i)) {
                    panicked.get_or_insert(msg);
                }
            }
            return match panicked {
                Some(msg) => Err(Error::internal(format!("{}: task panicked: {msg}", self.target))),
                None => Ok(()),
            };
        }
        let job: &(dyn Fn(usize) + Sync) = &f;
        // SAFETY: erases the closure's lifetime. It is only called for claimed tasks,
        // and this function does not return until every claimed task is done.
        let job: Job = unsafe { core::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(job) };
        let shared = Arc::new(Shared {
            job,
            n,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            panic: Mutex::new(None),
            finished: Mutex::new(()),
            cv: Condvar::new(),
        });
        // From here on, leaving this function (normally or by unwinding) first
        // waits for every task a pool thread has claimed.
        let wait = WaitForClaimed(&shared);
        let api = self.frame.api;
        if let Some(schedule) = api_slot!(api, XLA_FFI_ThreadPool_Schedule) {
            for _ in 0..helpers {
                let data = Arc::into_raw(shared.clone()) as *mut c_void;
                let mut args = sys::XLA_FFI_ThreadPool_Schedule_Args {
                    struct_size: sys::XLA_FFI_ThreadPool_Schedule_Args_STRUCT_SIZE as usize,
                    extension_start: core::ptr::null_mut(),
                    ctx: self.frame.ctx,
                    task: Some(run_task),
                    data,
                };
                // SAFETY: runtime function; `run_task` takes ownership of `data`.
                let err = unsafe { schedule(&mut args) };
                if api.take_error(err).is_err() {
                    // Not scheduled: take the reference back and stop scheduling.
                    // SAFETY: `data` came from `Arc::into_raw` just above and was not used.
                    drop(unsafe { Arc::from_raw(data as *const Shared) });
                    break;
                }
            }
        }
        shared.work();
        drop(wait);
        let panicked = shared.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        match panicked {
            Some(msg) => Err(Error::internal(format!("{}: task panicked: {msg}", self.target))),
            None => Ok(()),
        }
    }
}

/// A mutable slice cut into disjoint parts that pool tasks take by index, each once.
///
/// This is how a [`ThreadPool::for_each`] task gets its own piece of an output
/// without `unsafe`:
///
/// ```
/// use xla_ffi::Parts;
/// let mut out = vec![0u32; 10];
/// let parts = Parts::new(&mut out, 4); // [0..4], [4..8], [8..10]
/// assert_eq!(parts.len(), 3);
/// for i in 0..parts.len() {
///     let (start, chunk) = parts.take(i);
///     for (k, v) in chunk.iter_mut().enumerate() { *v = (start + k) as u32; }
/// }
/// assert_eq!(out, (0..10).collect::<Vec<u32>>());
/// ```
pub struct Parts<'a, T> {
    ptr: *mut T,
    len: usize,
    chunk: usize,
    /// Bit `i` is set once part `i` has been taken. One word inline (up to 64
    /// parts, no allocation: the common case costs nothing per call), else boxed.
    taken: Taken,
    _data: PhantomData<&'a mut [T]>,
}

enum Taken {
    Inline(AtomicU64),
    Boxed(Box<[AtomicU64]>),
}

// SAFETY: a `Parts` hands each disjoint part out at most once (the `taken` bit is
// set atomically), so sharing it across threads moves `&mut [T]`s to other threads:
// the same requirement as sending a `&mut [T]`, which is `T: Send`.
unsafe impl<T: Send> Sync for Parts<'_, T> {}
// SAFETY: as above; a `Parts` owns nothing but the exclusive borrow it was made from.
unsafe impl<T: Send> Send for Parts<'_, T> {}

impl<'a, T: Send> Parts<'a, T> {
    /// Cuts `data` into parts of `chunk` elements (the last may be shorter).
    /// A `chunk` of 0 is treated as 1.
    pub fn new(data: &'a mut [T], chunk: usize) -> Self {
        let chunk = chunk.max(1);
        let n = data.len().div_ceil(chunk);
        let taken = if n <= 64 {
            Taken::Inline(AtomicU64::new(0))
        } else {
            Taken::Boxed((0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect())
        };
        Parts { ptr: data.as_mut_ptr(), len: data.len(), chunk, taken, _data: PhantomData }
    }
    /// The number of parts.
    pub fn len(&self) -> usize {
        self.len.div_ceil(self.chunk)
    }
    /// Whether there are no parts (an empty slice).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Takes part `i`: its starting offset and its elements.
    ///
    /// # Panics
    /// If `i` is out of range or the part was already taken (a bug in the caller;
    /// inside a handler the panic becomes an `INTERNAL` error).
    pub fn take(&self, i: usize) -> (usize, &'a mut [T]) {
        let n = self.len();
        assert!(i < n, "part {i} out of range: there are {n} parts");
        let word = match &self.taken {
            Taken::Inline(w) => w,
            Taken::Boxed(ws) => &ws[i / 64],
        };
        let bit = 1u64 << (i % 64);
        if word.fetch_or(bit, Ordering::AcqRel) & bit != 0 {
            panic!("part {i} taken twice");
        }
        let start = i * self.chunk;
        let len = self.chunk.min(self.len - start);
        // SAFETY: `[start, start + len)` lies inside the slice `Parts::new` borrowed
        // exclusively for `'a`; parts are disjoint, and the atomic bit above hands
        // out each one at most once, so no two `&mut` overlap.
        (start, unsafe { core::slice::from_raw_parts_mut(self.ptr.add(start), len) })
    }
}

impl core::fmt::Debug for ThreadPool<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ThreadPool").field("target", &self.target).finish_non_exhaustive()
    }
}

impl<T> core::fmt::Debug for Parts<'_, T> {
    /// The element count and part size (not the elements: parts may be out on other threads).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Parts").field("len", &self.len).field("chunk", &self.chunk).finish_non_exhaustive()
    }
}
