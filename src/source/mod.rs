//! Where readings come from: NVML on a real node, the simulator, or recorded traces.

pub mod device;
pub mod nvml;
pub mod replay;
pub mod sim;

use crate::config::{Config, SourceSpec};
use crate::model::{Observation, Time};

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
}

/// Open the configured source.
pub fn open(cfg: &Config) -> anyhow::Result<Box<dyn Source>> {
    Ok(match cfg.source_spec()? {
        SourceSpec::Sim => Box::new(sim::SimSource::new(&cfg.sim)),
        SourceSpec::Replay(files) => Box::new(replay::ReplaySource::open(&files)?),
        SourceSpec::Nvml => Box::new(device::DeviceSource::new(
            nvml::NvmlBackend::open()?,
            &cfg.nvml,
            cfg.sample_interval,
        )?),
    })
}
