//! Copies between XLA's buffers and Python objects with the buffer protocol, made
//! from Rust: no Python code ever sees XLA's memory.

use pyo3::types::PyAnyMethods;
use pyo3::{Bound, PyAny, PyErr, PyResult, Python};
use xla_ffi::{AnyType, Buffer, Error, ResultBuffer};

use super::bulk_copy::copy_bytes;

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
pub(crate) fn copy_into_result(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    result: &mut ResultBuffer<'_, AnyType>,
) -> xla_ffi::Result<()> {
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
        unsafe { copy_bytes(bytes.as_mut_ptr().cast(), buf.buf_ptr().cast(), bytes.len()) };
        Ok(())
    });
    copied.map_err(py_err)?
}

/// Copies `operand`'s bytes into `dst`: a writable object with the buffer protocol
/// whose memory is C-contiguous with a one-character format and exactly the
/// operand's byte size (a NumPy `uint8` array of that length). As in
/// [`copy_into_result`], the bytes are copied from Rust (no Python code sees the
/// operand's memory), with non-temporal stores for a copy of several MiB.
///
/// Fails with `INVALID_ARGUMENT` if `dst` is not such an object, naming the operand.
pub(crate) fn copy_from_operand(
    py: Python<'_>,
    operand: &Buffer<'_, AnyType>,
    dst: &Bound<'_, PyAny>,
) -> xla_ffi::Result<()> {
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
        unsafe { copy_bytes(buf.buf_ptr().cast(), bytes.as_ptr(), bytes.len()) };
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
            // (Released on drop.)
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
