//! Skills from a folder of skill folders: every folder below the root that holds a `SKILL.md` is
//! a skill, served at `skill://[prefix/]<path from the root>/…`. A skill's files are every
//! regular file below its folder, nested skills' included.
//!
//! The tree is bounded before anything is read: the entries walked (hidden ones, whose names
//! start with `.`, are counted but neither walked into nor served), the depth, each file's size,
//! each skill's files and bytes (SEP-2640's limits), and the bytes read in all. Nothing leaves
//! the tree: a symbolic link anywhere in it is refused (never followed, in or out), as is any file
//! that is not a regular file; every folder is checked to still be where the walk found it when
//! it is read, and every file to be the one the walk saw (same device and inode, same size) when
//! it is opened. A tree that breaks a bound or a rule is refused whole, with the path and the
//! reason.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::{
    entry_of, skill_uri, Skill, SkillFile, MAX_BYTES_PER_SKILL, MAX_FILES_PER_SKILL, SKILL_MD,
};

/// Bounds and naming of a skills folder.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkillsDirOptions {
    /// A prefix for every skill's path (`acme` serves `skill://acme/<skill>/…`; default none).
    pub prefix: Option<String>,
    /// The most entries (files, folders, hidden ones too) the walk reads (default 10 000).
    pub max_entries: usize,
    /// The deepest folder below the root that is walked (default 16).
    pub max_depth: usize,
    /// The largest file a skill may have (default 16 MiB, a whole skill's limit).
    pub max_file_bytes: u64,
    /// The most bytes read from the tree in all: every skill file is held in memory (default
    /// 64 MiB).
    pub max_total_bytes: u64,
}

impl Default for SkillsDirOptions {
    fn default() -> Self {
        SkillsDirOptions {
            prefix: None,
            max_entries: 10_000,
            max_depth: 16,
            max_file_bytes: MAX_BYTES_PER_SKILL,
            max_total_bytes: 64 * 1024 * 1024,
        }
    }
}

impl SkillsDirOptions {
    /// Serves every skill under `prefix`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }
    /// Sets the most entries walked.
    pub fn max_entries(mut self, n: usize) -> Self {
        self.max_entries = n;
        self
    }
    /// Sets the largest file.
    pub fn max_file_bytes(mut self, n: u64) -> Self {
        self.max_file_bytes = n;
        self
    }
    /// Sets the most bytes read in all.
    pub fn max_total_bytes(mut self, n: u64) -> Self {
        self.max_total_bytes = n;
        self
    }
}

/// Why a skills folder cannot be served: the path (relative to the root; empty for the root
/// itself) and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillsDirError {
    /// The folder given.
    pub root: PathBuf,
    /// The entry the mistake is at, relative to the root.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for SkillsDirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "skills folder {}: {}", self.root.display(), self.reason)
        } else {
            write!(
                f,
                "skills folder {}: {}: {}",
                self.root.display(),
                self.path,
                self.reason
            )
        }
    }
}

impl std::error::Error for SkillsDirError {}

/// What a skills folder serves: the entries, and every file's bytes by URI.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadedSkills {
    /// The skills, by URI.
    pub skills: Vec<Skill>,
    /// Every skill file's bytes, by URI (a nested skill's files once).
    pub files: BTreeMap<String, Vec<u8>>,
}

/// One regular file the walk found.
struct Found {
    size: u64,
    #[cfg(unix)]
    id: (u64, u64),
}

/// Reads the skills below `root` (see the module's documentation for the bounds and rules).
pub fn load_dir(root: &Path, options: &SkillsDirOptions) -> Result<LoadedSkills, SkillsDirError> {
    let fail = |path: &str, reason: String| SkillsDirError {
        root: root.to_path_buf(),
        path: path.to_owned(),
        reason,
    };
    if let Some(p) = &options.prefix {
        super::check_relative(p).map_err(|r| fail("", format!("the prefix {p:?} {r}")))?;
    }
    let base =
        std::fs::canonicalize(root).map_err(|e| fail("", format!("cannot be opened: {e}")))?;
    if !base.is_dir() {
        return Err(fail("", "is not a folder".into()));
    }
    let mut files: BTreeMap<String, Found> = BTreeMap::new();
    let mut dirs: BTreeSet<String> = BTreeSet::new();
    let mut entries = 0usize;
    let mut stack: Vec<(String, usize)> = vec![(String::new(), 0)];
    while let Some((rel, depth)) = stack.pop() {
        let here = if rel.is_empty() {
            base.clone()
        } else {
            base.join(&rel)
        };
        // An ancestor replaced by a link since it was walked would lead out of the tree.
        match std::fs::canonicalize(&here) {
            Ok(c) if c == here => {}
            _ => return Err(fail(&rel, "changed while the folder was read".into())),
        }
        let reader =
            std::fs::read_dir(&here).map_err(|e| fail(&rel, format!("cannot be read: {e}")))?;
        let mut children = Vec::new();
        for entry in reader {
            let entry = entry.map_err(|e| fail(&rel, format!("cannot be read: {e}")))?;
            entries += 1;
            if entries > options.max_entries {
                return Err(fail(
                    &rel,
                    format!(
                        "the folder has more than {} entries (files and folders, hidden ones too), the bound on one skills folder",
                        options.max_entries
                    ),
                ));
            }
            children.push(entry);
        }
        children.sort_by_key(std::fs::DirEntry::file_name);
        for entry in children {
            let os_name = entry.file_name();
            let join = |name: &str| {
                if rel.is_empty() {
                    name.to_owned()
                } else {
                    format!("{rel}/{name}")
                }
            };
            let Some(name) = os_name.to_str() else {
                return Err(fail(
                    &join(&os_name.to_string_lossy()),
                    "the name is not UTF-8".into(),
                ));
            };
            if name.starts_with('.') {
                continue;
            }
            let path = join(name);
            let meta = entry
                .metadata()
                .map_err(|e| fail(&path, format!("cannot be read: {e}")))?;
            let kind = meta.file_type();
            if kind.is_symlink() {
                let target = std::fs::read_link(entry.path())
                    .map(|t| t.display().to_string())
                    .unwrap_or_default();
                let outside = std::fs::canonicalize(entry.path())
                    .map(|t| !t.starts_with(&base))
                    .unwrap_or(true);
                return Err(fail(
                    &path,
                    format!(
                        "is a symbolic link to {target:?}{}; links are not followed: copy the file into the folder",
                        if outside { ", outside the skills folder" } else { "" }
                    ),
                ));
            }
            if kind.is_dir() {
                if depth + 1 > options.max_depth {
                    return Err(fail(
                        &path,
                        format!(
                            "is deeper than {} folders below the root, the bound on one skills folder",
                            options.max_depth
                        ),
                    ));
                }
                dirs.insert(path.clone());
                stack.push((path, depth + 1));
            } else if kind.is_file() {
                files.insert(
                    path,
                    Found {
                        size: meta.len(),
                        #[cfg(unix)]
                        id: {
                            use std::os::unix::fs::MetadataExt as _;
                            (meta.dev(), meta.ino())
                        },
                    },
                );
            } else {
                return Err(fail(
                    &path,
                    "is neither a regular file nor a folder (a FIFO, socket or device); it cannot be served".into(),
                ));
            }
        }
    }
    if dirs.contains(SKILL_MD) {
        return Err(fail(
            SKILL_MD,
            "is a folder; a skill's SKILL.md is a file".into(),
        ));
    }
    if files.contains_key(SKILL_MD) {
        return Err(fail(
            SKILL_MD,
            "is at the root: a skill is a folder holding a SKILL.md; point at the folder of skill folders".into(),
        ));
    }
    let parent = |p: &str| p.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
    let skill_dirs: Vec<String> = files
        .keys()
        .filter(|p| p.rsplit('/').next() == Some(SKILL_MD))
        .map(|p| parent(p))
        .collect();
    // Every bound checked from the walk alone, before a byte is read.
    let mut inside: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for dir in &skill_dirs {
        let prefix = format!("{dir}/");
        let mine: Vec<&str> = files
            .keys()
            .filter(|p| p.starts_with(&prefix))
            .map(String::as_str)
            .collect();
        for p in &mine {
            let size = files[*p].size;
            if size > options.max_file_bytes {
                return Err(fail(
                    p,
                    format!(
                        "is {size} bytes, more than the {} a skill file may have",
                        options.max_file_bytes
                    ),
                ));
            }
        }
        let bytes: u64 = mine.iter().map(|p| files[*p].size).sum();
        if mine.len() > MAX_FILES_PER_SKILL || bytes > MAX_BYTES_PER_SKILL {
            return Err(fail(
                dir,
                format!(
                    "the skill has {} files of {bytes} bytes, more than SEP-2640's limit of {MAX_FILES_PER_SKILL} files and {MAX_BYTES_PER_SKILL} bytes a skill",
                    mine.len()
                ),
            ));
        }
        inside.insert(dir, mine);
    }
    let needed: BTreeSet<&str> = inside.values().flatten().copied().collect();
    let total: u64 = needed.iter().map(|p| files[*p].size).sum();
    if total > options.max_total_bytes {
        return Err(fail(
            "",
            format!(
                "the skills' files are {total} bytes together, more than the {} one skills folder may hold",
                options.max_total_bytes
            ),
        ));
    }
    let uri_of = |p: &str| match &options.prefix {
        Some(pre) => skill_uri(&format!("{pre}/{p}")),
        None => skill_uri(p),
    };
    let mut out = LoadedSkills::default();
    for p in needed {
        let bytes = read_walked(&base.join(p), &files[p], options.max_file_bytes)
            .map_err(|reason| fail(p, reason))?;
        out.files.insert(uri_of(p), bytes);
    }
    for (dir, mine) in &inside {
        let list: Vec<SkillFile> = mine
            .iter()
            .map(|p| {
                let uri = uri_of(p);
                SkillFile::of(&uri, &out.files[&uri])
            })
            .collect();
        let manifest = format!("{dir}/{SKILL_MD}");
        let skill = entry_of(&uri_of(&manifest), &out.files[&uri_of(&manifest)], list)
            .map_err(|reason| fail(&manifest, reason))?;
        out.skills.push(skill);
    }
    out.skills.sort_by(|a, b| a.uri.cmp(&b.uri));
    Ok(out)
}

/// The bytes of a file the walk found, if it is still that file.
fn read_walked(path: &Path, found: &Found, limit: u64) -> Result<Vec<u8>, String> {
    let changed = || "changed while the folder was read".to_owned();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot be read: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot be read: {e}"))?;
    if !meta.is_file() || meta.len() != found.size {
        return Err(changed());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if (meta.dev(), meta.ino()) != found.id {
            return Err(changed());
        }
    }
    let mut bytes = Vec::with_capacity(usize::try_from(found.size).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() as u64 != found.size {
        return Err(changed());
    }
    Ok(bytes)
}
