//! The report commands (`profile`, `oom`, `leak`, `fragment`, `compare`, `sweep`) run as the
//! built binary, on the simulator and on the recorded traces.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "cli_reports/compare.rs"]
mod compare;

const BIN: &str = env!("CARGO_BIN_EXE_gpumem-exporter");

fn trace(name: &str) -> String {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/data/traces")).join(name);
    assert!(p.exists(), "trace {} is missing", p.display());
    p.display().to_string()
}

fn replay(names: &[&str]) -> String {
    format!(
        "replay:{}",
        names.iter().map(|n| trace(n)).collect::<Vec<_>>().join(",")
    )
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the binary")
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn out(dir: &tempfile::TempDir, name: &str) -> String {
    dir.path().join(name).display().to_string()
}

fn assert_header(r: &Value, kind: &str) {
    assert_eq!(r["schema_version"], 1, "{r}");
    assert_eq!(r["kind"], kind);
    let at = r["generated_at"].as_str().unwrap();
    // RFC 3339: 2025-06-23T10:30:00Z
    assert_eq!(at.len(), 20, "{at}");
    assert_eq!(&at[4..5], "-");
    assert_eq!(&at[10..11], "T");
    assert!(at.ends_with('Z'));
    assert!(r["source"].is_string());
}

#[test]
fn profile_on_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let o = out(&dir, "profile.json");
    let r = run(&[
        "profile",
        "--source",
        "sim",
        "--sample-interval",
        "50ms",
        "--duration",
        "2",
        "--devices",
        "0",
        "4",
        "--tag",
        "batch_size=32",
        "--tag",
        "run=a",
        "--output",
        &o,
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let j = read_json(Path::new(&o));
    assert_header(&j, "profile");
    assert_eq!(j["source"], "sim");
    assert_eq!(j["tags"]["batch_size"], "32");
    assert_eq!(j["interval"], 0.05);
    let d = j["duration"].as_f64().unwrap();
    assert!((1.5..3.5).contains(&d), "duration {d}");
    let devs = j["devices"].as_object().unwrap();
    assert_eq!(devs.keys().collect::<Vec<_>>(), ["0", "4"]);
    for (k, dev) in devs {
        let cur = &dev["current_memory"];
        for f in [
            "allocated",
            "reserved",
            "used",
            "free",
            "total",
            "utilization",
        ] {
            assert!(cur[f].is_number(), "{k}.current_memory.{f}: {cur}");
        }
        assert_eq!(cur["allocator_reported"], true);
        assert!(dev["peak_memory"].as_u64().unwrap() >= cur["used"].as_u64().unwrap());
        let st = &dev["statistics"];
        let n = st["num_snapshots"].as_u64().unwrap();
        // About 41; fewer on a busy machine (missed ticks are skipped, not bunched).
        assert!((10..=45).contains(&n), "{n} snapshots in 2 s at 50 ms");
        assert!(st["max_utilization"].as_f64() >= st["avg_utilization"].as_f64());
        assert!(st["avg_fragmentation"].as_f64().unwrap() <= 1.0);
        let s = &dev["series"];
        let len = s["t"].as_array().unwrap().len();
        assert_eq!(len as u64, n);
        for f in ["used", "reserved", "allocated"] {
            assert_eq!(s[f].as_array().unwrap().len(), len);
        }
        // The simulator's phases: forward, backward, optimizer.
        let phases: Vec<&str> = dev["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(phases, ["backward", "forward", "optimizer"]);
        assert!(dev["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "phase"));
    }
    let pids: Vec<u64> = devs["4"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids, [1400, 1401]);
    assert_eq!(devs["0"]["processes"][0]["job"], "sim-train");
}

#[test]
fn profile_of_a_replay_runs_on_trace_time() {
    let dir = tempfile::tempdir().unwrap();
    let o = out(&dir, "p.json");
    let r = run(&[
        "profile",
        "--source",
        &replay(&["d1-leak.jsonl"]),
        "--duration",
        "120",
        "--output",
        &o,
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let j = read_json(Path::new(&o));
    assert_header(&j, "profile");
    assert_eq!(j["interval"], Value::Null);
    let d = j["duration"].as_f64().unwrap();
    assert!((110.0..=120.0).contains(&d), "{d}");
    let dev = &j["devices"]["0"];
    assert_eq!(dev["name"], "NVIDIA H200");
    let p = &dev["processes"][0];
    assert_eq!(p["pid"], 2508);
    assert_eq!(p["leak_suspected"], true);
    let slope = p["leak_slope_mib_per_min"].as_f64().unwrap();
    assert!((120.0..350.0).contains(&slope), "{slope}");
    assert!(p["peak_allocated"].as_u64().unwrap() > 1 << 30);
    assert!(dev["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "model_ready" && e["kind"] == "mark"));

    // --duration is in trace seconds.
    let r = run(&[
        "profile",
        "--source",
        &replay(&["d1-leak.jsonl"]),
        "--duration",
        "30",
        "--output",
        &o,
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let d = read_json(Path::new(&o))["duration"].as_f64().unwrap();
    assert!((29.0..=30.0).contains(&d), "{d}");
}

#[test]
fn oom_on_the_oom_trace_reaches_critical_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let o = out(&dir, "oom.json");
    let r = run(&[
        "oom",
        "--source",
        &replay(&["d1-oom.jsonl"]),
        "--threshold",
        "85",
        "--duration",
        "120",
        "--output",
        &o,
    ]);
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(
        stdout.contains("-> high") || stdout.contains("-> critical"),
        "{stdout}"
    );
    let j = read_json(Path::new(&o));
    assert_header(&j, "oom");
    assert_eq!(j["critical_reached"], true);
    assert_eq!(j["thresholds"]["high_used_percent"], 85.0);
    assert_eq!(j["thresholds"]["medium_used_percent"], 75.0);
    let d = &j["devices"]["0"];
    let a = &d["risk_assessment"];
    let level = a["risk_level"].as_str().unwrap();
    assert!(level == "high" || level == "critical", "{a}");
    let c = a["confidence"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&c) && c > 0.5, "{c}");
    assert!(a["growth_rate_mb_per_sec"].as_f64().unwrap() > 300.0, "{a}");
    assert!(a["predicted_oom_time_seconds"].as_f64().unwrap() < 300.0);
    assert!(a["current_usage_percent"].as_f64().unwrap() > 20.0);
    assert!(!a["recommendation"].as_str().unwrap().is_empty());
    assert_eq!(d["reason"], "eta");
    assert_eq!(d["worst"]["risk_level"], "critical");
    let changes = d["level_changes"].as_array().unwrap();
    assert!(changes.len() >= 2, "{changes:?}");
}

#[test]
fn oom_on_a_steady_trace_is_low_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let o = out(&dir, "oom.json");
    let r = run(&[
        "oom",
        "--source",
        &replay(&["d1-steady.jsonl"]),
        "--output",
        &o,
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    let j = read_json(Path::new(&o));
    let a = &j["devices"]["0"]["risk_assessment"];
    assert_eq!(a["risk_level"], "low");
    assert_eq!(a["predicted_oom_time_seconds"], Value::Null);
    assert_eq!(j["critical_reached"], false);
}

#[test]
fn oom_threshold_sets_the_used_percent_for_high() {
    let dir = tempfile::tempdir().unwrap();
    let o = out(&dir, "oom.json");
    // GPU 4 of the simulator (two processes) is about half full.
    let r = run(&[
        "oom",
        "--source",
        "sim",
        "--sample-interval",
        "100ms",
        "--duration",
        "1.5",
        "--threshold",
        "40",
        "--output",
        &o,
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    let j = read_json(Path::new(&o));
    assert_eq!(j["devices"].as_object().unwrap().len(), 5);
    let g4 = &j["devices"]["4"];
    assert_eq!(g4["risk_assessment"]["risk_level"], "high", "{g4}");
    assert_eq!(g4["reason"], "used_fraction");
    assert_eq!(g4["risk_assessment"]["confidence"], 0.95);
    assert_eq!(j["devices"]["0"]["risk_assessment"]["risk_level"], "low");
}

#[test]
fn oom_monitor_prints_each_change_and_stops_on_sigint() {
    // On a replay, --monitor runs to the end of the trace.
    let r = run(&["oom", "--source", &replay(&["d1-oom.jsonl"]), "--monitor"]);
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    let stdout = String::from_utf8_lossy(&r.stdout);
    let changes: Vec<&str> = stdout.lines().filter(|l| l.contains(" -> ")).collect();
    assert!(changes.len() >= 2, "{stdout}");
    assert!(
        changes.iter().any(|l| l.contains("-> critical")),
        "{stdout}"
    );

    // Live: until Ctrl-C, sent once it has said where each GPU starts (the first line of each
    // GPU gives its starting level; GPU 4 starts high).
    let mut child = Command::new(BIN)
        .args([
            "oom",
            "--source",
            "sim",
            "--sample-interval",
            "100ms",
            "--monitor",
            "--threshold",
            "40",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|l: &String| l.contains("GPU 4") && l.contains("high"))
    {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => seen.push(line),
            Err(e) => panic!("no `GPU 4 ... high` line ({e}): {seen:?}"),
        }
    }
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    // A bound far from the normal case (it stops within a sample): a hang fails, a slow
    // machine does not.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "oom --monitor did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    reader.join().unwrap();
    assert_eq!(status.code(), Some(0), "{seen:?}");
}

/// The threads of a running process, by name.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|c| c.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn sigterm_ends_a_profile_early_and_its_report_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let o = out(&dir, "profile.json");
    let child = Command::new(BIN)
        .args([
            "profile",
            "--source",
            "sim",
            "--sample-interval",
            "100ms",
            "--duration",
            "10m",
            "--output",
            &o,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Signalled once its stop listens (the thread that waits for signals is running).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !thread_names(child.id()).iter().any(|n| n == "signals") {
        assert!(Instant::now() < deadline, "no signal thread");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let r = child.wait_with_output().unwrap();
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&o).unwrap()).unwrap();
    assert_eq!(report["interrupted"], true, "{report}");
    assert!(report["duration"].as_f64().unwrap() < 600.0, "{report}");
}

#[test]
fn leak_finds_the_leaking_pid_in_d1() {
    let dir = tempfile::tempdir().unwrap();
    let o = out(&dir, "leak.json");
    let r = run(&[
        "leak",
        "--source",
        &replay(&["d1-leak.jsonl"]),
        "--threshold",
        "10",
        "--duration",
        "120",
        "--output",
        &o,
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let j = read_json(Path::new(&o));
    assert_header(&j, "leak");
    assert_eq!(j["verdict"], "leak");
    assert_eq!(j["threshold_mib_per_min"], 10.0);
    assert_eq!(j["suspect"]["pid"], 2508);
    let p = &j["processes"][0];
    assert_eq!(p["pid"], 2508);
    assert_eq!(p["verdict"], "leak");
    assert_eq!(p["measured"], "allocator");
    let slope = p["slope_mib_per_min"].as_f64().unwrap();
    assert!((150.0..300.0).contains(&slope), "{slope}");
    assert!(p["p_value"].as_f64().unwrap() < 0.01);
    assert!(j["advice"].as_array().unwrap().len() >= 3);
}

#[test]
fn leak_on_a_shared_gpu_names_the_leaker_not_its_neighbours() {
    let dir = tempfile::tempdir().unwrap();
    let o = out(&dir, "leak.json");
    let r = run(&[
        "leak",
        "--source",
        &replay(&["d2-steady.jsonl", "d2-leak.jsonl"]),
        "--output",
        &o,
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let j = read_json(Path::new(&o));
    // The leaker is the header's pid of d2-leak.
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(trace("d2-leak.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(j["suspect"]["pid"], header["pid"]);
    assert_eq!(j["verdict"], "leak");
    let steady: Value = serde_json::from_str(
        std::fs::read_to_string(trace("d2-steady.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let neighbour = j["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == steady["pid"])
        .expect("the steady trainer is listed");
    assert_eq!(neighbour["verdict"], "none", "{neighbour}");
}

#[test]
fn leak_on_steady_data_and_on_too_little_data() {
    let r = run(&[
        "leak",
        "--source",
        &replay(&["d1-steady.jsonl"]),
        "--output",
        "-",
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let j: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(j["verdict"], "none", "{j}");
    assert_eq!(j["suspect"], Value::Null);

    let r = run(&[
        "leak",
        "--source",
        "sim",
        "--sample-interval",
        "100ms",
        "--duration",
        "1",
        "--output",
        "-",
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let j: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(j["verdict"], "insufficient_data");
    assert_eq!(j["processes"].as_array().unwrap().len(), 6);
}

#[test]
fn fragment_on_the_frag_trace_and_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let o = out(&dir, "frag.json");
    let r = run(&[
        "fragment",
        "--source",
        &replay(&["d1-frag.jsonl"]),
        "--output",
        &o,
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let j = read_json(Path::new(&o));
    assert_header(&j, "fragment");
    assert_eq!(j["bands"]["good_below"], 0.15);
    let d = &j["devices"]["0"];
    let avg = d["avg_fragmentation"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&avg));
    assert!(d["max_fragmentation"].as_f64().unwrap() >= avg);
    assert!(d["avg_cached_unallocated"].as_f64().unwrap() > 0.2);
    assert!(["good", "moderate", "serious", "severe"].contains(&d["band"].as_str().unwrap()));
    let share: f64 = d["time_in_band"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!((share - 1.0).abs() < 0.01);
    assert!(d["segments"].as_u64().unwrap() > 0);
    assert!(d["empty_cache_events"].as_u64().unwrap() > 10);
    assert!(!d["advice"].as_array().unwrap().is_empty());
    let s = &d["series"];
    let n = s["t"].as_array().unwrap().len();
    assert_eq!(s["fragmentation"].as_array().unwrap().len(), n);
    assert_eq!(s["cached_unallocated"].as_array().unwrap().len(), n);

    let r = run(&[
        "fragment",
        "--source",
        "sim",
        "--sample-interval",
        "50ms",
        "--interval",
        "0.1",
        "--duration",
        "1.5",
        "--devices",
        "3",
        "--output",
        &o,
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let j = read_json(Path::new(&o));
    let d = &j["devices"]["3"];
    // The simulator's `frag` scenario keeps 60% of its free cache in slivers.
    assert_eq!(d["band"], "severe", "{d}");
    let n = d["num_snapshots"].as_u64().unwrap();
    assert!((5..=17).contains(&n), "--interval 0.1 over 1.5 s: {n}");
}

fn profile_tagged(dir: &tempfile::TempDir, trace_name: &str, tags: &[&str], file: &str) -> String {
    profile_of(dir, &[trace_name], &[], tags, file)
}

/// A profile report of the traces replayed together (each its own GPU), limited to `devices`
/// where given.
fn profile_of(
    dir: &tempfile::TempDir,
    traces: &[&str],
    devices: &[&str],
    tags: &[&str],
    file: &str,
) -> String {
    let o = out(dir, file);
    let mut args = vec![
        "profile".to_string(),
        "--source".into(),
        replay(traces),
        "--duration".into(),
        "20".into(),
        "--output".into(),
        o.clone(),
    ];
    if !devices.is_empty() {
        args.push("--devices".into());
        args.extend(devices.iter().map(|d| d.to_string()));
    }
    for t in tags {
        args.push("--tag".into());
        args.push(t.to_string());
    }
    let r = Command::new(BIN).args(&args).output().unwrap();
    assert!(r.status.success(), "{}", text(&r));
    o
}

#[test]
fn bad_flags_fail_with_status_2_before_sampling() {
    let dir = tempfile::tempdir().unwrap();
    let o = out(&dir, "never.json");
    let oom_trace = replay(&["d1-oom.jsonl"]);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "profile",
                "--source",
                "sim",
                "--devices",
                "9",
                "--duration",
                "100",
                "--output",
                &o,
            ],
            "--devices",
        ),
        (
            vec!["profile", "--source", "sim", "--duration", "0"],
            "--duration",
        ),
        (
            vec!["profile", "--source", "sim", "--duration", "-5"],
            "--duration",
        ),
        (
            vec!["leak", "--source", "sim", "--duration", "-5"],
            "--duration",
        ),
        (
            vec![
                "profile",
                "--source",
                "sim",
                "--duration",
                "100",
                "--output",
                "/nonexistent-dir/x.json",
            ],
            "--output",
        ),
        (
            vec![
                "fragment",
                "--source",
                "sim",
                "--duration",
                "100",
                "--output",
                "/",
            ],
            "--output",
        ),
        (
            vec![
                "profile",
                "--source",
                "sim",
                "--duration",
                "100",
                "--plot",
                "chart.jpg",
            ],
            "--plot",
        ),
        (
            vec![
                "oom",
                "--source",
                "sim",
                "--duration",
                "100",
                "--threshold",
                "0",
            ],
            "--threshold",
        ),
        (
            vec![
                "leak",
                "--source",
                "sim",
                "--duration",
                "100",
                "--threshold",
                "-1",
            ],
            "--threshold",
        ),
        (
            vec!["oom", "--source", "sim", "--monitor", "--duration", "3"],
            "--monitor",
        ),
        (
            vec!["profile", "--source", "replay:/nonexistent/trace.jsonl"],
            "--source",
        ),
        (
            vec!["profile", "--source", "sim", "--interval", "0.001"],
            "--interval",
        ),
        (
            vec!["profile", "--source", "sim", "--tag", "novalue"],
            "--tag",
        ),
        (
            vec!["oom", "--source", &oom_trace, "--devices", "3"],
            "--devices",
        ),
        // Settings that would switch a feature off, with their range.
        (
            vec!["profile", "--source", &oom_trace, "--replay.report-interval", "100d"],
            "--replay.report-interval: `100d` is out of range; accepted: 0s (every recorded sample) or 10ms..1m",
        ),
        (
            vec!["--source", "sim", "--replay.speed", "0.000001", "--print-config"],
            "--replay.speed: 0.000001 is out of range; accepted: 0.01..100000",
        ),
    ];
    for (args, flag) in cases {
        let started = Instant::now();
        let r = run(&args);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", text(&r));
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(err.contains(flag), "{args:?}: no {flag} in {err}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{args:?} sampled before failing"
        );
    }
    assert!(!Path::new(&o).exists());
}

/// Run `args` with a standard output whose reading end is already closed: every write to it
/// fails, as under `| head -1` once head has its line.
fn run_into_a_closed_pipe(args: &[&str]) -> Output {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    unsafe { libc::close(fds[0]) };
    // SAFETY: the writing end is ours alone; Stdio takes it over.
    let write_end = unsafe { Stdio::from_raw_fd(fds[1]) };
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(write_end)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let a = profile_tagged(&dir, "d1-steady.jsonl", &["config=base"], "a.json");
    let b = profile_tagged(&dir, "d1-oom.jsonl", &["config=big"], "b.json");
    for args in [
        vec!["compare", a.as_str(), b.as_str()],
        vec!["compare", a.as_str(), b.as_str(), "--json"],
        vec!["replay", &trace("d1-steady.jsonl")],
        vec!["--print-config"],
    ] {
        let r = run_into_a_closed_pipe(&args);
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(err.trim().is_empty(), "{args:?} said: {err}");
        assert!(
            r.status.success() || r.status.signal() == Some(libc::SIGPIPE),
            "{args:?}: {:?}",
            r.status
        );
    }
}
