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

/// A PEM given either as a file or inline: exactly one of them.
fn pem_of(
    base: &Path,
    file: &Option<PathBuf>,
    inline: &Option<String>,
    file_field: &str,
    inline_field: &str,
    required: bool,
) -> Result<Option<(Vec<u8>, String, String)>, WebConfigError> {
    match (file, inline) {
        (Some(_), Some(_)) => Err(err(
            format!("tls_server_config.{inline_field}"),
            format!("give {file_field} or {inline_field}, not both"),
        )),
        (Some(p), None) => {
            let field = format!("tls_server_config.{file_field}");
            let path = resolve(base, p);
            Ok(Some((
                read_limited(&path, &field)?,
                field,
                path.display().to_string(),
            )))
        }
        (None, Some(text)) => Ok(Some((
            text.as_bytes().to_vec(),
            format!("tls_server_config.{inline_field}"),
            "the inline PEM".into(),
        ))),
        (None, None) if required => Err(err(
            "tls_server_config",
            format!("{file_field} (or {inline_field}, inline) is required"),
        )),
        (None, None) => Ok(None),
    }
}

fn parse_certs(
    pem: &[u8],
    field: &str,
    what: &str,
) -> Result<Vec<CertificateDer<'static>>, WebConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(field, format!("{what}: not a PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(err(field, format!("{what}: no PEM certificate in it")));
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

/// TLS 1.2 suites by their Go names (crypto/tls), as the format writes them. Only the AEAD
/// suites with forward secrecy: the others Go knows (CBC, RSA key exchange) are not offered.
fn cipher_suite(name: &str) -> Option<rustls::SupportedCipherSuite> {
    use rustls::crypto::ring::cipher_suite as cs;
    Some(match name {
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"
        | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256" => {
            cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        }
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" => {
            cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
        }
        _ => return None,
    })
}

const CIPHER_SUITES_ACCEPTED: &str = "accepted: TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305";

/// Key exchange groups by their Go names (crypto/tls `CurveID`).
fn curve(name: &str) -> Option<&'static dyn rustls::crypto::SupportedKxGroup> {
    use rustls::crypto::ring::kx_group;
    Some(match name {
        "X25519" => kx_group::X25519,
        "CurveP256" => kx_group::SECP256R1,
        "CurveP384" => kx_group::SECP384R1,
        _ => return None,
    })
}

fn tls_config(t: &TlsServerConfig, base: &Path) -> Result<rustls::ServerConfig, WebConfigError> {
    const F: &str = "tls_server_config";
    let mut provider = rustls::crypto::ring::default_provider();
    if !t.cipher_suites.is_empty() {
        let mut suites: Vec<rustls::SupportedCipherSuite> = provider
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS13)
            .copied()
            .collect();
        for (i, name) in t.cipher_suites.iter().enumerate() {
            let suite = cipher_suite(name).ok_or_else(|| {
                err(
                    format!("{F}.cipher_suites[{i}]"),
                    format!("`{name}` is not a TLS 1.2 cipher suite this exporter offers; {CIPHER_SUITES_ACCEPTED}"),
                )
            })?;
            if !suites.contains(&suite) {
                suites.push(suite);
            }
        }
        provider.cipher_suites = suites;
    }
    if !t.curve_preferences.is_empty() {
        let mut groups = Vec::new();
        for (i, name) in t.curve_preferences.iter().enumerate() {
            let g = curve(name).ok_or_else(|| {
                err(
                    format!("{F}.curve_preferences[{i}]"),
                    format!("`{name}` is not a curve this exporter offers; accepted: X25519, CurveP256, CurveP384"),
                )
            })?;
            groups.push(g);
        }
        provider.kx_groups = groups;
    }
    let provider = Arc::new(provider);
    let (cert_pem, cert_field, cert_what) =
        pem_of(base, &t.cert_file, &t.cert, "cert_file", "cert", true)?.expect("required");
    let certs = parse_certs(&cert_pem, &cert_field, &cert_what)?;
    let (key_pem, key_field, key_what) =
        pem_of(base, &t.key_file, &t.key, "key_file", "key", true)?.expect("required");
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        err(
            &key_field,
            format!("{key_what}: not a PEM private key: {e}"),
        )
    })?;

    let auth = ClientAuth::parse(t.client_auth_type.as_deref().unwrap_or(""))
        .map_err(|m| err(format!("{F}.client_auth_type"), m))?;
    let ca = pem_of(
        base,
        &t.client_ca_file,
        &t.client_ca,
        "client_ca_file",
        "client_ca",
        false,
    )?;
    if !t.client_allowed_sans.is_empty() && auth != ClientAuth::RequireAndVerifyClientCert {
        return Err(err(
            format!("{F}.client_allowed_sans"),
            "needs client_auth_type: RequireAndVerifyClientCert: without a certificate there is no name to match",
        ));
    }
    let verifier = match (auth, ca) {
        (ClientAuth::NoClientCert, None) => rustls::server::WebPkiClientVerifier::no_client_auth(),
        (ClientAuth::NoClientCert, Some((_, field, _))) => {
            return Err(err(
                field,
                "is set but client_auth_type is NoClientCert; set client_auth_type: RequireAndVerifyClientCert (or VerifyClientCertIfGiven)",
            ))
        }
        (_, None) => {
            return Err(err(
                format!("{F}.client_ca_file"),
                format!("(or client_ca, inline) is required with client_auth_type {auth:?}: the CA that signs client certificates"),
            ))
        }
        (_, Some((pem, field, what))) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in parse_certs(&pem, &field, &what)? {
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
    if min > 12 && !t.cipher_suites.is_empty() {
        return Err(err(
            format!("{F}.cipher_suites"),
            "apply to TLS 1.2 only, which min_version: TLS13 leaves out",
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
                format!("does not fit the certificate or cannot be used: {e}"),
            )
        })?;
    cfg.ignore_client_order = t.prefer_server_cipher_suites.unwrap_or(true);
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// A subject alternative name of a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
enum San {
    Dns(String),
    Ip(std::net::IpAddr),
    Email(String),
    Uri(String),
}

impl San {
    /// The exact match the format asks for; addresses compared as addresses (`::1` is
    /// `0:0:0:0:0:0:0:1`).
    fn matches(&self, allowed: &str) -> bool {
        match self {
            San::Dns(n) | San::Email(n) | San::Uri(n) => n == allowed,
            San::Ip(ip) => allowed.parse::<std::net::IpAddr>().is_ok_and(|a| a == *ip),
        }
    }
}

/// One DER element: its tag, its contents, and what follows it.
fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |a, &b| (a << 8) | usize::from(b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The subject alternative names of a DER certificate (RFC 5280: the tbsCertificate's
/// extensions, `subjectAltName`, 2.5.29.17); `None` where it cannot be read.
fn subject_alt_names(cert: &[u8]) -> Option<Vec<San>> {
    const SUBJECT_ALT_NAME: [u8; 3] = [0x55, 0x1d, 0x11];
    let (0x30, cert, _) = der(cert)? else {
        return None;
    };
    let (0x30, mut tbs, _) = der(cert)? else {
        return None;
    };
    let mut out = Vec::new();
    while !tbs.is_empty() {
        let (tag, body, rest) = der(tbs)?;
        tbs = rest;
        // [3] EXPLICIT Extensions
        if tag != 0xa3 {
            continue;
        }
        let (0x30, mut exts, _) = der(body)? else {
            return None;
        };
        while !exts.is_empty() {
            let (0x30, ext, rest) = der(exts)? else {
                return None;
            };
            exts = rest;
            let (0x06, oid, mut value) = der(ext)? else {
                return None;
            };
            if oid != SUBJECT_ALT_NAME {
                continue;
            }
            let (mut tag, mut body, _) = der(value)?;
            if tag == 0x01 {
                // critical BOOLEAN
                value = der(value)?.2;
                (tag, body, _) = der(value)?;
            }
            if tag != 0x04 {
                return None;
            }
            let (0x30, mut names, _) = der(body)? else {
                return None;
            };
            while !names.is_empty() {
                let (tag, v, rest) = der(names)?;
                names = rest;
                let text = || String::from_utf8(v.to_vec()).ok();
                match tag {
                    0x81 => out.extend(text().map(San::Email)),
                    0x82 => out.extend(text().map(San::Dns)),
                    0x86 => out.extend(text().map(San::Uri)),
                    0x87 => match v.len() {
                        4 => out.push(San::Ip(std::net::IpAddr::from(
                            <[u8; 4]>::try_from(v).ok()?,
                        ))),
                        16 => out.push(San::Ip(std::net::IpAddr::from(
                            <[u8; 16]>::try_from(v).ok()?,
                        ))),
                        _ => {}
                    },
                    _ => {}
                }
            }
        }
    }
    Some(out)
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

async fn add_headers(
    State(headers): State<Arc<Vec<(HeaderName, HeaderValue)>>>,
    req: Request,
    next: Next,
) -> Response {
    let mut r = next.run(req).await;
    for (name, value) in headers.iter() {
        r.headers_mut().insert(name.clone(), value.clone());
    }
    r
}

async fn limit_rate(State(limit): State<Arc<RateLimit>>, req: Request, next: Next) -> Response {
    if limit.allow(std::time::Instant::now()) {
        next.run(req).await
    } else {
        (StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n").into_response()
    }
}

/// Put the web config in front of every route, in the format's order: the headers on every
/// answer (a refusal too), then the rate limit, then basic authentication.
pub fn protect(app: Router, security: &WebSecurity) -> Router {
    let mut app = match &security.auth {
        Some(auth) => app.layer(axum::middleware::from_fn_with_state(
            Arc::clone(auth),
            require_auth,
        )),
        None => app,
    };
    if let Some(limit) = &security.rate_limit {
        app = app.layer(axum::middleware::from_fn_with_state(
            Arc::clone(limit),
            limit_rate,
        ));
    }
    if !security.headers.is_empty() {
        app = app.layer(axum::middleware::from_fn_with_state(
            Arc::clone(&security.headers),
            add_headers,
        ));
    }
    app
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
