//! The live runtime: the sampler thread feeding the engine, and the state the sampler, the
//! ingest endpoints and the web servers share.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::telemetry::Counters;
use crate::config::{Config, SourceSpec};
use crate::engine::{current, Engine};
use crate::model::{Observation, Time};
use crate::snapshot::Snapshot;
use crate::source::{Pace, Source, Stop};

pub fn unix_now() -> Time {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The source's clock: Unix time for live sources; for replay, trace time running at
/// `replay.speed` from the trace's start.
pub fn source_clock(cfg: &Config) -> Arc<dyn Fn() -> Time + Send + Sync> {
    match cfg.source {
        SourceSpec::Replay(_) => {
            let started = Instant::now();
            let speed = cfg.replay.speed;
            Arc::new(move || started.elapsed().as_secs_f64() * speed)
        }
        _ => Arc::new(unix_now),
    }
}

/// Everything the sampler and the servers share.
#[derive(Clone)]
pub struct Shared {
    pub engine: Arc<Mutex<Engine>>,
    pub counters: Arc<Counters>,
    pub ready: Arc<AtomicBool>,
    pub stop: Arc<Stop>,
}

impl Shared {
    pub fn new(cfg: &Config, source_kind: &str) -> Self {
        Shared {
            engine: Arc::new(Mutex::new(Engine::new(cfg, source_kind))),
            counters: Arc::new(Counters::default()),
            ready: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(Stop::default()),
        }
    }

    /// Take one sample and record it.
    pub fn step(&self, source: &mut dyn Source, t: Time) {
        self.record(source.sample(t));
    }

    /// The engine's current snapshot (built on demand).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        current(&self.engine)
    }

    /// Fold a sample into the engine.
    pub fn record(&self, obs: Observation) {
        for g in &obs.gpus {
            self.counters.record_errors(g.id.index, &g.errors);
        }
        if obs.reinitialised {
            self.counters.nvml_reinit.fetch_add(1, Ordering::Relaxed);
        }
        self.counters
            .nvml_reader_restarts
            .fetch_add(obs.reader_restarts.into(), Ordering::Relaxed);
        {
            let mut e = self.engine.lock().unwrap_or_else(|e| e.into_inner());
            e.observe(&obs);
            self.counters
                .tracked_processes
                .store(e.tracked_processes() as u64, Ordering::Relaxed);
        }
        self.counters.record_sample(obs.duration_seconds);
        self.ready.store(true, Ordering::Release);
    }
}

/// The sampling loop on its own OS thread: NVML calls block, so they stay off the runtime.
pub fn spawn_sampler(
    shared: Shared,
    source: Box<dyn Source>,
    interval: Duration,
    clock: Arc<dyn Fn() -> Time + Send + Sync>,
) -> std::thread::JoinHandle<()> {
    let stop = Arc::clone(&shared.stop);
    let pace = Pace {
        interval,
        clock,
        deliver: Box::new(move |obs| shared.record(obs)),
        stop,
    };
    std::thread::Builder::new()
        .name("sampler".into())
        .spawn(move || source.run(pace))
        .expect("spawn the sampler thread")
}
