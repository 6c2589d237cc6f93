//! NumPy `.npy` files: read (versions 1 to 3, C order, little-endian) and write
//! (version 1).

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
fn from_descr(d: &str) -> Option<ElementType> {
    let d = d.replace('=', "<");
    ElementType::ALL.into_iter().find(|&t| {
        let own = descr(t);
        own == d || (own.starts_with('|') && d.len() == own.len() && d[1..] == own[1..])
    })
}

/// The value of `'key': value` in the header's dict, up to the next `,` or `}`
/// outside parentheses.
fn header_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let start = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[start..].trim_start().strip_prefix(':')?.trim_start();
    let mut depth = 0;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
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

/// Parses a `.npy` file's bytes.
pub fn parse(bytes: &[u8]) -> Result<HostArray, String> {
    if !bytes.starts_with(MAGIC) || bytes.len() < 10 {
        return Err("not a .npy file (no \\x93NUMPY magic)".into());
    }
    let (header_len, header_start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let data_start = header_start + header_len;
    let header = bytes.get(header_start..data_start).ok_or("the .npy header is truncated")?;
    let header = std::str::from_utf8(header).map_err(|_| "the .npy header is not text")?;
    let d = header_value(header, "descr").ok_or("the .npy header has no 'descr'")?;
    let d = d.trim_matches(|c| c == '\'' || c == '"');
    let element_type = from_descr(d).ok_or_else(|| format!("unsupported dtype '{d}' (big-endian or not a number)"))?;
    if header_value(header, "fortran_order") != Some("False") {
        return Err("Fortran-order arrays are not supported: save a C-order array (np.ascontiguousarray)".into());
    }
    let shape = header_value(header, "shape").ok_or("the .npy header has no 'shape'")?;
    let dims = shape
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<i64>().map_err(|_| format!("bad dimension '{s}' in shape {shape}")))
        .collect::<Result<Vec<_>, _>>()?;
    HostArray::new(element_type, dims, bytes[data_start..].to_vec()).map_err(|e| e.to_string())
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
        assert!(parse(&text).unwrap_err().contains("unsupported dtype '>f4'"));
    }
}
