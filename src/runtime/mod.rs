//! The runtime every face uses: the live sampler and shared state (`serve`, `top`), the
//! stepped sampler (the report commands), and the exporter's telemetry about itself. Each
//! drives its source through `pace::drive` and takes each sample in through `fold`.

pub mod live;
pub mod stepped;
pub mod telemetry;

use std::sync::atomic::Ordering;

use crate::engine::Engine;
use crate::model::Observation;
use telemetry::Counters;

/// Fold one sample into the engine and the exporter's counters about itself: every runtime
/// (live, replay, the report commands) takes a sample the same way.
pub fn fold(engine: &mut Engine, counters: &Counters, obs: &Observation) {
    for g in &obs.gpus {
        counters.record_errors(g.id.index, &g.errors);
    }
    if obs.reinitialised {
        counters.nvml_reinit.fetch_add(1, Ordering::Relaxed);
    }
    counters
        .nvml_reader_restarts
        .fetch_add(obs.reader_restarts.into(), Ordering::Relaxed);
    engine.observe(obs);
    counters
        .tracked_processes
        .store(engine.tracked_processes() as u64, Ordering::Relaxed);
    counters.record_sample(obs.duration_seconds);
}
