//! Policies in Cedar: who may call which bound tool with which arguments.
//!
//! The `[policies]` table names Cedar policy files. Every call of a bound tool is a Cedar request:
//!
//! | part | what it is |
//! |---|---|
//! | principal | `Caller::"PRINCIPAL"`: the caller's principal (`ISSUER#SUBJECT`, or the configured local one), with `authenticated` (Bool), `issuer` and `subject` (String, empty without a token), `scopes` (Set of String) and `claims`: a record of the claims `[policies.claims]` declares, each optional and of its declared type |
//! | action | `Action::"LOCAL"`: calling the bound tool, a member of `Action::"Read"` (reads) or `Action::"Write"` (writes; a destructive one through `Action::"Destructive"`, itself in `Action::"Write"`) |
//! | resource | `Tool::"LOCAL"`: the binding (an enumerated entity type: a name that is no bound tool is a mistake) |
//! | context | `client` (String, the client's `clientInfo.name`: a name the caller chooses, not authentication) and `arguments`: the call's arguments, typed from the bound tool's strict input schema |
//!
//! The schema is generated at start from the configuration and the discovered tools, and every
//! policy is validated against it in Cedar's strict mode: a policy naming an unknown tool, action,
//! attribute or claim, or comparing values of different types, is a configuration mistake placed
//! at its file and line, and nothing starts (`purra gateway --check`
//! reports it too). Policy templates are refused (nothing links them).
//!
//! Arguments are typed from the input schema as far as Cedar can represent them exactly:
//! `string` is a String, `integer` a Long (a value outside the signed 64-bit range refuses the
//! call), `boolean` a Bool, `array` a Set of its `items`, `object` a record of its `properties`
//! (those in `required` are required, the others optional: `context.arguments has NAME`), a type
//! with `null` beside one other type an optional attribute of that type (null is absence), and
//! `enum`/`const` without `type` the kind all their values share. Cedar has no binary64 numbers,
//! so `number` properties (and unions, `anyOf`, `oneOf`, arrays of nullable items) are not in
//! the context: a policy that names one is refused as naming an unknown attribute. The typing
//! is fixed at start; arguments that no longer fit it (a tool whose schema changed upstream) are
//! refused.
//!
//! Decisions follow Cedar: a call is allowed when some `permit` applies and no `forbid` does, so
//! every file set needs its permits. A request that cannot be built (a declared claim of another
//! type, an argument outside the typing) and an evaluation that errors (an overflow, a failed
//! extension call) refuse the call rather than skip the policy: Cedar would leave an erroring
//! `forbid` out of the decision, the gateway fails closed and logs why.
//!
//! The policy set's digest (16 hex digits of the files' text and the declared claims) is
//! folded into every write binding's scope revision, so an approval prepared under other policies
//! is refused at dispatch as a mismatch, in the claim's transaction.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use cedar_policy::{
    AuthorizationError, Authorizer, Context, Decision, Entities, Entity, EntityId, EntityTypeName,
    EntityUid, EvaluationError, PolicyId, PolicySet, Request, RestrictedExpression, Schema,
    SchemaFragment, ValidationError, ValidationMode, Validator,
};
use miette::Diagnostic;
use serde_json::{json, Map, Value};

use crate::config::{ClaimType, ConfigError, PoliciesConfig};
use crate::config::{ConfigSource, LineIndex};
use crate::rules::scope::Caller;

/// The largest policy file read (1 MiB): bounded before it is parsed.
pub const MAX_POLICY_FILE_BYTES: u64 = 1 << 20;

/// The entity type of callers.
pub const CALLER_TYPE: &str = "Caller";
/// The entity type of bound tools (enumerated: the local names).
pub const TOOL_TYPE: &str = "Tool";
/// The action group of every read.
pub const READ_GROUP: &str = "Read";
/// The action group of every write (destructive ones included).
pub const WRITE_GROUP: &str = "Write";
/// The action group of destructive writes (itself in [`WRITE_GROUP`]).
pub const DESTRUCTIVE_GROUP: &str = "Destructive";

/// What a bound tool is, for its action's group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolKind {
    Read,
    Write,
    Destructive,
}

/// One bound tool, as the schema needs it: its local name, kind and strict input schema.
pub(crate) struct ToolSpec<'a> {
    pub local: &'a str,
    pub kind: ToolKind,
    pub input: &'a Value,
}

/// Reads `path` whole unless it is larger than [`MAX_POLICY_FILE_BYTES`].
fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut text = String::new();
    file.take(MAX_POLICY_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_POLICY_FILE_BYTES {
        return Err(format!(
            "the file is larger than {MAX_POLICY_FILE_BYTES} bytes"
        ));
    }
    Ok(text)
}

/// One policy file as read.
struct SourceFile {
    name: String,
    lines: LineIndex,
}

/// Where each policy of a Cedar file starts (byte offsets, in file order): after the `;` that
/// ends the one before, at its first character that is neither blank nor in a `//` comment.
/// (`;` ends a policy and appears nowhere else outside strings and comments.)
fn policy_starts(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut chars = text.char_indices().peekable();
    let mut in_policy = false;
    while let Some((i, c)) = chars.next() {
        match c {
            '/' if chars.peek().is_some_and(|(_, n)| *n == '/') => {
                for (_, n) in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
            }
            c if c.is_whitespace() => {}
            _ => {
                if !in_policy {
                    starts.push(i);
                    in_policy = true;
                }
                match c {
                    ';' => in_policy = false,
                    '"' => {
                        while let Some((_, n)) = chars.next() {
                            match n {
                                '\\' => {
                                    chars.next();
                                }
                                '"' => break,
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    starts
}

/// The policy files as read and parsed: every policy, and the file it came from.
pub(crate) struct Sources {
    set: PolicySet,
    /// The file each policy came from (an index into `files`) and the line it starts on.
    origin: HashMap<PolicyId, (usize, Option<usize>)>,
    files: Vec<SourceFile>,
    claims: BTreeMap<String, ClaimType>,
    digest: String,
}

/// The mistakes of the policy files alone (unreadable, too large, syntax, templates): what can
/// be found before the upstreams are discovered. Used by [`crate::load`].
pub(crate) fn file_mistakes(p: &PoliciesConfig, source: &ConfigSource) -> Vec<ConfigError> {
    match Sources::read(p, source) {
        Ok(_) => Vec::new(),
        Err(e) => e,
    }
}

/// Where a Cedar diagnostic points in `file` (else `fallback`: the line its policy starts on),
/// and what it says (without Cedar's "for policy `ID`" prefix: the place names the policy),
/// with its help.
fn diagnostic_error<D: Diagnostic + fmt::Display + ?Sized>(
    file: &SourceFile,
    d: &D,
    fallback: Option<usize>,
) -> ConfigError {
    let line = d
        .labels()
        .and_then(|mut labels| labels.next())
        .map(|l| file.lines.line(l.offset()))
        .or(fallback);
    let text = d.to_string();
    let mut message = match text.strip_prefix("for policy `") {
        Some(rest) => rest
            .split_once("`, ")
            .or_else(|| rest.split_once("`: "))
            .map_or(text.clone(), |(_, m)| m.to_owned()),
        None => text,
    };
    if let Some(help) = d.help() {
        message = format!("{message} ({help})");
    }
    ConfigError {
        file: file.name.clone(),
        line,
        key: String::new(),
        message,
    }
}

impl Sources {
    /// Reads and parses every policy file; every mistake at once (a file that cannot be read at
    /// its `policies.files[N]` key, a policy that cannot be parsed at its file and line).
    pub(crate) fn read(
        p: &PoliciesConfig,
        source: &ConfigSource,
    ) -> Result<Sources, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let mut set = PolicySet::new();
        let mut origin = HashMap::new();
        let mut files = Vec::new();
        let mut texts = Vec::new();
        for (i, path) in p.files.iter().enumerate() {
            let name = path.display().to_string();
            let text = match read_bounded(path) {
                Ok(t) => t,
                Err(why) => {
                    errors.push(source.error(
                        &format!("policies.files[{i}]"),
                        format!("cannot read the policy file {name}: {why}"),
                    ));
                    continue;
                }
            };
            let file = SourceFile {
                name: name.clone(),
                lines: LineIndex::new(&text),
            };
            match PolicySet::from_str(&text) {
                Err(e) => errors.extend(e.iter().map(|pe| diagnostic_error(&file, pe, None))),
                Ok(parsed) => {
                    if parsed.num_of_templates() > 0 {
                        let at = ["?principal", "?resource"]
                            .iter()
                            .filter_map(|slot| text.find(slot))
                            .min()
                            .map(|offset| file.lines.line(offset));
                        errors.push(ConfigError {
                            file: name.clone(),
                            line: at,
                            key: String::new(),
                            message: "a policy template (?principal, ?resource) never applies: \
                                      the gateway links no template; write the policy without \
                                      slots"
                                .into(),
                        });
                    }
                    let starts = policy_starts(&text);
                    for policy in parsed.policies() {
                        // Cedar names the policies of a text policy0, policy1, ... in order.
                        let n: usize = policy
                            .id()
                            .to_string()
                            .strip_prefix("policy")
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(usize::MAX);
                        let id = PolicyId::new(format!("{name}#{}", n.saturating_add(1)));
                        let line = starts.get(n).map(|offset| file.lines.line(*offset));
                        origin.insert(id.clone(), (files.len(), line));
                        if let Err(e) = set.add(policy.new_id(id)) {
                            errors.push(source.error(
                                &format!("policies.files[{i}]"),
                                format!("the policies of {name} cannot be added: {e}"),
                            ));
                        }
                    }
                }
            }
            files.push(file);
            texts.push(text);
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let claims: BTreeMap<&String, &str> =
            p.claims.iter().map(|(k, t)| (k, t.as_str())).collect();
        let identity = purra_core::json_identity(&json!({
            "profile": "purra.gateway-policies/v1",
            "claims": claims,
            "files": texts,
        }))
        .map_err(|e| vec![source.error("policies", format!("the policies have no digest: {e}"))])?;
        let hex = identity.as_str().trim_start_matches("sha256:");
        Ok(Sources {
            set,
            origin,
            files,
            claims: p.claims.clone(),
            digest: hex[..16.min(hex.len())].to_owned(),
        })
    }

    /// 16 hex digits of the digest of the policy files' text and the declared claims: folded
    /// into every write binding's scope revision.
    pub(crate) fn digest(&self) -> &str {
        &self.digest
    }
}

/// A Cedar type an argument or a claim is read as.
#[derive(Debug, Clone, PartialEq)]
enum Ty {
    String,
    Long,
    Bool,
    Set(Box<Ty>),
    Record(BTreeMap<String, Attr>),
}

/// One attribute of a record type.
#[derive(Debug, Clone, PartialEq)]
struct Attr {
    ty: Ty,
    required: bool,
}

/// How deep an argument type may nest (the strict profile bounds schemas anyway).
const MAX_TYPE_DEPTH: usize = 32;

/// The kind shared by every value of an `enum` or `const`, and whether null is among them.
fn kind_of_values(values: &[&Value]) -> Option<(&'static str, bool)> {
    let nullable = values.iter().any(|v| v.is_null());
    let mut kinds = values.iter().filter(|v| !v.is_null()).map(|v| match v {
        Value::String(_) => Some("string"),
        Value::Bool(_) => Some("boolean"),
        Value::Number(n) if n.as_i64().is_some() => Some("integer"),
        _ => None,
    });
    let first = kinds.next()??;
    for k in kinds {
        if k? != first {
            return None;
        }
    }
    Some((first, nullable))
}

/// The Cedar type of a strict-profile subschema, and whether it admits null; `None` when Cedar
/// cannot represent its values exactly.
fn ty_of(schema: &Value, depth: usize) -> Option<(Ty, bool)> {
    if depth > MAX_TYPE_DEPTH {
        return None;
    }
    let obj = schema.as_object()?;
    let (name, nullable) = match obj.get("type") {
        Some(Value::String(t)) => (t.as_str(), false),
        Some(Value::Array(types)) => {
            let named: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            let others: Vec<&str> = named.iter().copied().filter(|t| *t != "null").collect();
            match others.as_slice() {
                [one] => (*one, others.len() < named.len()),
                _ => return None,
            }
        }
        None => {
            let values: Vec<&Value> = match (obj.get("enum"), obj.get("const")) {
                (Some(Value::Array(a)), _) => a.iter().collect(),
                (None, Some(c)) => vec![c],
                _ => return None,
            };
            kind_of_values(&values)?
        }
        _ => return None,
    };
    let ty = match name {
        "string" => Ty::String,
        "integer" => Ty::Long,
        "boolean" => Ty::Bool,
        "array" => match ty_of(obj.get("items")?, depth + 1)? {
            (_, true) => return None,
            (item, false) => Ty::Set(Box::new(item)),
        },
        "object" => {
            let required: HashSet<&str> = obj
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let mut attrs = BTreeMap::new();
            for (name, sub) in obj
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                if let Some((ty, nullable)) = ty_of(sub, depth + 1) {
                    let required = required.contains(name.as_str()) && !nullable;
                    attrs.insert(name.clone(), Attr { ty, required });
                }
            }
            Ty::Record(attrs)
        }
        _ => return None,
    };
    Some((ty, nullable))
}

/// The type as Cedar's JSON schema format writes it.
fn ty_json(ty: &Ty) -> Value {
    match ty {
        Ty::String => json!({"type": "String"}),
        Ty::Long => json!({"type": "Long"}),
        Ty::Bool => json!({"type": "Boolean"}),
        Ty::Set(item) => json!({"type": "Set", "element": ty_json(item)}),
        Ty::Record(attrs) => {
            let mut out = Map::new();
            for (name, a) in attrs {
                let mut t = ty_json(&a.ty);
                if let Value::Object(o) = &mut t {
                    o.insert("required".into(), Value::Bool(a.required));
                }
                out.insert(name.clone(), t);
            }
            json!({"type": "Record", "attributes": out})
        }
    }
}

/// A JSON integer within the signed 64-bit range (an integral decimal too, as the strict
/// profile's `integer` admits `1.0`).
fn long_of(v: &Value) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    let f = v.as_f64()?;
    // -2^63 ..= 2^63 - 1024 are the binary64 integers in range.
    (f.fract() == 0.0 && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f))
        .then_some(f as i64)
}

/// `value` as a Cedar value of type `ty`, or why not (with the JSON pointer of the place).
fn value_of(ty: &Ty, value: &Value, at: &str) -> Result<RestrictedExpression, String> {
    let place = if at.is_empty() { "/" } else { at };
    match ty {
        Ty::String => value
            .as_str()
            .map(|s| RestrictedExpression::new_string(s.to_owned()))
            .ok_or_else(|| format!("{place}: not a string")),
        Ty::Long => long_of(value)
            .map(RestrictedExpression::new_long)
            .ok_or_else(|| format!("{place}: not an integer within the signed 64-bit range")),
        Ty::Bool => value
            .as_bool()
            .map(RestrictedExpression::new_bool)
            .ok_or_else(|| format!("{place}: not a boolean")),
        Ty::Set(item) => {
            let items = value
                .as_array()
                .ok_or_else(|| format!("{place}: not an array"))?;
            let values = items
                .iter()
                .enumerate()
                .map(|(i, v)| value_of(item, v, &format!("{at}/{i}")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(RestrictedExpression::new_set(values))
        }
        Ty::Record(attrs) => {
            let object = value
                .as_object()
                .ok_or_else(|| format!("{place}: not an object"))?;
            let mut fields = Vec::new();
            for (name, a) in attrs {
                let inner = format!("{at}/{}", name.replace('~', "~0").replace('/', "~1"));
                match object.get(name) {
                    None | Some(Value::Null) if a.required => {
                        return Err(format!("{inner}: missing"));
                    }
                    None | Some(Value::Null) => {}
                    Some(v) => fields.push((name.clone(), value_of(&a.ty, v, &inner)?)),
                }
            }
            RestrictedExpression::new_record(fields).map_err(|e| format!("{place}: {e}"))
        }
    }
}

/// The type a declared claim is read as.
fn claim_ty(t: ClaimType) -> Ty {
    match t {
        ClaimType::String => Ty::String,
        ClaimType::Long => Ty::Long,
        ClaimType::Bool => Ty::Bool,
        ClaimType::SetOfStrings => Ty::Set(Box::new(Ty::String)),
        ClaimType::SetOfLongs => Ty::Set(Box::new(Ty::Long)),
    }
}

fn uid(ty: &str, id: &str) -> Result<EntityUid, String> {
    let name = EntityTypeName::from_str(ty).map_err(|e| e.to_string())?;
    Ok(EntityUid::from_type_name_and_id(name, EntityId::new(id)))
}

/// Why a call was not allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No policy permits it, or one forbids it.
    Denied,
    /// The request could not be built or evaluated (the reason, for the operator's log).
    Error(String),
}

/// A refusal saying `what` failed without Cedar's text, which may quote the request's values
/// (arguments, claims): that goes to the trace log only (`-vv`).
fn refused(what: &str, error: &dyn fmt::Display) -> Refusal {
    tracing::trace!(error = %error, "{what}");
    Refusal::Error(format!("{what} (Cedar's message is logged at -vv)"))
}

/// What went wrong in one policy's evaluation, naming the policy and the kind of error but no
/// value it evaluated.
fn evaluation_summary(error: &AuthorizationError) -> String {
    let AuthorizationError::PolicyEvaluationError(e) = error;
    let kind = match e.inner() {
        EvaluationError::EntityDoesNotExist(_) => "an entity that does not exist",
        EvaluationError::EntityAttrDoesNotExist(_) => "an entity attribute that does not exist",
        EvaluationError::RecordAttrDoesNotExist(_) => "a record attribute that does not exist",
        EvaluationError::FailedExtensionFunctionLookup(_) => "an unknown extension function",
        EvaluationError::TypeError(_) => "a type error",
        EvaluationError::WrongNumArguments(_) => "a wrong number of arguments",
        EvaluationError::IntegerOverflow(_) => "an integer overflow",
        EvaluationError::UnlinkedSlot(_) => "an unlinked template slot",
        EvaluationError::FailedExtensionFunctionExecution(_) => "a failed extension function call",
        EvaluationError::NonValue(_) => "an expression that is not a value",
        EvaluationError::RecursionLimit(_) => "the recursion limit",
        #[allow(unreachable_patterns)] // Cedar may add kinds.
        _ => "an evaluation error",
    };
    format!(
        "policy `{}` could not be evaluated: {kind} (Cedar's message, which quotes the values, \
         is logged at -vv)",
        e.policy_id()
    )
}

/// A bound tool's part of the schema.
struct ToolTyping {
    action: EntityUid,
    resource: EntityUid,
    arguments: Ty,
}

/// The policies validated against the schema generated for the bound tools: what every call is
/// authorized by.
pub(crate) struct Policies {
    set: PolicySet,
    schema: Schema,
    schema_text: String,
    /// The action entities (the groups' hierarchy), to which each request adds its caller.
    actions: Entities,
    claims: BTreeMap<String, ClaimType>,
    tools: BTreeMap<String, ToolTyping>,
    authorizer: Authorizer,
    count: usize,
}

impl fmt::Debug for Policies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policies")
            .field("policies", &self.count)
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// The Cedar schema (JSON format) for `tools` and the declared `claims`, with each tool's
/// argument type.
fn schema_json(
    claims: &BTreeMap<String, ClaimType>,
    tools: &[ToolSpec<'_>],
) -> (Value, BTreeMap<String, Ty>) {
    let claim_attrs: BTreeMap<String, Attr> = claims
        .iter()
        .map(|(name, t)| {
            (
                name.clone(),
                Attr {
                    ty: claim_ty(*t),
                    required: false,
                },
            )
        })
        .collect();
    let caller = Ty::Record(BTreeMap::from([
        (
            "authenticated".to_owned(),
            Attr {
                ty: Ty::Bool,
                required: true,
            },
        ),
        (
            "issuer".to_owned(),
            Attr {
                ty: Ty::String,
                required: true,
            },
        ),
        (
            "subject".to_owned(),
            Attr {
                ty: Ty::String,
                required: true,
            },
        ),
        (
            "scopes".to_owned(),
            Attr {
                ty: Ty::Set(Box::new(Ty::String)),
                required: true,
            },
        ),
        (
            "claims".to_owned(),
            Attr {
                ty: Ty::Record(claim_attrs),
                required: true,
            },
        ),
    ]));
    let mut actions = Map::new();
    actions.insert(READ_GROUP.into(), json!({}));
    actions.insert(WRITE_GROUP.into(), json!({}));
    actions.insert(
        DESTRUCTIVE_GROUP.into(),
        json!({"memberOf": [{"id": WRITE_GROUP}]}),
    );
    let mut typed = BTreeMap::new();
    for t in tools {
        let arguments = match ty_of(t.input, 0) {
            Some((ty @ Ty::Record(_), _)) => ty,
            _ => Ty::Record(BTreeMap::new()),
        };
        let group = match t.kind {
            ToolKind::Read => READ_GROUP,
            ToolKind::Write => WRITE_GROUP,
            ToolKind::Destructive => DESTRUCTIVE_GROUP,
        };
        let context = Ty::Record(BTreeMap::from([
            (
                "client".to_owned(),
                Attr {
                    ty: Ty::String,
                    required: true,
                },
            ),
            (
                "arguments".to_owned(),
                Attr {
                    ty: arguments.clone(),
                    required: true,
                },
            ),
        ]));
        actions.insert(
            t.local.to_owned(),
            json!({
                "memberOf": [{"id": group}],
                "appliesTo": {
                    "principalTypes": [CALLER_TYPE],
                    "resourceTypes": [TOOL_TYPE],
                    "context": ty_json(&context),
                }
            }),
        );
        typed.insert(t.local.to_owned(), arguments);
    }
    let names: Vec<&str> = tools.iter().map(|t| t.local).collect();
    let schema = json!({
        "": {
            "entityTypes": {
                CALLER_TYPE: {"shape": ty_json(&caller)},
                TOOL_TYPE: {"enum": names},
            },
            "actions": actions,
        }
    });
    (schema, typed)
}

impl Policies {
    /// Generates the schema for `tools` (the bound tools as discovered) and the declared
    /// claims, and validates every policy against it in strict mode: each mistake at its policy
    /// file and line.
    pub(crate) fn compile(
        sources: Sources,
        tools: &[ToolSpec<'_>],
        source: &ConfigSource,
    ) -> Result<Policies, Vec<ConfigError>> {
        let (json, typed) = schema_json(&sources.claims, tools);
        let unusable = |e: &dyn fmt::Display| {
            vec![source.error(
                "policies",
                format!("the policies' schema cannot be built: {e}"),
            )]
        };
        let fragment = SchemaFragment::from_json_value(json).map_err(|e| unusable(&e))?;
        // Only Caller and Tool are declared, so Cedar's built-in types need no `__cedar::`.
        let schema_text = fragment
            .to_cedarschema()
            .map_err(|e| unusable(&e))?
            .replace("__cedar::", "");
        let schema = Schema::from_schema_fragments([fragment]).map_err(|e| unusable(&e))?;
        let result = Validator::new(schema.clone()).validate(&sources.set, ValidationMode::Strict);
        // An unknown action also makes its policy apply to no action: said once.
        let unknown_action: HashSet<&PolicyId> = result
            .validation_errors()
            .filter(|e| matches!(e, ValidationError::UnrecognizedActionId(_)))
            .map(ValidationError::policy_id)
            .collect();
        let mut errors: Vec<ConfigError> = result
            .validation_errors()
            .filter(|e| {
                !(matches!(e, ValidationError::InvalidActionApplication(_))
                    && unknown_action.contains(e.policy_id()))
            })
            .map(|e| {
                let at = sources.origin.get(e.policy_id());
                match at.and_then(|(i, line)| Some((sources.files.get(*i)?, *line))) {
                    Some((file, line)) => diagnostic_error(file, e, line),
                    None => source.error("policies", e.to_string()),
                }
            })
            .collect();
        if !errors.is_empty() {
            errors.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
            errors.dedup();
            return Err(errors);
        }
        let actions = schema.action_entities().map_err(|e| unusable(&e))?;
        let mut typings = BTreeMap::new();
        for (local, arguments) in typed {
            let typing = ToolTyping {
                action: uid("Action", &local).map_err(|e| unusable(&e))?,
                resource: uid(TOOL_TYPE, &local).map_err(|e| unusable(&e))?,
                arguments,
            };
            typings.insert(local, typing);
        }
        Ok(Policies {
            count: sources.set.policies().count(),
            set: sources.set,
            schema,
            schema_text,
            actions,
            claims: sources.claims,
            tools: typings,
            authorizer: Authorizer::new(),
        })
    }

    /// The generated schema in Cedar's schema syntax (what `purra gateway --check -v` prints).
    pub(crate) fn schema_text(&self) -> &str {
        &self.schema_text
    }

    /// How many policies the files hold.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The caller as a Cedar entity.
    fn caller_entity(&self, principal: &EntityUid, caller: &Caller) -> Result<Entity, String> {
        let id = caller.identity.as_ref();
        let mut claims = Vec::new();
        if let Some(identity) = id {
            for (name, t) in &self.claims {
                match identity.claims.get(name) {
                    None | Some(Value::Null) => {}
                    Some(v) => {
                        let value = value_of(&claim_ty(*t), v, "").map_err(|_| {
                            format!("its token's claim {name:?} is not a {}", t.as_str())
                        })?;
                        claims.push((name.clone(), value));
                    }
                }
            }
        }
        let attrs = HashMap::from([
            (
                "authenticated".to_owned(),
                RestrictedExpression::new_bool(id.is_some()),
            ),
            (
                "issuer".to_owned(),
                RestrictedExpression::new_string(
                    id.and_then(|i| i.issuer.clone()).unwrap_or_default(),
                ),
            ),
            (
                "subject".to_owned(),
                RestrictedExpression::new_string(id.map(|i| i.subject.clone()).unwrap_or_default()),
            ),
            (
                "scopes".to_owned(),
                RestrictedExpression::new_set(
                    id.into_iter()
                        .flat_map(|i| i.scopes.iter())
                        .map(|s| RestrictedExpression::new_string(s.clone())),
                ),
            ),
            (
                "claims".to_owned(),
                RestrictedExpression::new_record(claims).map_err(|e| e.to_string())?,
            ),
        ]);
        Entity::new(principal.clone(), attrs, HashSet::new()).map_err(|e| e.to_string())
    }

    /// Whether `caller` may call the bound tool `tool` with `args` (already valid against the
    /// tool's input schema).
    pub(crate) fn authorize(
        &self,
        tool: &str,
        caller: &Caller,
        args: &Value,
    ) -> Result<(), Refusal> {
        let t = self
            .tools
            .get(tool)
            .ok_or_else(|| Refusal::Error(format!("the tool {tool:?} has no typing")))?;
        let principal = uid(CALLER_TYPE, &caller.principal).map_err(Refusal::Error)?;
        let entity = self
            .caller_entity(&principal, caller)
            .map_err(|why| Refusal::Error(format!("the caller cannot be described: {why}")))?;
        let entities = self
            .actions
            .clone()
            .add_entities([entity], Some(&self.schema))
            .map_err(|e| refused("the caller cannot be described", &e))?;
        let arguments = value_of(&t.arguments, args, "").map_err(|why| {
            Refusal::Error(format!("the arguments do not fit the policy schema: {why}"))
        })?;
        let context = Context::from_pairs([
            (
                "client".to_owned(),
                RestrictedExpression::new_string(caller.client.clone()),
            ),
            ("arguments".to_owned(), arguments),
        ])
        .map_err(|e| refused("the context cannot be built", &e))?;
        let request = Request::new(
            principal,
            t.action.clone(),
            t.resource.clone(),
            context,
            Some(&self.schema),
        )
        .map_err(|e| refused("the request does not fit the schema", &e))?;
        let response = self
            .authorizer
            .is_authorized(&request, &self.set, &entities);
        let errors: Vec<&AuthorizationError> = response.diagnostics().errors().collect();
        if !errors.is_empty() {
            // Cedar's own text quotes the values it evaluated (an overflow names both
            // operands): it is logged at trace only (`-vv`); the refusal says which policy
            // failed and how, never with what.
            let detail: Vec<String> = errors.iter().map(ToString::to_string).collect();
            tracing::trace!(error = %detail.join("; "), "policy evaluation failed");
            let summary: Vec<String> = errors.iter().map(|e| evaluation_summary(e)).collect();
            return Err(Refusal::Error(summary.join("; ")));
        }
        match response.decision() {
            Decision::Allow => Ok(()),
            Decision::Deny => Err(Refusal::Denied),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use purra_protocol::Principal;

    fn sources(policies: &str, claims: &[(&str, ClaimType)]) -> Result<Sources, Vec<String>> {
        let dir = std::env::temp_dir().join(format!(
            "purra-policy-unit-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("p.cedar");
        std::fs::write(&file, policies).unwrap();
        let config = PoliciesConfig {
            files: vec![file],
            claims: claims.iter().map(|(n, t)| ((*n).to_owned(), *t)).collect(),
        };
        let out = Sources::read(&config, &ConfigSource::default())
            .map_err(|e| e.iter().map(|e| strip(&e.to_string())).collect());
        let _ = std::fs::remove_dir_all(&dir);
        out
    }

    /// A message without the temporary directory.
    fn strip(m: &str) -> String {
        m.rsplit_once("/p.cedar")
            .map_or(m.to_owned(), |(_, rest)| format!("p.cedar{rest}"))
    }

    fn input() -> Value {
        json!({
            "type": "object",
            "properties": {
                "text": {"type": "string", "maxLength": 200},
                "count": {"type": "integer"},
                "ratio": {"type": "number"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "mode": {"enum": ["draft", "final"]},
                "note": {"type": ["string", "null"]},
                "doc": {"type": "object", "properties": {"path": {"type": "string"}},
                        "required": ["path"]}
            },
            "required": ["text", "note"]
        })
    }

    fn compile(policies: &str, claims: &[(&str, ClaimType)]) -> Result<Policies, Vec<String>> {
        let s = sources(policies, claims)?;
        let input = input();
        let empty = json!({"type": "object", "properties": {}});
        Policies::compile(
            s,
            &[
                ToolSpec {
                    local: "set_note",
                    kind: ToolKind::Write,
                    input: &input,
                },
                ToolSpec {
                    local: "drop_note",
                    kind: ToolKind::Destructive,
                    input: &empty,
                },
                ToolSpec {
                    local: "get_note",
                    kind: ToolKind::Read,
                    input: &empty,
                },
            ],
            &ConfigSource::default(),
        )
        .map_err(|e| e.iter().map(|e| strip(&e.to_string())).collect())
    }

    fn caller(principal: &str, claims: Value) -> Caller {
        let mut p = Principal::new(principal.rsplit('#').next().unwrap());
        p.issuer = Some("https://auth.example".into());
        p.scopes = ["mcp:read".to_owned()].into();
        p.claims = claims.as_object().cloned().unwrap_or_default();
        Caller {
            principal: principal.into(),
            client: "claude-code".into(),
            identity: Some(p),
        }
    }

    fn local() -> Caller {
        Caller {
            principal: "local".into(),
            client: "cli".into(),
            identity: None,
        }
    }

    #[test]
    fn the_schema_types_arguments_claims_and_groups() {
        let p = compile(
            "permit(principal, action, resource);",
            &[
                ("groups", ClaimType::SetOfStrings),
                ("level", ClaimType::Long),
            ],
        )
        .unwrap();
        assert_eq!(p.count(), 1);
        // No binary64 numbers in Cedar: `ratio` is not there; `note` (string or null) is
        // optional although required; `mode` is a String from its enum.
        assert_eq!(
            p.schema_text(),
            r#"entity Caller = {
  "authenticated": Bool,
  "claims": {
    "groups"?: Set<String>,
    "level"?: Long
  },
  "issuer": String,
  "scopes": Set<String>,
  "subject": String
};

entity Tool enum ["set_note", "drop_note", "get_note"];

action "Destructive" in [Action::"Write"];

action "Read";

action "Write";

action "drop_note" in [Action::"Destructive"] appliesTo {
  principal: [Caller],
  resource: [Tool],
  context: {
  "arguments": {  },
  "client": String
}
};

action "get_note" in [Action::"Read"] appliesTo {
  principal: [Caller],
  resource: [Tool],
  context: {
  "arguments": {  },
  "client": String
}
};

action "set_note" in [Action::"Write"] appliesTo {
  principal: [Caller],
  resource: [Tool],
  context: {
  "arguments": {
    "count"?: Long,
    "doc"?: {
      "path": String
    },
    "mode"?: String,
    "note"?: String,
    "tags"?: Set<String>,
    "text": String
  },
  "client": String
}
};
"#
        );
        // What the gateway prints parses back as a schema.
        assert!(Schema::from_cedarschema_str(p.schema_text()).is_ok());
    }

    #[test]
    fn policies_naming_what_the_schema_lacks_are_mistakes_at_their_line() {
        let errs = compile(
            "permit(principal, action, resource);\n\
             forbid(principal, action == Action::\"get_notes\", resource);\n\
             forbid(principal, action, resource == Tool::\"nope\");\n\
             forbid(principal, action == Action::\"set_note\", resource)\n  when { context.arguments.ratio > 1 };\n\
             forbid(principal, action, resource) when { principal.claims.groups.contains(\"x\") };\n\
             forbid(principal, action == Action::\"set_note\", resource) when { context.arguments.count > 1 };\n",
            &[("groups", ClaimType::SetOfStrings)],
        )
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "p.cedar:2: unrecognized action `Action::\"get_notes\"` (did you mean `Action::\"get_note\"`?)",
                "p.cedar:3: entity `Tool::\"nope\"` is of an enumerated entity type, but `\"nope\"` \
                 is not declared as a valid eid (valid entity eids: \"set_note\", \"drop_note\", \
                 \"get_note\")",
                "p.cedar:5: attribute `arguments.ratio` in context for Action::\"set_note\" not found \
                 (did you mean `note`?)",
                "p.cedar:6: unable to guarantee safety of access to optional attribute \
                 `claims.groups` on entity type `Caller` (try testing for the attribute's presence \
                 with `e.claims has groups && ..`)",
                "p.cedar:7: unable to guarantee safety of access to optional attribute \
                 `arguments.count` in context for Action::\"set_note\" (try testing for the \
                 attribute's presence with `context.arguments has count && ..`)",
            ]
        );
    }

    #[test]
    fn policies_are_found_where_they_start_past_comments_and_strings() {
        let text = "// a comment; with a semicolon\n\
                    permit(principal, action, resource)\n  when { context.client != \"a;b\\\"c\" };\n\
                    \n  // another; comment\n\
                    @id(\"x;y\")\nforbid(principal, action, resource);";
        let starts = policy_starts(text);
        let lines = LineIndex::new(text);
        let at: Vec<usize> = starts.iter().map(|o| lines.line(*o)).collect();
        assert_eq!(at, [2, 6]);
        // Each error at its line: in a policy's scope or in its condition (an error Cedar gives
        // no place, such as an unknown tool in a one-line scope, is placed where its policy
        // starts).
        let errs = compile(
            "// permits; everything\npermit(principal, action, resource);\n\n\
             forbid(\n  principal, action,\n  resource == Tool::\"nope\");\n\
             forbid(principal, action, resource)\n  when { resource == Tool::\"gone\" };\n",
            &[],
        )
        .unwrap_err();
        let eids = "(valid entity eids: \"set_note\", \"drop_note\", \"get_note\")";
        assert_eq!(
            errs,
            [
                format!(
                    "p.cedar:6: entity `Tool::\"nope\"` is of an enumerated entity type, but \
                     `\"nope\"` is not declared as a valid eid {eids}"
                ),
                format!(
                    "p.cedar:8: entity `Tool::\"gone\"` is of an enumerated entity type, but \
                     `\"gone\"` is not declared as a valid eid {eids}"
                ),
            ]
        );
    }

    #[test]
    fn syntax_mistakes_and_templates_are_placed_before_any_schema() {
        let errs = sources(
            "permit(principal, action, resource);\n\npermit(principal action, resource);\n",
            &[],
        )
        .err()
        .unwrap();
        assert_eq!(errs, ["p.cedar:3: unexpected token `action`"]);
        let errs = sources(
            "permit(principal, action, resource);\npermit(principal == ?principal, action, resource);\n",
            &[],
        )
        .err()
        .unwrap();
        assert_eq!(
            errs,
            [
                "p.cedar:2: a policy template (?principal, ?resource) never applies: the gateway \
              links no template; write the policy without slots"
            ]
        );
    }

    #[test]
    fn decisions_follow_the_policies_with_claims_scopes_and_arguments() {
        let p = compile(
            "permit(principal, action in Action::\"Read\", resource);\n\
             permit(principal, action in Action::\"Write\", resource)\n\
               when { principal.authenticated && principal.scopes.contains(\"mcp:read\") };\n\
             forbid(principal == Caller::\"https://auth.example#bob\", action == Action::\"set_note\", resource);\n\
             forbid(principal, action in Action::\"Destructive\", resource)\n\
               unless { principal.claims has groups && principal.claims.groups.contains(\"admins\") };\n\
             forbid(principal, action == Action::\"set_note\", resource)\n\
               when { context.arguments has mode && context.arguments.mode == \"final\" && context.client != \"claude-code\" };\n\
             forbid(principal, action == Action::\"set_note\", resource)\n\
               when { context.arguments has count && context.arguments.count > 10 };\n",
            &[("groups", ClaimType::SetOfStrings)],
        )
        .unwrap();
        let alice = caller("https://auth.example#alice", json!({"groups": ["admins"]}));
        let bob = caller("https://auth.example#bob", json!({"groups": ["admins"]}));
        let carol = caller("https://auth.example#carol", json!({"groups": "admins"}));
        let args = json!({"text": "hi", "note": null, "mode": "final", "count": 10});
        assert_eq!(p.authorize("set_note", &alice, &args), Ok(()));
        assert_eq!(p.authorize("set_note", &bob, &args), Err(Refusal::Denied));
        assert_eq!(p.authorize("get_note", &bob, &json!({})), Ok(()));
        assert_eq!(p.authorize("drop_note", &alice, &json!({})), Ok(()));
        assert_eq!(
            p.authorize(
                "drop_note",
                &caller("https://auth.example#dan", json!({})),
                &json!({})
            ),
            Err(Refusal::Denied)
        );
        // Unauthenticated local callers write nothing here; they read.
        assert_eq!(
            p.authorize("set_note", &local(), &args),
            Err(Refusal::Denied)
        );
        assert_eq!(p.authorize("get_note", &local(), &json!({})), Ok(()));
        // Arguments and the client decide too.
        assert_eq!(
            p.authorize(
                "set_note",
                &alice,
                &json!({"text": "hi", "note": null, "count": 11})
            ),
            Err(Refusal::Denied)
        );
        let mut other_client = alice.clone();
        other_client.client = "other".into();
        assert_eq!(
            p.authorize("set_note", &other_client, &args),
            Err(Refusal::Denied)
        );
        assert_eq!(
            p.authorize(
                "set_note",
                &other_client,
                &json!({"text": "hi", "note": "n", "mode": "draft"})
            ),
            Ok(())
        );
        // A declared claim of another type: the policies cannot be evaluated as written.
        assert_eq!(
            p.authorize("get_note", &carol, &json!({})),
            Err(Refusal::Error(
                "the caller cannot be described: its token's claim \"groups\" is not a Set<String>"
                    .into()
            ))
        );
        // Arguments outside the typing (an integer Cedar cannot hold).
        assert_eq!(
            p.authorize(
                "set_note",
                &alice,
                &json!({"text": "hi", "note": null, "count": u64::MAX})
            ),
            Err(Refusal::Error(
                "the arguments do not fit the policy schema: /count: not an integer within the \
                 signed 64-bit range"
                    .into()
            ))
        );
    }

    #[test]
    fn an_evaluation_error_refuses_instead_of_skipping_a_forbid() {
        let p = compile(
            "permit(principal, action, resource);\n\
             forbid(principal, action == Action::\"set_note\", resource)\n\
               when { context.arguments has count && context.arguments.count + 9223372036854775807 > 0 };\n",
            &[],
        )
        .unwrap();
        let alice = caller("https://auth.example#alice", json!({}));
        // Without `count` the forbid does not apply.
        assert_eq!(
            p.authorize("set_note", &alice, &json!({"text": "x", "note": null})),
            Ok(())
        );
        let r = p.authorize(
            "set_note",
            &alice,
            &json!({"text": "x", "note": null, "count": 5}),
        );
        match r {
            Err(Refusal::Error(why)) => assert!(why.contains("overflow"), "{why}"),
            other => panic!("expected an evaluation error, got {other:?}"),
        }
    }

    /// The guide's policy file (docs/src/gateway/auth.md, once the README's) is valid against the
    /// schema of its example configuration (`get_note` read, `set_note` write taking `text`), and
    /// its mistakes read as shown there.
    #[test]
    fn the_readme_policies_are_valid_and_their_mistakes_as_shown() {
        let readme = include_str!("../../../../docs/src/gateway/auth.md");
        let block = |fence: &str| {
            let from = readme.find(fence).expect("the block") + fence.len();
            readme[from..from + readme[from..].find("```").expect("its end")].to_owned()
        };
        let policies = block("and `access.cedar` beside it:\n\n```cedar\n");
        let claims = [
            ("groups", ClaimType::SetOfStrings),
            ("email_verified", ClaimType::Bool),
        ];
        let note = json!({"type": "object", "properties": {"text": {"type": "string"}},
                          "required": ["text"]});
        let empty = json!({"type": "object", "properties": {}});
        let compile_readme = |text: &str| {
            Policies::compile(
                sources(text, &claims)?,
                &[
                    ToolSpec {
                        local: "get_note",
                        kind: ToolKind::Read,
                        input: &empty,
                    },
                    ToolSpec {
                        local: "set_note",
                        kind: ToolKind::Write,
                        input: &note,
                    },
                ],
                &ConfigSource::default(),
            )
            .map_err(|e| {
                e.iter()
                    .map(|e| format!("  {}", strip(&e.to_string())))
                    .collect::<Vec<_>>()
            })
        };
        let p = compile_readme(&policies).expect("valid");
        assert_eq!(p.count(), 5);
        let alice = caller(
            "https://auth.example#alice",
            json!({"groups": ["editors"], "email_verified": true}),
        );
        let mut writer = alice.clone();
        writer
            .identity
            .as_mut()
            .unwrap()
            .scopes
            .insert("mcp:write".into());
        assert_eq!(p.authorize("get_note", &alice, &json!({})), Ok(()));
        assert_eq!(
            p.authorize("set_note", &alice, &json!({"text": "hi"})),
            Err(Refusal::Denied)
        );
        assert_eq!(
            p.authorize("set_note", &writer, &json!({"text": "hi"})),
            Ok(())
        );
        assert_eq!(
            p.authorize("set_note", &writer, &json!({"text": "hi!!!"})),
            Err(Refusal::Denied)
        );
        let mut bob = writer.clone();
        bob.principal = "https://auth.example#bob".into();
        assert_eq!(
            p.authorize("set_note", &bob, &json!({"text": "hi"})),
            Err(Refusal::Denied)
        );
        assert_eq!(p.authorize("get_note", &bob, &json!({})), Ok(()));

        let broken = policies
            .replace(
                "action == Action::\"set_note\", resource);",
                "action == Action::\"set_notes\", resource);",
            )
            .replace("arguments.text", "arguments.title");
        let shown = block("```text\npurra: the configuration has 2 mistakes:\n");
        let mistakes = compile_readme(&broken).expect_err("mistakes");
        assert_eq!(
            mistakes.join("\n") + "\n",
            shown.replace("access.cedar", "p.cedar")
        );
    }

    /// A policy for an action group none of whose tools is bound applies to nothing: Cedar's
    /// strict validation refuses it, as it refuses any policy that can never apply.
    #[test]
    fn a_policy_for_a_group_with_no_bound_tool_is_a_mistake() {
        let s = sources(
            "permit(principal, action, resource);\n\
             forbid(principal, action in Action::\"Destructive\", resource);\n",
            &[],
        )
        .unwrap();
        let empty = json!({"type": "object", "properties": {}});
        let errs = Policies::compile(
            s,
            &[ToolSpec {
                local: "get_note",
                kind: ToolKind::Read,
                input: &empty,
            }],
            &ConfigSource::default(),
        )
        .unwrap_err();
        let errs: Vec<String> = errs.iter().map(|e| strip(&e.to_string())).collect();
        assert_eq!(
            errs,
            ["p.cedar:2: unable to find an applicable action given the policy scope constraints"]
        );
    }

    #[test]
    fn the_digest_follows_the_files_and_the_claims() {
        let a = sources("permit(principal, action, resource);", &[]).unwrap();
        let b = sources("permit(principal, action, resource);", &[]).unwrap();
        let c = sources("permit(principal, action, resource);\n", &[]).unwrap();
        let d = sources(
            "permit(principal, action, resource);",
            &[("groups", ClaimType::SetOfStrings)],
        )
        .unwrap();
        assert_eq!(a.digest(), b.digest());
        assert_eq!(a.digest().len(), 16);
        assert_ne!(a.digest(), c.digest());
        assert_ne!(a.digest(), d.digest());
    }
}
