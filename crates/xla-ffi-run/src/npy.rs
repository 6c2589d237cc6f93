//! NumPy `.npy` files: read (versions 1 to 3, C order, little-endian) and write
//! (version 1).

use std::io::Read;

use xla_ffi_pjrt::{ElementType, HostArray};

const MAGIC: &[u8] = b"\x93NUMPY";

/// The `descr` of an element type (`bfloat16` is NumPy's 2-byte void, as
/// `np.save` writes an `ml_dtypes.bfloat16` array).
fn descr(t: ElementType) -> &'static str {
    match t {
        ElementType::Pred => "|b1",
        ElementType::S8 => "|i1",
        ElementType::U8 => "|u1",
        ElementType::S16 => "<i2",
        ElementType::S32 => "<i4",
        ElementType::S64 => "<i8",
        ElementType::U16 => "<u2",
        ElementType::U32 => "<u4",
        ElementType::U64 => "<u8",
        ElementType::F16 => "<f2",
        ElementType::F32 => "<f4",
        ElementType::F64 => "<f8",
        ElementType::BF16 => "|V2",
        ElementType::C64 => "<c8",
        ElementType::C128 => "<c16",
        _ => "|V0",
    }
}

/// The element type of a `descr`; `|V2` (a 2-byte void) reads as `bfloat16`.
/// Compares bytes: a `descr` need not be ASCII.
fn from_descr(d: &str) -> Option<ElementType> {
    let d = d.replace('=', "<");
    let d = d.as_bytes();
    ElementType::ALL.into_iter().find(|&t| {
        let own = descr(t).as_bytes();
        own == d || (own[0] == b'|' && d.len() == own.len() && d[1..] == own[1..])
    })
}

/// Why a `descr` is refused: a big-endian one says how to save it little-endian.
fn unsupported(d: &str) -> String {
    match d.strip_prefix('>').map(|rest| format!("<{rest}")).filter(|le| from_descr(le).is_some()) {
        Some(le) => format!(
            "unsupported dtype '{d}': big-endian arrays are not supported; save a little-endian one \
             (a.astype('{le}'))"
        ),
        // np.save writes ml_dtypes' float8 and int4 arrays as 1-byte voids, naming no dtype.
        None if d.len() == 3 && d.ends_with("V1") => format!(
            "unsupported dtype '{d}': a 1-byte void, as np.save writes a float8 or int4 array (ml_dtypes), \
             whose element type the file does not record; expected one of {}: save it converted \
             (a.astype(np.float32))",
            taken()
        ),
        None => format!("unsupported dtype '{d}' (big-endian or not a number); expected one of {}", taken()),
    }
}

/// The element types read, with their `descr`: `float32 ('<f4')`, ...
fn taken() -> String {
    let names: Vec<String> = ElementType::ALL.iter().map(|&t| format!("{t} ('{}')", descr(t))).collect();
    names.join(", ")
}

/// The value of `'key': value` in the header's dict, up to the next `,` or `}`
/// outside parentheses.
fn header_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let start = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[start..].trim_start().strip_prefix(':')?.trim_start();
    let mut depth = 0;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&rest[..=i]);
                }
            }
            ',' | '}' if depth == 0 => return Some(rest[..i].trim()),
            _ => {}
        }
    }
    None
}

/// The longest header read: NumPy's own reader refuses headers over 10,000 bytes
/// (`max_header_size`); this leaves room for long shapes.
const MAX_HEADER: usize = 1 << 20;

/// Parses a `.npy` file's bytes.
#[cfg(test)]
pub fn parse(bytes: &[u8]) -> Result<HostArray, String> {
    read(&mut &bytes[..])
}

/// Reads a `.npy` file from `r`: never more bytes than its header declares plus
/// one (to tell trailing data), so an endless stream (`/dev/zero`, a pipe that
/// does not end) is an error, not a process that fills memory.
pub fn read(r: &mut impl std::io::Read) -> Result<HostArray, String> {
    let io = |e: std::io::Error| format!("cannot read it: {e}");
    let mut prefix = Vec::new();
    r.by_ref().take(12).read_to_end(&mut prefix).map_err(io)?;
    if !prefix.starts_with(MAGIC) || prefix.len() < 10 {
        return Err("not a .npy file (no \\x93NUMPY magic)".into());
    }
    let (header_len, header_start) = match prefix[6] {
        1 => (u16::from_le_bytes([prefix[8], prefix[9]]) as usize, 10),
        2 | 3 if prefix.len() >= 12 => {
            (u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]) as usize, 12)
        }
        v => return Err(format!("unsupported .npy version {v}")),
    };
    if header_len > MAX_HEADER {
        return Err(format!("the .npy header declares {header_len} bytes, more than the {MAX_HEADER} read"));
    }
    // A version 1 header starts inside the 12 bytes read.
    let mut header = prefix.split_off(header_start.min(prefix.len()));
    header.truncate(header_len);
    r.by_ref().take((header_len - header.len()) as u64).read_to_end(&mut header).map_err(io)?;
    if header.len() < header_len {
        return Err("the .npy header is truncated".into());
    }
    let header = std::str::from_utf8(&header).map_err(|_| "the .npy header is not text")?;
    let d = header_value(header, "descr").ok_or("the .npy header has no 'descr'")?;
    let d = d.trim_matches(|c| c == '\'' || c == '"');
    let element_type = from_descr(d).ok_or_else(|| unsupported(d))?;
    match header_value(header, "fortran_order") {
        Some("False") => {}
        Some("True") => {
            return Err("Fortran-order arrays are not supported: save a C-order array (np.ascontiguousarray)".into());
        }
        Some(other) => return Err(format!("the .npy header's 'fortran_order' must be True or False, got {other}")),
        None => return Err("the .npy header has no 'fortran_order'".into()),
    }
    let shape = header_value(header, "shape").ok_or("the .npy header has no 'shape'")?;
    let dims = shape
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<i64>().map_err(|_| format!("bad dimension '{s}' in shape {shape}")))
        .collect::<Result<Vec<_>, _>>()?;
    // The size the header declares (an invalid one is left to `HostArray::new`,
    // which says why, with no data read).
    let expected = dims
        .iter()
        .try_fold(element_type.size(), |n, &d| usize::try_from(d).ok().and_then(|d| n.checked_mul(d)))
        .filter(|&n| n <= isize::MAX as usize);
    let Some(expected) = expected else {
        return HostArray::new(element_type, dims, Vec::new()).map_err(|e| e.to_string());
    };
    let mut data = Vec::new();
    r.by_ref().take(expected as u64 + 1).read_to_end(&mut data).map_err(io)?;
    if data.len() > expected {
        return Err(format!(
            "a {element_type} array of shape {dims:?} has {expected} bytes; the file holds more after them"
        ));
    }
    HostArray::new(element_type, dims, data).map_err(|e| e.to_string())
}

/// The bytes of a version 1.0 `.npy` file holding `array`.
pub fn serialize(array: &HostArray) -> Vec<u8> {
    let shape = match array.dims() {
        [d] => format!("({d},)"),
        dims => format!("({})", dims.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut header =
        format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}", descr(array.element_type()));
    // Pad with spaces so that the data starts at a multiple of 64, ending in '\n'.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + array.data().len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(array.data());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for (t, dims) in [
            (ElementType::F32, vec![2, 3]),
            (ElementType::F64, vec![]),
            (ElementType::S32, vec![4]),
            (ElementType::BF16, vec![1, 2]),
            (ElementType::Pred, vec![0]),
        ] {
            let n = dims.iter().product::<i64>() as usize * t.size();
            let a = HostArray::new(t, dims, (0..n).map(|i| i as u8).collect()).unwrap();
            let bytes = serialize(&a);
            assert_eq!(parse(&bytes).unwrap(), a);
        }
    }

    #[test]
    fn reads_what_numpy_writes() {
        // np.save of np.arange(3, dtype='<f4').
        let mut b = b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }".to_vec();
        b.resize(10 + 0x76 - 1, b' ');
        b.push(b'\n');
        b.extend([0.0f32, 1.0, 2.0].iter().flat_map(|v| v.to_le_bytes()));
        let a = parse(&b).unwrap();
        assert_eq!((a.element_type(), a.dims()), (ElementType::F32, &[3i64][..]));
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert!(parse(b"hello").unwrap_err().contains("not a .npy"));
        let mut b = serialize(&HostArray::new(ElementType::F32, vec![2], vec![0; 8]).unwrap());
        b.truncate(b.len() - 1);
        assert!(parse(&b).unwrap_err().contains("has 8 bytes, got 7"));
        let mut text = serialize(&HostArray::new(ElementType::F32, vec![1], vec![0; 4]).unwrap());
        let at = text.windows(3).position(|w| w == b"<f4").unwrap();
        text[at] = b'>';
        let err = parse(&text).unwrap_err();
        assert!(err.contains("unsupported dtype '>f4': big-endian") && err.contains("a.astype('<f4')"), "{err}");
    }

    /// The header of a `.npy` file whose `descr` is `descr` (a vector of 8 elements).
    fn with_descr(descr: &str) -> Vec<u8> {
        let header = format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (8,), }}\n");
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(&[0; 64]);
        b
    }

    #[test]
    fn a_descr_that_is_not_ascii_is_refused_not_a_panic() {
        // A 3-byte descr whose byte 1 is inside a character.
        let err = parse(&with_descr("'\u{e9}x'")).unwrap_err();
        assert!(err.contains("unsupported dtype '\u{e9}x'"), "{err}");
    }

    #[test]
    fn a_missing_or_odd_fortran_order_is_not_called_fortran_order() {
        let header = |h: &str| {
            let h = format!("{h}\n");
            let mut b = b"\x93NUMPY\x01\x00".to_vec();
            b.extend_from_slice(&(h.len() as u16).to_le_bytes());
            b.extend_from_slice(h.as_bytes());
            b.extend_from_slice(&[0; 8]);
            b
        };
        let err = parse(&header("{'descr': '<f8', 'shape': (1,)}")).unwrap_err();
        assert_eq!(err, "the .npy header has no 'fortran_order'");
        let err = parse(&header("{'descr': '<f8', 'fortran_order': 0, 'shape': (1,)}")).unwrap_err();
        assert_eq!(err, "the .npy header's 'fortran_order' must be True or False, got 0");
        let err = parse(&header("{'descr': '<f8', 'fortran_order': True, 'shape': (1,)}")).unwrap_err();
        assert!(err.starts_with("Fortran-order arrays are not supported"), "{err}");
    }

    #[test]
    fn a_float8_or_int4_file_says_what_it_is_and_what_is_read() {
        // np.save of np.zeros(8, ml_dtypes.float8_e4m3fn) (or int4): a 1-byte void.
        for d in ["'<V1'", "'|V1'"] {
            let err = parse(&with_descr(d)).unwrap_err();
            assert!(err.contains("a float8 or int4 array") && err.contains("float32 ('<f4')"), "{err}");
            assert!(err.contains("bfloat16 ('|V2')") && err.contains("a.astype(np.float32)"), "{err}");
        }
    }

    #[test]
    fn a_structured_dtype_is_named_whole() {
        // np.save of np.zeros(8, dtype=[('a', '<f8')]).
        let err = parse(&with_descr("[('a', '<f8')]")).unwrap_err();
        assert!(err.contains("unsupported dtype '[('a', '<f8')]' (big-endian or not a number)"), "{err}");
    }

    #[test]
    fn an_endless_stream_is_an_error_not_a_read_without_end() {
        use std::io::Read;
        // Zeros for ever (`/dev/zero`): no magic, after 12 bytes.
        assert!(read(&mut std::io::repeat(0)).unwrap_err().contains("not a .npy"));
        // A valid header, then data for ever: refused after one byte too many.
        let head = serialize(&HostArray::new(ElementType::F32, vec![2], vec![0; 8]).unwrap());
        let head = &head[..head.len() - 8];
        let err = read(&mut head.chain(std::io::repeat(1))).unwrap_err();
        assert!(err.contains("has 8 bytes; the file holds more"), "{err}");
        // A version 2 header that declares 4 GiB of header.
        let mut v2 = b"\x93NUMPY\x02\x00\xff\xff\xff\xff".to_vec();
        v2.extend_from_slice(b"{'descr': '<f4'");
        let err = read(&mut v2.as_slice().chain(std::io::repeat(b' '))).unwrap_err();
        assert!(err.contains("header declares 4294967295 bytes"), "{err}");
    }
}
