//! The server's side of the Skills extension (see [`crate::skills`]): the skills it serves, their
//! files, and the folders a `resources/directory/read` lists, all derived from the entries.
//!
//! A file is served only as the bytes its entry's digest names: a skill built in code or read
//! from a folder is held in memory as it was digested; a skill served through a reader (a
//! gateway passing an upstream's skill through) has every read checked against its entry before
//! it is answered, and a mismatch is an error, never the bytes.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;

use base64::Engine as _;

use super::{HandlerResult, RegistrationError, RequestCtx};
use crate::jsonrpc::{ErrorObject, RpcErrorCode};
use crate::session::BoxFuture;
use crate::skills::{
    self, mime_type_of, Skill, SkillBundle, SkillResources, DIRECTORY_MIME_TYPE,
    MAX_BYTES_PER_SKILL, MAX_FILES_PER_SKILL,
};
use crate::types::{ReadResourceResult, Resource, ResourceContents};

/// Reads one file of a skill served through a reader.
pub(crate) type SkillReadFn = Arc<
    dyn Fn(String, RequestCtx) -> BoxFuture<'static, Result<Vec<u8>, ErrorObject>> + Send + Sync,
>;

/// Where a skill's bytes come from.
#[derive(Clone)]
enum Source {
    /// Held as digested: file URI to bytes.
    Memory(Arc<BTreeMap<String, Arc<[u8]>>>),
    /// Read on demand and checked against the entry.
    Reader(SkillReadFn),
}

#[derive(Clone)]
struct Served {
    skill: Skill,
    source: Source,
}

/// A file a read finds: the skill serving it, its entry, its MIME type.
#[derive(Clone)]
pub(crate) struct FileRef {
    skill: String,
    uri: String,
    digest: String,
    size: u64,
    mime: Option<&'static str>,
}

/// The skills one server serves.
#[derive(Default)]
pub(crate) struct Catalog {
    /// By `SKILL.md` URI (ordered: the listing's order).
    skills: BTreeMap<String, Served>,
    /// Every file by its URI, and by its decoded spelling.
    files: HashMap<Vec<u8>, FileRef>,
    /// Every folder of a skill: its direct children, by URI.
    dirs: HashMap<String, Vec<Resource>>,
    /// Whether the server declared the extension with no skill yet (`skills_dir` of an empty
    /// folder): it is advertised all the same.
    pub offered: bool,
}

fn key(uri: &str) -> Vec<u8> {
    // Two spellings of one name (`Q&A.md`, `Q%26A.md`) find the same file.
    crate::skills::percent_decode(uri)
}

impl Catalog {
    /// Whether the extension is advertised.
    pub fn advertised(&self) -> bool {
        self.offered || !self.skills.is_empty()
    }

    /// Serves `skill` (replacing one at its URI).
    fn insert(&mut self, skill: Skill, source: Source) {
        self.skills
            .insert(skill.uri.clone(), Served { skill, source });
        self.reindex();
    }

    /// Stops serving the skill at `uri`.
    pub fn remove(&mut self, uri: &str) -> bool {
        let gone = self.skills.remove(uri).is_some();
        if gone {
            self.reindex();
        }
        gone
    }

    /// The entries, by URI.
    pub fn entries(&self) -> Vec<Skill> {
        self.skills.values().map(|s| s.skill.clone()).collect()
    }

    /// What `resources/list` shows: each skill's `SKILL.md`.
    pub fn listings(&self) -> Vec<Resource> {
        self.skills.values().map(|s| s.skill.listing()).collect()
    }

    /// One page of entries from `offset`, and where the next starts.
    pub fn page(&self, offset: usize, size: usize) -> (Vec<Skill>, Option<usize>) {
        let end = offset.saturating_add(size).min(self.skills.len());
        let items = self
            .skills
            .values()
            .skip(offset.min(end))
            .take(end.saturating_sub(offset))
            .map(|s| s.skill.clone())
            .collect();
        (items, (end < self.skills.len()).then_some(end))
    }

    /// The entry at `uri` (however its name is percent-encoded).
    pub fn get(&self, uri: &str) -> Option<Skill> {
        if let Some(s) = self.skills.get(uri) {
            return Some(s.skill.clone());
        }
        let k = key(uri);
        self.skills
            .values()
            .find(|s| key(&s.skill.uri) == k)
            .map(|s| s.skill.clone())
    }

    /// The children of the folder at `uri`, if it is one.
    pub fn dir(&self, uri: &str) -> Option<&[Resource]> {
        self.dirs
            .get(uri)
            .or_else(|| {
                let k = key(uri);
                self.dirs.iter().find(|(d, _)| key(d) == k).map(|(_, c)| c)
            })
            .map(Vec::as_slice)
    }

    /// The file at `uri` and how to read it.
    fn file(&self, uri: &str) -> Option<(FileRef, Source)> {
        let f = self.files.get(&key(uri))?.clone();
        let source = self.skills.get(&f.skill)?.source.clone();
        Some((f, source))
    }

    fn reindex(&mut self) {
        self.files.clear();
        let mut dirs: BTreeMap<String, BTreeMap<String, Resource>> = BTreeMap::new();
        for (uri, served) in &self.skills {
            let root = served.skill.root().to_owned();
            dirs.entry(root.clone()).or_default();
            for f in served.skill.files() {
                let mime = f.uri.rsplit('/').next().and_then(mime_type_of);
                self.files.entry(key(&f.uri)).or_insert_with(|| FileRef {
                    skill: uri.clone(),
                    uri: f.uri.clone(),
                    digest: f.digest.clone(),
                    size: f.size,
                    mime,
                });
                // Every folder between the root and the file lists the next step down.
                let Some(rest) = f.uri.strip_prefix(&root).and_then(|r| r.strip_prefix('/')) else {
                    continue;
                };
                let segments: Vec<&str> = rest.split('/').collect();
                let mut dir = root.clone();
                for (i, seg) in segments.iter().enumerate() {
                    let child = format!("{dir}/{seg}");
                    let name = String::from_utf8(key(seg)).unwrap_or_else(|_| (*seg).to_owned());
                    let last = i + 1 == segments.len();
                    let r = if last {
                        let mut r = Resource::new(&child, name).with_size(f.size);
                        r.mime_type = mime.map(str::to_owned);
                        r
                    } else {
                        Resource::new(&child, name).with_mime_type(DIRECTORY_MIME_TYPE.to_owned())
                    };
                    dirs.entry(dir.clone())
                        .or_default()
                        .entry(child.clone())
                        .or_insert(r);
                    if !last {
                        dirs.entry(child.clone()).or_default();
                    }
                    dir = child;
                }
            }
        }
        self.dirs = dirs
            .into_iter()
            .map(|(d, c)| (d, c.into_values().collect()))
            .collect();
    }
}

/// Why an entry cannot be served, if it cannot: it must keep SEP-2640's rules and limits, and
/// list its files (a `"dynamic"` skill could never be checked).
fn check_entry(skill: &Skill) -> Result<(), RegistrationError> {
    let invalid = |reason: String| RegistrationError::InvalidSkill {
        skill: skill.uri.clone(),
        reason,
    };
    if skill.resources == SkillResources::Dynamic {
        return Err(invalid(
            "\"dynamic\" skills are not served: every file a purra server serves is checked against its entry's digest".into(),
        ));
    }
    let problems = skill.problems();
    if !problems.is_empty() {
        return Err(invalid(problems.join("; ")));
    }
    let (n, bytes) = skill.totals();
    if n > MAX_FILES_PER_SKILL || bytes > MAX_BYTES_PER_SKILL {
        return Err(invalid(format!(
            "{n} files of {bytes} bytes exceed SEP-2640's limit of {MAX_FILES_PER_SKILL} files and {MAX_BYTES_PER_SKILL} bytes a skill"
        )));
    }
    Ok(())
}

impl super::Server {
    /// Serves a skill built in code (see [`SkillBundle`]); its entry is checked against
    /// SEP-2640's rules and limits (refused with `InvalidSkill`). A skill at the same URI is
    /// replaced; sessions told about resources hear `notifications/resources/list_changed`.
    pub fn add_skill(&self, bundle: SkillBundle) -> Result<&Self, RegistrationError> {
        let (skill, files) = bundle
            .build()
            .map_err(|e| RegistrationError::InvalidSkill {
                skill: e.skill,
                reason: e.reason,
            })?;
        let files = files
            .into_iter()
            .map(|(u, b)| (u, Arc::<[u8]>::from(b)))
            .collect();
        self.insert_skill(skill, Source::Memory(Arc::new(files)));
        Ok(self)
    }

    /// Serves `skill` with its files read by `read` (the file's URI as the entry spells it),
    /// for skills whose bytes live elsewhere (a gateway passing an upstream's skill through).
    /// Every read is checked against the entry's size and digest before it is answered: bytes
    /// that differ are -32603 naming the file, never sent. The entry must keep SEP-2640's rules
    /// and limits and list its files (`InvalidSkill` otherwise).
    pub fn add_skill_with<F, Fut>(&self, skill: Skill, read: F) -> Result<&Self, RegistrationError>
    where
        F: Fn(String, RequestCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult<Vec<u8>>> + Send + 'static,
    {
        check_entry(&skill)?;
        let read: SkillReadFn = Arc::new(move |uri, ctx| {
            let fut = read(uri, ctx);
            Box::pin(async move { fut.await.map_err(super::HandlerError::into_error_object) })
        });
        self.insert_skill(skill, Source::Reader(read));
        Ok(self)
    }

    /// Stops serving the skill whose `SKILL.md` is at `uri`; whether it was served.
    pub fn remove_skill(&self, uri: &str) -> bool {
        let gone = self.inner.skills.write().expect("skills lock").remove(uri);
        if gone {
            self.list_changed(super::Kind::Resources);
        }
        gone
    }

    /// The skills served, by URI.
    pub fn skills(&self) -> Vec<Skill> {
        self.inner.skills.read().expect("skills lock").entries()
    }

    fn insert_skill(&self, skill: Skill, source: Source) {
        self.inner
            .skills
            .write()
            .expect("skills lock")
            .insert(skill, source);
        self.list_changed(super::Kind::Resources);
    }

    /// Serves what a skills folder holds (at build: no session to tell).
    pub(super) fn insert_loaded(&self, loaded: skills::LoadedSkills) {
        let files: BTreeMap<String, Arc<[u8]>> = loaded
            .files
            .into_iter()
            .map(|(u, b)| (u, Arc::<[u8]>::from(b)))
            .collect();
        let files = Arc::new(files);
        let mut catalog = self.inner.skills.write().expect("skills lock");
        catalog.offered = true;
        for skill in loaded.skills {
            catalog.insert(skill, Source::Memory(files.clone()));
        }
    }
}

/// `resources/read` of a skill file: `None` when no skill serves `uri`; a folder of a skill is
/// -32002 pointing at `resources/directory/read`.
pub(super) async fn read(
    server: &super::Server,
    uri: &str,
    ctx: RequestCtx,
) -> Option<Result<ReadResourceResult, ErrorObject>> {
    let found = {
        let catalog = server.inner.skills.read().expect("skills lock");
        match catalog.file(uri) {
            Some(f) => f,
            None => {
                return catalog.dir(uri).map(|_| {
                    Err(ErrorObject::new(
                        RpcErrorCode::RESOURCE_NOT_FOUND,
                        format!(
                            "{uri} is a folder of a skill; list it with resources/directory/read"
                        ),
                    )
                    .with_data(serde_json::json!({ "uri": uri })))
                })
            }
        }
    };
    let (file, source) = found;
    let bytes: Arc<[u8]> = match source {
        Source::Memory(m) => match m.get(&file.uri) {
            Some(b) => b.clone(),
            None => {
                return Some(Err(ErrorObject::internal(format!(
                    "{} cannot be read",
                    file.uri
                ))))
            }
        },
        Source::Reader(read) => match read(file.uri.clone(), ctx).await {
            Ok(b) => b.into(),
            Err(e) => return Some(Err(e)),
        },
    };
    if bytes.len() as u64 != file.size || skills::digest(&bytes) != file.digest {
        return Some(Err(ErrorObject::internal(format!(
            "{} no longer matches its skill's entry ({} bytes, {}); it is not served",
            file.uri, file.size, file.digest
        ))));
    }
    let contents = match std::str::from_utf8(&bytes) {
        Ok(text) => ResourceContents::text(&file.uri, text),
        Err(_) => ResourceContents::blob(
            &file.uri,
            base64::engine::general_purpose::STANDARD.encode(&bytes),
        ),
    };
    let contents = match file.mime {
        Some(m) => contents.with_mime_type(m.to_owned()),
        None => contents,
    };
    Some(Ok(contents.into()))
}
