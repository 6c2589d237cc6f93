//! The shape notation of a declaration, parsed and validated: `"...b ...n, ...n -> ...b ...n, ...b"`.
//!
//! A rule is `specs -> specs`: one comma-separated spec per operand buffer, then one
//! per result buffer. A spec is space-separated tokens: `...name` (an ellipsis, zero
//! or more axes), `name` (a factor, exactly one axis) or a decimal literal (one axis
//! of that size); `()` is a scalar. The same name means the same size(s).

/// Names per rule at most (the runtime check binds them in a fixed-size array).
pub const MAX_NAMES: usize = 16;

/// One token of a spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tok {
    /// `...name`: zero or more axes; the index into [`ShapeRule::names`].
    Ellipsis(usize),
    /// `name`: exactly one axis; the index into [`ShapeRule::names`].
    Factor(usize),
    /// A fixed size.
    Literal(i64),
}

/// A parsed and validated shape rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeRule {
    /// Every name, in order of first appearance (without the `...`).
    pub names: Vec<String>,
    /// The tokens of each operand spec.
    pub operands: Vec<Vec<Tok>>,
    /// The tokens of each result spec.
    pub results: Vec<Vec<Tok>>,
    /// The batch ellipsis: the one that starts the first operand's spec.
    pub batch: Option<usize>,
    /// The order in which the ellipses get their lengths: `(operand, name)`, the
    /// operand's rank minus its other tokens' lengths (see [`ShapeRule::resolve_order`]).
    pub plan: Vec<(usize, usize)>,
    /// How many of the last operand specs are optional (written with a trailing `?`).
    pub optional_operands: usize,
    /// How many of the last result specs are optional.
    pub optional_results: usize,
}

impl ShapeRule {
    /// Whether every operand and result has the one shape `...x` (the elementwise
    /// rule `"...b, ...b -> ...b"`): then comparing shapes checks it.
    pub fn all_same(&self) -> bool {
        self.operands.iter().chain(&self.results).all(|spec| spec.as_slice() == [Tok::Ellipsis(0)])
    }

    /// Parses `specs -> specs` and checks it: names well formed, no name both an
    /// ellipsis and a factor, no ellipsis twice in one spec, every result name bound
    /// by the operands, and every operand spec resolvable (see [`ShapeRule::resolve_order`]).
    /// A spec that ends in `?` is optional (trailing only, on either side), and the
    /// checks hold with every combination of the optional specs left out (see
    /// [`ShapeRule::without`]).
    pub fn parse(text: &str) -> Result<ShapeRule, String> {
        let mut sides = text.split("->");
        let (Some(lhs), Some(rhs), None) = (sides.next(), sides.next(), sides.next()) else {
            return Err(format!("shape rule `{text}`: expected one `->` between the operand and result specs"));
        };
        let mut rule = ShapeRule {
            names: Vec::new(),
            operands: Vec::new(),
            results: Vec::new(),
            batch: None,
            plan: Vec::new(),
            optional_operands: 0,
            optional_results: 0,
        };
        let mut kinds: Vec<bool> = Vec::new(); // per name: is an ellipsis
        for (side, out) in [(lhs, 0), (rhs, 1)] {
            let mut optional = 0;
            for (i, spec) in split_specs(side).into_iter().enumerate() {
                let what = if out == 0 { "operand" } else { "result" };
                let (body, opt) = match spec.trim().strip_suffix('?') {
                    Some(b) => (b, true),
                    None => (spec, false),
                };
                if optional > 0 && !opt {
                    return Err(format!(
                        "shape rule `{text}`: {what} {i} (`{}`) follows an optional {what} (`?`): optional {what}s \
                         come last",
                        spec.trim()
                    ));
                }
                optional += usize::from(opt);
                let toks = parse_spec(body, &mut rule.names, &mut kinds)
                    .map_err(|e| format!("shape rule `{text}`: {what} {i} (`{}`): {e}", spec.trim()))?;
                if out == 0 {
                    rule.operands.push(toks);
                } else {
                    rule.results.push(toks);
                }
            }
            if out == 0 {
                rule.optional_operands = optional;
            } else {
                rule.optional_results = optional;
            }
        }
        if rule.names.len() > MAX_NAMES {
            return Err(format!("shape rule `{text}`: more than {MAX_NAMES} names"));
        }
        rule.finish().map_err(|e| format!("shape rule `{text}`: {e}"))?;
        for a in 0..=rule.optional_operands {
            for r in 0..=rule.optional_results {
                if a + r > 0 {
                    rule.without(a, r)
                        .map_err(|e| format!("shape rule `{text}`: {}: {e}", absent_text(&rule, a, r)))?;
                }
            }
        }
        Ok(rule)
    }

    /// The rule of a call without its last `operands` optional operands and last
    /// `results` optional results (at most [`ShapeRule::optional_operands`] and
    /// [`ShapeRule::optional_results`]): the same names, the absent specs dropped.
    /// [`ShapeRule::parse`] checked that every such rule is valid.
    pub fn without(&self, operands: usize, results: usize) -> Result<ShapeRule, String> {
        if operands > self.optional_operands || results > self.optional_results {
            return Err(format!(
                "{operands} operand and {results} result specs left out, but only {} and {} are optional",
                self.optional_operands, self.optional_results
            ));
        }
        let mut rule = self.clone();
        rule.operands.truncate(rule.operands.len() - operands);
        rule.results.truncate(rule.results.len() - results);
        rule.optional_operands -= operands;
        rule.optional_results -= results;
        rule.batch = None;
        rule.finish()?;
        Ok(rule)
    }

    /// The checks and derived fields after the specs: every result name bound, the
    /// batch ellipsis, the resolution plan.
    fn finish(&mut self) -> Result<(), String> {
        let bound: Vec<bool> = (0..self.names.len())
            .map(|n| self.operands.iter().flatten().any(|t| matches!(t, Tok::Ellipsis(m) | Tok::Factor(m) if *m == n)))
            .collect();
        for (i, spec) in self.results.iter().enumerate() {
            for t in spec {
                if let Tok::Ellipsis(n) | Tok::Factor(n) = *t {
                    if !bound[n] {
                        return Err(format!("result {i} uses `{}`, which no operand spec binds", self.token_text(*t)));
                    }
                }
            }
        }
        if let Some(Tok::Ellipsis(n)) = self.operands.first().and_then(|s| s.first()) {
            self.batch = Some(*n);
        }
        self.plan = self.resolve_order()?;
        Ok(())
    }

    /// Checks that every operand spec can be matched against a shape: repeating over
    /// the operand specs, a spec with at most one ellipsis of unknown length gives
    /// that ellipsis its length (its rank minus the rest), until nothing changes.
    /// Returns those steps in order: `(operand, name)`.
    pub fn resolve_order(&self) -> Result<Vec<(usize, usize)>, String> {
        let mut plan = Vec::new();
        let mut known: Vec<bool> = self.names.iter().map(|_| false).collect();
        for spec in self.operands.iter().chain(&self.results) {
            for t in spec {
                if let Tok::Factor(n) = t {
                    known[*n] = true;
                }
            }
        }
        loop {
            let mut changed = false;
            for (i, spec) in self.operands.iter().enumerate() {
                let unknown: Vec<usize> = spec
                    .iter()
                    .filter_map(|t| match t {
                        Tok::Ellipsis(n) if !known[*n] => Some(*n),
                        _ => None,
                    })
                    .collect();
                if unknown.len() == 1 {
                    known[unknown[0]] = true;
                    plan.push((i, unknown[0]));
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        for (i, spec) in self.operands.iter().enumerate() {
            let unknown: Vec<String> = spec
                .iter()
                .filter(|t| matches!(t, Tok::Ellipsis(n) if !known[*n]))
                .map(|t| self.token_text(*t))
                .collect();
            if !unknown.is_empty() {
                return Err(format!(
                    "operand {i} (`{}`) is ambiguous: no other operand fixes the length of {}",
                    self.spec_text(spec),
                    unknown.join(" or ")
                ));
            }
        }
        Ok(plan)
    }

    /// A token as written: `...b`, `n`, `3`.
    pub fn token_text(&self, t: Tok) -> String {
        match t {
            Tok::Ellipsis(n) => format!("...{}", self.names[n]),
            Tok::Factor(n) => self.names[n].clone(),
            Tok::Literal(v) => v.to_string(),
        }
    }

    /// A spec as written, normalized: `...b ...n`, or `()` for a scalar.
    pub fn spec_text(&self, spec: &[Tok]) -> String {
        if spec.is_empty() {
            return "()".into();
        }
        spec.iter().map(|t| self.token_text(*t)).collect::<Vec<_>>().join(" ")
    }
}

/// "with operand 2 absent", "with operands 1 and 2 and result 1 absent".
pub(crate) fn absent_text(rule: &ShapeRule, operands: usize, results: usize) -> String {
    absent_list(rule.operands.len(), operands, rule.results.len(), results)
}

/// "with operand 2 absent" for `n_ops` operands of which the last `operands` are
/// absent (and likewise results).
pub(crate) fn absent_list(n_ops: usize, operands: usize, n_res: usize, results: usize) -> String {
    let part = |what: &str, n: usize, k: usize| -> Option<String> {
        let idx: Vec<String> = (n - k..n).map(|i| i.to_string()).collect();
        match idx.len() {
            0 => None,
            1 => Some(format!("{what} {}", idx[0])),
            _ => Some(format!("{what}s {}", idx.join(" and "))),
        }
    };
    let parts: Vec<String> =
        [part("operand", n_ops, operands), part("result", n_res, results)].into_iter().flatten().collect();
    format!("with {} absent", parts.join(" and "))
}

/// The comma-separated specs of one side (none for an empty side).
fn split_specs(side: &str) -> Vec<&str> {
    if side.trim().is_empty() {
        Vec::new()
    } else {
        side.split(',').collect()
    }
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic()) && c.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn parse_spec(spec: &str, names: &mut Vec<String>, kinds: &mut Vec<bool>) -> Result<Vec<Tok>, String> {
    let spec = spec.trim();
    if spec == "()" {
        return Ok(Vec::new());
    }
    if spec.is_empty() {
        return Err("empty spec; write `()` for a scalar".into());
    }
    let mut toks = Vec::new();
    for word in spec.split_whitespace() {
        let tok = if let Some(name) = word.strip_prefix("...") {
            if !is_ident(name) {
                return Err(format!("`{word}`: an ellipsis is `...name` with an identifier name"));
            }
            Tok::Ellipsis(intern(name, true, names, kinds)?)
        } else if word.bytes().all(|b| b.is_ascii_digit()) {
            Tok::Literal(word.parse::<i64>().map_err(|_| format!("`{word}`: a size too large"))?)
        } else if is_ident(word) {
            Tok::Factor(intern(word, false, names, kinds)?)
        } else {
            return Err(format!(
                "`{word}`: expected `...name` (any number of axes), `name` (one axis) or a size such as `3`"
            ));
        };
        if let Tok::Ellipsis(n) = tok {
            if toks.contains(&tok) {
                return Err(format!("`...{}` appears twice", names[n]));
            }
        }
        toks.push(tok);
    }
    Ok(toks)
}

fn intern(name: &str, ellipsis: bool, names: &mut Vec<String>, kinds: &mut Vec<bool>) -> Result<usize, String> {
    if let Some(i) = names.iter().position(|n| n == name) {
        if kinds[i] != ellipsis {
            return Err(format!(
                "`{name}` is used both as `...{name}` (any number of axes) and as `{name}` (one axis)"
            ));
        }
        return Ok(i);
    }
    names.push(name.to_string());
    kinds.push(ellipsis);
    Ok(names.len() - 1)
}
