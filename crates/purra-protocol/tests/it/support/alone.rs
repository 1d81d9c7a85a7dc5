//! Running one test alone in a child process of this test binary, for a test whose assertions
//! the other tests of the binary would skew: the heap or resident size of the whole process, a
//! process-wide setting (the descriptor limit, a global `tracing` subscriber), or its timing
//! under a flood.

use std::sync::Mutex;

/// The environment variable naming the one test a child process runs.
const ALONE: &str = "PURRA_TEST_ALONE";

/// One child at a time: the tests that run alone kept each other out of the way before too.
static ONE_CHILD: Mutex<()> = Mutex::new(());

/// Whether the test `name` of `module` (its `module_path!()`) is to run its body here: `true`
/// in the child that runs it alone; `false` in this binary's ordinary run, after running the
/// test in a child (`--exact`, one test thread) and asserting it passed there.
pub fn alone(module: &str, name: &str) -> bool {
    let path = match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    };
    if std::env::var(ALONE).as_deref() == Ok(path.as_str()) {
        return true;
    }
    let _one = ONE_CHILD.lock().unwrap_or_else(|e| e.into_inner());
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", &path, "--test-threads=1", "--nocapture"])
        .env(ALONE, &path)
        .output()
        .expect("run the test alone");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{path} failed when run alone");
    assert!(
        text.contains("1 passed"),
        "{path} did not run alone: {text}"
    );
    false
}
