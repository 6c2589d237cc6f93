//! The element types of the dtype notation: the one list of their names and XLA
//! codes, which the `#[handler]` macro (for its compile-time checks) and `xla-ffi`
//! (`DataType::name`, `decl::dtype_by_name`) both read.

/// The dtypes of the notation, in its order: every `XLA_FFI_DataType` but
/// `INVALID`, each name as NumPy, `ml_dtypes` and `jax.numpy` spell it (and
/// `DataType::name`), with its code. The headers of XLA FFI API 0.3 (jaxlib 0.10.2)
/// and 0.5 (jaxlib 0.12) have the same codes. `token` is the dtype of a `Token`
/// operand or result (`xla_ffi::Token`). The float8 and float4 types and the
/// sub-byte integers (`int4`, ...) are `ml_dtypes`'; JAX's float6 types
/// (`float6_e2m3fn`, `float6_e3m2fn`) have no XLA FFI code, so no name here.
pub const DTYPES: [(&str, u32); 31] = [
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
    ("float8_e5m2", 19),
    ("float8_e4m3fn", 20),
    ("float8_e4m3b11fnuz", 23),
    ("float8_e5m2fnuz", 24),
    ("float8_e4m3fnuz", 25),
    ("float8_e4m3", 28),
    ("float8_e3m4", 29),
    ("float8_e8m0fnu", 33),
    ("float4_e2m1fn", 32),
    ("int4", 21),
    ("uint4", 22),
    ("int2", 26),
    ("uint2", 27),
    ("int1", 30),
    ("uint1", 31),
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
