//! The approver page as the CLI serves it (`purra approvals serve`, `purra gateway --page`): binds
//! the address, prints where it serves and each approver's sign-in token on stderr, and serves
//! until interrupted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use purra_core::OperatorStore;
use purra_page::{Decide, HostPolicy, Page, PageConfig};

use crate::cli::PageArgs;
use crate::exit::Failure;

/// A page bound to its address, ready to serve.
pub struct Bound {
    page: Page,
    listener: tokio::net::TcpListener,
}

/// Builds the page over `store` (deciding with `decide` when given), binds `addr` and prints, on
/// stderr prefixed `prefix`, the URL and one sign-in token per approver.
pub async fn bind(
    store: Arc<dyn OperatorStore>,
    decide: Option<Decide>,
    addr: SocketAddr,
    args: &PageArgs,
    prefix: &str,
) -> Result<Bound, Failure> {
    let mut policy = HostPolicy::loopback();
    for host in &args.allow_hosts {
        policy = policy.allow_host(host);
    }
    let mut config = PageConfig::default()
        .host_policy(policy)
        .approval_ttl(Duration::from_secs(args.approval_ttl));
    for a in &args.approvers {
        config = config.approver(a.clone());
    }
    let page = match decide {
        Some(d) => Page::with_decide(store, config, d),
        None => Page::new(store, config),
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::Config(format!("cannot listen on {addr}: {e}")))?;
    let local = listener.local_addr().map_err(|e| {
        Failure::protocol("serving", purra_protocol::Error::Transport(e.to_string()))
    })?;
    eprintln!("{prefix}: approver page at http://{local}/");
    for (approver, token) in page.tokens() {
        eprintln!("{prefix}: sign-in token for {approver}: {token}");
    }
    Ok(Bound { page, listener })
}

impl Bound {
    /// Serves until `shutdown` completes.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), Failure> {
        self.page.serve(self.listener, shutdown).await.map_err(|e| {
            Failure::protocol("serving", purra_protocol::Error::Transport(e.to_string()))
        })
    }
}
