//! Allocator reports over the Unix socket: attribution by the kernel, and bad input refused
//! with a 4xx and a counter while the exporter keeps serving.

mod common;

use common::*;
use serde_json::json;

fn report(uuid: &str, claimed_pid: u32) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "version": 1,
        "pid": claimed_pid,
        "identity": {"job": "it-job", "rank": 0},
        "devices": [{"uuid": uuid, "allocated_bytes": 1_000_000_000u64,
                      "reserved_bytes": 3_000_000_000u64, "inactive_split_bytes": 100_000_000u64,
                      "largest_free_block_bytes": 1_500_000_000u64, "segments": 12,
                      "alloc_retries": 2, "ooms": 0}],
        "phase": "forward",
        "events": [{"kind": "phase", "name": "forward"}]
    }))
    .unwrap()
}

/// This test process is not on any simulated GPU: where a test needs its reports to count in
/// full, the NVML listing check is off.
const TRUST_REPORTS: &str = "ingest:\n  require_nvml_listing: false\n";

#[test]
fn a_report_shows_up_under_the_senders_real_pid() {
    let e = Exporter::start_with_config(TRUST_REPORTS, &[]);
    let uuid = first_uuid(&e.metrics());
    let me = std::process::id();
    // The body claims pid 1: attribution must come from the kernel, not the body.
    let (status, body) = post_unix(
        &e.socket,
        "/api/v1/report",
        "application/json",
        &report(&uuid, 1),
    );
    assert_eq!(status, 202, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["pid"], me);
    let pid = me.to_string();
    let filter = [("pid", pid.as_str()), ("uuid", uuid.as_str())];
    let m = e.wait_metrics("the report's process", |m| {
        sample_value(m, "gpumem_process_allocated_bytes", &filter).is_some()
    });
    assert_eq!(
        sample_value(&m, "gpumem_process_allocated_bytes", &filter),
        Some(1e9)
    );
    assert_eq!(
        sample_value(&m, "gpumem_process_reserved_bytes", &filter),
        Some(3e9)
    );
    assert_eq!(
        sample_value(&m, "gpumem_process_alloc_retries_total", &filter),
        Some(2.0)
    );
    assert_eq!(
        sample_value(&m, "gpumem_process_largest_free_block_bytes", &filter),
        Some(1.5e9)
    );
    let frag = sample_value(&m, "gpumem_fragmentation_ratio", &filter).unwrap();
    assert!(
        (frag - 0.05).abs() < 1e-9,
        "split / free cached = 0.1 / 2.0, got {frag}"
    );
    assert!(m.contains(&format!(
        "gpumem_process_phase_info{{gpu=\"0\",uuid=\"{uuid}\",pid=\"{pid}\""
    )));
    assert!(m.contains("job=\"it-job\""));
    assert!(
        sample_value(&m, "gpumem_process_allocated_bytes", &[("pid", "1")]).is_none(),
        "pid 1 must not have gained series"
    );
    assert_eq!(
        sample_value(&m, "gpumem_ingest_reports_total", &[]),
        Some(1.0)
    );
}

#[test]
fn malformed_input_of_each_kind_gets_a_4xx_and_a_counter() {
    let e = Exporter::start(&[]);
    let uuid = first_uuid(&e.metrics());
    let good = report(&uuid, 0);
    let mut cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        ("not json", "application/json", b"{nope".to_vec(), 400, "malformed"),
        ("wrong type", "application/json",
            serde_json::to_vec(&json!({"version":1,"devices":[{"uuid":uuid,"allocated_bytes":"x","reserved_bytes":1}]})).unwrap(),
            400, "malformed"),
        ("negative", "application/json",
            serde_json::to_vec(&json!({"version":1,"devices":[{"uuid":uuid,"allocated_bytes":-1,"reserved_bytes":1}]})).unwrap(),
            400, "invalid_value"),
        ("absurd", "application/json",
            serde_json::to_vec(&json!({"version":1,"devices":[{"uuid":uuid,"allocated_bytes":0,"reserved_bytes":1u64<<60}]})).unwrap(),
            400, "invalid_value"),
        ("version", "application/json",
            serde_json::to_vec(&json!({"version":7,"devices":[]})).unwrap(), 409, "unsupported_version"),
        ("content type", "text/plain", good.clone(), 415, "content_type"),
        ("unknown gpu", "application/json", report("GPU-not-on-this-host", 0), 422, "unknown_gpu"),
        ("same gpu twice", "application/json",
            serde_json::to_vec(&json!({"version":1,"devices":[
                {"uuid":uuid,"allocated_bytes":1,"reserved_bytes":1},
                {"uuid":uuid,"allocated_bytes":1,"reserved_bytes":1}]})).unwrap(),
            400, "invalid_value"),
    ];
    let big = {
        let mut b = b"{\"version\":1,\"devices\":[],\"pad\":\"".to_vec();
        b.extend(std::iter::repeat_n(b'x', 2 << 20));
        b.extend(b"\"}");
        b
    };
    cases.push(("too large", "application/json", big, 413, "too_large"));
    for (what, ct, body, want, reason) in cases {
        let (status, text) = post_unix(&e.socket, "/api/v1/report", ct, &body);
        assert_eq!(status, want, "{what}: {text}");
        if status != 413 || !text.is_empty() {
            let v: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: {text}"));
            assert_eq!(v["reason"], reason, "{what}");
            assert!(!v["error"].as_str().unwrap().is_empty());
        }
        let m = e.metrics();
        assert!(
            sample_value(&m, "gpumem_ingest_rejected_total", &[("reason", reason)]).unwrap() >= 1.0,
            "{what}: counter"
        );
    }
    // Field named in the message.
    let (_, text) = post_unix(
        &e.socket,
        "/api/v1/report",
        "application/json",
        &serde_json::to_vec(&json!({"version":1,"devices":[{"uuid":uuid,"allocated_bytes":"x","reserved_bytes":1}]})).unwrap(),
    );
    assert!(text.contains("devices[0].allocated_bytes"), "{text}");
    // Still serving, nothing lost: a good report after all that is accepted.
    let (status, _) = post_unix(&e.socket, "/api/v1/report", "application/json", &good);
    assert_eq!(status, 202);
    assert!(e.metrics().contains("gpumem_used_bytes"));
}

#[test]
fn socket_mode_is_applied() {
    use std::os::unix::fs::PermissionsExt;
    let e = Exporter::start(&["--ingest.socket-mode", "0660"]);
    let mode = std::fs::metadata(&e.socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660);
}

#[test]
fn tcp_ingest_takes_the_pid_header_and_stays_on_loopback() {
    let e = Exporter::launch(Launch {
        tcp_ingest: true,
        ..Default::default()
    });
    let addr = format!("127.0.0.1:{}", e.ingest_port);
    let uuid = first_uuid(&e.metrics());
    let c = reqwest::blocking::Client::new();
    let url = format!("http://{addr}/api/v1/report");
    let r = c
        .post(&url)
        .header("Content-Type", "application/json")
        .body(report(&uuid, 0))
        .send()
        .unwrap();
    assert_eq!(r.status(), 400, "no pid header");
    let r = c
        .post(&url)
        .header("Content-Type", "application/json")
        .header("X-Gpumem-Pid", "4242")
        .body(report(&uuid, 0))
        .send()
        .unwrap();
    assert_eq!(r.status(), 202);
    e.wait_metrics("the TCP report's process", |m| {
        sample_value(m, "gpumem_process_allocated_bytes", &[("pid", "4242")]).is_some()
    });

    let out = std::process::Command::new(BIN)
        .args([
            "--source",
            "sim",
            "--ingest.listen-address",
            "0.0.0.0:1",
            "--print-config",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ingest.allow-remote"));
}

/// An OOM event and retry counters for `uuid`, as an OOM observer and client send them.
fn oom_report(uuid: &str, n: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "version": 1,
        "devices": [{"uuid": uuid, "allocated_bytes": 1_000_000_000u64,
                      "reserved_bytes": 3_000_000_000u64, "alloc_retries": n, "ooms": n}],
        "events": [{"kind": "oom", "name": uuid, "message": "CUDA out of memory"}]
    }))
    .unwrap()
}

/// The GPU's own risk level (the series without a pid).
fn gpu_risk(m: &str, uuid: &str) -> f64 {
    m.lines()
        .find(|l| {
            l.starts_with("gpumem_oom_risk_level{")
                && l.contains(&format!("uuid=\"{uuid}\""))
                && !l.contains("pid=")
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .expect("the GPU's risk level")
}

/// Send forged OOMs from this process (which NVML never lists) to the first simulated GPU;
/// returns the GPU's uuid, the metrics afterwards and the last answer.
fn forge_ooms(e: &Exporter) -> (String, String, String) {
    let uuid = first_uuid(&e.metrics());
    assert_eq!(
        gpu_risk(&e.metrics(), &uuid),
        0.0,
        "an idle GPU starts at no risk"
    );
    let mut last = String::new();
    for n in 0..3 {
        let (status, body) = post_unix(
            &e.socket,
            "/api/v1/report",
            "application/json",
            &oom_report(&uuid, n * 5),
        );
        assert_eq!(status, 202, "{body}");
        last = body;
        // Each report before its own analysis, as a client's reports a second apart are.
        samples_after(e, 1);
    }
    // The analysis runs once per history resolution (1 s, ten samples at 100 ms): after eleven
    // samples, whatever the reports could do, they have done.
    (uuid, samples_after(e, 11), last)
}

/// The metrics once `n` more samples have been taken.
fn samples_after(e: &Exporter, n: u32) -> String {
    let samples = |m: &str| sample_value(m, "gpumem_exporter_samples_total", &[]).unwrap_or(0.0);
    let from = samples(&e.metrics());
    e.wait_metrics("samples after the reports", |m| {
        samples(m) >= from + f64::from(n)
    })
}

const IDLE_GPU: &str = "sim:\n  gpus:\n    - scenario: idle\n";

#[test]
fn a_process_nvml_does_not_list_on_a_gpu_cannot_raise_its_risk() {
    let e = Exporter::start_with_config(IDLE_GPU, &[]);
    let (uuid, m, answer) = forge_ooms(&e);
    assert_eq!(gpu_risk(&m, &uuid), 0.0, "forged OOMs moved the GPU's risk");
    let ooms = |m: &str, uuid: &str| {
        let of_gpu = [("uuid", uuid), ("kind", "reported"), ("job", "")];
        sample_value(m, "gpumem_oom_events_total", &of_gpu)
    };
    assert_eq!(ooms(&m, &uuid), Some(0.0), "forged OOMs counted on the GPU");
    assert_eq!(sample_value(&m, "gpumem_oom_event_info", &[]), None);
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(v["unlisted"], json!([uuid]), "{answer}");
    // Kept as the process's own numbers, counted, and nothing derived from them.
    let me = std::process::id().to_string();
    let mine = [("pid", me.as_str())];
    assert_eq!(
        sample_value(&m, "gpumem_process_allocated_bytes", &mine),
        Some(1e9)
    );
    assert_eq!(sample_value(&m, "gpumem_oom_risk_level", &mine), Some(0.0));
    assert_eq!(sample_value(&m, "gpumem_fragmentation_ratio", &mine), None);
    // Three reports, each a device entry and an OOM event.
    assert_eq!(
        sample_value(&m, "gpumem_ingest_unlisted_total", &[]),
        Some(6.0)
    );
    // Within the listing grace a process may just be starting: no warning yet.
    assert!(!e.log().contains("ingest.listing_grace"), "{}", e.log());

    // The control: the same reports, trusted, count. Without it this test could pass with
    // OOM events ignored altogether.
    // Past the grace it is worth a warning (once per process).
    let strict =
        Exporter::start_with_config(&format!("{IDLE_GPU}ingest:\n  listing_grace: 0s\n"), &[]);
    let _ = forge_ooms(&strict);
    let warned = strict.log().matches("ingest.listing_grace").count();
    assert_eq!(warned, 1, "{}", strict.log());

    let trusting = Exporter::start_with_config(&format!("{IDLE_GPU}{TRUST_REPORTS}"), &[]);
    let (uuid, m, _) = forge_ooms(&trusting);
    // Ten failed requests, as the allocator's counter says (each event was one of them), within
    // a second: one failure of the process, one OOM event; an OOM that happened is no level of
    // the forecast (the retries, without growth, are medium at most).
    assert_eq!(ooms(&m, &uuid), Some(1.0), "trusted OOM reports must count");
    assert_eq!(
        sample_value(
            &m,
            "gpumem_oom_failed_requests_total",
            &[("uuid", uuid.as_str())]
        ),
        Some(10.0)
    );
    assert!(sample_value(&m, "gpumem_oom_event_info", &[("uuid", uuid.as_str())]).is_some());
    assert!(gpu_risk(&m, &uuid) < 2.0);
}

#[test]
fn a_process_sending_too_fast_gets_429_with_retry_after() {
    let e = Exporter::start_with_config("ingest:\n  max_reports_per_second: 5\n", &[]);
    let uuid = first_uuid(&e.metrics());
    let body = report(&uuid, 0);
    let request = [
        format!(
            "POST /api/v1/report HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes(),
        body,
    ]
    .concat();
    let answers: Vec<String> = (0..30)
        .map(|_| exchange_unix(&e.socket, &request))
        .collect();
    let accepted = answers
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 202"))
        .count();
    let limited: Vec<&String> = answers
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 429"))
        .collect();
    // A burst of twice the rate, plus what refills while the 30 are sent.
    assert!((10..30).contains(&accepted), "accepted {accepted}");
    assert_eq!(accepted + limited.len(), 30);
    let a = limited[0].to_ascii_lowercase();
    assert!(
        a.contains("retry-after: 1") && a.contains("rate_limited"),
        "{a}"
    );
    let m = e.metrics();
    assert_eq!(
        sample_value(
            &m,
            "gpumem_ingest_rejected_total",
            &[("reason", "rate_limited")]
        ),
        Some(limited.len() as f64)
    );
}

#[test]
fn slow_bodies_and_idle_connections_are_cut_off_and_the_exporter_keeps_serving() {
    use std::io::{Read, Write};
    let e =
        Exporter::start_with_config("ingest:\n  read_timeout: 500ms\n  idle_timeout: 1s\n", &[]);
    // A body that never arrives in full: 408 after the read timeout.
    let answer = exchange_unix(
        &e.socket,
        b"POST /api/v1/report HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"version\":",
    );
    assert!(
        answer.starts_with("HTTP/1.1 408") && answer.contains("timeout"),
        "{answer}"
    );
    // Headers that never end, and a connection that says nothing: both closed.
    let mut partial = std::os::unix::net::UnixStream::connect(&e.socket).unwrap();
    partial
        .write_all(b"POST /api/v1/report HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut idle = std::os::unix::net::UnixStream::connect(&e.socket).unwrap();
    for s in [&mut partial, &mut idle] {
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut buf = Vec::new();
        // Closed by the exporter (EOF) well before our own 10 s timeout would fire.
        let r = s.read_to_end(&mut buf);
        assert!(r.is_ok(), "the exporter should close the connection: {r:?}");
    }
    assert_eq!(
        sample_value(
            &e.metrics(),
            "gpumem_ingest_rejected_total",
            &[("reason", "timeout")]
        ),
        Some(1.0)
    );
}

#[test]
fn thousands_of_idle_connections_do_not_hold_the_exporter() {
    use std::io::Read;
    // Room for 3000 sockets in this test process.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    let want: libc::rlim_t = 3000;
    if lim.rlim_cur < want + 200 {
        lim.rlim_cur = lim.rlim_max.min(want + 200);
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
    let n = want.min(lim.rlim_cur.saturating_sub(200)) as usize;
    assert!(
        n >= 1000,
        "the test needs room for 1000 sockets, has {}",
        lim.rlim_cur
    );
    let e = Exporter::start_with_config("ingest:\n  idle_timeout: 2s\n", &[]);
    let conns: Vec<std::os::unix::net::UnixStream> = (0..n)
        .map(|_| std::os::unix::net::UnixStream::connect(&e.socket).unwrap())
        .collect();
    // Scrapes go on while they are open.
    assert!(e.metrics().contains("gpumem_used_bytes"));
    // All but `max_connections_per_process` (8) were closed at once.
    let mut closed = 0;
    for mut c in conns {
        c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut buf = [0u8; 16];
        if let Ok(0) = c.read(&mut buf) {
            closed += 1;
        }
    }
    assert_eq!(
        closed, n,
        "every connection ends: at once, or after the idle timeout"
    );
    let refused = sample_value(
        &e.metrics(),
        "gpumem_ingest_rejected_total",
        &[("reason", "too_many_connections")],
    )
    .unwrap();
    assert_eq!(refused, (n - 8) as f64);
    // This process may connect again once its idle connections are gone.
    let uuid = first_uuid(&e.metrics());
    let (status, body) = post_unix(
        &e.socket,
        "/api/v1/report",
        "application/json",
        &report(&uuid, 0),
    );
    assert_eq!(status, 202, "{body}");
}

/// A client that forges pids over TCP: one kept-alive connection, each report under the next
/// pid of `pids`, `rounds` times over (re-sending keeps a place "recently heard"); the count of
/// each status it got.
fn forge_pids(
    port: u16,
    uuid: &str,
    pids: std::ops::Range<u32>,
    rounds: u32,
) -> std::collections::BTreeMap<u16, u64> {
    use std::io::{BufReader, Write};
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let (mut out, mut input) = (s.try_clone().unwrap(), BufReader::new(s));
    let body = report(uuid, 0);
    let mut statuses = std::collections::BTreeMap::new();
    for _ in 0..rounds {
        for pid in pids.clone() {
            let head = format!(
                "POST /api/v1/report HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Gpumem-Pid: {pid}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            out.write_all(&[head.as_bytes(), &body].concat()).unwrap();
            let (status, _) = read_response(&mut input).unwrap();
            *statuses.entry(status).or_insert(0) += 1;
        }
    }
    statuses
}

fn table_count(m: &str, sender: &str, outcome: &str) -> f64 {
    sample_value(
        m,
        "gpumem_ingest_process_table_total",
        &[("sender", sender), ("outcome", outcome)],
    )
    .unwrap_or_else(|| panic!("no process table series for {sender}/{outcome}"))
}

/// The probe's lock-out, with the default limits: one TCP client sends under 1 100 pids (and
/// sends them again), while this process reports over the socket.
#[test]
fn a_client_forging_pids_over_tcp_cannot_lock_out_a_process_on_the_socket() {
    let e = Exporter::launch(Launch {
        config_yaml: IDLE_GPU,
        tcp_ingest: true,
        ..Default::default()
    });
    let uuid = first_uuid(&e.metrics());
    let forger = {
        let (port, uuid) = (e.ingest_port, uuid.clone());
        std::thread::spawn(move || forge_pids(port, &uuid, 100_000..101_100, 2))
    };
    let mut answers = Vec::new();
    while !forger.is_finished() {
        answers.push(post_unix(
            &e.socket,
            "/api/v1/report",
            "application/json",
            &report(&uuid, 0),
        ));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let statuses = forger.join().unwrap();
    answers.push(post_unix(
        &e.socket,
        "/api/v1/report",
        "application/json",
        &report(&uuid, 0),
    ));
    for (status, body) in &answers {
        assert_eq!(*status, 202, "the socket's process was refused: {body}");
    }
    // One address holds its share (64 pids), however many it sends under.
    assert_eq!(statuses.get(&202), Some(&(64 * 2)), "{statuses:?}");
    assert_eq!(statuses.get(&429), Some(&((1100 - 64) * 2)), "{statuses:?}");
    let m = e.metrics();
    assert_eq!(table_count(&m, "tcp", "refused"), ((1100 - 64) * 2) as f64);
    assert_eq!(
        sample_value(
            &m,
            "gpumem_ingest_rejected_total",
            &[("reason", "too_many_processes")]
        ),
        Some(((1100 - 64) * 2) as f64)
    );
    assert_eq!(table_count(&m, "socket", "refused"), 0.0);
    let me = std::process::id().to_string();
    assert!(
        sample_value(
            &m,
            "gpumem_process_allocated_bytes",
            &[("pid", me.as_str())]
        )
        .is_some(),
        "the socket's process is shown"
    );
    assert!(
        e.log().contains("process table: new TCP pids refused"),
        "{}",
        e.log()
    );

    // A TCP report may not speak for a pid the kernel named on the socket.
    let stolen = forge_pids(
        e.ingest_port,
        &uuid,
        std::process::id()..std::process::id() + 1,
        1,
    );
    assert_eq!(stolen.get(&400), Some(&1), "{stolen:?}");
}

/// A table TCP may fill whole: a process on the socket then takes the place of the TCP pid
/// heard from least recently, every time it needs one.
#[test]
fn a_process_on_the_socket_evicts_forged_pids_from_a_full_table() {
    let e = Exporter::launch(Launch {
        config_yaml: "history:\n  max_processes: 64\ningest:\n  max_tcp_processes: 64\n  max_tcp_processes_per_address: 64\nsim:\n  gpus:\n    - scenario: idle\n",
        tcp_ingest: true,
        ..Default::default()
    });
    let uuid = first_uuid(&e.metrics());
    let filled = forge_pids(e.ingest_port, &uuid, 200_000..200_064, 1);
    assert_eq!(filled.get(&202), Some(&64), "{filled:?}");
    // The gauge follows at the next sample.
    e.wait_metrics("a table full of forged pids", |m| {
        sample_value(m, "gpumem_exporter_tracked_processes", &[]) == Some(64.0)
    });
    // The forger keeps re-sending beside the socket's reports: they still get in.
    let forger = {
        let (port, uuid) = (e.ingest_port, uuid.clone());
        std::thread::spawn(move || forge_pids(port, &uuid, 200_000..201_100, 1))
    };
    let (status, body) = post_unix(
        &e.socket,
        "/api/v1/report",
        "application/json",
        &report(&uuid, 0),
    );
    assert_eq!(status, 202, "{body}");
    let statuses = forger.join().unwrap();
    let (status, body) = post_unix(
        &e.socket,
        "/api/v1/report",
        "application/json",
        &report(&uuid, 0),
    );
    assert_eq!(status, 202, "{body}");
    assert!(
        statuses.get(&429).is_some_and(|&n| n >= 1000),
        "{statuses:?}"
    );
    let m = e.metrics();
    assert!(table_count(&m, "tcp", "evicted") >= 1.0, "{m}");
    assert_eq!(table_count(&m, "socket", "refused"), 0.0);
    let me = std::process::id().to_string();
    assert!(sample_value(
        &m,
        "gpumem_process_allocated_bytes",
        &[("pid", me.as_str())]
    )
    .is_some());
    assert!(sample_value(&m, "gpumem_exporter_tracked_processes", &[]).unwrap() <= 64.0);
}
