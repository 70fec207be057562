//! The effective configuration: defaults, the YAML file, then command-line flags, validated
//! once at start so that every error names the field and what it accepts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::units;

mod source;
mod validate;
pub use source::{SourceSpec, SOURCE_ACCEPTED};
#[cfg(test)]
use validate::check_telemetry_path;
pub use validate::WEB_ROUTES;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub web: WebConfig,
    /// `nvml`, `sim`, or `replay:<file>[,<file>...]`, parsed once, where it is read.
    pub source: SourceSpec,
    #[serde(with = "humantime_serde")]
    pub sample_interval: Duration,
    pub log_level: String,
    /// `logfmt` (the Prometheus exporters' default) or `json`.
    pub log_format: String,
    pub nvml: NvmlConfig,
    pub history: HistoryConfig,
    pub analysis: AnalysisConfig,
    pub ingest: IngestConfig,
    pub sim: SimConfig,
    pub replay: ReplayConfig,
    pub kubernetes: KubernetesConfig,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attribution {
    /// On when running in a pod (KUBERNETES_SERVICE_HOST is set).
    Auto,
    On,
    Off,
}

/// Pod attribution: `namespace`, `pod`, `container` labels on per-process series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KubernetesConfig {
    pub attribution: Attribution,
    /// This node's name; empty: the NODE_NAME environment variable.
    pub node_name: String,
    /// API server address; empty: the in-cluster service (KUBERNETES_SERVICE_HOST/PORT).
    pub api_url: String,
    /// Bearer token; default: the pod's service account token.
    pub token_file: Option<PathBuf>,
    /// CA of the API server; default: the pod's service account CA.
    pub ca_file: Option<PathBuf>,
    /// How often the node's pod list is fetched again.
    #[serde(with = "humantime_serde")]
    pub refresh: Duration,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            attribution: Attribution::Auto,
            node_name: String::new(),
            api_url: String::new(),
            token_file: None,
            ca_file: None,
            refresh: Duration::from_secs(30),
        }
    }
}

impl KubernetesConfig {
    pub fn enabled(&self) -> bool {
        match self.attribution {
            Attribution::On => true,
            Attribution::Off => false,
            Attribution::Auto => std::env::var_os("KUBERNETES_SERVICE_HOST").is_some(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfig {
    pub listen_address: String,
    pub telemetry_path: String,
    /// TLS and basic authentication for the web endpoints, in the Prometheus exporter-toolkit
    /// format (docs/security.md). None: plain HTTP, no authentication.
    pub config_file: Option<PathBuf>,
    /// Open connections on the web port. A full port closes its longest idle connection to
    /// let a new one in; it refuses one only while every connection is in a request.
    pub max_connections: usize,
    /// A connection that sends no complete request headers for this long is closed (an idle
    /// kept-alive connection too).
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Series one scrape of `/metrics` (or one `/api/v1/snapshot`) may hold: the GPUs' and the
    /// exporter's own always, then whole processes while they fit (a scraper's `sample_limit`
    /// fails a larger scrape whole).
    pub max_series: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NvmlConfig {
    /// How long one GPU may take to answer one sample before it is reported down.
    #[serde(with = "humantime_serde")]
    pub deadline: Duration,
    /// Read `/proc/<pid>/comm` for process names.
    pub read_comm: bool,
    /// Where `/proc` is (a container may mount the host's elsewhere).
    pub proc_root: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HistoryConfig {
    /// How far back the history reaches.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// Width of one history bucket (min/max/last of the samples inside). Memory use does not
    /// grow with the sample rate: a bucket holds any number of samples.
    #[serde(with = "humantime_serde")]
    pub resolution: Duration,
    /// Processes tracked at most; the oldest idle ones give way first.
    pub max_processes: usize,
    /// A process NVML no longer lists and that stopped reporting is forgotten after this.
    #[serde(with = "humantime_serde")]
    pub expire_after: Duration,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AnalysisConfig {
    /// A floor rising faster than this (MiB per minute) counts as a leak. 10 MiB/min is about
    /// 14 GiB a day: slower than that, a job of a day or less never notices it.
    pub leak_threshold_mib_per_min: f64,
    /// Ignore this long after a process first appears (model load, cache warm-up).
    #[serde(with = "humantime_serde")]
    pub warmup: Duration,
    /// Width of the windows whose minima make the floor.
    #[serde(with = "humantime_serde")]
    pub floor_window: Duration,
    /// How much floor history the leak test looks at.
    #[serde(with = "humantime_serde")]
    pub leak_window: Duration,
    /// Least floor history before a leak can be judged at all.
    #[serde(with = "humantime_serde")]
    pub leak_min_span: Duration,
    /// How long the leak test must keep passing before the flag goes up.
    #[serde(with = "humantime_serde")]
    pub leak_persistence: Duration,
    /// Significance level of the Mann–Kendall trend test.
    pub leak_significance: f64,
    /// How much recent history the OOM forecast fits its trend on.
    #[serde(with = "humantime_serde")]
    pub eta_window: Duration,
    /// A process's own growth counts towards the OOM forecast only after it has been seen this
    /// long: loading a model or warming a cache is a ramp that stops by itself (its holdings
    /// count from the start).
    #[serde(with = "humantime_serde")]
    pub eta_warmup: Duration,
    /// Least trend before an ETA may rest on it; a start-up ramp is shorter and then flattens.
    #[serde(with = "humantime_serde")]
    pub eta_min_span: Duration,
    /// No ETA beyond this.
    #[serde(with = "humantime_serde")]
    pub eta_horizon: Duration,
    /// An ETA may reach at most this many times as far ahead as the trend it rests on is long.
    pub eta_max_extrapolation: f64,
    /// Window of `gpumem_peak_used_bytes{window=...}`.
    #[serde(with = "humantime_serde")]
    pub peak_window: Duration,
    pub risk: RiskConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RiskConfig {
    #[serde(with = "humantime_serde")]
    pub critical_eta: Duration,
    #[serde(with = "humantime_serde")]
    pub high_eta: Duration,
    #[serde(with = "humantime_serde")]
    pub medium_eta: Duration,
    /// Used fraction of a GPU at which the risk is at least medium: 0.85 leaves about one
    /// evaluation batch of room on an 80 GB card, the point where a person should look.
    pub medium_used_fraction: f64,
    /// Used fraction at which it is at least high, while demand grows.
    pub high_used_fraction: f64,
    /// Whether `high_used_fraction` needs growing demand to mean high. A server that takes
    /// 90 % up front and stays there is not at high risk; `oom --threshold` turns this off, for
    /// users who want a plain used-share threshold.
    pub high_used_needs_growth: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// Unix socket path; empty turns the socket off.
    pub socket: PathBuf,
    /// Octal permission bits of the socket file.
    pub socket_mode: String,
    /// Plain-HTTP ingest on TCP, or `off` (the default; empty is off too). Loopback only unless
    /// `allow_remote`.
    pub listen_address: String,
    pub allow_remote: bool,
    pub max_body_bytes: usize,
    /// A process that stopped reporting keeps its allocator series this long.
    #[serde(with = "humantime_serde")]
    pub expire_after: Duration,
    /// Largest free block reports are sent at a lower rate; keep the last one this long.
    #[serde(with = "humantime_serde")]
    pub largest_block_ttl: Duration,
    /// A report moves a GPU's risk, forecast, fragmentation and imbalance only for the GPUs
    /// NVML lists its sender on. Off only where NVML cannot list processes: then any local
    /// process can raise any GPU's risk.
    pub require_nvml_listing: bool,
    /// How long a (pid, GPU) pair stays trusted after NVML last listed it: a listing can miss
    /// a sample while the process is busy, and the OOM report comes as the process fails.
    #[serde(with = "humantime_serde")]
    pub listing_grace: Duration,
    /// Reports per second one process may send (bursts of twice as many); more get 429.
    pub max_reports_per_second: u32,
    /// Places in the process table that TCP senders (whose pid is only a header) may hold in
    /// all, and from one source address, each at most `history.max_processes`; a process the
    /// kernel vouches for (the socket) always finds room, taking the place of the TCP pid heard
    /// from least recently.
    pub max_tcp_processes: usize,
    pub max_tcp_processes_per_address: usize,
    /// Open connections on each ingest endpoint (the socket and TCP have a budget each), in all
    /// and, on the socket, per sending process.
    pub max_connections: usize,
    pub max_connections_per_process: usize,
    /// A connection that sends no complete request headers for this long is closed (an idle
    /// kept-alive connection too).
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// A request body that takes longer than this to arrive is refused (408).
    #[serde(with = "humantime_serde")]
    pub read_timeout: Duration,
}

/// What a simulated GPU's processes do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// Training sawtooth on a flat floor.
    Steady,
    /// A slow leak of the allocated floor that the cache hides from NVML at first.
    Leak,
    /// A ramp to OOM; the process fails, stays away briefly, and starts over.
    Oom,
    /// Weight streaming: a large, fragmented cache, emptied now and then.
    Frag,
    /// Two processes on one GPU: a steady trainer and a leaking one.
    Shared,
    /// Many small steady processes (load and scale tests).
    Processes,
    /// Many small processes that come and go: each lives 20 s, then a new pid takes its place
    /// (soak tests: series must appear and disappear without the exporter growing).
    Churn,
    /// No processes at all.
    Idle,
    /// The GPU split into MIG instances of different sizes, each its own memory: a steady
    /// trainer, one that runs out of its instance, small workers, an idle one.
    Mig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    pub seed: u64,
    pub gpus: Vec<SimGpuConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimGpuConfig {
    pub scenario: Scenario,
    #[serde(default = "default_total_gib")]
    pub total_gib: f64,
    /// Floor growth of the leaking process in the `leak` and `shared` scenarios.
    #[serde(default)]
    pub leak_mib_per_min: Option<f64>,
    /// Seconds the `oom` scenario takes from start to the failed allocation.
    #[serde(default)]
    pub ramp_seconds: Option<f64>,
    /// Simulated processes on this GPU (`processes` scenario only; 8×64 benchmarks use it).
    #[serde(default)]
    pub processes: Option<u32>,
}

fn default_total_gib() -> f64 {
    80.0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReplayConfig {
    pub speed: f64,
    /// Seconds between the allocator reports a replayed process sends: the client's default
    /// rate, whatever rate the trace was recorded at (0 sends every recorded sample).
    #[serde(with = "humantime_serde")]
    pub report_interval: Duration,
    /// A trace whose lines are out of time order or repeated is refused, naming the file and
    /// line; with this, it is sorted and its repeated lines dropped, with a warning that counts
    /// them (the trace then held in memory whole).
    pub sort: bool,
}

impl ReplayConfig {
    pub fn disorder(&self) -> crate::source::replay::Disorder {
        if self.sort {
            crate::source::replay::Disorder::Sort
        } else {
            crate::source::replay::Disorder::Refuse
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            web: WebConfig::default(),
            source: SourceSpec::Nvml,
            sample_interval: Duration::from_secs(1),
            log_level: "info".into(),
            log_format: "logfmt".into(),
            nvml: NvmlConfig::default(),
            history: HistoryConfig::default(),
            analysis: AnalysisConfig::default(),
            ingest: IngestConfig::default(),
            sim: SimConfig::default(),
            replay: ReplayConfig::default(),
            kubernetes: KubernetesConfig::default(),
        }
    }
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            listen_address: ":10049".into(),
            telemetry_path: "/metrics".into(),
            config_file: None,
            max_connections: 256,
            idle_timeout: Duration::from_secs(30),
            max_series: 20_000,
        }
    }
}

impl Default for NvmlConfig {
    fn default() -> Self {
        NvmlConfig {
            deadline: Duration::from_millis(500),
            read_comm: true,
            proc_root: PathBuf::from("/proc"),
        }
    }
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            // As long as the longest analysis window (leak_window) needs, no longer.
            window: Duration::from_secs(10 * 60),
            resolution: Duration::from_secs(1),
            max_processes: 1024,
            expire_after: Duration::from_secs(30),
        }
    }
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            leak_threshold_mib_per_min: 10.0,
            warmup: Duration::from_secs(15),
            floor_window: Duration::from_secs(5),
            leak_window: Duration::from_secs(10 * 60),
            leak_min_span: Duration::from_secs(30),
            leak_persistence: Duration::from_secs(15),
            leak_significance: 0.01,
            eta_window: Duration::from_secs(300),
            eta_warmup: Duration::from_secs(60),
            eta_min_span: Duration::from_secs(20),
            eta_horizon: Duration::from_secs(3600),
            eta_max_extrapolation: 5.0,
            peak_window: Duration::from_secs(300),
            risk: RiskConfig::default(),
        }
    }
}

impl Default for RiskConfig {
    fn default() -> Self {
        RiskConfig {
            critical_eta: Duration::from_secs(60),
            high_eta: Duration::from_secs(300),
            medium_eta: Duration::from_secs(1800),
            medium_used_fraction: 0.85,
            high_used_fraction: 0.95,
            high_used_needs_growth: true,
        }
    }
}

impl IngestConfig {
    /// Whether the socket's path is one somebody chose, not the default: then a socket that
    /// cannot be bound there stops the start instead of leaving reports off.
    pub fn socket_is_explicit(&self) -> bool {
        !self.socket.as_os_str().is_empty() && self.socket != IngestConfig::default().socket
    }

    /// The TCP ingest address, `None` when TCP ingest is off.
    pub fn tcp_address(&self) -> Option<&str> {
        Some(self.listen_address.as_str()).filter(|a| !a.is_empty() && *a != "off")
    }
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            socket: PathBuf::from("/run/gpumem/ingest.sock"),
            socket_mode: "0666".into(),
            listen_address: "off".into(),
            allow_remote: false,
            max_body_bytes: 1 << 20,
            expire_after: Duration::from_secs(30),
            largest_block_ttl: Duration::from_secs(60),
            require_nvml_listing: true,
            listing_grace: Duration::from_secs(10),
            max_reports_per_second: 20,
            max_tcp_processes: 256,
            max_tcp_processes_per_address: 64,
            max_connections: 256,
            max_connections_per_process: 8,
            idle_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(5),
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 42,
            gpus: [
                Scenario::Steady,
                Scenario::Leak,
                Scenario::Oom,
                Scenario::Frag,
                Scenario::Shared,
            ]
            .into_iter()
            .map(SimGpuConfig::new)
            .collect(),
        }
    }
}

impl SimGpuConfig {
    pub fn new(scenario: Scenario) -> Self {
        SimGpuConfig {
            scenario,
            total_gib: default_total_gib(),
            leak_mib_per_min: None,
            ramp_seconds: None,
            processes: None,
        }
    }
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            speed: 1.0,
            report_interval: Duration::from_secs(1),
            sort: false,
        }
    }
}

/// A configuration error that names the field and what it accepts.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {field}: {message}")]
pub struct ConfigError {
    pub field: String,
    pub message: String,
}

fn err(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
    }
}

/// `:10049`, `0.0.0.0:10049`, `[::1]:10049`, `localhost:10049`. A bare port listens on all
/// interfaces, as Prometheus exporters do.
pub fn parse_listen_address(s: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let full = if s.starts_with(':') {
        format!("[::]{s}")
    } else {
        s.to_string()
    };
    full.to_socket_addrs()
        .map_err(|e| format!("`{s}` is not a host:port address ({e})"))?
        .next()
        .ok_or_else(|| format!("`{s}` resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn unknown_field_is_named() {
        let e = Config::from_yaml("analysis:\n  leak_treshold: 3\n").unwrap_err();
        assert!(e.field.starts_with("analysis"), "{}", e.field);
        assert!(e.to_string().contains("leak_treshold"), "{e}");
        assert!(
            e.message.contains("leak_threshold_mib_per_min"),
            "{}",
            e.message
        );
    }

    #[test]
    fn bad_scenario_lists_the_accepted_ones() {
        let e = Config::from_yaml("sim:\n  gpus:\n    - scenario: nope\n").unwrap_err();
        assert!(e.field.starts_with("sim.gpus[0].scenario"), "{}", e.field);
        assert!(e.message.contains("steady"), "{}", e.message);
    }

    #[test]
    fn bad_duration_is_named() {
        let e = Config::from_yaml("sample_interval: fast\n").unwrap_err();
        assert_eq!(e.field, "sample_interval");
    }

    #[test]
    fn a_yaml_error_names_the_field_once() {
        for (yaml, field) in [
            ("web:\n  listen_address: [1]\n", "web.listen_address"),
            ("web:\n  listen_addres: x\n", "web.listen_addres"),
            ("sample_interval: fast\n", "sample_interval"),
            (
                "sim:\n  gpus:\n    - scenario: nope\n",
                "sim.gpus[0].scenario",
            ),
        ] {
            let e = Config::from_yaml(yaml).unwrap_err();
            assert_eq!(e.field, field);
            let text = e.to_string();
            assert_eq!(text.matches(field).count(), 1, "{text}");
            assert!(text.contains("line"), "where it is stays said: {text}");
        }
    }

    #[test]
    fn interval_range_is_enforced() {
        let c = Config {
            sample_interval: Duration::from_millis(5),
            ..Config::default()
        };
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, "sample_interval");
        assert!(e.message.contains("10ms..60s"));
    }

    #[test]
    fn source_spec_parses_and_names_accepted_values() {
        assert_eq!(SourceSpec::parse("sim").unwrap(), SourceSpec::Sim);
        assert_eq!(
            SourceSpec::parse("replay:a.jsonl,b.jsonl").unwrap(),
            SourceSpec::Replay(vec!["a.jsonl".into(), "b.jsonl".into()])
        );
        let e = SourceSpec::parse("dcgm").unwrap_err();
        assert!(e.message.contains("nvml, sim, replay"));
    }

    #[test]
    fn remote_ingest_needs_consent() {
        let mut c = Config::default();
        c.ingest.listen_address = "0.0.0.0:9999".into();
        assert_eq!(c.validate().unwrap_err().field, "ingest.listen_address");
        c.ingest.allow_remote = true;
        c.validate().unwrap();
    }

    #[test]
    fn tcp_ingest_is_off_when_empty_or_off() {
        let c = Config::from_yaml("ingest:\n  listen_address: \"off\"\n").unwrap();
        assert_eq!(c.ingest.tcp_address(), None);
        assert_eq!(Config::default().ingest.tcp_address(), None);
        let c = Config::from_yaml("ingest:\n  listen_address: 127.0.0.1:9\n").unwrap();
        assert_eq!(c.ingest.tcp_address(), Some("127.0.0.1:9"));
    }

    #[test]
    fn only_a_socket_path_somebody_chose_must_bind() {
        let mut i = IngestConfig::default();
        assert!(!i.socket_is_explicit(), "the default may degrade");
        i.socket = PathBuf::new();
        assert!(!i.socket_is_explicit(), "off");
        i.socket = PathBuf::from("/tmp/gpumem.sock");
        assert!(i.socket_is_explicit());
    }

    #[test]
    fn a_socket_its_owner_cannot_use_or_no_socket_can_have_is_refused() {
        for mode in ["0000", "0066", "0400", "0200", "0477", "1777", "0888", "rw"] {
            let mut c = Config::default();
            c.ingest.socket_mode = mode.into();
            let e = c.validate().unwrap_err();
            assert_eq!(e.field, "ingest.socket_mode", "{mode}");
            assert!(e.message.contains("accepted: "), "{mode}: {e}");
        }
        for mode in ["0600", "0660", "0666", "0o777"] {
            let mut c = Config::default();
            c.ingest.socket_mode = mode.into();
            c.validate().unwrap_or_else(|e| panic!("{mode}: {e}"));
        }
        let mut c = Config::default();
        c.ingest.socket = PathBuf::from(format!("/tmp/{}.sock", "x".repeat(100)));
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, "ingest.socket");
        assert!(e.message.contains("at most 107 bytes"), "{e}");
    }

    #[test]
    fn a_setting_that_would_switch_its_feature_off_is_refused_with_its_range() {
        for (yaml, field, range) in [
            (
                "analysis:\n  peak_window: 0s\n",
                "analysis.peak_window",
                "history.resolution (1s)..history.window (10m)",
            ),
            (
                "analysis:\n  peak_window: 1h\n",
                "analysis.peak_window",
                "..history.window (10m)",
            ),
            (
                "analysis:\n  eta_horizon: 0s\n",
                "analysis.eta_horizon",
                "analysis.risk.medium_eta (30m)..7d",
            ),
            (
                "analysis:\n  eta_window: 0s\n",
                "analysis.eta_window",
                "3 × history.resolution (3s)..history.window (10m)",
            ),
            (
                "analysis:\n  eta_min_span: 0s\n",
                "analysis.eta_min_span",
                "3 × history.resolution (3s)..analysis.eta_window (5m)",
            ),
            (
                "analysis:\n  leak_window: 0s\n",
                "analysis.leak_window",
                "3 × history.resolution (3s)..history.window (10m)",
            ),
            (
                "analysis:\n  leak_min_span: 0s\n",
                "analysis.leak_min_span",
                "3 × analysis.floor_window (15s)..analysis.leak_window (10m)",
            ),
            (
                "analysis:\n  floor_window: 0s\n",
                "analysis.floor_window",
                "history.resolution (1s)..10m",
            ),
            ("analysis:\n  warmup: 400d\n", "analysis.warmup", "0s..1d"),
            (
                "analysis:\n  risk:\n    critical_eta: 0s\n",
                "analysis.risk.critical_eta",
                "1s..analysis.risk.high_eta (5m)",
            ),
            (
                "analysis:\n  leak_threshold_mib_per_min: 1e12\n",
                "analysis.leak_threshold_mib_per_min",
                "at most 1048576",
            ),
            (
                "history:\n  expire_after: 0s\n",
                "history.expire_after",
                "sample_interval, at least 1s (1s)..1d",
            ),
            (
                "ingest:\n  expire_after: 0s\n",
                "ingest.expire_after",
                "2s..1d",
            ),
            (
                "ingest:\n  largest_block_ttl: 1s\n",
                "ingest.largest_block_ttl",
                "30s..1d",
            ),
            ("nvml:\n  deadline: 1ns\n", "nvml.deadline", "10ms..1m"),
            (
                "kubernetes:\n  refresh: 100d\n",
                "kubernetes.refresh",
                "1s..1d",
            ),
            (
                "replay:\n  report_interval: 100d\n",
                "replay.report_interval",
                "0s (every recorded sample) or 10ms..1m",
            ),
            ("replay:\n  speed: 1e-9\n", "replay.speed", "0.01..100000"),
        ] {
            let e = Config::from_yaml(yaml)
                .and_then(|c| c.validate().map(|_| c))
                .unwrap_err();
            assert_eq!(e.field, field, "{yaml}");
            assert!(
                e.message.contains("accepted: ") && e.message.contains(range),
                "{yaml}: {e}"
            );
        }
        // The edges of the ranges are accepted.
        for yaml in [
            "replay:\n  report_interval: 0s\n",
            "analysis:\n  peak_window: 10m\n  eta_horizon: 30m\n",
            "history:\n  expire_after: 1s\n",
            "analysis:\n  leak_min_span: 15s\n",
        ] {
            Config::from_yaml(yaml)
                .unwrap()
                .validate()
                .unwrap_or_else(|e| panic!("{yaml}: {e}"));
        }
    }

    #[test]
    fn yaml_round_trips() {
        let c = Config::default();
        assert_eq!(Config::from_yaml(&c.to_yaml()).unwrap(), c);
    }

    #[test]
    fn the_telemetry_path_leaves_the_other_endpoints_alone() {
        for bad in [
            "/",
            "/-/healthy",
            "/-/ready",
            "/api/v1/snapshot",
            "metrics",
            "/:id",
        ] {
            assert!(check_telemetry_path(bad).is_err(), "{bad}");
        }
        for bad in ["/{id}", "/*rest", "/a b", "/m?x=1", "/%41"] {
            assert!(check_telemetry_path(bad).is_err(), "{bad}");
        }
        for good in ["/metrics", "/gpu-metrics", "/a/b_c.d~e/", "/-/metrics"] {
            check_telemetry_path(good).unwrap();
        }
    }

    #[test]
    fn listen_address_forms() {
        assert_eq!(parse_listen_address(":10049").unwrap().port(), 10049);
        assert!(parse_listen_address("127.0.0.1:1")
            .unwrap()
            .ip()
            .is_loopback());
        assert!(parse_listen_address("nonsense").is_err());
    }
}
