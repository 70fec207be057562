//! Reproducible faults. (a) Through the library, with a scripted NVML backend (`faults/nvml.rs`):
//! a GPU lost mid-run, a call that hangs past its deadline, NVML failing at start, a driver
//! reload, a process that exits between being listed and being read. (b) The real binary's ingest under
//! a flood of valid, invalid and forged-pid reports. (c) SIGTERM during scrapes and ingest.

mod common;
#[path = "faults/nvml.rs"]
mod nvml;

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{http_get, read_response, sample_value, vm_rss_kib, wait_exit, Exporter, Launch};

// ---------------------------------------------------------------------------------------------
// Helpers for the real binary.

/// The exporter on the simulator with a config file and TCP ingest as well as the socket.
fn start_exporter(config_yaml: &str, extra: &[&str]) -> Exporter {
    Exporter::launch(Launch {
        config_yaml,
        extra,
        sample_interval: None,
        tcp_ingest: true,
        ..Launch::default()
    })
}

/// A valid report for the GPU `uuid`.
fn valid(uuid: &str) -> String {
    format!(
        r#"{{"version":1,"identity":{{"job":"flood"}},"devices":[{{"uuid":"{uuid}","allocated_bytes":1048576,"reserved_bytes":2097152}}]}}"#
    )
}

/// The first simulated GPU's uuid, from the exporter's metrics.
fn sim_uuid(port: u16) -> String {
    let (_, body) = http_get(port, "/metrics", Duration::from_secs(5)).unwrap();
    common::first_uuid(&String::from_utf8_lossy(&body))
}

/// Pids with NVML series (`gpumem_process_used_bytes`): the processes NVML lists.
fn listed_pids(metrics: &str) -> std::collections::BTreeSet<String> {
    metrics
        .lines()
        .filter(|l| l.starts_with("gpumem_process_used_bytes{"))
        .filter_map(|l| l.split("pid=\"").nth(1))
        .filter_map(|r| r.split('"').next())
        .map(str::to_string)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// (b) Flood.

/// Distinct fake pids the flood cycles through.
const FAKE_PIDS: u32 = 100_000;
/// The flood stops here even if not every pid was sent.
const FLOOD_LIMIT: Duration = Duration::from_secs(45);
const MAX_PROCESSES: u64 = 256;
/// Resident memory allowed after the flood. A debug-built exporter on the simulator needs
/// about 15 MiB; a full history of 256 processes adds a few MiB (one bucket per second per
/// process, a few hundred bytes each, and these processes reported once). The bound leaves
/// room for allocator slack but catches anything that grows with the number of pids or
/// requests seen (100 000 pids × even 1 KiB each would be ~100 MiB).
const RSS_LIMIT_KIB: u64 = 64 * 1024;

#[test]
fn the_ingest_endpoint_survives_a_flood_of_forged_pids() {
    let ex = start_exporter(
        // TCP may take the whole table here (its share is a quarter by default): the flood
        // must find it full.
        &format!("history:\n  max_processes: {MAX_PROCESSES}\ningest:\n  max_tcp_processes: {MAX_PROCESSES}\n  max_tcp_processes_per_address: {MAX_PROCESSES}\nsim:\n  gpus:\n    - scenario: steady\n    - scenario: leak\n"),
        &[],
    );
    let uuid = sim_uuid(ex.port);
    let valid_body: &'static str = Box::leak(valid(&uuid).into_boxed_str());
    let elsewhere: &'static str = Box::leak(valid("GPU-not-on-this-host").into_boxed_str());
    let (_, body) = http_get(ex.port, "/metrics", Duration::from_secs(5)).unwrap();
    let listed_before = listed_pids(&String::from_utf8_lossy(&body));
    assert!(!listed_before.is_empty(), "the simulator lists processes");
    let stop = Arc::new(AtomicBool::new(false));
    let next_pid = Arc::new(AtomicU32::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let started = Instant::now();

    // Scrapes all through the flood: every one must be answered (within 10 s).
    let scraper = {
        let stop = Arc::clone(&stop);
        let port = ex.port;
        std::thread::spawn(move || {
            let mut n = 0u32;
            let mut worst = Duration::ZERO;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let (status, body) = http_get(port, "/metrics", Duration::from_secs(10))
                    .unwrap_or_else(|e| panic!("scrape {n} failed during the flood: {e}"));
                let took = t.elapsed();
                assert_eq!(status, 200);
                // Starved, not slow: a bound far above a loaded machine's scrape.
                assert!(took < Duration::from_secs(10), "scrape {n} took {took:?}");
                assert!(String::from_utf8_lossy(&body).contains("gpumem_ingest_rejected_total"));
                worst = worst.max(took);
                n += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            (n, worst)
        })
    };

    // TCP senders: keep-alive connections; pids from the header cycle through FAKE_PIDS values.
    let senders: Vec<_> = (0..3)
        .map(|w| {
            let (stop, next_pid, sent) = (Arc::clone(&stop), Arc::clone(&next_pid), Arc::clone(&sent));
            let port = ex.ingest_port;
            std::thread::spawn(move || {
                let mut statuses: HashMap<u16, u64> = HashMap::new();
                let connect = || {
                    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                    s.set_nodelay(true).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    (s.try_clone().unwrap(), BufReader::new(s))
                };
                let (mut out, mut input) = connect();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) && started.elapsed() < FLOOD_LIMIT {
                    let n = next_pid.fetch_add(1, Ordering::Relaxed);
                    if n >= FAKE_PIDS {
                        break;
                    }
                    let pid = 1_000_000 + n;
                    i += 1;
                    let (body, ct, pid_header): (&str, &str, String) = match (i + w) % 10 {
                        0 => ("{\"version\":1,\"devices\":[{\"uuid\":", "application/json", pid.to_string()),
                        1 => (valid_body, "text/plain", pid.to_string()),
                        2 => (valid_body, "application/json", "not-a-pid".into()),
                        3 => ("{\"version\":7,\"devices\":[]}", "application/json", pid.to_string()),
                        4 => (elsewhere, "application/json", pid.to_string()),
                        _ => (valid_body, "application/json", pid.to_string()),
                    };
                    let req = format!(
                        "POST /api/v1/report HTTP/1.1\r\nHost: localhost\r\nContent-Type: {ct}\r\nX-Gpumem-Pid: {pid_header}\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let answer = out
                        .write_all(req.as_bytes())
                        .and_then(|_| read_response(&mut input));
                    match answer {
                        Ok((status, _)) => *statuses.entry(status).or_default() += 1,
                        Err(e) => panic!("ingest request {i} failed: {e}"),
                    }
                    sent.fetch_add(1, Ordering::Relaxed);
                }
                statuses
            })
        })
        .collect();

    // And the Unix socket: this process's own pid, valid and invalid bodies.
    let unix = {
        let (stop, socket) = (Arc::clone(&stop), ex.socket.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) && n < 2000 {
                let body: &[u8] = if n % 2 == 0 {
                    valid_body.as_bytes()
                } else {
                    b"\x00\xff garbage"
                };
                let (status, _) =
                    common::post_unix(&socket, "/api/v1/report", "application/json", body);
                // One pid sending as fast as it can: past its burst, 429 rate_limited.
                assert!(
                    status == 202 || status == 400 || status == 429,
                    "unix ingest answered {status}"
                );
                n += 1;
            }
            n
        })
    };

    let mut statuses: HashMap<u16, u64> = HashMap::new();
    for s in senders {
        for (k, v) in s.join().expect("a sender failed") {
            *statuses.entry(k).or_default() += v;
        }
    }
    let flood_took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let unix_sent = unix.join().expect("the unix sender failed");
    let (scrapes, worst) = scraper.join().expect("a scrape failed during the flood");
    let total = sent.load(Ordering::Relaxed);
    eprintln!(
        "flood: {total} TCP reports in {flood_took:?} ({:.0}/s), {unix_sent} over the socket, statuses {statuses:?}; {scrapes} scrapes, slowest {worst:?}",
        total as f64 / flood_took.as_secs_f64()
    );
    assert!(flood_took < Duration::from_secs(60));
    assert!(scrapes >= 5, "too few scrapes: {scrapes}");
    assert!(
        total >= 20_000,
        "the flood was too slow to mean anything: {total} reports"
    );

    let (_, body) = http_get(ex.port, "/metrics", Duration::from_secs(5)).unwrap();
    let m = String::from_utf8_lossy(&body);
    let tracked = sample_value(&m, "gpumem_exporter_tracked_processes", &[]).unwrap();
    assert!(tracked <= MAX_PROCESSES as f64, "tracked {tracked}");
    let rejected = |reason: &str| {
        sample_value(&m, "gpumem_ingest_rejected_total", &[("reason", reason)]).unwrap()
    };
    let too_many = rejected("too_many_processes");
    assert!(too_many > 0.0 && too_many as u64 == statuses[&429], "{m}");
    assert!(rejected("malformed") > 0.0);
    assert!(rejected("content_type") > 0.0);
    assert!(rejected("unsupported_version") > 0.0);
    assert!(rejected("unknown_gpu") > 0.0 && rejected("unknown_gpu") as u64 == statuses[&422]);
    assert!(rejected("rate_limited") > 0.0, "one pid over its rate");
    let gpus_exported: std::collections::BTreeSet<&str> = m
        .lines()
        .filter(|l| l.starts_with("gpumem_process_allocated_bytes{"))
        .filter_map(|l| l.split("uuid=\"").nth(1))
        .filter_map(|r| r.split('"').next())
        .collect();
    assert!(
        !gpus_exported.contains("GPU-not-on-this-host"),
        "no series for a GPU the host lacks"
    );
    let listed_after = listed_pids(&m);
    assert!(
        listed_before.is_subset(&listed_after),
        "every NVML-listed process stays visible: before {listed_before:?}, after {listed_after:?}"
    );
    let accepted = sample_value(&m, "gpumem_ingest_reports_total", &[]).unwrap();
    assert!(
        accepted >= MAX_PROCESSES as f64 - 1.0,
        "accepted {accepted}"
    );

    let rss = vm_rss_kib(ex.child.id());
    eprintln!("flood: exporter VmRSS {rss} KiB after the flood");
    assert!(rss < RSS_LIMIT_KIB, "RSS {rss} KiB after the flood");
}

#[test]
fn one_process_cannot_mint_unbounded_phase_labels() {
    let ex = start_exporter(
        "sim:\n  gpus:\n    - scenario: idle\n",
        &["--sample-interval", "100ms"],
    );
    let uuid = sim_uuid(ex.port);
    for r in 0..8 {
        let events: Vec<String> = (0..256)
            .map(|i| format!(r#"{{"kind":"phase","name":"phase-{r}-{i}"}}"#))
            .collect();
        let body = format!(
            r#"{{"version":1,"devices":[{{"uuid":"{uuid}","allocated_bytes":1,"reserved_bytes":2}}],"events":[{}]}}"#,
            events.join(",")
        );
        let (status, answer) = common::post_unix(
            &ex.socket,
            "/api/v1/report",
            "application/json",
            body.as_bytes(),
        );
        assert_eq!(status, 202, "{answer}");
    }
    // The next sample publishes what the reports changed: all of them at once, since they
    // were all taken before it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let series = loop {
        let (_, body) = http_get(ex.port, "/metrics", Duration::from_secs(5)).unwrap();
        let n = String::from_utf8_lossy(&body)
            .lines()
            .filter(|l| l.starts_with("gpumem_process_phase_entries_total{"))
            .count();
        if n >= gpumem_exporter::engine::MAX_PHASES_PER_PROCESS || Instant::now() > deadline {
            break n;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // 2048 distinct names sent; the first 64 are counted, the rest ignored.
    assert_eq!(
        series,
        gpumem_exporter::engine::MAX_PHASES_PER_PROCESS,
        "phase series from one process"
    );
}

/// Every table holds its own cap (processes, phases, components), but their product does not
/// fit a scrape: forged pids over TCP, each with 32 components, would make a `/metrics` of
/// tens of thousands of series. The series budget (`web.max_series`, 20 000) keeps a scrape
/// within it, serving every GPU and every process NVML lists first, and counts what it left out.
#[test]
fn forged_pids_cannot_push_a_scrape_over_the_series_budget() {
    const PIDS: u32 = 300;
    const BUDGET: usize = 20_000;
    // GPUs whose processes stay the same pids throughout; TCP's share of the process table
    // (64 pids an address by default) raised, so that its pids alone can fill the budget.
    let ex = start_exporter(
        "ingest:\n  max_tcp_processes: 300\n  max_tcp_processes_per_address: 300\nsim:\n  gpus:\n    - scenario: steady\n    - scenario: shared\n",
        &[],
    );
    let uuid = sim_uuid(ex.port);
    let (_, body) = http_get(ex.port, "/metrics", Duration::from_secs(5)).unwrap();
    let listed = listed_pids(&String::from_utf8_lossy(&body));
    let components: Vec<String> = (0..32)
        .map(|i| {
            format!(
                r#"{{"component":"c{i}","parameters_bytes":1,"gradients_bytes":1,"optimizer_bytes":1}}"#
            )
        })
        .collect();
    let report = format!(
        r#"{{"version":1,"devices":[{{"uuid":"{uuid}","allocated_bytes":1,"reserved_bytes":2}}],"components":[{}]}}"#,
        components.join(",")
    );
    let client = reqwest::blocking::Client::new();
    for pid in 0..PIDS {
        let r = client
            .post(format!("http://127.0.0.1:{}/api/v1/report", ex.ingest_port))
            .header("Content-Type", "application/json")
            .header("X-Gpumem-Pid", (2_000_000 + pid).to_string())
            .body(report.clone())
            .send()
            .unwrap();
        assert_eq!(r.status(), 202);
    }
    // Once the reports are in a snapshot, scrapes stay within the budget.
    let deadline = Instant::now() + Duration::from_secs(30);
    let metrics = loop {
        let (_, body) = http_get(ex.port, "/metrics", Duration::from_secs(10)).unwrap();
        let m = String::from_utf8(body).unwrap();
        let dropped = sample_value(&m, "gpumem_exporter_series_dropped_total", &[]);
        if dropped.is_some_and(|d| d > 0.0) {
            break m;
        }
        let series = m.lines().filter(|l| !l.starts_with('#')).count();
        assert!(series <= BUDGET, "{series} series in one scrape");
        assert!(
            Instant::now() < deadline,
            "the reports never filled the budget"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let series = metrics.lines().filter(|l| !l.starts_with('#')).count();
    assert!(series <= BUDGET, "{series} series in one scrape");
    assert!(
        series > BUDGET / 2,
        "the budget is used, not left empty: {series}"
    );
    assert_eq!(
        listed_pids(&metrics),
        listed,
        "every process NVML lists is served"
    );
    assert!(metrics.contains("gpumem_gpu_info{"));
    let said = ex
        .log()
        .lines()
        .filter(|l| l.contains("series left out of /metrics"))
        .count();
    assert_eq!(said, 1, "{}", ex.log());
}

/// `/api/v1/snapshot` keeps the series budget of a scrape: it leaves out the processes a scrape
/// leaves out, and counts their series in the same counter.
#[test]
fn the_snapshot_keeps_the_series_budget_of_a_scrape() {
    // 64 processes NVML lists, about 8 series each, against a budget of 300; one sample a
    // minute, so that every request of the test sees the first sample's snapshot.
    let ex = Exporter::launch(Launch {
        config_yaml: "web:\n  max_series: 300\nhistory:\n  expire_after: 2m\nsim:\n  gpus:\n    - scenario: processes\n      processes: 64\n",
        sample_interval: Some("60s"),
        ..Launch::default()
    });
    let get = |path: &str| {
        let (status, body) = http_get(ex.port, path, Duration::from_secs(10)).unwrap();
        (status, String::from_utf8(body).unwrap())
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while get("/-/ready").0 != 200 {
        assert!(Instant::now() < deadline, "no first sample");
        std::thread::sleep(Duration::from_millis(50));
    }
    let dropped = |m: &str| sample_value(m, "gpumem_exporter_series_dropped_total", &[]).unwrap();
    let (_, first) = get("/metrics");
    let (_, second) = get("/metrics");
    // The counter is read after the scrape's own share is added.
    let per_scrape = dropped(&second) - dropped(&first);
    let served = listed_pids(&second);
    assert!(per_scrape > 0.0, "the budget left nothing out");
    assert!(
        !served.is_empty() && served.len() < 64,
        "{} of 64 processes served",
        served.len()
    );

    let (status, body) = get("/api/v1/snapshot");
    assert_eq!(status, 200);
    let snap: serde_json::Value = serde_json::from_str(&body).unwrap();
    let in_snapshot: std::collections::BTreeSet<String> = snap["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].to_string())
        .collect();
    assert_eq!(
        in_snapshot, served,
        "the snapshot holds what a scrape serves"
    );
    assert_eq!(snap["gpus"].as_array().unwrap().len(), 1);

    let (_, third) = get("/metrics");
    assert_eq!(
        dropped(&third) - dropped(&second),
        2.0 * per_scrape,
        "the snapshot's left-out series counted as a scrape's are"
    );
}

// ---------------------------------------------------------------------------------------------
// (c) SIGTERM during scrapes and ingest.

/// What a scrape that raced with shutdown got.
#[derive(Debug, PartialEq)]
enum Outcome {
    Complete,
    NoResponse,
}

/// A scrape with the whole response read: complete (its framing is whole and the body ends
/// with the last family) or no response at all. Anything else fails the test.
fn scrape_outcome(port: u16, before_reading: impl FnOnce()) -> Outcome {
    let Ok(s) = TcpStream::connect(("127.0.0.1", port)) else {
        return Outcome::NoResponse;
    };
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    if (&s)
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return Outcome::NoResponse;
    }
    before_reading();
    let mut raw = Vec::new();
    let _ = (&s).read_to_end(&mut raw);
    if raw.is_empty() {
        return Outcome::NoResponse;
    }
    // The whole response: its framing must be complete (Content-Length reached, or the last,
    // empty chunk of a chunked body seen).
    let (status, body) = read_response(&mut &raw[..])
        .unwrap_or_else(|e| panic!("a truncated response ({e}): {} bytes", raw.len()));
    assert_whole_scrape(status, &body);
    Outcome::Complete
}

/// A 200 whose body ends with the last family the exporter serves: nothing cut short.
fn assert_whole_scrape(status: u16, body: &[u8]) {
    assert_eq!(status, 200);
    let body = String::from_utf8_lossy(body);
    let last = body.lines().last().unwrap_or("");
    assert!(
        last.starts_with("gpumem_ingest_process_table_total"),
        "the body does not end with the last family: {last:?}"
    );
}

#[test]
fn sigterm_during_scrapes_and_ingest_exits_cleanly() {
    // Many simulated processes make a body of megabytes: larger than the socket buffers, so a
    // client that reads slowly keeps the response in flight while the signal arrives (the
    // series budget raised to let it through).
    let ex = start_exporter(
        "web:\n  max_series: 1000000\nhistory:\n  max_processes: 8192\nsim:\n  gpus:\n    - scenario: processes\n      processes: 1024\n    - scenario: processes\n      processes: 1024\n",
        &["--sample-interval", "1s"],
    );
    let (_, body) = http_get(ex.port, "/metrics", Duration::from_secs(10)).unwrap();
    eprintln!("sigterm: metrics body {} bytes", body.len());
    assert!(
        body.len() > 1 << 20,
        "the body should be large: {}",
        body.len()
    );

    let valid_body: &'static str = Box::leak(valid(&sim_uuid(ex.port)).into_boxed_str());
    let stop = Arc::new(AtomicBool::new(false));
    // A slow reader: request sent, response held up in the socket until SIGTERM has been sent.
    let (signalled, on_signal) = std::sync::mpsc::channel::<()>();
    let slow = {
        let port = ex.port;
        std::thread::spawn(move || {
            scrape_outcome(port, || {
                let _ = on_signal.recv();
            })
        })
    };
    // What the load has done so far: whole scrapes, and reports over each transport.
    let progress: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    // Scrapes in a loop, racing with the shutdown.
    let scrapers: Vec<_> = (0..3)
        .map(|_| {
            let (stop, port, progress) = (Arc::clone(&stop), ex.port, Arc::clone(&progress));
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let o = scrape_outcome(port, || {});
                    if o == Outcome::Complete {
                        progress[0].fetch_add(1, Ordering::Relaxed);
                    }
                    let none = o == Outcome::NoResponse;
                    seen.push(o);
                    if none {
                        break; // the listener is closed
                    }
                }
                seen
            })
        })
        .collect();
    // Reports on the socket and over TCP, racing with the shutdown too.
    let ingest: Vec<_> = (0..2)
        .map(|w| {
            let (stop, socket, port) = (Arc::clone(&stop), ex.socket.clone(), ex.ingest_port);
            let progress = Arc::clone(&progress);
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    if w == 0 {
                        // One connection, as over TCP: a second one (after a probe) may come
                        // after the listener closed, and be refused.
                        let Ok(s) = std::os::unix::net::UnixStream::connect(&socket) else {
                            break;
                        };
                        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                        let req = format!(
                            "POST /api/v1/report HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{valid_body}",
                            valid_body.len()
                        );
                        if (&s).write_all(req.as_bytes()).is_ok() {
                            if let Ok((status, _)) = read_response(&mut BufReader::new(&s)) {
                                assert!(matches!(status, 202 | 429), "unix ingest answered {status}");
                            }
                        }
                    } else {
                        let Ok(s) = TcpStream::connect(("127.0.0.1", port)) else { break };
                        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                        let req = format!(
                            "POST /api/v1/report HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Gpumem-Pid: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{valid_body}",
                            50_000 + n % 100,
                            valid_body.len()
                        );
                        if (&s).write_all(req.as_bytes()).is_ok() {
                            if let Ok((status, _)) = read_response(&mut BufReader::new(&s)) {
                                assert!(matches!(status, 202 | 429), "tcp ingest answered {status}");
                            }
                        }
                    }
                    n += 1;
                    progress[1 + w].fetch_add(1, Ordering::Relaxed);
                }
                n
            })
        })
        .collect();

    // Signalled under load: once scrapes have completed and reports gone over both transports.
    let deadline = Instant::now() + Duration::from_secs(60);
    while progress[0].load(Ordering::Relaxed) < 3
        || progress[1].load(Ordering::Relaxed) < 3
        || progress[2].load(Ordering::Relaxed) < 3
    {
        assert!(
            Instant::now() < deadline,
            "no load after 60 s: {progress:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    unsafe { libc::kill(ex.child.id() as i32, libc::SIGTERM) };
    let _ = signalled.send(());
    let mut ex = ex;
    let status = wait_exit(&mut ex.child, Duration::from_secs(20));
    stop.store(true, Ordering::Relaxed);

    assert_eq!(status.code(), Some(0), "exit status after SIGTERM");
    assert!(!ex.socket.exists(), "the socket file was left behind");
    assert_eq!(
        slow.join().unwrap(),
        Outcome::Complete,
        "a response in flight at SIGTERM must be finished"
    );
    let mut complete = 0;
    for s in scrapers {
        let seen = s.join().expect("a scrape saw a truncated response");
        complete += seen.iter().filter(|o| **o == Outcome::Complete).count();
    }
    assert!(complete > 0, "no scrape completed before the signal");
    for i in ingest {
        i.join().expect("an ingest request saw a broken answer");
    }
}

// ---------------------------------------------------------------------------------------------
// (d) Scrapers that stop reading.

#[test]
fn scrapers_that_stop_reading_are_dropped_and_others_still_get_whole_answers() {
    // A body of several MB: far more than the socket buffers of a client that reads nothing
    // (the series budget raised to let it through).
    let ex = start_exporter(
        "web:\n  max_series: 1000000\nhistory:\n  max_processes: 8192\nsim:\n  gpus:\n    - scenario: processes\n      processes: 1024\n    - scenario: processes\n      processes: 1024\n",
        &["--sample-interval", "1s"],
    );
    // More stalled scrapes than are encoded at once: they hold every encoder.
    let stalled: Vec<TcpStream> = (0..12)
        .map(|_| {
            let s = TcpStream::connect(("127.0.0.1", ex.port)).unwrap();
            (&s).write_all(
                b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
            )
            .unwrap();
            s
        })
        .collect();
    // They hold every encoder once that many have an answer coming in.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answered = stalled
            .iter()
            .filter(|s| {
                s.set_nonblocking(true).unwrap();
                let got = s.peek(&mut [0u8; 1]).is_ok_and(|n| n > 0);
                s.set_nonblocking(false).unwrap();
                got
            })
            .count();
        if answered >= gpumem_exporter::exporter::http::MAX_CONCURRENT_SCRAPES {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{answered} stalled scrapes answered"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // A scrape behind them is answered, whole, once the stalled ones are given up on.
    let started = Instant::now();
    assert_eq!(
        scrape_outcome(ex.port, || {}),
        Outcome::Complete,
        "a scrape behind stalled ones"
    );
    eprintln!(
        "stalled: a scrape behind 12 stalled ones took {:?}",
        started.elapsed()
    );
    // The stalled clients, reading at last: those given up on get a cut-off body (no
    // terminating chunk); those that waited for an encoder get the whole body. None gets a
    // short body that looks complete.
    let mut cut_off = 0;
    for s in stalled {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut raw = Vec::new();
        let _ = (&s).read_to_end(&mut raw);
        match read_response(&mut &raw[..]) {
            Err(_) => cut_off += 1,
            Ok((status, body)) => assert_whole_scrape(status, &body),
        }
    }
    assert!(
        cut_off >= gpumem_exporter::exporter::http::MAX_CONCURRENT_SCRAPES,
        "{cut_off} stalled scrapes were given up on"
    );
}
