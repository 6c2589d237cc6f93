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
use proc_macro2::TokenStream as TokenStream2;

mod async_handler;
mod attr_enum;
mod declaration;
mod options;
mod rule_types;
mod shim;
mod signature;
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
    match shim::expand(args.into(), item.into()) {
        Ok(out) => out.into(),
        Err(e) => {
            // Keep the function, so a macro error does not cascade into "not found".
            let mut out = e.to_compile_error();
            out.extend(item2);
            out.into()
        }
    }
}
