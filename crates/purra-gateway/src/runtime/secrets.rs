//! What the running gateway reads at start besides its configuration: secrets from files (the
//! metrics token, webhook signing secrets, the introspection client's secret), bounded before
//! they are read.

use crate::config::ConfigSource;
use crate::config::{AuthSettings, ConfigError};

pub(crate) use crate::config::secret::read_secret_file;

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
                (None, Some(var)) => crate::config::secret::read_secret_env(var)
                    .map_err(|why| source.error(&format!("{key}.client_secret_env"), why))?,
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
