//! The metric families of one snapshot: the single place where metric names, labels and help
//! texts are decided. `/metrics` (both encodings) and the replay timeline read this.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::ingest::report::RejectReason;
use crate::model::ErrorKind;
use crate::snapshot::{ProcessView, Snapshot};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Gauge,
    Counter,
}

pub type Labels = Vec<(&'static str, String)>;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    pub labels: Labels,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The full name as it appears on samples (counters end in `_total`).
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    /// OpenMetrics unit, which is also the end of the name.
    pub unit: Option<&'static str>,
    pub series: Vec<Series>,
}

/// The exporter's own counters, updated from the sampler and the ingest handlers without
/// taking the engine's lock.
#[derive(Debug, Default)]
pub struct Counters {
    pub samples: AtomicU64,
    sample_duration_bits: AtomicU64,
    pub nvml_reinit: AtomicU64,
    pub ingest_reports: AtomicU64,
    ingest_rejected: [AtomicU64; RejectReason::ALL.len()],
    pub tracked_processes: AtomicU64,
    sample_errors: Mutex<BTreeMap<(u32, ErrorKind), u64>>,
}

impl Counters {
    pub fn record_sample(&self, duration_seconds: f64) {
        self.samples.fetch_add(1, Ordering::Relaxed);
        self.sample_duration_bits
            .store(duration_seconds.to_bits(), Ordering::Relaxed);
    }

    pub fn sample_duration(&self) -> f64 {
        f64::from_bits(self.sample_duration_bits.load(Ordering::Relaxed))
    }

    /// Called for every GPU on every sample: no allocation once the GPU is known.
    pub fn record_errors(&self, gpu: u32, kinds: &[ErrorKind]) {
        let mut m = self.sample_errors.lock().unwrap_or_else(|e| e.into_inner());
        // Every kind starts at 0 for every GPU so that rate() and increase() work from the
        // first error on.
        if !m.contains_key(&(gpu, ErrorKind::Timeout)) {
            for k in ErrorKind::ALL {
                m.insert((gpu, k), 0);
            }
        }
        for k in kinds {
            *m.entry((gpu, *k)).or_insert(0) += 1;
        }
    }

    pub fn sample_errors(&self) -> BTreeMap<(u32, ErrorKind), u64> {
        self.sample_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn reject(&self, reason: RejectReason) {
        self.ingest_rejected[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn rejected(&self, reason: RejectReason) -> u64 {
        self.ingest_rejected[reason as usize].load(Ordering::Relaxed)
    }
}

struct Builder {
    out: Vec<Family>,
}

impl Builder {
    fn family(
        &mut self,
        name: &'static str,
        kind: Kind,
        unit: Option<&'static str>,
        help: &'static str,
    ) -> &mut Vec<Series> {
        self.out.push(Family {
            name,
            help,
            kind,
            unit,
            series: Vec::new(),
        });
        &mut self.out.last_mut().expect("just pushed").series
    }
}

fn gpu_labels(index: u32, uuid: &str) -> Labels {
    vec![("gpu", index.to_string()), ("uuid", uuid.to_string())]
}

fn process_labels(p: &ProcessView) -> Labels {
    let mut l = vec![
        ("gpu", p.gpu.map(|g| g.to_string()).unwrap_or_default()),
        ("uuid", p.uuid.clone()),
        ("pid", p.pid.to_string()),
        ("comm", p.comm.clone()),
    ];
    if let Some(pod) = &p.pod {
        l.push(("namespace", pod.namespace.clone()));
        l.push(("pod", pod.pod.clone()));
        l.push(("container", pod.container.clone()));
    }
    l
}

fn with(mut labels: Labels, extra: &[(&'static str, String)]) -> Labels {
    labels.extend(extra.iter().cloned());
    labels
}

fn push(series: &mut Vec<Series>, labels: Labels, value: f64) {
    series.push(Series { labels, value });
}

/// Every family of the snapshot, in a stable order. Families without series are left out.
pub fn families(s: &Snapshot, c: &Counters, version: &str) -> Vec<Family> {
    use Kind::*;
    let mut b = Builder { out: Vec::new() };
    let gpus = &s.gpus;
    let procs = &s.processes;

    let f = b.family(
        "gpumem_gpu_info",
        Gauge,
        None,
        "Descriptive data of the GPU; always 1.",
    );
    for g in gpus {
        let l = with(
            gpu_labels(g.id.index, &g.id.uuid),
            &[
                ("name", g.id.name.clone()),
                ("pci_bus_id", g.id.pci_bus_id.clone()),
            ],
        );
        push(f, l, 1.0);
    }
    let f = b.family(
        "gpumem_device_up",
        Gauge,
        None,
        "1 when the last sample of this GPU succeeded, 0 when it failed or missed its deadline.",
    );
    for g in gpus {
        push(
            f,
            gpu_labels(g.id.index, &g.id.uuid),
            if g.up { 1.0 } else { 0.0 },
        );
    }
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
        let f = b.family(name, Gauge, Some("bytes"), help);
        for g in gpus {
            if let Some(m) = &g.memory {
                push(f, gpu_labels(g.id.index, &g.id.uuid), field(m) as f64);
            }
        }
    }
    let f = b.family(
        "gpumem_peak_used_bytes",
        Gauge,
        Some("bytes"),
        "Highest used memory seen, since the exporter started (window=\"lifetime\") and over a trailing window.",
    );
    for g in gpus {
        if !g.up {
            continue;
        }
        let l = gpu_labels(g.id.index, &g.id.uuid);
        if let Some(v) = g.peak_lifetime {
            push(
                f,
                with(l.clone(), &[("window", "lifetime".into())]),
                v as f64,
            );
        }
        if let Some(v) = g.peak_window {
            push(
                f,
                with(l, &[("window", s.peak_window_label.clone())]),
                v as f64,
            );
        }
    }

    let f = b.family(
        "gpumem_process_used_bytes",
        Gauge,
        Some("bytes"),
        "GPU memory NVML attributes to the process (allocator reserved plus CUDA context and libraries).",
    );
    for p in procs {
        if let Some(v) = p.nvml_used {
            push(f, process_labels(p), v as f64);
        }
    }
    type AllocField = fn(&crate::ingest::report::DeviceStats) -> Option<u64>;
    let alloc_gauges: [(&'static str, Option<&'static str>, &'static str, AllocField); 6] = [
        (
            "gpumem_process_allocated_bytes",
            Some("bytes"),
            "Bytes in live tensors, as the process's allocator reports.",
            |a| Some(a.allocated_bytes),
        ),
        (
            "gpumem_process_reserved_bytes",
            Some("bytes"),
            "Bytes the process's allocator holds from the driver (allocated plus cache).",
            |a| Some(a.reserved_bytes),
        ),
        (
            "gpumem_process_active_bytes",
            Some("bytes"),
            "Bytes in active allocator blocks.",
            |a| a.active_bytes,
        ),
        (
            "gpumem_process_inactive_split_bytes",
            Some("bytes"),
            "Free bytes inside partly used (split) segments.",
            |a| a.inactive_split_bytes,
        ),
        (
            "gpumem_process_segments",
            None,
            "Segments the allocator holds.",
            |a| a.segments,
        ),
        (
            "gpumem_process_allocated_peak_bytes",
            Some("bytes"),
            "The allocator's own peak of allocated bytes.",
            |a| a.allocated_peak_bytes,
        ),
    ];
    for (name, unit, help, field) in alloc_gauges {
        let f = b.family(name, Gauge, unit, help);
        for p in procs {
            if let Some(v) = p.allocator.as_ref().and_then(field) {
                push(f, process_labels(p), v as f64);
            }
        }
    }
    let f = b.family(
        "gpumem_process_largest_free_block_bytes",
        Gauge,
        Some("bytes"),
        "The largest free cached block: the biggest request the cache can serve without the driver.",
    );
    for p in procs {
        if let Some(v) = p.largest_free_block {
            push(f, process_labels(p), v as f64);
        }
    }
    let alloc_counters: [(&'static str, &'static str, AllocField); 2] = [
        (
            "gpumem_process_alloc_retries_total",
            "Times the allocator freed its cache and retried an allocation.",
            |a| a.alloc_retries,
        ),
        (
            "gpumem_process_ooms_total",
            "Out-of-memory errors the allocator raised.",
            |a| a.ooms,
        ),
    ];
    for (name, help, field) in alloc_counters {
        let f = b.family(name, Counter, None, help);
        for p in procs {
            if let Some(v) = p.allocator.as_ref().and_then(field) {
                push(f, process_labels(p), v as f64);
            }
        }
    }
    let f = b.family(
        "gpumem_process_overhead_bytes",
        Gauge,
        Some("bytes"),
        "Memory outside the allocator: NVML used minus allocator reserved (CUDA context, libraries, NCCL).",
    );
    for p in procs {
        if let Some(v) = p.overhead {
            push(f, process_labels(p), v);
        }
    }
    let f = b.family(
        "gpumem_process_info",
        Gauge,
        None,
        "Training identity the process reported; always 1.",
    );
    for p in procs.iter().filter(|p| p.has_identity()) {
        let i = &p.identity;
        let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
        let l = with(
            process_labels(p),
            &[
                ("job", i.job.clone().unwrap_or_default()),
                ("rank", opt(i.rank)),
                ("local_rank", opt(i.local_rank)),
                ("world_size", opt(i.world_size)),
            ],
        );
        push(f, l, 1.0);
    }
    let f = b.family(
        "gpumem_process_component_bytes",
        Gauge,
        Some("bytes"),
        "Model memory by component and kind (parameters, gradients, optimizer).",
    );
    for p in procs {
        for c in &p.components {
            for (kind, v) in [
                ("parameters", c.parameters_bytes),
                ("gradients", c.gradients_bytes),
                ("optimizer", c.optimizer_bytes),
            ] {
                if let Some(v) = v {
                    let l = with(
                        process_labels(p),
                        &[("component", c.component.clone()), ("kind", kind.into())],
                    );
                    push(f, l, v as f64);
                }
            }
        }
    }
    let f = b.family(
        "gpumem_process_phase_info",
        Gauge,
        None,
        "The phase the process is in now; always 1.",
    );
    for p in procs {
        if let Some(ph) = &p.phase {
            push(f, with(process_labels(p), &[("phase", ph.clone())]), 1.0);
        }
    }
    let f = b.family(
        "gpumem_process_phase_entries_total",
        Counter,
        None,
        "Times the process entered each phase.",
    );
    for p in procs {
        for (ph, n) in &p.phase_entries {
            push(
                f,
                with(process_labels(p), &[("phase", ph.clone())]),
                *n as f64,
            );
        }
    }

    // Families with one series per GPU (no pid) and one per process.
    let f = b.family(
        "gpumem_cached_unallocated_ratio",
        Gauge,
        None,
        "(reserved - allocated) / reserved: the share of the allocator cache not in live tensors (the seeds' fragmentation ratio).",
    );
    for g in gpus {
        if let Some(v) = g.cached_unallocated {
            push(f, gpu_labels(g.id.index, &g.id.uuid), v);
        }
    }
    for p in procs {
        if let Some(v) = p.cached_unallocated {
            push(f, process_labels(p), v);
        }
    }
    let f = b.family(
        "gpumem_fragmentation_ratio",
        Gauge,
        None,
        "Share of free cached memory that cannot serve a large request: 1 - largest free block / free cached bytes.",
    );
    for g in gpus {
        if let Some(v) = g.fragmentation {
            push(f, gpu_labels(g.id.index, &g.id.uuid), v);
        }
    }
    for p in procs {
        if let Some(v) = p.fragmentation {
            push(f, process_labels(p), v);
        }
    }
    let f = b.family(
        "gpumem_leak_slope_bytes_per_second",
        Gauge,
        Some("bytes_per_second"),
        "Robust (Theil-Sen) slope of the memory floor after warm-up.",
    );
    for g in gpus {
        if let Some(v) = g.leak_slope {
            push(f, gpu_labels(g.id.index, &g.id.uuid), v);
        }
    }
    for p in procs {
        if let Some(v) = p.leak_slope {
            push(f, process_labels(p), v);
        }
    }
    let f = b.family(
        "gpumem_leak_suspected",
        Gauge,
        None,
        "1 while the memory floor rises faster than the leak threshold, significantly and persistently.",
    );
    for g in gpus.iter().filter(|g| g.up) {
        push(
            f,
            gpu_labels(g.id.index, &g.id.uuid),
            g.leak_suspected as u8 as f64,
        );
    }
    for p in procs {
        push(f, process_labels(p), p.leak_suspected as u8 as f64);
    }
    let f = b.family(
        "gpumem_oom_eta_seconds",
        Gauge,
        Some("seconds"),
        "Predicted seconds until an allocation on this GPU fails; present only while memory is on course to run out.",
    );
    for g in gpus {
        if let Some(v) = g.eta_seconds {
            push(f, gpu_labels(g.id.index, &g.id.uuid), v);
        }
    }
    let f = b.family(
        "gpumem_oom_risk_level",
        Gauge,
        None,
        "Out-of-memory risk: 0 low, 1 medium, 2 high, 3 critical.",
    );
    for g in gpus.iter().filter(|g| g.up) {
        push(f, gpu_labels(g.id.index, &g.id.uuid), g.risk as u8 as f64);
    }
    for p in procs {
        push(f, process_labels(p), p.risk as u8 as f64);
    }
    let f = b.family(
        "gpumem_oom_risk_info",
        Gauge,
        None,
        "Why the GPU has its risk level; always 1.",
    );
    for g in gpus.iter().filter(|g| g.up) {
        let l = with(
            gpu_labels(g.id.index, &g.id.uuid),
            &[
                ("level", g.risk.as_str().into()),
                ("reason", g.risk_reason.as_str().into()),
            ],
        );
        push(f, l, 1.0);
    }
    let f = b.family(
        "gpumem_imbalance_ratio",
        Gauge,
        None,
        "max / mean of memory in use across this node's GPUs (scope=\"node\") or a job's local ranks (scope=\"job\").",
    );
    if let Some(v) = s.node_imbalance {
        push(f, vec![("scope", "node".into()), ("job", String::new())], v);
    }
    for (job, v) in &s.job_imbalance {
        push(f, vec![("scope", "job".into()), ("job", job.clone())], *v);
    }

    let f = b.family(
        "gpumem_exporter_build_info",
        Gauge,
        None,
        "The exporter's version and sample source; always 1.",
    );
    push(
        f,
        vec![
            ("version", version.to_string()),
            ("source", s.source.clone()),
        ],
        1.0,
    );
    let f = b.family(
        "gpumem_exporter_sample_duration_seconds",
        Gauge,
        Some("seconds"),
        "Wall time of the last sample of all GPUs.",
    );
    push(f, vec![], c.sample_duration());
    let f = b.family(
        "gpumem_exporter_samples_total",
        Counter,
        None,
        "Samples taken.",
    );
    push(f, vec![], c.samples.load(Ordering::Relaxed) as f64);
    let f = b.family(
        "gpumem_exporter_sample_errors_total",
        Counter,
        None,
        "Failed GPU queries by kind.",
    );
    for ((gpu, kind), n) in c.sample_errors() {
        push(
            f,
            vec![("gpu", gpu.to_string()), ("kind", kind.as_str().into())],
            n as f64,
        );
    }
    let f = b.family(
        "gpumem_exporter_nvml_reinit_total",
        Counter,
        None,
        "Times NVML was initialised again after failing as a whole.",
    );
    push(f, vec![], c.nvml_reinit.load(Ordering::Relaxed) as f64);
    let f = b.family(
        "gpumem_exporter_tracked_processes",
        Gauge,
        None,
        "Processes held in the history.",
    );
    push(
        f,
        vec![],
        c.tracked_processes.load(Ordering::Relaxed) as f64,
    );
    let f = b.family(
        "gpumem_ingest_reports_total",
        Counter,
        None,
        "Allocator reports accepted.",
    );
    push(f, vec![], c.ingest_reports.load(Ordering::Relaxed) as f64);
    let f = b.family(
        "gpumem_ingest_rejected_total",
        Counter,
        None,
        "Allocator reports rejected, by reason.",
    );
    for r in RejectReason::ALL {
        push(f, vec![("reason", r.as_str().into())], c.rejected(r) as f64);
    }

    b.out.retain(|f| !f.series.is_empty());
    b.out
}
