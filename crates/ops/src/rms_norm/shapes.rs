//! Shape and dtype rules of the rms_norm targets, shared by the CPU and CUDA handlers.

use xla_ffi::{AnyFloat, Buffer, DataType, Result};

/// The workspace row count `B` of the CUDA `rms_norm_bwd` for `rows` rows (the
/// product of `x`'s leading axes): `clamp(ceil(rows / 16), 1, 1024)`. The one source
/// of this rule: Python's abstract evaluation reads it as
/// `_native.bwd_workspace_rows`, so it is here, outside the `cuda` feature.
pub fn bwd_workspace_rows(rows: usize) -> usize {
    rows.div_ceil(16).clamp(1, 1024)
}

/// The problem size: `rows` rows of `n` normalized elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rows {
    /// The product of the leading (batch) dimensions.
    pub rows: usize,
    /// The product of the normalized (trailing) dimensions, `weight.size`.
    pub n: usize,
}

/// The problem size of `x` normalized over `weight`'s axes (the declared shape rule
/// has checked that `weight`'s shape is `x`'s trailing axes).
pub fn rows(x: &Buffer<'_, AnyFloat>, w: &Buffer<'_, AnyFloat>) -> Rows {
    let lead = x.rank().saturating_sub(w.rank());
    Rows { rows: x.dims()[..lead].iter().map(|&d| d as usize).product(), n: w.len() }
}

/// Checks the attribute `eps` of the rms_norm targets (what the shape and dtype rules
/// do not say): finite, `>= 0`, and representable in the accumulator dtype `acc` the
/// rows are summed in (float32, or float64 when `x` or `weight` is; see
/// [`xla_ffi::decl::accumulator`]). A larger `eps` would be added as infinity and
/// give `y = 0` where the formula gives a finite value. The error is
/// "attribute `eps`: " and [`eps_problem`]'s words.
pub fn check_eps(eps: f64, acc: DataType) -> Result<()> {
    match eps_problem(eps, acc) {
        None => Ok(()),
        Some(words) => Err(xla_ffi::Error::invalid_argument(format!("attribute `eps`: {words}"))),
    }
}

/// The one source of the `eps` rule of [`check_eps`]: what is wrong with `eps` for
/// rows summed in `acc`, in words ("expected a finite value >= 0 ..., got ..."), or
/// `None` if it passes. Python's entry points read it as `_native.eps_problem`, so
/// their message names the same limit in the same words.
pub fn eps_problem(eps: f64, acc: DataType) -> Option<String> {
    let top = if acc == DataType::F64 { f64::MAX } else { f64::from(f32::MAX) };
    if eps >= 0.0 && eps <= top {
        return None;
    }
    if eps.is_finite() && eps > top {
        return Some(format!(
            "expected a finite value >= 0 that fits {acc} (at most {top:e}, the accumulator dtype of these rows), \
             got {eps:e}"
        ));
    }
    Some(format!("expected a finite value >= 0, got {eps}"))
}
