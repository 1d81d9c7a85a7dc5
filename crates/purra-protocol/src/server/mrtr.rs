//! Multi round-trip requests on the server: how a handler's `RequestCtx` elicitation, sampling and
//! roots calls work in the 2026-07-28 revision, where a server may not send requests.
//!
//! A `tools/call`, `prompts/get` or `resources/read` runs its handler as usual. When the handler
//! asks for input under a key, the answer is looked up: in the answers earlier rounds collected
//! (sealed in `requestState`), then in this request's `inputResponses`. An answered call returns at
//! once. An unanswered one registers its request and never returns; as soon as the handler can
//! make no further progress without it, the round ends: the handler is dropped and the request is
//! answered `input_required` with every registered request and a sealed state holding the answers
//! so far (each question is asked once) and what the handler chose to carry. The client retries
//! with the answers and the handler runs again from the start, now past those questions.
//!
//! A question is identified by its key and a digest of its request: an answer given to a
//! different question under the same key is not used, the question is asked again.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use serde_json::value::RawValue;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::jsonrpc::ErrorObject;
use crate::modern::raw;
use crate::modern::{canonical_json, short_digest, InputRequest, InputResponse};
use crate::request_state::{Binding, RequestStateSecurity};
use crate::types::ClientCapabilities;

/// An answer carried from round to round: the digest of the question it answers, and the answer.
#[derive(Debug, Clone)]
struct Answer {
    digest: String,
    response: Value,
}

/// One round of a multi round-trip request.
pub(crate) struct Round {
    security: RequestStateSecurity,
    method: String,
    /// The request's params as they came (what the state is bound to), read into a `Value` only
    /// when a round ends `input_required` and its state is sealed.
    params: Option<Box<RawValue>>,
    audience: String,
    principal: Option<String>,
    caps: ClientCapabilities,
    /// Answers collected so far (from the state, and the ones of this request that were used).
    answers: Mutex<BTreeMap<String, Answer>>,
    /// What the previous round asked: key to question digest.
    asked_before: BTreeMap<String, String>,
    /// This request's `inputResponses`.
    fresh: BTreeMap<String, Value>,
    /// The handler's own state from the previous round.
    prior_state: Option<Value>,
    /// The handler's state for the next round.
    next_state: Mutex<Option<Value>>,
    /// What this round asks, in the order the handler asked.
    pending: Mutex<Vec<(String, InputRequest, String)>>,
    /// A malformed answer or a misused key: the round ends with this error.
    failure: Mutex<Option<ErrorObject>>,
    /// Cancelled when the round ends; unanswered calls then return.
    ended: CancellationToken,
}

impl std::fmt::Debug for Round {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Round")
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

/// How a round ended.
pub(crate) enum Outcome {
    /// The handler completed: its result.
    Complete(Box<RawValue>),
    /// The handler needs input: the `input_required` result.
    InputRequired(Box<RawValue>),
}

fn invalid(message: String) -> ErrorObject {
    ErrorObject::invalid_params(message)
}

fn digest_of(request: &InputRequest) -> String {
    short_digest(canonical_json(&request.to_value()).as_bytes(), 16)
}

/// What a round starts from: the answers and questions of earlier rounds, this request's
/// answers, the handler's carried state.
#[derive(Default)]
struct RoundInputs {
    answers: BTreeMap<String, Answer>,
    asked_before: BTreeMap<String, String>,
    fresh: BTreeMap<String, Value>,
    prior_state: Option<Value>,
}

/// The request's params as a `Value` (no params: an empty object).
fn params_value(params: Option<&RawValue>) -> Result<Value, ErrorObject> {
    match params {
        Some(p) => {
            serde_json::from_str(p.get()).map_err(|e| invalid(format!("Invalid params: {e}")))
        }
        None => Ok(Value::Object(Default::default())),
    }
}

/// Whether the params may carry `inputResponses` or `requestState` (other than `null`): read
/// without building a `Value`. Anything this quick read does not understand (a duplicate key, a
/// params that is not an object) answers true, and the full reading decides.
fn has_round_keys(params: Option<&RawValue>) -> bool {
    #[derive(serde::Deserialize)]
    struct Keys<'a> {
        #[serde(borrow, default, rename = "inputResponses")]
        input_responses: Option<&'a RawValue>,
        #[serde(borrow, default, rename = "requestState")]
        request_state: Option<&'a RawValue>,
    }
    let Some(p) = params else { return false };
    if !p.get().trim_start().starts_with('{') {
        return true;
    }
    match serde_json::from_str::<Keys<'_>>(p.get()) {
        Ok(k) => k.input_responses.is_some() || k.request_state.is_some(),
        Err(_) => true,
    }
}

impl RoundInputs {
    /// Reads the inputs of a request whose params may carry `inputResponses` or
    /// `requestState`: verifies the state against this request's binding and reads the answers.
    fn read(
        security: &RequestStateSecurity,
        method: &str,
        params: Option<&RawValue>,
        audience: &str,
        principal: Option<&str>,
    ) -> Result<RoundInputs, ErrorObject> {
        let params = params_value(params)?;
        let fresh = match params.get("inputResponses") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(_) => {
                return Err(invalid(
                    "Invalid params: inputResponses must be an object".to_owned(),
                ))
            }
        };
        let mut inputs = RoundInputs {
            fresh,
            ..RoundInputs::default()
        };
        match params.get("requestState") {
            None | Some(Value::Null) => {}
            Some(Value::String(token)) => {
                let binding = Binding::of(method, &params, audience, principal);
                let state = security.open(token, &binding).map_err(|r| r.to_error())?;
                // Sealed by this server: its shape is ours, read it strictly.
                if let Some(Value::Object(a)) = state.get("answers") {
                    for (k, v) in a {
                        let (Some(d), Some(r)) = (v.get("d").and_then(Value::as_str), v.get("r"))
                        else {
                            continue;
                        };
                        inputs.answers.insert(
                            k.clone(),
                            Answer {
                                digest: d.to_owned(),
                                response: r.clone(),
                            },
                        );
                    }
                }
                if let Some(Value::Object(a)) = state.get("asked") {
                    for (k, v) in a {
                        if let Some(d) = v.as_str() {
                            inputs.asked_before.insert(k.clone(), d.to_owned());
                        }
                    }
                }
                inputs.prior_state = state.get("handler").cloned().filter(|v| !v.is_null());
            }
            Some(_) => return Err(crate::request_state::Rejected("not a string").to_error()),
        }
        Ok(inputs)
    }
}

impl Round {
    /// Opens the round of one request: verifies its `requestState` (if any) and reads its
    /// `inputResponses` (if any).
    pub fn open(
        security: &RequestStateSecurity,
        method: &str,
        params: Option<&RawValue>,
        audience: &str,
        principal: Option<String>,
        caps: ClientCapabilities,
    ) -> Result<Round, ErrorObject> {
        // The usual request carries no answers and no state; its params are not read further.
        let inputs = if has_round_keys(params) {
            RoundInputs::read(security, method, params, audience, principal.as_deref())?
        } else {
            RoundInputs::default()
        };
        Ok(Round {
            security: security.clone(),
            method: method.to_owned(),
            params: params.map(ToOwned::to_owned),
            audience: audience.to_owned(),
            principal,
            caps,
            answers: Mutex::new(inputs.answers),
            asked_before: inputs.asked_before,
            fresh: inputs.fresh,
            prior_state: inputs.prior_state,
            next_state: Mutex::new(None),
            pending: Mutex::new(Vec::new()),
            failure: Mutex::new(None),
            ended: CancellationToken::new(),
        })
    }

    /// The handler's state carried from the previous round.
    pub fn prior_state(&self) -> Option<&Value> {
        self.prior_state.as_ref()
    }

    /// Sets the state the next round's handler will find in [`prior_state`](Self::prior_state).
    pub fn set_next_state(&self, state: Value) {
        *self.next_state.lock().expect("state lock") = Some(state);
    }

    fn fail(&self, e: ErrorObject) {
        let mut slot = self.failure.lock().expect("failure lock");
        if slot.is_none() {
            *slot = Some(e);
        }
    }

    /// A handler's input call: the answer when there is one, otherwise a registered request and
    /// a call that returns only when the round is over.
    pub async fn input(&self, key: &str, request: InputRequest) -> Result<InputResponse, Error> {
        let digest = digest_of(&request);
        let known = self
            .answers
            .lock()
            .expect("answers lock")
            .get(key)
            .filter(|a| a.digest == digest)
            .map(|a| a.response.clone());
        if let Some(v) = known {
            if let Ok(r) = InputResponse::from_value(&request, v) {
                return Ok(r);
            }
        }
        let asked_this = self.asked_before.get(key).is_none_or(|d| *d == digest);
        if let (Some(v), true) = (self.fresh.get(key), asked_this) {
            match InputResponse::from_value(&request, v.clone()) {
                Ok(r) => {
                    self.answers.lock().expect("answers lock").insert(
                        key.to_owned(),
                        Answer {
                            digest,
                            response: v.clone(),
                        },
                    );
                    return Ok(r);
                }
                Err(why) => {
                    self.fail(invalid(format!(
                        "Invalid params: inputResponses[{key:?}] is {why}"
                    )));
                    self.ended.cancelled().await;
                    return Err(Error::Cancelled);
                }
            }
        }
        if !request.declared_by(&self.caps) {
            return Err(Error::MissingClientCapability(
                request.capability().to_owned(),
            ));
        }
        {
            let mut pending = self.pending.lock().expect("pending lock");
            match pending.iter().find(|(k, _, _)| k == key) {
                Some((_, _, d)) if *d != digest => {
                    drop(pending);
                    self.fail(ErrorObject::internal(format!(
                        "input key {key:?} was used for two different requests"
                    )));
                }
                Some(_) => {}
                None => pending.push((key.to_owned(), request, digest)),
            }
        }
        self.ended.cancelled().await;
        Err(Error::Cancelled)
    }

    /// The `input_required` result of a round that ends with requests pending.
    fn input_required(&self) -> Box<RawValue> {
        let pending = self.pending.lock().expect("pending lock");
        let mut asked = serde_json::Map::new();
        for (key, _, digest) in pending.iter() {
            asked.insert(key.clone(), Value::String(digest.clone()));
        }
        let answers: serde_json::Map<String, Value> = self
            .answers
            .lock()
            .expect("answers lock")
            .iter()
            .map(|(k, a)| {
                (
                    k.clone(),
                    serde_json::json!({"d": a.digest, "r": a.response}),
                )
            })
            .collect();
        let handler = self.next_state.lock().expect("state lock").clone();
        let state = serde_json::json!({
            "answers": answers,
            "asked": asked,
            "handler": handler,
        });
        // The params were read when the round opened, so they read again.
        let params = params_value(self.params.as_deref()).unwrap_or(Value::Null);
        let binding = Binding::of(
            &self.method,
            &params,
            &self.audience,
            self.principal.as_deref(),
        );
        let token = self.security.seal(&binding, state);
        // inputRequests in the order asked (serde_json's map may sort; write it by hand).
        let mut body = String::from("{\"resultType\":\"input_required\",\"inputRequests\":{");
        for (i, (key, request, _)) in pending.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            body.push_str(&serde_json::to_string(key).expect("keys serialize"));
            body.push(':');
            body.push_str(&serde_json::to_string(&request.to_value()).expect("requests serialize"));
        }
        body.push_str("},\"requestState\":");
        body.push_str(raw(&token).get());
        body.push('}');
        RawValue::from_string(body).expect("well-formed JSON")
    }
}

/// Runs a handler's future as one round: its result if it completes, `input_required` as soon as
/// it is stuck on unanswered input, or the error a malformed answer caused.
pub(crate) async fn run<F>(round: Arc<Round>, fut: F) -> Result<Outcome, ErrorObject>
where
    F: Future<Output = Result<Box<RawValue>, ErrorObject>>,
{
    let mut fut = pin!(fut);
    let outcome = std::future::poll_fn(|cx| {
        let polled = fut.as_mut().poll(cx);
        if let Some(e) = round.failure.lock().expect("failure lock").clone() {
            return Poll::Ready(Err(e));
        }
        match polled {
            Poll::Ready(Ok(v)) => Poll::Ready(Ok(Outcome::Complete(v))),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending if !round.pending.lock().expect("pending lock").is_empty() => {
                Poll::Ready(Ok(Outcome::InputRequired(round.input_required())))
            }
            Poll::Pending => Poll::Pending,
        }
    })
    .await;
    round.ended.cancel();
    outcome
}

/// How a round of a call that may become a task midway ended.
pub(crate) enum Step<F> {
    /// Like [`run`]: complete, `input_required`, or an error.
    Done(Result<Outcome, ErrorObject>),
    /// The handler asked to become a task: its future, to run on as one.
    Escalate(F),
}

/// [`run`] for a handler that may call `start_task`: as soon as it asks (and waits on no
/// unanswered input), its future is handed back to run on as a task.
pub(crate) async fn run_or_escalate<F>(
    round: Arc<Round>,
    mut fut: F,
    escalation: &super::modern::Escalation,
) -> Step<F>
where
    F: Future<Output = Result<Box<RawValue>, ErrorObject>> + Unpin,
{
    let step = std::future::poll_fn(|cx| {
        let polled = std::pin::Pin::new(&mut fut).poll(cx);
        if let Some(e) = round.failure.lock().expect("failure lock").clone() {
            return Poll::Ready(Some(Err(e)));
        }
        match polled {
            Poll::Ready(Ok(v)) => Poll::Ready(Some(Ok(Outcome::Complete(v)))),
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Pending if !round.pending.lock().expect("pending lock").is_empty() => {
                Poll::Ready(Some(Ok(Outcome::InputRequired(round.input_required()))))
            }
            Poll::Pending
                if escalation
                    .requested
                    .load(std::sync::atomic::Ordering::Acquire) =>
            {
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    })
    .await;
    match step {
        Some(r) => {
            round.ended.cancel();
            Step::Done(r)
        }
        None => Step::Escalate(fut),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn only_params_that_may_carry_a_round_take_the_full_reading() {
        let quick = |s: &str| has_round_keys(Some(&raw(s)));
        assert!(!has_round_keys(None));
        assert!(!quick(
            r#"{"name":"t","arguments":{"requestState":"inside"}}"#
        ));
        assert!(!quick(
            r#"{"name":"t","inputResponses":null,"requestState":null}"#
        ));
        assert!(quick(r#"{"name":"t","inputResponses":{}}"#));
        assert!(quick(r#"{"requestState":"v1.x","name":"t"}"#));
        // Not understood by the quick reading: the full one decides.
        assert!(!quick(r#"{"name":"t","name":"u"}"#));
        assert!(quick(r#"{"requestState":null,"requestState":"v1.x"}"#));
        assert!(quick(r#"[1]"#));
    }

    #[test]
    fn a_malformed_round_is_refused_whichever_reading_sees_it() {
        let sec = RequestStateSecurity::ephemeral();
        let caps = ClientCapabilities::default();
        let open = |s: &str| {
            Round::open(&sec, "tools/call", Some(&raw(s)), "srv", None, caps.clone()).map(|_| ())
        };
        assert!(open(r#"{"name":"t"}"#).is_ok());
        assert!(open(r#"{"name":"t","inputResponses":null}"#).is_ok());
        assert_eq!(
            open(r#"{"name":"t","inputResponses":[1]}"#)
                .unwrap_err()
                .message,
            "Invalid params: inputResponses must be an object"
        );
        assert!(open(r#"{"name":"t","requestState":5}"#).is_err());
        assert!(open(r#"{"name":"t","requestState":"v1.forged"}"#).is_err());
    }
}
