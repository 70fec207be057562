//! The runtime every face uses: the live sampler and shared state (`serve`, `top`), the
//! stepped sampler (the report commands), and the exporter's telemetry about itself. Each
//! drives its source through `pace::drive` and takes each sample in through `fold`.

pub mod heap;
pub mod live;
pub mod stepped;
pub mod telemetry;

use std::sync::atomic::Ordering;

use crate::engine::Engine;
use crate::model::Observation;
use telemetry::Counters;

/// Fold into a live engine behind its lock, or one the caller owns.
pub fn observe(engine: &mut Engine, obs: &Observation) -> usize {
    engine.observe(obs);
    engine.tracked_processes()
}

/// Fold one sample into the engine and the exporter's counters about itself: every runtime
/// (live, replay, the report commands) takes a sample the same way. `observe` folds it into
/// the engine and says how many processes the engine tracks; the counters are kept outside it,
/// so that a live engine's lock is held for the engine's work alone.
pub fn fold(counters: &Counters, obs: &Observation, observe: impl FnOnce(&Observation) -> usize) {
    for g in &obs.gpus {
        counters.record_errors(g.id.index, &g.errors);
    }
    if obs.reinitialised {
        counters.nvml_reinit.fetch_add(1, Ordering::Relaxed);
    }
    counters
        .nvml_reader_restarts
        .fetch_add(obs.reader_restarts.into(), Ordering::Relaxed);
    let tracked = observe(obs);
    counters
        .tracked_processes
        .store(tracked as u64, Ordering::Relaxed);
    counters.record_sample(obs.duration_seconds);
}
