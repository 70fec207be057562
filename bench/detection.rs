//! The detection benchmark: replays traces through `gpumem-exporter replay`, scores the
//! timeline against each trace's ground truth, and scores two baselines on the same traces:
//! least squares on raw NVML used (what `deriv`/`predict_linear` rules do) and the seeds' raw
//! growth threshold. Used by `examples/detection.rs` (prints the table) and
//! `tests/detection.rs` (asserts the targets). Formulas and reasons: docs/analysis.md.

#![allow(dead_code)]

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

const MIB: f64 = 1048576.0;
/// The seeds' leak threshold, 10 MB/min, in bytes per second.
const LEAK_THRESHOLD: f64 = 10.0 * MIB / 60.0;

/// What a trace file says about itself and what really happened in it.
#[derive(Debug, Clone)]
pub struct Truth {
    pub file: String,
    pub pid: u32,
    pub gpu_uuid: Option<String>,
    pub offset: f64,
    pub t0_unix: Option<f64>,
    pub leak_mib_per_min: f64,
    pub oom_rate: f64,
    /// Training start (model_ready), trace time, after alignment.
    pub start: f64,
    pub end: f64,
    pub oom_event: Option<f64>,
    /// (t, allocated, reserved, nvml used of this pid, nvml used of others, capacity,
    /// allocated peak)
    pub samples: Vec<(f64, f64, f64, f64, f64, f64, f64)>,
    /// (t, device used incl. reserved as nvidia-smi shows it, total)
    pub device: Vec<(f64, f64, f64)>,
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

pub fn read_truth(path: &Path) -> Truth {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let h = lines.next().unwrap();
    let pid = h["pid"].as_u64().unwrap() as u32;
    let mut t = Truth {
        file: path.file_name().unwrap().to_string_lossy().into(),
        pid,
        gpu_uuid: h["gpu_uuid"].as_str().map(String::from),
        offset: h["start_offset_s"].as_f64().unwrap_or(0.0),
        t0_unix: h["t0_unix"].as_f64(),
        leak_mib_per_min: h["leak_mb_per_min"].as_f64().unwrap_or(0.0),
        oom_rate: h["oom_gb_per_s"].as_f64().unwrap_or(0.0),
        start: 0.0,
        end: 0.0,
        oom_event: None,
        samples: vec![],
        device: vec![],
    };
    let mut model_ready = None;
    for o in lines {
        let ts = f(&o["t"]);
        match o["kind"].as_str() {
            Some("event") => match o["name"].as_str() {
                Some("model_ready") => model_ready = Some(ts),
                Some("oom") => t.oom_event = Some(ts),
                _ => {}
            },
            Some("sample") => {
                let n = &o["nvml"];
                let procs = n["procs"].as_array().cloned().unwrap_or_default();
                let mine = procs
                    .iter()
                    .filter(|p| p["pid"].as_u64() == Some(pid as u64))
                    .map(|p| f(&p["used"]))
                    .sum::<f64>();
                let others = procs
                    .iter()
                    .filter(|p| p["pid"].as_u64() != Some(pid as u64))
                    .map(|p| f(&p["used"]))
                    .sum::<f64>();
                let cap = f(&n["total"]) - f(&n["v2_reserved"]);
                let tr = &o["torch"];
                t.samples.push((
                    ts,
                    f(&tr["allocated_bytes.all.current"]),
                    f(&tr["reserved_bytes.all.current"]),
                    mine,
                    others,
                    cap,
                    f(&tr["allocated_bytes.all.peak"]),
                ));
                t.device
                    .push((ts, f(&n["total"]) - f(&n["free"]), f(&n["total"])));
                t.end = ts;
            }
            _ => {}
        }
    }
    t.start = model_ready.unwrap_or(0.0);
    t
}

/// Traces of one GPU go together (same `gpu_uuid`); the others stand alone.
pub fn groups(dir: &Path) -> Vec<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    let mut by_uuid: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let mut out = vec![];
    for p in files {
        match read_truth(&p).gpu_uuid {
            Some(u) => by_uuid.entry(u).or_default().push(p),
            None => out.push(vec![p]),
        }
    }
    out.extend(by_uuid.into_values());
    out
}

fn lsq(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if n < 2.0 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| {
        let b = sxy / sxx;
        (b, my - b * mx)
    })
}

/// Hindsight floor slope: least squares over 10-second minima of allocated bytes, from 20 s
/// after training starts to the end. It sees the whole trace, which no live detector can.
pub fn true_floor_slope(t: &Truth) -> Option<f64> {
    let mut mins: BTreeMap<i64, f64> = BTreeMap::new();
    for s in t
        .samples
        .iter()
        .filter(|s| s.0 >= t.start + 20.0 && s.2 > 0.0)
    {
        let w = (s.0 / 10.0).floor() as i64;
        let e = mins.entry(w).or_insert(f64::MAX);
        *e = e.min(s.1);
    }
    let pts: Vec<(f64, f64)> = mins
        .iter()
        .map(|(w, v)| (*w as f64 * 10.0 + 5.0, *v))
        .collect();
    lsq(&pts).map(|(b, _)| b)
}

/// When the traced process's allocation fails: the trace's `oom` event, or, for a trace that
/// ends before, a hindsight extrapolation: its peak demand at the end (the allocator's peak of
/// allocated bytes over the last 10 s, plus its non-allocator overhead) grows at the
/// whole-trace floor slope until it no longer fits beside what the other processes held over
/// those seconds.
pub fn failure_time(t: &Truth) -> Option<(f64, bool)> {
    if let Some(e) = t.oom_event {
        return Some((e + t.offset, false));
    }
    if t.oom_rate <= 0.0 && t.leak_mib_per_min <= 0.0 {
        return None;
    }
    let slope = true_floor_slope(t)?;
    if slope <= 0.0 {
        return None;
    }
    let last = t.samples.iter().rev().find(|s| s.2 > 0.0)?;
    let recent = t
        .samples
        .iter()
        .filter(|s| s.0 >= last.0 - 10.0 && s.2 > 0.0);
    let (mut need, mut others) = (0.0f64, 0.0f64);
    for s in recent {
        need = need.max(s.1.max(s.6) + (s.3 - s.2).max(0.0));
        others = others.max(s.4);
    }
    Some((last.0 + (last.5 - others - need) / slope + t.offset, true))
}

/// The timeline of a replay: per second, the numbers we score.
#[derive(Debug, Default, Clone)]
pub struct Second {
    pub t: f64,
    /// pid → (suspected, slope)
    pub leak: BTreeMap<u32, (bool, Option<f64>)>,
    /// gpu label → eta
    pub eta: BTreeMap<String, f64>,
    /// gpu label → risk level
    pub risk: BTreeMap<String, u8>,
    /// pid → gpu label
    pub gpu_of: BTreeMap<u32, String>,
}

/// The binary the examples replay with: `GPUMEM_BIN`, else this checkout's release build.
pub fn release_bin() -> PathBuf {
    std::env::var_os("GPUMEM_BIN").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/gpumem-exporter"),
        PathBuf::from,
    )
}

/// The rate users run: NVML every second, one allocator report a second.
pub const PRODUCTION: &[&str] = &["--sample-interval", "1s", "--replay.report-interval", "1s"];
/// The rate the shared traces were recorded at: every sample, every 0.1 s.
pub const RECORDED: &[&str] = &[
    "--sample-interval",
    "100ms",
    "--replay.report-interval",
    "0s",
];

/// One second of a replay's timeline, as `replay --output` writes it: read in place, without
/// building a JSON tree (the corpus test reads thousands of them).
#[derive(serde::Deserialize)]
pub struct TimelineSecond<'a> {
    pub t: f64,
    #[serde(borrow)]
    pub metrics: Vec<TimelineSample<'a>>,
}

#[derive(serde::Deserialize)]
pub struct TimelineSample<'a> {
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(borrow)]
    pub labels: BTreeMap<Cow<'a, str>, Cow<'a, str>>,
    pub value: Option<f64>,
}

impl TimelineSample<'_> {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(|v| v.as_ref())
    }

    pub fn value(&self) -> f64 {
        self.value.unwrap_or(0.0)
    }
}

/// The replay's timeline of `files` at `rate`: the text `replay --output` wrote, one line a
/// second of trace time (`seconds` reads it), with the families `metrics` names only (the
/// timeline of every family is ten times longer).
pub fn timeline(bin: &Path, files: &[PathBuf], rate: &[&str], metrics: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("timeline.jsonl");
    let mut cmd = std::process::Command::new(bin);
    // A configuration to try against the traces (`analysis.*` settings), for experiments.
    if let Some(cfg) = std::env::var_os("GPUMEM_BENCH_CONFIG") {
        cmd.arg("--config").arg(cfg);
    }
    let done = cmd
        .arg("replay")
        .args(files)
        .args(rate)
        .arg("--metrics")
        .arg(metrics.join(","))
        .arg("--output")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    // The replay logs every sample's warnings: only its last lines say why it stopped.
    let err = String::from_utf8_lossy(&done.stderr);
    let tail: Vec<&str> = err.lines().rev().take(5).collect();
    assert!(
        done.status.success(),
        "gpumem-exporter replay of {files:?} failed: {}",
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    std::fs::read_to_string(&out).unwrap()
}

/// The seconds of a `timeline`.
pub fn seconds(text: &str) -> impl Iterator<Item = TimelineSecond<'_>> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a timeline line: {e}: {l}")))
}

pub fn replay(bin: &Path, files: &[PathBuf], rate: &[&str]) -> Vec<Second> {
    let mut v = vec![];
    const READ: &[&str] = &[
        "gpumem_leak_suspected",
        "gpumem_leak_slope_bytes_per_second",
        "gpumem_oom_eta_seconds",
        "gpumem_oom_risk_level",
    ];
    let text = timeline(bin, files, rate, READ);
    for o in seconds(&text) {
        let mut s = Second {
            t: o.t,
            ..Default::default()
        };
        for m in &o.metrics {
            let pid = m.label("pid").and_then(|p| p.parse::<u32>().ok());
            let gpu = m.label("gpu").unwrap_or("").to_string();
            let val = m.value();
            match (m.name.as_ref(), pid) {
                ("gpumem_leak_suspected", Some(p)) => {
                    s.leak.entry(p).or_default().0 = val > 0.5;
                    s.gpu_of.insert(p, gpu);
                }
                ("gpumem_leak_slope_bytes_per_second", Some(p)) => {
                    s.leak.entry(p).or_default().1 = Some(val);
                }
                ("gpumem_oom_eta_seconds", None) => {
                    s.eta.insert(gpu, val);
                }
                ("gpumem_oom_risk_level", None) => {
                    s.risk.insert(gpu, val as u8);
                }
                _ => {}
            }
        }
        v.push(s);
    }
    v
}

/// The figures of one detector on one process of one trace.
#[derive(Debug, Clone, Default)]
pub struct Score {
    pub detector: String,
    pub trace: String,
    pub pid: u32,
    pub leaking: bool,
    pub first_flag_after_start: Option<f64>,
    pub slope_mib_per_min: Option<f64>,
    pub true_slope_mib_per_min: Option<f64>,
    pub false_flag_seconds: usize,
    pub failure: Option<(f64, bool)>,
    /// (seconds where ≥ 20 s remain, of them with an ETA within 15 %, within 25 %)
    pub eta_seconds: (usize, usize, usize),
    pub high_lead: Option<f64>,
    pub critical_lead: Option<f64>,
    /// Seconds with risk ≥ high on a GPU where nothing leaks or runs out.
    pub calm_high_seconds: usize,
    /// Other processes share the GPU.
    pub shared: bool,
    /// Last sample of the trace, on the replay's clock.
    pub trace_end: f64,
}

impl Score {
    pub fn eta_share(&self, within: usize) -> Option<f64> {
        let (n, a, b) = self.eta_seconds;
        (n > 0).then(|| if within == 15 { a } else { b } as f64 / n as f64)
    }
}

/// Score a detector's per-second output against a trace's truth.
/// `flag(second) -> (suspected, slope)` for the pid, `eta/risk(second)` for its GPU.
fn score(
    detector: &str,
    truth: &Truth,
    seconds: &[f64],
    flag: impl Fn(usize) -> (bool, Option<f64>),
    eta: impl Fn(usize) -> Option<f64>,
    risk: impl Fn(usize) -> u8,
    calm_gpu: bool,
) -> Score {
    let leaking = truth.leak_mib_per_min > 0.0 || truth.oom_rate > 0.0;
    let start = truth.start + truth.offset;
    // A failure hours past the end of the trace (a slow leak on a large GPU) is no test of a
    // forecast: score ETAs only where the failure falls within 10 minutes of the last sample.
    let failure = failure_time(truth).filter(|f| f.0 <= truth.end + truth.offset + 600.0);
    let mut s = Score {
        detector: detector.into(),
        trace: truth.file.clone(),
        pid: truth.pid,
        leaking,
        true_slope_mib_per_min: true_floor_slope(truth).map(|b| b * 60.0 / MIB),
        failure,
        shared: truth.samples.iter().any(|s| s.4 > 0.0),
        trace_end: truth.end + truth.offset,
        ..Default::default()
    };
    let mut high_since = None;
    let mut crit_since = None;
    for (i, &t) in seconds.iter().enumerate() {
        let (flagged, slope) = flag(i);
        if flagged && leaking && t >= start && s.first_flag_after_start.is_none() {
            s.first_flag_after_start = Some(t - truth.offset);
        }
        if flagged && !leaking {
            s.false_flag_seconds += 1;
        }
        if let Some(sl) = slope {
            s.slope_mib_per_min = Some(sl * 60.0 / MIB);
        }
        let r = risk(i);
        if calm_gpu && r >= 2 {
            s.calm_high_seconds += 1;
        }
        if let Some((fail, _)) = failure {
            if r >= 2 {
                high_since.get_or_insert(t);
            } else {
                high_since = None;
            }
            if r >= 3 {
                crit_since.get_or_insert(t);
            } else {
                crit_since = None;
            }
            let remaining = fail - t;
            if t >= start && remaining >= 20.0 {
                s.eta_seconds.0 += 1;
                if let Some(e) = eta(i) {
                    let err = (e - remaining).abs() / remaining;
                    if err <= 0.15 {
                        s.eta_seconds.1 += 1;
                    }
                    if err <= 0.25 {
                        s.eta_seconds.2 += 1;
                    }
                }
            }
        }
    }
    if let Some((fail, _)) = failure {
        s.high_lead = high_since.map(|h| fail - h);
        s.critical_lead = crit_since.map(|c| fail - c);
    }
    s
}

/// Score gpumem-exporter and both baselines on one group of traces (one GPU), replayed at
/// `rate` (`PRODUCTION` or `RECORDED`).
pub fn evaluate_group(bin: &Path, files: &[PathBuf], rate: &[&str]) -> Vec<Score> {
    let timeline = replay(bin, files, rate);
    let mut truths: Vec<Truth> = files.iter().map(|p| read_truth(p)).collect();
    // Align as the replay source does: by t0_unix where every trace of the GPU has it.
    let base = truths.iter().filter_map(|t| t.t0_unix).reduce(f64::min);
    for t in &mut truths {
        if let (Some(t0), Some(b)) = (t.t0_unix, base) {
            t.offset = t0 - b;
        }
    }
    let calm = truths
        .iter()
        .all(|t| t.leak_mib_per_min <= 0.0 && t.oom_rate <= 0.0 && t.oom_event.is_none());
    let seconds: Vec<f64> = timeline.iter().map(|s| s.t).collect();
    let mut out = vec![];
    // Processes NVML lists that no trace describes (a ballast) must never be flagged either.
    let traced: BTreeSet<u32> = truths.iter().map(|t| t.pid).collect();
    for truth in &truths {
        let pid = truth.pid;
        let gpu = timeline
            .iter()
            .rev()
            .find_map(|s| s.gpu_of.get(&pid).cloned())
            .unwrap_or_default();
        let ours = score(
            "gpumem-exporter",
            truth,
            &seconds,
            |i| timeline[i].leak.get(&pid).copied().unwrap_or((false, None)),
            |i| timeline[i].eta.get(&gpu).copied(),
            |i| timeline[i].risk.get(&gpu).copied().unwrap_or(0),
            calm,
        );
        out.push(ours);
        for (name, window_eta) in [
            ("least squares on NVML used (60 s)", true),
            ("seeds' growth threshold", false),
        ] {
            out.push(baseline(name, truth, &seconds, window_eta, calm));
        }
    }
    for s in &timeline {
        for (pid, (flag, _)) in &s.leak {
            if *flag && !traced.contains(pid) {
                out.push(Score {
                    detector: "gpumem-exporter".into(),
                    trace: format!("untraced pid {pid}"),
                    pid: *pid,
                    false_flag_seconds: 1,
                    ..Default::default()
                });
            }
        }
    }
    out
}

/// Baselines from the NVML part of the trace alone, evaluated once per second.
/// Least squares: slope of all raw NVML per-process used samples in the last 60 s; leak when
/// the slope exceeds 10 MB/min; ETA = free / device-used slope (predict_linear).
/// Seeds: growth = (used now − used 60 s ago) / 60 s; leak above 10 MB/min; ETA = free / growth;
/// risk from the used percentage (≥ 85 % high, ≥ 95 % critical) or ETA (< 60 s critical, < 300 s high).
fn baseline(name: &str, truth: &Truth, seconds: &[f64], lsq_kind: bool, calm: bool) -> Score {
    type Points = Vec<(f64, f64)>;
    let at = |t: f64| -> (Points, Points) {
        let lt = t - truth.offset;
        let win: Vec<_> = truth
            .samples
            .iter()
            .zip(&truth.device)
            .filter(|(s, _)| s.0 <= lt && s.0 > lt - 60.0)
            .collect();
        (
            win.iter().map(|(s, _)| (s.0, s.3)).collect(),
            win.iter().map(|(_, d)| (d.0, d.1)).collect(),
        )
    };
    let slope = |pts: &[(f64, f64)]| -> Option<f64> {
        if pts.len() < 10 {
            return None;
        }
        if lsq_kind {
            lsq(pts).map(|(b, _)| b)
        } else {
            let (a, b) = (pts.first()?, pts.last()?);
            (b.0 - a.0 >= 30.0).then(|| (b.1 - a.1) / (b.0 - a.0))
        }
    };
    let free_at = |t: f64| {
        let lt = t - truth.offset;
        truth
            .device
            .iter()
            .rev()
            .find(|d| d.0 <= lt)
            .map(|d| (d.2 - d.1, d.1 / d.2))
    };
    let eta = |i: usize| {
        let (_, dev) = at(seconds[i]);
        let b = slope(&dev)?;
        let (free, _) = free_at(seconds[i])?;
        (b > 0.0).then(|| free / b)
    };
    let risk = |i: usize| -> u8 {
        let e = eta(i);
        let used = free_at(seconds[i]).map(|x| x.1).unwrap_or(0.0);
        if e.is_some_and(|e| e < 60.0) || used >= 0.95 {
            3
        } else if e.is_some_and(|e| e < 300.0) || used >= 0.85 {
            2
        } else {
            0
        }
    };
    score(
        name,
        truth,
        seconds,
        |i| {
            let (proc_pts, _) = at(seconds[i]);
            let b = slope(&proc_pts);
            (b.is_some_and(|b| b > LEAK_THRESHOLD), b)
        },
        eta,
        risk,
        calm,
    )
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "–".into())
}

pub fn table(scores: &[Score]) -> String {
    let mut s = String::new();
    s.push_str("| trace | pid | detector | first leak flag (s after trace start) | slope MiB/min (true) | false-flag s | ETA ±15% (±25%) of s with ≥20 s left | risk≥high lead s | critical lead s | calm-GPU high s |\n");
    s.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for x in scores {
        let eta = match x.eta_seconds.0 {
            0 => "–".to_string(),
            n => format!(
                "{:.0}% ({:.0}%) of {n}{}",
                100.0 * x.eta_seconds.1 as f64 / n as f64,
                100.0 * x.eta_seconds.2 as f64 / n as f64,
                if x.failure.is_some_and(|f| f.1) {
                    " (extrapolated failure)"
                } else {
                    ""
                }
            ),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} |\n",
            x.trace,
            x.pid,
            x.detector,
            if x.leaking {
                opt(x.first_flag_after_start, 0)
            } else {
                "no leak".into()
            },
            opt(x.slope_mib_per_min, 0),
            opt(x.true_slope_mib_per_min, 0),
            x.false_flag_seconds,
            eta,
            opt(x.high_lead, 0),
            opt(x.critical_lead, 0),
            x.calm_high_seconds,
        ));
    }
    s
}
