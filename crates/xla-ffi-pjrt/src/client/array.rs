//! Host arrays: row-major bytes with an element type and dimensions.

use super::ClientError;

/// The element types a host array can have, with their `PJRT_Buffer_Type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElementType {
    /// `bool`, one byte.
    Pred,
    /// `int8`.
    S8,
    /// `int16`.
    S16,
    /// `int32`.
    S32,
    /// `int64`.
    S64,
    /// `uint8`.
    U8,
    /// `uint16`.
    U16,
    /// `uint32`.
    U32,
    /// `uint64`.
    U64,
    /// `float16`.
    F16,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
    /// `bfloat16`.
    BF16,
    /// `complex64`.
    C64,
    /// `complex128`.
    C128,
}

impl ElementType {
    /// Every element type, in the order of the PJRT enum.
    pub const ALL: [ElementType; 15] = [
        ElementType::Pred,
        ElementType::S8,
        ElementType::S16,
        ElementType::S32,
        ElementType::S64,
        ElementType::U8,
        ElementType::U16,
        ElementType::U32,
        ElementType::U64,
        ElementType::F16,
        ElementType::F32,
        ElementType::F64,
        ElementType::BF16,
        ElementType::C64,
        ElementType::C128,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::Pred | Self::S8 | Self::U8 => 1,
            Self::S16 | Self::U16 | Self::F16 | Self::BF16 => 2,
            Self::S32 | Self::U32 | Self::F32 => 4,
            Self::S64 | Self::U64 | Self::F64 | Self::C64 => 8,
            Self::C128 => 16,
        }
    }

    /// The NumPy/JAX name (`float32`, `bfloat16`, `bool`): XLA FFI's name of the same
    /// type ([`xla_ffi::DataType::name`]), the one list of dtype names.
    pub fn name(self) -> &'static str {
        self.data_type().name()
    }

    /// The XLA FFI element type of the same XLA type (`PJRT_Buffer_Type` and
    /// `XLA_FFI_DataType` number them differently).
    pub fn data_type(self) -> xla_ffi::DataType {
        use xla_ffi::DataType as D;
        match self {
            Self::Pred => D::PRED,
            Self::S8 => D::S8,
            Self::S16 => D::S16,
            Self::S32 => D::S32,
            Self::S64 => D::S64,
            Self::U8 => D::U8,
            Self::U16 => D::U16,
            Self::U32 => D::U32,
            Self::U64 => D::U64,
            Self::F16 => D::F16,
            Self::F32 => D::F32,
            Self::F64 => D::F64,
            Self::BF16 => D::BF16,
            Self::C64 => D::C64,
            Self::C128 => D::C128,
        }
    }

    /// The element type of a NumPy/JAX name, the inverse of [`ElementType::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The `PJRT_Buffer_Type` value.
    pub(crate) fn to_pjrt(self) -> i32 {
        match self {
            Self::Pred => 1,
            Self::S8 => 2,
            Self::S16 => 3,
            Self::S32 => 4,
            Self::S64 => 5,
            Self::U8 => 6,
            Self::U16 => 7,
            Self::U32 => 8,
            Self::U64 => 9,
            Self::F16 => 10,
            Self::F32 => 11,
            Self::F64 => 12,
            Self::BF16 => 13,
            Self::C64 => 14,
            Self::C128 => 15,
        }
    }

    /// The element type of a `PJRT_Buffer_Type` value, if it is one of these.
    pub(crate) fn from_pjrt(value: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.to_pjrt() == value)
    }
}

impl std::fmt::Display for ElementType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An array in host memory: dense, row-major, little-endian bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostArray {
    element_type: ElementType,
    dims: Vec<i64>,
    data: Vec<u8>,
}

impl HostArray {
    /// An array of `dims` from its bytes; the length must be the product of the
    /// dimensions times the element size, and a `pred` array's bytes must each be
    /// 0 or 1 (XLA reads them as C++ `bool`, for which any other byte is undefined).
    pub fn new(element_type: ElementType, dims: Vec<i64>, data: Vec<u8>) -> Result<Self, ClientError> {
        let expected = byte_len(element_type, &dims)?;
        if data.len() != expected {
            return Err(ClientError::Input {
                message: format!("a {element_type} array of shape {dims:?} has {expected} bytes, got {}", data.len()),
            });
        }
        if element_type == ElementType::Pred {
            if let Some(i) = data.iter().position(|&b| b > 1) {
                return Err(ClientError::Input {
                    message: format!("a pred array's elements are 0 or 1, got {} at flat index {i}", data[i]),
                });
            }
        }
        Ok(Self { element_type, dims, data })
    }

    /// Its element type.
    pub fn element_type(&self) -> ElementType {
        self.element_type
    }

    /// Its dimensions, outermost first.
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// Its bytes.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Its bytes, by value.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }
}

/// The byte length of a dense array, or an error for a negative dimension or an
/// overflowing size.
pub(crate) fn byte_len(element_type: ElementType, dims: &[i64]) -> Result<usize, ClientError> {
    let mut n = element_type.size();
    for &d in dims {
        let d = usize::try_from(d)
            .map_err(|_| ClientError::Input { message: format!("dimension {d} of shape {dims:?} is negative") })?;
        n = n
            .checked_mul(d)
            .ok_or_else(|| ClientError::Input { message: format!("an array of shape {dims:?} is too large") })?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_pjrt_values_round_trip() {
        for t in ElementType::ALL {
            assert_eq!(ElementType::from_name(t.name()), Some(t));
            assert_eq!(ElementType::from_pjrt(t.to_pjrt()), Some(t));
        }
        assert_eq!(ElementType::from_pjrt(0), None);
        assert_eq!(ElementType::from_name("float8"), None);
    }

    #[test]
    fn each_element_type_is_its_xla_ffi_type_by_name_and_width() {
        let names: Vec<&str> = ElementType::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "bool",
                "int8",
                "int16",
                "int32",
                "int64",
                "uint8",
                "uint16",
                "uint32",
                "uint64",
                "float16",
                "float32",
                "float64",
                "bfloat16",
                "complex64",
                "complex128"
            ]
        );
        for (i, t) in ElementType::ALL.iter().enumerate() {
            assert_eq!(t.data_type().byte_width(), Some(t.size()), "{t}");
            assert!(ElementType::ALL[i + 1..].iter().all(|u| u.data_type() != t.data_type()), "{t}");
        }
    }

    #[test]
    fn a_pred_array_takes_only_zero_and_one() {
        assert!(HostArray::new(ElementType::Pred, vec![3], vec![0, 1, 1]).is_ok());
        let err = HostArray::new(ElementType::Pred, vec![3], vec![0, 1, 2]).unwrap_err();
        assert_eq!(err.to_string(), "a pred array's elements are 0 or 1, got 2 at flat index 2");
        assert!(HostArray::new(ElementType::U8, vec![3], vec![0, 1, 2]).is_ok());
    }

    #[test]
    fn new_checks_the_byte_length() {
        assert!(HostArray::new(ElementType::F32, vec![2, 3], vec![0; 24]).is_ok());
        let err = HostArray::new(ElementType::F32, vec![2, 3], vec![0; 20]).unwrap_err();
        assert!(err.to_string().contains("has 24 bytes, got 20"), "{err}");
        let err = HostArray::new(ElementType::F32, vec![-1], vec![]).unwrap_err();
        assert!(err.to_string().contains("negative"), "{err}");
        let err = HostArray::new(ElementType::F64, vec![i64::MAX, 4], vec![]).unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
    }
}
