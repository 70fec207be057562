//! TLS and basic authentication for the web endpoints (metrics, health, landing page, snapshot),
//! configured by a file in the Prometheus exporter-toolkit format (`--web.config.file`):
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert   # optional; default NoClientCert
//!   client_ca_file: clients-ca.crt                 # with a verifying client_auth_type
//! basic_auth_users:
//!   prometheus: $2y$10$...                          # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```
//!
//! Relative paths are taken from the folder of the web config file. The ingest endpoints are
//! not affected: they have their own trust rules (docs/security.md).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

/// The web config file as written. Unknown keys are errors, so that a typo never silently
/// turns protection off.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebConfigFile {
    #[serde(default)]
    pub tls_server_config: Option<TlsServerConfig>,
    /// User name → bcrypt hash of the password.
    #[serde(default)]
    pub basic_auth_users: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsServerConfig {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
    #[serde(default)]
    pub client_auth_type: Option<String>,
    /// `TLS12` (default) or `TLS13`.
    #[serde(default)]
    pub min_version: Option<String>,
    /// `TLS12` or `TLS13` (default).
    #[serde(default)]
    pub max_version: Option<String>,
}

/// What goes wrong in a web config file: the field (a path inside the file) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct WebConfigError {
    pub field: String,
    pub message: String,
}

fn err(field: impl Into<String>, message: impl Into<String>) -> WebConfigError {
    WebConfigError {
        field: field.into(),
        message: message.into(),
    }
}

pub const CLIENT_AUTH_ACCEPTED: &str =
    "accepted: NoClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert";

/// Which client certificates the TLS server asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    NoClientCert,
    VerifyClientCertIfGiven,
    RequireAndVerifyClientCert,
}

impl ClientAuth {
    pub fn parse(s: &str) -> Result<ClientAuth, String> {
        match s {
            "" | "NoClientCert" => Ok(ClientAuth::NoClientCert),
            "VerifyClientCertIfGiven" => Ok(ClientAuth::VerifyClientCertIfGiven),
            "RequireAndVerifyClientCert" => Ok(ClientAuth::RequireAndVerifyClientCert),
            "RequestClientCert" | "RequireAnyClientCert" => Err(format!(
                "`{s}` is not supported (it accepts certificates nobody verified); {CLIENT_AUTH_ACCEPTED}"
            )),
            _ => Err(format!(
                "`{s}` is not a client auth type; {CLIENT_AUTH_ACCEPTED}"
            )),
        }
    }
}

/// The web config, loaded and checked: ready to serve with.
#[derive(Clone, Default)]
pub struct WebSecurity {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub auth: Option<Arc<BasicAuth>>,
}

impl std::fmt::Debug for WebSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSecurity")
            .field("tls", &self.tls.is_some())
            .field(
                "basic_auth_users",
                &self.auth.as_ref().map(|a| a.users.len()),
            )
            .finish()
    }
}

/// Files named by a web config are small; a larger one is a mistake (or `/dev/zero`).
const MAX_FILE_BYTES: u64 = 1 << 20;

fn read_limited(path: &Path, field: &str) -> Result<Vec<u8>, WebConfigError> {
    let f = std::fs::File::open(path)
        .map_err(|e| err(field, format!("cannot read {}: {e}", path.display())))?;
    let mut buf = Vec::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| err(field, format!("cannot read {}: {e}", path.display())))?;
    if buf.len() as u64 > MAX_FILE_BYTES {
        return Err(err(
            field,
            format!("{} is larger than 1 MiB", path.display()),
        ));
    }
    Ok(buf)
}

/// Load and check a web config file: parse it, read the certificates and keys it names and
/// check the password hashes. Errors name the field inside the file.
pub fn load(path: &Path) -> Result<WebSecurity, WebConfigError> {
    let bytes = read_limited(path, "web config file")?;
    let text = String::from_utf8(bytes).map_err(|_| err("web config file", "is not UTF-8"))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let file = parse(&text)?;
    build(&file, base)
}

/// Parse the YAML only (no files read).
pub fn parse(text: &str) -> Result<WebConfigFile, WebConfigError> {
    if text.trim().is_empty() {
        return Ok(WebConfigFile::default());
    }
    let de = serde_yaml_ng::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "web config file".to_string()
        } else {
            path
        };
        err(field, e.into_inner().to_string())
    })
}

/// Build the TLS server configuration and the password check from a parsed file.
pub fn build(file: &WebConfigFile, base: &Path) -> Result<WebSecurity, WebConfigError> {
    let tls = match &file.tls_server_config {
        Some(t) => Some(Arc::new(tls_config(t, base)?)),
        None => None,
    };
    let auth = if file.basic_auth_users.is_empty() {
        None
    } else {
        Some(Arc::new(BasicAuth::new(&file.basic_auth_users)?))
    };
    Ok(WebSecurity { tls, auth })
}

fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

fn read_certs(path: &Path, field: &str) -> Result<Vec<CertificateDer<'static>>, WebConfigError> {
    let pem = read_limited(path, field)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            err(
                field,
                format!("{}: not a PEM certificate: {e}", path.display()),
            )
        })?;
    if certs.is_empty() {
        return Err(err(
            field,
            format!("{}: no PEM certificate in it", path.display()),
        ));
    }
    Ok(certs)
}

fn tls_version(field: &str, v: &str) -> Result<u8, WebConfigError> {
    match v {
        "TLS12" => Ok(12),
        "TLS13" => Ok(13),
        "TLS10" | "TLS11" => Err(err(
            field,
            format!("`{v}` is not supported (obsolete); accepted: TLS12, TLS13"),
        )),
        _ => Err(err(
            field,
            format!("`{v}` is not a TLS version; accepted: TLS12, TLS13"),
        )),
    }
}

fn tls_config(t: &TlsServerConfig, base: &Path) -> Result<rustls::ServerConfig, WebConfigError> {
    const F: &str = "tls_server_config";
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = read_certs(&resolve(base, &t.cert_file), &format!("{F}.cert_file"))?;
    let key_field = format!("{F}.key_file");
    let key_path = resolve(base, &t.key_file);
    let key_pem = read_limited(&key_path, &key_field)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        err(
            &key_field,
            format!("{}: not a PEM private key: {e}", key_path.display()),
        )
    })?;

    let auth = ClientAuth::parse(t.client_auth_type.as_deref().unwrap_or(""))
        .map_err(|m| err(format!("{F}.client_auth_type"), m))?;
    let verifier = match (auth, &t.client_ca_file) {
        (ClientAuth::NoClientCert, None) => rustls::server::WebPkiClientVerifier::no_client_auth(),
        (ClientAuth::NoClientCert, Some(_)) => {
            return Err(err(
                format!("{F}.client_ca_file"),
                "is set but client_auth_type is NoClientCert; set client_auth_type: RequireAndVerifyClientCert (or VerifyClientCertIfGiven)",
            ))
        }
        (_, None) => {
            return Err(err(
                format!("{F}.client_ca_file"),
                format!("is required with client_auth_type {auth:?}: the CA that signs client certificates"),
            ))
        }
        (_, Some(ca)) => {
            let field = format!("{F}.client_ca_file");
            let mut roots = rustls::RootCertStore::empty();
            for c in read_certs(&resolve(base, ca), &field)? {
                roots
                    .add(c)
                    .map_err(|e| err(&field, format!("unusable CA certificate: {e}")))?;
            }
            let b = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                Arc::clone(&provider),
            );
            let b = if auth == ClientAuth::VerifyClientCertIfGiven {
                b.allow_unauthenticated()
            } else {
                b
            };
            b.build()
                .map_err(|e| err(&field, format!("cannot verify clients with it: {e}")))?
        }
    };

    let min = match &t.min_version {
        Some(v) => tls_version(&format!("{F}.min_version"), v)?,
        None => 12,
    };
    let max = match &t.max_version {
        Some(v) => tls_version(&format!("{F}.max_version"), v)?,
        None => 13,
    };
    if min > max {
        return Err(err(
            format!("{F}.min_version"),
            "must not be above max_version",
        ));
    }
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
            .into_iter()
            .filter(|(v, _)| (min..=max).contains(v))
            .map(|(_, p)| p)
            .collect();

    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| err(format!("{F}.min_version"), e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| {
            err(
                &key_field,
                format!("does not fit cert_file or cannot be used: {e}"),
            )
        })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// A valid bcrypt hash of a random password: unknown users are checked against it, so that a
/// wrong user name takes as long as a wrong password.
const DUMMY_HASH: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DyyrdMGA8NjG8Ba3n5W8u";
/// Successful (user, password) pairs remembered at most; the cache is emptied when full.
const CACHE_MAX: usize = 256;
/// Bcrypt verifications at once: a flood of wrong passwords queues here instead of taking
/// every core from the sampler. Cached successes do not wait.
const VERIFY_CONCURRENCY: usize = 2;

/// Basic authentication against bcrypt hashes. Bcrypt is slow on purpose (tens of ms), so a
/// successful (user, password) pair is remembered as an HMAC under a key made at start: the
/// password itself is never kept, and scraping every second costs one hash lookup.
pub struct BasicAuth {
    users: HashMap<String, String>,
    cache_key: ring::hmac::Key,
    cache: Mutex<HashSet<[u8; 32]>>,
    verifying: tokio::sync::Semaphore,
}

impl BasicAuth {
    pub fn new(users: &BTreeMap<String, String>) -> Result<BasicAuth, WebConfigError> {
        for (user, hash) in users {
            let field = format!("basic_auth_users.{user}");
            if user.is_empty() || user.contains(':') {
                return Err(err(
                    field,
                    "a user name must be non-empty and contain no `:`",
                ));
            }
            hash.parse::<bcrypt::HashParts>()
                .map_err(|e| err(&field, format!("not a bcrypt hash such as $2y$10$… ({e})")))?;
        }
        let rng = ring::rand::SystemRandom::new();
        let cache_key = ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng)
            .map_err(|_| err("basic_auth_users", "no randomness for the cache key"))?;
        Ok(BasicAuth {
            users: users.iter().map(|(u, h)| (u.clone(), h.clone())).collect(),
            cache_key,
            cache: Mutex::new(HashSet::new()),
            verifying: tokio::sync::Semaphore::new(VERIFY_CONCURRENCY),
        })
    }

    fn cache_tag(&self, user: &str, password: &[u8]) -> [u8; 32] {
        let mut ctx = ring::hmac::Context::with_key(&self.cache_key);
        ctx.update(&(user.len() as u64).to_le_bytes());
        ctx.update(user.as_bytes());
        ctx.update(password);
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.sign().as_ref());
        out
    }

    /// Check an `Authorization` header. Verification runs on the blocking pool.
    pub async fn check(&self, value: Option<&HeaderValue>) -> bool {
        let Some((user, password)) = value.and_then(decode_basic) else {
            return false;
        };
        let tag = self.cache_tag(&user, &password);
        if self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&tag)
        {
            return true;
        }
        let (hash, known) = match self.users.get(&user) {
            Some(h) => (h.clone(), true),
            None => (DUMMY_HASH.to_string(), false),
        };
        let Ok(_permit) = self.verifying.acquire().await else {
            return false;
        };
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(&password, &hash))
            .await
            .ok()
            .and_then(|r| r.ok())
            .unwrap_or(false)
            && known;
        if ok {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() >= CACHE_MAX {
                cache.clear();
            }
            cache.insert(tag);
        }
        ok
    }
}

/// `Basic base64(user:password)` → (user, password).
fn decode_basic(value: &HeaderValue) -> Option<(String, Vec<u8>)> {
    use base64::Engine;
    let v = value.to_str().ok()?.trim();
    let (scheme, rest) = v.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let colon = raw.iter().position(|&b| b == b':')?;
    let user = String::from_utf8(raw[..colon].to_vec()).ok()?;
    Some((user, raw[colon + 1..].to_vec()))
}

async fn require_auth(State(auth): State<Arc<BasicAuth>>, req: Request, next: Next) -> Response {
    if auth.check(req.headers().get(header::AUTHORIZATION)).await {
        next.run(req).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                "Basic realm=\"gpumem-exporter\", charset=\"UTF-8\"",
            )],
            "Unauthorized\n",
        )
            .into_response()
    }
}

/// Put basic authentication in front of every route when users are configured.
pub fn protect(app: Router, security: &WebSecurity) -> Router {
    match &security.auth {
        Some(auth) => app.layer(axum::middleware::from_fn_with_state(
            Arc::clone(auth),
            require_auth,
        )),
        None => app,
    }
}

/// Read and check the configured web config file, so that a bad one stops the start with the
/// field named (the configuration itself only holds its path).
pub fn check(cfg: &crate::config::Config) -> Result<(), crate::config::ConfigError> {
    match &cfg.web.config_file {
        Some(p) => load(p).map(|_| ()).map_err(|e| crate::config::ConfigError {
            field: "web.config_file".into(),
            message: format!("{}: {e}", p.display()),
        }),
        None => Ok(()),
    }
}

/// How long a client may take over its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_means_no_tls_and_no_auth() {
        let s = build(&parse("").unwrap(), Path::new(".")).unwrap();
        assert!(s.tls.is_none() && s.auth.is_none());
    }

    #[test]
    fn unknown_keys_and_values_name_the_field() {
        let e =
            parse("tls_server_config:\n  cert_file: a\n  key_file: b\n  bogus: 1\n").unwrap_err();
        assert!(e.field.starts_with("tls_server_config"), "{e}");
        assert!(e.message.contains("bogus"), "{e}");
        let e = parse("basic_auth_user: {}\n").unwrap_err();
        assert!(e.message.contains("basic_auth_users"), "{e}");
        let e = parse("tls_server_config:\n  key_file: b\n").unwrap_err();
        assert!(e.message.contains("cert_file"), "{e}");
        assert!(ClientAuth::parse("RequireAndVerifyClientCert").is_ok());
        assert!(ClientAuth::parse("RequireAnyClientCert")
            .unwrap_err()
            .contains("not supported"));
        assert!(ClientAuth::parse("Always")
            .unwrap_err()
            .contains("accepted"));
    }

    #[test]
    fn bad_hashes_and_user_names_are_refused() {
        let f = parse("basic_auth_users:\n  alice: plaintext\n").unwrap();
        let e = build(&f, Path::new(".")).unwrap_err();
        assert_eq!(e.field, "basic_auth_users.alice");
        let f = parse(&format!("basic_auth_users:\n  'a:b': '{DUMMY_HASH}'\n")).unwrap();
        assert!(build(&f, Path::new(".")).is_err());
    }

    #[test]
    fn missing_files_name_the_field() {
        let f = parse("tls_server_config:\n  cert_file: /nonexistent/c.pem\n  key_file: k.pem\n")
            .unwrap();
        let e = build(&f, Path::new(".")).unwrap_err();
        assert_eq!(e.field, "tls_server_config.cert_file");
    }

    #[test]
    fn the_dummy_hash_is_a_real_one() {
        assert!(!bcrypt::verify("anything", DUMMY_HASH).unwrap());
    }

    #[test]
    fn decodes_basic_credentials() {
        let v = HeaderValue::from_static("Basic dXNlcjpwYTpzcw=="); // user:pa:ss
        assert_eq!(decode_basic(&v), Some(("user".into(), b"pa:ss".to_vec())));
        assert_eq!(decode_basic(&HeaderValue::from_static("Bearer x")), None);
        assert_eq!(decode_basic(&HeaderValue::from_static("Basic !!!")), None);
    }

    #[test]
    fn checks_passwords_and_caches_successes() {
        let hash = bcrypt::hash("secret", 4).unwrap();
        let users = BTreeMap::from([("alice".to_string(), hash)]);
        let auth = BasicAuth::new(&users).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        use base64::Engine;
        let hv = |u: &str, p: &str| {
            HeaderValue::from_str(&format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            ))
            .unwrap()
        };
        rt.block_on(async {
            assert!(auth.check(Some(&hv("alice", "secret"))).await);
            assert_eq!(auth.cache.lock().unwrap().len(), 1);
            assert!(auth.check(Some(&hv("alice", "secret"))).await);
            assert!(!auth.check(Some(&hv("alice", "wrong"))).await);
            assert!(!auth.check(Some(&hv("bob", "secret"))).await);
            assert!(!auth.check(None).await);
            assert_eq!(
                auth.cache.lock().unwrap().len(),
                1,
                "failures are not cached"
            );
        });
    }
}
