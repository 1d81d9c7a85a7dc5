//! `PostgresStore`: the approval gateway, idempotency store, run store and operator view of purra-core
//! on one PostgreSQL schema shared by any number of host processes.
//!
//! Connections come from a deadpool pool; every statement is prepared once per connection
//! (`prepare_cached`). Every write is one `READ COMMITTED` transaction that takes the row locks it needs
//! (`SELECT … FOR UPDATE` on the approval or the claim) and appends its audit row; the claims' primary
//! key makes a second claim of a key wait for the first's commit and then do nothing. A failure of the
//! connection or the server (serialization failure, deadlock, shutdown, a cut connection) is retried
//! within [`PostgresOptions::retry_for`]; a retried write first looks for the audit row its earlier
//! attempt would have committed (each write carries an operation token), so a commit whose
//! acknowledgement was lost is recognized, not repeated, and recorded as `commit_confirmed`.
//! Retrying never dispatches anything: the store never dispatches.
//!
//! Owners and leases are those of purra-sqlite, measured on the database server's clock, so hosts whose
//! clocks disagree still agree on who is alive; `now` given to
//! [`OperatorStore::reconcile_interrupted_claims`] is taken relative to this host's clock at the call.
//! Events come from `LISTEN` on the schema's channel: a write notifies every audit row it appended
//! right after its commit, in one statement of its own (`pg_notify` inside the transaction would
//! hold PostgreSQL's notification-queue lock through the commit's flush, so writes would commit one
//! after another). A host that dies, or loses its connection, between a commit and that statement
//! leaves the commit unannounced: listeners see it when they next read (a gateway's waiting call
//! when it calls again), never a change that did not commit.

use crate::listen::{Listener, SessionWatch};
use crate::migrate::{migrate, MigrateError, MIGRATIONS};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use purra_core::stored::{
    approval_id, approval_seq, claim_state, from_ns, json_error, outcome_kind, to_ns,
};
use purra_core::{
    request_principal, ApprovalGateway, ApprovalId, ApprovalIntent, ApprovalPage, ApprovalQuery,
    ApprovalRecord, ApprovalRef, ApprovalRequest, ApprovalState, ApprovalView, AuditEntry,
    BoxFuture, ClaimResult, ClaimState, ClaimVerdict, ClaimView, Decision, EffectOutcome,
    EffectPage, EffectQuery, EffectView, ErrorCode, EventSender, IdempotencyKey, IdempotencyStore,
    JsonIdentity, OperatorStore, Reconciliation, ResendClaim, RunId, RunStore, StoreError,
    StoreEvent, StoreEvents, SuspendedRun, Verdict, WebhookEvent, WebhookEventType, INTERRUPTED,
    MAX_PAGE, PRINCIPAL_LABEL,
};
use serde_json::{json, Value};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::task::JoinHandle;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

/// Options of [`PostgresStore::connect_with`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// The PostgreSQL schema holding the store's tables (created if missing); a plain identifier.
    pub schema: String,
    /// How long this store's claims count as in flight without a heartbeat (renewed every quarter).
    pub lease: Duration,
    /// The most connections the pool opens.
    pub pool_size: usize,
    /// How long an operation keeps retrying after connection failures, server restarts,
    /// serialization failures and deadlocks before it fails.
    pub retry_for: Duration,
    /// How long opening a connection may take.
    pub connect_timeout: Duration,
    /// How often the event listener's connection is checked with a round trip on it. A check
    /// unanswered for as long again counts the connection lost (a network that drops packets
    /// without closing the connection tells nothing otherwise): held Streamable HTTP sessions
    /// are read from the store until the listener is back, and subscribers resync.
    pub listener_check: Duration,
}

impl Default for PostgresOptions {
    /// Schema `purra`, a 60 s lease, 16 connections, 30 s of retries, 5 s to connect, the
    /// listener checked every 5 s.
    fn default() -> Self {
        PostgresOptions {
            schema: "purra".into(),
            lease: Duration::from_secs(60),
            pool_size: 16,
            retry_for: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            listener_check: Duration::from_secs(5),
        }
    }
}

impl PostgresOptions {
    /// Sets the schema.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Sets the lease (at least 4 ms, so the heartbeat has a period).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(4));
        self
    }

    /// Sets the pool size (at least 1).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// Sets how long operations retry.
    pub fn retry_for(mut self, retry_for: Duration) -> Self {
        self.retry_for = retry_for;
        self
    }

    /// Sets the connect timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets how often the event listener's connection is checked (at least 10 ms).
    pub fn listener_check(mut self, every: Duration) -> Self {
        self.listener_check = every.max(Duration::from_millis(10));
        self
    }
}

/// A durable store of approvals, claims, receipts, suspended runs and an append-only audit log in a
/// PostgreSQL schema, shared by every host that connects to it.
///
/// Cloning is cheap and shares the pool. Dropping the last handle closes the owner (its remaining
/// in-flight claims count as interrupted from then on).
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("owner", &self.inner.owner)
            .field("schema", &self.inner.options.schema)
            .finish_non_exhaustive()
    }
}

struct Inner {
    pool: Pool,
    /// The connection settings (search path included), for the listener and the closing connection.
    config: tokio_postgres::Config,
    options: PostgresOptions,
    owner: String,
    events: EventSender,
    heartbeat: JoinHandle<()>,
    listener: Listener,
    /// Streamable HTTP sessions ended or changed, as the listener was notified.
    #[cfg_attr(not(feature = "sessions"), allow(dead_code))]
    sessions: Arc<SessionWatch>,
    /// Numbers this store's operation tokens.
    ops: AtomicU64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.heartbeat.abort();
        self.listener.stop();
        // A clean close, on a connection of its own (the pool's connections belong to a runtime that
        // may be shutting down): claims this owner left without outcome are interrupted from now on.
        let config = self.config.clone();
        let owner = self.owner.clone();
        let closing = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async {
                    let _ =
                        tokio::time::timeout(Duration::from_secs(5), close_owner(config, owner))
                            .await;
                });
            }
        });
        let _ = closing.join();
    }
}

async fn close_owner(config: tokio_postgres::Config, owner: String) -> Result<(), Error> {
    let (mut client, conn) = config.connect(NoTls).await?;
    let driver = tokio::spawn(conn);
    let tx = client.transaction().await?;
    tx.execute(
        "UPDATE owners SET closed_at_ns = now_ns() WHERE owner = $1 AND closed_at_ns IS NULL",
        &[&owner],
    )
    .await?;
    tx.execute(
        "INSERT INTO audit (at_ns, owner, event, detail) VALUES ($1, $2, 'closed', '{}')",
        &[&now_ns(), &owner],
    )
    .await?;
    tx.commit().await?;
    drop(client);
    let _ = driver.await;
    Ok(())
}

/// What can go wrong inside one attempt.
#[derive(Debug)]
pub(crate) enum Error {
    /// The database (or the connection to it).
    Db(tokio_postgres::Error),
    /// The pool could not give a connection.
    Pool(String),
    /// A final answer of the contract (`NotFound`, `Conflict`, malformed stored data).
    Store(StoreError),
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        Error::Db(e)
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        Error::Pool(e.to_string())
    }
}

impl Error {
    /// Whether another attempt may succeed: the connection or the server failed, or the transaction
    /// lost a serialization or deadlock race. Never a contract answer.
    fn retryable(&self) -> bool {
        match self {
            Error::Pool(_) => true,
            Error::Store(_) => false,
            Error::Db(e) => match e.code() {
                None => true,
                Some(code) => {
                    *code == SqlState::T_R_SERIALIZATION_FAILURE
                        || *code == SqlState::T_R_DEADLOCK_DETECTED
                        || *code == SqlState::ADMIN_SHUTDOWN
                        || *code == SqlState::CRASH_SHUTDOWN
                        || *code == SqlState::CANNOT_CONNECT_NOW
                        || *code == SqlState::TOO_MANY_CONNECTIONS
                        || code.code().starts_with("08")
                }
            },
        }
    }

    fn into_store(self) -> StoreError {
        match self {
            Error::Store(e) => e,
            Error::Pool(e) => StoreError::Backend(format!("no connection: {e}")),
            Error::Db(e) => StoreError::Backend(db_text(&e)),
        }
    }
}

/// The database error's own message (never a connection string).
fn db_text(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}

pub(crate) fn now_ns() -> i64 {
    to_ns(SystemTime::now()).unwrap_or(0)
}

/// A connection statements run on: a pooled connection, or one inside a transaction ([`Tx`]).
pub(crate) trait Conn: Sync {
    /// The connection.
    fn client(&self) -> &deadpool_postgres::ClientWrapper;
    /// The transaction, when the statements run inside one.
    fn tx(&self) -> Option<&Tx<'_>> {
        None
    }
}

impl Conn for deadpool_postgres::Object {
    fn client(&self) -> &deadpool_postgres::ClientWrapper {
        self
    }
}

impl Conn for Tx<'_> {
    fn client(&self) -> &deadpool_postgres::ClientWrapper {
        self.client
    }

    fn tx(&self) -> Option<&Tx<'_>> {
        Some(self)
    }
}

/// One transaction on a pooled connection ([`PostgresStore::transact`]). Its `BEGIN` is sent
/// with its first statement (not waited for on its own), and the audit rows it appends are
/// inserted in one statement sent together with its `COMMIT`: a write's round trips are its
/// reads and writes, plus one.
pub(crate) struct Tx<'a> {
    client: &'a deadpool_postgres::ClientWrapper,
    /// The audit rows appended and not yet inserted, in order.
    audits: std::sync::Mutex<Vec<PendingAudit>>,
    /// The notifications of the audit rows inserted, sent once the transaction commits.
    notes: std::sync::Mutex<Vec<String>>,
}

/// An audit row appended in a [`Tx`], inserted with the others before its commit (or before a
/// statement of the transaction that reads the audit log).
struct PendingAudit {
    at_ns: i64,
    owner: String,
    event: String,
    approval_id: Option<String>,
    claim_key: Option<String>,
    run_id: Option<String>,
    detail: String,
    op: Option<String>,
    /// Its notification's `verdict`, when a listener turns the row into an event.
    notify: Option<Value>,
}

/// Inserts a transaction's audit rows in the order they were appended; their `seq`s.
const INSERT_AUDITS: &str =
    "INSERT INTO audit (at_ns, owner, event, approval_id, claim_key, run_id, detail, op)
     SELECT at_ns, owner, event, approval_id, claim_key, run_id, detail, op
     FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                 $7::text[], $8::text[])
          WITH ORDINALITY AS t(at_ns, owner, event, approval_id, claim_key, run_id, detail, op, i)
     ORDER BY i RETURNING seq";

/// Polls `f` once: its output if it is ready. A statement's future sends the statement on its
/// first poll, so what is sent after this is queued behind it on the connection.
async fn poll_once<F: Future>(mut f: std::pin::Pin<&mut F>) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match f.as_mut().poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

impl<'a> Tx<'a> {
    fn new(client: &'a deadpool_postgres::ClientWrapper) -> Tx<'a> {
        Tx {
            client,
            audits: std::sync::Mutex::new(Vec::new()),
            notes: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The audit rows appended so far, taken.
    fn take_audits(&self) -> Vec<PendingAudit> {
        std::mem::take(&mut *self.audits.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Before `sql` runs in this transaction: a statement that reads or writes the audit log
    /// first sees the rows appended before it.
    async fn before(&self, sql: &str) -> Result<(), Error> {
        if !sql.contains("audit") {
            return Ok(());
        }
        let rows = self.take_audits();
        if rows.is_empty() {
            return Ok(());
        }
        let stmt = self.client.prepare_cached(INSERT_AUDITS).await?;
        let inserted = self
            .client
            .query(&stmt, &audit_params(&rows).refs())
            .await?;
        self.noted(&rows, &inserted);
        Ok(())
    }

    /// The notifications of `rows`, inserted as `inserted` (their `seq`s), kept for the commit.
    fn noted(&self, rows: &[PendingAudit], inserted: &[Row]) {
        // Identities are drawn in insertion order, which is the order the rows were appended.
        let mut seqs: Vec<i64> = inserted.iter().map(|r| r.get(0)).collect();
        seqs.sort_unstable();
        let mut notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        for (row, seq) in rows.iter().zip(seqs) {
            if let Some(verdict) = &row.notify {
                notes.push(
                    json!({"seq": seq, "event": row.event, "approval": row.approval_id,
                           "key": row.claim_key, "verdict": verdict})
                    .to_string(),
                );
            }
        }
    }

    /// Inserts the audit rows still pending and commits, both sent at once (one round trip): a
    /// failed insert leaves the transaction aborted, and its `COMMIT` rolls it back. The
    /// notifications to send.
    async fn commit(&self) -> Result<Vec<String>, Error> {
        let rows = self.take_audits();
        if rows.is_empty() {
            self.client.batch_execute("COMMIT").await?;
        } else {
            let stmt = self.client.prepare_cached(INSERT_AUDITS).await?;
            let params = audit_params(&rows);
            let refs = params.refs();
            let mut insert = std::pin::pin!(self.client.query(&stmt, &refs));
            let first = poll_once(insert.as_mut()).await;
            let commit = self.client.batch_execute("COMMIT");
            let (inserted, committed) = match first {
                Some(inserted) => (inserted, commit.await),
                None => tokio::join!(insert, commit),
            };
            let inserted = inserted?;
            committed?;
            self.noted(&rows, &inserted);
        }
        Ok(std::mem::take(
            &mut *self.notes.lock().unwrap_or_else(|e| e.into_inner()),
        ))
    }
}

/// The columns of pending audit rows, as [`INSERT_AUDITS`]'s arrays.
struct AuditParams {
    at_ns: Vec<i64>,
    owner: Vec<String>,
    event: Vec<String>,
    approval_id: Vec<Option<String>>,
    claim_key: Vec<Option<String>>,
    run_id: Vec<Option<String>>,
    detail: Vec<String>,
    op: Vec<Option<String>>,
}

impl AuditParams {
    fn refs(&self) -> [&(dyn ToSql + Sync); 8] {
        [
            &self.at_ns,
            &self.owner,
            &self.event,
            &self.approval_id,
            &self.claim_key,
            &self.run_id,
            &self.detail,
            &self.op,
        ]
    }
}

fn audit_params(rows: &[PendingAudit]) -> AuditParams {
    AuditParams {
        at_ns: rows.iter().map(|r| r.at_ns).collect(),
        owner: rows.iter().map(|r| r.owner.clone()).collect(),
        event: rows.iter().map(|r| r.event.clone()).collect(),
        approval_id: rows.iter().map(|r| r.approval_id.clone()).collect(),
        claim_key: rows.iter().map(|r| r.claim_key.clone()).collect(),
        run_id: rows.iter().map(|r| r.run_id.clone()).collect(),
        detail: rows.iter().map(|r| r.detail.clone()).collect(),
        op: rows.iter().map(|r| r.op.clone()).collect(),
    }
}

/// A pooled connection inside a transaction. Dropped before the transaction ended (a cancelled
/// operation, a failed `COMMIT` or `ROLLBACK`), the connection is closed, not returned to the
/// pool: closing it ends the transaction on the server.
struct Open {
    client: Option<deadpool_postgres::Object>,
    done: std::cell::Cell<bool>,
}

impl Drop for Open {
    fn drop(&mut self) {
        if !self.done.get() {
            if let Some(client) = self.client.take() {
                drop(deadpool_postgres::Object::take(client));
            }
        }
    }
}

pub(crate) async fn exec<C: Conn + ?Sized>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, Error> {
    if let Some(tx) = c.tx() {
        tx.before(sql).await?;
    }
    let stmt = c.client().prepare_cached(sql).await?;
    Ok(c.client().execute(&stmt, params).await?)
}

pub(crate) async fn query<C: Conn + ?Sized>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, Error> {
    if let Some(tx) = c.tx() {
        tx.before(sql).await?;
    }
    let stmt = c.client().prepare_cached(sql).await?;
    Ok(c.client().query(&stmt, params).await?)
}

pub(crate) async fn query_opt<C: Conn + ?Sized>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, Error> {
    if let Some(tx) = c.tx() {
        tx.before(sql).await?;
    }
    let stmt = c.client().prepare_cached(sql).await?;
    Ok(c.client().query_opt(&stmt, params).await?)
}

/// One audit row to append.
pub(crate) struct Audit<'a> {
    event: &'a str,
    approval_id: Option<&'a str>,
    claim_key: Option<&'a str>,
    run_id: Option<&'a str>,
    detail: Value,
}

impl<'a> Audit<'a> {
    pub(crate) fn new(event: &'a str, detail: Value) -> Audit<'a> {
        Audit {
            event,
            approval_id: None,
            claim_key: None,
            run_id: None,
            detail,
        }
    }

    pub(crate) fn approval(mut self, id: &'a str) -> Self {
        self.approval_id = Some(id);
        self
    }

    pub(crate) fn key(mut self, key: &'a str) -> Self {
        self.claim_key = Some(key);
        self
    }

    pub(crate) fn run(mut self, run: &'a str) -> Self {
        self.run_id = Some(run);
        self
    }
}

/// Appends one audit row in `tx`, with the operation token `op` (the witness of the commit), and
/// its notification (`{"seq","event","approval","key","verdict"}`), sent after the commit
/// ([`PostgresStore::transact`]). The row is inserted with the transaction's others, at its
/// commit ([`Tx`]).
pub(crate) async fn append(
    tx: &Tx<'_>,
    me: &str,
    op: Option<&str>,
    row: Audit<'_>,
) -> Result<(), Error> {
    let verdict = if row.event == "decided" {
        row.detail.get("verdict").cloned().unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    // Only the rows a listener turns into an event are announced.
    let shown = json!({"verdict": verdict});
    let announced =
        StoreEvent::from_audit(row.event, row.approval_id, row.claim_key, &shown).is_some();
    let pending = PendingAudit {
        at_ns: now_ns(),
        owner: me.to_owned(),
        event: row.event.to_owned(),
        approval_id: row.approval_id.map(str::to_owned),
        claim_key: row.claim_key.map(str::to_owned),
        run_id: row.run_id.map(str::to_owned),
        detail: row.detail.to_string(),
        op: op.map(str::to_owned),
        notify: announced.then_some(verdict),
    };
    tx.audits
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(pending);
    Ok(())
}

/// The audit row an earlier attempt of operation `op` committed, if it did: event, approval, key,
/// detail. When found, a `commit_confirmed` row records that the acknowledgement was lost.
pub(crate) async fn witness(
    tx: &Tx<'_>,
    me: &str,
    op: &str,
) -> Result<Option<(String, Option<String>, Option<String>, Value)>, Error> {
    let Some(row) = query_opt(
        tx,
        "SELECT seq, event, approval_id, claim_key, detail FROM audit WHERE op = $1
         ORDER BY seq LIMIT 1",
        &[&op],
    )
    .await?
    else {
        return Ok(None);
    };
    let seq: i64 = row.get(0);
    let event: String = row.get(1);
    let approval: Option<String> = row.get(2);
    let key: Option<String> = row.get(3);
    let detail: Value = serde_json::from_str(row.get::<_, &str>(4)).map_err(json_error)?;
    let mut confirm = Audit::new(
        "commit_confirmed",
        json!({"op": op, "confirms": event, "seq": seq,
               "why": "the commit's acknowledgement was lost; the retry found it committed"}),
    );
    confirm.approval_id = approval.as_deref();
    confirm.claim_key = key.as_deref();
    append(tx, me, None, confirm).await?;
    Ok(Some((event, approval, key, detail)))
}

/// An approval to insert, written down once before its transaction (retried attempts reuse it).
pub(crate) struct NewApproval {
    intent_json: String,
    digest: String,
    request_json: String,
    request_expires: Option<i64>,
    tool: String,
    run: String,
    shown: Value,
    principal: Option<String>,
    /// The request, for its `approval.pending` event.
    request: ApprovalRequest,
}

impl NewApproval {
    /// `request`, checked (its arguments and binding are the intent's) and written down.
    pub(crate) fn of(request: &ApprovalRequest) -> Result<NewApproval, StoreError> {
        request.check()?;
        let intent = &request.intent;
        to_ns(request.requested_at)?;
        Ok(NewApproval {
            intent_json: serde_json::to_string(intent).map_err(json_error)?,
            digest: intent.digest().to_string(),
            request_json: serde_json::to_string(request).map_err(json_error)?,
            request_expires: request.expires_at.map(to_ns).transpose()?,
            tool: intent.tool.clone(),
            run: intent.run_id.as_str().to_owned(),
            shown: intent.to_json(),
            principal: request.labels.get(PRINCIPAL_LABEL).cloned(),
            request: request.clone(),
        })
    }
}

/// Inserts `row` as a pending approval with its `prepared` audit row (witnessed by `op`) and its
/// `approval.pending` event; its id.
pub(crate) async fn insert_approval(
    tx: &Tx<'_>,
    me: &str,
    op: &str,
    row: &NewApproval,
) -> Result<ApprovalId, Error> {
    insert_prepared(tx, me, op, row, true).await
}

/// [`insert_approval`], recording the `approval.pending` event only when `pending_event` (an
/// approval a grant approves in the same transaction never waits for anyone).
pub(crate) async fn insert_prepared(
    tx: &Tx<'_>,
    me: &str,
    op: &str,
    row: &NewApproval,
    pending_event: bool,
) -> Result<ApprovalId, Error> {
    let inserted = query_opt(
        tx,
        "INSERT INTO approvals (intent_json, intent_digest, tool, run_id, prepared_at_ns,
             prepared_by, state, request_json, request_expires_at_ns, principal)
         VALUES ($1, $2, $3, $4, $5, $6, 'prepared', $7, $8, $9)
         RETURNING seq, EXISTS (SELECT 1 FROM webhook_subscriptions WHERE event = $10)",
        &[
            &row.intent_json,
            &row.digest,
            &row.tool,
            &row.run,
            &now_ns(),
            &me,
            &row.request_json,
            &row.request_expires,
            &row.principal,
            &WebhookEventType::ApprovalPending.as_str(),
        ],
    )
    .await?
    .ok_or_else(|| StoreError::Backend("no approval inserted".into()))?;
    let id = approval_id(inserted.get(0));
    let wanted: bool = inserted.get(1);
    crate::workflow::insert_rules(tx, inserted.get(0), &row.request).await?;
    append(
        tx,
        me,
        Some(op),
        Audit::new(
            "prepared",
            json!({"intentDigest": row.digest, "intent": row.shown}),
        )
        .approval(&id.0)
        .run(&row.run),
    )
    .await?;
    if pending_event && wanted {
        let event = WebhookEvent::pending(&id, &row.request, SystemTime::now());
        crate::webhook::insert(tx, &event).await?;
    }
    Ok(id)
}

/// Records `decision` on approval `id` in `tx` (its `decided` audit row witnessed by `op`, and
/// the webhook event).
pub(crate) async fn decide_in(
    tx: &Tx<'_>,
    me: &str,
    op: &str,
    id: &ApprovalId,
    decision: &Decision,
) -> Result<(), Error> {
    let seq = approval_seq(id).ok_or(StoreError::NotFound)?;
    let decided_at = to_ns(decision.decided_at)?;
    let expires_at = decision.expires_at.map(to_ns).transpose()?;
    let verdict = match decision.verdict {
        Verdict::Approve => "approve",
        Verdict::Deny => "deny",
    };
    // One statement reads what the decision needs besides the locked row: the quorum rule, whether
    // timers are set, whether an endpoint wants the decided event.
    let row = query_opt(
        tx,
        "SELECT a.state, a.request_expires_at_ns, a.tool, a.principal,
                (SELECT r.votes_required FROM approval_rules r WHERE r.approval_seq = a.seq),
                EXISTS (SELECT 1 FROM approval_rules r WHERE r.approval_seq = a.seq
                        AND (r.escalate_at_ns IS NOT NULL OR r.deny_at_ns IS NOT NULL)),
                EXISTS (SELECT 1 FROM webhook_subscriptions WHERE event = $2)
         FROM approvals a WHERE a.seq = $1 FOR UPDATE OF a",
        &[&seq, &WebhookEventType::ApprovalDecided.as_str()],
    )
    .await?;
    let (required, timers, wanted) = match &row {
        Some(r) => (
            r.get::<_, Option<i64>>(4),
            r.get::<_, bool>(5),
            r.get::<_, bool>(6),
        ),
        None => (None, false, false),
    };
    let approval = match row {
        None => return Err(StoreError::NotFound.into()),
        Some(r) if r.get::<_, &str>(0) != "prepared" => {
            return Err(StoreError::Conflict("already decided").into())
        }
        Some(r) if r.get::<_, Option<i64>>(1).is_some_and(|u| u <= decided_at) => {
            return Err(StoreError::Conflict("the approval request expired").into())
        }
        Some(r) => ApprovalRef {
            id: id.clone(),
            tool: r.get(2),
            principal: r.get(3),
        },
    };
    // An approval that needs a quorum takes the decision as one vote; it decides only with the
    // quorum (or a deny).
    let voted = crate::workflow::vote_in(tx, me, op, seq, required, decision, &approval).await?;
    if voted == crate::workflow::Voted::Pending {
        return Ok(());
    }
    if timers {
        crate::workflow::clear_timers(tx, seq).await?;
    }
    exec(
        tx,
        "UPDATE approvals SET state = 'decided', verdict = $1, approver = $2,
                decided_at_ns = $3, expires_at_ns = $4, note = $5
         WHERE seq = $6",
        &[
            &verdict,
            &decision.approver,
            &decided_at,
            &expires_at,
            &decision.note,
            &seq,
        ],
    )
    .await?;
    append(
        tx,
        me,
        Some(op),
        Audit::new(
            "decided",
            json!({"verdict": verdict, "approver": decision.approver,
                   "decidedAtNs": decided_at, "expiresAtNs": expires_at,
                   "note": decision.note}),
        )
        .approval(&id.0),
    )
    .await?;
    if wanted {
        let event = WebhookEvent::decided(&approval, decision, SystemTime::now());
        crate::webhook::insert(tx, &event).await?;
    }
    Ok(())
}

/// Claims approval `id` (row `seq`) in `tx` for `current_intent` at `now` under operation token
/// `op` ([`ApprovalGateway::check_and_claim`]); on a `retry`, an earlier attempt's committed
/// claim is found by its token and answered again.
#[allow(clippy::too_many_arguments)] // One claim's parts, and the attempt's token.
pub(crate) async fn claim_in(
    tx: &Tx<'_>,
    me: &str,
    op: &str,
    retry: bool,
    seq: i64,
    id: &ApprovalId,
    current_intent: &JsonIdentity,
    now: i64,
) -> Result<ClaimVerdict, Error> {
    // The approval's row lock orders every claimant of this approval; the claims' key
    // orders claimants of the same intent through other approvals.
    let row = query_opt(
        tx,
        "SELECT a.state, a.intent_digest, a.verdict, a.expires_at_ns,
                (SELECT r.votes_required FROM approval_rules r WHERE r.approval_seq = a.seq)
         FROM approvals a WHERE a.seq = $1 FOR UPDATE OF a",
        &[&seq],
    )
    .await?
    .ok_or(StoreError::NotFound)?;
    if retry {
        // Holding the lock, an earlier attempt is over: committed or not.
        if let Some((event, _, key, detail)) = witness(tx, me, op).await? {
            return Ok(match (event.as_str(), detail["reason"].as_str()) {
                ("claimed", _) => ClaimVerdict::Claimed(IdempotencyKey(key.unwrap_or_default())),
                ("refused", Some("expired")) => ClaimVerdict::Expired,
                ("refused", _) => ClaimVerdict::Mismatch,
                _ => ClaimVerdict::AlreadyClaimed,
            });
        }
    }
    let state: &str = row.get(0);
    let digest: String = row.get(1);
    let verdict: Option<&str> = row.get(2);
    let expires_at: Option<i64> = row.get(3);
    let refuse = |verdict: ClaimVerdict, event: &'static str, why: &'static str| {
        let detail = json!({"reason": why, "currentIntent": current_intent.as_str(),
                            "nowNs": now, "effect": "not_started"});
        (verdict, event, detail)
    };
    // The quorum is counted again here, in the claim's transaction (holding
    // the approval's row lock every vote takes): an approval short of its
    // approving votes is still pending, whatever its row says.
    let required: Option<i64> = row.get(4);
    let short = state == "decided"
        && verdict == Some("approve")
        && crate::workflow::quorum_missing(tx, seq, required).await?;
    let refused = match (state, verdict) {
        ("prepared", _) => return Ok(ClaimVerdict::Pending),
        ("decided", Some("deny")) => return Ok(ClaimVerdict::Denied),
        ("decided", _) if short => return Ok(ClaimVerdict::Pending),
        ("claimed" | "refused", _) => Some(refuse(
            ClaimVerdict::AlreadyClaimed,
            "claim_refused",
            "already_claimed",
        )),
        _ if expires_at.is_some_and(|e| e <= now) => {
            exec(
                tx,
                "UPDATE approvals SET state = 'refused', refused_reason = 'expired'
                 WHERE seq = $1",
                &[&seq],
            )
            .await?;
            Some(refuse(ClaimVerdict::Expired, "refused", "expired"))
        }
        _ if digest != current_intent.as_str() => {
            exec(
                tx,
                "UPDATE approvals SET state = 'refused', refused_reason = 'mismatch'
                 WHERE seq = $1",
                &[&seq],
            )
            .await?;
            Some(refuse(ClaimVerdict::Mismatch, "refused", "mismatch"))
        }
        _ => {
            // The claim, the owner's lease renewed when half spent (a claim is proof of life;
            // see `insert_claim`) and the approval marked claimed, in one statement: `claimed`
            // says whether the key was free.
            let claimed = query_opt(
                tx,
                "WITH c AS (INSERT INTO claims (key, owner, approval_seq, claimed_at_ns)
                            VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO NOTHING RETURNING key),
                      h AS (UPDATE owners SET heartbeat_at_ns = GREATEST(heartbeat_at_ns, now_ns())
                            WHERE owner = $2 AND EXISTS (SELECT 1 FROM c)
                              AND heartbeat_at_ns < now_ns() - lease_ns / 2),
                      u AS (UPDATE approvals SET state = 'claimed'
                            WHERE seq = $3 AND EXISTS (SELECT 1 FROM c))
                 SELECT count(*) FROM c",
                &[&digest, &me, &seq, &now_ns()],
            )
            .await?
            .is_some_and(|r| r.get::<_, i64>(0) == 1);
            if claimed {
                append(
                    tx,
                    me,
                    Some(op),
                    Audit::new("claimed", json!({"nowNs": now}))
                        .approval(&id.0)
                        .key(&digest),
                )
                .await?;
                None
            } else {
                Some(refuse(
                    ClaimVerdict::AlreadyClaimed,
                    "claim_refused",
                    "key_already_claimed",
                ))
            }
        }
    };
    match refused {
        None => Ok(ClaimVerdict::Claimed(IdempotencyKey(digest))),
        Some((verdict, event, detail)) => {
            append(
                tx,
                me,
                Some(op),
                Audit::new(event, detail).approval(&id.0).key(&digest),
            )
            .await?;
            Ok(verdict)
        }
    }
}

/// Inserts a claim unless the key exists; true when this call claimed it.
async fn insert_claim(
    tx: &Tx<'_>,
    key: &str,
    owner: &str,
    approval: Option<i64>,
) -> Result<bool, Error> {
    let n = exec(
        tx,
        "INSERT INTO claims (key, owner, approval_seq, claimed_at_ns) VALUES ($1, $2, $3, $4)
         ON CONFLICT (key) DO NOTHING",
        &[&key, &owner, &approval, &now_ns()],
    )
    .await?;
    if n == 1 {
        // A claim is also proof of life: this owner's lease is renewed in the same transaction
        // when half of it is spent. Only then: the renewal locks the owner's row until the
        // commit, and every claim of this process renewing it would queue its commit behind the
        // others' (the heartbeat renews it every quarter of the lease in any case, so a claim
        // always has at least half a lease ahead of it).
        exec(
            tx,
            "UPDATE owners SET heartbeat_at_ns = GREATEST(heartbeat_at_ns, now_ns())
             WHERE owner = $1 AND heartbeat_at_ns < now_ns() - lease_ns / 2",
            &[&owner],
        )
        .await?;
    }
    Ok(n == 1)
}

/// The row of one claim: `None` if never claimed, `Some(None)` if in flight.
pub(crate) async fn read_claim<C: Conn>(
    c: &C,
    key: &str,
    lock: bool,
) -> Result<Option<Option<String>>, Error> {
    let sql = if lock {
        "SELECT outcome_json FROM claims WHERE key = $1 FOR UPDATE"
    } else {
        "SELECT outcome_json FROM claims WHERE key = $1"
    };
    Ok(query_opt(c, sql, &[&key]).await?.map(|r| r.get(0)))
}

/// Records the effect event of claim `key` completed with `outcome` (none for `not_started`), for
/// the endpoints subscribed to it.
pub(crate) async fn record_effect(
    tx: &Tx<'_>,
    key: &IdempotencyKey,
    outcome: &EffectOutcome,
    reconciled: bool,
) -> Result<(), Error> {
    let Some(event_type) = WebhookEvent::effect_type(outcome) else {
        return Ok(());
    };
    let wanted = crate::webhook::wanted(tx, event_type).await?;
    record_effect_if(tx, key, outcome, reconciled, wanted).await
}

/// [`record_effect`], knowing whether an endpoint is subscribed to the effect's event type.
pub(crate) async fn record_effect_if(
    tx: &Tx<'_>,
    key: &IdempotencyKey,
    outcome: &EffectOutcome,
    reconciled: bool,
    wanted: bool,
) -> Result<(), Error> {
    if !wanted {
        return Ok(());
    }
    let approval = crate::webhook::approval_of_claim(tx, &key.0).await?;
    if let Some(event) = WebhookEvent::effect(
        key,
        approval.as_ref(),
        outcome,
        reconciled,
        SystemTime::now(),
    ) {
        crate::webhook::insert(tx, &event).await?;
    }
    Ok(())
}

static OWNER_COUNTER: AtomicU64 = AtomicU64::new(0);

/// `url` without its `schema=NAME` query parameter, and the name.
pub(crate) fn split_schema(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut schema = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|p| match p.strip_prefix("schema=") {
            Some(name) => {
                schema = Some(name.to_owned());
                false
            }
            None => true,
        })
        .collect();
    if rest.is_empty() {
        (base.to_owned(), schema)
    } else {
        (format!("{base}?{}", rest.join("&")), schema)
    }
}

/// `url` with its password replaced by `***`, for messages.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.split_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

/// Checks that a schema name is a plain identifier (it is spliced into SQL, quoted).
fn check_schema(schema: &str) -> Result<(), StoreError> {
    let ok = !schema.is_empty()
        && schema.len() <= 48
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && !schema.starts_with("pg_");
    if ok {
        Ok(())
    } else {
        Err(StoreError::Backend(format!(
            "schema name {schema:?}: use lowercase letters, digits and _ (at most 48, not pg_…)"
        )))
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`, or the
    /// key-value form) with the default options. A `schema=NAME` query parameter of the URL (purra's
    /// own, removed before connecting) picks the schema.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::connect_with(url, PostgresOptions::default()).await
    }

    /// Connects, creates or migrates the schema, registers a new owner with a lease, and starts the
    /// heartbeat and the event listener.
    pub async fn connect_with(
        url: &str,
        options: PostgresOptions,
    ) -> Result<PostgresStore, StoreError> {
        let (url, schema) = split_schema(url);
        let mut options = options;
        if let Some(schema) = schema {
            options.schema = schema;
        }
        check_schema(&options.schema)?;
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|e: tokio_postgres::Error| {
                StoreError::Backend(format!("database URL: {e}"))
            })?;
        config
            .connect_timeout(options.connect_timeout)
            .options(format!("-c search_path={}", options.schema))
            .application_name("purra");
        let lease = options.lease.max(Duration::from_millis(4));
        let lease_ns = i64::try_from(lease.as_nanos()).unwrap_or(i64::MAX);
        let pid = std::process::id();
        let owner = format!(
            "{pid}-{}-{}",
            now_ns(),
            OWNER_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        {
            let (mut client, conn) = config
                .connect(NoTls)
                .await
                .map_err(|e| StoreError::Backend(format!("connecting: {}", db_text(&e))))?;
            let driver = tokio::spawn(conn);
            let migrated = migrate(&mut client, &options.schema).await;
            let known = MIGRATIONS.len();
            match migrated {
                Ok(()) => {}
                Err(MigrateError::Newer(found)) => {
                    return Err(StoreError::Backend(format!(
                        "schema version {found} is newer than this build of purra-postgres knows ({known})"
                    )))
                }
                Err(MigrateError::Db(e)) => {
                    return Err(StoreError::Backend(format!("migrating: {}", db_text(&e))))
                }
            }
            let tx = client
                .transaction()
                .await
                .map_err(|e| Error::Db(e).into_store())?;
            let opened = async {
                tx.execute(
                    "INSERT INTO owners (owner, pid, opened_at_ns, heartbeat_at_ns, lease_ns)
                     VALUES ($1, $2, now_ns(), now_ns(), $3)",
                    &[&owner, &i64::from(pid), &lease_ns],
                )
                .await?;
                tx.execute(
                    "INSERT INTO audit (at_ns, owner, event, detail) VALUES ($1, $2, 'opened', $3)",
                    &[
                        &now_ns(),
                        &owner,
                        &json!({"pid": pid, "leaseNs": lease_ns}).to_string(),
                    ],
                )
                .await?;
                tx.commit().await
            };
            opened.await.map_err(|e| Error::Db(e).into_store())?;
            drop(client);
            let _ = driver.await;
        }
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .create_timeout(Some(options.connect_timeout))
            .wait_timeout(Some(options.retry_for))
            .build()
            .map_err(|e| StoreError::Backend(format!("pool: {e}")))?;
        let events = EventSender::new();
        let sessions = Arc::new(SessionWatch::default());
        let listener = Listener::start(
            config.clone(),
            &options.schema,
            options.listener_check.max(Duration::from_millis(10)),
            events.clone(),
            Arc::clone(&sessions),
        )
        .await?;
        let heartbeat = {
            let pool = pool.clone();
            let owner = owner.clone();
            let period = lease / 4;
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(period).await;
                    // A failed renewal is retried next period; the lease allows three misses.
                    if let Ok(client) = pool.get().await {
                        let _ = exec(
                            &client,
                            "UPDATE owners SET heartbeat_at_ns = GREATEST(heartbeat_at_ns, now_ns())
                             WHERE owner = $1",
                            &[&owner],
                        )
                        .await;
                    }
                }
            })
        };
        Ok(PostgresStore {
            inner: Arc::new(Inner {
                pool,
                config,
                options,
                owner,
                events,
                heartbeat,
                listener,
                sessions,
                ops: AtomicU64::new(0),
            }),
        })
    }

    /// This store's owner id, recorded with its claims and audit rows.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// Streamable HTTP sessions ended or changed, as notified.
    #[cfg(feature = "sessions")]
    pub(crate) fn session_watch(&self) -> &SessionWatch {
        &self.inner.sessions
    }

    /// The schema this store lives in.
    pub fn schema(&self) -> &str {
        &self.inner.options.schema
    }

    /// A new operation token: the witness an attempt's audit row carries.
    pub(crate) fn op_token(&self) -> String {
        format!(
            "{}:{}",
            self.inner.owner,
            self.inner.ops.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Runs `attempt` in one transaction on a pooled connection, retrying it within the retry budget
    /// while the failure is retryable. `attempt` gets whether this is a retry.
    pub(crate) fn transact<T, F>(&self, attempt: F) -> BoxFuture<'_, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: for<'t> Fn(&'t Tx<'t>, &'t str, bool) -> BoxFuture<'t, Result<T, Error>>
            + Send
            + Sync
            + 'static,
    {
        Box::pin(async move {
            let deadline = Instant::now() + self.inner.options.retry_for;
            let mut delay = Duration::from_millis(20);
            let mut retry = false;
            loop {
                let result = async {
                    let open = Open {
                        client: Some(self.inner.pool.get().await?),
                        done: std::cell::Cell::new(false),
                    };
                    let client: &deadpool_postgres::ClientWrapper = open
                        .client
                        .as_ref()
                        .ok_or_else(|| Error::Pool("no connection".into()))?;
                    let tx = Tx::new(client);
                    // `BEGIN` goes out with the attempt's first statement; its answer is read
                    // once the attempt is done (it fails only with the connection, and then so
                    // does every statement after it).
                    let mut begin = std::pin::pin!(client.batch_execute("BEGIN"));
                    let begun = poll_once(begin.as_mut()).await;
                    let attempted = attempt(&tx, &self.inner.owner, retry).await;
                    match begun {
                        Some(begun) => begun?,
                        None => begin.await?,
                    }
                    let value = match attempted {
                        Ok(value) => value,
                        Err(e) => {
                            if client.batch_execute("ROLLBACK").await.is_ok() {
                                open.done.set(true);
                            }
                            return Err(e);
                        }
                    };
                    let notes = tx.commit().await?;
                    open.done.set(true);
                    // Committed: the notifications in a statement of their own, best effort
                    // (the write stands; only its announcement can be lost), sent and not
                    // waited for: the next statement on this connection queues behind it.
                    if !notes.is_empty() {
                        if let Ok(stmt) = client
                            .prepare_cached(
                                "SELECT pg_notify('purra:' || current_schema(), n)
                                 FROM unnest($1::text[]) WITH ORDINALITY AS t(n, i) ORDER BY i",
                            )
                            .await
                        {
                            let params: [&(dyn ToSql + Sync); 1] = [&notes];
                            let mut sent = std::pin::pin!(client.execute(&stmt, &params));
                            let _ = poll_once(sent.as_mut()).await;
                        }
                    }
                    Ok::<T, Error>(value)
                }
                .await;
                match result {
                    Ok(value) => return Ok(value),
                    Err(e) if e.retryable() && Instant::now() < deadline => {
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(1));
                        retry = true;
                    }
                    Err(e) => return Err(e.into_store()),
                }
            }
        })
    }

    /// Runs a read on a pooled connection, retried like [`PostgresStore::transact`].
    pub(crate) fn read<T, F, Fut>(&self, read: F) -> BoxFuture<'_, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: Fn(deadpool_postgres::Object) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, Error>> + Send,
    {
        Box::pin(async move {
            let deadline = Instant::now() + self.inner.options.retry_for;
            let mut delay = Duration::from_millis(20);
            loop {
                let result = async {
                    let client = self.inner.pool.get().await?;
                    read(client).await
                }
                .await;
                match result {
                    Ok(value) => return Ok(value),
                    Err(e) if e.retryable() && Instant::now() < deadline => {
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(1));
                    }
                    Err(e) => return Err(e.into_store()),
                }
            }
        })
    }
}

/// Saves (or replaces) a suspended run, with its `run_suspended` audit row.
async fn save_run_in(tx: &Tx<'_>, me: &str, run: &SuspendedRun) -> Result<(), Error> {
    let run_json = serde_json::to_string(run).map_err(json_error)?;
    exec(
        tx,
        "INSERT INTO suspended_runs (run_id, agent, run_json, saved_at_ns)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (run_id) DO UPDATE SET agent = excluded.agent,
            run_json = excluded.run_json, saved_at_ns = excluded.saved_at_ns",
        &[&run.run_id.as_str(), &run.agent, &run_json, &now_ns()],
    )
    .await?;
    append(
        tx,
        me,
        None,
        Audit::new(
            "run_suspended",
            json!({"intentDigest": run.intent_digest.as_str()}),
        )
        .approval(&run.approval_id.0)
        .run(run.run_id.as_str()),
    )
    .await
}

/// Drops a suspended run (a `run_removed` audit row when there was one).
async fn remove_run_in(tx: &Tx<'_>, me: &str, run_id: &RunId) -> Result<(), Error> {
    let n = exec(
        tx,
        "DELETE FROM suspended_runs WHERE run_id = $1",
        &[&run_id.as_str()],
    )
    .await?;
    if n > 0 {
        append(
            tx,
            me,
            None,
            Audit::new("run_removed", json!({})).run(run_id.as_str()),
        )
        .await?;
    }
    Ok(())
}

/// The largest instant (nanoseconds): a request without an expiry sorts as never expiring in
/// `approvals_open_by_principal`, whose expression this is part of.
const NEVER: &str = "9223372036854775807";

// Which approvals `read_views` reads (and `count_views` counts): purra-core's `ApprovalFilter`. `state` and `verdict` are
// spelled into the statement as literals (they come from a fixed set), so the planner can use
// `approvals_by_state` for the pending ones and the partial `approvals_open_by_principal` for a
// principal's open ones; each combination of filters is its own prepared statement, whose
// parameters are numbered in the order its conditions are written.
use purra_core::stored::ApprovalFilter as ViewFilter;

/// A statement's parameters, owned.
type Params = Vec<Box<dyn ToSql + Sync + Send>>;

/// The SQL of an [`ApprovalFilter`](purra_core::stored::ApprovalFilter) for this store.
trait Conditions {
    /// The conditions of this filter on `approvals a`, and their parameters in order.
    fn conditions(&self) -> (String, Params);
}

impl Conditions for ViewFilter {
    /// The conditions of this filter on `approvals a`, and their parameters in order.
    fn conditions(&self) -> (String, Params) {
        let mut params: Params = vec![Box::new(self.after)];
        let mut sql = String::from("a.seq > $1");
        let mut param = |sql: &mut String, text: &str, value: Box<dyn ToSql + Sync + Send>| {
            params.push(value);
            sql.push_str(&text.replace('?', &format!("${}", params.len())));
        };
        if let Some(before) = self.before {
            param(&mut sql, " AND a.seq < ?", Box::new(before));
        }
        if let Some(seq) = self.seq {
            param(&mut sql, " AND a.seq = ?", Box::new(seq));
        }
        // Literals from a fixed set, never caller text.
        if let Some(state) = self.state {
            sql.push_str(&format!(" AND a.state = '{state}'"));
        }
        if let Some(verdict) = self.verdict {
            sql.push_str(&format!(" AND a.verdict = '{verdict}'"));
        }
        if self.decided {
            sql.push_str(" AND a.state <> 'prepared'");
        }
        if let Some(run) = &self.run_id {
            param(&mut sql, " AND a.run_id = ?", Box::new(run.clone()));
        }
        if let Some(principal) = &self.principal {
            param(
                &mut sql,
                " AND a.principal = ?",
                Box::new(principal.clone()),
            );
        }
        if let Some(at) = self.open_at {
            param(
                &mut sql,
                &format!(
                    " AND a.state = 'prepared' AND coalesce(a.request_expires_at_ns, {NEVER}) > ?"
                ),
                Box::new(at),
            );
        }
        (sql, params)
    }
}

fn borrowed(params: &Params) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// The views of the approvals `filter` selects, in its order.
pub(crate) async fn read_views<C: Conn>(
    c: &C,
    filter: &ViewFilter,
) -> Result<Vec<ApprovalView>, Error> {
    let (conditions, mut params) = filter.conditions();
    params.push(Box::new(i64::from(filter.limit)));
    let order = if filter.newest_first { "DESC" } else { "ASC" };
    let sql = format!(
        "SELECT a.seq, a.intent_json, a.intent_digest, a.state, a.verdict, a.approver,
                a.decided_at_ns, a.expires_at_ns, a.note, a.request_json,
                c.key, c.owner, c.claimed_at_ns, c.outcome_json, c.completed_at_ns
         FROM approvals a LEFT JOIN claims c ON c.approval_seq = a.seq
         WHERE {conditions} ORDER BY a.seq {order} LIMIT ${}",
        params.len()
    );
    let rows = query(c, &sql, &borrowed(&params)).await?;
    rows.iter().map(view_of).collect()
}

/// How many approvals `filter` selects (its order and limit aside).
async fn count_views<C: Conn>(c: &C, filter: &ViewFilter) -> Result<u64, Error> {
    let (conditions, params) = filter.conditions();
    let sql = format!("SELECT count(*) FROM approvals a WHERE {conditions}");
    let rows = query(c, &sql, &borrowed(&params)).await?;
    let n: i64 = rows.first().map_or(0, |r| r.get(0));
    Ok(u64::try_from(n).unwrap_or(0))
}

/// How many approvals `filter` selects, counting no further than `up_to` (its order and limit
/// aside): a read of at most `up_to` rows of its index.
async fn count_views_up_to<C: Conn>(c: &C, filter: &ViewFilter, up_to: u64) -> Result<u64, Error> {
    let (conditions, mut params) = filter.conditions();
    params.push(Box::new(i64::try_from(up_to).unwrap_or(i64::MAX)));
    let sql = format!(
        "SELECT count(*) FROM (SELECT 1 FROM approvals a WHERE {conditions} LIMIT ${}) counted",
        params.len()
    );
    let rows = query(c, &sql, &borrowed(&params)).await?;
    let n: i64 = rows.first().map_or(0, |r| r.get(0));
    Ok(u64::try_from(n).unwrap_or(0))
}

fn view_of(row: &Row) -> Result<ApprovalView, Error> {
    let seq: i64 = row.get(0);
    let intent: ApprovalIntent = serde_json::from_str(row.get::<_, &str>(1)).map_err(json_error)?;
    let intent_digest = JsonIdentity::parse(row.get::<_, &str>(2))
        .ok_or_else(|| StoreError::Backend("stored intent digest is malformed".into()))?;
    let state: &str = row.get(3);
    let decision = match (
        row.get::<_, Option<&str>>(4),
        row.get::<_, Option<String>>(5),
        row.get::<_, Option<i64>>(6),
    ) {
        (Some(v), Some(approver), Some(decided_at)) => Some(Decision {
            verdict: if v == "approve" {
                Verdict::Approve
            } else {
                Verdict::Deny
            },
            approver,
            decided_at: from_ns(decided_at),
            expires_at: row.get::<_, Option<i64>>(7).map(from_ns),
            note: row.get(8),
        }),
        _ => None,
    };
    let request: ApprovalRequest =
        serde_json::from_str(row.get::<_, &str>(9)).map_err(json_error)?;
    if request.intent != intent {
        return Err(StoreError::Backend("inconsistent approval row".into()).into());
    }
    let state = match (state, decision) {
        ("prepared", None) => ApprovalState::Prepared,
        ("decided", Some(d)) => ApprovalState::Decided(d),
        ("claimed", Some(d)) => ApprovalState::Claimed(d),
        ("refused", Some(d)) => ApprovalState::Refused(d),
        _ => return Err(StoreError::Backend("inconsistent approval row".into()).into()),
    };
    let claim = match row.get::<_, Option<String>>(10) {
        None => None,
        Some(key) => Some(ClaimView {
            key: IdempotencyKey(key),
            owner: row.get(11),
            claimed_at: from_ns(row.get(12)),
            state: claim_state(row.get(13))?,
            completed_at: row.get::<_, Option<i64>>(14).map(from_ns),
        }),
    };
    Ok(ApprovalView {
        id: approval_id(seq),
        request,
        intent_digest,
        state,
        claim,
    })
}

const AUDIT_COLUMNS: &str = "seq, at_ns, owner, event, approval_id, claim_key, run_id, detail";

fn audit_of(row: &Row) -> Result<AuditEntry, Error> {
    let detail: Value = serde_json::from_str(row.get::<_, &str>(7)).map_err(json_error)?;
    Ok(AuditEntry::new(
        row.get(0),
        from_ns(row.get(1)),
        row.get(2),
        row.get(3),
        row.get(4),
        row.get(5),
        row.get(6),
        detail,
    ))
}

impl ApprovalGateway for PostgresStore {
    fn is_durable(&self) -> bool {
        true
    }

    fn prepare(&self, request: ApprovalRequest) -> BoxFuture<'_, Result<ApprovalId, StoreError>> {
        let op = self.op_token();
        Box::pin(async move {
            let row = Arc::new(NewApproval::of(&request)?);
            self.transact(move |tx, me, retry| {
                let (op, row) = (op.clone(), Arc::clone(&row));
                Box::pin(async move {
                    if retry {
                        if let Some((_, Some(id), _, _)) = witness(tx, me, &op).await? {
                            return Ok(ApprovalId(id));
                        }
                    }
                    insert_approval(tx, me, &op, &row).await
                })
            })
            .await
        })
    }

    fn decide(&self, id: ApprovalId, decision: Decision) -> BoxFuture<'_, Result<(), StoreError>> {
        let op = self.op_token();
        Box::pin(async move {
            self.transact(move |tx, me, retry| {
                let (op, id, decision) = (op.clone(), id.clone(), decision.clone());
                Box::pin(async move {
                    if let Some(seq) = approval_seq(&id) {
                        query_opt(
                            tx,
                            "SELECT 1 FROM approvals WHERE seq = $1 FOR UPDATE",
                            &[&seq],
                        )
                        .await?;
                    }
                    if retry && witness(tx, me, &op).await?.is_some() {
                        return Ok(());
                    }
                    decide_in(tx, me, &op, &id, &decision).await
                })
            })
            .await
        })
    }

    fn record(&self, id: ApprovalId) -> BoxFuture<'_, Result<Option<ApprovalRecord>, StoreError>> {
        Box::pin(async move {
            let Some(seq) = approval_seq(&id) else {
                return Ok(None);
            };
            let view = self
                .read(move |c| async move { read_views(&c, &ViewFilter::one(seq)).await })
                .await?
                .pop();
            Ok(view.map(|v| ApprovalRecord {
                intent: v.request.intent,
                intent_digest: v.intent_digest,
                state: v.state,
            }))
        })
    }

    fn check_and_claim(
        &self,
        id: ApprovalId,
        current_intent: JsonIdentity,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<ClaimVerdict, StoreError>> {
        let op = self.op_token();
        Box::pin(async move {
            let seq = approval_seq(&id).ok_or(StoreError::NotFound)?;
            let now = to_ns(now)?;
            self.transact(move |tx, me, retry| {
                let (op, id, current_intent) = (op.clone(), id.clone(), current_intent.clone());
                Box::pin(async move {
                    claim_in(tx, me, &op, retry, seq, &id, &current_intent, now).await
                })
            })
            .await
        })
    }

    fn decide_and_claim(
        &self,
        id: ApprovalId,
        decision: Decision,
        current_intent: JsonIdentity,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<ClaimVerdict, StoreError>> {
        // Two operation tokens: a retry finds the decision and the claim each by its own.
        let (decided, claimed) = (self.op_token(), self.op_token());
        Box::pin(async move {
            let seq = approval_seq(&id).ok_or(StoreError::NotFound)?;
            let now = to_ns(now)?;
            let parts = Arc::new((id, decision, current_intent));
            self.transact(move |tx, me, retry| {
                let (decided, claimed, parts) =
                    (decided.clone(), claimed.clone(), Arc::clone(&parts));
                Box::pin(async move {
                    let (id, decision, current_intent) = &*parts;
                    // A retry looks for its earlier attempt's decision holding the approval's
                    // lock; a first attempt takes it with the decision's own read.
                    if retry {
                        query_opt(
                            tx,
                            "SELECT 1 FROM approvals WHERE seq = $1 FOR UPDATE",
                            &[&seq],
                        )
                        .await?;
                    }
                    // Committed by an earlier attempt: the decision and the claim together.
                    if !(retry && witness(tx, me, &decided).await?.is_some()) {
                        decide_in(tx, me, &decided, id, decision).await?;
                    }
                    claim_in(tx, me, &claimed, retry, seq, id, current_intent, now).await
                })
            })
            .await
        })
    }

    fn receipts(&self) -> Arc<dyn IdempotencyStore> {
        Arc::new(self.clone())
    }

    fn subscribe(&self) -> StoreEvents {
        self.inner.events.subscribe()
    }
}

impl IdempotencyStore for PostgresStore {
    fn is_durable(&self) -> bool {
        true
    }

    fn claim(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<ClaimResult, StoreError>> {
        let op = self.op_token();
        self.transact(move |tx, me, retry| {
            let (op, key) = (op.clone(), key.clone());
            Box::pin(async move {
                if retry {
                    if let Some((event, ..)) = witness(tx, me, &op).await? {
                        if event == "claimed" {
                            return Ok(ClaimResult::Claimed);
                        }
                        let existing = read_claim(tx, &key.0, false)
                            .await?
                            .ok_or_else(|| StoreError::Backend("claim vanished".into()))?;
                        return Ok(ClaimResult::Existing(claim_state(existing)?));
                    }
                }
                if insert_claim(tx, &key.0, me, None).await? {
                    append(
                        tx,
                        me,
                        Some(&op),
                        Audit::new("claimed", json!({})).key(&key.0),
                    )
                    .await?;
                    return Ok(ClaimResult::Claimed);
                }
                let existing = read_claim(tx, &key.0, false)
                    .await?
                    .ok_or_else(|| StoreError::Backend("claim vanished".into()))?;
                append(
                    tx,
                    me,
                    Some(&op),
                    Audit::new("claim_refused", json!({"reason": "key_already_claimed"}))
                        .key(&key.0),
                )
                .await?;
                Ok(ClaimResult::Existing(claim_state(existing)?))
            })
        })
    }

    fn complete(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.complete_with(key, outcome, None)
    }

    fn state(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<Option<ClaimState>, StoreError>> {
        self.read(move |c| {
            let key = key.clone();
            async move {
                match read_claim(&c, &key.0, false).await? {
                    None => Ok(None),
                    Some(outcome) => Ok(Some(claim_state(outcome)?)),
                }
            }
        })
    }
}

impl PostgresStore {
    /// Records the outcome of the claim under `key` and, with `run`, drops that suspended run in
    /// the same transaction.
    fn complete_with(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
        run: Option<RunId>,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let op = self.op_token();
        Box::pin(async move {
            let outcome_json = serde_json::to_string(&outcome).map_err(json_error)?;
            // A rejected late outcome is recorded (committed) and then reported as a conflict.
            let rejected = self
                .transact(move |tx, me, retry| {
                    let (op, key, outcome, outcome_json, run) = (
                        op.clone(),
                        key.clone(),
                        outcome.clone(),
                        outcome_json.clone(),
                        run.clone(),
                    );
                    Box::pin(async move {
                        let event_type = WebhookEvent::effect_type(&outcome);
                        // A first attempt records the outcome of a claim still in flight in one
                        // statement (its row lock taken by the update), with whether an endpoint
                        // wants the effect's event; a claim that is missing or has an outcome, or
                        // a retry (which first looks for its earlier attempt), reads it first.
                        if !retry {
                            let updated = query_opt(
                                tx,
                                "UPDATE claims SET outcome = $1, outcome_json = $2,
                                        completed_at_ns = $3
                                 WHERE key = $4 AND outcome_json IS NULL
                                 RETURNING EXISTS (SELECT 1 FROM webhook_subscriptions
                                                   WHERE event = $5)",
                                &[
                                    &outcome_kind(&outcome),
                                    &outcome_json,
                                    &now_ns(),
                                    &key.0,
                                    &event_type.map(|t| t.as_str()),
                                ],
                            )
                            .await?;
                            if let Some(updated) = updated {
                                append(
                                    tx,
                                    me,
                                    Some(&op),
                                    Audit::new("outcome", json!({"outcome": outcome})).key(&key.0),
                                )
                                .await?;
                                if event_type.is_some() {
                                    record_effect_if(tx, &key, &outcome, false, updated.get(0))
                                        .await?;
                                }
                                if let Some(run) = &run {
                                    remove_run_in(tx, me, run).await?;
                                }
                                return Ok(false);
                            }
                        }
                        let existing = read_claim(tx, &key.0, true).await?;
                        if retry {
                            if let Some((event, ..)) = witness(tx, me, &op).await? {
                                return Ok(event == "outcome_rejected");
                            }
                        }
                        let rejected = match existing {
                            None => return Err(StoreError::NotFound.into()),
                            Some(Some(stored)) => {
                                // Kept as evidence (for example a late outcome after `interrupted`),
                                // never applied.
                                let stored: Value =
                                    serde_json::from_str(&stored).map_err(json_error)?;
                                append(
                                    tx,
                                    me,
                                    Some(&op),
                                    Audit::new(
                                        "outcome_rejected",
                                        json!({"stored": stored, "offered": outcome}),
                                    )
                                    .key(&key.0),
                                )
                                .await?;
                                true
                            }
                            Some(None) => {
                                exec(
                                    tx,
                                    "UPDATE claims SET outcome = $1, outcome_json = $2,
                                            completed_at_ns = $3
                                     WHERE key = $4",
                                    &[&outcome_kind(&outcome), &outcome_json, &now_ns(), &key.0],
                                )
                                .await?;
                                append(
                                    tx,
                                    me,
                                    Some(&op),
                                    Audit::new("outcome", json!({"outcome": outcome})).key(&key.0),
                                )
                                .await?;
                                record_effect(tx, &key, &outcome, false).await?;
                                false
                            }
                        };
                        // The run the outcome answers waits no more: dropped with it.
                        if let Some(run) = &run {
                            remove_run_in(tx, me, run).await?;
                        }
                        Ok(rejected)
                    })
                })
                .await?;
            if rejected {
                Err(StoreError::Conflict("the claim already has an outcome"))
            } else {
                Ok(())
            }
        })
    }

    /// Records the outcome of the claim under `key` like
    /// [`IdempotencyStore::complete`](purra_core::IdempotencyStore::complete) and, in the same
    /// transaction, drops the suspended run `run_id` (the call it answers waits no more): one
    /// durable write where the two calls would make two. A claim that has an outcome already
    /// answers `Conflict` as `complete` does (the offered outcome kept as evidence, the run
    /// dropped); an error writes nothing.
    pub fn complete_run(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
        run_id: RunId,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.complete_with(key, outcome, Some(run_id))
    }

    /// Prepares `request` like [`OperatorStore::prepare_within`] and, in the same transaction,
    /// saves `run` (the call that waits for it) with its `approval_id` set to the new approval:
    /// one durable write where the two calls would make two, and no approval without its waiting
    /// run whatever stops the process. `None` (nothing written) when the principal has `limit`
    /// approvals open.
    pub fn prepare_waiting(
        &self,
        request: ApprovalRequest,
        limit: u32,
        now: SystemTime,
        run: SuspendedRun,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>> {
        self.prepare_with(request, limit, now, Some(run))
    }

    /// Prepares `request` within `limit` open approvals of its principal and, with `run`, saves
    /// that suspended run (its approval id set to the new one) in the same transaction.
    fn prepare_with(
        &self,
        request: ApprovalRequest,
        limit: u32,
        now: SystemTime,
        run: Option<SuspendedRun>,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>> {
        let op = self.op_token();
        let run = run.map(Arc::new);
        Box::pin(async move {
            let principal = request_principal(&request)?.to_owned();
            let now = to_ns(now)?;
            let row = Arc::new(NewApproval::of(&request)?);
            let space = format!("purra-open:{}", self.inner.options.schema);
            self.transact(move |tx, me, retry| {
                let (op, row, principal, space, run) = (
                    op.clone(),
                    Arc::clone(&row),
                    principal.clone(),
                    space.clone(),
                    run.clone(),
                );
                Box::pin(async move {
                    // The count under the locks below sees every approval committed before it
                    // (READ COMMITTED); what it cannot see is bounded by the locks.
                    let open = take_turn(tx, &space, &principal, limit, now, retry, &op).await?;
                    if retry {
                        if let Some((_, Some(id), _, _)) = witness(tx, me, &op).await? {
                            return Ok(Some(ApprovalId(id)));
                        }
                    }
                    if open >= i64::from(limit) {
                        return Ok(None);
                    }
                    let id = insert_approval(tx, me, &op, &row).await?;
                    if let Some(run) = &run {
                        let mut run = SuspendedRun::clone(run);
                        run.approval_id = id.clone();
                        save_run_in(tx, me, &run).await?;
                    }
                    Ok(Some(id))
                })
            })
            .await
        })
    }
}

/// How many of one principal's limited prepares may be in flight at once, each holding one of
/// this many slot locks (see [`take_turn`]).
const PREPARE_SLOTS: i64 = 16;

/// The open approvals of `principal` at `now` (counted up to `limit`), counted where a prepare of
/// its may insert when the count is below `limit`, in every process: the principal's limited
/// prepares hold a lock until their commit.
///
/// Far from the limit (a count `open` with `open + PREPARE_SLOTS <= limit`), prepares share the
/// principal's gate lock and each holds one of [`PREPARE_SLOTS`] slot locks, so at most that many
/// are in flight and none can take the count past `limit`: they commit together (PostgreSQL
/// groups their commits) instead of one after another. Near the limit (a `limit` under twice the
/// slots, a count past the bound, or a retried attempt), a prepare takes the gate alone: every
/// other prepare of the principal waits, and the count is exact.
#[allow(clippy::too_many_arguments)] // One count's parts and the attempt's token.
async fn take_turn(
    tx: &Tx<'_>,
    space: &str,
    principal: &str,
    limit: u32,
    now: i64,
    retry: bool,
    op: &str,
) -> Result<i64, Error> {
    let limit = i64::from(limit);
    let count = || async {
        Ok::<i64, Error>(
            query(
                tx,
                &format!(
                    "SELECT count(*) FROM (SELECT 1 FROM approvals
                     WHERE state = 'prepared' AND principal = $1
                       AND coalesce(request_expires_at_ns, {NEVER}) > $2 LIMIT $3) o"
                ),
                &[&principal, &now, &limit],
            )
            .await?
            .first()
            .map_or(0, |r| r.get(0)),
        )
    };
    if retry || limit < 2 * PREPARE_SLOTS {
        exec(
            tx,
            "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))",
            &[&space, &principal],
        )
        .await?;
        return count().await;
    }
    exec(
        tx,
        "SELECT pg_advisory_xact_lock_shared(hashtext($1), hashtext($2))",
        &[&space, &principal],
    )
    .await?;
    // A free slot, tried from a place of this operation's own; all taken, the first is waited for.
    let start = i64::from(hash_of(op) % (PREPARE_SLOTS as u32));
    let slot: Option<i64> = query_opt(
        tx,
        "SELECT s FROM (SELECT (g + $3::bigint) % $4::bigint AS s
                        FROM generate_series(0::bigint, $4::bigint - 1) AS g) t
         WHERE pg_try_advisory_xact_lock(hashtext($1::text || ':slot:' || s), hashtext($2::text))
         LIMIT 1",
        &[&space, &principal, &start, &PREPARE_SLOTS],
    )
    .await?
    .map(|r| r.get(0));
    if slot.is_none() {
        exec(
            tx,
            "SELECT pg_advisory_xact_lock(hashtext($1::text || ':slot:' || $3::bigint),
                                          hashtext($2::text))",
            &[&space, &principal, &start],
        )
        .await?;
    }
    let open = count().await?;
    if open + PREPARE_SLOTS <= limit {
        return Ok(open);
    }
    // Past the bound: every other slot too (the prepares in flight finish first), then the
    // count is exact. Two prepares doing this at once may deadlock: PostgreSQL cancels one,
    // and its retry takes the gate alone.
    let mine = slot.unwrap_or(start);
    exec(
        tx,
        "SELECT pg_advisory_xact_lock(hashtext($1::text || ':slot:' || s), hashtext($2::text))
         FROM generate_series(0::bigint, $4::bigint - 1) AS s WHERE s <> $3::bigint ORDER BY s",
        &[&space, &principal, &mine, &PREPARE_SLOTS],
    )
    .await?;
    count().await
}

/// A small stable hash of `text` (where an operation starts looking for a slot).
fn hash_of(text: &str) -> u32 {
    text.bytes().fold(2_166_136_261_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    })
}

impl RunStore for PostgresStore {
    fn is_durable(&self) -> bool {
        true
    }

    fn save_suspended(&self, run: SuspendedRun) -> BoxFuture<'_, Result<(), StoreError>> {
        let run = Arc::new(run);
        self.transact(move |tx, me, _| {
            let run = Arc::clone(&run);
            Box::pin(async move { save_run_in(tx, me, &run).await })
        })
    }

    fn load_suspended(
        &self,
        run_id: RunId,
    ) -> BoxFuture<'_, Result<Option<SuspendedRun>, StoreError>> {
        self.read(move |c| {
            let run_id = run_id.clone();
            async move {
                let row = query_opt(
                    &c,
                    "SELECT run_json FROM suspended_runs WHERE run_id = $1",
                    &[&run_id.as_str()],
                )
                .await?;
                match row {
                    None => Ok(None),
                    Some(r) => Ok(Some(
                        serde_json::from_str(r.get::<_, &str>(0)).map_err(json_error)?,
                    )),
                }
            }
        })
    }

    fn remove_suspended(&self, run_id: RunId) -> BoxFuture<'_, Result<(), StoreError>> {
        self.transact(move |tx, me, _| {
            let run_id = run_id.clone();
            Box::pin(async move { remove_run_in(tx, me, &run_id).await })
        })
    }
}

/// The audit trail of approval `id` ([`OperatorStore::approval_audit`]) read on `c`.
async fn approval_audit_on<C: Conn + ?Sized>(
    c: &C,
    id: &ApprovalId,
) -> Result<Vec<AuditEntry>, Error> {
    let Some(seq) = approval_seq(id) else {
        return Ok(Vec::new());
    };
    let key: Option<String> =
        query_opt(c, "SELECT key FROM claims WHERE approval_seq = $1", &[&seq])
            .await?
            .map(|r| r.get(0));
    let rows = query(
        c,
        &format!(
            "SELECT {AUDIT_COLUMNS} FROM audit
             WHERE approval_id = $1 OR (approval_id IS NULL AND claim_key = $2)
             ORDER BY seq"
        ),
        &[&id.0, &key],
    )
    .await?;
    rows.iter().map(audit_of).collect()
}

impl OperatorStore for PostgresStore {
    fn owner(&self) -> &str {
        &self.inner.owner
    }

    fn approvals(
        &self,
        query: ApprovalQuery,
    ) -> BoxFuture<'_, Result<Vec<ApprovalView>, StoreError>> {
        Box::pin(async move {
            let filter = Arc::new(ViewFilter::of(&query)?);
            self.read(move |c| {
                let filter = Arc::clone(&filter);
                async move { read_views(&c, &filter).await }
            })
            .await
        })
    }

    fn approval_page(
        &self,
        query: ApprovalQuery,
    ) -> BoxFuture<'_, Result<ApprovalPage, StoreError>> {
        Box::pin(async move {
            let mut filter = ViewFilter::of(&query)?;
            let limit = filter.limit;
            // One more than the page: whether it is there says whether more follow.
            filter.limit = limit + 1;
            let filter = Arc::new(filter);
            let read = self
                .read(move |c| {
                    let filter = Arc::clone(&filter);
                    async move { read_views(&c, &filter).await }
                })
                .await?;
            Ok(ApprovalPage::from_read(read, limit))
        })
    }

    fn count_approvals(&self, query: ApprovalQuery) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let filter = Arc::new(ViewFilter::of(&query)?);
            self.read(move |c| {
                let filter = Arc::clone(&filter);
                async move { count_views(&c, &filter).await }
            })
            .await
        })
    }

    fn count_approvals_up_to(
        &self,
        query: ApprovalQuery,
        up_to: u64,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let filter = Arc::new(ViewFilter::of(&query)?);
            self.read(move |c| {
                let filter = Arc::clone(&filter);
                async move { count_views_up_to(&c, &filter, up_to).await }
            })
            .await
        })
    }

    fn prepare_within(
        &self,
        request: ApprovalRequest,
        limit: u32,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>> {
        self.prepare_with(request, limit, now, None)
    }

    fn approval(&self, id: ApprovalId) -> BoxFuture<'_, Result<Option<ApprovalView>, StoreError>> {
        Box::pin(async move {
            let Some(seq) = approval_seq(&id) else {
                return Ok(None);
            };
            Ok(self
                .read(move |c| async move { read_views(&c, &ViewFilter::one(seq)).await })
                .await?
                .pop())
        })
    }

    fn audit(
        &self,
        after_seq: i64,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<AuditEntry>, StoreError>> {
        let limit = i64::from(limit.min(MAX_PAGE));
        self.read(move |c| async move {
            let rows = query(
                &c,
                &format!("SELECT {AUDIT_COLUMNS} FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2"),
                &[&after_seq, &limit],
            )
            .await?;
            rows.iter().map(audit_of).collect()
        })
    }

    fn approval_audit(&self, id: ApprovalId) -> BoxFuture<'_, Result<Vec<AuditEntry>, StoreError>> {
        Box::pin(async move {
            if approval_seq(&id).is_none() {
                return Ok(Vec::new());
            }
            self.read(move |c| {
                let id = id.clone();
                async move { approval_audit_on(&c, &id).await }
            })
            .await
        })
    }

    fn approval_audits(
        &self,
        ids: Vec<ApprovalId>,
    ) -> BoxFuture<'_, Result<Vec<Vec<AuditEntry>>, StoreError>> {
        let ids = Arc::new(ids);
        self.read(move |c| {
            let ids = Arc::clone(&ids);
            async move {
                let mut out = Vec::with_capacity(ids.len());
                for id in ids.iter() {
                    out.push(approval_audit_on(&c, id).await?);
                }
                Ok(out)
            }
        })
    }

    fn load_suspended_each(
        &self,
        run_ids: Vec<RunId>,
    ) -> BoxFuture<'_, Result<Vec<Option<SuspendedRun>>, StoreError>> {
        let run_ids = Arc::new(run_ids);
        self.read(move |c| {
            let run_ids = Arc::clone(&run_ids);
            async move {
                let wanted: Vec<&str> = run_ids.iter().map(RunId::as_str).collect();
                let rows = query(
                    &c,
                    "SELECT run_id, run_json FROM suspended_runs WHERE run_id = ANY($1)",
                    &[&wanted],
                )
                .await?;
                let mut found = std::collections::HashMap::with_capacity(rows.len());
                for r in &rows {
                    let run: SuspendedRun =
                        serde_json::from_str(r.get::<_, &str>(1)).map_err(json_error)?;
                    found.insert(r.get::<_, String>(0), run);
                }
                Ok(wanted.iter().map(|id| found.get(*id).cloned()).collect())
            }
        })
    }

    fn run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        self.read(|c| async move {
            let rows = query(
                &c,
                "SELECT run_id FROM approvals GROUP BY run_id ORDER BY min(seq)",
                &[],
            )
            .await?;
            Ok(rows.iter().map(|r| RunId(r.get(0))).collect())
        })
    }

    fn suspended_run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        self.read(|c| async move {
            let rows = query(&c, "SELECT run_id FROM suspended_runs ORDER BY run_id", &[]).await?;
            Ok(rows.iter().map(|r| RunId(r.get(0))).collect())
        })
    }

    fn reconcile_interrupted_claims(
        &self,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Reconciliation, StoreError>> {
        Box::pin(async move {
            let checked_at = to_ns(now)?;
            // `now` relative to this host's clock, applied to the database's clock.
            let offset = checked_at - now_ns();
            self.transact(move |tx, me, _| {
                Box::pin(async move {
                    let rows = query(
                        tx,
                        "SELECT c.key, c.owner,
                                o.closed_at_ns IS NOT NULL
                                OR o.heartbeat_at_ns + o.lease_ns <= now_ns() + $1
                         FROM claims c JOIN owners o ON o.owner = c.owner
                         WHERE c.outcome IS NULL ORDER BY c.key
                         FOR UPDATE OF c",
                        &[&offset],
                    )
                    .await?;
                    let mut report = Reconciliation::default();
                    let reason = ErrorCode::new(INTERRUPTED)
                        .unwrap_or_else(|_| unreachable!("a valid identifier"));
                    let outcome = EffectOutcome::Unknown { reason };
                    let outcome_json = serde_json::to_string(&outcome).map_err(json_error)?;
                    for row in &rows {
                        let key: &str = row.get(0);
                        let owner: &str = row.get(1);
                        let gone: bool = row.get(2);
                        if owner == me {
                            report.in_flight_here += 1;
                        } else if !gone {
                            report.in_flight_elsewhere += 1;
                        } else {
                            exec(
                                tx,
                                "UPDATE claims SET outcome = 'unknown', outcome_json = $1,
                                        completed_at_ns = $2
                                 WHERE key = $3 AND outcome IS NULL",
                                &[&outcome_json, &now_ns(), &key],
                            )
                            .await?;
                            append(
                                tx,
                                me,
                                None,
                                Audit::new(
                                    "interrupted",
                                    json!({"claimOwner": owner, "outcome": outcome,
                                           "checkedAtNs": checked_at}),
                                )
                                .key(key),
                            )
                            .await?;
                            let key = IdempotencyKey(key.to_owned());
                            record_effect(tx, &key, &outcome, false).await?;
                            report.interrupted.push(key);
                        }
                    }
                    Ok(report)
                })
            })
            .await
        })
    }

    fn reconcile_effect(
        &self,
        key: IdempotencyKey,
        by: String,
        evidence: String,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        crate::effects::reconcile(self, key, by, evidence, outcome)
    }

    fn effects(&self, query: EffectQuery) -> BoxFuture<'_, Result<EffectPage, StoreError>> {
        self.read(move |c| {
            let query = query.clone();
            async move { crate::effects::page(&c, &query).await }
        })
    }

    fn effect(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<Option<EffectView>, StoreError>> {
        self.read(move |c| {
            let key = key.clone();
            async move { crate::effects::one(&c, &key).await }
        })
    }

    fn claim_resend(
        &self,
        key: IdempotencyKey,
        by: String,
    ) -> BoxFuture<'_, Result<ResendClaim, StoreError>> {
        crate::effects::claim_resend(self, key, by)
    }

    fn complete_resend(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        crate::effects::complete_resend(self, key, outcome)
    }

    fn votes(&self, id: ApprovalId) -> BoxFuture<'_, Result<Vec<purra_core::Vote>, StoreError>> {
        crate::workflow::votes(self, id)
    }

    fn escalate_due(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>> {
        crate::workflow::escalate_due(self, now)
    }

    fn expire_due(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>> {
        crate::workflow::expire_due(self, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_their_schema_and_hide_their_password() {
        assert_eq!(
            split_schema("postgres://u@h:5/db?schema=team_a&sslmode=disable"),
            (
                "postgres://u@h:5/db?sslmode=disable".into(),
                Some("team_a".into())
            )
        );
        assert_eq!(
            split_schema("postgres://u@h/db?schema=x"),
            ("postgres://u@h/db".into(), Some("x".into()))
        );
        assert_eq!(
            split_schema("postgres://u@h/db"),
            ("postgres://u@h/db".into(), None)
        );
        assert_eq!(
            redact_url("postgres://u:secret@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        for good in ["purra", "purra_test_1", "a"] {
            assert_eq!(check_schema(good), Ok(()), "{good}");
        }
        for bad in ["", "Purra", "1abc", "pg_catalog", "a-b", "a\"b", "a;drop"] {
            assert!(check_schema(bad).is_err(), "{bad}");
        }
    }
}
