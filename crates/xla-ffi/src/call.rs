//! Decoding a call: the [`Call`] that hands out operands, results, attributes and
//! context in declaration order, and the [`Decode`] trait each parameter type of a
//! [`handler`](crate::handler) implements.

use crate::alias::Aliases;
use std::sync::OnceLock;

use crate::attr::{Attr, Attrs, Dict, FieldCx, FromAttr, FromAttrs};
use crate::decl::{check_call, Declaration, ParamDecl, Rules};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::frame::Slot;
use crate::frame::{Frame, HandlerInfo};
use crate::site::{Arity, Role};

/// One call of a handler, being decoded.
///
/// The [`handler`](crate::handler) macro creates it and calls [`Decode::decode`] for
/// each parameter in order; user code sees only the decoded parameters. Problems are
/// collected, so one error reports every bad operand at once.
pub struct Call<'f> {
    pub(crate) frame: &'f Frame<'f>,
    /// The byte ranges of the buffers decoded so far (and the frame and target).
    pub(crate) aliases: &'f Aliases<'f>,
    pub(crate) info: &'f HandlerInfo,
    next_arg: usize,
    next_ret: usize,
    used_attrs: u128,
    /// Attributes no parameter binds are accepted (a `State` parameter: the
    /// instantiate stage checked the whole attribute set of this call site).
    accept_unbound_attrs: bool,
    /// The dtype and shape of the first buffer decoded (of the slots the alias table
    /// records), so that the elementwise rules are checked on what decoding read
    /// instead of reading the frame again.
    first: Option<(DataType, &'f [i64])>,
    /// Whether every buffer decoded since (in a recorded slot) had `first`'s dtype and
    /// shape.
    alike: bool,
}

impl<'f> Call<'f> {
    pub(crate) fn new(aliases: &'f Aliases<'f>, info: &'f HandlerInfo) -> Self {
        Call {
            frame: aliases.frame,
            aliases,
            info,
            next_arg: 0,
            next_ret: 0,
            used_attrs: 0,
            accept_unbound_attrs: false,
            first: None,
            alike: true,
        }
    }

    /// The FFI target name this handler serves.
    #[inline]
    pub fn target(&self) -> &'static str {
        self.info.target
    }

    /// Checks the operand and result counts against the declaration.
    #[inline(always)]
    pub(crate) fn check_counts(&self) -> Result<()> {
        let (na, nr) = (self.frame.count(Role::Operand), self.frame.count(Role::Result));
        // The declared counts, or more where the parameters end in a variadic one: no
        // message (what `count_error` would find too), without its cold call.
        let fits = |got: usize, declared: usize, variadic: bool| got == declared || (variadic && got > declared);
        if fits(na, self.info.n_args, self.info.variadic_args) && fits(nr, self.info.n_rets, self.info.variadic_rets) {
            return Ok(());
        }
        count_error(self.info, na, nr)
    }

    /// Records a decoded buffer: its byte range for the alias checks, and whether its
    /// dtype and shape are those of the first buffer decoded (see `alike`).
    #[inline(always)]
    pub(crate) fn record_buffer(
        &mut self,
        role: Role,
        index: usize,
        range: (usize, usize),
        dtype: DataType,
        dims: &'f [i64],
    ) {
        let slot = match role {
            Role::Operand => index,
            Role::Result => self.frame.count(Role::Operand) + index,
        };
        if self.aliases.record(slot, range) {
            match self.first {
                None => self.first = Some((dtype, dims)),
                Some((t0, d0)) => {
                    // A vector (most calls) with one compare; else a plain index loop over
                    // the few dimensions (cheaper than `memcmp`).
                    let same = dtype == t0
                        && match (dims, d0) {
                            ([a], [b]) => a == b,
                            _ => {
                                let mut same = dims.len() == d0.len();
                                let mut k = 0;
                                while same && k < dims.len() {
                                    same = dims[k] == d0[k];
                                    k += 1;
                                }
                                same
                            }
                        };
                    self.alike &= same;
                }
            }
        }
    }

    /// Whether operands `0..n` and results `0..m` were all decoded as buffers and
    /// have one dtype and one shape (the elementwise rules' fast path). `false` says
    /// only that this shortcut does not answer: the general check then does.
    #[inline(always)]
    fn all_alike(&self, n: usize, m: usize) -> bool {
        let na = self.frame.count(Role::Operand);
        // The usual case: the rule covers every buffer of the call, and `finish`
        // found them all recorded (so there is no mask to make).
        if n == na && m == self.frame.count(Role::Result) && self.aliases.all_recorded() {
            return self.alike;
        }
        if n > na || na + m > Aliases::MAX {
            return false;
        }
        let want = ((1u32 << n) - 1) | (((1u32 << m) - 1) << na);
        // All of them (and any other recorded buffer) alike the first buffer decoded,
        // so alike one another. A recorded buffer outside the rule that differs makes
        // this `false`: the general check then answers.
        self.aliases.seen() & want == want && self.alike
    }

    /// Takes the next operand position (for a [`Decode`] implementation that
    /// consumes an operand; declare it with [`Decode::ARGS`]).
    #[inline]
    pub fn next_arg(&mut self) -> usize {
        self.next_arg += 1;
        self.next_arg - 1
    }

    /// Takes the next result position (declare it with [`Decode::RETS`]).
    #[inline]
    pub fn next_ret(&mut self) -> usize {
        self.next_ret += 1;
        self.next_ret - 1
    }

    /// How many operands of the frame no parameter has taken yet.
    pub fn remaining_args(&self) -> usize {
        self.frame.count(Role::Operand).saturating_sub(self.next_arg)
    }

    /// How many results of the frame no parameter has taken yet.
    pub fn remaining_rets(&self) -> usize {
        self.frame.count(Role::Result).saturating_sub(self.next_ret)
    }

    /// Accepts attributes that no parameter binds, instead of reporting them.
    ///
    /// [`State`](crate::State) calls it: a handler that reads state may ignore the
    /// attributes its instantiate stage consumed, because that stage, which is
    /// strict, already refused any unknown or misspelt attribute at this call site.
    pub fn accept_unbound_attrs(&mut self) {
        self.accept_unbound_attrs = true;
    }

    /// Records a decoding problem; decoding goes on so that all are reported.
    pub fn problem(&mut self, message: impl Into<String>) {
        self.aliases.add_problem(message.into());
    }

    /// The static attribute dictionary of this call.
    #[inline]
    pub fn attrs(&self) -> Dict<'f> {
        Dict::new(self.frame.attrs())
    }

    /// Marks attribute `index` of the top-level dictionary as used.
    #[inline]
    pub fn use_attr(&mut self, index: usize) {
        // The first 64 (every call XLA makes in practice) with a 64-bit shift.
        if index < 64 {
            self.used_attrs |= u128::from(1u64 << index);
        } else if index < 128 {
            self.used_attrs |= 1 << index;
        } else {
            self.aliases.use_high_attr(index);
        }
    }

    /// After every parameter is decoded: the collected problems, and any attribute
    /// that no parameter asked for, as one `INVALID_ARGUMENT` error.
    #[doc(hidden)]
    #[inline]
    pub fn finish(&mut self) -> Result<()> {
        self.finish_declared((self.info.n_args, self.info.n_rets))
    }

    /// [`Call::finish`], given the handler's declared operand and result counts
    /// (constants in the code the [`handler`](crate::handler) macro generates).
    #[doc(hidden)]
    #[inline(always)]
    pub fn finish_declared(&mut self, declared: (usize, usize)) -> Result<()> {
        // Every buffer is decoded: the alias check, once for the call (on the declared
        // counts when the call has them: its few compares then unrolled).
        self.aliases.settle(declared);
        // The common case, with nothing to format: no problem, every attribute bound
        // (no attribute at all: no mask to make).
        let n = self.frame.attr_count();
        if !self.aliases.any_problem() && (n == 0 || self.accept_unbound_attrs || self.all_attrs_used(n)) {
            return Ok(());
        }
        let unbound = if self.accept_unbound_attrs { None } else { Some(self.used_attrs) };
        report(self.frame, self.info, self.aliases, unbound, self.aliases.take_problems())
    }

    /// Whether attributes `0..n` are all marked used (past 128, out of line).
    #[inline(always)]
    fn all_attrs_used(&self, n: usize) -> bool {
        // Fewer than 64 (every call XLA makes in practice): 64-bit arithmetic.
        if n < 64 {
            let all = (1u64 << n) - 1;
            return self.used_attrs as u64 & all == all;
        }
        if n > 128 {
            return self.used_attrs == u128::MAX && (128..n).all(|i| self.aliases.high_attr_used(i));
        }
        let all = if n == 128 { u128::MAX } else { (1u128 << n) - 1 };
        self.used_attrs & all == all
    }

    /// [`Call::check_rules`] for rules the [`handler`](crate::handler) macro found
    /// elementwise when it expanded (`"...b, ...b -> ...b"` with `"T, T -> T"`, no
    /// optional buffer), covering `n` operands and `m` results: a call whose buffers
    /// decoding found alike is answered without looking at the parsed rules.
    #[doc(hidden)]
    #[inline(always)]
    pub fn check_elementwise_rules(
        &self,
        (n, m): (usize, usize),
        decl: &Declaration,
        rules: &OnceLock<core::result::Result<Rules, String>>,
    ) -> Result<()> {
        if self.all_alike(n, m) {
            return Ok(());
        }
        self.check_rules(decl, rules)
    }

    /// Checks the decoded call against the declaration's shape and dtype rules,
    /// parsed once into `rules` (the `handler` macro's shim calls it after
    /// [`Call::finish`], before the body). Allocates nothing when the call fits.
    #[doc(hidden)]
    #[inline(always)]
    pub fn check_rules(&self, decl: &Declaration, rules: &OnceLock<core::result::Result<Rules, String>>) -> Result<()> {
        // Parsed by the first call (out of line, as is a declaration that fails to parse).
        let rules = match rules.get() {
            Some(Ok(rules)) => rules,
            _ => parse_rules(decl, rules)?,
        };
        // The elementwise rules ("...b, ...b -> ...b", "T, T -> T") on the dtypes and
        // shapes decoding read and checked: nothing to read again. Anything else, or a
        // call that does not fit (to word the error), goes through `check_call`.
        if let Some((n, m)) = rules.elementwise() {
            if self.all_alike(n, m) {
                return Ok(());
            }
        }
        check_rules_on_frame(self.frame, decl, rules)
    }
}

/// The parsed rules of [`Call::check_rules`] on the first call (or an error when they
/// cannot be parsed). Out of line, and not given the `Call`, as every cold path here.
#[cold]
#[inline(never)]
fn parse_rules<'r>(decl: &Declaration, cell: &'r OnceLock<core::result::Result<Rules, String>>) -> Result<&'r Rules> {
    match cell.get_or_init(|| Rules::parse(decl.shapes, decl.dtypes)) {
        Ok(rules) => Ok(rules),
        Err(e) => Err(Error::internal(format!("{}: {e}", decl.target))),
    }
}

/// [`Call::check_rules`] past its shortcut: the general check, on the frame.
#[inline(never)]
fn check_rules_on_frame(frame: &Frame<'_>, decl: &Declaration, rules: &Rules) -> Result<()> {
    let read = move |role: Role, i: usize| -> (DataType, &[i64]) {
        match frame.buffer(role, i) {
            Slot::Buffer(b) => (b.dtype(), b.dims()),
            _ => (DataType::INVALID, &[]),
        }
    };
    let (n_args, n_rets) = (frame.count(Role::Operand), frame.count(Role::Result));
    check_call(decl, rules, n_args, n_rets, &|i| read(Role::Operand, i), &|i| read(Role::Result, i))
        .map_err(|e| Error::invalid_argument(e.message))
}

/// [`Call::finish`] when something is to be reported: the problems, and each
/// attribute not marked in `unbound`'s used set (`None`: unbound attributes are
/// accepted). Given what it reads, not the `Call` (see `Aliases::problems`).
#[cold]
#[inline(never)]
fn report(
    frame: &Frame<'_>,
    info: &HandlerInfo,
    aliases: &Aliases<'_>,
    unbound: Option<u128>,
    mut problems: Vec<String>,
) -> Result<()> {
    let attrs = Dict::new(frame.attrs());
    if let Some(low) = unbound {
        let used = |i: usize| if i < 128 { low & (1 << i) != 0 } else { aliases.high_attr_used(i) };
        let extra: Vec<String> =
            (0..attrs.len()).filter(|&i| !used(i)).map(|i| attrs.name_at(i).unwrap_or("?").to_string()).collect();
        if !extra.is_empty() {
            // An unbound entry with a declared name is a second entry of that name
            // (XLA's dictionaries have none; a synthetic or hand-made one may).
            let declared = declared_attr_names(info, &attrs, &used);
            let (twice, unknown): (Vec<String>, Vec<String>) =
                extra.into_iter().partition(|n| declared.contains(&n.as_str()));
            for name in twice {
                problems.push(format!("{}: attribute `{name}` is given more than once", info.target));
            }
            if !unknown.is_empty() {
                problems.push(unknown_attrs_message(info.target, &unknown, &declared));
            }
        }
    }
    match problems.len() {
        0 => Ok(()),
        1 => Err(Error::invalid_argument(problems.pop().unwrap_or_default())),
        n => Err(Error::invalid_argument(format!(
            "{}: {n} problems decoding the call:\n  {}",
            info.target,
            problems.join("\n  ")
        ))),
    }
}

/// The attributes the handler declares (its `Attr` and `Attrs` parameters), and
/// any other a custom decoder used in this call (marked in `used`), in declaration
/// order.
fn declared_attr_names<'f>(info: &HandlerInfo, attrs: &Dict<'f>, used: &dyn Fn(usize) -> bool) -> Vec<&'f str> {
    let mut names: Vec<&'f str> = Vec::new();
    (info.attr_names)(&mut |n| {
        if !names.contains(&n) {
            names.push(n);
        }
    });
    for n in (0..attrs.len()).filter(|&i| used(i)).filter_map(|i| attrs.name_at(i)) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

/// [`Call::check_counts`] when the counts differ from the declared ones: fine when
/// optional or variadic parameters allow them, else the error naming what is missing.
/// Out of line and given what it reads by value (not the `Call`), so the `Call` of
/// the accepting path can live in registers.
#[cold]
#[inline(never)]
fn count_error(info: &HandlerInfo, na: usize, nr: usize) -> Result<()> {
    let (ea, er) = (info.n_args, info.n_rets);
    let mut msg = Vec::new();
    let (arity, variadic) = (info.arity, [info.variadic_args, info.variadic_rets]);
    for (role, got, max, variadic) in [(Role::Operand, na, ea, variadic[0]), (Role::Result, nr, er, variadic[1])] {
        let optional = optional_count(arity, role);
        let min = max - optional.min(max);
        let what = if role == Role::Operand { "operand" } else { "result" };
        if variadic && got < max {
            msg.push(format!(
                "expected at least {max} {what}{}, got {got}{}",
                plural(max),
                missing(arity, role, got, min)
            ));
        } else if !variadic && optional > 0 && !(min..=max).contains(&got) {
            msg.push(format!(
                "expected {min} to {max} {what}s ({} {} optional), got {got}{}",
                names(arity, role, min, max),
                if optional == 1 { "is" } else { "are" },
                missing(arity, role, got, min)
            ));
        } else if !variadic && optional == 0 && got != max {
            msg.push(format!("expected {max} {what}{}, got {got}{}", plural(max), missing(arity, role, got, min)));
        }
    }
    if msg.is_empty() {
        Ok(())
    } else {
        Err(Error::invalid_argument(format!("{}: {}", info.target, msg.join("; "))))
    }
}

/// "unknown attribute `epsilon`; this handler takes: eps (did you mean `eps`?)"
fn unknown_attrs_message(target: &str, unknown: &[String], takes: &[&str]) -> String {
    let quoted: Vec<String> = unknown.iter().map(|n| format!("`{n}`")).collect();
    let mut msg = format!("{target}: unknown attribute{} {}; ", plural(unknown.len()), quoted.join(", "));
    if takes.is_empty() {
        msg.push_str("this handler takes no attributes");
        return msg;
    }
    msg.push_str("this handler takes: ");
    msg.push_str(&takes.join(", "));
    let hints: Vec<(&str, &str)> = unknown.iter().filter_map(|u| closest(u, takes).map(|c| (u.as_str(), c))).collect();
    match hints.as_slice() {
        [] => {}
        [(_, c)] if unknown.len() == 1 => msg.push_str(&format!(" (did you mean `{c}`?)")),
        _ => {
            let h: Vec<String> = hints.iter().map(|(u, c)| format!("`{c}` for `{u}`")).collect();
            msg.push_str(&format!(" (did you mean {}?)", h.join(", ")));
        }
    }
    msg
}

/// The declared name closest to a misspelt one: a prefix of it (or it of a
/// prefix), or within a small edit distance, ignoring case.
fn closest<'a>(wrong: &str, names: &[&'a str]) -> Option<&'a str> {
    let w = wrong.to_ascii_lowercase();
    names
        .iter()
        .filter_map(|&n| {
            let l = n.to_ascii_lowercase();
            let d = edit_distance(&w, &l);
            let prefix = w.len().min(l.len()) >= 2 && (w.starts_with(&l) || l.starts_with(&w));
            (prefix || d <= (w.len().max(l.len()) / 3).max(1)).then_some((d, n))
        })
        .min_by_key(|&(d, _)| d)
        .map(|(_, n)| n)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// How many operands (results) may be absent.
fn optional_count(arity: &[Arity], role: Role) -> usize {
    arity.iter().map(|a| a.takes(role).1).sum()
}

/// The names of the parameters that take positions `from..to` of `role`, quoted:
/// "`y`, `z`".
fn names(arity: &[Arity], role: Role, from: usize, to: usize) -> String {
    let mut pos = 0;
    let mut out: Vec<String> = Vec::new();
    for a in arity {
        let (n, _) = a.takes(role);
        if n > 0 && pos < to && pos + n > from {
            out.push(format!("`{}`", a.name));
        }
        pos += n;
    }
    out.join(", ")
}

/// " (missing `y`, `z`)" when `got` is below `min`, the required count.
fn missing(arity: &[Arity], role: Role, got: usize, min: usize) -> String {
    if got >= min {
        return String::new();
    }
    match names(arity, role, got, min) {
        n if n.is_empty() => String::new(),
        n => format!(" (missing {n})"),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A parameter type of a [`handler`](crate::handler): it knows how to take itself
/// out of a [`Call`].
///
/// Other crates can implement it, usually by composing the implementations of this
/// crate's types (a pair of operands, say). An implementation that consumes operands
/// or results must say how many in [`Decode::ARGS`]/[`Decode::RETS`], and take them
/// with [`Call::next_arg`]/[`Call::next_ret`] (or through the types it wraps).
///
/// Implemented by [`Buffer`](crate::Buffer), [`ResultBuffer`](crate::ResultBuffer),
/// `Option` of either (optional operands and results, see
/// [`OptionalBuffer`](crate::OptionalBuffer)),
/// [`Attr`](crate::Attr), [`Attrs`](crate::Attrs), [`Context`](crate::Context) and
/// [`State`](crate::State). `decode` returns `None` after recording a problem with
/// [`Call::problem`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a handler parameter",
    label = "not decodable from an XLA call frame",
    note = "handler parameters are Buffer, ResultBuffer, Option<Buffer>, Option<ResultBuffer>, RemainingArgs, \
            RemainingRets, Attr<T>, Attrs<T>, Context, State<S> (Prepared<S>, Initialized<S>), UserData<T>, or a type implementing xla_ffi::Decode"
)]
pub trait Decode<'f>: Sized {
    /// How many operands this parameter consumes.
    const ARGS: usize = 0;
    /// How many results this parameter consumes.
    const RETS: usize = 0;
    /// How many of its [`ARGS`](Decode::ARGS) may be absent (an optional operand,
    /// `Option<Buffer<..>>`): the call may then pass fewer operands.
    const OPTIONAL_ARGS: usize = 0;
    /// How many of its [`RETS`](Decode::RETS) may be absent (`Option<ResultBuffer<..>>`).
    const OPTIONAL_RETS: usize = 0;
    /// Whether it takes every remaining operand (then the count is a minimum).
    const VARIADIC_ARGS: bool = false;
    /// Whether it takes every remaining result.
    const VARIADIC_RETS: bool = false;
    /// Whether the parameter reads XLA's invoke context ([`Context`](crate::Context),
    /// [`State`](crate::State), [`UserData`](crate::UserData)). The context ends when
    /// the handler call returns, so an async handler (`#[handler(async)]`) cannot take
    /// such a parameter: a compile error, and, for a decoder that reads the context
    /// without saying so, a decoding error in the asynchronous part.
    const NEEDS_CONTEXT: bool = false;
    /// What the parameter is in the op's [`Declaration`]: an operand, a result, an
    /// attribute, or nothing ([`ParamDecl::Other`], the default).
    const DECL: ParamDecl = ParamDecl::Other;
    /// What the [`handler`](crate::handler) macro's compile-time check of the
    /// declared rules knows of the buffer this parameter is: its dtypes and rank
    /// ([`BufferBounds::UNKNOWN`](crate::decl::BufferBounds::UNKNOWN), the default,
    /// for a parameter that is no buffer or says nothing).
    #[doc(hidden)]
    const BUFFER: crate::decl::BufferBounds = crate::decl::BufferBounds::UNKNOWN;
    /// The stage whose state the parameter reads ([`State<S, At>`](crate::State)
    /// sets it to `At`'s stage), or `None`. The [`handler`](crate::handler) macro
    /// refuses, at compile time, a parameter that reads the state of a stage that
    /// does not run before the handler's own ([`Stage::reads_state_of`](crate::Stage::reads_state_of)).
    const STATE_STAGE: Option<crate::Stage> = None;
    /// Decodes the parameter called `name`.
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self>;
    /// The XLA type id of the state this parameter reads, or 0.
    fn state_type_id() -> i64 {
        0
    }
    /// Calls `each` with the name of every attribute this parameter (called `name`)
    /// reads, for the error that lists what a handler takes when a call passes an
    /// unknown attribute. A parameter that wraps [`Attr`] or [`Attrs`] forwards to them.
    fn declared_attrs(name: &'static str, each: &mut dyn FnMut(&'static str)) {
        let _ = (name, each);
    }
}

fn attr_optional<'f, T: FromAttr<'f>>() -> bool {
    T::if_missing().is_some()
}

// Attribute parameters: the views of `attr.rs` decoded from the call (the decode
// layer sits above the views, so `attr.rs` does not depend on `Call`).

impl<'f, T: FromAttr<'f>> Decode<'f> for Attr<T> {
    const DECL: ParamDecl =
        ParamDecl::Attribute { type_name: T::type_name, optional: attr_optional::<T>, enum_values: T::enum_values };
    fn declared_attrs(name: &'static str, each: &mut dyn FnMut(&'static str)) {
        each(name);
    }
    /// The accepting path (the entry found, of a known kind, converted) is inlined
    /// into the handler, where `name` is a constant: the search compares lengths,
    /// then the bytes in a load or two. An absent entry, one of an unknown kind and
    /// a conversion's error go out of line.
    #[inline(always)]
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        let attrs = call.attrs();
        let found = attrs.position(name);
        if let Some(i) = found {
            call.use_attr(i);
            if let Some(v) = attrs.value_at_scalar_first(i) {
                return match T::from_attr(&v) {
                    Ok(v) => Some(Attr(v)),
                    Err(e) => {
                        attr_problem(call.aliases, name, e);
                        None
                    }
                };
            }
        }
        attr_absent_or_unknown::<T>(call.aliases, name, found.is_some())
    }
}

/// Records the problem of attribute `name`, whose value `T::from_attr` refused.
#[cold]
#[inline(never)]
fn attr_problem(aliases: &Aliases<'_>, name: &str, e: String) {
    aliases.add_problem(format!("{}: attribute `{name}`: {e}", aliases.target));
}

/// [`Attr::decode`] for an attribute that is absent (its default, when `T` has one)
/// or of a kind this crate does not know (`found`).
#[cold]
#[inline(never)]
fn attr_absent_or_unknown<'f, T: FromAttr<'f>>(aliases: &Aliases<'_>, name: &str, found: bool) -> Option<Attr<T>> {
    match crate::attr::decode_found::<T>(found.then_some((0, None))) {
        Ok(v) => Some(Attr(v)),
        Err(e) => {
            attr_problem(aliases, name, e);
            None
        }
    }
}

impl<'f, S: FromAttrs<'f>> Decode<'f> for Attrs<S> {
    const DECL: ParamDecl = ParamDecl::Attributes(S::field_decls);
    fn declared_attrs(_name: &'static str, each: &mut dyn FnMut(&'static str)) {
        for n in S::NAMES {
            each(n);
        }
    }
    fn decode(call: &mut Call<'f>, _name: &'static str) -> Option<Self> {
        let dict = call.attrs();
        let mut cx = FieldCx::new(call.target());
        let s = S::from_dict(&dict, &mut cx);
        call.used_attrs |= cx.used.low;
        for &i in cx.used.high() {
            call.use_attr(i);
        }
        for p in cx.problems {
            call.problem(p);
        }
        s.map(Attrs)
    }
}

impl core::fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Call")
            .field("target", &self.target())
            .field("next_arg", &self.next_arg)
            .field("next_ret", &self.next_ret)
            .finish_non_exhaustive()
    }
}
