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
use purra_core::{ApprovalState, ApprovalStatus, ApprovalView, AuditEntry, Decision, Verdict};
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
}

impl View {
    /// `pending` or `history` (also the fragment's path segment).
    pub fn as_str(self) -> &'static str {
        match self {
            View::Pending => "pending",
            View::History => "history",
        }
    }
}

/// A whole page around `main`.
pub fn layout(title: &str, view: Option<View>, approver: Option<&str>, main: &str) -> String {
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
            "<nav><a href=\"/\"{}>Pending</a> <a href=\"/history\"{}>History</a>\
             <span class=\"who\">Signed in as <b id=\"approver\">{}</b></span></nav>",
            current(View::Pending),
            current(View::History),
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
/// and a "Sign in with …" link to the provider named `oidc` when one is configured.
pub fn login(message: Option<&str>, token: bool, oidc: Option<&str>) -> String {
    let message = message.map_or(String::new(), |m| {
        format!("<p class=\"error\" id=\"login-error\">{}</p>", esc(m))
    });
    let mut main = format!("<h2>Sign in</h2>{message}");
    if let Some(label) = oidc {
        let _ = write!(
            main,
            "<p><a class=\"button\" id=\"login-oidc\" href=\"/login/oidc\">Sign in with {}</a></p>",
            esc(label)
        );
    }
    if token {
        main.push_str(
            "<form method=\"post\" action=\"/login\" class=\"login\">\
             <label for=\"token\">Access token (printed when the page started)</label>\
             <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required autofocus>\
             <button type=\"submit\" id=\"login\">Sign in</button></form>",
        );
    }
    layout("Sign in", None, None, &main)
}

/// The page a provider's sign-in lands on: it names who signed in and moves on to the list at
/// once (a navigation from the page itself, so the `SameSite=Strict` session cookie goes along).
pub fn signed_in(approver: &str) -> String {
    layout(
        "Signed in",
        None,
        None,
        &format!(
            "<meta http-equiv=\"refresh\" content=\"0;url=/\"><h2>Signed in</h2>\
             <p id=\"message\">Signed in as {}.</p><p><a href=\"/\">Go to the approvals</a></p>",
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
                "<h2>Pending approvals <span id=\"count\">{total}</span></h2>"
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
                pending(&mut out, &item.view, csrf, now);
            }
            if let Some(next) = &listing.next {
                let _ = write!(
                    out,
                    "<p class=\"more\" id=\"more\"><span id=\"more-count\">{}</span> more pending, \
                     older than these: <a href=\"/?before={id}\" id=\"more-link\">show them</a></p>",
                    listing.more.unwrap_or(0),
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
    }
    out
}

/// One approval on a page of its own (`/approvals/ID`, where webhook events link): its pending
/// form while it waits, else its decision, effect and trail as the history shows them.
pub fn one(item: &Item, csrf: &str, now: SystemTime) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<h2>Approval <span id=\"approval-id\">{}</span></h2>",
        esc(&item.view.id.0)
    );
    if item.view.state == ApprovalState::Prepared {
        pending(&mut out, &item.view, csrf, now);
    } else {
        history(&mut out, item, csrf);
    }
    out
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
    /// How many approvals the list holds in all (the pending list).
    pub total: Option<u64>,
    /// How many older ones follow this page (the pending list).
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
}

/// The facts of a request shared by both lists.
fn request(out: &mut String, v: &ApprovalView) {
    let r = &v.request;
    let _ = write!(
        out,
        "<dl class=\"facts\"><dt>Tool</dt><dd class=\"tool\">{}</dd>",
        esc(&r.intent.tool)
    );
    for (k, val) in &r.labels {
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
        purra_core::APPROVERS_MUST_DIFFER_LABEL => "Approvers must differ".into(),
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

fn pending(out: &mut String, v: &ApprovalView, csrf: &str, now: SystemTime) {
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
             <div class=\"buttons\"><button type=\"submit\" name=\"verdict\" value=\"approve\" \
             id=\"approve-{id}\" class=\"approve\">Approve</button>\
             <button type=\"submit\" name=\"verdict\" value=\"deny\" id=\"deny-{id}\" \
             class=\"deny\">Deny</button></div></form>",
            csrf = esc(csrf)
        );
    }
    out.push_str("</article>");
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
    for e in &item.trail {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"event\">{}</td><td>{}</td><td><code>{}</code></td></tr>",
            e.seq,
            time(e.at),
            esc(&e.event),
            esc(&e.owner),
            esc(&serde_json::to_string(&e.detail).unwrap_or_default())
        );
    }
    out.push_str("</tbody></table></details></article>");
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
