//! The verdict on a replayed recording: when the first allocation failed, and from when the
//! forecast warned (risk ≥ high) and paged (critical) without a break up to it. Pure: it reads
//! the forecast second by second, as a replay or a scorer hands it over.

use std::collections::BTreeMap;

use serde::Serialize;

use super::oom::RiskLevel;

/// One second of one GPU's forecast.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ForecastAt {
    pub t: f64,
    pub risk: RiskLevel,
    pub eta: Option<f64>,
    pub lower: Option<f64>,
    pub upper: Option<f64>,
}

/// How far ahead of the failure the ETA is read ("what did it say a minute before?").
pub const ETA_READ_BEFORE_S: [u32; 3] = [60, 30, 10];

/// The ETA a fixed time before the failure, beside the time that was really left.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EtaBefore {
    /// The second it was read at.
    pub t: f64,
    /// Seconds that were really left then.
    pub left_s: f64,
    pub eta_s: Option<f64>,
    pub eta_lower_s: Option<f64>,
    pub eta_upper_s: Option<f64>,
    pub risk: RiskLevel,
}

/// Seconds on the recording's clock; `None` where there is none.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The first failed allocation.
    pub oom_t: Option<f64>,
    /// Start of the unbroken run of risk ≥ high that reaches the failure (or the end).
    pub warning_from_t: Option<f64>,
    /// Start of the unbroken run of critical that reaches the failure (or the end).
    pub critical_from_t: Option<f64>,
    pub warning_lead_s: Option<f64>,
    pub critical_lead_s: Option<f64>,
    /// First second at risk ≥ high / critical at all (a warning that came and went counts).
    pub first_warning_t: Option<f64>,
    pub first_critical_t: Option<f64>,
    /// Seconds at risk ≥ high / critical before the failure (in all when there is none): on a
    /// healthy run, the false alarm.
    pub seconds_at_warning: usize,
    pub seconds_at_critical: usize,
    /// The shortest ETA shown before the failure (in all when there is none).
    pub min_eta_s: Option<f64>,
    /// The ETA 60, 30 and 10 s before the failure, keyed by those seconds.
    pub eta_before: BTreeMap<String, EtaBefore>,
}

/// Hundredths of a second are as fine as a verdict needs (and read better).
fn centi(s: f64) -> f64 {
    (s * 100.0).round() / 100.0
}

/// The start of the unbroken run of seconds where `on` holds that reaches the last second
/// before `until` (the last second of all when `until` is `None`).
pub fn held_from(
    seconds: impl IntoIterator<Item = (f64, bool)>,
    until: Option<f64>,
) -> Option<f64> {
    let mut since = None;
    for (t, on) in seconds {
        if until.is_some_and(|u| t >= u) {
            break;
        }
        if on {
            since.get_or_insert(t);
        } else {
            since = None;
        }
    }
    since
}

/// The verdict on `seconds` (one GPU's forecast, in time order) for a failure at `oom_t`.
pub fn verdict(seconds: &[ForecastAt], oom_t: Option<f64>) -> Verdict {
    let before: Vec<&ForecastAt> = seconds
        .iter()
        .take_while(|s| oom_t.is_none_or(|o| s.t < o))
        .collect();
    let at_least =
        |level: RiskLevel| held_from(before.iter().map(|s| (s.t, s.risk >= level)), None);
    let first = |level: RiskLevel| before.iter().find(|s| s.risk >= level).map(|s| s.t);
    let count = |level: RiskLevel| before.iter().filter(|s| s.risk >= level).count();
    let warning_from_t = at_least(RiskLevel::High);
    let critical_from_t = at_least(RiskLevel::Critical);
    let lead = |from: Option<f64>| Some(centi(oom_t? - from?));
    let mut eta_before = BTreeMap::new();
    if let Some(o) = oom_t {
        for k in ETA_READ_BEFORE_S {
            let at = o - f64::from(k);
            // The last second at or before the moment: what a person looking then saw.
            if let Some(s) = before.iter().rev().find(|s| s.t <= at) {
                eta_before.insert(
                    k.to_string(),
                    EtaBefore {
                        t: s.t,
                        left_s: centi(o - s.t),
                        eta_s: s.eta.map(centi),
                        eta_lower_s: s.lower.map(centi),
                        eta_upper_s: s.upper.map(centi),
                        risk: s.risk,
                    },
                );
            }
        }
    }
    Verdict {
        oom_t,
        warning_from_t,
        critical_from_t,
        warning_lead_s: lead(warning_from_t),
        critical_lead_s: lead(critical_from_t),
        first_warning_t: first(RiskLevel::High),
        first_critical_t: first(RiskLevel::Critical),
        seconds_at_warning: count(RiskLevel::High),
        seconds_at_critical: count(RiskLevel::Critical),
        min_eta_s: before
            .iter()
            .filter_map(|s| s.eta)
            .reduce(f64::min)
            .map(centi),
        eta_before,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RiskLevel::*;

    fn run(levels: &[RiskLevel]) -> Vec<ForecastAt> {
        levels
            .iter()
            .enumerate()
            .map(|(i, &risk)| ForecastAt {
                t: i as f64,
                risk,
                eta: (risk >= High).then_some(100.0 - i as f64),
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn leads_count_the_unbroken_run_that_reaches_the_failure() {
        // A critical blip at 1 s that resolved does not count; the run from 4 s does. The low
        // second at 9 s comes at the failure, not before it.
        let s = run(&[
            Low, Critical, High, Low, High, High, Critical, Critical, Critical, Low,
        ]);
        let v = verdict(&s, Some(9.0));
        assert_eq!(v.warning_from_t, Some(4.0));
        assert_eq!(v.critical_from_t, Some(6.0));
        assert_eq!(v.warning_lead_s, Some(5.0));
        assert_eq!(v.critical_lead_s, Some(3.0));
        assert_eq!(v.first_critical_t, Some(1.0));
        assert_eq!((v.seconds_at_warning, v.seconds_at_critical), (7, 4));
    }

    #[test]
    fn seconds_after_the_failure_do_not_count() {
        // Low in the last second before the failure: no lead, whatever came after.
        let s = run(&[High, Critical, Low, Critical, Critical]);
        let v = verdict(&s, Some(3.0));
        assert_eq!((v.warning_from_t, v.critical_from_t), (None, None));
        assert_eq!((v.warning_lead_s, v.critical_lead_s), (None, None));
        assert_eq!(v.seconds_at_critical, 1);
    }

    #[test]
    fn without_a_failure_the_run_must_reach_the_end_and_there_is_no_lead() {
        let s = run(&[Low, High, High]);
        let v = verdict(&s, None);
        assert_eq!(v.warning_from_t, Some(1.0));
        assert_eq!(v.warning_lead_s, None);
        assert!(v.eta_before.is_empty());
        assert_eq!(v.min_eta_s, Some(98.0));
    }

    #[test]
    fn the_eta_is_read_at_the_last_second_before_each_moment() {
        let mut s = run(&[Low; 80]);
        s[49].eta = Some(33.0);
        let v = verdict(&s, Some(79.5));
        let e = &v.eta_before["30"];
        assert_eq!((e.t, e.left_s, e.eta_s), (49.0, 30.5, Some(33.0)));
        assert_eq!(v.eta_before["60"].t, 19.0);
        assert_eq!(v.eta_before["10"].eta_s, None, "no ETA shown then");
        // A recording shorter than a minute before the failure has no 60 s reading.
        let v = verdict(&s[40..], Some(79.5));
        assert!(!v.eta_before.contains_key("60"));
    }

    #[test]
    fn held_from_follows_the_condition() {
        let on = [(0.0, true), (1.0, false), (2.0, true), (3.0, true)];
        assert_eq!(held_from(on, None), Some(2.0));
        assert_eq!(held_from(on, Some(2.0)), None);
        assert_eq!(held_from(on, Some(1.0)), Some(0.0));
    }
}
