//! purra-macros: `#[handlers]`, which turns the `#[tool]` and `#[prompt]` methods of an `impl`
//! block into an implementation of `purra_protocol::Handlers`. Use it as
//! `purra_protocol::handlers`; this crate is an implementation detail of purra-protocol.
//!
//! Every mistake is a compile error spanned on the user's code (the method, the parameter or
//! the option at fault), never a panic of the macro.

mod expand;

use proc_macro::TokenStream;

/// Registers the `#[tool]` and `#[prompt]` methods of an `impl` block as MCP tools and prompts
/// of one shared value (see `purra_protocol::handlers` for the full description).
#[proc_macro_attribute]
pub fn handlers(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::handlers(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
