//! One immutable view of everything the exporter knows at one moment. The engine builds it when
//! asked (`Engine::current`: once per change, however many readers ask); `/metrics`, the JSON
//! API, the CLI reports, `top` and the replay timeline all read it, so they can never disagree.

use serde::Serialize;

use crate::analysis::incident::{OomKind, Outcome, Score};
use crate::analysis::oom::{RiskLevel, RiskReason};
use crate::model::{Component, DeviceStats, Identity};
use crate::model::{DeviceMemory, GpuIdentity, Time};

#[derive(Debug, Clone, Serialize, Default)]
pub struct Snapshot {
    pub t: Time,
    pub source: String,
    pub gpus: Vec<GpuView>,
    pub processes: Vec<ProcessView>,
    pub node_imbalance: Option<f64>,
    /// (job, max/mean over its local ranks)
    pub job_imbalance: Vec<(String, f64)>,
    pub peak_window_label: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct GpuView {
    pub id: GpuIdentity,
    pub up: bool,
    pub memory: Option<DeviceMemory>,
    pub peak_lifetime: Option<u64>,
    pub peak_window: Option<u64>,
    pub eta_seconds: Option<f64>,
    /// The earliest the failure is credible (growth at its upper confidence bound).
    pub eta_lower_seconds: Option<f64>,
    /// The latest (growth at its lower confidence bound); absent where growth may stop.
    pub eta_upper_seconds: Option<f64>,
    /// Combined growth of the trends behind the ETA, bytes per second.
    pub growth_bytes_per_second: Option<f64>,
    /// The steepest floor trend of a process on this GPU (over `analysis.eta_window`).
    pub trend: Option<crate::analysis::trend::Trend>,
    pub risk: RiskLevel,
    pub risk_reason: RiskReason,
    pub recommendation: &'static str,
    pub leak_slope: Option<f64>,
    pub leak_suspected: bool,
    /// Headroom tight but steady: allocator retries or peaks near the limit without growth.
    pub headroom_tight: bool,
    pub fragmentation: Option<f64>,
    pub cached_unallocated: Option<f64>,
    /// Used memory that no process NVML lists accounts for: contexts of processes NVML cannot
    /// list (another PID namespace), of dead processes never torn down, leaked IPC handles.
    /// None while the process list could not be read.
    pub unattributed: Option<u64>,
    /// The process whose growth drives the risk, while the level is high or above.
    pub driver: Option<DriverView>,
    /// The out-of-memory errors of the last `OOM_EVENT_TTL` seconds, oldest first.
    pub oom_events: Vec<OomEventView>,
    /// Out-of-memory events counted on this GPU, by kind and training job.
    pub oom_counts: Vec<OomCount>,
    /// The requests that failed in its reported out-of-memory events.
    pub oom_failed_requests: u64,
    /// The forecast's score on this GPU since the exporter started.
    pub score: Score,
}

/// The driver of a GPU's incident, who names it: a process, or (`pid: None`) memory no listed
/// process accounts for; and the incident's other processes.
#[derive(Debug, Clone, Serialize)]
pub struct DriverView {
    pub pid: Option<u32>,
    pub comm: String,
    pub pod: Option<PodLabels>,
    /// The other processes of the incident, in the order they joined: those that drove it
    /// after its driver, and those whose own forecast said they would fail in it.
    pub others: Vec<IncidentProcess>,
}

/// A process of an incident, as it was known when it joined.
#[derive(Debug, Clone, Serialize)]
pub struct IncidentProcess {
    pub pid: Option<u32>,
    pub comm: String,
    /// Still on the GPU.
    pub on_gpu: bool,
}

/// At most this many of an incident's other processes are named in its text.
const OTHERS_NAMED: usize = 8;

impl DriverView {
    /// The incident's other processes in words ("python3 (pid 102), python3 (pid 103, gone)"),
    /// empty when there are none.
    pub fn others_text(&self) -> String {
        let mut named: Vec<String> = self
            .others
            .iter()
            .take(OTHERS_NAMED)
            .map(|p| {
                let gone = if p.on_gpu { "" } else { ", gone" };
                match p.pid {
                    Some(pid) => {
                        let comm = if p.comm.is_empty() {
                            "process"
                        } else {
                            &p.comm
                        };
                        format!("{comm} (pid {pid}{gone})")
                    }
                    None => "memory no listed process accounts for".to_string(),
                }
            })
            .collect();
        if self.others.len() > OTHERS_NAMED {
            named.push(format!("{} more", self.others.len() - OTHERS_NAMED));
        }
        named.join(", ")
    }
}

/// One out-of-memory event, one failure of one process (however many of its requests failed
/// in it), as its process was known then.
#[derive(Debug, Clone, Serialize)]
pub struct OomEventView {
    /// When it became known, on the source's clock.
    pub t: Time,
    /// Its number among the OOMs counted on this GPU since the exporter started.
    pub event: u64,
    pub kind: OomKind,
    pub pid: u32,
    pub comm: String,
    /// The training job its process reported (empty: none).
    pub job: String,
    pub pod: Option<PodLabels>,
    /// How many requests failed in it (its burst, `incident::BURST_WINDOW`); none for an
    /// inferred one.
    pub requests: Option<u64>,
    /// The largest request that failed and the device's free bytes then, where known.
    pub request_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    /// What the GPU showed when it came.
    pub outcome: Outcome,
    /// Seconds at the outcome's level (critical, high) before it.
    pub lead: Option<f64>,
}

/// A count of out-of-memory errors.
#[derive(Debug, Clone, Serialize)]
pub struct OomCount {
    pub kind: OomKind,
    pub job: String,
    pub count: u64,
}

impl GpuView {
    /// Share of the device not free, as `nvidia-smi` shows it.
    pub fn used_fraction(&self) -> Option<f64> {
        self.memory
            .filter(|m| m.total > 0)
            .map(|m| 1.0 - m.free as f64 / m.total as f64)
    }
}

#[derive(Debug, Clone, Serialize, Default, PartialEq, Eq)]
pub struct PodLabels {
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessView {
    /// Index of the GPU, where the uuid is one this node has.
    pub gpu: Option<u32>,
    pub uuid: String,
    pub pid: u32,
    pub comm: String,
    pub pod: Option<PodLabels>,
    /// Bytes NVML attributes to the process, when NVML lists it.
    pub nvml_used: Option<u64>,
    /// The latest allocator report for this GPU, while the process keeps reporting.
    pub allocator: Option<DeviceStats>,
    pub largest_free_block: Option<u64>,
    /// NVML used − allocator reserved.
    pub overhead: Option<f64>,
    pub identity: Identity,
    pub phase: Option<String>,
    pub phase_entries: Vec<(String, u64)>,
    pub components: Vec<Component>,
    /// NVML lists the process on this GPU (or did within `ingest.listing_grace`, or the check
    /// is off). Otherwise only its own reported numbers are shown: no leak, forecast, risk or
    /// fragmentation, and it counts for nothing at GPU level.
    pub verified: bool,
    pub leak_slope: Option<f64>,
    pub leak_p_value: Option<f64>,
    pub leak_suspected: bool,
    /// Seconds until this process's next large allocation fails, while it asks for memory and
    /// the room is closing.
    pub eta_seconds: Option<f64>,
    pub risk: RiskLevel,
    pub fragmentation: Option<f64>,
    pub cached_unallocated: Option<f64>,
    /// Seconds this process has been seen.
    pub age: f64,
}

impl ProcessView {
    pub fn has_identity(&self) -> bool {
        let i = &self.identity;
        i.job.is_some() || i.rank.is_some() || i.local_rank.is_some() || i.world_size.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_incidents_other_processes_are_named_in_words_gone_ones_marked() {
        let process = |pid: Option<u32>, comm: &str, on_gpu| IncidentProcess {
            pid,
            comm: comm.to_string(),
            on_gpu,
        };
        let mut d = DriverView {
            pid: Some(101),
            comm: "python3".into(),
            pod: None,
            others: vec![],
        };
        assert_eq!(d.others_text(), "");
        d.others = vec![
            process(Some(102), "trainer", true),
            process(Some(103), "", false),
            process(None, "", true),
        ];
        assert_eq!(
            d.others_text(),
            "trainer (pid 102), process (pid 103, gone), memory no listed process accounts for"
        );
        d.others = (0..11).map(|i| process(Some(200 + i), "w", true)).collect();
        let text = d.others_text();
        assert!(text.starts_with("w (pid 200), w (pid 201)"), "{text}");
        assert!(text.ends_with("w (pid 207), 3 more"), "{text}");
    }
}
