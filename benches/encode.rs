//! Cost of the scrape path and the sample path on a node of 8 GPUs × 64 processes.
//! Results and the command: bench/RESULTS.md.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};

use gpumem_exporter::config::Scenario;
use gpumem_exporter::config::{Config, SimGpuConfig};
use gpumem_exporter::engine::Engine;
use gpumem_exporter::exporter::encode;
use gpumem_exporter::runtime::telemetry::Counters;
use gpumem_exporter::source::sim::SimSource;
use gpumem_exporter::source::Source;

fn node() -> (Config, SimSource, Engine) {
    // Sampled every 10 ms (the last benchmark's steps): the analysis runs once a second.
    let mut cfg = Config {
        sample_interval: std::time::Duration::from_millis(10),
        ..Default::default()
    };
    cfg.sim.gpus = (0..8)
        .map(|_| SimGpuConfig {
            processes: Some(64),
            ..SimGpuConfig::new(Scenario::Processes)
        })
        .collect();
    let mut src = SimSource::new(&cfg.sim);
    let mut engine = Engine::new(&cfg, "sim");
    // Two minutes of history at 1 Hz, so the analysis has real work to do.
    for i in 0..120 {
        engine.observe(&src.sample(i as f64));
    }
    (cfg, src, engine)
}

fn bench(c: &mut Criterion) {
    let (_cfg, mut src, mut engine) = node();
    let counters = Counters::default();
    let snap = engine.snapshot();
    assert_eq!(snap.processes.len(), 512);
    // Into one String reused across iterations, as the HTTP path reuses its chunk buffer.
    let mut out = String::new();
    c.bench_function("scrape_text_8gpu_64proc", |b| {
        b.iter(|| {
            out.clear();
            encode::text(&snap, &counters, "bench", &mut out).unwrap();
            out.len()
        })
    });
    let (snap_arc, counters_arc) = (Arc::new(snap.clone()), Arc::new(Counters::default()));
    c.bench_function("scrape_openmetrics_8gpu_64proc", |b| {
        b.iter(|| {
            out.clear();
            encode::openmetrics(snap_arc.clone(), counters_arc.clone(), "bench", &mut out).unwrap();
            out.len()
        })
    });
    // What a scrape builds first when the engine has changed since the last one.
    c.bench_function("snapshot_8gpu_64proc", |b| b.iter(|| engine.snapshot()));
    let mut t = 120.0;
    c.bench_function("sample_observe_8gpu_64proc", |b| {
        b.iter(|| {
            // 10 ms steps: most samples fold into a bucket, one in 100 runs the analysis.
            t += 0.01;
            let obs = src.sample(t);
            engine.observe(&obs);
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
