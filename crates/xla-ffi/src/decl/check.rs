//! Checking shapes and dtypes against a declaration's rules: the one checker behind
//! the handler shim (every call, allocation-free when the call is right) and
//! [`infer`](super::infer) (what Python's abstract evaluation calls), so both say
//! the same words: the binding of names and variables to a call's operands and the
//! checks of its results. The parsed [`Rules`] are in `rules.rs`, `infer` in `infer.rs`.

use super::dtypes::{accumulator, dtype_by_name, promote};
use super::rules::{ProblemKind, RuleError, Rules};
use super::types::Declaration;
use crate::dtype::DataType;
use xla_ffi_rules::{DtypeRule, Expr, ShapeRule, Tok, DTYPE_NAMES, MAX_NAMES, MAX_VARS};

/// Names the target and the buffers in messages (used on error paths only).
pub(crate) struct Who<'a> {
    pub target: &'a str,
    pub name: &'a dyn Fn(bool, usize) -> &'a str,
}

impl Who<'_> {
    pub(super) fn site(&self, result: bool, i: usize) -> String {
        let role = if result { "result" } else { "operand" };
        format!("{}: {role} {i} ({})", self.target, (self.name)(result, i))
    }
}

const UNKNOWN: usize = usize::MAX;

/// Where a name's axes were first seen: operand `src`, from axis `off`, `len` axes.
#[derive(Clone, Copy)]
pub(crate) struct Bind {
    pub(super) len: usize,
    src: usize,
    off: usize,
}

pub(crate) type Binds = [Bind; MAX_NAMES];

pub(super) fn shape_err(message: String) -> RuleError {
    RuleError { kind: ProblemKind::Shape, message }
}

pub(super) fn dtype_err(message: String) -> RuleError {
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
