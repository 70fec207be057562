//! The exporter's telemetry about itself: samples taken, GPU errors, NVML restarts, the
//! ingest endpoints' counters and the listeners' connections.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::connections::ConnectionCounters;
use crate::ingest::server::IngestCounters;
use crate::model::ErrorKind;

/// The exporter's own counters, updated from the sampler and the ingest handlers without
/// taking the engine's lock; `/metrics` shows them as `gpumem_exporter_*` and `gpumem_ingest_*`.
#[derive(Debug, Default)]
pub struct Counters {
    pub samples: AtomicU64,
    sample_duration_bits: AtomicU64,
    pub nvml_reinit: AtomicU64,
    pub nvml_reader_restarts: AtomicU64,
    /// The ingest endpoints' own counters.
    pub ingest: Arc<IngestCounters>,
    /// Every listener's open and shed connections.
    pub connections: Arc<ConnectionCounters>,
    pub tracked_processes: AtomicU64,
    /// Series left out of `/metrics` by the series budget, summed over scrapes.
    pub series_dropped: AtomicU64,
    sample_errors: Mutex<BTreeMap<(u32, ErrorKind), u64>>,
}

impl Counters {
    pub fn record_sample(&self, duration_seconds: f64) {
        self.samples.fetch_add(1, Ordering::Relaxed);
        self.sample_duration_bits
            .store(duration_seconds.to_bits(), Ordering::Relaxed);
    }

    pub fn sample_duration(&self) -> f64 {
        f64::from_bits(self.sample_duration_bits.load(Ordering::Relaxed))
    }

    /// Called for every GPU on every sample: no allocation once the GPU is known.
    pub fn record_errors(&self, gpu: u32, kinds: &[ErrorKind]) {
        let mut m = self.sample_errors.lock().unwrap_or_else(|e| e.into_inner());
        // Every kind starts at 0 for every GPU so that rate() and increase() work from the
        // first error on.
        if !m.contains_key(&(gpu, ErrorKind::Timeout)) {
            for k in ErrorKind::ALL {
                m.insert((gpu, k), 0);
            }
        }
        for k in kinds {
            *m.entry((gpu, *k)).or_insert(0) += 1;
        }
    }

    pub fn sample_errors(&self) -> BTreeMap<(u32, ErrorKind), u64> {
        self.sample_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
