//! Secrets a configuration names by file (client secrets, tokens, keys), read bounded before
//! they are read whole; never echoed in a message.

use std::path::Path;

/// The largest secret file read (4 KiB): bounded before it is read whole.
const MAX_SECRET_BYTES: u64 = 4096;

/// The secret in the file at `path`, trimmed: at most [`MAX_SECRET_BYTES`], not empty.
pub(crate) fn read_secret_file(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if text.len() as u64 > MAX_SECRET_BYTES {
        return Err(format!(
            "{} is larger than {MAX_SECRET_BYTES} bytes",
            path.display()
        ));
    }
    let secret = text.trim();
    if secret.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(secret.to_owned())
}

/// The secret in the environment variable `var`, trimmed: not empty.
pub(crate) fn read_secret_env(var: &str) -> Result<String, String> {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => Ok(v.trim().to_owned()),
        _ => Err(format!(
            "the environment variable {var} is not set or empty"
        )),
    }
}
