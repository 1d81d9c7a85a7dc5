//! Reloading the configuration while serving (`SIGHUP` in `purra gateway`, [`Gateway::reload`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::config::ConfigSource;
use crate::config::{ConfigErrors, GatewayConfig};
use crate::runtime::gateway::{Gateway, StartError};

/// What a reload changed ([`Gateway::reload`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Reloaded {
    /// The configuration's revision now (1 was the one the gateway started with).
    pub revision: u64,
    /// The local names bound before and now whose registration changed: their own table, their
    /// upstream's table or the limits changed, and for a write also any write binding of its
    /// upstream or the policies (each changes the binding identity its approvals are bound to:
    /// its revisions, the upstream's write catalog, a digest of its scope table, the policies'
    /// digest; so approvals prepared before are refused as mismatches, see [`Gateway::reload`]
    /// documentation). Downstream clients are told to list again.
    pub changed: Vec<String>,
    /// The local names bound now that were not before.
    pub added: Vec<String>,
    /// The local names no longer bound.
    pub removed: Vec<String>,
    /// The names downstream clients see now, sorted.
    pub tools: Vec<String>,
    /// Warnings about the new configuration (as at start).
    pub warnings: Vec<String>,
}

/// The keys of two values of one serializable table that differ, each as `PREFIX.KEY`.
fn differing_keys<T: Serialize>(prefix: &str, a: &T, b: &T) -> Vec<String> {
    let (Ok(a), Ok(b)) = (serde_json::to_value(a), serde_json::to_value(b)) else {
        return vec![prefix.to_owned()];
    };
    match (a, b) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter()
                .filter(|k| a.get(*k) != b.get(*k))
                .map(|k| format!("{prefix}.{k}"))
                .collect()
        }
        (a, b) if a != b => vec![prefix.to_owned()],
        _ => Vec::new(),
    }
}

/// The tables of a map (`[webhooks.NAME]`, `[skills.NAME]`) added, removed or changed.
fn differing_tables<T: PartialEq>(
    prefix: &str,
    a: &BTreeMap<String, T>,
    b: &BTreeMap<String, T>,
) -> Vec<String> {
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    names
        .into_iter()
        .filter(|n| a.get(*n) != b.get(*n))
        .map(|n| format!("{prefix}.{n}"))
        .collect()
}

/// The local names bound in both `a` and `b` whose registration differs (see
/// [`Reloaded::changed`]); `digests` are the policies' of `a` and `b`.
fn changed_bindings(a: &GatewayConfig, b: &GatewayConfig, digests: (&str, &str)) -> Vec<String> {
    let writes_of = |c: &GatewayConfig, up: &str| {
        c.writes
            .iter()
            .filter(|(_, w)| w.upstream == up)
            .map(|(k, w)| (k.clone(), w.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    let mut out = Vec::new();
    for (name, r) in &b.reads {
        let changed = match (a.reads.get(name), a.writes.contains_key(name)) {
            (Some(old), _) => {
                old != r
                    || a.limits != b.limits
                    || a.upstreams.get(&r.upstream) != b.upstreams.get(&r.upstream)
            }
            (None, true) => true,
            (None, false) => false,
        };
        if changed {
            out.push(name.clone());
        }
    }
    for (name, w) in &b.writes {
        let changed = match (a.writes.contains_key(name), a.reads.contains_key(name)) {
            (true, _) => {
                a.limits != b.limits
                    || digests.0 != digests.1
                    || a.upstreams.get(&w.upstream) != b.upstreams.get(&w.upstream)
                    || writes_of(a, &w.upstream) != writes_of(b, &w.upstream)
            }
            (false, true) => true,
            (false, false) => false,
        };
        if changed {
            out.push(name.clone());
        }
    }
    out.sort();
    out
}

/// The keys a reload from `running` to `next` would change that only a restart applies.
pub(crate) fn restart_only(running: &GatewayConfig, next: &GatewayConfig) -> Vec<String> {
    let mut keys = differing_keys("gateway", &running.gateway, &next.gateway);
    if running.page != next.page {
        keys.extend(differing_keys("page", &running.page, &next.page));
    }
    keys.extend(differing_tables(
        "webhooks",
        &running.webhooks,
        &next.webhooks,
    ));
    keys.extend(differing_tables("skills", &running.skills, &next.skills));
    keys
}

impl Gateway {
    /// Reloads the configuration: checks `config` (placed with `source`), connects and discovers
    /// what changed beside what is served, and replaces it at once. A configuration with
    /// mistakes, one changing what only a restart applies, or a reload while draining, is refused
    /// with every mistake, and the running configuration keeps serving unchanged. One reload runs
    /// at a time.
    ///
    /// The next configuration is checked and built beside the running one: every upstream it
    /// names connected (or kept) and discovered, every policy validated. When it replaces the
    /// running one:
    ///
    /// - sessions stay (the MCP server is the same); downstream clients get `list_changed` for every
    ///   tool whose binding changed, appeared or went (a binding whose upstream's bindings, limits or
    ///   the policies changed is a new binding, even where it looks the same downstream);
    /// - a call in flight finishes with the binding it started with; a write waiting for its
    ///   decision is claimed against the binding as it is when the decision comes. An approval
    ///   prepared before is refused as a mismatch (recorded in the store, shown as refused on the
    ///   approver page), never sent, when either of these holds at the claim: (1) the approval's
    ///   binding identity differs from the binding's now, which happens when its `binding_id`,
    ///   `binding_revision`, `scope_id` or `scope_revision` changed, any write binding of its
    ///   upstream changed (the upstream's write catalog is part of the effective binding revision),
    ///   its scope table changed (the caller rules `principals` and `clients`, or the argument
    ///   rules: a digest of the table is part of the effective scope revision, so this holds even
    ///   when `scope_revision` was left as it was) or the `[policies]` files changed; or (2) the
    ///   caller who asked (the principal and client the request names) is no longer admitted by
    ///   the binding's caller rules. The
    ///   same holds for an approval decided after a restart with a changed file;
    /// - an upstream whose own table changed, or that is gone, is closed once no call uses it; one
    ///   whose bindings changed keeps its connection.
    ///
    /// What is read once at start cannot change by a reload, and a reload that changes it is
    /// refused, naming the key: `[gateway]` (the store, the address, the name in every run id, the
    /// guard, every setting), `[page]`, `[webhooks.NAME]` and `[skills.NAME]`. Those need a restart
    /// (`SIGTERM` drains first; in a fleet, one instance at a time).
    pub async fn reload(
        &self,
        config: GatewayConfig,
        source: &ConfigSource,
    ) -> Result<Reloaded, StartError> {
        let inner = &self.inner;
        let _one = inner.reloading.lock().await;
        let refused = |errors: Vec<(String, String)>| {
            StartError::Config(ConfigErrors(
                errors
                    .into_iter()
                    .map(|(k, m)| source.error(&k, m))
                    .collect(),
            ))
        };
        if inner.drain.is_draining() {
            return Err(refused(vec![(
                String::new(),
                "the gateway is draining: nothing is reloaded".into(),
            )]));
        }
        let mut problems = config.check();
        problems.extend(config.check_serves());
        let running = inner.catalog();
        for key in restart_only(&running.config, &config) {
            problems.push((
                key,
                "cannot change while the gateway runs: it is read once at start; restart the \
                 gateway to apply it (SIGTERM drains it first)"
                    .into(),
            ));
        }
        if !problems.is_empty() {
            return Err(refused(problems));
        }
        let deps = crate::runtime::gateway::identity_deps(&config, source, inner.store.as_ref())?;
        let built = crate::catalog::build(&config, source, inner.excerpts, Some(&running), &deps)
            .await
            .map_err(StartError::Config)?;
        let next = Arc::new(built.catalog);
        let mut report = Reloaded {
            revision: next.revision,
            warnings: crate::catalog::destructive_warnings(&next.bindings, source)
                .into_iter()
                .chain(crate::runtime::gateway::client_name_warnings(
                    &config, source,
                ))
                .collect(),
            ..Reloaded::default()
        };
        report.added = next
            .bindings
            .keys()
            .filter(|n| !running.bindings.contains_key(*n))
            .cloned()
            .collect();
        report.changed = changed_bindings(
            &running.config,
            &next.config,
            (&running.policy_digest, &next.policy_digest),
        );
        report.removed = running
            .bindings
            .keys()
            .filter(|n| !next.bindings.contains_key(*n))
            .cloned()
            .collect();
        if inner.settings.apps {
            for name in &report.added {
                if next.bindings.get(name).is_some_and(|b| b.effect.is_some()) {
                    // A write bound now gets its approval view (a valid `ui://` URI: cannot fail).
                    let _ = inner
                        .server
                        .add_app(crate::runtime::app::app_resource(name));
                }
            }
        }
        inner.set_catalog(next.clone());
        let force: BTreeSet<String> = report.changed.iter().cloned().collect();
        inner.publish_forcing(&force);
        for (upstream, _) in &built.new {
            inner.watch(upstream.clone());
            if upstream.live().is_some() {
                inner.note_up(&upstream.id);
            }
        }
        // An upstream the file no longer names is no longer reported up or down.
        for id in running.upstreams.keys() {
            if !next.upstreams.contains_key(id) {
                inner.metrics.forget(
                    crate::runtime::metrics::UPSTREAM_UP,
                    vec![("upstream", id.clone())],
                );
            }
        }
        for old in running.upstreams.values() {
            if next.holds(old) {
                continue;
            }
            let shared = built.shared.iter().any(|s| Arc::ptr_eq(s, old));
            old.retire(!shared, inner.stop.clone());
        }
        report.tools = self.tool_names();
        Ok(report)
    }

    /// The configuration's revision: 1 at start, one more for each reload.
    pub fn revision(&self) -> u64 {
        self.inner.catalog().revision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Dur, WebhookConfig};

    #[test]
    fn restart_only_keys_are_named() {
        let a = GatewayConfig::default();
        let mut b = a.clone();
        assert_eq!(restart_only(&a, &b), Vec::<String>::new());
        b.gateway.approval_wait = Dur(std::time::Duration::from_secs(1));
        b.gateway.name = "other".into();
        b.page.secure_cookie = true;
        b.webhooks
            .insert("hook".into(), WebhookConfig::new("https://example.test/"));
        assert_eq!(
            restart_only(&a, &b),
            [
                "gateway.approval_wait",
                "gateway.name",
                "page.secure_cookie",
                "webhooks.hook"
            ]
        );
    }
}
