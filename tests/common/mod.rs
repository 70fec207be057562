//! Helpers for tests that run the real binary.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_gpumem-exporter");

pub fn traces_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/traces")
}

pub fn trace(name: &str) -> PathBuf {
    let p = traces_dir().join(name);
    assert!(p.exists(), "trace {} not found in data/traces", p.display());
    p
}

/// The port the exporter logged in `log` for the line whose message is `msg` (it binds port 0
/// and logs what it got: no port is picked here and bound there later, which races). Waits
/// until the line is there; panics with the log if the exporter exits first.
pub fn logged_port(child: &mut Child, log: &Path, msg: &str) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let found = text
            .lines()
            .filter(|l| l.contains(&format!("msg=\"{msg}")) || l.contains(&format!("msg={msg}")))
            .find_map(|l| {
                let addr = l
                    .split_whitespace()
                    .find_map(|f| f.strip_prefix("address="))?;
                addr.rsplit_once(':')?.1.parse().ok()
            });
        if let Some(port) = found {
            return port;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the exporter exited ({status}) before serving:\n{text}");
        }
        assert!(
            Instant::now() < deadline,
            "no `{msg}` address in the log within 60 s:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running exporter, killed on drop.
pub struct Exporter {
    pub child: Child,
    pub port: u16,
    pub socket: PathBuf,
    /// The TCP ingest port, 0 when TCP ingest is off.
    pub ingest_port: u16,
    pub dir: tempfile::TempDir,
}

/// How to start one: the one launcher every test of the binary uses.
pub struct Launch<'a> {
    /// The configuration file's text (none when empty).
    pub config_yaml: &'a str,
    pub extra: &'a [&'a str],
    /// `--sample-interval`, unless `extra` gives it.
    pub sample_interval: Option<&'a str>,
    /// Plain-HTTP ingest on a free loopback port too.
    pub tcp_ingest: bool,
    /// The exporter's open-files limit (soft and hard), where a test needs it low.
    pub open_files: Option<u64>,
}

impl Default for Launch<'_> {
    fn default() -> Self {
        Launch {
            config_yaml: "",
            extra: &[],
            sample_interval: Some("100ms"),
            tcp_ingest: false,
            open_files: None,
        }
    }
}

impl Exporter {
    pub fn start(extra: &[&str]) -> Exporter {
        Self::launch(Launch {
            extra,
            ..Launch::default()
        })
    }

    /// Started with `config_yaml` as its configuration file (none when empty).
    pub fn start_with_config(config_yaml: &str, extra: &[&str]) -> Exporter {
        Self::launch(Launch {
            config_yaml,
            extra,
            ..Launch::default()
        })
    }

    /// On the simulator, with the ingest socket in a fresh folder, serving on a free port; its
    /// log goes to a file there (`log()`), so that a chatty exporter never blocks on a pipe.
    pub fn launch(l: Launch) -> Exporter {
        Self::launch_on("sim", &[], l)
    }

    /// `launch` on another `--source`, with `env` added to its environment (the NVML
    /// stand-in's library path and script).
    pub fn launch_on(source: &str, env: &[(&str, &OsStr)], l: Launch) -> Exporter {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("ingest.sock");
        let mut cmd = Command::new(BIN);
        cmd.args(["--source", source]).envs(env.iter().copied());
        if !l.config_yaml.is_empty() {
            let cfg = dir.path().join("config.yml");
            std::fs::write(&cfg, l.config_yaml).unwrap();
            cmd.arg("--config").arg(cfg);
        }
        if let Some(i) = l.sample_interval {
            cmd.args(["--sample-interval", i]);
        }
        if l.tcp_ingest {
            cmd.args(["--ingest.listen-address", "127.0.0.1:0"]);
        }
        if let Some(n) = l.open_files {
            limit_open_files(&mut cmd, n);
        }
        let log_path = dir.path().join("exporter.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let mut child = cmd
            .args(["--web.listen-address", "127.0.0.1:0"])
            .arg("--ingest.socket")
            .arg(&socket)
            .args(l.extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the exporter");
        let port = logged_port(&mut child, &log_path, "serving metrics");
        let ingest_port = if l.tcp_ingest {
            logged_port(&mut child, &log_path, "TCP ingest on")
        } else {
            0
        };
        let e = Exporter {
            child,
            port,
            socket,
            ingest_port,
            dir,
        };
        e.wait_ready();
        e
    }

    /// What it has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("exporter.log")).unwrap_or_default()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, path)
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(r) = reqwest::blocking::get(self.url("/-/ready")) {
                if r.status().is_success() {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("exporter did not become ready within 20 s");
    }

    pub fn get(&self, path: &str) -> String {
        reqwest::blocking::get(self.url(path))
            .unwrap()
            .text()
            .unwrap()
    }

    pub fn metrics(&self) -> String {
        self.get("/metrics")
    }

    /// `/metrics` once `cond` holds on it; panics naming `what` after 30 s.
    pub fn wait_metrics(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let m = self.metrics();
            if cond(&m) {
                return m;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request written by hand over a Unix socket; returns the whole answer (head and body).
pub fn exchange_unix(socket: &Path, request: &[u8]) -> String {
    let mut s =
        std::os::unix::net::UnixStream::connect(socket).expect("connect to the ingest socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A body over the limit may be refused before it is all read: ignore a broken pipe.
    let _ = s.write_all(request);
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    String::from_utf8_lossy(&resp).into_owned()
}

/// One HTTP/1.1 POST over a Unix socket; returns (status, body).
pub fn post_unix(socket: &Path, path: &str, content_type: &str, body: &[u8]) -> (u16, String) {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let text = exchange_unix(socket, &[head.as_bytes(), body].concat());
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

/// The first GPU's uuid in a text exposition.
pub fn first_uuid(metrics: &str) -> String {
    metrics
        .lines()
        .find(|l| l.starts_with("gpumem_gpu_info{"))
        .and_then(|l| l.split("uuid=\"").nth(1))
        .and_then(|r| r.split('"').next())
        .expect("a GPU's uuid")
        .to_string()
}

/// Value of the first sample line that starts with `prefix` (name plus labels).
pub fn sample_value(metrics: &str, name: &str, label_filter: &[(&str, &str)]) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.starts_with(name) && matches!(l.as_bytes().get(name.len()), Some(b'{') | Some(b' '))
        })
        .find(|l| {
            label_filter
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Family names that have at least one sample in text-format output.
pub fn family_names(metrics: &str) -> std::collections::BTreeSet<String> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

pub fn promtool() -> PathBuf {
    let p = which("promtool").unwrap_or_else(|| {
        panic!("promtool not found: install the Debian package `prometheus` (the README's test command does)")
    });
    p
}

pub fn which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(cmd))
            .find(|p| p.is_file())
    })
}

/// Read one HTTP/1.1 response (Content-Length or chunked framing) from a connection.
pub fn read_response(r: &mut impl BufRead) -> std::io::Result<(u16, Vec<u8>)> {
    let mut status = 0;
    let mut len = 0usize;
    let mut chunked = false;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let l = line.trim_end();
        if status == 0 {
            status = l
                .split(' ')
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
        } else if l.is_empty() {
            break;
        } else if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            } else if k.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.trim().eq_ignore_ascii_case("chunked");
            }
        }
    }
    if !chunked {
        let mut body = vec![0; len];
        r.read_exact(&mut body)?;
        return Ok((status, body));
    }
    let mut body = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let size = usize::from_str_radix(line.trim_end(), 16).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("chunk size {line:?}"),
            )
        })?;
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])?;
        line.clear();
        r.read_line(&mut line)?; // the CRLF after the chunk (or the last, empty line)
        if size == 0 {
            return Ok((status, body));
        }
    }
}

pub fn http_get(port: u16, path: &str, timeout: Duration) -> std::io::Result<(u16, Vec<u8>)> {
    let s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    (&s).write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    read_response(&mut BufReader::new(&s))
}

pub fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status")
}

/// Raise this test process's open-files soft limit to at least `want`, failing loudly when the
/// hard limit does not allow it (a flood test that quietly opened fewer would prove less).
pub fn room_for_open_files(want: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if (lim.rlim_cur) >= want {
        return;
    }
    assert!(
        lim.rlim_max == libc::RLIM_INFINITY || lim.rlim_max >= want,
        "this test needs {want} open files; the hard limit is {} (raise it: ulimit -Hn)",
        lim.rlim_max
    );
    lim.rlim_cur = want as libc::rlim_t;
    assert_eq!(
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) },
        0,
        "raising the open-files limit to {want}"
    );
}

/// The exit status of `child`, which must end within `within`.
pub fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "did not stop within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Open up to `n` connections to `port`, sending `first` on each and keeping them; stops early
/// when a connection cannot be made within 2 s (a server that accepts no more).
pub fn flood(port: u16, n: usize, first: &[u8]) -> Vec<TcpStream> {
    let addr = ([127, 0, 0, 1], port).into();
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(mut s) => {
                // A connection the exporter already closed may refuse the byte: that is fine.
                let _ = s.write_all(first);
                held.push(s);
            }
            Err(_) => break,
        }
    }
    held
}

/// Starts `cmd` with its open-files limit (soft and hard) at `n`.
pub fn limit_open_files(cmd: &mut Command, n: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: n as libc::rlim_t,
                rlim_max: n as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}
