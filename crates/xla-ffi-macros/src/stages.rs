//! What the macro generates that depends on the handler's stage: the body of a
//! handler at a stage that creates state (instantiate, prepare, initialize), the
//! state type id reported to XLA's metadata query, and the compile-time check that
//! every parameter reads only the state of an earlier stage.

use proc_macro2::TokenStream as TokenStream2;
use quote::{quote, quote_spanned};
use syn::Type;

use crate::options::Stage;
use crate::signature::Param;

/// The shim body of a handler at the instantiate, prepare or initialize stage:
/// what the function returns becomes that stage's state (`()` keeps none, as
/// `ffi.h`'s plain `Error` at any stage).
pub(crate) fn stage_body(krate: &syn::Path, run: &TokenStream2) -> TokenStream2 {
    quote! {
        #krate::__private::dispatch_stage(__frame, &__XLA_FFI_INFO, |__call| { #run })
    }
}

/// The state type id for XLA's metadata query: the state the handler creates, or
/// else the (last) state one of its parameters reads.
pub(crate) fn state_type_id(krate: &syn::Path, stage: Stage, ret_ty: &TokenStream2, tys: &[&Type]) -> TokenStream2 {
    let params = quote! {
        #( let __t = <#tys as #krate::Decode<'_>>::state_type_id(); if __t != 0 { __id = __t; } )*
    };
    match stage {
        Stage::Instantiate => quote! {
            <<#ret_ty as #krate::__private::HandlerReturn>::Output as #krate::__private::StageOutput>::state_type_id()
        },
        Stage::Prepare | Stage::Initialize => quote! {{
            let mut __id: ::core::primitive::i64 =
                <<#ret_ty as #krate::__private::HandlerReturn>::Output as #krate::__private::StageOutput>::state_type_id();
            if __id == 0 {
                #params
            }
            __id
        }},
        Stage::Execute | Stage::Record => quote! {{
            let mut __id: ::core::primitive::i64 = 0;
            #params
            __id
        }},
    }
}

/// One `const` check per parameter: the state it reads (if any) is created by a
/// stage that runs before the handler's (`Stage::reads_state_of`).
pub(crate) fn state_checks(krate: &syn::Path, stage: &TokenStream2, params: &[Param]) -> TokenStream2 {
    let checks = params.iter().map(|p| {
        let mut t = p.ty.clone();
        syn::visit_mut::VisitMut::visit_type_mut(&mut crate::signature::StaticLifetimes, &mut t);
        let msg = format!(
            "parameter `{}` reads the state of a stage that does not run before this handler's: a handler reads \
             only the state of an earlier stage (instantiate, then prepare, then initialize, then execute or \
             record); instantiate handlers read none",
            p.name
        );
        quote_spanned! {p.span=>
            const _: () = {
                if !#krate::__private::state_readable(<#t as #krate::Decode<'static>>::STATE_STAGE, #stage) {
                    ::core::panic!(#msg);
                }
            };
        }
    });
    quote!( #(#checks)* )
}
