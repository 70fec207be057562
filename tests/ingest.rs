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

fn first_uuid(m: &str) -> String {
    let line = m
        .lines()
        .find(|l| l.starts_with("gpumem_device_up{"))
        .unwrap();
    let i = line.find("uuid=\"").unwrap() + 6;
    line[i..].split('"').next().unwrap().to_string()
}

#[test]
fn a_report_shows_up_under_the_senders_real_pid() {
    let e = Exporter::start(&[]);
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
    std::thread::sleep(std::time::Duration::from_millis(400));
    let m = e.metrics();
    let pid = me.to_string();
    let filter = [("pid", pid.as_str()), ("uuid", uuid.as_str())];
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
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let e = Exporter::start(&["--ingest.listen-address", &addr]);
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
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(sample_value(
        &e.metrics(),
        "gpumem_process_allocated_bytes",
        &[("pid", "4242")]
    )
    .is_some());

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
