//! When will an allocation fail, and how worried should anyone be.
//!
//! The forecast is of the *failed allocation*, not of the moment `nvidia-smi` shows the device
//! full. A caching allocator under pressure frees its own cached blocks and retries before it
//! raises out-of-memory, so what must fit is each process's peak demand (floor plus the per-step
//! swing, plus what lives outside the allocator), not what it happens to hold.

use super::trend::Trend;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EtaParams {
    /// Points of a trend before it may be extrapolated.
    pub min_points: usize,
    /// Seconds of trend before it may be extrapolated.
    pub min_span: f64,
    pub significance: f64,
    pub max_extrapolation: f64,
    pub horizon: f64,
}

impl EtaParams {
    pub fn from_config(a: &crate::config::AnalysisConfig) -> Self {
        EtaParams {
            min_points: 8,
            min_span: a.eta_min_span.as_secs_f64(),
            significance: 0.01,
            max_extrapolation: a.eta_max_extrapolation,
            horizon: a.eta_horizon.as_secs_f64(),
        }
    }
}

/// One share of a GPU's memory: a process (or the memory no process accounts for).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DemandPart {
    /// Bytes this part needs at its peak, now: what must fit for its next peak to succeed.
    pub need: f64,
    /// Bytes it holds now (a caching allocator holds its cache too; it gives the cache back
    /// only when one of *its own* allocations fails).
    pub held: f64,
    /// Trend of its floor, where there is one.
    pub trend: Option<Trend>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Eta {
    pub seconds: f64,
    /// Combined growth of the credible trends, bytes per second.
    pub slope: f64,
    /// Room left for the first process to fail, bytes (negative: it no longer fits).
    pub headroom: f64,
}

/// A trend is extrapolated only when it is long, significant, rising, and still rising now.
pub fn credible(t: &Trend, p: &EtaParams) -> bool {
    t.points >= p.min_points
        && t.span >= p.min_span
        && t.p_value < p.significance
        && t.slope > 0.0
        && t.recent_slope >= 0.5 * t.slope
}

/// Seconds until some part's peak no longer fits beside what the others hold, if memory is on
/// course to run out within what the evidence supports.
///
/// Part `i` fails when `need_i + Σ_{j≠i} held_j > capacity`: under pressure a process frees its
/// own cache and retries, but its neighbours keep theirs. Every credible trend moves that
/// boundary (a growing neighbour's holdings grow with it), so the room closes at the summed
/// slope.
pub fn eta(capacity: f64, parts: &[DemandPart], p: &EtaParams) -> Option<Eta> {
    let growing: Vec<&Trend> = parts
        .iter()
        .filter_map(|d| d.trend.as_ref())
        .filter(|t| credible(t, p))
        .collect();
    let slope: f64 = growing.iter().map(|t| t.slope).sum();
    if slope <= 0.0 {
        return None;
    }
    let held: f64 = parts.iter().map(|d| d.held).sum();
    // Only a part that asks the driver for more can fail: one that grows, or one whose peak
    // exceeds what it holds. A flat process serves its peaks from its own cache.
    let headroom = parts
        .iter()
        .filter(|d| d.need > d.held || d.trend.as_ref().is_some_and(|t| credible(t, p)))
        .map(|d| capacity - d.need - (held - d.held))
        .fold(f64::INFINITY, f64::min);
    if !headroom.is_finite() {
        return None;
    }
    let seconds = (headroom / slope).max(0.0);
    // The trend that contributes most decides how far ahead we may look.
    let span = growing
        .iter()
        .max_by(|a, b| a.slope.total_cmp(&b.slope))
        .map(|t| t.span)
        .unwrap_or(0.0);
    if seconds > p.horizon || seconds > p.max_extrapolation * span {
        return None;
    }
    Some(Eta {
        seconds,
        slope,
        headroom,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskLevel {
    Low = 0,
    Medium = 1,
    High = 2,
    Critical = 3,
}

impl RiskLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            RiskLevel::Low => "low",
            RiskLevel::Medium => "medium",
            RiskLevel::High => "high",
            RiskLevel::Critical => "critical",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskReason {
    None,
    Eta,
    UsedFraction,
    AllocRetries,
    RecentOom,
}

impl RiskReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RiskReason::None => "none",
            RiskReason::Eta => "eta",
            RiskReason::UsedFraction => "used_fraction",
            RiskReason::AllocRetries => "alloc_retries",
            RiskReason::RecentOom => "recent_oom",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RiskParams {
    pub critical_eta: f64,
    pub high_eta: f64,
    pub medium_eta: f64,
    pub medium_used: f64,
    pub high_used: f64,
    pub recent_oom: f64,
}

impl RiskParams {
    pub fn from_config(r: &crate::config::RiskConfig) -> Self {
        RiskParams {
            critical_eta: r.critical_eta.as_secs_f64(),
            high_eta: r.high_eta.as_secs_f64(),
            medium_eta: r.medium_eta.as_secs_f64(),
            medium_used: r.medium_used_fraction,
            high_used: r.high_used_fraction,
            recent_oom: r.recent_oom.as_secs_f64(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RiskInputs {
    pub eta: Option<f64>,
    /// Share of the device not free, as `nvidia-smi` shows it.
    pub used_fraction: Option<f64>,
    /// Allocator retries within the last minute.
    pub recent_retries: u64,
    /// Seconds since the last out-of-memory error.
    pub oom_age: Option<f64>,
}

/// The four levels of the seeds, with the reason that set the level.
pub fn assess(i: &RiskInputs, p: &RiskParams) -> (RiskLevel, RiskReason) {
    let mut best = (RiskLevel::Low, RiskReason::None);
    let mut raise = |level: RiskLevel, reason: RiskReason| {
        if level > best.0 {
            best = (level, reason);
        }
    };
    if let Some(age) = i.oom_age {
        if age <= 60.0 {
            raise(RiskLevel::Critical, RiskReason::RecentOom);
        } else if age <= p.recent_oom {
            raise(RiskLevel::High, RiskReason::RecentOom);
        }
    }
    if let Some(eta) = i.eta {
        if eta <= p.critical_eta {
            raise(RiskLevel::Critical, RiskReason::Eta);
        } else if eta <= p.high_eta {
            raise(RiskLevel::High, RiskReason::Eta);
        } else if eta <= p.medium_eta {
            raise(RiskLevel::Medium, RiskReason::Eta);
        }
    }
    let used = i.used_fraction.unwrap_or(0.0);
    if used >= p.high_used {
        raise(RiskLevel::High, RiskReason::UsedFraction);
    } else if used >= p.medium_used {
        raise(RiskLevel::Medium, RiskReason::UsedFraction);
    }
    if i.recent_retries > 0 {
        // Retries mean the allocator already had to flush its cache to make an allocation fit.
        let level = if used >= p.medium_used {
            RiskLevel::High
        } else {
            RiskLevel::Medium
        };
        raise(level, RiskReason::AllocRetries);
    }
    best
}

/// What to do about it, in the seeds' terms.
pub fn recommendation(
    level: RiskLevel,
    reason: RiskReason,
    fragmentation: Option<f64>,
) -> &'static str {
    if fragmentation.is_some_and(|f| f >= 0.30) && level >= RiskLevel::Medium {
        return "Fragmented cache: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, avoid mixing many tensor shapes, call torch.cuda.empty_cache() at phase boundaries";
    }
    match (level, reason) {
        (RiskLevel::Low, _) => "No action needed",
        (_, RiskReason::RecentOom) => "An allocation failed: reduce the batch size, enable gradient checkpointing or mixed precision, then restart from the last checkpoint",
        (_, RiskReason::AllocRetries) => "The allocator is flushing its cache to fit allocations: reduce the batch size or sequence length, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        (RiskLevel::Critical, _) => "Reduce batch size immediately, or checkpoint now: memory will run out within a minute",
        (RiskLevel::High, RiskReason::Eta) => "Memory keeps growing towards the limit: look for a leak (tensors kept across steps, growing caches), reduce batch size, enable gradient checkpointing",
        (RiskLevel::High, _) => "Little headroom left: reduce batch size, enable gradient checkpointing or mixed precision",
        _ => "Watch memory growth; consider gradient checkpointing or mixed precision for more headroom",
    }
}

#[cfg(test)]
mod tests {
    use super::super::trend::{fit, floor_points};
    use super::*;
    use crate::history::Series;

    fn params() -> EtaParams {
        EtaParams::from_config(&crate::config::AnalysisConfig::default())
    }

    /// ETA of a series at time `now`, with a capacity, fitted on 1-second floors.
    fn eta_at(s: &Series, now: f64, from: f64, capacity: f64) -> Option<Eta> {
        let tr = fit(&floor_points(s, from, now, 1.0));
        let need = tr.map(|t| t.floor_now + t.swing).unwrap_or(0.0);
        let part = DemandPart {
            need,
            held: need,
            trend: tr,
        };
        eta(capacity, &[part], &params())
    }

    #[test]
    fn eta_on_a_clean_ramp_is_right_within_5_percent() {
        let rate = 0.9 * (1u64 << 30) as f64;
        let cap = 140.0 * (1u64 << 30) as f64;
        let mut s = Series::new(1.0, 600.0);
        let mut t = 0.0;
        while t < 60.0 {
            s.push(
                t,
                1e9 + rate * t + if (t * 10.0) as u64 % 3 == 0 { 2e8 } else { 0.0 },
            );
            t += 0.1;
        }
        let e = eta_at(&s, 60.0, 0.0, cap).expect("an ETA on a clean ramp");
        // The peak (floor + swing) reaches cap at:
        let truth = (cap - 1e9 - 2e8) / rate - 60.0;
        assert!(
            (e.seconds - truth).abs() / truth < 0.05,
            "{} vs {}",
            e.seconds,
            truth
        );
    }

    #[test]
    fn a_warm_up_ramp_is_not_an_oom() {
        // Loading a model: 20 GiB in 5 s, then flat for a minute.
        let cap = 80.0 * (1u64 << 30) as f64;
        let mut s = Series::new(1.0, 600.0);
        let mut t = 0.0;
        while t < 70.0 {
            let v = if t < 5.0 {
                4.0 * (1u64 << 30) as f64 * t
            } else {
                20.0 * (1u64 << 30) as f64
            };
            s.push(t, v);
            t += 0.1;
            let now = t;
            assert!(
                eta_at(&s, now, (now - 120.0).max(0.0), cap).is_none(),
                "ETA at t={now}"
            );
        }
    }

    #[test]
    fn a_slow_ramp_is_not_extrapolated_far_beyond_its_evidence() {
        let cap = 80.0 * (1u64 << 30) as f64;
        let mut s = Series::new(1.0, 600.0);
        // 15 s of a ramp that would need an hour to fill the device.
        for i in 0..150 {
            s.push(i as f64 * 0.1, 1e9 + 2e7 * i as f64 * 0.1);
        }
        assert!(eta_at(&s, 15.0, 0.0, cap).is_none());
    }

    #[test]
    fn a_neighbours_cache_is_not_given_back() {
        let gib = (1u64 << 30) as f64;
        let tr = Trend {
            slope: 0.1 * gib,
            slope_lower: 0.1 * gib,
            p_value: 0.0,
            span: 100.0,
            points: 100,
            floor_now: 0.0,
            recent_slope: 0.1 * gib,
            swing: 0.0,
        };
        // The leaker needs 10 GiB at its peak and holds 12; the neighbour needs 5 and holds 20.
        let parts = [
            DemandPart {
                need: 10.0 * gib,
                held: 12.0 * gib,
                trend: Some(tr),
            },
            DemandPart {
                need: 5.0 * gib,
                held: 20.0 * gib,
                trend: None,
            },
        ];
        let e = eta(40.0 * gib, &parts, &params()).unwrap();
        // The leaker fails first: 40 - 10 - 20 = 10 GiB of room at 0.1 GiB/s.
        assert!((e.seconds - 100.0).abs() < 1e-6, "{}", e.seconds);
    }

    #[test]
    fn risk_levels() {
        let p = RiskParams::from_config(&crate::config::RiskConfig::default());
        let a = |i: RiskInputs| assess(&i, &p);
        assert_eq!(a(RiskInputs::default()), (RiskLevel::Low, RiskReason::None));
        assert_eq!(
            a(RiskInputs {
                eta: Some(30.0),
                ..Default::default()
            })
            .0,
            RiskLevel::Critical
        );
        assert_eq!(
            a(RiskInputs {
                eta: Some(200.0),
                ..Default::default()
            })
            .0,
            RiskLevel::High
        );
        assert_eq!(
            a(RiskInputs {
                eta: Some(1000.0),
                ..Default::default()
            })
            .0,
            RiskLevel::Medium
        );
        assert_eq!(
            a(RiskInputs {
                used_fraction: Some(0.9),
                ..Default::default()
            }),
            (RiskLevel::Medium, RiskReason::UsedFraction)
        );
        assert_eq!(
            a(RiskInputs {
                used_fraction: Some(0.97),
                ..Default::default()
            })
            .0,
            RiskLevel::High
        );
        assert_eq!(
            a(RiskInputs {
                used_fraction: Some(0.9),
                recent_retries: 3,
                ..Default::default()
            }),
            (RiskLevel::High, RiskReason::AllocRetries)
        );
        assert_eq!(
            a(RiskInputs {
                oom_age: Some(10.0),
                ..Default::default()
            }),
            (RiskLevel::Critical, RiskReason::RecentOom)
        );
        assert_eq!(
            a(RiskInputs {
                oom_age: Some(200.0),
                ..Default::default()
            })
            .0,
            RiskLevel::High
        );
        assert_eq!(
            a(RiskInputs {
                oom_age: Some(2000.0),
                ..Default::default()
            })
            .0,
            RiskLevel::Low
        );
    }
}
