//! Who a request is from: the principal a caller's token proves, else the configured one.

use purra_protocol::Principal;

/// The principal of an authenticated caller: its token's issuer and subject
/// (`ISSUER#SUBJECT`).
pub(crate) fn principal_of(p: &Principal) -> String {
    purra_core::principal_name(p.issuer.as_deref().unwrap_or(""), &p.subject)
}

/// Who a request is from: the principal its token proves, else (stdio, HTTP without
/// `[gateway.auth]`) the configured one; never one the caller asserts.
pub(crate) fn caller_principal(proved: Option<&Principal>, configured: &str) -> String {
    proved.map_or_else(|| configured.to_owned(), principal_of)
}
