//! What the running gateway reads at start besides its configuration: secrets from files (the
//! metrics token, webhook signing secrets, the introspection client's secret), bounded before
//! they are read.

use std::path::Path;

use crate::config::ConfigSource;
use crate::config::{AuthSettings, ConfigError};

/// The largest client secret file read (4 KiB): bounded before it is read whole.
const MAX_SECRET_BYTES: u64 = 4096;

/// The guard as configured, with the introspection client's secret read at start.
pub(crate) struct AuthPlan {
    pub(crate) settings: AuthSettings,
    /// The introspection client's secret (never logged, never in a message).
    pub(crate) secret: Option<String>,
}

impl AuthPlan {
    /// Reads what the guard needs besides the configuration: the introspection client's secret
    /// from its file or environment variable. A secret that cannot be read is a mistake at its key.
    pub(crate) fn read(
        settings: &AuthSettings,
        source: &ConfigSource,
    ) -> Result<AuthPlan, ConfigError> {
        let key = "gateway.auth.introspection";
        let secret = match &settings.introspection {
            None => None,
            Some(i) => Some(match (&i.client_secret_file, &i.client_secret_env) {
                (Some(file), _) => read_secret_file(file)
                    .map_err(|why| source.error(&format!("{key}.client_secret_file"), why))?,
                (None, Some(var)) => match std::env::var(var) {
                    Ok(v) if !v.trim().is_empty() => v.trim().to_owned(),
                    _ => {
                        return Err(source.error(
                            &format!("{key}.client_secret_env"),
                            format!("the environment variable {var} is not set or empty"),
                        ))
                    }
                },
                (None, None) => {
                    return Err(source.error(key, "needs client_secret_file or client_secret_env"))
                }
            }),
        };
        Ok(AuthPlan {
            settings: settings.clone(),
            secret,
        })
    }
}

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
