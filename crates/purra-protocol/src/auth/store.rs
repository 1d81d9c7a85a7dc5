//! Where an OAuth client keeps what it obtained for a server: tokens, the client registration it
//! used, and the authorization server they belong to. [`MemoryTokenStore`] for one process;
//! [`FileTokenStore`], one JSON file readable by its owner only, for a CLI across runs.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::AuthError;
use crate::session::BoxFuture;

/// Tokens from a token endpoint. `Debug` shows no token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Tokens {
    /// The access token (sent as `Authorization: Bearer`).
    pub access_token: String,
    /// `Bearer`.
    #[serde(default = "bearer")]
    pub token_type: String,
    /// The refresh token, when the server issued one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, in seconds since the Unix epoch (from `expires_in`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scope granted (the scope requested when the server did not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

fn bearer() -> String {
    "Bearer".to_owned()
}

impl Tokens {
    /// Tokens holding only `access_token`.
    pub fn new(access_token: impl Into<String>) -> Self {
        Tokens {
            access_token: access_token.into(),
            token_type: bearer(),
            refresh_token: None,
            expires_at: None,
            scope: None,
        }
    }

    /// The granted scopes, one by one.
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.scope.as_deref().unwrap_or("").split_ascii_whitespace()
    }
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokens")
            .field("access_token", &"<redacted>")
            .field("token_type", &self.token_type)
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish()
    }
}

/// The client as registered with an authorization server (pre-registered, a Client ID Metadata
/// Document URL, or dynamically registered). `Debug` shows no secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ClientRegistration {
    /// The client id.
    pub client_id: String,
    /// The client secret, for confidential clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// How the client authenticates at the token endpoint (`client_secret_basic`,
    /// `client_secret_post`, `none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_method: Option<String>,
    /// The redirect URIs it was registered with (dynamic registration).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redirect_uris: Vec<String>,
    /// Unix time the client secret expires at (0 or absent: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_expires_at: Option<u64>,
}

impl ClientRegistration {
    /// A registration holding only `client_id`.
    pub fn new(client_id: impl Into<String>) -> Self {
        ClientRegistration {
            client_id: client_id.into(),
            client_secret: None,
            token_endpoint_auth_method: None,
            redirect_uris: Vec::new(),
            client_secret_expires_at: None,
        }
    }
}

impl fmt::Debug for ClientRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientRegistration")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "token_endpoint_auth_method",
                &self.token_endpoint_auth_method,
            )
            .field("redirect_uris", &self.redirect_uris)
            .finish()
    }
}

/// Everything kept for one MCP server: the authorization server (issuer and token endpoint, so
/// a refresh needs no discovery), the client registration, the tokens, and the resource
/// indicator they were issued for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StoredAuth {
    /// The authorization server's issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Its token endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    /// The resource indicator the tokens are bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The client registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientRegistration>,
    /// The tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
}

/// Keeps [`StoredAuth`] per server (the key is the MCP server's URL). Implementations must be
/// safe to call from several tasks; the futures are boxed so `Arc<dyn TokenStore>` works.
pub trait TokenStore: Send + Sync + 'static {
    /// What is stored for `key`, if anything.
    fn load(&self, key: &str) -> BoxFuture<'_, Result<Option<StoredAuth>, AuthError>>;
    /// Replaces what is stored for `key`.
    fn save(&self, key: &str, auth: StoredAuth) -> BoxFuture<'_, Result<(), AuthError>>;
    /// Forgets `key`; `Ok(false)` when nothing was stored.
    fn remove(&self, key: &str) -> BoxFuture<'_, Result<bool, AuthError>>;
}

/// A [`TokenStore`] in memory, for one process (the default).
#[derive(Debug, Default)]
pub struct MemoryTokenStore {
    entries: Mutex<BTreeMap<String, StoredAuth>>,
}

impl MemoryTokenStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl TokenStore for MemoryTokenStore {
    fn load(&self, key: &str) -> BoxFuture<'_, Result<Option<StoredAuth>, AuthError>> {
        let v = self.entries.lock().expect("store lock").get(key).cloned();
        Box::pin(std::future::ready(Ok(v)))
    }
    fn save(&self, key: &str, auth: StoredAuth) -> BoxFuture<'_, Result<(), AuthError>> {
        self.entries
            .lock()
            .expect("store lock")
            .insert(key.to_owned(), auth);
        Box::pin(std::future::ready(Ok(())))
    }
    fn remove(&self, key: &str) -> BoxFuture<'_, Result<bool, AuthError>> {
        let had = self
            .entries
            .lock()
            .expect("store lock")
            .remove(key)
            .is_some();
        Box::pin(std::future::ready(Ok(had)))
    }
}

/// The bound on a token file: a larger file is refused rather than read.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// A [`TokenStore`] in one JSON file (`{"servers": {url: StoredAuth}}`) that only its owner may
/// read: created 0600 (its directory 0700), written whole to a temporary file and renamed, and
/// refused when its permissions let anyone else read it.
#[derive(Debug)]
pub struct FileTokenStore {
    path: PathBuf,
    /// One writer at a time within this process (read, change, rename).
    write: Mutex<()>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct FileContents {
    #[serde(default)]
    servers: BTreeMap<String, StoredAuth>,
}

impl FileTokenStore {
    /// A store at `path`; the file is created on the first save.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileTokenStore {
            path: path.into(),
            write: Mutex::new(()),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<FileContents, AuthError> {
        let err = |why: String| AuthError::Store(format!("{}: {why}", self.path.display()));
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(FileContents::default())
            }
            Err(e) => return Err(err(e.to_string())),
        };
        let meta = file.metadata().map_err(|e| err(e.to_string()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(err(format!(
                    "permissions {mode:03o} let others read the tokens; refusing it (chmod 600)"
                )));
            }
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(err(format!("larger than {MAX_FILE_BYTES} bytes")));
        }
        let mut text = String::new();
        use std::io::Read as _;
        file.take(MAX_FILE_BYTES)
            .read_to_string(&mut text)
            .map_err(|e| err(e.to_string()))?;
        if text.trim().is_empty() {
            return Ok(FileContents::default());
        }
        serde_json::from_str(&text).map_err(|e| err(format!("not a token file: {e}")))
    }

    fn write(&self, contents: &FileContents) -> Result<(), AuthError> {
        let err = |why: String| AuthError::Store(format!("{}: {why}", self.path.display()));
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                let mut b = std::fs::DirBuilder::new();
                b.recursive(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::DirBuilderExt as _;
                    b.mode(0o700);
                }
                b.create(dir).map_err(|e| err(e.to_string()))?;
            }
        }
        let tmp = self.path.with_extension(format!(
            "tmp.{}.{}",
            std::process::id(),
            super::random_string(6)
        ));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            opts.mode(0o600);
        }
        let result = (|| {
            let mut f = opts.open(&tmp)?;
            let text = serde_json::to_string_pretty(contents).expect("JSON");
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(err(e.to_string()));
        }
        Ok(())
    }

    fn update<R>(&self, f: impl FnOnce(&mut FileContents) -> R) -> Result<R, AuthError> {
        let _one = self.write.lock().expect("file store lock");
        let mut contents = self.read()?;
        let r = f(&mut contents);
        self.write(&contents)?;
        Ok(r)
    }

    /// Every server the file holds something for.
    pub fn servers(&self) -> Result<Vec<String>, AuthError> {
        Ok(self.read()?.servers.into_keys().collect())
    }
}

impl TokenStore for FileTokenStore {
    fn load(&self, key: &str) -> BoxFuture<'_, Result<Option<StoredAuth>, AuthError>> {
        let r = self.read().map(|mut c| c.servers.remove(key));
        Box::pin(std::future::ready(r))
    }
    fn save(&self, key: &str, auth: StoredAuth) -> BoxFuture<'_, Result<(), AuthError>> {
        let r = self.update(|c| {
            c.servers.insert(key.to_owned(), auth);
        });
        Box::pin(std::future::ready(r))
    }
    fn remove(&self, key: &str) -> BoxFuture<'_, Result<bool, AuthError>> {
        let r = self.update(|c| c.servers.remove(key).is_some());
        Box::pin(std::future::ready(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "purra-auth-store-{name}-{}-{}",
            std::process::id(),
            super::super::random_string(6)
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[tokio::test]
    async fn file_store_round_trip_and_mode() {
        let dir = temp_dir("rt");
        let path = dir.join("sub").join("tokens.json");
        let store = FileTokenStore::new(&path);
        assert_eq!(store.load("http://a/mcp").await.unwrap(), None);
        let mut auth = StoredAuth {
            issuer: Some("http://as".into()),
            ..StoredAuth::default()
        };
        auth.tokens = Some(Tokens::new("secret-access"));
        store.save("http://a/mcp", auth.clone()).await.unwrap();
        assert_eq!(store.load("http://a/mcp").await.unwrap(), Some(auth));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
            let dmode = std::fs::metadata(path.parent().unwrap())
                .unwrap()
                .permissions()
                .mode()
                & 0o777;
            assert_eq!(dmode, 0o700);
            // A file others can read is refused, and says so.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let e = store.load("http://a/mcp").await.unwrap_err();
            assert!(e.to_string().contains("permissions 644"), "{e}");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        assert_eq!(store.servers().unwrap(), ["http://a/mcp"]);
        assert!(store.remove("http://a/mcp").await.unwrap());
        assert!(!store.remove("http://a/mcp").await.unwrap());
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["tokens.json"]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn debug_shows_no_secret() {
        let mut t = Tokens::new("at-123");
        t.refresh_token = Some("rt-456".into());
        let mut c = ClientRegistration::new("client");
        c.client_secret = Some("cs-789".into());
        let s = format!("{t:?} {c:?}");
        assert!(
            !s.contains("at-123") && !s.contains("rt-456") && !s.contains("cs-789"),
            "{s}"
        );
    }
}
