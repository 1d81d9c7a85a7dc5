//! A TCP proxy between a host and PostgreSQL that injects the network faults of the PostgreSQL
//! scenarios: it cuts a connection right after the server answered the `COMMIT` of the transaction
//! that inserted a claim (the commit happened, its acknowledgement never arrives), and it partitions
//! (holds every byte, both ways, on every connection) until healed.
//!
//! It reads just enough of the wire protocol: the startup message, then typed messages (`P`arse names a
//! statement's SQL, `B`ind uses a statement, `Q` is a simple query such as `COMMIT`; the server's `Z`
//! ends its answer).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The proxy's controls, shared by its connections.
#[derive(Clone)]
pub struct Proxy {
    /// The address hosts connect to.
    pub addr: std::net::SocketAddr,
    /// Cut the next claim's commit acknowledgement (once).
    cut_next_claim: Arc<AtomicBool>,
    /// How many acknowledgements were cut.
    cuts: Arc<AtomicUsize>,
    /// True while partitioned.
    partitioned: watch::Sender<bool>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream` (`HOST:PORT`).
    pub async fn start(upstream: String) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let proxy = Proxy {
            addr: listener.local_addr()?,
            cut_next_claim: Arc::default(),
            cuts: Arc::default(),
            partitioned: watch::channel(false).0,
        };
        let p = proxy.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let p = p.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&upstream).await {
                        p.serve(client, server).await;
                    }
                });
            }
        });
        Ok(proxy)
    }

    /// Arms the cut: the next transaction that inserts a claim commits, and its answer is lost.
    pub fn cut_next_claim_commit(&self) {
        self.cut_next_claim.store(true, Ordering::SeqCst);
    }

    /// How many acknowledgements were cut so far.
    pub fn cuts(&self) -> usize {
        self.cuts.load(Ordering::SeqCst)
    }

    /// Starts (true) or heals (false) a partition.
    pub fn partition(&self, on: bool) {
        self.partitioned.send_replace(on);
    }

    async fn serve(&self, client: TcpStream, server: TcpStream) {
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (mut cr, mut cw) = client.into_split();
        let (mut sr, mut sw) = server.into_split();
        // Set by the client side when the commit to cut was forwarded; the server side then drops the
        // connection after the server's answer, before forwarding it.
        let cutting = Arc::new(AtomicBool::new(false));
        let up = {
            let p = self.clone();
            let cutting = Arc::clone(&cutting);
            async move {
                let mut statements: HashMap<String, String> = HashMap::new();
                let mut claim_in_tx = false;
                // The startup message has no type byte.
                let Ok(startup) = read_untyped(&mut cr).await else {
                    return;
                };
                if p.hold().await.is_err() || sw.write_all(&startup).await.is_err() {
                    return;
                }
                loop {
                    let Ok((kind, body)) = read_typed(&mut cr).await else {
                        return;
                    };
                    match kind {
                        b'P' => {
                            let (name, rest) = cstr(&body[5..]);
                            let (sql, _) = cstr(rest);
                            statements.insert(name, sql);
                        }
                        b'B' => {
                            let (_, rest) = cstr(&body[5..]);
                            let (stmt, _) = cstr(rest);
                            if statements
                                .get(&stmt)
                                .is_some_and(|sql| sql.contains("INSERT INTO claims"))
                            {
                                claim_in_tx = true;
                            }
                        }
                        b'Q' => {
                            let (sql, _) = cstr(&body[5..]);
                            if sql.trim().eq_ignore_ascii_case("COMMIT") {
                                if claim_in_tx && p.cut_next_claim.swap(false, Ordering::SeqCst) {
                                    cutting.store(true, Ordering::SeqCst);
                                }
                                claim_in_tx = false;
                            } else if sql.trim().eq_ignore_ascii_case("ROLLBACK") {
                                claim_in_tx = false;
                            }
                        }
                        _ => {}
                    }
                    if p.hold().await.is_err() || sw.write_all(&body).await.is_err() {
                        return;
                    }
                }
            }
        };
        let down = {
            let p = self.clone();
            let cutting = Arc::clone(&cutting);
            async move {
                loop {
                    let Ok((kind, body)) = read_typed(&mut sr).await else {
                        return;
                    };
                    if cutting.load(Ordering::SeqCst) {
                        // Everything up to the server's ReadyForQuery after COMMIT is swallowed; then
                        // the connection is gone, both ways.
                        if kind == b'Z' {
                            p.cuts.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                        continue;
                    }
                    if p.hold().await.is_err() || cw.write_all(&body).await.is_err() {
                        return;
                    }
                }
            }
        };
        // Whichever side ends first ends the connection (both halves are dropped).
        tokio::select! {
            _ = up => {}
            _ = down => {}
        }
    }

    /// Waits while partitioned.
    async fn hold(&self) -> Result<(), ()> {
        let mut rx = self.partitioned.subscribe();
        rx.wait_for(|on| !*on).await.map(|_| ()).map_err(|_| ())
    }
}

/// A message without a type byte (the startup message or an SSL request), whole.
async fn read_untyped(r: &mut (impl AsyncReadExt + Unpin)) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await?;
    let n = u32::from_be_bytes(len) as usize;
    if !(4..=1 << 20).contains(&n) {
        return Err(std::io::ErrorKind::InvalidData.into());
    }
    let mut msg = len.to_vec();
    msg.resize(n, 0);
    r.read_exact(&mut msg[4..]).await?;
    Ok(msg)
}

/// A typed message, whole (type byte, length, body).
async fn read_typed(r: &mut (impl AsyncReadExt + Unpin)) -> std::io::Result<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    r.read_exact(&mut head).await?;
    let n = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if !(4..=64 << 20).contains(&n) {
        return Err(std::io::ErrorKind::InvalidData.into());
    }
    let mut msg = head.to_vec();
    msg.resize(n + 1, 0);
    r.read_exact(&mut msg[5..]).await?;
    Ok((head[0], msg))
}

/// A NUL-terminated string and what follows it.
fn cstr(bytes: &[u8]) -> (String, &[u8]) {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    let rest = bytes.get(end + 1..).unwrap_or(&[]);
    (String::from_utf8_lossy(&bytes[..end]).into_owned(), rest)
}
