//! The options of `#[handler(...)]`, parsed and checked: the target or `op`, the
//! stage and platform, the traits, the exported symbol, the descriptor's name, the
//! crate path, the rules (parsed with `xla-ffi-rules`, so a bad rule is an error
//! here), `linear`, `transpose`, `scratch` and `async`.

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::quote;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Error, Expr, Ident, Lit, LitStr, Meta, Token};

use crate::async_handler;

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Stage {
    Instantiate,
    Prepare,
    Initialize,
    Execute,
    Record,
}

pub(crate) struct Options {
    /// The target: its own literal, or `op`'s.
    pub(crate) target: Target,
    pub(crate) host: bool,
    pub(crate) stage: Stage,
    pub(crate) traits: Option<Expr>,
    /// A raw symbol name, chosen with `unsafe(symbol = "...")`, and the span of that
    /// `unsafe` (where `#![forbid(unsafe_code)]` points).
    pub(crate) symbol: Option<(LitStr, Span)>,
    pub(crate) descriptor: Option<Ident>,
    pub(crate) krate: syn::Path,
    /// The shape rule, parsed, with its literal.
    pub(crate) shapes: Option<(LitStr, xla_ffi_rules::ShapeRule)>,
    /// The dtype rule, parsed, with its literal.
    pub(crate) dtypes: Option<(LitStr, xla_ffi_rules::DtypeRule)>,
    /// The operands the op is linear in, with the literal.
    pub(crate) linear: Option<(LitStr, Vec<String>)>,
    /// The transpose target.
    pub(crate) transpose: Option<LitStr>,
    /// The trailing results outside `op`'s rules (`scratch = "workspace"`), with the literal.
    pub(crate) scratch: Option<(LitStr, Vec<String>)>,
    /// `async` / `async = spawner`: an async handler.
    pub(crate) asynchronous: Option<async_handler::AsyncOption>,
}

/// Where the target and the rules come from.
pub(crate) enum Target {
    /// `target = "..."` and the rule keys of this attribute.
    Own(LitStr),
    /// `op = PATH`: the declaration of the handler descriptor at `PATH`.
    Op(syn::Path),
}

impl Target {
    /// The target name, as a constant expression.
    pub(crate) fn tokens(&self) -> TokenStream2 {
        match self {
            Target::Own(s) => quote!(#s),
            Target::Op(p) => quote!(#p.declaration.target),
        }
    }

    /// The target, for the descriptor's doc comment.
    pub(crate) fn describe(&self) -> String {
        match self {
            Target::Own(s) => format!("target `{}`", s.value()),
            Target::Op(p) => format!("the target of `{}`", quote!(#p).to_string().replace(' ', "")),
        }
    }
}

const OPTIONS: &str = "target, platform, stage, traits, unsafe(symbol = \"...\"), descriptor, crate, \
                       shapes, dtypes, linear, transpose, op, scratch, async";

/// The prefix of every default exported symbol: `xla_ffi_handler__<function name>`.
/// No C library uses it, so a handler's name cannot replace another function.
pub(crate) const SYMBOL_PREFIX: &str = "xla_ffi_handler__";

/// Checks a raw symbol name: a C identifier.
fn check_symbol(s: &LitStr) -> syn::Result<()> {
    let v = s.value();
    let ok = v.chars().next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && v.chars().all(|c| c == '_' || c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(Error::new(s.span(), "`symbol` must be a C identifier ([A-Za-z_][A-Za-z0-9_]*)"))
    }
}

/// Parses `unsafe(symbol = "name")`: the raw exported symbol name.
fn unsafe_symbol(list: &syn::MetaList) -> syn::Result<LitStr> {
    let inner = list
        .parse_args::<syn::MetaNameValue>()
        .map_err(|_| Error::new(list.span(), "`unsafe(...)` takes one option: unsafe(symbol = \"c_name\")"))?;
    if !inner.path.is_ident("symbol") {
        return Err(Error::new(inner.path.span(), "`unsafe(...)` takes one option: unsafe(symbol = \"c_name\")"));
    }
    let s = str_value(&inner, "symbol")?;
    check_symbol(&s)?;
    Ok(s)
}

fn ident_value(meta: &syn::MetaNameValue) -> Option<String> {
    match &meta.value {
        Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => Some(s.value()),
        _ => None,
    }
}

fn str_value(meta: &syn::MetaNameValue, what: &str) -> syn::Result<LitStr> {
    match &meta.value {
        Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => Ok(s.clone()),
        other => Err(Error::new(other.span(), format!("`{what}` takes a string literal: {what} = \"...\""))),
    }
}

pub(crate) fn parse_options(args: TokenStream2) -> syn::Result<Options> {
    let args = async_handler::rename_keyword(args);
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(args.clone())?;
    let mut given = Given::default();
    for meta in &metas {
        given.add(meta)?;
    }
    given.finish()
}

/// The options as given, each checked alone; [`Given::finish`] checks them together.
#[derive(Default)]
struct Given {
    target: Option<LitStr>,
    host: Option<bool>,
    stage: Option<Stage>,
    traits: Option<Expr>,
    symbol: Option<(LitStr, Span)>,
    descriptor: Option<Ident>,
    krate: Option<syn::Path>,
    shapes: Option<(LitStr, xla_ffi_rules::ShapeRule)>,
    dtypes: Option<(LitStr, xla_ffi_rules::DtypeRule)>,
    linear: Option<(LitStr, Vec<String>)>,
    transpose: Option<LitStr>,
    op: Option<syn::Path>,
    scratch: Option<(LitStr, Vec<String>)>,
    asynchronous: Option<async_handler::AsyncOption>,
    /// The keys that `op` replaces, where they were given.
    own_keys: Vec<(String, Span)>,
}

impl Given {
    /// One option: `unsafe(symbol = "...")`, `async`, or `name = value`.
    fn add(&mut self, meta: &Meta) -> syn::Result<()> {
        if let Meta::List(list) = meta {
            if list.path.is_ident("unsafe") {
                if self.symbol.is_some() {
                    return Err(Error::new(list.span(), "option `symbol` is given twice"));
                }
                let unsafe_span = list.path.span();
                self.symbol = Some((unsafe_symbol(list)?, unsafe_span));
                return Ok(());
            }
        }
        if let Some(a) = async_handler::parse(meta)? {
            if self.asynchronous.is_some() {
                return Err(Error::new(a.span, "option `async` is given twice"));
            }
            self.asynchronous = Some(a);
            return Ok(());
        }
        let Meta::NameValue(nv) = meta else {
            return Err(Error::new(
                meta.span(),
                format!("expected `name = value`; the options are {OPTIONS}, e.g. #[handler(target = \"my.op\")]"),
            ));
        };
        let key = nv.path.get_ident().map(|i| i.to_string()).unwrap_or_else(|| {
            // `crate` is a keyword, so it is not an `Ident` to syn.
            quote!(#nv.path).to_string().replace(' ', "")
        });
        if ["target", "shapes", "dtypes", "linear", "transpose"].contains(&key.as_str()) {
            self.own_keys.push((key.clone(), nv.path.span()));
        }
        self.name_value(nv, &key)
    }

    /// A `key = value` option.
    fn name_value(&mut self, nv: &syn::MetaNameValue, key: &str) -> syn::Result<()> {
        let dup = |set: bool| -> syn::Result<()> {
            if set {
                Err(Error::new(nv.path.span(), format!("option `{key}` is given twice")))
            } else {
                Ok(())
            }
        };
        match key {
            "op" => {
                dup(self.op.is_some())?;
                match &nv.value {
                    Expr::Path(p) => self.op = Some(p.path.clone()),
                    other => {
                        return Err(Error::new(
                            other.span(),
                            "`op` takes the path of another handler's descriptor: op = super::cpu::MY_OP_CPU",
                        ))
                    }
                }
            }
            "scratch" => {
                dup(self.scratch.is_some())?;
                let s = str_value(nv, "scratch")?;
                let names: Vec<String> =
                    s.value().split(',').map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).collect();
                if names.is_empty() {
                    return Err(Error::new(s.span(), "`scratch` names trailing results: scratch = \"workspace\""));
                }
                self.scratch = Some((s, names));
            }
            "target" => {
                dup(self.target.is_some())?;
                let s = str_value(nv, "target")?;
                if s.value().is_empty() {
                    return Err(Error::new(s.span(), "the target name must not be empty"));
                }
                self.target = Some(s);
            }
            "platform" => {
                dup(self.host.is_some())?;
                self.host = Some(match ident_value(nv).as_deref() {
                    Some("host") | Some("cpu") => true,
                    Some("device") | Some("cuda") | Some("gpu") => false,
                    _ => {
                        return Err(Error::new(
                            nv.value.span(),
                            "`platform` is `host` (CPU buffers, the default) or `device` (GPU buffers)",
                        ))
                    }
                });
            }
            "stage" => {
                dup(self.stage.is_some())?;
                self.stage = Some(match ident_value(nv).as_deref() {
                    Some("instantiate") => Stage::Instantiate,
                    Some("prepare") => Stage::Prepare,
                    Some("initialize") => Stage::Initialize,
                    Some("execute") => Stage::Execute,
                    Some("record") => Stage::Record,
                    _ => {
                        return Err(Error::new(
                            nv.value.span(),
                            "`stage` is one of `instantiate`, `prepare`, `initialize`, `execute` (the default), \
                             `record`",
                        ))
                    }
                });
            }
            "traits" => {
                dup(self.traits.is_some())?;
                self.traits = Some(nv.value.clone());
            }
            "symbol" => {
                let s = str_value(nv, "symbol")?;
                return Err(Error::new(
                    nv.span(),
                    format!(
                        "a raw exported symbol name is unsafe: `{0}` would replace any other function of that \
                         name in the process (`malloc`, `write`, another library's handler). Write \
                         `unsafe(symbol = \"{0}\")` if no other symbol in the process has that name; without \
                         it the symbol is `{SYMBOL_PREFIX}<function name>`",
                        s.value()
                    ),
                ));
            }
            "descriptor" => {
                dup(self.descriptor.is_some())?;
                match &nv.value {
                    Expr::Path(p) if p.path.get_ident().is_some() => self.descriptor = p.path.get_ident().cloned(),
                    other => {
                        return Err(Error::new(other.span(), "`descriptor` takes an identifier: descriptor = MY_OP"))
                    }
                }
            }
            "shapes" => {
                dup(self.shapes.is_some())?;
                let s = str_value(nv, "shapes")?;
                let rule = xla_ffi_rules::ShapeRule::parse(&s.value()).map_err(|e| Error::new(s.span(), e))?;
                self.shapes = Some((s, rule));
            }
            "dtypes" => {
                dup(self.dtypes.is_some())?;
                let s = str_value(nv, "dtypes")?;
                let rule = xla_ffi_rules::DtypeRule::parse(&s.value()).map_err(|e| Error::new(s.span(), e))?;
                self.dtypes = Some((s, rule));
            }
            "linear" => {
                dup(self.linear.is_some())?;
                let s = str_value(nv, "linear")?;
                let names: Vec<String> =
                    s.value().split(',').map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).collect();
                if names.is_empty() {
                    return Err(Error::new(s.span(), "`linear` names operands: linear = \"x, y\""));
                }
                self.linear = Some((s, names));
            }
            "transpose" => {
                dup(self.transpose.is_some())?;
                let s = str_value(nv, "transpose")?;
                if s.value().trim().is_empty() {
                    return Err(Error::new(s.span(), "`transpose` names a target: transpose = \"my.op_transpose\""));
                }
                self.transpose = Some(s);
            }
            "crate" => {
                dup(self.krate.is_some())?;
                let s = str_value(nv, "crate")?;
                self.krate = Some(s.parse::<syn::Path>()?);
            }
            other => {
                return Err(Error::new(nv.path.span(), format!("unknown option `{other}`; the options are {OPTIONS}")))
            }
        }
        Ok(())
    }

    /// The checks of the options together, and the defaults.
    fn finish(self) -> syn::Result<Options> {
        let target = match (self.op, self.target) {
            (Some(p), _) => {
                if let Some((key, span)) = self.own_keys.first() {
                    return Err(Error::new(
                        *span,
                        format!(
                            "`{key}` cannot be given beside `op`: the target and the rules (`target`, `shapes`, \
                             `dtypes`, `linear`, `transpose`) come from the declaration `op` refers to; write them \
                             there, once"
                        ),
                    ));
                }
                Target::Op(p)
            }
            (None, Some(t)) => Target::Own(t),
            (None, None) => {
                return Err(Error::new(
                    Span::call_site(),
                    "missing `target`: #[handler(target = \"my_project.my_op\")] names the FFI target (or \
                     `op = OTHER_DESCRIPTOR` takes the target and rules of another handler)",
                ))
            }
        };
        if let (Target::Own(_), Some((s, _))) = (&target, &self.scratch) {
            return Err(Error::new(
                s.span(),
                "`scratch` goes with `op`: it names this handler's trailing results that the referenced declaration \
                 does not have",
            ));
        }
        if let (Some(a), Some(s)) = (&self.asynchronous, self.stage) {
            if s != Stage::Execute {
                return Err(Error::new(
                    a.span,
                    "`async` is for the execute stage: XLA completes only execute calls through a future",
                ));
            }
        }
        if let (Some(a), Some(false)) = (&self.asynchronous, self.host) {
            return Err(Error::new(
                a.span,
                "`async` handlers are host (CPU) handlers: a device handler enqueues its work on the stream instead",
            ));
        }
        Ok(Options {
            target,
            scratch: self.scratch,
            asynchronous: self.asynchronous,
            host: self.host.unwrap_or(true),
            stage: self.stage.unwrap_or(Stage::Execute),
            traits: self.traits,
            symbol: self.symbol,
            descriptor: self.descriptor,
            krate: self.krate.unwrap_or_else(|| syn::parse_quote!(::xla_ffi)),
            shapes: self.shapes,
            dtypes: self.dtypes,
            linear: self.linear,
            transpose: self.transpose,
        })
    }
}
