//! The stepped runtime the report commands use: the engine over one source, sampled at the
//! command's pace (live) or item by item through a trace (replay), until a duration, the end of
//! the trace, or Ctrl-C.

use std::io::{IsTerminal, Write};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::live::unix_now;
use super::telemetry::Counters;
use crate::config::{Config, SourceSpec};
use crate::engine::Engine;
use crate::model::{Observation, Time};
use crate::pace::{drive, Stop, Ticks, Wall};
use crate::snapshot::Snapshot;
use crate::source::{self, Reports, Source};

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
    /// Ctrl-C (SIGINT) and SIGTERM end the run early; the report is still written.
    stop: Arc<Stop>,
}

impl Sampler {
    /// Open the configured source. `interval` overrides `sample_interval`.
    pub fn open(cfg: &Config, interval: Option<Duration>) -> anyhow::Result<Sampler> {
        let replay = matches!(cfg.source, SourceSpec::Replay(_));
        // Without --interval a workflow takes every recorded sample, reports too.
        let reports = if interval.is_some() {
            Reports::AtClientRate
        } else {
            Reports::All
        };
        let source = source::open(cfg, reports).map_err(|e| {
            // A trace that cannot be read is a bad --source value.
            if replay {
                usage("--source", e.to_string())
            } else {
                e
            }
        })?;
        Ok(Sampler {
            engine: Engine::new(cfg, source.kind()),
            source,
            replay,
            interval: interval.unwrap_or(cfg.sample_interval),
            replay_interval: interval.map(|d| d.as_secs_f64()),
            stop: Stop::on_signals()?,
        })
    }

    pub fn is_replay(&self) -> bool {
        self.replay
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The GPU indices the source has.
    pub fn gpu_indices(&self) -> Vec<u32> {
        self.source.gpu_indices()
    }

    /// Every index in `--devices` must be a GPU the source has.
    pub fn check_devices(&self, devices: &[u32]) -> anyhow::Result<()> {
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
        let started = Instant::now();
        let mut items = Items {
            interval: self.replay_interval,
            limit,
            start: None,
            last: None,
            ended: false,
        };
        let mut wall = Wall::new(
            self.interval,
            Arc::new(unix_now),
            limit.map(|d| started + Duration::from_secs_f64(d)),
        );
        let ticks: &mut dyn Ticks = if self.replay { &mut items } else { &mut wall };
        let (engine, counters, replay) = (&mut self.engine, Counters::default(), self.replay);
        drive(&mut *self.source, ticks, &self.stop, |obs| {
            let s = *start.get_or_insert(obs.t);
            super::fold(&counters, &obs, |o| super::observe(engine, o));
            let snap = engine.current();
            end.samples += 1;
            end.covered = obs.t - s;
            let flow = f(&Tick {
                t: obs.t - s,
                obs: &obs,
                snap: &snap,
            });
            if let Some(p) = progress.as_mut() {
                let done = if replay {
                    obs.t - s
                } else {
                    started.elapsed().as_secs_f64()
                };
                p.update(done, end.samples);
            }
            flow
        });
        end.interrupted = self.stop.is_set();
        end.trace_ended = items.ended;
        if let Some(p) = progress.as_mut() {
            p.finish();
        }
        end
    }
}

/// A replay's ticks for the report commands: every recorded item, or with `interval` the items
/// of each interval folded into one sample, up to `limit` seconds of trace time.
struct Items {
    interval: Option<f64>,
    limit: Option<f64>,
    start: Option<Time>,
    last: Option<Time>,
    /// The trace ran out.
    ended: bool,
}

impl Ticks for Items {
    fn next(&mut self, next_item: Option<Time>, stop: &Stop) -> Option<Time> {
        if stop.is_set() {
            return None;
        }
        let Some(next) = next_item else {
            self.ended = true;
            return None;
        };
        let s = *self.start.get_or_insert(next);
        if self.limit.is_some_and(|d| next - s > d + 1e-9) {
            return None;
        }
        let t = match (self.interval, self.last) {
            (Some(i), Some(l)) if next < l + i => {
                let target = l + i;
                let target = self.limit.map(|d| target.min(s + d)).unwrap_or(target);
                target.max(next)
            }
            _ => next,
        };
        self.last = Some(t);
        Some(t)
    }
}
