//! Snapshots: what the engine shows of each GPU and process, built once per change.

use super::*;

impl Engine {
    fn process_view(&self, key: &ProcKey, now: Time) -> Option<ProcessView> {
        let ttl = self.cfg.ingest.expire_after.as_secs_f64();
        let block_ttl = self.cfg.ingest.largest_block_ttl.as_secs_f64();
        let gpu = self
            .gpus
            .iter()
            .find(|g| g.id.uuid == key.1)
            .map(|g| g.id.index);
        let trust = self.trust();
        let p = self.procs.get(key)?;
        let reporting = p.reporting(now, ttl);
        if !(p.listed_now || reporting) {
            return None;
        }
        // Unverified: the process's own numbers only, nothing derived that an alert reads.
        let verified = trust.vouches(p, now);
        let alloc = if reporting { p.alloc.clone() } else { None };
        let largest = p.largest_free_block(now, block_ttl);
        let view = alloc.as_ref().filter(|_| verified).map(|a| AllocatorView {
            allocated: a.allocated_bytes as f64,
            reserved: a.reserved_bytes as f64,
            inactive_split: a.inactive_split_bytes.map(|v| v as f64),
            largest_free_block: largest.map(|v| v as f64),
        });
        let nvml_used = if p.listed_now { p.nvml_used } else { None };
        let overhead = match (nvml_used, &alloc) {
            (Some(u), Some(a)) => Some(u as f64 - a.reserved_bytes as f64),
            _ => None,
        };
        Some(ProcessView {
            gpu,
            uuid: key.1.clone(),
            pid: key.0,
            comm: p.comm.clone().unwrap_or_default(),
            pod: p.pod.clone(),
            nvml_used,
            largest_free_block: if alloc.is_some() { largest } else { None },
            overhead,
            identity: p.identity.clone(),
            phase: if alloc.is_some() {
                p.phase.clone()
            } else {
                None
            },
            phase_entries: p
                .phase_entries
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            components: p.components.clone(),
            verified,
            leak_slope: p.leak.filter(|_| verified).map(|l| l.trend.slope),
            leak_p_value: p.leak.filter(|_| verified).map(|l| l.trend.p_value),
            leak_suspected: p.leak_suspected && verified,
            eta_seconds: p.eta.map(|e| e.seconds),
            risk: RiskLevel::Low,
            fragmentation: view.as_ref().and_then(fragmentation::fragmentation_ratio),
            cached_unallocated: view
                .as_ref()
                .and_then(fragmentation::cached_unallocated_ratio),
            allocator: alloc,
            age: now - p.demand.appeared(),
        })
    }

    /// The snapshot of what the engine holds now, built only when something was folded in
    /// since the last one. Scrapes and the live view ask for it; the sampler does not, so a
    /// sample costs no snapshot that nobody reads (at 8 GPUs × 64 processes, one costs about a
    /// third of what the rest of a sample does; with Prometheus scraping every 15 s and
    /// sampling every second, fourteen in fifteen went unread).
    pub fn current(&mut self) -> Arc<Snapshot> {
        match &self.published {
            Some((changes, snap)) if *changes == self.changes => Arc::clone(snap),
            _ => {
                // The old one goes first (readers that hold it keep it): two whole snapshots
                // at once would be the heap's high-water mark at every scrape.
                self.published = None;
                let snap = Arc::new(self.snapshot());
                self.published = Some((self.changes, Arc::clone(&snap)));
                snap
            }
        }
    }

    /// Build a snapshot of the latest observation; callers read `current`, which builds one
    /// only after a change. Reads nothing but the engine's own state: it runs under the
    /// engine's lock.
    pub fn snapshot(&self) -> Snapshot {
        let now = self.now;
        let mut keys: Vec<ProcKey> = self.procs.keys().cloned().collect();
        keys.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
        let mut order: Vec<usize> = (0..self.gpus.len()).collect();
        order.sort_by_key(|&i| self.gpus[i].id.index);
        let mut processes: Vec<ProcessView> = keys
            .iter()
            .filter_map(|k| self.process_view(k, now))
            .collect();
        let peak_window = self.cfg.analysis.peak_window.as_secs_f64();
        let mut gpus = Vec::with_capacity(self.gpus.len());
        for g in order.iter().map(|&i| &self.gpus[i]) {
            let on_gpu: Vec<&ProcessView> = processes
                .iter()
                .filter(|p| p.uuid == g.id.uuid && p.verified)
                .collect();
            let views: Vec<AllocatorView> = on_gpu
                .iter()
                .filter_map(|p| {
                    p.allocator.as_ref().map(|a| AllocatorView {
                        allocated: a.allocated_bytes as f64,
                        reserved: a.reserved_bytes as f64,
                        inactive_split: a.inactive_split_bytes.map(|v| v as f64),
                        largest_free_block: p.largest_free_block.map(|v| v as f64),
                    })
                })
                .collect();
            let (cached, frag) = if views.is_empty() {
                (None, None)
            } else {
                fragmentation::combine(&views)
            };
            let up = g.memory.is_some();
            // The history keeps f32 values: never show a peak below the current reading.
            let peak = g
                .used
                .max_since(now - peak_window)
                .map(|v| (v as u64).max(g.memory.map(|m| m.used).unwrap_or(0)));
            let headroom_tight = match (peak, g.memory) {
                (Some(peak), Some(m)) => oom::tight(
                    g.analysis.assessed,
                    g.analysis.retries,
                    peak as f64 / m.total.max(1) as f64,
                    &self.risk_params,
                ),
                _ => false,
            };
            let mut view = GpuView {
                id: g.id.clone(),
                up,
                memory: g.memory,
                peak_lifetime: g.peak_lifetime,
                peak_window: peak,
                eta_seconds: g.analysis.eta.map(|e| e.seconds),
                eta_lower_seconds: g.analysis.eta.map(|e| e.lower),
                eta_upper_seconds: g.analysis.eta.and_then(|e| e.upper),
                growth_bytes_per_second: g.analysis.eta.map(|e| e.slope),
                trend: g.analysis.trend,
                risk: RiskLevel::Low,
                risk_reason: oom::RiskReason::None,
                recommendation: "",
                leak_slope: g.analysis.leak_slope,
                leak_suspected: g.analysis.leak_suspected,
                headroom_tight,
                fragmentation: frag,
                cached_unallocated: cached,
                unattributed: g.unattributed.filter(|_| up),
                driver: None,
                oom_events: vec![],
                oom_counts: vec![],
                oom_failed_requests: 0,
                score: *g.incidents.tracker.score(),
            };
            let (driver, events, counts) = self.incident_view(g, now);
            view.driver = driver.filter(|_| up);
            view.oom_events = events;
            view.oom_counts = counts;
            view.oom_failed_requests = g.incidents.failed_requests();
            if let (true, Some(r)) = (up, g.risk) {
                view.risk = r.level;
                view.risk_reason = r.reason;
                view.recommendation = oom::recommendation(r.level, r.reason, frag);
            }
            gpus.push(view);
        }
        for p in &mut processes {
            p.risk = self.procs[&(p.pid, p.uuid.clone())]
                .risk
                .map_or(RiskLevel::Low, |r| r.level);
        }
        let used: Vec<f64> = gpus
            .iter()
            .filter_map(|g| g.memory.map(|m| m.used as f64))
            .collect();
        // Ranks are compared by their high-water marks over a minute of reports: allocated
        // bytes caught at a random phase of each rank's step make balanced ranks look up to
        // 1.7 apart.
        let mut jobs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for p in processes.iter().filter(|p| p.verified) {
            if let Some(job) = &p.identity.job {
                let v = p
                    .allocator
                    .as_ref()
                    .and_then(|_| {
                        self.procs[&(p.pid, p.uuid.clone())]
                            .alloc_series
                            .max_since(now - IMBALANCE_WINDOW)
                    })
                    .or(p.nvml_used.map(|u| u as f64));
                if let Some(v) = v {
                    jobs.entry(job.clone()).or_default().push(v);
                }
            }
        }
        Snapshot {
            t: now,
            source: self.source.clone(),
            gpus,
            processes,
            node_imbalance: imbalance_ratio(&used),
            job_imbalance: jobs
                .into_iter()
                .filter_map(|(j, v)| imbalance_ratio(&v).map(|r| (j, r)))
                .collect(),
            peak_window_label: humantime::format_duration(self.cfg.analysis.peak_window)
                .to_string(),
        }
    }
}
