//! Derive macro for `oxmpi::Equivalence`.
//!
//! `#[derive(Equivalence)]` implements `oxmpi::Equivalence` for a `#[repr(C)]` (or
//! `#[repr(transparent)]`) struct whose fields all implement `Equivalence`. The generated
//! implementation packs and unpacks the struct field by field, so padding bytes are never read or
//! sent; it is marked contiguous (sent straight from memory, no copy) only when the layout has no
//! padding at all, which is checked at compile time with `offset_of!` and `size_of`.
//!
//! The macro rejects, with a compile error:
//! * structs without `#[repr(C)]` / `#[repr(transparent)]` (their field order and padding are
//!   unspecified, so the type map would not describe the memory);
//! * enums and unions (not every bit pattern is a valid value).
//!
//! Use it through the re-export `oxmpi::Equivalence` (the derive and the trait share the name).

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, ToTokens};
use syn::{parse_macro_input, parse_quote, Data, DeriveInput, Fields, Index};

/// Derives `oxmpi::Equivalence` for a `#[repr(C)]` struct whose fields are all `Equivalence`.
///
/// The struct must also be `Copy` (a supertrait of `Equivalence`).
#[proc_macro_derive(Equivalence)]
pub fn derive_equivalence(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Which `repr` hints the struct carries.
#[derive(Default)]
struct Repr {
    c: bool,
    transparent: bool,
}

fn parse_repr(input: &DeriveInput) -> syn::Result<Repr> {
    let mut repr = Repr::default();
    for attr in &input.attrs {
        if !attr.path().is_ident("repr") {
            continue;
        }
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("C") {
                repr.c = true;
            } else if meta.path.is_ident("transparent") {
                repr.transparent = true;
            } else if meta.input.peek(syn::token::Paren) {
                // `packed(N)`, `align(N)`: accepted, the layout checks below stay correct.
                let content;
                syn::parenthesized!(content in meta.input);
                let _: TokenStream2 = content.parse()?;
            }
            // Anything else (`packed`, integer reprs) is accepted here; the C check decides.
            Ok(())
        })?;
    }
    Ok(repr)
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let fields =
        match &input.data {
            Data::Struct(s) => &s.fields,
            Data::Enum(e) => return Err(syn::Error::new(
                e.enum_token.span,
                "#[derive(Equivalence)] supports only structs: an enum has invalid bit patterns",
            )),
            Data::Union(u) => {
                return Err(syn::Error::new(
                    u.union_token.span,
                    "#[derive(Equivalence)] supports only structs, not unions",
                ))
            }
        };
    let repr = parse_repr(input)?;
    if !(repr.c || repr.transparent) {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Equivalence)] requires #[repr(C)] (or #[repr(transparent)]) on the struct, \
             so that its memory layout is defined",
        ));
    }

    let name = &input.ident;
    let krate: syn::Path = parse_quote!(::oxmpi);
    let trait_path: syn::Path = parse_quote!(#krate::Equivalence);

    // Field accessors (`a` or `0`) and types.
    let members: Vec<TokenStream2> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| match &f.ident {
            Some(id) => id.to_token_stream(),
            None => Index {
                index: i as u32,
                span: Span::call_site(),
            }
            .to_token_stream(),
        })
        .collect();
    let types: Vec<&syn::Type> = fields.iter().map(|f| &f.ty).collect();

    // Bounds: every field type must be Equivalence (matters for generic structs).
    let mut generics = input.generics.clone();
    {
        let wc = generics.make_where_clause();
        for ty in &types {
            wc.predicates.push(parse_quote!(#ty: #trait_path));
        }
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();

    let packed_size = quote! { 0usize #( + <#types as #trait_path>::PACKED_SIZE )* };

    // Contiguous when every field is contiguous, sits right after the previous one, and the
    // struct has no trailing padding.
    let mut contiguous_checks = Vec::new();
    let mut running = quote! { 0usize };
    for (m, ty) in members.iter().zip(&types) {
        contiguous_checks.push(quote! {
            && <#ty as #trait_path>::CONTIGUOUS
            && ::core::mem::offset_of!(Self, #m) == (#running)
        });
        running = quote! { #running + <#ty as #trait_path>::PACKED_SIZE };
    }

    // pack: copy each field out (works for packed structs too) and pack it into its slot.
    let pack_stmts = members.iter().zip(&types).map(|(m, ty)| {
        quote! {
            let __n = <#ty as #trait_path>::PACKED_SIZE;
            <#ty as #trait_path>::pack(&{ self.#m }, &mut __out[__off..__off + __n]);
            __off += __n;
        }
    });

    let unpack_fields = members.iter().zip(&types).map(|(m, ty)| {
        quote! {
            #m: {
                let __n = <#ty as #trait_path>::PACKED_SIZE;
                let __v = <#ty as #trait_path>::unpack(&__bytes[__off..__off + __n]);
                __off += __n;
                __v
            }
        }
    });
    let unpack_body = match fields {
        Fields::Unit => quote! { let _ = __bytes; Self {} },
        _ => quote! {
            let mut __off = 0usize;
            Self { #( #unpack_fields, )* }
        },
    };
    let pack_body = match fields {
        Fields::Unit => quote! { let _ = __out; },
        _ => quote! {
            let mut __off = 0usize;
            #( #pack_stmts )*
            let _ = __off;
        },
    };

    Ok(quote! {
        // SAFETY: the struct has a defined layout (repr(C)/transparent, checked by the derive);
        // `pack`/`unpack` go field by field through the fields' own Equivalence impls, and
        // CONTIGUOUS is true only when all fields are contiguous and the layout has no padding,
        // so the struct's bytes are exactly its fields' bytes, each valid for any bit pattern.
        #[automatically_derived]
        unsafe impl #impl_generics #trait_path for #name #ty_generics #where_clause {
            const PACKED_SIZE: usize = #packed_size;
            const CONTIGUOUS: bool = true
                #( #contiguous_checks )*
                && ::core::mem::size_of::<Self>() == (#packed_size);

            #[inline]
            #[allow(unused_assignments, clippy::identity_op)]
            fn pack(&self, __out: &mut [u8]) {
                #pack_body
            }

            #[inline]
            #[allow(unused_assignments, clippy::identity_op)]
            fn unpack(__bytes: &[u8]) -> Self {
                #unpack_body
            }
        }
    })
}
