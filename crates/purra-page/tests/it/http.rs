//! The approver page over real HTTP, on a real SQLite store: sign-in and the session cookie, the
//! Host/Origin/same-origin checks, CSRF, decisions with the approver's identity and note, conflicts
//! and races, live updates by server-sent events, the history with effects, receipts, audit trails
//! and the reconciliation of `unknown` only with evidence, and both lists one page at a time
//! (newest first, with a way to the older ones) however many approvals the store holds. Exact
//! statuses and bodies throughout.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use purra_core::{
    ApprovalGateway, ApprovalId, ApprovalPage, ApprovalQuery, ApprovalRecord, ApprovalRequest,
    ApprovalState, ApprovalView, AuditEntry, BoxFuture, ClaimResult, ClaimState, ClaimVerdict,
    Decision, EffectOutcome, IdempotencyKey, IdempotencyStore, JsonIdentity, OperatorStore,
    Reconciliation, RunId, RunStore, StoreError, StoreEvents, SuspendedRun, Verdict,
};
use purra_page::{Page, PageConfig};
use purra_sqlite::SqliteStore;
use purra_store_tests::{request, unknown};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::{fresh_store, no_redirects, serve, TempDir};

/// A page on a fresh store, served on a loopback port for the test's life.
struct Served {
    store: SqliteStore,
    url: String,
    tokens: Vec<(String, String)>,
    http: reqwest::Client,
    _dir: TempDir,
}

async fn served(name: &str) -> Served {
    served_with(name, PageConfig::default()).await
}

async fn served_with(name: &str, config: PageConfig) -> Served {
    served_over(name, config, |store| Arc::new(store)).await
}

/// A page over what `over` makes of a fresh store (the store itself, or a wrapper around it).
async fn served_over(
    name: &str,
    config: PageConfig,
    over: impl FnOnce(SqliteStore) -> Arc<dyn OperatorStore>,
) -> Served {
    let (store, dir) = fresh_store("http", name);
    let page = Page::new(over(store.clone()), config.approver("ada").approver("bob"));
    let tokens = page.tokens().to_vec();
    let addr = serve(&page).await;
    Served {
        store,
        url: format!("http://{addr}"),
        tokens,
        http: no_redirects(),
        _dir: dir,
    }
}

/// A signed-in browser: its cookie header and its CSRF token.
struct Signed {
    cookie: String,
    csrf: String,
}

impl Served {
    fn token(&self, who: &str) -> &str {
        &self.tokens.iter().find(|(a, _)| a == who).unwrap().1
    }

    async fn login(&self, who: &str) -> Signed {
        let r = self
            .http
            .post(format!("{}/login", self.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", &self.url)
            .body(format!("token={}", self.token(who)))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 303);
        assert_eq!(r.headers()["location"], "/");
        let set = r.headers()["set-cookie"].to_str().unwrap().to_owned();
        let cookie = set.split(';').next().unwrap().to_owned();
        let page = self.get("/", Some(&cookie)).await;
        assert_eq!(page.0, 200);
        let csrf = between(&page.1, "name=\"csrf\" value=\"", "\"").to_owned();
        assert_eq!(csrf.len(), 43);
        Signed { cookie, csrf }
    }

    async fn get(&self, path: &str, cookie: Option<&str>) -> (u16, String) {
        let mut req = self.http.get(format!("{}{path}", self.url));
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        let r = req.send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// POSTs a form as the page's script does (JSON answer), with extra headers.
    async fn post(
        &self,
        path: &str,
        cookie: Option<&str>,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let body: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let mut req = self
            .http
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body);
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or_else(|_| json!({ "text": text })),
        )
    }

    async fn decide(&self, s: &Signed, id: &str, verdict: &str, note: &str) -> (u16, Value) {
        self.post(
            &format!("/approvals/{id}/decide"),
            Some(&s.cookie),
            &[("csrf", &s.csrf), ("verdict", verdict), ("note", note)],
            &[("origin", &self.url), ("sec-fetch-site", "same-origin")],
        )
        .await
    }

    async fn prepare(&self, args: &str) -> ApprovalId {
        ApprovalGateway::prepare(&self.store, request(args))
            .await
            .unwrap()
    }

    async fn state(&self, id: &ApprovalId) -> ApprovalState {
        ApprovalGateway::record(&self.store, id.clone())
            .await
            .unwrap()
            .unwrap()
            .state
    }
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} not in {text}"))
        + start.len();
    let len = text[from..].find(end).unwrap();
    &text[from..from + len]
}

#[tokio::test]
async fn sign_in_sets_a_strict_httponly_cookie_and_bad_tokens_are_refused() {
    let s = served("login").await;
    // Without a session every view sends the browser to the sign-in form.
    let r = s.http.get(format!("{}/", s.url)).send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/login");
    assert_eq!(
        r.headers()["content-security-policy"],
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
         img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    );
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    assert_eq!(r.headers()["cache-control"], "no-store");
    for path in ["/history", "/fragment/pending", "/events"] {
        let (status, _) = s.get(path, None).await;
        assert_eq!(status, if path == "/history" { 303 } else { 401 }, "{path}");
    }
    // A wrong token, and a session id that was never issued.
    let r = s
        .http
        .post(format!("{}/login", s.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=not-the-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("set-cookie").is_none());
    assert!(r
        .text()
        .await
        .unwrap()
        .contains("That access token is not valid."));
    assert_eq!(s.get("/", Some("purra_page_session=forged")).await.0, 303);
    // The right token: a session cookie that scripts cannot read and other sites never send.
    let r = s
        .http
        .post(format!("{}/login", s.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", s.token("ada")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let set = r.headers()["set-cookie"].to_str().unwrap();
    let (pair, attrs) = set.split_once("; ").unwrap();
    let (name, value) = pair.split_once('=').unwrap();
    assert_eq!(name, "purra_page_session");
    assert_eq!(value.len(), 43);
    assert_eq!(attrs, "Path=/; HttpOnly; SameSite=Strict; Max-Age=43200");
    let (status, body) = s.get("/", Some(pair)).await;
    assert_eq!(status, 200);
    assert!(
        body.contains("Signed in as <b id=\"approver\">ada</b>"),
        "{body}"
    );
    assert!(body.contains("Nothing waits for a decision."));
    // Each approver has their own token.
    assert_ne!(s.token("ada"), s.token("bob"));
    let bob = s.login("bob").await;
    let (_, body) = s.get("/", Some(&bob.cookie)).await;
    assert!(body.contains("Signed in as <b id=\"approver\">bob</b>"));
    // Signing out ends the session.
    let (status, _) = s
        .post(
            "/logout",
            Some(&bob.cookie),
            &[("csrf", &bob.csrf)],
            &[("origin", &s.url)],
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(s.get("/", Some(&bob.cookie)).await.0, 303);
}

#[tokio::test]
async fn host_origin_and_cross_site_requests_are_refused() {
    let s = served("origin").await;
    let ada = s.login("ada").await;
    let id = s.prepare("\"v1\"").await;
    // DNS rebinding: a Host that is not a loopback name.
    let r = s
        .http
        .get(format!("{}/", s.url))
        .header("host", "attacker.example")
        .header("cookie", &ada.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r
        .text()
        .await
        .unwrap()
        .contains("refused: Host &quot;attacker.example&quot; is not allowed"));
    let decide = format!("/approvals/{}/decide", id.0);
    let form = [("csrf", ada.csrf.as_str()), ("verdict", "approve")];
    let cases: [(&[(&str, &str)], &str); 4] = [
        (
            &[("origin", "http://attacker.example")],
            "refused: Origin \"http://attacker.example\" is not allowed",
        ),
        // A loopback origin on another port passes the shared policy but is not this page.
        (
            &[("origin", "http://localhost:9")],
            "refused: the request does not come from this page's origin",
        ),
        (
            &[("sec-fetch-site", "cross-site")],
            "refused: a cross-site request cannot change anything here",
        ),
        (
            &[("sec-fetch-site", "same-site")],
            "refused: a cross-site request cannot change anything here",
        ),
    ];
    for (headers, message) in cases {
        let (status, body) = s.post(&decide, Some(&ada.cookie), &form, headers).await;
        assert_eq!(
            (status, body),
            (403, json!({"ok": false, "message": message})),
            "{headers:?}"
        );
    }
    assert_eq!(s.state(&id).await, ApprovalState::Prepared);
    // Its own host under https (a proxy terminating TLS in front) is the page's origin too.
    let https = s.url.replacen("http://", "https://", 1);
    let (status, _) = s
        .post(&decide, Some(&ada.cookie), &form, &[("origin", &https)])
        .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn decisions_need_the_session_and_its_csrf_token_and_record_the_approver() {
    let s = served("csrf").await;
    let ada = s.login("ada").await;
    let id = s.prepare("\"v1\"").await;
    let path = format!("/approvals/{}/decide", id.0);
    let own = [("origin", s.url.as_str())];
    let (status, body) = s
        .post(
            &path,
            None,
            &[("csrf", &ada.csrf), ("verdict", "approve")],
            &own,
        )
        .await;
    assert_eq!(
        (status, body),
        (
            401,
            json!({"ok": false, "message": "refused: sign in first (no session)"})
        )
    );
    let csrf_refusal = json!({
        "ok": false,
        "message": "refused: the form's CSRF token is missing or wrong (reload the page)"
    });
    let (status, body) = s
        .post(&path, Some(&ada.cookie), &[("verdict", "approve")], &own)
        .await;
    assert_eq!((status, &body), (403, &csrf_refusal));
    let bob = s.login("bob").await;
    // Another session's token is not this session's.
    let (status, body) = s
        .post(
            &path,
            Some(&ada.cookie),
            &[("csrf", &bob.csrf), ("verdict", "approve")],
            &own,
        )
        .await;
    assert_eq!((status, &body), (403, &csrf_refusal));
    let (status, body) = s.decide(&ada, &id.0, "maybe", "").await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"ok": false, "message": "refused: the verdict must be approve or deny"})
        )
    );
    assert_eq!(s.state(&id).await, ApprovalState::Prepared);
    let (status, body) = s.decide(&ada, "approval-99", "approve", "").await;
    assert_eq!(
        (status, body),
        (
            404,
            json!({"ok": false, "message": "unknown approval id: approval-99"})
        )
    );

    let (status, body) = s
        .decide(&ada, &id.0, "approve", "  checked with ops  ")
        .await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"ok": true, "message": format!("{} approved by ada", id.0)})
        )
    );
    let ApprovalState::Decided(d) = s.state(&id).await else {
        panic!("not decided")
    };
    assert_eq!(d.verdict, Verdict::Approve);
    // The approver names the path the decision came by.
    assert_eq!(d.approver, "ada (page)");
    assert_eq!(d.note.as_deref(), Some("checked with ops"));
    let ttl = d.expires_at.unwrap().duration_since(d.decided_at).unwrap();
    assert_eq!(ttl, Duration::from_secs(3600));
    // A decision is final: the next one is a conflict naming the first.
    let (status, body) = s.decide(&bob, &id.0, "deny", "").await;
    assert_eq!(
        (status, body),
        (
            409,
            json!({"ok": false, "message": format!("conflict: {} was already decided: approved by ada (page) (approved)", id.0)})
        )
    );
    // A denial, without a note; no expiry.
    let id2 = s.prepare("\"v2\"").await;
    let (status, _) = s.decide(&bob, &id2.0, "deny", "").await;
    assert_eq!(status, 200);
    let ApprovalState::Decided(d) = s.state(&id2).await else {
        panic!("not decided")
    };
    assert_eq!(
        (d.verdict, d.approver.as_str(), d.note, d.expires_at),
        (Verdict::Deny, "bob (page)", None, None)
    );
    // Without JavaScript a form post answers with a redirect back to the list.
    let id3 = s.prepare("\"v3\"").await;
    let body = format!("csrf={}&verdict=approve&note=", ada.csrf);
    let r = s
        .http
        .post(format!("{}/approvals/{}/decide", s.url, id3.0))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", &ada.cookie)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/");
    // An oversized form is refused before it is read.
    let huge = "x".repeat(20_000);
    let (status, _) = s
        .post(&path, Some(&ada.cookie), &[("note", &huge)], &own)
        .await;
    assert_eq!(status, 413);
}

#[tokio::test]
async fn racing_sessions_exactly_one_decision_wins_each_time() {
    let s = Arc::new(served("race").await);
    let ada = s.login("ada").await;
    let bob = s.login("bob").await;
    for round in 0..20 {
        let id = s.prepare(&format!("\"race-{round}\"")).await;
        let (a, b) = tokio::join!(
            s.decide(&ada, &id.0, "approve", ""),
            s.decide(&bob, &id.0, "deny", "")
        );
        let mut statuses = [a.0, b.0];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 409], "round {round}: {a:?} {b:?}");
        let (winner, loser) = if a.0 == 200 {
            (&a.1, &b.1)
        } else {
            (&b.1, &a.1)
        };
        let ApprovalState::Decided(d) = s.state(&id).await else {
            panic!("not decided")
        };
        let word = if d.verdict == Verdict::Approve {
            "approved"
        } else {
            "denied"
        };
        let name = d.approver.strip_suffix(" (page)").expect("the page's path");
        assert_eq!(winner["message"], format!("{} {word} by {name}", id.0));
        assert_eq!(
            loser["message"],
            format!(
                "conflict: {} was already decided: {word} by {} ({word})",
                id.0, d.approver
            )
        );
    }
}

/// Reads server-sent events until one has `data`; returns the events read.
async fn read_until(resp: &mut reqwest::Response, data: &str) -> String {
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !seen.contains(&format!("data: {data}\n")) {
        let chunk = tokio::time::timeout_at(deadline, resp.chunk())
            .await
            .unwrap_or_else(|_| panic!("no event {data:?}; saw {seen:?}"))
            .unwrap()
            .expect("stream ended");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    seen
}

#[tokio::test]
async fn the_page_shows_a_request_exactly_and_streams_store_events() {
    let s = served("events").await;
    let ada = s.login("ada").await;
    let mut events = s
        .http
        .get(format!("{}/events", s.url))
        .header("cookie", &ada.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    let id = s.prepare("<b>v1</b>").await;
    let seen = read_until(&mut events, &format!("prepared {}", id.0)).await;
    assert!(seen.contains("event: change\n"), "{seen}");
    let (status, list) = s.get("/fragment/pending", Some(&ada.cookie)).await;
    assert_eq!(status, 200);
    let digest = ApprovalGateway::record(&s.store, id.clone())
        .await
        .unwrap()
        .unwrap()
        .intent_digest;
    for shown in [
        "<span id=\"count\">1</span>".to_owned(),
        format!("<article class=\"approval\" id=\"pending-{0}\" data-id=\"{0}\" data-status=\"pending\">", id.0),
        "<dt>Tool</dt><dd class=\"tool\">update</dd>".to_owned(),
        "<dt>Upstream</dt><dd class=\"label-upstream\">documents</dd>".to_owned(),
        "<dt>Asked by</dt><dd class=\"asked-by\">writer</dd>".to_owned(),
        "<time data-ms=\"5000\">1970-01-01 00:00:05 UTC</time>".to_owned(),
        format!("<code class=\"digest\">{}</code>", digest.as_str()),
        "<code>document-service @ host-config-1</code>".to_owned(),
        "<code>sandbox-documents @ scope-1</code>".to_owned(),
        // Escaped, readably and as exact JSON.
        "<pre class=\"arguments\">&quot;&lt;b&gt;v1&lt;/b&gt;&quot;</pre>".to_owned(),
        "<pre class=\"exact-json\">&quot;&lt;b&gt;v1&lt;/b&gt;&quot;</pre>".to_owned(),
        "<span class=\"expires\">does not expire</span>".to_owned(),
        format!("<button type=\"submit\" name=\"verdict\" value=\"approve\" id=\"approve-{}\"", id.0),
    ] {
        assert!(list.contains(&shown), "{shown} not in {list}");
    }
    assert!(!list.contains("<b>v1</b>"));
    let (status, _) = s.decide(&ada, &id.0, "deny", "no").await;
    assert_eq!(status, 200);
    read_until(&mut events, &format!("denied {}", id.0)).await;
    let (_, list) = s.get("/fragment/pending", Some(&ada.cookie)).await;
    assert!(list.contains("Nothing waits for a decision."));
}

#[tokio::test]
async fn history_shows_effects_receipts_trails_and_reconciles_unknown_only_with_evidence() {
    let s = served("history").await;
    let ada = s.login("ada").await;
    let store = &s.store;
    // One committed, one unknown, one denied.
    let committed = s.prepare("\"c\"").await;
    let lost = s.prepare("\"u\"").await;
    let denied = s.prepare("\"d\"").await;
    for id in [&committed, &lost] {
        assert_eq!(s.decide(&ada, &id.0, "approve", "ok").await.0, 200);
    }
    assert_eq!(s.decide(&ada, &denied.0, "deny", "not now").await.0, 200);
    let now = SystemTime::now();
    for (id, outcome) in [
        (
            &committed,
            purra_core::EffectOutcome::Committed {
                receipt: json!({"stored": "c"}),
            },
        ),
        (&lost, unknown("transport_lost")),
    ] {
        let digest = ApprovalGateway::record(store, id.clone())
            .await
            .unwrap()
            .unwrap()
            .intent_digest;
        let ClaimVerdict::Claimed(key) = store
            .check_and_claim(id.clone(), digest, now)
            .await
            .unwrap()
        else {
            panic!("not claimed")
        };
        IdempotencyStore::complete(store, key, outcome)
            .await
            .unwrap();
    }
    let (status, page) = s.get("/history", Some(&ada.cookie)).await;
    assert_eq!(status, 200);
    for shown in [
        "<span id=\"count\">3</span>".to_owned(),
        format!("id=\"effect-{}\">committed</span>", committed.0),
        format!("id=\"effect-{}\">unknown</span>", lost.0),
        format!("id=\"effect-{}\">never_dispatched</span>", denied.0),
        "denied by <b class=\"decided-by\">ada (page)</b>".to_owned(),
        "<q class=\"note\">not now</q>".to_owned(),
        "<pre class=\"receipt\">{\n  &quot;stored&quot;: &quot;c&quot;\n}</pre>".to_owned(),
        "<summary>Audit trail (4 entries)</summary>".to_owned(),
        format!("action=\"/approvals/{}/reconcile\"", lost.0),
    ] {
        assert!(page.contains(&shown), "{shown} not in {page}");
    }
    // Only the unknown outcome offers a reconciliation.
    assert_eq!(page.matches("class=\"reconcile\"").count(), 1);
    // The newest first.
    let order: Vec<usize> = [&denied, &lost, &committed]
        .iter()
        .map(|id| page.find(&format!("id=\"history-{}\"", id.0)).unwrap())
        .collect();
    assert!(order[0] < order[1] && order[1] < order[2], "{order:?}");

    let path = format!("/approvals/{}/reconcile", lost.0);
    let own = [("origin", s.url.as_str())];
    let (status, body) = s
        .post(
            &path,
            Some(&ada.cookie),
            &[
                ("csrf", &ada.csrf),
                ("outcome", "committed"),
                ("evidence", "  "),
            ],
            &own,
        )
        .await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"ok": false, "message": "refused: a reconciliation needs evidence (1 to 4096 bytes)"})
        )
    );
    let (status, body) = s
        .post(
            &format!("/approvals/{}/reconcile", committed.0),
            Some(&ada.cookie),
            &[
                ("csrf", &ada.csrf),
                ("outcome", "not_started"),
                ("evidence", "x"),
            ],
            &own,
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = s
        .post(
            &path,
            Some(&ada.cookie),
            &[
                ("csrf", &ada.csrf),
                ("outcome", "not_started"),
                ("evidence", "upstream log shows no request"),
            ],
            &own,
        )
        .await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"ok": true, "message": format!("{} reconciled by ada", lost.0)})
        )
    );
    let view = OperatorStore::approval(store, lost.clone())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.claim.unwrap().effect_word(), "not_started");
    let trail = OperatorStore::approval_audit(store, lost.clone())
        .await
        .unwrap();
    let reconciled = trail
        .iter()
        .find(|e| e.event == "reconciled")
        .expect("reconciled row");
    assert_eq!(
        (&reconciled.detail["by"], &reconciled.detail["evidence"]),
        (
            &json!("ada (approver page)"),
            &json!("upstream log shows no request")
        ),
        "{}",
        reconciled.detail
    );
    let (_, page) = s.get("/fragment/history", Some(&ada.cookie)).await;
    assert_eq!(page.matches("class=\"reconcile\"").count(), 0);
    assert!(page.contains(&format!("id=\"effect-{}\">not_started</span>", lost.0)));
}

#[tokio::test]
async fn live_update_streams_are_bounded_in_number() {
    let mut config = PageConfig::default();
    config.max_streams = 2;
    let s = served_with("streams", config).await;
    let ada = s.login("ada").await;
    let mut open = Vec::new();
    for _ in 0..2 {
        let r = s
            .http
            .get(format!("{}/events", s.url))
            .header("cookie", &ada.cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        open.push(r);
    }
    let (status, body) = s.get("/events", Some(&ada.cookie)).await;
    assert_eq!(
        (status, body.as_str()),
        (503, "too many live-update streams are open")
    );
    // The pages themselves still answer.
    assert_eq!(s.get("/", Some(&ada.cookie)).await.0, 200);
}

/// The ids of the approvals a list shows, in its order (`PREFIX-approval-N` articles).
fn shown(list: &str, prefix: &str) -> Vec<u64> {
    let marker = format!("id=\"{prefix}-approval-");
    list.match_indices(&marker)
        .map(|(at, _)| {
            let rest = &list[at + marker.len()..];
            rest[..rest.find('"').unwrap()].parse().unwrap()
        })
        .collect()
}

/// Prepares `n` approvals at once (the store commits them in groups); their ids are 1..=n.
async fn flood(store: &SqliteStore, n: usize) {
    let calls: Vec<_> = (0..n)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                ApprovalGateway::prepare(&store, request(&format!("flood-{i}")))
                    .await
                    .unwrap()
            })
        })
        .collect();
    for c in calls {
        c.await.unwrap();
    }
}

/// Finding 5 of the security review: a flood of approvals must not hide real ones. The pending
/// list shows one page, the newest first, how many wait in all and how many more are older, with
/// a link (no script needed) to them; the fragment the script refreshes serves the same page;
/// the last page says there is no older one; a cursor that is not an approval id is refused.
#[tokio::test]
async fn a_flood_of_approvals_pages_newest_first_with_a_more_marker() {
    let s = served("flood").await;
    let ada = s.login("ada").await;
    flood(&s.store, 120).await;
    let (status, first) = s.get("/", Some(&ada.cookie)).await;
    assert_eq!(status, 200);
    assert!(first.contains("<span id=\"count\">120</span>"), "{first}");
    assert_eq!(
        shown(&first, "pending"),
        (71..=120).rev().collect::<Vec<_>>()
    );
    assert!(first.contains(
        "<p class=\"more\" id=\"more\"><span id=\"more-count\">70</span> more pending, older \
         than these: <a href=\"/?before=approval-71\" id=\"more-link\">show them</a></p>"
    ));
    assert!(!first.contains("id=\"newest\""));
    let (status, second) = s.get("/?before=approval-71", Some(&ada.cookie)).await;
    assert_eq!(status, 200);
    assert!(second.contains("<span id=\"count\">120</span>"));
    assert!(second.contains(
        "<p class=\"paging\"><a href=\"/\" id=\"newest\">Newest pending approvals</a></p>"
    ));
    assert_eq!(
        shown(&second, "pending"),
        (21..=70).rev().collect::<Vec<_>>()
    );
    assert!(second.contains(
        "<span id=\"more-count\">20</span> more pending, older than these: \
         <a href=\"/?before=approval-21\" id=\"more-link\">show them</a>"
    ));
    // The fragment the script fetches for that page (it keeps the page's query).
    let (status, last) = s
        .get("/fragment/pending?before=approval-21", Some(&ada.cookie))
        .await;
    assert_eq!(status, 200);
    assert!(last.starts_with("<h2>Pending approvals <span id=\"count\">120</span></h2>"));
    assert_eq!(shown(&last, "pending"), (1..=20).rev().collect::<Vec<_>>());
    assert!(!last.contains("id=\"more\""), "{last}");
    let (_, past) = s
        .get("/fragment/pending?before=approval-1", Some(&ada.cookie))
        .await;
    assert_eq!(
        past,
        "<h2>Pending approvals <span id=\"count\">120</span></h2><p class=\"paging\"><a \
         href=\"/\" id=\"newest\">Newest pending approvals</a></p><p class=\"empty\" \
         id=\"empty\">No older pending approval.</p>"
    );
    for bad in ["/?before=nonsense", "/fragment/pending?before=approval-012"] {
        assert_eq!(
            s.get(bad, Some(&ada.cookie)).await,
            (
                400,
                "bad request: before must be an approval id such as approval-12".to_owned()
            ),
            "{bad}"
        );
    }
    // A decision takes the newest off the list; the page moves down by one.
    assert_eq!(s.decide(&ada, "approval-120", "deny", "").await.0, 200);
    let (_, first) = s.get("/fragment/pending", Some(&ada.cookie)).await;
    assert!(first.contains("<span id=\"count\">119</span>"));
    assert_eq!(
        shown(&first, "pending"),
        (70..=119).rev().collect::<Vec<_>>()
    );
    assert!(first.contains("<span id=\"more-count\">69</span> more pending"));
}

/// Issue 50, the store at scale: past `COUNTED_UP_TO` (1 000) pending approvals the list stops
/// counting (it reads at most 1 001 index entries per count) and says `1000+`, for the total and
/// for what follows the page; a page with fewer than that behind it counts them exactly.
#[tokio::test]
async fn past_a_thousand_pending_the_counts_say_1000_plus() {
    let s = served("thousand").await;
    let ada = s.login("ada").await;
    flood(&s.store, 1052).await;
    let (status, first) = s.get("/", Some(&ada.cookie)).await;
    assert_eq!(status, 200);
    assert!(first.contains("<span id=\"count\">1000+</span>"), "{first}");
    assert_eq!(
        shown(&first, "pending"),
        (1003..=1052).rev().collect::<Vec<_>>()
    );
    assert!(first.contains(
        "<p class=\"more\" id=\"more\"><span id=\"more-count\">1000+</span> more pending, \
         older than these: <a href=\"/?before=approval-1003\" id=\"more-link\">show them</a></p>"
    ));
    let (status, second) = s
        .get("/fragment/pending?before=approval-1003", Some(&ada.cookie))
        .await;
    assert_eq!(status, 200);
    assert!(second.starts_with("<h2>Pending approvals <span id=\"count\">1000+</span></h2>"));
    assert_eq!(
        shown(&second, "pending"),
        (953..=1002).rev().collect::<Vec<_>>()
    );
    assert!(second.contains("<span id=\"more-count\">952</span> more pending"));
}

/// A store that counts what the page reads of it: the approvals listings return and the audit
/// trails asked for.
struct Counting {
    store: SqliteStore,
    listed: AtomicUsize,
    trails: AtomicUsize,
}

impl Counting {
    fn take(&self) -> (usize, usize) {
        (
            self.listed.swap(0, Ordering::SeqCst),
            self.trails.swap(0, Ordering::SeqCst),
        )
    }
}

impl ApprovalGateway for Counting {
    fn is_durable(&self) -> bool {
        true
    }
    fn prepare(&self, request: ApprovalRequest) -> BoxFuture<'_, Result<ApprovalId, StoreError>> {
        ApprovalGateway::prepare(&self.store, request)
    }
    fn decide(&self, id: ApprovalId, decision: Decision) -> BoxFuture<'_, Result<(), StoreError>> {
        self.store.decide(id, decision)
    }
    fn record(&self, id: ApprovalId) -> BoxFuture<'_, Result<Option<ApprovalRecord>, StoreError>> {
        self.store.record(id)
    }
    fn check_and_claim(
        &self,
        id: ApprovalId,
        current: JsonIdentity,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<ClaimVerdict, StoreError>> {
        self.store.check_and_claim(id, current, now)
    }
    fn receipts(&self) -> Arc<dyn IdempotencyStore> {
        self.store.receipts()
    }
    fn subscribe(&self) -> StoreEvents {
        self.store.subscribe()
    }
}

impl IdempotencyStore for Counting {
    fn is_durable(&self) -> bool {
        true
    }
    fn claim(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<ClaimResult, StoreError>> {
        self.store.claim(key)
    }
    fn complete(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        IdempotencyStore::complete(&self.store, key, outcome)
    }
    fn state(&self, key: IdempotencyKey) -> BoxFuture<'_, Result<Option<ClaimState>, StoreError>> {
        self.store.state(key)
    }
}

impl RunStore for Counting {
    fn is_durable(&self) -> bool {
        true
    }
    fn save_suspended(&self, run: SuspendedRun) -> BoxFuture<'_, Result<(), StoreError>> {
        self.store.save_suspended(run)
    }
    fn load_suspended(
        &self,
        run_id: RunId,
    ) -> BoxFuture<'_, Result<Option<SuspendedRun>, StoreError>> {
        self.store.load_suspended(run_id)
    }
    fn remove_suspended(&self, run_id: RunId) -> BoxFuture<'_, Result<(), StoreError>> {
        self.store.remove_suspended(run_id)
    }
}

impl OperatorStore for Counting {
    fn owner(&self) -> &str {
        OperatorStore::owner(&self.store)
    }
    fn approvals(
        &self,
        query: ApprovalQuery,
    ) -> BoxFuture<'_, Result<Vec<ApprovalView>, StoreError>> {
        Box::pin(async move {
            let got = self.store.approvals(query).await?;
            self.listed.fetch_add(got.len(), Ordering::SeqCst);
            Ok(got)
        })
    }
    fn approval_page(
        &self,
        query: ApprovalQuery,
    ) -> BoxFuture<'_, Result<ApprovalPage, StoreError>> {
        Box::pin(async move {
            let got = self.store.approval_page(query).await?;
            self.listed.fetch_add(got.approvals.len(), Ordering::SeqCst);
            Ok(got)
        })
    }
    fn count_approvals(&self, query: ApprovalQuery) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.store.count_approvals(query)
    }
    fn prepare_within(
        &self,
        request: ApprovalRequest,
        limit: u32,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Option<ApprovalId>, StoreError>> {
        self.store.prepare_within(request, limit, now)
    }
    fn approval(&self, id: ApprovalId) -> BoxFuture<'_, Result<Option<ApprovalView>, StoreError>> {
        self.store.approval(id)
    }
    fn audit(&self, after: i64, limit: u32) -> BoxFuture<'_, Result<Vec<AuditEntry>, StoreError>> {
        self.store.audit(after, limit)
    }
    fn approval_audit(&self, id: ApprovalId) -> BoxFuture<'_, Result<Vec<AuditEntry>, StoreError>> {
        self.trails.fetch_add(1, Ordering::SeqCst);
        self.store.approval_audit(id)
    }
    fn run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        self.store.run_ids()
    }
    fn suspended_run_ids(&self) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        self.store.suspended_run_ids()
    }
    fn reconcile_interrupted_claims(
        &self,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Reconciliation, StoreError>> {
        self.store.reconcile_interrupted_claims(now)
    }
    fn reconcile_unknown(
        &self,
        key: IdempotencyKey,
        evidence: String,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.store.reconcile_unknown(key, evidence, outcome)
    }
    fn reconcile_effect(
        &self,
        key: IdempotencyKey,
        by: String,
        evidence: String,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.store.reconcile_effect(key, by, evidence, outcome)
    }
    fn effects(
        &self,
        query: purra_core::EffectQuery,
    ) -> BoxFuture<'_, Result<purra_core::EffectPage, StoreError>> {
        self.store.effects(query)
    }
    fn effect(
        &self,
        key: IdempotencyKey,
    ) -> BoxFuture<'_, Result<Option<purra_core::EffectView>, StoreError>> {
        self.store.effect(key)
    }
    fn claim_resend(
        &self,
        key: IdempotencyKey,
        by: String,
    ) -> BoxFuture<'_, Result<purra_core::ResendClaim, StoreError>> {
        self.store.claim_resend(key, by)
    }
    fn complete_resend(
        &self,
        key: IdempotencyKey,
        outcome: EffectOutcome,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.store.complete_resend(key, outcome)
    }
}

/// Finding 5: the history is read one page at a time, the newest decision first, never the whole
/// store on each refresh: a page of 20 reads 20 approvals and their 20 trails out of 150 in the
/// store, links to the older decisions, and pending approvals among them are never shown there.
#[tokio::test]
async fn history_is_read_by_page() {
    let mut config = PageConfig::default();
    config.history_limit = 20;
    let counting = Arc::new(std::sync::OnceLock::<Arc<Counting>>::new());
    let keep = counting.clone();
    let s = served_over("history-pages", config, move |store| {
        let c = Arc::new(Counting {
            store,
            listed: AtomicUsize::new(0),
            trails: AtomicUsize::new(0),
        });
        let _ = keep.set(c.clone());
        c
    })
    .await;
    let counting = counting.get().unwrap().clone();
    let ada = s.login("ada").await;
    flood(&s.store, 150).await;
    // Every fourth stays pending; the rest are decided (approved or denied in turn).
    let decided: Vec<u64> = (1..=150).filter(|n| n % 4 != 0).collect();
    for n in &decided {
        let verdict = if n % 2 == 0 {
            Verdict::Approve
        } else {
            Verdict::Deny
        };
        let d = Decision {
            verdict,
            approver: "ada".into(),
            decided_at: SystemTime::now(),
            expires_at: None,
            note: None,
        };
        s.store
            .decide(ApprovalId(format!("approval-{n}")), d)
            .await
            .unwrap();
    }
    let newest_first: Vec<u64> = decided.iter().rev().copied().collect();
    counting.take();
    let (status, first) = s.get("/history", Some(&ada.cookie)).await;
    assert_eq!(status, 200);
    assert_eq!(counting.take(), (20, 20));
    assert!(first.contains("<h2>History <span id=\"count\">20</span></h2>"));
    assert_eq!(shown(&first, "history"), newest_first[..20]);
    let next = newest_first[19];
    assert!(first.contains(&format!(
        "<p class=\"more\" id=\"more\">More decisions, older than these: <a \
         href=\"/history?before=approval-{next}\" id=\"more-link\">show them</a></p>"
    )));
    // The script's refresh reads the same page, and only it.
    let (_, fragment) = s.get("/fragment/history", Some(&ada.cookie)).await;
    assert_eq!(counting.take(), (20, 20));
    assert_eq!(shown(&fragment, "history"), newest_first[..20]);
    // Page after page down to the oldest decision, each read alone.
    let mut cursor = next;
    let mut seen = newest_first[..20].to_vec();
    loop {
        let (status, page) = s
            .get(
                &format!("/fragment/history?before=approval-{cursor}"),
                Some(&ada.cookie),
            )
            .await;
        assert_eq!(status, 200);
        let ids = shown(&page, "history");
        assert_eq!(counting.take(), (ids.len(), ids.len()));
        assert!(page.contains(
            "<p class=\"paging\"><a href=\"/history\" id=\"newest\">Newest decisions</a></p>"
        ));
        seen.extend(&ids);
        match page.find("/history?before=approval-") {
            Some(at) => {
                assert_eq!(ids.len(), 20);
                let rest = &page[at + "/history?before=approval-".len()..];
                cursor = rest[..rest.find('"').unwrap()].parse().unwrap();
                assert_eq!(cursor, *ids.last().unwrap());
            }
            None => break,
        }
    }
    assert_eq!(seen, newest_first);
    assert_eq!(
        s.get("/history?before=approval-x", Some(&ada.cookie)).await,
        (
            400,
            "bad request: before must be an approval id such as approval-12".to_owned()
        )
    );
}

/// Separation of duties: a request that says approvers must differ refuses the token approver
/// whose name is the principal that asked (403, nothing recorded), and takes another's decision;
/// without the rule the same approver decides.
#[tokio::test]
async fn approvers_must_differ_refuses_the_approver_who_asked() {
    let s = served("differ").await;
    let ada = s.login("ada").await;
    let bob = s.login("bob").await;
    let asked_by = |who: &str, differ: bool| {
        let mut r = request(&format!("\"{who}-{differ}\""));
        r.labels
            .insert(purra_core::PRINCIPAL_LABEL.into(), who.into());
        if differ {
            r.labels.insert(
                purra_core::APPROVERS_MUST_DIFFER_LABEL.into(),
                "true".into(),
            );
        }
        r
    };
    let id = ApprovalGateway::prepare(&s.store, asked_by("ada", true))
        .await
        .unwrap();
    // The list shows who asked, and the rule.
    let (_, list) = s.get("/", Some(&ada.cookie)).await;
    assert!(
        list.contains("<dt>Principal</dt><dd class=\"label-principal\">ada</dd>"),
        "{list}"
    );
    assert!(list.contains(
        "<dt>Approvers must differ</dt><dd class=\"label-approvers_must_differ\">true</dd>"
    ));
    for verdict in ["approve", "deny"] {
        let (status, body) = s.decide(&ada, &id.0, verdict, "my own").await;
        assert_eq!(
            (status, body),
            (
                403,
                json!({"ok": false, "message": format!("refused: {}: approvers must differ: ada asked for this approval and cannot decide it", id.0)})
            )
        );
    }
    assert_eq!(s.state(&id).await, ApprovalState::Prepared);
    let (status, body) = s.decide(&bob, &id.0, "approve", "").await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"ok": true, "message": format!("{} approved by bob", id.0)})
        )
    );
    // Without the rule, the principal that asked may decide.
    let own = ApprovalGateway::prepare(&s.store, asked_by("ada", false))
        .await
        .unwrap();
    let (status, _) = s.decide(&ada, &own.0, "deny", "").await;
    assert_eq!(status, 200);
    match s.state(&own).await {
        ApprovalState::Decided(d) => assert_eq!(d.approver, "ada (page)"),
        other => panic!("{other:?}"),
    }
}

/// A sign-in attempt: status, `Retry-After`, the sign-in page's error, `Set-Cookie`.
struct Attempt {
    status: u16,
    retry_after: Option<String>,
    error: String,
    cookie: Option<String>,
}

/// A client whose connections come from `ip` (a loopback address: another client address).
fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(ip.parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap()
}

async fn attempt(s: &Served, client: &reqwest::Client, token: &str) -> Attempt {
    let r = client
        .post(format!("{}/login", s.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", &s.url)
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let retry_after = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let cookie = r
        .headers()
        .get("set-cookie")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = r.text().await.unwrap();
    let error = body
        .find("<p class=\"error\" id=\"login-error\">")
        .map(|at| {
            let from = at + 34;
            body[from..from + body[from..].find("</p>").unwrap()].to_owned()
        })
        .unwrap_or_default();
    Attempt {
        status,
        retry_after,
        error,
        cookie,
    }
}

/// Finding 6 of the approver page's security review: token sign-in had no rate limit (200
/// wrong tokens in 1.2 s). Five wrong tokens from one address are answered as before; the sixth
/// starts a backoff during which that address is refused 429 with `Retry-After`, even with the
/// right token; another address signs in meanwhile; after the backoff the right token signs in
/// and the address's count starts again.
#[tokio::test]
async fn finding_6_wrong_tokens_back_off_per_client_address() {
    let s = served("throttle").await;
    let here = client_from("127.0.0.1");
    let other = client_from("127.0.0.2");
    let invalid = "That access token is not valid.";
    for _ in 0..6 {
        let a = attempt(&s, &here, "not-the-token").await;
        assert_eq!((a.status, a.error.as_str()), (401, invalid));
        assert_eq!((a.retry_after, a.cookie), (None, None));
    }
    let refused = "Too many wrong access tokens from your address: try again in 1 s.";
    for token in [s.token("ada"), "not-the-token"] {
        let a = attempt(&s, &here, token).await;
        assert_eq!((a.status, a.error.as_str()), (429, refused));
        assert_eq!(a.retry_after.as_deref(), Some("1"));
        assert_eq!(a.cookie, None);
    }
    // Another address is not held back.
    let a = attempt(&s, &other, s.token("bob")).await;
    assert_eq!(a.status, 303);
    assert!(a.cookie.unwrap().starts_with("purra_page_session="));
    // After the backoff the right token signs in, and the address starts afresh.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let a = attempt(&s, &here, s.token("ada")).await;
    assert_eq!(a.status, 303);
    assert!(a.cookie.unwrap().starts_with("purra_page_session="));
    let a = attempt(&s, &here, "not-the-token").await;
    assert_eq!((a.status, a.error.as_str()), (401, invalid));
    assert_eq!(attempt(&s, &here, s.token("ada")).await.status, 303);
}

/// Finding 7 of the approver page's security review: the session cookie was never `Secure`.
/// With `secure_cookie` (the page reached over TLS) it is `Secure` and named with the `__Host-`
/// prefix, only that name signs in (not a plain-named cookie another origin on the host could
/// set), and logout clears it under the same name and attributes. Without it, the plain cookie
/// of the loopback page stays as it was (`sign_in_sets_a_strict_httponly_cookie_…`).
#[tokio::test]
async fn finding_7_over_tls_the_session_cookie_is_secure_and_host_prefixed() {
    let s = served_with("secure", PageConfig::default().secure_cookie(true)).await;
    let a = attempt(&s, &s.http, s.token("ada")).await;
    assert_eq!(a.status, 303);
    let set = a.cookie.unwrap();
    let (pair, attrs) = set.split_once("; ").unwrap();
    let (name, value) = pair.split_once('=').unwrap();
    assert_eq!(name, "__Host-purra_page_session");
    assert_eq!(value.len(), 43);
    assert_eq!(
        attrs,
        "Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=43200"
    );
    let (status, page) = s.get("/", Some(pair)).await;
    assert_eq!(status, 200);
    assert_eq!(
        s.get("/", Some(&format!("purra_page_session={value}")))
            .await
            .0,
        303
    );
    let csrf = between(&page, "name=\"csrf\" value=\"", "\"").to_owned();
    let r = s
        .http
        .post(format!("{}/logout", s.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", &s.url)
        .header("cookie", pair)
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(
        r.headers()["set-cookie"],
        "__Host-purra_page_session=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0"
    );
    assert_eq!(s.get("/", Some(pair)).await.0, 303);
    // The setting, and an https redirect URI, each make the cookies secure.
    assert!(!PageConfig::default().secure());
    assert!(PageConfig::default().secure_cookie(true).secure());
}

/// Reads a live-update stream until it ends; everything it sent. Fails if it is still open
/// after `within`.
async fn read_to_end(resp: &mut reqwest::Response, within: Duration) -> String {
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Err(_) => panic!("the stream is still open; it sent {seen:?}"),
            Ok(Ok(Some(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(Ok(None)) | Ok(Err(_)) => return seen,
        }
    }
}

async fn stream(s: &Served, cookie: &str) -> reqwest::Response {
    let r = s
        .http
        .get(format!("{}/events", s.url))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r
}

/// Finding 8 of the approver page's security review: a live-update stream outlived logout and
/// session expiry (until its next 15 s keep-alive). A stream ends at logout, before the store's
/// next event, while another session's stream still gets that event; and a stream ends when its
/// session expires.
#[tokio::test]
async fn finding_8_a_live_update_stream_ends_at_logout_and_at_expiry() {
    let s = served("stream-end").await;
    let ada = s.login("ada").await;
    let bob = s.login("bob").await;
    let mut ada_events = stream(&s, &ada.cookie).await;
    let mut bob_events = stream(&s, &bob.cookie).await;
    let first = s.prepare("\"v1\"").await;
    read_until(&mut ada_events, &format!("prepared {}", first.0)).await;
    read_until(&mut bob_events, &format!("prepared {}", first.0)).await;
    let (status, _) = s
        .post(
            "/logout",
            Some(&ada.cookie),
            &[("csrf", &ada.csrf)],
            &[("origin", &s.url)],
        )
        .await;
    assert_eq!(status, 303);
    let second = s.prepare("\"v2\"").await;
    read_until(&mut bob_events, &format!("prepared {}", second.0)).await;
    let rest = read_to_end(&mut ada_events, Duration::from_secs(10)).await;
    assert!(!rest.contains("data: prepared"), "after logout: {rest:?}");

    // A session that expires: its stream ends with it, before the store's next event.
    let mut config = PageConfig::default();
    config.session_ttl = Duration::from_secs(3);
    let s = served_with("stream-expiry", config).await;
    let signed = tokio::time::Instant::now();
    let ada = s.login("ada").await;
    let mut events = stream(&s, &ada.cookie).await;
    let first = s.prepare("\"v1\"").await;
    read_until(&mut events, &format!("prepared {}", first.0)).await;
    tokio::time::sleep_until(signed + Duration::from_millis(3500)).await;
    s.prepare("\"v2\"").await;
    let rest = read_to_end(&mut events, Duration::from_secs(10)).await;
    assert!(!rest.contains("data: prepared"), "after expiry: {rest:?}");
    assert_eq!(s.get("/", Some(&ada.cookie)).await.0, 303);
}

/// Webhook events link to `/approvals/ID`: one approval on a page of its own, its decide form
/// while it waits and its decision, effect and trail once decided; signed in only; an id that is
/// not an approval's is 404.
#[tokio::test]
async fn one_approval_has_a_page_of_its_own() {
    let s = served("one").await;
    let id = s.prepare("\"v1\"").await;
    let path = format!("/approvals/{}", id.0);
    let r = s.http.get(format!("{}{path}", s.url)).send().await.unwrap();
    assert_eq!(r.status(), 303);
    // Signing in returns to the approval.
    assert_eq!(
        r.headers()["location"],
        "/login?next=%2Fapprovals%2Fapproval-1"
    );
    let ada = s.login("ada").await;
    let (status, page) = s.get(&path, Some(&ada.cookie)).await;
    assert_eq!(status, 200);
    assert!(
        page.contains("<title>approval-1 · purra approvals</title>"),
        "{page}"
    );
    assert!(
        page.contains(
            "<div id=\"approval\"><h2>Approval <span id=\"approval-id\">approval-1</span></h2>\
             <article class=\"approval\" id=\"pending-approval-1\" data-id=\"approval-1\" \
             data-status=\"pending\">"
        ),
        "{page}"
    );
    assert!(
        page.contains(
            "<form class=\"decide\" method=\"post\" action=\"/approvals/approval-1/decide\">"
        ),
        "{page}"
    );
    // No list to refresh: the page's script leaves it as served.
    assert!(page.contains("<body data-view=\"\">"), "{page}");
    let (status, _) = s.decide(&ada, &id.0, "deny", "not now").await;
    assert_eq!(status, 200);
    let (status, page) = s.get(&path, Some(&ada.cookie)).await;
    assert_eq!(status, 200);
    assert!(
        page.contains(
            "<article class=\"approval\" id=\"history-approval-1\" data-id=\"approval-1\" \
             data-status=\"denied\" data-effect=\"never_dispatched\">"
        ),
        "{page}"
    );
    assert!(page.contains(": <q class=\"note\">not now</q>"), "{page}");
    assert!(!page.contains("class=\"decide\""), "{page}");
    for missing in ["/approvals/approval-9", "/approvals/nonsense"] {
        assert_eq!(
            s.get(missing, Some(&ada.cookie)).await,
            (404, "no such approval".to_owned()),
            "{missing}"
        );
    }
    // Deciding is a POST of its own route: a GET of it is the router's 405, not an approval page.
    assert_eq!(
        s.get("/approvals/approval-1/decide", Some(&ada.cookie))
            .await,
        (405, "method not allowed".to_owned())
    );
    assert_eq!(
        s.get("/approvals/approval-1/x", Some(&ada.cookie)).await,
        (404, "not found".to_owned())
    );
}

/// The security headers every answer carries, whatever its status.
fn assert_secured(r: &reqwest::Response, what: &str) {
    let h = r.headers();
    assert_eq!(
        h["content-security-policy"],
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
         img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        "{what}"
    );
    assert_eq!(h["x-frame-options"], "DENY", "{what}");
    assert_eq!(h["x-content-type-options"], "nosniff", "{what}");
    assert_eq!(h["referrer-policy"], "same-origin", "{what}");
    assert_eq!(h["cache-control"], "no-store", "{what}");
}

#[tokio::test]
async fn routes_405_other_methods_and_every_answer_has_security_headers() {
    let s = served("methods").await;
    let ada = s.login("ada").await;
    let id = s.prepare("\"v1\"").await;
    let one = format!("/approvals/{}", id.0);
    let decide = format!("{one}/decide");
    let reconcile = format!("{one}/reconcile");
    let get_only = "GET,HEAD";
    // Every route, what it serves, and methods it does not (with a live session, so a 405 is the
    // router's answer and not a sign-in redirect).
    let routes: [(&str, &str, &[&str]); 13] = [
        ("/page.js", get_only, &["POST", "PUT", "DELETE"]),
        ("/page.css", get_only, &["POST", "PATCH"]),
        ("/login", "GET,HEAD,POST", &["PUT", "DELETE", "OPTIONS"]),
        ("/logout", "POST", &["GET", "PUT"]),
        ("/", get_only, &["POST", "DELETE"]),
        ("/history", get_only, &["POST", "PUT"]),
        ("/fragment/pending", get_only, &["POST"]),
        ("/fragment/history", get_only, &["POST"]),
        ("/events", get_only, &["POST", "DELETE"]),
        (&one, get_only, &["POST", "PUT"]),
        (&decide, "POST", &["GET", "PUT", "DELETE"]),
        (&reconcile, "POST", &["GET", "PATCH"]),
        ("/login", "GET,HEAD,POST", &["PATCH"]),
    ];
    for (path, allow, methods) in routes {
        for method in methods {
            let what = format!("{method} {path}");
            let r = s
                .http
                .request(method.parse().unwrap(), format!("{}{path}", s.url))
                .header("cookie", &ada.cookie)
                .header("origin", &s.url)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 405, "{what}");
            assert_eq!(r.headers()["allow"], allow, "{what}");
            assert_eq!(
                r.headers()["content-type"],
                "text/plain; charset=utf-8",
                "{what}"
            );
            assert_secured(&r, &what);
            assert_eq!(r.text().await.unwrap(), "method not allowed", "{what}");
        }
    }
    // Nothing was decided by any of them.
    assert_eq!(s.state(&id).await, ApprovalState::Prepared);
    // Unknown paths, whatever the method; the provider's paths when no provider is configured.
    for (method, path) in [
        ("GET", "/nowhere"),
        ("PUT", "/nowhere"),
        ("GET", "/history/"),
        ("GET", "/approvals/"),
        ("POST", "/approvals/x/y"),
        ("GET", "/login/oidc"),
        ("POST", "/login/oidc"),
        ("GET", "/login/callback"),
    ] {
        let what = format!("{method} {path}");
        let r = s
            .http
            .request(method.parse().unwrap(), format!("{}{path}", s.url))
            .header("cookie", &ada.cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{what}");
        assert!(r.headers().get("allow").is_none(), "{what}");
        assert_secured(&r, &what);
        assert_eq!(r.text().await.unwrap(), "not found", "{what}");
    }
    // The Host policy comes first: a foreign Host is refused whatever the path and method.
    for (method, path) in [("GET", "/"), ("POST", "/"), ("GET", "/nowhere")] {
        let what = format!("{method} {path} for another host");
        let r = s
            .http
            .request(method.parse().unwrap(), format!("{}{path}", s.url))
            .header("host", "attacker.example")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{what}");
        assert_secured(&r, &what);
        assert!(r
            .text()
            .await
            .unwrap()
            .contains("refused: Host &quot;attacker.example&quot; is not allowed"));
    }
    // A HEAD is answered as the GET is, without its body; a redirect and a 401 carry the headers.
    let r = s
        .http
        .head(format!("{}/page.css", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_secured(&r, "HEAD /page.css");
    assert_eq!(r.text().await.unwrap(), "");
    let r = s
        .http
        .get(format!("{}/history", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_secured(&r, "GET /history signed out");
    let r = s
        .http
        .get(format!("{}/events", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_secured(&r, "GET /events signed out");
}

/// Issue 47 item 6: a notice's link (`/approvals/ID?decision=deny`) never decides by itself.
/// Without a session it goes to the sign-in form, which returns to the same approval with the
/// decision preselected; the GET shows it to confirm (a POST with the session's CSRF token); a
/// `next` that is not an approval's page here is dropped.
#[tokio::test]
async fn a_link_opens_the_approval_with_its_decision_preselected_and_never_decides() {
    let s = served("link").await;
    let id = s.prepare("\"v1\"").await;
    let link = format!("/approvals/{}?decision=deny", id.0);
    let r = s.http.get(format!("{}{link}", s.url)).send().await.unwrap();
    assert_eq!(r.status(), 303);
    let login = "/login?next=%2Fapprovals%2Fapproval-1%3Fdecision%3Ddeny";
    assert_eq!(r.headers()["location"], login);
    let (status, form) = s.get(login, None).await;
    assert_eq!(status, 200);
    assert!(form.contains(
        "<form method=\"post\" action=\"/login\" class=\"login\"><input type=\"hidden\" \
         name=\"next\" value=\"/approvals/approval-1?decision=deny\">"
    ));
    let sign_in = |next: &'static str| {
        let s = &s;
        async move {
            s.http
                .post(format!("{}/login", s.url))
                .header("content-type", "application/x-www-form-urlencoded")
                .header("origin", &s.url)
                .body(
                    form_urlencoded::Serializer::new(String::new())
                        .append_pair("token", s.token("ada"))
                        .append_pair("next", next)
                        .finish(),
                )
                .send()
                .await
                .unwrap()
        }
    };
    for bad in ["https://evil.example/", "//evil.example", "/logout"] {
        let r = sign_in(bad).await;
        assert_eq!(r.status(), 303);
        assert_eq!(r.headers()["location"], "/", "{bad}");
    }
    let r = sign_in("/approvals/approval-1?decision=deny").await;
    assert_eq!(r.status(), 303);
    assert_eq!(
        r.headers()["location"],
        "/approvals/approval-1?decision=deny"
    );
    let set = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    let cookie = set.split_once("; ").unwrap().0.to_owned();
    let (status, page) = s.get(&link, Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(page.contains(
        "<section class=\"confirm\" id=\"confirm-approval-1\" data-verdict=\"deny\">\
         <p id=\"preselected\">You chose to <strong>deny</strong> this call. Nothing is decided \
         until you confirm.</p><form class=\"confirm\" method=\"post\" \
         action=\"/approvals/approval-1/decide\">"
    ));
    assert!(page.contains("id=\"confirm\" class=\"deny\">Confirm: deny</button>"));
    // Without a preselection (or with an unknown one) the page shows no confirmation.
    for plain in ["", "?decision=maybe"] {
        let (_, page) = s
            .get(&format!("/approvals/{}{plain}", id.0), Some(&cookie))
            .await;
        assert!(!page.contains("id=\"confirm\""), "{plain}");
    }
    // Opening the link decided nothing.
    assert_eq!(s.state(&id).await, ApprovalState::Prepared);
    let from = page.find("name=\"csrf\" value=\"").unwrap() + 19;
    let csrf = &page[from..from + 43];
    // The confirmation without the session's CSRF token is refused.
    let confirm = |token: String| {
        let (s, cookie) = (&s, cookie.clone());
        async move {
            s.http
                .post(format!("{}/approvals/approval-1/decide", s.url))
                .header("cookie", cookie)
                .header("origin", &s.url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("csrf={token}&verdict=deny&note="))
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(confirm("wrong".into()).await.status(), 403);
    assert_eq!(s.state(&id).await, ApprovalState::Prepared);
    let r = confirm(csrf.to_owned()).await;
    assert_eq!(r.status(), 303);
    match s.state(&id).await {
        ApprovalState::Decided(d) => {
            assert_eq!(d.verdict, purra_core::Verdict::Deny);
            assert_eq!(d.approver, "ada (page)");
        }
        other => panic!("{other:?}"),
    }
}

/// Approve with edit on the page: the same checks as approving (separation of duties) before the
/// gateway's edit is asked; a write without `allow_edit`, arguments that are not JSON and a page
/// without a gateway's edit are refused, nothing decided; a valid edit reaches the gateway once
/// with the arguments and the approver's decision.
#[tokio::test]
async fn an_edit_is_checked_like_an_approval_before_the_gateway_is_asked() {
    let (store, dir) = fresh_store("http", "edit");
    let page = Page::new(
        Arc::new(store.clone()),
        PageConfig::default().approver("ada").approver("bob"),
    );
    let asked: Arc<std::sync::Mutex<Vec<(ApprovalId, Value, Decision)>>> = Arc::default();
    let seen = Arc::clone(&asked);
    assert!(page.set_edit(Arc::new(move |id, args, decision| {
        seen.lock().unwrap().push((id, args, decision));
        Box::pin(async { Ok(ApprovalId("approval-99".into())) })
    })));
    let tokens = page.tokens().to_vec();
    let addr = serve(&page).await;
    let s = Served {
        store,
        url: format!("http://{addr}"),
        tokens,
        http: no_redirects(),
        _dir: dir,
    };
    let ada = s.login("ada").await;
    let bob = s.login("bob").await;
    let edit = |who: &Signed, id: &str, args: &str| {
        let (cookie, csrf, url, id, args) = (
            who.cookie.clone(),
            who.csrf.clone(),
            s.url.clone(),
            id.to_owned(),
            args.to_owned(),
        );
        let s = &s;
        async move {
            s.post(
                &format!("/approvals/{id}/decide"),
                Some(&cookie),
                &[
                    ("csrf", &csrf),
                    ("verdict", "edit"),
                    ("note", "fixed"),
                    ("arguments", &args),
                ],
                &[("origin", &url), ("sec-fetch-site", "same-origin")],
            )
            .await
        }
    };
    let mut r = request("\"draft\"");
    r.labels
        .insert(purra_core::PRINCIPAL_LABEL.into(), "ada".into());
    r.labels.insert(
        purra_core::APPROVERS_MUST_DIFFER_LABEL.into(),
        "true".into(),
    );
    r.labels
        .insert(purra_core::ALLOW_EDIT_LABEL.into(), "true".into());
    let id = ApprovalGateway::prepare(&s.store, r).await.unwrap();
    let refused = format!(
        "refused: {}: approvers must differ: ada asked for this approval and cannot decide it",
        id.0
    );
    assert_eq!(
        edit(&ada, &id.0, "\"final\"").await,
        (403, json!({"ok": false, "message": refused}))
    );
    let (status, body) = edit(&bob, &id.0, "{not json").await;
    assert_eq!(status, 422);
    assert!(body["message"].as_str().unwrap().starts_with(&format!(
        "refused: {}: the edited arguments are not JSON: ",
        id.0
    )));
    assert!(asked.lock().unwrap().is_empty());
    assert_eq!(s.state(&id).await, ApprovalState::Prepared);
    assert_eq!(
        edit(&bob, &id.0, "\"final\"").await,
        (
            200,
            json!({"ok": true, "message": format!("{} approved with edit as approval-99 by bob", id.0)})
        )
    );
    {
        let asked = asked.lock().unwrap();
        assert_eq!(asked.len(), 1);
        assert_eq!((&asked[0].0, &asked[0].1), (&id, &json!("final")));
        assert_eq!(asked[0].2.verdict, Verdict::Approve);
        assert_eq!(asked[0].2.approver, "bob (page)");
        assert_eq!(asked[0].2.note.as_deref(), Some("fixed"));
    }
    // A write whose binding does not allow edits.
    let plain = s.prepare("\"plain\"").await;
    assert_eq!(
        edit(&bob, &plain.0, "\"other\"").await,
        (
            403,
            json!({"ok": false, "message": format!("refused: {}: this write does not allow edits", plain.0)})
        )
    );
    assert_eq!(asked.lock().unwrap().len(), 1);

    // A page without a gateway's edit refuses it.
    let bare = served("edit-bare").await;
    let bob = bare.login("bob").await;
    let mut r = request("\"draft\"");
    r.labels
        .insert(purra_core::ALLOW_EDIT_LABEL.into(), "true".into());
    let id = ApprovalGateway::prepare(&bare.store, r).await.unwrap();
    let (status, body) = bare
        .post(
            &format!("/approvals/{}/decide", id.0),
            Some(&bob.cookie),
            &[
                ("csrf", &bob.csrf),
                ("verdict", "edit"),
                ("arguments", "\"final\""),
            ],
            &[("origin", &bare.url), ("sec-fetch-site", "same-origin")],
        )
        .await;
    assert_eq!(status, 409);
    assert_eq!(
        body["message"],
        format!(
            "refused: {}: approving with an edit needs the gateway's own page (`purra gateway \
             --page`), which checks the edited call",
            id.0
        )
    );
    assert_eq!(bare.state(&id).await, ApprovalState::Prepared);
}
