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
//! Whether the forecast pages in time is tests/corpus.rs's question, not this file's.

use std::path::{Path, PathBuf};

use gpumem_exporter::analysis::incident::{EpisodeOutcome, OomKind, Outcome, OOM_GRACE};
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
            if reported != ooms.len() as u64 {
                fail(format!(
                    "{reported} reported OOMs counted, the recording has {}",
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
                        if (e.request_bytes, e.free_bytes)
                            != (first.request_bytes, first.device_free)
                        {
                            fail(format!(
                                "request and free bytes {:?} {:?}, recorded {:?} {:?}",
                                e.request_bytes,
                                e.free_bytes,
                                first.request_bytes,
                                first.device_free
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
