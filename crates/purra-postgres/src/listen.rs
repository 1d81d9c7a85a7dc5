//! The event listener: one connection of its own that `LISTEN`s on the schema's channel and turns every
//! notification (one per committed audit row, sent by a trigger) into a [`StoreEvent`].
//!
//! It is listening before [`Listener::start`] returns, so a subscriber that subscribes, then reads,
//! misses no later commit. When the connection is lost it reconnects with a growing pause and then
//! sends [`StoreEvent::Resync`]: notifications sent meanwhile are lost, so subscribers re-read.
//!
//! A connection can be lost without closing (a network that drops packets): every
//! `listener_check` the listener sends `LISTEN` again on it (a no-op for a channel already
//! listened to, answered in one round trip); unanswered for as long again, the connection counts
//! as lost and the listener reconnects as above.
//!
//! It also counts the notifications that a Streamable HTTP session was ended or changed (schema
//! step 15's triggers send them) in a [`SessionWatch`]; while the connection is lost the watch
//! cannot tell, and once it is back it moves, so every held session is read again.

use purra_core::{EventSender, StoreError, StoreEvent};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Notification};

/// How many notifications may wait between the connection and the forwarder.
const QUEUE: usize = 1024;

/// The payload of the notification that a Streamable HTTP session was ended or changed.
pub(crate) const SESSION_PAYLOAD: &str = r#"{"event":"http_session"}"#;

/// What the listener knows of Streamable HTTP sessions ended or changed anywhere: purra-protocol's
/// `SessionStore::sessions_version`.
#[derive(Debug, Default)]
pub(crate) struct SessionWatch {
    /// Whether the listener's connection is up (notifications arrive).
    listening: AtomicBool,
    version: AtomicU64,
}

impl SessionWatch {
    /// The count of sessions ended or changed as notified, while notifications arrive.
    #[cfg(feature = "sessions")]
    pub(crate) fn version(&self) -> Option<u64> {
        self.listening
            .load(Ordering::SeqCst)
            .then(|| self.version.load(Ordering::SeqCst))
    }

    /// A session was ended or changed.
    pub(crate) fn moved(&self) {
        self.version.fetch_add(1, Ordering::SeqCst);
    }
}

/// The running listener; [`Listener::stop`] ends it.
pub(crate) struct Listener {
    task: JoinHandle<()>,
}

impl Listener {
    /// Connects and listens on `purra:<schema>`, then forwards to `events` until stopped.
    pub(crate) async fn start(
        config: Config,
        schema: &str,
        check: Duration,
        events: EventSender,
        sessions: Arc<SessionWatch>,
    ) -> Result<Listener, StoreError> {
        let channel = format!("purra:{schema}");
        let first = listen(&config, &channel)
            .await
            .map_err(|e| StoreError::Backend(format!("listening for events: {e}")))?;
        sessions.listening.store(true, Ordering::SeqCst);
        let task = tokio::spawn(async move {
            let mut session = Some(first);
            loop {
                if let Some(mut s) = session.take() {
                    let checked = checked(&s.client, &channel, check);
                    tokio::pin!(checked);
                    loop {
                        tokio::select! {
                            n = s.notifications.recv() => match n {
                                Some(n) if n.payload() == SESSION_PAYLOAD => sessions.moved(),
                                Some(n) => {
                                    if let Some(event) = event_of(&n) {
                                        events.send(event);
                                    }
                                }
                                None => break,
                            },
                            () = &mut checked => break,
                        }
                    }
                    // A connection lost silently still has its driver waiting on the socket.
                    s.driver.abort();
                }
                // Notifications are lost until the connection is back: sessions are read meanwhile.
                sessions.listening.store(false, Ordering::SeqCst);
                let mut pause = Duration::from_millis(50);
                loop {
                    tokio::time::sleep(pause).await;
                    if let Ok(s) = listen(&config, &channel).await {
                        session = Some(s);
                        break;
                    }
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                // Listening again: whatever was ended or changed meanwhile, every held session is
                // read once more.
                sessions.moved();
                sessions.listening.store(true, Ordering::SeqCst);
                events.send(StoreEvent::Resync);
            }
        });
        Ok(Listener { task })
    }

    /// Stops listening (the connection closes).
    pub(crate) fn stop(&self) {
        self.task.abort();
    }
}

/// A connection listening on a channel: its client, its notifications (the sender closes with
/// the connection) and the task driving the connection.
struct Listening {
    client: Client,
    notifications: mpsc::Receiver<Notification>,
    driver: JoinHandle<()>,
}

/// A connection listening on `channel`.
async fn listen(config: &Config, channel: &str) -> Result<Listening, tokio_postgres::Error> {
    let (client, mut conn) = config.connect(NoTls).await?;
    let (tx, rx) = mpsc::channel(QUEUE);
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if tx.send(n).await.is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            }
        }
    });
    let listening = Listening {
        client,
        notifications: rx,
        driver,
    };
    if let Err(e) = listening.client.batch_execute(&listen_sql(channel)).await {
        listening.driver.abort();
        return Err(e);
    }
    Ok(listening)
}

/// The statement that listens on `channel`. The channel name is `purra:` and a checked schema
/// name: quoting it is enough.
fn listen_sql(channel: &str) -> String {
    format!("LISTEN \"{channel}\"")
}

/// Ends when `client`'s connection fails a check: every `every`, `LISTEN` again (a no-op on a
/// channel already listened to), which must be answered within `every`.
async fn checked(client: &Client, channel: &str, every: Duration) {
    let sql = listen_sql(channel);
    loop {
        tokio::time::sleep(every).await;
        match tokio::time::timeout(every, client.batch_execute(&sql)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return,
        }
    }
}

/// The event a notification's payload (`{"seq","event","approval","key","verdict"}`) names.
fn event_of(n: &Notification) -> Option<StoreEvent> {
    let payload: Value = serde_json::from_str(n.payload()).ok()?;
    StoreEvent::from_audit(
        payload["event"].as_str()?,
        payload["approval"].as_str(),
        payload["key"].as_str(),
        &json!({"verdict": payload["verdict"]}),
    )
}
