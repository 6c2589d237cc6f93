//! The element types of the dtype notation: the one list of their names and XLA
//! codes, which the `#[handler]` macro (for its compile-time checks) and `xla-ffi`
//! (`DataType::name`, `decl::dtype_by_name`) both read.

/// The dtypes of the notation, in its order: each name as NumPy (and
/// `DataType::name`) spells it, and its `XLA_FFI_DataType` code. `token` is the
/// dtype of a `Token` operand or result (`xla_ffi::Token`).
pub const DTYPES: [(&str, u32); 16] = [
    ("bool", 1),
    ("int8", 2),
    ("int16", 3),
    ("int32", 4),
    ("int64", 5),
    ("uint8", 6),
    ("uint16", 7),
    ("uint32", 8),
    ("uint64", 9),
    ("float16", 10),
    ("bfloat16", 16),
    ("float32", 11),
    ("float64", 12),
    ("complex64", 15),
    ("complex128", 18),
    ("token", 17),
];

/// The names of [`DTYPES`], in its order: an [`Expr::Dtype`](crate::Expr::Dtype)
/// is an index into this list.
pub const DTYPE_NAMES: &[&str] = &{
    let mut names = [""; DTYPES.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = DTYPES[i].0;
        i += 1;
    }
    names
};

/// The `XLA_FFI_DataType` code of a dtype name of the notation.
pub fn dtype_code(name: &str) -> Option<u32> {
    DTYPES.iter().find(|(n, _)| *n == name).map(|&(_, code)| code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_are_distinct() {
        for (i, (n, c)) in DTYPES.iter().enumerate() {
            assert_eq!(DTYPE_NAMES[i], *n);
            assert_eq!(dtype_code(n), Some(*c));
            assert!(DTYPES[i + 1..].iter().all(|(m, d)| m != n && d != c), "{n} listed twice");
        }
    }
}
