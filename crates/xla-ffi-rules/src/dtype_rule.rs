//! The dtype notation of a declaration, parsed and validated: `"X, W -> promote(X, W), acc(X, W)"`.
//!
//! A rule is `exprs -> exprs`, one per operand, then one per result.
//! `expr := VAR | dtype | promote(expr, ...) | acc(expr, ...)`; a dtype is a name of
//! [`DTYPES`](crate::DTYPES) (`float32`, `bfloat16`, `int64`, `float8_e4m3fn`, `int4`,
//! ...), any other identifier is a variable,
//! except another spelling of a dtype (`f32`, `Float32`, `double`), which is refused.
//! The first operand (left to right) whose expression is a bare variable binds it to
//! its dtype; every other operand must have the dtype of its expression, so
//! `"promote(X, W), X, W -> X"` binds `X` and `W` at operands 1 and 2 and checks
//! operand 0 against them. A trailing `?` marks an optional operand or result
//! (`"T, T? -> T"`): the call may leave it out, and the rule must hold without it.

use crate::dtypes::DTYPE_NAMES;

/// Variables per rule at most (the runtime check binds them in a fixed-size array).
pub const MAX_VARS: usize = 16;

/// A dtype expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    /// A variable: the index into [`DtypeRule::vars`].
    Var(usize),
    /// A fixed dtype: the index into [`DTYPE_NAMES`](crate::DTYPE_NAMES).
    Dtype(usize),
    /// JAX's float promotion of the arguments.
    Promote(Vec<Expr>),
    /// The accumulator: float64 if any argument is, else float32.
    Acc(Vec<Expr>),
}

/// A parsed and validated dtype rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DtypeRule {
    /// The variable names, in order of first appearance.
    pub vars: Vec<String>,
    /// The expression of each operand.
    pub operands: Vec<Expr>,
    /// The expression of each result.
    pub results: Vec<Expr>,
    /// The operands that bind a variable: `(operand, variable)`, the first operand
    /// whose expression is that bare variable.
    pub binders: Vec<(usize, usize)>,
    /// The other operands, checked against their expressions.
    pub checked: Vec<usize>,
    /// How many of the last operand expressions are optional (a trailing `?`).
    pub optional_operands: usize,
    /// How many of the last result expressions are optional.
    pub optional_results: usize,
}

impl DtypeRule {
    /// Whether every operand and result has the one dtype `T` (`"T, T -> T"`): then
    /// comparing dtypes checks it.
    pub fn all_same(&self) -> bool {
        self.operands.iter().chain(&self.results).all(|e| *e == Expr::Var(0))
    }

    /// Parses `exprs -> exprs` and checks that every variable is bound by an operand
    /// (a bare variable, left to right) before any other use of it. An expression
    /// with a trailing `?` is an optional operand or result (trailing only), and the
    /// checks hold with every combination of them left out (see [`DtypeRule::without`]).
    pub fn parse(text: &str) -> Result<DtypeRule, String> {
        let mut sides = text.split("->");
        let (Some(lhs), Some(rhs), None) = (sides.next(), sides.next(), sides.next()) else {
            return Err(format!("dtype rule `{text}`: expected one `->` between the operand and result dtypes"));
        };
        let mut rule = DtypeRule {
            vars: Vec::new(),
            operands: Vec::new(),
            results: Vec::new(),
            binders: Vec::new(),
            checked: Vec::new(),
            optional_operands: 0,
            optional_results: 0,
        };
        for (side, is_result) in [(lhs, false), (rhs, true)] {
            let mut p = Parser { s: side.as_bytes(), i: 0 };
            if p.at_end() {
                continue;
            }
            let mut optional = 0;
            loop {
                let what = if is_result { "result" } else { "operand" };
                let n = if is_result { rule.results.len() } else { rule.operands.len() };
                let e = p.expr(&mut rule.vars).map_err(|e| format!("dtype rule `{text}`: {what} {n}: {e}"))?;
                if is_result {
                    rule.results.push(e);
                } else {
                    rule.operands.push(e);
                }
                p.skip_ws();
                let opt = p.peek() == Some(b'?');
                if opt {
                    p.i += 1;
                    p.skip_ws();
                } else if optional > 0 {
                    return Err(format!(
                        "dtype rule `{text}`: {what} {n} follows an optional {what} (`?`): optional {what}s come last"
                    ));
                }
                optional += usize::from(opt);
                match p.peek() {
                    None => break,
                    Some(b',') => p.i += 1,
                    Some(c) => {
                        return Err(format!(
                            "dtype rule `{text}`: {what} {n}: unexpected `{}`; expressions are separated by commas",
                            c as char
                        ))
                    }
                }
            }
            if is_result {
                rule.optional_results = optional;
            } else {
                rule.optional_operands = optional;
            }
        }
        if rule.vars.len() > MAX_VARS {
            return Err(format!("dtype rule `{text}`: more than {MAX_VARS} variables"));
        }
        rule.finish().map_err(|e| format!("dtype rule `{text}`: {e}"))?;
        for a in 0..=rule.optional_operands {
            for r in 0..=rule.optional_results {
                if a + r > 0 {
                    let absent = crate::shape_rule::absent_list(rule.operands.len(), a, rule.results.len(), r);
                    rule.without(a, r).map_err(|e| format!("dtype rule `{text}`: {absent}: {e}"))?;
                }
            }
        }
        Ok(rule)
    }

    /// The rule of a call without its last `operands` optional operands and last
    /// `results` optional results: the same variables, the absent expressions
    /// dropped. [`DtypeRule::parse`] checked that every such rule is valid.
    pub fn without(&self, operands: usize, results: usize) -> Result<DtypeRule, String> {
        if operands > self.optional_operands || results > self.optional_results {
            return Err(format!(
                "{operands} operand and {results} result expressions left out, but only {} and {} are optional",
                self.optional_operands, self.optional_results
            ));
        }
        let mut rule = self.clone();
        rule.operands.truncate(rule.operands.len() - operands);
        rule.results.truncate(rule.results.len() - results);
        rule.optional_operands -= operands;
        rule.optional_results -= results;
        rule.finish()?;
        Ok(rule)
    }

    /// The binders and checked operands, and the check that every variable is bound.
    fn finish(&mut self) -> Result<(), String> {
        self.binders.clear();
        self.checked.clear();
        let mut bound = vec![false; self.vars.len()];
        for (i, e) in self.operands.iter().enumerate() {
            match e {
                Expr::Var(v) if !bound[*v] => {
                    bound[*v] = true;
                    self.binders.push((i, *v));
                }
                _ => self.checked.push(i),
            }
        }
        for (i, e) in self.operands.iter().enumerate() {
            match e {
                Expr::Var(_) => {}
                e => {
                    if let Some(v) = first_unbound(e, &bound) {
                        return Err(format!(
                            "operand {i} uses `{}`, which no operand binds (only a bare variable binds)",
                            self.vars[v]
                        ));
                    }
                }
            }
        }
        for (i, e) in self.results.iter().enumerate() {
            if let Some(v) = first_unbound(e, &bound) {
                return Err(format!("result {i} uses `{}`, which no operand binds", self.vars[v]));
            }
        }
        Ok(())
    }

    /// An expression as written, normalized: `promote(X, W)`.
    pub fn expr_text(&self, e: &Expr) -> String {
        let args = |a: &[Expr]| a.iter().map(|e| self.expr_text(e)).collect::<Vec<_>>().join(", ");
        match e {
            Expr::Var(v) => self.vars[*v].clone(),
            Expr::Dtype(d) => DTYPE_NAMES[*d].to_string(),
            Expr::Promote(a) => format!("promote({})", args(a)),
            Expr::Acc(a) => format!("acc({})", args(a)),
        }
    }
}

fn first_unbound(e: &Expr, bound: &[bool]) -> Option<usize> {
    match e {
        Expr::Var(v) => (!bound[*v]).then_some(*v),
        Expr::Dtype(_) => None,
        Expr::Promote(a) | Expr::Acc(a) => a.iter().find_map(|e| first_unbound(e, bound)),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.i >= self.s.len()
    }
    fn ident(&mut self) -> Option<String> {
        self.skip_ws();
        let start = self.i;
        while self.s.get(self.i).is_some_and(|c| *c == b'_' || c.is_ascii_alphanumeric()) {
            self.i += 1;
        }
        let word = core::str::from_utf8(&self.s[start..self.i]).ok()?;
        let first = word.bytes().next()?;
        (first == b'_' || first.is_ascii_alphabetic()).then(|| word.to_string())
    }
    fn expr(&mut self, vars: &mut Vec<String>) -> Result<Expr, String> {
        let Some(word) = self.ident() else {
            return Err(match self.peek() {
                None => "missing expression: expected a dtype, a variable, promote(...) or acc(...)".into(),
                Some(c) => {
                    format!("unexpected `{}`: expected a dtype, a variable, promote(...) or acc(...)", c as char)
                }
            });
        };
        self.skip_ws();
        if word == "promote" || word == "acc" {
            if self.peek() != Some(b'(') {
                return Err(format!("`{word}` takes arguments in parentheses: {word}(X, ...)"));
            }
            self.i += 1;
            let mut args = Vec::new();
            loop {
                args.push(self.expr(vars)?);
                self.skip_ws();
                match self.peek() {
                    Some(b',') => self.i += 1,
                    Some(b')') => {
                        self.i += 1;
                        break;
                    }
                    _ => return Err(format!("unbalanced parentheses in `{word}(...)`: expected `,` or `)`")),
                }
            }
            return Ok(if word == "promote" { Expr::Promote(args) } else { Expr::Acc(args) });
        }
        if self.peek() == Some(b'(') {
            return Err(format!("unknown function `{word}`; the functions are promote(...) and acc(...)"));
        }
        if let Some(d) = DTYPE_NAMES.iter().position(|n| *n == word) {
            return Ok(Expr::Dtype(d));
        }
        if let Some(name) = dtype_look_alike(&word) {
            return Err(format!(
                "`{word}` is not a dtype of the notation, which spells dtypes as NumPy does: write `{name}` \
                 (for a variable, which any dtype binds, use a name that spells no dtype)"
            ));
        }
        let v = match vars.iter().position(|v| *v == word) {
            Some(v) => v,
            None => {
                vars.push(word);
                vars.len() - 1
            }
        };
        Ok(Expr::Var(v))
    }
}

/// The NumPy name that `word` was most likely meant to be, when it is not a dtype of
/// the notation but spells one another way (Rust's `f32`, `bf16`, `i64`; `Float32`;
/// `double`, `half`, `pred`): such a word would otherwise be a variable, which any
/// dtype binds, so `"f32 -> f32"` would accept float64 as well.
fn dtype_look_alike(word: &str) -> Option<&'static str> {
    const OTHER_SPELLINGS: [(&str, &str); 20] = [
        ("f16", "float16"),
        ("half", "float16"),
        ("bf16", "bfloat16"),
        ("f32", "float32"),
        ("single", "float32"),
        ("f64", "float64"),
        ("double", "float64"),
        ("i8", "int8"),
        ("i16", "int16"),
        ("i32", "int32"),
        ("i64", "int64"),
        ("u8", "uint8"),
        ("u16", "uint16"),
        ("u32", "uint32"),
        ("u64", "uint64"),
        ("c64", "complex64"),
        ("c128", "complex128"),
        ("pred", "bool"),
        ("complex", "complex128"),
        ("float", "float64"),
    ];
    let lower = word.to_ascii_lowercase();
    if let Some(name) = DTYPE_NAMES.iter().find(|n| **n == lower) {
        return Some(name);
    }
    OTHER_SPELLINGS.iter().find(|(alike, _)| *alike == lower).map(|&(_, name)| name)
}
