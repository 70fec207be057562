//! `profile`: sample for a while, then write a report of each GPU's memory (current, peak,
//! statistics, processes, events and phases, a time series) and a chart of it.

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::process::ExitCode;

use super::chart::{self, HLine, Line, Marker, Panel};
use super::schema::{
    devices_in_order, CurrentMemory, DeviceProfile, EventRecord, Peaks, PhaseRecord,
    ProcessProfile, ProfileReport, Statistics, TimeSeries, SCHEMA_VERSION,
};
use super::workflow::{self, round, selected};
use crate::cli::ProfileArgs;
use crate::config::Config;
use crate::model::EventKind;
use crate::runtime::stepped::{self, Sampler, Tick};
use crate::snapshot::{GpuView, Snapshot};
use crate::units::{GIB, MIB};

/// Points kept per series; beyond it every other point is dropped (peaks are kept exactly).
const MAX_POINTS: usize = 20_000;
const MAX_EVENTS: usize = 1000;
/// Phase changes listed as events per GPU (all of them are counted in `phases`).
const MAX_PHASE_EVENTS: usize = 200;
/// Phase changes drawn on the chart at most; beyond it only marks and OOMs are drawn.
const MAX_PHASE_MARKERS: usize = 40;
/// Phase changes whose names are written on the chart at most.
const MAX_PHASE_LABELS: usize = 10;

/// Allocator sums over the processes of one GPU, or NVML's used where none reports.
pub fn allocator_sums(snap: &Snapshot, g: &GpuView) -> (u64, u64, bool) {
    let mut alloc = 0u64;
    let mut reserved = 0u64;
    let mut any = false;
    for p in snap.processes.iter().filter(|p| p.uuid == g.id.uuid) {
        if let Some(a) = &p.allocator {
            alloc += a.allocated_bytes;
            reserved += a.reserved_bytes;
            any = true;
        }
    }
    let used = g.memory.map(|m| m.used).unwrap_or(0);
    if any {
        (alloc, reserved, true)
    } else {
        (used, used, false)
    }
}

#[derive(Default)]
struct ProcAcc {
    pid: u32,
    comm: String,
    job: Option<String>,
    rank: Option<u64>,
    peak_used: Option<u64>,
    peak_allocated: Option<u64>,
    peak_reserved: Option<u64>,
    slope: Option<f64>,
    suspected: bool,
    first_seen: f64,
    last_seen: f64,
    phase: Option<String>,
}

#[derive(Default)]
struct DeviceAcc {
    index: u32,
    uuid: String,
    name: String,
    current: Option<CurrentMemory>,
    peak: Peaks,
    peak_alloc: Option<u64>,
    peak_reserved: Option<u64>,
    util_sum: f64,
    util_max: f64,
    n: u64,
    frag_sum: f64,
    frag_max: Option<f64>,
    frag_n: u64,
    cached_sum: f64,
    cached_max: Option<f64>,
    cached_n: u64,
    procs: BTreeMap<u32, ProcAcc>,
    events: Vec<EventRecord>,
    phase_events: usize,
    events_dropped: u64,
    phases: BTreeMap<String, (u64, f64)>,
    series: TimeSeries,
    stride: usize,
    counter: usize,
}

fn max_opt(a: Option<u64>, b: u64) -> Option<u64> {
    Some(a.map_or(b, |a| a.max(b)))
}

impl DeviceAcc {
    fn push_event(&mut self, e: EventRecord) {
        let phase = e.kind == "phase";
        if self.events.len() >= MAX_EVENTS || (phase && self.phase_events >= MAX_PHASE_EVENTS) {
            self.events_dropped += 1;
            return;
        }
        if phase {
            self.phase_events += 1;
        }
        self.events.push(e);
    }

    fn push_point(&mut self, t: f64, used: u64, reserved: u64, allocated: u64) {
        if self.stride == 0 {
            self.stride = 1;
        }
        if self.counter % self.stride == 0 {
            self.series.t.push(round(t, 3));
            self.series.used.push(used);
            self.series.reserved.push(reserved);
            self.series.allocated.push(allocated);
            if self.series.t.len() > MAX_POINTS {
                let keep = |v: &mut Vec<u64>| {
                    let mut i = 0;
                    v.retain(|_| {
                        i += 1;
                        (i - 1) % 2 == 0
                    });
                };
                let mut i = 0;
                self.series.t.retain(|_| {
                    i += 1;
                    (i - 1) % 2 == 0
                });
                keep(&mut self.series.used);
                keep(&mut self.series.reserved);
                keep(&mut self.series.allocated);
                self.stride *= 2;
            }
        }
        self.counter += 1;
    }
}

/// Everything a profile run gathers, sample by sample.
pub struct Profiler {
    devices: Vec<u32>,
    accs: BTreeMap<u32, DeviceAcc>,
    /// pid → GPU uuids it was seen on (for reports that name no device, such as events).
    pid_gpus: HashMap<u32, Vec<String>>,
    last_t: Option<f64>,
}

impl Profiler {
    pub fn new(devices: &[u32]) -> Self {
        Profiler {
            devices: devices.to_vec(),
            accs: BTreeMap::new(),
            pid_gpus: HashMap::new(),
            last_t: None,
        }
    }

    pub fn observe(&mut self, tick: &Tick) {
        let t = tick.t;
        let dt = self.last_t.map(|l| (t - l).max(0.0)).unwrap_or(0.0);
        self.last_t = Some(t);
        let snap = tick.snap;
        let index_of: HashMap<&str, u32> = snap
            .gpus
            .iter()
            .map(|g| (g.id.uuid.as_str(), g.id.index))
            .collect();
        for g in &snap.gpus {
            if !selected(&self.devices, g.id.index) {
                continue;
            }
            let Some(m) = g.memory else { continue };
            let acc = self.accs.entry(g.id.index).or_default();
            acc.index = g.id.index;
            acc.uuid = g.id.uuid.clone();
            acc.name = g.id.name.clone();
            let (alloc, reserved, reported) = allocator_sums(snap, g);
            let util = g.used_fraction().unwrap_or(0.0) * 100.0;
            acc.current = Some(CurrentMemory {
                allocated: alloc,
                reserved,
                used: m.used,
                free: m.free,
                total: m.total,
                driver_reserved: m.reserved,
                utilization: round(util, 2),
                allocator_reported: reported,
            });
            if m.used > acc.peak.used || acc.n == 0 {
                acc.peak.used = m.used;
                acc.peak.used_at = round(t, 3);
            }
            if reported {
                acc.peak_alloc = max_opt(acc.peak_alloc, alloc);
                acc.peak_reserved = max_opt(acc.peak_reserved, reserved);
            }
            acc.util_sum += util;
            acc.util_max = acc.util_max.max(util);
            acc.n += 1;
            if let Some(f) = g.fragmentation {
                acc.frag_sum += f;
                acc.frag_n += 1;
                acc.frag_max = Some(acc.frag_max.map_or(f, |x: f64| x.max(f)));
            }
            if let Some(c) = g.cached_unallocated {
                acc.cached_sum += c;
                acc.cached_n += 1;
                acc.cached_max = Some(acc.cached_max.map_or(c, |x: f64| x.max(c)));
            }
            acc.push_point(t, m.used, reserved, alloc);
            for p in snap.processes.iter().filter(|p| p.uuid == g.id.uuid) {
                let e = acc.procs.entry(p.pid).or_insert_with(|| ProcAcc {
                    pid: p.pid,
                    first_seen: round(t, 3),
                    ..Default::default()
                });
                if !p.comm.is_empty() {
                    e.comm = p.comm.clone();
                }
                if p.identity.job.is_some() {
                    e.job = p.identity.job.clone();
                }
                if p.identity.rank.is_some() {
                    e.rank = p.identity.rank;
                }
                if let Some(u) = p.nvml_used {
                    e.peak_used = max_opt(e.peak_used, u);
                }
                if let Some(a) = &p.allocator {
                    e.peak_allocated = max_opt(e.peak_allocated, a.allocated_bytes);
                    e.peak_reserved = max_opt(e.peak_reserved, a.reserved_bytes);
                }
                e.slope = p.leak_slope.map(|s| round(s * 60.0 / MIB, 2));
                e.suspected = p.leak_suspected;
                e.last_seen = round(t, 3);
                if let Some(phase) = &e.phase {
                    acc.phases.entry(phase.clone()).or_default().1 += dt;
                }
                self.pid_gpus
                    .entry(p.pid)
                    .or_default()
                    .retain(|u| u != &g.id.uuid);
                self.pid_gpus
                    .entry(p.pid)
                    .or_default()
                    .push(g.id.uuid.clone());
            }
        }
        // Events and phase changes come from the reports in this observation.
        for (pid, report) in &tick.obs.reports {
            let uuids: Vec<String> = if report.devices.is_empty() {
                self.pid_gpus.get(pid).cloned().unwrap_or_default()
            } else {
                report.devices.iter().map(|d| d.uuid.clone()).collect()
            };
            // Some(Some(p)): in phase p; Some(None): outside any phase; None: no news.
            let phase: Option<Option<String>> = report.phase.clone().or_else(|| {
                report
                    .events
                    .iter()
                    .rev()
                    .find(|e| e.kind == EventKind::Phase)
                    .map(|e| Some(e.name.clone()))
            });
            for uuid in uuids {
                let Some(&index) = index_of.get(uuid.as_str()) else {
                    continue;
                };
                let Some(acc) = self.accs.get_mut(&index) else {
                    continue;
                };
                for e in &report.events {
                    let kind = match e.kind {
                        EventKind::Phase => continue,
                        EventKind::Mark => "mark",
                        EventKind::Oom => "oom",
                    };
                    let name = if e.kind == EventKind::Oom {
                        "oom".to_string()
                    } else {
                        e.name.clone()
                    };
                    acc.push_event(EventRecord {
                        t: round(t, 3),
                        pid: *pid,
                        kind: kind.into(),
                        name,
                    });
                }
                if let Some(phase) = &phase {
                    let pa = acc.procs.entry(*pid).or_insert_with(|| ProcAcc {
                        pid: *pid,
                        first_seen: round(t, 3),
                        last_seen: round(t, 3),
                        ..Default::default()
                    });
                    if &pa.phase != phase {
                        pa.phase = phase.clone();
                        if let Some(name) = phase {
                            acc.phases.entry(name.clone()).or_default().0 += 1;
                            acc.push_event(EventRecord {
                                t: round(t, 3),
                                pid: *pid,
                                kind: "phase".into(),
                                name: name.clone(),
                            });
                        }
                    }
                }
            }
        }
    }

    pub fn finish(
        self,
        source: String,
        tags: BTreeMap<String, String>,
        end: &stepped::RunEnd,
        requested: Option<f64>,
        interval: Option<f64>,
    ) -> ProfileReport {
        let mut devices = BTreeMap::new();
        for (index, a) in self.accs {
            let Some(current) = a.current else { continue };
            let avg = |sum: f64, n: u64| (n > 0).then(|| round(sum / n as f64, 4));
            devices.insert(
                index.to_string(),
                DeviceProfile {
                    index,
                    uuid: a.uuid,
                    name: a.name,
                    current_memory: current,
                    peak_memory: a.peak.used,
                    peak: Peaks {
                        allocated: a.peak_alloc,
                        reserved: a.peak_reserved,
                        ..a.peak
                    },
                    statistics: Statistics {
                        avg_utilization: avg(a.util_sum, a.n).map(|v| round(v, 2)).unwrap_or(0.0),
                        max_utilization: round(a.util_max, 2),
                        avg_fragmentation: avg(a.frag_sum, a.frag_n),
                        max_fragmentation: a.frag_max.map(|v| round(v, 4)),
                        avg_cached_unallocated: avg(a.cached_sum, a.cached_n),
                        max_cached_unallocated: a.cached_max.map(|v| round(v, 4)),
                        num_snapshots: a.n,
                    },
                    processes: a
                        .procs
                        .into_values()
                        .map(|p| ProcessProfile {
                            pid: p.pid,
                            comm: p.comm,
                            job: p.job,
                            rank: p.rank,
                            peak_used: p.peak_used,
                            peak_allocated: p.peak_allocated,
                            peak_reserved: p.peak_reserved,
                            leak_slope_mib_per_min: p.slope,
                            leak_suspected: p.suspected,
                            first_seen: p.first_seen,
                            last_seen: p.last_seen,
                        })
                        .collect(),
                    events: a.events,
                    events_dropped: a.events_dropped,
                    phases: a
                        .phases
                        .into_iter()
                        .map(|(name, (entries, seconds))| PhaseRecord {
                            name,
                            entries,
                            seconds: round(seconds, 3),
                        })
                        .collect(),
                    series: a.series,
                },
            );
        }
        ProfileReport {
            schema_version: SCHEMA_VERSION,
            kind: "profile".into(),
            generated_at: workflow::now_rfc3339(),
            source,
            tags,
            duration: round(end.covered, 3),
            requested_duration: requested,
            interval,
            interrupted: end.interrupted,
            devices,
        }
    }
}

/// The chart: used, reserved and allocated over time per GPU, capacity, phase markers.
pub fn panels(r: &ProfileReport) -> Vec<Panel> {
    devices_in_order(r)
        .into_iter()
        .map(|d| {
            let s = &d.series;
            let pts = |v: &[u64]| -> Vec<(f64, Option<f64>)> {
                s.t.iter()
                    .zip(v)
                    .map(|(t, v)| (*t, Some(*v as f64 / GIB)))
                    .collect()
            };
            let total = d.current_memory.total as f64 / GIB;
            let peak = s
                .used
                .iter()
                .chain(&s.reserved)
                .chain(&s.allocated)
                .copied()
                .max()
                .unwrap_or(0) as f64
                / GIB;
            let phase_changes = d.events.iter().filter(|e| e.kind == "phase").count();
            let markers = d
                .events
                .iter()
                .filter(|e| e.kind != "phase" || phase_changes <= MAX_PHASE_MARKERS)
                .map(|e| Marker {
                    x: e.t,
                    // Many phase changes: lines only, their names would overlap.
                    label: if e.kind == "phase" && phase_changes > MAX_PHASE_LABELS {
                        String::new()
                    } else {
                        e.name.clone()
                    },
                    color: match e.kind.as_str() {
                        "oom" => chart::RED,
                        "mark" => chart::PURPLE,
                        _ => chart::GREY,
                    },
                })
                .collect();
            let suffix = if d.current_memory.allocator_reported {
                ""
            } else {
                " (NVML)"
            };
            // Scale to the data when it keeps far below capacity, so that its shape shows.
            let on_scale = peak >= 0.4 * total;
            let hlines = if on_scale {
                vec![HLine {
                    y: total,
                    label: format!("capacity {:.1} GiB", total),
                    color: chart::RED,
                }]
            } else {
                Vec::new()
            };
            let capacity_note = if on_scale {
                String::new()
            } else {
                format!(" · capacity {total:.1} GiB (off scale)")
            };
            Panel {
                title: format!("GPU {} · {} · {}{capacity_note}", d.index, d.name, r.source),
                y_label: "GiB".into(),
                x_max: s.t.last().copied().unwrap_or(0.0).max(r.duration),
                y_max: if on_scale {
                    (total.max(peak) * 1.08).max(0.1)
                } else {
                    (peak * 1.25).max(0.1)
                },
                lines: vec![
                    Line {
                        label: "used (NVML)".into(),
                        color: chart::BLUE,
                        width: 1,
                        points: pts(&s.used),
                    },
                    Line {
                        label: format!("reserved{suffix}"),
                        color: chart::ORANGE,
                        width: 1,
                        points: pts(&s.reserved),
                    },
                    Line {
                        label: format!("allocated{suffix}"),
                        color: chart::GREEN,
                        width: 1,
                        points: pts(&s.allocated),
                    },
                ],
                hlines,
                markers,
                bands: vec![],
            }
        })
        .collect()
}

pub fn run(cfg: &Config, args: ProfileArgs) -> anyhow::Result<ExitCode> {
    // Everything that can be wrong with the flags is checked before the first sample.
    if let Some(o) = &args.output {
        workflow::check_writable(o, "--output")?;
    }
    let plots = workflow::check_plots(&args.plot)?;
    let mut tags = BTreeMap::new();
    for (k, v) in &args.tags {
        if tags.insert(k.clone(), v.clone()).is_some() {
            return Err(stepped::usage("--tag", format!("key `{k}` given twice")));
        }
    }
    let mut sampler = Sampler::open(cfg, args.sampling.interval)?;
    sampler.check_devices(&args.sampling.devices)?;
    crate::logging::init(cfg);
    let limit = workflow::run_limit(&args.sampling, sampler.is_replay());
    let interval = if sampler.is_replay() {
        args.sampling.interval.map(|d| d.as_secs_f64())
    } else {
        Some(sampler.interval().as_secs_f64())
    };
    let mut profiler = Profiler::new(&args.sampling.devices);
    let end = sampler.run(limit, Some("profiling"), |tick| {
        profiler.observe(tick);
        ControlFlow::Continue(())
    });
    let report = profiler.finish(workflow::source_label(cfg), tags, &end, limit, interval);
    if report.devices.is_empty() {
        anyhow::bail!("no GPU memory was read: nothing to report");
    }
    for (path, kind) in &plots {
        chart::render_panels(path, *kind, &panels(&report), "seconds")?;
    }
    workflow::emit(args.output.as_deref(), &report, print_summary)?;
    for (path, _) in &plots {
        eprintln!("chart written to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// A short table on stdout.
fn print_summary(r: &ProfileReport) {
    println!(
        "profile of {} over {:.1} s{}",
        r.source,
        r.duration,
        if r.interrupted { " (interrupted)" } else { "" }
    );
    println!(
        "{:<4} {:<34} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6}",
        "GPU", "name", "used GiB", "peak GiB", "alloc pk", "total", "avg %", "max %", "frag"
    );
    for d in devices_in_order(r) {
        let name: String = d.name.chars().take(34).collect();
        println!(
            "{:<4} {:<34} {:>9} {:>9} {:>9} {:>9} {:>7.1} {:>7.1} {:>6}",
            d.index,
            name,
            workflow::gib(d.current_memory.used as f64),
            workflow::gib(d.peak_memory as f64),
            d.peak
                .allocated
                .map(|v| workflow::gib(v as f64))
                .unwrap_or_else(|| "-".into()),
            workflow::gib(d.current_memory.total as f64),
            d.statistics.avg_utilization,
            d.statistics.max_utilization,
            d.statistics
                .avg_fragmentation
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "-".into()),
        );
    }
}
