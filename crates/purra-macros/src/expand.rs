//! The expansion of `#[handlers]`: the `impl` block as written (without the `#[tool]` and
//! `#[prompt]` markers) plus an `impl purra_protocol::Handlers` whose `register` adds one typed
//! tool or prompt per marked method.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, FnArg, GenericArgument, ImplItem, ImplItemFn, ItemImpl, Lit, LitBool, LitStr,
    Pat, PathArguments, ReturnType, Type,
};

/// What a marked method becomes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tool,
    Prompt,
}

impl Kind {
    fn marker(self) -> &'static str {
        match self {
            Kind::Tool => "#[tool]",
            Kind::Prompt => "#[prompt]",
        }
    }
}

/// The options of one marker.
#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    title: Option<LitStr>,
    description: Option<LitStr>,
    /// Annotation hints: `(setter, value)`.
    hints: Vec<(&'static str, LitBool)>,
    /// `idempotent` (true): the tool honours idempotency keys (`ToolDef::idempotent`).
    idempotent: bool,
}

const TOOL_OPTIONS: &str =
    "name, title, description, read_only, destructive, idempotent, open_world";
const PROMPT_OPTIONS: &str = "name, title, description";

pub(crate) fn handlers(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    if !attr.is_empty() {
        return Err(syn::Error::new_spanned(
            attr,
            "`#[handlers]` takes no arguments; options go on each `#[tool(...)]` or `#[prompt(...)]`",
        ));
    }
    let mut block: ItemImpl = syn::parse2(item).map_err(|e| {
        syn::Error::new(
            e.span(),
            "`#[handlers]` goes on an `impl` block: `#[purra_protocol::handlers] impl MyServer { ... }`",
        )
    })?;
    if let Some((_, path, _)) = &block.trait_ {
        return Err(syn::Error::new_spanned(
            path,
            "`#[handlers]` goes on an inherent `impl` block (`impl MyServer`), not on a trait impl",
        ));
    }
    let mut registrations = Vec::new();
    for item in &mut block.items {
        let ImplItem::Fn(method) = item else {
            continue;
        };
        if let Some((kind, options)) = take_marker(method)? {
            registrations.push(registration(kind, options, method)?);
        }
    }
    if registrations.is_empty() {
        return Err(syn::Error::new_spanned(
            &block.self_ty,
            "`#[handlers]` found no `#[tool]` or `#[prompt]` method in this `impl` block",
        ));
    }
    let self_ty = &block.self_ty;
    let (impl_generics, _, where_clause) = block.generics.split_for_impl();
    Ok(quote! {
        #block

        impl #impl_generics ::purra_protocol::Handlers for #self_ty #where_clause {
            fn register(
                self: ::std::sync::Arc<Self>,
                server: &::purra_protocol::Server,
            ) -> ::std::result::Result<(), ::purra_protocol::RegistrationError> {
                #(#registrations)*
                ::std::result::Result::Ok(())
            }
        }
    })
}

/// Removes the method's `#[tool]`/`#[prompt]` marker and reads its options.
fn take_marker(method: &mut ImplItemFn) -> syn::Result<Option<(Kind, Options)>> {
    let mut found: Option<(Kind, Attribute)> = None;
    let mut kept = Vec::new();
    for attr in std::mem::take(&mut method.attrs) {
        let kind = if attr.path().is_ident("tool") {
            Kind::Tool
        } else if attr.path().is_ident("prompt") {
            Kind::Prompt
        } else {
            kept.push(attr);
            continue;
        };
        if found.is_some() {
            return Err(syn::Error::new_spanned(
                attr,
                "a method is one tool or one prompt: only one `#[tool]` or `#[prompt]` per method",
            ));
        }
        found = Some((kind, attr));
    }
    method.attrs = kept;
    let Some((kind, attr)) = found else {
        return Ok(None);
    };
    let mut options = Options::default();
    if matches!(attr.meta, syn::Meta::Path(_)) {
        return Ok(Some((kind, options)));
    }
    attr.parse_nested_meta(|meta| {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        match (kind, key.as_str()) {
            (_, "name") => options.name = Some(meta.value()?.parse()?),
            (_, "title") => options.title = Some(meta.value()?.parse()?),
            (_, "description") => options.description = Some(meta.value()?.parse()?),
            (Kind::Tool, "read_only" | "destructive" | "idempotent" | "open_world") => {
                let value = if meta.input.peek(syn::Token![=]) {
                    meta.value()?.parse()?
                } else {
                    LitBool::new(true, meta.path.span())
                };
                if key == "idempotent" {
                    options.idempotent = value.value;
                }
                let setter = match key.as_str() {
                    "read_only" => "with_read_only",
                    "destructive" => "with_destructive",
                    "idempotent" => "with_idempotent",
                    _ => "with_open_world",
                };
                options.hints.push((setter, value));
            }
            _ => {
                let expected = match kind {
                    Kind::Tool => TOOL_OPTIONS,
                    Kind::Prompt => PROMPT_OPTIONS,
                };
                return Err(meta.error(format!(
                    "unknown `{}` option `{key}`: expected {expected}",
                    kind.marker()
                )));
            }
        }
        Ok(())
    })?;
    Ok(Some((kind, options)))
}

/// The description from the doc comment: lines joined, one leading space each removed.
fn doc_text(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(syn::ExprLit {
                    lit: Lit::Str(s), ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|l| l.strip_prefix(' ').unwrap_or(&l).trim_end().to_owned())
        .collect();
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The last segment of a type's path, and its single generic argument if it has one.
fn last_segment(ty: &Type) -> Option<(String, Option<&Type>)> {
    let Type::Path(p) = ty else {
        return None;
    };
    let seg = p.path.segments.last()?;
    let arg = match &seg.arguments {
        PathArguments::AngleBracketed(a) if a.args.len() == 1 => match a.args.first() {
            Some(GenericArgument::Type(t)) => Some(t),
            _ => None,
        },
        _ => None,
    };
    Some((seg.ident.to_string(), arg))
}

/// How one parameter reaches the method.
enum Param {
    /// One argument: a field of the generated arguments struct.
    Field(syn::Ident, Box<Type>),
    /// The request context.
    Ctx,
    /// All arguments as one type.
    Args(Box<Type>),
}

fn registration(kind: Kind, options: Options, method: &ImplItemFn) -> syn::Result<TokenStream> {
    let sig = &method.sig;
    let marker = kind.marker();
    match sig.receiver() {
        Some(r) if r.reference.is_some() && r.mutability.is_none() => {}
        Some(r) if r.mutability.is_some() => {
            return Err(syn::Error::new_spanned(
                r,
                format!("a `{marker}` method takes `&self`, not `&mut self`: calls run concurrently, so keep mutable state behind a `Mutex`"),
            ))
        }
        Some(r) => {
            return Err(syn::Error::new_spanned(
                r,
                format!("a `{marker}` method takes `&self` (the value is shared by every call)"),
            ))
        }
        None => {
            return Err(syn::Error::new_spanned(
                &sig.ident,
                format!("a `{marker}` method takes `&self` (the value is shared by every call)"),
            ))
        }
    }
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &sig.generics,
            format!("a `{marker}` method cannot be generic: its arguments' schema comes from concrete types"),
        ));
    }
    let mut params = Vec::new();
    for arg in sig.inputs.iter().skip(1) {
        let FnArg::Typed(pt) = arg else {
            continue;
        };
        let param = match last_segment(&pt.ty) {
            Some((name, None)) if name == "RequestCtx" => {
                if params.iter().any(|p| matches!(p, Param::Ctx)) {
                    return Err(syn::Error::new_spanned(
                        pt,
                        "only one `RequestCtx` parameter",
                    ));
                }
                Param::Ctx
            }
            Some((name, Some(inner))) if name == "Args" => Param::Args(Box::new(inner.clone())),
            _ => match &*pt.pat {
                Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                    Param::Field(p.ident.clone(), pt.ty.clone())
                }
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        "an argument parameter is a plain name (`city: String`); to destructure, take all arguments as one type with `Args(..): Args<T>`",
                    ))
                }
            },
        };
        params.push(param);
    }
    let n_args = params
        .iter()
        .filter(|p| matches!(p, Param::Args(_)))
        .count();
    let n_fields = params
        .iter()
        .filter(|p| matches!(p, Param::Field(..)))
        .count();
    if n_args > 1 || (n_args == 1 && n_fields > 0) {
        return Err(syn::Error::new_spanned(
            &sig.inputs,
            "`Args<T>` holds all of a method's arguments: use it alone (besides `RequestCtx`), or list each argument as its own parameter",
        ));
    }

    let span = sig.ident.span();
    let method_name = &sig.ident;
    let name = options
        .name
        .unwrap_or_else(|| LitStr::new(&method_name.to_string(), span));
    let description = options
        .description
        .map(|d| d.value())
        .or_else(|| doc_text(&method.attrs));
    let mut def = match kind {
        Kind::Tool => quote! { ::purra_protocol::ToolDef::new(#name) },
        Kind::Prompt => quote! { ::purra_protocol::PromptDef::new(#name) },
    };
    if let Some(d) = description {
        def.extend(quote! { .description(#d) });
    }
    if let Some(t) = options.title {
        def.extend(quote! { .title(#t) });
    }
    if !options.hints.is_empty() {
        let setters = options.hints.iter().map(|(setter, value)| {
            let setter = format_ident!("{setter}");
            quote! { .#setter(#value) }
        });
        def.extend(quote! {
            .annotations(::purra_protocol::types::ToolAnnotations::new() #(#setters)*)
        });
    }
    if options.idempotent {
        def.extend(quote! { .idempotent() });
    }

    // The closure's arguments parameter, the struct it decodes into, and the call.
    let ctx = format_ident!("__purra_ctx");
    let mut call_args = Vec::new();
    let mut fields = Vec::new();
    let mut args_param = quote! { (): () };
    let mut args_struct = TokenStream::new();
    for p in &params {
        match p {
            Param::Ctx => call_args.push(ctx.to_token_stream()),
            Param::Args(ty) => {
                args_param = quote! { __purra_args: #ty };
                call_args.push(quote! { ::purra_protocol::Args(__purra_args) });
            }
            Param::Field(ident, ty) => {
                fields.push(quote! { #ident: #ty });
                call_args.push(ident.to_token_stream());
            }
        }
    }
    if !fields.is_empty() {
        let struct_name = format_ident!("__PurraArgs_{}", method_name);
        let names = params.iter().filter_map(|p| match p {
            Param::Field(ident, _) => Some(ident),
            _ => None,
        });
        args_param = quote! { #struct_name { #(#names),* }: #struct_name };
        args_struct = quote! {
            #[derive(
                ::purra_protocol::__macro_support::serde::Deserialize,
                ::purra_protocol::__macro_support::schemars::JsonSchema
            )]
            #[serde(crate = "::purra_protocol::__macro_support::serde")]
            #[schemars(crate = "::purra_protocol::__macro_support::schemars")]
            #[allow(non_camel_case_types)]
            struct #struct_name { #(#fields),* }
        };
    }
    let awaited = if sig.asyncness.is_some() {
        quote! { .await }
    } else {
        TokenStream::new()
    };
    let ret_span = match &sig.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => span,
    };
    let add = match kind {
        Kind::Tool => quote! { add_tool },
        Kind::Prompt => quote! { add_prompt },
    };
    let ok = quote_spanned! {ret_span=>
        ::std::result::Result::<_, ::purra_protocol::HandlerError>::Ok(
            this.#method_name(#(#call_args),*) #awaited
        )
    };
    Ok(quote_spanned! {Span::call_site()=>
        {
            #args_struct
            let this = ::std::sync::Arc::clone(&self);
            server.#add(
                #def,
                move |#args_param, #ctx: ::purra_protocol::RequestCtx| {
                    let this = ::std::sync::Arc::clone(&this);
                    async move { #ok }
                },
            )?;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(attr: TokenStream, item: TokenStream) -> String {
        match handlers(attr, item) {
            Ok(out) => panic!("expected an error, expanded to {out}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn mistakes_are_errors_that_say_what_to_write() {
        assert_eq!(
            error(quote!(), quote!(fn f() {})),
            "`#[handlers]` goes on an `impl` block: `#[purra_protocol::handlers] impl MyServer { ... }`"
        );
        assert_eq!(
            error(quote!(verbose), quote!(impl S {})),
            "`#[handlers]` takes no arguments; options go on each `#[tool(...)]` or `#[prompt(...)]`"
        );
        assert_eq!(
            error(quote!(), quote!(impl Clone for S {})),
            "`#[handlers]` goes on an inherent `impl` block (`impl MyServer`), not on a trait impl"
        );
        assert_eq!(
            error(quote!(), quote!(impl S { fn helper(&self) {} })),
            "`#[handlers]` found no `#[tool]` or `#[prompt]` method in this `impl` block"
        );
        assert_eq!(
            error(quote!(), quote!(impl S { #[tool] fn f(&mut self) {} })),
            "a `#[tool]` method takes `&self`, not `&mut self`: calls run concurrently, so keep mutable state behind a `Mutex`"
        );
        assert_eq!(
            error(quote!(), quote!(impl S { #[prompt] fn f() {} })),
            "a `#[prompt]` method takes `&self` (the value is shared by every call)"
        );
        assert_eq!(
            error(quote!(), quote!(impl S { #[tool(colour = "red")] fn f(&self) {} })),
            "unknown `#[tool]` option `colour`: expected name, title, description, read_only, destructive, idempotent, open_world"
        );
        assert_eq!(
            error(
                quote!(),
                quote!(impl S { #[prompt(read_only)] fn f(&self) {} })
            ),
            "unknown `#[prompt]` option `read_only`: expected name, title, description"
        );
        assert_eq!(
            error(
                quote!(),
                quote!(impl S { #[tool] #[prompt] fn f(&self) {} })
            ),
            "a method is one tool or one prompt: only one `#[tool]` or `#[prompt]` per method"
        );
        assert_eq!(
            error(quote!(), quote!(impl S { #[tool] fn f(&self, (a, b): (u8, u8)) {} })),
            "an argument parameter is a plain name (`city: String`); to destructure, take all arguments as one type with `Args(..): Args<T>`"
        );
        assert_eq!(
            error(quote!(), quote!(impl S { #[tool] fn f(&self, a: u8, Args(b): Args<B>) {} })),
            "`Args<T>` holds all of a method's arguments: use it alone (besides `RequestCtx`), or list each argument as its own parameter"
        );
        assert_eq!(
            error(quote!(), quote!(impl S { #[tool] fn f<T>(&self, t: T) {} })),
            "a `#[tool]` method cannot be generic: its arguments' schema comes from concrete types"
        );
    }

    #[test]
    fn markers_are_removed_and_docs_become_descriptions() {
        let out = handlers(
            quote!(),
            quote!(impl S {
                /// Adds `by`.
                ///
                /// Returns the new value.
                #[tool(read_only, destructive = false)]
                async fn add(&self, by: i64, ctx: RequestCtx) -> String { String::new() }
                fn helper(&self) {}
            }),
        )
        .unwrap()
        .to_string();
        assert!(!out.contains("# [tool"), "{out}");
        assert!(
            out.contains(r#". description ("Adds `by`.\n\nReturns the new value.")"#),
            "{out}"
        );
        assert!(
            out.contains(". with_read_only (true) . with_destructive (false)"),
            "{out}"
        );
        assert!(out.contains("struct __PurraArgs_add { by : i64 }"), "{out}");
        assert!(
            out.contains("this . add (by , __purra_ctx) . await"),
            "{out}"
        );
        assert!(out.contains("fn helper (& self) { }"), "{out}");
    }
}
