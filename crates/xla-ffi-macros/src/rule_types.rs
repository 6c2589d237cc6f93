//! The compile-time check of a handler's declared rules against its own parameter
//! types: a rule that no call could satisfy (`dtypes = "float32 -> float32"` on a
//! `Buffer<f64>`, `shapes = "n m -> n m"` on a `Buffer<f64, 1>`, one variable `T` on a
//! `Buffer<f32>` and a `Buffer<f64>`) is an error on the rule.
//!
//! Which parameter is operand `j` or result `j`, what dtypes its element spec accepts
//! and what rank it has are known to the compiler, not to the macro (a type alias, a
//! user's `ElementSpec`, a `const` rank), so the macro emits `const` assertions that
//! read them: `Decode::BUFFER` of each parameter type, which carries
//! `ElementSpec::DTYPES` (`None` for a spec that lists none: then nothing is checked)
//! and the rank parameter (`ANY_RANK`: nothing checked). The messages are written
//! here, one per parameter that could be at the place, as a `const` panic cannot
//! format.

use proc_macro2::TokenStream as TokenStream2;
use quote::{quote, quote_spanned};
use syn::LitStr;

use xla_ffi_rules::{DtypeRule, Expr, ShapeRule, Tok, DTYPE_NAMES};

use crate::signature::Param;

/// `operand 0` / `result 1`.
fn place(side: u8, i: usize) -> String {
    format!("{} {i}", if side == 0 { "operand" } else { "result" })
}

/// Whether parameter `k` is at `(side, i)`: tokens for a `const` condition.
fn at(krate: &syn::Path, k: usize, (side, i): (u8, usize)) -> TokenStream2 {
    quote!(#krate::Declaration::__is_buffer_at(__XLA_FFI_PARAMS, #k, #side, #i))
}

/// The `const` checks of the dtype rule `lit` against the parameters `declared`
/// (the parameters of `__XLA_FFI_PARAMS`, in its order).
pub(crate) fn dtype_checks(krate: &syn::Path, lit: &LitStr, rule: &DtypeRule, declared: &[&Param]) -> TokenStream2 {
    let text = lit.value();
    let span = lit.span();
    let places: Vec<((u8, usize), &Expr)> = rule
        .operands
        .iter()
        .enumerate()
        .map(|(i, e)| ((0u8, i), e))
        .chain(rule.results.iter().enumerate().map(|(i, e)| ((1u8, i), e)))
        .collect();
    let mut checks = Vec::new();
    // A fixed dtype: the parameter at its place accepts it.
    for &(pl, e) in &places {
        let Expr::Dtype(d) = e else { continue };
        let dname = DTYPE_NAMES[*d];
        for (k, p) in declared.iter().enumerate() {
            let cond = at(krate, k, pl);
            let msg = format!(
                "dtype rule `{text}`: {} must be {dname}, got parameter `{}: {}`, which does not accept {dname}",
                place(pl.0, pl.1),
                p.name,
                p.text,
            );
            checks.push(quote_spanned! {span=>
                if #cond
                    && __XLA_FFI_BOUNDS[#k].dtype_mask() & (1u64 << #krate::decl::NOTATION_DTYPES[#d].0) == 0
                {
                    ::core::panic!(#msg);
                }
            });
        }
    }
    // A variable: the parameters at its bare places accept a dtype in common (two at
    // a time, for a message naming them; then all together).
    for (v, var) in rule.vars.iter().enumerate() {
        let at_var: Vec<(u8, usize)> = places.iter().filter(|(_, e)| **e == Expr::Var(v)).map(|(pl, _)| *pl).collect();
        if at_var.len() < 2 {
            continue;
        }
        let masks = declared.iter().enumerate().map(|(k, _)| {
            let conds = at_var.iter().map(|pl| at(krate, k, *pl));
            quote_spanned!(span=> if #(#conds)||* { __XLA_FFI_BOUNDS[#k].dtype_mask() } else { !0u64 })
        });
        let n = declared.len();
        let mut pairs = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                let (pa, pb) = (declared[a], declared[b]);
                let msg = format!(
                    "dtype rule `{text}`: `{}` and `{}` must have the one dtype `{var}`, got parameters `{}: {}` and \
                     `{}: {}`, which accept no dtype in common",
                    pa.name, pb.name, pa.name, pa.text, pb.name, pb.text,
                );
                pairs.push(quote_spanned! {span=>
                    if __m[#a] & __m[#b] == 0 {
                        ::core::panic!(#msg);
                    }
                });
            }
        }
        let mut list: Vec<String> = at_var.iter().map(|pl| place(pl.0, pl.1)).collect();
        let last = list.pop().unwrap_or_default();
        let all_msg = format!(
            "dtype rule `{text}`: {} and {last} must have the one dtype `{var}`, got parameter types that accept no \
             dtype in common",
            list.join(", "),
        );
        checks.push(quote_spanned! {span=>
            let __m: [::core::primitive::u64; #n] = [ #(#masks),* ];
            #(#pairs)*
            let mut __all = !0u64;
            let mut __k = 0;
            while __k < #n {
                __all &= __m[__k];
                __k += 1;
            }
            if __all == 0 {
                ::core::panic!(#all_msg);
            }
        });
    }
    wrap(lit, checks)
}

/// The `const` checks of the shape rule `lit` against the parameters `declared`: a
/// parameter of a fixed rank has the number of axes of the spec at its place (at
/// least the spec's other axes, for a spec with an ellipsis).
pub(crate) fn shape_checks(krate: &syn::Path, lit: &LitStr, rule: &ShapeRule, declared: &[&Param]) -> TokenStream2 {
    let text = lit.value();
    let span = lit.span();
    let specs = rule
        .operands
        .iter()
        .enumerate()
        .map(|(i, s)| ((0u8, i), s))
        .chain(rule.results.iter().enumerate().map(|(i, s)| ((1u8, i), s)));
    let mut checks = Vec::new();
    for (pl, spec) in specs {
        let ellipsis = spec.iter().any(|t| matches!(t, Tok::Ellipsis(_)));
        let axes = spec.iter().filter(|t| !matches!(t, Tok::Ellipsis(_))).count();
        let (want, other) = if ellipsis {
            (format!("rank {axes} or more"), format!("whose rank is below {axes}"))
        } else {
            (format!("rank {axes}"), format!("whose rank is not {axes}"))
        };
        for (k, p) in declared.iter().enumerate() {
            let cond = at(krate, k, pl);
            let msg = format!(
                "shape rule `{text}`: {} (`{}`) must be a buffer of {want}, got parameter `{}: {}`, {other}",
                place(pl.0, pl.1),
                rule.spec_text(spec),
                p.name,
                p.text,
            );
            checks.push(quote_spanned! {span=>
                if #cond && !__XLA_FFI_BOUNDS[#k].rank_fits(#axes, #ellipsis) {
                    ::core::panic!(#msg);
                }
            });
        }
    }
    wrap(lit, checks)
}

/// One `const` item holding the checks, its errors on the rule's literal.
fn wrap(lit: &LitStr, checks: Vec<TokenStream2>) -> TokenStream2 {
    if checks.is_empty() {
        return quote!();
    }
    quote_spanned! {lit.span()=>
        const _: () = {
            #(#checks)*
        };
    }
}
