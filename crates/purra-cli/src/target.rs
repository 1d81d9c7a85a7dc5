//! Where the server is (a URL or a stdio command) and how to connect to it.
//!
//! The rule, the same for every subcommand: when a command follows `--`, it is the server and
//! every positional argument belongs to the subcommand; otherwise the first positional argument
//! is the server's URL (`http`, `https`, `ws` or `wss`).

use std::sync::Arc;
use std::time::Duration;

use purra_protocol::{
    Client, ClientOptions, Connection, Era, HttpClientOptions, ProtocolMode, ProtocolVersion,
    StderrMode, StdioCommand, WsClientOptions,
};

use crate::cli::ConnectArgs;
use crate::exit::Failure;
use crate::status::Status;

/// A server to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Streamable HTTP endpoint.
    Http(String),
    /// A WebSocket endpoint.
    Ws(String),
    /// A program and its arguments, spoken to over stdio.
    Command(Vec<String>),
}

impl Target {
    /// Splits the positional arguments into the target and the rest.
    pub fn split(
        positional: &[String],
        command: &[String],
    ) -> Result<(Target, Vec<String>), Failure> {
        if !command.is_empty() {
            return Ok((Target::Command(command.to_vec()), positional.to_vec()));
        }
        let Some(first) = positional.first() else {
            return Err(Failure::usage(
                "no server given: give its URL (http://, https://, ws://, wss://) first, or its command after `--`",
            ));
        };
        let target = Self::from_url(first)?;
        Ok((target, positional[1..].to_vec()))
    }

    /// A URL target.
    pub fn from_url(url: &str) -> Result<Target, Failure> {
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("http" | "https") => Ok(Target::Http(url.to_owned())),
            Some("ws" | "wss") => Ok(Target::Ws(url.to_owned())),
            _ => Err(Failure::usage(format!(
                "{url:?} is not a server URL (http://, https://, ws://, wss://); \
                 to run a server over stdio, put its command after `--`"
            ))),
        }
    }

    /// Connects, asking for the logging level when one was given. A stdio server's stderr goes
    /// to ours: as it is, or through `status` (made safe) when stderr is a terminal.
    pub async fn connect(
        &self,
        args: &ConnectArgs,
        status: &Status,
    ) -> Result<Connection, Failure> {
        let timeout = request_timeout(args)?;
        let mut options = ClientOptions::default()
            .client_info("purra-cli", env!("CARGO_PKG_VERSION"))
            .request_timeout(timeout);
        options = match protocol_mode(&args.protocol_version)? {
            (mode, Some(v)) => options.mode(mode).protocol_version(v),
            (mode, None) => options.mode(mode),
        };
        let headers = parse_headers(&args.headers)?;
        let conn = match self {
            Target::Http(url) => {
                let explicit = headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
                let mut http = HttpClientOptions {
                    headers,
                    ..HttpClientOptions::default()
                }
                .transport(args.transport.into());
                if !explicit {
                    // The tokens `purra login` stored, if any (an Authorization header wins).
                    http = crate::cmd::login::with_stored_tokens(url, args.tokens.as_ref(), http)?;
                }
                Client::connect_http(url, http, options).await
            }
            Target::Ws(_) | Target::Command(_)
                if args.transport != crate::cli::HttpTransportArg::Auto =>
            {
                return Err(Failure::usage("--transport applies to http(s) URLs only"));
            }
            Target::Ws(url) => {
                let mut ws = WsClientOptions::default();
                ws.headers = headers;
                Client::connect_ws(url, ws, options).await
            }
            Target::Command(argv) => {
                if !headers.is_empty() {
                    return Err(Failure::usage("--header applies to URL targets only"));
                }
                let mut command = StdioCommand::new(&argv[0]).args(&argv[1..]);
                if status.is_terminal() {
                    let status = status.clone();
                    command =
                        command.stderr(StderrMode::Capture(Some(Arc::new(move |line: &str| {
                            status.print_line(line)
                        }))));
                }
                Client::connect_stdio(command, options).await
            }
        }
        .map_err(|e| {
            let hint = match (&e, self) {
                (purra_protocol::Error::Auth(purra_protocol::AuthError::Required { .. }), _) => {
                    format!(" (run `purra login {self}` first)")
                }
                _ => String::new(),
            };
            Failure::protocol(format!("connecting to {self}{hint}"), e)
        })?;
        if let Some(level) = args.log_level {
            if conn.server_capabilities().logging.is_some() {
                conn.set_logging_level(level.into())
                    .await
                    .map_err(|e| Failure::protocol("setting the log level", e))?;
            } else {
                status.print_line("purra: the server does not offer logging; --log-level ignored");
            }
        }
        Ok(conn)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Http(url) | Target::Ws(url) => f.write_str(url),
            Target::Command(argv) => write!(f, "`{}`", argv.join(" ")),
        }
    }
}

/// The request timeout from `--timeout`.
pub fn request_timeout(args: &ConnectArgs) -> Result<Duration, Failure> {
    seconds("--timeout", args.timeout)
}

/// A duration given in seconds by the option `flag`.
pub fn seconds(flag: &str, secs: f64) -> Result<Duration, Failure> {
    if secs.is_finite() && secs > 0.0 && secs < 1e9 {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(Failure::usage(format!(
            "{flag} must be a positive number of seconds"
        )))
    }
}

fn parse_headers(headers: &[String]) -> Result<Vec<(String, String)>, Failure> {
    headers
        .iter()
        .map(|h| match h.split_once(':') {
            Some((name, value)) if !name.trim().is_empty() => {
                Ok((name.trim().to_owned(), value.trim().to_owned()))
            }
            _ => Err(Failure::usage(format!(
                "--header {h:?} is not `Name: value`"
            ))),
        })
        .collect()
}

/// The client's mode for `--protocol-version`: `auto`, a handshake revision (the handshake at
/// that revision) or a 2026-07-28 revision (pinned); anything else is a usage error.
pub fn protocol_mode(v: &str) -> Result<(ProtocolMode, Option<ProtocolVersion>), Failure> {
    if v == "auto" {
        return Ok((ProtocolMode::Auto, None));
    }
    let version = ProtocolVersion::new(v);
    match version.era() {
        Some(Era::Handshake) => Ok((ProtocolMode::Legacy, Some(version))),
        Some(Era::Modern) => Ok((ProtocolMode::Pinned(version), None)),
        _ => {
            let known: Vec<&str> = ProtocolVersion::HANDSHAKE
                .iter()
                .chain(ProtocolVersion::MODERN)
                .map(ProtocolVersion::as_str)
                .collect();
            Err(Failure::usage(format!(
                "--protocol-version {v:?} is not a revision purra speaks: use auto or one of {}",
                known.join(", ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn a_command_after_the_separator_is_the_target() {
        let (t, rest) =
            Target::split(&s(&["https://x/mcp", "a=1"]), &s(&["srv", "--stdio"])).unwrap();
        assert_eq!(t, Target::Command(s(&["srv", "--stdio"])));
        assert_eq!(rest, s(&["https://x/mcp", "a=1"]));
    }

    #[test]
    fn otherwise_the_first_argument_is_a_url() {
        let (t, rest) = Target::split(&s(&["WS://h:1", "echo"]), &[]).unwrap();
        assert_eq!(t, Target::Ws("WS://h:1".into()));
        assert_eq!(rest, s(&["echo"]));
        let (t, _) = Target::split(&s(&["http://h/mcp"]), &[]).unwrap();
        assert_eq!(t, Target::Http("http://h/mcp".into()));
        assert!(matches!(
            Target::split(&s(&["echo", "x=1"]), &[]),
            Err(Failure::Usage(_))
        ));
        assert!(matches!(Target::split(&[], &[]), Err(Failure::Usage(_))));
    }

    #[test]
    fn headers_need_a_colon() {
        assert_eq!(
            parse_headers(&s(&["Authorization: Bearer t"])).unwrap(),
            vec![("Authorization".to_owned(), "Bearer t".to_owned())]
        );
        assert!(parse_headers(&s(&["nocolon"])).is_err());
    }
}
