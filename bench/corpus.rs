//! Scoring the OOM forecast on recorded runs that ended in a real `torch.OutOfMemoryError`
//! (and on healthy runs), replayed at the rate users run: NVML every second, one allocator
//! report a second, at several phases of the sampling clock against the recording.
//!
//! A run is a folder of traces recorded together on one GPU (the recorder writes one file per
//! process). Its header says `"truth": "oom"` or `"healthy"`; the crash is the first `oom`
//! event. Used by `tests/corpus.rs` (asserts the targets) and `examples/corpus.rs` (prints the
//! table for bench/RESULTS.md). The anchor is what a PromQL rule on NVML alone can do:
//! `free / -deriv(gpumem_free_bytes[60s])`, i.e. `predict_linear` on NVML free.

#![allow(dead_code)]

#[path = "detection.rs"]
pub mod detection;

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use gpumem_exporter::analysis::verdict::held_from;
use serde_json::Value;

/// One recorded run: its traces and what really happened.
#[derive(Debug, Clone)]
pub struct Run {
    pub name: String,
    pub files: Vec<PathBuf>,
    /// Replay time (seconds from the earliest trace's start) of the first OOM, if any.
    pub crash: Option<f64>,
    /// Replay time when the first process was ready (warm-up done), if recorded.
    pub ready: Option<f64>,
    pub healthy: bool,
    /// Replay time of the last sample.
    pub end: f64,
}

fn lines(path: &Path) -> Vec<Value> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let r: Box<dyn BufRead> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(std::io::BufReader::new(flate2::read::GzDecoder::new(f)))
    } else {
        Box::new(std::io::BufReader::new(f))
    };
    r.lines()
        .map(|l| l.unwrap())
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(&l).unwrap())
        .collect()
}

fn is_trace(p: &Path) -> bool {
    let n = p.to_string_lossy();
    n.ends_with(".jsonl") || n.ends_with(".jsonl.gz")
}

/// Every run under `dir`: one sub-folder each.
pub fn runs(dir: &Path) -> Vec<Run> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.iter().map(|d| run(d)).collect()
}

pub fn run(dir: &Path) -> Run {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| is_trace(p))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: no traces", dir.display());
    let traces: Vec<Vec<Value>> = files.iter().map(|f| lines(f)).collect();
    let base = traces
        .iter()
        .filter_map(|t| t[0]["t0_unix"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let mut crash: Option<f64> = None;
    let mut ready: Option<f64> = None;
    let mut healthy = true;
    let mut end = 0.0f64;
    for t in &traces {
        let h = &t[0];
        let offset = h["t0_unix"].as_f64().map_or(0.0, |t0| t0 - base);
        if h["truth"].as_str() == Some("oom") {
            healthy = false;
        }
        for o in &t[1..] {
            let ts = o["t"].as_f64().unwrap_or(0.0) + offset;
            match (o["kind"].as_str(), o["name"].as_str()) {
                (Some("event"), Some("oom")) => {
                    crash = Some(crash.map_or(ts, |c: f64| c.min(ts)));
                }
                (Some("event"), Some("model_ready")) => {
                    ready = Some(ready.map_or(ts, |r: f64| r.min(ts)));
                }
                (Some("sample"), _) => end = end.max(ts),
                _ => {}
            }
        }
    }
    assert!(
        healthy == crash.is_none(),
        "{}: truth and oom events disagree",
        dir.display()
    );
    Run {
        name: dir.file_name().unwrap().to_string_lossy().into(),
        files,
        crash,
        ready,
        healthy,
        end,
    }
}

/// The run's traces with every time moved by `shift` seconds, so that the replay's 1 s clock
/// meets the recording at another phase.
fn shifted(run: &Run, shift: f64, dir: &Path) -> Vec<PathBuf> {
    run.files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let out = dir.join(format!("{i}.jsonl"));
            let mut w = std::io::BufWriter::new(std::fs::File::create(&out).unwrap());
            for mut o in lines(f) {
                if let Some(t) = o["t"].as_f64() {
                    o["t"] = Value::from(t + shift);
                }
                serde_json::to_writer(&mut w, &o).unwrap();
                w.write_all(b"\n").unwrap();
            }
            out
        })
        .collect()
}

/// Per second of replay: the GPU's risk, ETA and free bytes, and whether any process is
/// flagged as leaking.
#[derive(Debug, Clone, Default)]
pub struct Second {
    pub t: f64,
    pub risk: u8,
    pub eta: Option<f64>,
    /// The ETA's bounds; an absent upper bound is open (the growth may stop).
    pub eta_lower: Option<f64>,
    pub eta_upper: Option<f64>,
    pub free: Option<f64>,
    pub leak_flag: bool,
}

pub fn replay(bin: &Path, files: &[PathBuf]) -> Vec<Second> {
    let mut v = vec![];
    for o in detection::timeline(bin, files, detection::PRODUCTION) {
        let mut s = Second {
            t: o["t"].as_f64().unwrap(),
            ..Default::default()
        };
        for m in o["metrics"].as_array().unwrap() {
            let gpu_level = m["labels"]["pid"].is_null();
            let val = m["value"].as_f64().unwrap_or(0.0);
            match m["name"].as_str().unwrap() {
                "gpumem_oom_risk_level" if gpu_level => s.risk = s.risk.max(val as u8),
                "gpumem_oom_eta_seconds" if gpu_level => {
                    s.eta = Some(s.eta.map_or(val, |e: f64| e.min(val)))
                }
                "gpumem_oom_eta_lower_seconds" if gpu_level => {
                    s.eta_lower = Some(s.eta_lower.map_or(val, |e: f64| e.min(val)))
                }
                "gpumem_oom_eta_upper_seconds" if gpu_level => {
                    s.eta_upper = Some(s.eta_upper.map_or(val, |e: f64| e.min(val)))
                }
                "gpumem_free_bytes" => s.free = Some(s.free.unwrap_or(0.0) + val),
                "gpumem_leak_suspected" if !gpu_level && val > 0.5 => s.leak_flag = true,
                _ => {}
            }
        }
        v.push(s);
    }
    v
}

/// The anchor: least squares over the last 60 s of NVML free, extrapolated to zero (what
/// `predict_linear(gpumem_free_bytes[60s], …)` and `deriv` rules do); critical under 60 s,
/// high under 300 s, as the seeds' thresholds.
pub fn anchor(seconds: &[Second]) -> Vec<Second> {
    (0..seconds.len())
        .map(|i| {
            let pts: Vec<(f64, f64)> = seconds[..=i]
                .iter()
                .rev()
                .take_while(|s| s.t > seconds[i].t - 60.0)
                .filter_map(|s| s.free.map(|f| (s.t, f)))
                .collect();
            let eta = lsq_slope(&pts).and_then(|b| {
                let free = seconds[i].free?;
                (b < 0.0).then(|| free / -b)
            });
            let risk = match eta {
                Some(e) if e < 60.0 => 3,
                Some(e) if e < 300.0 => 2,
                _ => 0,
            };
            Second {
                t: seconds[i].t,
                risk,
                eta,
                free: seconds[i].free,
                ..Default::default()
            }
        })
        .collect()
}

fn lsq_slope(p: &[(f64, f64)]) -> Option<f64> {
    if p.len() < 10 {
        return None;
    }
    let n = p.len() as f64;
    let mx = p.iter().map(|q| q.0).sum::<f64>() / n;
    let my = p.iter().map(|q| q.1).sum::<f64>() / n;
    let sxx: f64 = p.iter().map(|q| (q.0 - mx).powi(2)).sum();
    let sxy: f64 = p.iter().map(|q| (q.0 - mx) * (q.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// The figures of one detector on one run at one phase.
#[derive(Debug, Clone, Default)]
pub struct Score {
    pub run: String,
    pub detector: &'static str,
    pub phase: f64,
    pub crash: Option<f64>,
    /// Seconds before the crash from which critical held without a break to the crash.
    pub critical_lead: Option<f64>,
    /// Seconds left when critical first showed at all.
    pub first_critical_left: Option<f64>,
    /// Seconds before the crash from which risk ≥ high held without a break.
    pub high_lead: Option<f64>,
    /// (seconds with 20–120 s left, of them with an ETA within 35 % of the truth)
    pub eta_seconds: (usize, usize),
    /// Of the seconds with 20–120 s left, those whose bounds hold the truth (lower ≤ truth,
    /// and truth ≤ upper where there is one); seconds without an ETA count as misses.
    pub bounds_hold: usize,
    /// Healthy runs: seconds at risk ≥ high, the shortest ETA, seconds with a leak flag.
    pub high_seconds: usize,
    pub min_eta: Option<f64>,
    pub leak_seconds: usize,
}

impl Score {
    pub fn eta_share(&self) -> Option<f64> {
        (self.eta_seconds.0 > 0).then(|| self.eta_seconds.1 as f64 / self.eta_seconds.0 as f64)
    }

    pub fn bounds_share(&self) -> Option<f64> {
        (self.eta_seconds.0 > 0).then(|| self.bounds_hold as f64 / self.eta_seconds.0 as f64)
    }
}

pub fn score(run: &Run, detector: &'static str, phase: f64, seconds: &[Second]) -> Score {
    let mut s = Score {
        run: run.name.clone(),
        detector,
        phase,
        crash: run.crash,
        ..Default::default()
    };
    for x in seconds {
        if let Some(c) = run.crash {
            if x.t >= c {
                break;
            }
            let left = c - x.t;
            if x.risk >= 3 {
                s.first_critical_left.get_or_insert(left);
            }
            if (20.0..=120.0).contains(&left) {
                s.eta_seconds.0 += 1;
                if x.eta.is_some_and(|e| (e - left).abs() <= 0.35 * left) {
                    s.eta_seconds.1 += 1;
                }
                let below = x.eta_lower.or(x.eta).is_some_and(|l| l <= left);
                if x.eta.is_some() && below && x.eta_upper.is_none_or(|u| left <= u) {
                    s.bounds_hold += 1;
                }
            }
        } else {
            s.high_seconds += (x.risk >= 2) as usize;
            if let Some(e) = x.eta {
                s.min_eta = Some(s.min_eta.map_or(e, |m: f64| m.min(e)));
            }
            s.leak_seconds += x.leak_flag as usize;
        }
    }
    if let Some(c) = run.crash {
        let held = |level: u8| held_from(seconds.iter().map(|x| (x.t, x.risk >= level)), Some(c));
        s.critical_lead = held(3).map(|t| c - t);
        s.high_lead = held(2).map(|t| c - t);
    }
    s
}

/// Our forecast and the anchor on `run`, replayed at 1 s at each phase in `phases`.
pub fn evaluate(bin: &Path, run: &Run, phases: &[f64]) -> Vec<Score> {
    let mut out = vec![];
    for &phase in phases {
        let dir = tempfile::tempdir().unwrap();
        let files = shifted(run, phase, dir.path());
        let seconds = replay(bin, &files);
        // The shift moved the replay's clock: put the crash back on it.
        let moved = Run {
            crash: run.crash.map(|c| c + phase),
            ..run.clone()
        };
        out.push(score(&moved, "gpumem-exporter", phase, &seconds));
        out.push(score(
            &moved,
            "predict_linear on NVML free",
            phase,
            &anchor(&seconds),
        ));
    }
    out
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |x| format!("{x:.0}"))
}

/// One row per run and detector: the worst phase for leads, the mean ETA share.
pub fn table(scores: &[Score]) -> String {
    let mut s = String::from(
        "| run | detector | crash at s | critical held from s before (worst phase) | first critical, s left (earliest) | high held from s before (worst) | ETA within 35 % (20–120 s left) | bounds hold the truth | healthy: s at ≥ high / min ETA s / leak-flag s |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    let mut keys: Vec<(String, &str)> =
        scores.iter().map(|x| (x.run.clone(), x.detector)).collect();
    keys.sort();
    keys.dedup();
    for (run, det) in keys {
        let rows: Vec<&Score> = scores
            .iter()
            .filter(|x| x.run == run && x.detector == det)
            .collect();
        let worst = |f: fn(&Score) -> Option<f64>| {
            rows.iter()
                .map(|r| f(r).unwrap_or(0.0))
                .fold(f64::INFINITY, f64::min)
        };
        let first = rows
            .iter()
            .filter_map(|r| r.first_critical_left)
            .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
        let (n, k, b) = rows.iter().fold((0, 0, 0), |a, r| {
            (
                a.0 + r.eta_seconds.0,
                a.1 + r.eta_seconds.1,
                a.2 + r.bounds_hold,
            )
        });
        let crash = rows[0].crash;
        let healthy = if crash.is_none() {
            format!(
                "{} / {} / {}",
                rows.iter().map(|r| r.high_seconds).max().unwrap_or(0),
                opt(rows
                    .iter()
                    .filter_map(|r| r.min_eta)
                    .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.min(b))))),
                rows.iter().map(|r| r.leak_seconds).max().unwrap_or(0)
            )
        } else {
            "".into()
        };
        s.push_str(&format!(
            "| {run} | {det} | {} | {} | {} | {} | {} | {} | {healthy} |\n",
            opt(crash),
            if crash.is_some() {
                opt(Some(worst(|r| r.critical_lead)))
            } else {
                "".into()
            },
            opt(first),
            if crash.is_some() {
                opt(Some(worst(|r| r.high_lead)))
            } else {
                "".into()
            },
            if n > 0 {
                format!("{:.0} % of {n}", 100.0 * k as f64 / n as f64)
            } else {
                "–".into()
            },
            if n > 0 && det == "gpumem-exporter" {
                format!("{:.0} %", 100.0 * b as f64 / n as f64)
            } else {
                "–".into()
            },
        ));
    }
    s
}
