//! The catalog monitor: the revision the connection actually speaks (negotiated by the handshake,
//! or 2026-07-28 found by `server/discover`), a generation that every `tools/list_changed`
//! advances (in 2026-07-28 they arrive on the `subscriptions/listen` stream, and the stream's end
//! counts as one), and a closed flag. Registrations remember the generation they were discovered
//! at; any change makes them stale.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use purra_protocol::types::methods;
use purra_protocol::Connection;

/// Revisions the adapter supports.
pub const SUPPORTED_VERSIONS: [&str; 3] = ["2025-06-18", "2025-11-25", "2026-07-28"];

#[derive(Debug, Default)]
struct State {
    version: Mutex<Option<String>>,
    generation: AtomicU64,
    closed: AtomicBool,
}

/// Watches one connection's tool list. Cheap to clone; clones share state.
#[derive(Debug, Clone, Default)]
pub struct CatalogMonitor {
    state: Arc<State>,
}

impl CatalogMonitor {
    /// A monitor fed by hand: call [`accept_protocol_version`](Self::accept_protocol_version) with
    /// the handshake's result, [`on_notification`](Self::on_notification) for every server
    /// notification, and [`close`](Self::close) when the connection ends.
    pub fn new() -> Self {
        Self::default()
    }

    /// A monitor attached to a purra connection: it takes the revision the connection speaks,
    /// listens for `tools/list_changed` on arrival (beside the host's own listeners, which it
    /// does not replace; in 2026-07-28 they come through `subscriptions/listen`, and the end of
    /// that stream is heard as one, since later changes would go unseen), and closes when the
    /// connection closes.
    pub fn attach(conn: &Connection) -> Self {
        let monitor = Self::new();
        monitor.accept_protocol_version(conn.protocol_version());
        let m = monitor.clone();
        // The listener stays for the connection's life; the handle is not needed.
        let _listener = conn.on_received(methods::TOOLS_LIST_CHANGED, move |_| {
            m.on_notification(methods::TOOLS_LIST_CHANGED)
        });
        let m = monitor.clone();
        let peer = conn.peer().clone();
        tokio::spawn(async move {
            peer.closed().await;
            m.close();
        });
        if conn.peer().is_closed() {
            monitor.close();
        }
        monitor
    }

    /// Records the revision the connection speaks: the handshake's result, or the 2026-07-28
    /// revision `server/discover` agreed (never a configured guess).
    pub fn accept_protocol_version(&self, version: &str) {
        *self.state.version.lock().expect("monitor lock") = Some(version.to_owned());
    }

    /// Feeds one server notification; `notifications/tools/list_changed` makes every earlier
    /// registration stale.
    pub fn on_notification(&self, method: &str) {
        if method == methods::TOOLS_LIST_CHANGED {
            self.state.generation.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Closes the monitor: every registration made under it fails with `mcp_connection_closed`.
    pub fn close(&self) {
        self.state.closed.store(true, Ordering::SeqCst);
    }

    /// Whether the monitor is closed.
    pub fn is_closed(&self) -> bool {
        self.state.closed.load(Ordering::SeqCst)
    }

    /// How many tool-list changes were seen.
    pub fn generation(&self) -> u64 {
        self.state.generation.load(Ordering::SeqCst)
    }

    /// The negotiated revision, once accepted.
    pub fn protocol_version(&self) -> Option<String> {
        self.state.version.lock().expect("monitor lock").clone()
    }
}
