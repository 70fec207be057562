//! The JSON reports the report commands write (docs/reports.md): their shapes in one place,
//! which `profile` writes and `compare` and `sweep` read.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::workflow::{now_rfc3339, round, source_label};
use crate::config::Config;
use crate::runtime::stepped::RunEnd;

/// Version of the JSON shapes written by the report commands (docs/reports.md).
pub const SCHEMA_VERSION: u32 = 1;

/// The fields every sampled report (`oom`, `leak`, `fragment`) begins with.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunHeader {
    pub schema_version: u32,
    pub kind: &'static str,
    pub generated_at: String,
    pub source: String,
    pub duration: f64,
    pub interrupted: bool,
}

impl RunHeader {
    pub fn new(kind: &'static str, cfg: &Config, end: &RunEnd) -> Self {
        RunHeader {
            schema_version: SCHEMA_VERSION,
            kind,
            generated_at: now_rfc3339(),
            source: source_label(cfg),
            duration: round(end.covered, 3),
            interrupted: end.interrupted,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfileReport {
    pub schema_version: u32,
    pub kind: String,
    pub generated_at: String,
    pub source: String,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Seconds from the first to the last sample.
    pub duration: f64,
    #[serde(default)]
    pub requested_duration: Option<f64>,
    /// Seconds between samples; null when a replay took every recorded sample.
    #[serde(default)]
    pub interval: Option<f64>,
    #[serde(default)]
    pub interrupted: bool,
    pub devices: BTreeMap<String, DeviceProfile>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CurrentMemory {
    /// Allocator allocated bytes summed over the reporting processes, or NVML used.
    pub allocated: u64,
    /// Allocator reserved bytes summed over the reporting processes, or NVML used.
    pub reserved: u64,
    pub used: u64,
    pub free: u64,
    pub total: u64,
    /// Memory the driver keeps for itself.
    #[serde(default)]
    pub driver_reserved: u64,
    /// Percent of the device not free, as nvidia-smi shows it.
    pub utilization: f64,
    /// Whether `allocated` and `reserved` come from allocator reports.
    #[serde(default)]
    pub allocator_reported: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Peaks {
    pub used: u64,
    /// Seconds into the run of the peak of `used`.
    pub used_at: f64,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Statistics {
    pub avg_utilization: f64,
    pub max_utilization: f64,
    /// True fragmentation ratio, 0..1 (null without allocator reports).
    pub avg_fragmentation: Option<f64>,
    pub max_fragmentation: Option<f64>,
    /// (reserved − allocated) / reserved, 0..1: cache not in live tensors, under its honest name.
    #[serde(default)]
    pub avg_cached_unallocated: Option<f64>,
    #[serde(default)]
    pub max_cached_unallocated: Option<f64>,
    pub num_snapshots: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessProfile {
    pub pid: u32,
    pub comm: String,
    pub job: Option<String>,
    pub rank: Option<u64>,
    pub peak_used: Option<u64>,
    pub peak_allocated: Option<u64>,
    pub peak_reserved: Option<u64>,
    /// Slope of the allocated (or NVML) floor at the end of the run, MiB per minute.
    pub leak_slope_mib_per_min: Option<f64>,
    pub leak_suspected: bool,
    pub first_seen: f64,
    pub last_seen: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventRecord {
    pub t: f64,
    pub pid: u32,
    /// `phase` (a change of phase), `mark` or `oom`.
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseRecord {
    pub name: String,
    /// Times a process entered the phase.
    pub entries: u64,
    /// Process-seconds spent in the phase.
    pub seconds: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct TimeSeries {
    pub t: Vec<f64>,
    pub used: Vec<u64>,
    pub reserved: Vec<u64>,
    pub allocated: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceProfile {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    pub current_memory: CurrentMemory,
    /// Highest NVML used seen, bytes.
    pub peak_memory: u64,
    pub peak: Peaks,
    pub statistics: Statistics,
    pub processes: Vec<ProcessProfile>,
    pub events: Vec<EventRecord>,
    #[serde(default)]
    pub events_dropped: u64,
    pub phases: Vec<PhaseRecord>,
    pub series: TimeSeries,
}

/// Devices in index order (the report's map is keyed by strings).
pub fn devices_in_order(r: &ProfileReport) -> Vec<&DeviceProfile> {
    let mut v: Vec<&DeviceProfile> = r.devices.values().collect();
    v.sort_by_key(|d| d.index);
    v
}

/// Read a profile report written by `profile`; errors name the file.
pub fn read_report(path: &Path) -> anyhow::Result<ProfileReport> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: not JSON: {e}", path.display()))?;
    if v.get("kind").and_then(|k| k.as_str()) != Some("profile") {
        anyhow::bail!(
            "{}: not a profile report (its `kind` is not \"profile\")",
            path.display()
        );
    }
    match v.get("schema_version").and_then(|s| s.as_u64()) {
        Some(s) if s == SCHEMA_VERSION as u64 => {}
        Some(s) => anyhow::bail!(
            "{}: schema_version {s} is not supported (this build reads {SCHEMA_VERSION})",
            path.display()
        ),
        None => anyhow::bail!("{}: no schema_version", path.display()),
    }
    serde_path_to_error::deserialize(v)
        .map_err(|e| anyhow::anyhow!("{}: {}: {}", path.display(), e.path(), e.inner()))
}
