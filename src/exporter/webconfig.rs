//! TLS, basic authentication, response headers and a request rate limit for the web endpoints
//! (metrics, health, landing page, snapshot), configured by a file in the Prometheus
//! exporter-toolkit format (`--web.config.file`), every key of it:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt                          # or cert: <PEM>, inline
//!   key_file: server.key                           # or key: <PEM>, inline
//!   client_auth_type: RequireAndVerifyClientCert   # optional; default NoClientCert
//!   client_ca_file: clients-ca.crt                 # or client_ca: <PEM>; with a verifying type
//!   client_allowed_sans: [scraper.example]         # optional; a client certificate must name one
//!   min_version: TLS12                             # TLS12 (default) or TLS13
//!   max_version: TLS13
//!   cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]   # TLS 1.2 suites, Go's names
//!   prefer_server_cipher_suites: true
//!   curve_preferences: [X25519, CurveP256]
//! http_server_config:
//!   http2: false                                   # accepted; the exporter serves HTTP/1.1
//!   headers:
//!     X-Frame-Options: deny
//! basic_auth_users:
//!   prometheus: $2y$10$...                          # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\n')
//! rate_limit:
//!   interval: 100ms                                # between two requests; 0 turns it off
//!   burst: 20
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
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
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
    #[serde(default)]
    pub http_server_config: Option<HttpServerConfig>,
    /// User name → bcrypt hash of the password.
    #[serde(default)]
    pub basic_auth_users: BTreeMap<String, String>,
    #[serde(default)]
    pub rate_limit: Option<RateLimitConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsServerConfig {
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The certificate chain, PEM, inline (instead of `cert_file`).
    #[serde(default)]
    pub cert: Option<String>,
    /// The private key, PEM, inline (instead of `key_file`).
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
    /// The client CA, PEM, inline (instead of `client_ca_file`).
    #[serde(default)]
    pub client_ca: Option<String>,
    #[serde(default)]
    pub client_auth_type: Option<String>,
    /// A client certificate must carry one of these subject alternative names (DNS name, IP
    /// address, e-mail address or URI), exactly.
    #[serde(default)]
    pub client_allowed_sans: Vec<String>,
    /// `TLS12` (default) or `TLS13`.
    #[serde(default)]
    pub min_version: Option<String>,
    /// `TLS12` or `TLS13` (default).
    #[serde(default)]
    pub max_version: Option<String>,
    /// TLS 1.2 cipher suites by their Go names, in order of preference (TLS 1.3 has its own).
    #[serde(default)]
    pub cipher_suites: Vec<String>,
    /// The server's order of `cipher_suites` wins over the client's (default true).
    #[serde(default)]
    pub prefer_server_cipher_suites: Option<bool>,
    /// Key exchange groups by their Go names, in order of preference.
    #[serde(default)]
    pub curve_preferences: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpServerConfig {
    /// Accepted for the format's sake: the exporter serves HTTP/1.1 either way (a scrape gains
    /// nothing from HTTP/2), and offers only `http/1.1` in TLS.
    #[serde(default)]
    pub http2: Option<bool>,
    /// Headers added to every answer: the five the format allows.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Time between two requests (a Go duration: `100ms`, `1s`); 0 turns the limit off.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Requests that may come at once.
    pub burst: u32,
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
    /// `tls_server_config.client_allowed_sans`: a client certificate must name one.
    pub allowed_sans: Option<Arc<Vec<String>>>,
    /// `http_server_config.headers`, on every answer.
    pub headers: Arc<Vec<(HeaderName, HeaderValue)>>,
    pub rate_limit: Option<Arc<RateLimit>>,
}

impl std::fmt::Debug for WebSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSecurity")
            .field("tls", &self.tls.is_some())
            .field(
                "basic_auth_users",
                &self.auth.as_ref().map(|a| a.users.len()),
            )
            .field("allowed_sans", &self.allowed_sans)
            .field("headers", &self.headers.len())
            .field("rate_limit", &self.rate_limit.is_some())
            .finish()
    }
}

impl WebSecurity {
    /// Whether a client that presented `certs` may go on: always, unless
    /// `client_allowed_sans` is set; then its certificate must name one of them exactly.
    pub fn client_allowed(&self, certs: Option<&[CertificateDer<'_>]>) -> bool {
        let Some(allowed) = &self.allowed_sans else {
            return true;
        };
        let Some(leaf) = certs.and_then(|c| c.first()) else {
            return false;
        };
        subject_alt_names(leaf.as_ref())
            .unwrap_or_default()
            .iter()
            .any(|san| allowed.iter().any(|a| san.matches(a)))
    }
}

/// A token bucket in front of every web request (`rate_limit`): `burst` at once, then one
/// every `interval`; past it, `429 Too Many Requests`.
pub struct RateLimit {
    interval: Duration,
    burst: f64,
    state: Mutex<(f64, std::time::Instant)>,
}

impl RateLimit {
    pub fn new(interval: Duration, burst: u32) -> RateLimit {
        RateLimit {
            interval,
            burst: f64::from(burst),
            state: Mutex::new((f64::from(burst), std::time::Instant::now())),
        }
    }

    /// Take a request's token, if there is one.
    pub fn allow(&self, now: std::time::Instant) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, at) = *st;
        let refill = now.saturating_duration_since(at).as_secs_f64() / self.interval.as_secs_f64();
        let tokens = (tokens + refill).min(self.burst);
        if tokens >= 1.0 {
            *st = (tokens - 1.0, now);
            true
        } else {
            *st = (tokens, now);
            false
        }
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

/// Build the TLS server configuration, the password check, the headers and the rate limit
/// from a parsed file.
pub fn build(file: &WebConfigFile, base: &Path) -> Result<WebSecurity, WebConfigError> {
    let (tls, allowed_sans) = match &file.tls_server_config {
        Some(t) => {
            let cfg = tls_config(t, base)?;
            let sans = (!t.client_allowed_sans.is_empty())
                .then(|| Arc::new(t.client_allowed_sans.clone()));
            (Some(Arc::new(cfg)), sans)
        }
        None => (None, None),
    };
    let auth = if file.basic_auth_users.is_empty() {
        None
    } else {
        Some(Arc::new(BasicAuth::new(&file.basic_auth_users)?))
    };
    let headers = match &file.http_server_config {
        Some(h) => response_headers(&h.headers)?,
        None => Vec::new(),
    };
    let rate_limit = match &file.rate_limit {
        Some(r) if !r.interval.is_zero() => {
            if r.burst == 0 {
                return Err(err(
                    "rate_limit.burst",
                    "0 lets no request through; accepted: 1 or more (or interval: 0 to turn the limit off)",
                ));
            }
            Some(Arc::new(RateLimit::new(r.interval, r.burst)))
        }
        _ => None,
    };
    Ok(WebSecurity {
        tls,
        auth,
        allowed_sans,
        headers: Arc::new(headers),
        rate_limit,
    })
}

/// The headers the format lets a web config add, with the values it accepts where it limits
/// them.
const HEADERS: [(&str, Option<&[&str]>); 5] = [
    ("Content-Security-Policy", None),
    ("X-Frame-Options", Some(&["deny", "sameorigin"])),
    ("X-Content-Type-Options", Some(&["nosniff"])),
    ("X-XSS-Protection", None),
    ("Strict-Transport-Security", None),
];

fn response_headers(
    given: &BTreeMap<String, String>,
) -> Result<Vec<(HeaderName, HeaderValue)>, WebConfigError> {
    let mut out = Vec::new();
    for (name, value) in given {
        let field = format!("http_server_config.headers.{name}");
        let Some((canonical, values)) = HEADERS.iter().find(|(h, _)| h.eq_ignore_ascii_case(name))
        else {
            let names: Vec<&str> = HEADERS.iter().map(|(h, _)| *h).collect();
            return Err(err(
                field,
                format!("this header cannot be set; accepted: {}", names.join(", ")),
            ));
        };
        // Blank: unset, as the format says.
        if value.trim().is_empty() {
            continue;
        }
        if let Some(values) = values {
            if !values.iter().any(|v| v.eq_ignore_ascii_case(value.trim())) {
                return Err(err(
                    field,
                    format!("`{value}` is not accepted; accepted: {}", values.join(", ")),
                ));
            }
        }
        let v = HeaderValue::from_str(value.trim())
            .map_err(|_| err(&field, "is not a valid header value (control characters?)"))?;
        out.push((HeaderName::from_static(lowercase(canonical)), v));
    }
    Ok(out)
}

/// The header names above in lower case, as `HeaderName::from_static` wants them.
fn lowercase(name: &str) -> &'static str {
    match name {
        "Content-Security-Policy" => "content-security-policy",
        "X-Frame-Options" => "x-frame-options",
        "X-Content-Type-Options" => "x-content-type-options",
        "X-XSS-Protection" => "x-xss-protection",
        _ => "strict-transport-security",
    }
}

fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

mod tls;
pub use tls::*;

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
        let f = parse("tls_server_config:\n  key_file: b\n").unwrap();
        let e = build(&f, Path::new(".")).unwrap_err();
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
    fn subject_alt_names_are_read_from_the_certificate_and_matched_exactly() {
        use rcgen::{CertificateParams, KeyPair, SanType};
        let mut p = CertificateParams::new(vec!["scraper.example".to_string()]).unwrap();
        p.subject_alt_names.extend([
            SanType::IpAddress("10.0.0.1".parse().unwrap()),
            SanType::IpAddress("::1".parse().unwrap()),
            SanType::Rfc822Name("ops@example.org".try_into().unwrap()),
            SanType::URI("spiffe://cluster/prometheus".try_into().unwrap()),
        ]);
        let cert = p.self_signed(&KeyPair::generate().unwrap()).unwrap();
        let der = CertificateDer::from(cert.der().to_vec());
        let sans = subject_alt_names(&der).unwrap();
        assert_eq!(sans.len(), 5, "{sans:?}");
        let with = |allowed: &[&str]| WebSecurity {
            allowed_sans: Some(Arc::new(allowed.iter().map(|s| s.to_string()).collect())),
            ..WebSecurity::default()
        };
        let certs = [der];
        for ok in [
            "scraper.example",
            "10.0.0.1",
            "0:0:0:0:0:0:0:1",
            "ops@example.org",
            "spiffe://cluster/prometheus",
        ] {
            assert!(with(&["other", ok]).client_allowed(Some(&certs)), "{ok}");
        }
        for no in ["scraper", "SCRAPER.example", "10.0.0.2", "example.org"] {
            assert!(!with(&[no]).client_allowed(Some(&certs)), "{no}");
        }
        assert!(!with(&["scraper.example"]).client_allowed(None));
        assert!(
            WebSecurity::default().client_allowed(None),
            "no list: anyone"
        );
        assert_eq!(subject_alt_names(b"\x30\x03\x02"), None, "cut short");
    }

    #[test]
    fn the_rate_limit_lets_a_burst_through_then_one_an_interval() {
        let l = RateLimit::new(Duration::from_millis(100), 3);
        let t0 = std::time::Instant::now();
        let first: Vec<bool> = (0..5).map(|_| l.allow(t0)).collect();
        assert_eq!(first, [true, true, true, false, false]);
        assert!(l.allow(t0 + Duration::from_millis(100)));
        assert!(!l.allow(t0 + Duration::from_millis(150)));
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
