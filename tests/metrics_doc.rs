//! docs/metrics.md and the real output must list the same families, with the same types.

use std::collections::BTreeMap;

use gpumem_exporter::config::Scenario;
use gpumem_exporter::config::{Config, SimGpuConfig};
use gpumem_exporter::connections::Listener;
use gpumem_exporter::engine::Engine;
use gpumem_exporter::exporter::families::{families, Kind};
use gpumem_exporter::runtime::telemetry::Counters;
use gpumem_exporter::source::sim::SimSource;
use gpumem_exporter::source::Source;

fn documented() -> BTreeMap<String, String> {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md")).unwrap();
    doc.lines()
        .filter(|l| l.starts_with("| `gpumem_"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].trim_matches('`').to_string(), cells[2].to_string())
        })
        .collect()
}

/// Every family the exporter serves over a simulated run that exercises every scenario.
fn served() -> BTreeMap<String, String> {
    let mut cfg = Config::default();
    cfg.sim.gpus = [
        Scenario::Steady,
        Scenario::Leak,
        Scenario::Oom,
        Scenario::Frag,
        Scenario::Shared,
    ]
    .into_iter()
    .map(SimGpuConfig::new)
    .collect();
    // Long enough for a forecast after the warm-up, a page and the crash within the run.
    cfg.sim.gpus[2].ramp_seconds = Some(120.0);
    let mut src = SimSource::new(&cfg.sim);
    let mut engine = Engine::new(&cfg, "sim");
    let counters = Counters::default();
    counters.record_errors(0, &[]);
    // A listener the exporter was started with (gpumem_exporter_ingest_up is served for those).
    let socket = counters.connections.of(Listener::IngestSocket);
    socket.configure(false);
    socket.set_up();
    let mut out = BTreeMap::new();
    for i in 0..1800 {
        let obs = src.sample(i as f64 * 0.1);
        engine.observe(&obs);
        for f in families(&engine.current(), &counters, "test") {
            let kind = match f.kind {
                Kind::Gauge => "gauge",
                Kind::Counter => "counter",
            };
            out.insert(f.name.to_string(), kind.to_string());
        }
    }
    out
}

#[test]
fn documented_families_equal_served_families() {
    let doc = documented();
    let real = served();
    let undocumented: Vec<_> = real.keys().filter(|k| !doc.contains_key(*k)).collect();
    let never_served: Vec<_> = doc.keys().filter(|k| !real.contains_key(*k)).collect();
    assert!(
        undocumented.is_empty(),
        "served but not in docs/metrics.md: {undocumented:?}"
    );
    assert!(
        never_served.is_empty(),
        "in docs/metrics.md but never served: {never_served:?}"
    );
    for (name, kind) in &real {
        assert_eq!(&doc[name], kind, "type of {name}");
    }
}

/// `replay --metrics` accepts the names `families::names` gives: every documented family must be
/// among them, or a real family would be refused.
#[test]
fn every_documented_family_is_named() {
    let named = gpumem_exporter::exporter::families::names();
    let missing: Vec<_> = documented()
        .into_keys()
        .filter(|k| !named.contains(&k.as_str()))
        .collect();
    assert!(missing.is_empty(), "families::names lacks {missing:?}");
}
