//! The metric families of one snapshot: the single place where metric names, labels and help
//! texts are decided. `/metrics` (both encodings) and the replay timeline read this.
//!
//! [`visit`] walks the snapshot and hands each family to a [`Sink`] with labels borrowed from
//! the snapshot, so a scrape of 8 GPUs × 64 processes (13 500 series) is encoded without
//! building one owned label string; [`families`] collects owned copies where a caller wants
//! values (the replay timeline, tests).

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::Serialize;

use crate::analysis::incident::{EpisodeOutcome, OomKind, Outcome, Score};
use crate::connections::Listener;
use crate::model::DeviceStats;
use crate::model::RejectReason;
use crate::runtime::telemetry::Counters;
use crate::snapshot::{GpuView, OomEventView, PodLabels, ProcessView, Snapshot};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Gauge,
    Counter,
}

/// A label value as the snapshot holds it; numbers are formatted by the encoder.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LabelValue<'a> {
    Str(&'a str),
    Int(u64),
}

impl fmt::Display for LabelValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LabelValue::Str(s) => f.write_str(s),
            LabelValue::Int(i) => write!(f, "{i}"),
        }
    }
}

pub type Label<'a> = (&'static str, LabelValue<'a>);

/// What a family is, apart from its series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Desc {
    /// The full name as it appears on samples (counters end in `_total`).
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    /// OpenMetrics unit, which is also the end of the name.
    pub unit: Option<&'static str>,
}

/// Receives one series of the family being visited.
pub type Emit<'e> = dyn FnMut(&[Label<'_>], f64) -> fmt::Result + 'e;
/// Emits every series of one family; calling it again emits the same series again.
pub type SeriesFn<'s> = dyn Fn(&mut Emit<'_>) -> fmt::Result + 's;

/// An encoder of families. A family whose `series` emits nothing must not appear in the
/// output at all (no HELP or TYPE line either).
pub trait Sink {
    fn family(&mut self, desc: &Desc, series: &SeriesFn<'_>) -> fmt::Result;
}

/// Owned labels, for callers that keep series beyond the snapshot.
pub type Labels = Vec<(&'static str, String)>;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    pub labels: Labels,
    pub value: f64,
}

/// One family with owned copies of its series.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub series: Vec<Series>,
}

/// The labels of one series, on the stack: the most any family has is an OOM event's, a
/// GPU's four, the process's five and four of its own.
#[derive(Clone, Copy)]
struct LabelSet<'a> {
    items: [Label<'a>; 16],
    len: usize,
}

impl<'a> LabelSet<'a> {
    fn of(labels: &[Label<'a>]) -> Self {
        LabelSet {
            items: [("", LabelValue::Str("")); 16],
            len: 0,
        }
        .with(labels)
    }

    fn with(mut self, extra: &[Label<'a>]) -> Self {
        self.items[self.len..self.len + extra.len()].copy_from_slice(extra);
        self.len += extra.len();
        self
    }

    fn get(&self) -> &[Label<'a>] {
        &self.items[..self.len]
    }
}

use LabelValue::{Int, Str};

/// A GPU's labels; a MIG instance, a memory domain of its own, adds where it sits on its GPU.
fn gpu_labels(g: &GpuView) -> LabelSet<'_> {
    let l = LabelSet::of(&[("gpu", Int(g.id.index.into())), ("uuid", Str(&g.id.uuid))]);
    match &g.id.mig {
        Some(m) => l.with(&[
            ("gpu_instance", Int(m.gpu_instance.into())),
            ("mig_profile", Str(&m.profile)),
        ]),
        None => l,
    }
}

/// `l` with a pod's labels, where the process runs in one.
fn with_pod<'a>(l: LabelSet<'a>, pod: Option<&'a PodLabels>) -> LabelSet<'a> {
    match pod {
        Some(pod) => l.with(&[
            ("namespace", Str(&pod.namespace)),
            ("pod", Str(&pod.pod)),
            ("container", Str(&pod.container)),
        ]),
        None => l,
    }
}

/// An OOM event's labels: its GPU and its number there.
fn oom_event_labels<'a>(g: &'a GpuView, e: &OomEventView) -> LabelSet<'a> {
    gpu_labels(g).with(&[("event", Int(e.event))])
}

fn process_labels(p: &ProcessView) -> LabelSet<'_> {
    let gpu = p.gpu.map_or(Str(""), |g| Int(g.into()));
    let l = LabelSet::of(&[
        ("gpu", gpu),
        ("uuid", Str(&p.uuid)),
        ("pid", Int(p.pid.into())),
        ("comm", Str(&p.comm)),
    ]);
    with_pod(l, p.pod.as_ref())
}

const fn gauge(name: &'static str, unit: Option<&'static str>, help: &'static str) -> Desc {
    Desc {
        name,
        help,
        kind: Kind::Gauge,
        unit,
    }
}

const fn counter(name: &'static str, help: &'static str) -> Desc {
    Desc {
        name,
        help,
        kind: Kind::Counter,
        unit: None,
    }
}

/// A reading of the process's latest allocator report.
fn alloc(p: &ProcessView, field: fn(&DeviceStats) -> Option<u64>) -> Option<f64> {
    p.allocator.as_ref().and_then(field).map(|v| v as f64)
}

/// One family per GPU (`gpu`, `uuid`) and per process (`gpu`, `uuid`, `pid`, `comm`, pod
/// labels) from two optional readings.
fn gpu_and_process(
    sink: &mut dyn Sink,
    desc: Desc,
    s: &Snapshot,
    of_gpu: fn(&GpuView) -> Option<f64>,
    of_process: fn(&ProcessView) -> Option<f64>,
) -> fmt::Result {
    sink.family(&desc, &|e| {
        for g in &s.gpus {
            if let Some(v) = of_gpu(g) {
                e(gpu_labels(g).get(), v)?;
            }
        }
        for p in &s.processes {
            if let Some(v) = of_process(p) {
                e(process_labels(p).get(), v)?;
            }
        }
        Ok(())
    })
}

/// Hand every family of the snapshot to `sink`, in a stable order.
pub fn visit(s: &Snapshot, c: &Counters, version: &str, sink: &mut dyn Sink) -> fmt::Result {
    let gpus = &s.gpus;
    let procs = &s.processes;
    let bool_value = |b: bool| if b { 1.0 } else { 0.0 };

    sink.family(
        &gauge(
            "gpumem_gpu_info",
            None,
            "Descriptive data of the GPU; always 1.",
        ),
        &|e| {
            for g in gpus {
                let l = gpu_labels(g).with(&[
                    ("name", Str(&g.id.name)),
                    ("pci_bus_id", Str(&g.id.pci_bus_id)),
                ]);
                e(l.get(), 1.0)?;
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_device_up",
            None,
            "1 when the last sample of this GPU succeeded, 0 when it failed or missed its deadline.",
        ),
        &|e| {
            for g in gpus {
                e(gpu_labels(g).get(), bool_value(g.up))?;
            }
            Ok(())
        },
    )?;
    type MemField = fn(&crate::model::DeviceMemory) -> u64;
    let mem_families: [(&'static str, &'static str, MemField); 4] = [
        ("gpumem_total_bytes", "Installed GPU memory.", |m| m.total),
        (
            "gpumem_used_bytes",
            "GPU memory in use by processes and contexts, without the driver's reservation.",
            |m| m.used,
        ),
        (
            "gpumem_free_bytes",
            "GPU memory neither in use nor reserved.",
            |m| m.free,
        ),
        (
            "gpumem_reserved_bytes",
            "GPU memory the driver reserves for itself.",
            |m| m.reserved,
        ),
    ];
    for (name, help, field) in mem_families {
        sink.family(&gauge(name, Some("bytes"), help), &|e| {
            for g in gpus {
                if let Some(m) = &g.memory {
                    e(gpu_labels(g).get(), field(m) as f64)?;
                }
            }
            Ok(())
        })?;
    }
    sink.family(
        &gauge(
            "gpumem_unattributed_bytes",
            Some("bytes"),
            "Used memory that no process NVML lists accounts for (processes in another PID namespace, contexts left by dead processes, leaked IPC handles).",
        ),
        &|e| {
            for g in gpus {
                if let Some(v) = g.unattributed {
                    e(gpu_labels(g).get(), v as f64)?;
                }
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_peak_used_bytes",
            Some("bytes"),
            "Highest used memory seen, since the exporter started (window=\"lifetime\") and over a trailing window.",
        ),
        &|e| {
            for g in gpus.iter().filter(|g| g.up) {
                let l = gpu_labels(g);
                if let Some(v) = g.peak_lifetime {
                    e(l.with(&[("window", Str("lifetime"))]).get(), v as f64)?;
                }
                if let Some(v) = g.peak_window {
                    let window = Str(&s.peak_window_label);
                    e(l.with(&[("window", window)]).get(), v as f64)?;
                }
            }
            Ok(())
        },
    )?;

    // The numeric families with one series per process and, for some, one per GPU.
    type OfGpu = fn(&GpuView) -> Option<f64>;
    type OfProcess = fn(&ProcessView) -> Option<f64>;
    let no_gpu: OfGpu = |_| None;
    let per_gpu_and_process: [(Desc, OfGpu, OfProcess); 20] = [
        (
            gauge(
                "gpumem_process_used_bytes",
                Some("bytes"),
                "GPU memory NVML attributes to the process (allocator reserved plus CUDA context and libraries).",
            ),
            no_gpu,
            |p| p.nvml_used.map(|v| v as f64),
        ),
        (
            gauge(
                "gpumem_process_allocated_bytes",
                Some("bytes"),
                "Bytes in live tensors, as the process's allocator reports.",
            ),
            no_gpu,
            |p| alloc(p, |a| Some(a.allocated_bytes)),
        ),
        (
            gauge(
                "gpumem_process_reserved_bytes",
                Some("bytes"),
                "Bytes the process's allocator holds from the driver (allocated plus cache).",
            ),
            no_gpu,
            |p| alloc(p, |a| Some(a.reserved_bytes)),
        ),
        (
            gauge(
                "gpumem_process_active_bytes",
                Some("bytes"),
                "Bytes in active allocator blocks.",
            ),
            no_gpu,
            |p| alloc(p, |a| a.active_bytes),
        ),
        (
            gauge(
                "gpumem_process_inactive_split_bytes",
                Some("bytes"),
                "Free bytes inside partly used (split) segments.",
            ),
            no_gpu,
            |p| alloc(p, |a| a.inactive_split_bytes),
        ),
        (
            gauge(
                "gpumem_process_segments",
                None,
                "Segments the allocator holds.",
            ),
            no_gpu,
            |p| alloc(p, |a| a.segments),
        ),
        (
            gauge(
                "gpumem_process_allocated_peak_bytes",
                Some("bytes"),
                "The allocator's own peak of allocated bytes.",
            ),
            no_gpu,
            |p| alloc(p, |a| a.allocated_peak_bytes),
        ),
        (
            gauge(
                "gpumem_process_largest_free_block_bytes",
                Some("bytes"),
                "The largest free cached block: the biggest request the cache can serve without the driver.",
            ),
            no_gpu,
            |p| p.largest_free_block.map(|v| v as f64),
        ),
        (
            counter(
                "gpumem_process_alloc_retries_total",
                "Times the allocator freed its cache and retried an allocation.",
            ),
            no_gpu,
            |p| alloc(p, |a| a.alloc_retries),
        ),
        (
            counter(
                "gpumem_process_ooms_total",
                "Out-of-memory errors the allocator raised.",
            ),
            no_gpu,
            |p| alloc(p, |a| a.ooms),
        ),
        (
            gauge(
                "gpumem_process_overhead_bytes",
                Some("bytes"),
                "Memory outside the allocator: NVML used minus allocator reserved (CUDA context, libraries, NCCL).",
            ),
            no_gpu,
            |p| p.overhead,
        ),
        (
            gauge(
                "gpumem_cached_unallocated_ratio",
                None,
                "(reserved - allocated) / reserved: the share of the allocator cache not in live tensors (what is often called the fragmentation ratio; see gpumem_fragmentation_ratio for the share that is really stranded).",
            ),
            |g| g.cached_unallocated,
            |p| p.cached_unallocated,
        ),
        (
            gauge(
                "gpumem_fragmentation_ratio",
                None,
                "Share of the free cache stranded in split segments: inactive split bytes / free cached bytes (1 - largest free block / free cached bytes where the allocator reports no split bytes).",
            ),
            |g| g.fragmentation,
            |p| p.fragmentation,
        ),
        (
            gauge(
                "gpumem_leak_slope_bytes_per_second",
                Some("bytes_per_second"),
                "Robust (Theil-Sen) slope of the memory floor after warm-up.",
            ),
            |g| g.leak_slope,
            |p| p.leak_slope,
        ),
        (
            gauge(
                "gpumem_leak_suspected",
                None,
                "1 while the memory floor rises faster than the leak threshold, significantly and persistently.",
            ),
            |g| g.up.then_some(g.leak_suspected as u8 as f64),
            |p| Some(p.leak_suspected as u8 as f64),
        ),
        (
            gauge(
                "gpumem_oom_eta_seconds",
                Some("seconds"),
                "Predicted seconds until an allocation on this GPU (or of this process) fails; present only while memory is on course to run out.",
            ),
            |g| g.eta_seconds,
            |p| p.eta_seconds,
        ),
        (
            gauge(
                "gpumem_oom_eta_lower_seconds",
                Some("seconds"),
                "The earliest the failing allocation is credible: the ETA with growth at its upper confidence bound.",
            ),
            |g| g.eta_lower_seconds,
            |_| None,
        ),
        (
            gauge(
                "gpumem_oom_eta_upper_seconds",
                Some("seconds"),
                "The latest the failing allocation is expected: the ETA with growth at its lower confidence bound; absent where the growth may yet stop.",
            ),
            |g| g.eta_upper_seconds,
            |_| None,
        ),
        (
            gauge(
                "gpumem_headroom_tight",
                None,
                "1 while headroom is tight but steady: allocator retries within the last minute, or the peak over the peak window at analysis.risk.high_used_fraction of the device or more, with nothing growing towards the limit. A ticket, not a page.",
            ),
            |g| g.up.then_some(g.headroom_tight as u8 as f64),
            |_| None,
        ),
        (
            gauge(
                "gpumem_oom_risk_level",
                None,
                "Out-of-memory risk: 0 low, 1 medium, 2 high, 3 critical.",
            ),
            |g| g.up.then_some(g.risk as u8 as f64),
            |p| Some(p.risk as u8 as f64),
        ),
    ];
    for (desc, of_gpu, of_process) in per_gpu_and_process {
        gpu_and_process(sink, desc, s, of_gpu, of_process)?;
    }
    sink.family(
        &gauge(
            "gpumem_process_info",
            None,
            "Training identity the process reported; always 1.",
        ),
        &|e| {
            for p in procs.iter().filter(|p| p.has_identity()) {
                let i = &p.identity;
                let opt = |v: Option<u64>| v.map_or(Str(""), Int);
                let l = process_labels(p).with(&[
                    ("job", Str(i.job.as_deref().unwrap_or_default())),
                    ("rank", opt(i.rank)),
                    ("local_rank", opt(i.local_rank)),
                    ("world_size", opt(i.world_size)),
                ]);
                e(l.get(), 1.0)?;
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_process_component_bytes",
            Some("bytes"),
            "Model memory by component and kind (parameters, gradients, optimizer).",
        ),
        &|e| {
            for p in procs {
                let pl = process_labels(p);
                for c in &p.components {
                    for (kind, v) in [
                        ("parameters", c.parameters_bytes),
                        ("gradients", c.gradients_bytes),
                        ("optimizer", c.optimizer_bytes),
                    ] {
                        if let Some(v) = v {
                            let l =
                                pl.with(&[("component", Str(&c.component)), ("kind", Str(kind))]);
                            e(l.get(), v as f64)?;
                        }
                    }
                }
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_process_phase_info",
            None,
            "The phase the process is in now; always 1.",
        ),
        &|e| {
            for p in procs {
                if let Some(ph) = &p.phase {
                    e(process_labels(p).with(&[("phase", Str(ph))]).get(), 1.0)?;
                }
            }
            Ok(())
        },
    )?;
    sink.family(
        &counter(
            "gpumem_process_phase_entries_total",
            "Times the process entered each phase.",
        ),
        &|e| {
            for p in procs {
                for (ph, n) in &p.phase_entries {
                    e(
                        process_labels(p).with(&[("phase", Str(ph))]).get(),
                        *n as f64,
                    )?;
                }
            }
            Ok(())
        },
    )?;

    sink.family(
        &gauge(
            "gpumem_oom_risk_info",
            None,
            "Why the GPU has its risk level; always 1.",
        ),
        &|e| {
            for g in gpus.iter().filter(|g| g.up) {
                let l = gpu_labels(g).with(&[
                    ("level", Str(g.risk.as_str())),
                    ("reason", Str(g.risk_reason.as_str())),
                ]);
                e(l.get(), 1.0)?;
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_oom_risk_driver_info",
            None,
            "The incident on the GPU while its risk is high or critical: its driver, the process whose growth took the GPU there when it began, the same for the incident's life (pid=\"\": memory no listed process accounts for), and its other processes in words (others); always 1.",
        ),
        &|e| {
            for g in gpus.iter().filter(|g| g.up) {
                if let Some(d) = &g.driver {
                    let pid = d.pid.map_or(Str(""), |p| Int(p.into()));
                    let l = with_pod(
                        gpu_labels(g).with(&[("pid", pid), ("comm", Str(&d.comm))]),
                        d.pod.as_ref(),
                    );
                    let others = d.others_text();
                    let l = match others.as_str() {
                        "" => l,
                        o => l.with(&[("others", Str(o))]),
                    };
                    e(l.get(), 1.0)?;
                }
            }
            Ok(())
        },
    )?;
    sink.family(
        &counter(
            "gpumem_oom_events_total",
            "Out-of-memory events on this GPU, each one failure of one process (its failed requests within 5 s of the first), by kind (reported by a process's client, or inferred: a process without a client vanished from a full GPU) and training job.",
        ),
        &|e| {
            for g in gpus {
                for c in &g.oom_counts {
                    let l = gpu_labels(g)
                        .with(&[("kind", Str(c.kind.as_str())), ("job", Str(&c.job))]);
                    e(l.get(), c.count as f64)?;
                }
            }
            Ok(())
        },
    )?;
    sink.family(
        &counter(
            "gpumem_oom_failed_requests_total",
            "Allocation requests that failed in the reported out-of-memory events on this GPU (a cascade of failed requests is one event).",
        ),
        &|e| {
            for g in gpus {
                e(gpu_labels(g).get(), g.oom_failed_requests as f64)?;
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_oom_event_info",
            None,
            "One recent out-of-memory event, one failure of one process (event: its number on this GPU), its process and what the GPU showed before it (outcome: paged, warned, missed); served for two minutes; always 1.",
        ),
        &|e| {
            for g in gpus {
                for ev in &g.oom_events {
                    let l = oom_event_labels(g, ev).with(&[
                        ("kind", Str(ev.kind.as_str())),
                        ("pid", Int(ev.pid.into())),
                        ("comm", Str(&ev.comm)),
                        ("job", Str(&ev.job)),
                        ("outcome", Str(ev.outcome.as_str())),
                    ]);
                    let l = with_pod(l, ev.pod.as_ref());
                    e(l.get(), 1.0)?;
                }
            }
            Ok(())
        },
    )?;
    type OfEvent = fn(&OomEventView) -> Option<f64>;
    let event_numbers: [(Desc, OfEvent); 3] = [
        (
            gauge(
                "gpumem_oom_event_request_bytes",
                Some("bytes"),
                "The largest request that failed in a recent out-of-memory event, where its client said.",
            ),
            |ev| ev.request_bytes.map(|v| v as f64),
        ),
        (
            gauge(
                "gpumem_oom_event_free_bytes",
                Some("bytes"),
                "The GPU's free memory when a recent out-of-memory error came (its client's word, or the last reading for an inferred one).",
            ),
            |ev| ev.free_bytes.map(|v| v as f64),
        ),
        (
            gauge(
                "gpumem_oom_event_lead_seconds",
                Some("seconds"),
                "How long the GPU had been at critical (outcome paged) or high (warned) when a recent out-of-memory error came.",
            ),
            |ev| ev.lead,
        ),
    ];
    for (desc, of_event) in event_numbers {
        sink.family(&desc, &|e| {
            for g in gpus {
                for ev in &g.oom_events {
                    if let Some(v) = of_event(ev) {
                        e(oom_event_labels(g, ev).get(), v)?;
                    }
                }
            }
            Ok(())
        })?;
    }
    // The score by kind and outcome: the OOMs of each outcome, and the leads of those that
    // came after a page or a warning.
    type ByOutcome = fn(&Score, OomKind, Outcome) -> f64;
    let by_outcome: [(Desc, &[Outcome], ByOutcome); 2] = [
        (
            counter(
                "gpumem_forecast_ooms_total",
                "Out-of-memory events (one failure of one process each) by what the GPU showed when they came: paged (critical), warned (high only), missed.",
            ),
            &Outcome::ALL,
            |s, k, o| s.ooms(k, o) as f64,
        ),
        (
            Desc {
                unit: Some("seconds"),
                ..counter(
                    "gpumem_forecast_lead_seconds_total",
                    "Seconds the GPU had been at critical (outcome paged) or high (warned) when its out-of-memory errors came, summed: divided by gpumem_forecast_ooms_total, the mean lead.",
                )
            },
            &[Outcome::Paged, Outcome::Warned],
            |s, k, o| s.lead_seconds(k, o),
        ),
    ];
    for (desc, outcomes, value) in by_outcome {
        sink.family(&desc, &|e| {
            for g in gpus {
                for kind in OomKind::ALL {
                    for &outcome in outcomes {
                        let l = gpu_labels(g).with(&[
                            ("kind", Str(kind.as_str())),
                            ("outcome", Str(outcome.as_str())),
                        ]);
                        e(l.get(), value(&g.score, kind, outcome))?;
                    }
                }
            }
            Ok(())
        })?;
    }
    sink.family(
        &counter(
            "gpumem_forecast_critical_episodes_total",
            "Critical episodes of the GPU's risk that ended, by what followed: an out-of-memory error while critical or within 10 s after (oom), or none (no_oom).",
        ),
        &|e| {
            for g in gpus {
                for outcome in EpisodeOutcome::ALL {
                    let l = gpu_labels(g).with(&[("outcome", Str(outcome.as_str()))]);
                    e(l.get(), g.score.episodes(outcome) as f64)?;
                }
            }
            Ok(())
        },
    )?;
    sink.family(
        &gauge(
            "gpumem_imbalance_ratio",
            None,
            "max / mean of memory in use across this node's GPUs (scope=\"node\") or a job's local ranks (scope=\"job\").",
        ),
        &|e| {
            if let Some(v) = s.node_imbalance {
                e(&[("scope", Str("node")), ("job", Str(""))], v)?;
            }
            for (job, v) in &s.job_imbalance {
                e(&[("scope", Str("job")), ("job", Str(job))], *v)?;
            }
            Ok(())
        },
    )?;

    let one = |desc: Desc, labels: &[Label<'_>], v: f64, sink: &mut dyn Sink| {
        sink.family(&desc, &|e| e(labels, v))
    };
    one(
        gauge(
            "gpumem_exporter_build_info",
            None,
            "The exporter's version and sample source; always 1.",
        ),
        &[("version", Str(version)), ("source", Str(&s.source))],
        1.0,
        sink,
    )?;
    one(
        gauge(
            "gpumem_exporter_sample_duration_seconds",
            Some("seconds"),
            "Wall time the last sample's GPU queries took, all GPUs one after another.",
        ),
        &[],
        c.sample_duration(),
        sink,
    )?;
    one(
        counter("gpumem_exporter_samples_total", "Samples taken."),
        &[],
        c.samples.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    let errors = c.sample_errors();
    sink.family(
        &counter(
            "gpumem_exporter_sample_errors_total",
            "Failed GPU queries by kind.",
        ),
        &|e| {
            for ((gpu, kind), n) in &errors {
                let l = [("gpu", Int((*gpu).into())), ("kind", Str(kind.as_str()))];
                e(&l, *n as f64)?;
            }
            Ok(())
        },
    )?;
    one(
        counter(
            "gpumem_exporter_nvml_reinit_total",
            "Times NVML was initialised again after failing as a whole.",
        ),
        &[],
        c.nvml_reinit.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    one(
        counter(
            "gpumem_exporter_nvml_reader_restarts_total",
            "Times the NVML reader panicked and went on with the next sample.",
        ),
        &[],
        c.nvml_reader_restarts.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    one(
        gauge(
            "gpumem_exporter_tracked_processes",
            None,
            "Processes held in the history.",
        ),
        &[],
        c.tracked_processes.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    sink.family(
        &gauge(
            "gpumem_exporter_open_connections",
            None,
            "Connections open on each listener (web, ingest_socket, ingest_tcp).",
        ),
        &|e| {
            for l in Listener::ALL {
                let n = c.connections.of(l).open.load(Ordering::Relaxed);
                e(&[("listener", Str(l.as_str()))], n as f64)?;
            }
            Ok(())
        },
    )?;
    sink.family(
        &counter(
            "gpumem_exporter_connections_shed_total",
            "Connections the exporter closed to keep a listener within its budget: idle ones closed to make room, or newcomers refused while every connection was busy.",
        ),
        &|e| {
            for l in Listener::ALL {
                let n = c.connections.of(l).shed.load(Ordering::Relaxed);
                e(&[("listener", Str(l.as_str()))], n as f64)?;
            }
            Ok(())
        },
    )?;
    one(
        counter(
            "gpumem_exporter_series_dropped_total",
            "Series left out of /metrics to keep a scrape within web.max_series, summed over scrapes.",
        ),
        &[],
        c.series_dropped.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    one(
        counter("gpumem_ingest_reports_total", "Allocator reports accepted."),
        &[],
        c.ingest.reports.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    one(
        counter(
            "gpumem_ingest_unlisted_total",
            "Device entries and OOM events in accepted reports from a process NVML does not list on that GPU: kept as the process's own numbers, no effect on the GPU.",
        ),
        &[],
        c.ingest.unlisted.load(Ordering::Relaxed) as f64,
        sink,
    )?;
    sink.family(
        &counter(
            "gpumem_ingest_rejected_total",
            "Allocator reports rejected, by reason.",
        ),
        &|e| {
            for r in RejectReason::ALL {
                e(&[("reason", Str(r.as_str()))], c.ingest.rejected(r) as f64)?;
            }
            Ok(())
        },
    )?;
    Ok(())
}

/// Counts the series of an exposition: in all, and of each process (the series with its `pid`
/// and `uuid`).
struct Count<'s> {
    total: usize,
    /// uuid → pid → index in `Snapshot::processes`.
    index: HashMap<&'s str, HashMap<u64, usize>>,
    of_process: Vec<usize>,
}

impl Sink for Count<'_> {
    fn family(&mut self, _: &Desc, series: &SeriesFn<'_>) -> fmt::Result {
        series(&mut |labels, _| {
            self.total += 1;
            let find = |k| labels.iter().find(|(name, _)| *name == k).map(|(_, v)| *v);
            if let (Some(Int(pid)), Some(Str(uuid))) = (find("pid"), find("uuid")) {
                if let Some(&i) = self.index.get(uuid).and_then(|m| m.get(&pid)) {
                    self.of_process[i] += 1;
                }
            }
            Ok(())
        })
    }
}

/// The snapshot as `/metrics` serves it within `max_series`, and how many series that leaves
/// out. Every GPU's series and the exporter's own are always served (the GPUs bound them);
/// processes are served whole, those NVML lists first, then those known only from their
/// reports, each group in the snapshot's order, for as long as the next one fits. A scrape
/// over a scraper's `sample_limit` is lost whole: better a node's processes in part than none.
pub fn within_budget(
    s: Arc<Snapshot>,
    c: &Counters,
    version: &str,
    max_series: usize,
) -> (Arc<Snapshot>, u64) {
    let mut count = Count {
        total: 0,
        index: HashMap::new(),
        of_process: vec![0; s.processes.len()],
    };
    for (i, p) in s.processes.iter().enumerate() {
        count
            .index
            .entry(p.uuid.as_str())
            .or_default()
            .insert(p.pid.into(), i);
    }
    visit(&s, c, version, &mut count).expect("counting cannot fail");
    if count.total <= max_series {
        return (s, 0);
    }
    let of_processes: usize = count.of_process.iter().sum();
    let mut room = max_series.saturating_sub(count.total - of_processes);
    let mut order: Vec<usize> = (0..s.processes.len()).collect();
    order.sort_by_key(|&i| s.processes[i].nvml_used.is_none());
    let mut keep = vec![false; s.processes.len()];
    for i in order {
        if count.of_process[i] > room {
            break;
        }
        room -= count.of_process[i];
        keep[i] = true;
    }
    let kept: usize = (0..keep.len())
        .filter(|&i| keep[i])
        .map(|i| count.of_process[i])
        .sum();
    let mut trimmed = (*s).clone();
    let mut i = 0;
    trimmed.processes.retain(|_| {
        i += 1;
        keep[i - 1]
    });
    (Arc::new(trimmed), (of_processes - kept) as u64)
}

/// Collects owned copies of the families that have series.
struct Collect(Vec<Family>);

impl Sink for Collect {
    fn family(&mut self, d: &Desc, series: &SeriesFn<'_>) -> fmt::Result {
        let mut out = Vec::new();
        series(&mut |labels, value| {
            out.push(Series {
                labels: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(),
                value,
            });
            Ok(())
        })?;
        if !out.is_empty() {
            self.0.push(Family {
                name: d.name,
                kind: d.kind,
                series: out,
            });
        }
        Ok(())
    }
}

/// Every family of the snapshot with owned series, in a stable order; families without series
/// are left out.
pub fn families(s: &Snapshot, c: &Counters, version: &str) -> Vec<Family> {
    let mut sink = Collect(Vec::new());
    visit(s, c, version, &mut sink).expect("collecting into memory cannot fail");
    sink.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Scenario, SimGpuConfig};
    use crate::engine::Engine;
    use crate::model::{Component, Report, REPORT_VERSION};
    use crate::source::sim::SimSource;
    use crate::source::Source;

    /// Two simulated GPUs whose processes NVML lists, and 50 processes known only from reports,
    /// each with 32 components.
    fn crowded() -> (Arc<Snapshot>, Counters) {
        let mut cfg = Config::default();
        cfg.sim.gpus = vec![
            SimGpuConfig::new(Scenario::Steady),
            SimGpuConfig::new(Scenario::Shared),
        ];
        let mut src = SimSource::new(&cfg.sim);
        let mut engine = Engine::new(&cfg, "sim");
        let first = src.sample(0.0);
        let uuid = first.gpus[0].id.uuid.clone();
        engine.observe(&first);
        for pid in 0..50 {
            let report = Report {
                version: REPORT_VERSION,
                devices: vec![DeviceStats {
                    uuid: uuid.clone(),
                    allocated_bytes: 1 << 20,
                    reserved_bytes: 2 << 20,
                    ..Default::default()
                }],
                components: Some(
                    (0..32)
                        .map(|i| Component {
                            component: format!("c{i}"),
                            parameters_bytes: Some(1),
                            gradients_bytes: Some(1),
                            optimizer_bytes: Some(1),
                        })
                        .collect(),
                ),
                ..Default::default()
            };
            engine.report(100_000 + pid, 0.5, &report).unwrap();
        }
        engine.observe(&src.sample(1.0));
        (engine.current(), Counters::default())
    }

    fn series(s: &Snapshot, c: &Counters) -> usize {
        families(s, c, "test").iter().map(|f| f.series.len()).sum()
    }

    #[test]
    fn the_series_budget_serves_gpus_and_listed_processes_first_and_whole_processes_only() {
        let (snap, c) = crowded();
        let all = series(&snap, &c);
        let listed: Vec<u32> = snap
            .processes
            .iter()
            .filter(|p| p.nvml_used.is_some())
            .map(|p| p.pid)
            .collect();
        assert!(!listed.is_empty() && snap.processes.len() == listed.len() + 50);

        let (same, dropped) = within_budget(Arc::clone(&snap), &c, "test", all);
        assert!(
            Arc::ptr_eq(&same, &snap) && dropped == 0,
            "within the budget"
        );

        let budget = all / 4;
        let (trimmed, dropped) = within_budget(Arc::clone(&snap), &c, "test", budget);
        let served = series(&trimmed, &c);
        assert!(served <= budget, "{served} > {budget}");
        assert_eq!(
            served as u64 + dropped,
            all as u64,
            "every series served or counted"
        );
        for pid in &listed {
            assert!(
                trimmed.processes.iter().any(|p| p.pid == *pid),
                "listed pid {pid} dropped before report-only ones"
            );
        }
        let report_only = trimmed.processes.len() - listed.len();
        assert!(report_only > 0 && report_only < 50, "{report_only}");
        // A process is served whole or not at all: every served one keeps its 96 component
        // series (the simulator's listed processes report a few components of their own).
        let components = |s: &Snapshot| {
            families(s, &c, "test")
                .into_iter()
                .find(|f| f.name == "gpumem_process_component_bytes")
                .map_or(0, |f| f.series.len())
        };
        let mut listed_only = (*snap).clone();
        listed_only.processes.retain(|p| p.nvml_used.is_some());
        assert_eq!(
            components(&trimmed),
            components(&listed_only) + report_only * 96
        );
        // Too small for any process: the GPUs are still served.
        let (bare, _) = within_budget(snap, &c, "test", 1);
        assert!(bare.processes.is_empty() && bare.gpus.len() == 2);
    }
}
