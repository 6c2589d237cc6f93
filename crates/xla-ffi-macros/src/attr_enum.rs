//! `#[derive(AttrEnum)]`: a fieldless enum decoded from an integer or string attribute.
//! The code it generates only names the variants and calls `xla_ffi::__private::enum_index`,
//! which does the decoding (and the messages) at run time.
//!
//! An op's declaration types an enum attribute as `i64` (Python passes the variant's
//! integer as an int64), so every discriminant must fit in an `i64`: a literal one
//! that does not is refused here, and for every variant the derive emits a `const`
//! assertion, which also covers discriminants written as expressions (`1 << 63`,
//! `u64::MAX`, a `const`) and implicit ones (the previous variant's plus one).

use proc_macro2::TokenStream as TokenStream2;
use quote::{quote, quote_spanned};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Error, Expr, Fields, Lit, LitStr, Meta, Token, UnOp};

/// Whether the enum's `#[repr]` names an unsigned integer type (`u8` .. `u128`,
/// `usize`). Without one (or with a signed one, or `repr(C)`) discriminants are signed.
fn unsigned_repr(input: &DeriveInput) -> syn::Result<bool> {
    let mut unsigned = false;
    for a in &input.attrs {
        if a.path().is_ident("repr") {
            let list = a.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)?;
            for m in list {
                if let Meta::Path(p) = m {
                    if ["u8", "u16", "u32", "u64", "u128", "usize"].iter().any(|t| p.is_ident(t)) {
                        unsigned = true;
                    }
                }
            }
        }
    }
    Ok(unsigned)
}

/// The value of a discriminant written as an integer literal, or its negation;
/// `None` for any other expression (the `const` assertion checks those).
fn literal_value(e: &Expr) -> Option<i128> {
    match e {
        Expr::Lit(l) => match &l.lit {
            Lit::Int(i) => i.base10_parse::<u128>().ok().map(|v| i128::try_from(v).unwrap_or(i128::MAX)),
            _ => None,
        },
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => literal_value(&u.expr).map(|v| -v),
        Expr::Paren(p) => literal_value(&p.expr),
        Expr::Group(g) => literal_value(&g.expr),
        _ => None,
    }
}

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
    // Every discriminant fits in the declaration's `i64`.
    let unsigned = unsigned_repr(&input)?;
    let mut fits = Vec::new();
    for v in &data.variants {
        let ident = &v.ident;
        let written = match &v.discriminant {
            Some((_, e)) => {
                if let Some(value) = literal_value(e) {
                    if value > i128::from(i64::MAX) || value < i128::from(i64::MIN) {
                        return Err(Error::new_spanned(
                            e,
                            format!(
                                "AttrEnum `{name}`: variant `{ident}` has discriminant {value}, which does not fit in \
                                 an i64: the op's declaration types an enum attribute as i64 (Python passes the \
                                 variant's integer as an int64), so every discriminant must be in {}..={}",
                                i64::MIN,
                                i64::MAX
                            ),
                        ));
                    }
                }
                format!("`{}`", quote!(#e).to_string().replace(" :: ", "::"))
            }
            None => "the previous variant's plus one".to_string(),
        };
        let msg = format!(
            "AttrEnum `{name}`: the discriminant of variant `{ident}` ({written}) does not fit in an i64: the \
             op's declaration types an enum attribute as i64 (Python passes the variant's integer as an int64), so \
             every discriminant must be in i64::MIN..=i64::MAX"
        );
        // The variant's name: one token, so the whole of it is underlined (a span
        // over a whole expression needs `Span::join`, unstable in proc macros).
        let span = ident.span();
        let cond = if unsigned {
            quote!((#name::#ident as ::core::primitive::u128) <= (::core::primitive::i64::MAX as ::core::primitive::u128))
        } else {
            quote!({
                let __v = #name::#ident as ::core::primitive::i128;
                __v >= ::core::primitive::i64::MIN as ::core::primitive::i128
                    && __v <= ::core::primitive::i64::MAX as ::core::primitive::i128
            })
        };
        fits.push(quote_spanned! {span=>
            const _: () = if !(#cond) {
                ::core::panic!(#msg);
            };
        });
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
        #(#fits)*
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
