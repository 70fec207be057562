//! The engine's analysis: each process's leak test and demand (`analysis::demand`), and each
//! GPU's forecast, risk and leak verdict, from the history the engine keeps.

use super::*;

impl Engine {
    pub(super) fn analyse(&mut self, now: Time) {
        let lp = self.leak_params;
        let dp = self.demand_params;
        let ttl = self.cfg.ingest.expire_after.as_secs_f64();
        let block_ttl = self.cfg.ingest.largest_block_ttl.as_secs_f64();
        for (k, p) in self.procs.iter_mut() {
            // A live exporter's trace names whose readings each line is.
            let _process = tracing::trace_span!("process", pid = k.0, gpu = %k.1).entered();
            let reporting = p.reporting(now, ttl);
            let key = (lp.half_window(now), reporting);
            if p.leak_key != Some(key) {
                let leak_from = p.demand.leak_from(&dp);
                let estimate = |s: &Series| leak::estimate(s, leak_from, now, &lp);
                // The allocator's bytes show a leak its cache absorbs; what the process holds
                // shows one the sawtooth of a large step hides from samples a second apart (the
                // cache growing segment by segment). Either view that passes is a leak.
                // A rise of what it holds that its cache's empty segments explain is no leak.
                let primary = estimate(p.demand_series(reporting));
                let spares = p.demand.spares();
                let held = reporting
                    .then(|| estimate(p.demand.footprint()))
                    .flatten()
                    .map(|mut e| {
                        let rise = e.trend.slope * e.trend.span;
                        e.passes &= !spares.explain(now - e.trend.span, rise);
                        e
                    });
                for (view, e) in [("primary", &primary), ("held", &held)] {
                    if let Some(e) = e {
                        tracing::trace!(
                            at = now,
                            view,
                            slope = e.trend.slope,
                            slope_lower = e.trend.slope_lower,
                            p_value = e.trend.p_value,
                            span = e.trend.span,
                            passes = e.passes,
                            "leak test"
                        );
                    }
                }
                p.leak = match (primary, held) {
                    (Some(a), Some(b)) if b.passes && !a.passes => Some(b),
                    (a, b) => a.or(b),
                };
                p.leak_key = Some(key);
            }
            p.leak_suspected = p.leak_state.update(p.leak.as_ref(), now, lp.persistence);
            let moment = Moment {
                active: p.listed_now || reporting,
                allocator: p.alloc.as_ref().filter(|_| reporting),
                driver_bytes: p.nvml_used.filter(|_| p.listed_now),
                allocated: &p.alloc_series,
                largest_free_block: p.largest_free_block(now, block_ttl),
            };
            p.demand.update(now, &moment, &dp);
        }
        // A process NVML does not list on a GPU has no forecast or risk there (see `Trust`).
        let trust = self.trust();
        for p in self.procs.values_mut().filter(|p| !trust.vouches(p, now)) {
            p.eta = None;
            p.risk = None;
        }
        for gi in 0..self.gpus.len() {
            let analysis = self.analyse_gpu(gi, now);
            self.gpus[gi].analysis = analysis;
        }
    }

    fn analyse_gpu(&mut self, gi: usize, now: Time) -> GpuAnalysis {
        let g = &self.gpus[gi];
        let Some(m) = g.memory else {
            return GpuAnalysis::default();
        };
        let uuid = g.id.uuid.clone();
        let dp = self.demand_params;
        let mut keys = Vec::new();
        let mut parts = Vec::new();
        let mut attributed = 0.0;
        let mut slope_sum = None::<f64>;
        let mut any_suspected = false;
        let trust = self.trust();
        for (k, p) in self.procs.iter().filter(|(k, _)| k.1 == uuid) {
            let reporting = self.reporting(p, now);
            if !(p.listed_now || reporting) || !trust.vouches(p, now) {
                continue;
            }
            let part = p.demand.part(now, &dp);
            tracing::trace!(
                at = now,
                pid = k.0,
                gpu = %uuid,
                need = part.need,
                held = part.held,
                asks = part.asks,
                loaded_from = ?p.demand.loaded_from(),
                slope = ?part.trend.map(|t| t.slope),
                span = ?part.trend.map(|t| t.span),
                "demand"
            );
            attributed += part.held;
            parts.push(part);
            keys.push(k.clone());
            if let Some(l) = &p.leak {
                *slope_sum.get_or_insert(0.0) += l.trend.slope;
            }
            any_suspected |= p.leak_suspected;
        }
        // Memory no listed process accounts for holds its place and asks for nothing.
        let unattributed = (m.used as f64 - attributed).max(0.0);
        parts.push(DemandPart {
            need: unattributed,
            held: unattributed,
            ..Default::default()
        });
        let capacity = (m.total - m.reserved) as f64;
        let mut first: Option<oom::Eta> = None;
        let mut retries = 0;
        for (i, key) in keys.iter().enumerate() {
            let e = oom::eta(capacity, &parts, i, &dp.eta);
            if let Some(e) = e {
                if first.is_none_or(|f| e.seconds < f.seconds) {
                    first = Some(e);
                }
            }
            let Some(p) = self.procs.get_mut(key) else {
                continue;
            };
            p.eta = e;
            // A process's risk is its own forecast (a neighbour's growth shortens it when the
            // process asks for memory) and what its own allocator says: the big flat process
            // is not the one at risk, the one that grows or must take memory back is.
            let own = RiskInputs {
                eta: e.map(|e| e.seconds),
                eta_seen: e.and_then(|e| e.seen),
                rising: e.is_some(),
                recent_retries: Self::recent_retries(p, now),
                ..Default::default()
            };
            retries += own.recent_retries;
            p.risk = Some(oom::assess(&own, &self.risk_params, p.risk).into());
        }
        let trend = parts
            .iter()
            .filter_map(|p| p.trend)
            .max_by(|a, b| a.slope.total_cmp(&b.slope));
        let before = self.gpus[gi].used_at_analysis.replace(m.used);
        let assessed = oom::assess(
            &RiskInputs {
                eta: first.map(|e| e.seconds),
                eta_seen: first.and_then(|e| e.seen),
                rising: first.is_some(),
                used_fraction: (m.total > 0).then(|| 1.0 - m.free as f64 / m.total as f64),
                recent_retries: retries,
                growing_now: before
                    .is_some_and(|b| m.used as f64 >= b as f64 + oom::MIN_STEP_BYTES),
            },
            &self.risk_params,
            self.gpus[gi].incidents.tracker.standing(),
        );

        // Without per-process data the device's own floor is all there is.
        let g = &mut self.gpus[gi];
        let key = self.leak_params.half_window(now);
        if g.leak_key != Some(key) {
            g.leak = leak::estimate(&g.used, g.first_seen, now, &self.leak_params);
            g.leak_key = Some(key);
        }
        let device_leak = g.leak;
        let device_flag =
            g.leak_state
                .update(device_leak.as_ref(), now, self.leak_params.persistence);
        let leak_slope = slope_sum.or(device_leak.map(|l| l.trend.slope));
        // The driver's part: a hold ends when it exits, a staircase's page holds while it lives.
        let risk = self.step_incidents(gi, now, assessed, &keys, &parts);
        let g = &mut self.gpus[gi];
        g.risk = Some(risk);
        GpuAnalysis {
            eta: first,
            trend,
            leak_slope,
            leak_suspected: any_suspected || (slope_sum.is_none() && device_flag),
            assessed: assessed.0,
            retries,
        }
    }

    fn recent_retries(p: &ProcState, now: Time) -> u64 {
        p.retries.growth(now, RETRY_WINDOW)
    }
}
