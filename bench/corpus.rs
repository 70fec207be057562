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
    /// Crash runs: when the growth that ran the GPU out began, the last `model_ready` before
    /// the crash (the workloads mark it where the resident block is taken and the growth
    /// starts; the start of the run where none is marked).
    pub growth_from: Option<f64>,
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
    let mut readies: Vec<f64> = vec![];
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
                    readies.push(ts);
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
        growth_from: crash.map(|c| {
            readies
                .iter()
                .copied()
                .filter(|r| *r < c)
                .fold(0.0, f64::max)
        }),
        healthy,
        end,
    }
}

/// A transformation of a recorded run under which the forecast's verdict must hold
/// (docs/forecast.md, "Invariance"): what the run would have looked like had the job run
/// otherwise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Variant {
    /// As recorded.
    Recorded,
    /// Without the client: the allocator's reports and the events it sends (its OOM among
    /// them) removed; NVML alone.
    NoClient,
    /// The allocator's segments collapsed into one that grows and shrinks in place
    /// (`expandable_segments:True`): every report counts one segment while it holds memory.
    OneSegment,
    /// Every time stretched by this factor: the same job, that much slower.
    Slower(f64),
    /// Every byte scaled so that the card holds this many GiB.
    Card(f64),
    /// A steady process that the client does not know holds this share of a card made larger
    /// by it: the job keeps the room it had, beside a neighbour NVML lists.
    Neighbour(f64),
}

impl Variant {
    pub fn name(&self) -> String {
        match self {
            Variant::Recorded => "as recorded".into(),
            Variant::NoClient => "no client".into(),
            Variant::OneSegment => "one expandable segment".into(),
            Variant::Slower(k) => format!("slower ×{k}"),
            Variant::Card(g) => format!("{g:.0} GiB card"),
            Variant::Neighbour(s) => format!("neighbour {:.0} %", 100.0 * s),
        }
    }

    /// Seconds of the recording become this many seconds of the variant.
    pub fn stretch(&self) -> f64 {
        match self {
            Variant::Slower(k) => *k,
            _ => 1.0,
        }
    }
}

/// Every transformation of the invariance tests, as recorded first.
pub const VARIANTS: [Variant; 7] = [
    Variant::Recorded,
    Variant::NoClient,
    Variant::OneSegment,
    Variant::Slower(2.0),
    Variant::Card(80.0),
    Variant::Card(141.0),
    Variant::Neighbour(0.1),
];

/// The pid of the neighbour `Variant::Neighbour` adds: no recorder writes it.
const NEIGHBOUR_PID: u64 = 4_000_000_000;
const GIB: f64 = 1073741824.0;

/// Byte fields of a trace line, by where they sit.
const NVML_BYTES: [&str; 5] = ["total", "used", "free", "v2_reserved", "v2_used"];
const EVENT_BYTES: [&str; 3] = ["request_bytes", "device_free", "bytes"];

fn scale_bytes(v: &mut Value, f: f64) {
    if let Some(x) = v.as_f64() {
        *v = Value::from((x * f).round() as u64);
    }
}

/// One line of a trace as `variant` makes it, or `None` where the variant drops it.
fn transform(mut o: Value, variant: Variant, total: f64, base: f64, shift: f64) -> Option<Value> {
    let kind = o["kind"].as_str().unwrap_or("").to_string();
    if let Some(t) = o["t"].as_f64() {
        o["t"] = Value::from(t * variant.stretch() + shift);
    }
    match variant {
        Variant::Recorded => {}
        Variant::NoClient => match kind.as_str() {
            "sample" => {
                o.as_object_mut().unwrap().remove("torch");
                o.get("nvml")?;
            }
            "event" => return None,
            _ => {}
        },
        Variant::OneSegment => {
            if let Some(t) = o.get_mut("torch").and_then(|t| t.as_object_mut()) {
                let holds = t
                    .get("reserved_bytes.all.current")
                    .and_then(|r| r.as_f64())
                    .is_some_and(|r| r > 0.0);
                if t.contains_key("segment.all.current") {
                    t.insert("segment.all.current".into(), Value::from(holds as u64));
                }
            }
        }
        Variant::Slower(k) => {
            if kind == "header" {
                if let Some(p) = o["period_s"].as_f64() {
                    o["period_s"] = Value::from(p * k);
                }
                if let Some(t0) = o["t0_unix"].as_f64() {
                    o["t0_unix"] = Value::from(base + (t0 - base) * k);
                }
                if let Some(t) = o["oom_t"].as_f64() {
                    o["oom_t"] = Value::from(t * k);
                }
            }
        }
        Variant::Card(gib) => {
            let f = gib * GIB / total;
            match kind.as_str() {
                "header" => scale_bytes(&mut o["total_memory"], f),
                "sample" => {
                    if let Some(n) = o.get_mut("nvml") {
                        for k in NVML_BYTES {
                            if n.get(k).is_some() {
                                scale_bytes(&mut n[k], f);
                            }
                        }
                        for p in n["procs"].as_array_mut().into_iter().flatten() {
                            scale_bytes(&mut p["used"], f);
                        }
                    }
                    if let Some(t) = o.get_mut("torch").and_then(|t| t.as_object_mut()) {
                        for (k, v) in t.iter_mut() {
                            if k.contains("bytes") || k == "largest_free_cached" {
                                scale_bytes(v, f);
                            }
                        }
                    }
                }
                "event" => {
                    for k in EVENT_BYTES {
                        if o.get(k).is_some() {
                            scale_bytes(&mut o[k], f);
                        }
                    }
                }
                _ => {}
            }
        }
        Variant::Neighbour(share) => {
            // The card grows so that the neighbour's share of it is `share` and the job keeps
            // every byte of room it had.
            let n = (total * share / (1.0 - share)).round();
            match kind.as_str() {
                "header" => {
                    let t = o["total_memory"].as_f64().unwrap_or(total);
                    o["total_memory"] = Value::from((t + n) as u64);
                }
                "sample" => {
                    if let Some(nv) = o.get_mut("nvml") {
                        for k in ["total", "used", "v2_used"] {
                            if let Some(x) = nv[k].as_f64() {
                                nv[k] = Value::from((x + n) as u64);
                            }
                        }
                        if let Some(p) = nv["procs"].as_array_mut() {
                            p.push(serde_json::json!({"pid": NEIGHBOUR_PID, "used": n as u64}));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Some(o)
}

/// The traces of `files`, parsed. A run is replayed at several phases and in every variant one
/// after the other on one thread: the last run's traces are kept for the next call, so that a
/// run is read and parsed once, not once per replay.
fn parsed(files: &[PathBuf]) -> std::rc::Rc<Vec<Vec<Value>>> {
    type Last = Option<(Vec<PathBuf>, std::rc::Rc<Vec<Vec<Value>>>)>;
    thread_local! {
        static LAST: std::cell::RefCell<Last> = const { std::cell::RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| {
        if let Some((_, t)) = last.as_ref().filter(|(f, _)| f.as_slice() == files) {
            return t.clone();
        }
        let t = std::rc::Rc::new(files.iter().map(|f| lines(f)).collect::<Vec<_>>());
        *last = Some((files.to_vec(), t.clone()));
        t
    })
}

/// The run's traces as `variant` makes them, with every time moved by `shift` seconds so that
/// the replay's 1 s clock meets the recording at another phase.
pub fn prepared(run: &Run, variant: Variant, shift: f64, dir: &Path) -> Vec<PathBuf> {
    let traces = parsed(&run.files);
    let base = traces
        .iter()
        .filter_map(|t| t[0]["t0_unix"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let total = traces
        .iter()
        .flat_map(|t| t.iter())
        .find_map(|o| o["nvml"]["total"].as_f64())
        .unwrap_or(80.0 * GIB);
    traces
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let out = dir.join(format!("{i}.jsonl"));
            let mut w = std::io::BufWriter::new(std::fs::File::create(&out).unwrap());
            for o in t {
                if let Some(o) = transform(o.clone(), variant, total, base, shift) {
                    serde_json::to_writer(&mut w, &o).unwrap();
                    w.write_all(b"\n").unwrap();
                }
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
    /// Memory rose here: the GPU's used bytes, or a process's used, reserved or
    /// peak-allocated bytes, reached `RISE_BYTES` above their highest of the `RISE_WINDOW`
    /// before. Read from the exposition, not from the forecast: the evidence any alert needs.
    pub rose: bool,
}

/// A rise smaller than a segment is no evidence of growth at GPU scale.
pub const RISE_BYTES: f64 = 64.0 * 1048576.0;
/// New highs are measured against the forecast's window (`analysis.eta_window`).
pub const RISE_WINDOW: f64 = 300.0;

/// The demand series of the exposition whose rises are evidence of growth.
fn demand_series(name: &str, gpu_level: bool) -> bool {
    match name {
        "gpumem_used_bytes" => gpu_level,
        "gpumem_process_used_bytes"
        | "gpumem_process_reserved_bytes"
        | "gpumem_process_allocated_peak_bytes" => !gpu_level,
        _ => false,
    }
}

/// Sliding maxima of each demand series over `RISE_WINDOW`, keyed by name and labels.
#[derive(Default)]
struct Highs(std::collections::HashMap<String, std::collections::VecDeque<(f64, f64)>>);

impl Highs {
    /// `v` at `t`: whether it is `RISE_BYTES` above the series' highest of the window before.
    fn rose(&mut self, key: String, t: f64, v: f64) -> bool {
        let q = self.0.entry(key).or_default();
        while q.front().is_some_and(|p| p.0 < t - RISE_WINDOW) {
            q.pop_front();
        }
        let rose = q.front().is_some_and(|p| v >= p.1 + RISE_BYTES);
        // Kept decreasing: the front is the window's maximum.
        while q.back().is_some_and(|p| p.1 <= v) {
            q.pop_back();
        }
        q.push_back((t, v));
        rose
    }
}

pub fn replay(bin: &Path, files: &[PathBuf]) -> Vec<Second> {
    let mut v = vec![];
    let mut highs = Highs::default();
    const READ: &[&str] = &[
        "gpumem_oom_risk_level",
        "gpumem_oom_eta_seconds",
        "gpumem_oom_eta_lower_seconds",
        "gpumem_oom_eta_upper_seconds",
        "gpumem_free_bytes",
        "gpumem_leak_suspected",
        "gpumem_used_bytes",
        "gpumem_process_used_bytes",
        "gpumem_process_reserved_bytes",
        "gpumem_process_allocated_peak_bytes",
    ];
    let text = detection::timeline(bin, files, detection::PRODUCTION, READ);
    for o in detection::seconds(&text) {
        let mut s = Second {
            t: o.t,
            ..Default::default()
        };
        for m in &o.metrics {
            let gpu_level = m.label("pid").is_none();
            let val = m.value();
            let name = m.name.as_ref();
            if demand_series(name, gpu_level) {
                s.rose |= highs.rose(format!("{name}{:?}", m.labels), s.t, val);
            }
            match name {
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
    /// Healthy runs: seconds at risk ≥ high that no long rise excuses (`Evidence::excused`),
    /// the shortest ETA of those seconds, seconds with a leak flag, seconds at critical, and
    /// seconds at ≥ high whose evidence is older than `Evidence::stale` allows.
    pub high_seconds: usize,
    /// Every second at ≥ high, excused or not.
    pub high_total: usize,
    pub min_eta: Option<f64>,
    pub leak_seconds: usize,
    pub critical_seconds: usize,
    pub stale_seconds: usize,
    /// Crash runs: seconds from the start of the growth (`Run::growth_from`) to the first leak
    /// flag before the crash.
    pub leak_flag_after: Option<f64>,
}

impl Score {
    pub fn eta_share(&self) -> Option<f64> {
        (self.eta_seconds.0 > 0).then(|| self.eta_seconds.1 as f64 / self.eta_seconds.0 as f64)
    }

    pub fn bounds_share(&self) -> Option<f64> {
        (self.eta_seconds.0 > 0).then(|| self.bounds_hold as f64 / self.eta_seconds.0 as f64)
    }
}

/// How old the evidence of growth is at each second, from the rises of the exposition.
#[derive(Debug, Clone, Copy, Default)]
pub struct Evidence {
    /// The last rise, the one before it, and when the rising this one belongs to began (rises
    /// at most `LINGER` apart are one rising).
    last: Option<f64>,
    before: Option<f64>,
    rising_since: Option<f64>,
}

/// How long an alert may outlive the last rise of a smooth growth: the 30 s, over the
/// forecast's own wait (`evidence::RISE_WAIT`, 15 s); no level is held after its ETA is gone.
pub const LINGER: f64 = 30.0;
/// A rising that lasts longer than this is a load or warm-up that may warn while it rises.
pub const LONG_RISE: f64 = 60.0;

/// Rises in neighbouring seconds are one step caught over two samples (as `trend::steps` reads
/// them): a staircase's gap is measured between steps, not within one.
const ONE_STEP: f64 = 1.5;

impl Evidence {
    fn see(&mut self, x: &Second) {
        if x.rose {
            if self.last.is_none_or(|l| x.t - l > LINGER) {
                self.rising_since = Some(x.t);
            }
            if self.last.is_none_or(|l| x.t - l > ONE_STEP) {
                self.before = self.last;
            }
            self.last = Some(x.t);
        }
    }

    /// An alert at `t` stands on evidence older than the rule allows: no rise within `LINGER`,
    /// or, for a staircase, within one and a half of its last gap.
    pub fn stale(&self, t: f64) -> bool {
        let Some(last) = self.last else {
            return true;
        };
        let gap = self.before.map_or(0.0, |b| last - b);
        t - last > LINGER.max(1.5 * gap)
    }

    /// A warning at `t` on a healthy run is allowed: a rising that has lasted longer than
    /// `LONG_RISE` rose within `LINGER`.
    pub fn excused(&self, t: f64) -> bool {
        match (self.last, self.rising_since) {
            (Some(last), Some(since)) => t - last <= LINGER && last - since > LONG_RISE,
            _ => false,
        }
    }
}

pub fn score(run: &Run, detector: &'static str, phase: f64, seconds: &[Second]) -> Score {
    let mut evidence = Evidence::default();
    let mut s = Score {
        run: run.name.clone(),
        detector,
        phase,
        crash: run.crash,
        ..Default::default()
    };
    for x in seconds {
        evidence.see(x);
        if let Some(c) = run.crash {
            if x.t >= c {
                break;
            }
            let left = c - x.t;
            if x.leak_flag && s.leak_flag_after.is_none() {
                s.leak_flag_after = Some(x.t - run.growth_from.unwrap_or(0.0));
            }
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
            let excused = evidence.excused(x.t);
            s.high_seconds += (x.risk >= 2 && !excused) as usize;
            s.high_total += (x.risk >= 2) as usize;
            s.critical_seconds += (x.risk >= 3) as usize;
            s.stale_seconds += (x.risk >= 2 && evidence.stale(x.t)) as usize;
            if let Some(e) = x.eta.filter(|_| !excused) {
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

/// Seconds of growth from which a crash must be at high 90 s ahead and its ETA right
/// (docs/forecast.md, "Targets").
pub const LONG_GROWTH: f64 = 120.0;

/// A target a run misses under a variant: what, the worst phase's figure and what was needed.
#[derive(Debug, Clone, PartialEq)]
pub struct Miss {
    pub run: String,
    pub variant: String,
    /// `critical`, `early`, `high`, `eta`, `bounds`, `slower`, `high_seconds`, `min_eta`,
    /// `leak_seconds`.
    pub what: &'static str,
    pub got: f64,
    pub need: f64,
}

impl std::fmt::Display for Miss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let says = match self.what {
            "critical" => "critical held from (s before the crash)",
            "early" => "first critical with (s left, at most)",
            "high" => "high held from (s before the crash)",
            "eta" => "ETA within 35 % (share of the seconds 20-120 s before)",
            "bounds" => "bounds hold the truth (share)",
            "slower" => "critical held from, slowed down (s, at least as recorded)",
            "high_seconds" => "seconds at risk >= high on a healthy run, no long rise under way",
            "critical_seconds" => "seconds at critical on a healthy run",
            "stale_seconds" => "seconds at risk >= high on a healthy run with no recent rise",
            "min_eta" => "shortest ETA on a healthy run (s, at least)",
            "leak_seconds" => "seconds of leak flag on a healthy run",
            _ => self.what,
        };
        write!(
            f,
            "{} ({}): {says}: {:.2}, target {:.2}",
            self.run, self.variant, self.got, self.need
        )
    }
}

/// The targets `run` misses under `variant`, from our scores and the anchor's at every phase
/// (`evaluate_variant`); `recorded` is our scores on the run as recorded, for `Slower`.
pub fn misses(run: &Run, variant: Variant, scores: &[Score], recorded: &[Score]) -> Vec<Miss> {
    let ours: Vec<&Score> = scores
        .iter()
        .filter(|s| s.detector == "gpumem-exporter")
        .collect();
    let anchor: Vec<&Score> = scores
        .iter()
        .filter(|s| s.detector != "gpumem-exporter")
        .collect();
    let worst = |v: &[&Score], f: fn(&Score) -> Option<f64>| {
        v.iter()
            .map(|s| f(s).unwrap_or(0.0))
            .fold(f64::INFINITY, f64::min)
    };
    let most = |f: fn(&Score) -> f64| ours.iter().map(|s| f(s)).fold(0.0, f64::max);
    let mut out = vec![];
    let mut miss = |what, got: f64, need: f64, short: bool| {
        if short {
            out.push(Miss {
                run: run.name.clone(),
                variant: variant.name(),
                what,
                got,
                need,
            })
        }
    };
    if run.healthy {
        let critical = most(|s| s.critical_seconds as f64);
        miss("critical_seconds", critical, 0.0, critical > 0.0);
        let stale = most(|s| s.stale_seconds as f64);
        miss("stale_seconds", stale, 0.0, stale > 0.0);
        let high = most(|s| s.high_seconds as f64);
        miss("high_seconds", high, 0.0, high > 0.0);
        let min_eta = ours
            .iter()
            .filter_map(|s| s.min_eta)
            .fold(f64::INFINITY, f64::min);
        miss("min_eta", min_eta, 300.0, min_eta < 300.0);
        let leak = most(|s| s.leak_seconds as f64);
        miss("leak_seconds", leak, 0.0, leak > 0.0);
        return out;
    }
    let crit = worst(&ours, |s| s.critical_lead);
    let first = ours
        .iter()
        .filter_map(|s| s.first_critical_left)
        .fold(0.0, f64::max);
    let early = 150.0 * variant.stretch();
    miss("early", first, early, first > early);
    if let Variant::Slower(_) = variant {
        // At least what it was, up to the 45 s asked of every crash: a lead that was longer
        // because the ETA ran short becomes the 60 s of a right one when the job is slower.
        let was = worst(
            &recorded
                .iter()
                .filter(|s| s.detector == "gpumem-exporter")
                .collect::<Vec<_>>(),
            |s| s.critical_lead,
        )
        .min(45.0);
        miss("slower", crit, was, crit < was);
        return out;
    }
    let need = worst(&anchor, |s| s.critical_lead).min(45.0);
    miss("critical", crit, need, crit < need);
    let growth = run.crash.unwrap_or(0.0) - run.growth_from.unwrap_or(0.0);
    if growth * variant.stretch() >= LONG_GROWTH {
        let high = worst(&ours, |s| s.high_lead);
        miss("high", high, 90.0, high < 90.0);
        let eta = worst(&ours, |s| s.eta_share());
        miss("eta", eta, 0.6, eta < 0.6);
        let bounds = worst(&ours, |s| s.bounds_share());
        miss("bounds", bounds, 0.8, bounds < 0.8);
    }
    out
}

/// Our forecast and the anchor on `run`, replayed at 1 s at each phase in `phases`.
pub fn evaluate(bin: &Path, run: &Run, phases: &[f64]) -> Vec<Score> {
    evaluate_variant(bin, run, Variant::Recorded, phases)
}

/// The same on the run as `variant` makes it.
pub fn evaluate_variant(bin: &Path, run: &Run, variant: Variant, phases: &[f64]) -> Vec<Score> {
    let mut out = vec![];
    for &phase in phases {
        let dir = tempfile::tempdir().unwrap();
        let files = prepared(run, variant, phase, dir.path());
        let seconds = replay(bin, &files);
        // The variant and the shift moved the replay's clock: put the crash back on it.
        let moved = Run {
            crash: run.crash.map(|c| c * variant.stretch() + phase),
            growth_from: run.growth_from.map(|g| g * variant.stretch() + phase),
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
        "| run | detector | crash at s | critical held from s before (worst phase) | first critical, s left (earliest) | high held from s before (worst) | ETA within 35 % (20–120 s left) | bounds hold the truth | leak flag, s after the growth began (latest) | healthy: s at ≥ high / of them not in a long rise / s at critical / s stale / min ETA s (not in a long rise) / leak-flag s |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
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
            let most = |f: fn(&Score) -> usize| rows.iter().map(|r| f(r)).max().unwrap_or(0);
            format!(
                "{} / {} / {} / {} / {} / {}",
                most(|r| r.high_total),
                most(|r| r.high_seconds),
                most(|r| r.critical_seconds),
                most(|r| r.stale_seconds),
                opt(rows
                    .iter()
                    .filter_map(|r| r.min_eta)
                    .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.min(b))))),
                most(|r| r.leak_seconds)
            )
        } else {
            "".into()
        };
        let leak = if crash.is_some() && det == "gpumem-exporter" {
            if rows.iter().all(|r| r.leak_flag_after.is_some()) {
                opt(rows
                    .iter()
                    .filter_map(|r| r.leak_flag_after)
                    .reduce(f64::max))
            } else {
                "–".into()
            }
        } else {
            "".into()
        };
        s.push_str(&format!(
            "| {run} | {det} | {} | {} | {} | {} | {} | {} | {leak} | {healthy} |\n",
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

#[cfg(test)]
mod evidence_tests {
    use super::*;

    fn rises(at: &[f64]) -> Evidence {
        let mut e = Evidence::default();
        for &t in at {
            e.see(&Second {
                t,
                rose: true,
                ..Default::default()
            });
        }
        e
    }

    #[test]
    fn a_step_caught_over_two_seconds_is_one_step_of_the_staircase() {
        // Steps 40 s apart, the last seen rising in two neighbouring seconds: an alert 50 s
        // after it stands within one and a half gaps; a staircase of 1 s gaps would not.
        let e = rises(&[100.0, 140.0, 141.0]);
        assert!(!e.stale(191.0));
        assert!(e.stale(203.0));
        // Two steps 2 s apart are two.
        assert!(rises(&[100.0, 140.0, 142.0]).stale(180.0));
    }
}
