//! `#[derive(AttrEnum)]`: a fieldless enum decoded from an integer or string attribute.
//! The code it generates only names the variants and calls `xla_ffi::__private::enum_index`,
//! which does the decoding (and the messages) at run time.

use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Error, Fields, LitStr};

pub fn expand(input: DeriveInput) -> syn::Result<TokenStream2> {
    let mut krate: syn::Path = syn::parse_quote!(::xla_ffi);
    for a in &input.attrs {
        if a.path().is_ident("attr_enum") {
            a.parse_nested_meta(|m| {
                if m.path.is_ident("crate") {
                    let s: LitStr = m.value()?.parse()?;
                    krate = s.parse()?;
                    Ok(())
                } else {
                    Err(m.error("`attr_enum` takes one option: #[attr_enum(crate = \"path\")]"))
                }
            })?;
        }
    }
    let name = &input.ident;
    let Data::Enum(data) = &input.data else {
        return Err(Error::new(
            name.span(),
            "AttrEnum goes on a fieldless enum (`enum Mode { Sum = 0, Max = 1 }`), not a struct or union",
        ));
    };
    if !input.generics.params.is_empty() {
        return Err(Error::new(input.generics.span(), "AttrEnum needs an enum without generic parameters"));
    }
    if data.variants.is_empty() {
        return Err(Error::new(
            name.span(),
            "AttrEnum needs at least one variant: an enum without variants has no value",
        ));
    }
    for v in &data.variants {
        if !matches!(v.fields, Fields::Unit) {
            return Err(Error::new(
                v.fields.span(),
                format!(
                    "AttrEnum needs a fieldless enum: variant `{}` has fields, and an attribute is one integer \
                     or string",
                    v.ident
                ),
            ));
        }
    }
    let idents: Vec<_> = data.variants.iter().map(|v| &v.ident).collect();
    let strs: Vec<String> = idents.iter().map(|i| i.to_string().trim_start_matches("r#").to_string()).collect();
    // The last variant takes the `_` arm: `enum_index` returns an index below the
    // number of variants, and this way the match needs no unreachable arm.
    let idx = 0..idents.len() - 1;
    let (head, last) = idents.split_at(idents.len() - 1);
    let last = last[0];
    let enum_name = name.to_string();
    Ok(quote! {
        impl<'f> #krate::FromAttr<'f> for #name {
            fn expected() -> #krate::__private::String {
                #krate::__private::enum_expected(#enum_name, &[ #( (#strs, #name::#idents as ::core::primitive::i128) ),* ])
            }
            fn type_name() -> #krate::__private::String {
                #krate::__private::String::from("i64")
            }
            fn enum_values() -> ::core::option::Option<#krate::EnumValues> {
                const VARIANTS: &[(&::core::primitive::str, ::core::primitive::i128)] =
                    &[ #( (#strs, #name::#idents as ::core::primitive::i128) ),* ];
                ::core::option::Option::Some(#krate::EnumValues { name: #enum_name, variants: VARIANTS })
            }
            fn from_attr(
                value: &#krate::AttrValue<'f>,
            ) -> ::core::result::Result<Self, #krate::__private::String> {
                const VARIANTS: &[(&::core::primitive::str, ::core::primitive::i128)] =
                    &[ #( (#strs, #name::#idents as ::core::primitive::i128) ),* ];
                match #krate::__private::enum_index(#enum_name, VARIANTS, value)? {
                    #( #idx => ::core::result::Result::Ok(#name::#head), )*
                    _ => ::core::result::Result::Ok(#name::#last),
                }
            }
        }
    })
}
