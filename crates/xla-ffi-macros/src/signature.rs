//! The handler function's signature: what a handler may not be (unsafe, async,
//! const, generic, an associated function), its parameters (a plain name and a
//! concrete type each), and the lifetime rewrites the generated items need.

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::quote;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Error, FnArg, GenericParam, ItemFn, Pat, Type};

/// Replaces every lifetime in a parameter type by `'_`, so the shim can name the type
/// without the function's lifetime parameters.
pub(crate) struct EraseLifetimes;

impl VisitMut for EraseLifetimes {
    fn visit_lifetime_mut(&mut self, l: &mut syn::Lifetime) {
        *l = syn::Lifetime::new("'_", l.span());
    }
}

/// Replaces every lifetime in a parameter type by `'static`, for the declaration
/// const (where `'_` cannot be written).
pub(crate) struct StaticLifetimes;

impl VisitMut for StaticLifetimes {
    fn visit_lifetime_mut(&mut self, l: &mut syn::Lifetime) {
        *l = syn::Lifetime::new("'static", l.span());
    }
}

pub(crate) struct Param {
    pub(crate) name: String,
    pub(crate) ty: Type,
    pub(crate) span: Span,
    /// The type as written, for messages: `Buffer<'f, f64, 1>`.
    pub(crate) text: String,
}

pub(crate) fn check_signature(f: &ItemFn) -> syn::Result<()> {
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

pub(crate) fn params(f: &ItemFn) -> syn::Result<Vec<Param>> {
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
                let text = type_text(&pt.ty);
                let mut ty = (*pt.ty).clone();
                EraseLifetimes.visit_type_mut(&mut ty);
                out.push(Param { name, ty, span: pt.ty.span(), text });
            }
        }
    }
    Ok(out)
}

/// A parameter type as written, for messages: `Buffer<'f, f64, 1>`.
pub(crate) fn type_text(ty: &Type) -> String {
    let mut s = quote!(#ty).to_string();
    for (from, to) in [(" :: ", "::"), (":: ", "::"), (" <", "<"), ("< ", "<"), (" >", ">"), (" ,", ","), ("& ", "&")] {
        s = s.replace(from, to);
    }
    s
}
