//! The page's HTML, rendered on the server: the layout, the login form, the pending list and the
//! history (decisions, effects, receipts, audit trails, the reconciliation form of an `unknown`).
//!
//! Everything taken from the store is escaped ([`esc`]); the page loads only its own script and
//! style sheet (no external assets).

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use purra_core::visible::{
    escape_hidden, escape_hidden_json, one_line, value_has_hidden, WHO_MAX_CHARS,
};
use purra_core::{
    ApprovalState, ApprovalStatus, ApprovalView, AuditEntry, Decision, OnApprove, SuspendedRun,
    Verdict, EFFECT_LABEL, SENDS_WITHOUT_CALLER_LABEL, TITLE_LABEL,
};
use serde_json::Value;

/// Escapes text for HTML content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Milliseconds since the Unix epoch (0 before it).
pub fn millis(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

/// `YYYY-MM-DD HH:MM:SS UTC` (the protocol crate's RFC 3339 form, shown without `T` and
/// milliseconds).
pub fn utc(t: SystemTime) -> String {
    let ms = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let stamp = purra_protocol::tasks::rfc3339(u64::try_from(ms).unwrap_or(u64::MAX));
    format!("{} {} UTC", &stamp[..10], &stamp[11..19])
}

fn time(t: SystemTime) -> String {
    format!("<time data-ms=\"{}\">{}</time>", millis(t), esc(&utc(t)))
}

/// Which list a page shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Approvals waiting for a decision.
    Pending,
    /// Decided approvals with their effects.
    History,
    /// The queue of unknown effects.
    Effects,
    /// The standing grants.
    Grants,
}

impl View {
    /// `pending`, `history`, `effects` or `grants` (also the fragment's path segment).
    pub fn as_str(self) -> &'static str {
        match self {
            View::Pending => "pending",
            View::History => "history",
            View::Effects => "effects",
            View::Grants => "grants",
        }
    }
}

/// The sign-out form every signed-in page ends with (its CSRF token `csrf`).
pub fn sign_out(csrf: &str) -> String {
    format!(
        "<form method=\"post\" action=\"/logout\" class=\"logout\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\">Sign out</button></form>",
        esc(csrf)
    )
}

/// A whole page around `main`.
pub fn layout(title: &str, view: Option<View>, approver: Option<&str>, main: &str) -> String {
    page_layout(title, view, false, approver, main)
}

/// [`layout`] of the catalog changes' page (`/catalog`, current in the navigation).
pub fn layout_catalog(approver: &str, main: &str) -> String {
    page_layout("Catalog changes", None, true, Some(approver), main)
}

fn page_layout(
    title: &str,
    view: Option<View>,
    catalog: bool,
    approver: Option<&str>,
    main: &str,
) -> String {
    let mut nav = String::new();
    if let Some(approver) = approver {
        let current = |v: View| {
            if view == Some(v) {
                " aria-current=\"page\""
            } else {
                ""
            }
        };
        let _ = write!(
            nav,
            "<nav><a href=\"/\"{}>Pending</a> <a href=\"/history\"{}>History</a> \
             <a href=\"/effects\" id=\"nav-effects\"{}>Unknown effects</a> \
             <a href=\"/catalog\"{}>Catalog</a> \
             <a href=\"/grants\" id=\"nav-grants\"{}>Grants</a>\
             <span class=\"who\">Signed in as <b id=\"approver\">{}</b></span></nav>",
            current(View::Pending),
            current(View::History),
            current(View::Effects),
            if catalog {
                " aria-current=\"page\""
            } else {
                ""
            },
            current(View::Grants),
            esc(approver)
        );
    }
    let view_attr = view.map_or("", View::as_str);
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · purra approvals</title>\
         <link rel=\"stylesheet\" href=\"/page.css\"><script src=\"/page.js\" defer></script>\
         </head><body data-view=\"{view_attr}\"><header><h1>purra approvals</h1>{nav}</header>\
         <p id=\"status\" role=\"status\" aria-live=\"polite\"></p><main>{main}</main></body></html>\n",
        title = esc(title),
    )
}

/// The sign-in page, with `message` (a refusal) above it: the access-token form when `token`,
/// and a "Sign in with …" link to the provider named `oidc` when one is configured. Both carry
/// `resume` (the approval to return to, the freshness to ask for).
pub fn login(
    message: Option<&str>,
    token: bool,
    oidc: Option<&str>,
    resume: &crate::guard::Resume,
) -> String {
    let message = message.map_or(String::new(), |m| {
        format!("<p class=\"error\" id=\"login-error\">{}</p>", esc(m))
    });
    let mut main = format!("<h2>Sign in</h2>{message}");
    if let Some(age) = resume.max_age {
        let _ = write!(
            main,
            "<p id=\"login-again\">Deciding this approval needs a sign-in within the last {age} s: \
             sign in again.</p>"
        );
    }
    if let Some(label) = oidc {
        let _ = write!(
            main,
            "<p><a class=\"button\" id=\"login-oidc\" href=\"/login/oidc{}\">Sign in with {}</a></p>",
            esc(&resume.query()),
            esc(label)
        );
    }
    if token {
        let next = resume.next.as_deref().map_or(String::new(), |n| {
            format!("<input type=\"hidden\" name=\"next\" value=\"{}\">", esc(n))
        });
        let _ = write!(
            main,
            "<form method=\"post\" action=\"/login\" class=\"login\">{next}\
             <label for=\"token\">Access token (printed when the page started)</label>\
             <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required autofocus>\
             <button type=\"submit\" id=\"login\">Sign in</button></form>",
        );
    }
    layout("Sign in", None, None, &main)
}

/// The page a provider's sign-in lands on: it names who signed in and moves on at once to `next`
/// (an approval's page, checked) or the list (a navigation from the page itself, so the
/// `SameSite=Strict` session cookie goes along).
pub fn signed_in(approver: &str, next: Option<&str>) -> String {
    let to = esc(next.unwrap_or("/"));
    let what = if next.is_some() {
        "Go on to the approval"
    } else {
        "Go to the approvals"
    };
    layout(
        "Signed in",
        None,
        None,
        &format!(
            "<meta http-equiv=\"refresh\" content=\"0;url={to}\"><h2>Signed in</h2>\
             <p id=\"message\">Signed in as {}.</p><p><a href=\"{to}\">{what}</a></p>",
            esc(approver)
        ),
    )
}

/// A page that only says `message` (after a form posted without JavaScript, or a refusal).
pub fn message(title: &str, message: &str) -> String {
    layout(
        title,
        None,
        None,
        &format!(
            "<h2>{}</h2><p id=\"message\">{}</p><p><a href=\"/\">Back to the approvals</a></p>",
            esc(title),
            esc(message)
        ),
    )
}

/// The list inside a page (also the fragment the script fetches on every store event): one page,
/// the newest first, and a link to the older ones when there are more.
pub fn list(view: View, listing: &Listing, csrf: &str, now: SystemTime) -> String {
    let mut out = String::new();
    let items = &listing.items;
    match view {
        View::Pending => {
            let total = listing.total.unwrap_or(items.len() as u64);
            let _ = write!(
                out,
                "<h2>Pending approvals <span id=\"count\">{}</span></h2>",
                purra_core::counted_text(total)
            );
            paging_back(&mut out, listing, "/", "Newest pending approvals");
            if items.is_empty() {
                out.push_str(if total == 0 {
                    "<p class=\"empty\" id=\"empty\">Nothing waits for a decision.</p>"
                } else {
                    "<p class=\"empty\" id=\"empty\">No older pending approval.</p>"
                });
            }
            for item in items {
                pending(&mut out, item, csrf, now);
            }
            if let Some(next) = &listing.next {
                let _ = write!(
                    out,
                    "<p class=\"more\" id=\"more\"><span id=\"more-count\">{}</span> more pending, \
                     older than these: <a href=\"/?before={id}\" id=\"more-link\">show them</a></p>",
                    purra_core::counted_text(listing.more.unwrap_or(0)),
                    id = esc(&next.0)
                );
            }
        }
        View::History => {
            let _ = write!(
                out,
                "<h2>History <span id=\"count\">{}</span></h2>",
                items.len()
            );
            paging_back(&mut out, listing, "/history", "Newest decisions");
            if items.is_empty() {
                out.push_str(if listing.paged {
                    "<p class=\"empty\" id=\"empty\">No older decision.</p>"
                } else {
                    "<p class=\"empty\" id=\"empty\">No decision yet.</p>"
                });
            }
            for item in items {
                history(&mut out, item, csrf);
            }
            if let Some(next) = &listing.next {
                let _ = write!(
                    out,
                    "<p class=\"more\" id=\"more\">More decisions, older than these: \
                     <a href=\"/history?before={}\" id=\"more-link\">show them</a></p>",
                    esc(&next.0)
                );
            }
        }
        // The effects queue is rendered by `effects`, the grants by `grants`.
        View::Effects | View::Grants => {}
    }
    out
}

/// One approval on a page of its own (`/approvals/ID`, where webhook events link): its pending
/// form while it waits, else its decision, effect and trail as the history shows them. With
/// `preselected` (`approve` or `deny`, from a notice's link) a waiting approval shows that
/// decision to confirm: nothing is decided until the approver confirms it (a POST with the
/// session's CSRF token).
pub fn one(item: &Item, csrf: &str, now: SystemTime, preselected: Option<&str>) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<h2>Approval <span id=\"approval-id\">{}</span></h2>",
        esc(&item.view.id.0)
    );
    if item.view.state == ApprovalState::Prepared {
        if let Some(verdict) = preselected.filter(|_| !item.view.request.expired_at(now)) {
            confirm(&mut out, item, csrf, verdict);
        }
        pending(&mut out, item, csrf, now);
    } else {
        history(&mut out, item, csrf);
    }
    out
}

/// The decision a link preselected, to confirm.
fn confirm(out: &mut String, item: &Item, csrf: &str, verdict: &str) {
    let id = esc(&item.view.id.0);
    let (word, class) = match verdict {
        "approve" => ("approve", "approve"),
        _ => ("deny", "deny"),
    };
    let fresh = match item.view.request.approver_max_age() {
        Ok(Some(age)) => format!(
            " Deciding it needs a sign-in within the last {} s.",
            age.as_secs()
        ),
        _ => String::new(),
    };
    let _ = write!(
        out,
        "<section class=\"confirm\" id=\"confirm-{id}\" data-verdict=\"{word}\">\
         <p id=\"preselected\">You chose to <strong>{word}</strong> this call. Nothing is decided \
         until you confirm.{fresh}</p>\
         <form class=\"confirm\" method=\"post\" action=\"/approvals/{id}/decide\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <input type=\"hidden\" name=\"verdict\" value=\"{word}\">\
         <label for=\"confirm-note\">Note (optional)</label>\
         <textarea id=\"confirm-note\" name=\"note\" rows=\"2\" maxlength=\"2000\"></textarea>\
         <div class=\"buttons\"><button type=\"submit\" id=\"confirm\" class=\"{class}\">\
         Confirm: {word}</button></div></form></section>",
        csrf = esc(csrf)
    );
}

/// On a page past the first, the way back to the newest.
fn paging_back(out: &mut String, listing: &Listing, to: &str, what: &str) {
    if listing.paged {
        let _ = write!(
            out,
            "<p class=\"paging\"><a href=\"{to}\" id=\"newest\">{what}</a></p>"
        );
    }
}

/// One page of a list.
#[derive(Debug)]
pub struct Listing {
    /// The approvals shown, the newest first.
    pub items: Vec<Item>,
    /// How many approvals the list holds in all (the pending list), counted up to one past
    /// [`purra_core::COUNTED_UP_TO`] (shown as `1000+` past it).
    pub total: Option<u64>,
    /// How many older ones follow this page (the pending list), counted as `total` is.
    pub more: Option<u64>,
    /// When older ones follow, the last shown: the next page is `?before=` it.
    pub next: Option<purra_core::ApprovalId>,
    /// Whether this page is past the first.
    pub paged: bool,
}

/// One approval and (in the history) its audit trail.
#[derive(Debug)]
pub struct Item {
    /// The approval.
    pub view: ApprovalView,
    /// Its audit trail, oldest first (empty in the pending list).
    pub trail: Vec<AuditEntry>,
    /// The suspended run of its request's run, if any (while it is pending): whether a caller
    /// waits.
    pub run: Option<SuspendedRun>,
    /// The votes cast on it, when it needs a quorum (oldest first).
    pub votes: Vec<purra_core::Vote>,
}

/// For an approval that needs a quorum: "1 of 2 votes", from whom, and who voted how.
fn votes(out: &mut String, item: &Item) {
    let r = &item.view.request;
    let Some(required) = r.votes_required() else {
        return;
    };
    let approving = item
        .votes
        .iter()
        .filter(|v| v.verdict == purra_core::Verdict::Approve)
        .count();
    let from = r.votes_from();
    let from = if from.is_empty() {
        String::new()
    } else {
        format!(" from {}", esc(&from.join(", ")))
    };
    let _ = write!(
        out,
        "<p class=\"votes\" data-approving=\"{approving}\" data-required=\"{required}\">\
         <strong>{approving} of {required} votes</strong>{from}</p>"
    );
    if let Some(at) = r.escalates_at() {
        let _ = write!(
            out,
            "<p class=\"escalation\">Escalates to {} at {}</p>",
            esc(&r.escalate_to().join(", ")),
            esc(&utc(at))
        );
    }
    if !item.votes.is_empty() {
        out.push_str("<ul class=\"voters\">");
        for v in &item.votes {
            let word = match v.verdict {
                purra_core::Verdict::Approve => "approve",
                purra_core::Verdict::Deny => "deny",
            };
            let _ = write!(
                out,
                "<li class=\"vote vote-{word}\">{} <span>{word}</span>{}</li>",
                esc(&one_line(&v.approver, WHO_MAX_CHARS)),
                v.note
                    .as_deref()
                    .map(|n| format!(": {}", esc(&one_line(n, 200))))
                    .unwrap_or_default()
            );
        }
        out.push_str("</ul>");
    }
}

/// The labels shown as facts of their own (title, effect) or as what approving does.
const OWN_LABELS: [&str; 4] = [
    TITLE_LABEL,
    EFFECT_LABEL,
    SENDS_WITHOUT_CALLER_LABEL,
    purra_core::INPUT_SCHEMA_LABEL,
];

/// The facts of a request shared by both lists.
fn request(out: &mut String, v: &ApprovalView) {
    let r = &v.request;
    out.push_str("<dl class=\"facts\">");
    if let Some(title) = r.labels.get(TITLE_LABEL) {
        let _ = write!(out, "<dt>Title</dt><dd class=\"title\">{}</dd>", esc(title));
    }
    if let Some(effect) = r.labels.get(EFFECT_LABEL) {
        let _ = write!(
            out,
            "<dt>Effect</dt><dd><span class=\"badge write-effect write-effect-{e}\">{e}</span></dd>",
            e = esc(effect)
        );
    }
    let _ = write!(
        out,
        "<dt>Tool</dt><dd class=\"tool\">{}</dd>",
        esc(&r.intent.tool)
    );
    for (k, val) in r
        .labels
        .iter()
        .filter(|(k, _)| !OWN_LABELS.contains(&k.as_str()))
    {
        let _ = write!(
            out,
            "<dt>{}</dt><dd class=\"label-{}\">{}</dd>",
            esc(&label_title(k)),
            esc(k),
            esc(val)
        );
    }
    let _ = write!(
        out,
        "<dt>Asked by</dt><dd class=\"asked-by\">{}</dd><dt>Asked at</dt><dd>{}</dd>\
         <dt>Intent digest</dt><dd><code class=\"digest\">{}</code></dd>\
         <dt>Binding</dt><dd><code>{} @ {}</code></dd><dt>Scope</dt><dd><code>{} @ {}</code></dd>\
         <dt>Run</dt><dd><code>{}</code></dd></dl>",
        esc(&one_line(&r.requested_by, WHO_MAX_CHARS)),
        time(r.requested_at),
        esc(v.intent_digest.as_str()),
        esc(&r.binding.binding_id),
        esc(&r.binding.binding_revision),
        esc(&r.binding.scope_id),
        esc(&r.binding.scope_revision),
        esc(&r.intent.run_id.0),
    );
    out.push_str("<h4>Arguments</h4>");
    arguments(out, &r.arguments);
}

fn label_title(key: &str) -> String {
    match key {
        "gateway" => "Gateway".into(),
        "upstream" => "Upstream".into(),
        "upstream_tool" => "Upstream tool".into(),
        purra_core::PRINCIPAL_LABEL => "Principal".into(),
        "client" => "Client".into(),
        purra_core::APPROVERS_MUST_DIFFER_LABEL => "Approvers must differ".into(),
        purra_core::APPROVER_MAX_AGE_LABEL => "Sign-in at most (seconds)".into(),
        other => other.replace('_', " "),
    }
}

/// The warning shown above arguments that have hidden characters.
pub const HIDDEN_CHARACTERS: &str = "<p class=\"error hidden-characters\" role=\"note\">\
    <span class=\"badge\">hidden characters</span> These arguments contain invisible or \
    direction-changing characters (such as U+202E or U+200B), shown as <code>\\u</code> escapes; \
    what is sent is exactly the JSON below.</p>";

/// Pretty JSON with its hidden characters as JSON escapes (the same JSON value).
fn shown_json(v: &Value) -> String {
    let pretty = serde_json::to_string_pretty(v).unwrap_or_default();
    escape_hidden_json(&pretty).into_owned()
}

/// The arguments, readably (one row per member: text as text, anything else as JSON) and as
/// exact JSON. Characters a reader cannot see (bidi controls, zero-width and other format
/// characters: purra-core's `visible`) are shown as `\u202e` escapes in both, under a warning;
/// the exact JSON stays exactly the value sent.
fn arguments(out: &mut String, args: &Value) {
    if value_has_hidden(args) {
        out.push_str(HIDDEN_CHARACTERS);
    }
    match args {
        Value::Object(members) if !members.is_empty() => {
            out.push_str("<dl class=\"arguments\">");
            for (k, v) in members {
                let shown = match v {
                    Value::String(s) => esc(&escape_hidden(s)),
                    other => format!("<code>{}</code>", esc(&shown_json(other))),
                };
                let _ = write!(out, "<dt>{}</dt><dd>{shown}</dd>", esc(&escape_hidden(k)));
            }
            out.push_str("</dl>");
        }
        Value::Object(_) => out.push_str("<p class=\"arguments\">(no arguments)</p>"),
        other => {
            let _ = write!(
                out,
                "<pre class=\"arguments\">{}</pre>",
                esc(&shown_json(other))
            );
        }
    }
    let exact = serde_json::to_string(args).unwrap_or_default();
    let _ = write!(
        out,
        "<details><summary>Exact JSON</summary><pre class=\"exact-json\">{}</pre></details>",
        esc(&escape_hidden_json(&exact))
    );
}

/// What approving does: a caller waits (until when), or the host sends it anyway, or it is
/// sent when the same call is made again. The script turns a caller's wait that ended into the
/// last.
fn on_approve(out: &mut String, item: &Item, now: SystemTime) {
    let Some(on) = item.view.on_approve(item.run.as_ref(), now) else {
        return;
    };
    let then = if item
        .view
        .request
        .labels
        .get(SENDS_WITHOUT_CALLER_LABEL)
        .map(String::as_str)
        == Some("true")
    {
        OnApprove::SendsNow
    } else {
        OnApprove::NextCall
    };
    match on {
        OnApprove::CallerWaiting(until) => {
            let _ = write!(
                out,
                "<p class=\"on-approve\" data-on-approve=\"caller_waiting\" \
                 data-waiting-until-ms=\"{}\" data-then=\"{}\"><b>{}</b> \
                 <span class=\"waiting-until\">(the caller waits until {})</span></p>",
                millis(until),
                esc(then.text()),
                esc(on.text()),
                esc(&utc(until))
            );
        }
        other => {
            let _ = write!(
                out,
                "<p class=\"on-approve\" data-on-approve=\"{}\"><b>{}</b></p>",
                other.as_str(),
                esc(other.text())
            );
        }
    }
}

fn pending(out: &mut String, item: &Item, csrf: &str, now: SystemTime) {
    let v = &item.view;
    let id = esc(&v.id.0);
    let expired = v.request.expired_at(now);
    let _ = write!(
        out,
        "<article class=\"approval\" id=\"pending-{id}\" data-id=\"{id}\" data-status=\"pending\">\
         <h3>{tool} <small>{id}</small></h3>",
        tool = esc(&v.request.intent.tool)
    );
    let expiry = match v.request.expires_at {
        Some(at) => format!(
            "<span class=\"expires\" data-expires-ms=\"{}\">{}</span>",
            millis(at),
            if expired {
                "expired".to_owned()
            } else {
                format!("expires {}", esc(&utc(at)))
            }
        ),
        None => "<span class=\"expires\">does not expire</span>".to_owned(),
    };
    let _ = write!(out, "<p class=\"time-left\">{expiry}</p>");
    on_approve(out, item, now);
    votes(out, item);
    request(out, v);
    if expired {
        out.push_str(
            "<p class=\"error\">This request expired: a decision is no longer accepted.</p>",
        );
    } else {
        let _ = write!(
            out,
            "<form class=\"decide\" method=\"post\" action=\"/approvals/{id}/decide\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <label for=\"note-{id}\">Note (optional)</label>\
             <textarea id=\"note-{id}\" name=\"note\" rows=\"2\" maxlength=\"2000\"></textarea>\
             {edit}\
             <div class=\"buttons\"><button type=\"submit\" name=\"verdict\" value=\"approve\" \
             id=\"approve-{id}\" class=\"approve\">Approve</button>\
             <button type=\"submit\" name=\"verdict\" value=\"deny\" id=\"deny-{id}\" \
             class=\"deny\">Deny</button></div></form>",
            csrf = esc(csrf),
            edit = edit_form(v)
        );
    }
    out.push_str("</article>");
}

/// The arguments editor of a write whose binding allows approve with edit: the arguments as
/// JSON, validated live by the page's script against the tool's input schema (carried with the
/// request), and the button that approves with them. Empty for any other write.
fn edit_form(v: &ApprovalView) -> String {
    if !purra_core::allows_edit(&v.request) {
        return String::new();
    }
    let id = esc(&v.id.0);
    let schema = v
        .request
        .labels
        .get(purra_core::INPUT_SCHEMA_LABEL)
        .map_or_else(String::new, |s| esc(s));
    let args = serde_json::to_string_pretty(&v.request.arguments).unwrap_or_default();
    format!(
        "<div class=\"edit\"><label for=\"edit-{id}\">Arguments (edit to approve with edit)</label>\
         <textarea class=\"edit\" id=\"edit-{id}\" name=\"arguments\" rows=\"6\" \
         spellcheck=\"false\" data-schema=\"{schema}\">{args}</textarea>\
         <p class=\"edit-error\" id=\"edit-error-{id}\" role=\"alert\"></p>\
         <button type=\"submit\" name=\"verdict\" value=\"edit\" id=\"edit-approve-{id}\" \
         class=\"approve\">Approve with edit</button></div>",
        args = esc(&args)
    )
}

/// The decision of a decided state.
pub fn decision(state: &ApprovalState) -> Option<&Decision> {
    match state {
        ApprovalState::Prepared => None,
        ApprovalState::Decided(d) | ApprovalState::Claimed(d) | ApprovalState::Refused(d) => {
            Some(d)
        }
    }
}

/// What became of the call: the claim's effect, or why there is none.
pub fn effect(v: &ApprovalView) -> &'static str {
    if let Some(c) = &v.claim {
        return c.effect_word();
    }
    match v.status() {
        ApprovalStatus::Approved => "not_dispatched_yet",
        ApprovalStatus::Refused => "refused_never_dispatched",
        _ => "never_dispatched",
    }
}

fn history(out: &mut String, item: &Item, csrf: &str) {
    let v = &item.view;
    let id = esc(&v.id.0);
    let status = v.status();
    let effect = effect(v);
    let _ = write!(
        out,
        "<article class=\"approval\" id=\"history-{id}\" data-id=\"{id}\" data-status=\"{status}\" \
         data-effect=\"{effect}\"><h3>{tool} <small>{id}</small> \
         <span class=\"badge status-{status}\">{status}</span> \
         <span class=\"badge effect effect-{effect}\" id=\"effect-{id}\">{effect}</span></h3>",
        tool = esc(&v.request.intent.tool)
    );
    if let Some(d) = decision(&v.state) {
        let verdict = match d.verdict {
            Verdict::Approve => "approved",
            Verdict::Deny => "denied",
        };
        let _ = write!(
            out,
            "<p class=\"decision\">{verdict} by <b class=\"decided-by\">{}</b> at {}",
            esc(&one_line(&d.approver, WHO_MAX_CHARS)),
            time(d.decided_at)
        );
        if let Some(note) = &d.note {
            let _ = write!(out, ": <q class=\"note\">{}</q>", esc(note));
        }
        out.push_str("</p>");
    }
    votes(out, item);
    request(out, v);
    if let Some(receipt) = v.claim.as_ref().and_then(|c| c.receipt()) {
        let _ = write!(
            out,
            "<h4>Receipt</h4><pre class=\"receipt\">{}</pre>",
            esc(&serde_json::to_string_pretty(receipt).unwrap_or_default())
        );
    }
    if effect == "unknown" {
        let _ = write!(
            out,
            "<form class=\"reconcile\" method=\"post\" action=\"/approvals/{id}/reconcile\">\
             <p>Whether this call took effect is unknown. Record what independent evidence shows; \
             the call is never sent again either way.</p>\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <label for=\"outcome-{id}\">Outcome</label><select id=\"outcome-{id}\" name=\"outcome\">\
             <option value=\"committed\">committed</option>\
             <option value=\"not_started\">not_started</option></select>\
             <label for=\"evidence-{id}\">Evidence (required)</label>\
             <textarea id=\"evidence-{id}\" name=\"evidence\" rows=\"2\" maxlength=\"4000\" required></textarea>\
             <div class=\"buttons\"><button type=\"submit\" id=\"reconcile-{id}\">Record</button></div></form>",
            csrf = esc(csrf)
        );
    }
    let _ = write!(
        out,
        "<details class=\"trail\"><summary>Audit trail ({} entries)</summary><table>\
         <thead><tr><th>#</th><th>Time</th><th>Event</th><th>By</th><th>Detail</th></tr></thead><tbody>",
        item.trail.len()
    );
    for (n, e) in item.trail.iter().enumerate() {
        let _ = write!(
            out,
            "<tr data-seq=\"{}\"><td>{}</td><td>{}</td><td class=\"event\">{}</td>\
             <td class=\"by\" title=\"{}\">{}</td><td class=\"detail\">{}</td></tr>",
            e.seq,
            n + 1,
            time(e.at),
            esc(&e.event.replace('_', " ")),
            esc(&e.owner),
            esc(&by(e)),
            esc(&detail(&e.detail))
        );
    }
    out.push_str("</tbody></table></details></article>");
}

/// A store owner (`PID-OPENEDNS-N`, as the stores write it) readably: `process 6838` (`process
/// 6838, store 3` for a process's third store); anything else as it is. The row keeps the
/// owner's id in its `title`.
pub fn owner(owner: &str) -> String {
    let mut parts = owner.splitn(3, '-');
    let (Some(pid), Some(opened), Some(n)) = (parts.next(), parts.next(), parts.next()) else {
        return owner.to_owned();
    };
    match (pid.parse::<u32>(), opened.parse::<u64>(), n.parse::<u64>()) {
        (Ok(pid), Ok(_), Ok(0)) => format!("process {pid}"),
        (Ok(pid), Ok(_), Ok(n)) => format!("process {pid}, store {}", n + 1),
        _ => owner.to_owned(),
    }
}

/// Who an audit row is by: the person who decided or reconciled (and through which process),
/// else the process.
fn by(e: &AuditEntry) -> String {
    match e.detail.get("approver").and_then(Value::as_str) {
        Some(person) => format!("{person}, through {}", owner(&e.owner)),
        None => owner(&e.owner),
    }
}

/// An audit row's details readably: `name: value` pairs in name order, times (members ending in `Ns`, in
/// nanoseconds since the epoch) as UTC times, durations in `leaseNs` as seconds, the rest as JSON.
fn detail(d: &Value) -> String {
    let Value::Object(members) = d else {
        return serde_json::to_string(d).unwrap_or_default();
    };
    // In name order, whatever order the map keeps.
    let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::new();
    for (k, v) in sorted {
        // The approver is the row's "by"; the whole intent is the card's (its digest stays).
        if k == "approver" || k == "intent" || v.is_null() {
            continue;
        }
        let (name, shown) = match (k.strip_suffix("Ns"), v.as_u64()) {
            (Some("lease"), Some(ns)) => ("lease".to_owned(), format!("{} s", ns / 1_000_000_000)),
            (Some(name), Some(ns)) => (
                words(name),
                utc(UNIX_EPOCH + std::time::Duration::from_nanos(ns)),
            ),
            _ => (
                words(k),
                match v {
                    Value::String(s) => s.clone(),
                    other => serde_json::to_string(other).unwrap_or_default(),
                },
            ),
        };
        out.push(format!("{name}: {shown}"));
    }
    out.join("; ")
}

/// `decidedAt` as `decided at`.
fn words(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push(' ');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Finding 4 of issue 40: U+202E, U+200B and other hidden characters reached the readable
    /// and the exact JSON views raw. Both show them as escapes, under a warning; the exact JSON
    /// still reads as the same value.
    #[test]
    fn what_the_approver_reads_shows_hidden_characters_escaped() {
        // Members in name order: the page shows them in the order serde_json keeps, sorted or
        // (with `preserve_order`, on in a workspace build for purra-gateway's Cedar) as given.
        let args = serde_json::json!({
            "n\u{200b}ame": {"tag": "x\u{e0041}"},
            "path": "/srv/notes/\u{202e}txt.exe",
        });
        let mut out = String::new();
        arguments(&mut out, &args);
        assert_eq!(
            out,
            format!(
                "{HIDDEN_CHARACTERS}<dl class=\"arguments\">\
                 <dt>n\\u200bame</dt><dd><code>{{\n  &quot;tag&quot;: &quot;x\\udb40\\udc41&quot;\n}}</code></dd>\
                 <dt>path</dt><dd>/srv/notes/\\u202etxt.exe</dd></dl>\
                 <details><summary>Exact JSON</summary><pre class=\"exact-json\">\
                 {{&quot;n\\u200bame&quot;:{{&quot;tag&quot;:&quot;x\\udb40\\udc41&quot;}},\
                 &quot;path&quot;:&quot;/srv/notes/\\u202etxt.exe&quot;}}</pre></details>"
            )
        );
        assert!(
            !out.contains('\u{202e}') && !out.contains('\u{200b}') && !out.contains('\u{e0041}')
        );
        // Plain arguments: no warning, nothing escaped.
        let mut out = String::new();
        arguments(&mut out, &serde_json::json!({"text": "a\nb <c>"}));
        assert_eq!(
            out,
            "<dl class=\"arguments\"><dt>text</dt><dd>a\nb &lt;c&gt;</dd></dl>\
             <details><summary>Exact JSON</summary><pre class=\"exact-json\">\
             {&quot;text&quot;:&quot;a\\nb &lt;c&gt;&quot;}</pre></details>"
        );
        // A whole value that is not an object.
        let mut out = String::new();
        arguments(&mut out, &serde_json::json!(["\u{2066}"]));
        assert!(out.starts_with(HIDDEN_CHARACTERS), "{out}");
        assert!(
            out.contains("<pre class=\"arguments\">[\n  &quot;\\u2066&quot;\n]</pre>"),
            "{out}"
        );
    }

    /// Issue 43 finding 7: "Asked by" shows a client's name on one line, escaped and bounded
    /// (the arguments beside it already were).
    #[test]
    fn finding_7_asked_by_shows_a_clients_name_escaped_and_bounded() {
        let asked_by = |by: &str| {
            let mut r = purra_store_tests::request("v");
            r.requested_by = by.to_owned();
            let view = ApprovalView {
                id: purra_core::ApprovalId("approval-1".into()),
                intent_digest: r.intent.digest(),
                request: r,
                state: ApprovalState::Prepared,
                claim: None,
            };
            let mut out = String::new();
            request(&mut out, &view);
            let (_, dd) = out.split_once("<dd class=\"asked-by\">").expect("Asked by");
            dd.split_once("</dd>").expect("its end").0.to_owned()
        };
        assert_eq!(
            asked_by("local (evil\u{202e}\nname)"),
            "local (evil\\u202e\\nname)"
        );
        assert_eq!(
            asked_by(&format!("local ({})", "x".repeat(10_000))),
            format!("local ({}\u{2026}", "x".repeat(505))
        );
    }

    /// An approval of the store tests' request in `state`, with the gateway's labels.
    fn view(state: ApprovalState) -> ApprovalView {
        let mut request = purra_store_tests::request("x");
        request
            .labels
            .insert(TITLE_LABEL.into(), "Replace the <note>".into());
        request
            .labels
            .insert(EFFECT_LABEL.into(), "destructive".into());
        ApprovalView {
            id: purra_core::ApprovalId("approval-1".into()),
            intent_digest: request.intent.digest(),
            request,
            state,
            claim: None,
        }
    }

    /// Issue 44, defect 6: a pending card says what approving does (a caller waits until
    /// when; or the gateway sends it anyway; or nobody waits), with the title and effect.
    #[test]
    fn a_pending_card_says_what_approving_does() {
        let now = UNIX_EPOCH + Duration::from_secs(1_796_561_140);
        let card = |v: ApprovalView, waiting: Option<SystemTime>| {
            let run = SuspendedRun {
                run_id: v.request.intent.run_id.clone(),
                root_run_id: v.request.intent.run_id.clone(),
                agent: "gw".into(),
                preset_fingerprint: v.request.intent.preset_fingerprint.clone(),
                transcript: Vec::new(),
                pending_call: purra_core::ToolCall {
                    id: "call".into(),
                    name: v.request.intent.tool.clone(),
                    arguments: v.request.arguments.clone(),
                },
                approval_id: v.id.clone(),
                intent_digest: v.intent_digest.clone(),
                turns_used: 0,
                waiting_until: waiting,
            };
            let mut out = String::new();
            pending(
                &mut out,
                &Item {
                    view: v,
                    trail: Vec::new(),
                    run: Some(run),
                    votes: Vec::new(),
                },
                "csrf",
                now,
            );
            out
        };
        let until = now + Duration::from_secs(30);
        let out = card(view(ApprovalState::Prepared), Some(until));
        assert!(
            out.contains(
                "<p class=\"on-approve\" data-on-approve=\"caller_waiting\" \
                 data-waiting-until-ms=\"1796561170000\" data-then=\"nobody waiting: approving \
                 sends on the next identical call\"><b>caller waiting: approving sends now</b> \
                 <span class=\"waiting-until\">(the caller waits until 2026-12-06 12:46:10 \
                 UTC)</span></p>"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "<dl class=\"facts\"><dt>Title</dt><dd class=\"title\">Replace the &lt;note&gt;\
                 </dd><dt>Effect</dt><dd><span class=\"badge write-effect \
                 write-effect-destructive\">destructive</span></dd><dt>Tool</dt>"
            ),
            "{out}"
        );
        // The labels shown as facts of their own are not shown again.
        assert!(
            !out.contains("<dt>title</dt>") && !out.contains("<dt>effect</dt>"),
            "{out}"
        );
        // A wait that ended: nobody waits.
        let out = card(view(ApprovalState::Prepared), Some(now));
        assert!(
            out.contains(
                "<p class=\"on-approve\" data-on-approve=\"next_call\"><b>nobody waiting: \
                 approving sends on the next identical call</b></p>"
            ),
            "{out}"
        );
        // A gateway that sends decided writes without their caller.
        let mut v = view(ApprovalState::Prepared);
        v.request
            .labels
            .insert(SENDS_WITHOUT_CALLER_LABEL.into(), "true".into());
        let out = card(v, None);
        assert!(
            out.contains(
                "<p class=\"on-approve\" data-on-approve=\"sends_now\"><b>approving sends \
                 now</b></p>"
            ),
            "{out}"
        );
    }

    /// Issue 44, defect 6: the audit trail named processes as `6838-1796561140969958873-0`,
    /// numbered rows by the log's sequence and showed times as nanoseconds. Rows are numbered
    /// from 1, owners read as processes, the approver as a person, times as UTC times.
    #[test]
    fn the_audit_trail_names_people_and_processes_and_shows_times() {
        let at = UNIX_EPOCH + Duration::from_secs(1_796_561_140);
        let entry = |seq, event: &str, detail| {
            AuditEntry::new(
                seq,
                at,
                "6838-1796561140969958873-0".into(),
                event.into(),
                Some("approval-1".into()),
                None,
                None,
                detail,
            )
        };
        assert_eq!(owner("6838-1796561140969958873-0"), "process 6838");
        assert_eq!(owner("6838-1796561140969958873-2"), "process 6838, store 3");
        assert_eq!(owner("someone"), "someone");
        let trail = [
            entry(
                41,
                "prepared",
                serde_json::json!({"intentDigest": "sha256:ab"}),
            ),
            entry(
                57,
                "decided",
                serde_json::json!({"verdict": "approve", "approver": "ada (page)",
                    "decidedAtNs": 1_796_561_140_969_958_873_u64, "expiresAtNs": null,
                    "note": "ok"}),
            ),
        ];
        let v = view(ApprovalState::Decided(purra_store_tests::decision(
            Verdict::Approve,
            None,
        )));
        let mut out = String::new();
        history(
            &mut out,
            &Item {
                view: v,
                trail: trail.to_vec(),
                run: None,
                votes: Vec::new(),
            },
            "csrf",
        );
        let rows: Vec<&str> = out.split("<tr data-seq=").skip(1).collect();
        assert_eq!(rows.len(), 2, "{out}");
        assert!(
            rows[0].starts_with(
                "\"41\"><td>1</td><td><time data-ms=\"1796561140000\">2026-12-06 12:45:40 UTC\
                 </time></td><td class=\"event\">prepared</td><td class=\"by\" \
                 title=\"6838-1796561140969958873-0\">process 6838</td><td class=\"detail\">\
                 intent digest: sha256:ab</td></tr>"
            ),
            "{}",
            rows[0]
        );
        assert!(
            rows[1].starts_with(
                "\"57\"><td>2</td><td><time data-ms=\"1796561140000\">2026-12-06 12:45:40 UTC\
                 </time></td><td class=\"event\">decided</td><td class=\"by\" \
                 title=\"6838-1796561140969958873-0\">ada (page), through process 6838</td>\
                 <td class=\"detail\">decided at: 2026-12-06 12:45:40 UTC; note: ok; \
                 verdict: approve</td></tr>"
            ),
            "{}",
            rows[1]
        );
    }

    #[test]
    fn text_is_escaped_and_times_are_civil() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01 00:00:00 UTC");
        assert_eq!(
            utc(UNIX_EPOCH + Duration::from_secs(1_709_210_096)),
            "2024-02-29 12:34:56 UTC"
        );
    }
}
