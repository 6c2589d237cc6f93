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
/// three parallel arrays, as their addresses and one count (0 when any of them is
/// NULL or XLA's size is not positive: an entry without its name, kind or value
/// cannot be read), made with one test instead of three slices' worth.
#[derive(Clone, Copy)]
pub(crate) struct RawDict<'f> {
    names: *const *mut sys::XLA_FFI_ByteSpan,
    types: *const u32,
    values: *const *mut c_void,
    len: usize,
    _life: core::marker::PhantomData<&'f ()>,
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
    pub(crate) const EMPTY: RawDict<'static> = RawDict {
        names: core::ptr::null(),
        types: core::ptr::null(),
        values: core::ptr::null(),
        len: 0,
        _life: core::marker::PhantomData,
    };

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
        // The caller promises `size` entries in each non-null array, alive for `'f`.
        RawDict {
            names: raw.names as *const *mut sys::XLA_FFI_ByteSpan,
            types: raw.types as *const u32,
            values: raw.attrs as *const *mut c_void,
            len: RawDict::count_sized(raw),
            _life: core::marker::PhantomData,
        }
    }

    /// [`RawDict::from_raw`] of a struct whose size was checked, given its
    /// [`RawDict::count_sized`] (counted before).
    ///
    /// # Safety
    /// As [`RawDict::from_raw`]; `raw.struct_size` is at least this header's, and
    /// `len` is `count_sized(raw)`.
    #[inline(always)]
    pub(crate) unsafe fn from_sized(raw: &'f sys::XLA_FFI_Attrs, len: usize) -> Self {
        debug_assert!(raw.struct_size >= sys::XLA_FFI_Attrs_STRUCT_SIZE as usize && len == RawDict::count_sized(raw));
        RawDict {
            names: raw.names as *const *mut sys::XLA_FFI_ByteSpan,
            types: raw.types as *const u32,
            values: raw.attrs as *const *mut c_void,
            len,
            _life: core::marker::PhantomData,
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
        self.len
    }

    /// The kind and value pointer of entry `i`, or `None` past the entries.
    #[inline(always)]
    fn kind_and_value(&self, i: usize) -> Option<(u32, *mut c_void)> {
        if i >= self.len {
            return None;
        }
        // SAFETY: `i < len`, and `from_raw` counts `len` entries only when the three
        // arrays are non-null, each holding `len` of them, alive for `'f`.
        unsafe { Some((self.types.add(i).read(), self.values.add(i).read())) }
    }

    /// The name of entry `i`, as bytes.
    #[inline]
    pub(crate) fn name(&self, i: usize) -> Option<&'f [u8]> {
        if i >= self.len {
            return None;
        }
        // SAFETY: `i < len` (see `kind_and_value`); each name of a dictionary read by
        // `from_raw` is NULL or a valid byte span alive for `'f`.
        Some(unsafe { bytes(self.names.add(i).read()) })
    }

    /// The index of the first entry whose name is `name`: what comparing
    /// [`RawDict::name`] of each entry with it finds, comparing the length before the
    /// bytes. Inlined where `name` is a constant (a declared attribute), the bytes are
    /// then compared in a load or two, without a call to `memcmp`.
    ///
    /// A linear search, not a binary one: XLA sorts its dictionaries by name, but a
    /// hand-made frame need not be, and the first of two entries of one name must be
    /// the one found.
    #[inline(always)]
    pub(crate) fn position(&self, name: &[u8]) -> Option<usize> {
        if name.is_empty() {
            // A NULL span, or one of no bytes, reads as the empty name.
            return (0..self.len()).find(|&i| self.name(i) == Some(name));
        }
        let n = self.len();
        let mut i = 0;
        while i < n {
            // SAFETY: `i < len` (see `kind_and_value`).
            let span = unsafe { self.names.add(i).read() };
            if !span.is_null() {
                // SAFETY: each name of a dictionary read by `from_raw` is NULL or a
                // valid byte span alive for `'f` (not NULL here).
                let s = unsafe { &*span };
                // The length first; a span of `name.len()` (> 0) bytes at a non-null
                // address is what `bytes` reads as those bytes.
                if s.len == name.len() && !s.ptr.is_null() {
                    // SAFETY: the span describes `s.len` bytes at `s.ptr`, alive for
                    // the call.
                    let got = unsafe { core::slice::from_raw_parts(s.ptr as *const u8, name.len()) };
                    if got == name {
                        return Some(i);
                    }
                }
            }
            i += 1;
        }
        None
    }

    /// Entry `i` when it is a scalar (most attributes): its dtype and value pointer,
    /// read without the dispatch on the kind that [`RawDict::value`] makes (the same
    /// answer as its `Scalar`).
    #[inline(always)]
    pub(crate) fn scalar(&self, i: usize) -> Option<(DataType, *const c_void)> {
        let (kind, ptr) = self.kind_and_value(i)?;
        if kind != sys::XLA_FFI_AttrType_SCALAR || ptr.is_null() {
            return None;
        }
        // SAFETY: for kind SCALAR, XLA stores a pointer to an `XLA_FFI_Scalar`, alive
        // for `'f` (the promise `from_raw` was given).
        let s = unsafe { &*(ptr as *const sys::XLA_FFI_Scalar) };
        Some((DataType(s.dtype), s.value))
    }

    /// Entry `i`, or `None` if out of range, NULL, or of an unknown kind.
    #[inline]
    pub(crate) fn value(&self, i: usize) -> Option<RawAttr<'f>> {
        let (kind, ptr) = self.kind_and_value(i)?;
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
