//! The `tls_client` example for real: a purra server behind TLS on loopback, its certificate
//! (for `localhost`) signed by a CA made here; the example, in a child process (this binary
//! re-executed), trusts that CA from a PEM file, lists the tools and calls `echo`. Without the
//! CA the connection fails at once with an untrusted-certificate error.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use purra_protocol::{
    Client, ClientOptions, HandlerResult, HttpClientOptions, RequestCtx, Server,
    StreamableHttpServer,
};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{server::TlsStream, TlsAcceptor};

#[allow(dead_code)]
#[path = "../tls_client.rs"]
mod example;

/// Set in the child: run the example's `main`.
const CHILD: &str = "PURRA_TEST_TLS_CLIENT_CHILD";
const BOUND: Duration = Duration::from_secs(10);

/// Accepts TCP connections and completes the TLS handshake before axum sees them; a client
/// that does not trust the certificate aborts its handshake and is skipped.
struct TlsListener {
    tcp: TcpListener,
    tls: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, SocketAddr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(Ok(tls)) = tokio::time::timeout(BOUND, self.tls.accept(tcp)).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Echo {
    text: String,
}

async fn echo(e: Echo, _: RequestCtx) -> HandlerResult<String> {
    Ok(format!("echo: {}", e.text))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os(CHILD).is_some() {
        return example::main();
    }
    // A CA, and a certificate for localhost that it signs.
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
    let leaf_key = KeyPair::generate()?;
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])?.signed_by(&leaf_key, &ca)?;
    let ca_file = std::env::temp_dir().join(format!("purra-tls-client-{}.pem", std::process::id()));
    std::fs::write(&ca_file, ca.pem())?;

    // ring, as purra-protocol's WebSocket client (rustls 0.23.48 deprecated it for lacking
    // post-quantum key exchange; it stays supported within 0.23).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = rt.block_on(async {
        let server = Server::builder("tls-test", "1.0.0").build();
        server.tool("echo", "Says the text back", echo)?;
        let mcp = StreamableHttpServer::new(server, Default::default());
        let listener = TlsListener {
            tcp: TcpListener::bind("127.0.0.1:0").await?,
            tls: TlsAcceptor::from(Arc::new(tls)),
        };
        let url = format!(
            "https://localhost:{}/mcp",
            listener.tcp.local_addr()?.port()
        );
        tokio::spawn(async move { axum::serve(listener, mcp.router()).await });

        // The example, trusting the CA.
        let run = tokio::process::Command::new(std::env::current_exe()?)
            .args([url.as_str(), ca_file.to_str().expect("a UTF-8 path")])
            .env(CHILD, "1")
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(BOUND, run).await??;
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "tool echo\necho: echo: hello over TLS\n",
            "stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0));

        // The same connection without the CA: refused, not a hang.
        let plain =
            Client::connect_http(&url, HttpClientOptions::default(), ClientOptions::default());
        let refused = match tokio::time::timeout(BOUND, plain).await {
            Err(_) => panic!("no answer within {BOUND:?} without the CA"),
            Ok(Ok(_)) => panic!("connected without the CA"),
            Ok(Err(e)) => e.to_string(),
        };
        Ok::<_, Box<dyn std::error::Error>>(refused)
    });
    let _ = std::fs::remove_file(&ca_file);
    let refused = outcome?;
    assert!(
        refused.contains("invalid peer certificate: UnknownIssuer"),
        "the error says the certificate is not trusted: {refused}"
    );
    eprintln!("tls_client: listed and called over TLS with the CA; without it: {refused}");
    Ok(())
}
