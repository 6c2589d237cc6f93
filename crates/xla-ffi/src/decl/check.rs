//! Checking shapes and dtypes against a declaration's rules: the one checker behind
//! the handler shim (every call, allocation-free when the call is right) and
//! [`infer`] (what Python's abstract evaluation calls), so both say the same words.

use super::types::Declaration;
use crate::dtype::DataType;
use xla_ffi_rules::{DtypeRule, Expr, ShapeRule, Tok, DTYPES, DTYPE_NAMES, MAX_NAMES, MAX_VARS};

/// The rules of a declaration, parsed (once per handler: the shim keeps them).
#[derive(Clone, Debug)]
pub struct Rules {
    /// The shape rule, if declared.
    pub shape: Option<ShapeRule>,
    /// The dtype rule, if declared.
    pub dtype: Option<DtypeRule>,
    /// Every buffer has one shape (`"...b, ...b -> ...b"`): checked by comparing.
    same_shape: bool,
    /// Every buffer has one dtype (`"T, T -> T"`): checked by comparing.
    same_dtype: bool,
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
        let same_dtype = dtype.as_ref().is_some_and(DtypeRule::all_same);
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

    /// For rules that give every buffer one shape and one dtype: how many operands
    /// and results they cover.
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
pub enum ProblemKind {
    /// A shape (or rank, or count) does not fit.
    Shape,
    /// A dtype does not fit.
    Dtype,
}

/// A check's failure: its kind and the message (which names the target, the operand
/// or result, what was expected and what was got).
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// JAX's promotion of two float dtypes: the same dtype stays, float16 with bfloat16
/// gives float32, otherwise the wider wins. `None` for two different dtypes that
/// are not both floats (the notation promotes floats only).
///
/// ```
/// use xla_ffi::{decl::promote, DataType};
/// assert_eq!(promote(DataType::F16, DataType::BF16), Some(DataType::F32));
/// assert_eq!(promote(DataType::BF16, DataType::F64), Some(DataType::F64));
/// assert_eq!(promote(DataType::S32, DataType::F32), None);
/// ```
pub const fn promote(a: DataType, b: DataType) -> Option<DataType> {
    if a.0 == b.0 {
        return Some(a);
    }
    let (ra, rb) = (float_rank(a), float_rank(b));
    if ra == 0 || rb == 0 {
        return None;
    }
    // float16 and bfloat16 share rank 1 and meet at float32.
    Some(if ra == rb {
        DataType::F32
    } else if ra > rb {
        a
    } else {
        b
    })
}

/// The accumulator dtype: float64 if `a` or `b` is, else float32.
pub const fn accumulator(a: DataType, b: DataType) -> DataType {
    if a.0 == DataType::F64.0 || b.0 == DataType::F64.0 {
        DataType::F64
    } else {
        DataType::F32
    }
}

const fn float_rank(d: DataType) -> u8 {
    if d.0 == DataType::F16.0 || d.0 == DataType::BF16.0 {
        1
    } else if d.0 == DataType::F32.0 {
        2
    } else if d.0 == DataType::F64.0 {
        3
    } else {
        0
    }
}

/// The dtype of a NumPy name the notation knows (`float32`, `bfloat16`, ...), or of
/// `token`.
pub fn dtype_by_name(name: &str) -> Option<DataType> {
    DTYPE_NAMES.iter().position(|n| *n == name).map(|i| NOTATION_DTYPES[i])
}

/// The dtype of each name of [`DTYPE_NAMES`], in its order (the `#[handler]` macro
/// knows a dtype of a rule by its index there): the codes of `xla-ffi-rules`'s list.
#[doc(hidden)]
pub const NOTATION_DTYPES: [DataType; DTYPES.len()] = {
    let mut dtypes = [DataType::INVALID; DTYPES.len()];
    let mut i = 0;
    while i < dtypes.len() {
        dtypes[i] = DataType(DTYPES[i].1);
        i += 1;
    }
    dtypes
};

/// The dtypes [`dtype_by_name`] knows, in the notation's order.
pub fn known_dtypes() -> impl Iterator<Item = DataType> {
    DTYPE_NAMES.iter().filter_map(|n| dtype_by_name(n))
}

/// Names the target and the buffers in messages (used on error paths only).
pub(crate) struct Who<'a> {
    pub target: &'a str,
    pub name: &'a dyn Fn(bool, usize) -> &'a str,
}

impl Who<'_> {
    fn site(&self, result: bool, i: usize) -> String {
        let role = if result { "result" } else { "operand" };
        format!("{}: {role} {i} ({})", self.target, (self.name)(result, i))
    }
}

const UNKNOWN: usize = usize::MAX;

/// Where a name's axes were first seen: operand `src`, from axis `off`, `len` axes.
#[derive(Clone, Copy)]
pub(crate) struct Bind {
    len: usize,
    src: usize,
    off: usize,
}

pub(crate) type Binds = [Bind; MAX_NAMES];

fn shape_err(message: String) -> RuleError {
    RuleError { kind: ProblemKind::Shape, message }
}

fn dtype_err(message: String) -> RuleError {
    RuleError { kind: ProblemKind::Dtype, message }
}

/// Whether two runs of axes are equal: an element loop, cheaper than `memcmp` for
/// the few axes a shape has.
#[inline(always)]
fn same(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

#[inline(always)]
fn tok_len(t: Tok, b: &Binds) -> usize {
    match t {
        Tok::Ellipsis(n) => b[n].len,
        _ => 1,
    }
}

/// A fresh set of bindings: nothing known.
pub(crate) const NO_BINDS: Binds = [Bind { len: UNKNOWN, src: UNKNOWN, off: 0 }; MAX_NAMES];

/// Binds every name of the operand specs to the axes of `dims(i)` (into `b`, fresh),
/// checking each operand against the names bound before it. Allocates nothing
/// unless it fails.
#[inline]
pub(crate) fn bind_operands<'a>(
    rule: &ShapeRule,
    who: &Who<'_>,
    dims: &impl Fn(usize) -> &'a [i64],
    b: &mut Binds,
) -> Result<(), RuleError> {
    for spec in rule.operands.iter().chain(&rule.results) {
        for t in spec {
            if let Tok::Factor(n) = *t {
                b[n].len = 1;
            }
        }
    }
    // The lengths of the ellipses, in the order the parser worked out: each step's
    // operand has one ellipsis of unknown length, which its rank fixes.
    for &(i, n) in &rule.plan {
        let mut known = 0usize;
        for t in &rule.operands[i] {
            if *t != Tok::Ellipsis(n) {
                known = known.saturating_add(tok_len(*t, b));
            }
        }
        let rank = dims(i).len();
        if rank < known {
            return Err(rank_error(rule, who, b, i, dims(i)));
        }
        b[n].len = rank - known;
    }
    // The values, operand by operand: the first operand to show a name binds it.
    for (i, spec) in rule.operands.iter().enumerate() {
        let d = dims(i);
        let mut total = 0usize;
        for t in spec {
            total = total.saturating_add(tok_len(*t, b));
        }
        if total != d.len() {
            // Every axis known from earlier operands: say the whole expected shape.
            let known = spec.iter().all(|t| match *t {
                Tok::Literal(_) => true,
                Tok::Ellipsis(n) | Tok::Factor(n) => b[n].src != UNKNOWN && b[n].len != UNKNOWN,
            });
            if known {
                return Err(value_error(rule, who, b, dims, false, i, spec, d));
            }
            return Err(rank_error(rule, who, b, i, d));
        }
        let mut pos = 0;
        for t in spec {
            let len = tok_len(*t, b);
            let ok = match *t {
                Tok::Literal(v) => d[pos] == v,
                Tok::Ellipsis(n) | Tok::Factor(n) => {
                    if b[n].src == UNKNOWN {
                        b[n].src = i;
                        b[n].off = pos;
                        true
                    } else {
                        same(&dims(b[n].src)[b[n].off..b[n].off + len], &d[pos..pos + len])
                    }
                }
            };
            if !ok {
                return Err(value_error(rule, who, b, dims, false, i, spec, d));
            }
            pos += len;
        }
    }
    Ok(())
}

/// The expected shape of result `j`, into `out` (cleared first).
pub(crate) fn result_shape<'a>(rule: &ShapeRule, b: &Binds, dims: &impl Fn(usize) -> &'a [i64], j: usize) -> Vec<i64> {
    let mut out = Vec::new();
    for t in &rule.results[j] {
        match *t {
            Tok::Literal(v) => out.push(v),
            Tok::Ellipsis(n) | Tok::Factor(n) => {
                out.extend_from_slice(&dims(b[n].src)[b[n].off..b[n].off + b[n].len]);
            }
        }
    }
    out
}

/// Checks result `j`'s shape `got` against the rule, allocation-free when it fits.
pub(crate) fn check_result<'a>(
    rule: &ShapeRule,
    who: &Who<'_>,
    b: &Binds,
    dims: &impl Fn(usize) -> &'a [i64],
    j: usize,
    got: &[i64],
) -> Result<(), RuleError> {
    let spec = &rule.results[j];
    let mut pos = 0;
    let mut ok = true;
    for t in spec {
        let len = tok_len(*t, b);
        if pos + len > got.len() {
            ok = false;
            break;
        }
        ok &= match *t {
            Tok::Literal(v) => got[pos] == v,
            Tok::Ellipsis(n) | Tok::Factor(n) => same(&dims(b[n].src)[b[n].off..b[n].off + len], &got[pos..pos + len]),
        };
        pos += len;
    }
    if ok && pos == got.len() {
        return Ok(());
    }
    Err(value_error(rule, who, b, dims, true, j, spec, got))
}

/// "expected rank 2 (`...b n`, with ...b of rank 1), got rank 3 (shape [1, 2, 3])"
#[cold]
#[inline(never)]
fn rank_error(rule: &ShapeRule, who: &Who<'_>, b: &Binds, i: usize, got: &[i64]) -> RuleError {
    let spec = &rule.operands[i];
    let mut known = 0;
    let mut open = false;
    let mut with = Vec::new();
    for t in spec {
        match (t, tok_len(*t, b)) {
            (_, UNKNOWN) => open = true,
            (Tok::Ellipsis(_), l) => {
                known += l;
                with.push(format!("{} of rank {l}", rule.token_text(*t)));
            }
            (_, l) => known += l,
        }
    }
    let at_least = if open { "at least " } else { "" };
    let with = if with.is_empty() { String::new() } else { format!(", with {}", with.join(", ")) };
    shape_err(format!(
        "{}: expected rank {at_least}{known} (`{}`{with}), got rank {} (shape {got:?})",
        who.site(false, i),
        rule.spec_text(spec),
        got.len()
    ))
}

/// "expected shape [4] (...n of operand 0 (x)), got [5]"
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn value_error<'a>(
    rule: &ShapeRule,
    who: &Who<'_>,
    b: &Binds,
    dims: &impl Fn(usize) -> &'a [i64],
    result: bool,
    i: usize,
    spec: &[Tok],
    got: &[i64],
) -> RuleError {
    let mut want = Vec::new();
    let mut why = Vec::new();
    let mut pos = 0;
    for t in spec {
        let len = tok_len(*t, b);
        match *t {
            Tok::Literal(v) => want.push(v),
            Tok::Ellipsis(n) | Tok::Factor(n) => {
                let (src, off) = (b[n].src, b[n].off);
                // A name this operand binds itself (at this very position), or has not
                // reached yet, shows its own axes.
                let own = src == UNKNOWN || (!result && src == i && off == pos);
                if own {
                    want.extend_from_slice(got.get(pos..pos + len).unwrap_or(&[]));
                } else {
                    let w = format!("{} of operand {src} ({})", rule.token_text(*t), (who.name)(false, src));
                    if !why.contains(&w) {
                        why.push(w);
                    }
                    want.extend_from_slice(&dims(src)[off..off + len]);
                }
            }
        }
        pos += len;
    }
    let why = if why.is_empty() { format!("`{}`", rule.spec_text(spec)) } else { why.join(", ") };
    shape_err(format!("{}: expected shape {want:?} ({why}), got {got:?}", who.site(result, i)))
}

/// A variable's dtype and the operand that bound it.
pub(crate) type Vars = [Option<(DataType, usize)>; MAX_VARS];

/// An expression's dtype; a bare variable (the common case) without a call.
#[inline(always)]
fn eval(e: &Expr, v: &Vars) -> Option<DataType> {
    match e {
        Expr::Var(x) => v[*x].map(|(d, _)| d),
        e => eval_deep(e, v),
    }
}

fn eval_deep(e: &Expr, v: &Vars) -> Option<DataType> {
    match e {
        Expr::Var(x) => v[*x].map(|(d, _)| d),
        Expr::Dtype(d) => dtype_by_name(DTYPE_NAMES[*d]),
        Expr::Promote(a) => {
            let mut acc = eval(&a[0], v)?;
            for e in &a[1..] {
                acc = promote(acc, eval(e, v)?)?;
            }
            Some(acc)
        }
        Expr::Acc(a) => {
            let mut acc = DataType::F32;
            for e in a {
                acc = accumulator(acc, eval(e, v)?);
            }
            Some(acc)
        }
    }
}

/// Binds the variables to the operands' dtypes (an operand whose expression is a
/// bare variable binds it, left to right), then checks every other operand.
#[inline]
pub(crate) fn bind_dtypes(
    rule: &DtypeRule,
    who: &Who<'_>,
    dtype: &impl Fn(usize) -> DataType,
    v: &mut Vars,
) -> Result<(), RuleError> {
    for &(i, x) in &rule.binders {
        v[x] = Some((dtype(i), i));
    }
    for &i in &rule.checked {
        let (e, got) = (&rule.operands[i], dtype(i));
        if eval(e, v) != Some(got) {
            return Err(dtype_error(rule, who, v, false, i, e, got));
        }
    }
    Ok(())
}

/// The dtype of result `j`, or the error for a promotion the rule cannot make.
pub(crate) fn result_dtype(rule: &DtypeRule, who: &Who<'_>, v: &Vars, j: usize) -> Result<DataType, RuleError> {
    let e = &rule.results[j];
    eval(e, v).ok_or_else(|| {
        dtype_err(format!(
            "{}: cannot compute dtype {} from {}: promote() takes float dtypes (or equal ones)",
            who.site(true, j),
            rule.expr_text(e),
            var_list(rule, who, v)
        ))
    })
}

/// Checks result `j`'s dtype `got`.
pub(crate) fn check_result_dtype(
    rule: &DtypeRule,
    who: &Who<'_>,
    v: &Vars,
    j: usize,
    got: DataType,
) -> Result<(), RuleError> {
    let e = &rule.results[j];
    if eval(e, v) == Some(got) {
        return Ok(());
    }
    Err(dtype_error(rule, who, v, true, j, e, got))
}

fn var_list(rule: &DtypeRule, who: &Who<'_>, v: &Vars) -> String {
    let parts: Vec<String> = (0..rule.vars.len())
        .filter_map(|x| v[x].map(|(d, i)| format!("{} = {d} (operand {i} ({}))", rule.vars[x], (who.name)(false, i))))
        .collect();
    parts.join(", ")
}

#[cold]
#[inline(never)]
fn dtype_error(
    rule: &DtypeRule,
    who: &Who<'_>,
    v: &Vars,
    result: bool,
    i: usize,
    e: &Expr,
    got: DataType,
) -> RuleError {
    let why = match e {
        Expr::Var(x) => match v[*x] {
            Some((_, src)) => format!("{}, the dtype of operand {src} ({})", rule.vars[*x], (who.name)(false, src)),
            None => rule.vars[*x].clone(),
        },
        Expr::Dtype(_) => rule.expr_text(e),
        e => format!("{} with {}", rule.expr_text(e), var_list(rule, who, v)),
    };
    match eval(e, v) {
        Some(want) => dtype_err(format!("{}: expected dtype {want} ({why}), got {got}", who.site(result, i))),
        None => dtype_err(format!(
            "{}: cannot compute dtype {} ({why}): promote() takes float dtypes (or equal ones), got {got}",
            who.site(result, i),
            rule.expr_text(e)
        )),
    }
}

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
pub struct Inferred {
    /// Each result's shape and dtype.
    pub results: Vec<(Vec<i64>, DataType)>,
    /// How many axes the batch ellipsis binds (0 without one).
    pub batch_rank: usize,
}

/// "float16, bfloat16, float32 or float64", as [`ElementSpec::describe`](crate::ElementSpec::describe) says it.
fn describe(accepts: &[DataType]) -> String {
    let names: Vec<&str> = accepts.iter().map(|d| d.name()).collect();
    match names.split_last() {
        None => "nothing".into(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
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

/// Operands (and results) whose dtype and dims the shim's check reads once into a
/// local table (more are read from the frame each time they are needed).
pub(crate) const CACHED: usize = 8;

/// The shim's check of a decoded call: shapes, then dtypes, against the rules it
/// parsed once, for a call of `n_args` operands and `n_rets` results (fewer than the
/// rules name when optional ones are absent). `operand`/`result` read a buffer's
/// dtype and dims from the frame.
#[inline]
pub(crate) fn check_call<'a>(
    decl: &Declaration,
    rules: &Rules,
    n_args: usize,
    n_rets: usize,
    operand: &impl Fn(usize) -> (DataType, &'a [i64]),
    result: &impl Fn(usize) -> (DataType, &'a [i64]),
) -> Result<(), RuleError> {
    let name = |r: bool, i: usize| decl.buffer_name(r, i);
    let who = Who { target: decl.target, name: &name };
    // A call without some optional operands or results: the rules without them.
    let Some(rules) = rules.for_call(n_args, n_rets) else {
        return Err(shape_err(format!(
            "{}: {n_args} operands and {n_rets} results do not fit the rules' optional operands and results",
            decl.target
        )));
    };
    // Each operand read once from the frame (its struct checked each time it is read).
    let n =
        rules.shape.as_ref().map_or(0, |s| s.operands.len()).max(rules.dtype.as_ref().map_or(0, |r| r.operands.len()));
    let mut cache: [(DataType, &'a [i64]); CACHED] = [(DataType::INVALID, &[]); CACHED];
    for (i, c) in cache.iter_mut().enumerate().take(n) {
        *c = operand(i);
    }
    let op = |i: usize| if i < CACHED { cache[i] } else { operand(i) };
    let m =
        rules.shape.as_ref().map_or(0, |s| s.results.len()).max(rules.dtype.as_ref().map_or(0, |r| r.results.len()));
    let mut rcache: [(DataType, &'a [i64]); CACHED] = [(DataType::INVALID, &[]); CACHED];
    for (j, c) in rcache.iter_mut().enumerate().take(m) {
        *c = result(j);
    }
    let res = |j: usize| if j < CACHED { rcache[j] } else { result(j) };
    // The elementwise case: one shape and one dtype for all; the general check below
    // runs only to word an error.
    if rules.same_shape && rules.same_dtype {
        let (t0, d0) = op(0);
        let n_all = rules.shape.as_ref().map_or(0, |s| s.operands.len());
        let m_all = rules.shape.as_ref().map_or(0, |s| s.results.len());
        let fits = |(t, d): (DataType, &[i64])| t == t0 && same(d, d0);
        if (1..n_all).all(|i| fits(op(i))) && (0..m_all).all(|j| fits(res(j))) {
            return Ok(());
        }
    }
    if let Some(shape) = &rules.shape {
        let dims = |i: usize| op(i).1;
        let mut b = NO_BINDS;
        bind_operands(shape, &who, &dims, &mut b)?;
        for j in 0..shape.results.len() {
            check_result(shape, &who, &b, &dims, j, res(j).1)?;
        }
    }
    if let Some(rule) = &rules.dtype {
        let mut v = [None; MAX_VARS];
        bind_dtypes(rule, &who, &|i| op(i).0, &mut v)?;
        for j in 0..rule.results.len() {
            check_result_dtype(rule, &who, &v, j, res(j).0)?;
        }
    }
    Ok(())
}
