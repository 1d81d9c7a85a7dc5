//! Streamable HTTP sessions in the database (feature `sessions`): purra-protocol's
//! `SessionStore` contract, on a schema of its own.

use purra_protocol::session_store::check_contract;

use crate::support::{open, url};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_session_store_meets_the_contract() {
    let schema = format!("t{}_sessions", std::process::id());
    let store = open(&schema).await.unwrap();
    check_contract(&store).await;
}

/// Polls `f` until it holds (5 s at most): whether it did.
async fn within_5s(mut f: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < until {
        if f() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    f()
}

/// `sessions_version`, as another instance on the schema changes sessions: it moves once the
/// trigger's notification arrives when a session is ended, expired or saved with another state,
/// and at once for the instance's own changes; it stays for new sessions, last-seen times and
/// events. When the listener's connection is lost (notifications sent meanwhile are lost) it
/// moves once the connection is back, so every held session is read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_version_moves_on_notifications_and_after_a_lost_listener() {
    use purra_protocol::session_store::{EventLogBounds, SessionRecord, SessionStore, StoredEvent};
    use std::time::{Duration, SystemTime};
    let schema = format!("t{}_sessions_version", std::process::id());
    let here = open(&schema).await.unwrap();
    let other = open(&schema).await.unwrap();
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let rec = |id: &str, state: &str| SessionRecord {
        id: id.into(),
        owner: Some("alice".into()),
        state: state.into(),
        last_seen: t0,
    };
    let v0 = here.sessions_version().expect("listening");
    other.save_session(rec("a", "{}")).await.unwrap();
    other.save_session(rec("a", "{}")).await.unwrap();
    other
        .touch_session("a".into(), Some(t0 + Duration::from_secs(1)))
        .await
        .unwrap();
    let event = StoredEvent {
        session: "a".into(),
        stream: 1,
        seq: 1,
        data: b"x".to_vec(),
        at: t0,
    };
    other
        .append_events(vec![event], EventLogBounds::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        here.sessions_version(),
        Some(v0),
        "nothing ended or changed"
    );
    // Changed, ended, expired elsewhere: each notified.
    other
        .save_session(rec("a", "{\"level\":\"error\"}"))
        .await
        .unwrap();
    assert!(within_5s(|| here.sessions_version() != Some(v0)).await);
    let v1 = here.sessions_version().unwrap();
    assert!(other.end_session("a".into()).await.unwrap());
    let ended = std::time::Instant::now();
    while here.sessions_version() == Some(v1) && ended.elapsed() < Duration::from_secs(5) {
        tokio::task::yield_now().await;
    }
    assert_ne!(here.sessions_version(), Some(v1));
    eprintln!(
        "a session ended elsewhere moved the version here after {:?}",
        ended.elapsed()
    );
    let v2 = here.sessions_version().unwrap();
    other.save_session(rec("b", "{}")).await.unwrap();
    assert_eq!(
        other
            .expire_sessions(t0 + Duration::from_secs(1))
            .await
            .unwrap(),
        1
    );
    assert!(within_5s(|| here.sessions_version() != Some(v2)).await);
    // An instance's own end counts before the call returns.
    let mine = here.sessions_version();
    here.save_session(rec("c", "{}")).await.unwrap();
    let mine2 = here.sessions_version();
    assert_ne!(mine2, mine);
    assert!(here.end_session("c".into()).await.unwrap());
    assert_ne!(here.sessions_version(), mine2);
    // The listeners' connections are cut: once back, the version has moved.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = here.sessions_version().unwrap();
    let admin = crate::support::raw(&schema).await;
    let cut = admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1",
            &[&format!("LISTEN \"purra:{schema}\"")],
        )
        .await
        .unwrap();
    assert!(cut >= 1, "the listeners were found");
    assert!(
        within_5s(|| here.sessions_version().is_some_and(|v| v != before)).await,
        "moved once listening again"
    );
}

/// A TCP relay to the test server that can stop moving bytes while keeping its connections
/// open: a network that drops packets without closing anything.
struct Blackhole {
    port: u16,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Blackhole {
    async fn start() -> Blackhole {
        use std::sync::atomic::{AtomicBool, Ordering};
        let server = url();
        let target = server
            .split('@')
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .expect("host:port in the test server's URL")
            .to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = std::sync::Arc::new(AtomicBool::new(false));
        let gate = frozen.clone();
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = tokio::net::TcpStream::connect(&target).await else {
                    continue;
                };
                let (ri, wi) = inbound.into_split();
                let (ro, wo) = outbound.into_split();
                for (mut from, mut to) in [
                    (
                        Box::new(ri) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
                        Box::new(wo) as Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
                    ),
                    (Box::new(ro), Box::new(wi)),
                ] {
                    let gate = gate.clone();
                    tokio::spawn(async move {
                        use tokio::io::{AsyncReadExt, AsyncWriteExt};
                        let mut buf = vec![0u8; 16 * 1024];
                        loop {
                            let n = match from.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            // Frozen: what was read is held back, and nothing more is read.
                            while gate.load(Ordering::SeqCst) {
                                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                            }
                            if to.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    });
                }
            }
        });
        Blackhole { port, frozen }
    }

    /// The test server's URL through the relay.
    fn url(&self) -> String {
        let server = url();
        let (head, rest) = server.split_once('@').unwrap();
        let (_, path) = rest.split_once('/').unwrap();
        format!("{head}@127.0.0.1:{}/{path}", self.port)
    }

    fn freeze(&self, frozen: bool) {
        self.frozen
            .store(frozen, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The listener's connection lost without closing (packets dropped, nothing reset): its check
/// goes unanswered, so the sessions version reads unknown (held sessions are read from the
/// store) within two check periods; once the network is back the listener reconnects and the
/// version has moved. Without the check the version stayed known, and stale, for as long as the
/// network dropped packets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_lost_without_a_close_is_noticed_by_its_check() {
    use purra_protocol::session_store::SessionStore;
    use std::time::Duration;
    let schema = format!("t{}_sessions_blackhole", std::process::id());
    let relay = Blackhole::start().await;
    let here = purra_postgres::PostgresStore::connect_with(
        &relay.url(),
        purra_postgres::PostgresOptions::default()
            .schema(&schema)
            .listener_check(Duration::from_millis(200))
            .connect_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let before = here.sessions_version().expect("listening");
    // Several checks pass on a healthy connection: the version stays known and unmoved.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(here.sessions_version(), Some(before));
    relay.freeze(true);
    let frozen = std::time::Instant::now();
    assert!(
        within_5s(|| here.sessions_version().is_none()).await,
        "unknown while the listener is cut off"
    );
    let noticed = frozen.elapsed();
    assert!(
        noticed < Duration::from_millis(1500),
        "noticed after {noticed:?}"
    );
    relay.freeze(false);
    assert!(
        within_5s(|| here.sessions_version().is_some_and(|v| v != before)).await,
        "moved once listening again"
    );
}
