//! The client's side of the Skills extension (see [`crate::skills`]): the listing kept with the
//! other catalogs, one entry by URI, one file read and verified against its entry, a folder's
//! children.

use std::sync::Arc;

use base64::Engine as _;
use serde_json::Value;

use super::{ClientService, Connection};
use crate::error::Error;
use crate::session::{Peer, RequestOptions};
use crate::skills::{self, frontmatter, Skill, SkillResources};
use crate::types::{ReadResourceResult, Resource, UriParams};

use super::modern::CacheMode;

/// One skill file as read and verified by [`Connection::read_skill`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SkillContent {
    /// The file's URI, as the entry spells it.
    pub uri: String,
    /// Its MIME type, as the server sent it.
    pub mime_type: Option<String>,
    /// Exactly the bytes the entry's digest covers.
    pub bytes: Vec<u8>,
    /// Whether its size and digest were checked against the entry (`false` only for a
    /// `"dynamic"` skill, which publishes none).
    pub verified: bool,
    /// For the skill's own `SKILL.md`: the markdown after the frontmatter (the frontmatter was
    /// checked to equal the entry's).
    pub body: Option<String>,
}

impl SkillContent {
    /// The bytes as text, when they are UTF-8.
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.bytes).ok()
    }
}

/// Every problem of a page of entries, or the valid ones: each entry is decoded and checked on
/// its own, and every copy of a repeated URI is refused.
fn check_entries(values: Vec<Value>, method: &str, offset: usize) -> Result<Vec<Skill>, Error> {
    let mut skills = Vec::with_capacity(values.len());
    let mut bad = Vec::new();
    for (i, v) in values.into_iter().enumerate() {
        let uri = v.get("uri").and_then(Value::as_str).map(str::to_owned);
        let label = format!(
            "#{}{}",
            offset + i,
            uri.as_deref().map(|u| format!(" {u}")).unwrap_or_default()
        );
        match serde_json::from_value::<Skill>(v) {
            Ok(s) => {
                let p = s.problems();
                if p.is_empty() {
                    skills.push(s);
                } else {
                    bad.push(format!("{label}: {}", p.join("; ")));
                }
            }
            Err(e) => bad.push(format!("{label}: {e}")),
        }
    }
    if !bad.is_empty() {
        return Err(Error::Protocol(format!(
            "{method} returned invalid skill entries: {}",
            bad.join(" | ")
        )));
    }
    Ok(skills)
}

/// Every page of `skills/list`, bounded like the other catalogs.
pub(super) async fn refresh(s: &Arc<ClientService>, peer: &Peer) -> Result<Arc<Vec<Skill>>, Error> {
    #[derive(serde::Deserialize)]
    struct Page {
        skills: Vec<Value>,
        #[serde(default, rename = "nextCursor")]
        next_cursor: Option<String>,
    }
    let gen = s.skills.begin();
    let values = super::fetch_all(s, peer, skills::methods::LIST, &s.options, |p: Page| {
        (p.skills, p.next_cursor)
    })
    .await?;
    let items = check_entries(values, skills::methods::LIST, 0)?;
    let mut seen = std::collections::HashSet::new();
    let repeated: Vec<&str> = items
        .iter()
        .filter(|k| !seen.insert(k.uri.as_str()))
        .map(|k| k.uri.as_str())
        .collect();
    if !repeated.is_empty() {
        return Err(Error::Protocol(format!(
            "skills/list lists {} more than once",
            repeated.join(", ")
        )));
    }
    s.skills.store(gen, items);
    Ok(s.skills.get())
}

/// Whether two JSON values are equal as frontmatter: objects in any key order, arrays in
/// order, numbers by value, nothing coerced.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || matches!((x.as_f64(), y.as_f64()), (Some(p), Some(q)) if p == q)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The fields where `entry` and `file` differ, named.
fn differences(
    entry: &serde_json::Map<String, Value>,
    file: &serde_json::Map<String, Value>,
) -> Vec<String> {
    let mut keys: Vec<&String> = entry.keys().chain(file.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let (a, b) = (entry.get(k), file.get(k));
            let equal = match (a, b) {
                (Some(a), Some(b)) => same(a, b),
                _ => false,
            };
            let show = |v: Option<&Value>| v.map_or("nothing".to_owned(), Value::to_string);
            (!equal).then(|| format!("{k}: the entry has {}, SKILL.md has {}", show(a), show(b)))
        })
        .collect()
}

impl Connection {
    /// Whether the server declared the Skills extension.
    pub fn serves_skills(&self) -> bool {
        self.skills_settings().is_some()
    }

    fn skills_settings(&self) -> Option<&crate::types::JsonObject> {
        self.init
            .capabilities
            .extensions
            .as_ref()?
            .get(skills::EXTENSION_ID)
    }

    fn need_skills(&self, method: &str) -> Result<(), Error> {
        if self.serves_skills() {
            Ok(())
        } else {
            Err(Error::Protocol(format!(
                "the server does not declare the {} extension, which {method} needs",
                skills::EXTENSION_ID
            )))
        }
    }

    /// The skills the server lists (the Skills extension), as of the last fetch: fetched at
    /// connect when the server declares the extension and again on every
    /// `notifications/resources/list_changed`, every page, bounded like the other catalogs.
    /// An entry that breaks SEP-2640's rules fails the fetch, naming it. A listing may be
    /// partial: [`get_skill`](Self::get_skill) reaches a skill it leaves out.
    pub fn skills(&self) -> Arc<Vec<Skill>> {
        self.service.skills.get()
    }

    /// Fetches the listing again.
    pub async fn refresh_skills(&self) -> Result<Arc<Vec<Skill>>, Error> {
        self.need_skills(skills::methods::LIST)?;
        refresh(&self.service, &self.peer).await
    }

    /// One skill's entry by its `SKILL.md` URI (`skills/get`), listed or not; checked against
    /// SEP-2640's rules, and it must be the skill asked for.
    pub async fn get_skill(&self, uri: &str) -> Result<Skill, Error> {
        self.need_skills(skills::methods::GET)?;
        #[derive(serde::Deserialize)]
        struct R {
            skill: Value,
        }
        let r: R = self
            .service
            .call_typed(
                &self.peer,
                skills::methods::GET,
                &UriParams::new(uri),
                RequestOptions::default(),
                CacheMode::Bypass,
            )
            .await?;
        let skill = check_entries(vec![r.skill], skills::methods::GET, 0)?
            .pop()
            .expect("one entry");
        if !skills::same_uri(&skill.uri, uri) {
            return Err(Error::Protocol(format!(
                "skills/get for {uri} returned {}",
                skill.uri
            )));
        }
        Ok(skill)
    }

    /// Reads one file of `skill` and verifies it against the entry: `file` is a path relative
    /// to the skill's folder (`references/FORMS.md`; `SKILL.md` for the skill itself) or a URI.
    /// The file must be listed (checked before anything is sent; however either side
    /// percent-encodes its name) and is read at the entry's URI; its size and digest must be the
    /// entry's; a `SKILL.md`'s frontmatter must equal the entry's, field by field. A
    /// `"dynamic"` skill has no sizes or digests to check (`verified: false`), but a file
    /// outside its folder is refused and its `SKILL.md` is checked all the same. Anything that
    /// differs is [`Error::SkillVerification`], and the content is not returned.
    pub async fn read_skill(&self, skill: &Skill, file: &str) -> Result<SkillContent, Error> {
        self.need_skills("reading a skill")?;
        let problems = skill.problems();
        if !problems.is_empty() {
            return Err(Error::Protocol(format!(
                "{} is not a valid skill entry: {}",
                skill.uri,
                problems.join("; ")
            )));
        }
        let unlisted = |uri: String| Error::SkillVerification {
            reason: format!("it is not a file of the skill {}", skill.uri),
            uri,
        };
        let (uri, listed) = match &skill.resources {
            SkillResources::Files(_) => match skill.file(file) {
                Some(f) => (f.uri.clone(), Some(f.clone())),
                None => {
                    return Err(unlisted(
                        skill.resolve(file).unwrap_or_else(|| file.to_owned()),
                    ))
                }
            },
            SkillResources::Dynamic => {
                let Some(uri) = skill.resolve(file) else {
                    return Err(unlisted(file.to_owned()));
                };
                let own = skills::same_uri(&uri, &skill.uri);
                if !own && skills::relative_path(skill.root(), &uri).is_none() {
                    return Err(unlisted(uri));
                }
                (uri, None)
            }
        };
        let result: ReadResourceResult = self.read_resource_with(&uri, CacheMode::Refresh).await?;
        let same_file = |u: &str| {
            skills::relative_path(skill.root(), u) == skills::relative_path(skill.root(), &uri)
                || u == uri
        };
        let Some(content) = result.contents.iter().find(|c| same_file(&c.uri)) else {
            return Err(Error::Protocol(format!(
                "resources/read returned no contents for {uri}"
            )));
        };
        let bytes = match (&content.text, &content.blob) {
            (Some(t), _) => t.as_bytes().to_vec(),
            (None, Some(b)) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| {
                    Error::Protocol(format!(
                        "resources/read returned an invalid base64 blob for {uri}: {e}"
                    ))
                })?,
            (None, None) => Vec::new(),
        };
        let fail = |reason: String| Error::SkillVerification {
            uri: uri.clone(),
            reason,
        };
        if let Some(f) = &listed {
            if bytes.len() as u64 != f.size {
                return Err(fail(format!(
                    "it is {} bytes; the entry lists {}",
                    bytes.len(),
                    f.size
                )));
            }
            let d = skills::digest(&bytes);
            if d != f.digest {
                return Err(fail(format!(
                    "its digest is {d}; the entry lists {}",
                    f.digest
                )));
            }
        }
        let mut body = None;
        if skills::same_uri(&uri, &skill.uri) {
            let text =
                std::str::from_utf8(&bytes).map_err(|_| fail("SKILL.md is not UTF-8".into()))?;
            let md = frontmatter::parse_skill_md(text)
                .map_err(|e| fail(format!("its frontmatter cannot be read: {e}")))?;
            let diff = differences(&skill.frontmatter, &md.frontmatter);
            if !diff.is_empty() {
                return Err(fail(format!(
                    "its frontmatter differs from the entry's: {}",
                    diff.join("; ")
                )));
            }
            body = Some(md.body);
        }
        Ok(SkillContent {
            uri,
            mime_type: content.mime_type.clone(),
            bytes,
            verified: listed.is_some(),
            body,
        })
    }

    /// The direct children of a skill's folder (`resources/directory/read`, every page, bounded
    /// like the catalogs); the server must declare `directoryRead`.
    pub async fn read_skill_directory(&self, uri: &str) -> Result<Vec<Resource>, Error> {
        self.need_skills(skills::methods::DIRECTORY_READ)?;
        if !skills::settings_directory_read(self.skills_settings()) {
            return Err(Error::Protocol(format!(
                "the server does not declare directoryRead for {}, which {} needs",
                skills::EXTENSION_ID,
                skills::methods::DIRECTORY_READ
            )));
        }
        #[derive(serde::Serialize)]
        struct P<'a> {
            uri: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            cursor: Option<String>,
        }
        #[derive(serde::Deserialize)]
        struct Page {
            resources: Vec<Resource>,
            #[serde(default, rename = "nextCursor")]
            next_cursor: Option<String>,
        }
        let options = &self.service.options;
        let mut out = Vec::new();
        let mut cursor = None;
        let mut bytes = 0usize;
        for _ in 0..options.max_catalog_pages {
            let raw = self
                .service
                .call(
                    &self.peer,
                    skills::methods::DIRECTORY_READ,
                    &P {
                        uri,
                        cursor: cursor.take(),
                    },
                    RequestOptions::default(),
                    CacheMode::Bypass,
                )
                .await?;
            bytes += raw.get().len();
            if bytes > options.max_catalog_bytes {
                return Err(Error::Protocol(format!(
                    "{} exceeds {} bytes over its pages",
                    skills::methods::DIRECTORY_READ,
                    options.max_catalog_bytes
                )));
            }
            let page: Page = serde_json::from_str(raw.get()).map_err(|e| {
                Error::Protocol(format!(
                    "invalid {} result: {e}",
                    skills::methods::DIRECTORY_READ
                ))
            })?;
            out.extend(page.resources);
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return Ok(out),
            }
        }
        Err(Error::Protocol(format!(
            "{} did not end within {} pages",
            skills::methods::DIRECTORY_READ,
            options.max_catalog_pages
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frontmatter_differences_are_named_field_by_field() {
        let entry = json!({"name": "a", "description": "d", "v": 1, "m": {"x": [1, 2]}});
        let file =
            json!({"name": "a", "description": "e", "v": 1.0, "m": {"x": [1, 2]}, "extra": true});
        assert_eq!(
            differences(entry.as_object().unwrap(), file.as_object().unwrap()),
            vec![
                "description: the entry has \"d\", SKILL.md has \"e\"".to_owned(),
                "extra: the entry has nothing, SKILL.md has true".to_owned(),
            ]
        );
    }
}
