//! What the report commands (`profile`, `oom`, `leak`, `fragment`, `top`, ...) share: flag
//! parsing and checks made before any sampling starts, the sampling loop over the same engine
//! the exporter runs, a progress bar, Ctrl-C, and writing reports.
//!
//! Replay sources run as fast as the CPU goes, stepping on the trace's own timestamps (as the
//! replay timeline does), so a duration is in trace seconds. Live sources (NVML, the simulator)
//! sample on the wall clock every `--interval`.

use std::io::{IsTerminal, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::cli::{Command, SamplingArgs};
use crate::commands::serve::unix_now;
use crate::config::{Config, SourceSpec, MAX_INTERVAL, MIN_INTERVAL};
use crate::engine::Engine;
use crate::model::{Observation, Time};
use crate::snapshot::Snapshot;
use crate::source::{self, replay::ReplaySource, sim::SimSource, Source};

/// Version of the JSON shapes written by the report commands (docs/reports.md).
pub const SCHEMA_VERSION: u32 = 1;
/// Duration of a live run when `--duration` is not given.
pub const DEFAULT_DURATION: f64 = 60.0;

pub const MIB: f64 = 1048576.0;
pub const GIB: f64 = 1073741824.0;

/// A bad flag: reported with the flag's name, exit status 2, before any sampling.
#[derive(Debug, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct Usage {
    pub flag: String,
    pub message: String,
}

pub fn usage(flag: &str, message: impl Into<String>) -> anyhow::Error {
    Usage {
        flag: flag.to_string(),
        message: message.into(),
    }
    .into()
}

/// Run a report command unless `command` is some other one, which is handed back.
pub fn dispatch(cfg: &Config, command: Option<Command>) -> ControlFlow<ExitCode, Option<Command>> {
    let result = match command {
        Some(Command::Profile(a)) => super::profile::run(cfg, a),
        Some(Command::Oom(a)) => super::oom::run(cfg, a),
        Some(Command::Leak(a)) => super::leak::run(cfg, a),
        Some(Command::Fragment(a)) => super::fragment::run(cfg, a),
        Some(Command::Compare(a)) => super::compare::run(a),
        Some(Command::Sweep(a)) => super::sweep::run(a),
        Some(Command::Top(a)) => super::top::run(cfg, a),
        other => return ControlFlow::Continue(other),
    };
    ControlFlow::Break(match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gpumem-exporter: {e:#}");
            if e.downcast_ref::<Usage>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    })
}

/// Seconds, as a number (`90`, `2.5`) or a duration (`90s`, `2m`, `500ms`); more than zero.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let v = match s.trim().parse::<f64>() {
        Ok(v) => v,
        Err(_) => humantime::parse_duration(s.trim())
            .map(|d| d.as_secs_f64())
            .map_err(|_| format!("`{s}` is not a number of seconds such as 60, 2.5 or 2m"))?,
    };
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("`{s}`: must be more than zero seconds"));
    }
    Ok(v)
}

/// A sampling interval in seconds or as a duration, within what the exporter accepts.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let secs = parse_seconds(s)?;
    let d = Duration::from_secs_f64(secs);
    if d < MIN_INTERVAL || d > MAX_INTERVAL {
        return Err(format!("`{s}` is out of range; accepted: 0.01..60 seconds"));
    }
    Ok(d)
}

/// `key=value`, the key non-empty.
pub fn parse_tag(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not KEY=VALUE")),
    }
}

/// Fail now, not after the run, when `path` cannot be written.
pub fn check_writable(path: &Path, flag: &str) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    if path.is_dir() {
        return Err(usage(
            flag,
            format!("{} is a directory, not a file", path.display()),
        ));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() {
        return Err(usage(
            flag,
            format!(
                "cannot write {}: directory {} does not exist",
                path.display(),
                parent.display()
            ),
        ));
    }
    let existed = path.exists();
    let opened = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path);
    match opened {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => Err(usage(flag, format!("cannot write {}: {e}", path.display()))),
    }
}

/// Chart formats, from the file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Png,
    Svg,
}

pub fn check_plot(path: &Path, flag: &str) -> anyhow::Result<ImageKind> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase());
    let kind = match ext.as_deref() {
        Some("png") => ImageKind::Png,
        Some("svg") => ImageKind::Svg,
        _ => {
            return Err(usage(
                flag,
                format!(
                    "{}: the chart's file name must end in .png or .svg",
                    path.display()
                ),
            ))
        }
    };
    check_writable(path, flag)?;
    Ok(kind)
}

/// Write a report as pretty JSON to a file, or to stdout for `-`.
pub fn write_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()?;
    } else {
        std::fs::write(path, text)
            .map_err(|e| anyhow::anyhow!("--output: cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// RFC 3339, UTC, whole seconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// The source as the report names it: `nvml`, `sim` or `replay:<file names>`.
pub fn source_label(cfg: &Config) -> String {
    match cfg.source_spec() {
        Ok(SourceSpec::Replay(files)) => format!(
            "replay:{}",
            files
                .iter()
                .map(|f| f
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default())
                .collect::<Vec<_>>()
                .join(",")
        ),
        Ok(s) => s.kind().to_string(),
        Err(_) => cfg.source.clone(),
    }
}

pub fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Ctrl-C (SIGINT) and SIGTERM end the run early; the report is still written.
pub fn install_stop_handler() -> &'static AtomicBool {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    &STOP
}

pub fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// A one-line progress bar on stderr, drawn only when stderr is a terminal.
pub struct Progress {
    enabled: bool,
    total: Option<f64>,
    label: &'static str,
    last_draw: Option<Instant>,
}

impl Progress {
    pub fn new(label: &'static str, total: Option<f64>) -> Self {
        Progress {
            enabled: std::io::stderr().is_terminal(),
            total,
            label,
            last_draw: None,
        }
    }

    pub fn update(&mut self, done: f64, samples: usize) {
        if !self.enabled
            || self
                .last_draw
                .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        self.last_draw = Some(Instant::now());
        let line = match self.total {
            Some(total) if total > 0.0 => {
                let frac = (done / total).clamp(0.0, 1.0);
                let width = 30;
                let full = (frac * width as f64).round() as usize;
                format!(
                    "{} [{}{}] {:>5.1}/{:.1} s  {} samples",
                    self.label,
                    "#".repeat(full),
                    "-".repeat(width - full),
                    done,
                    total,
                    samples
                )
            }
            _ => format!("{} {:.1} s  {} samples", self.label, done, samples),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
    }

    pub fn finish(&mut self) {
        if self.enabled && self.last_draw.is_some() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

/// One step of a run, handed to the command.
pub struct Tick<'a> {
    /// Seconds since the first sample of the run.
    pub t: f64,
    pub obs: &'a Observation,
    pub snap: &'a Snapshot,
}

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

/// How a run ended.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunEnd {
    /// Seconds from the first to the last sample.
    pub covered: f64,
    pub samples: usize,
    /// Ctrl-C or SIGTERM.
    pub interrupted: bool,
    /// A replayed trace ran out before the duration.
    pub trace_ended: bool,
}

/// The engine over one source, stepped by the report commands.
pub struct Sampler {
    source: Box<dyn Source>,
    engine: Engine,
    replay: bool,
    /// Seconds between samples on the wall clock (live), or the least trace time between
    /// samples (replay, only when asked for).
    interval: Duration,
    replay_interval: Option<f64>,
    gpus: Option<Vec<u32>>,
    pending: Option<Observation>,
}

impl Sampler {
    /// Open the configured source. `interval` overrides `sample_interval`.
    pub fn open(cfg: &Config, interval: Option<Duration>) -> anyhow::Result<Sampler> {
        let spec = cfg.source_spec()?;
        let (source, replay, gpus): (Box<dyn Source>, bool, Option<Vec<u32>>) = match &spec {
            SourceSpec::Replay(files) => {
                // A trace that cannot be read is a bad --source value.
                // Without --interval a workflow takes every recorded sample, reports too.
                let reports = if interval.is_some() {
                    cfg.replay.report_interval.as_secs_f64()
                } else {
                    0.0
                };
                let r = ReplaySource::open(files)
                    .map_err(|e| usage("--source", e.to_string()))?
                    .with_report_interval(reports);
                let ids = r.gpu_ids().iter().map(|g| g.index).collect();
                (Box::new(r), true, Some(ids))
            }
            SourceSpec::Sim => (
                Box::new(SimSource::new(&cfg.sim)),
                false,
                Some((0..cfg.sim.gpus.len() as u32).collect()),
            ),
            SourceSpec::Nvml => (source::open(cfg)?, false, None),
        };
        Ok(Sampler {
            engine: Engine::new(cfg, source.kind()),
            source,
            replay,
            interval: interval.unwrap_or(cfg.sample_interval),
            replay_interval: interval.map(|d| d.as_secs_f64()),
            gpus,
            pending: None,
        })
    }

    pub fn is_replay(&self) -> bool {
        self.replay
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The GPU indices the source has; NVML is asked with one sample, which the run then uses.
    pub fn gpu_indices(&mut self) -> Vec<u32> {
        if let Some(g) = &self.gpus {
            return g.clone();
        }
        let obs = self.source.sample(unix_now());
        let ids: Vec<u32> = obs.gpus.iter().map(|g| g.id.index).collect();
        self.pending = Some(obs);
        self.gpus = Some(ids.clone());
        ids
    }

    /// Every index in `--devices` must be a GPU the source has.
    pub fn check_devices(&mut self, devices: &[u32]) -> anyhow::Result<()> {
        if devices.is_empty() {
            return Ok(());
        }
        let have = self.gpu_indices();
        for d in devices {
            if !have.contains(d) {
                let list = have
                    .iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(usage(
                    "--devices",
                    format!(
                        "no GPU with index {d}; this source has: {}",
                        if list.is_empty() { "none".into() } else { list }
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Sample until `limit` seconds have passed (None: until Ctrl-C, or the end of a trace),
    /// calling `f` after each sample. `f` may break to end the run early.
    pub fn run(
        &mut self,
        limit: Option<f64>,
        progress_label: Option<&'static str>,
        mut f: impl FnMut(&Tick) -> ControlFlow<()>,
    ) -> RunEnd {
        let mut progress = progress_label.map(|l| Progress::new(l, limit));
        let mut end = RunEnd::default();
        let mut start: Option<Time> = None;
        if self.replay {
            let mut last_t: Option<Time> = None;
            loop {
                if stopped() {
                    end.interrupted = true;
                    break;
                }
                let Some(next) = self.source.next_time() else {
                    end.trace_ended = true;
                    break;
                };
                let s = *start.get_or_insert(next);
                if limit.is_some_and(|d| next - s > d + 1e-9) {
                    break;
                }
                // With --interval, fold the items of each interval into one sample.
                let t = match (self.replay_interval, last_t) {
                    (Some(i), Some(l)) if next < l + i => {
                        let target = l + i;
                        let target = limit.map(|d| target.min(s + d)).unwrap_or(target);
                        target.max(next)
                    }
                    _ => next,
                };
                let obs = self.source.sample(t);
                last_t = Some(t);
                self.engine.observe(&obs);
                let snap = self.engine.snapshot();
                end.samples += 1;
                end.covered = t - s;
                let flow = f(&Tick {
                    t: t - s,
                    obs: &obs,
                    snap: &snap,
                });
                if let Some(p) = progress.as_mut() {
                    p.update(t - s, end.samples);
                }
                if flow.is_break() {
                    break;
                }
            }
        } else {
            let started = Instant::now();
            let deadline = limit.map(|d| started + Duration::from_secs_f64(d));
            let mut next = started;
            loop {
                if stopped() {
                    end.interrupted = true;
                    break;
                }
                let obs = match self.pending.take() {
                    Some(o) => o,
                    None => self.source.sample(unix_now()),
                };
                let s = *start.get_or_insert(obs.t);
                self.engine.observe(&obs);
                let snap = self.engine.snapshot();
                end.samples += 1;
                end.covered = obs.t - s;
                let flow = f(&Tick {
                    t: obs.t - s,
                    obs: &obs,
                    snap: &snap,
                });
                if let Some(p) = progress.as_mut() {
                    p.update(started.elapsed().as_secs_f64(), end.samples);
                }
                if flow.is_break() {
                    break;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                next += self.interval;
                let now = Instant::now();
                if next < now {
                    next = now + self.interval;
                }
                let wake = match deadline {
                    Some(d) => next.min(d),
                    None => next,
                };
                while !stopped() {
                    let left = wake.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::sleep(left.min(Duration::from_millis(50)));
                }
            }
        }
        if let Some(p) = progress.as_mut() {
            p.finish();
        }
        end
    }
}

/// The run's length: `--duration`, else the whole trace (replay) or the default (live).
pub fn run_limit(sampling: &SamplingArgs, replay: bool) -> Option<f64> {
    match sampling.duration {
        Some(d) => Some(d),
        None if replay => None,
        None => Some(DEFAULT_DURATION),
    }
}

/// Whether GPU `index` is one the user asked for (`--devices`, empty: all).
pub fn selected(devices: &[u32], index: u32) -> bool {
    devices.is_empty() || devices.contains(&index)
}

/// Format bytes as GiB with one decimal.
pub fn gib(v: f64) -> String {
    format!("{:.1}", v / GIB)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_intervals() {
        assert_eq!(parse_seconds("2.5").unwrap(), 2.5);
        assert_eq!(parse_seconds("2m").unwrap(), 120.0);
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("-3").unwrap_err().contains("more than zero"));
        assert!(parse_seconds("soon").is_err());
        assert_eq!(parse_interval("50ms").unwrap(), Duration::from_millis(50));
        assert!(parse_interval("0.001").is_err());
        assert!(parse_interval("61").is_err());
    }

    #[test]
    fn tags() {
        assert_eq!(
            parse_tag("batch_size=32").unwrap(),
            ("batch_size".into(), "32".into())
        );
        assert_eq!(parse_tag("note=a=b").unwrap().1, "a=b");
        assert!(parse_tag("=3").is_err());
        assert!(parse_tag("novalue").is_err());
    }
}
