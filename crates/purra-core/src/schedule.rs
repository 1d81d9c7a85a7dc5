//! Scheduling of admitted calls: concurrency-safe calls overlap (bounded), the others run alone in order.
//!
//! The admitted calls of one turn are split into segments in call order: a maximal run of consecutive
//! calls declared [`Concurrency::Safe`] forms one parallel segment, executed with at most
//! [`ScheduleLimits::max_concurrency`] calls in flight; every other call is a segment of its own.
//! Segments run one after the other, so an exclusive call never overlaps anything. Results come back in
//! call order.
//!
//! Each call's future is polled in the caller's task, not spawned onto a task of its own (a panic
//! while polling it becomes [`ErrorCode::TOOL_PANICKED`]), and raced against the lease: cancellation
//! gives [`ErrorCode::RUN_CANCELLED`], the deadline [`ErrorCode::TOOL_TIMEOUT`]; either drops the call.
//! A successful result larger than [`ScheduleLimits::max_result_bytes`] when serialized becomes
//! [`ErrorCode::TOOL_RESULT_TOO_LARGE`], and one that fails the output schema
//! [`ErrorCode::TOOL_RESULT_INVALID`].

use crate::admission::{serialized_size_within, AdmittedCall};
use crate::error_code::ErrorCode;
use crate::run::RunContext;
use crate::tool::{Concurrency, Effect, ToolFuture, ToolRegistration};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Limits applied while running calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleLimits {
    /// Most concurrency-safe calls in flight at once (at least 1).
    pub max_concurrency: usize,
    /// Maximum serialized size of one result, in bytes.
    pub max_result_bytes: usize,
}

impl Default for ScheduleLimits {
    /// 4 calls in flight, 64 KiB results.
    fn default() -> Self {
        ScheduleLimits {
            max_concurrency: 4,
            max_result_bytes: 64 << 10,
        }
    }
}

/// How one executed call ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Execution {
    /// A validated, size-checked result.
    Succeeded(Value),
    /// A failure code and what is known about the effect.
    Failed {
        /// The code the model sees.
        code: ErrorCode,
        /// `NotStarted` only when the handler said nothing left the host.
        effect: Effect,
    },
}

impl Execution {
    /// The result as the model sees it.
    pub fn into_result(self) -> Result<Value, ErrorCode> {
        match self {
            Execution::Succeeded(v) => Ok(v),
            Execution::Failed { code, .. } => Err(code),
        }
    }
}

/// The result of one call, tagged with its call id and tool.
#[derive(Clone, Debug, PartialEq)]
pub struct CallResult {
    /// The model's call id.
    pub call_id: String,
    /// The tool name.
    pub tool: String,
    /// The outcome.
    pub execution: Execution,
}

/// A handler's future that panicked while being polled.
struct Panicked;

/// Polls a handler's future, catching a panic as [`Panicked`] (never polled again after it).
struct CatchUnwind(ToolFuture);

impl std::future::Future for CatchUnwind {
    type Output = Result<Result<Value, crate::tool::ToolError>, Panicked>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let fut = &mut self.0;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(_) => std::task::Poll::Ready(Err(Panicked)),
        }
    }
}

/// Runs one call to completion under the lease and the result limits.
pub async fn execute(
    tool: Arc<ToolRegistration>,
    arguments: Value,
    context: RunContext,
    limits: ScheduleLimits,
) -> Execution {
    let lease = context.lease.clone();
    if let Err(code) = lease.check() {
        return Execution::Failed {
            code,
            effect: Effect::NotStarted,
        };
    }
    // Polled here rather than spawned: a task of its own would cost every call a task's
    // allocation and a switch to it and back, and the caller only waits for it anyway.
    let mut call = CatchUnwind(Arc::clone(tool.handler())(arguments, context));
    let deadline = lease.deadline();
    let timed = async {
        match deadline {
            Some(d) => tokio::time::timeout_at(d, &mut call).await.ok(),
            None => Some((&mut call).await),
        }
    };
    let joined = tokio::select! {
        () = lease.cancellation().cancelled() => {
            return Execution::Failed { code: ErrorCode::RUN_CANCELLED, effect: Effect::Unknown };
        }
        joined = timed => joined,
    };
    let outcome = match joined {
        None => {
            return Execution::Failed {
                code: ErrorCode::TOOL_TIMEOUT,
                effect: Effect::Unknown,
            };
        }
        Some(Err(Panicked)) => {
            return Execution::Failed {
                code: ErrorCode::TOOL_PANICKED,
                effect: Effect::Unknown,
            };
        }
        Some(Ok(outcome)) => outcome,
    };
    match outcome {
        Err(e) => Execution::Failed {
            code: e.code,
            effect: e.effect,
        },
        Ok(value) => {
            if serialized_size_within(&value, limits.max_result_bytes).is_none() {
                return Execution::Failed {
                    code: ErrorCode::TOOL_RESULT_TOO_LARGE,
                    effect: Effect::Unknown,
                };
            }
            if let Some(schema) = tool.output_schema() {
                if schema.validate(&value).is_err() {
                    return Execution::Failed {
                        code: ErrorCode::TOOL_RESULT_INVALID,
                        effect: Effect::Unknown,
                    };
                }
            }
            Execution::Succeeded(value)
        }
    }
}

/// Runs the admitted calls of one turn (see the module documentation) and returns results in call order.
pub async fn dispatch_batch(
    calls: Vec<AdmittedCall>,
    context: &RunContext,
    limits: ScheduleLimits,
) -> Vec<CallResult> {
    let mut results: Vec<Option<CallResult>> = vec![None; calls.len()];
    let names: Vec<(String, String)> = calls
        .iter()
        .map(|c| (c.call.id.clone(), c.call.name.clone()))
        .collect();
    let mut calls = calls.into_iter().enumerate().peekable();
    let semaphore = Arc::new(Semaphore::new(limits.max_concurrency.max(1)));
    while let Some((index, first)) = calls.next() {
        if first.tool.concurrency() == Concurrency::Exclusive {
            let execution = execute(
                Arc::clone(&first.tool),
                first.call.arguments,
                context.clone(),
                limits,
            )
            .await;
            results[index] = Some(CallResult {
                call_id: first.call.id,
                tool: first.call.name,
                execution,
            });
            continue;
        }
        let mut segment = vec![(index, first)];
        while let Some((i, next)) =
            calls.next_if(|(_, c)| c.tool.concurrency() == Concurrency::Safe)
        {
            segment.push((i, next));
        }
        let mut set = JoinSet::new();
        for (i, admitted) in segment {
            let semaphore = Arc::clone(&semaphore);
            let context = context.clone();
            set.spawn(async move {
                // The semaphore is never closed, so acquiring only waits.
                let _permit = semaphore.acquire_owned().await;
                let execution = execute(
                    Arc::clone(&admitted.tool),
                    admitted.call.arguments,
                    context,
                    limits,
                )
                .await;
                (
                    i,
                    CallResult {
                        call_id: admitted.call.id,
                        tool: admitted.call.name,
                        execution,
                    },
                )
            });
        }
        while let Some(joined) = set.join_next().await {
            // `execute` catches handler panics itself; a panic here would be a bug in Core.
            if let Ok((i, result)) = joined {
                results[i] = Some(result);
            }
        }
    }
    results
        .into_iter()
        .zip(names)
        .map(|(r, (call_id, tool))| {
            // Only a panic inside Core itself could leave a slot empty; report it as a panicked tool.
            r.unwrap_or(CallResult {
                call_id,
                tool,
                execution: Execution::Failed {
                    code: ErrorCode::TOOL_PANICKED,
                    effect: Effect::Unknown,
                },
            })
        })
        .collect()
}
