//! Replay of recorded traces (format: the traces README). Several files may describe one GPU
//! (same `gpu_uuid`); they are merged onto it and aligned by `t0_unix` or `start_offset_s`.
//! The NVML part of each sample feeds the source path, the `torch` part the allocator-report
//! path, exactly as live data would.

use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::Source;
use crate::model::{DeviceMemory, GpuIdentity, GpuReading, Observation, ProcessReading, Time};
use crate::model::{DeviceStats, Event, EventKind, Report, REPORT_VERSION};

#[derive(Debug, Clone, Deserialize)]
pub struct Header {
    #[serde(default)]
    pub scenario: Option<String>,
    #[serde(default)]
    pub gpu: Option<String>,
    #[serde(default)]
    pub total_memory: Option<u64>,
    pub pid: u32,
    #[serde(default)]
    pub gpu_index: Option<u32>,
    #[serde(default)]
    pub gpu_uuid: Option<String>,
    #[serde(default)]
    pub t0_unix: Option<f64>,
    #[serde(default)]
    pub start_offset_s: Option<f64>,
    #[serde(default)]
    pub leak_mb_per_min: Option<f64>,
    #[serde(default)]
    pub oom_gb_per_s: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NvmlPart {
    pub total: u64,
    #[serde(default)]
    pub used: Option<u64>,
    pub free: u64,
    #[serde(default)]
    pub v2_reserved: Option<u64>,
    #[serde(default)]
    pub v2_used: Option<u64>,
    #[serde(default)]
    pub procs: Vec<ProcPart>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ProcPart {
    pub pid: u32,
    pub used: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TorchPart {
    #[serde(rename = "allocated_bytes.all.current")]
    pub allocated: u64,
    #[serde(rename = "reserved_bytes.all.current")]
    pub reserved: u64,
    #[serde(rename = "active_bytes.all.current", default)]
    pub active: Option<u64>,
    #[serde(rename = "inactive_split_bytes.all.current", default)]
    pub inactive_split: Option<u64>,
    #[serde(rename = "segment.all.current", default)]
    pub segments: Option<u64>,
    #[serde(default)]
    pub num_alloc_retries: Option<u64>,
    #[serde(default)]
    pub num_ooms: Option<u64>,
    #[serde(rename = "allocated_bytes.all.peak", default)]
    pub allocated_peak: Option<u64>,
    #[serde(rename = "reserved_bytes.all.peak", default)]
    pub reserved_peak: Option<u64>,
    #[serde(default)]
    pub largest_free_cached: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Line {
    Header(Header),
    Sample {
        t: f64,
        #[serde(default)]
        nvml: Option<NvmlPart>,
        #[serde(default)]
        torch: Option<TorchPart>,
    },
    Event {
        t: f64,
        name: String,
        #[serde(default)]
        error: Option<String>,
        #[serde(default)]
        request_bytes: Option<u64>,
        #[serde(default)]
        device_free: Option<u64>,
    },
}

#[derive(Debug, Clone)]
pub enum Item {
    Sample {
        nvml: Option<NvmlPart>,
        torch: Option<TorchPart>,
    },
    Event {
        name: String,
        message: Option<String>,
        /// An out-of-memory event's failing request and the device's free bytes then, where
        /// the recorder caught them.
        request_bytes: Option<u64>,
        device_free: Option<u64>,
    },
}

/// A failed allocation in the replayed traces, on the replay's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub t: f64,
    pub pid: u32,
    pub gpu: GpuIdentity,
    pub request_bytes: Option<u64>,
    pub device_free: Option<u64>,
    pub message: Option<String>,
}

/// One trace file, parsed.
#[derive(Debug, Clone)]
pub struct Trace {
    pub path: PathBuf,
    pub header: Header,
    /// (seconds since the trace started, item), in file order.
    pub items: Vec<(f64, Item)>,
}

/// The longest line a trace may hold. Recorded lines are under a kilobyte (a header with a
/// long command line, a sample of a GPU with hundreds of processes: tens of kilobytes); a longer
/// one is not a recording, and reading it whole would take as much memory as it is long.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// How far from its start a trace's times may lie, and how long the traces of one replay may
/// span together: 7 days. Replay steps through every second of trace time (a day of an idle
/// GPU takes about 5 s on one core of a release build), so a time of 1e12 would run for
/// millennia; recordings for a bug report last minutes to hours.
pub const MAX_TRACE_SECONDS: f64 = 7.0 * 86_400.0;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    // Not a `source` field: the message already carries it, and `{:#}` would print it twice.
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{path}:{line}: {message}")]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{0}")]
    Span(String),
}

/// Parse a trace from any reader; `name` is used in errors.
///
/// A last line without its newline that does not parse is what a recorder killed mid-write
/// leaves: it is dropped with a warning, and the trace up to it replays. Anywhere else a
/// malformed line is an error that names it.
pub fn parse_trace(mut reader: impl BufRead, name: &str) -> Result<Trace, TraceError> {
    let mut header = None;
    let mut items = Vec::new();
    let mut raw = Vec::new();
    for i in 0.. {
        let bad = |message: String| TraceError::Parse {
            path: name.into(),
            line: i + 1,
            message,
        };
        raw.clear();
        // Never more than one line over the limit in memory, however long the line.
        let n = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut raw)
            .map_err(|e| bad(e.to_string()))?;
        if n == 0 {
            break;
        }
        if raw.len() > MAX_LINE_BYTES {
            return Err(bad(format!(
                "the line is longer than {} MiB; a recording's lines are far shorter",
                MAX_LINE_BYTES >> 20
            )));
        }
        let buf = std::str::from_utf8(&raw).map_err(|e| bad(format!("not UTF-8: {e}")))?;
        let line = buf.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Line = match serde_json::from_str(line) {
            Ok(l) => l,
            Err(_) if !buf.ends_with('\n') && header.is_some() => {
                tracing::warn!(
                    trace = name,
                    line = i + 1,
                    "last line cut short (a recorder killed mid-write?): dropped"
                );
                break;
            }
            Err(e) => {
                return Err(TraceError::Parse {
                    path: name.into(),
                    line: i + 1,
                    message: e.to_string(),
                })
            }
        };
        let bad = |message: &str| bad(message.into());
        match parsed {
            Line::Header(h) => {
                if header.is_some() {
                    return Err(bad("a second header"));
                }
                for (field, v) in [("t0_unix", h.t0_unix), ("start_offset_s", h.start_offset_s)] {
                    if v.is_some_and(|v| !v.is_finite()) {
                        return Err(bad(&format!("{field} is not a finite number")));
                    }
                }
                header = Some(h);
            }
            _ if header.is_none() => return Err(bad("the first line must be the header")),
            Line::Sample { t, nvml, torch } => {
                check_time(t).map_err(|m| bad(&format!("sample time {m}")))?;
                items.push((t, Item::Sample { nvml, torch }));
            }
            Line::Event {
                t,
                name,
                error,
                request_bytes,
                device_free,
            } => {
                check_time(t).map_err(|m| bad(&format!("event time {m}")))?;
                items.push((
                    t,
                    Item::Event {
                        name,
                        message: error,
                        request_bytes,
                        device_free,
                    },
                ));
            }
        }
    }
    let header = header.ok_or_else(|| TraceError::Parse {
        path: name.into(),
        line: 0,
        message: "empty trace: no header".into(),
    })?;
    Ok(Trace {
        path: PathBuf::from(name),
        header,
        items,
    })
}

/// A sample's or event's time: seconds since its trace started, within `MAX_TRACE_SECONDS`.
fn check_time(t: f64) -> Result<(), String> {
    if !t.is_finite() {
        return Err("is not a finite number".into());
    }
    if t.abs() > MAX_TRACE_SECONDS {
        return Err(format!(
            "{t} is out of range; accepted: seconds since the trace started, within ±{} days",
            MAX_TRACE_SECONDS / 86_400.0
        ));
    }
    Ok(())
}

/// Read a trace file; a name ending in `.gz` is gunzipped (recordings attached to bug reports
/// are often compressed).
pub fn read_trace(path: &Path) -> Result<Trace, TraceError> {
    let f = std::fs::File::open(path).map_err(|e| TraceError::Io {
        path: path.display().to_string(),
        error: e,
    })?;
    let name = path.display().to_string();
    if path.extension().is_some_and(|e| e == "gz") {
        parse_trace(
            std::io::BufReader::new(flate2::read::GzDecoder::new(f)),
            &name,
        )
    } else {
        parse_trace(std::io::BufReader::new(f), &name)
    }
}

struct GpuSlot {
    id: GpuIdentity,
    latest: Option<NvmlPart>,
}

/// Several traces merged into one timeline.
pub struct ReplaySource {
    gpus: Vec<GpuSlot>,
    /// (global time, gpu slot, pid, item), sorted by time.
    timeline: Vec<(f64, usize, u32, Item)>,
    cursor: usize,
    /// Seconds between the allocator reports a process sends (0: every recorded sample, as
    /// recorded). Recorders sample faster than clients report; a forecast is judged at the
    /// rate it runs at.
    report_interval: f64,
    /// (slot, pid) → trace time of the last report sent.
    last_report: BTreeMap<(usize, u32), f64>,
}

impl ReplaySource {
    /// Read and merge the traces; refused where, once aligned, they span more than
    /// `MAX_TRACE_SECONDS` (recordings days apart put on one GPU, or a forged `t0_unix`).
    pub fn open(paths: &[PathBuf]) -> Result<Self, TraceError> {
        let traces = paths
            .iter()
            .map(|p| read_trace(p))
            .collect::<Result<Vec<_>, _>>()?;
        let replay = Self::from_traces(traces);
        let span = replay.duration();
        if span > MAX_TRACE_SECONDS {
            return Err(TraceError::Span(format!(
                "the traces span {:.0} days once aligned by their headers' t0_unix or start_offset_s; a replay covers at most {} days (are they recordings of one run?)",
                span / 86_400.0,
                MAX_TRACE_SECONDS / 86_400.0
            )));
        }
        Ok(replay)
    }

    pub fn from_traces(traces: Vec<Trace>) -> Self {
        // Group by GPU: by uuid where given, else each trace is its own GPU.
        let mut slots: Vec<GpuSlot> = Vec::new();
        let mut slot_of = Vec::with_capacity(traces.len());
        let taken: Vec<u32> = traces.iter().filter_map(|t| t.header.gpu_index).collect();
        let mut next_free = 0u32;
        for t in &traces {
            let h = &t.header;
            let existing = h
                .gpu_uuid
                .as_ref()
                .and_then(|u| slots.iter().position(|s| &s.id.uuid == u));
            let idx = match existing {
                Some(i) => i,
                None => {
                    let index = h.gpu_index.unwrap_or_else(|| {
                        while taken.contains(&next_free)
                            || slots.iter().any(|s| s.id.index == next_free)
                        {
                            next_free += 1;
                        }
                        next_free
                    });
                    slots.push(GpuSlot {
                        id: GpuIdentity {
                            index,
                            uuid: h
                                .gpu_uuid
                                .clone()
                                .unwrap_or_else(|| format!("GPU-replay-{index}")),
                            name: h.gpu.clone().unwrap_or_else(|| "unknown".into()),
                            pci_bus_id: String::new(),
                            mig: None,
                        },
                        latest: None,
                    });
                    slots.len() - 1
                }
            };
            slot_of.push(idx);
        }
        // Align traces of one GPU: by t0_unix where all have it, else by start_offset_s.
        let mut base_t0: BTreeMap<usize, f64> = BTreeMap::new();
        for (t, &s) in traces.iter().zip(&slot_of) {
            if let Some(t0) = t.header.t0_unix {
                let e = base_t0.entry(s).or_insert(t0);
                *e = e.min(t0);
            }
        }
        let mut timeline = Vec::new();
        for (t, &s) in traces.into_iter().zip(&slot_of) {
            let offset = match (t.header.t0_unix, base_t0.get(&s)) {
                (Some(t0), Some(base)) => t0 - base,
                _ => t.header.start_offset_s.unwrap_or(0.0),
            };
            let pid = t.header.pid;
            for (ts, item) in t.items {
                timeline.push((ts + offset, s, pid, item));
            }
        }
        timeline.sort_by(|a, b| a.0.total_cmp(&b.0));
        ReplaySource {
            gpus: slots,
            timeline,
            cursor: 0,
            report_interval: 0.0,
            last_report: BTreeMap::new(),
        }
    }

    /// Send each process's allocator statistics at most once per `seconds` of trace time (the
    /// latest recorded sample when a report is due); events always pass.
    pub fn with_report_interval(mut self, seconds: f64) -> Self {
        self.report_interval = seconds.max(0.0);
        self
    }

    /// Seconds from the first to the last item.
    pub fn duration(&self) -> f64 {
        match (self.timeline.first(), self.timeline.last()) {
            (Some(a), Some(b)) => b.0 - a.0,
            _ => 0.0,
        }
    }

    /// Every failed allocation in the traces, in time order.
    pub fn failures(&self) -> Vec<Failure> {
        self.timeline
            .iter()
            .filter_map(|(t, slot, pid, item)| match item {
                Item::Event {
                    name,
                    message,
                    request_bytes,
                    device_free,
                } if name == "oom" => Some(Failure {
                    t: *t,
                    pid: *pid,
                    gpu: self.gpus[*slot].id.clone(),
                    request_bytes: *request_bytes,
                    device_free: *device_free,
                    message: message.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// The raw timeline, for the detection benchmark's ground truth.
    pub fn gpu_ids(&self) -> Vec<GpuIdentity> {
        self.gpus.iter().map(|g| g.id.clone()).collect()
    }
}

fn torch_report(uuid: &str, tp: &TorchPart) -> Report {
    Report {
        version: REPORT_VERSION,
        devices: vec![DeviceStats {
            uuid: uuid.to_string(),
            allocator: Some("pytorch".into()),
            allocated_bytes: tp.allocated,
            reserved_bytes: tp.reserved,
            active_bytes: tp.active,
            inactive_split_bytes: tp.inactive_split,
            segments: tp.segments,
            alloc_retries: tp.num_alloc_retries,
            ooms: tp.num_ooms,
            allocated_peak_bytes: tp.allocated_peak,
            reserved_peak_bytes: tp.reserved_peak,
            largest_free_block_bytes: tp.largest_free_cached,
        }],
        ..Default::default()
    }
}

impl Source for ReplaySource {
    fn kind(&self) -> &'static str {
        "replay"
    }

    fn gpu_indices(&self) -> Vec<u32> {
        self.gpus.iter().map(|g| g.id.index).collect()
    }

    fn sample(&mut self, t: Time) -> Observation {
        let mut obs = Observation {
            t,
            ..Default::default()
        };
        while let Some((ts, slot, pid, item)) = self.timeline.get(self.cursor) {
            if *ts > t {
                break;
            }
            let uuid = self.gpus[*slot].id.uuid.clone();
            match item {
                Item::Sample { nvml, torch } => {
                    if let Some(n) = nvml {
                        self.gpus[*slot].latest = Some(n.clone());
                    }
                    // A process that has not touched CUDA yet reports zeros: nothing to say.
                    if let Some(tp) = torch.as_ref().filter(|tp| tp.reserved > 0) {
                        let key = (*slot, *pid);
                        let due = self
                            .last_report
                            .get(&key)
                            .is_none_or(|last| ts - last >= self.report_interval - 1e-9);
                        if due {
                            self.last_report.insert(key, *ts);
                            obs.reports.push((*pid, torch_report(&uuid, tp)));
                        }
                    }
                }
                Item::Event {
                    name,
                    message,
                    request_bytes,
                    device_free,
                } => {
                    let kind = if name == "oom" {
                        EventKind::Oom
                    } else {
                        EventKind::Mark
                    };
                    if matches!(name.as_str(), "oom" | "empty_cache" | "model_ready") {
                        // An OOM names its device, and carries the failing request and the
                        // free bytes as the client's observer sends them.
                        let event = if kind == EventKind::Oom {
                            Event {
                                request_bytes: *request_bytes,
                                free_bytes: *device_free,
                                ..Event::named(kind, uuid.clone())
                            }
                        } else {
                            Event::named(kind, name.clone())
                        };
                        obs.reports.push((
                            *pid,
                            Report {
                                version: REPORT_VERSION,
                                events: vec![Event {
                                    message: message.clone(),
                                    ..event
                                }],
                                ..Default::default()
                            },
                        ));
                    }
                }
            }
            self.cursor += 1;
        }
        for g in &self.gpus {
            let Some(n) = &g.latest else { continue };
            let reserved = n.v2_reserved.unwrap_or(0);
            let used = n
                .v2_used
                .or(n.used.map(|u| u.saturating_sub(reserved)))
                .unwrap_or(0);
            obs.gpus.push(GpuReading {
                id: g.id.clone(),
                memory: Some(DeviceMemory {
                    total: n.total,
                    reserved,
                    used,
                    free: n.free,
                }),
                processes: n
                    .procs
                    .iter()
                    .map(|p| ProcessReading {
                        pid: p.pid,
                        used_bytes: p.used,
                        comm: None,
                    })
                    .collect(),
                errors: vec![],
            });
        }
        obs
    }

    fn next_time(&self) -> Option<Time> {
        self.timeline.get(self.cursor).map(|x| x.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = r#"{"kind":"header","pid":10,"gpu":"G","gpu_uuid":"GPU-a","gpu_index":3,"t0_unix":100.0}
{"kind":"sample","t":0.5,"nvml":{"total":100,"free":50,"v2_reserved":10,"v2_used":40,"procs":[{"pid":10,"used":40}]},"torch":{"allocated_bytes.all.current":5,"reserved_bytes.all.current":30}}
{"kind":"event","t":0.7,"name":"oom","error":"CUDA out of memory"}
"#;
    const B: &str = r#"{"kind":"header","pid":11,"gpu_uuid":"GPU-a","t0_unix":102.0}
{"kind":"sample","t":0.1,"nvml":{"total":100,"free":40,"v2_reserved":10,"v2_used":50,"procs":[{"pid":10,"used":40},{"pid":11,"used":10}]},"torch":{"allocated_bytes.all.current":1,"reserved_bytes.all.current":8}}
"#;
    const C: &str = r#"{"kind":"header","pid":12}
{"kind":"sample","t":1.0,"nvml":{"total":100,"free":90,"v2_reserved":10,"v2_used":0,"procs":[]}}
"#;

    fn traces() -> Vec<Trace> {
        vec![
            parse_trace(A.as_bytes(), "a").unwrap(),
            parse_trace(B.as_bytes(), "b").unwrap(),
            parse_trace(C.as_bytes(), "c").unwrap(),
        ]
    }

    #[test]
    fn same_uuid_merges_and_aligns_by_t0() {
        let mut r = ReplaySource::from_traces(traces());
        assert_eq!(r.gpus.len(), 2);
        assert_eq!(r.gpus[0].id.index, 3);
        assert_eq!(r.gpus[1].id.index, 0, "no gpu_index: first free index");
        let o = r.sample(1.0);
        assert_eq!(o.reports.len(), 2, "torch sample and oom event of trace A");
        assert_eq!(o.gpus.len(), 2);
        // B's sample sits at 102 - 100 + 0.1 = 2.1 s.
        assert_eq!(r.next_time(), Some(2.1));
        let o = r.sample(2.2);
        assert_eq!(o.reports[0].0, 11);
        let g = o.gpus.iter().find(|g| g.id.uuid == "GPU-a").unwrap();
        assert_eq!(g.processes.len(), 2);
        assert_eq!(g.memory.unwrap().used, 50);
    }

    #[test]
    fn times_out_of_range_and_overlong_lines_are_refused_naming_the_line() {
        for t in ["1e12", "-1e18", "604801"] {
            let text =
                format!("{{\"kind\":\"header\",\"pid\":1}}\n{{\"kind\":\"sample\",\"t\":{t}}}\n");
            let e = parse_trace(text.as_bytes(), "t.jsonl").unwrap_err();
            assert!(e.to_string().starts_with("t.jsonl:2: sample time"), "{e}");
            assert!(e.to_string().contains("out of range"), "{e}");
        }
        let text = "{\"kind\":\"header\",\"pid\":1,\"t0_unix\":1e999}\n";
        assert!(parse_trace(text.as_bytes(), "h").is_err());
        // A line longer than the limit, read from a reader that never ends: refused after
        // reading little more than the limit.
        let header = "{\"kind\":\"header\",\"pid\":1}\n".as_bytes();
        let endless = std::io::BufReader::new(header.chain(std::io::repeat(b' ')));
        let e = parse_trace(endless, "long.jsonl").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("long.jsonl:2: the line is longer than 1 MiB"),
            "{e}"
        );
    }

    #[test]
    fn traces_too_far_apart_to_replay_together_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.jsonl");
        let b = dir.path().join("b.jsonl");
        std::fs::write(&a, A).unwrap();
        std::fs::write(&b, B).unwrap();
        assert!(ReplaySource::open(&[a.clone(), b.clone()]).is_ok());
        // The same GPU, recorded a year later.
        std::fs::write(&b, B.replace("\"t0_unix\":102.0", "\"t0_unix\":31536102.0")).unwrap();
        let e = ReplaySource::open(&[a, b]).err().expect("refused");
        assert!(e.to_string().contains("at most 7 days"), "{e}");
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse_trace("{\"kind\":\"sample\",\"t\":1}\n".as_bytes(), "x.jsonl").unwrap_err();
        assert!(e.to_string().starts_with("x.jsonl:1:"), "{e}");
        let e = parse_trace(
            "{\"kind\":\"header\",\"pid\":1}\nnot json\n".as_bytes(),
            "y.jsonl",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("y.jsonl:2:"), "{e}");
    }
}
