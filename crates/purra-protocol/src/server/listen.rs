//! `subscriptions/listen` (2026-07-28): a request whose answer is a stream of the change
//! notifications the client opted in to, each tagged with the subscription's id.
//!
//! Every open stream is a [`Listener`] in the server's registry: the notifications a registry
//! change produces are queued to it without waiting (a bounded queue per stream; a stream that
//! does not keep up loses notifications, never blocks a registration), and the listen request's
//! own task writes them out in order, after the acknowledgment that opens the stream.
//!
//! With the `io.modelcontextprotocol/tasks` extension a stream may also follow tasks
//! (`taskIds`): each change of a task this server runs, of the stream's own owner, is sent as
//! `notifications/tasks` carrying the task as `tasks/get` would show it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::{Kind, Server, SessionState};
use crate::extensions;
use crate::jsonrpc::{from_params, ErrorObject, RpcErrorCode};
use crate::modern::envelope::RequestEnvelope;
use crate::modern::raw;
use crate::modern::result::with_meta;
use crate::modern::{meta, methods as modern_methods, ListenParams, SubscriptionFilter};
use crate::session::RequestContext;
use crate::types::{methods, ServerCapabilities, UriParams};

/// How many notifications may wait for one stream.
const QUEUE: usize = 64;
/// How many streams may be open on one server.
pub(super) const MAX_LISTENERS: usize = 10_000;

/// One queued notification: its method and params (without the subscription's id).
type News = (&'static str, Box<RawValue>);

struct Listener {
    filter: SubscriptionFilter,
    /// Whose tasks the stream may follow.
    owner: String,
    tx: mpsc::Sender<News>,
}

/// The open streams of one server, and what goes to each.
#[derive(Default)]
pub(super) struct Listeners {
    streams: Mutex<HashMap<u64, Listener>>,
    next: AtomicU64,
}

impl Listeners {
    /// Queues `notifications/{kind}/list_changed` to every stream that asked for it.
    pub(super) fn list_changed(&self, kind: Kind) {
        let method = match kind {
            Kind::Tools => methods::TOOLS_LIST_CHANGED,
            Kind::Resources => methods::RESOURCES_LIST_CHANGED,
            Kind::Prompts => methods::PROMPTS_LIST_CHANGED,
        };
        self.fan_out(
            |f| match kind {
                Kind::Tools => f.tools_list_changed == Some(true),
                Kind::Resources => f.resources_list_changed == Some(true),
                Kind::Prompts => f.prompts_list_changed == Some(true),
            },
            method,
            || raw(&serde_json::json!({})),
        );
    }

    /// Queues `notifications/resources/updated` to every stream subscribed to `uri`.
    pub(super) fn resource_updated(&self, uri: &str) {
        self.fan_out(
            |f| {
                f.resource_subscriptions
                    .as_ref()
                    .is_some_and(|u| u.iter().any(|s| s == uri))
            },
            methods::RESOURCE_UPDATED,
            || raw(&UriParams::new(uri)),
        );
    }

    /// Queues `notifications/tasks` (the task as `tasks/get` shows it, `task`) to every stream
    /// of `owner` that follows the task `id`.
    pub(crate) fn task_changed(&self, owner: &str, id: &str, task: &serde_json::Value) {
        let streams = self.streams.lock().expect("listeners lock");
        for l in streams.values().filter(|l| {
            l.owner == owner
                && l.filter
                    .task_ids
                    .as_ref()
                    .is_some_and(|t| t.iter().any(|x| x == id))
        }) {
            let _ =
                l.tx.try_send((crate::tasks::methods::NOTIFICATION, raw(task)));
        }
    }

    fn fan_out(
        &self,
        wants: impl Fn(&SubscriptionFilter) -> bool,
        method: &'static str,
        params: impl Fn() -> Box<RawValue>,
    ) {
        let streams = self.streams.lock().expect("listeners lock");
        for l in streams.values().filter(|l| wants(&l.filter)) {
            // A full queue already holds news of the same kind (a list changed) or its stream is
            // not being read: drop rather than block the registration.
            let _ = l.tx.try_send((method, params()));
        }
    }

    fn len(&self) -> usize {
        self.streams.lock().expect("listeners lock").len()
    }
}

/// Removes its stream from the registry when the listen request ends, however it ends.
struct Registration {
    server: Server,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut s) = self.server.inner.listeners.streams.lock() {
            s.remove(&self.id);
        }
    }
}

/// The part of `filter` this server honours: list changes of the kinds it has, resource updates
/// when it has resources (the tasks are settled by the caller).
fn acknowledged(filter: SubscriptionFilter, caps: &ServerCapabilities) -> SubscriptionFilter {
    let yes = |asked: Option<bool>, has: bool| (asked == Some(true) && has).then_some(true);
    SubscriptionFilter {
        tools_list_changed: yes(filter.tools_list_changed, caps.tools.is_some()),
        prompts_list_changed: yes(filter.prompts_list_changed, caps.prompts.is_some()),
        resources_list_changed: yes(filter.resources_list_changed, caps.resources.is_some()),
        resource_subscriptions: filter
            .resource_subscriptions
            .filter(|u| caps.resources.is_some() && !u.is_empty()),
        task_ids: None,
    }
}

/// The tasks of `asked` that `owner` has in this server's store (the ones a stream may follow).
async fn known_tasks(server: &Server, owner: &str, asked: Vec<String>) -> Option<Vec<String>> {
    let store = server.tasks_store();
    let mut known = Vec::new();
    for id in asked {
        if let Ok(Some(_)) = store.get(owner, &id).await {
            if !known.contains(&id) {
                known.push(id);
            }
        }
    }
    (!known.is_empty()).then_some(known)
}

/// Serves one `subscriptions/listen`: acknowledges, then writes what the registry queues until
/// the client cancels, the connection's input ends or the server shuts the stream down; the
/// graceful ends answer the request with an empty complete result.
pub(super) async fn listen(
    session: &Arc<SessionState>,
    req: &RequestContext,
    params: Option<&RawValue>,
    envelope: &RequestEnvelope,
    principal: Option<&str>,
) -> Result<Box<RawValue>, ErrorObject> {
    let server = &session.server;
    let ListenParams { notifications } = from_params(params)?;
    let asked_tasks = notifications.task_ids.clone().filter(|t| !t.is_empty());
    if asked_tasks.is_some()
        && !extensions::client_declares(&envelope.client_capabilities, extensions::TASKS)
    {
        return Err(ErrorObject::new(
            RpcErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!(
                "Missing required client capability: the {} extension (task notifications)",
                extensions::TASKS
            ),
        )
        .with_data(extensions::required_data(extensions::TASKS)));
    }
    if server.inner.listeners.len() >= MAX_LISTENERS {
        return Err(ErrorObject::internal(format!(
            "Too many open subscriptions (the limit is {MAX_LISTENERS})"
        )));
    }
    let owner = super::tasks::owner_of(session, principal);
    let mut filter = acknowledged(notifications, &server.capabilities());
    if let Some(asked) = asked_tasks {
        filter.task_ids = known_tasks(server, &owner, asked).await;
    }
    let (tx, mut rx) = mpsc::channel(QUEUE);
    let id = server.inner.listeners.next.fetch_add(1, Ordering::Relaxed);
    let subscription = raw(&req.id);
    let ack = with_meta(
        raw(&ListenParams {
            notifications: filter.clone(),
        }),
        meta::SUBSCRIPTION_ID,
        subscription.clone(),
    );
    // Registered before the acknowledgment is written, so nothing that changes after the client
    // reads the acknowledgment is missed; queued news is written only after it.
    server
        .inner
        .listeners
        .streams
        .lock()
        .expect("listeners lock")
        .insert(id, Listener { filter, owner, tx });
    let _registration = Registration {
        server: server.clone(),
        id,
    };
    req.peer
        .notify(modern_methods::SUBSCRIPTIONS_ACKNOWLEDGED, &ack)
        .await
        .map_err(|e| ErrorObject::internal(e.to_string()))?;
    let peer = &req.peer;
    loop {
        tokio::select! {
            biased;
            _ = req.cancel.cancelled() => {
                return Err(ErrorObject::internal("subscription cancelled"));
            }
            _ = peer.input_closed() => break,
            news = rx.recv() => {
                let Some((method, params)) = news else { break };
                let params = with_meta(params, meta::SUBSCRIPTION_ID, subscription.clone());
                if peer.notify(method, &params).await.is_err() {
                    break;
                }
            }
        }
    }
    Ok(with_meta(
        raw(&serde_json::json!({})),
        meta::SUBSCRIPTION_ID,
        subscription,
    ))
}
