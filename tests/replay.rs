//! `gpumem-exporter replay` over the shared real traces.

mod common;

use common::*;
use std::process::Command;

fn run_replay(files: &[&str]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("timeline.jsonl");
    let status = Command::new(BIN)
        .arg("replay")
        .args(files.iter().map(|f| trace(f)))
        .arg("--output")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn values<'a>(
    line: &'a serde_json::Value,
    name: &'a str,
) -> impl Iterator<Item = &'a serde_json::Value> + 'a {
    line["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(move |m| m["name"] == name)
}

#[test]
fn one_line_per_second_of_trace_time_with_the_metrics_series() {
    let lines = run_replay(&[
        "d1-steady.jsonl",
        "d1-leak.jsonl",
        "d1-oom.jsonl",
        "d1-frag.jsonl",
    ]);
    assert!(
        lines.len() >= 119,
        "{} lines for 120 s of trace",
        lines.len()
    );
    for w in lines.windows(2) {
        assert_eq!(w[1]["t"].as_i64().unwrap(), w[0]["t"].as_i64().unwrap() + 1);
    }
    let last = lines.last().unwrap();
    // Four traces without gpu_index: GPUs "0" to "3" in the order given.
    let gpus: Vec<String> = values(last, "gpumem_device_up")
        .map(|m| m["labels"]["gpu"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(gpus, ["0", "1", "2", "3"]);
    // The NVML part feeds the source path, the torch part the allocator path.
    assert!(values(last, "gpumem_used_bytes").count() == 4);
    let alloc: Vec<_> = values(last, "gpumem_process_allocated_bytes").collect();
    assert_eq!(alloc.len(), 4);
    assert!(alloc.iter().any(|m| m["labels"]["pid"] == "2508"));
}

#[test]
fn traces_of_one_gpu_merge_onto_it() {
    let lines = run_replay(&["d2-steady.jsonl", "d2-leak.jsonl"]);
    // Mid-run: both trainers and the ballast are alive (the steady trainer ends first).
    let mid = &lines[100];
    assert_eq!(values(mid, "gpumem_device_up").count(), 1);
    let pids: std::collections::BTreeSet<String> = values(mid, "gpumem_process_used_bytes")
        .map(|m| m["labels"]["pid"].as_str().unwrap().to_string())
        .collect();
    // The untraced 57 GiB ballast is visible through NVML's process list.
    assert_eq!(pids, ["404", "435", "452"].map(String::from).into());
    let allocs = values(mid, "gpumem_process_allocated_bytes").count();
    assert_eq!(allocs, 2, "two traced processes report allocator stats");
}

#[test]
fn replay_is_deterministic() {
    let a = run_replay(&["d2-steady.jsonl", "d2-leak.jsonl"]);
    let b = run_replay(&["d2-steady.jsonl", "d2-leak.jsonl"]);
    assert_eq!(a, b);
}

#[test]
fn metrics_writes_only_the_families_it_names_and_refuses_an_unknown_one() {
    let only = |names: &str| {
        Command::new(BIN)
            .arg("replay")
            .arg(trace("d1-oom.jsonl"))
            .args(["--metrics", names, "--output", "-"])
            .output()
            .unwrap()
    };
    let out = only("gpumem_oom_risk_level,gpumem_used_bytes");
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 59, "{} lines", lines.len());
    let mut seen = std::collections::BTreeSet::new();
    for l in &lines {
        for m in l["metrics"].as_array().unwrap() {
            seen.insert(m["name"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["gpumem_oom_risk_level", "gpumem_used_bytes"]
    );
    // A name no family has is refused before anything is replayed, naming the flag.
    let out = only("gpumem_oom_risk_levels");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--metrics") && err.contains("gpumem_oom_risk_levels"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_missing_or_broken_trace_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"kind\":\"header\",\"pid\":1}\n{\"kind\":\"sample\",\"t\":\"x\"}\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("replay")
        .arg(&bad)
        .arg("--output")
        .arg(dir.path().join("o.jsonl"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.jsonl:2:"), "{err}");
}

#[test]
fn logs_to_a_pipe_are_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .arg("replay")
        .arg(trace("d1-steady.jsonl"))
        .arg("--output")
        .arg(dir.path().join("t.jsonl"))
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    assert!(o.status.success());
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(log.contains("timeline written"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "escape codes in a piped log: {log:?}"
    );
    // logfmt, the Prometheus exporters' default.
    let line = log
        .lines()
        .find(|l| l.contains("timeline written"))
        .unwrap();
    assert!(
        line.starts_with("ts=") && line.contains(" level=info ") && line.contains(" msg="),
        "{line}"
    );
}

#[test]
fn log_format_json_writes_one_object_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .args(["--log.format", "json", "replay"])
        .arg(trace("d1-steady.jsonl"))
        .arg("--output")
        .arg(dir.path().join("t.jsonl"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let log = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let done = lines
        .iter()
        .find(|v| v["msg"] == "timeline written")
        .expect("the timeline's log line");
    assert_eq!(done["level"], "info");
    assert!(done["ts"].as_str().is_some_and(|t| t.ends_with('Z')));
    let bad = Command::new(BIN)
        .args(["--log.format", "text", "replay"])
        .arg(trace("d1-steady.jsonl"))
        .args(["--output", "-"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--log.format"));
}

/// `replay FILE... --summary S [--chart C]` with no timeline: (stdout, summary).
fn verdict_of(
    files: &[std::path::PathBuf],
    chart: Option<&std::path::Path>,
) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    let mut cmd = Command::new(BIN);
    cmd.arg("replay").args(files).arg("--summary").arg(&summary);
    cmd.args(["--sample-interval", "1s", "--replay.report-interval", "1s"]);
    if let Some(c) = chart {
        cmd.arg("--chart").arg(c);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    (String::from_utf8(out.stdout).unwrap(), json)
}

fn corpus_run(name: &str) -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/corpus/dev")
        .join(name);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".jsonl"))
        .collect();
    files.sort();
    files
}

#[test]
fn the_summary_of_a_real_crash_names_the_failure_and_the_leads() {
    let files = corpus_run("c-batch-warmup");
    let header: serde_json::Value = {
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(std::fs::File::open(&files[0]).unwrap()),
            &mut text,
        )
        .unwrap();
        serde_json::from_str(text.lines().next().unwrap()).unwrap()
    };
    let (printed, s) = verdict_of(&files, None);
    let oom = s["oom_t"].as_f64().unwrap();
    assert_eq!(
        oom,
        header["oom_t"].as_f64().unwrap(),
        "the recorder's own oom_t"
    );
    let failure = &s["failure"];
    assert!(
        failure["request_bytes"].as_u64().unwrap() > failure["device_free_bytes"].as_u64().unwrap()
    );
    // Leads are the crash minus the start of the unbroken run, which lies before the crash.
    for (from, lead) in [
        ("warning_from_t", "warning_lead_s"),
        ("critical_from_t", "critical_lead_s"),
    ] {
        let from = s[from].as_f64().expect(from);
        assert!(from < oom);
        assert!((s[lead].as_f64().unwrap() - (oom - from)).abs() < 0.01);
    }
    assert!(s["warning_from_t"].as_f64() <= s["critical_from_t"].as_f64());
    assert_eq!(s["eta_before"]["10"]["risk"], "critical");
    assert_eq!(s["gpus"].as_array().unwrap().len(), 1);
    // The same verdict, for a person.
    assert!(
        printed.contains(&format!("Out of memory at {oom:.1} s")),
        "{printed}"
    );
    assert!(
        printed.contains(&format!(
            "Paged (risk critical) from {:.0} s",
            s["critical_from_t"].as_f64().unwrap()
        )),
        "{printed}"
    );
}

#[test]
fn a_healthy_recording_has_no_failure_and_no_lead() {
    let (printed, s) = verdict_of(&corpus_run("h-ckpt"), None);
    assert!(s["oom_t"].is_null() && s["failure"].is_null());
    assert!(s["warning_lead_s"].is_null() && s["critical_lead_s"].is_null());
    assert_eq!(
        s["seconds_at_critical"], 0,
        "a healthy corpus run never pages"
    );
    assert!(printed.contains("No allocation failed"), "{printed}");
}

#[test]
fn the_chart_is_a_png_with_two_panels_per_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("run.png");
    verdict_of(&corpus_run("c-batch-warmup"), Some(&png));
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!(h, 2 * 380, "memory and forecast panels");
}

#[test]
fn a_trace_cut_short_by_a_kill_replays_up_to_its_last_whole_line() {
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.jsonl");
    let text = std::fs::read_to_string(trace("d1-oom.jsonl")).unwrap();
    let keep: Vec<&str> = text.lines().take(200).collect();
    // What a SIGKILL mid-write leaves: whole lines, then half of one, no newline.
    std::fs::write(
        &cut,
        format!("{}\n{{\"kind\":\"sample\",\"t\":9", keep.join("\n")),
    )
    .unwrap();
    let (_, s) = verdict_of(std::slice::from_ref(&cut), None);
    assert!(s["end_t"].as_f64().unwrap() > 0.0);
    // The same half line with its newline is not a kill's doing: an error naming the line.
    std::fs::write(
        &cut,
        format!("{}\n{{\"kind\":\"sample\",\"t\":9\n", keep.join("\n")),
    )
    .unwrap();
    let out = Command::new(BIN).arg("replay").arg(&cut).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cut.jsonl:201:"));
}

/// Run `replay` on `files`, killed if it outlives `within`; its status, stderr and peak
/// resident memory (KiB).
fn replay_bounded(files: &[&std::path::Path], within: std::time::Duration) -> (i32, String, i64) {
    use std::time::Instant;
    let dir = tempfile::tempdir().unwrap();
    let err_path = dir.path().join("stderr");
    // Reaped by wait4 below, which gives its peak memory too.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(BIN)
        .arg("replay")
        .args(files)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + within;
    // wait4 gives this child's own peak memory, where the test process's totals would mix in
    // every other test's children.
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        if Instant::now() > deadline {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            panic!("replay still ran after {within:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let err = std::fs::read_to_string(&err_path).unwrap();
    (code, err, usage.ru_maxrss)
}

const HEADER: &str = r#"{"kind":"header","pid":10,"gpu":"G"}"#;

fn sample(t: &str) -> String {
    format!(
        r#"{{"kind":"sample","t":{t},"nvml":{{"total":100,"free":50,"v2_reserved":10,"v2_used":40,"procs":[]}}}}"#
    )
}

#[test]
fn a_time_far_from_the_trace_start_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for t in ["1e12", "-1e18"] {
        let path = dir.path().join("far.jsonl");
        std::fs::write(&path, format!("{HEADER}\n{}\n{}\n", sample("0"), sample(t))).unwrap();
        let (code, err, _) = replay_bounded(&[&path], std::time::Duration::from_secs(30));
        assert_ne!(code, 0, "{t}: {err}");
        assert!(
            err.contains("far.jsonl:3: sample time") && err.contains("out of range"),
            "{t}: {err}"
        );
    }
}

#[test]
fn a_line_longer_than_the_limit_is_refused_with_memory_bounded() {
    use std::io::Write;
    // 128 MiB of one line, a few hundred KiB gzipped; then a valid sample.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.jsonl.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::fast(),
    );
    writeln!(gz, "{HEADER}\n{}", sample("0")).unwrap();
    gz.write_all(br#"{"kind":"sample","t":1,"pad":""#).unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..128 {
        gz.write_all(&chunk).unwrap();
    }
    writeln!(gz, "\"}}\n{}", sample("2")).unwrap();
    gz.finish().unwrap();
    let (code, err, peak_kib) = replay_bounded(&[&path], std::time::Duration::from_secs(60));
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("long.jsonl.gz:3: the line is longer than 1 MiB"),
        "{err}"
    );
    assert!(peak_kib < 64 * 1024, "peak resident memory {peak_kib} KiB");
}

/// A sample with both parts, as the shared traces hold them.
fn full_sample(t: f64, allocated: u64) -> String {
    format!(
        r#"{{"kind":"sample","t":{t},"nvml":{{"total":80000000000,"free":40000000000,"v2_reserved":500000000,"v2_used":39500000000,"procs":[{{"pid":10,"used":39000000000}}]}},"torch":{{"allocated_bytes.all.current":{allocated},"reserved_bytes.all.current":30000000000}}}}"#
    )
}

/// `replay` of `path` (with `extra` flags): its status and stderr.
fn replay_err(path: &std::path::Path, extra: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .arg("replay")
        .arg(path)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn samples_repeated_or_in_reverse_are_refused_naming_the_line_or_sorted_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(trace("d1-oom.jsonl")).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let body: Vec<&str> = lines.collect();

    // Each sample written 300 times over.
    let repeated = dir.path().join("repeated.jsonl");
    let mut t = vec![header.to_string()];
    for l in body.iter().take(40) {
        t.extend(std::iter::repeat_n(l.to_string(), 300));
    }
    std::fs::write(&repeated, t.join("\n") + "\n").unwrap();
    let (code, err) = replay_err(&repeated, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("repeated.jsonl:3: sample time") && err.contains("repeats line 2's"),
        "{err}"
    );
    assert!(err.contains("--replay.sort"), "the way out is named: {err}");

    // The whole trace backwards.
    let reversed = dir.path().join("reversed.jsonl");
    let mut t = vec![header.to_string()];
    t.extend(body.iter().rev().map(|l| l.to_string()));
    std::fs::write(&reversed, t.join("\n") + "\n").unwrap();
    let (code, err) = replay_err(&reversed, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("reversed.jsonl:") && err.contains("goes back from"),
        "{err}"
    );

    // Sorted and de-duplicated on request: the verdict of the trace as recorded, and a warning
    // that counts what was done.
    let (_, recorded) = verdict_of(&[trace("d1-oom.jsonl")], None);
    for (path, out_of_order, repeats) in [(&reversed, None, 0), (&repeated, Some(0), 40 * 299)] {
        let dir2 = tempfile::tempdir().unwrap();
        let summary = dir2.path().join("s.json");
        let out = Command::new(BIN)
            .arg("replay")
            .arg(path)
            .arg("--replay.sort")
            .arg("--summary")
            .arg(&summary)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let warning = err
            .lines()
            .find(|l| l.contains("sorted by time, repeated lines dropped"))
            .unwrap_or_else(|| panic!("no warning: {err}"));
        assert!(
            warning.contains(&format!("repeated={repeats}")),
            "{warning}"
        );
        if let Some(n) = out_of_order {
            assert!(warning.contains(&format!("out_of_order={n}")), "{warning}");
        } else {
            assert!(!warning.contains("out_of_order=0"), "{warning}");
        }
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        if path == &reversed {
            // Every line back in place: the recording's own verdict.
            assert_eq!(s["oom_t"], recorded["oom_t"]);
            assert_eq!(s["warning_from_t"], recorded["warning_from_t"]);
            assert_eq!(s["critical_from_t"], recorded["critical_from_t"]);
        }
    }
}

#[test]
fn a_truncated_gzip_trace_replays_what_it_held_like_a_truncated_plain_one() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(trace("d1-oom.jsonl")).unwrap();
    let gz_path = dir.path().join("cut.jsonl.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    let whole = gz.finish().unwrap();
    // Cut in the middle of the deflate stream, as a crash mid-write leaves it.
    std::fs::write(&gz_path, &whole[..whole.len() / 2]).unwrap();
    let plain_path = dir.path().join("cut.jsonl");
    std::fs::write(&plain_path, &text[..text.len() / 2]).unwrap();
    let warning = "the trace ends cut short (a recorder killed mid-write?): it replays up to its last whole line";
    for path in [&gz_path, &plain_path] {
        let (_, s) = verdict_of(std::slice::from_ref(path), None);
        let end = s["end_t"].as_f64().unwrap();
        assert!(end > 10.0, "{}: replayed up to {end} s", path.display());
        let (code, err) = replay_err(path, &[]);
        assert_eq!(code, 0, "{}: {err}", path.display());
        assert_eq!(err.matches(warning).count(), 1, "{}: {err}", path.display());
    }
    // Corrupt, not cut: still an error.
    let mut corrupt = whole.clone();
    let mid = corrupt.len() / 2;
    corrupt[mid..mid + 64].fill(0xff);
    std::fs::write(&gz_path, &corrupt).unwrap();
    let (code, err) = replay_err(&gz_path, &[]);
    assert_ne!(code, 0, "{err}");
}

#[test]
fn a_long_trace_replays_in_memory_bounded_by_the_window_not_the_file() {
    use std::io::Write;
    // 360 000 samples, 10 ms apart: an hour of a leak, 150 MB of text.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(
        f,
        r#"{{"kind":"header","pid":10,"gpu":"G","gpu_uuid":"GPU-long"}}"#
    )
    .unwrap();
    for i in 0..360_000u64 {
        writeln!(
            f,
            "{}",
            full_sample(i as f64 * 0.01, 10_000_000_000 + i * 1000)
        )
        .unwrap();
    }
    f.flush().unwrap();
    drop(f);
    let (code, err, peak_kib) = replay_bounded(&[&path], std::time::Duration::from_secs(300));
    assert_eq!(code, 0, "{err}");
    eprintln!("replay of 360 000 lines: peak resident memory {peak_kib} KiB");
    assert!(peak_kib < 48 * 1024, "peak resident memory {peak_kib} KiB");
}
