//! The exporter as a user meets it: the binary on the simulator, over HTTP.

mod common;

use common::*;
use std::io::Write;
use std::process::{Command, Stdio};

const RAW_GAUGES: [&str; 8] = [
    "gpumem_total_bytes",
    "gpumem_used_bytes",
    "gpumem_free_bytes",
    "gpumem_reserved_bytes",
    "gpumem_peak_used_bytes",
    "gpumem_device_up",
    "gpumem_process_used_bytes",
    "gpumem_gpu_info",
];

#[test]
fn serves_every_raw_gauge_for_several_gpus() {
    let e = Exporter::start(&[]);
    let m = e.metrics();
    for name in RAW_GAUGES {
        assert!(
            family_names(&m).contains(name),
            "{name} missing from /metrics"
        );
    }
    let gpus = m
        .lines()
        .filter(|l| l.starts_with("gpumem_device_up{"))
        .count();
    assert!(gpus >= 2, "expected at least 2 GPUs, got {gpus}");
    assert!(m.contains("window=\"lifetime\""));
    assert!(m.contains("window=\"5m\""));
    for name in [
        "gpumem_exporter_build_info",
        "gpumem_exporter_sample_duration_seconds",
        "gpumem_exporter_sample_errors_total",
    ] {
        assert!(family_names(&m).contains(name), "{name} missing");
    }
    // total = reserved + used + free on every GPU.
    for g in 0..gpus {
        let g = g.to_string();
        let v = |n| sample_value(&m, n, &[("gpu", g.as_str())]).unwrap();
        assert_eq!(
            v("gpumem_total_bytes"),
            v("gpumem_reserved_bytes") + v("gpumem_used_bytes") + v("gpumem_free_bytes")
        );
    }
}

#[test]
fn promtool_finds_nothing_to_complain_about() {
    // Every scenario, MIG instances included.
    let e = Exporter::start(&[
        "--sim.scenarios",
        "steady,leak,oom,frag,shared,processes,churn,idle,mig",
    ]);
    let m = e.metrics();
    assert!(
        m.contains("mig_profile=\"2g.20gb\""),
        "MIG instances served"
    );
    let mut p = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin.take().unwrap().write_all(m.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {said}"
    );
}

#[test]
fn negotiates_openmetrics_and_serves_health_pages() {
    let e = Exporter::start(&[]);
    let c = reqwest::blocking::Client::new();
    let r = c
        .get(e.url("/metrics"))
        .header(
            "Accept",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        )
        .send()
        .unwrap();
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    let body = r.text().unwrap();
    assert!(body.ends_with("# EOF\n"));
    assert!(body.contains("# UNIT gpumem_used_bytes bytes"));
    let r = c.get(e.url("/metrics")).send().unwrap();
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    assert_eq!(c.get(e.url("/-/healthy")).send().unwrap().status(), 200);
    assert_eq!(c.get(e.url("/-/ready")).send().unwrap().status(), 200);
    let landing = e.get("/");
    assert!(landing.contains("href=\"/metrics\""));
    let snap: serde_json::Value = serde_json::from_str(&e.get("/api/v1/snapshot")).unwrap();
    assert!(snap["gpus"].as_array().unwrap().len() >= 2);
}

#[test]
fn custom_telemetry_path() {
    let e = Exporter::start(&["--web.telemetry-path", "/gpu-metrics"]);
    assert!(e.get("/gpu-metrics").contains("gpumem_used_bytes"));
    let r = reqwest::blocking::get(e.url("/metrics")).unwrap();
    assert_eq!(r.status(), 404);
}

#[test]
fn nvml_missing_exits_with_one_line_naming_the_simulator() {
    let has_nvml = Command::new("sh")
        .args(["-c", "ldconfig -p 2>/dev/null | grep -q libnvidia-ml.so.1"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if has_nvml {
        eprintln!("NOTE: this machine has NVML; the no-NVML path cannot be exercised here");
        return;
    }
    let out = Command::new(BIN)
        .args([
            "--source",
            "nvml",
            "--web.listen-address",
            "127.0.0.1:0",
            "--ingest.socket=",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one clear line, got: {err}");
    assert!(lines[0].contains("--source sim"), "{err}");
}

#[test]
fn bad_flags_and_config_name_the_field() {
    let out = Command::new(BIN)
        .args(["--sample-interval", "1ms"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--sample-interval") && err.contains("10ms..60s"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(&cfg, "analysis:\n  risk:\n    high_used_fraction: 2\n").unwrap();
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("analysis.risk.high_used_fraction"), "{err}");
}

#[test]
fn print_config_shows_the_effective_config() {
    let out = Command::new(BIN)
        .args([
            "--source",
            "sim",
            "--sample-interval",
            "250ms",
            "--print-config",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let yaml = String::from_utf8_lossy(&out.stdout);
    assert!(yaml.contains("source: sim"), "{yaml}");
    assert!(yaml.contains("sample_interval: 250ms"), "{yaml}");
    // And it reads back as a config.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.yaml");
    std::fs::write(&p, yaml.as_bytes()).unwrap();
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&p)
        .arg("--print-config")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), yaml);
}

#[test]
fn sigterm_stops_cleanly_and_removes_the_socket() {
    let mut e = Exporter::start(&[]);
    assert!(e.socket.exists());
    let pid = e.child.id() as i32;
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = e.child.wait().unwrap();
    assert!(status.success(), "exit status {status:?}");
    assert!(!e.socket.exists(), "socket file left behind");
}

#[test]
fn a_second_exporter_on_a_live_socket_refuses_to_start_and_each_removes_only_its_own() {
    let mut first = Exporter::start(&[]);
    let mut second = Command::new(BIN)
        .args(["--source", "sim", "--web.listen-address", "127.0.0.1:0"])
        .arg("--ingest.socket")
        .arg(&first.socket)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(s) = second.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = second.kill();
            let _ = second.wait();
            panic!("the second exporter started on the first one's socket");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    let pid = first.child.id().to_string();
    assert!(
        err.contains("is in use by another exporter") && err.contains(&pid),
        "{err}"
    );
    // The first still takes reports on its socket.
    let uuid = first_uuid(&first.metrics());
    let body = format!(
        r#"{{"version":1,"devices":[{{"uuid":"{uuid}","allocated_bytes":1,"reserved_bytes":2}}]}}"#
    );
    let (status, answer) = post_unix(
        &first.socket,
        "/api/v1/report",
        "application/json",
        body.as_bytes(),
    );
    assert_eq!(status, 202, "{answer}");
    // A socket it did not make now stands at its path: stopping, it leaves that one alone.
    std::fs::remove_file(&first.socket).unwrap();
    let theirs = std::os::unix::net::UnixListener::bind(&first.socket).unwrap();
    unsafe { libc::kill(first.child.id() as i32, libc::SIGTERM) };
    assert!(wait_exit(&mut first.child, std::time::Duration::from_secs(20)).success());
    assert!(first.socket.exists(), "another's socket was removed");
    drop(theirs);
}

#[test]
fn a_telemetry_path_that_clashes_with_another_endpoint_is_a_usage_error() {
    for path in ["/-/healthy", "/api/v1/snapshot", "/:id", "/{id}"] {
        for print in [false, true] {
            let mut c = Command::new(BIN);
            c.args([
                "--source",
                "sim",
                "--web.listen-address",
                "127.0.0.1:0",
                "--ingest.socket=",
                "--web.telemetry-path",
                path,
            ]);
            if print {
                c.arg("--print-config");
            }
            let out = c.output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{path}: {err}");
            assert!(
                err.contains("--web.telemetry-path")
                    && err.contains(path)
                    && !err.contains("panicked"),
                "{path}: {err}"
            );
        }
    }
}

#[test]
fn sighup_is_logged_and_ignored_and_sigterm_still_stops_cleanly() {
    let mut e = Exporter::start(&[]);
    let pid = e.child.id() as i32;
    unsafe { libc::kill(pid, libc::SIGHUP) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !e.log().contains("SIGHUP ignored") {
        assert!(
            e.child.try_wait().unwrap().is_none(),
            "SIGHUP ended the exporter:\n{}",
            e.log()
        );
        assert!(std::time::Instant::now() < deadline, "{}", e.log());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(e.metrics().contains("gpumem_used_bytes"));
    assert!(e.socket.exists());
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = wait_exit(&mut e.child, std::time::Duration::from_secs(20));
    assert!(status.success(), "exit status {status:?}");
    assert!(!e.socket.exists(), "socket file left behind");
}

#[test]
fn metrics_are_gzipped_when_the_scraper_asks() {
    use std::io::Read;
    let e = Exporter::start(&[]);
    let c = reqwest::blocking::Client::new();
    let get = |accept: &str, encoding: &str| {
        let r = c
            .get(e.url("/metrics"))
            .header("Accept", accept)
            .header("Accept-Encoding", encoding)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
        let gzipped = r
            .headers()
            .get("content-encoding")
            .is_some_and(|v| v == "gzip");
        assert_eq!(r.headers()["vary"], "accept-encoding");
        (gzipped, r.bytes().unwrap().to_vec())
    };
    let openmetrics = "application/openmetrics-text;version=1.0.0,text/plain;q=0.5";
    for (accept, ends) in [("text/plain", "\n"), (openmetrics, "# EOF\n")] {
        // What Prometheus sends.
        let (gzipped, body) = get(accept, "gzip");
        assert!(gzipped, "{accept}");
        let mut text = String::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_string(&mut text)
            .expect("a whole gzip stream");
        assert!(text.contains("\ngpumem_used_bytes{"), "{text}");
        assert!(text.ends_with(ends));
        assert!(
            body.len() * 3 < text.len(),
            "{} -> {}",
            text.len(),
            body.len()
        );
        // Not asked, or refused: plain.
        for encoding in ["identity", "gzip;q=0"] {
            let (gzipped, body) = get(accept, encoding);
            assert!(!gzipped);
            assert!(String::from_utf8(body)
                .unwrap()
                .contains("gpumem_used_bytes"));
        }
    }
}

#[test]
fn a_newcomers_mistakes_get_the_range_the_default_and_the_field_once() {
    // A negative interval is a value out of range, not an unknown flag.
    for v in ["-1s", "-1"] {
        let out = Command::new(BIN)
            .args(["--sample-interval", v])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("--sample-interval") && err.contains("10ms..60s"),
            "{v}: {err}"
        );
    }
    // The simulator's scenarios show their default.
    let help = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("[default: steady,leak,oom,frag,shared]"),
        "{help}"
    );
    // A YAML error names its field once.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(&cfg, "web:\n  listen_address: [1]\n").unwrap();
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("web.listen_address").count(), 1, "{err}");
}

/// The exporter started on `socket`: its exit status and what it said, or `None` (killed)
/// when it is still running after 20 s.
fn start_on_socket(socket: &std::path::Path) -> Option<(Option<i32>, String)> {
    let mut c = Command::new(BIN)
        .args(["--source", "sim", "--web.listen-address", "127.0.0.1:0"])
        .arg("--ingest.socket")
        .arg(socket)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(s) = c.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut c.stderr.take().unwrap(), &mut err).unwrap();
    Some((status.code(), err))
}

#[test]
fn an_ingest_socket_path_given_that_cannot_be_a_socket_stops_the_start_naming_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file.sock");
    std::fs::write(&file, "someone's data").unwrap();
    let folder = dir.path().join("folder.sock");
    std::fs::create_dir(&folder).unwrap();
    let real = dir.path().join("real.sock");
    let _real = std::os::unix::net::UnixListener::bind(&real).unwrap();
    let link = dir.path().join("link.sock");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let long = dir.path().join(format!("{}.sock", "x".repeat(120)));
    let cases: [(&std::path::Path, u8, &str); 5] = [
        (&file, 1, "is a regular file, not a socket"),
        (&folder, 1, "is a directory"),
        (&link, 1, "is a symbolic link"),
        (&long, 2, "a Unix socket's path holds at most 107 bytes"),
        (
            std::path::Path::new("/proc/x.sock"),
            1,
            "cannot create the lock file /proc/x.sock.lock",
        ),
    ];
    for (path, code, why) in cases {
        let (status, err) = start_on_socket(path).unwrap_or_else(|| {
            panic!(
                "{}: the exporter started without its socket",
                path.display()
            )
        });
        assert_eq!(status, Some(i32::from(code)), "{}: {err}", path.display());
        assert!(
            err.contains("ingest.socket") && err.contains(why),
            "{}: {err}",
            path.display()
        );
    }
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "someone's data",
        "the file is left alone"
    );
    assert!(folder.is_dir() && link.is_symlink());
    for p in [&file, &folder] {
        let mut lock = p.as_os_str().to_owned();
        lock.push(".lock");
        assert!(
            !std::path::Path::new(&lock).exists(),
            "no lock file left beside {}",
            p.display()
        );
    }
}

#[test]
fn a_socket_removed_under_the_exporter_is_ingest_down_and_not_ready() {
    let e = Exporter::start(&[]);
    let m = e.metrics();
    assert_eq!(
        sample_value(
            &m,
            "gpumem_exporter_ingest_up",
            &[("listener", "ingest_socket")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample_value(
            &m,
            "gpumem_exporter_ingest_up",
            &[("listener", "ingest_tcp")]
        ),
        None,
        "TCP ingest is off: no series"
    );
    // A cleaner of temporary files takes the socket away.
    std::fs::remove_file(&e.socket).unwrap();
    e.wait_metrics("ingest_up 0", |m| {
        sample_value(
            m,
            "gpumem_exporter_ingest_up",
            &[("listener", "ingest_socket")],
        ) == Some(0.0)
    });
    let r = reqwest::blocking::get(e.url("/-/ready")).unwrap();
    assert_eq!(r.status(), 503);
    let body = r.text().unwrap();
    assert!(
        body.contains("ingest_socket is down") && body.contains("is gone"),
        "{body}"
    );
    assert!(e.log().contains("its ingest socket is gone"), "{}", e.log());
    // Still serving metrics and health.
    assert!(e.get("/-/healthy").contains("OK"));
}
