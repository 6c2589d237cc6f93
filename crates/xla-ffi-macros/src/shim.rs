//! The generated items of `#[handler]`: the function (unchanged), the descriptor
//! const and, inside it, the `extern "C"` shim that decodes the call frame, checks
//! the call against the declaration and calls the function.

use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Error, Ident, ItemFn, LitStr, ReturnType, Type};

use crate::declaration::{arity, declaration};
use crate::options::{parse_options, Stage, Target, SYMBOL_PREFIX};
use crate::signature::{check_signature, params, EraseLifetimes, StaticLifetimes};
use crate::{async_handler, stages};
use xla_ffi_rules::ShapeRule;

pub(crate) fn expand(args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
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
            "an instantiate handler returns the state it creates, `-> xla_ffi::Result<MyState>`, or `-> xla_ffi::Result<()>` to keep none",
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
    // Elementwise rules written in the attribute ("...b, ...b -> ...b" with "T, T -> T"
    // or no dtype rule), found so here with the parser the runtime uses: the shim
    // compares what decoding read without asking for the parsed rules first (buffers
    // alike in dtype and shape fit them; any other call takes the general check).
    let no_optional = |s: &ShapeRule| (s.optional_operands, s.optional_results) == (0, 0);
    let elementwise = match (&opts.shapes, &opts.dtypes) {
        (Some((_, s)), Some((_, d)))
            if s.all_same()
                && d.all_same()
                && no_optional(s)
                && (d.optional_operands, d.optional_results) == (0, 0) =>
        {
            Some((s.operands.len(), s.results.len()))
        }
        (Some((_, s)), None) if s.all_same() && no_optional(s) && !matches!(opts.target, Target::Op(_)) => {
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
        Stage::Instantiate | Stage::Prepare | Stage::Initialize => stages::stage_body(krate, &run),
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
