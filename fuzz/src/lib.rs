//! Shared pieces of the fuzz targets: generators of described frames and
//! attributes (from libFuzzer's bytes), and a set of handler signatures whose
//! bodies touch every element of every view they get.
//!
//! The invariants the targets check:
//! * no crash, no sanitizer report, no panic escaping (the handler symbol returns);
//! * a rejected call's error message starts with the target name, and no handler
//!   or decoder panicked (a panic would show as "panicked");
//! * every view a handler got lies inside memory the frame described ([`check_views`]).

use std::cell::RefCell;
use std::sync::OnceLock;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use xla_ffi::testing::raw::{Data, RawAttr, RawBuffer};
use xla_ffi::testing::FakeApi;
use xla_ffi::Handler;

pub mod handlers;

thread_local! {
    /// The views (address, bytes) handlers were given during the current call.
    static VIEWS: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
}

/// Records a view a handler got.
pub fn saw<T>(s: &[T]) {
    VIEWS.with(|v| v.borrow_mut().push((s.as_ptr() as usize, core::mem::size_of_val(s))));
}

/// Clears the recorded views.
pub fn reset_views() {
    VIEWS.with(|v| v.borrow_mut().clear());
}

/// Asserts that every recorded non-empty view lies inside one of `extents`
/// (address, bytes behind it).
pub fn check_views(extents: &[(usize, Option<usize>)]) {
    VIEWS.with(|v| {
        for &(p, n) in v.borrow().iter() {
            if n == 0 {
                continue;
            }
            let inside = extents.iter().any(|&(a, b)| matches!(b, Some(b) if p >= a && p + n <= a + b));
            assert!(inside, "a view of {n} bytes at {p:#x} lies outside every buffer: {extents:?}");
        }
    });
}

/// True about once in `n` draws, and false once the input is used up (so that a
/// short input gives a well-formed frame).
pub fn rare(u: &mut Unstructured<'_>, n: u32) -> Result<bool> {
    Ok(!u.ratio(n - 1, n)?)
}

/// The fake API tables the frames are sent through: a 0.5 CPU runtime, a 0.3
/// runtime with its real 192-byte table, and a device runtime.
pub fn api(u: &mut Unstructured<'_>) -> Result<&'static FakeApi> {
    static APIS: OnceLock<[FakeApi; 3]> = OnceLock::new();
    let apis = APIS.get_or_init(|| {
        let apis = [FakeApi::new(5), FakeApi::new(3).with_struct_size(192), FakeApi::device_like(5)];
        // One well-formed call first, as XLA's metadata query is: it gives the
        // crate a table to report errors of frames without a usable table through.
        let _ = xla_ffi::testing::raw::RawCall::new().run(&apis[0], 1, handlers::FZ_NOOP.handler);
        apis
    });
    Ok(match u.int_in_range(0..=15u8)? {
        0 => &apis[2],
        1..=4 => &apis[1],
        _ => &apis[0],
    })
}

/// A dtype code: mostly the common ones, sometimes FP8, sub-byte, token,
/// invalid or any code at all.
pub fn dtype(u: &mut Unstructured<'_>) -> Result<u32> {
    const CODES: [u32; 16] = [11, 11, 12, 10, 16, 1, 6, 4, 5, 2, 17, 19, 21, 31, 0, 15];
    Ok(if rare(u, 32)? { u.arbitrary()? } else { *u.choose(&CODES)? })
}

fn dim(u: &mut Unstructured<'_>) -> Result<i64> {
    Ok(match u.int_in_range(0..=31u8)? {
        0 => -1,
        1 => i64::MAX,
        2 => 1 << 40,
        3 => u.arbitrary()?,
        n => (n % 9) as i64,
    })
}

/// One operand or result entry; `n` is the number of entries in the frame (for
/// shared memory).
pub fn buffer(u: &mut Unstructured<'_>, n: usize) -> Result<RawBuffer> {
    let rank = u.int_in_range(0..=4usize)?;
    let dims = (0..rank).map(|_| dim(u)).collect::<Result<Vec<_>>>()?;
    let data = match u.int_in_range(0..=15u8)? {
        0 => Data::Null,
        1..=3 => Data::Share { entry: u.int_in_range(0..=n.saturating_sub(1))?, offset: u.int_in_range(0..=24)? },
        4 => Data::Address(*u.choose(&[0usize, 8, 4096, usize::MAX - 3, usize::MAX])?),
        5 => Data::Own { misalign: u.int_in_range(1..=7)? },
        _ => Data::Own { misalign: 0 },
    };
    Ok(RawBuffer {
        kind: if rare(u, 24)? { u.arbitrary()? } else { 1 },
        null_entry: rare(u, 48)?,
        struct_size: if rare(u, 24)? { u.int_in_range(0..=64)? } else { 48 },
        dtype: dtype(u)?,
        dims,
        rank_override: if rare(u, 24)? { Some(u.int_in_range(-2..=6)?) } else { None },
        data,
        fill: u.arbitrary()?,
    })
}

/// An attribute name: mostly one the handlers know, else any bytes.
pub fn name(u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    const NAMES: [&str; 9] = ["eps", "n", "name", "v", "flags", "cfg", "k", "inner", "rows"];
    Ok(if rare(u, 6)? {
        let len = u.int_in_range(0..=6)?;
        u.bytes(len)?.to_vec()
    } else {
        u.choose(&NAMES)?.as_bytes().to_vec()
    })
}

/// An attribute value, nested at most `depth` dictionaries deep.
pub fn attr(u: &mut Unstructured<'_>, depth: u32) -> Result<RawAttr> {
    Ok(match u.int_in_range(0..=15u8)? {
        0..=5 => {
            let dt = dtype(u)?;
            let len = u.int_in_range(0..=16)?;
            RawAttr::Scalar { dtype: dt, bytes: u.bytes(len)?.to_vec(), null: rare(u, 32)? }
        }
        6..=8 => RawAttr::Array {
            dtype: dtype(u)?,
            len: if rare(u, 32)? { u.arbitrary()? } else { u.int_in_range(0..=12)? },
            fill: u.arbitrary()?,
            null: rare(u, 32)?,
        },
        9..=10 => {
            let len = u.int_in_range(0..=12)?;
            RawAttr::Str(u.bytes(len)?.to_vec())
        }
        11..=13 if depth > 0 => {
            let size = if rare(u, 16)? { u.int_in_range(0..=48)? } else { 48 };
            RawAttr::Dict(size, dict(u, depth - 1)?)
        }
        14 => RawAttr::Kind(u.arbitrary()?),
        _ => RawAttr::Null,
    })
}

/// A dictionary's entries: usually sorted by name as XLA sends them, sometimes not.
pub fn dict(u: &mut Unstructured<'_>, depth: u32) -> Result<Vec<(Vec<u8>, RawAttr)>> {
    let n = u.int_in_range(0..=6)?;
    let mut entries = (0..n).map(|_| Ok((name(u)?, attr(u, depth)?))).collect::<Result<Vec<_>>>()?;
    if !rare(u, 8)? {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
    }
    Ok(entries)
}

/// Checks a finished call against the invariants (see the crate docs).
pub fn check_result(target: &str, result: &xla_ffi::testing::CallResult) {
    if let Err((code, msg)) = result {
        assert!(msg.starts_with(target), "error for {target} does not name it ({code:?}): {msg}");
        assert!(!msg.contains("panicked"), "a panic inside {target} ({code:?}): {msg}");
    }
}

/// The handler signatures the frames are sent to: (target, symbol, operands, results).
pub const HANDLERS: &[(&str, Handler, usize, usize)] = &[
    ("fz.add", handlers::FZ_ADD.handler, 2, 1),
    ("fz.any", handlers::FZ_ANY.handler, 2, 1),
    ("fz.inplace", handlers::FZ_INPLACE.handler, 1, 1),
    ("fz.attrs", handlers::FZ_ATTRS.handler, 0, 1),
    ("fz.struct", handlers::FZ_STRUCT.handler, 1, 1),
    ("fz.pool", handlers::FZ_POOL.handler, 1, 1),
    ("fz.device", handlers::FZ_DEVICE.handler, 1, 1),
];
