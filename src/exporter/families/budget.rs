//! The series budget of a scrape (`web.max_series`): which processes a snapshot keeps to stay
//! within it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::LabelValue::{Int, Str};
use super::{visit, Desc, SeriesFn, Sink, Snapshot};
use crate::runtime::telemetry::Counters;

/// Counts the series of an exposition: in all, and of each process (the series with its `pid`
/// and `uuid`).
struct Count<'s> {
    total: usize,
    /// uuid → pid → index in `Snapshot::processes`.
    index: HashMap<&'s str, HashMap<u64, usize>>,
    of_process: Vec<usize>,
}

impl Sink for Count<'_> {
    fn family(&mut self, _: &Desc, series: &SeriesFn<'_>) -> fmt::Result {
        series(&mut |labels, _| {
            self.total += 1;
            let find = |k| labels.iter().find(|(name, _)| *name == k).map(|(_, v)| *v);
            if let (Some(Int(pid)), Some(Str(uuid))) = (find("pid"), find("uuid")) {
                if let Some(&i) = self.index.get(uuid).and_then(|m| m.get(&pid)) {
                    self.of_process[i] += 1;
                }
            }
            Ok(())
        })
    }
}

/// The snapshot as `/metrics` serves it within `max_series`, and how many series that leaves
/// out. Every GPU's series and the exporter's own are always served (the GPUs bound them);
/// processes are served whole, those NVML lists first, then those known only from their
/// reports, each group in the snapshot's order, for as long as the next one fits. A scrape
/// over a scraper's `sample_limit` is lost whole: better a node's processes in part than none.
pub fn within_budget(
    s: Arc<Snapshot>,
    c: &Counters,
    version: &str,
    max_series: usize,
) -> (Arc<Snapshot>, u64) {
    let mut count = Count {
        total: 0,
        index: HashMap::new(),
        of_process: vec![0; s.processes.len()],
    };
    for (i, p) in s.processes.iter().enumerate() {
        count
            .index
            .entry(p.uuid.as_str())
            .or_default()
            .insert(p.pid.into(), i);
    }
    visit(&s, c, version, &mut count).expect("counting cannot fail");
    if count.total <= max_series {
        return (s, 0);
    }
    let of_processes: usize = count.of_process.iter().sum();
    let mut room = max_series.saturating_sub(count.total - of_processes);
    let mut order: Vec<usize> = (0..s.processes.len()).collect();
    order.sort_by_key(|&i| s.processes[i].nvml_used.is_none());
    let mut keep = vec![false; s.processes.len()];
    for i in order {
        if count.of_process[i] > room {
            break;
        }
        room -= count.of_process[i];
        keep[i] = true;
    }
    let kept: usize = (0..keep.len())
        .filter(|&i| keep[i])
        .map(|i| count.of_process[i])
        .sum();
    let mut trimmed = (*s).clone();
    let mut i = 0;
    trimmed.processes.retain(|_| {
        i += 1;
        keep[i - 1]
    });
    (Arc::new(trimmed), (of_processes - kept) as u64)
}

#[cfg(test)]
mod tests {
    use super::super::families;
    use super::*;
    use crate::config::{Config, Scenario, SimGpuConfig};
    use crate::engine::Engine;
    use crate::model::{Component, DeviceStats, Report, REPORT_VERSION};
    use crate::source::sim::SimSource;
    use crate::source::Source;

    /// Two simulated GPUs whose processes NVML lists, and 50 processes known only from reports,
    /// each with 32 components.
    fn crowded() -> (Arc<Snapshot>, Counters) {
        let mut cfg = Config::default();
        cfg.sim.gpus = vec![
            SimGpuConfig::new(Scenario::Steady),
            SimGpuConfig::new(Scenario::Shared),
        ];
        let mut src = SimSource::new(&cfg.sim);
        let mut engine = Engine::new(&cfg, "sim");
        let first = src.sample(0.0);
        let uuid = first.gpus[0].id.uuid.clone();
        engine.observe(&first);
        for pid in 0..50 {
            let report = Report {
                version: REPORT_VERSION,
                devices: vec![DeviceStats {
                    uuid: uuid.clone(),
                    allocated_bytes: 1 << 20,
                    reserved_bytes: 2 << 20,
                    ..Default::default()
                }],
                components: Some(
                    (0..32)
                        .map(|i| Component {
                            component: format!("c{i}"),
                            parameters_bytes: Some(1),
                            gradients_bytes: Some(1),
                            optimizer_bytes: Some(1),
                        })
                        .collect(),
                ),
                ..Default::default()
            };
            engine.report(100_000 + pid, 0.5, &report).unwrap();
        }
        engine.observe(&src.sample(1.0));
        (engine.current(), Counters::default())
    }

    fn series(s: &Snapshot, c: &Counters) -> usize {
        families(s, c, "test").iter().map(|f| f.series.len()).sum()
    }

    #[test]
    fn the_series_budget_serves_gpus_and_listed_processes_first_and_whole_processes_only() {
        let (snap, c) = crowded();
        let all = series(&snap, &c);
        let listed: Vec<u32> = snap
            .processes
            .iter()
            .filter(|p| p.nvml_used.is_some())
            .map(|p| p.pid)
            .collect();
        assert!(!listed.is_empty() && snap.processes.len() == listed.len() + 50);

        let (same, dropped) = within_budget(Arc::clone(&snap), &c, "test", all);
        assert!(
            Arc::ptr_eq(&same, &snap) && dropped == 0,
            "within the budget"
        );

        let budget = all / 4;
        let (trimmed, dropped) = within_budget(Arc::clone(&snap), &c, "test", budget);
        let served = series(&trimmed, &c);
        assert!(served <= budget, "{served} > {budget}");
        assert_eq!(
            served as u64 + dropped,
            all as u64,
            "every series served or counted"
        );
        for pid in &listed {
            assert!(
                trimmed.processes.iter().any(|p| p.pid == *pid),
                "listed pid {pid} dropped before report-only ones"
            );
        }
        let report_only = trimmed.processes.len() - listed.len();
        assert!(report_only > 0 && report_only < 50, "{report_only}");
        // A process is served whole or not at all: every served one keeps its 96 component
        // series (the simulator's listed processes report a few components of their own).
        let components = |s: &Snapshot| {
            families(s, &c, "test")
                .into_iter()
                .find(|f| f.name == "gpumem_process_component_bytes")
                .map_or(0, |f| f.series.len())
        };
        let mut listed_only = (*snap).clone();
        listed_only.processes.retain(|p| p.nvml_used.is_some());
        assert_eq!(
            components(&trimmed),
            components(&listed_only) + report_only * 96
        );
        // Too small for any process: the GPUs are still served.
        let (bare, _) = within_budget(snap, &c, "test", 1);
        assert!(bare.processes.is_empty() && bare.gpus.len() == 2);
    }
}
