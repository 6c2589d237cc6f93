//! The declaration the macro emits: the `__XLA_FFI_ARITY` and `__XLA_FFI_DECL`
//! consts, the compile-time checks of the rules against the parameters, and for
//! `op = PATH` the checks that this handler has that declaration's names.

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Error, LitStr, Type};

use crate::options::{Options, Target};
use crate::rule_types;
use crate::signature::{Param, StaticLifetimes};

/// The `__XLA_FFI_ARITY` const (what each parameter takes from the frame, for the
/// count checks), and the compile-time checks of optional operands and results:
/// trailing only, not beside `RemainingArgs`/`RemainingRets`; no operand after a
/// `RemainingArgs`, no result after a `RemainingRets` (the rules' `?` marks are
/// checked in [`declaration`]).
pub(crate) fn arity(krate: &syn::Path, params: &[Param]) -> TokenStream2 {
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
pub(crate) fn declaration(opts: &Options, params: &[Param]) -> syn::Result<TokenStream2> {
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
