//! TLS and basic authentication on the web endpoints (`--web.config.file`), through the real
//! binary, with certificates made at test time.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{logged_port, BIN};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A test CA, a server certificate for localhost/127.0.0.1 and a client certificate, as files.
struct Pki {
    dir: tempfile::TempDir,
    ca_pem: String,
    client_identity_pem: String,
}

fn leaf(
    names: Vec<String>,
    usage: ExtendedKeyUsagePurpose,
    ca: &Certificate,
    ca_key: &KeyPair,
) -> (String, String) {
    let mut p = CertificateParams::new(names).unwrap();
    p.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, ca, ca_key).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl Pki {
    fn new() -> Pki {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "gpumem test CA");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let (srv_cert, srv_key) = leaf(
            vec!["localhost".into(), "127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
            &ca,
            &ca_key,
        );
        let (cl_cert, cl_key) = leaf(
            vec!["scraper".into()],
            ExtendedKeyUsagePurpose::ClientAuth,
            &ca,
            &ca_key,
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
        std::fs::write(dir.path().join("server.crt"), &srv_cert).unwrap();
        std::fs::write(dir.path().join("server.key"), &srv_key).unwrap();
        Pki {
            dir,
            ca_pem: ca.pem(),
            client_identity_pem: format!("{cl_cert}{cl_key}"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write_web_config(&self, text: &str) -> PathBuf {
        let p = self.path("web.yml");
        std::fs::write(&p, text).unwrap();
        p
    }

    fn client(&self, identity: bool) -> reqwest::blocking::Client {
        let mut b = reqwest::blocking::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(self.ca_pem.as_bytes()).unwrap())
            .timeout(Duration::from_secs(10));
        if identity {
            b = b.identity(
                reqwest::Identity::from_pem(self.client_identity_pem.as_bytes()).unwrap(),
            );
        }
        b.build().unwrap()
    }
}

const USER: &str = "prometheus";
const PASSWORD: &str = "s3cret-scrape";

fn users_yaml() -> String {
    // Cost 4 keeps the debug-built test fast; the exporter reads any cost.
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    format!("basic_auth_users:\n  {USER}: '{hash}'\n")
}

/// The exporter on the simulator, killed on drop.
struct Running {
    child: Child,
    port: u16,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(web_config: &Path) -> Running {
    start_with_files(web_config, None)
}

/// `start`, with the exporter's open-files limit (soft and hard) set where given.
fn start_with_files(web_config: &Path, open_files: Option<u64>) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let log = dir.path().join("exporter.log");
    let mut cmd = Command::new(BIN);
    if let Some(n) = open_files {
        common::limit_open_files(&mut cmd, n);
    }
    let mut child = cmd
        .args(["--source", "sim", "--sample-interval", "100ms"])
        .args(["--web.listen-address", "127.0.0.1:0"])
        .arg("--ingest.socket")
        .arg(&socket)
        .arg("--web.config.file")
        .arg(web_config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start the exporter");
    // It logs the port it bound once it listens (whatever the protocol on it).
    let port = logged_port(&mut child, &log, "serving metrics");
    Running {
        child,
        port,
        socket,
        _dir: dir,
    }
}

fn wait_ready(client: &reqwest::blocking::Client, url: &str, auth: bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut req = client.get(url);
        if auth {
            req = req.basic_auth(USER, Some(PASSWORD));
        }
        if let Ok(r) = req.send() {
            if r.status().is_success() {
                return;
            }
        }
        assert!(Instant::now() < deadline, "not ready: {url}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Send a plain-HTTP request and return whatever comes back (nothing, or a TLS alert).
fn plain_http_answer(port: u16) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    buf
}

#[test]
fn https_with_basic_auth_serves_only_the_right_password() {
    let pki = Pki::new();
    let web = pki.write_web_config(&format!(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: {}\n{}",
        pki.path("server.key").display(),
        users_yaml()
    ));
    let ex = start(&web);
    let client = pki.client(false);
    let base = format!("https://127.0.0.1:{}", ex.port);
    wait_ready(&client, &format!("{base}/-/ready"), true);

    let r = client
        .get(format!("{base}/metrics"))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let body = r.text().unwrap();
    assert!(body.contains("gpumem_device_up"), "{body}");

    // Every endpoint is behind the password; wrong or missing: 401 with a Basic challenge.
    for path in [
        "/metrics",
        "/",
        "/-/healthy",
        "/-/ready",
        "/api/v1/snapshot",
    ] {
        for auth in [None, Some("wrong"), Some("")] {
            let mut req = client.get(format!("{base}{path}"));
            if let Some(p) = auth {
                req = req.basic_auth(USER, Some(p));
            }
            let r = req.send().unwrap();
            assert_eq!(r.status(), 401, "{path} with {auth:?}");
            let challenge = r.headers()["www-authenticate"].to_str().unwrap();
            assert!(challenge.starts_with("Basic"), "{challenge}");
        }
        let r = client
            .get(format!("{base}{path}"))
            .basic_auth("nobody", Some(PASSWORD))
            .send()
            .unwrap();
        assert_eq!(r.status(), 401, "{path}: unknown user");
    }

    // Scrapes after the first are answered from the cache of verified pairs: quick.
    let t = Instant::now();
    for _ in 0..20 {
        let r = client
            .get(format!("{base}/-/healthy"))
            .basic_auth(USER, Some(PASSWORD))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());

    // Plain HTTP on the TLS port: the handshake fails, no HTTP answer comes back.
    let answer = plain_http_answer(ex.port);
    assert!(
        !answer.starts_with(b"HTTP/"),
        "plain HTTP got an HTTP answer: {}",
        String::from_utf8_lossy(&answer)
    );
    let plain = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    assert!(plain
        .get(format!("http://127.0.0.1:{}/metrics", ex.port))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .is_err());
    // And a client that does not trust the test CA gets nothing either.
    let untrusting = reqwest::blocking::Client::builder()
        .use_rustls_tls()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    assert!(untrusting.get(format!("{base}/metrics")).send().is_err());
}

#[test]
fn client_certificate_mode_rejects_a_client_without_one() {
    let pki = Pki::new();
    let web = pki.write_web_config(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
    );
    let ex = start(&web);
    let base = format!("https://127.0.0.1:{}", ex.port);
    let with_cert = pki.client(true);
    wait_ready(&with_cert, &format!("{base}/-/ready"), false);
    let r = with_cert.get(format!("{base}/metrics")).send().unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().unwrap().contains("gpumem_device_up"));

    let without = pki.client(false);
    let e = without.get(format!("{base}/metrics")).send();
    assert!(e.is_err(), "a client without a certificate was served");
}

#[test]
fn basic_auth_without_tls_and_a_clean_stop_with_tls() {
    let pki = Pki::new();
    // Basic auth alone (behind a TLS-terminating proxy, say).
    let web = pki.write_web_config(&users_yaml());
    let ex = start(&web);
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let base = format!("http://127.0.0.1:{}", ex.port);
    wait_ready(&client, &format!("{base}/-/ready"), true);
    assert_eq!(
        client
            .get(format!("{base}/metrics"))
            .send()
            .unwrap()
            .status(),
        401
    );
    drop(ex);

    // TLS on: SIGTERM still stops cleanly, exit 0, socket file removed.
    let web = pki
        .write_web_config("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n");
    let mut ex = start(&web);
    let client = pki.client(false);
    let base = format!("https://127.0.0.1:{}", ex.port);
    wait_ready(&client, &format!("{base}/-/ready"), false);
    // An idle keep-alive connection must not hold the shutdown up.
    assert_eq!(
        client
            .get(format!("{base}/metrics"))
            .send()
            .unwrap()
            .status(),
        200
    );
    assert!(ex.socket.exists());
    unsafe { libc::kill(ex.child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = ex.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "did not stop after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    assert!(!ex.socket.exists(), "socket file left behind");
}

/// Run the binary with a web config and `--print-config`; return (exit code, stderr).
fn check_config(web: &Path) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .args(["--source", "sim", "--print-config", "--web.config.file"])
        .arg(web)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn a_bad_web_config_stops_the_start_naming_the_field() {
    let pki = Pki::new();
    let good = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    let (code, err) = check_config(&pki.write_web_config(good));
    assert_eq!(code, Some(0), "{err}");

    let cases: [(String, &[&str]); 6] = [
        (
            format!("{good}  bogus_option: true\n"),
            &["--web.config.file", "tls_server_config", "bogus_option"],
        ),
        (
            "tls_server_config:\n  cert_file: server.crt\n  key_file: missing.key\n".into(),
            &["tls_server_config.key_file", "missing.key"],
        ),
        (
            format!(
                "{good}  client_auth_type: RequireClientCertPlease\n  client_ca_file: ca.crt\n"
            ),
            &[
                "tls_server_config.client_auth_type",
                "RequireAndVerifyClientCert",
            ],
        ),
        (
            format!("{good}  client_auth_type: RequireAndVerifyClientCert\n"),
            &["tls_server_config.client_ca_file"],
        ),
        (
            "basic_auth_users:\n  alice: not-a-hash\n".into(),
            &["basic_auth_users.alice", "bcrypt"],
        ),
        (
            "tls_server_config:\n  cert_file: ca.crt\n  key_file: server.key\n".into(),
            &["tls_server_config.key_file"],
        ),
    ];
    for (text, wanted) in cases {
        let (code, err) = check_config(&pki.write_web_config(&text));
        assert_eq!(code, Some(2), "{text}\n{err}");
        for w in wanted {
            assert!(err.contains(w), "`{w}` not in: {err}");
        }
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    let (code, err) = check_config(&pki.path("no-such-web.yml"));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--web.config.file"), "{err}");
}

/// Handshakes begun and never finished, more of them than the exporter has file descriptors:
/// they are shed like idle connections, and a scraper with a certificate check still gets in.
#[test]
fn stalled_tls_handshakes_are_shed_like_idle_connections() {
    const FLOOD: usize = 2000;
    common::room_for_open_files(FLOOD as u64 + 256);
    let pki = Pki::new();
    let web = pki
        .write_web_config("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n");
    let ex = start_with_files(&web, Some(1024));
    let client = pki.client(false);
    let url = format!("https://127.0.0.1:{}/metrics", ex.port);
    wait_ready(&client, &url, false);
    // One byte of a TLS handshake record, then nothing.
    let held = common::flood(ex.port, FLOOD, &[0x16]);
    assert_eq!(held.len(), FLOOD, "every connection was accepted");
    let r = client
        .get(&url)
        .timeout(Duration::from_secs(3))
        .send()
        .expect("a scrape within 3 s under the flood");
    assert_eq!(r.status(), 200);
    assert!(r
        .text()
        .unwrap()
        .contains("gpumem_exporter_connections_shed_total"));
    assert!(ex.socket.exists());
    drop(held);
}

/// The exporter-toolkit format in full, as node_exporter reads it: inline PEM, the TLS 1.2
/// suites and curves by their Go names, client_allowed_sans, http_server_config with http2
/// and headers, and rate_limit.
#[test]
fn the_exporter_toolkit_format_in_full_is_served() {
    let pki = Pki::new();
    let cert = std::fs::read_to_string(pki.path("server.crt")).unwrap();
    let indent = |pem: &str| {
        pem.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    let web = |sans: &str| {
        format!(
            "tls_server_config:\n  cert: |\n{}  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  client_allowed_sans: [{sans}]\n  min_version: TLS12\n  max_version: TLS13\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305]\n  prefer_server_cipher_suites: true\n  curve_preferences: [X25519, CurveP256]\nhttp_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n    X-Content-Type-Options: nosniff\n    Strict-Transport-Security: max-age=31536000\n    Content-Security-Policy: \"\"\nrate_limit:\n  interval: 1s\n  burst: 3\n",
            indent(&cert)
        )
    };
    let ex = start(&pki.write_web_config(&web("scraper, 10.0.0.1")));
    let base = format!("https://127.0.0.1:{}", ex.port);
    let client = pki.client(true);
    // The limit leaves three at once and one a second: wait for each.
    let get = |path: &str| loop {
        let r = client.get(format!("{base}{path}")).send();
        match r {
            Ok(r) if r.status() == 429 => std::thread::sleep(Duration::from_millis(300)),
            other => break other,
        }
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while get("/-/ready").map(|r| r.status()).ok() != Some(reqwest::StatusCode::OK) {
        assert!(Instant::now() < deadline, "not ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = get("/metrics").unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.version(), reqwest::Version::HTTP_11);
    let h = r.headers();
    assert_eq!(h["x-frame-options"], "deny");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["strict-transport-security"], "max-age=31536000");
    assert!(h.get("content-security-policy").is_none(), "blank: unset");
    assert!(r.text().unwrap().contains("gpumem_device_up"));
    // Five at once: the burst of three, then 429 with the headers still on.
    std::thread::sleep(Duration::from_secs(4));
    let statuses: Vec<u16> = (0..5)
        .map(|_| client.get(format!("{base}/-/healthy")).send().unwrap())
        .map(|r| {
            if r.status() == 429 {
                assert_eq!(r.headers()["x-frame-options"], "deny");
            }
            r.status().as_u16()
        })
        .collect();
    assert_eq!(&statuses[..3], [200, 200, 200], "{statuses:?}");
    assert!(statuses[3..].contains(&429), "{statuses:?}");
    drop(ex);

    // The client's certificate names `scraper`: a list without it closes the connection.
    let ex = start(&pki.write_web_config(&web("someone-else")));
    let base = format!("https://127.0.0.1:{}", ex.port);
    std::thread::sleep(Duration::from_millis(500));
    let deadline = Instant::now() + Duration::from_secs(20);
    // Wait until the port answers at all (a plain TCP connect), then expect refusal.
    while std::net::TcpStream::connect(("127.0.0.1", ex.port)).is_err() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = client.get(format!("{base}/-/healthy")).send();
    assert!(
        r.is_err(),
        "a certificate outside client_allowed_sans was served: {r:?}"
    );
}

#[test]
fn a_web_config_key_outside_the_format_or_a_value_it_refuses_names_the_field() {
    let pki = Pki::new();
    let good = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    let cases: [(String, &[&str]); 7] = [
        (
            "http_server_config:\n  http3: true\n".into(),
            &["http_server_config", "http3"],
        ),
        (
            "http_server_config:\n  headers:\n    Server: gpumem\n".into(),
            &["http_server_config.headers.Server", "cannot be set"],
        ),
        (
            "http_server_config:\n  headers:\n    X-Frame-Options: allow-from x\n".into(),
            &[
                "http_server_config.headers.X-Frame-Options",
                "deny, sameorigin",
            ],
        ),
        (
            format!("{good}  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n"),
            &[
                "tls_server_config.cipher_suites[0]",
                "TLS_RSA_WITH_AES_128_CBC_SHA",
            ],
        ),
        (
            format!("{good}  curve_preferences: [CurveP521]\n"),
            &["tls_server_config.curve_preferences[0]", "X25519"],
        ),
        (
            format!("{good}  client_allowed_sans: [scraper]\n"),
            &[
                "tls_server_config.client_allowed_sans",
                "RequireAndVerifyClientCert",
            ],
        ),
        (
            "rate_limit:\n  interval: 1s\n  burst: 0\n".into(),
            &["rate_limit.burst"],
        ),
    ];
    for (text, wanted) in cases {
        let (code, err) = check_config(&pki.write_web_config(&text));
        assert_eq!(code, Some(2), "{text}\n{err}");
        for w in wanted {
            assert!(err.contains(w), "`{w}` not in: {err}");
        }
    }
    // node_exporter's own example file, as is.
    let (code, err) = check_config(&pki.write_web_config(
        "http_server_config:\n  http2: false\nbasic_auth_users:\n  alice: $2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DyyrdMGA8NjG8Ba3n5W8u\n",
    ));
    assert_eq!(code, Some(0), "{err}");
}
