//! [`infer`]: the result shapes and dtypes of a call from its operands' shapes and
//! dtypes, with the messages of the handler shim's own check (Python's abstract
//! evaluation calls it), and the [`Signature`] it takes.

use super::check::{bind_dtypes, bind_operands, dtype_err, result_dtype, result_shape, shape_err, Who, NO_BINDS};
use super::dtypes::known_dtypes;
use super::rules::{RuleError, Rules};
use super::types::Declaration;
use crate::dtype::{describe, DataType};
use xla_ffi_rules::MAX_VARS;

/// One operand or result of a [`Signature`].
#[derive(Clone, Debug)]
pub struct BufferSig<'a> {
    /// Its name.
    pub name: &'a str,
    /// The dtypes its element type accepts.
    pub accepts: Vec<DataType>,
}

/// What [`infer`] needs of a declaration (Python builds it from the declaration's
/// dictionary; [`Declaration::signature`] from a Rust one).
#[derive(Clone, Debug)]
pub struct Signature<'a> {
    /// The FFI target name.
    pub target: &'a str,
    /// The operands.
    pub operands: Vec<BufferSig<'a>>,
    /// The results.
    pub results: Vec<BufferSig<'a>>,
    /// The shape rule.
    pub shapes: Option<&'a str>,
    /// The dtype rule.
    pub dtypes: Option<&'a str>,
}

impl Declaration {
    /// This declaration as [`infer`] takes it.
    pub fn signature(&self) -> Signature<'static> {
        let sig = |(name, accepts): (&'static str, fn(DataType) -> bool)| BufferSig {
            name,
            accepts: known_dtypes().filter(|d| accepts(*d)).collect(),
        };
        Signature {
            target: self.target,
            operands: self.operands().map(sig).collect(),
            results: self.results().map(sig).collect(),
            shapes: self.shapes,
            dtypes: self.dtypes,
        }
    }
}

/// What [`infer`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inferred {
    /// Each result's shape and dtype.
    pub results: Vec<(Vec<i64>, DataType)>,
    /// How many axes the batch ellipsis binds (0 without one).
    pub batch_rank: usize,
}

/// The result shapes and dtypes of a call with operands of `shapes` and `dtypes`,
/// checked as the handler's shim checks them, with the same messages.
///
/// ```
/// use xla_ffi::decl::{infer, BufferSig, ProblemKind, Signature};
/// use xla_ffi::DataType;
///
/// let f = vec![DataType::F16, DataType::BF16, DataType::F32, DataType::F64];
/// let buf = |name| BufferSig { name, accepts: f.clone() };
/// let sig = Signature {
///     target: "demo.norm",
///     operands: vec![buf("x"), buf("weight")],
///     results: vec![buf("y"), buf("inv_rms")],
///     shapes: Some("...b ...n, ...n -> ...b ...n, ...b"),
///     dtypes: Some("X, W -> promote(X, W), acc(X, W)"),
/// };
/// let out = infer(&sig, &[vec![2, 3, 4], vec![4]], &[DataType::BF16, DataType::F16]).unwrap();
/// assert_eq!(out.results, [(vec![2, 3, 4], DataType::F32), (vec![2, 3], DataType::F32)]);
/// assert_eq!(out.batch_rank, 2);
///
/// let e = infer(&sig, &[vec![2, 4], vec![5]], &[DataType::F32, DataType::F32]).unwrap_err();
/// assert_eq!(e.kind, ProblemKind::Shape);
/// assert_eq!(e.message, "demo.norm: operand 1 (weight): expected shape [4] (...n of operand 0 (x)), got [5]");
/// ```
pub fn infer(sig: &Signature<'_>, shapes: &[Vec<i64>], dtypes: &[DataType]) -> Result<Inferred, RuleError> {
    let name = |result: bool, i: usize| -> &str {
        let list = if result { &sig.results } else { &sig.operands };
        list.get(i).map_or("?", |b| b.name)
    };
    let who = Who { target: sig.target, name: &name };
    let all = Rules::parse(sig.shapes, sig.dtypes).map_err(|e| shape_err(format!("{}: {e}", sig.target)))?;
    let n_all = sig.operands.len();
    // The optional operands (`?` in the rules) are the last ones: a call may leave them out.
    let n_opt = all.optional_counts().0.min(n_all);
    let n = shapes.len();
    if n != dtypes.len() || n > n_all || n < n_all - n_opt {
        let names: Vec<&str> = sig.operands.iter().map(|b| b.name).collect();
        let expected = if n_opt == 0 {
            format!("{n_all} operand{}", if n_all == 1 { "" } else { "s" })
        } else {
            let opt: Vec<String> = names[n_all - n_opt..].iter().map(|n| format!("`{n}`")).collect();
            format!("{} to {n_all} operands ({} optional)", n_all - n_opt, opt.join(", "))
        };
        return Err(shape_err(format!(
            "{}: expected {expected} ({}), got {} shapes and {} dtypes",
            sig.target,
            names.join(", "),
            shapes.len(),
            dtypes.len()
        )));
    }
    for (i, (b, d)) in sig.operands.iter().zip(dtypes).enumerate() {
        if !b.accepts.contains(d) {
            return Err(dtype_err(format!("{}: expected dtype {}, got {d}", who.site(false, i), describe(&b.accepts))));
        }
        if let Some(x) = shapes[i].iter().find(|x| **x < 0) {
            return Err(shape_err(format!("{}: invalid shape {:?} (dimension {x})", who.site(false, i), shapes[i])));
        }
    }
    let (m, mut out) = (sig.results.len(), Vec::new());
    let Some(full) = &all.shape else {
        return Err(shape_err(format!("{}: the declaration has no shape rule: result shapes are unknown", sig.target)));
    };
    if full.operands.len() != n_all || full.results.len() != m {
        return Err(shape_err(format!(
            "{}: the shape rule has {} operand and {} result specs, the declaration {n_all} operands and {m} results",
            sig.target,
            full.operands.len(),
            full.results.len()
        )));
    }
    // Every result is asked for: optional results are present.
    let rules = all.for_call(n, m).ok_or_else(|| shape_err(format!("{}: no rule for {n} operands", sig.target)))?;
    let shape = rules.shape.as_ref().unwrap_or(full);
    let dims = |i: usize| -> &[i64] { &shapes[i] };
    let mut b = NO_BINDS;
    bind_operands(shape, &who, &dims, &mut b)?;
    let vars = match &rules.dtype {
        Some(r) if r.operands.len() != n || r.results.len() != m => {
            return Err(dtype_err(format!(
            "{}: the dtype rule has {} operand and {} result expressions, the declaration {n} operands and {m} results",
            sig.target,
            r.operands.len(),
            r.results.len()
        )))
        }
        Some(r) => {
            let mut v = [None; MAX_VARS];
            bind_dtypes(r, &who, &|i| dtypes[i], &mut v)?;
            Some(v)
        }
        None => None,
    };
    for j in 0..m {
        let dtype = match (&rules.dtype, &vars) {
            (Some(r), Some(v)) => result_dtype(r, &who, v, j)?,
            _ => match sig.results[j].accepts.as_slice() {
                [one] => *one,
                _ => {
                    return Err(dtype_err(format!(
                        "{}: no dtype rule, and its element type accepts {}",
                        who.site(true, j),
                        describe(&sig.results[j].accepts)
                    )))
                }
            },
        };
        out.push((result_shape(shape, &b, &dims, j), dtype));
    }
    let batch_rank = shape.batch.map_or(0, |n| b[n].len);
    Ok(Inferred { results: out, batch_rank })
}
