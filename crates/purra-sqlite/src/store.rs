//! `SqliteStore`: the approval gateway, idempotency store and run store of purra-core on one SQLite file.
//!
//! One writer connection per store sits behind a `std::sync::Mutex`; every operation runs on
//! `tokio::task::spawn_blocking`, so the lock is never held across an `.await`. Every claim, decision
//! and outcome is atomic with its audit row and committed with `synchronous=FULL` before the call
//! returns.
//!
//! Group commit: a write is queued, and whichever caller holds the connection runs everything queued
//! in one `BEGIN IMMEDIATE` transaction, each write inside its own savepoint (a write that fails rolls
//! back only its own changes), commits once, and only then answers every caller of the group with
//! its result, or with the commit's failure. Writes of one group run one after another in queue
//! order and see each other's effects, exactly as if each had been its own transaction; concurrent
//! runs share one sync instead of queueing one sync each. A group gathers: when fewer writes have
//! arrived than there were writers at the last answer, the leader runs those that came and waits
//! for the rest, at most as long as its last commit took, so that concurrent runs commit together
//! instead of in alternating halves (see `lead`).
//!
//! Each open store is an *owner*: a row with a lease that a heartbeat thread renews. Claims record their
//! owner. [`OperatorStore::reconcile_interrupted_claims`] marks a claim with no outcome `unknown`
//! (`interrupted`) only when its owner is provably gone: closed, or its lease lapsed. A claim of a live
//! owner (another host process sharing the file) is left alone. Leases compare wall-clock instants
//! written by the processes sharing the file; SQLite files are shared only on one machine (never over a
//! network file system), so they read one clock.
//!
//! Events ([`ApprovalGateway::subscribe`]) are read from the audit log by a pump thread started with
//! the first subscriber: this store's own commits wake it at once; other processes' commits on the same
//! file cannot notify it, so it also polls the log every [`SqliteOptions::event_poll`].

use crate::audit::{append, Trail};
use crate::migrate::{configure, migrate};
use purra_core::stored::{
    approval_id, approval_seq, claim_state, from_ns, json_error, outcome_kind, to_ns,
};
use purra_core::{
    request_principal, ApprovalBinding, ApprovalGateway, ApprovalId, ApprovalIntent, ApprovalPage,
    ApprovalQuery, ApprovalRecord, ApprovalRequest, ApprovalState, ApprovalView, AuditEntry,
    BoxFuture, ClaimResult, ClaimState, ClaimVerdict, ClaimView, Decision, EffectOutcome,
    EffectPage, EffectQuery, EffectView, ErrorCode, EventSender, IdempotencyKey, IdempotencyStore,
    JsonIdentity, OperatorStore, Reconciliation, ResendClaim, RunId, RunStore, StoreError,
    StoreEvent, StoreEvents, SuspendedRun, Verdict, Vote, WebhookEvent, WebhookEventType,
    INTERRUPTED, MAX_PAGE, PRINCIPAL_LABEL,
};
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// Options of [`SqliteStore::open_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// How long a write waits for another connection's lock before failing (`busy_timeout`).
    pub busy_timeout: Duration,
    /// How long this store's claims count as in flight without a heartbeat. The heartbeat thread renews
    /// the lease every quarter of it; another process may mark this store's open claims `interrupted`
    /// only after a whole lease without renewal.
    pub lease: Duration,
    /// How often subscribers' events are looked for in the file when no commit of this store woke
    /// the pump (other processes' commits cannot notify).
    pub event_poll: Duration,
}

impl Default for SqliteOptions {
    /// A 5 s busy timeout, a 60 s lease and a 200 ms event poll.
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            lease: Duration::from_secs(60),
            event_poll: Duration::from_millis(200),
        }
    }
}

impl SqliteOptions {
    /// Sets the busy timeout.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Sets the lease (at least 4 ms, so the heartbeat has a period).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(4));
        self
    }

    /// Sets the event poll interval (at least 1 ms).
    pub fn event_poll(mut self, every: Duration) -> Self {
        self.event_poll = every.max(Duration::from_millis(1));
        self
    }
}

/// A durable store of approvals, claims, receipts, suspended runs and an append-only audit log.
///
/// Cloning is cheap and shares the one connection. [`ApprovalGateway::receipts`] returns the same store.
/// Its methods need a tokio runtime (they run on `spawn_blocking`).
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("owner", &self.inner.owner)
            .field("durable", &self.inner.durable)
            .finish_non_exhaustive()
    }
}

struct Inner {
    /// The one writer connection; also used by the heartbeat thread between operations.
    conn: Arc<Mutex<Connection>>,
    /// Writes waiting for the next group commit (see the module documentation). The leader holds
    /// this and `conn`, never `Inner`, so dropping the last handle closes the owner at once.
    writes: Arc<Writes>,
    /// This store's owner id (claims record it).
    owner: String,
    /// False for `open_in_memory`.
    durable: bool,
    /// Stops the heartbeat thread when dropped; joined on drop.
    heartbeat: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
    /// The file (none for an in-memory store): the event pump opens its own reader on it.
    path: Option<PathBuf>,
    /// How often the event pump polls the file.
    event_poll: Duration,
    /// Subscribers' events.
    events: EventSender,
    /// The event pump, once someone subscribed: its wake-up sender (dropping it stops the pump).
    pump: Mutex<Option<(mpsc::Sender<()>, JoinHandle<()>)>>,
    /// A reader of the file for [`SqliteStore::read`], opened at its first use.
    reader: Arc<Mutex<Option<Connection>>>,
    /// What [`SqliteStore::sessions_changes`] reads with, opened at its first use.
    #[cfg(feature = "sessions")]
    watch: Mutex<Option<Watch>>,
    /// Operations run on the blocking pool outside a group commit (see [`SqliteStore::round_trips`]).
    round_trips: AtomicU64,
}

/// A reader of the file that tells at once whether Streamable HTTP sessions were ended or
/// changed ([`SqliteStore::sessions_changes`]).
#[cfg(feature = "sessions")]
struct Watch {
    conn: Connection,
    /// The connection's `PRAGMA data_version` when `changes` was read: the same number means
    /// no other connection, of this process or another, committed anything since.
    data_version: Option<i64>,
    /// `http_session_changes.n` as read then.
    changes: i64,
}

impl Inner {
    /// Wakes the event pump after a commit of this store.
    fn nudge(&self) {
        if let Some((wake, _)) = self.pump.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            let _ = wake.send(());
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.heartbeat.take() {
            drop(stop);
            let _ = thread.join();
        }
        let pump = self
            .pump
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((stop, thread)) = pump {
            drop(stop);
            let _ = thread.join();
        }
        // A clean close: claims this owner left without outcome are interrupted from now on.
        let mut conn = lock(&self.conn);
        let _ = close_owner(&mut conn, &self.owner);
    }
}

/// `execute` and `query_row` through the connection's statement cache (every statement here is hot).
pub(crate) trait Cached {
    fn exec<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;
    fn row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>;
}

impl Cached for Connection {
    fn exec<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    fn row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        self.prepare_cached(sql)?.query_row(params, f)
    }
}

pub(crate) fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|p| p.into_inner())
}

/// Writes waiting for a group commit, whether a leader is serving them, and whether it waits for
/// one (see [`gather`]).
#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    /// How many of `jobs` need a durable commit (the others are relaxed: see
    /// [`SqliteStore::write_relaxed`]).
    durable: usize,
    leader: bool,
    /// The leader waits for a write: `write` wakes it.
    gathering: bool,
}

/// The queue of writes and the leader's wake-up while it gathers a group.
#[derive(Default)]
struct Writes {
    queue: Mutex<Queue>,
    arrived: Condvar,
    /// Writes committed that changed a row (see [`purra_core::CommitCounts`]).
    wrote: AtomicU64,
    /// Group commits that committed at least one of them.
    commits: AtomicU64,
    /// The file's commits are synced (`synchronous=FULL`), so a group of relaxed writes only may
    /// commit without the sync (false for an in-memory store, which never syncs).
    file: bool,
}

fn lock_queue(queue: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    queue.lock().unwrap_or_else(|p| p.into_inner())
}

/// Queues `job`, waking a leader that waits for a write; true if the caller must start the leader
/// (there was none). At most one leader: the caller that finds none becomes it and serves every
/// write queued until it finds the queue empty (checked under the lock that queues, so no write is
/// left behind).
#[cfg(test)]
fn enqueue(writes: &Writes, job: Job) -> bool {
    enqueue_as(writes, job, false)
}

/// [`enqueue`] for a write that needs a durable commit, or (`relaxed`) one that does not.
fn enqueue_as(writes: &Writes, job: Job, relaxed: bool) -> bool {
    let (wake, lead) = {
        let mut queue = lock_queue(&writes.queue);
        queue.jobs.push(job);
        if !relaxed {
            queue.durable += 1;
        }
        (queue.gathering, !std::mem::replace(&mut queue.leader, true))
    };
    // Woken after the lock is released, so that the leader does not wake only to wait for it.
    if wake {
        writes.arrived.notify_one();
    }
    lead
}

/// The longest a leader gathers writes it expects (it also gathers for at most as long as its last
/// commit took).
const MAX_GATHER: Duration = Duration::from_millis(2);

/// The group commit's leader (see the module documentation): commits what is queued, group after
/// group, until it finds no write queued.
///
/// Each group *gathers*: the leader expects as many writers as were active when it last answered
/// (that group's callers, which usually write again at once, and those already queued then), and
/// while fewer have written it runs the writes that have arrived and waits for the rest, for at
/// most as long as its last commit took, before it commits. Without that, concurrent callers
/// settle into cohorts, one committing while the other's answers return, each group half of them
/// and each paying a sync. With one caller at a time nothing is waited for.
fn lead(writes: &Writes, conn: &Mutex<Connection>, owner: &str) {
    let mut expect = 0;
    let mut linger = Duration::ZERO;
    loop {
        let deadline = Instant::now() + linger;
        let Some((jobs, durable)) = gather_as(writes, 0, expect, deadline, false) else {
            return;
        };
        // A group of relaxed writes only commits without the sync, and takes no durable write
        // into it after it began.
        let relaxed = writes.file && durable == 0;
        // A write that panics fails its group (the transaction rolls back, its callers' answers
        // are dropped), never the leader.
        let group = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            commit_group(&mut lock(conn), owner, jobs, relaxed, |ran| {
                gather_as(writes, ran, expect, deadline, relaxed).map(|(jobs, _)| jobs)
            })
        }));
        let Ok(((answers, committed), wrote, commit_took)) = group else {
            expect = 0;
            continue;
        };
        if committed.is_ok() && wrote > 0 {
            writes.wrote.fetch_add(wrote, Ordering::Relaxed);
            writes.commits.fetch_add(1, Ordering::Relaxed);
        }
        linger = commit_took.min(MAX_GATHER);
        // Counted before the answers go out: each caller queued now is another writer.
        expect = answers.len() + lock_queue(&writes.queue).jobs.len();
        for answer in answers {
            answer(committed.clone());
        }
    }
}

/// The writes queued for a group that has run `ran` writes so far, while fewer than `expect` ran
/// (and at the start of every group): whatever is queued, waiting until `deadline` for a first one
/// when it expects more than one write.
/// `None` once the group has its writes or none came by `deadline`; at the start of a group (`ran`
/// 0) the leader then steps down, under the queue's lock, so that the next write starts a leader
/// and no write is left behind.
#[cfg(test)]
fn gather(writes: &Writes, ran: usize, expect: usize, deadline: Instant) -> Option<Vec<Job>> {
    gather_as(writes, ran, expect, deadline, false).map(|(jobs, _)| jobs)
}

/// [`gather`], with how many of the writes need a durable commit; a `relaxed` group under way
/// takes none while a durable write is queued (it starts the next group, which syncs).
fn gather_as(
    writes: &Writes,
    ran: usize,
    expect: usize,
    deadline: Instant,
    relaxed: bool,
) -> Option<(Vec<Job>, usize)> {
    let mut queue = lock_queue(&writes.queue);
    // A lone caller's next write is not waited for: its leader steps down as it would without
    // gathering (kept waiting for that caller, it measured slower; BENCHMARKS.md).
    if queue.jobs.is_empty() && expect > 1 && ran < expect {
        queue.gathering = true;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if !queue.jobs.is_empty() || left.is_zero() {
                break;
            }
            queue = writes
                .arrived
                .wait_timeout(queue, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        queue.gathering = false;
    }
    if queue.jobs.is_empty() {
        if ran == 0 {
            queue.leader = false;
        }
        return None;
    }
    if ran > 0 && (ran >= expect || relaxed && queue.durable > 0) {
        return None;
    }
    let durable = std::mem::take(&mut queue.durable);
    Some((std::mem::take(&mut queue.jobs), durable))
}

pub(crate) fn now_ns() -> Result<i64, StoreError> {
    to_ns(SystemTime::now())
}

/// One queued write: runs inside its savepoint of a group's transaction (or is told why the group
/// could not begin) and says whether to keep its changes and how to answer its caller once the
/// commit's outcome is known.
type Job = Box<dyn FnOnce(Result<(&Connection, &str), StoreError>) -> Finish + Send>;

/// What a job left to do after running: keep or roll back its savepoint, then answer.
struct Finish {
    keep: bool,
    answer: Answer,
}

/// The answers of a group's callers, and the outcome of its commit to give them.
type Answers = (Vec<Answer>, Result<(), StoreError>);

/// A caller's answer, given the outcome of its group's commit.
type Answer = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// A group's answers, how many of its writes changed a row, and how long its commit took.
type Group = (Answers, u64, Duration);

/// Runs `jobs`, and those `more` gives it until it gives none (it is told how many ran), as one
/// group: one `BEGIN IMMEDIATE`, a savepoint per job, one commit. Returns every answer with the
/// commit's outcome, to be given after the commit (so no caller hears of a write before it is on
/// disk), how many of the writes changed a row, and how long the commit took.
///
/// A `relaxed` group (relaxed writes only) commits with `synchronous=NORMAL`: in WAL mode the
/// commit is in the operating system's cache at once and on disk at the next synced commit or
/// checkpoint, so it survives the process being killed, not a power loss (see
/// [`SqliteStore::write_relaxed`]). Every other commit stays `synchronous=FULL`.
fn commit_group(
    conn: &mut Connection,
    owner: &str,
    jobs: Vec<Job>,
    relaxed: bool,
    more: impl FnMut(usize) -> Option<Vec<Job>>,
) -> Group {
    // The safety level cannot change inside a transaction: set before, restored after.
    let relaxed = relaxed && conn.pragma_update(None, "synchronous", "NORMAL").is_ok();
    let group = run_group(conn, owner, jobs, more);
    // Never leave the connection relaxed for the durable writes that follow: it stops writing
    // instead (every later write fails with its error).
    if relaxed && conn.pragma_update(None, "synchronous", "FULL").is_err() {
        let _ = conn.execute_batch("PRAGMA query_only = 1");
    }
    group
}

/// [`commit_group`]'s transaction.
fn run_group(
    conn: &mut Connection,
    owner: &str,
    jobs: Vec<Job>,
    mut more: impl FnMut(usize) -> Option<Vec<Job>>,
) -> Group {
    let tx = match immediate(conn) {
        Ok(tx) => tx,
        Err(e) => {
            let answers = jobs.into_iter().map(|job| job(Err(e.clone())).answer);
            return ((answers.collect(), Err(e)), 0, Duration::ZERO);
        }
    };
    let mut wrote = 0;
    let mut answers = Vec::with_capacity(jobs.len());
    let mut batch = Some(jobs);
    while let Some(jobs) = batch {
        for job in jobs {
            // The savepoint's statements are prepared once (rusqlite's `Savepoint` parses them anew
            // each time).
            let before = tx.total_changes();
            let finish = match tx.exec("SAVEPOINT job", []) {
                Ok(_) => {
                    let finish = job(Ok((&tx, owner)));
                    if finish.keep && tx.total_changes() != before {
                        wrote += 1;
                    }
                    let ended = if finish.keep {
                        tx.exec("RELEASE job", [])
                    } else {
                        tx.exec("ROLLBACK TO job", [])
                            .and_then(|_| tx.exec("RELEASE job", []))
                    };
                    match ended {
                        Ok(_) => finish,
                        // The savepoint could not be ended: the transaction is in an unknown state.
                        Err(e) => Finish {
                            keep: false,
                            answer: {
                                let answer = finish.answer;
                                let e = backend(e);
                                Box::new(move |_| answer(Err(e)))
                            },
                        },
                    }
                }
                Err(e) => job(Err(backend(e))),
            };
            answers.push(finish.answer);
        }
        batch = more(answers.len());
    }
    let started = Instant::now();
    let committed = tx.commit().map_err(backend);
    ((answers, committed), wrote, started.elapsed())
}

pub(crate) fn immediate(conn: &mut Connection) -> Result<Transaction<'_>, StoreError> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(backend)
}

fn close_owner(conn: &mut Connection, owner: &str) -> Result<(), StoreError> {
    let tx = immediate(conn)?;
    let at = now_ns()?;
    tx.exec(
        "UPDATE owners SET closed_at_ns = ?1 WHERE owner = ?2 AND closed_at_ns IS NULL",
        params![at, owner],
    )
    .map_err(backend)?;
    append(&tx, at, owner, "closed", None, None, None, &json!({}))?;
    tx.commit().map_err(backend)
}

/// The row of one claim, its sequence number and its outcome: `None` if never claimed, an outcome
/// of `None` if in flight.
pub(crate) fn read_claim(
    conn: &Connection,
    key: &str,
) -> Result<Option<(i64, Option<String>)>, StoreError> {
    conn.row(
        "SELECT seq, outcome_json FROM claims WHERE key = ?1",
        params![key],
        |row| Ok((row.get(0)?, row.get::<_, Option<String>>(1)?)),
    )
    .optional()
    .map_err(backend)
}

/// Where the event pump reads the audit log.
enum Reader {
    /// Its own connection to the file.
    Own(Connection),
    /// The store's connection (an in-memory store).
    Shared(Arc<Mutex<Connection>>),
}

impl Reader {
    fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match self {
            Reader::Own(conn) => f(conn),
            Reader::Shared(conn) => f(&lock(conn)),
        }
    }
}

/// The largest instant (nanoseconds): a request without an expiry sorts as never expiring in
/// `approvals_open_by_principal`, whose expression this is part of.
const NEVER: &str = "9223372036854775807";

// Which approvals `read_views` reads (and `count_views` counts): purra-core's `ApprovalFilter`. `state` and `verdict` are
// spelled into the statement as literals (they come from a fixed set), so a listing of pending
// approvals uses the partial index `approvals_pending`, a run's listing `approvals_by_run` and a
// principal's open approvals `approvals_open_by_principal`; each combination of filters is its
// own cached statement, whose parameters are bound in the order its conditions are written.
use purra_core::stored::ApprovalFilter as ViewFilter;

/// The SQL of an [`ApprovalFilter`](purra_core::stored::ApprovalFilter) for this store.
trait Conditions {
    /// The conditions of this filter on `approvals a`, and their parameters in order.
    fn conditions(&self) -> (String, Vec<rusqlite::types::Value>);
    /// The listing's statement and its parameters (the limit last).
    fn sql(&self) -> (String, Vec<rusqlite::types::Value>);
    /// The count's statement and its parameters.
    fn count_sql(&self) -> (String, Vec<rusqlite::types::Value>);
}

impl Conditions for ViewFilter {
    /// The conditions of this filter on `approvals a`, and their parameters in order.
    fn conditions(&self) -> (String, Vec<rusqlite::types::Value>) {
        use rusqlite::types::Value;
        let mut sql = String::from("a.seq > ?");
        let mut params = vec![Value::Integer(self.after)];
        if let Some(before) = self.before {
            sql.push_str(" AND a.seq < ?");
            params.push(Value::Integer(before));
        }
        if let Some(seq) = self.seq {
            sql.push_str(" AND a.seq = ?");
            params.push(Value::Integer(seq));
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
            sql.push_str(" AND a.run_id = ?");
            params.push(Value::Text(run.clone()));
        }
        if let Some(principal) = &self.principal {
            sql.push_str(" AND a.principal = ?");
            params.push(Value::Text(principal.clone()));
        }
        if let Some(at) = self.open_at {
            sql.push_str(&format!(
                " AND a.state = 'prepared' AND coalesce(a.request_expires_at_ns, {NEVER}) > ?"
            ));
            params.push(Value::Integer(at));
        }
        (sql, params)
    }

    /// The listing's statement and its parameters (the limit last).
    fn sql(&self) -> (String, Vec<rusqlite::types::Value>) {
        let (conditions, mut params) = self.conditions();
        let order = if self.newest_first { "DESC" } else { "ASC" };
        let sql = format!(
            "SELECT a.seq, a.intent_json, a.intent_digest, a.state, a.verdict, a.approver,
                    a.decided_at_ns, a.expires_at_ns, a.note, a.request_json, a.prepared_at_ns,
                    c.key, c.owner, c.claimed_at_ns, c.outcome_json, c.completed_at_ns
             FROM approvals a LEFT JOIN claims c ON c.seq = a.claim_seq
             WHERE {conditions} ORDER BY a.seq {order} LIMIT ?"
        );
        params.push(rusqlite::types::Value::Integer(i64::from(self.limit)));
        (sql, params)
    }

    /// The count's statement and its parameters.
    fn count_sql(&self) -> (String, Vec<rusqlite::types::Value>) {
        let (conditions, params) = self.conditions();
        (
            format!("SELECT count(*) FROM approvals a WHERE {conditions}"),
            params,
        )
    }
}

/// The views of the approvals `filter` selects, in its order.
pub(crate) fn read_views(
    conn: &Connection,
    filter: &ViewFilter,
) -> Result<Vec<ApprovalView>, StoreError> {
    let (sql, params) = filter.sql();
    let mut stmt = conn.prepare_cached(&sql).map_err(backend)?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(params), |row| {
            Ok(StoredApproval {
                seq: row.get(0)?,
                intent_json: row.get(1)?,
                intent_digest: row.get(2)?,
                state: row.get(3)?,
                verdict: row.get(4)?,
                approver: row.get(5)?,
                decided_at: row.get(6)?,
                expires_at: row.get(7)?,
                note: row.get(8)?,
                request_json: row.get(9)?,
                prepared_at: row.get(10)?,
                claim: match row.get::<_, Option<String>>(11)? {
                    None => None,
                    Some(key) => Some(StoredClaim {
                        key,
                        owner: row.get(12)?,
                        claimed_at: row.get(13)?,
                        outcome_json: row.get(14)?,
                        completed_at: row.get(15)?,
                    }),
                },
            })
        })
        .map_err(backend)?;
    let mut out = Vec::new();
    for row in rows {
        out.push(row.map_err(backend)?.into_view()?);
    }
    Ok(out)
}

/// How many approvals `filter` selects (its order and limit aside).
fn count_views(conn: &Connection, filter: &ViewFilter) -> Result<u64, StoreError> {
    let (sql, params) = filter.count_sql();
    let n: i64 = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| stmt.query_row(rusqlite::params_from_iter(params), |r| r.get(0)))
        .map_err(backend)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// How many approvals `filter` selects, counting no further than `up_to` (its order and limit
/// aside): a read of at most `up_to` rows of its index.
fn count_views_up_to(
    conn: &Connection,
    filter: &ViewFilter,
    up_to: u64,
) -> Result<u64, StoreError> {
    let (conditions, mut params) = filter.conditions();
    let sql =
        format!("SELECT count(*) FROM (SELECT 1 FROM approvals a WHERE {conditions} LIMIT ?)");
    params.push(rusqlite::types::Value::Integer(
        i64::try_from(up_to).unwrap_or(i64::MAX),
    ));
    let n: i64 = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| stmt.query_row(rusqlite::params_from_iter(params), |r| r.get(0)))
        .map_err(backend)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// How many approvals `principal` has open at `now` (ns), counting no further than `up_to`: a
/// seek in `approvals_open_by_principal` that reads at most `up_to` entries.
const OPEN_OF_PRINCIPAL: &str = "SELECT count(*) FROM (SELECT 1 FROM approvals
     WHERE state = 'prepared' AND principal = ?1
       AND coalesce(request_expires_at_ns, 9223372036854775807) > ?2 LIMIT ?3)";

/// An approval row as stored (with its claim, if it made one).
struct StoredApproval {
    seq: i64,
    intent_json: String,
    intent_digest: String,
    state: String,
    verdict: Option<String>,
    approver: Option<String>,
    decided_at: Option<i64>,
    expires_at: Option<i64>,
    note: Option<String>,
    request_json: Option<String>,
    prepared_at: i64,
    claim: Option<StoredClaim>,
}

struct StoredClaim {
    key: String,
    owner: String,
    claimed_at: i64,
    outcome_json: Option<String>,
    completed_at: Option<i64>,
}

impl StoredApproval {
    fn into_view(self) -> Result<ApprovalView, StoreError> {
        let intent: ApprovalIntent = serde_json::from_str(&self.intent_json).map_err(json_error)?;
        let intent_digest = JsonIdentity::parse(&self.intent_digest)
            .ok_or_else(|| StoreError::Backend("stored intent digest is malformed".into()))?;
        let request = match self.request_json {
            Some(text) => serde_json::from_str(&text).map_err(json_error)?,
            // Prepared by a schema-1 file: only the intent was kept.
            None => ApprovalRequest {
                intent,
                arguments: serde_json::Value::Null,
                binding: ApprovalBinding {
                    binding_id: String::new(),
                    binding_revision: String::new(),
                    scope_id: String::new(),
                    scope_revision: String::new(),
                },
                requested_by: String::new(),
                requested_at: from_ns(self.prepared_at),
                expires_at: None,
                labels: Default::default(),
            },
        };
        let decision = match (self.verdict.as_deref(), self.approver, self.decided_at) {
            (Some(v), Some(approver), Some(decided_at)) => Some(Decision {
                verdict: if v == "approve" {
                    Verdict::Approve
                } else {
                    Verdict::Deny
                },
                approver,
                decided_at: from_ns(decided_at),
                expires_at: self.expires_at.map(from_ns),
                note: self.note,
            }),
            _ => None,
        };
        let state = match (self.state.as_str(), decision) {
            ("prepared", None) => ApprovalState::Prepared,
            ("decided", Some(d)) => ApprovalState::Decided(d),
            ("claimed", Some(d)) => ApprovalState::Claimed(d),
            ("refused", Some(d)) => ApprovalState::Refused(d),
            _ => return Err(StoreError::Backend("inconsistent approval row".into())),
        };
        let claim = match self.claim {
            None => None,
            Some(c) => Some(ClaimView {
                key: IdempotencyKey(c.key),
                owner: c.owner,
                claimed_at: from_ns(c.claimed_at),
                state: claim_state(c.outcome_json)?,
                completed_at: c.completed_at.map(from_ns),
            }),
        };
        Ok(ApprovalView {
            id: approval_id(self.seq),
            request,
            intent_digest,
            state,
            claim,
        })
    }
}

/// Inserts `request` as a pending approval with its `prepared` audit row (the row's pointer set)
/// and its `approval.pending` event; its id.
pub(crate) fn insert_approval(
    tx: &Connection,
    me: &str,
    request: &ApprovalRequest,
) -> Result<ApprovalId, StoreError> {
    insert_prepared(tx, me, request, true)
}

/// [`insert_approval`], recording the `approval.pending` event only when `pending_event` (an
/// approval a grant approves in the same transaction never waits for anyone).
pub(crate) fn insert_prepared(
    tx: &Connection,
    me: &str,
    request: &ApprovalRequest,
    pending_event: bool,
) -> Result<ApprovalId, StoreError> {
    request.check()?;
    let intent = &request.intent;
    let digest = intent.digest();
    let intent_json = serde_json::to_string(intent).map_err(json_error)?;
    let request_json = serde_json::to_string(request).map_err(json_error)?;
    let request_expires = request.expires_at.map(to_ns).transpose()?;
    to_ns(request.requested_at)?;
    let at = now_ns()?;
    tx.exec(
        "INSERT INTO approvals (intent_json, intent_digest, tool, run_id, prepared_at_ns,
                                prepared_by, state, request_json, request_expires_at_ns, principal)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'prepared', ?7, ?8, ?9)",
        params![
            intent_json,
            digest.as_str(),
            intent.tool,
            intent.run_id.as_str(),
            at,
            me,
            request_json,
            request_expires,
            request.labels.get(PRINCIPAL_LABEL)
        ],
    )
    .map_err(backend)?;
    let seq = tx.last_insert_rowid();
    let id = approval_id(seq);
    let audit = append(
        tx,
        at,
        me,
        "prepared",
        Some((&id.0, Trail::FromApproval)),
        None,
        Some(intent.run_id.as_str()),
        &json!({"intentDigest": digest.as_str(), "intent": intent.to_json()}),
    )?;
    tx.exec(
        "UPDATE approvals SET prepared_audit = ?2 WHERE seq = ?1",
        params![seq, audit],
    )
    .map_err(backend)?;
    crate::workflow::insert_rules(tx, seq, request)?;
    if pending_event {
        crate::webhook::record(tx, WebhookEventType::ApprovalPending, |_| {
            Ok(WebhookEvent::pending(&id, request, from_ns(at)))
        })?;
    }
    Ok(id)
}

/// Records `decision` on approval `id` in `tx` (the `decided` audit row and webhook event).
pub(crate) fn decide_in(
    tx: &Connection,
    me: &str,
    id: &ApprovalId,
    decision: &Decision,
) -> Result<(), StoreError> {
    let seq = approval_seq(id).ok_or(StoreError::NotFound)?;
    let decided_at = to_ns(decision.decided_at)?;
    let expires_at = decision.expires_at.map(to_ns).transpose()?;
    let verdict = match decision.verdict {
        Verdict::Approve => "approve",
        Verdict::Deny => "deny",
    };
    let row: Option<(String, Option<i64>, String, Option<String>)> = tx
        .row(
            "SELECT state, request_expires_at_ns, tool, principal FROM approvals
                 WHERE seq = ?1",
            params![seq],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .optional()
        .map_err(backend)?;
    let (tool, principal) = match row {
        None => return Err(StoreError::NotFound),
        Some((state, ..)) if state != "prepared" => {
            return Err(StoreError::Conflict("already decided"))
        }
        Some((_, Some(until), ..)) if until <= decided_at => {
            return Err(StoreError::Conflict("the approval request expired"))
        }
        Some((_, _, tool, principal)) => (tool, principal),
    };
    // An approval that needs a quorum takes the decision as one vote; it decides only with the
    // quorum (or a deny).
    let voted = crate::workflow::vote_in(tx, me, seq, id, decision, || {
        crate::webhook::approval_ref(id, tool.clone(), principal.clone())
    })?;
    if voted == crate::workflow::Voted::Pending {
        return Ok(());
    }
    crate::workflow::clear_timers(tx, seq)?;
    let at = now_ns()?;
    let audit = append(
        tx,
        at,
        me,
        "decided",
        Some((&id.0, Trail::FromApproval)),
        None,
        None,
        &json!({"verdict": verdict, "approver": decision.approver,
                    "decidedAtNs": decided_at, "expiresAtNs": expires_at,
                    "note": decision.note}),
    )?;
    tx.exec(
        "UPDATE approvals SET state = 'decided', verdict = ?1, approver = ?2,
                    decided_at_ns = ?3, expires_at_ns = ?4, note = ?5, decided_audit = ?7
             WHERE seq = ?6",
        params![
            verdict,
            decision.approver,
            decided_at,
            expires_at,
            decision.note,
            seq,
            audit
        ],
    )
    .map_err(backend)?;
    crate::webhook::record(tx, WebhookEventType::ApprovalDecided, |_| {
        let approval = crate::webhook::approval_ref(id, tool, principal);
        Ok(WebhookEvent::decided(&approval, decision, from_ns(at)))
    })
}

/// Claims approval `id` in `tx` for `current_intent` at `now`: the checks, the claim, the
/// approval's state and the audit row, committed together by the caller's transaction
/// ([`ApprovalGateway::check_and_claim`]).
pub(crate) fn claim_in(
    tx: &Connection,
    me: &str,
    id: &ApprovalId,
    current_intent: &JsonIdentity,
    now: SystemTime,
) -> Result<ClaimVerdict, StoreError> {
    let seq = approval_seq(id).ok_or(StoreError::NotFound)?;
    let now = to_ns(now)?;
    // One IMMEDIATE transaction: the checks, the claim, the approval's state and the audit row
    // commit together, or not at all.
    let row = tx
        .row(
            "SELECT state, intent_digest, verdict, expires_at_ns, claim_seq FROM approvals
             WHERE seq = ?1",
            params![seq],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, Option<String>>(2)?,
                    row.get::<_, Option<i64>>(3)?,
                    row.get::<_, Option<i64>>(4)?,
                ))
            },
        )
        .optional()
        .map_err(backend)?;
    let Some((state, digest, verdict, expires_at, claim_seq)) = row else {
        return Err(StoreError::NotFound);
    };
    let at = now_ns()?;
    // A refusal's audit row: a repeated claim's (`claim_refused`) is indexed; the one
    // that settles the approval as refused is pointed at from the approval's row.
    let refuse = |tx: &Connection, claim: Option<i64>, trail, event: &str, why: &str| {
        append(
            tx,
            at,
            me,
            event,
            Some((&id.0, trail)),
            Some((&digest, claim)),
            None,
            &json!({"reason": why, "currentIntent": current_intent.as_str(), "nowNs": now,
                    "effect": "not_started"}),
        )
    };
    let settle_refused = |tx: &Connection, reason: &str| {
        let audit = refuse(tx, None, Trail::FromApproval, "refused", reason)?;
        tx.exec(
            "UPDATE approvals SET state = 'refused', refused_reason = ?2, settled_audit = ?3
             WHERE seq = ?1",
            params![seq, reason, audit],
        )
        .map_err(backend)
    };
    let verdict = match (state.as_str(), verdict.as_deref()) {
        ("prepared", _) => return Ok(ClaimVerdict::Pending),
        ("decided", Some("deny")) => return Ok(ClaimVerdict::Denied),
        // The quorum is counted again here, in the claim's transaction: an approval
        // short of its approving votes is still pending, whatever its row says.
        ("decided", _) if crate::workflow::quorum_missing(tx, seq)? => {
            return Ok(ClaimVerdict::Pending)
        }
        ("claimed" | "refused", _) => {
            refuse(
                tx,
                claim_seq,
                Trail::Indexed,
                "claim_refused",
                "already_claimed",
            )?;
            ClaimVerdict::AlreadyClaimed
        }
        _ if expires_at.is_some_and(|e| e <= now) => {
            settle_refused(tx, "expired")?;
            ClaimVerdict::Expired
        }
        _ if digest != current_intent.as_str() => {
            settle_refused(tx, "mismatch")?;
            ClaimVerdict::Mismatch
        }
        _ => match insert_claim(tx, &digest, me, Some(seq), at)? {
            Some(claim) => {
                let audit = append(
                    tx,
                    at,
                    me,
                    "claimed",
                    Some((&id.0, Trail::FromApproval)),
                    Some((&digest, Some(claim))),
                    None,
                    &json!({"nowNs": now}),
                )?;
                tx.exec(
                    "UPDATE approvals SET state = 'claimed', claim_seq = ?2,
                            settled_audit = ?3
                     WHERE seq = ?1",
                    params![seq, claim, audit],
                )
                .map_err(backend)?;
                ClaimVerdict::Claimed(IdempotencyKey(digest.clone()))
            }
            None => {
                let existing = read_claim(tx, &digest)?.map(|(seq, _)| seq);
                let why = "key_already_claimed";
                refuse(tx, existing, Trail::Indexed, "claim_refused", why)?;
                ClaimVerdict::AlreadyClaimed
            }
        },
    };
    Ok(verdict)
}

/// Inserts a claim unless the key exists; its sequence number when this call claimed it.
fn insert_claim(
    tx: &Connection,
    key: &str,
    owner: &str,
    approval: Option<i64>,
    at: i64,
) -> Result<Option<i64>, StoreError> {
    let n = tx
        .exec(
            "INSERT INTO claims (key, owner, approval_seq, claimed_at_ns) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(key) DO NOTHING",
            params![key, owner, approval, at],
        )
        .map_err(backend)?;
    if n != 1 {
        return Ok(None);
    }
    let seq = tx.last_insert_rowid();
    // A claim is also proof of life: in the same transaction, the owner's lease is renewed if less
    // than half of it is left (so the claim has at least half a lease before anyone may call it
    // interrupted, and a burst of claims rewrites the owner's row once, not once a claim; the
    // heartbeat thread renews it every quarter lease besides).
    tx.exec(
        "UPDATE owners SET heartbeat_at_ns = ?1
         WHERE owner = ?2 AND heartbeat_at_ns < ?1 - lease_ns / 2",
        params![at, owner],
    )
    .map_err(backend)?;
    Ok(Some(seq))
}

/// Records the effect event of claim `key` (row `seq`) completed with `outcome` at `at` (none for
/// `not_started`), for the endpoints subscribed to it.
pub(crate) fn record_effect(
    tx: &Connection,
    key: &IdempotencyKey,
    seq: i64,
    outcome: &EffectOutcome,
    reconciled: bool,
    at: i64,
) -> Result<(), StoreError> {
    let Some(event_type) = WebhookEvent::effect_type(outcome) else {
        return Ok(());
    };
    crate::webhook::record(tx, event_type, |tx| {
        let approval = crate::webhook::approval_of_claim(tx, seq)?;
        WebhookEvent::effect(key, approval.as_ref(), outcome, reconciled, from_ns(at))
            .ok_or_else(|| StoreError::Backend("an effect without an event".into()))
    })
}

static OWNER_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Creates the database file with mode 0600 if it does not exist yet (Unix), so SQLite opens a
/// private file instead of creating one with the process umask. Special names (`:memory:`, the
/// empty temporary database, `file:` URIs) are left to SQLite.
fn create_private(path: &Path) -> Result<(), StoreError> {
    let special = path.as_os_str().is_empty()
        || path.as_os_str() == ":memory:"
        || path.to_str().is_some_and(|p| p.starts_with("file:"));
    if special {
        return Ok(());
    }
    let mut create = std::fs::OpenOptions::new();
    create.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut create, 0o600);
    match create.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::Backend(format!(
            "could not create {}: {e}",
            path.display()
        ))),
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the store in the file at `path` with the default options.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, SqliteOptions::default())
    }

    /// Opens (creating if needed) the store in the file at `path`: WAL, `synchronous=FULL`,
    /// `busy_timeout`, `foreign_keys=ON`, migrations, and a new owner with a lease.
    ///
    /// The file holds tool arguments and the audit log, so on Unix a new file is created with
    /// mode 0600 whatever the process umask; SQLite gives its `-wal` and `-shm` files the mode of
    /// the database file. An existing file keeps its mode: widening it (for an approver in the
    /// same group, say) is the operator's decision, and purra never changes it.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        create_private(&path)?;
        let conn = Connection::open(&path).map_err(backend)?;
        SqliteStore::start(conn, options, Some(path))
    }

    /// An in-memory store for unit tests. It reports itself not durable, so an agent with
    /// confirm-policy tools refuses it.
    pub fn open_in_memory() -> Result<SqliteStore, StoreError> {
        let conn = Connection::open_in_memory().map_err(backend)?;
        SqliteStore::start(conn, SqliteOptions::default(), None)
    }

    fn start(
        mut conn: Connection,
        options: SqliteOptions,
        path: Option<PathBuf>,
    ) -> Result<SqliteStore, StoreError> {
        let durable = path.is_some();
        configure(&conn, options.busy_timeout, durable)?;
        migrate(&mut conn)?;
        let at = now_ns()?;
        let pid = std::process::id();
        let owner = format!(
            "{pid}-{at}-{}",
            OWNER_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        // The fields are public: keep the heartbeat period non-zero whatever was set.
        let lease = options.lease.max(Duration::from_millis(4));
        let lease_ns = i64::try_from(lease.as_nanos()).unwrap_or(i64::MAX);
        {
            let tx = immediate(&mut conn)?;
            tx.exec(
                "INSERT INTO owners (owner, pid, opened_at_ns, heartbeat_at_ns, lease_ns)
                 VALUES (?1, ?2, ?3, ?3, ?4)",
                params![owner, pid, at, lease_ns],
            )
            .map_err(backend)?;
            append(
                &tx,
                at,
                &owner,
                "opened",
                None,
                None,
                None,
                &json!({"pid": pid, "leaseNs": lease_ns}),
            )?;
            tx.commit().map_err(backend)?;
        }
        let conn = Arc::new(Mutex::new(conn));
        let heartbeat = durable.then(|| {
            let (stop, wait) = mpsc::channel::<()>();
            let conn = Arc::clone(&conn);
            let owner = owner.clone();
            let period = lease / 4;
            let thread = std::thread::spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = wait.recv_timeout(period) {
                    // A failed renewal is retried next period; the lease allows three misses.
                    if let Ok(at) = now_ns() {
                        let _ = lock(&conn).exec(
                            "UPDATE owners SET heartbeat_at_ns = max(heartbeat_at_ns, ?1)
                             WHERE owner = ?2",
                            params![at, owner],
                        );
                    }
                }
            });
            (stop, thread)
        });
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                conn,
                writes: Arc::new(Writes {
                    file: durable,
                    ..Writes::default()
                }),
                owner,
                durable,
                heartbeat,
                path,
                event_poll: options.event_poll.max(Duration::from_millis(1)),
                events: EventSender::new(),
                pump: Mutex::new(None),
                reader: Arc::new(Mutex::new(None)),
                #[cfg(feature = "sessions")]
                watch: Mutex::new(None),
                round_trips: AtomicU64::new(0),
            }),
        })
    }

    /// Whether this store is backed by a file (false only for [`SqliteStore::open_in_memory`]).
    pub fn is_durable(&self) -> bool {
        self.inner.durable
    }

    /// This store's owner id, recorded with its claims and audit rows.
    pub fn owner(&self) -> &str {
        &self.inner.owner
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
        mut run: SuspendedRun,
    ) -> BoxFuture<'static, Result<Option<ApprovalId>, StoreError>> {
        self.write(move |tx, me| {
            let Some(id) = prepare_in(tx, me, &request, limit, now)? else {
                return Ok(None);
            };
            run.approval_id = id.clone();
            save_run_in(tx, me, &run)?;
            Ok(Some(id))
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
    ) -> BoxFuture<'static, Result<(), StoreError>> {
        let written = self.write(move |tx, me| {
            let answer = complete_in(tx, me, &key, &outcome)?;
            remove_run_in(tx, me, &run_id)?;
            Ok(answer)
        });
        Box::pin(async move { written.await? })
    }

    /// The durable writes this store (every clone of it) has committed for its callers through
    /// its group commit since it was opened.
    pub fn commit_counts(&self) -> purra_core::CommitCounts {
        purra_core::CommitCounts {
            writes: self.inner.writes.wrote.load(Ordering::Relaxed),
            commits: self.inner.writes.commits.load(Ordering::Relaxed),
        }
    }

    /// How many operations this store (every clone of it) has run on the blocking pool outside
    /// its group commit since it was opened: its callers' reads, mostly, each a hand-off to a
    /// blocking thread (the event pump's reads and the heartbeat's writes are not counted). A test
    /// counts a path's round trips to the store with it.
    pub fn round_trips(&self) -> u64 {
        self.inner.round_trips.load(Ordering::Relaxed)
    }

    /// Runs `op` like [`SqliteStore::run`] (a write in its own transaction, outside the group
    /// commit), then wakes the event pump.
    fn write_alone<T, F>(&self, op: F) -> BoxFuture<'static, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &str) -> Result<T, StoreError> + Send + 'static,
    {
        let done = self.run(op);
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            let result = done.await;
            inner.nudge();
            result
        })
    }

    /// Queues `op` for the next group commit and answers once that group is on disk (see the
    /// module documentation), then wakes the event pump. `op` runs inside a savepoint: an `Err` rolls back its changes only.
    pub(crate) fn write<T, F>(&self, op: F) -> BoxFuture<'static, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &str) -> Result<T, StoreError> + Send + 'static,
    {
        self.queue_write(op, false)
    }

    /// [`SqliteStore::write`] for a write that needs to survive the process being killed but
    /// not a power loss (a Streamable HTTP session's event log and last-seen time: what a client
    /// resuming at another process reads while this machine runs). A group of such writes only
    /// commits with `synchronous=NORMAL`, without the sync (on a slow disk, milliseconds); one
    /// that shares its group with a durable write is synced with it.
    pub(crate) fn write_relaxed<T, F>(&self, op: F) -> BoxFuture<'static, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &str) -> Result<T, StoreError> + Send + 'static,
    {
        self.queue_write(op, true)
    }

    fn queue_write<T, F>(&self, op: F, relaxed: bool) -> BoxFuture<'static, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &str) -> Result<T, StoreError> + Send + 'static,
    {
        let writes = Arc::clone(&self.inner.writes);
        let conn = Arc::clone(&self.inner.conn);
        let owner = self.inner.owner.clone();
        let inner = Arc::clone(&self.inner);
        let (send, recv) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let result = conn.and_then(|(conn, me)| op(conn, me));
            Finish {
                keep: result.is_ok(),
                answer: Box::new(move |committed: Result<(), StoreError>| {
                    let _ = send.send(committed.and(result));
                }),
            }
        });
        Box::pin(async move {
            // Queued and led on the first poll, with no await in between: a future dropped
            // before that never wrote, one dropped after is written all the same.
            if enqueue_as(&writes, job, relaxed) {
                tokio::task::spawn_blocking(move || lead(&writes, &conn, &owner));
            }
            let result = recv
                .await
                .map_err(|_| StoreError::Backend("store operation panicked".into()))?;
            // Committed (or failed): the event pump reads what this store wrote.
            inner.nudge();
            result
        })
    }

    /// Starts the event pump unless it runs: it reads audit rows after the current end of the log.
    fn start_pump(&self) -> Result<(), StoreError> {
        let mut pump = self.inner.pump.lock().unwrap_or_else(|p| p.into_inner());
        if pump.is_some() {
            return Ok(());
        }
        // Its own reader on a file (WAL readers never wait for writers); the store's connection for an
        // in-memory store, which no other process can change.
        let reader = match &self.inner.path {
            Some(path) => {
                let conn = Connection::open(path).map_err(backend)?;
                conn.busy_timeout(Duration::from_secs(5)).map_err(backend)?;
                crate::migrate::plan_once(&conn)?;
                Reader::Own(conn)
            }
            None => Reader::Shared(Arc::clone(&self.inner.conn)),
        };
        let mut last = reader.with(|conn| {
            conn.row("SELECT coalesce(max(seq), 0) FROM audit", [], |r| r.get(0))
                .map_err(backend)
        })?;
        let (wake, woken) = mpsc::channel::<()>();
        let events = self.inner.events.clone();
        let poll = self.inner.event_poll;
        let thread = std::thread::spawn(move || loop {
            match woken.recv_timeout(poll) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            while woken.try_recv().is_ok() {}
            loop {
                let Ok(rows) = reader.with(|conn| crate::audit::read(conn, last, MAX_PAGE)) else {
                    // A failed read is retried at the next wake-up; subscribers may have missed
                    // nothing yet, but say so to be safe.
                    events.send(StoreEvent::Resync);
                    break;
                };
                for row in &rows {
                    last = row.seq;
                    let approval = row.approval_id.as_deref();
                    let key = row.claim_key.as_deref();
                    if let Some(e) = StoreEvent::from_audit(&row.event, approval, key, &row.detail)
                    {
                        events.send(e);
                    }
                }
                if rows.len() < MAX_PAGE as usize {
                    break;
                }
            }
        });
        *pump = Some((wake, thread));
        Ok(())
    }

    /// Runs the read `op` on the blocking pool with a reader connection of its own (a file
    /// store; an in-memory one uses its one connection): a read of committed rows that never
    /// waits for the writer's commit, which holds the writer connection for as long as its sync
    /// takes (WAL readers never wait for writers). For reads on the request path of a Streamable
    /// HTTP session (its record on every request).
    pub(crate) fn read<T, F>(&self, op: F) -> BoxFuture<'static, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let Some(path) = self.inner.path.clone() else {
            return self.run(move |conn, _| op(conn));
        };
        self.inner.round_trips.fetch_add(1, Ordering::Relaxed);
        let reader = Arc::clone(&self.inner.reader);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut slot = reader.lock().unwrap_or_else(|p| p.into_inner());
                let conn = match &mut *slot {
                    Some(conn) => conn,
                    None => {
                        let conn = Connection::open_with_flags(
                            &path,
                            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                                | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
                        )
                        .map_err(backend)?;
                        conn.busy_timeout(Duration::from_secs(5)).map_err(backend)?;
                        conn.set_prepared_statement_cache_capacity(16);
                        crate::migrate::plan_once(&conn)?;
                        slot.insert(conn)
                    }
                };
                op(conn)
            })
            .await
            .map_err(|_| StoreError::Backend("store operation panicked".into()))?
        })
    }

    /// How many times a Streamable HTTP session was ended or saved with another state or owner
    /// in the file, by any process (schema step 16's triggers count them), read at once on the
    /// calling thread: `None` for an in-memory store, or when the file cannot be read without
    /// waiting (a lock held: the caller then reads the session itself).
    ///
    /// It costs no query while nothing was committed to the file: a reader connection of its
    /// own reads `PRAGMA data_version` (the WAL index in shared memory; it changes when any other
    /// connection commits) and reads the count again only when that changed.
    #[cfg(feature = "sessions")]
    pub(crate) fn sessions_changes(&self) -> Option<u64> {
        let path = self.inner.path.as_ref()?;
        let mut slot = self.inner.watch.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            let conn = Connection::open_with_flags(
                path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                    | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .ok()?;
            // Never wait for a lock on the caller's thread (an async task's).
            conn.busy_timeout(Duration::ZERO).ok()?;
            *slot = Some(Watch {
                conn,
                data_version: None,
                changes: 0,
            });
        }
        let watch = slot.as_mut()?;
        let read = (|| {
            // The version first: a commit between the two reads changes it again.
            let version: i64 = watch.conn.row("PRAGMA data_version", [], |r| r.get(0))?;
            if watch.data_version != Some(version) {
                watch.changes = watch
                    .conn
                    .row("SELECT n FROM http_session_changes", [], |r| r.get(0))?;
                watch.data_version = Some(version);
            }
            Ok::<_, rusqlite::Error>(watch.changes)
        })();
        match read {
            Ok(n) => u64::try_from(n).ok(),
            Err(_) => {
                watch.data_version = None;
                None
            }
        }
    }

    /// Runs `op` with the connection on the blocking pool.
    pub(crate) fn run<T, F>(&self, op: F) -> BoxFuture<'static, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &str) -> Result<T, StoreError> + Send + 'static,
    {
        self.inner.round_trips.fetch_add(1, Ordering::Relaxed);
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut conn = lock(&inner.conn);
                op(&mut conn, &inner.owner)
            })
            .await
            .map_err(|_| StoreError::Backend("store operation panicked".into()))?
        })
    }
}

impl OperatorStore for SqliteStore {
    fn owner(&self) -> &str {
        &self.inner.owner
    }

    fn approvals(
        &self,
        query: ApprovalQuery,
    ) -> BoxFuture<'_, Result<Vec<ApprovalView>, StoreError>> {
        self.run(move |conn, _| read_views(conn, &ViewFilter::of(&query)?))
    }

    fn approval_page(
        &self,
        query: ApprovalQuery,
    ) -> BoxFuture<'_, Result<ApprovalPage, StoreError>> {
        self.run(move |conn, _| {
            let mut filter = ViewFilter::of(&query)?;
            let limit = filter.limit;
            // One more than the page: whether it is there says whether more follow.
            filter.limit = limit + 1;
            Ok(ApprovalPage::from_read(read_views(conn, &filter)?, limit))
        })
    }

    fn count_approvals(&self, query: ApprovalQuery) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.run(move |conn, _| count_views(conn, &ViewFilter::of(&query)?))
    }

    fn count_approvals_up_to(
        &self,
        query: ApprovalQuery,
        up_to: u64,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.run(move |conn, _| count_views_up_to(conn, &ViewFilter::of(&query)?, up_to))
    }

    fn prepare_within(
        &self,
        request: ApprovalRequest,
        limit: u32,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>> {
        self.write(move |tx, me| prepare_in(tx, me, &request, limit, now))
    }

    fn approval(&self, id: ApprovalId) -> BoxFuture<'_, Result<Option<ApprovalView>, StoreError>> {
        self.run(move |conn, _| match approval_seq(&id) {
            None => Ok(None),
            Some(seq) => Ok(read_views(conn, &ViewFilter::one(seq))?.pop()),
        })
    }

    fn audit(
        &self,
        after_seq: i64,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<AuditEntry>, StoreError>> {
        self.run(move |conn, _| crate::audit::read(conn, after_seq, limit.min(MAX_PAGE)))
    }

    fn approval_audit(&self, id: ApprovalId) -> BoxFuture<'_, Result<Vec<AuditEntry>, StoreError>> {
        self.run(move |conn, _| approval_audit_in(conn, &id))
    }

    fn approval_audits(
        &self,
        ids: Vec<ApprovalId>,
    ) -> BoxFuture<'_, Result<Vec<Vec<AuditEntry>>, StoreError>> {
        self.run(move |conn, _| ids.iter().map(|id| approval_audit_in(conn, id)).collect())
    }

    fn load_suspended_each(
        &self,
        run_ids: Vec<RunId>,
    ) -> BoxFuture<'_, Result<Vec<Option<SuspendedRun>>, StoreError>> {
        self.run(move |conn, _| run_ids.iter().map(|id| suspended_in(conn, id)).collect())
    }

    fn run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        self.run(|conn, _| {
            let mut stmt = conn
                .prepare_cached("SELECT run_id FROM approvals GROUP BY run_id ORDER BY min(seq)")
                .map_err(backend)?;
            let rows = stmt
                .query_map([], |row| row.get::<_, String>(0))
                .map_err(backend)?;
            rows.map(|r| r.map(RunId).map_err(backend)).collect()
        })
    }

    fn suspended_run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        self.run(|conn, _| {
            let mut stmt = conn
                .prepare_cached("SELECT run_id FROM suspended_runs ORDER BY run_id")
                .map_err(backend)?;
            let rows = stmt
                .query_map([], |row| row.get::<_, String>(0))
                .map_err(backend)?;
            rows.map(|r| r.map(RunId).map_err(backend)).collect()
        })
    }

    /// Marks every claim without outcome whose owner is gone (closed, or its lease lapsed at `now`)
    /// as `unknown` with reason `interrupted`, one audit row each. Claims of live owners, this store's
    /// included, are left alone. The host calls it on startup and may call it again later (a crashed
    /// process's claims are found once its lease has lapsed). No claim is ever dispatched again either
    /// way; this only makes the stored outcome say what is known.
    fn reconcile_interrupted_claims(
        &self,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Reconciliation, StoreError>> {
        self.write_alone(move |conn, me| {
            let now = to_ns(now)?;
            let tx = immediate(conn)?;
            let mut gone: Vec<(i64, String, String)> = Vec::new();
            let mut report = Reconciliation::default();
            {
                let mut stmt = tx
                    .prepare(
                        "SELECT c.seq, c.key, c.owner, o.closed_at_ns IS NOT NULL
                                OR o.heartbeat_at_ns + o.lease_ns <= ?1
                         FROM claims c JOIN owners o ON o.owner = c.owner
                         WHERE c.outcome IS NULL ORDER BY c.key",
                    )
                    .map_err(backend)?;
                let rows = stmt
                    .query_map(params![now], |row| {
                        Ok((
                            row.get::<_, i64>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, String>(2)?,
                            row.get::<_, bool>(3)?,
                        ))
                    })
                    .map_err(backend)?;
                for row in rows {
                    let (seq, key, owner, is_gone) = row.map_err(backend)?;
                    if owner == me {
                        report.in_flight_here += 1;
                    } else if is_gone {
                        gone.push((seq, key, owner));
                    } else {
                        report.in_flight_elsewhere += 1;
                    }
                }
            }
            let reason =
                ErrorCode::new(INTERRUPTED).unwrap_or_else(|_| unreachable!("a valid identifier"));
            let outcome = EffectOutcome::Unknown { reason };
            let outcome_json = serde_json::to_string(&outcome).map_err(json_error)?;
            let at = now_ns()?;
            for (seq, key, owner) in gone {
                tx.exec(
                    "UPDATE claims SET outcome = 'unknown', outcome_json = ?1, completed_at_ns = ?2
                     WHERE seq = ?3 AND outcome IS NULL",
                    params![outcome_json, at, seq],
                )
                .map_err(backend)?;
                append(
                    &tx,
                    at,
                    me,
                    "interrupted",
                    None,
                    Some((&key, Some(seq))),
                    None,
                    &json!({"claimOwner": owner, "outcome": outcome, "checkedAtNs": now}),
                )?;
                let key = IdempotencyKey(key);
                record_effect(&tx, &key, seq, &outcome, false, at)?;
                report.interrupted.push(key);
            }
            tx.commit().map_err(backend)?;
            Ok(report)
        })
    }

    fn reconcile_effect(
        &self,
        key: IdempotencyKey,
        by: String,
        evidence: String,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write_alone(move |conn, me| {
            crate::effects::reconcile(conn, me, &key, &by, &evidence, &outcome)
        })
    }

    fn votes(&self, id: ApprovalId) -> BoxFuture<'_, Result<Vec<Vote>, StoreError>> {
        self.workflow_votes(id)
    }

    fn escalate_due(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>> {
        self.write(move |tx, me| crate::workflow::escalate_due(tx, me, to_ns(now)?))
    }

    fn expire_due(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<ApprovalId>, StoreError>> {
        self.write(move |tx, me| crate::workflow::expire_due(tx, me, to_ns(now)?))
    }

    fn effects(&self, query: EffectQuery) -> BoxFuture<'_, Result<EffectPage, StoreError>> {
        self.run(move |conn, _| crate::effects::page(conn, &query))
    }

    fn effect(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<Option<EffectView>, StoreError>> {
        self.run(move |conn, _| crate::effects::one(conn, &key))
    }

    fn claim_resend(
        &self,
        key: IdempotencyKey,
        by: String,
    ) -> BoxFuture<'_, Result<ResendClaim, StoreError>> {
        self.write_alone(move |conn, me| crate::effects::claim_resend(conn, me, &key, &by))
    }

    fn complete_resend(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write_alone(move |conn, me| crate::effects::complete_resend(conn, me, &key, &outcome))
    }
}

impl SqliteStore {
    fn workflow_votes(&self, id: ApprovalId) -> BoxFuture<'_, Result<Vec<Vote>, StoreError>> {
        self.run(move |conn, _| match approval_seq(&id) {
            Some(seq) => crate::workflow::votes(conn, seq),
            None => Ok(Vec::new()),
        })
    }
}

impl ApprovalGateway for SqliteStore {
    fn is_durable(&self) -> bool {
        self.inner.durable
    }

    fn prepare(&self, request: ApprovalRequest) -> BoxFuture<'_, Result<ApprovalId, StoreError>> {
        self.write(move |tx, me| insert_approval(tx, me, &request))
    }

    fn decide(&self, id: ApprovalId, decision: Decision) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(move |tx, me| decide_in(tx, me, &id, &decision))
    }

    fn record(&self, id: ApprovalId) -> BoxFuture<'_, Result<Option<ApprovalRecord>, StoreError>> {
        self.run(move |conn, _| {
            let Some(seq) = approval_seq(&id) else {
                return Ok(None);
            };
            Ok(read_views(conn, &ViewFilter::one(seq))?
                .pop()
                .map(|v| ApprovalRecord {
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
        self.write(move |tx, me| claim_in(tx, me, &id, &current_intent, now))
    }

    fn decide_and_claim(
        &self,
        id: ApprovalId,
        decision: Decision,
        current_intent: JsonIdentity,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<ClaimVerdict, StoreError>> {
        // One job of the group commit: a refused decision rolls back its savepoint (nothing
        // written), a recorded one commits with the claim.
        self.write(move |tx, me| {
            decide_in(tx, me, &id, &decision)?;
            claim_in(tx, me, &id, &current_intent, now)
        })
    }

    fn receipts(&self) -> Arc<dyn IdempotencyStore> {
        Arc::new(self.clone())
    }

    fn subscribe(&self) -> StoreEvents {
        let events = self.inner.events.subscribe();
        if self.start_pump().is_err() {
            // No pump (the file could not be opened for reading): say so at once; the subscriber
            // re-reads, and the next subscription tries again.
            self.inner.events.send(StoreEvent::Resync);
        }
        events
    }
}

impl IdempotencyStore for SqliteStore {
    fn is_durable(&self) -> bool {
        self.inner.durable
    }

    fn claim(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<ClaimResult, StoreError>> {
        self.write(move |tx, me| {
            let at = now_ns()?;
            let result = if let Some(seq) = insert_claim(tx, &key.0, me, None, at)? {
                let claim = Some((key.0.as_str(), Some(seq)));
                append(tx, at, me, "claimed", None, claim, None, &json!({}))?;
                ClaimResult::Claimed
            } else {
                let (seq, existing) = read_claim(tx, &key.0)?
                    .ok_or_else(|| StoreError::Backend("claim vanished".into()))?;
                append(
                    tx,
                    at,
                    me,
                    "claim_refused",
                    None,
                    Some((&key.0, Some(seq))),
                    None,
                    &json!({"reason": "key_already_claimed"}),
                )?;
                ClaimResult::Existing(claim_state(existing)?)
            };
            Ok(result)
        })
    }

    fn complete(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        // `Ok(Err(..))`: a rejected outcome whose audit row is committed all the same.
        let written = self.write(move |tx, me| complete_in(tx, me, &key, &outcome));
        Box::pin(async move { written.await? })
    }

    fn state(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<Option<ClaimState>, StoreError>> {
        self.run(move |conn, _| {
            read_claim(conn, &key.0)?
                .map(|(_, outcome)| claim_state(outcome))
                .transpose()
        })
    }
}

impl RunStore for SqliteStore {
    fn is_durable(&self) -> bool {
        self.inner.durable
    }

    fn save_suspended(&self, run: SuspendedRun) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(move |tx, me| save_run_in(tx, me, &run))
    }

    fn load_suspended(
        &self,
        run_id: RunId,
    ) -> BoxFuture<'_, Result<Option<SuspendedRun>, StoreError>> {
        self.run(move |conn, _| suspended_in(conn, &run_id))
    }

    fn remove_suspended(&self, run_id: RunId) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(move |tx, me| remove_run_in(tx, me, &run_id))
    }
}

/// The audit trail of approval `id` ([`OperatorStore::approval_audit`]) on `conn`.
fn approval_audit_in(conn: &Connection, id: &ApprovalId) -> Result<Vec<AuditEntry>, StoreError> {
    let Some(seq) = approval_seq(id) else {
        return Ok(Vec::new());
    };
    let pointers = conn
        .row(
            "SELECT claim_seq, prepared_audit, decided_audit, settled_audit
             FROM approvals WHERE seq = ?1",
            params![seq],
            |r| Ok((r.get(0)?, [r.get(1)?, r.get(2)?, r.get(3)?])),
        )
        .optional()
        .map_err(backend)?;
    // An approval that does not exist can still have indexed rows (a suspended run naming it):
    // the trail is whatever names it, as before.
    let (claim, pointed) = pointers.unwrap_or((None, [None; 3]));
    crate::audit::read_for_approval(
        conn,
        &crate::audit::TrailOf {
            approval: seq,
            pointed,
            claim,
        },
    )
}

/// The suspended run `run_id` ([`RunStore::load_suspended`]) on `conn`.
fn suspended_in(conn: &Connection, run_id: &RunId) -> Result<Option<SuspendedRun>, StoreError> {
    let text: Option<String> = conn
        .row(
            "SELECT run_json FROM suspended_runs WHERE run_id = ?1",
            params![run_id.as_str()],
            |row| row.get(0),
        )
        .optional()
        .map_err(backend)?;
    text.map(|t| serde_json::from_str(&t).map_err(json_error))
        .transpose()
}

/// Prepares `request` unless its principal has `limit` approvals open at `now`: counted in the
/// group's `BEGIN IMMEDIATE` transaction, before the insert, so no other writer of the file (this
/// process's or another's) runs between the two.
fn prepare_in(
    tx: &Connection,
    me: &str,
    request: &ApprovalRequest,
    limit: u32,
    now: SystemTime,
) -> Result<Option<ApprovalId>, StoreError> {
    let principal = request_principal(request)?;
    let now = to_ns(now)?;
    let open: i64 = tx
        .row(
            OPEN_OF_PRINCIPAL,
            params![principal, now, i64::from(limit)],
            |r| r.get(0),
        )
        .map_err(backend)?;
    if open >= i64::from(limit) {
        return Ok(None);
    }
    insert_approval(tx, me, request).map(Some)
}

/// Saves (or replaces) a suspended run, with its `run_suspended` audit row.
fn save_run_in(tx: &Connection, me: &str, run: &SuspendedRun) -> Result<(), StoreError> {
    let run_json = serde_json::to_string(run).map_err(json_error)?;
    let at = now_ns()?;
    tx.exec(
        "INSERT INTO suspended_runs (run_id, agent, run_json, saved_at_ns)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(run_id) DO UPDATE SET agent = excluded.agent,
            run_json = excluded.run_json, saved_at_ns = excluded.saved_at_ns",
        params![run.run_id.as_str(), run.agent, run_json, at],
    )
    .map_err(backend)?;
    append(
        tx,
        at,
        me,
        "run_suspended",
        Some((&run.approval_id.0, Trail::Indexed)),
        None,
        Some(run.run_id.as_str()),
        &json!({"intentDigest": run.intent_digest.as_str()}),
    )?;
    Ok(())
}

/// Drops a suspended run (a `run_removed` audit row when there was one).
fn remove_run_in(tx: &Connection, me: &str, run_id: &RunId) -> Result<(), StoreError> {
    let n = tx
        .exec(
            "DELETE FROM suspended_runs WHERE run_id = ?1",
            params![run_id.as_str()],
        )
        .map_err(backend)?;
    if n > 0 {
        append(
            tx,
            now_ns()?,
            me,
            "run_removed",
            None,
            None,
            Some(run_id.as_str()),
            &json!({}),
        )?;
    }
    Ok(())
}

/// Records the outcome of the claim under `key`; `Ok(Err(Conflict))` when it has one already
/// (the offered one is kept as evidence in an `outcome_rejected` audit row, committed all the
/// same).
fn complete_in(
    tx: &Connection,
    me: &str,
    key: &IdempotencyKey,
    outcome: &EffectOutcome,
) -> Result<Result<(), StoreError>, StoreError> {
    let outcome_json = serde_json::to_string(&outcome).map_err(json_error)?;
    let at = now_ns()?;
    match read_claim(tx, &key.0)? {
        None => Err(StoreError::NotFound),
        Some((seq, Some(existing))) => {
            // Kept as evidence (for example a late outcome after `interrupted`), never applied.
            let existing: serde_json::Value =
                serde_json::from_str(&existing).map_err(json_error)?;
            append(
                tx,
                at,
                me,
                "outcome_rejected",
                None,
                Some((&key.0, Some(seq))),
                None,
                &json!({"stored": existing, "offered": outcome}),
            )?;
            // Committed with the group: the rejection stays on record.
            Ok(Err(StoreError::Conflict(
                "the claim already has an outcome",
            )))
        }
        Some((seq, None)) => {
            tx.exec(
                "UPDATE claims SET outcome = ?1, outcome_json = ?2, completed_at_ns = ?3
                 WHERE seq = ?4",
                params![outcome_kind(outcome), outcome_json, at, seq],
            )
            .map_err(backend)?;
            append(
                tx,
                at,
                me,
                "outcome",
                None,
                Some((&key.0, Some(seq))),
                None,
                &json!({"outcome": outcome}),
            )?;
            record_effect(tx, key, seq, outcome, false, at)?;
            Ok(Ok(()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queued write that does nothing.
    fn noop() -> Job {
        Box::new(|_| Finish {
            keep: true,
            answer: Box::new(|_| {}),
        })
    }

    fn queued(writes: &Writes) -> (usize, bool) {
        let queue = lock_queue(&writes.queue);
        (queue.jobs.len(), queue.leader)
    }

    /// A file of its own in the temporary directory.
    fn temp_db(name: &str) -> PathBuf {
        let at = now_ns().unwrap();
        std::env::temp_dir().join(format!(
            "purra-sqlite-{name}-{}-{at}.db",
            std::process::id()
        ))
    }

    /// Holds the store's writer connection on a thread of its own until told to let go.
    fn hold(store: &SqliteStore) -> (mpsc::Sender<()>, JoinHandle<()>) {
        let conn = Arc::clone(&store.inner.conn);
        let (release, held) = mpsc::channel::<()>();
        let (locked, is_locked) = mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _guard = lock(&conn);
            locked.send(()).unwrap();
            let _ = held.recv();
        });
        is_locked.recv().unwrap();
        (release, holder)
    }

    fn synchronous(conn: &Connection) -> Result<i64, StoreError> {
        conn.row("PRAGMA synchronous", [], |r| r.get(0))
            .map_err(backend)
    }

    /// A group of relaxed writes commits at `synchronous=NORMAL` (1), every other write at FULL
    /// (2), also after a relaxed group and when a relaxed write shares a group with a durable one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_a_group_of_relaxed_writes_commits_without_the_sync() {
        let store = SqliteStore::open(temp_db("relaxed")).unwrap();
        assert_eq!(store.write_relaxed(|c, _| synchronous(c)).await.unwrap(), 1);
        assert_eq!(store.write(|c, _| synchronous(c)).await.unwrap(), 2);
        assert_eq!(store.run(|c, _| synchronous(c)).await.unwrap(), 2);
        // A durable write holds the leader (the connection is locked) while a relaxed and a
        // durable one queue: they form the next group, which syncs.
        let (release, held) = hold(&store);
        let first = tokio::spawn(store.write(|_, _| Ok(())));
        let taken = |q: &Queue| q.leader && q.jobs.is_empty();
        while !taken(&lock_queue(&store.inner.writes.queue)) {
            tokio::task::yield_now().await;
        }
        let relaxed = tokio::spawn(store.write_relaxed(|c, _| synchronous(c)));
        let durable = tokio::spawn(store.write(|c, _| synchronous(c)));
        while lock_queue(&store.inner.writes.queue).jobs.len() < 2 {
            tokio::task::yield_now().await;
        }
        release.send(()).unwrap();
        held.join().unwrap();
        first.await.unwrap().unwrap();
        assert_eq!(relaxed.await.unwrap().unwrap(), 2);
        assert_eq!(durable.await.unwrap().unwrap(), 2);
    }

    /// A relaxed group under way takes no durable write into it: that one starts the next group.
    #[test]
    fn a_relaxed_group_leaves_a_durable_write_to_the_next() {
        let writes = Writes::default();
        enqueue_as(&writes, noop(), true);
        let (jobs, durable) = gather_as(&writes, 0, 5, Instant::now(), false).unwrap();
        assert_eq!((jobs.len(), durable), (1, 0));
        enqueue_as(&writes, noop(), true);
        enqueue_as(&writes, noop(), false);
        assert!(gather_as(&writes, 1, 5, Instant::now(), true).is_none());
        let (jobs, durable) = gather_as(&writes, 0, 5, Instant::now(), false).unwrap();
        assert_eq!((jobs.len(), durable), (2, 1));
    }

    /// A read runs on a reader of the file: it does not wait for the writer connection, which
    /// a group holds while its commit syncs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_does_not_wait_for_the_writer_connection() {
        let store = SqliteStore::open(temp_db("reader")).unwrap();
        store
            .write(|c, _| {
                c.exec(
                    "UPDATE owners SET pid = 7 WHERE owner = (SELECT max(owner) FROM owners)",
                    [],
                )
                .map_err(backend)
            })
            .await
            .unwrap();
        let (release, holder) = hold(&store);
        let read = store.read(|c| {
            c.row("SELECT max(pid) FROM owners WHERE pid = 7", [], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(backend)
        });
        let seen = tokio::time::timeout(Duration::from_secs(60), read).await;
        release.send(()).unwrap();
        holder.join().unwrap();
        assert_eq!(
            seen.expect("the read waited for the writer connection")
                .unwrap(),
            7,
            "it reads what was committed"
        );
    }

    /// The first write starts the leader; later ones join its queue. A group's start with nothing
    /// queued (and nothing expected in time) steps the leader down, so the next write starts one;
    /// a group under way with nothing more to come is only ended.
    #[test]
    fn the_leader_steps_down_only_at_a_groups_start_with_nothing_queued() {
        let writes = Writes::default();
        assert!(enqueue(&writes, noop()));
        assert!(!enqueue(&writes, noop()));
        assert_eq!(
            gather(&writes, 0, 5, Instant::now()).map(|j| j.len()),
            Some(2)
        );
        assert_eq!(queued(&writes), (0, true));
        assert!(gather(&writes, 2, 5, Instant::now()).is_none());
        assert_eq!(
            queued(&writes),
            (0, true),
            "a group under way keeps its leader"
        );
        assert!(gather(&writes, 0, 5, Instant::now()).is_none());
        assert_eq!(queued(&writes), (0, false), "the leader stepped down");
        assert!(enqueue(&writes, noop()), "the next write starts a leader");
    }

    /// A group stops taking writes once it has as many as expected; what is queued then waits for
    /// the next group, whose start takes everything queued.
    #[test]
    fn a_group_takes_writes_until_it_has_what_it_expects() {
        let writes = Writes::default();
        let far = Instant::now() + Duration::from_secs(60);
        enqueue(&writes, noop());
        enqueue(&writes, noop());
        assert_eq!(gather(&writes, 1, 3, far).map(|j| j.len()), Some(2));
        enqueue(&writes, noop());
        assert!(
            gather(&writes, 3, 3, far).is_none(),
            "the group has its writes"
        );
        enqueue(&writes, noop());
        assert_eq!(queued(&writes), (2, true));
        assert_eq!(gather(&writes, 0, 1, far).map(|j| j.len()), Some(2));
    }

    /// A leader waiting for an expected write is woken by it (the wait's deadline is a minute
    /// away, so only the wake-up returns the write), and gives up at its deadline when none comes.
    #[test]
    fn a_gathering_leader_is_woken_by_the_next_write() {
        let writes = Arc::new(Writes::default());
        enqueue(&writes, noop());
        assert_eq!(
            gather(&writes, 0, 1, Instant::now()).map(|j| j.len()),
            Some(1)
        );
        let waiting = std::thread::spawn({
            let writes = Arc::clone(&writes);
            move || {
                let far = Instant::now() + Duration::from_secs(60);
                gather(&writes, 1, 2, far).map(|j| j.len())
            }
        });
        while !lock_queue(&writes.queue).gathering {
            std::thread::yield_now();
        }
        assert!(!enqueue(&writes, noop()));
        assert_eq!(waiting.join().unwrap(), Some(1));
        assert!(!lock_queue(&writes.queue).gathering);
        assert!(gather(&writes, 1, 2, Instant::now()).is_none());
        assert_eq!(queued(&writes), (0, true));
    }

    /// A store's connection compiles each cached read once: run again with other values bound
    /// (an approval by its key, the event pump's page of the audit log), the statement is not
    /// prepared again. Without the planner's stability guarantee (`plan_once`) SQLite recompiles
    /// a statement at every run whose parameters it looked at while planning (`LIMIT ?`).
    #[test]
    fn a_cached_read_run_with_other_values_is_not_compiled_again() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::migrate::configure(&conn, Duration::from_secs(1), false).unwrap();
        migrate(&mut conn).unwrap();
        for n in 1..=3 {
            read_views(&conn, &ViewFilter::one(n)).unwrap();
            crate::audit::read(&conn, n, MAX_PAGE - u32::try_from(n).unwrap()).unwrap();
        }
        let (one, _) = ViewFilter::one(1).sql();
        let page = format!(
            "SELECT {} FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            crate::audit::COLUMNS
        );
        for sql in [one, page] {
            let stmt = conn.prepare_cached(&sql).unwrap();
            assert_eq!(
                stmt.get_status(rusqlite::StatementStatus::RePrepare),
                0,
                "{sql}"
            );
        }
    }

    /// The query plan of `sql` with `params`, its steps joined.
    fn plan_of(conn: &Connection, sql: &str, params: Vec<rusqlite::types::Value>) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows: Vec<String> = stmt
            .query_map(rusqlite::params_from_iter(params), |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        rows.join("; ")
    }

    /// What each kind of listing reads: one approval by its key, the pending ones through their
    /// partial index (oldest or newest first, from either cursor, and their count), a run's
    /// through `approvals_by_run`, a principal's open ones through `approvals_open_by_principal`
    /// (listed, counted, and counted up to a limit before a prepare), the history by the key from
    /// its cursor down; none by reading the table from the start unless it lists everything.
    #[test]
    fn each_listing_seeks_with_an_index() {
        let mut conn = Connection::open_in_memory().unwrap();
        // Planned as the store's connections plan: once, whatever is bound.
        crate::migrate::plan_once(&conn).unwrap();
        migrate(&mut conn).unwrap();
        let plan = |filter: &ViewFilter| {
            let (sql, params) = filter.sql();
            plan_of(&conn, &sql, params)
        };
        let count = |filter: &ViewFilter| {
            let (sql, params) = filter.count_sql();
            plan_of(&conn, &sql, params)
        };
        let listing = |state, verdict, run_id: Option<&str>| ViewFilter {
            state,
            verdict,
            run_id: run_id.map(str::to_owned),
            limit: 10,
            ..ViewFilter::every()
        };
        let one = plan(&ViewFilter::one(7));
        assert!(
            one.contains("SEARCH a USING INTEGER PRIMARY KEY (rowid=?)"),
            "{one}"
        );
        let pending = plan(&listing(Some("prepared"), None, None));
        assert!(
            pending.contains("USING INDEX approvals_pending"),
            "{pending}"
        );
        // The approver page's pages: newest first below a cursor, and how many more.
        let newest = ViewFilter {
            before: Some(500),
            newest_first: true,
            ..listing(Some("prepared"), None, None)
        };
        let newest_plan = plan(&newest);
        assert!(
            newest_plan.contains("SEARCH a USING INDEX approvals_pending (seq>? AND seq<?)"),
            "{newest_plan}"
        );
        assert!(!newest_plan.contains("TEMP B-TREE"), "{newest_plan}");
        let more = count(&newest);
        assert_eq!(
            more,
            "SEARCH a USING COVERING INDEX approvals_pending (seq>? AND seq<?)"
        );
        let run = plan(&listing(None, None, Some("r1")));
        assert!(run.contains("USING INDEX approvals_by_run"), "{run}");
        let approved_in_run = plan(&listing(Some("decided"), Some("approve"), Some("r1")));
        assert!(
            approved_in_run.contains("USING INDEX approvals_by_run"),
            "{approved_in_run}"
        );
        assert_eq!(
            count(&listing(None, None, Some("r1"))),
            "SEARCH a USING COVERING INDEX approvals_by_run (run_id=? AND rowid>?)"
        );
        // A principal's open approvals: a seek on the principal and the expiry.
        let open = ViewFilter {
            principal: Some("local".into()),
            open_at: Some(1),
            ..ViewFilter::every()
        };
        let seek = "USING COVERING INDEX approvals_open_by_principal (principal=? AND <expr>>?)";
        assert!(count(&open).contains(seek), "{}", count(&open));
        let listed = plan(&open);
        assert!(
            listed.contains("USING INDEX approvals_open_by_principal (principal=? AND <expr>>?)"),
            "{listed}"
        );
        let capped = plan_of(
            &conn,
            OPEN_OF_PRINCIPAL,
            vec!["local".to_owned().into(), 1i64.into(), 16i64.into()],
        );
        assert!(capped.contains(seek), "{capped}");
        // The history, newest first from its cursor: the index of decided approvals read
        // downwards (never the pending ones), no sort.
        let history = plan(&ViewFilter {
            decided: true,
            before: Some(500),
            newest_first: true,
            limit: 51,
            ..ViewFilter::every()
        });
        assert!(
            history.contains("SEARCH a USING INDEX approvals_decided (seq>? AND seq<?)"),
            "{history}"
        );
        assert!(!history.contains("TEMP B-TREE"), "{history}");
    }

    #[tokio::test]
    async fn the_in_memory_store_keeps_the_contract_but_is_not_durable() {
        let store = SqliteStore::open_in_memory().unwrap();
        assert!(!store.is_durable());
        let key = IdempotencyKey("k".into());
        assert_eq!(store.claim(key.clone()).await, Ok(ClaimResult::Claimed));
        assert_eq!(
            store.claim(key).await,
            Ok(ClaimResult::Existing(ClaimState::InFlight))
        );
    }
}
