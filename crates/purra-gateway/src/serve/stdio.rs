//! Serving one downstream client over the process's stdin and stdout.

use crate::runtime::gateway::Gateway;

impl Gateway {
    /// Serves one downstream client over this process's stdin and stdout; returns at EOF.
    pub async fn serve_stdio(&self) {
        self.inner.server.serve_stdio().await;
    }
}
