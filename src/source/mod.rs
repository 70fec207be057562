//! Where readings come from: NVML on a real node, the simulator, or recorded traces.

pub mod device;
pub mod nvml;
pub mod replay;
pub mod sim;

use crate::config::{Config, SourceSpec};
use crate::model::{Observation, Time};
use crate::pace::{Pace, Sampled};

/// A source of observations. `sample` may block (NVML), so it is only ever called from the
/// dedicated sampler thread or from batch code, never on the async runtime.
pub trait Source: Send {
    fn kind(&self) -> &'static str;
    /// Observe at source time `t`: Unix seconds for live sources, trace seconds for replay.
    fn sample(&mut self, t: Time) -> Observation;
    /// The time of the next recorded item, for sources that have one (replay).
    fn next_time(&self) -> Option<Time> {
        None
    }
    /// The indices of the GPUs it has.
    fn gpu_indices(&self) -> Vec<u32>;
    /// Sample every `pace.interval` until stopped, handing each observation to
    /// `pace.deliver`; returns once stopped. This: a plain loop on the calling thread.
    fn run(mut self: Box<Self>, pace: Pace) {
        pace.run_plain(&mut *self)
    }
}

impl<S: Source + ?Sized> Sampled for S {
    fn take(&mut self, t: Time) -> Observation {
        self.sample(t)
    }
    fn next_item(&self) -> Option<Time> {
        self.next_time()
    }
}

/// Which of a trace's allocator reports a replay sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reports {
    /// One per process every `replay.report_interval`, as the client sends them live.
    AtClientRate,
    /// Every recorded one (a workflow that takes every recorded sample).
    All,
}

/// Open the configured source: the one place a `--source` becomes a source.
pub fn open(cfg: &Config, reports: Reports) -> anyhow::Result<Box<dyn Source>> {
    Ok(match &cfg.source {
        SourceSpec::Sim => Box::new(sim::SimSource::new(&cfg.sim)),
        SourceSpec::Replay(files) => Box::new(
            replay::ReplaySource::open_with(files, cfg.replay.disorder())?.with_report_interval(
                match reports {
                    Reports::AtClientRate => cfg.replay.report_interval.as_secs_f64(),
                    Reports::All => 0.0,
                },
            ),
        ),
        SourceSpec::Nvml => Box::new(device::DeviceSource::new(
            nvml::NvmlBackend::open(device::start_limit(cfg.nvml.deadline))?,
            &cfg.nvml,
        )?),
    })
}
