//! What the web config builds: the TLS side (certificates and keys from files or inline PEM,
//! client authentication and the names a client certificate must carry, versions, cipher
//! suites and curves, as rustls takes them), basic authentication and the layer that guards
//! the endpoints.

use super::*;

/// A PEM given either as a file or inline: exactly one of them.
pub(super) fn pem_of(
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

pub(super) fn parse_certs(
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

pub(super) fn tls_version(field: &str, v: &str) -> Result<u8, WebConfigError> {
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
pub(super) fn cipher_suite(name: &str) -> Option<rustls::SupportedCipherSuite> {
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

pub(super) const CIPHER_SUITES_ACCEPTED: &str = "accepted: TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305";

/// Key exchange groups by their Go names (crypto/tls `CurveID`).
pub(super) fn curve(name: &str) -> Option<&'static dyn rustls::crypto::SupportedKxGroup> {
    use rustls::crypto::ring::kx_group;
    Some(match name {
        "X25519" => kx_group::X25519,
        "CurveP256" => kx_group::SECP256R1,
        "CurveP384" => kx_group::SECP384R1,
        _ => return None,
    })
}

pub(super) fn tls_config(
    t: &TlsServerConfig,
    base: &Path,
) -> Result<rustls::ServerConfig, WebConfigError> {
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
pub(super) enum San {
    Dns(String),
    Ip(std::net::IpAddr),
    Email(String),
    Uri(String),
}

impl San {
    /// The exact match the format asks for; addresses compared as addresses (`::1` is
    /// `0:0:0:0:0:0:0:1`).
    pub(super) fn matches(&self, allowed: &str) -> bool {
        match self {
            San::Dns(n) | San::Email(n) | San::Uri(n) => n == allowed,
            San::Ip(ip) => allowed.parse::<std::net::IpAddr>().is_ok_and(|a| a == *ip),
        }
    }
}

/// One DER element: its tag, its contents, and what follows it.
pub(super) fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
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
pub(super) fn subject_alt_names(cert: &[u8]) -> Option<Vec<San>> {
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
pub(super) const DUMMY_HASH: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DyyrdMGA8NjG8Ba3n5W8u";
/// Successful (user, password) pairs remembered at most; the cache is emptied when full.
pub(super) const CACHE_MAX: usize = 256;
/// Bcrypt verifications at once: a flood of wrong passwords queues here instead of taking
/// every core from the sampler. Cached successes do not wait.
pub(super) const VERIFY_CONCURRENCY: usize = 2;

/// Basic authentication against bcrypt hashes. Bcrypt is slow on purpose (tens of ms), so a
/// successful (user, password) pair is remembered as an HMAC under a key made at start: the
/// password itself is never kept, and scraping every second costs one hash lookup.
pub struct BasicAuth {
    pub(super) users: HashMap<String, String>,
    pub(super) cache_key: ring::hmac::Key,
    pub(super) cache: Mutex<HashSet<[u8; 32]>>,
    pub(super) verifying: tokio::sync::Semaphore,
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
pub(super) fn decode_basic(value: &HeaderValue) -> Option<(String, Vec<u8>)> {
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
