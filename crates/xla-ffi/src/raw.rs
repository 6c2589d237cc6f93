//! Readers of XLA's raw argument structures: `XLA_FFI_Buffer`, `XLA_FFI_Attrs`,
//! `XLA_FFI_Scalar`, `XLA_FFI_Array` and `XLA_FFI_ByteSpan`.
//!
//! With `frame.rs` (the API table and the call frame), this is the raw layer: the
//! only code that dereferences a pointer to one of XLA's structs. It turns each
//! struct into a small `Copy` value ([`BufferEntry`], [`RawDict`], [`RawAttr`]) whose
//! fields are checked (`struct_size`, non-negative rank, non-null `dims`), so that
//! the views above it (`buffer.rs`, `attr.rs`) never read a struct field through a
//! raw pointer. What the views still read through a pointer is the *data* these
//! structs describe (buffer elements, attribute values), each read under a
//! `// SAFETY:` comment that relies on the checks made here.
//!
//! A [`RawDict`] can only be made from a frame's attributes (by `frame.rs`), from a
//! dictionary entry of another one, or by the unsafe [`RawDict::from_raw`]; so its
//! safe methods may trust the pointers it holds.

use core::ffi::c_void;

use xla_ffi_sys as sys;

use crate::dtype::DataType;

/// Makes a slice from a C array of `len` elements; NULL or empty gives `&[]`.
///
/// # Safety
/// When `len > 0`, `ptr` must point to `len` valid `T`s that live for `'a`.
#[inline(always)]
pub(crate) unsafe fn c_slice<'a, T>(ptr: *const T, len: i64) -> &'a [T] {
    if ptr.is_null() || len <= 0 {
        &[]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { core::slice::from_raw_parts(ptr, len as usize) }
    }
}

/// A well-formed `XLA_FFI_Buffer` (checked by [`buffer`]): its element type, address
/// and dimensions are read from XLA's struct when asked for, so that a decoded view
/// carries one pointer instead of four fields.
#[derive(Clone, Copy)]
pub(crate) struct BufferEntry<'f> {
    raw: &'f sys::XLA_FFI_Buffer,
}

impl<'f> BufferEntry<'f> {
    /// The element type.
    #[inline(always)]
    pub(crate) fn dtype(self) -> DataType {
        DataType(self.raw.dtype)
    }

    /// The address of the elements.
    #[inline(always)]
    pub(crate) fn data(self) -> *mut c_void {
        self.raw.data
    }

    /// The dimensions, row-major (empty for a scalar).
    #[inline(always)]
    pub(crate) fn dims(self) -> &'f [i64] {
        // `buffer` refused a negative rank, and NULL dims with a positive rank.
        if self.raw.rank <= 0 {
            return &[];
        }
        // SAFETY: checked by `buffer`: a positive rank with non-null dims, which XLA
        // gives `rank` of, alive (and unchanged) for the call.
        unsafe { core::slice::from_raw_parts(self.raw.dims as *const i64, self.raw.rank as usize) }
    }
}

/// Reads the `XLA_FFI_Buffer` at `ptr`; `None` if it is NULL or malformed (too small,
/// a negative rank, or NULL dimensions with a positive rank).
///
/// # Safety
/// `ptr` must be NULL or point to an `XLA_FFI_Buffer` (at least its `struct_size`
/// field, and the rest when `struct_size` says so) whose dims live for `'f`.
#[inline(always)]
pub(crate) unsafe fn buffer<'f>(ptr: *mut c_void) -> Option<BufferEntry<'f>> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: guaranteed by the caller: `struct_size` is there.
    let size = unsafe { core::ptr::addr_of!((*(ptr as *const sys::XLA_FFI_Buffer)).struct_size).read() };
    if size < sys::XLA_FFI_Buffer_STRUCT_SIZE as usize {
        return None;
    }
    // SAFETY: the struct is as large as this header's, so every field is there.
    let b = unsafe { &*(ptr as *const sys::XLA_FFI_Buffer) };
    // A scalar, or `rank` dims at a non-null address; malformed: a negative rank, or
    // NULL dims with a positive rank.
    if b.rank < 0 || (b.rank > 0 && b.dims.is_null()) {
        return None;
    }
    Some(BufferEntry { raw: b })
}

/// An `XLA_FFI_Attrs` (the call's attributes or a nested dictionary), read: its
/// three parallel arrays.
#[derive(Clone, Copy)]
pub(crate) struct RawDict<'f> {
    names: &'f [*mut sys::XLA_FFI_ByteSpan],
    types: &'f [u32],
    values: &'f [*mut c_void],
}

/// One attribute value, read from its struct.
#[derive(Clone, Copy)]
pub(crate) enum RawAttr<'f> {
    /// An `XLA_FFI_Scalar`: one element of `dtype` at `value` (may be NULL).
    Scalar { dtype: DataType, value: *const c_void },
    /// An `XLA_FFI_Array`: `len` elements of `dtype` at `data` (may be NULL).
    Array { dtype: DataType, len: usize, data: *const c_void },
    /// An `XLA_FFI_ByteSpan`.
    String(&'f [u8]),
    /// A nested `XLA_FFI_Attrs`.
    Dict(RawDict<'f>),
}

/// Reads a byte span.
///
/// # Safety
/// `span` must be NULL or a valid `XLA_FFI_ByteSpan*` alive for `'f`.
unsafe fn bytes<'f>(span: *const sys::XLA_FFI_ByteSpan) -> &'f [u8] {
    if span.is_null() {
        return &[];
    }
    // SAFETY: guaranteed by the caller.
    let s = unsafe { &*span };
    // SAFETY: the span describes `len` bytes at `ptr`, alive for the call.
    unsafe { c_slice(s.ptr as *const u8, s.len as i64) }
}

impl<'f> RawDict<'f> {
    /// The empty dictionary.
    pub(crate) const EMPTY: RawDict<'static> = RawDict { names: &[], types: &[], values: &[] };

    /// Reads a dictionary; one smaller than this header's `XLA_FFI_Attrs` reads as empty.
    ///
    /// # Safety
    /// `raw` must be a valid `XLA_FFI_Attrs` alive for `'f`, whose entries (names,
    /// kinds and value structs) are valid and alive for `'f` too.
    #[inline(always)]
    pub(crate) unsafe fn from_raw(raw: &'f sys::XLA_FFI_Attrs) -> Self {
        if raw.struct_size < sys::XLA_FFI_Attrs_STRUCT_SIZE as usize {
            return RawDict::EMPTY;
        }
        // SAFETY: guaranteed by the caller (NULL arrays are allowed for size 0).
        unsafe {
            RawDict {
                names: c_slice(raw.names as *const *mut sys::XLA_FFI_ByteSpan, raw.size),
                types: c_slice(raw.types as *const u32, raw.size),
                values: c_slice(raw.attrs as *const *mut c_void, raw.size),
            }
        }
    }

    /// The number of entries of `raw`, as [`RawDict::from_raw`]`(raw).len()` counts
    /// them when `raw` is at least this header's size (a frame's attributes:
    /// `frame::open` checked it), without making the slices: 0 for a size not above
    /// 0 or a NULL array.
    #[inline(always)]
    pub(crate) fn count_sized(raw: &sys::XLA_FFI_Attrs) -> usize {
        if raw.size <= 0 || raw.names.is_null() || raw.types.is_null() || raw.attrs.is_null() {
            return 0;
        }
        raw.size as usize
    }

    /// The number of entries.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.names.len().min(self.types.len()).min(self.values.len())
    }

    /// The name of entry `i`, as bytes.
    #[inline]
    pub(crate) fn name(&self, i: usize) -> Option<&'f [u8]> {
        // SAFETY: each name of a dictionary read by `from_raw` is a valid byte span
        // alive for `'f`.
        Some(unsafe { bytes(*self.names.get(i)?) })
    }

    /// Entry `i`, or `None` if out of range, NULL, or of an unknown kind.
    #[inline]
    pub(crate) fn value(&self, i: usize) -> Option<RawAttr<'f>> {
        let (&kind, &ptr) = (self.types.get(i)?, self.values.get(i)?);
        if ptr.is_null() {
            return None;
        }
        // SAFETY: for each kind, XLA stores a pointer to that kind's struct, alive
        // for `'f` (the promise `from_raw` was given).
        unsafe {
            Some(match kind {
                sys::XLA_FFI_AttrType_SCALAR => {
                    let s = &*(ptr as *const sys::XLA_FFI_Scalar);
                    RawAttr::Scalar { dtype: DataType(s.dtype), value: s.value }
                }
                sys::XLA_FFI_AttrType_ARRAY => {
                    let a = &*(ptr as *const sys::XLA_FFI_Array);
                    RawAttr::Array { dtype: DataType(a.dtype), len: a.size, data: a.data }
                }
                sys::XLA_FFI_AttrType_STRING => RawAttr::String(bytes(ptr as *const sys::XLA_FFI_ByteSpan)),
                sys::XLA_FFI_AttrType_DICTIONARY => {
                    RawAttr::Dict(RawDict::from_raw(&*(ptr as *const sys::XLA_FFI_Attrs)))
                }
                _ => return None,
            })
        }
    }
}
