//! `purra login` and `purra logout`: OAuth tokens per server in a token file (0600), and the
//! client every HTTP subcommand uses with them.

use std::path::PathBuf;
use std::sync::Arc;

use purra_protocol::auth::{
    FileTokenStore, LoopbackAuthorizer, OAuthClient, OAuthConfig, UrlPolicy,
};
use purra_protocol::{AuthError, Error, HttpClientOptions};

use crate::cli::{LoginArgs, LogoutArgs};
use crate::exit::Failure;
use crate::target::Target;

/// The token file: `explicit`, else `$PURRA_TOKENS`, else `$XDG_CONFIG_HOME/purra/tokens.json`,
/// else `~/.config/purra/tokens.json`.
pub fn token_file(explicit: Option<&PathBuf>) -> Result<PathBuf, Failure> {
    if let Some(p) = explicit {
        return Ok(p.clone());
    }
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(p) = var("PURRA_TOKENS") {
        return Ok(PathBuf::from(p));
    }
    if let Some(dir) = var("XDG_CONFIG_HOME") {
        return Ok(PathBuf::from(dir).join("purra/tokens.json"));
    }
    match var("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".config/purra/tokens.json")),
        None => Err(Failure::usage(
            "no token file: set --tokens, $PURRA_TOKENS, $XDG_CONFIG_HOME or $HOME",
        )),
    }
}

/// `http` with the tokens `purra login` stored for `url` (refreshed when they expire); a
/// server that wants a new authorization fails with a message naming `purra login`.
pub fn with_stored_tokens(
    url: &str,
    file: Option<&PathBuf>,
    http: HttpClientOptions,
) -> Result<HttpClientOptions, Failure> {
    let store = Arc::new(FileTokenStore::new(token_file(file)?));
    let auth = OAuthClient::new(url, OAuthConfig::stored_only().store(store))
        .map_err(|e| Failure::protocol(format!("connecting to {url}"), Error::Auth(e)))?;
    Ok(http.auth(auth))
}

/// Runs `purra login URL`.
pub async fn login(args: LoginArgs) -> Result<(), Failure> {
    let Target::Http(url) = Target::from_url(&args.url)? else {
        return Err(Failure::usage(
            "purra login needs a Streamable HTTP URL (http:// or https://)",
        ));
    };
    let file = token_file(args.tokens.as_ref())?;
    let failed = |e: Error| {
        // A refused URL says which option would follow it, for whoever means to.
        let hint = match &e {
            Error::Auth(AuthError::UrlRefused { reason, .. })
                if reason.contains("allow_loopback") =>
            {
                " (--allow-loopback follows it)"
            }
            Error::Auth(AuthError::UrlRefused { reason, .. })
                if reason.contains("allow_private_addresses") =>
            {
                " (--allow-private-addresses follows it)"
            }
            _ => "",
        };
        Failure::protocol(format!("logging in to {url}{hint}"), e)
    };
    let authorizer = LoopbackAuthorizer::bind(&args.redirect, |request| {
        eprintln!(
            "Open this URL in a browser to authorize purra:\n\n  {}\n",
            request.url
        );
        eprintln!("Waiting for the redirect to {} ...", request.redirect_uri);
    })
    .await
    .map_err(|e| failed(Error::Auth(e)))?;
    let policy = UrlPolicy::strict()
        .allow_loopback(args.allow_loopback)
        .allow_private_addresses(args.allow_private_addresses);
    let mut config = OAuthConfig::authorization_code(Arc::new(authorizer))
        .client_name("purra")
        .url_policy(policy)
        .store(Arc::new(FileTokenStore::new(&file)));
    if let Some(a) = args.authorization_server {
        config = config.authorization_server(a);
    }
    if let Some(id) = args.client_id {
        config = config.client_id(id);
    }
    if let Some(secret) = args.client_secret {
        config = config.client_secret(secret);
    }
    if let Some(u) = args.client_metadata_url {
        config = config.client_metadata_url(u);
    }
    if !args.scopes.is_empty() {
        config = config.scopes(args.scopes);
    }
    let client = OAuthClient::new(&url, config).map_err(|e| failed(Error::Auth(e)))?;
    if client.login().await.map_err(failed)? {
        eprintln!("Logged in to {url}; tokens stored in {}", file.display());
    } else {
        eprintln!("{url} requires no authorization; nothing stored");
    }
    Ok(())
}

/// Runs `purra logout URL`.
pub async fn logout(args: LogoutArgs) -> Result<(), Failure> {
    let file = token_file(args.tokens.as_ref())?;
    let store = FileTokenStore::new(&file);
    let client = OAuthClient::new(&args.url, OAuthConfig::stored_only())
        .map_err(|e| Failure::usage(e.to_string()))?;
    let key = client.store_key();
    use purra_protocol::auth::TokenStore as _;
    let removed = store
        .remove(key)
        .await
        .map_err(|e| Failure::protocol(format!("logging out of {key}"), Error::Auth(e)))?;
    if removed {
        eprintln!(
            "Logged out of {key}; its tokens are removed from {}",
            file.display()
        );
    } else {
        eprintln!("No tokens were stored for {key} in {}", file.display());
    }
    Ok(())
}
