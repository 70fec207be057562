//! The readings every source produces, in one shape, so that the engine never knows whether a
//! number came from NVML, the simulator or a replayed trace.

use serde::{Deserialize, Serialize};

/// Seconds on the source's clock: Unix time for live sources, trace time for replay.
/// Analysis only ever looks at these timestamps, never at a wall clock.
pub type Time = f64;

/// Identity and descriptive data of one GPU, or of one MIG instance of a GPU: a memory domain
/// of its own, which is what runs out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct GpuIdentity {
    /// NVML's index of the GPU (of the parent GPU, for a MIG instance).
    pub index: u32,
    /// `GPU-…`, or `MIG-…` for a MIG instance (the uuid CUDA reports inside it).
    pub uuid: String,
    pub name: String,
    pub pci_bus_id: String,
    pub mig: Option<MigInstance>,
}

/// Where a MIG instance sits on its parent GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigInstance {
    /// NVML's GPU instance id on the parent.
    pub gpu_instance: u32,
    /// The profile, e.g. `3g.40gb`.
    pub profile: String,
}

/// Device memory as NVML's `nvmlDeviceGetMemoryInfo_v2` reports it: total = reserved + used + free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct DeviceMemory {
    pub total: u64,
    pub reserved: u64,
    pub used: u64,
    pub free: u64,
}

/// One process as NVML lists it on one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessReading {
    pub pid: u32,
    pub used_bytes: u64,
    /// `/proc/<pid>/comm` where visible.
    pub comm: Option<String>,
}

/// Why a GPU could not be read this time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    Timeout,
    GpuLost,
    NotSupported,
    Driver,
    ProcessGone,
    Other,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 6] = [
        ErrorKind::Timeout,
        ErrorKind::GpuLost,
        ErrorKind::NotSupported,
        ErrorKind::Driver,
        ErrorKind::ProcessGone,
        ErrorKind::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::GpuLost => "gpu_lost",
            ErrorKind::NotSupported => "not_supported",
            ErrorKind::Driver => "driver",
            ErrorKind::ProcessGone => "process_gone",
            ErrorKind::Other => "other",
        }
    }
}

/// One GPU at one moment. `memory` is `None` when the GPU could not be read; `errors` says why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuReading {
    pub id: GpuIdentity,
    pub memory: Option<DeviceMemory>,
    pub processes: Vec<ProcessReading>,
    pub errors: Vec<ErrorKind>,
}

impl GpuReading {
    pub fn is_up(&self) -> bool {
        self.memory.is_some()
    }
}

/// Everything a source saw in one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Observation {
    pub t: Time,
    pub gpus: Vec<GpuReading>,
    /// Allocator reports that the source itself produced (simulator, replay). Reports from
    /// real processes arrive through the ingest endpoint instead; both end in the same engine call.
    #[serde(skip)]
    pub reports: Vec<(u32, Report)>,
    /// Wall seconds the sample took, for the exporter's own gauge.
    pub duration_seconds: f64,
    /// NVML was initialised again before this sample.
    pub reinitialised: bool,
    /// Panics the NVML reader survived since the previous observation was handed on (a backend
    /// call or a hand-off panicked; the reader went on with the next sample).
    pub reader_restarts: u32,
}

// Allocator reports: what a training process says about its allocator (docs/ingest.md). The
// same shapes are the ingest endpoint's wire format, read and checked by `ingest::report`.

/// The version of the report format this build reads.
pub const REPORT_VERSION: u64 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Identity {
    #[serde(default)]
    pub job: Option<String>,
    #[serde(default)]
    pub rank: Option<u64>,
    #[serde(default)]
    pub local_rank: Option<u64>,
    #[serde(default)]
    pub world_size: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DeviceStats {
    pub uuid: String,
    #[serde(default)]
    pub allocator: Option<String>,
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
    #[serde(default)]
    pub active_bytes: Option<u64>,
    #[serde(default)]
    pub inactive_split_bytes: Option<u64>,
    #[serde(default)]
    pub segments: Option<u64>,
    #[serde(default)]
    pub alloc_retries: Option<u64>,
    #[serde(default)]
    pub ooms: Option<u64>,
    #[serde(default)]
    pub allocated_peak_bytes: Option<u64>,
    #[serde(default)]
    pub reserved_peak_bytes: Option<u64>,
    #[serde(default)]
    pub largest_free_block_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Phase,
    Mark,
    Oom,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub kind: EventKind,
    pub name: String,
    #[serde(default)]
    pub message: Option<String>,
    /// An `oom` event's failing request, where the client caught it (PyTorch's out-of-memory
    /// observer hands it over).
    #[serde(default)]
    pub request_bytes: Option<u64>,
    /// An `oom` event: the device's free bytes when the request failed.
    #[serde(default)]
    pub free_bytes: Option<u64>,
}

impl Event {
    /// An event with a kind and a name only.
    pub fn named(kind: EventKind, name: impl Into<String>) -> Self {
        Event {
            kind,
            name: name.into(),
            message: None,
            request_bytes: None,
            free_bytes: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Component {
    pub component: String,
    #[serde(default)]
    pub parameters_bytes: Option<u64>,
    #[serde(default)]
    pub gradients_bytes: Option<u64>,
    #[serde(default)]
    pub optimizer_bytes: Option<u64>,
}

/// A validated allocator report. The sender's pid is never part of it: the transport supplies it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Report {
    pub version: u64,
    #[serde(default)]
    pub identity: Identity,
    pub devices: Vec<DeviceStats>,
    /// Absent: no news about the phase. `null`: outside any phase now.
    #[serde(default, deserialize_with = "present")]
    pub phase: Option<Option<String>>,
    #[serde(default)]
    pub events: Vec<Event>,
    #[serde(default)]
    pub components: Option<Vec<Component>>,
}

/// Tell a member that is present (even as `null`) from one that is absent.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// Why a report was refused; the label value of `gpumem_ingest_rejected_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RejectReason {
    Malformed,
    InvalidValue,
    UnsupportedVersion,
    TooLarge,
    ContentType,
    TooManyProcesses,
    /// The report names a GPU this host does not have.
    UnknownGpu,
    /// The process sent more reports per second than `ingest.max_reports_per_second`.
    RateLimited,
    /// A connection over `ingest.max_connections` (per process or in all), closed at once.
    TooManyConnections,
    /// The body did not arrive within `ingest.read_timeout`.
    Timeout,
}

impl RejectReason {
    pub const ALL: [RejectReason; 10] = [
        RejectReason::Malformed,
        RejectReason::InvalidValue,
        RejectReason::UnsupportedVersion,
        RejectReason::TooLarge,
        RejectReason::ContentType,
        RejectReason::TooManyProcesses,
        RejectReason::UnknownGpu,
        RejectReason::RateLimited,
        RejectReason::TooManyConnections,
        RejectReason::Timeout,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Malformed => "malformed",
            RejectReason::InvalidValue => "invalid_value",
            RejectReason::UnsupportedVersion => "unsupported_version",
            RejectReason::TooLarge => "too_large",
            RejectReason::ContentType => "content_type",
            RejectReason::TooManyProcesses => "too_many_processes",
            RejectReason::UnknownGpu => "unknown_gpu",
            RejectReason::RateLimited => "rate_limited",
            RejectReason::TooManyConnections => "too_many_connections",
            RejectReason::Timeout => "timeout",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Rejection {
    pub reason: RejectReason,
    pub message: String,
}

impl Rejection {
    pub fn new(reason: RejectReason, message: impl Into<String>) -> Self {
        Rejection {
            reason,
            message: message.into(),
        }
    }
}
