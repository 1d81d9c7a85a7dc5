//! Skills from a folder (`ServerBuilder::skills_dir`): what a tree serves, and every tree that
//! breaks a bound or a rule refused whole with the path and the reason: a symbolic link out of
//! the tree (or within it), a 100 MiB file, 100 000 files, a skill over SEP-2640's limits, a
//! `SKILL.md` at the root, a FIFO.

use std::fs;
use std::path::{Path, PathBuf};

use purra_protocol::skills::{digest, SkillsDirOptions};
use purra_protocol::{Client, ClientOptions, RegistrationError, Server};
use serde_json::{json, Value};

/// A fresh folder for one test, removed when dropped.
struct Tmp(PathBuf);

impl Tmp {
    fn new(name: &str) -> Tmp {
        let p = std::env::temp_dir().join(format!("purra-skills-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.0.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        p
    }
    fn skill(&self, rel: &str) {
        let name = rel.rsplit('/').next().unwrap();
        self.write(
            &format!("{rel}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: The {name} skill\n---\nBody of {name}.\n"),
        );
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn refused(root: &Path) -> String {
    match Server::builder("t", "1").skills_dir(root) {
        Err(e @ RegistrationError::SkillsFolder(_)) => e.to_string(),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("the tree was served"),
    }
}

fn md(name: &str) -> String {
    format!("---\nname: {name}\ndescription: The {name} skill\n---\nBody of {name}.\n")
}

#[tokio::test]
async fn a_tree_serves_its_skills_nested_ones_too() {
    let t = Tmp::new("good");
    t.skill("acme/pdf-processing");
    t.write("acme/pdf-processing/references/FORMS.md", "forms");
    t.write("acme/pdf-processing/.cache/secret", "hidden");
    t.skill("git-workflow");
    t.skill("git-workflow/hooks/pre-commit");
    t.write("git-workflow/hooks/pre-commit/run.sh", "#!/bin/sh\n");
    t.write("README.md", "not in any skill");
    t.write(".git/config", "hidden");
    let server = Server::builder("t", "1").skills_dir(&t.0).unwrap().build();
    let listed: Vec<Value> = server
        .skills()
        .iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .collect();
    let file = |uri: &str, text: &str| json!({"uri": uri, "digest": digest(text.as_bytes()), "size": text.len()});
    let fm = |name: &str| json!({"name": name, "description": format!("The {name} skill")});
    assert_eq!(
        listed,
        vec![
            json!({"uri": "skill://acme/pdf-processing/SKILL.md", "frontmatter": fm("pdf-processing"), "resources": [
                file("skill://acme/pdf-processing/SKILL.md", &md("pdf-processing")),
                file("skill://acme/pdf-processing/references/FORMS.md", "forms"),
            ]}),
            json!({"uri": "skill://git-workflow/SKILL.md", "frontmatter": fm("git-workflow"), "resources": [
                file("skill://git-workflow/SKILL.md", &md("git-workflow")),
                file("skill://git-workflow/hooks/pre-commit/SKILL.md", &md("pre-commit")),
                file("skill://git-workflow/hooks/pre-commit/run.sh", "#!/bin/sh\n"),
            ]}),
            json!({"uri": "skill://git-workflow/hooks/pre-commit/SKILL.md", "frontmatter": fm("pre-commit"), "resources": [
                file("skill://git-workflow/hooks/pre-commit/SKILL.md", &md("pre-commit")),
                file("skill://git-workflow/hooks/pre-commit/run.sh", "#!/bin/sh\n"),
            ]}),
        ]
    );
    // Read through purra's client, verified.
    let (c, s) = purra_protocol::memory::pair();
    server.start(s);
    let conn = Client::connect(c, ClientOptions::default()).await.unwrap();
    let pdf = conn.skills()[0].clone();
    let got = conn.read_skill(&pdf, "references/FORMS.md").await.unwrap();
    assert_eq!(got.text(), Some("forms"));
    assert!(conn.read_skill(&pdf, ".cache/secret").await.is_err());
    assert_eq!(
        conn.read_skill_directory("skill://git-workflow/hooks")
            .await
            .unwrap()
            .iter()
            .map(|r| (r.uri.as_str(), r.mime_type.as_deref()))
            .collect::<Vec<_>>(),
        [(
            "skill://git-workflow/hooks/pre-commit",
            Some("inode/directory")
        )]
    );

    // A prefix puts every skill under it; an empty folder still declares the extension.
    let server = Server::builder("t", "1")
        .skills_dir_with(&t.0, &SkillsDirOptions::default().prefix("team"))
        .unwrap()
        .build();
    assert_eq!(server.skills()[1].uri, "skill://team/git-workflow/SKILL.md");
    let empty = Tmp::new("empty");
    let server = Server::builder("t", "1")
        .skills_dir(&empty.0)
        .unwrap()
        .build();
    let (c, s) = purra_protocol::memory::pair();
    server.start(s);
    let conn = Client::connect(c, ClientOptions::default()).await.unwrap();
    assert!(conn.serves_skills());
    assert!(conn.skills().is_empty());
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_is_never_followed() {
    let t = Tmp::new("link-out");
    let outside = Tmp::new("link-out-target");
    let secret = outside.write("secret.txt", "private");
    t.skill("notes");
    std::os::unix::fs::symlink(&secret, t.0.join("notes/leak.txt")).unwrap();
    assert_eq!(
        refused(&t.0),
        format!(
            "skills folder {}: notes/leak.txt: is a symbolic link to {:?}, outside the skills folder; links are not followed: copy the file into the folder",
            t.0.display(),
            secret.display().to_string()
        )
    );
    let t = Tmp::new("link-dir");
    t.skill("notes");
    std::os::unix::fs::symlink(&outside.0, t.0.join("notes/elsewhere")).unwrap();
    assert!(refused(&t.0).contains("notes/elsewhere: is a symbolic link to "));
    // A link within the tree is refused too: nothing is served by a path the walk did not see.
    let t = Tmp::new("link-in");
    t.skill("notes");
    t.write("notes/a.md", "a");
    std::os::unix::fs::symlink("a.md", t.0.join("notes/b.md")).unwrap();
    assert_eq!(
        refused(&t.0),
        format!(
            "skills folder {}: notes/b.md: is a symbolic link to \"a.md\"; links are not followed: copy the file into the folder",
            t.0.display()
        )
    );
}

#[test]
fn a_100_mib_file_is_refused_before_a_byte_is_read() {
    let t = Tmp::new("big");
    t.skill("data");
    let f = fs::File::create(t.0.join("data/dump.bin")).unwrap();
    f.set_len(100 * 1024 * 1024).unwrap();
    assert_eq!(
        refused(&t.0),
        format!(
            "skills folder {}: data/dump.bin: is 104857600 bytes, more than the 16777216 a skill file may have",
            t.0.display()
        )
    );
    // Two files under the per-file bound that together pass a skill's.
    let t = Tmp::new("big-skill");
    t.skill("data");
    for n in ["a", "b"] {
        fs::File::create(t.0.join(format!("data/{n}.bin")))
            .unwrap()
            .set_len(9 * 1024 * 1024)
            .unwrap();
    }
    assert_eq!(
        refused(&t.0),
        format!(
            "skills folder {}: data: the skill has 3 files of {} bytes, more than SEP-2640's limit of 512 files and 16777216 bytes a skill",
            t.0.display(),
            18 * 1024 * 1024 + md("data").len()
        )
    );
}

#[test]
fn a_hundred_thousand_files_are_refused_at_the_entry_bound() {
    let t = Tmp::new("many");
    t.skill("many");
    let dir = t.0.join("many/files");
    fs::create_dir_all(&dir).unwrap();
    for i in 0..100_000 {
        fs::File::create(dir.join(format!("{i:06}"))).unwrap();
    }
    assert_eq!(
        refused(&t.0),
        format!(
            "skills folder {}: many/files: the folder has more than 10000 entries (files and folders, hidden ones too), the bound on one skills folder",
            t.0.display()
        )
    );
    // Under the entry bound, a skill of 513 files is over SEP-2640's limit.
    let t = Tmp::new("513");
    t.skill("wide");
    for i in 0..512 {
        t.write(&format!("wide/f{i}.txt"), "x");
    }
    assert_eq!(
        refused(&t.0),
        format!(
            "skills folder {}: wide: the skill has 513 files of {} bytes, more than SEP-2640's limit of 512 files and 16777216 bytes a skill",
            t.0.display(),
            512 + md("wide").len()
        )
    );
}

#[test]
fn what_cannot_be_a_skill_is_named() {
    let t = Tmp::new("root-md");
    t.write("SKILL.md", &md("root"));
    assert_eq!(
        refused(&t.0),
        format!(
            "skills folder {}: SKILL.md: is at the root: a skill is a folder holding a SKILL.md; point at the folder of skill folders",
            t.0.display()
        )
    );
    let t = Tmp::new("misnamed");
    t.write("tools/SKILL.md", &md("other"));
    assert_eq!(
        refused(&t.0),
        format!(
            "skills folder {}: tools/SKILL.md: frontmatter name \"other\" must equal the skill's folder name \"tools\"",
            t.0.display()
        )
    );
    let t = Tmp::new("deep");
    let deep: Vec<String> = (0..17).map(|i| format!("d{i}")).collect();
    t.write(&format!("{}/x.txt", deep.join("/")), "x");
    assert_eq!(
        refused(&t.0),
        format!(
            "skills folder {}: {}: is deeper than 16 folders below the root, the bound on one skills folder",
            t.0.display(),
            deep.join("/")
        )
    );
    let missing = std::env::temp_dir().join("purra-skills-no-such-folder");
    assert!(refused(&missing).starts_with(&format!(
        "skills folder {}: cannot be opened: ",
        missing.display()
    )));
    #[cfg(unix)]
    {
        let t = Tmp::new("fifo");
        t.skill("pipe");
        let ok = std::process::Command::new("mkfifo")
            .arg(t.0.join("pipe/queue"))
            .status()
            .unwrap()
            .success();
        assert!(ok);
        assert_eq!(
            refused(&t.0),
            format!(
                "skills folder {}: pipe/queue: is neither a regular file nor a folder (a FIFO, socket or device); it cannot be served",
                t.0.display()
            )
        );
    }
}
