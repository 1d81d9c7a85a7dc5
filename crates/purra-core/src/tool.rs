//! Tool registrations: what the host asserts about one tool, and the handler that runs it.
//!
//! A [`ToolRegistration`] is built with [`ToolRegistration::builder`] and every authority-bearing part is
//! explicit: the policy ([`Policy::Read`] or [`Policy::Confirm`]), the scope check (a function, or the
//! explicit value [`ScopeCheck::OptOut`] — there is no default), the concurrency declaration, and for
//! confirm tools the [`ApprovalBinding`]. `build()` refuses a registration that leaves any of them out.
//!
//! Local names match `^[a-z][a-z0-9_]{0,63}$`. Input and output schemas are [`CompiledSchema`]s of the
//! `purra.output-schema/v1` profile; the input schema's root is an object schema.
//!
//! Handlers are `Arc<dyn Fn(Value, RunContext) -> ToolFuture>` where [`ToolFuture`] is a boxed
//! `Send + 'static` future: async traits stay object-safe without the `async-trait` crate, and a call
//! can be spawned onto the runtime. A handler's failure carries only an [`ErrorCode`] and an [`Effect`]
//! classification, never text.

use crate::error_code::{is_identifier, ErrorCode};
use crate::identity::{json_identity, IdentityError, JsonIdentity};
use crate::run::RunContext;
use crate::schema::CompiledSchema;
use serde_json::{json, Value};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// How risky a confirm-policy tool is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Risk {
    /// Changes state.
    Write,
    /// Destroys state.
    Destructive,
}

/// What a call of the tool needs before it may run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Runs after batch admission alone; declared free of writes by the host.
    Read {
        /// Human-readable title.
        title: String,
    },
    /// Runs only through a checkpoint, after a durable approval bound to the exact call.
    Confirm {
        /// Human-readable title shown to the approver.
        title: String,
        /// The risk the approver is told about.
        risk: Risk,
    },
}

/// The verdict of a scope check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScopeDecision {
    /// The call is within the run's scope.
    Allow,
    /// The call is outside the run's scope.
    Deny,
    /// The call is outside the run's scope; the reason is for the host's logs, never for the model.
    DenyWithReason(String),
}

/// A scope check function: given the validated arguments and the run context.
pub type ScopeFn = dyn Fn(&Value, &RunContext) -> ScopeDecision + Send + Sync;

/// The host's additional scope check for a tool. There is no default: opting out is explicit.
#[derive(Clone)]
pub enum ScopeCheck {
    /// Run this check for every call, after argument validation.
    Check(Arc<ScopeFn>),
    /// Explicitly no additional scope check.
    OptOut,
}

impl ScopeCheck {
    /// Wraps a check function.
    pub fn check(
        f: impl Fn(&Value, &RunContext) -> ScopeDecision + Send + Sync + 'static,
    ) -> ScopeCheck {
        ScopeCheck::Check(Arc::new(f))
    }

    /// Evaluates the check (`Allow` for `OptOut`).
    pub fn evaluate(&self, arguments: &Value, context: &RunContext) -> ScopeDecision {
        match self {
            ScopeCheck::Check(f) => f(arguments, context),
            ScopeCheck::OptOut => ScopeDecision::Allow,
        }
    }
}

impl fmt::Debug for ScopeCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScopeCheck::Check(_) => "ScopeCheck::Check(..)",
            ScopeCheck::OptOut => "ScopeCheck::OptOut",
        })
    }
}

/// Whether calls of the tool may overlap with other concurrency-safe calls. A declaration only:
/// the scheduler decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Concurrency {
    /// May run in parallel with other `Safe` calls of the same turn.
    Safe,
    /// Runs alone, in call order.
    Exclusive,
}

/// The host authorization a write is bound to; its identity is part of every approval intent.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalBinding {
    /// The host's binding identifier (for example `document-service`).
    pub binding_id: String,
    /// The binding's revision (for MCP writes: the complete write catalog digest).
    pub binding_revision: String,
    /// The scope identifier (for example `sandbox-documents`).
    pub scope_id: String,
    /// The scope's revision.
    pub scope_revision: String,
}

impl ApprovalBinding {
    /// The binding's JSON identity.
    pub fn identity(&self) -> JsonIdentity {
        // Four strings always have an identity.
        json_identity(&json!({
            "profile": "purra.approval-binding/v1",
            "bindingId": self.binding_id,
            "bindingRevision": self.binding_revision,
            "scopeId": self.scope_id,
            "scopeRevision": self.scope_revision,
        }))
        .unwrap_or_else(|_| unreachable!("strings always canonicalize"))
    }
}

/// What a failed handler can say about its effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing left the host: the call can be reported as `not_started`.
    NotStarted,
    /// The request may have had an effect (sent, then timed out, errored, or returned invalid data).
    Unknown,
}

/// A handler failure: a sanitized code and an effect classification, never remote text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError {
    /// The code the model sees.
    pub code: ErrorCode,
    /// What is known about the effect.
    pub effect: Effect,
}

impl ToolError {
    /// A failure before anything left the host.
    pub fn not_started(code: ErrorCode) -> ToolError {
        ToolError {
            code,
            effect: Effect::NotStarted,
        }
    }

    /// A failure after the request may have had an effect.
    pub fn unknown(code: ErrorCode) -> ToolError {
        ToolError {
            code,
            effect: Effect::Unknown,
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let effect = match self.effect {
            Effect::NotStarted => "not started",
            Effect::Unknown => "effect unknown",
        };
        write!(f, "tool failed: {} ({effect})", self.code)
    }
}

impl std::error::Error for ToolError {}

/// The future a handler returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'static>>;

/// A tool handler: validated arguments and the run context in, a JSON result out.
pub type Handler = Arc<dyn Fn(Value, RunContext) -> ToolFuture + Send + Sync>;

/// One call a model asked for.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    /// The model's call id (echoed in the result).
    pub id: String,
    /// The local tool name.
    pub name: String,
    /// The arguments as the model sent them.
    pub arguments: Value,
}

/// What the model is told about a tool.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// Local name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Input schema document.
    pub input_schema: Value,
    /// Output schema document, if any.
    pub output_schema: Option<Value>,
}

/// Why a registration was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolRegistrationError {
    /// The name does not match `^[a-z][a-z0-9_]{0,63}$`.
    InvalidName,
    /// A required part was not given (`"description"`, `"input_schema"`, `"policy"`, `"scope"`,
    /// `"concurrency"` or `"handler"`).
    Missing(&'static str),
    /// A policy title is empty.
    EmptyTitle,
    /// A confirm-policy tool has no approval binding, or a binding has an empty field.
    MissingApprovalBinding,
    /// A read-policy tool was given an approval binding (writes only).
    BindingOnReadTool,
    /// A confirm-policy tool was declared concurrency-safe (writes always run alone).
    ConcurrentWrite,
    /// The descriptive parts have no JSON identity (for example a schema holds a non-I-JSON number).
    Identity(IdentityError),
}

impl fmt::Display for ToolRegistrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolRegistrationError::InvalidName => {
                f.write_str("tool names must match ^[a-z][a-z0-9_]{0,63}$")
            }
            ToolRegistrationError::Missing(part) => write!(f, "the registration has no {part}"),
            ToolRegistrationError::EmptyTitle => f.write_str("policy titles must not be empty"),
            ToolRegistrationError::MissingApprovalBinding => {
                f.write_str("confirm-policy tools need a complete approval binding")
            }
            ToolRegistrationError::BindingOnReadTool => {
                f.write_str("approval bindings are for confirm-policy tools")
            }
            ToolRegistrationError::ConcurrentWrite => {
                f.write_str("confirm-policy tools cannot be concurrency-safe")
            }
            ToolRegistrationError::Identity(e) => write!(f, "registration has no identity: {e}"),
        }
    }
}

impl std::error::Error for ToolRegistrationError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ToolRegistrationError::Identity(e) => Some(e),
            _ => None,
        }
    }
}

/// A tool as the host registered it. Immutable once built.
pub struct ToolRegistration {
    name: String,
    description: String,
    input: CompiledSchema,
    output: Option<CompiledSchema>,
    policy: Policy,
    scope: ScopeCheck,
    concurrency: Concurrency,
    approval_binding: Option<ApprovalBinding>,
    handler: Handler,
    descriptive: Value,
    identity: JsonIdentity,
}

impl fmt::Debug for ToolRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolRegistration")
            .field("name", &self.name)
            .field("policy", &self.policy)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl ToolRegistration {
    /// Starts a registration for the local name `name`.
    pub fn builder(name: impl Into<String>) -> ToolBuilder {
        ToolBuilder {
            name: name.into(),
            description: None,
            input: None,
            output: None,
            policy: None,
            scope: None,
            concurrency: None,
            approval_binding: None,
            handler: None,
        }
    }

    /// Local name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Description shown to the model.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Compiled input schema.
    pub fn input_schema(&self) -> &CompiledSchema {
        &self.input
    }

    /// Compiled output schema, if any: a result must satisfy it.
    pub fn output_schema(&self) -> Option<&CompiledSchema> {
        self.output.as_ref()
    }

    /// Policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Scope check.
    pub fn scope(&self) -> &ScopeCheck {
        &self.scope
    }

    /// Concurrency declaration.
    pub fn concurrency(&self) -> Concurrency {
        self.concurrency
    }

    /// Approval binding (confirm-policy tools only).
    pub fn approval_binding(&self) -> Option<&ApprovalBinding> {
        self.approval_binding.as_ref()
    }

    /// The handler.
    pub fn handler(&self) -> &Handler {
        &self.handler
    }

    /// Whether the policy is `Confirm`.
    pub fn is_confirm(&self) -> bool {
        matches!(self.policy, Policy::Confirm { .. })
    }

    /// The descriptive parts as JSON: name, description, schemas, policy, scope kind, concurrency and
    /// binding identity. The catalog revision is computed over these.
    pub fn descriptive(&self) -> &Value {
        &self.descriptive
    }

    /// The JSON identity of [`ToolRegistration::descriptive`]: the registration identity an approval
    /// is re-checked against at dispatch.
    pub fn identity(&self) -> &JsonIdentity {
        &self.identity
    }

    /// What the model is told about this tool.
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.input.source().clone(),
            output_schema: self.output.as_ref().map(|s| s.source().clone()),
        }
    }
}

/// Builder for [`ToolRegistration`]; every authority-bearing part must be set explicitly.
pub struct ToolBuilder {
    name: String,
    description: Option<String>,
    input: Option<CompiledSchema>,
    output: Option<CompiledSchema>,
    policy: Option<Policy>,
    scope: Option<ScopeCheck>,
    concurrency: Option<Concurrency>,
    approval_binding: Option<ApprovalBinding>,
    handler: Option<Handler>,
}

impl ToolBuilder {
    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets the compiled input schema.
    pub fn input_schema(mut self, schema: CompiledSchema) -> Self {
        self.input = Some(schema);
        self
    }

    /// Sets the compiled output schema.
    pub fn output_schema(mut self, schema: CompiledSchema) -> Self {
        self.output = Some(schema);
        self
    }

    /// Read policy with a title.
    pub fn read(mut self, title: impl Into<String>) -> Self {
        self.policy = Some(Policy::Read {
            title: title.into(),
        });
        self
    }

    /// Confirm policy with a title, a risk and the approval binding.
    pub fn confirm(
        mut self,
        title: impl Into<String>,
        risk: Risk,
        binding: ApprovalBinding,
    ) -> Self {
        self.policy = Some(Policy::Confirm {
            title: title.into(),
            risk,
        });
        self.approval_binding = Some(binding);
        self
    }

    /// Sets the scope check (use [`ScopeCheck::OptOut`] to opt out explicitly).
    pub fn scope(mut self, scope: ScopeCheck) -> Self {
        self.scope = Some(scope);
        self
    }

    /// Declares whether calls may run concurrently with other safe calls.
    pub fn concurrency(mut self, concurrency: Concurrency) -> Self {
        self.concurrency = Some(concurrency);
        self
    }

    /// Sets the handler from an async function.
    pub fn handler<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(Value, RunContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        self.handler = Some(Arc::new(move |args, ctx| {
            Box::pin(f(args, ctx)) as ToolFuture
        }));
        self
    }

    /// Sets an already boxed handler.
    pub fn boxed_handler(mut self, handler: Handler) -> Self {
        self.handler = Some(handler);
        self
    }

    /// Checks every part and computes the registration identity.
    pub fn build(self) -> Result<ToolRegistration, ToolRegistrationError> {
        if !is_identifier(&self.name) {
            return Err(ToolRegistrationError::InvalidName);
        }
        let description = self
            .description
            .ok_or(ToolRegistrationError::Missing("description"))?;
        let input = self
            .input
            .ok_or(ToolRegistrationError::Missing("input_schema"))?;
        let policy = self
            .policy
            .ok_or(ToolRegistrationError::Missing("policy"))?;
        let scope = self.scope.ok_or(ToolRegistrationError::Missing("scope"))?;
        let concurrency = self
            .concurrency
            .ok_or(ToolRegistrationError::Missing("concurrency"))?;
        let handler = self
            .handler
            .ok_or(ToolRegistrationError::Missing("handler"))?;
        let policy_json = match &policy {
            Policy::Read { title } => {
                if title.is_empty() {
                    return Err(ToolRegistrationError::EmptyTitle);
                }
                if self.approval_binding.is_some() {
                    return Err(ToolRegistrationError::BindingOnReadTool);
                }
                json!({"mode": "read", "title": title})
            }
            Policy::Confirm { title, risk } => {
                if title.is_empty() {
                    return Err(ToolRegistrationError::EmptyTitle);
                }
                let complete = self.approval_binding.as_ref().is_some_and(|b| {
                    ![
                        &b.binding_id,
                        &b.binding_revision,
                        &b.scope_id,
                        &b.scope_revision,
                    ]
                    .iter()
                    .any(|s| s.is_empty())
                });
                if !complete {
                    return Err(ToolRegistrationError::MissingApprovalBinding);
                }
                if concurrency == Concurrency::Safe {
                    return Err(ToolRegistrationError::ConcurrentWrite);
                }
                let risk = match risk {
                    Risk::Write => "write",
                    Risk::Destructive => "destructive",
                };
                json!({"mode": "confirm", "title": title, "risk": risk})
            }
        };
        let descriptive = json!({
            "name": self.name,
            "description": description,
            "inputSchema": input.source(),
            "outputSchema": self.output.as_ref().map(CompiledSchema::source),
            "policy": policy_json,
            "scope": match scope { ScopeCheck::Check(_) => "check", ScopeCheck::OptOut => "opt_out" },
            "concurrencySafe": concurrency == Concurrency::Safe,
            "approvalBinding": self.approval_binding.as_ref().map(|b| b.identity().to_string()),
        });
        let identity = json_identity(&descriptive).map_err(ToolRegistrationError::Identity)?;
        Ok(ToolRegistration {
            name: self.name,
            description,
            input,
            output: self.output,
            policy,
            scope,
            concurrency,
            approval_binding: self.approval_binding,
            handler,
            descriptive,
            identity,
        })
    }
}
