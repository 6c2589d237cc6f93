//! A bounds-checked reader of the few FlatBuffers constructs that
//! `jax.export`'s serialization uses: tables, scalars, vectors and strings.

/// A table inside a buffer.
#[derive(Clone, Copy)]
pub(crate) struct Table<'a> {
    buf: &'a [u8],
    pos: usize,
    vtable: usize,
    vtable_len: usize,
}

fn read<const N: usize>(buf: &[u8], pos: usize) -> Result<[u8; N], String> {
    pos.checked_add(N)
        .and_then(|end| buf.get(pos..end))
        .map(|s| s.try_into().expect("slice of length N"))
        .ok_or_else(|| format!("offset {pos} is past the end ({} bytes)", buf.len()))
}

fn u32_at(buf: &[u8], pos: usize) -> Result<usize, String> {
    Ok(u32::from_le_bytes(read(buf, pos)?) as usize)
}

fn u16_at(buf: &[u8], pos: usize) -> Result<usize, String> {
    Ok(u16::from_le_bytes(read(buf, pos)?) as usize)
}

impl<'a> Table<'a> {
    /// The root table of a finished buffer.
    pub(crate) fn root(buf: &'a [u8]) -> Result<Self, String> {
        Self::at(buf, u32_at(buf, 0)?)
    }

    fn at(buf: &'a [u8], pos: usize) -> Result<Self, String> {
        let soffset = i32::from_le_bytes(read(buf, pos)?) as i64;
        let vtable = usize::try_from(pos as i64 - soffset).map_err(|_| "vtable before the buffer".to_string())?;
        let vtable_len = u16_at(buf, vtable)?;
        if vtable_len < 4 || vtable.checked_add(vtable_len).is_none_or(|end| end > buf.len()) {
            return Err(format!("bad vtable at {vtable}"));
        }
        Ok(Self { buf, pos, vtable, vtable_len })
    }

    /// The absolute position of field `index`, if present.
    fn field(&self, index: usize) -> Result<Option<usize>, String> {
        let entry = 4 + 2 * index;
        if entry + 2 > self.vtable_len {
            return Ok(None);
        }
        match u16_at(self.buf, self.vtable + entry)? {
            0 => Ok(None),
            off => Ok(Some(self.pos + off)),
        }
    }

    /// A `u16`/`i16`/`u32` scalar field as `u64`, or `default`.
    pub(crate) fn uint(&self, index: usize, bytes: usize, default: u64) -> Result<u64, String> {
        let Some(p) = self.field(index)? else { return Ok(default) };
        Ok(match bytes {
            1 => u8::from_le_bytes(read(self.buf, p)?) as u64,
            2 => u16::from_le_bytes(read(self.buf, p)?) as u64,
            _ => u32::from_le_bytes(read(self.buf, p)?) as u64,
        })
    }

    /// The position and length of a vector field (after its length word).
    fn vector(&self, index: usize) -> Result<Option<(usize, usize)>, String> {
        let Some(p) = self.field(index)? else { return Ok(None) };
        let start = p + u32_at(self.buf, p)?;
        let len = u32_at(self.buf, start)?;
        Ok(Some((start + 4, len)))
    }

    /// A `[ubyte]` or `string` field.
    pub(crate) fn bytes(&self, index: usize) -> Result<Option<&'a [u8]>, String> {
        let Some((start, len)) = self.vector(index)? else { return Ok(None) };
        start
            .checked_add(len)
            .and_then(|end| self.buf.get(start..end))
            .map(Some)
            .ok_or_else(|| format!("a vector of {len} bytes at {start} is past the end"))
    }

    /// A vector of `u16` or `u32` (`bytes` per element).
    pub(crate) fn uints(&self, index: usize, bytes: usize) -> Result<Vec<u64>, String> {
        let Some((start, len)) = self.vector(index)? else { return Ok(Vec::new()) };
        (0..len)
            .map(|i| {
                let p = start + i * bytes;
                Ok(if bytes == 2 { u16_at(self.buf, p)? as u64 } else { u32_at(self.buf, p)? as u64 })
            })
            .collect()
    }

    /// A vector of tables.
    pub(crate) fn tables(&self, index: usize) -> Result<Vec<Table<'a>>, String> {
        let Some((start, len)) = self.vector(index)? else { return Ok(Vec::new()) };
        (0..len)
            .map(|i| {
                let p = start + 4 * i;
                Table::at(self.buf, p + u32_at(self.buf, p)?)
            })
            .collect()
    }

    /// A vector of strings.
    pub(crate) fn strings(&self, index: usize) -> Result<Vec<String>, String> {
        let Some((start, len)) = self.vector(index)? else { return Ok(Vec::new()) };
        (0..len)
            .map(|i| {
                let p = start + 4 * i;
                let s = p + u32_at(self.buf, p)?;
                let n = u32_at(self.buf, s)?;
                let bytes = self.buf.get(s + 4..s + 4 + n).ok_or("a string is past the end")?;
                Ok(String::from_utf8_lossy(bytes).into_owned())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for buf in [&b""[..], b"\x01", b"\xff\xff\xff\xff", b"\x08\0\0\0\0\0\0\0\xfc\xff\xff\xff"] {
            let _ = Table::root(buf).and_then(|t| t.bytes(13));
        }
    }
}
