//! Agent skills over MCP: the Skills extension (`io.modelcontextprotocol/skills`, SEP-2640).
//!
//! A skill is a folder of files with a `SKILL.md` at its root, whose YAML frontmatter names it
//! (`name`, `description`, anything else the author wrote). Each file is a resource,
//! `skill://<skill-path>/<file-path>`, read with `resources/read`; the skill's path ends in its
//! name. A server that declares the extension answers `skills/list` (every skill it serves, each
//! entry a complete manifest: the frontmatter verbatim and every file's URI, SHA-256 digest and
//! size) and `skills/get` (one entry by its `SKILL.md` URI), and with `directoryRead` also
//! `resources/directory/read` (the direct children of a skill's folder).
//!
//! Server: [`ServerBuilder::skills_dir`](crate::ServerBuilder::skills_dir) serves a folder of
//! skill folders, [`Server::add_skill`](crate::Server::add_skill) a [`SkillBundle`] built in
//! code. Client: [`Connection::skills`](crate::Connection::skills) is the listing, kept in sync;
//! [`Connection::read_skill`](crate::Connection::read_skill) reads one file and verifies it
//! against its entry (size, digest, and for `SKILL.md` the frontmatter).
//!
//! ```no_run
//! use purra_protocol::skills::SkillBundle;
//! use purra_protocol::{Client, ClientOptions, Server, StdioCommand};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // A server: the skills of ./skills, and one built in code.
//! let server = Server::builder("docs", "1.0.0").skills_dir("skills")?.build();
//! server.add_skill(SkillBundle::new("git-workflow").file(
//!     "SKILL.md",
//!     "---\nname: git-workflow\ndescription: Commit like us\n---\nRebase.\n",
//! ))?;
//!
//! // A client: the listing, and one file read and checked against its entry (or an error).
//! let conn = Client::connect_stdio(StdioCommand::new("docs-server"), ClientOptions::default()).await?;
//! for skill in conn.skills().iter() {
//!     let md = conn.read_skill(skill, "SKILL.md").await?;
//!     println!("{}: {}", skill.name(), md.body.unwrap_or_default());
//! }
//! # Ok(()) }
//! ```

mod dir;
pub mod frontmatter;

use std::collections::BTreeMap;
use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::Digest as _;

use crate::types::{JsonObject, Resource};

pub use dir::{load_dir, LoadedSkills, SkillsDirError, SkillsDirOptions};

/// The extension's name under `capabilities.extensions`.
pub const EXTENSION_ID: &str = "io.modelcontextprotocol/skills";
/// The `mimeType` of a directory resource.
pub const DIRECTORY_MIME_TYPE: &str = "inode/directory";
/// The `mimeType` a `SKILL.md` is served with.
pub const SKILL_MD_MIME_TYPE: &str = "text/markdown";
/// The file every skill has at its root.
pub const SKILL_MD: &str = "SKILL.md";
/// The scheme skills are served under.
pub const URI_SCHEME: &str = "skill://";
/// The most files one skill may have that every host must accept (SEP-2640's limit), its
/// `SKILL.md` included.
pub const MAX_FILES_PER_SKILL: usize = 512;
/// The most bytes one skill's files may have together that every host must accept (16 MiB,
/// SEP-2640's limit).
pub const MAX_BYTES_PER_SKILL: u64 = 16 * 1024 * 1024;

/// The extension's methods.
pub mod methods {
    /// Lists the skills a server serves (paged).
    pub const LIST: &str = "skills/list";
    /// One skill's entry by its `SKILL.md` URI.
    pub const GET: &str = "skills/get";
    /// The direct children of a directory resource (with `directoryRead`).
    pub const DIRECTORY_READ: &str = "resources/directory/read";
}

/// One file of a skill: its URI, the SHA-256 digest of its bytes (`sha256:` and 64 lowercase hex
/// digits) and their length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SkillFile {
    /// The file's resource URI.
    pub uri: String,
    /// `sha256:` and the lowercase hex SHA-256 of the file's bytes.
    pub digest: String,
    /// The file's length in bytes.
    pub size: u64,
}

impl SkillFile {
    /// The entry of a file with these bytes.
    pub fn of(uri: impl Into<String>, bytes: &[u8]) -> Self {
        SkillFile {
            uri: uri.into(),
            digest: digest(bytes),
            size: bytes.len() as u64,
        }
    }
}

/// A skill's files: every one of them listed with its digest, or `"dynamic"` (generated content
/// that cannot be verified).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillResources {
    /// Every file of the skill, its `SKILL.md` included, each once.
    Files(Vec<SkillFile>),
    /// `"dynamic"`: the server publishes no digests.
    Dynamic,
}

impl Serialize for SkillResources {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SkillResources::Files(f) => f.serialize(s),
            SkillResources::Dynamic => s.serialize_str("dynamic"),
        }
    }
}

impl<'de> Deserialize<'de> for SkillResources {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) if s == "dynamic" => Ok(SkillResources::Dynamic),
            v @ Value::Array(_) => serde_json::from_value(v)
                .map(SkillResources::Files)
                .map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "resources must be an array of {{uri, digest, size}} or \"dynamic\", found {}",
                kind_of(&other)
            ))),
        }
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One skill entry, as `skills/list` and `skills/get` carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Skill {
    /// The URI of the skill's `SKILL.md`.
    pub uri: String,
    /// The `SKILL.md` frontmatter, every field as written.
    pub frontmatter: JsonObject,
    /// The skill's files, or `"dynamic"`.
    pub resources: SkillResources,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl Skill {
    /// An entry.
    pub fn new(uri: impl Into<String>, frontmatter: JsonObject, resources: SkillResources) -> Self {
        Skill {
            uri: uri.into(),
            frontmatter,
            resources,
            meta: None,
        }
    }

    /// The frontmatter's `name` (empty when it has none).
    pub fn name(&self) -> &str {
        self.frontmatter
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The frontmatter's `description` (empty when it has none).
    pub fn description(&self) -> &str {
        self.frontmatter
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The skill's folder: its URI without `/SKILL.md`.
    pub fn root(&self) -> &str {
        self.uri
            .strip_suffix(SKILL_MD)
            .and_then(|r| r.strip_suffix('/'))
            .unwrap_or(&self.uri)
    }

    /// The files, or none for a dynamic skill.
    pub fn files(&self) -> &[SkillFile] {
        match &self.resources {
            SkillResources::Files(f) => f,
            SkillResources::Dynamic => &[],
        }
    }

    /// The number of files and their bytes together (zero for a dynamic skill).
    pub fn totals(&self) -> (usize, u64) {
        let f = self.files();
        (f.len(), f.iter().map(|f| f.size).sum())
    }

    /// Every way this entry breaks SEP-2640's rules, in order (empty when it is valid): the URI a
    /// `SKILL.md` in a named folder without query or fragment; the frontmatter's `name` by the
    /// Agent Skills naming rules and equal to the folder's name; a `description` of 1 to 1024
    /// characters; every file listed once, each the `SKILL.md` or inside the folder, with a
    /// well-formed digest; the `SKILL.md` among them.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let Some(root) = skill_root(&self.uri) else {
            out.push(format!(
                "uri {:?} must be a URI ending in /SKILL.md inside a named folder, without query or fragment",
                self.uri
            ));
            return out;
        };
        let folder = last_segment(root);
        match self.frontmatter.get("name") {
            Some(Value::String(name)) if !is_skill_name(name) => out.push(format!(
                "frontmatter name {name:?} must be 1 to 64 lowercase letters, digits and single hyphens"
            )),
            Some(Value::String(name)) if folder.as_deref() != Some(name.as_str()) => {
                out.push(format!(
                    "frontmatter name {name:?} must equal the skill's folder name {:?}",
                    folder.unwrap_or_default()
                ))
            }
            Some(Value::String(_)) => {}
            _ => out.push("frontmatter must have a string name".into()),
        }
        match self.frontmatter.get("description") {
            Some(Value::String(d)) if d.is_empty() || d.chars().count() > 1024 => {
                out.push("frontmatter description must be 1 to 1024 characters".into())
            }
            Some(Value::String(_)) => {}
            _ => out.push("frontmatter must have a string description".into()),
        }
        if let SkillResources::Files(files) = &self.resources {
            let mut seen = std::collections::HashSet::new();
            let mut has_self = false;
            let own = decoded(&self.uri);
            for f in files {
                let key = decoded(&f.uri);
                if !seen.insert(key.clone()) {
                    out.push(format!("resource {:?} is listed more than once", f.uri));
                }
                if key == own {
                    has_self = true;
                } else if relative_path(root, &f.uri).is_none() {
                    out.push(format!(
                        "resource {:?} is not a file inside the skill's folder {root}",
                        f.uri
                    ));
                }
                if !is_digest(&f.digest) {
                    out.push(format!(
                        "resource {:?} has digest {:?}, not sha256: and 64 lowercase hex digits",
                        f.uri, f.digest
                    ));
                }
            }
            if !has_self {
                out.push(format!("resources must list the skill's own {}", self.uri));
            }
        }
        out
    }

    /// The entry of `file`, a path relative to the skill's folder (`references/FORMS.md`, or
    /// `SKILL.md`) or a URI: found however either side percent-encodes its name.
    pub fn file(&self, file: &str) -> Option<&SkillFile> {
        let want = self.resolve(file)?;
        let want = decoded(&want);
        self.files().iter().find(|f| decoded(&f.uri) == want)
    }

    /// The URI `file` names: a URI as it is (without a fragment), a relative path joined to the
    /// skill's folder; `None` for a path with `..`, `.` or empty segments.
    pub fn resolve(&self, file: &str) -> Option<String> {
        let file = file.split('#').next().unwrap_or(file);
        if file.contains("://") {
            return Some(file.to_owned());
        }
        let segments: Vec<&str> = file.split('/').collect();
        if segments
            .iter()
            .any(|s| s.is_empty() || *s == "." || *s == "..")
        {
            return None;
        }
        Some(format!(
            "{}/{}",
            self.root(),
            segments
                .iter()
                .map(|s| encode_segment(s))
                .collect::<Vec<_>>()
                .join("/")
        ))
    }

    /// What `resources/list` shows of the skill's `SKILL.md`.
    pub fn listing(&self) -> Resource {
        let mut r =
            Resource::new(&self.uri, self.name()).with_mime_type(SKILL_MD_MIME_TYPE.to_owned());
        let d = self.description();
        if !d.is_empty() {
            r.description = Some(d.to_owned());
        }
        r.size = self.file(SKILL_MD).map(|f| f.size);
        r
    }
}

/// `sha256:` and the lowercase hex SHA-256 of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    let hash = sha2::Sha256::digest(bytes);
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Whether `d` is `sha256:` and 64 lowercase hex digits.
pub fn is_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Whether `name` follows the Agent Skills naming rules: 1 to 64 characters, lowercase letters
/// and digits, hyphens only between them and never two in a row.
pub fn is_skill_name(name: &str) -> bool {
    let n = name.chars().count();
    (1..=64).contains(&n)
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name
            .chars()
            .all(|c| c == '-' || (c.is_alphanumeric() && !c.is_uppercase()))
}

/// The folder of a `…/SKILL.md` URI in a named folder, without query or fragment.
pub fn skill_root(uri: &str) -> Option<&str> {
    if uri.contains(['?', '#']) || uri.chars().any(char::is_whitespace) {
        return None;
    }
    let scheme_end = uri.find("://")?;
    let scheme = &uri[..scheme_end];
    if scheme.is_empty()
        || !scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return None;
    }
    let root = uri.strip_suffix(SKILL_MD)?.strip_suffix('/')?;
    let path = root.get(scheme_end + 3..)?;
    (!path.is_empty() && !path.ends_with('/') && path.split('/').all(|s| !s.is_empty()))
        .then_some(root)
}

/// The decoded last segment of a folder URI.
fn last_segment(root: &str) -> Option<String> {
    let path = &root[root.find("://")? + 3..];
    let last = path.rsplit('/').next()?;
    String::from_utf8(percent_decode(last)).ok()
}

/// The decoded path of `uri` below `root`, when it is a file strictly inside: no segment empty,
/// `.` or `..`, none decoding to a `/` or NUL, no query or fragment.
pub fn relative_path(root: &str, uri: &str) -> Option<String> {
    let rest = uri.strip_prefix(root)?.strip_prefix('/')?;
    if rest.contains(['?', '#']) {
        return None;
    }
    let mut out = Vec::new();
    for seg in rest.split('/') {
        let d = String::from_utf8(percent_decode(seg)).ok()?;
        if d.is_empty() || d == "." || d == ".." || d.contains(['/', '\0']) {
            return None;
        }
        out.push(d);
    }
    Some(out.join("/"))
}

/// Whether `a` and `b` name the same resource however each percent-encodes its name
/// (`Q&A.md`, `Q%26A.md`).
pub fn same_uri(a: &str, b: &str) -> bool {
    a == b || decoded(a) == decoded(b)
}

/// `uri` with every percent-escape decoded, for comparing two spellings of one name.
fn decoded(uri: &str) -> Vec<u8> {
    percent_decode(uri)
}

/// `s` with every `%XX` escape (two hexadecimal digits) decoded. An invalid escape — a `%` not
/// followed by two hexadecimal digits (`%4`, `%zz`, `%€`, a trailing `%`) — is kept literally,
/// so a malformed name finds nothing rather than failing; decoding works on bytes, never
/// slicing the string, so any text is safe here.
pub(crate) fn percent_decode(s: &str) -> Vec<u8> {
    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if let (Some(hi), Some(lo)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            ) {
                out.push(hi << 4 | lo);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// One path segment as a URI segment: unreserved characters as they are, every other byte
/// percent-encoded.
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `skill://` and the encoded segments of `path` (`/`-separated).
pub fn skill_uri(path: &str) -> String {
    let mut out = String::from(URI_SCHEME);
    out.push_str(
        &path
            .split('/')
            .map(encode_segment)
            .collect::<Vec<_>>()
            .join("/"),
    );
    out
}

/// The MIME type a skill file is served with, from its extension (`None` when unknown).
pub fn mime_type_of(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase())?;
    Some(match ext.as_str() {
        "md" | "markdown" => SKILL_MD_MIME_TYPE,
        "txt" => "text/plain",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "xml" => "application/xml",
        "js" | "mjs" => "text/javascript",
        "ts" => "text/typescript",
        "py" => "text/x-python",
        "rs" => "text/x-rust",
        "sh" | "bash" => "application/x-sh",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        _ => return None,
    })
}

/// Why a skill cannot be served or read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkillError {
    /// The skill (its path or URI).
    pub skill: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for SkillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "skill {}: {}", self.skill, self.reason)
    }
}

impl std::error::Error for SkillError {}

/// A skill built in code: its path in the server's skill namespace (`git-workflow`,
/// `acme/billing/refunds`; the last segment its name) and its files by path relative to its
/// folder (`SKILL.md`, `references/GUIDE.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillBundle {
    path: String,
    files: BTreeMap<String, Vec<u8>>,
}

impl SkillBundle {
    /// A skill at `path` with no files yet.
    pub fn new(path: impl Into<String>) -> Self {
        SkillBundle {
            path: path.into(),
            files: BTreeMap::new(),
        }
    }

    /// Adds (or replaces) the file at `path` relative to the skill's folder.
    pub fn file(mut self, path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        self.files.insert(path.into(), bytes.into());
        self
    }

    /// The skill's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The entry and the served files (URI to bytes): the frontmatter read from `SKILL.md`,
    /// every file digested, the entry checked against SEP-2640's rules and limits. Paths with
    /// `..`, `.`, empty segments, a backslash or NUL are refused.
    pub fn build(&self) -> Result<(Skill, BTreeMap<String, Vec<u8>>), SkillError> {
        let fail = |reason: String| SkillError {
            skill: self.path.clone(),
            reason,
        };
        check_relative(&self.path).map_err(|r| fail(format!("the skill's path {r}")))?;
        let mut served = BTreeMap::new();
        let mut files = Vec::new();
        for (path, bytes) in &self.files {
            check_relative(path).map_err(|r| fail(format!("the file path {path:?} {r}")))?;
            let uri = skill_uri(&format!("{}/{path}", self.path));
            files.push(SkillFile::of(&uri, bytes));
            served.insert(uri, bytes.clone());
        }
        let manifest = self
            .files
            .get(SKILL_MD)
            .ok_or_else(|| fail("has no SKILL.md".into()))?;
        let skill = entry_of(
            &skill_uri(&format!("{}/{SKILL_MD}", self.path)),
            manifest,
            files,
        )
        .map_err(fail)?;
        Ok((skill, served))
    }
}

/// Why `path` is not a relative path of plain segments, if it is not.
fn check_relative(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("is empty".into());
    }
    if path.contains(['\\', '\0']) {
        return Err("has a backslash or NUL".into());
    }
    if path
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err("must be relative, without \"..\", \".\" or empty segments".into());
    }
    Ok(())
}

/// A skill's entry from its `SKILL.md` bytes and its files: the frontmatter read, the files
/// sorted by URI, the rules and SEP-2640's limits checked.
pub(crate) fn entry_of(
    uri: &str,
    manifest: &[u8],
    mut files: Vec<SkillFile>,
) -> Result<Skill, String> {
    let text = std::str::from_utf8(manifest).map_err(|_| "SKILL.md is not UTF-8".to_owned())?;
    let md = frontmatter::parse_skill_md(text).map_err(|e| format!("SKILL.md: {e}"))?;
    files.sort_by(|a, b| a.uri.cmp(&b.uri));
    let skill = Skill::new(uri, md.frontmatter, SkillResources::Files(files));
    let problems = skill.problems();
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let (n, bytes) = skill.totals();
    if n > MAX_FILES_PER_SKILL || bytes > MAX_BYTES_PER_SKILL {
        return Err(format!(
            "{n} files of {bytes} bytes exceed SEP-2640's limit of {MAX_FILES_PER_SKILL} files and {MAX_BYTES_PER_SKILL} bytes a skill"
        ));
    }
    Ok(skill)
}

/// The settings a server declares for the extension.
pub fn server_settings(directory_read: bool) -> JsonObject {
    let mut o = JsonObject::new();
    if directory_read {
        o.insert("directoryRead".into(), Value::Bool(true));
    }
    o
}

/// Whether the extension's settings (a server's, as declared) promise `resources/directory/read`.
pub fn settings_directory_read(settings: Option<&JsonObject>) -> bool {
    settings
        .and_then(|s| s.get("directoryRead"))
        .and_then(Value::as_bool)
        == Some(true)
}

/// The result of `skills/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListSkillsResult {
    /// One page of entries.
    pub skills: Vec<Skill>,
    /// Where the next page starts.
    #[serde(
        default,
        rename = "nextCursor",
        skip_serializing_if = "Option::is_none"
    )]
    pub next_cursor: Option<String>,
}

/// The result of `skills/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GetSkillResult {
    /// The entry.
    pub skill: Skill,
}

/// The result of `resources/directory/read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReadDirectoryResult {
    /// One page of the directory's direct children (subdirectories with
    /// [`DIRECTORY_MIME_TYPE`]).
    pub resources: Vec<Resource>,
    /// Where the next page starts.
    #[serde(
        default,
        rename = "nextCursor",
        skip_serializing_if = "Option::is_none"
    )]
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MD: &str =
        "---\nname: refunds\ndescription: Process refunds\nlicense: MIT\n---\n# Refunds\n";

    /// Issue 43 finding 4: an invalid escape is kept literally, never sliced on a byte offset
    /// (`%a€` panicked: the slice `a\xe2` ends inside `€`).
    #[test]
    fn finding_4_malformed_escapes_are_kept_literally() {
        for (text, want) in [
            ("%a€", "%a€".as_bytes().to_vec()),
            ("%€", "%€".as_bytes().to_vec()),
            ("%€a", "%€a".as_bytes().to_vec()),
            ("a%", b"a%".to_vec()),
            ("%", b"%".to_vec()),
            ("%4", b"%4".to_vec()),
            ("x%4", b"x%4".to_vec()),
            ("%zz", b"%zz".to_vec()),
            // `u8::from_str_radix` takes a sign: `%+4` is not an escape.
            ("%+4", b"%+4".to_vec()),
            ("%-0", b"%-0".to_vec()),
            ("%41%4a%4A", b"AJJ".to_vec()),
            ("%%41", b"%A".to_vec()),
            ("%e2%82%ac", "€".as_bytes().to_vec()),
            ("Q%26A.md", b"Q&A.md".to_vec()),
        ] {
            assert_eq!(percent_decode(text), want, "{text:?}");
        }
        let root = "skill://acme/refunds";
        assert_eq!(
            relative_path(root, "skill://acme/refunds/%a€"),
            Some("%a€".into())
        );
        assert_eq!(
            relative_path(root, "skill://acme/refunds/a%"),
            Some("a%".into())
        );
        assert_eq!(
            relative_path(root, "skill://acme/refunds/%4"),
            Some("%4".into())
        );
        assert!(!same_uri("skill://a/%a€", "skill://a/%a"));
        assert!(same_uri("skill://a/%€", "skill://a/%€"));
        assert_eq!(last_segment("skill://a/b%"), Some("b%".into()));
        assert_eq!(last_segment("skill://a/%e2"), None);
    }

    #[test]
    fn a_bundle_builds_its_entry() {
        let (skill, served) = SkillBundle::new("acme/billing/refunds")
            .file("SKILL.md", MD)
            .file("examples/Q&A email.md", "hi")
            .build()
            .unwrap();
        assert_eq!(
            serde_json::to_value(&skill).unwrap(),
            json!({
                "uri": "skill://acme/billing/refunds/SKILL.md",
                "frontmatter": {"name": "refunds", "description": "Process refunds", "license": "MIT"},
                "resources": [
                    {"uri": "skill://acme/billing/refunds/SKILL.md", "digest": digest(MD.as_bytes()), "size": MD.len()},
                    {"uri": "skill://acme/billing/refunds/examples/Q%26A%20email.md", "digest": digest(b"hi"), "size": 2},
                ]
            })
        );
        assert_eq!(served.len(), 2);
        assert_eq!(skill.root(), "skill://acme/billing/refunds");
        assert_eq!(skill.file("examples/Q&A email.md").unwrap().size, 2);
        assert_eq!(
            skill
                .file("skill://acme/billing/refunds/examples/Q%26A%20email.md")
                .unwrap()
                .size,
            2
        );
        assert!(skill.file("../x").is_none() && skill.file("examples/other.md").is_none());
        assert_eq!(
            serde_json::to_value(skill.listing()).unwrap(),
            json!({"uri": "skill://acme/billing/refunds/SKILL.md", "name": "refunds",
                   "description": "Process refunds", "mimeType": "text/markdown", "size": MD.len()})
        );
        assert_eq!(
            digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn a_bundle_that_breaks_a_rule_is_refused_with_its_reason() {
        let e = |b: SkillBundle| b.build().unwrap_err().to_string();
        assert_eq!(
            e(SkillBundle::new("other").file("SKILL.md", MD)),
            "skill other: frontmatter name \"refunds\" must equal the skill's folder name \"other\""
        );
        assert_eq!(
            e(SkillBundle::new("refunds").file("SKILL.md", MD).file("../x", "y")),
            "skill refunds: the file path \"../x\" must be relative, without \"..\", \".\" or empty segments"
        );
        assert_eq!(
            e(SkillBundle::new("refunds").file("a.md", "y")),
            "skill refunds: has no SKILL.md"
        );
        assert_eq!(
            e(SkillBundle::new("refunds").file("SKILL.md", "no frontmatter")),
            "skill refunds: SKILL.md: line 1: SKILL.md must begin with a \"---\" line"
        );
        assert_eq!(
            e(SkillBundle::new("Big").file("SKILL.md", "---\nname: Big\ndescription: x\n---\n")),
            "skill Big: frontmatter name \"Big\" must be 1 to 64 lowercase letters, digits and single hyphens"
        );
        let big = SkillBundle::new("refunds")
            .file("SKILL.md", MD)
            .file("blob.bin", vec![0u8; MAX_BYTES_PER_SKILL as usize]);
        assert_eq!(
            e(big),
            format!("skill refunds: 2 files of {} bytes exceed SEP-2640's limit of 512 files and 16777216 bytes a skill", MAX_BYTES_PER_SKILL as usize + MD.len())
        );
    }

    #[test]
    fn entries_from_elsewhere_are_checked_by_the_rules() {
        let entry = |v: Value| serde_json::from_value::<Skill>(v).unwrap().problems();
        let d = digest(b"x");
        assert_eq!(
            entry(
                json!({"uri": "skill://a/SKILL.md", "frontmatter": {"name": "a", "description": "d"},
                          "resources": [{"uri": "skill://a/SKILL.md", "digest": d, "size": 1}]})
            ),
            Vec::<String>::new()
        );
        assert_eq!(
            entry(
                json!({"uri": "skill://a/SKILL.md", "frontmatter": {"name": "a", "description": "d"},
                          "resources": "dynamic"})
            ),
            Vec::<String>::new()
        );
        assert_eq!(
            entry(json!({"uri": "skill://a/SKILL.md", "frontmatter": {"name": "b"},
                          "resources": [{"uri": "skill://a/../x", "digest": "sha256:AB", "size": 1},
                                        {"uri": "skill://a/../x", "digest": d, "size": 1}]})),
            vec![
                "frontmatter name \"b\" must equal the skill's folder name \"a\"".to_owned(),
                "frontmatter must have a string description".to_owned(),
                "resource \"skill://a/../x\" is not a file inside the skill's folder skill://a".to_owned(),
                "resource \"skill://a/../x\" has digest \"sha256:AB\", not sha256: and 64 lowercase hex digits".to_owned(),
                "resource \"skill://a/../x\" is listed more than once".to_owned(),
                "resource \"skill://a/../x\" is not a file inside the skill's folder skill://a".to_owned(),
                "resources must list the skill's own skill://a/SKILL.md".to_owned(),
            ]
        );
        assert_eq!(
            entry(json!({"uri": "skill://SKILL.md", "frontmatter": {}, "resources": "dynamic"})),
            vec!["uri \"skill://SKILL.md\" must be a URI ending in /SKILL.md inside a named folder, without query or fragment".to_owned()]
        );
        let bad = serde_json::from_value::<Skill>(
            json!({"uri": "skill://a/SKILL.md", "frontmatter": {}, "resources": "files"}),
        );
        assert_eq!(
            bad.unwrap_err().to_string(),
            "resources must be an array of {uri, digest, size} or \"dynamic\", found a string"
        );
        assert!(is_skill_name("pdf-2") && is_skill_name("données") && !is_skill_name("a--b"));
    }
}
