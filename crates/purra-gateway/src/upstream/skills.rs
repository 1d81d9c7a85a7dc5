//! Skill bindings: `[skills.NAME]` passes one skill an upstream serves (the Skills extension,
//! SEP-2640) through to downstream clients, under host authority.
//!
//! Nothing an upstream serves as a skill is visible unless bound. At start the gateway asks the
//! upstream for the bound skill's entry (`skills/get` at the binding's `uri`, or the one skill its
//! listing names NAME) and pins it: downstream clients see that entry, its files at
//! `skill://NAME/<path>` with the upstream's digests and sizes, in `skills/list`, `skills/get`,
//! `resources/list` (its `SKILL.md`) and `resources/directory/read`. A file is read from the
//! upstream when a client asks for it, and answered only when its bytes are the pinned entry's
//! (purra-protocol's server checks size and digest before anything is sent); a skill the upstream
//! changed since the gateway started is refused file by file until the gateway restarts, and no
//! upstream error text reaches the client. A skill that cannot be pinned is a start mistake at
//! its binding: an upstream without the extension, no such skill, a `"dynamic"` skill (which
//! publishes no digests), one whose name is not NAME, one over SEP-2640's limits.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use purra_protocol::skills::{relative_path, skill_uri, Skill, SkillFile, SkillResources};
use purra_protocol::{Connection, Error, ErrorObject, HandlerError, RequestCtx, Server};

use crate::config::ConfigSource;
use crate::config::{ConfigError, GatewayConfig};
use crate::upstream::Upstream;

/// The pinned entry of the skill bound as `name`, from the upstream's connection.
async fn pin(conn: &Connection, name: &str, uri: Option<&str>) -> Result<Skill, String> {
    if !conn.serves_skills() {
        return Err(
            "the upstream does not declare the skills extension (io.modelcontextprotocol/skills)"
                .into(),
        );
    }
    let skill = match uri {
        Some(uri) => conn
            .get_skill(uri)
            .await
            .map_err(|e| format!("the upstream serves no skill at {uri} ({e})"))?,
        None => {
            let listed = conn.skills();
            let named: Vec<&Skill> = listed.iter().filter(|s| s.name() == name).collect();
            match named.as_slice() {
                [one] => (*one).clone(),
                [] => {
                    return Err(format!(
                        "the upstream lists no skill named {name:?}; name its SKILL.md with uri"
                    ))
                }
                many => {
                    let uris: Vec<&str> = many.iter().map(|s| s.uri.as_str()).collect();
                    return Err(format!(
                        "the upstream lists {} skills named {name:?} ({}); choose one with uri",
                        many.len(),
                        uris.join(", ")
                    ));
                }
            }
        }
    };
    if skill.resources == SkillResources::Dynamic {
        return Err(format!(
            "the upstream serves {} as \"dynamic\": it publishes no digests, so what it sends could not be checked",
            skill.uri
        ));
    }
    if skill.name() != name {
        return Err(format!(
            "the upstream skill at {} is named {:?}: bind it as [skills.{}] (its SKILL.md passes through unchanged)",
            skill.uri,
            skill.name(),
            skill.name()
        ));
    }
    Ok(skill)
}

/// The entry as downstream clients see it (`skill://NAME/<path>`), and each downstream file URI's
/// upstream URI.
fn rewrite(name: &str, skill: &Skill) -> Result<(Skill, HashMap<String, String>), String> {
    let root = skill.root();
    let mut files = Vec::new();
    let mut map = HashMap::new();
    for f in skill.files() {
        let path = if purra_protocol::skills::same_uri(&f.uri, &skill.uri) {
            purra_protocol::skills::SKILL_MD.to_owned()
        } else {
            relative_path(root, &f.uri)
                .ok_or_else(|| format!("{} is not a file inside {root}", f.uri))?
        };
        let local = skill_uri(&format!("{name}/{path}"));
        map.insert(local.clone(), f.uri.clone());
        let mut file = SkillFile::of(&local, b"");
        file.digest = f.digest.clone();
        file.size = f.size;
        files.push(file);
    }
    files.sort_by(|a, b| a.uri.cmp(&b.uri));
    let mut local = Skill::new(
        skill_uri(&format!("{name}/SKILL.md")),
        skill.frontmatter.clone(),
        SkillResources::Files(files),
    );
    local.meta = skill.meta.clone();
    Ok((local, map))
}

/// The bytes of one upstream skill file (`remote`, served downstream as `local`), read and
/// checked against the pinned upstream entry; no upstream error text is passed on.
async fn read_upstream(
    upstream: &Upstream,
    pinned: &Skill,
    remote: &str,
    local: &str,
) -> Result<Vec<u8>, ErrorObject> {
    let unavailable = || {
        ErrorObject::internal(format!(
            "{local} cannot be read from upstream {:?} now",
            upstream.id
        ))
    };
    let (live, _) = upstream.current().await.map_err(|_| unavailable())?;
    match live.conn.read_skill(pinned, remote).await {
        Ok(content) => Ok(content.bytes),
        Err(Error::SkillVerification { .. }) => Err(ErrorObject::internal(format!(
            "{local} changed upstream since the gateway pinned its skill; it is not served until the gateway restarts"
        ))),
        Err(_) => Err(unavailable()),
    }
}

/// The upstream of an id as it is when a skill file is read (a reload may have replaced it).
pub(crate) type Resolve = Arc<dyn Fn(&str) -> Option<Arc<Upstream>> + Send + Sync>;

/// Pins every bound skill (from `upstreams`) and serves it on `server`, each file read from the
/// upstream `resolve` names then; every skill that cannot be pinned is a mistake at its binding.
pub(crate) async fn bind(
    config: &GatewayConfig,
    upstreams: &BTreeMap<String, Arc<Upstream>>,
    server: &Server,
    source: &ConfigSource,
    resolve: Resolve,
) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    for (name, binding) in &config.skills {
        let key = format!("skills.{name}");
        let Some(upstream) = upstreams.get(&binding.upstream) else {
            continue;
        };
        let pinned = match upstream.current().await {
            Ok((live, _)) => pin(&live.conn, name, binding.uri.as_deref()).await,
            Err(e) => Err(format!("upstream {:?}: {e}", binding.upstream)),
        };
        let served = pinned.and_then(|skill| {
            let (local, map) = rewrite(name, &skill)?;
            let id = binding.upstream.clone();
            let resolve = resolve.clone();
            let pinned = Arc::new(skill);
            let map = Arc::new(map);
            server
                .add_skill_with(local, move |uri, _ctx: RequestCtx| {
                    let upstream = resolve(&id);
                    let pinned = pinned.clone();
                    let remote = map.get(&uri).cloned();
                    async move {
                        let (Some(remote), Some(upstream)) = (remote, upstream) else {
                            return Err(HandlerError::from(ErrorObject::internal(format!(
                                "{uri} is not a file of a bound skill"
                            ))));
                        };
                        read_upstream(&upstream, &pinned, &remote, &uri)
                            .await
                            .map_err(HandlerError::from)
                    }
                })
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        if let Err(why) = served {
            let at = if binding.uri.is_some() {
                format!("{key}.uri")
            } else {
                key
            };
            errors.push(source.error(&at, why));
        }
    }
    errors.sort_by_key(|e| e.line.unwrap_or(0));
    errors
}
