//! A declaration's rules, parsed once per handler ([`Rules`], with the rules of the
//! calls that leave out optional operands or results), and what a failed check
//! reports ([`RuleError`]).

use xla_ffi_rules::{DtypeRule, ShapeRule};

/// The rules of a declaration, parsed (once per handler: the shim keeps them).
#[derive(Clone, Debug)]
pub struct Rules {
    /// The shape rule, if declared.
    pub shape: Option<ShapeRule>,
    /// The dtype rule, if declared.
    pub dtype: Option<DtypeRule>,
    /// Every buffer has one shape (`"...b, ...b -> ...b"`): checked by comparing.
    pub(super) same_shape: bool,
    /// The dtype rule asks no more than one dtype for every buffer (`"T, T -> T"`,
    /// or no dtype rule): buffers found alike fit it.
    pub(super) same_dtype: bool,
    /// The rules of the calls that leave out optional operands or results (specs
    /// written with `?`): `(absent operands, absent results, rules)`.
    reduced: Vec<(usize, usize, Rules)>,
}

impl Rules {
    /// Parses the rule strings (`None` for an absent rule). The two rules must mark
    /// the same number of optional (`?`) operands and results.
    pub fn parse(shapes: Option<&str>, dtypes: Option<&str>) -> Result<Rules, String> {
        let shape = shapes.map(ShapeRule::parse).transpose()?;
        let dtype = dtypes.map(DtypeRule::parse).transpose()?;
        let (oa, or) = match (&shape, &dtype) {
            (Some(s), Some(d)) => {
                if (s.optional_operands, s.optional_results) != (d.optional_operands, d.optional_results) {
                    return Err(format!(
                        "the shape rule marks {} operand(s) and {} result(s) optional (`?`), the dtype rule {} and {}: \
                         they must mark the same ones",
                        s.optional_operands, s.optional_results, d.optional_operands, d.optional_results
                    ));
                }
                (s.optional_operands, s.optional_results)
            }
            (Some(s), None) => (s.optional_operands, s.optional_results),
            (None, Some(d)) => (d.optional_operands, d.optional_results),
            (None, None) => (0, 0),
        };
        let mut reduced = Vec::new();
        for a in 0..=oa {
            for r in 0..=or {
                if a + r > 0 {
                    let s = shape.as_ref().map(|s| s.without(a, r)).transpose()?;
                    let d = dtype.as_ref().map(|d| d.without(a, r)).transpose()?;
                    reduced.push((a, r, Rules::of(s, d, Vec::new())));
                }
            }
        }
        Ok(Rules::of(shape, dtype, reduced))
    }

    fn of(shape: Option<ShapeRule>, dtype: Option<DtypeRule>, reduced: Vec<(usize, usize, Rules)>) -> Rules {
        let same_shape = shape.as_ref().is_some_and(ShapeRule::all_same);
        let same_dtype = dtype.as_ref().is_none_or(DtypeRule::all_same);
        Rules { shape, dtype, same_shape, same_dtype, reduced }
    }

    /// How many operands and results the rules name (optional ones included).
    pub fn counts(&self) -> (usize, usize) {
        let ops = self
            .shape
            .as_ref()
            .map_or(0, |s| s.operands.len())
            .max(self.dtype.as_ref().map_or(0, |r| r.operands.len()));
        let res =
            self.shape.as_ref().map_or(0, |s| s.results.len()).max(self.dtype.as_ref().map_or(0, |r| r.results.len()));
        (ops, res)
    }

    /// How many operands and results the rules mark optional (`?`).
    pub fn optional_counts(&self) -> (usize, usize) {
        match (&self.shape, &self.dtype) {
            (Some(s), _) => (s.optional_operands, s.optional_results),
            (None, Some(d)) => (d.optional_operands, d.optional_results),
            (None, None) => (0, 0),
        }
    }

    /// The rules of a call with `n_ops` operands and `n_res` results: these, or those
    /// without the absent optional ones; `None` if the counts do not fit.
    pub fn for_call(&self, n_ops: usize, n_res: usize) -> Option<&Rules> {
        let (ops, res) = self.counts();
        // More results than the rules name: the scratch results of an `op = ...` handler.
        let (a, r) = (ops.checked_sub(n_ops)?, res.saturating_sub(n_res));
        if a + r == 0 {
            return Some(self);
        }
        self.reduced.iter().find(|(ra, rr, _)| (*ra, *rr) == (a, r)).map(|(_, _, rules)| rules)
    }

    /// For rules that give every buffer one shape and ask no more of the dtypes than
    /// one for all (or nothing): how many operands and results they cover. Buffers that
    /// decoding found alike (one dtype, one shape) fit such rules.
    #[inline]
    pub(crate) fn elementwise(&self) -> Option<(usize, usize)> {
        match (&self.shape, self.same_shape && self.same_dtype) {
            (Some(s), true) => Some((s.operands.len(), s.results.len())),
            _ => None,
        }
    }
}

/// What kind of problem a check found: Python raises `ValueError` for a shape,
/// `TypeError` for a dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProblemKind {
    /// A shape (or rank, or count) does not fit.
    Shape,
    /// A dtype does not fit.
    Dtype,
}

/// A check's failure: its kind and the message (which names the target, the operand
/// or result, what was expected and what was got).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuleError {
    /// Shape or dtype.
    pub kind: ProblemKind,
    /// The message.
    pub message: String,
}

impl core::fmt::Display for RuleError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RuleError {}
