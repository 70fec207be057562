//! Incidents on real crashes (data/corpus), replayed at the rate users run (NVML every
//! second, one allocator report a second) through the engine:
//!
//! - the forecast's score as the exporter keeps it (`gpumem_forecast_*`, the OOM event's
//!   outcome and lead) is what the replay's own verdict says of each crash: paged where
//!   critical held up to the crash, warned where only high did, missed otherwise, with the same
//!   lead; a critical episode is counted `oom` or `no_oom` by what followed it;
//! - the three GPU 0 jobs of the 2026-11-26 H200 node, replayed together, are three separate
//!   incidents: three OOM events, no critical episode (and no driver) outliving its process.
//!
//! - one failure of one process is one OOM event however many of its requests failed, live
//!   (reports over the socket) and replayed alike.
//!
//! Whether the forecast pages in time is tests/corpus.rs's question, not this file's.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use gpumem_exporter::analysis::incident::{
    EpisodeOutcome, OomKind, Outcome, BURST_WINDOW, OOM_GRACE,
};
use gpumem_exporter::analysis::oom::RiskLevel;
use gpumem_exporter::analysis::verdict::{self, ForecastAt};
use gpumem_exporter::commands::replay::run_timeline;
use gpumem_exporter::config::Config;
use gpumem_exporter::snapshot::Snapshot;
use gpumem_exporter::source::replay::{Failure, ReplaySource};

fn corpus(set: &str) -> Vec<(String, Vec<PathBuf>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/corpus")
        .join(set);
    let mut runs: Vec<(String, Vec<PathBuf>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|d| d.ok().map(|d| d.path()))
        .filter(|p| p.is_dir())
        .map(|p| {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&p)
                .unwrap()
                .filter_map(|f| f.ok().map(|f| f.path()))
                .filter(|f| f.to_string_lossy().contains(".jsonl"))
                .collect();
            files.sort();
            (p.file_name().unwrap().to_string_lossy().into_owned(), files)
        })
        .collect();
    runs.sort();
    assert!(
        runs.len() >= 5,
        "{}: the corpus is part of the repository",
        dir.display()
    );
    runs
}

/// A recording's failed requests as OOM events: those of one process within `BURST_WINDOW` of
/// the first of its burst are one.
fn bursts<'a>(failures: &[&'a Failure]) -> Vec<Vec<&'a Failure>> {
    let mut out: Vec<Vec<&Failure>> = vec![];
    for &f in failures {
        let open = out
            .iter_mut()
            .rev()
            .find(|b| b[0].pid == f.pid && f.t - b[0].t <= BURST_WINDOW);
        match open {
            Some(b) => b.push(f),
            None => out.push(vec![f]),
        }
    }
    out
}

/// One GPU's second: what a replay's verdict reads, and who drove it.
struct Second {
    at: ForecastAt,
    driver: Option<Option<u32>>,
}

struct Replayed {
    failures: Vec<Failure>,
    /// Per GPU uuid, every whole second of the replay.
    seconds: Vec<(String, Vec<Second>)>,
    last: Snapshot,
}

fn replay(files: &[PathBuf]) -> Replayed {
    let cfg = Config::default();
    let mut source = ReplaySource::open(files)
        .unwrap()
        .with_report_interval(cfg.replay.report_interval.as_secs_f64());
    let failures = source.failures();
    let mut seconds: Vec<(String, Vec<Second>)> = source
        .gpu_ids()
        .into_iter()
        .map(|g| (g.uuid, vec![]))
        .collect();
    let mut last = Snapshot::default();
    run_timeline(&cfg, &mut source, |t, snap, _| {
        for (uuid, s) in &mut seconds {
            if let Some(g) = snap.gpus.iter().find(|g| &g.id.uuid == uuid) {
                s.push(Second {
                    at: ForecastAt {
                        t: t as f64,
                        risk: g.risk,
                        ..Default::default()
                    },
                    driver: g.driver.as_ref().map(|d| d.pid),
                });
            }
        }
        last = snap.clone();
        Ok(())
    })
    .unwrap();
    Replayed {
        failures,
        seconds,
        last,
    }
}

/// Critical episodes as the seconds show them: (start, end, driver), `end` the first second
/// no longer in it (`None`: open at the end).
fn episodes(seconds: &[Second]) -> Vec<(f64, Option<f64>, Option<Option<u32>>)> {
    let mut out: Vec<(f64, Option<f64>, Option<Option<u32>>)> = vec![];
    for s in seconds {
        let critical = s.at.risk == RiskLevel::Critical;
        let open = out.last().is_some_and(|e| e.1.is_none());
        match out.last_mut() {
            Some(e) if open && critical && e.2 == s.driver => {}
            Some(e) if open => {
                e.1 = Some(s.at.t);
                if critical {
                    out.push((s.at.t, None, s.driver));
                }
            }
            _ if critical => out.push((s.at.t, None, s.driver)),
            _ => {}
        }
    }
    out
}

fn check(set: &str) {
    let mut failures = vec![];
    let mut table = vec![];
    for (name, files) in corpus(set) {
        let r = replay(&files);
        for (uuid, seconds) in &r.seconds {
            let g = r.last.gpus.iter().find(|g| &g.id.uuid == uuid).unwrap();
            let ooms: Vec<&Failure> = r.failures.iter().filter(|f| &f.gpu.uuid == uuid).collect();
            let score = g.score;
            let reported: u64 = Outcome::ALL
                .iter()
                .map(|&o| score.ooms(OomKind::Reported, o))
                .sum();
            let inferred: u64 = Outcome::ALL
                .iter()
                .map(|&o| score.ooms(OomKind::Inferred, o))
                .sum();
            let mut fail = |m: String| failures.push(format!("{name} ({uuid}): {m}"));
            let events = bursts(&ooms);
            if reported != events.len() as u64 {
                fail(format!(
                    "{reported} reported OOM events counted, the recording has {} ({} failed requests)",
                    events.len(),
                    ooms.len()
                ));
            }
            // What the replay's verdict says of the first failure, and what the exporter
            // recorded when it came.
            let v = verdict::verdict(
                &seconds.iter().map(|s| s.at).collect::<Vec<_>>(),
                ooms.first().map(|f| f.t),
            );
            let (expected, lead) = match (v.critical_lead_s, v.warning_lead_s) {
                (Some(l), _) => (Outcome::Paged, Some(l)),
                (None, Some(l)) => (Outcome::Warned, Some(l)),
                (None, None) => (Outcome::Missed, None),
            };
            let mut row = format!("{name}: inferred {inferred}");
            if let Some(first) = ooms.first() {
                let event = g
                    .oom_events
                    .iter()
                    .find(|e| e.kind == OomKind::Reported && e.pid == first.pid);
                match event {
                    None => fail(format!("no OOM event of pid {} kept", first.pid)),
                    Some(e) => {
                        row = format!(
                            "{name}: {} lead {:?} s (verdict: {} {:?} s), request {:?}, free {:?}",
                            e.outcome.as_str(),
                            e.lead.map(|l| l.round()),
                            expected.as_str(),
                            lead,
                            e.request_bytes,
                            e.free_bytes
                        );
                        if e.outcome != expected {
                            fail(format!(
                                "recorded {:?}, the verdict says {expected:?} ({v:?})",
                                e.outcome
                            ));
                        }
                        if let (Some(a), Some(b)) = (e.lead, lead) {
                            // The verdict reads whole seconds, the exporter its own samples.
                            if (a - b).abs() > 1.5 {
                                fail(format!("lead {a:.1} s, the verdict's {b:.1} s"));
                            }
                        }
                        // The event's request is the largest of its burst.
                        let largest = events[0]
                            .iter()
                            .max_by_key(|f| f.request_bytes)
                            .expect("a burst has a failure");
                        if (e.request_bytes, e.free_bytes)
                            != (largest.request_bytes, largest.device_free)
                        {
                            fail(format!(
                                "request and free bytes {:?} {:?}, recorded {:?} {:?}",
                                e.request_bytes,
                                e.free_bytes,
                                largest.request_bytes,
                                largest.device_free
                            ));
                        }
                    }
                }
                if score.ooms(OomKind::Reported, expected) < 1 {
                    fail(format!(
                        "gpumem_forecast_ooms_total{{outcome=\"{}\"}} is 0",
                        expected.as_str()
                    ));
                }
            }
            // Each critical episode is scored once its grace is over: `oom` where an OOM came
            // while it was open or within the grace after, `no_oom` otherwise.
            let end = seconds.last().map_or(0.0, |s| s.at.t);
            let crashes: Vec<f64> = ooms.iter().map(|f| f.t).collect();
            let (mut with_oom, mut without) = (0, 0);
            for (from, to, _) in episodes(seconds) {
                let followed = crashes
                    .iter()
                    .any(|&c| c >= from - 1.0 && to.is_none_or(|t| c <= t + OOM_GRACE));
                match to {
                    _ if followed => with_oom += 1,
                    Some(t) if end - t > OOM_GRACE + 1.0 => without += 1,
                    _ => {}
                }
            }
            let counted = (
                score.episodes(EpisodeOutcome::Oom),
                score.episodes(EpisodeOutcome::NoOom),
            );
            row += &format!(", critical episodes oom {} no_oom {}", counted.0, counted.1);
            if counted != (with_oom, without) {
                fail(format!(
                    "critical episodes counted (oom, no_oom) {counted:?}, the seconds show {:?}",
                    (with_oom, without)
                ));
            }
            table.push(row);
        }
    }
    println!("{}", table.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_score_matches_the_verdict_on_the_development_runs() {
    check("dev");
}

#[test]
fn the_score_matches_the_verdict_on_the_held_out_runs() {
    check("holdout");
}

#[test]
fn three_crashes_in_a_row_on_one_gpu_are_three_incidents() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/corpus/holdout");
    let files: Vec<PathBuf> = ["c-batch-warmup-3", "c-kv-cache-2", "c-expandable-2"]
        .iter()
        .map(|r| dir.join(r).join(format!("{r}.jsonl.gz")))
        .collect();
    let r = replay(&files);
    assert_eq!(r.seconds.len(), 1, "one GPU");
    let (uuid, seconds) = &r.seconds[0];
    let crashes: Vec<(f64, u32)> = r.failures.iter().map(|f| (f.t, f.pid)).collect();
    assert_eq!(crashes.len(), 3);
    let g = r.last.gpus.iter().find(|g| &g.id.uuid == uuid).unwrap();
    let counted: u64 = g.oom_counts.iter().map(|c| c.count).sum();
    assert_eq!(counted, 3, "{:?}", g.oom_counts);
    // No driver outlives its process: from the first second after each crash, the process is
    // gone from the GPU's level and driver (NVML lists it a second or two after its OOM).
    for (i, &(t, pid)) in crashes.iter().enumerate() {
        let next = crashes.get(i + 1).map_or(f64::INFINITY, |c| c.0);
        for s in seconds
            .iter()
            .filter(|s| s.at.t >= t + 3.0 && s.at.t < next)
        {
            assert_ne!(
                s.driver,
                Some(Some(pid)),
                "pid {pid} still drives at {}",
                s.at.t
            );
            let growth = seconds
                .iter()
                .filter(|x| x.at.t > t && x.at.t <= s.at.t)
                .any(|x| x.driver.is_some_and(|d| d != Some(pid)));
            if !growth {
                assert!(
                    s.at.risk < RiskLevel::High,
                    "{:?} at {} after pid {pid}'s crash at {t}, with no new driver",
                    s.at.risk,
                    s.at.t
                );
            }
        }
    }
    // Each critical episode belongs to one job: it starts after the previous crash and ends as
    // its process is gone (NVML lists it a second or two after its OOM).
    for (from, to, driver) in episodes(seconds) {
        let job = crashes
            .iter()
            .position(|&(_, pid)| driver == Some(Some(pid)))
            .unwrap_or_else(|| panic!("a critical episode from {from} driven by {driver:?}"));
        let crash = crashes[job].0;
        let previous = job
            .checked_sub(1)
            .map_or(f64::NEG_INFINITY, |j| crashes[j].0);
        assert!(
            from > previous && from < crash,
            "episode {from}..{to:?} of job {job}"
        );
        assert!(
            to.is_some_and(|t| t <= crash + 3.0),
            "episode {from}..{to:?} outlives {crash}"
        );
        println!(
            "job {job}: critical from {:.0} s before its crash",
            crash - from
        );
    }
}

const BURST_GPU: &str = "GPU-burst-0";
const MIB: u64 = 1 << 20;

/// One process on one 80 GiB GPU holding 10 GiB, recorded for `seconds`: NVML every second,
/// and with `failures` ((t, request bytes) of each failed request) its allocator's statistics
/// every second with their OOM counter, and its OOM events.
fn recording(path: &Path, pid: u32, seconds: u32, failures: Option<&[(f64, u64)]>) {
    use serde_json::json;
    let (total, held) = (80u64 << 30, 10u64 << 30);
    let mut lines = vec![
        json!({"kind": "header", "scenario": "burst", "gpu_uuid": BURST_GPU,
        "gpu_index": 0, "total_memory": total, "pid": pid}),
    ];
    let mut items: Vec<(f64, serde_json::Value)> = vec![];
    for i in 0..=seconds {
        let t = f64::from(i);
        let mut sample = json!({"kind": "sample", "t": t, "nvml": {"total": total,
            "used": held, "free": total - held, "procs": [{"pid": pid, "used": held}]}});
        if let Some(f) = failures {
            let ooms = f.iter().filter(|x| x.0 <= t).count();
            sample["torch"] = json!({"allocated_bytes.all.current": held / 2,
                "reserved_bytes.all.current": held - (512 * MIB), "num_ooms": ooms});
        }
        items.push((t, sample));
    }
    for &(t, request) in failures.unwrap_or(&[]) {
        items.push((
            t,
            json!({"kind": "event", "t": t, "name": "oom", "request_bytes": request,
                "device_free": 4 * MIB, "error": "CUDA out of memory"}),
        ));
    }
    items.sort_by(|a, b| a.0.total_cmp(&b.0));
    lines.extend(items.into_iter().map(|(_, v)| v));
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(path, text.join("\n") + "\n").unwrap();
}

/// A backward pass that fails 25 requests of 38-126 MiB within 30 ms at 20 s; the process
/// catches it, carries on, and fails one request at 80 s.
fn crash_and_crash_again() -> Vec<(f64, u64)> {
    let mut f: Vec<(f64, u64)> = (0..25u64)
        .map(|k| (20.1 + k as f64 * 0.00125, (38 + (k * 37) % 89) * MIB))
        .collect();
    f.push((80.1, 64 * MIB));
    f
}

/// What the tests compare of a GPU's OOM events: (OOM events by kind, failed requests, outcomes
/// scored, and each event's (pid, requests, largest request, free bytes, outcome)).
type Events = (
    u64,
    u64,
    u64,
    Vec<(u64, Option<u64>, Option<u64>, Option<u64>, String)>,
);

fn events_of(gpu: &serde_json::Value) -> Events {
    let n = |v: &serde_json::Value| v.as_u64();
    let counted = gpu["oom_counts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "reported")
        .filter_map(|c| n(&c["count"]))
        .sum();
    let scored = gpu["score"]["ooms"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|k| k.as_array().unwrap().iter().filter_map(n))
        .sum();
    let each = gpu["oom_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                n(&e["pid"]).unwrap(),
                n(&e["requests"]),
                n(&e["request_bytes"]),
                n(&e["free_bytes"]),
                e["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (
        counted,
        n(&gpu["oom_failed_requests"]).unwrap(),
        scored,
        each,
    )
}

#[test]
fn one_failure_is_one_oom_event_live_and_replayed_alike() {
    use common::{post_unix, Exporter, Launch};
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    // This process is the one the recording lists on the GPU: its reports are trusted.
    let pid = std::process::id();
    let failures = crash_and_crash_again();

    // Replayed: the recording with its allocator's statistics and OOM events.
    let replayed = dir.path().join("replayed.jsonl");
    recording(&replayed, pid, 100, Some(&failures));
    let cfg = Config::default();
    let mut source = ReplaySource::open(&[replayed])
        .unwrap()
        .with_report_interval(cfg.replay.report_interval.as_secs_f64());
    assert_eq!(source.failures().len(), 26);
    let mut at_90 = None;
    run_timeline(&cfg, &mut source, |t, snap, _| {
        if t == 90 {
            at_90 = Some(serde_json::to_value(&snap.gpus[0]).unwrap());
        }
        Ok(())
    })
    .unwrap();
    let replay = events_of(&at_90.expect("the replay reached 90 s"));

    // Live: NVML from the recording, on its clock at 5x, and the same failures reported over
    // the socket as they happen, each failed request the observer's own report.
    let nvml_only = dir.path().join("nvml.jsonl");
    recording(&nvml_only, pid, 200, None);
    let source = format!("replay:{}", nvml_only.display());
    let e = Exporter::launch_on(
        &source,
        &[],
        Launch {
            config_yaml: "replay:\n  speed: 5\n",
            ..Launch::default()
        },
    );
    let snapshot =
        || -> serde_json::Value { serde_json::from_str(&e.get("/api/v1/snapshot")).unwrap() };
    let wait_until = |t: f64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while snapshot()["t"].as_f64().unwrap_or(0.0) < t {
            assert!(
                std::time::Instant::now() < deadline,
                "the replay clock never reached {t}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let post = |body: serde_json::Value| {
        let (status, answer) = post_unix(
            &e.socket,
            "/api/v1/report",
            "application/json",
            &serde_json::to_vec(&body).unwrap(),
        );
        assert_eq!(status, 202, "{answer}");
    };
    let stats = |ooms: usize| {
        json!({"version": 1, "devices": [{"uuid": BURST_GPU, "allocator": "pytorch",
            "allocated_bytes": 5u64 << 30, "reserved_bytes": (10u64 << 30) - 512 * MIB,
            "ooms": ooms}]})
    };
    let failed = |request: u64| {
        json!({"version": 1, "devices": [], "events": [{"kind": "oom", "name": BURST_GPU,
            "request_bytes": request, "free_bytes": 4 * MIB, "message": "CUDA out of memory"}]})
    };
    wait_until(10.0);
    post(stats(0));
    wait_until(20.0);
    for &(_, request) in &failures[..25] {
        post(failed(request));
    }
    post(stats(25));
    wait_until(80.0);
    post(failed(failures[25].1));
    post(stats(26));
    wait_until(85.0);
    let live = events_of(&snapshot()["gpus"][0]);

    let expected_each = vec![
        (
            u64::from(pid),
            Some(25),
            Some(126 * MIB),
            Some(4 * MIB),
            "missed".to_string(),
        ),
        (
            u64::from(pid),
            Some(1),
            Some(64 * MIB),
            Some(4 * MIB),
            "missed".to_string(),
        ),
    ];
    assert_eq!(replay, (2, 26, 2, expected_each), "replayed");
    assert_eq!(live, replay, "live and replayed agree");
}
