//! The input types of a StableHLO text module: the arguments of its `main`.
//!
//! A `jax.export` serialization records its inputs (`in_avals`); StableHLO text
//! carries them only in `main`'s signature (`func.func public @main(%arg0:
//! tensor<8xf64>, ...)`). The plugin checks an argument only by its size in bytes
//! (`Executable::execute` checks the compiled program's parameters, where the
//! plugin reports them); reading them here checks the inputs before compiling, and
//! for a text whose signature is not read, the runner falls back on that check.

use xla_ffi_pjrt::ElementType;

use xla_ffi_pjrt::ArrayType;

/// The element type of an MLIR element type name (`f64`, `ui8`, `complex<f32>`).
fn element_type(name: &str) -> Option<ElementType> {
    Some(match name {
        "i1" => ElementType::Pred,
        "i8" => ElementType::S8,
        "i16" => ElementType::S16,
        "i32" => ElementType::S32,
        "i64" => ElementType::S64,
        "ui8" => ElementType::U8,
        "ui16" => ElementType::U16,
        "ui32" => ElementType::U32,
        "ui64" => ElementType::U64,
        "f16" => ElementType::F16,
        "bf16" => ElementType::BF16,
        "f32" => ElementType::F32,
        "f64" => ElementType::F64,
        "complex<f32>" => ElementType::C64,
        "complex<f64>" => ElementType::C128,
        _ => return None,
    })
}

/// `tensor<8x4xf64>` (or `tensor<f64>`, a scalar) as an [`ArrayType`]; `None` for a
/// dynamic dimension, an encoding, or a type the runner does not read.
fn tensor(ty: &str) -> Option<ArrayType> {
    let mut rest = ty.trim().strip_prefix("tensor<")?.strip_suffix('>')?;
    let mut dims = Vec::new();
    while let Some(x) = rest.find('x').filter(|&x| x > 0 && rest[..x].bytes().all(|b| b.is_ascii_digit())) {
        dims.push(rest[..x].parse::<i64>().ok()?);
        rest = &rest[x + 1..];
    }
    Some(ArrayType { element_type: element_type(rest.trim())?, dims })
}

/// The parts of `s` separated by `,` outside brackets and quotes, up to the `)`
/// that closes the list `s` starts in; `None` if it is not closed.
fn top_level_list(s: &str) -> Option<Vec<&str>> {
    let (mut depth, mut quoted, mut escaped, mut start) = (0usize, false, false, 0);
    let mut parts = Vec::new();
    for (i, c) in s.char_indices() {
        if quoted {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            '(' | '<' | '{' | '[' => depth += 1,
            '>' | '}' | ']' => depth = depth.checked_sub(1)?,
            ')' if depth == 0 => {
                parts.push(&s[start..i]);
                return Some(parts);
            }
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    None
}

/// The inputs of `main` in StableHLO text, in order; `None` when the text has no
/// `main` the runner can read (it then passes the inputs unchecked, as given).
pub fn main_inputs(text: &str) -> Option<Vec<ArrayType>> {
    let at = text.match_indices("@main(").map(|(i, _)| i).find(|&i| {
        let line_start = text[..i].rfind('\n').map_or(0, |n| n + 1);
        text[line_start..i].contains("func.func")
    })?;
    let args = top_level_list(&text[at + "@main(".len()..])?;
    if args.len() == 1 && args[0].trim().is_empty() {
        return Some(Vec::new());
    }
    args.iter()
        .map(|arg| {
            // `%arg0: tensor<8xf64> {attributes} loc(...)`: the type is the text after
            // the first `:` up to its closing `>`.
            let ty = arg.split_once(':')?.1.trim_start();
            let end = type_end(ty)?;
            tensor(&ty[..end])
        })
        .collect()
}

/// The length of the type at the start of `s`: up to the `>` that closes its
/// first `<`.
fn type_end(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aval(element_type: ElementType, dims: &[i64]) -> ArrayType {
        ArrayType { element_type, dims: dims.to_vec() }
    }

    #[test]
    fn reads_the_arguments_of_main() {
        let text = "module @jit_orbit attributes {mhlo.num_partitions = 1 : i32} {\n  func.func public \
                    @main(%arg0: tensor<8xf64>, %arg1: tensor<2x3xcomplex<f32>> {mhlo.sharding = \"{replicated}\"}, \
                    %arg2: tensor<ui8> loc(\"a, b\")) -> (tensor<8xf64> {jax.result_info = \"result[0]\"}) {\n";
        let got = main_inputs(text).unwrap();
        assert_eq!(got, [aval(ElementType::F64, &[8]), aval(ElementType::C64, &[2, 3]), aval(ElementType::U8, &[])]);
        assert_eq!(main_inputs("module {\n  func.func public @main() -> () {\n").unwrap(), []);
    }

    #[test]
    fn unreadable_signatures_are_left_unchecked() {
        // A dynamic dimension, a token, fp8, no `main`: `None`, never a wrong list.
        for text in [
            "func.func public @main(%arg0: tensor<?xf32>) {",
            "func.func public @main(%arg0: !stablehlo.token, %arg1: tensor<f32>) {",
            "func.func public @main(%arg0: tensor<4xf8E4M3FN>) {",
            "func.func private @helper(%arg0: tensor<4xf32>) {",
            "func.func public @main(%arg0: tensor<4xf32>",
        ] {
            assert_eq!(main_inputs(text), None, "{text}");
        }
        // A call of `@main(` outside a `func.func` line is not the signature.
        let text = "  %0 = call @main(%arg0) : (tensor<4xf32>) -> tensor<4xf32>\n  func.func @main(%a: tensor<i32>) {";
        assert_eq!(main_inputs(text).unwrap(), [aval(ElementType::S32, &[])]);
    }
}
