//! Batch replay: the engine over recorded traces as fast as the CPU goes, writing what
//! `/metrics` would show at each second of trace time.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use crate::config::Config;
use crate::engine::Engine;
use crate::exporter::families::families;
use crate::exporter::http::VERSION;
use crate::runtime::telemetry::Counters;
use crate::snapshot::Snapshot;
use crate::source::replay::ReplaySource;
use crate::source::Source;

#[derive(Serialize)]
pub struct TimelineMetric<'a> {
    pub name: &'a str,
    pub labels: BTreeMap<&'a str, &'a str>,
    pub value: f64,
}

#[derive(Serialize)]
pub struct TimelineLine<'a> {
    pub t: i64,
    pub metrics: Vec<TimelineMetric<'a>>,
}

/// Drive `source` through its whole timeline at the configured sample interval (NVML is read
/// that often, as live), calling `at_second` with the snapshot at each whole second of trace
/// time.
pub fn run_timeline(
    cfg: &Config,
    source: &mut ReplaySource,
    mut at_second: impl FnMut(i64, &Snapshot, &Counters) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut engine = Engine::new(cfg, source.kind());
    let counters = Counters::default();
    let Some(first) = source.next_time() else {
        return Ok(());
    };
    let mut second = first.floor().max(0.0) as i64;
    let mut snapshot = engine.snapshot();
    let step = cfg.sample_interval.as_secs_f64();
    // The clock ticks on whole seconds of trace time (and `step` after), as a live exporter's
    // does whatever the recording's phase: shifting a trace shifts what each tick sees.
    let mut t = first.floor();
    while t + step <= first {
        t += step;
    }
    while source.next_time().is_some() {
        while (second as f64) < t {
            at_second(second, &snapshot, &counters)?;
            second += 1;
        }
        let obs = source.sample(t);
        for g in &obs.gpus {
            counters.record_errors(g.id.index, &g.errors);
        }
        engine.observe(&obs);
        counters.record_sample(0.0);
        counters.tracked_processes.store(
            engine.tracked_processes() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        snapshot = engine.snapshot();
        t += step;
    }
    at_second(second, &snapshot, &counters)
}

pub fn write_timeline(
    cfg: &Config,
    files: &[std::path::PathBuf],
    output: &Path,
) -> anyhow::Result<()> {
    let mut source =
        ReplaySource::open(files)?.with_report_interval(cfg.replay.report_interval.as_secs_f64());
    let out: Box<dyn Write> = if output.as_os_str() == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(
            std::fs::File::create(output)
                .map_err(|e| anyhow::anyhow!("--output: cannot write {}: {e}", output.display()))?,
        )
    };
    let mut out = std::io::BufWriter::new(out);
    let mut lines = 0u64;
    run_timeline(cfg, &mut source, |t, snap, counters| {
        let fams = families(snap, counters, VERSION);
        let metrics = fams
            .iter()
            .flat_map(|f| {
                f.series.iter().map(move |s| TimelineMetric {
                    name: f.name,
                    labels: s.labels.iter().map(|(k, v)| (*k, v.as_str())).collect(),
                    value: s.value,
                })
            })
            .collect();
        serde_json::to_writer(&mut out, &TimelineLine { t, metrics })?;
        out.write_all(b"\n")?;
        lines += 1;
        Ok(())
    })?;
    out.flush()?;
    tracing::info!(lines, output = %output.display(), "timeline written");
    Ok(())
}
