//! MIG: each instance of a GPU in MIG mode is a memory domain of its own. The simulator's `mig`
//! scenario splits a GPU into instances of 4, 2, 1 and 1 eighths; the 2g.20gb one runs out of
//! its memory while the GPU as a whole is less than half full. (No MIG GPU was available to
//! test against: the NVML side is covered by its own unit tests only.)

use gpumem_exporter::analysis::oom::RiskLevel;
use gpumem_exporter::config::{Config, Scenario, SimGpuConfig};
use gpumem_exporter::engine::Engine;
use gpumem_exporter::exporter::encode;
use gpumem_exporter::runtime::telemetry::Counters;
use gpumem_exporter::source::sim::SimSource;
use gpumem_exporter::source::Source;

#[test]
fn the_instance_that_runs_out_gets_the_forecast_and_the_page_not_its_gpu() {
    let mut cfg = Config::default();
    cfg.sim.gpus = vec![SimGpuConfig::new(Scenario::Mig)];
    let mut src = SimSource::new(&cfg.sim);
    let mut engine = Engine::new(&cfg, "sim");
    let mut paged_at = None;
    let mut whole_gpu_used = 0.0f64;
    for i in 0..150 {
        let obs = src.sample(i as f64);
        whole_gpu_used = obs
            .gpus
            .iter()
            .filter_map(|g| g.memory.map(|m| m.used as f64))
            .sum::<f64>()
            / (80.0 * (1u64 << 30) as f64);
        engine.observe(&obs);
        let snap = engine.snapshot();
        let risk = |profile: &str| {
            snap.gpus
                .iter()
                .find(|g| g.id.mig.as_ref().is_some_and(|m| m.profile == profile))
                .map(|g| g.risk)
                .unwrap()
        };
        if paged_at.is_none() && risk("2g.20gb") == RiskLevel::Critical {
            paged_at = Some(i);
        }
        assert_eq!(risk("3g.40gb"), RiskLevel::Low, "at {i} s");
    }
    let paged_at = paged_at.expect("the 2g.20gb instance never reached critical");
    assert!(
        whole_gpu_used < 0.6,
        "the GPU as a whole is far from full: {whole_gpu_used}"
    );
    // Its ramp ends in an OOM at 150 s: the page comes before.
    assert!(paged_at < 140, "paged at {paged_at} s");

    let snap = engine.snapshot();
    let uuids: Vec<&str> = snap.gpus.iter().map(|g| g.id.uuid.as_str()).collect();
    assert_eq!(uuids.len(), 4);
    assert!(uuids.iter().all(|u| u.starts_with("MIG-")), "{uuids:?}");
    assert!(snap.gpus.iter().all(|g| g.id.index == 0), "all on GPU 0");
    // Reports join their instance by the MIG uuid.
    assert!(snap
        .processes
        .iter()
        .all(|p| p.uuid.starts_with("MIG-") && p.allocator.is_some()));

    let mut text = String::new();
    encode::text(&snap, &Counters::default(), "test", &mut text).unwrap();
    let eta = text
        .lines()
        .find(|l| l.starts_with("gpumem_oom_eta_seconds{") && !l.contains("pid="))
        .expect("a per-instance ETA");
    assert!(
        eta.contains(r#"gpu="0""#)
            && eta.contains(r#"gpu_instance="2""#)
            && eta.contains(r#"mig_profile="2g.20gb""#),
        "{eta}"
    );
    let info: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("gpumem_gpu_info{"))
        .collect();
    assert_eq!(info.len(), 4);
    assert!(info.iter().any(|l| l.contains(r#"mig_profile="3g.40gb""#)));
}
