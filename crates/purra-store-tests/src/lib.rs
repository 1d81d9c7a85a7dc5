//! One contract test suite, every store: the semantics of purra's durable stores, written once and run
//! unchanged against each (purra-sqlite, purra-postgres).
//!
//! A store's test binary implements [`Harness`] (fresh databases, opening a store, raw SQL for the checks
//! that go around the store) and expands [`contract_tests!`], which defines one `#[test]` per contract
//! test plus the `child` entry point the two-process tests re-execute the binary into.
//!
//! The suite: every transition of the durable write state machine with exact values ([`transitions`]),
//! durability across reopening and Core's agent suspended on one store and resumed on another
//! ([`reopen`]), two OS processes racing for 100 approved intents and a claimant killed with SIGKILL
//! ([`race`]), and the operator's view and store events, listings by page and the cap on a
//! principal's open approvals ([`operator`]), and the webhook outbox: events recorded with the
//! change that makes them, leases, retries keeping their id, given-up deliveries kept
//! ([`webhooks`]), and the credential store: records with exact values, a compare-and-swap
//! raced by two instances, sealing bound to the record, rotation, nothing secret at rest
//! ([`credentials`]), and the operator's effects: listings, reconciliation by a named operator
//! with bounded evidence, resends claimed once ([`effects`]), pinned tool definitions: one
//! catalog change per difference whichever instances see it, re-pinned by its approval
//! ([`pins`]), and standing grants: uses taken at most their number by racing instances, only
//! in bounds ([`grants`]), the write cycle's merged transactions: a decision with its claim, a
//! grant's use with its claim, both or nothing, decided and claimed once by racing instances
//! ([`cycles`]), approve with edit: both approvals and the audit in one step, only
//! the edited intent ever claimed, racing edits and decisions recording one ([`edits`]), and
//! approval workflows: quorum, escalation, expiry ([`workflow`]). Beside the suite, the browser tests' WebDriver client ([`webdriver`]), shared
//! by the crates' integration tests.

pub mod credentials;
pub mod cycles;
pub mod edits;
pub mod effects;
pub mod grants;
pub mod operator;
pub mod pins;
pub mod race;
pub mod reopen;
pub mod tasks;
pub mod transitions;
pub mod webdriver;
pub mod webhooks;
pub mod workflow;

use purra_core::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// What a store's test binary provides to the suite.
pub trait Harness: Send + Sync + 'static {
    /// The store under test.
    type Store: OperatorStore
        + WebhookOutbox
        + CredentialStore
        + CatalogPins
        + GrantStore
        + EditStore
        + TaskTable
        + Clone
        + std::fmt::Debug
        + 'static;

    /// The location (a path, a schema name...) of a new, empty database; `name` makes it recognizable.
    fn fresh(&self, name: &str) -> String;
    /// Opens the store at `location` with the default lease.
    fn open(&self, location: &str) -> BoxFuture<'_, Result<Self::Store, StoreError>>;
    /// Opens the store at `location` with `lease`.
    fn open_with_lease(
        &self,
        location: &str,
        lease: Duration,
    ) -> BoxFuture<'_, Result<Self::Store, StoreError>>;
    /// Runs one SQL statement on `location` directly, around the store; the error text on failure.
    fn raw_execute(&self, location: &str, sql: &str) -> BoxFuture<'_, Result<(), String>>;
    /// The schema version recorded in `location`.
    fn schema_version(&self, location: &str) -> BoxFuture<'_, i64>;
    /// Records schema version `version` in `location`, as a newer build would.
    fn set_schema_version(&self, location: &str, version: i64) -> BoxFuture<'_, ()>;
    /// The schema version this build migrates to.
    fn known_version(&self) -> i64;
    /// The error opening a database of schema version `found` gives.
    fn newer_schema_error(&self, found: i64) -> StoreError;
    /// The SQL that tries to empty the audit table by other means than `DELETE` (such as
    /// `TRUNCATE`), if the database has one.
    fn truncate_audit_sql(&self) -> Option<&'static str>;
    /// The longest a decision made by another store instance may take to wake a subscriber.
    fn foreign_event_delay(&self) -> Duration;
    /// Everything the database keeps at rest for `location`, as bytes to search: the SQLite file
    /// with its WAL, or a `pg_dump` of the PostgreSQL schema.
    fn at_rest(&self, location: &str) -> BoxFuture<'_, Vec<u8>>;
}

/// Defines one test per contract test for `$harness` (an expression giving a [`Harness`]), and the
/// `child` test that the two-process tests run in a new process.
#[macro_export]
macro_rules! contract_tests {
    ($harness:expr) => {
        $crate::contract_tests!(@async $harness;
            transitions::prepare_is_pending_until_one_decision_is_recorded,
            transitions::expiry_is_checked_against_the_given_time_and_refuses_for_good,
            transitions::a_digest_mismatch_is_refused_and_not_started,
            transitions::a_call_is_claimed_once_ever,
            transitions::outcomes_are_recorded_once_and_unknown_keeps_its_claim,
            transitions::only_an_operator_with_evidence_moves_unknown_on,
            transitions::interrupted_claims_become_unknown_only_when_their_owner_is_gone,
            transitions::the_audit_log_only_grows_and_rejects_updates_and_deletes,
            transitions::schema_versions_are_migrated_once_and_a_newer_one_is_refused,
            reopen::an_approval_prepared_and_approved_before_reopening_claims_exactly_once,
            reopen::a_suspended_run_saved_before_reopening_is_loaded_after,
            reopen::the_agent_suspends_on_one_store_and_resumes_on_the_reopened_one_dispatching_once,
            reopen::a_claim_left_without_outcome_by_a_dead_host_is_never_dispatched_and_becomes_unknown,
            operator::approvals_are_listed_with_request_decision_note_and_claim,
            operator::the_audit_trail_of_one_approval_includes_its_claims_outcomes,
            operator::a_decision_after_the_request_expired_is_refused,
            operator::subscribers_hear_of_every_change_of_this_store,
            operator::a_decision_made_through_another_store_instance_wakes_a_waiter,
            operator::a_flood_of_approvals_is_listed_by_page_newest_first_with_counts,
            operator::counts_up_to_a_bound_stop_at_it_and_are_exact_below_it,
            operator::a_listing_s_trails_and_runs_read_at_once_are_those_read_one_by_one,
            operator::open_approvals_per_principal_are_capped_in_one_step,
            webhooks::no_event_is_recorded_without_a_registered_endpoint,
            webhooks::each_change_records_its_event_for_each_subscribed_endpoint,
            webhooks::a_refused_change_records_no_event,
            webhooks::a_decision_made_through_another_instance_records_its_event,
            webhooks::a_claim_leases_the_delivery_and_a_retry_keeps_its_id,
            webhooks::a_lapsed_lease_is_claimed_again_by_another_instance,
            webhooks::given_up_deliveries_stay_failed_until_an_operator_retries_them,
            webhooks::endpoints_no_longer_registered_give_up_their_pending_deliveries,
            webhooks::deliveries_waiting_for_a_retry_become_due_when_the_endpoint_answers_again,
            webhooks::concurrent_deliverers_claim_each_delivery_once,
            credentials::credentials_are_put_read_listed_touched_and_deleted,
            credentials::racing_replacements_of_one_credential_are_won_exactly_once_each_round,
            credentials::sealed_credentials_open_only_in_place_and_rotation_retires_the_old_key,
            credentials::credentials_at_rest_hold_no_secret_bytes,
            credentials::instances_opening_a_new_store_at_once_migrate_it_once,
            effects::unknown_effects_are_listed_shown_and_changed_only_by_a_recorded_decision,
            effects::an_unknown_effect_is_resent_at_most_once_and_records_what_came_back,
            pins::a_difference_is_kept_once_and_approving_it_re_pins,
            grants::grant_uses_are_taken_at_most_max_uses_times_by_racing_instances,
            grants::grants_cover_their_principal_tool_and_time_until_revoked,
            cycles::a_decision_and_its_claim_commit_together_and_racing_instances_claim_once,
            cycles::a_grants_use_and_its_claim_commit_together_and_racing_instances_claim_once,
            cycles::a_wide_cap_is_exact_when_prepares_race_past_it,
            edits::an_edit_is_recorded_in_one_step_and_only_the_edited_intent_is_ever_claimed,
            edits::racing_edits_and_decisions_of_one_approval_record_exactly_one,
            tasks::tasks_are_owned_bounded_final_once_ended_and_expire,
            tasks::racing_instances_store_at_most_the_bound,
            workflow::a_claim_needs_the_quorum_and_a_deny_closes,
            workflow::racing_voters_on_two_instances_decide_once,
            workflow::escalation_is_recorded_once_and_on_expiry_deny_closes
        );
        #[test]
        fn two_processes_race_for_each_approved_intent_and_exactly_one_wins_every_round() {
            $crate::race::two_processes_race(&$harness, &$crate::race::child_test(module_path!()));
        }
        #[test]
        fn a_killed_process_claim_becomes_interrupted_only_after_its_lease_lapses() {
            $crate::race::a_killed_claimant(&$harness, &$crate::race::child_test(module_path!()));
        }
        /// The work of a re-executed test process; in a normal test run it does nothing.
        #[test]
        fn child() {
            $crate::race::child(&$harness);
        }
    };
    (@async $harness:expr; $($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                if $crate::race::is_child() {
                    return;
                }
                let harness = $harness;
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on($crate::$module::$name(&harness));
            }
        )*
    };
}

/// `t` seconds after the Unix epoch.
pub fn at(t: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(t)
}

/// The binding every test intent is bound to.
pub fn binding() -> ApprovalBinding {
    ApprovalBinding {
        binding_id: "document-service".into(),
        binding_revision: "host-config-1".into(),
        scope_id: "sandbox-documents".into(),
        scope_revision: "scope-1".into(),
    }
}

/// An intent whose arguments are the JSON string `args`.
pub fn intent(args: &str) -> ApprovalIntent {
    let id = |s: &str| json_identity(&json!(s)).unwrap();
    ApprovalIntent {
        tool: "update".into(),
        arguments_digest: id(args),
        approval_binding: binding().identity(),
        checkpoint_call: CheckpointCall {
            call_id: "c1".into(),
            tool: "update".into(),
        },
        run_id: RunId::new("r1"),
        preset_fingerprint: id("preset"),
    }
}

/// A suspended run `run_id` (of root `root-1`) waiting on approval `approval` for one
/// `update_document` call.
pub fn suspended_run(run_id: &str, approval: &str) -> SuspendedRun {
    SuspendedRun {
        run_id: RunId::new(run_id),
        root_run_id: RunId::new("root-1"),
        agent: "writer".into(),
        preset_fingerprint: json_identity(&serde_json::json!("preset")).unwrap(),
        transcript: vec![
            Message::User {
                text: "update d1".into(),
            },
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "w1".into(),
                    name: "update_document".into(),
                    arguments: serde_json::json!({"id": "d1", "text": "hello"}),
                }],
            },
        ],
        pending_call: ToolCall {
            id: "w1".into(),
            name: "update_document".into(),
            arguments: serde_json::json!({"id": "d1", "text": "hello"}),
        },
        approval_id: ApprovalId(approval.into()),
        intent_digest: intent("a").digest(),
        turns_used: 1,
        waiting_until: None,
    }
}

/// The request for [`intent`]`(args)`, asked by `writer` at t=5, with no expiry and one label.
pub fn request(args: &str) -> ApprovalRequest {
    ApprovalRequest {
        intent: intent(args),
        arguments: json!(args),
        binding: binding(),
        requested_by: "writer".into(),
        requested_at: at(5),
        expires_at: None,
        labels: BTreeMap::from([("upstream".to_owned(), "documents".to_owned())]),
    }
}

/// A decision by alice at t=10, with an optional expiry and no note.
pub fn decision(verdict: Verdict, expires_at: Option<SystemTime>) -> Decision {
    Decision {
        verdict,
        approver: "alice".into(),
        decided_at: at(10),
        expires_at,
        note: None,
    }
}

/// The idempotency key Core uses for `intent`.
pub fn key_of(intent: &ApprovalIntent) -> IdempotencyKey {
    IdempotencyKey(intent.digest().to_string())
}

/// An `unknown` outcome with reason `code`.
pub fn unknown(code: &str) -> EffectOutcome {
    EffectOutcome::Unknown {
        reason: ErrorCode::new(code).unwrap(),
    }
}

/// Whether `store` says it is durable, by all three contracts alike.
pub fn durable<S: OperatorStore>(store: &S) -> bool {
    let all = [
        ApprovalGateway::is_durable(store),
        IdempotencyStore::is_durable(store),
        RunStore::is_durable(store),
        store.receipts().is_durable(),
    ];
    assert!(all.iter().all(|d| *d == all[0]), "{all:?}");
    all[0]
}

/// `pg_dump`: `PURRA_PG_DUMP`, else the newest of Debian's PostgreSQL binaries (where
/// scripts/postgres.sh finds the server's), else the one on `PATH`.
pub fn pg_dump() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("PURRA_PG_DUMP") {
        return path.into();
    }
    let mut found: Vec<(Vec<u32>, std::path::PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e
                .file_name()
                .to_str()?
                .split('.')
                .map(|p| p.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            let bin = e.path().join("bin").join("pg_dump");
            bin.is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map_or_else(|| "pg_dump".into(), |(_, bin)| bin)
}
