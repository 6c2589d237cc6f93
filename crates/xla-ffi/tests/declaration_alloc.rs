//! The declared rules' check allocates nothing on a call that fits: the same call
//! costs as many allocations with the rules as without them (after the first call,
//! which parses the rules once). Its own test binary, for its global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use xla_ffi::testing::{Arg, AttrArg, CallBuilder};
use xla_ffi::{handler, AnyFloat, Attr, Buffer, HandlerDescriptor, Result, ResultBuffer};

/// Counts the allocations of the current thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const-initialized
// thread-local without a destructor, so touching it never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, that is from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[handler(
    target = "alloc.ruled",
    shapes = "...b ...n, ...n -> ...b ...n, ...b",
    dtypes = "X, W -> promote(X, W), acc(X, W)"
)]
fn ruled(
    x: Buffer<AnyFloat>,
    w: Buffer<AnyFloat>,
    y: ResultBuffer<AnyFloat>,
    r: ResultBuffer<AnyFloat>,
    eps: Attr<f64>,
) -> Result<()> {
    let _ = (x, w, y, r, eps);
    Ok(())
}

#[handler(target = "alloc.plain")]
fn plain(
    x: Buffer<AnyFloat>,
    w: Buffer<AnyFloat>,
    y: ResultBuffer<AnyFloat>,
    r: ResultBuffer<AnyFloat>,
    eps: Attr<f64>,
) -> Result<()> {
    let _ = (x, w, y, r, eps);
    Ok(())
}

/// The allocations of one run of `h` on a fitting call (the frame built before counting).
fn allocations(h: HandlerDescriptor) -> usize {
    let mut call = CallBuilder::new()
        .arg(Arg::zeros::<f32>(&[2, 3, 4]))
        .arg(Arg::zeros::<f32>(&[3, 4]))
        .ret(Arg::zeros::<f32>(&[2, 3, 4]))
        .ret(Arg::zeros::<f32>(&[2]))
        .attr("eps", AttrArg::scalar(1e-6f64));
    call.run(h).unwrap();
    let before = ALLOCATIONS.with(Cell::get);
    call.run(h).unwrap();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn a_fitting_call_allocates_no_more_with_rules() {
    assert_eq!(allocations(RULED), allocations(PLAIN));
}
