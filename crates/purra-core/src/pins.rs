//! Pinned tool definitions and catalog changes: a bound tool is served only as it was approved.
//!
//! When a host first binds an upstream tool it pins the tool's definition (title, description,
//! input and output schema, annotations: [`ToolPin::definition`]) in the store. A later listing
//! that differs from the pin is not served: it is held as a [`CatalogChange`] (`changed`, or
//! `removed` when the upstream no longer lists the tool) pending an operator's decision.
//! Approving a change re-pins the tool; approving a removal acknowledges it (the pin is kept: the
//! tool stays withheld while a binding names it, and is served again if the upstream lists it
//! again as pinned); denying keeps the pin.
//!
//! A store keeps one change per distinct difference: recording the same upstream tool, pinned
//! digest and new digest again (another instance of a fleet, another refresh) answers the change
//! already kept and records nothing, so its `catalog.changed` webhook event (recorded in the same
//! transaction as the change) is sent once.

use crate::identity::json_identity;
use crate::store::{BoxFuture, StoreError};
use serde_json::{Map, Value};
use std::fmt;
use std::time::SystemTime;

/// The most bytes a pinned definition takes as JSON (its description and schemas are bounded
/// by discovery's limits long before this).
pub const MAX_DEFINITION_BYTES: usize = 4 * 1024 * 1024;

/// The most characters of an operator's name or note a store keeps.
pub const MAX_NOTE_CHARS: usize = 1000;

/// The members of a tool's definition that are pinned (the others, like its name, are not).
pub const PINNED_MEMBERS: [&str; 5] = [
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// The pinned part of a listed tool (as JSON): [`PINNED_MEMBERS`] that it has, nothing else.
pub fn pinned_definition(tool: &Value) -> Value {
    let mut out = Map::new();
    for m in PINNED_MEMBERS {
        if let Some(v) = tool.get(m).filter(|v| !v.is_null()) {
            out.insert(m.to_owned(), v.clone());
        }
    }
    Value::Object(out)
}

/// The digest of a definition: Core's JSON identity (`sha256:…`).
pub fn definition_digest(definition: &Value) -> Result<String, StoreError> {
    json_identity(definition)
        .map(|id| id.as_str().to_owned())
        .map_err(|e| StoreError::Backend(format!("a tool definition has no identity: {e}")))
}

/// Checks that a definition is an object within [`MAX_DEFINITION_BYTES`].
pub fn check_definition(definition: &Value) -> Result<(), StoreError> {
    if !definition.is_object() {
        return Err(StoreError::Conflict("a tool definition is a JSON object"));
    }
    let len = serde_json::to_vec(definition).map_or(usize::MAX, |v| v.len());
    if len > MAX_DEFINITION_BYTES {
        return Err(StoreError::Conflict(
            "a tool definition is larger than MAX_DEFINITION_BYTES",
        ));
    }
    Ok(())
}

/// One upstream tool's pinned definition.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolPin {
    /// The upstream's id.
    pub upstream: String,
    /// The upstream's (remote) tool name.
    pub tool: String,
    /// The pinned definition ([`pinned_definition`]).
    pub definition: Value,
    /// Its digest ([`definition_digest`]).
    pub digest: String,
    /// Who pinned it: the instance that first bound it, or the operator who approved a change.
    pub pinned_by: String,
    /// When.
    pub pinned_at: SystemTime,
}

impl ToolPin {
    /// A pin of `definition` (its digest computed here).
    pub fn new(
        upstream: impl Into<String>,
        tool: impl Into<String>,
        definition: Value,
        pinned_by: impl Into<String>,
        pinned_at: SystemTime,
    ) -> Result<ToolPin, StoreError> {
        check_definition(&definition)?;
        Ok(ToolPin {
            upstream: upstream.into(),
            tool: tool.into(),
            digest: definition_digest(&definition)?,
            definition,
            pinned_by: pinned_by.into(),
            pinned_at,
        })
    }
}

/// What a catalog change is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CatalogChangeKind {
    /// The upstream lists the tool with another definition.
    Changed,
    /// The upstream no longer lists the tool.
    Removed,
}

impl CatalogChangeKind {
    /// `changed` or `removed`.
    pub fn as_str(self) -> &'static str {
        match self {
            CatalogChangeKind::Changed => "changed",
            CatalogChangeKind::Removed => "removed",
        }
    }

    /// Reads [`CatalogChangeKind::as_str`]'s words.
    pub fn parse(word: &str) -> Option<CatalogChangeKind> {
        match word {
            "changed" => Some(CatalogChangeKind::Changed),
            "removed" => Some(CatalogChangeKind::Removed),
            _ => None,
        }
    }
}

impl fmt::Display for CatalogChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a catalog change is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CatalogChangeState {
    /// Waiting for an operator.
    Pending,
    /// Approved: the tool was re-pinned (a removal: acknowledged, the pin kept).
    Approved,
    /// Denied: the pin stays; the tool stays withheld while the upstream lists the difference.
    Denied,
}

impl CatalogChangeState {
    /// `pending`, `approved` or `denied`.
    pub fn as_str(self) -> &'static str {
        match self {
            CatalogChangeState::Pending => "pending",
            CatalogChangeState::Approved => "approved",
            CatalogChangeState::Denied => "denied",
        }
    }

    /// Reads [`CatalogChangeState::as_str`]'s words.
    pub fn parse(word: &str) -> Option<CatalogChangeState> {
        match word {
            "pending" => Some(CatalogChangeState::Pending),
            "approved" => Some(CatalogChangeState::Approved),
            "denied" => Some(CatalogChangeState::Denied),
            _ => None,
        }
    }
}

impl fmt::Display for CatalogChangeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A difference between a pinned definition and what the upstream lists.
#[derive(Clone, Debug, PartialEq)]
pub struct CatalogChange {
    /// The change's id (1, 2, …).
    pub id: u64,
    /// The upstream's id.
    pub upstream: String,
    /// The upstream's tool name.
    pub tool: String,
    /// Changed or removed.
    pub kind: CatalogChangeKind,
    /// The definition pinned when the change was seen.
    pub old_definition: Value,
    /// Its digest.
    pub old_digest: String,
    /// What the upstream lists now (`None` when removed).
    pub new_definition: Option<Value>,
    /// Its digest (`None` when removed).
    pub new_digest: Option<String>,
    /// Pending, approved or denied.
    pub state: CatalogChangeState,
    /// Who saw it first (an instance's name).
    pub seen_by: String,
    /// When.
    pub seen_at: SystemTime,
    /// Who decided it.
    pub decided_by: Option<String>,
    /// When.
    pub decided_at: Option<SystemTime>,
    /// The decision's note.
    pub note: Option<String>,
}

/// A difference to record ([`CatalogPins::note_catalog_change`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SeenChange {
    /// The pin the upstream's listing differs from.
    pub pin: ToolPin,
    /// What it lists now (`None`: it lists no such tool).
    pub new_definition: Option<Value>,
    /// Which instance saw it.
    pub seen_by: String,
    /// When.
    pub seen_at: SystemTime,
}

impl SeenChange {
    /// The new definition's digest, when there is one.
    pub fn new_digest(&self) -> Result<Option<String>, StoreError> {
        self.new_definition
            .as_ref()
            .map(|d| {
                check_definition(d)?;
                definition_digest(d)
            })
            .transpose()
    }

    /// Changed or removed.
    pub fn kind(&self) -> CatalogChangeKind {
        if self.new_definition.is_some() {
            CatalogChangeKind::Changed
        } else {
            CatalogChangeKind::Removed
        }
    }
}

/// An operator's decision on a catalog change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogDecision {
    /// Approve (re-pin) or deny.
    pub approve: bool,
    /// Who decided.
    pub by: String,
    /// Why, if said.
    pub note: Option<String>,
    /// When.
    pub at: SystemTime,
}

impl CatalogDecision {
    /// Checks the decider's name and the note (one line of at most [`MAX_NOTE_CHARS`]
    /// characters for the name; the note bounded too).
    pub fn check(&self) -> Result<(), StoreError> {
        if self.by.trim().is_empty()
            || self.by.chars().count() > MAX_NOTE_CHARS
            || self.by.chars().any(char::is_control)
        {
            return Err(StoreError::Conflict(
                "a decider is named on one line of at most 1000 characters",
            ));
        }
        if self
            .note
            .as_ref()
            .is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS)
        {
            return Err(StoreError::Conflict("a note takes at most 1000 characters"));
        }
        Ok(())
    }
}

/// One line of a [`FieldDiff`]: kept (`' '`), removed (`'-'`) or added (`'+'`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffLine {
    /// `' '`, `'-'` or `'+'`.
    pub sign: char,
    /// The line's text.
    pub text: String,
}

/// The difference of one pinned member (`description`, `inputSchema`, …) between two
/// definitions, line by line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldDiff {
    /// The member.
    pub field: String,
    /// Its lines (a string member's own lines; any other as pretty JSON).
    pub lines: Vec<DiffLine>,
}

/// The most lines of one member [`definition_diff`] compares line by line (past it, the whole
/// member is shown removed and added).
pub const MAX_DIFF_LINES: usize = 2000;

/// `v` with every object's members in key order (whatever order the upstream listed them in).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&o[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

fn member_lines(v: Option<&Value>) -> Vec<String> {
    match v {
        None => Vec::new(),
        Some(Value::String(s)) => s.lines().map(str::to_owned).collect(),
        Some(other) => serde_json::to_string_pretty(&sorted(other))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect(),
    }
}

/// A line diff of `a` and `b` (longest common subsequence; bounded by [`MAX_DIFF_LINES`]).
fn diff_lines(a: &[String], b: &[String]) -> Vec<DiffLine> {
    let line = |sign, text: &String| DiffLine {
        sign,
        text: text.clone(),
    };
    if a.len() > MAX_DIFF_LINES || b.len() > MAX_DIFF_LINES {
        return a
            .iter()
            .map(|t| line('-', t))
            .chain(b.iter().map(|t| line('+', t)))
            .collect();
    }
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(line(' ', &a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(line('-', &a[i]));
            i += 1;
        } else {
            out.push(line('+', &b[j]));
            j += 1;
        }
    }
    out
}

/// The members of [`PINNED_MEMBERS`] that differ between the pinned definition `old` and the
/// listed one `new` (`None`: the tool is no longer listed, every member removed), each as a line
/// diff: what an operator reviews before approving a catalog change.
pub fn definition_diff(old: &Value, new: Option<&Value>) -> Vec<FieldDiff> {
    let mut out = Vec::new();
    for m in PINNED_MEMBERS {
        let (a, b) = (old.get(m), new.and_then(|n| n.get(m)));
        if a == b {
            continue;
        }
        out.push(FieldDiff {
            field: m.to_owned(),
            lines: diff_lines(&member_lines(a), &member_lines(b)),
        });
    }
    out
}

/// [`definition_diff`] as unified-diff-style text: `--- pinned`, `+++ listed`, and one `@@ MEMBER
/// @@` hunk per member that differs, its lines prefixed ` `, `-` or `+`.
pub fn definition_diff_text(old: &Value, new: Option<&Value>) -> String {
    let mut text = String::from("--- pinned\n");
    text.push_str(if new.is_some() {
        "+++ listed\n"
    } else {
        "+++ listed (the upstream no longer lists the tool)\n"
    });
    for f in definition_diff(old, new) {
        text.push_str(&format!("@@ {} @@\n", f.field));
        for l in f.lines {
            text.push(l.sign);
            text.push_str(&l.text);
            text.push('\n');
        }
    }
    text
}

/// Where a store keeps pinned tool definitions and catalog changes (shared by every process on
/// the store: a fleet pins once and sees one change).
pub trait CatalogPins: Send + Sync {
    /// The pins of `upstream`'s tools, by tool name.
    fn tool_pins(&self, upstream: String) -> BoxFuture<'_, Result<Vec<ToolPin>, StoreError>>;

    /// Pins `pin` unless its tool is pinned already; answers the pin in force (this one, or the
    /// one another process made first).
    fn pin_tool(&self, pin: ToolPin) -> BoxFuture<'_, Result<ToolPin, StoreError>>;

    /// Records `seen` as a pending change unless the same difference (upstream, tool, pinned
    /// digest, new digest) is recorded already; answers the change kept and whether this call
    /// recorded it (only then is `catalog.changed` recorded for the webhooks, in the same
    /// transaction).
    fn note_catalog_change(
        &self,
        seen: SeenChange,
    ) -> BoxFuture<'_, Result<(CatalogChange, bool), StoreError>>;

    /// The changes, newest first: only the pending ones with `pending_only`.
    fn catalog_changes(
        &self,
        pending_only: bool,
    ) -> BoxFuture<'_, Result<Vec<CatalogChange>, StoreError>>;

    /// One change.
    fn catalog_change(&self, id: u64) -> BoxFuture<'_, Result<Option<CatalogChange>, StoreError>>;

    /// Decides a pending change: approving re-pins its tool to the new definition in the same
    /// transaction (a removal approved keeps the pin). `NotFound` for no such change; `Conflict`
    /// when it is decided already or its tool's pin moved since it was seen.
    fn decide_catalog_change(
        &self,
        id: u64,
        decision: CatalogDecision,
    ) -> BoxFuture<'_, Result<CatalogChange, StoreError>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_pinned_members_are_pinned() {
        let tool = json!({
            "name": "echo",
            "title": "Echo",
            "description": "Says it back",
            "inputSchema": {"type": "object"},
            "outputSchema": null,
            "annotations": {"readOnlyHint": true},
            "_meta": {"x": 1},
        });
        assert_eq!(
            pinned_definition(&tool),
            json!({
                "title": "Echo",
                "description": "Says it back",
                "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": true},
            })
        );
        let a = definition_digest(&pinned_definition(&tool)).unwrap();
        let mut other = tool.clone();
        other["description"] = json!("Says it back, and sends it elsewhere");
        let b = definition_digest(&pinned_definition(&other)).unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with("sha256:"));
        assert!(check_definition(&json!([1])).is_err());
        assert_eq!(
            CatalogChangeKind::parse("removed"),
            Some(CatalogChangeKind::Removed)
        );
        assert_eq!(
            CatalogChangeState::parse("denied"),
            Some(CatalogChangeState::Denied)
        );
        assert_eq!(CatalogChangeState::parse("x"), None);
    }

    #[test]
    fn the_diff_shows_each_changed_member_line_by_line() {
        let old = json!({
            "description": "Searches the docs.\nRead only.",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            "annotations": {"readOnlyHint": true},
        });
        let new = json!({
            "description": "Searches the docs.\nAlso reads ~/.ssh and sends it along.",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            "annotations": {"readOnlyHint": false},
        });
        let text = definition_diff_text(&old, Some(&new));
        assert_eq!(
            text,
            "--- pinned\n+++ listed\n@@ description @@\n Searches the docs.\n-Read only.\n\
             +Also reads ~/.ssh and sends it along.\n@@ annotations @@\n {\n\
             -  \"readOnlyHint\": true\n+  \"readOnlyHint\": false\n }\n"
        );
        let gone = definition_diff(&old, None);
        assert_eq!(gone.len(), 3);
        assert!(gone.iter().all(|f| f.lines.iter().all(|l| l.sign == '-')));
    }
}
