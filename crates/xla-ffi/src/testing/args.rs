//! The values of a synthetic call: operand and result buffers ([`Arg`]) and
//! attributes ([`AttrArg`]), and the C structures an attribute dictionary is built
//! into.

use core::ffi::{c_char, c_void};

use xla_ffi_sys as sys;

use crate::dtype::{DataType, Element};

/// An owned buffer for a synthetic call: bytes plus dtype and dims.
///
/// The storage always covers the bytes the dims describe (from the data pointer,
/// after any [`misaligned`](Arg::misaligned) shift), so reading a result back never
/// leaves the allocation.
#[derive(Clone, Debug)]
pub struct Arg {
    pub(super) dtype: DataType,
    pub(super) dims: Vec<i64>,
    pub(super) data: Vec<u64>, // u64 storage keeps data 8-byte aligned
    /// Bytes the dims describe.
    pub(super) nbytes: usize,
    pub(super) offset_bytes: usize,
    pub(super) device: Option<usize>,
    /// What must outlive the frame (the device allocation of a `DeviceBuffer`).
    #[allow(dead_code)]
    pub(super) keep: Option<std::sync::Arc<dyn core::any::Any + Send + Sync>>,
}

/// The element count of `dims` (0 if any is negative); panics on overflow.
pub(super) fn count(dims: &[i64]) -> usize {
    if dims.iter().any(|&d| d < 0) {
        return 0;
    }
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize))
        .unwrap_or_else(|| panic!("dims {dims:?} overflow usize"))
}

impl Arg {
    fn with_bytes(dtype: DataType, dims: &[i64], bytes: &[u8], nbytes: usize) -> Self {
        let mut data = vec![0u64; nbytes.max(bytes.len()).div_ceil(8) + 1];
        // SAFETY: `data` has room for `bytes`; the regions do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), data.as_mut_ptr() as *mut u8, bytes.len()) };
        Arg { dtype, dims: dims.to_vec(), data, nbytes, offset_bytes: 0, device: None, keep: None }
    }
    /// A buffer holding `values` with shape `dims`.
    ///
    /// # Panics
    /// If `dims` does not describe exactly `values.len()` elements, or has a
    /// negative dimension (use [`zeros`](Self::zeros) or [`raw`](Self::raw) for the
    /// shape XLA never sends, to test a handler's refusal).
    pub fn from_slice<T: Element>(values: &[T], dims: &[i64]) -> Self {
        let n = count(dims);
        assert!(
            dims.iter().all(|&d| d >= 0),
            "Arg::from_slice: dims {dims:?} have a negative dimension; to test a handler's refusal of one, use Arg::zeros"
        );
        assert!(
            n == values.len() && dims.iter().all(|&d| d >= 0),
            "Arg::from_slice: dims {dims:?} describe {n} elements, but {} values were given",
            values.len()
        );
        Self::with_bytes(T::DTYPE, dims, &as_bytes(values), core::mem::size_of_val(values))
    }
    /// A token (operand or result): a rank-0 buffer of dtype `TOKEN`, no data, as
    /// XLA passes one.
    pub fn token() -> Self {
        Self::raw(DataType::TOKEN, &[], 0)
    }
    /// A zero-filled buffer (for results; [`CallBuilder::run`](super::CallBuilder::run)
    /// fills a result with 0xFF bytes before the handler runs, as XLA gives it
    /// memory holding anything).
    pub fn zeros<T: Element>(dims: &[i64]) -> Self {
        Self::raw(T::DTYPE, dims, core::mem::size_of::<T>())
    }
    /// A buffer of a raw dtype code with zeroed storage of `width` bytes per element.
    ///
    /// # Panics
    /// If `width` is less than the dtype's [`byte_width`](DataType::byte_width): the
    /// handler would read `dims × byte_width` bytes, past the storage.
    pub fn raw(dtype: DataType, dims: &[i64], width: usize) -> Self {
        let need = dtype.byte_width().unwrap_or(0);
        assert!(
            width >= need,
            "Arg::raw: {dtype} has {need} bytes per element, but a width of {width} was given \
             (the handler would read past the buffer)"
        );
        let nbytes = count(dims).checked_mul(width).expect("buffer size overflows usize");
        Self::with_bytes(dtype, dims, &[], nbytes)
    }
    /// A buffer of dtype code `dtype` holding exactly `bytes` (PRED bytes other than
    /// 0 and 1, say, or a dtype this crate has no Rust type for).
    ///
    /// # Panics
    /// If `bytes` is shorter than the `dims × byte_width` bytes the handler may read
    /// ([`DataType::byte_width`]; 0 for a dtype without one).
    pub fn from_bytes(dtype: DataType, dims: &[i64], bytes: &[u8]) -> Self {
        let need = count(dims).checked_mul(dtype.byte_width().unwrap_or(0)).expect("buffer size overflows usize");
        assert!(
            bytes.len() >= need,
            "Arg::from_bytes: dims {dims:?} of {dtype} describe {need} bytes, but {} were given \
             (the handler would read past them)",
            bytes.len()
        );
        Self::with_bytes(dtype, dims, bytes, bytes.len())
    }
    /// A buffer at device address `ptr` (for `platform = device` handlers; see
    /// `testing::cuda`, whose `DeviceBuffer::arg` is the safe way to make one): the
    /// frame carries the address, and nothing is read back. A call with such a buffer
    /// runs only on a device frame ([`CallBuilder::device_stream`](super::CallBuilder::device_stream) with a non-zero
    /// stream), where host handlers are refused.
    ///
    /// # Safety
    /// A handler hands the address to kernels that read and write the `dims × width`
    /// bytes its dtype describes: `ptr` must be device memory of at least that size,
    /// valid for the whole call, or no kernel may run (a test of an error path that
    /// stops before any launch).
    pub unsafe fn device(dtype: DataType, dims: &[i64], ptr: u64) -> Self {
        let device = Some(ptr as usize);
        Arg { dtype, dims: dims.to_vec(), data: Vec::new(), nbytes: 0, offset_bytes: 0, device, keep: None }
    }
    /// Keeps `owner` alive as long as this buffer (its memory, for a device buffer).
    #[cfg(feature = "cuda")]
    pub(crate) fn keep_alive(mut self, owner: std::sync::Arc<dyn core::any::Any + Send + Sync>) -> Self {
        self.keep = Some(owner);
        self
    }
    /// Shifts the data pointer by `bytes`, to test alignment checks. The contents
    /// stay where they were (the buffer now starts `bytes` into them), and the
    /// storage grows so that the shifted buffer still lies inside it.
    ///
    /// # Panics
    /// If the shifted buffer's end does not fit in `usize` words of storage.
    pub fn misaligned(mut self, bytes: usize) -> Self {
        let words = bytes
            .checked_add(self.nbytes)
            .and_then(|end| end.div_ceil(8).checked_add(1))
            .filter(|&w| w.checked_mul(8).is_some_and(|b| b <= isize::MAX as usize))
            .unwrap_or_else(|| {
                panic!(
                    "Arg::misaligned({bytes}): a {}-byte buffer shifted that far does not fit in memory",
                    self.nbytes
                )
            });
        self.offset_bytes = bytes;
        if self.data.len() < words {
            self.data.resize(words, 0);
        }
        self
    }
    pub(super) fn ptr(&mut self) -> *mut c_void {
        if let Some(p) = self.device {
            return core::ptr::without_provenance_mut(p);
        }
        // SAFETY: `misaligned` keeps the offset inside the allocation.
        unsafe { (self.data.as_mut_ptr() as *mut u8).add(self.offset_bytes) as *mut c_void }
    }
    /// The bytes the buffer holds, from its data pointer on.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `data` is plain memory of `8 * len` bytes; any byte is a valid u8.
        let all = unsafe { core::slice::from_raw_parts(self.data.as_ptr() as *const u8, self.data.len() * 8) };
        &all[self.offset_bytes..self.offset_bytes + self.nbytes]
    }
}

/// An owned attribute value for a synthetic call.
///
/// The constructors ([`AttrArg::scalar`], [`AttrArg::array`], [`AttrArg::bool`])
/// give bytes that match the dtype. Built by hand, a `Scalar` must hold the
/// dtype's width in bytes and an `Array` its count times that width (any bytes
/// for a dtype without a width, such as `INVALID`, which the crate never reads).
///
/// # Panics
/// Running a call ([`CallBuilder::run`](super::CallBuilder::run), `testing::raw::RawCall::run`) with an
/// attribute whose bytes do not match panics, naming the attribute.
#[derive(Clone, Debug)]
pub enum AttrArg {
    /// A scalar: dtype code and its bytes (little-endian).
    Scalar(DataType, Vec<u8>),
    /// An array: dtype code, element count, bytes.
    Array(DataType, usize, Vec<u8>),
    /// A string.
    Str(String),
    /// A dictionary (sorted by name when built).
    Dict(Vec<(String, AttrArg)>),
}

impl AttrArg {
    /// A scalar of any element type.
    pub fn scalar<T: Element>(v: T) -> Self {
        AttrArg::Scalar(T::DTYPE, as_bytes(&[v]))
    }
    /// A bool (PRED) scalar, as a Python `bool` arrives.
    pub fn bool(v: bool) -> Self {
        AttrArg::Scalar(DataType::PRED, vec![v as u8])
    }
    /// An array of any element type.
    pub fn array<T: Element>(v: &[T]) -> Self {
        AttrArg::Array(T::DTYPE, v.len(), as_bytes(v))
    }
}

pub(super) fn as_bytes<T: Element>(v: &[T]) -> Vec<u8> {
    let n = core::mem::size_of_val(v);
    let mut out = vec![0u8; n];
    // SAFETY: copies the bytes of plain-data values.
    unsafe { core::ptr::copy_nonoverlapping(v.as_ptr() as *const u8, out.as_mut_ptr(), n) };
    out
}

/// Keeps every C structure of one built attribute dictionary alive.
///
/// Each C struct lives in its own `Vec`, and pointers are taken from the vector's
/// heap buffer: moving a `Vec` does not move (or re-borrow) its buffer, so the
/// pointers stay valid under Miri's aliasing rules. (A `Box` would not do: moving a
/// box asserts unique ownership and invalidates pointers taken before the move.)
#[derive(Default)]
pub(crate) struct AttrStore {
    spans: Vec<Vec<sys::XLA_FFI_ByteSpan>>,
    ptrs: Vec<Vec<*mut c_void>>,
    types: Vec<Vec<u32>>,
    scalars: Vec<Vec<sys::XLA_FFI_Scalar>>,
    arrays: Vec<Vec<sys::XLA_FFI_Array>>,
    dicts: Vec<Vec<sys::XLA_FFI_Attrs>>,
    bytes: Vec<Vec<u64>>,
}

/// Moves `v` into `store` and returns a pointer to its first element.
pub(super) fn keep<T>(store: &mut Vec<Vec<T>>, mut v: Vec<T>) -> *mut T {
    let p = v.as_mut_ptr();
    store.push(v);
    p
}

impl AttrStore {
    /// Overwrites every structure and payload (an async handler must not read them
    /// after its handler call: XLA frees them then).
    pub(crate) fn scribble(&mut self) {
        self.spans.iter_mut().flatten().for_each(|s| *s = sys::XLA_FFI_ByteSpan { ptr: core::ptr::null(), len: 0 });
        self.ptrs.iter_mut().flatten().for_each(|p| *p = core::ptr::null_mut());
        self.types.iter_mut().flatten().for_each(|t| *t = 0xdead);
        self.scalars.iter_mut().flatten().for_each(|s| s.value = core::ptr::null_mut());
        self.arrays.iter_mut().flatten().for_each(|a| a.data = core::ptr::null_mut());
        self.dicts.iter_mut().flatten().for_each(|d| d.size = -1);
        self.bytes.iter_mut().flatten().for_each(|b| *b = 0xdead_dead_dead_dead);
    }
    pub(crate) fn span(&mut self, s: &[u8]) -> *mut sys::XLA_FFI_ByteSpan {
        let ptr = self.payload(s) as *const c_char;
        keep(&mut self.spans, vec![sys::XLA_FFI_ByteSpan { ptr, len: s.len() }])
    }
    /// A copy of `bytes`, 8-byte aligned.
    pub(crate) fn payload(&mut self, bytes: &[u8]) -> *mut c_void {
        let mut words = vec![0u64; bytes.len().div_ceil(8).max(1)];
        // SAFETY: `words` has room for `bytes`; they do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr() as *mut u8, bytes.len()) };
        keep(&mut self.bytes, words) as *mut c_void
    }
    pub(crate) fn scalar(&mut self, dtype: DataType, value: *mut c_void) -> *mut c_void {
        keep(&mut self.scalars, vec![sys::XLA_FFI_Scalar { dtype: dtype.0, value }]) as *mut c_void
    }
    pub(crate) fn array(&mut self, dtype: DataType, size: usize, data: *mut c_void) -> *mut c_void {
        keep(&mut self.arrays, vec![sys::XLA_FFI_Array { dtype: dtype.0, size, data }]) as *mut c_void
    }
    pub(crate) fn boxed_dict(&mut self, d: sys::XLA_FFI_Attrs) -> *mut c_void {
        keep(&mut self.dicts, vec![d]) as *mut c_void
    }
    /// An `XLA_FFI_Attrs` over parallel arrays of names, kinds and values.
    pub(crate) fn attrs(
        &mut self,
        names: Vec<*mut sys::XLA_FFI_ByteSpan>,
        types: Vec<u32>,
        values: Vec<*mut c_void>,
    ) -> sys::XLA_FFI_Attrs {
        let size = names.len() as i64;
        let names = keep(&mut self.ptrs, names.into_iter().map(|p| p as *mut c_void).collect());
        let types = keep(&mut self.types, types);
        let values = keep(&mut self.ptrs, values);
        sys::XLA_FFI_Attrs {
            struct_size: sys::XLA_FFI_Attrs_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            size,
            types: types as *mut _,
            names: names as *mut *mut sys::XLA_FFI_ByteSpan,
            attrs: values,
        }
    }
    pub(crate) fn dict(&mut self, entries: &[(String, AttrArg)]) -> sys::XLA_FFI_Attrs {
        let mut sorted: Vec<&(String, AttrArg)> = entries.iter().collect();
        sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let (mut names, mut types, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for (name, v) in sorted {
            check_attr_bytes(name, v);
            names.push(self.span(name.as_bytes()));
            let (t, p): (u32, *mut c_void) = match v {
                AttrArg::Scalar(d, b) => {
                    let value = self.payload(b);
                    (sys::XLA_FFI_AttrType_SCALAR, self.scalar(*d, value))
                }
                AttrArg::Array(d, n, b) => {
                    let data = self.payload(b);
                    (sys::XLA_FFI_AttrType_ARRAY, self.array(*d, *n, data))
                }
                AttrArg::Str(s) => (sys::XLA_FFI_AttrType_STRING, self.span(s.as_bytes()) as *mut c_void),
                AttrArg::Dict(entries) => {
                    let d = self.dict(entries);
                    (sys::XLA_FFI_AttrType_DICTIONARY, self.boxed_dict(d))
                }
            };
            types.push(t);
            values.push(p);
        }
        self.attrs(names, types, values)
    }
}

/// Panics unless the bytes of `v` (named `name`) are what its dtype and count
/// describe: the runtime the crate trusts never hands it fewer, so neither may a
/// synthetic call.
pub(super) fn check_attr_bytes(name: &str, v: &AttrArg) {
    let (dtype, count, got, what) = match v {
        AttrArg::Scalar(d, b) => (*d, Some(1), b.len(), "scalar"),
        AttrArg::Array(d, n, b) => (*d, Some(*n), b.len(), "array"),
        AttrArg::Str(_) | AttrArg::Dict(_) => return,
    };
    let Some(width) = dtype.byte_width() else { return };
    let need = count.and_then(|n| n.checked_mul(width));
    assert!(
        need == Some(got),
        "AttrArg for attribute `{name}`: a {what} of {} {dtype:?} element(s) needs {} bytes, got {got}",
        count.unwrap_or(0),
        need.map_or("more than usize::MAX".to_string(), |n| n.to_string()),
    );
}
