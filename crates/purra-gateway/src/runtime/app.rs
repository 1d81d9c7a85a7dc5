//! The approval prompt as an MCP App (`io.modelcontextprotocol/ui`), for hosts that render Apps.
//!
//! With `[gateway] apps = true` every write tool names a `ui://purra-gateway/approval/TOOL`
//! resource in `_meta.ui.resourceUri`: a self-contained HTML view (no external asset) that a host
//! renders while the call waits for its approval. The view shows the call (tool, upstream,
//! arguments, intent digest, approval id, state) through the gateway's app-only tool
//! [`APPROVAL_TOOL`] (`_meta.ui.visibility: ["app"]`: hosts keep it out of the model's tool
//! list). For a write whose binding says `approval = "client"` it also approves or denies it,
//! through the same durable path as `purra approvals` and the approver page:
//! `ApprovalGateway::decide`, with the approver named `CLIENT (app)`, and a wake-up of the
//! waiting call. For any other write (the default, `approval = "operator"`) the view is read-only
//! and says an operator decides it; the tool refuses a decision (`operator_approval`). A call
//! that already returned its pending result can be sent from the view once approved; it goes
//! through the write flow like any repeated call.
//!
//! The view is told the arguments twice: exactly (`arguments`) and as the text it shows
//! (`argumentsText`, pretty JSON whose hidden characters, such as U+202E or U+200B, are JSON
//! escapes: purra-core's [`purra_core::visible`]), with `hiddenCharacters` set when there were
//! any, so the view warns that what it shows is escaped.
//!
//! The tool finds an approval only through the call it belongs to: the caller (the gateway's
//! principal and the connection's client name), the tool and the exact arguments give the run
//! id and the intent digest, and an approval is shown or decided only when its intent digest
//! is that call's. A caller cannot reach another caller's approval, and a session that did not
//! negotiate Apps is refused (`app_unsupported`). Like elicitation, deciding here trusts the
//! downstream host's interface (the gateway cannot tell the host's user from its model or from
//! the client itself): it is off by default, and on only for the bindings that say so.

use std::time::SystemTime;

use purra_core::visible::{
    escape_hidden, escape_hidden_json, has_hidden, one_line, value_has_hidden, WHO_MAX_CHARS,
};
use purra_core::{
    ApprovalId, ApprovalState, ClaimState, Decision, DecisionPath, EffectOutcome, ErrorCode,
    IdempotencyKey, SelfDecision, StoreError, Verdict,
};
use purra_protocol::apps::{AppResource, Csp};
use purra_protocol::types::{CallToolResult, JsonObject, Tool};
use purra_protocol::RequestCtx;
use serde_json::{json, Value};

use crate::catalog::Binding;
use crate::config::ApprovalBy;
use crate::runtime::gateway::Inner;
use crate::runtime::write::Generation;

pub use crate::config::APPROVAL_TOOL;

/// The longest note a decision made in the view keeps, in characters.
const MAX_NOTE_CHARS: usize = 1000;

/// The view's HTML, with `{{TOOL}}` and `{{APPROVAL_TOOL}}` to fill in.
const HTML: &str = include_str!("approval_app.html");

/// The `ui://` resource of the approval view of write tool `local`.
pub fn app_uri(local: &str) -> String {
    format!("ui://purra-gateway/approval/{local}")
}

/// The approval view of write tool `local` (a local name is `^[a-z][a-z0-9_]{0,63}$`, so it
/// needs no escaping in HTML).
pub(crate) fn app_resource(local: &str) -> AppResource {
    AppResource::new(
        app_uri(local),
        HTML.replace("{{TOOL}}", local)
            .replace("{{APPROVAL_TOOL}}", APPROVAL_TOOL),
    )
    .name(format!("approval-{local}"))
    .title(format!("Approval of {local}"))
    .description(format!(
        "The pending approval of a {local} call: what it sends, approve or deny"
    ))
    .csp(Csp::new())
    .prefers_border(true)
}

/// `tool` with `_meta.ui.resourceUri` naming its approval view (other `_meta` kept).
pub(crate) fn with_view(mut tool: Tool) -> Tool {
    let uri = app_uri(&tool.name);
    purra_protocol::apps::set_tool_ui(&mut tool, uri);
    tool
}

/// The definition of [`APPROVAL_TOOL`].
pub(crate) fn approval_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "tool": {"type": "string", "description": "the write tool, as called"},
            "arguments": {"type": "object", "description": "the call's arguments, exactly"},
            "approval": {"type": "string", "description": "the approval id shown earlier"},
            "decision": {"type": "string", "enum": ["approve", "deny"]},
            "note": {"type": "string", "maxLength": MAX_NOTE_CHARS}
        },
        "required": ["tool", "arguments"],
        "additionalProperties": false
    });
    let mut meta = JsonObject::new();
    meta.insert("ui".into(), json!({"visibility": ["app"]}));
    let mut tool = Tool::new(APPROVAL_TOOL, object(schema))
        .with_description(
            "The approval view's own tool (app-only): shows a write call's approval, and \
             records the user's decision made in the view when the write's binding lets the \
             client decide.",
        )
        .with_meta(meta);
    tool.title = Some("Approval of a write call".into());
    tool
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

/// What the view is told of a call's approval.
struct View {
    approval: Option<ApprovalId>,
    status: &'static str,
    decision: Option<Decision>,
}

fn refused(code: &str, what: &str) -> CallToolResult {
    CallToolResult::error(format!("{APPROVAL_TOOL} failed: {code} ({what})"))
}

impl Inner {
    /// One call of [`APPROVAL_TOOL`].
    pub(crate) async fn approval_view(&self, args: JsonObject, ctx: RequestCtx) -> CallToolResult {
        if !ctx.client_supports_apps() {
            return refused(
                "app_unsupported",
                "only the approval view of a host that renders MCP Apps calls it; nothing was decided",
            );
        }
        let tool = args.get("tool").and_then(Value::as_str).unwrap_or_default();
        let Some(b) = self.binding(tool).filter(|b| b.effect.is_some()) else {
            return refused(
                "unknown_write",
                "no write tool of that name; nothing was decided",
            );
        };
        let call_args = args.get("arguments").cloned().unwrap_or(Value::Null);
        let decision = match args.get("decision").and_then(Value::as_str) {
            None => None,
            Some("approve") => Some(Verdict::Approve),
            Some(_) => Some(Verdict::Deny),
        };
        let note = args
            .get("note")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| n.chars().take(MAX_NOTE_CHARS).collect::<String>());
        let shown = args
            .get("approval")
            .and_then(Value::as_str)
            .map(|a| ApprovalId(a.to_owned()));

        if self.unauthenticated(&ctx) {
            return refused(ErrorCode::SCOPE_DENIED.as_str(), "nothing was decided");
        }
        let caller = self.caller(&ctx);
        let call = match self.identify(&b, &caller, &call_args).await {
            Ok(call) => call,
            Err(code) => return refused(code.as_str(), "nothing was decided"),
        };
        // The call's generation that answers it now (past `receipt_ttl`, a later one's).
        let reg = call.bound.registration.clone();
        let (run_id, digest) = match self
            .generation(&b, &reg, call.run_id, call.intent, &call_args)
            .await
        {
            Ok(Generation::Done { run_id, digest, .. }) => (run_id, digest),
            Ok(Generation::Open { run_id, intent }) => (run_id, intent.digest()),
            Err(_) => return refused(ErrorCode::STORE_FAILED.as_str(), "nothing was decided"),
        };

        let mut view = match self.view_of(&run_id, &digest, shown.clone()).await {
            Ok(v) => v,
            Err(()) => return refused(ErrorCode::STORE_FAILED.as_str(), "nothing was decided"),
        };
        let mut outcome = None;
        if let Some(verdict) = decision {
            outcome = Some(match (&view.approval, view.status) {
                // Only a binding that lets the client decide is decided here.
                _ if b.approval != ApprovalBy::Client => Err(
                    "an operator decides this write (on the approver page or with purra \
                     approvals), not this view (operator_approval)",
                ),
                (Some(id), "pending") => {
                    let d = self.user_decision(&ctx, verdict, DecisionPath::App, note);
                    match self.decide_as(id.clone(), d, &caller.principal).await {
                        Ok(()) => Ok(()),
                        // Separation of duties: the caller asked for it.
                        Err(StoreError::Conflict(SelfDecision::CONFLICT)) => Err(
                            "approvers must differ: the principal that asked for this call cannot decide it",
                        ),
                        // Decided elsewhere first: the view shows that decision.
                        Err(StoreError::Conflict(_)) => {
                            Err("the approval was decided elsewhere first")
                        }
                        Err(_) => {
                            return refused(ErrorCode::STORE_FAILED.as_str(), "nothing was decided")
                        }
                    }
                }
                (None, _) => Err("no approval was asked for this call yet"),
                _ => Err("the approval is not pending any more"),
            });
            view = match self
                .view_of(&run_id, &digest, view.approval.clone().or(shown))
                .await
            {
                Ok(v) => v,
                Err(()) => return refused(ErrorCode::STORE_FAILED.as_str(), "nothing was decided"),
            };
        }

        let structured = self.view_json(&b, &call_args, &digest, &view);
        let line = match &view.approval {
            Some(id) => format!("approval {} of {}: {}", id.0, b.local, view.status),
            None => format!(
                "{}: {} (no approval asked for this call)",
                b.local, view.status
            ),
        };
        match outcome {
            Some(Err(why)) => CallToolResult::error(format!("{line}; nothing was decided: {why}"))
                .with_structured_content(structured),
            Some(Ok(())) => CallToolResult::text(format!("{line} (decided here)"))
                .with_structured_content(structured),
            None => CallToolResult::text(line).with_structured_content(structured),
        }
    }

    /// The state of the call whose run is `run_id` and intent digest `digest`: its claim's
    /// outcome when it was claimed, else its approval (the saved run's, or `shown` when the run
    /// is over), which counts only when it was prepared for this very intent.
    async fn view_of(
        &self,
        run_id: &purra_core::RunId,
        digest: &purra_core::JsonIdentity,
        shown: Option<ApprovalId>,
    ) -> Result<View, ()> {
        let claim = self
            .approvals
            .receipts()
            .state(IdempotencyKey(digest.to_string()))
            .await
            .map_err(|_| ())?;
        let saved = self
            .runs
            .load_suspended(run_id.clone())
            .await
            .map_err(|_| ())?;
        // A saved run whose approval was prepared under an earlier binding: never claimed.
        let stale = saved.as_ref().is_some_and(|s| s.intent_digest != *digest);
        let candidate = saved.map(|s| s.approval_id).or(shown);
        let record = match &candidate {
            Some(id) if !stale => self
                .store
                .approval(id.clone())
                .await
                .map_err(|_| ())?
                .filter(|r| r.intent_digest == *digest),
            _ => None,
        };
        let decision = record.as_ref().and_then(|r| match &r.state {
            ApprovalState::Prepared => None,
            ApprovalState::Decided(d) | ApprovalState::Claimed(d) | ApprovalState::Refused(d) => {
                Some(d.clone())
            }
        });
        let approval = record.as_ref().and(candidate.clone());
        let status = match (claim, &record) {
            (Some(ClaimState::Completed { outcome }), _) => match outcome {
                EffectOutcome::Committed { .. } => "committed",
                EffectOutcome::NotStarted => "not_started",
                EffectOutcome::Unknown { .. } => "unknown",
            },
            (Some(ClaimState::InFlight), _) => "in_flight",
            (None, _) if stale => "stale",
            (None, None) => "none",
            (None, Some(r)) => match &r.state {
                ApprovalState::Prepared if r.expired_undecided(SystemTime::now()) => "expired",
                ApprovalState::Prepared => "pending",
                ApprovalState::Decided(d) if d.verdict == Verdict::Approve => "approved",
                ApprovalState::Decided(_) => "denied",
                ApprovalState::Claimed(_) => "in_flight",
                ApprovalState::Refused(_) => "refused",
            },
        };
        Ok(View {
            approval: if stale { candidate } else { approval },
            status,
            decision,
        })
    }

    fn view_json(
        &self,
        b: &Binding,
        args: &Value,
        digest: &purra_core::JsonIdentity,
        view: &View,
    ) -> Value {
        // What the view shows of text a client chose is escaped; the exact arguments go too.
        let decided_by = view.decision.as_ref().map(|d| d.approver.as_str());
        let note = view.decision.as_ref().and_then(|d| d.note.as_deref());
        let hidden = value_has_hidden(args)
            || decided_by.is_some_and(has_hidden)
            || note.is_some_and(has_hidden);
        let pretty = serde_json::to_string_pretty(args).unwrap_or_default();
        json!({
            "gateway": self.settings.name,
            "tool": b.local,
            "upstream": b.upstream.id,
            "upstreamTool": b.remote,
            "arguments": args,
            "argumentsText": escape_hidden_json(&pretty),
            "hiddenCharacters": hidden,
            "intentDigest": digest.to_string(),
            "approval": view.approval.as_ref().map(|a| a.0.clone()),
            "status": view.status,
            "approvalBy": b.approval.as_str(),
            "decidedBy": decided_by.map(|d| one_line(d, WHO_MAX_CHARS)),
            "note": note.map(escape_hidden),
        })
    }
}
