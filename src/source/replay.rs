//! Replay of recorded traces (format: the traces README). Several files may describe one GPU
//! (same `gpu_uuid`); they are merged onto it and aligned by `t0_unix` or `start_offset_s`.
//! The NVML part of each sample feeds the source path, the `torch` part the allocator-report
//! path, exactly as live data would.
//!
//! Replay tells the truth about its input: each trace is read through once and checked (every
//! line, its time order: see `Order`), then replayed as it is read again, so that memory
//! follows `REORDER_WINDOW_SECONDS` of trace time, not the length of the file.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::io::{BufRead, Read as _};
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

/// One trace file, parsed whole (in memory: the fuzzer and tests; `ReplaySource::open` reads
/// files as it goes instead).
#[derive(Debug, Clone)]
pub struct Trace {
    pub path: PathBuf,
    pub header: Header,
    /// (seconds since the trace started, item), in file order.
    pub items: Vec<(f64, Item)>,
}

mod read;
pub use read::*;

struct GpuSlot {
    id: GpuIdentity,
    latest: Option<NvmlPart>,
}

/// `a` before `b` in replay order: by time; lines of one time in the order of their traces,
/// then of their lines (the order a stable sort of all lines by time gives).
#[derive(Debug, Clone, Copy, PartialEq)]
struct At(f64, usize, u64);

impl Eq for At {}

impl PartialOrd for At {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for At {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .total_cmp(&other.0)
            .then(self.1.cmp(&other.1))
            .then(self.2.cmp(&other.2))
    }
}

/// One trace read as the replay goes, `REORDER_WINDOW_SECONDS` ahead of what it hands on.
struct Stream {
    lines: Lines<Reader>,
    offset: f64,
    /// Items read but not yet handed on, soonest first.
    ahead: BinaryHeap<Reverse<(At, ItemBox)>>,
    newest: f64,
    done: bool,
}

/// An item in a heap ordered by its `At` alone.
struct ItemBox(Item);

impl PartialEq for ItemBox {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for ItemBox {}
impl PartialOrd for ItemBox {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ItemBox {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl Stream {
    fn next(&mut self) -> Option<(f64, Item)> {
        loop {
            if let Some(Reverse((at, _))) = self.ahead.peek() {
                if self.done || at.0 <= self.newest - REORDER_WINDOW_SECONDS {
                    let Reverse((at, item)) = self.ahead.pop().expect("peeked");
                    return Some((at.0, item.0));
                }
            } else if self.done {
                return None;
            }
            match self.lines.next() {
                Ok(Some(r)) => {
                    let t = r.t + self.offset;
                    self.newest = self.newest.max(t);
                    self.ahead
                        .push(Reverse((At(t, 0, r.line as u64), ItemBox(r.item))));
                }
                Ok(None) => self.done = true,
                // The file changed since it was checked: the replay goes on without the rest.
                Err(e) => {
                    tracing::error!(error = %e, "trace no longer readable: the rest of it is left out");
                    self.done = true;
                }
            }
        }
    }
}

/// Where a trace's items come from during the replay.
enum Feed {
    /// Already in memory, in replay order (parsed whole, or sorted).
    Memory(std::vec::IntoIter<(f64, Item)>),
    Stream(Box<Stream>),
}

impl Feed {
    fn next(&mut self) -> Option<(f64, Item)> {
        match self {
            Feed::Memory(it) => it.next(),
            Feed::Stream(s) => s.next(),
        }
    }
}

/// One trace of the replay: its GPU, its process, and its next item.
struct Track {
    slot: usize,
    pid: u32,
    feed: Feed,
    head: Option<(f64, Item)>,
    seq: u64,
}

/// Several traces merged into one timeline, read as it goes: memory holds each trace's next
/// `REORDER_WINDOW_SECONDS`, not the traces.
pub struct ReplaySource {
    gpus: Vec<GpuSlot>,
    tracks: Vec<Track>,
    /// The next item of each track, soonest first.
    queue: BinaryHeap<Reverse<At>>,
    span: Option<(f64, f64)>,
    failures: Vec<Failure>,
    /// Seconds between the allocator reports a process sends (0: every recorded sample, as
    /// recorded). Recorders sample faster than clients report; a forecast is judged at the
    /// rate it runs at.
    report_interval: f64,
    /// (slot, pid) → trace time of the last report sent.
    last_report: BTreeMap<(usize, u32), f64>,
}

/// The GPUs of a replay from its traces' headers: by uuid where given, else each trace its own
/// GPU; and each trace's offset on its GPU's clock (by `t0_unix` where all of a GPU's traces
/// have it, else by `start_offset_s`).
fn layout(headers: &[&Header]) -> (Vec<GpuSlot>, Vec<usize>, Vec<f64>) {
    let mut slots: Vec<GpuSlot> = Vec::new();
    let mut slot_of = Vec::with_capacity(headers.len());
    let taken: Vec<u32> = headers.iter().filter_map(|h| h.gpu_index).collect();
    let mut next_free = 0u32;
    for h in headers {
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
    let mut base_t0: BTreeMap<usize, f64> = BTreeMap::new();
    for (h, &s) in headers.iter().zip(&slot_of) {
        if let Some(t0) = h.t0_unix {
            let e = base_t0.entry(s).or_insert(t0);
            *e = e.min(t0);
        }
    }
    let offsets = headers
        .iter()
        .zip(&slot_of)
        .map(|(h, s)| match (h.t0_unix, base_t0.get(s)) {
            (Some(t0), Some(base)) => t0 - base,
            _ => h.start_offset_s.unwrap_or(0.0),
        })
        .collect();
    (slots, slot_of, offsets)
}

impl ReplaySource {
    /// Read and merge the traces, refusing one out of time order; see `open_with`.
    pub fn open(paths: &[PathBuf]) -> Result<Self, TraceError> {
        Self::open_with(paths, Disorder::Refuse)
    }

    /// Check each trace through once (every line parsed, its time order, the traces' span),
    /// then replay them as they are read again. Refused where a line is malformed or out of
    /// time order (unless `disorder` sorts), and where, once aligned, the traces span more than
    /// `MAX_TRACE_SECONDS` (recordings days apart put on one GPU, or a forged `t0_unix`).
    pub fn open_with(paths: &[PathBuf], disorder: Disorder) -> Result<Self, TraceError> {
        let scans = paths
            .iter()
            .map(|p| scan(p, disorder))
            .collect::<Result<Vec<_>, _>>()?;
        let headers: Vec<&Header> = scans.iter().map(|s| &s.header).collect();
        let (gpus, slot_of, offsets) = layout(&headers);
        let pids = headers_pids(&headers);
        let mut span: Option<(f64, f64)> = None;
        let mut failures = Vec::new();
        let mut feeds = Vec::with_capacity(scans.len());
        for (i, (sc, path)) in scans.into_iter().zip(paths).enumerate() {
            let offset = offsets[i];
            if let Some((a, b)) = sc.span {
                let (a, b) = (a + offset, b + offset);
                span = Some(span.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
            }
            for (t, line, item) in sc.ooms {
                failures.push((At(t + offset, i, line as u64), item));
            }
            let feed = match sc.sorted {
                Some(items) => Feed::Memory(
                    items
                        .into_iter()
                        .map(|(t, item)| (t + offset, item))
                        .collect::<Vec<_>>()
                        .into_iter(),
                ),
                None => Feed::Stream(Box::new(Stream {
                    lines: Lines::new(open_file(path)?, &path.display().to_string(), false)?,
                    offset,
                    ahead: BinaryHeap::new(),
                    newest: f64::NEG_INFINITY,
                    done: false,
                })),
            };
            feeds.push((i, feed));
        }
        let replay = Self::assemble(gpus, slot_of, &pids, feeds, span, failures);
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

    /// Merge traces already in memory.
    pub fn from_traces(traces: Vec<Trace>) -> Self {
        let headers: Vec<&Header> = traces.iter().map(|t| &t.header).collect();
        let (gpus, slot_of, offsets) = layout(&headers);
        let pids = headers_pids(&headers);
        let mut span: Option<(f64, f64)> = None;
        let mut failures = Vec::new();
        let mut feeds = Vec::with_capacity(traces.len());
        for (i, t) in traces.into_iter().enumerate() {
            let mut items: Vec<(f64, Item)> = t
                .items
                .into_iter()
                .map(|(ts, item)| (ts + offsets[i], item))
                .collect();
            items.sort_by(|a, b| a.0.total_cmp(&b.0));
            if let (Some(a), Some(b)) = (items.first(), items.last()) {
                span = Some(span.map_or((a.0, b.0), |(x, y)| (x.min(a.0), y.max(b.0))));
            }
            for (n, (ts, item)) in items.iter().enumerate() {
                if matches!(item, Item::Event { name, .. } if name == "oom") {
                    failures.push((At(*ts, i, n as u64), item.clone()));
                }
            }
            feeds.push((i, Feed::Memory(items.into_iter())));
        }
        Self::assemble(gpus, slot_of, &pids, feeds, span, failures)
    }

    fn assemble(
        gpus: Vec<GpuSlot>,
        slot_of: Vec<usize>,
        pids: &[u32],
        feeds: Vec<(usize, Feed)>,
        span: Option<(f64, f64)>,
        mut failures: Vec<(At, Item)>,
    ) -> Self {
        failures.sort_by_key(|f| f.0);
        let failures = failures
            .into_iter()
            .filter_map(|(at, item)| match item {
                Item::Event {
                    message,
                    request_bytes,
                    device_free,
                    ..
                } => Some(Failure {
                    t: at.0,
                    pid: pids[at.1],
                    gpu: gpus[slot_of[at.1]].id.clone(),
                    request_bytes,
                    device_free,
                    message,
                }),
                Item::Sample { .. } => None,
            })
            .collect();
        let mut r = ReplaySource {
            gpus,
            tracks: Vec::with_capacity(feeds.len()),
            queue: BinaryHeap::new(),
            span,
            failures,
            report_interval: 0.0,
            last_report: BTreeMap::new(),
        };
        for (i, feed) in feeds {
            r.tracks.push(Track {
                slot: slot_of[i],
                pid: pids[i],
                feed,
                head: None,
                seq: 0,
            });
            r.advance(r.tracks.len() - 1);
        }
        r
    }

    /// Read track `i`'s next item into its head, and queue it.
    fn advance(&mut self, i: usize) {
        let track = &mut self.tracks[i];
        track.head = track.feed.next();
        track.seq += 1;
        if let Some((t, _)) = &track.head {
            self.queue.push(Reverse(At(*t, i, track.seq)));
        }
    }

    /// The next item of the merged timeline: (time, GPU slot, pid, item).
    fn pop(&mut self) -> Option<(f64, usize, u32, Item)> {
        let Reverse(at) = self.queue.pop()?;
        let track = &mut self.tracks[at.1];
        let (t, item) = track.head.take().expect("a queued track has a head");
        let (slot, pid) = (track.slot, track.pid);
        self.advance(at.1);
        Some((t, slot, pid, item))
    }

    /// Send each process's allocator statistics at most once per `seconds` of trace time (the
    /// latest recorded sample when a report is due); events always pass.
    pub fn with_report_interval(mut self, seconds: f64) -> Self {
        self.report_interval = seconds.max(0.0);
        self
    }

    /// Seconds from the first to the last item.
    pub fn duration(&self) -> f64 {
        self.span.map_or(0.0, |(a, b)| b - a)
    }

    /// Every failed allocation in the traces, in time order.
    pub fn failures(&self) -> Vec<Failure> {
        self.failures.clone()
    }

    /// The GPUs the traces describe.
    pub fn gpu_ids(&self) -> Vec<GpuIdentity> {
        self.gpus.iter().map(|g| g.id.clone()).collect()
    }
}

fn headers_pids(headers: &[&Header]) -> Vec<u32> {
    headers.iter().map(|h| h.pid).collect()
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
        while self.queue.peek().is_some_and(|Reverse(at)| at.0 <= t) {
            let Some((ts, slot, pid, item)) = self.pop() else {
                break;
            };
            let uuid = self.gpus[slot].id.uuid.clone();
            match item {
                Item::Sample { nvml, torch } => {
                    if let Some(n) = nvml {
                        self.gpus[slot].latest = Some(n);
                    }
                    // A process that has not touched CUDA yet reports zeros: nothing to say.
                    if let Some(tp) = torch.as_ref().filter(|tp| tp.reserved > 0) {
                        let key = (slot, pid);
                        let due = self
                            .last_report
                            .get(&key)
                            .is_none_or(|last| ts - last >= self.report_interval - 1e-9);
                        if due {
                            self.last_report.insert(key, ts);
                            obs.reports.push((pid, torch_report(&uuid, tp)));
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
                                request_bytes,
                                free_bytes: device_free,
                                ..Event::named(kind, uuid.clone())
                            }
                        } else {
                            Event::named(kind, name.clone())
                        };
                        obs.reports.push((
                            pid,
                            Report {
                                version: REPORT_VERSION,
                                events: vec![Event { message, ..event }],
                                ..Default::default()
                            },
                        ));
                    }
                }
            }
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
        self.queue.peek().map(|Reverse(at)| at.0)
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

    fn trace_of(lines: &[&str]) -> Result<Trace, TraceError> {
        let text = format!("{{\"kind\":\"header\",\"pid\":1}}\n{}\n", lines.join("\n"));
        parse_trace(text.as_bytes(), "o.jsonl")
    }

    const S: &str = r#"{"kind":"sample","t":T,"nvml":{"total":1,"free":1,"procs":[]}}"#;
    const P: &str = r#"{"kind":"sample","t":T,"torch":{"allocated_bytes.all.current":1,"reserved_bytes.all.current":2}}"#;
    const E: &str = r#"{"kind":"event","t":T,"name":"N"}"#;

    fn at(line: &str, t: &str) -> String {
        line.replace('T', t)
    }

    #[test]
    fn each_stream_goes_forward_and_the_streams_may_interleave_within_the_window() {
        // A recorder's interleaving: events and allocator samples a little behind NVML's.
        let ok = [
            at(S, "1"),
            at(S, "2"),
            at(E, "1.5").replace('N', "step"),
            at(P, "1.2"),
            at(S, "3"),
            at(P, "2.2"),
            at(E, "1.5").replace('N', "model_ready"),
            at(S, "62"),
        ];
        let t = trace_of(&ok.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        assert_eq!(t.items.len(), 8);
        let refused = |lines: &[String], want: &str, line: usize| {
            let e = trace_of(&lines.iter().map(String::as_str).collect::<Vec<_>>()).unwrap_err();
            let text = e.to_string();
            assert!(text.starts_with(&format!("o.jsonl:{line}: ")), "{text}");
            assert!(text.contains(want), "{text}");
        };
        refused(&[at(S, "2"), at(S, "1")], "goes back from 2", 3);
        refused(&[at(S, "2"), at(S, "2")], "repeats line 2's", 3);
        refused(&[at(P, "2"), at(S, "5"), at(P, "2")], "repeats line 2's", 4);
        let e = at(E, "4").replace('N', "step");
        refused(&[e.clone(), e], "repeats line 2", 3);
        // Past the window between streams.
        refused(
            &[at(S, "100"), at(P, "30")],
            "lies 70.0 s before line 2's",
            3,
        );
    }

    #[test]
    fn sorting_keeps_one_of_each_repeated_line_and_the_order_of_one_time() {
        let mut items: Vec<(f64, Item)> = Vec::new();
        let sample = |nvml: bool| Item::Sample {
            nvml: nvml.then(|| NvmlPart {
                total: 1,
                used: None,
                free: 1,
                v2_reserved: None,
                v2_used: None,
                procs: vec![],
            }),
            torch: None,
        };
        let event = |n: &str| Item::Event {
            name: n.into(),
            message: None,
            request_bytes: None,
            device_free: None,
        };
        items.extend([
            (2.0, sample(true)),
            (1.0, event("a")),
            (1.0, sample(true)),
            (1.0, event("b")),
            (1.0, sample(true)),
            (1.0, event("a")),
            (0.5, sample(false)),
        ]);
        assert_eq!(sort_and_dedup(&mut items), 2);
        let shape: Vec<(f64, String)> = items
            .iter()
            .map(|(t, i)| {
                let what = match i {
                    Item::Event { name, .. } => name.clone(),
                    Item::Sample { nvml, .. } => format!("sample{}", nvml.is_some()),
                };
                (*t, what)
            })
            .collect();
        assert_eq!(
            shape,
            [
                (0.5, "samplefalse".to_string()),
                (1.0, "a".into()),
                (1.0, "sampletrue".into()),
                (1.0, "b".into()),
                (2.0, "sampletrue".into()),
            ]
        );
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
