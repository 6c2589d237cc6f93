//! The parameter types of a compiled program, read from the optimized module
//! that `PJRT_Executable_OptimizedProgram` returns (PJRT 0.81 and newer): a
//! serialized `HloModuleProtoWithConfig` (format `hlo_with_config`) or
//! `HloModuleProto` (format `hlo`). Its `host_program_shape` is the entry
//! computation's signature, the contract of the buffers a run takes.
//!
//! A few protobuf fields are read by hand (no protobuf library), from
//! `xla/service/hlo.proto` and `xla/xla_data.proto`:
//! `HloModuleProtoWithConfig { HloModuleProto hlo_module = 1; }`,
//! `HloModuleProto { ProgramShapeProto host_program_shape = 4; }`,
//! `ProgramShapeProto { repeated ShapeProto parameters = 1; }`,
//! `ShapeProto { PrimitiveType element_type = 2; repeated int64 dimensions = 3;
//! repeated ShapeProto tuple_shapes = 4; repeated bool is_dynamic_dimension = 6; }`.
//! Anything malformed is an `Err`; nothing here can panic or read out of bounds.

use super::ElementType;

/// The type of an array a program takes: its element type and dimensions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ArrayType {
    /// The element type.
    pub element_type: ElementType,
    /// The dimensions, outermost first (empty for a scalar).
    pub dims: Vec<i64>,
}

impl std::fmt::Display for ArrayType {
    /// `float32[2,3]`, `int32[]` (a scalar), as the runner and JAX's avals write them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = self.dims.iter().map(i64::to_string).collect();
        write!(f, "{}[{}]", self.element_type, dims.join(","))
    }
}

/// XLA's `PrimitiveType` value (`xla_data.proto`) of an element type.
fn from_xla(value: u64) -> Option<ElementType> {
    Some(match value {
        1 => ElementType::Pred,
        2 => ElementType::S8,
        3 => ElementType::S16,
        4 => ElementType::S32,
        5 => ElementType::S64,
        6 => ElementType::U8,
        7 => ElementType::U16,
        8 => ElementType::U32,
        9 => ElementType::U64,
        10 => ElementType::F16,
        11 => ElementType::F32,
        12 => ElementType::F64,
        15 => ElementType::C64,
        16 => ElementType::BF16,
        18 => ElementType::C128,
        _ => return None,
    })
}

/// One protobuf field: its number and value.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The fields of one serialized message, in order.
struct Fields<'a> {
    rest: &'a [u8],
}

fn varint(rest: &mut &[u8]) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let (&byte, tail) = rest.split_first().ok_or("a truncated varint")?;
        *rest = tail;
        if shift == 63 && byte > 1 {
            return Err("a varint longer than 64 bits".into());
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("a varint longer than 10 bytes".into())
}

fn take<'a>(rest: &mut &'a [u8], n: u64) -> Result<&'a [u8], String> {
    let n = usize::try_from(n).map_err(|_| "a field longer than memory")?;
    if n > rest.len() {
        return Err(format!("a field of {n} bytes with {} left", rest.len()));
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Value<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let field = (|| {
            let key = varint(&mut self.rest)?;
            let value = match key & 7 {
                0 => Value::Varint(varint(&mut self.rest)?),
                1 => take(&mut self.rest, 8).map(|_| Value::Fixed)?,
                2 => {
                    let n = varint(&mut self.rest)?;
                    Value::Bytes(take(&mut self.rest, n)?)
                }
                5 => take(&mut self.rest, 4).map(|_| Value::Fixed)?,
                wire => return Err(format!("wire type {wire}, which XLA's protos do not use")),
            };
            Ok((key >> 3, value))
        })();
        if field.is_err() {
            self.rest = &[];
        }
        Some(field)
    }
}

fn fields(bytes: &[u8]) -> Fields<'_> {
    Fields { rest: bytes }
}

/// The last occurrence of message field `number` (protobuf's rule for a
/// singular field given twice, close enough for XLA's serializer, which writes it
/// once).
fn message(bytes: &[u8], number: u64, what: &str) -> Result<Option<Vec<u8>>, String> {
    let mut found = None;
    for field in fields(bytes) {
        match field? {
            (n, Value::Bytes(b)) if n == number => found = Some(b.to_vec()),
            (n, _) if n == number => return Err(format!("{what} is not a message")),
            _ => {}
        }
    }
    Ok(found)
}

/// The values of a repeated integer field, packed or not.
fn push_ints(value: Value<'_>, out: &mut Vec<u64>) -> Result<(), String> {
    match value {
        Value::Varint(v) => out.push(v),
        Value::Bytes(mut packed) => {
            while !packed.is_empty() {
                out.push(varint(&mut packed)?);
            }
        }
        Value::Fixed => return Err("a fixed-width value where varints were expected".into()),
    }
    Ok(())
}

/// A parameter's shape: `Ok(Some)` for a static array of a type [`ElementType`]
/// has, `Ok(None)` for anything else (a tuple, a token, a dynamic dimension, an
/// element type such as `f8e4m3fn`).
fn shape(bytes: &[u8]) -> Result<Option<ArrayType>, String> {
    let (mut element_type, mut dims, mut dynamic, mut tuple) = (0, Vec::new(), Vec::new(), false);
    for field in fields(bytes) {
        match field? {
            (2, Value::Varint(v)) => element_type = v,
            (3, value) => push_ints(value, &mut dims)?,
            (4, _) => tuple = true,
            (6, value) => push_ints(value, &mut dynamic)?,
            _ => {}
        }
    }
    let Some(element_type) = from_xla(element_type) else { return Ok(None) };
    if tuple || dynamic.iter().any(|&d| d != 0) {
        return Ok(None);
    }
    let dims = dims.into_iter().map(|d| i64::try_from(d).map_err(|_| format!("a dimension of {d}")));
    Ok(Some(ArrayType { element_type, dims: dims.collect::<Result<_, _>>()? }))
}

/// The entry computation's parameters of a serialized optimized module, each
/// `None` when it is not a static array of an [`ElementType`].
pub(crate) fn entry_parameters(code: &[u8], format: &str) -> Result<Vec<Option<ArrayType>>, String> {
    let module = match format {
        "hlo_with_config" => message(code, 1, "hlo_module")?.ok_or("no hlo_module")?,
        "hlo" => code.to_vec(),
        other => return Err(format!("the optimized program has format {other:?}, not \"hlo_with_config\" or \"hlo\"")),
    };
    let program_shape = message(&module, 4, "host_program_shape")?.ok_or("no host_program_shape")?;
    let mut out = Vec::new();
    for field in fields(&program_shape) {
        match field? {
            (1, Value::Bytes(b)) => out.push(shape(b)?),
            (1, _) => return Err("a parameter is not a message".into()),
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(number: u64, wire: u64) -> Vec<u8> {
        encode(number << 3 | wire)
    }

    fn encode(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    fn bytes_field(number: u64, body: &[u8]) -> Vec<u8> {
        [key(number, 2), encode(body.len() as u64), body.to_vec()].concat()
    }

    fn shape_proto(element_type: u64, dims: &[u64], packed: bool) -> Vec<u8> {
        let mut out = [key(2, 0), encode(element_type)].concat();
        if packed {
            let body: Vec<u8> = dims.iter().flat_map(|&d| encode(d)).collect();
            out.extend(bytes_field(3, &body));
        } else {
            for &d in dims {
                out.extend([key(3, 0), encode(d)].concat());
            }
        }
        // A layout (field 5), skipped.
        out.extend(bytes_field(5, &[0x0a, 0x02, 0x01, 0x00]));
        out
    }

    fn module(params: &[Vec<u8>]) -> Vec<u8> {
        let mut program_shape: Vec<u8> = params.iter().flat_map(|p| bytes_field(1, p)).collect();
        program_shape.extend(bytes_field(2, &shape_proto(11, &[], true)));
        program_shape.extend(bytes_field(3, b"x"));
        let hlo = [bytes_field(1, b"jit_f"), key(5, 0), encode(7), bytes_field(4, &program_shape)].concat();
        [bytes_field(1, &hlo), bytes_field(2, &[0x08, 0x01])].concat()
    }

    #[test]
    fn reads_parameters_packed_or_not() {
        let code = module(&[shape_proto(11, &[4], true), shape_proto(16, &[2, 0], false), shape_proto(4, &[], true)]);
        let params = entry_parameters(&code, "hlo_with_config").unwrap();
        let shown: Vec<String> = params.iter().map(|p| p.as_ref().unwrap().to_string()).collect();
        assert_eq!(shown, ["float32[4]", "bfloat16[2,0]", "int32[]"]);
        let hlo = message(&code, 1, "hlo_module").unwrap().unwrap();
        assert_eq!(entry_parameters(&hlo, "hlo").unwrap(), params);
    }

    #[test]
    fn other_parameters_are_none() {
        let tuple = [shape_proto(13, &[], true), bytes_field(4, &shape_proto(11, &[1], true))].concat();
        let dynamic = [shape_proto(11, &[3], true), bytes_field(6, &[1])].concat();
        let f8 = shape_proto(20, &[2], true);
        let params = entry_parameters(&module(&[tuple, dynamic, f8]), "hlo_with_config").unwrap();
        assert_eq!(params, [None, None, None]);
    }

    #[test]
    fn malformed_modules_are_errors() {
        let code = module(&[shape_proto(11, &[4], true)]);
        for cut in 1..code.len() {
            // Truncated anywhere: an error or fewer parameters, never a panic.
            let _ = entry_parameters(&code[..cut], "hlo_with_config");
        }
        assert!(entry_parameters(&code[..code.len() - 3], "hlo_with_config").is_err());
        assert!(entry_parameters(&[0xff; 12], "hlo").unwrap_err().contains("varint"));
        assert!(entry_parameters(&[0x0b], "hlo").unwrap_err().contains("wire type 3"));
        assert!(entry_parameters(&code, "mlir").unwrap_err().contains("\"mlir\""));
        assert_eq!(entry_parameters(&[], "hlo").unwrap_err(), "no host_program_shape");
    }
}
