//! Which path a decision was made through, recorded in its approver: `ada (page)`.
//!
//! Every decision's [`crate::Decision::approver`] names who decided and, last, in parentheses,
//! the path the decision came by ([`DecisionPath`]): an operator's (`page`, `cli`, `api`) or the
//! downstream client's user's (`elicitation`, `app`). The path is part of the approver text
//! rather than a field of its own so that both stores, their audit rows and everything that
//! shows an approver (the page, the CLI, a denial's text) carry it without a schema change; the
//! path is always the last parenthesized word, which [`DecisionPath::of`] reads back.

use std::fmt;

/// The path a decision came by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecisionPath {
    /// The approver page (`purra approvals serve`, `purra gateway --page`): a signed-in approver.
    Page,
    /// `purra approvals approve` or `deny`: whoever runs the command on the store.
    Cli,
    /// An embedding host's call of the gateway's `decide`.
    Api,
    /// The downstream client's answer to the gateway's elicitation form.
    Elicitation,
    /// The gateway's approval view (MCP Apps), through its app-only tool.
    App,
    /// A standing grant an approver made (`grant-3 by ada (grant)`): an operator's decision.
    Grant,
}

impl DecisionPath {
    /// Every path.
    pub const ALL: [DecisionPath; 6] = [
        DecisionPath::Page,
        DecisionPath::Cli,
        DecisionPath::Api,
        DecisionPath::Elicitation,
        DecisionPath::App,
        DecisionPath::Grant,
    ];

    /// `page`, `cli`, `api`, `elicitation`, `app` or `grant`.
    pub const fn as_str(self) -> &'static str {
        match self {
            DecisionPath::Page => "page",
            DecisionPath::Cli => "cli",
            DecisionPath::Api => "api",
            DecisionPath::Elicitation => "elicitation",
            DecisionPath::App => "app",
            DecisionPath::Grant => "grant",
        }
    }

    /// Whether the path is an operator's (page, CLI, API) rather than the downstream client's.
    pub const fn is_operator(self) -> bool {
        matches!(
            self,
            DecisionPath::Page | DecisionPath::Cli | DecisionPath::Api | DecisionPath::Grant
        )
    }

    /// The approver to record: `NAME (PATH)`.
    pub fn approver(self, name: &str) -> String {
        format!("{name} ({})", self.as_str())
    }

    /// The name and the path of a recorded approver (`ada (page)` is `("ada", Page)`); `None`
    /// when it names no path (decisions recorded before paths were).
    pub fn of(approver: &str) -> Option<(&str, DecisionPath)> {
        let rest = approver.strip_suffix(')')?;
        let open = rest.rfind(" (")?;
        let word = &rest[open + 2..];
        let path = DecisionPath::ALL.into_iter().find(|p| p.as_str() == word)?;
        Some((&approver[..open], path))
    }
}

impl fmt::Display for DecisionPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvers_name_their_path_last() {
        assert_eq!(DecisionPath::Page.approver("ada"), "ada (page)");
        assert_eq!(DecisionPath::Cli.approver("ada"), "ada (cli)");
        assert_eq!(DecisionPath::Api.approver("host"), "host (api)");
        assert_eq!(
            DecisionPath::Elicitation.approver("claude-code"),
            "claude-code (elicitation)"
        );
        assert_eq!(
            DecisionPath::App.approver("claude-code"),
            "claude-code (app)"
        );
        for p in DecisionPath::ALL {
            let recorded = p.approver("x (page)");
            assert_eq!(DecisionPath::of(&recorded), Some(("x (page)", p)));
        }
        assert_eq!(
            DecisionPath::of("Ada <ada@example.com>, sub 42 at https://id.example (page)"),
            Some((
                "Ada <ada@example.com>, sub 42 at https://id.example",
                DecisionPath::Page
            ))
        );
        assert_eq!(DecisionPath::of("ada"), None);
        assert_eq!(DecisionPath::of("ada (friend)"), None);
        assert_eq!(DecisionPath::of("(page)"), None);
        assert!(DecisionPath::Page.is_operator() && DecisionPath::Cli.is_operator());
        assert!(DecisionPath::Api.is_operator());
        assert!(!DecisionPath::Elicitation.is_operator() && !DecisionPath::App.is_operator());
    }
}
