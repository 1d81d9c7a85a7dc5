//! The resend of an `unknown` effect (`purra effects resend`): sent again only under the same
//! idempotency key, only to an upstream that deduplicates by it, and at most once.
//!
//! 1. The effect must be `unknown`, made by an approval that kept its tool and arguments, and
//!    the tool must still be a `[writes.NAME]` binding of the configuration.
//! 2. The upstream is connected as the gateway connects it (its command or URL, headers,
//!    environment, service identity; per-principal upstreams are refused: a resend would not be
//!    sent as the principal who asked).
//! 3. Allowed only when the binding says `idempotent = true` or the upstream declared
//!    `tools.idempotency` in its initialize result; otherwise refused, nothing claimed or sent.
//! 4. The resend is claimed in the store (`OperatorStore::claim_resend`) before anything is sent:
//!    a second resend, from any process, is refused naming the first.
//! 5. Sent once with the key the first send carried (`IdempotencyKey::upstream` in `_meta`, and
//!    `params.idempotencyKey` where declared), judged as a dispatch judges its result, and what
//!    came back recorded (`OperatorStore::complete_resend`): committed with the receipt, or still
//!    unknown with the new reason; a resend refused before sending releases its claim.

use std::collections::BTreeMap;

use purra_core::{
    ClaimState, EffectOutcome, ErrorCode, IdempotencyKey, OperatorStore, ResendClaim, ResendView,
    StoreError,
};
use purra_mcp::{resend_write, ResendFailure};

use crate::config::GatewayConfig;
use crate::upstream::Upstream;

/// Why a resend was not made (nothing was sent), or what stopped it.
#[derive(Debug)]
#[non_exhaustive]
pub enum ResendError {
    /// Refused before anything was claimed or sent; the text says why.
    Refused(String),
    /// An earlier resend was claimed (by whom, when, what came of it); nothing was sent.
    AlreadyResent(ResendView),
    /// The store failed or refused (`NotFound`: the key was never claimed).
    Store(StoreError),
}

impl std::fmt::Display for ResendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResendError::Refused(why) => write!(f, "refused, nothing sent: {why}"),
            ResendError::AlreadyResent(v) => write!(
                f,
                "refused, nothing sent: already resent by {} at {} ({})",
                v.by,
                purra_core::webhook::rfc3339(v.at),
                match &v.outcome {
                    None => "no outcome recorded yet",
                    Some(o) => purra_core::stored::outcome_kind(o),
                }
            ),
            ResendError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ResendError {}

/// What a resend came to: the outcome recorded, and whether the upstream was sent the key in
/// the SEP-3182 form too.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Resent {
    /// `committed` (with the receipt), `unknown` (with the new reason), or `not_started` (refused
    /// before sending: the claim was released).
    pub outcome: EffectOutcome,
    /// Whether the upstream declared `tools.idempotency` (then `params.idempotencyKey` was sent).
    pub declared: bool,
    /// Why nothing was sent, for a `not_started` outcome.
    pub not_sent: Option<ErrorCode>,
}

fn refused(why: impl Into<String>) -> ResendError {
    ResendError::Refused(why.into())
}

/// Resends the `unknown` effect `key` of `store` for the operator `by`, through the upstream
/// `config` binds its tool to (see the module documentation).
pub async fn resend(
    config: &GatewayConfig,
    store: &dyn OperatorStore,
    key: IdempotencyKey,
    by: &str,
) -> Result<Resent, ResendError> {
    let effect = store
        .effect(key.clone())
        .await
        .map_err(ResendError::Store)?
        .ok_or(ResendError::Store(StoreError::NotFound))?;
    if let Some(first) = effect.resend {
        return Err(ResendError::AlreadyResent(first));
    }
    if !matches!(
        &effect.state,
        ClaimState::Completed {
            outcome: EffectOutcome::Unknown { .. }
        }
    ) {
        return Err(refused(format!(
            "the effect is {}; only an unknown effect is resent",
            effect.effect_word()
        )));
    }
    let (Some(tool), Some(arguments)) = (effect.tool.clone(), effect.arguments.clone()) else {
        return Err(refused(
            "no approval kept the tool and arguments of this effect",
        ));
    };
    let Some(write) = config.writes.get(&tool) else {
        return Err(refused(format!(
            "the configuration has no [writes.{tool}] binding"
        )));
    };
    let remote = write.tool.clone().unwrap_or_else(|| tool.clone());
    let Some(upstream_config) = config.upstreams.get(&write.upstream) else {
        return Err(refused(format!(
            "the configuration has no [upstreams.{}]",
            write.upstream
        )));
    };
    if upstream_config.per_principal {
        return Err(refused(format!(
            "upstream {} is called as each principal; a resend would not be sent as the one who \
             asked",
            write.upstream
        )));
    }
    let identity =
        crate::upstream::identity::identity(&write.upstream, upstream_config, &Default::default())
            .map_err(|(k, why)| refused(format!("upstreams.{}.{k}: {why}", write.upstream)))?;
    if identity.per_principal.is_some() {
        return Err(refused(format!(
            "upstream {} is called with each caller's own credential; a resend would not be \
             sent as the one who asked",
            write.upstream
        )));
    }
    let limits = config.limits.limits();
    let upstream = Upstream::new(
        write.upstream.clone(),
        upstream_config.clone(),
        limits,
        BTreeMap::new(),
        BTreeMap::new(),
    )
    .with_identity(identity);
    let (conn, monitor) = upstream
        .connect_alone()
        .await
        .map_err(|e| refused(format!("upstream {}: {e}", write.upstream)))?;
    let declared = conn.supports_idempotency();
    let result = async {
        if !write.idempotent && !declared {
            return Err(refused(format!(
                "[writes.{tool}] does not say idempotent = true and upstream {} does not declare \
                 tools.idempotency: the upstream may not recognize the key, so a resend could \
                 have its effect twice; reconcile it instead (purra effects reconcile)",
                write.upstream
            )));
        }
        match store
            .claim_resend(key.clone(), by.to_owned())
            .await
            .map_err(ResendError::Store)?
        {
            ResendClaim::Claimed => {}
            ResendClaim::AlreadyResent(first) => return Err(ResendError::AlreadyResent(first)),
        }
        let sent = resend_write(&conn, &monitor, limits, &remote, arguments, &key.upstream()).await;
        let (outcome, not_sent) = match sent {
            Ok(receipt) => (EffectOutcome::Committed { receipt }, None),
            Err(ResendFailure::NotSent(code)) => (EffectOutcome::NotStarted, Some(code)),
            Err(ResendFailure::AfterSend(reason)) => (EffectOutcome::Unknown { reason }, None),
        };
        store
            .complete_resend(key.clone(), outcome.clone())
            .await
            .map_err(ResendError::Store)?;
        Ok(Resent {
            outcome,
            declared,
            not_sent,
        })
    }
    .await;
    monitor.close();
    conn.close().await;
    result
}
