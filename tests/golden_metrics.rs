//! The whole `/metrics` exposition over the simulator at a fixed seed and fixed sample times,
//! against tests/golden/metrics.txt: any change to a name, label, help text, value or order
//! shows here. When the change is meant, review the difference and write the new text with
//! `GPUMEM_BLESS=1 cargo test --test golden_metrics`, in the same commit as the change (and
//! docs/metrics.md, the dashboards and the rules where a metric changed).

use gpumem_exporter::config::Config;
use gpumem_exporter::engine::Engine;
use gpumem_exporter::exporter::encode;
use gpumem_exporter::runtime::telemetry::Counters;
use gpumem_exporter::source::sim::SimSource;
use gpumem_exporter::source::Source;

fn exposition() -> String {
    // The simulator's default GPUs: steady, leak, oom, frag, shared.
    let mut cfg = Config::default();
    cfg.sim.seed = 7;
    let mut src = SimSource::new(&cfg.sim);
    let mut engine = Engine::new(&cfg, "sim");
    let counters = Counters::default();
    // Two minutes of samples, one a second, from a fixed epoch.
    for i in 0..120 {
        let obs = src.sample(1_800_000_000.0 + i as f64);
        counters.record_sample(0.0);
        for g in &obs.gpus {
            counters.record_errors(g.id.index, &g.errors);
        }
        engine.observe(&obs);
    }
    let mut out = String::new();
    encode::text(&engine.current(), &counters, "golden", &mut out).unwrap();
    out
}

#[test]
fn the_exposition_matches_the_golden_file() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/metrics.txt");
    let now = exposition();
    assert_eq!(now, exposition(), "the exposition is not deterministic");
    if std::env::var_os("GPUMEM_BLESS").is_some() {
        std::fs::write(path, &now).unwrap();
        return;
    }
    let kept = std::fs::read_to_string(path)
        .unwrap_or_else(|_| panic!("{path} is missing: run with GPUMEM_BLESS=1"));
    if kept != now {
        let diff: Vec<String> = kept
            .lines()
            .zip(now.lines())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(20)
            .map(|(i, (a, b))| format!("line {}:\n  kept: {a}\n  now:  {b}", i + 1))
            .collect();
        panic!(
            "the exposition changed ({} lines kept, {} now); first differences:\n{}\nGPUMEM_BLESS=1 to accept",
            kept.lines().count(),
            now.lines().count(),
            diff.join("\n")
        );
    }
}
