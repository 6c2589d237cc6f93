//! An owned copy of what a call frame describes, for an async handler's
//! asynchronous part: [`Snapshot`].
//!
//! XLA keeps a call's buffers (the memory their data pointers address) alive until
//! the call's future completes, but not the structures that describe them: XLA:CPU
//! builds the `XLA_FFI_Buffer` structs, their dims, the entry arrays and the
//! attribute dictionary in a call-frame object that it frees, or hands to the next
//! execution, as soon as the handler returns. So the synchronous part copies them
//! all here: the operand and result entries (each `XLA_FFI_Buffer` with its dims)
//! and the attributes (names, kinds and values, nested dictionaries too), laid out
//! as XLA's structs so that the ordinary decoders read the copy. Only the data
//! pointers still point into XLA's memory.
//!
//! Every copy lives in a `Vec` that is filled before any pointer into it is taken
//! and never grows afterwards, so the pointers stay valid while the `Snapshot`
//! lives, wherever it moves.

use core::ffi::c_void;

use xla_ffi_sys as sys;

use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::frame::{ApiTable, Frame};
use crate::raw::{self, c_slice};
use crate::site::Role;

/// Copies of a call's operand and result entries, its attributes, and what the
/// frame knows about the runtime. See the module docs.
pub(crate) struct Snapshot {
    api: ApiTable<'static>,
    stage: u32,
    host: bool,
    args: Entries,
    rets: Entries,
    attrs: OwnedDict,
}

impl Snapshot {
    /// Copies everything `frame` describes (not the buffers' contents).
    pub(crate) fn of(frame: &Frame<'_>) -> Result<Snapshot> {
        Ok(Snapshot {
            api: frame.api_static(),
            stage: frame.stage,
            host: frame.host,
            args: Entries::of(frame.entries(Role::Operand)),
            rets: Entries::of(frame.entries(Role::Result)),
            // SAFETY: `open` checked the attributes struct's size; XLA's dictionary and
            // everything it points to is alive for the call, which is still running.
            attrs: unsafe { OwnedDict::of(frame.raw_attrs(), "")? },
        })
    }

    /// The API table (it lives for the process).
    pub(crate) fn api(&self) -> ApiTable<'static> {
        self.api
    }

    /// A frame over the copies, with no invoke context.
    ///
    /// # Safety
    /// The call's future must not have completed: until then XLA keeps the buffers
    /// the copied entries' data pointers address alive (and touches none of the
    /// results).
    pub(crate) unsafe fn frame(&self) -> Frame<'_> {
        // SAFETY: the copies are laid out as XLA's structs (BUFFER entries are NULL or
        // point to a full `XLA_FFI_Buffer` with its dims; the dictionary's arrays,
        // names and values are complete), all owned by `self`; the table passed `open`;
        // the data pointers are valid (the caller's promise).
        unsafe {
            Frame::from_copies(
                self.api.ptr(),
                self.stage,
                self.host,
                (&self.args.ptrs, &self.args.types),
                (&self.rets.ptrs, &self.rets.types),
                &self.attrs.raw[0],
            )
        }
    }
}

/// Copied operand or result entries.
struct Entries {
    types: Vec<u32>,
    /// NULL for an entry that is not a well-formed buffer (decoding reports it), or a
    /// pointer into `bufs`.
    ptrs: Vec<*mut c_void>,
    /// What `ptrs` point to (only read through them).
    #[allow(dead_code)]
    bufs: Vec<sys::XLA_FFI_Buffer>,
    /// The dims each buffer's `dims` points to (only read through them).
    #[allow(dead_code)]
    dims: Vec<Vec<i64>>,
}

impl Entries {
    fn of((ptrs, types): (&[*mut c_void], &[u32])) -> Entries {
        let n = ptrs.len().min(types.len());
        let mut dims: Vec<Vec<i64>> = Vec::with_capacity(n);
        let mut read: Vec<Option<(DataType, *mut c_void)>> = Vec::with_capacity(n);
        for i in 0..n {
            let entry = if types[i] == sys::XLA_FFI_ArgType_BUFFER {
                // SAFETY: `open` read these entries from XLA's frame; a BUFFER entry is
                // NULL or an `XLA_FFI_Buffer` alive for the call.
                unsafe { raw::buffer(ptrs[i]) }
            } else {
                None
            };
            read.push(entry.map(|b| (b.dtype(), b.data())));
            dims.push(entry.map(|b| b.dims().to_vec()).unwrap_or_default());
        }
        // `dims` is complete: its inner buffers no longer move.
        let bufs: Vec<sys::XLA_FFI_Buffer> = read
            .iter()
            .zip(&dims)
            .map(|(r, d)| {
                let (dtype, data) = r.unwrap_or((DataType::INVALID, core::ptr::null_mut()));
                sys::XLA_FFI_Buffer {
                    struct_size: sys::XLA_FFI_Buffer_STRUCT_SIZE as usize,
                    extension_start: core::ptr::null_mut(),
                    dtype: dtype.0,
                    data,
                    rank: d.len() as i64,
                    dims: d.as_ptr() as *mut i64,
                }
            })
            .collect();
        let base = bufs.as_ptr() as *mut sys::XLA_FFI_Buffer;
        let ptrs = read
            .iter()
            .enumerate()
            // `wrapping_add` stays inside `bufs` (i < bufs.len()).
            .map(|(i, r)| if r.is_some() { base.wrapping_add(i) as *mut c_void } else { core::ptr::null_mut() })
            .collect();
        Entries { types: types[..n].to_vec(), ptrs, bufs, dims }
    }
}

/// A copied attribute value: where its struct is, by kind.
enum Val {
    Scalar(usize),
    Array(usize),
    Str(usize),
    Dict(usize),
}

/// A copied `XLA_FFI_Attrs` and everything it points to.
struct OwnedDict {
    /// One element: the dictionary struct, pointing into the vectors below.
    raw: Vec<sys::XLA_FFI_Attrs>,
    names: Vec<sys::XLA_FFI_ByteSpan>,
    name_ptrs: Vec<*mut sys::XLA_FFI_ByteSpan>,
    types: Vec<u32>,
    values: Vec<*mut c_void>,
    scalars: Vec<sys::XLA_FFI_Scalar>,
    arrays: Vec<sys::XLA_FFI_Array>,
    spans: Vec<sys::XLA_FFI_ByteSpan>,
    dicts: Vec<OwnedDict>,
    /// Names and string values.
    text: Vec<Vec<u8>>,
    /// Scalar and array payloads, 8-byte aligned (every element type's alignment).
    payload: Vec<Vec<u64>>,
    /// While filling: which payload each scalar and array holds (`None`: a NULL
    /// pointer), and which text each string value is.
    scalar_payload: Vec<Option<usize>>,
    array_payload: Vec<Option<usize>>,
    span_text: Vec<usize>,
}

/// Copies `bytes` bytes at `src` into 8-byte-aligned storage.
///
/// # Safety
/// `src` must be readable for `bytes` bytes.
unsafe fn copy_payload(src: *const c_void, bytes: usize) -> Vec<u64> {
    let mut v = vec![0u64; bytes.div_ceil(8)];
    if bytes > 0 {
        // SAFETY: `src` is readable for `bytes` bytes (the caller's promise) and `v`
        // holds at least `bytes` bytes; they do not overlap (`v` is new).
        unsafe { core::ptr::copy_nonoverlapping(src as *const u8, v.as_mut_ptr() as *mut u8, bytes) };
    }
    v
}

impl OwnedDict {
    /// Copies a dictionary; `path` names it in errors ("" for the top level).
    ///
    /// # Safety
    /// `raw` must be a valid `XLA_FFI_Attrs` whose entries, names and values are
    /// valid and alive for this call (as `RawDict::from_raw` requires).
    unsafe fn of(raw: &sys::XLA_FFI_Attrs, path: &str) -> Result<OwnedDict> {
        let (names_in, types_in, values_in): (&[*mut sys::XLA_FFI_ByteSpan], &[u32], &[*mut c_void]) =
            if raw.struct_size < sys::XLA_FFI_Attrs_STRUCT_SIZE as usize {
                (&[], &[], &[])
            } else {
                // SAFETY: the caller's promise (NULL arrays are allowed for size 0).
                unsafe {
                    (
                        c_slice(raw.names as *const *mut sys::XLA_FFI_ByteSpan, raw.size),
                        c_slice(raw.types as *const u32, raw.size),
                        c_slice(raw.attrs as *const *mut c_void, raw.size),
                    )
                }
            };
        let n = names_in.len().min(types_in.len()).min(values_in.len());
        let mut d = OwnedDict {
            raw: Vec::with_capacity(1),
            names: Vec::with_capacity(n),
            name_ptrs: Vec::with_capacity(n),
            types: Vec::with_capacity(n),
            values: Vec::with_capacity(n),
            scalars: Vec::new(),
            arrays: Vec::new(),
            spans: Vec::new(),
            dicts: Vec::new(),
            text: Vec::new(),
            payload: Vec::new(),
            scalar_payload: Vec::new(),
            array_payload: Vec::new(),
            span_text: Vec::new(),
        };
        let mut vals: Vec<Option<Val>> = Vec::with_capacity(n);
        let mut name_text: Vec<usize> = Vec::with_capacity(n);
        for i in 0..n {
            let name_ptr = names_in[i];
            let name: &[u8] = if name_ptr.is_null() {
                &[]
            } else {
                // SAFETY: a name of a valid dictionary is a valid byte span (the caller's
                // promise), alive for the call.
                unsafe { c_slice((*name_ptr).ptr as *const u8, (*name_ptr).len as i64) }
            };
            name_text.push(d.text.len());
            d.text.push(name.to_vec());
            let here = || format!("{path}{}", String::from_utf8_lossy(name));
            let ptr = values_in[i];
            d.types.push(types_in[i]);
            if ptr.is_null() {
                vals.push(None);
                continue;
            }
            // SAFETY: for each kind, a valid dictionary stores a pointer to that kind's
            // struct, alive for the call (the caller's promise).
            let val = unsafe {
                match types_in[i] {
                    sys::XLA_FFI_AttrType_SCALAR => {
                        let s = &*(ptr as *const sys::XLA_FFI_Scalar);
                        let width = DataType(s.dtype).byte_width().ok_or_else(|| uncopyable(&here(), s.dtype))?;
                        let which = (!s.value.is_null()).then(|| {
                            d.payload.push(copy_payload(s.value, width));
                            d.payload.len() - 1
                        });
                        d.scalars.push(sys::XLA_FFI_Scalar { dtype: s.dtype, value: core::ptr::null_mut() });
                        d.scalar_payload.push(which);
                        Some(Val::Scalar(d.scalars.len() - 1))
                    }
                    sys::XLA_FFI_AttrType_ARRAY => {
                        let a = &*(ptr as *const sys::XLA_FFI_Array);
                        let width = DataType(a.dtype).byte_width().ok_or_else(|| uncopyable(&here(), a.dtype))?;
                        let bytes =
                            a.size.checked_mul(width).filter(|&b| b <= isize::MAX as usize).ok_or_else(|| {
                                Error::invalid_argument(format!(
                                    "attribute `{}`: array of {} elements is too large",
                                    here(),
                                    a.size
                                ))
                            })?;
                        let which = (!a.data.is_null()).then(|| {
                            d.payload.push(copy_payload(a.data, bytes));
                            d.payload.len() - 1
                        });
                        d.arrays.push(sys::XLA_FFI_Array { dtype: a.dtype, size: a.size, data: core::ptr::null_mut() });
                        d.array_payload.push(which);
                        Some(Val::Array(d.arrays.len() - 1))
                    }
                    sys::XLA_FFI_AttrType_STRING => {
                        let s = &*(ptr as *const sys::XLA_FFI_ByteSpan);
                        let text = c_slice(s.ptr as *const u8, s.len as i64);
                        d.text.push(text.to_vec());
                        d.spans.push(sys::XLA_FFI_ByteSpan { ptr: core::ptr::null(), len: text.len() });
                        d.span_text.push(d.text.len() - 1);
                        Some(Val::Str(d.spans.len() - 1))
                    }
                    sys::XLA_FFI_AttrType_DICTIONARY => {
                        let inner = OwnedDict::of(&*(ptr as *const sys::XLA_FFI_Attrs), &format!("{}.", here()))?;
                        d.dicts.push(inner);
                        Some(Val::Dict(d.dicts.len() - 1))
                    }
                    _ => None,
                }
            };
            vals.push(val);
        }
        // Every vector is complete: now the pointers into them.
        for &t in &name_text {
            d.names.push(sys::XLA_FFI_ByteSpan {
                ptr: d.text[t].as_ptr() as *const core::ffi::c_char,
                len: d.text[t].len(),
            });
        }
        let payload = &mut d.payload;
        let mut payload_ptr =
            |which: Option<usize>| which.map_or(core::ptr::null_mut(), |k| payload[k].as_mut_ptr() as *mut c_void);
        for (s, &which) in d.scalars.iter_mut().zip(&d.scalar_payload) {
            s.value = payload_ptr(which);
        }
        for (a, &which) in d.arrays.iter_mut().zip(&d.array_payload) {
            a.data = payload_ptr(which);
        }
        for (sp, &t) in d.spans.iter_mut().zip(&d.span_text) {
            sp.ptr = d.text[t].as_ptr() as *const core::ffi::c_char;
        }
        let names_base = d.names.as_mut_ptr();
        d.name_ptrs.extend((0..n).map(|k| names_base.wrapping_add(k)));
        let (sc, ar, sp) = (d.scalars.as_mut_ptr(), d.arrays.as_mut_ptr(), d.spans.as_mut_ptr());
        for v in &vals {
            // `wrapping_add` stays inside each vector (the index came from it).
            let p = match v {
                None => core::ptr::null_mut(),
                Some(Val::Scalar(k)) => sc.wrapping_add(*k) as *mut c_void,
                Some(Val::Array(k)) => ar.wrapping_add(*k) as *mut c_void,
                Some(Val::Str(k)) => sp.wrapping_add(*k) as *mut c_void,
                Some(Val::Dict(k)) => d.dicts[*k].raw.as_mut_ptr() as *mut c_void,
            };
            d.values.push(p);
        }
        let dict = sys::XLA_FFI_Attrs {
            struct_size: sys::XLA_FFI_Attrs_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            size: n as i64,
            types: d.types.as_mut_ptr(),
            names: d.name_ptrs.as_mut_ptr(),
            attrs: d.values.as_mut_ptr(),
        };
        d.raw.push(dict);
        Ok(d)
    }
}

fn uncopyable(name: &str, dtype: u32) -> Error {
    Error::invalid_argument(format!(
        "attribute `{name}`: dtype {} has no known width, so it cannot be kept for the asynchronous part",
        DataType(dtype)
    ))
}
