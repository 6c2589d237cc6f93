//! Call frames and attribute dictionaries described field by field, malformed as
//! you like: the raw material of the fuzz targets (`fuzz/`).
//!
//! Everything a described frame points to is real memory owned by the builder,
//! sized exactly as described (so AddressSanitizer catches a read one byte past
//! it). What XLA guarantees and this crate must trust (a buffer's `data` holds the
//! bytes its dims and dtype describe; `dims` holds `rank` entries) is kept true:
//! a data pointer that would break it is replaced by NULL. Everything else (entry
//! kinds, struct sizes, ranks, dims, dtypes, null pointers, misalignment, overlap,
//! attribute kinds, names and payload types) is whatever the description says.

use core::ffi::c_void;

use xla_ffi_sys as sys;

use super::{AttrStore, CallResult, FakeApi, FakeCtx};
use crate::attr::Dict;
use crate::dtype::DataType;
use crate::{Handler, HandlerFn};

/// Where a described buffer's data pointer points.
#[derive(Clone, Debug)]
pub enum Data {
    /// NULL.
    Null,
    /// Its own allocation of exactly the described size, `misalign` bytes into it.
    Own {
        /// Offset of the data pointer into the allocation (0..8 makes misalignment).
        misalign: u8,
    },
    /// Into the allocation of buffer entry `entry` (operands first, then results),
    /// `offset` bytes in: overlap and aliasing. NULL if it would not fit.
    Share {
        /// The entry whose memory to use.
        entry: usize,
        /// Offset into it, in bytes.
        offset: usize,
    },
    /// A raw address: used only where no byte is behind it (an empty buffer) or
    /// where the buffer's end would lie past the address space; else NULL.
    Address(usize),
}

/// One operand or result entry of a described frame.
#[derive(Clone, Debug)]
pub struct RawBuffer {
    /// The entry's kind tag (`XLA_FFI_ArgType_BUFFER` = 1 is the only real one).
    pub kind: u32,
    /// NULL entry pointer instead of a buffer.
    pub null_entry: bool,
    /// The buffer struct's `struct_size` field.
    pub struct_size: usize,
    /// The dtype code.
    pub dtype: u32,
    /// The dims; `rank` is their count unless `rank_override` says otherwise.
    pub dims: Vec<i64>,
    /// A negative rank, or a positive rank with NULL `dims`.
    pub rank_override: Option<i64>,
    /// The data pointer.
    pub data: Data,
    /// Seed of the bytes the data is filled with.
    pub fill: u8,
}

/// One described attribute value.
#[derive(Clone, Debug)]
pub enum RawAttr {
    /// A scalar of dtype code `dtype` holding `bytes` (padded to 16 bytes so any
    /// known dtype can be read), or a NULL value pointer.
    Scalar {
        /// The dtype code.
        dtype: u32,
        /// The value's bytes.
        bytes: Vec<u8>,
        /// NULL value pointer.
        null: bool,
    },
    /// An array of `len` elements of dtype code `dtype`; its data holds exactly
    /// `len * width` bytes (NULL if `null`, or if that is more than 64 KiB).
    Array {
        /// The dtype code.
        dtype: u32,
        /// The element count.
        len: usize,
        /// Seed of the bytes.
        fill: u8,
        /// NULL data pointer.
        null: bool,
    },
    /// A string (any bytes).
    Str(Vec<u8>),
    /// A nested dictionary with this `struct_size`.
    Dict(usize, Vec<(Vec<u8>, RawAttr)>),
    /// An entry of another kind tag, with a NULL or a dummy payload.
    Kind(u32),
    /// A NULL value pointer of kind SCALAR.
    Null,
}

/// The bytes an element of `dtype` takes, for building payloads (16 for unknown
/// codes: the widest known type).
fn width(dtype: u32) -> usize {
    DataType(dtype).byte_width().unwrap_or(16)
}

/// The bytes the crate computes for `b` (exact, in `u128`); `None` for malformed dims.
fn crate_bytes(b: &RawBuffer) -> Option<u128> {
    let dims = b.effective_dims()?;
    dims.iter().try_fold(width(b.dtype) as u128, |acc, &d| Some(acc.saturating_mul(u128::try_from(d).ok()?)))
}

fn filled(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

impl AttrStore {
    fn raw_dict(&mut self, struct_size: usize, entries: &[(Vec<u8>, RawAttr)]) -> sys::XLA_FFI_Attrs {
        let (mut names, mut types, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for (name, v) in entries {
            names.push(self.span(name));
            let (t, p): (u32, *mut c_void) = match v {
                RawAttr::Scalar { dtype, bytes, null } => {
                    let mut b = bytes.clone();
                    b.resize(b.len().max(16), 0);
                    let value = if *null { core::ptr::null_mut() } else { self.payload(&b) };
                    (sys::XLA_FFI_AttrType_SCALAR, self.scalar(DataType(*dtype), value))
                }
                RawAttr::Array { dtype, len, fill, null } => {
                    let bytes = len.checked_mul(width(*dtype)).filter(|&b| b <= 1 << 16);
                    let data = match bytes {
                        Some(b) if !*null => self.payload(&filled(b, *fill)),
                        _ => core::ptr::null_mut(),
                    };
                    (sys::XLA_FFI_AttrType_ARRAY, self.array(DataType(*dtype), *len, data))
                }
                RawAttr::Str(s) => (sys::XLA_FFI_AttrType_STRING, self.span(s) as *mut c_void),
                RawAttr::Dict(size, entries) => {
                    let mut d = self.raw_dict(*size, entries);
                    d.struct_size = *size;
                    (sys::XLA_FFI_AttrType_DICTIONARY, self.boxed_dict(d))
                }
                RawAttr::Kind(k) => (*k, self.payload(&[0; 64])),
                RawAttr::Null => (sys::XLA_FFI_AttrType_SCALAR, core::ptr::null_mut()),
            };
            types.push(t);
            values.push(p);
        }
        let mut d = self.attrs(names, types, values);
        d.struct_size = struct_size;
        d
    }
}

/// Builds the described dictionary and hands it to `f` as a [`Dict`], the way a
/// handler sees a nested dictionary attribute. Entries stay in the given order
/// (XLA sorts them; a described one need not be).
pub fn with_dict<R>(entries: &[(Vec<u8>, RawAttr)], f: impl FnOnce(Dict<'_>) -> R) -> R {
    let mut store = AttrStore::default();
    let raw = store.raw_dict(sys::XLA_FFI_Attrs_STRUCT_SIZE as usize, entries);
    // SAFETY: `raw` and everything it points to live in `store` until after `f`.
    let dict = unsafe { Dict::from_raw(&raw) };
    let r = f(dict);
    drop(store);
    r
}

/// A described call: stage, frame size, entries and attributes.
#[derive(Clone, Debug)]
pub struct RawCall {
    /// The frame's `struct_size`.
    pub frame_size: usize,
    /// The stage code.
    pub stage: u32,
    /// `struct_size` of the args, rets and attrs structs.
    pub list_sizes: [usize; 3],
    /// Operand entries.
    pub args: Vec<RawBuffer>,
    /// Result entries.
    pub rets: Vec<RawBuffer>,
    /// Attributes, in the given order.
    pub attrs: Vec<(Vec<u8>, RawAttr)>,
}

/// What a run of a described call saw, for the fuzz invariants.
#[derive(Debug)]
pub struct RawOutcome {
    /// The handler's result.
    pub result: CallResult,
    /// Per buffer entry (operands, then results): the data pointer sent and the
    /// bytes behind it (`None` where no bytes are behind it).
    pub extents: Vec<(usize, Option<usize>)>,
}

impl RawBuffer {
    /// The rank the frame will carry.
    fn rank(&self) -> i64 {
        self.rank_override.unwrap_or(self.dims.len() as i64)
    }
    /// The dims the crate will read: `None` for a negative rank or NULL dims.
    fn effective_dims(&self) -> Option<&[i64]> {
        let rank = self.rank();
        (rank >= 0 && rank as usize <= self.dims.len()).then(|| &self.dims[..rank as usize])
    }
}

impl RawCall {
    /// A well-formed execute-stage frame with no entries.
    pub fn new() -> Self {
        RawCall {
            frame_size: sys::XLA_FFI_CallFrame_STRUCT_SIZE as usize,
            stage: sys::XLA_FFI_ExecutionStage_EXECUTE,
            list_sizes: [
                sys::XLA_FFI_Args_STRUCT_SIZE as usize,
                sys::XLA_FFI_Rets_STRUCT_SIZE as usize,
                sys::XLA_FFI_Attrs_STRUCT_SIZE as usize,
            ],
            args: Vec::new(),
            rets: Vec::new(),
            attrs: Vec::new(),
        }
    }

    /// Builds the frame and calls `handler` once, on `api` with `threads` pool threads.
    pub fn run(&self, api: &FakeApi, threads: i64, handler: Handler) -> RawOutcome {
        let handler: HandlerFn = handler.as_raw();
        let all: Vec<&RawBuffer> = self.args.iter().chain(&self.rets).collect();
        // Byte sizes of the dims the crate will see (None: malformed, or too large
        // to allocate: no memory behind the buffer).
        let sizes: Vec<Option<usize>> = all
            .iter()
            .map(|b| {
                let dims = b.effective_dims()?;
                let n = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))?;
                n.checked_mul(width(b.dtype)).filter(|&s| s <= 1 << 16)
            })
            .collect();
        // Own allocations first, exactly sized, so that shares can point into them.
        let mut owned: Vec<Vec<u8>> = all
            .iter()
            .zip(&sizes)
            .map(|(b, s)| match (&b.data, s) {
                (Data::Own { misalign }, Some(s)) => filled(s + (*misalign as usize % 8), b.fill),
                _ => Vec::new(),
            })
            .collect();
        let bases: Vec<*mut u8> = owned.iter_mut().map(|v| v.as_mut_ptr()).collect();
        let mut extents = Vec::with_capacity(all.len());
        let datas: Vec<*mut c_void> = all
            .iter()
            .zip(&sizes)
            .map(|(b, &size)| {
                let (p, bytes) = match (&b.data, size) {
                    (Data::Own { misalign }, Some(s)) => {
                        // SAFETY: the allocation holds `misalign % 8 + s` bytes.
                        (unsafe { bases[extents.len()].add(*misalign as usize % 8) }, Some(s))
                    }
                    (Data::Share { entry, offset }, Some(s)) => match owned.get(*entry) {
                        Some(o) if offset.checked_add(s).is_some_and(|end| end <= o.len()) && !o.is_empty() => {
                            // SAFETY: `offset + s` bytes fit in entry `entry`'s allocation.
                            (unsafe { bases[*entry].add(*offset) }, Some(s))
                        }
                        _ => (core::ptr::null_mut(), None),
                    },
                    (Data::Address(a), Some(0)) => (core::ptr::without_provenance_mut(*a), None),
                    // A bogus address only where the crate must refuse the buffer:
                    // malformed dims, or an end past `isize::MAX`.
                    (Data::Address(a), _)
                        if crate_bytes(b).is_none_or(|n| (*a as u128).saturating_add(n) > isize::MAX as u128) =>
                    {
                        (core::ptr::without_provenance_mut(*a), None)
                    }
                    _ => (core::ptr::null_mut(), None),
                };
                extents.push((p as usize, bytes.filter(|_| !p.is_null())));
                p as *mut c_void
            })
            .collect();
        let mut bufs: Vec<sys::XLA_FFI_Buffer> = all
            .iter()
            .zip(&datas)
            .map(|(b, &data)| {
                let rank = b.rank();
                // `dims` holds at least `rank` entries, or is NULL.
                let dims = if rank > 0 && rank as usize > b.dims.len() {
                    core::ptr::null_mut()
                } else {
                    b.dims.as_ptr() as *mut i64
                };
                sys::XLA_FFI_Buffer {
                    struct_size: b.struct_size,
                    extension_start: core::ptr::null_mut(),
                    dtype: b.dtype,
                    data,
                    rank,
                    dims,
                }
            })
            .collect();
        let mut entries: Vec<*mut c_void> = bufs
            .iter_mut()
            .zip(&all)
            .map(|(buf, b)| if b.null_entry { core::ptr::null_mut() } else { buf as *mut _ as *mut c_void })
            .collect();
        let mut kinds: Vec<u32> = all.iter().map(|b| b.kind).collect();
        let na = self.args.len();
        let (arg_entries, ret_entries) = entries.split_at_mut(na);
        let (arg_kinds, ret_kinds) = kinds.split_at_mut(na);

        let mut store = AttrStore::default();
        let attrs = store.raw_dict(self.list_sizes[2], &self.attrs);
        let ctx = FakeCtx::new(threads);
        // SAFETY: all-zero is a valid call frame (null pointers, zero sizes).
        let mut frame: sys::XLA_FFI_CallFrame = unsafe { core::mem::zeroed() };
        frame.struct_size = self.frame_size;
        frame.api = api.as_ptr();
        frame.ctx = &ctx as *const FakeCtx as *mut _;
        frame.stage = self.stage;
        frame.args = sys::XLA_FFI_Args {
            struct_size: self.list_sizes[0],
            extension_start: core::ptr::null_mut(),
            size: na as i64,
            types: arg_kinds.as_mut_ptr() as *mut _,
            args: arg_entries.as_mut_ptr(),
        };
        frame.rets = sys::XLA_FFI_Rets {
            struct_size: self.list_sizes[1],
            extension_start: core::ptr::null_mut(),
            size: ret_entries.len() as i64,
            types: ret_kinds.as_mut_ptr() as *mut _,
            rets: ret_entries.as_mut_ptr(),
        };
        frame.attrs = attrs;
        // SAFETY: the frame and everything it points to live until after the call;
        // every pointer in it is NULL or points to memory of the size it claims.
        let err = unsafe { handler(&mut frame) };
        // An async handler left a future: wait for it before the buffers' memory
        // goes (as XLA does, and as `CallBuilder::run` does).
        let (result, _) = super::future::finish(frame.future, err);
        drop((store, owned, bufs));
        RawOutcome { result, extents }
    }
}

impl Default for RawCall {
    fn default() -> Self {
        Self::new()
    }
}
