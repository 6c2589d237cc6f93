//! The `#[handler]` attribute macro of [`xla-ffi`](https://docs.rs/xla-ffi).
//!
//! Use it as `#[xla_ffi::handler(...)]`; the options, the parameter types and the
//! generated items are documented on `xla_ffi::handler`. This crate only parses the
//! function and generates code; every check of a call happens in `xla-ffi` at run
//! time, and every type check in the compiler.
//!
//! What it generates beside the (unchanged) function:
//! * a `const` `xla_ffi::HandlerDescriptor` (target, stage, platform, traits, symbol and the
//!   function pointer), named after the function in upper case;
//! * inside that const, the `extern "C"` shim, exported as `xla_ffi_handler__<fn name>`
//!   (or a raw name given with the unsafe opt-in `unsafe(symbol = "...")`),
//!   which decodes the call frame and *calls* the function. The function's body is
//!   never pasted into the shim, so it stays safe code: it cannot perform an unsafe
//!   operation without writing `unsafe`, and `#![forbid(unsafe_code)]` sees it.
#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Error, Expr, FnArg, GenericParam, Ident, ItemFn, Lit, LitStr, Meta, Pat, ReturnType, Token, Type};

mod async_handler;
mod attr_enum;
mod rule_types;
mod stages;

/// Decodes a fieldless enum from an integer or string attribute; see `xla_ffi::AttrEnum`.
#[proc_macro_derive(AttrEnum, attributes(attr_enum))]
pub fn derive_attr_enum(item: TokenStream) -> TokenStream {
    match syn::parse::<syn::DeriveInput>(item).and_then(attr_enum::expand) {
        Ok(out) => out.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Turns an ordinary function into an XLA FFI handler; see `xla_ffi::handler`.
#[proc_macro_attribute]
pub fn handler(args: TokenStream, item: TokenStream) -> TokenStream {
    let item2: TokenStream2 = item.clone().into();
    match expand(args.into(), item.into()) {
        Ok(out) => out.into(),
        Err(e) => {
            // Keep the function, so a macro error does not cascade into "not found".
            let mut out = e.to_compile_error();
            out.extend(item2);
            out.into()
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Stage {
    Instantiate,
    Prepare,
    Initialize,
    Execute,
    Record,
}

struct Options {
    /// The target: its own literal, or `op`'s.
    target: Target,
    host: bool,
    stage: Stage,
    traits: Option<Expr>,
    /// A raw symbol name, chosen with `unsafe(symbol = "...")`, and the span of that
    /// `unsafe` (where `#![forbid(unsafe_code)]` points).
    symbol: Option<(LitStr, Span)>,
    descriptor: Option<Ident>,
    krate: syn::Path,
    /// The shape rule, parsed, with its literal.
    shapes: Option<(LitStr, xla_ffi_rules::ShapeRule)>,
    /// The dtype rule, parsed, with its literal.
    dtypes: Option<(LitStr, xla_ffi_rules::DtypeRule)>,
    /// The operands the op is linear in, with the literal.
    linear: Option<(LitStr, Vec<String>)>,
    /// The transpose target.
    transpose: Option<LitStr>,
    /// The trailing results outside `op`'s rules (`scratch = "workspace"`), with the literal.
    scratch: Option<(LitStr, Vec<String>)>,
    /// `async` / `async = spawner`: an async handler.
    asynchronous: Option<async_handler::AsyncOption>,
}

/// Where the target and the rules come from.
enum Target {
    /// `target = "..."` and the rule keys of this attribute.
    Own(LitStr),
    /// `op = PATH`: the declaration of the handler descriptor at `PATH`.
    Op(syn::Path),
}

impl Target {
    /// The target name, as a constant expression.
    fn tokens(&self) -> TokenStream2 {
        match self {
            Target::Own(s) => quote!(#s),
            Target::Op(p) => quote!(#p.declaration.target),
        }
    }

    /// The target, for the descriptor's doc comment.
    fn describe(&self) -> String {
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
const SYMBOL_PREFIX: &str = "xla_ffi_handler__";

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

fn parse_options(args: TokenStream2) -> syn::Result<Options> {
    let args = async_handler::rename_keyword(args);
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(args.clone())?;
    let mut target = None;
    let mut host = None;
    let mut stage = None;
    let mut traits = None;
    let mut symbol = None;
    let mut descriptor = None;
    let mut krate = None;
    let mut shapes = None;
    let mut dtypes = None;
    let mut linear = None;
    let mut transpose = None;
    let mut op: Option<syn::Path> = None;
    let mut scratch = None;
    let mut asynchronous: Option<async_handler::AsyncOption> = None;
    // The keys that `op` replaces, where they were given.
    let mut own_keys: Vec<(String, Span)> = Vec::new();
    for meta in metas {
        if let Meta::List(list) = &meta {
            if list.path.is_ident("unsafe") {
                if symbol.is_some() {
                    return Err(Error::new(list.span(), "option `symbol` is given twice"));
                }
                let unsafe_span = list.path.span();
                symbol = Some((unsafe_symbol(list)?, unsafe_span));
                continue;
            }
        }
        if let Some(a) = async_handler::parse(&meta)? {
            if asynchronous.is_some() {
                return Err(Error::new(a.span, "option `async` is given twice"));
            }
            asynchronous = Some(a);
            continue;
        }
        let Meta::NameValue(nv) = &meta else {
            return Err(Error::new(
                meta.span(),
                format!("expected `name = value`; the options are {OPTIONS}, e.g. #[handler(target = \"my.op\")]"),
            ));
        };
        let key = nv.path.get_ident().map(|i| i.to_string()).unwrap_or_else(|| {
            // `crate` is a keyword, so it is not an `Ident` to syn.
            quote!(#nv.path).to_string().replace(' ', "")
        });
        let dup = |set: bool| -> syn::Result<()> {
            if set {
                Err(Error::new(nv.path.span(), format!("option `{key}` is given twice")))
            } else {
                Ok(())
            }
        };
        if ["target", "shapes", "dtypes", "linear", "transpose"].contains(&key.as_str()) {
            own_keys.push((key.clone(), nv.path.span()));
        }
        match key.as_str() {
            "op" => {
                dup(op.is_some())?;
                match &nv.value {
                    Expr::Path(p) => op = Some(p.path.clone()),
                    other => {
                        return Err(Error::new(
                            other.span(),
                            "`op` takes the path of another handler's descriptor: op = super::cpu::MY_OP_CPU",
                        ))
                    }
                }
            }
            "scratch" => {
                dup(scratch.is_some())?;
                let s = str_value(nv, "scratch")?;
                let names: Vec<String> =
                    s.value().split(',').map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).collect();
                if names.is_empty() {
                    return Err(Error::new(s.span(), "`scratch` names trailing results: scratch = \"workspace\""));
                }
                scratch = Some((s, names));
            }
            "target" => {
                dup(target.is_some())?;
                let s = str_value(nv, "target")?;
                if s.value().is_empty() {
                    return Err(Error::new(s.span(), "the target name must not be empty"));
                }
                target = Some(s);
            }
            "platform" => {
                dup(host.is_some())?;
                host = Some(match ident_value(nv).as_deref() {
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
                dup(stage.is_some())?;
                stage = Some(match ident_value(nv).as_deref() {
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
                dup(traits.is_some())?;
                traits = Some(nv.value.clone());
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
                dup(descriptor.is_some())?;
                match &nv.value {
                    Expr::Path(p) if p.path.get_ident().is_some() => descriptor = p.path.get_ident().cloned(),
                    other => {
                        return Err(Error::new(other.span(), "`descriptor` takes an identifier: descriptor = MY_OP"))
                    }
                }
            }
            "shapes" => {
                dup(shapes.is_some())?;
                let s = str_value(nv, "shapes")?;
                let rule = xla_ffi_rules::ShapeRule::parse(&s.value()).map_err(|e| Error::new(s.span(), e))?;
                shapes = Some((s, rule));
            }
            "dtypes" => {
                dup(dtypes.is_some())?;
                let s = str_value(nv, "dtypes")?;
                let rule = xla_ffi_rules::DtypeRule::parse(&s.value()).map_err(|e| Error::new(s.span(), e))?;
                dtypes = Some((s, rule));
            }
            "linear" => {
                dup(linear.is_some())?;
                let s = str_value(nv, "linear")?;
                let names: Vec<String> =
                    s.value().split(',').map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).collect();
                if names.is_empty() {
                    return Err(Error::new(s.span(), "`linear` names operands: linear = \"x, y\""));
                }
                linear = Some((s, names));
            }
            "transpose" => {
                dup(transpose.is_some())?;
                let s = str_value(nv, "transpose")?;
                if s.value().trim().is_empty() {
                    return Err(Error::new(s.span(), "`transpose` names a target: transpose = \"my.op_transpose\""));
                }
                transpose = Some(s);
            }
            "crate" => {
                dup(krate.is_some())?;
                let s = str_value(nv, "crate")?;
                krate = Some(s.parse::<syn::Path>()?);
            }
            other => {
                return Err(Error::new(nv.path.span(), format!("unknown option `{other}`; the options are {OPTIONS}")))
            }
        }
    }
    let target = match (op, target) {
        (Some(p), _) => {
            if let Some((key, span)) = own_keys.first() {
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
    if let (Target::Own(_), Some((s, _))) = (&target, &scratch) {
        return Err(Error::new(
            s.span(),
            "`scratch` goes with `op`: it names this handler's trailing results that the referenced declaration \
             does not have",
        ));
    }
    if let (Some(a), Some(s)) = (&asynchronous, stage) {
        if s != Stage::Execute {
            return Err(Error::new(
                a.span,
                "`async` is for the execute stage: XLA completes only execute calls through a future",
            ));
        }
    }
    if let (Some(a), Some(false)) = (&asynchronous, host) {
        return Err(Error::new(
            a.span,
            "`async` handlers are host (CPU) handlers: a device handler enqueues its work on the stream instead",
        ));
    }
    Ok(Options {
        target,
        scratch,
        asynchronous,
        host: host.unwrap_or(true),
        stage: stage.unwrap_or(Stage::Execute),
        traits,
        symbol,
        descriptor,
        krate: krate.unwrap_or_else(|| syn::parse_quote!(::xla_ffi)),
        shapes,
        dtypes,
        linear,
        transpose,
    })
}

/// Replaces every lifetime in a parameter type by `'_`, so the shim can name the type
/// without the function's lifetime parameters.
struct EraseLifetimes;

impl VisitMut for EraseLifetimes {
    fn visit_lifetime_mut(&mut self, l: &mut syn::Lifetime) {
        *l = syn::Lifetime::new("'_", l.span());
    }
}

/// Replaces every lifetime in a parameter type by `'static`, for the declaration
/// const (where `'_` cannot be written).
struct StaticLifetimes;

impl VisitMut for StaticLifetimes {
    fn visit_lifetime_mut(&mut self, l: &mut syn::Lifetime) {
        *l = syn::Lifetime::new("'static", l.span());
    }
}

struct Param {
    name: String,
    ty: Type,
    span: Span,
    /// The type as written, for messages: `Buffer<'f, f64, 1>`.
    text: String,
}

fn check_signature(f: &ItemFn) -> syn::Result<()> {
    let sig = &f.sig;
    let no = |span: Span, what: &str| Err(Error::new(span, what.to_string()));
    if let Some(t) = &sig.unsafety {
        return no(
            t.span(),
            "a handler must be a safe `fn`: remove `unsafe` (the generated shim does the unsafe part, \
             and an `unsafe` block in the body still works)",
        );
    }
    if let Some(t) = &sig.asyncness {
        return no(t.span(), "a handler cannot be an `async fn`: write a plain `fn` with `#[handler(async)]` to finish the call later, on a thread of its own");
    }
    if let Some(t) = &sig.constness {
        return no(t.span(), "a handler cannot be `const fn`");
    }
    if let Some(abi) = &sig.abi {
        return no(abi.span(), "write the handler as a Rust `fn`; the macro generates the `extern \"C\"` symbol");
    }
    if let Some(v) = &sig.variadic {
        return no(v.span(), "C variadics are not supported; use `RemainingArgs` for a variable number of operands");
    }
    for g in &sig.generics.params {
        match g {
            GenericParam::Lifetime(_) => {}
            _ => {
                return no(
                    g.span(),
                    "a handler cannot have type or const parameters: XLA calls one concrete function; \
                     take `Buffer<AnyFloat>` and dispatch on the dtype instead",
                )
            }
        }
    }
    if let Some(w) = &sig.generics.where_clause {
        return no(w.span(), "a handler cannot have a `where` clause");
    }
    if let Some(span) = find_self_type(quote!(#sig)) {
        return no(span, FREE_FN);
    }
    Ok(())
}

/// What to say for a handler inside an `impl` block.
const FREE_FN: &str = "#[handler] must be on a free function (in a module or a block), not an associated function \
                       in an `impl`: the exported symbol cannot call `Self::f`; move the function out of the `impl`";

/// The span of a `Self` in a signature (only an associated function can name it).
fn find_self_type(tokens: TokenStream2) -> Option<Span> {
    tokens.into_iter().find_map(|t| match t {
        proc_macro2::TokenTree::Ident(i) if i == "Self" => Some(i.span()),
        proc_macro2::TokenTree::Group(g) => find_self_type(g.stream()),
        _ => None,
    })
}

fn params(f: &ItemFn) -> syn::Result<Vec<Param>> {
    let mut out = Vec::new();
    for arg in &f.sig.inputs {
        match arg {
            FnArg::Receiver(r) => return Err(Error::new(r.span(), FREE_FN)),
            FnArg::Typed(pt) => {
                let name = match &*pt.pat {
                    Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                        pi.ident.to_string().trim_start_matches("r#").to_string()
                    }
                    other => {
                        return Err(Error::new(
                            other.span(),
                            "a handler parameter must be a plain name (`x` or `mut x`): attributes are \
                             looked up by it and errors name it",
                        ))
                    }
                };
                if let Type::ImplTrait(t) = &*pt.ty {
                    return Err(Error::new(t.span(), "a handler parameter needs a concrete type, not `impl Trait`"));
                }
                let text = rule_types::type_text(&pt.ty);
                let mut ty = (*pt.ty).clone();
                EraseLifetimes.visit_type_mut(&mut ty);
                out.push(Param { name, ty, span: pt.ty.span(), text });
            }
        }
    }
    Ok(out)
}

fn expand(args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let opts = parse_options(args)?;
    let f: ItemFn = syn::parse2(item).map_err(|e| {
        Error::new(e.span(), "#[handler] goes on a function: #[handler(target = \"...\")] fn my_op(...) { ... }")
    })?;
    check_signature(&f)?;
    let params = params(&f)?;
    let krate = &opts.krate;
    let fn_name = &f.sig.ident;
    let vis = &f.vis;
    let fn_str = fn_name.to_string().trim_start_matches("r#").to_string();
    let symbol = match &opts.symbol {
        Some((s, _)) => s.clone(),
        None => LitStr::new(&format!("{SYMBOL_PREFIX}{fn_str}"), fn_name.span()),
    };
    // `#![forbid(unsafe_code)]` must see a raw symbol name: an `unsafe` block spanned
    // at the user's `unsafe(symbol = ...)` makes the lint point there.
    let unsafe_marker = match &opts.symbol {
        Some((_, span)) => quote_spanned! {*span=>
            #[allow(unused_unsafe)]
            // SAFETY: an empty block does nothing; it is there for the lint to see.
            const _: () = unsafe {};
        },
        None => quote!(),
    };
    let desc = opts.descriptor.clone().unwrap_or_else(|| format_ident!("{}", fn_str.to_uppercase()));
    let target = opts.target.tokens();
    let host = opts.host;
    let traits = match &opts.traits {
        Some(t) => quote!(#t),
        None => quote!(#krate::Traits::NONE),
    };
    let stage = match opts.stage {
        Stage::Instantiate => quote!(#krate::Stage::Instantiate),
        Stage::Prepare => quote!(#krate::Stage::Prepare),
        Stage::Initialize => quote!(#krate::Stage::Initialize),
        Stage::Execute => quote!(#krate::Stage::Execute),
        Stage::Record => quote!(#krate::Stage::Record),
    };
    let platform = if host { quote!(#krate::Platform::Host) } else { quote!(#krate::Platform::Device) };

    let (ret_ty, ret_span) = match &f.sig.output {
        ReturnType::Default => (quote!(()), f.sig.ident.span()),
        ReturnType::Type(_, t) => {
            let mut t = (**t).clone();
            EraseLifetimes.visit_type_mut(&mut t);
            (quote!(#t), t.span())
        }
    };
    if opts.stage == Stage::Instantiate && matches!(f.sig.output, ReturnType::Default) {
        return Err(Error::new(
            f.sig.paren_token.span.close(),
            "an instantiate handler returns the state it creates: `-> xla_ffi::Result<MyState>`",
        ));
    }

    let tys: Vec<&Type> = params.iter().map(|p| &p.ty).collect();
    let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
    let vars: Vec<Ident> = (0..params.len()).map(|i| format_ident!("__xla_ffi_p{}", i)).collect();
    let decodes: Vec<TokenStream2> = params
        .iter()
        .zip(&vars)
        .map(|(p, v)| {
            let (ty, name) = (&p.ty, &p.name);
            quote_spanned! {p.span=> let #v = <#ty as #krate::Decode<'_>>::decode(__call, #name); }
        })
        .collect();
    let decodes_again = decodes.clone();
    let all_names = quote!(&[ #(#names),* ]);
    let decl = declaration(&opts, &params)?;
    let has_rules = opts.shapes.is_some() || opts.dtypes.is_some() || matches!(opts.target, Target::Op(_));
    let arity = arity(krate, &params);
    // Elementwise rules written in the attribute ("...b, ...b -> ...b", "T, T -> T"),
    // found so here with the parser the runtime uses: the shim compares what decoding
    // read without asking for the parsed rules first.
    let elementwise = match (&opts.shapes, &opts.dtypes) {
        (Some((_, s)), Some((_, d)))
            if s.all_same()
                && d.all_same()
                && (s.optional_operands, s.optional_results, d.optional_operands, d.optional_results)
                    == (0, 0, 0, 0) =>
        {
            Some((s.operands.len(), s.results.len()))
        }
        _ => None,
    };
    let check_call = match elementwise {
        Some((n, m)) => quote!(__call.check_elementwise_rules((#n, #m), &__XLA_FFI_DECL, &__XLA_FFI_RULES)?;),
        None => quote!(__call.check_rules(&__XLA_FFI_DECL, &__XLA_FFI_RULES)?;),
    };
    let check_rules = if has_rules {
        quote! {
            // The rules are parsed on the first call only (they were checked at compile time).
            static __XLA_FFI_RULES: ::std::sync::OnceLock<
                ::core::result::Result<#krate::decl::Rules, ::std::string::String>,
            > = ::std::sync::OnceLock::new();
            if __XLA_FFI_DECL.shapes.is_some() || __XLA_FFI_DECL.dtypes.is_some() {
                #check_call
            }
        }
    } else {
        quote!()
    };
    // `'static` for every lifetime: the description is a `static` item.
    let stys: Vec<Type> = tys
        .iter()
        .map(|t| {
            let mut t = (*t).clone();
            StaticLifetimes.visit_type_mut(&mut t);
            t
        })
        .collect();
    // The declared operand and result counts, as constants: `finish` runs its
    // once-per-call overlap pass on them (unrolled) when the call has them.
    let declared = quote! {
        (0usize #(+ <#stys as #krate::Decode<'static>>::ARGS)*, 0usize #(+ <#stys as #krate::Decode<'static>>::RETS)*)
    };
    let run = quote! {
        #(#decodes)*
        __call.finish_declared(#declared)?;
        #check_rules
        // One `let else` per parameter, not a match on a tuple of them: building the
        // tuple would copy every decoded view once more on each call.
        #(
            let ::core::option::Option::Some(#vars) = #vars else {
                return ::core::result::Result::Err(#krate::__private::undecoded(__call.target(), #all_names));
            };
        )*
        #krate::__private::HandlerReturn::into_result(#fn_name( #(#vars),* ))
    };
    let state_type_id = stages::state_type_id(krate, opts.stage, &ret_ty, &tys);
    let state_checks = stages::state_checks(krate, &stage, &params);
    let info = quote! {
        #krate::__private::HandlerInfo {
            target: #target,
            host: #host,
            stage: #stage,
            traits: #traits,
            n_args: 0 #(+ <#stys as #krate::Decode<'static>>::ARGS)*,
            n_rets: 0 #(+ <#stys as #krate::Decode<'static>>::RETS)*,
            variadic_args: false #(|| <#stys as #krate::Decode<'static>>::VARIADIC_ARGS)*,
            variadic_rets: false #(|| <#stys as #krate::Decode<'static>>::VARIADIC_RETS)*,
            arity: __XLA_FFI_ARITY,
            state_type_id: __xla_ffi_state_type_id,
            attr_names: __xla_ffi_attr_names,
        }
    };
    let body = match opts.stage {
        Stage::Instantiate | Stage::Prepare | Stage::Initialize => stages::stage_body(krate, opts.stage, &run),
        _ => {
            let check = quote_spanned! {ret_span=> #krate::__private::assert_execute_return::<#ret_ty>(); };
            match &opts.asynchronous {
                None => quote! {
                    #check
                    #krate::__private::dispatch(__frame, &__XLA_FFI_INFO, |__call| { #run })
                },
                Some(a) => {
                    let decode_only = quote! {
                        #(#decodes_again)*
                        __call.finish_declared(#declared)?;
                        #check_rules
                    };
                    let body = async_handler::shim_body(krate, a, &info, &decode_only, &run);
                    quote! {
                        #check
                        #body
                    }
                }
            }
        }
    };
    let context_checks = match &opts.asynchronous {
        Some(_) => async_handler::context_checks(krate, &params),
        None => quote!(),
    };
    let doc = format!(
        "The descriptor of the handler [`{fn_str}`]: {}, exported as the C symbol `{}`.",
        opts.target.describe(),
        symbol.value()
    );
    // The shim is the function's one caller in production: let the optimizer inline
    // it there (as a body pasted into the shim would be), unless the user chose.
    let inline = if f.attrs.iter().any(|a| a.path().is_ident("inline")) { quote!() } else { quote!(#[inline]) };
    // `#[handler]` on an associated function (inside an `impl` or a trait) cannot
    // work: the exported shim is a free function and cannot name `Self::f`. This
    // `use` is fine beside a free function (in a module or a block) and refused in
    // an `impl` ("`use` import is not supported in `trait`s or `impl`s", pointing at
    // the attribute) before any name is resolved, instead of "cannot find function".
    let free_fn_check = quote! {
        #[allow(unused_imports)]
        use #krate as _;
    };
    Ok(quote! {
        #free_fn_check

        // A handler's parameters are its operands, results and attributes: many is normal.
        #[allow(clippy::too_many_arguments)]
        #inline
        #f

        #[doc = #doc]
        #[allow(non_upper_case_globals)]
        #vis const #desc: #krate::HandlerDescriptor = {
            #unsafe_marker
            #decl
            #arity
            #context_checks
            #state_checks
            fn __xla_ffi_state_type_id() -> ::core::primitive::i64 {
                #state_type_id
            }
            fn __xla_ffi_attr_names(__each: &mut dyn ::core::ops::FnMut(&'static ::core::primitive::str)) {
                #( <#tys as #krate::Decode<'_>>::declared_attrs(#names, __each); )*
            }
            #[unsafe(export_name = #symbol)]
            unsafe extern "C" fn __xla_ffi_shim(
                __frame: *mut #krate::sys::XLA_FFI_CallFrame,
            ) -> *mut #krate::sys::XLA_FFI_Error {
                // One description per handler, in static memory: nothing built per call.
                static __XLA_FFI_INFO: #krate::__private::HandlerInfo = #info;
                // SAFETY: XLA calls this symbol with its call frame; `dispatch` checks
                // the frame before reading it and catches panics.
                unsafe { #body }
            }
            // SAFETY: the shim is this macro's: it checks the frame, returns null or an
            // error made by the frame's API, and catches every panic (`dispatch`).
            #krate::HandlerDescriptor::__new(#target, #stage, #platform, #traits, #symbol, unsafe {
                #krate::Handler::from_raw(__xla_ffi_shim)
            }, &__XLA_FFI_DECL)
        };
    })
}

/// The `__XLA_FFI_ARITY` const (what each parameter takes from the frame, for the
/// count checks), and the compile-time checks of optional operands and results:
/// trailing only, not beside `RemainingArgs`/`RemainingRets`; no operand after a
/// `RemainingArgs`, no result after a `RemainingRets` (the rules' `?` marks are
/// checked in [`declaration`]).
fn arity(krate: &syn::Path, params: &[Param]) -> TokenStream2 {
    let mut entries = Vec::new();
    let mut checks = Vec::new();
    for p in params {
        let mut t = p.ty.clone();
        StaticLifetimes.visit_type_mut(&mut t);
        let name = &p.name;
        let d = quote!(<#t as #krate::Decode<'static>>);
        entries.push(quote! {
            #krate::__private::Arity {
                name: #name,
                args: #d::ARGS,
                rets: #d::RETS,
                optional_args: #d::OPTIONAL_ARGS,
                optional_rets: #d::OPTIONAL_RETS,
            }
        });
        let order = |what: &str, rest: &str| {
            format!(
                "parameter `{name}`: optional {what}s must come last: after an optional {what} every {what} must be \
                 optional, and `{rest}` cannot share a handler with optional {what}s"
            )
        };
        let (args_msg, rets_msg) = (order("operand", "RemainingArgs"), order("result", "RemainingRets"));
        // `RemainingArgs` takes every operand left, so one declared after it would
        // be missing from every call.
        let after = |what: &str, rest: &str| {
            format!(
                "parameter `{name}`: no {what} can follow `{rest}`, which takes every {what} left; declare `{name}` \
                 before it"
            )
        };
        let (args_after, rets_after) = (after("operand", "RemainingArgs"), after("result", "RemainingRets"));
        checks.push(quote_spanned! {p.span=>
            {
                let (a, oa, va) = (#d::ARGS, #d::OPTIONAL_ARGS, #d::VARIADIC_ARGS);
                if (opt_args && (a > oa || va)) || (var_args && oa > 0) {
                    ::core::panic!(#args_msg);
                }
                if var_args && (a > 0 || va) {
                    ::core::panic!(#args_after);
                }
                let (r, or, vr) = (#d::RETS, #d::OPTIONAL_RETS, #d::VARIADIC_RETS);
                if (opt_rets && (r > or || vr)) || (var_rets && or > 0) {
                    ::core::panic!(#rets_msg);
                }
                if var_rets && (r > 0 || vr) {
                    ::core::panic!(#rets_after);
                }
                opt_args |= oa > 0;
                var_args |= va;
                opt_rets |= or > 0;
                var_rets |= vr;
            }
        });
    }
    quote! {
        const __XLA_FFI_ARITY: &[#krate::__private::Arity] = &[ #(#entries),* ];
        #[allow(unused_assignments, unused_mut, unused_variables)]
        const _: () = {
            let (mut opt_args, mut var_args, mut opt_rets, mut var_rets) = (false, false, false, false);
            #(#checks)*
        };
    }
}

/// The `__XLA_FFI_DECL` const (an `xla_ffi::Declaration`) and the compile-time checks
/// of the rules against the parameters: spec counts against the buffer parameters,
/// `linear` names against the operands.
fn declaration(opts: &Options, params: &[Param]) -> syn::Result<TokenStream2> {
    let krate = &opts.krate;
    let target = opts.target.tokens();
    let all_names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
    let scratch: Vec<&str> = opts.scratch.iter().flat_map(|(_, l)| l).map(|n| n.as_str()).collect();
    if let Some((lit, _)) = &opts.scratch {
        for n in &scratch {
            if !all_names.contains(n) {
                return Err(Error::new(
                    lit.span(),
                    format!(
                        "`scratch` names `{n}`, which is not a parameter; the parameters are {}",
                        all_names.join(", ")
                    ),
                ));
            }
        }
    }
    // The declared parameters: all but the scratch results.
    let declared: Vec<&Param> = params.iter().filter(|p| !scratch.contains(&p.name.as_str())).collect();
    let names: Vec<&str> = declared.iter().map(|p| p.name.as_str()).collect();
    let stys: Vec<Type> = declared
        .iter()
        .map(|p| {
            let mut t = p.ty.clone();
            StaticLifetimes.visit_type_mut(&mut t);
            t
        })
        .collect();
    let opt = |s: Option<&LitStr>| match s {
        Some(s) => quote!(::core::option::Option::Some(#s)),
        None => quote!(::core::option::Option::None),
    };
    let linear: Vec<&String> = opts.linear.iter().flat_map(|(_, l)| l).collect();
    let (shapes, dtypes, transpose, linear, reference) = match &opts.target {
        Target::Own(_) => (
            opt(opts.shapes.as_ref().map(|(s, _)| s)),
            opt(opts.dtypes.as_ref().map(|(s, _)| s)),
            opt(opts.transpose.as_ref()),
            quote!(&[ #(#linear),* ]),
            quote!(),
        ),
        Target::Op(path) => (
            quote!(__XLA_FFI_REF.shapes),
            quote!(__XLA_FFI_REF.dtypes),
            quote!(__XLA_FFI_REF.transpose),
            quote!(__XLA_FFI_REF.linear),
            op_checks(krate, path, params, &declared, &scratch, opts.scratch.as_ref().map(|(l, _)| l.span())),
        ),
    };
    let mut checks = Vec::new();
    let n_args = quote!(0usize #(+ <#stys as #krate::Decode<'static>>::ARGS)*);
    let mut count_check = |lit: &LitStr, what: &str, n_ops: usize, n_res: usize, opt: (usize, usize)| {
        let msg = format!(
            "the {what} rule `{}` has {n_ops} operand and {n_res} result entries: the handler must take exactly \
             {n_ops} operand{} (`Buffer` parameters) and {n_res} result{} (`ResultBuffer` parameters)",
            lit.value(),
            if n_ops == 1 { "" } else { "s" },
            if n_res == 1 { "" } else { "s" },
        );
        let only = format!(
            "the {what} rule `{}` needs every operand to be a `Buffer` parameter (not `RemainingArgs` or a custom decoder)",
            lit.value()
        );
        let (oa, or) = opt;
        let marks = format!(
            "the {what} rule `{}` marks {oa} operand{} and {or} result{} optional (`?`): the handler must have as \
             many optional operands (`Option<Buffer>` parameters) and results (`Option<ResultBuffer>` parameters), \
             in the same places",
            lit.value(),
            if oa == 1 { "" } else { "s" },
            if or == 1 { "" } else { "s" },
        );
        checks.push(quote_spanned! {lit.span()=>
            const _: () = {
                if #krate::Declaration::__count(__XLA_FFI_PARAMS, 0) != #n_ops
                    || #krate::Declaration::__count(__XLA_FFI_PARAMS, 1) != #n_res
                {
                    ::core::panic!(#msg);
                }
                if #n_args != #n_ops {
                    ::core::panic!(#only);
                }
                if #krate::Declaration::__count_optional(__XLA_FFI_PARAMS, 0) != #oa
                    || #krate::Declaration::__count_optional(__XLA_FFI_PARAMS, 1) != #or
                {
                    ::core::panic!(#marks);
                }
            };
        });
    };
    if let Some((lit, rule)) = &opts.shapes {
        let opt = (rule.optional_operands, rule.optional_results);
        count_check(lit, "shape", rule.operands.len(), rule.results.len(), opt);
    }
    if let Some((lit, rule)) = &opts.dtypes {
        let opt = (rule.optional_operands, rule.optional_results);
        count_check(lit, "dtype", rule.operands.len(), rule.results.len(), opt);
    }
    // The rules against the parameter types: no rule that no call could satisfy.
    if let Some((lit, rule)) = &opts.shapes {
        checks.push(rule_types::shape_checks(krate, lit, rule, &declared));
    }
    if let Some((lit, rule)) = &opts.dtypes {
        checks.push(rule_types::dtype_checks(krate, lit, rule, &declared));
    }
    if opts.shapes.is_some() || opts.dtypes.is_some() {
        checks.push(quote! {
            const __XLA_FFI_BOUNDS: &[#krate::decl::BufferBounds] =
                &[ #( <#stys as #krate::Decode<'static>>::BUFFER ),* ];
        });
    }
    if let Some((lit, list)) = &opts.linear {
        for n in list {
            if !names.contains(&n.as_str()) {
                return Err(Error::new(
                    lit.span(),
                    format!("`linear` names `{n}`, which is not a parameter; the parameters are {}", names.join(", ")),
                ));
            }
            let msg = format!("`linear` names `{n}`, which is not an operand (a `Buffer` parameter)");
            checks.push(quote_spanned! {lit.span()=>
                const _: () = {
                    if !#krate::Declaration::__is_operand(__XLA_FFI_PARAMS, #n) {
                        ::core::panic!(#msg);
                    }
                };
            });
        }
    }
    Ok(quote! {
        const __XLA_FFI_PARAMS: &[(&::core::primitive::str, #krate::decl::ParamDecl)] =
            &[ #( (#names, <#stys as #krate::Decode<'static>>::DECL) ),* ];
        const __XLA_FFI_DECL: #krate::Declaration = #krate::Declaration {
            target: #target,
            params: __XLA_FFI_PARAMS,
            shapes: #shapes,
            dtypes: #dtypes,
            linear: #linear,
            transpose: #transpose,
        };
        #reference
        #(#checks)*
    })
}

/// For `op = PATH`: the `__XLA_FFI_REF` const (the declaration at `PATH`) and the
/// compile-time checks that this handler's operands, results and attributes are
/// that declaration's, same names in the same order, and that the `scratch`
/// results are trailing results. The referenced rules were checked against the
/// referenced handler's parameters when it compiled, so they fit these too.
fn op_checks(
    krate: &syn::Path,
    path: &syn::Path,
    all: &[Param],
    declared: &[&Param],
    scratch: &[&str],
    scratch_span: Option<Span>,
) -> TokenStream2 {
    let op = quote!(#path).to_string().replace(' ', "");
    let names: Vec<&str> = declared.iter().map(|p| p.name.as_str()).collect();
    let list = names.join(", ");
    let counts = ["operands (`Buffer` parameters)", "results (`ResultBuffer` parameters)", "attributes"]
        .iter()
        .enumerate()
        .map(|(k, what)| {
            let k = k as u8;
            let msg = format!(
                "`op = {op}`: this handler and the declaration it refers to have different numbers of {what}; \
                 the parameters here are ({list}){}: they must be the referenced handler's, same names in the \
                 same order",
                if scratch.is_empty() { String::new() } else { format!(" besides the scratch ({})", scratch.join(", ")) },
            );
            let opt_msg = format!(
                "`op = {op}`: this handler and the declaration it refers to have different numbers of optional \
                 {what}: an `Option<..>` parameter here must be one there, and the other way round"
            );
            quote_spanned! {path.span()=>
                if #krate::Declaration::__count(__XLA_FFI_PARAMS, #k) != #krate::Declaration::__count(__XLA_FFI_REF.params, #k) {
                    ::core::panic!(#msg);
                }
                if #krate::Declaration::__count_optional(__XLA_FFI_PARAMS, #k)
                    != #krate::Declaration::__count_optional(__XLA_FFI_REF.params, #k)
                {
                    ::core::panic!(#opt_msg);
                }
            }
        });
    let places = declared.iter().enumerate().map(|(i, p)| {
        let msg = format!(
            "`op = {op}`: parameter `{}` is not named like the parameter at its place in the declaration it \
             refers to: the operands, results and attributes must be the referenced handler's, same names in \
             the same order",
            p.name
        );
        quote_spanned! {p.span=>
            if !#krate::Declaration::__same_place(__XLA_FFI_PARAMS, __XLA_FFI_REF.params, #i) {
                ::core::panic!(#msg);
            }
        }
    });
    // Every scratch name is a result, and no declared result follows the first one.
    let all_stys: Vec<Type> = all
        .iter()
        .map(|p| {
            let mut t = p.ty.clone();
            StaticLifetimes.visit_type_mut(&mut t);
            t
        })
        .collect();
    let all_names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
    let first = all.iter().position(|p| scratch.contains(&p.name.as_str()));
    let scratch_checks = scratch.iter().map(|n| {
        let msg = format!("`scratch` names `{n}`, which is not a result (a `ResultBuffer` parameter)");
        quote_spanned! {scratch_span.unwrap_or_else(|| path.span())=>
            if #krate::Declaration::__kind_of(__XLA_FFI_ALL_PARAMS, #n) != 1 {
                ::core::panic!(#msg);
            }
        }
    });
    let trailing = all
        .iter()
        .enumerate()
        .filter(|(i, p)| first.is_some_and(|f| *i > f) && !scratch.contains(&p.name.as_str()))
        .map(|(_, p)| {
            let n = &p.name;
            let msg = format!(
                "result `{n}` follows a scratch result: the results named in `scratch` must come after all the others"
            );
            quote_spanned! {p.span=>
                if #krate::Declaration::__kind_of(__XLA_FFI_ALL_PARAMS, #n) == 1 {
                    ::core::panic!(#msg);
                }
            }
        });
    let all_params = if scratch.is_empty() {
        quote!()
    } else {
        quote! {
            const __XLA_FFI_ALL_PARAMS: &[(&::core::primitive::str, #krate::decl::ParamDecl)] =
                &[ #( (#all_names, <#all_stys as #krate::Decode<'static>>::DECL) ),* ];
        }
    };
    let n_args = quote!(0usize #(+ <#all_stys as #krate::Decode<'static>>::ARGS)*);
    let n_rets = quote!(0usize #(+ <#all_stys as #krate::Decode<'static>>::RETS)*);
    let n_scratch = scratch.len();
    let only = format!(
        "`op = {op}`: every operand and result must be a `Buffer` or `ResultBuffer` parameter (not \
         `RemainingArgs` or a custom decoder), as the declared rules say which buffer is which"
    );
    quote! {
        const __XLA_FFI_REF: &#krate::Declaration = #path.declaration;
        #all_params
        const _: () = {
            #(#counts)*
            #(#places)*
            #(#scratch_checks)*
            #(#trailing)*
            if #n_args != #krate::Declaration::__count(__XLA_FFI_PARAMS, 0)
                || #n_rets != #krate::Declaration::__count(__XLA_FFI_PARAMS, 1) + #n_scratch
            {
                ::core::panic!(#only);
            }
        };
    }
}
