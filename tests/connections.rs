//! Connection floods against the real binary, on loopback only: idle connections on the web
//! port and on TCP ingest are shed within each listener's budget, and the scrape and the
//! ingest socket still answer. Each flood is bounded in count and time and ends by itself.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::*;

/// What a liveness check allows an answer under a flood, on a loaded two-core machine.
const ANSWER_WITHIN: Duration = Duration::from_secs(3);

/// A valid report over the socket, answered within `ANSWER_WITHIN`.
fn report_over_socket(e: &Exporter, uuid: &str) -> (u16, String) {
    let body = format!(
        r#"{{"version":1,"devices":[{{"uuid":"{uuid}","allocated_bytes":1048576,"reserved_bytes":2097152}}]}}"#
    );
    let started = Instant::now();
    let head = format!(
        "POST /api/v1/report HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = match std::os::unix::net::UnixStream::connect(&e.socket) {
        Ok(mut s) => {
            s.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
            let _ = s.write_all(head.as_bytes());
            let mut out = Vec::new();
            let _ = std::io::Read::read_to_end(&mut s, &mut out);
            String::from_utf8_lossy(&out).into_owned()
        }
        Err(err) => format!("cannot connect: {err}"),
    };
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    assert!(
        started.elapsed() < ANSWER_WITHIN + Duration::from_secs(1),
        "the socket took {:?}",
        started.elapsed()
    );
    (status, answer)
}

fn scrape_within(port: u16) -> String {
    let started = Instant::now();
    let (status, body) = http_get(port, "/metrics", ANSWER_WITHIN)
        .unwrap_or_else(|e| panic!("no /metrics answer within {ANSWER_WITHIN:?}: {e}"));
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < ANSWER_WITHIN,
        "/metrics took {:?}",
        started.elapsed()
    );
    String::from_utf8(body).unwrap()
}

/// More idle connections than the exporter has file descriptors: without budgets it can accept
/// nothing more, not the scrape, not a report. With them, the web port closes its longest idle
/// connections to make room, and everything else goes on.
#[test]
fn a_flood_of_idle_web_connections_is_shed_and_the_scrape_and_the_socket_still_answer() {
    const FLOOD: usize = 2000;
    // The exporter gets fewer descriptors than the flood, as a node's 20 000 are fewer than an
    // attacker's connections; the budgets (256 web, 256 socket) and their reserve fit in it.
    const EXPORTER_FILES: u64 = 1024;
    room_for_open_files(FLOOD as u64 + 256);
    let e = Exporter::launch(Launch {
        open_files: Some(EXPORTER_FILES),
        ..Launch::default()
    });
    let uuid = first_uuid(&scrape_within(e.port));
    let held = flood(e.port, FLOOD, b"G");
    assert_eq!(
        held.len(),
        FLOOD,
        "every connection was accepted (the exporter never ran out of descriptors)"
    );
    let m = scrape_within(e.port);
    let open = sample_value(
        &m,
        "gpumem_exporter_open_connections",
        &[("listener", "web")],
    );
    assert!(open.is_some_and(|n| n <= 256.0), "open: {open:?}");
    let shed = sample_value(
        &m,
        "gpumem_exporter_connections_shed_total",
        &[("listener", "web")],
    )
    .unwrap();
    assert!(shed >= (FLOOD - 256) as f64, "shed {shed}");
    let (status, answer) = report_over_socket(&e, &uuid);
    assert_eq!(status, 202, "{answer}");
    // Logged, but not once per connection.
    let lines = e
        .log()
        .lines()
        .filter(|l| l.contains("connections shed"))
        .count();
    assert!((1..=3).contains(&lines), "{lines} lines:\n{}", e.log());
    // The flood gone, so is what it cost.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m = scrape_within(e.port);
        let open = sample_value(
            &m,
            "gpumem_exporter_open_connections",
            &[("listener", "web")],
        );
        if open == Some(1.0) {
            break;
        }
        assert!(Instant::now() < deadline, "still open: {open:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let rss = vm_rss_kib(e.child.id());
    assert!(
        rss < 64 * 1024,
        "resident memory after the flood: {rss} KiB"
    );
}

/// TCP ingest has a budget of its own: idle connections there leave the socket its room (there
/// is no pid at accept time on TCP, so no per-process share either).
#[test]
fn idle_tcp_ingest_connections_do_not_keep_reports_off_the_socket() {
    // Over `ingest.max_connections` (256), which the socket and TCP once shared.
    const FLOOD: usize = 400;
    room_for_open_files(FLOOD as u64 + 256);
    let e = Exporter::launch(Launch {
        tcp_ingest: true,
        ..Launch::default()
    });
    let uuid = first_uuid(&scrape_within(e.port));
    let held = flood(e.ingest_port, FLOOD, b"P");
    assert_eq!(held.len(), FLOOD);
    let (status, answer) = report_over_socket(&e, &uuid);
    assert_eq!(status, 202, "{answer}");
    // A TCP client that sends its report at once gets in too: an idle one makes room.
    let body = format!(
        r#"{{"version":1,"devices":[{{"uuid":"{uuid}","allocated_bytes":1,"reserved_bytes":2}}]}}"#
    );
    let r = reqwest::blocking::Client::new()
        .post(format!("http://127.0.0.1:{}/api/v1/report", e.ingest_port))
        .header("Content-Type", "application/json")
        .header("X-Gpumem-Pid", "4242")
        .timeout(ANSWER_WITHIN)
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 202);
    let m = scrape_within(e.port);
    let shed = |l| {
        sample_value(
            &m,
            "gpumem_exporter_connections_shed_total",
            &[("listener", l)],
        )
    };
    assert!(
        shed("ingest_tcp").is_some_and(|n| n >= (FLOOD - 256) as f64),
        "{m}"
    );
    assert_eq!(shed("ingest_socket"), Some(0.0));
    drop(held);
}
