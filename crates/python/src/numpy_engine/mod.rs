//! The NumPy engine of `xla_ffi_rs.python_op`: what [`crate::python_call`]'s handler
//! needs beyond the safe views of `xla-ffi`.
//!
//! * [`interpreter`]: taking the interpreter for real on any thread
//!   ([`with_interpreter`]) and reading reference counts ([`refcount`]);
//! * [`copies`]: copying an operand's bytes into a Python buffer
//!   ([`copy_from_operand`]) and a Python buffer's bytes into a result
//!   ([`copy_into_result`]), from Rust, with non-temporal stores for large copies
//!   (`bulk_copy`);
//! * [`ufunc`]: running an exact NumPy ufunc on XLA's own buffers where no Python
//!   code can see them ([`call_ufunc`]).
//!
//! This is the one place of the extension crate with `unsafe` code (the crate
//! denies it elsewhere): each block says why it holds in a `// SAFETY:` comment.
//! Its memory comes from the safe byte views of `xla-ffi`
//! ([`Buffer::as_bytes`](xla_ffi::Buffer::as_bytes),
//! [`ResultBuffer::as_uninit_bytes`](xla_ffi::ResultBuffer::as_uninit_bytes)), which
//! check that a buffer is host memory and overlaps no other buffer of the call; the
//! `unsafe` here is about Python's side (the C API, buffer exports, memoryviews
//! over those bytes) and the streaming copy. `bulk_copy` needs no interpreter: its
//! tests run under Miri and AddressSanitizer (`tests/bulk_copy.rs`, which compiles
//! that file alone); the rest needs one, and is tested from Python (`tests/` at the
//! repository root, also with the extension built under AddressSanitizer).
#![deny(clippy::undocumented_unsafe_blocks)]

mod bulk_copy;
pub(crate) mod copies;
pub(crate) mod interpreter;
pub(crate) mod ufunc;

pub(crate) use copies::{copy_from_operand, copy_into_result};
pub(crate) use interpreter::{refcount, with_interpreter};
pub(crate) use ufunc::{call_ufunc, UfuncCall};

use xla_ffi::DataType;

/// The element types NumPy has as built-in numeric dtypes (no object, string or
/// user-defined dtype), each of the name [`DataType::name`] gives it: every dtype of
/// `xla_ffi_rules::DTYPES` but `ml_dtypes`' ([`ML_DTYPES`], [`SUB_BYTE`]) and
/// `token`, in its order. Derived from that list, so a dtype added there is a NumPy
/// one unless listed as not one here.
pub(crate) const NUMPY_DTYPES: [DataType; xla_ffi_rules::DTYPES.len() - NOT_NUMPY] = {
    let mut out = [DataType::INVALID; xla_ffi_rules::DTYPES.len() - NOT_NUMPY];
    let (mut i, mut n) = (0, 0);
    while i < xla_ffi_rules::DTYPES.len() {
        let code = xla_ffi_rules::DTYPES[i].1;
        if !(code == DataType::TOKEN.0 || has(&ML_DTYPES, code) || has(&SUB_BYTE, code)) {
            out[n] = DataType(code);
            n += 1;
        }
        i += 1;
    }
    assert!(n == out.len(), "ML_DTYPES or SUB_BYTE names a dtype twice, or one xla_ffi_rules::DTYPES lacks");
    out
};

/// The element types of `ml_dtypes` (a dependency of jax) one byte wide or more, which
/// a NumPy array holds one element per byte as XLA's buffers do; each of the name
/// [`DataType::name`] gives it, `ml_dtypes`' own.
pub(crate) const ML_DTYPES: [DataType; 9] = [
    DataType::BF16,
    DataType::F8E5M2,
    DataType::F8E4M3FN,
    DataType::F8E4M3B11FNUZ,
    DataType::F8E5M2FNUZ,
    DataType::F8E4M3FNUZ,
    DataType::F8E4M3,
    DataType::F8E3M4,
    DataType::F8E8M0FNU,
];

/// The element types XLA packs below one byte per element (`int4`, `float4_e2m1fn`,
/// ...): `ml_dtypes` has them, one element per byte, so a NumPy array cannot be a view
/// of such a buffer.
pub(crate) const SUB_BYTE: [DataType; 7] =
    [DataType::S4, DataType::U4, DataType::S2, DataType::U2, DataType::S1, DataType::U1, DataType::F4E2M1FN];

/// How many dtypes of `xla_ffi_rules::DTYPES` are not NumPy's own: `token` and
/// `ml_dtypes`' ones.
const NOT_NUMPY: usize = 1 + ML_DTYPES.len() + SUB_BYTE.len();

const fn has(list: &[DataType], code: u32) -> bool {
    let mut i = 0;
    while i < list.len() {
        if list[i].0 == code {
            return true;
        }
        i += 1;
    }
    false
}
