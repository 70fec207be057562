//! The engine's analysis: each process's demand (what it asks for, what it needs at its
//! peaks, what it holds) and each GPU's forecast, risk and leak verdict, from the history the
//! engine keeps.

use super::*;

impl Engine {
    pub(super) fn analyse(&mut self, now: Time) {
        let lp = self.leak_params;
        let warmup = self.eta_params.warmup;
        let ttl = self.cfg.ingest.expire_after.as_secs_f64();
        let eta_window = self.cfg.analysis.eta_window.as_secs_f64();
        for p in self.procs.values_mut() {
            let reporting = p.reporting(now, ttl);
            let warm = p.warm_from(warmup);
            let key = (lp.half_window(now), reporting);
            let series = p.demand_series(reporting);
            let leak_from = p.first_free.map_or(warm, |t| t.min(warm));
            let estimate =
                (p.leak_key != Some(key)).then(|| leak::estimate(series, leak_from, now, &lp));
            if let Some(e) = estimate {
                p.leak = e;
                p.leak_key = Some(key);
            }
            p.leak_suspected = p.leak_state.update(p.leak.as_ref(), now, lp.persistence);
            while p.segments.front().is_some_and(|s| s.0 < now - eta_window) {
                p.segments.pop_front();
            }
            if p.listed_now || reporting {
                let peak = Self::peak_need(p, reporting, now);
                let (need, held) = Self::need_and_held(p, peak, warmup);
                p.demand.push(now, need);
                if now >= warm && held < p.held_now - oom::MIN_STEP_BYTES {
                    p.gave_back_at = Some(now);
                }
                p.held_now = held;
                if let Some(peak) = peak {
                    p.peak_need.push(now, peak);
                }
            }
            // Only the points since the warm-up: a loading ramp is no part of the trend, and a
            // trend becomes credible only once it has lasted `eta_min_span` after it.
            // Of the two views of its growth, the steeper credible one: the held bytes grow
            // faster than the peak when split segments serve new peaks only in part, the peak
            // shows steps the cache absorbs for a while.
            // Demand counts as growth only above what the process already needed before the
            // window, its loading included: a peak that comes back to the same height (an
            // evaluation, a burst of requests, a cache taken again after `empty_cache`) is a
            // recurring need, not growth.
            let from = warm.max(now - eta_window);
            let fit = |s: &Series| {
                let before = s.max_before(from).unwrap_or(f64::NEG_INFINITY);
                let points: Vec<(f64, f64)> =
                    s.since(from).map(|b| (b.t, b.max().max(before))).collect();
                fit_demand(&points, oom::MIN_STEP_BYTES)
            };
            let ep = self.eta_params;
            p.demand_trend = if now >= warm {
                [
                    (fit(&p.demand), &p.demand),
                    (fit(&p.peak_need), &p.peak_need),
                ]
                .into_iter()
                .filter_map(|(t, raw)| t.zip(Some(raw)))
                .filter(|(t, raw)| oom::credible(t, &ep) && oom::persistent(t, raw, from, now))
                .map(|(t, _)| t)
                .max_by(|a, b| a.slope.total_cmp(&b.slope))
            } else {
                None
            };
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

    /// The size of request that fails: the second largest segment the process took from the
    /// driver recently (the requests that fail are the ones a step makes again and again; a
    /// buffer allocated once is no guide). Segments taken while loading do not count.
    fn request(p: &ProcState, warmup: f64) -> f64 {
        let (mut first, mut second) = (0.0f64, 0.0f64);
        let warm = p.warm_from(warmup);
        for s in p.segments.iter().filter(|s| s.0 >= warm) {
            if s.1 > first {
                second = first;
                first = s.1;
            } else if s.1 > second {
                second = s.1;
            }
        }
        second
    }

    /// The high-water mark of a reporting process's allocated bytes over the last
    /// `HIGH_WATER_WINDOW` seconds, plus what it holds outside the allocator.
    fn peak_need(p: &ProcState, reporting: bool, now: Time) -> Option<f64> {
        let a = p.alloc.as_ref().filter(|_| reporting)?;
        let nvml = if p.listed_now { p.nvml_used } else { None };
        let overhead = nvml
            .map(|u| (u as f64 - a.reserved_bytes as f64).max(0.0))
            .unwrap_or(0.0);
        let since = now - HIGH_WATER_WINDOW;
        let sampled = p
            .alloc_series
            .max_since(since)
            .unwrap_or(a.allocated_bytes as f64);
        // A new record of the allocator's peak is the exact peak of a recent step.
        let record = p
            .peak
            .filter(|(_, t)| *t >= since)
            .map_or(0.0, |(v, _)| v as f64);
        Some(sampled.max(record) + overhead)
    }

    /// Bytes the process needs to get through its next step and bytes it holds from the driver,
    /// given its `peak_need` (reporting processes).
    fn need_and_held(p: &ProcState, peak: Option<f64>, warmup: f64) -> (f64, f64) {
        let nvml = if p.listed_now { p.nvml_used } else { None };
        match (peak, &p.alloc) {
            (Some(peak), Some(a)) => {
                let held = nvml.map_or(a.reserved_bytes as f64, |u| u as f64);
                // Two ways to run out, whichever comes first. The cache keeps growing segment
                // by segment (split segments serve a new peak only in part), and the segment
                // after the last one that fits fails: on average when the free memory beside
                // the held bytes is gone. Or the next peak, with one more request of the size
                // it takes, does not fit at all.
                ((peak + Self::request(p, warmup)).max(held), held)
            }
            _ => {
                let used = nvml.unwrap_or(0) as f64;
                (used, used)
            }
        }
    }

    fn analyse_gpu(&mut self, gi: usize, now: Time) -> GpuAnalysis {
        let g = &self.gpus[gi];
        let Some(m) = g.memory else {
            return GpuAnalysis::default();
        };
        let uuid = g.id.uuid.clone();
        let warmup = self.eta_params.warmup;
        let eta_window = self.cfg.analysis.eta_window.as_secs_f64();
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
            // What `analyse` pushed for this tick (the same condition pushes it).
            let newest = |s: &Series| s.newest().map_or(0.0, |b| b.last());
            let (need, held) = (newest(&p.demand), p.held_now);
            attributed += held;
            let trend = p.demand_trend;
            // Took memory from the driver, or gave some back that it will want again (an
            // emptied cache, an eval phase), within the window and after warm-up (loading is
            // a rise that ends).
            let warm = p.warm_from(warmup);
            let cycles = p.gave_back_at.is_some_and(|t| t >= now - eta_window)
                || p.segments.iter().any(|s| s.0 >= warm);
            parts.push(DemandPart {
                need,
                held,
                asks: need > held || trend.is_some() || cycles,
                trend,
            });
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
        let (mut retries, mut oom_age) = (0, None::<f64>);
        for (i, key) in keys.iter().enumerate() {
            let e = oom::eta(capacity, &parts, i, &self.eta_params);
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
                rising: parts[i].trend.is_some(),
                recent_retries: Self::recent_retries(p, now),
                oom_age: p.last_oom.map(|t| now - t),
                ..Default::default()
            };
            retries += own.recent_retries;
            if let Some(a) = own.oom_age {
                oom_age = Some(oom_age.map_or(a, |b| b.min(a)));
            }
            p.risk = Some(oom::hold(p.risk, now, oom::assess(&own, &self.risk_params)));
        }
        let trend = parts
            .iter()
            .filter_map(|p| p.trend)
            .max_by(|a, b| a.slope.total_cmp(&b.slope));
        let assessed = oom::assess(
            &RiskInputs {
                eta: first.map(|e| e.seconds),
                rising: trend.is_some(),
                used_fraction: (m.total > 0).then(|| 1.0 - m.free as f64 / m.total as f64),
                recent_retries: retries,
                oom_age,
            },
            &self.risk_params,
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
        g.risk = Some(oom::hold(g.risk, now, assessed));
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
