//! The dtypes of the notation as `DataType`s ([`NOTATION_DTYPES`], read from
//! `xla-ffi-rules`'s one list), and the notation's `promote` and `acc`.

use crate::dtype::DataType;
use xla_ffi_rules::{DTYPES, DTYPE_NAMES};

/// JAX's promotion of two float dtypes: the same dtype stays, float16 with bfloat16
/// gives float32, otherwise the wider wins. `None` for two different dtypes that
/// are not both floats (the notation promotes floats only).
///
/// ```
/// use xla_ffi::{decl::promote, DataType};
/// assert_eq!(promote(DataType::F16, DataType::BF16), Some(DataType::F32));
/// assert_eq!(promote(DataType::BF16, DataType::F64), Some(DataType::F64));
/// assert_eq!(promote(DataType::S32, DataType::F32), None);
/// ```
pub const fn promote(a: DataType, b: DataType) -> Option<DataType> {
    if a.0 == b.0 {
        return Some(a);
    }
    let (ra, rb) = (float_rank(a), float_rank(b));
    if ra == 0 || rb == 0 {
        return None;
    }
    // float16 and bfloat16 share rank 1 and meet at float32.
    Some(if ra == rb {
        DataType::F32
    } else if ra > rb {
        a
    } else {
        b
    })
}

/// The accumulator dtype: float64 if `a` or `b` is, else float32.
pub const fn accumulator(a: DataType, b: DataType) -> DataType {
    if a.0 == DataType::F64.0 || b.0 == DataType::F64.0 {
        DataType::F64
    } else {
        DataType::F32
    }
}

const fn float_rank(d: DataType) -> u8 {
    if d.0 == DataType::F16.0 || d.0 == DataType::BF16.0 {
        1
    } else if d.0 == DataType::F32.0 {
        2
    } else if d.0 == DataType::F64.0 {
        3
    } else {
        0
    }
}

/// The dtype of a NumPy name the notation knows (`float32`, `bfloat16`, ...), or of
/// `token`.
pub fn dtype_by_name(name: &str) -> Option<DataType> {
    DTYPE_NAMES.iter().position(|n| *n == name).map(|i| NOTATION_DTYPES[i])
}

/// The dtype of each name of [`DTYPE_NAMES`], in its order (the `#[handler]` macro
/// knows a dtype of a rule by its index there): the codes of `xla-ffi-rules`'s list.
#[doc(hidden)]
pub const NOTATION_DTYPES: [DataType; DTYPES.len()] = {
    let mut dtypes = [DataType::INVALID; DTYPES.len()];
    let mut i = 0;
    while i < dtypes.len() {
        dtypes[i] = DataType(DTYPES[i].1);
        i += 1;
    }
    dtypes
};

/// The dtypes [`dtype_by_name`] knows, in the notation's order.
pub fn known_dtypes() -> impl Iterator<Item = DataType> {
    DTYPE_NAMES.iter().filter_map(|n| dtype_by_name(n))
}
