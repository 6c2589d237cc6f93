//! `#[handler(async)]` and `#[handler(async = spawner)]`: the handler function runs
//! later, on a thread the spawner chooses, and completes the call through XLA's
//! future (`xla_ffi::AsyncCall`). Only the parsing of the option and the generated
//! shim body live here; `lib.rs` calls in.

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Error, Expr, Meta};

use crate::signature::Param;

/// The `async` option: `None` for the default spawner (a thread per call), or the
/// spawner expression (`FnOnce(xla_ffi::AsyncCall)`).
pub(crate) struct AsyncOption {
    pub(crate) spawner: Option<Expr>,
    pub(crate) span: Span,
}

/// The name `async` gets before the options are parsed: `async` is a keyword, which
/// `syn::Meta` does not take as an option name.
const RENAMED: &str = "__xla_ffi_async";

/// Renames each top-level `async` of the options to [`RENAMED`] (same span).
pub(crate) fn rename_keyword(args: TokenStream2) -> TokenStream2 {
    args.into_iter()
        .map(|t| match t {
            proc_macro2::TokenTree::Ident(i) if i == "async" => {
                proc_macro2::TokenTree::Ident(proc_macro2::Ident::new(RENAMED, i.span()))
            }
            other => other,
        })
        .collect()
}

/// Parses `async` (a path) or `async = spawner`; `Ok(None)` when `meta` is another
/// option.
pub(crate) fn parse(meta: &Meta) -> syn::Result<Option<AsyncOption>> {
    match meta {
        Meta::Path(p) if p.is_ident(RENAMED) => Ok(Some(AsyncOption { spawner: None, span: p.span() })),
        Meta::NameValue(nv) if nv.path.is_ident(RENAMED) => {
            Ok(Some(AsyncOption { spawner: Some(nv.value.clone()), span: nv.path.span() }))
        }
        Meta::List(l) if l.path.is_ident(RENAMED) => Err(Error::new(
            l.span(),
            "write `async` (a thread per call) or `async = spawner`, where `spawner: impl FnOnce(xla_ffi::AsyncCall)`",
        )),
        _ => Ok(None),
    }
}

/// Compile-time refusals of parameters that read XLA's context, which ends when the
/// handler call returns.
pub(crate) fn context_checks(krate: &syn::Path, params: &[Param]) -> TokenStream2 {
    let checks = params.iter().map(|p| {
        let ty = &p.ty;
        let msg = format!(
            "parameter `{}` reads XLA's execution context (Context, State, UserData), which ends when the handler \
             call returns: an async handler cannot take it",
            p.name
        );
        quote_spanned! {p.span=>
            const _: () = {
                if <#ty as #krate::Decode<'static>>::NEEDS_CONTEXT {
                    ::core::panic!(#msg);
                }
            };
        }
    });
    quote!( #(#checks)* )
}

/// The shim body of an async handler: `check` decodes and checks the parameters
/// (the synchronous part), `run` decodes them again and calls the function (in
/// `AsyncCall::run`).
pub(crate) fn shim_body(
    krate: &syn::Path,
    opt: &AsyncOption,
    info: &TokenStream2,
    check: &TokenStream2,
    run: &TokenStream2,
) -> TokenStream2 {
    // The spawner is called from a nested safe `fn`, never pasted into the shim's
    // `unsafe` block: an unsafe operation written in it needs its own `unsafe`, and
    // `#![forbid(unsafe_code)]` sees it.
    let spawn_call = match &opt.spawner {
        Some(e) => quote_spanned! {e.span()=> #krate::__private::spawn_with(__xla_ffi_async_call, #e) },
        None => quote!(#krate::spawn_thread(__xla_ffi_async_call)),
    };
    quote! {
        fn __xla_ffi_info() -> #krate::__private::HandlerInfo {
            #info
        }
        #[allow(unused_variables)]
        fn __xla_ffi_check(
            __call: &mut #krate::Call<'_>,
        ) -> ::core::result::Result<(), #krate::Error> {
            #check
            ::core::result::Result::Ok(())
        }
        fn __xla_ffi_spawn(__xla_ffi_async_call: #krate::AsyncCall) {
            #spawn_call
        }
        fn __xla_ffi_run(
            __call: &mut #krate::Call<'_>,
        ) -> ::core::result::Result<(), #krate::Error> {
            #run
        }
        #krate::__private::dispatch_async(
            __frame,
            &__XLA_FFI_INFO,
            __xla_ffi_info,
            __xla_ffi_check,
            __xla_ffi_run,
            __xla_ffi_spawn,
        )
    }
}
