//! Whether a rise is evidence of growth now: long and significant enough to extrapolate
//! (`credible`), on the schedule it set (`current`), and kept rather than come and gone
//! (`persistent`). The forecast (`oom::eta`), the leak test and the rounds read it alike.

use super::oom::{EtaParams, MIN_STEP_BYTES};
use super::trend::Trend;
use crate::history::Series;
use crate::model::Time;

/// A rise whose latest part rises at less than this share of its line's slope has slowed: a
/// staircase whose next step is late, a smooth rise that levels off (which `trend::fit_demand`
/// then reports at its pace now, while it still rises).
pub const SLOWED: f64 = 0.5;

/// A demand trend (fitted on the process's points since its warm-up) is extrapolated only when
/// it is long, significant, rising by more than a segment, and still rising now.
pub fn credible(t: &Trend, p: &EtaParams) -> bool {
    // A rise smaller than a segment over the whole span is no growth at GPU scale, however
    // significant (a flat process whose NVML bytes move by a few MiB).
    t.slope * t.span >= MIN_STEP_BYTES
        && t.points >= p.min_points
        && t.span >= p.min_span
        && t.p_value < p.significance
        && t.slope > 0.0
        && t.recent_slope >= SLOWED * t.slope
        && current(t)
}

/// A smooth rise is current while it rose within this many seconds: `RISE_SECONDS` is its
/// usual pace, three of them missed is a rise that stopped.
pub const RISE_WAIT: f64 = 3.0 * super::trend::RISE_SECONDS;

/// A staircase is current while its next step is due within this many of its usual gaps.
pub const STEP_WAIT: f64 = 1.5;

/// The evidence of growth is current: the demand rose on the schedule the trend expects (the
/// next step of a staircase within `STEP_WAIT` of its usual gap, a smooth rise within
/// `RISE_WAIT`). A prediction whose growth did not come is taken back, not counted down. Steps
/// closer together than a smooth rise's pace (the cache of a fragmenting job regrown a segment
/// every 3 s) are a smooth rise at the rate it is sampled: no staircase waits less than one.
pub fn current(t: &Trend) -> bool {
    match t.stairs {
        Some(s) => t.quiet <= (STEP_WAIT * s.gap).max(RISE_WAIT),
        None => t.quiet <= RISE_WAIT,
    }
}

/// How closely `persistent` looks: windows of `span / parts` seconds (at least 5, at most
/// `widest`), whose minima must rise with Mann–Kendall p under `significance`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Persistence {
    pub parts: f64,
    pub widest: f64,
    pub significance: f64,
}

/// For a forecast: a staircase's steps must stay apart, and a page cannot wait for minutes.
pub const PERSISTENCE: Persistence = Persistence {
    parts: 4.0,
    widest: 10.0,
    significance: 0.05,
};

/// For a leak, which takes minutes to prove and must not be the sampled sawtooth of a step
/// whose length varies: eight windows, as significant as the leak test itself.
pub const LEAK_PERSISTENCE: Persistence = Persistence {
    parts: 8.0,
    widest: 60.0,
    significance: 0.01,
};

/// A rise (`trend`) is growth only when what rose stays: the minima of `raw` over windows of
/// a part of the trend's span (the test looks as closely at a young trend as at an old one)
/// rise at half the trend's pace or more. Records of a heavy-tailed need (the largest batch of
/// requests so far, the longest sequence, a new input size benchmarked once) come and go, and
/// so do the teeth of a sawtooth that a sample caught high; a leak, a growing cache or a larger
/// batch stays.
pub fn persistent(trend: &Trend, raw: &Series, from: Time, to: Time, p: &Persistence) -> bool {
    // A staircase keeps what it reached when its last step is kept: the demand's floor since
    // the step stands half a step above its floor on the tread before. Floor against floor:
    // the step is measured on maxima (`Stairs::below` is the tread's top), and a job whose
    // floor swings under its peaks (training between evaluations that keep their outputs)
    // never comes back to the old top's height, kept step or not. Windows would wait a part
    // of the span after every step. Since the step rose whole: a step caught over two
    // samples stands half risen at its first.
    // A staircase of at least two steps to each window is a rise at the windows' scale, and
    // its last step, small beside the swing of a cache flushed and regrown near the limit
    // (frag: steps of 0.5 GB every 3 s under swings of several), may sink under half a step
    // for a few seconds while the rise goes on: it persists as a rise does, too.
    if let Some(s) = trend.stairs {
        let tread = raw
            .since(s.last - s.gap)
            .take_while(|b| b.t < s.last)
            .map(|b| b.min())
            .reduce(f64::min)
            .map_or(s.below, |m| m.min(s.below));
        let kept = raw
            .since(s.reached)
            .map(|b| b.min())
            .reduce(f64::min)
            .is_some_and(|m| m >= tread + 0.5 * s.step);
        if kept || (s.count as f64) < 2.0 * p.parts {
            return kept;
        }
    }
    let window = (trend.span / p.parts).clamp(5.0, p.widest);
    let floor = super::trend::floor_points_since(raw, from, to, window);
    super::trend::fit(&floor)
        .is_some_and(|f| f.p_value < p.significance && f.slope >= 0.5 * trend.slope)
}

/// What the forecast's tests build their trends with.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::analysis::trend::{fit_demand, Reading};

    pub const GIB: f64 = (1u64 << 30) as f64;

    pub fn params() -> EtaParams {
        EtaParams::from_config(&crate::config::AnalysisConfig::default())
    }

    /// The demand trend of `f` sampled every second over the last 120 s before `now`, its
    /// work begun at 0 (a window that starts later cuts its history).
    pub fn trend(f: impl Fn(f64) -> f64, now: f64) -> Option<Trend> {
        let pts: Vec<(f64, f64)> = (0..=120)
            .map(|i| now - 120.0 + i as f64)
            .filter(|t| *t >= 0.0)
            .map(|t| (t, f(t)))
            .collect();
        fit_demand(
            &pts,
            MIN_STEP_BYTES,
            (now <= 120.0).then_some(0.0),
            Reading::Segments,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use crate::analysis::trend::{fit_demand, Reading};

    #[test]
    fn a_rise_smaller_than_a_segment_is_no_growth() {
        // 6 MiB over 100 s: significant, and nothing at GPU scale.
        let tiny = |t: f64| 20.0 * GIB + 60.0 * 1024.0 * t;
        let t = trend(tiny, 100.0).unwrap();
        assert!(t.p_value < 0.01);
        assert!(!credible(&t, &params()));
    }

    #[test]
    fn a_steady_rise_persists_at_every_second_not_every_other() {
        // 0.66 GB/s from a load that ended at 60 s: the windows are a quarter of the span,
        // which changes every second; on a fixed grid a span of 25 s left three windows (both
        // ends under half covered) and the rise failed the test for a second.
        let line = |t: f64| 20.0 * GIB + (t - 60.0).max(0.0) * 0.66e9;
        let mut raw = Series::new(1.0, 600.0);
        for i in 60..=140 {
            let now = i as f64;
            raw.push(now, line(now));
            if now < 80.0 {
                continue;
            }
            let pts: Vec<(f64, f64)> = (60..=i).map(|s| (s as f64, line(s as f64))).collect();
            let t = fit_demand(&pts, MIN_STEP_BYTES, Some(0.0), Reading::Segments).unwrap();
            assert!(
                persistent(&t, &raw, 60.0, now, &PERSISTENCE),
                "at {now} s, span {}",
                t.span
            );
        }
    }

    #[test]
    fn steps_closer_than_a_smooth_rises_pace_wait_as_long_as_one() {
        // 0.5 GiB every 3 s until 90 s, then nothing: 1.5 gaps is 4.5 s, a smooth rise's wait
        // 15 s. Ten seconds after the last step it is still current, twenty not.
        let stair = |t: f64| 10.0 * GIB + (t.min(90.0) / 3.0).floor() * 0.5 * GIB;
        let at = |now: f64| trend(stair, now).unwrap();
        assert!(
            at(100.0).stairs.is_some_and(|s| s.gap == 3.0),
            "{:?}",
            at(100.0)
        );
        assert!(current(&at(100.0)));
        assert!(!current(&at(110.0)));
    }

    #[test]
    fn a_staircase_of_many_steps_persists_as_a_rise_when_its_last_step_sinks() {
        // Steps of 0.5 GiB every 3 s; after the last one, at 60 s, the floor sinks to just
        // above the tread before it (a cache flushed and regrown), the rise under it goes on.
        let step = |t: f64, every: f64| 10.0 * GIB + (t / every).floor() * 0.5 * GIB;
        let series = |every: f64| {
            let mut s = Series::new(1.0, 300.0);
            for i in 0..=62 {
                let t = i as f64;
                let v = if t > 60.0 {
                    step(59.0, every) + 0.1 * GIB
                } else {
                    step(t, every)
                };
                s.push(t, v);
            }
            s
        };
        let many = trend(|t| step(t.min(60.0), 3.0), 62.0).unwrap();
        assert!(many.stairs.is_some_and(|s| s.count >= 8), "{many:?}");
        assert!(persistent(&many, &series(3.0), 0.0, 62.0, &PERSISTENCE));
        // Two steps 30 s apart are judged by their last one alone: not kept, not persistent.
        let two = trend(|t| step(t.min(60.0), 30.0), 62.0).unwrap();
        assert!(two.stairs.is_some_and(|s| s.count == 2), "{two:?}");
        assert!(!persistent(&two, &series(30.0), 0.0, 62.0, &PERSISTENCE));
    }

    #[test]
    fn a_staircase_persists_while_its_last_step_is_kept() {
        let stair = |t: f64| 10.0 * GIB + (t / 20.0).floor() * GIB;
        let t = trend(stair, 110.0).unwrap();
        let mut kept = Series::new(1.0, 300.0);
        let mut dropped = Series::new(1.0, 300.0);
        for i in 0..=110 {
            let t = i as f64;
            kept.push(t, stair(t));
            // The allocator gives the last step back after 5 s.
            dropped.push(t, if t >= 105.0 { stair(99.0) } else { stair(t) });
        }
        assert!(persistent(&t, &kept, 0.0, 110.0, &PERSISTENCE));
        assert!(!persistent(&t, &dropped, 0.0, 110.0, &PERSISTENCE));
    }

    #[test]
    fn a_kept_step_persists_under_a_floor_that_swings_below_the_old_top() {
        // Training between evaluations that keep their outputs: activations swing the demand
        // 4 GiB under its peaks, and every evaluation keeps 3 GiB more. The new floor never
        // reaches the old tread's top plus half a step, but it stands on the old floor plus a
        // whole step.
        let kept = |t: f64| (t / 20.0).floor() * 3.0 * GIB;
        let swing = |t: f64| 20.0 * GIB + kept(t) + if t as u64 % 4 < 2 { 4.0 * GIB } else { 0.0 };
        let top = |t: f64| 24.0 * GIB + kept(t);
        let t = trend(top, 110.0).unwrap();
        assert!(t.stairs.is_some(), "{t:?}");
        let series = |f: &dyn Fn(f64) -> f64| {
            let mut s = Series::new(1.0, 300.0);
            for i in 0..=110 {
                s.push(i as f64, f(i as f64));
            }
            s
        };
        assert!(persistent(&t, &series(&swing), 0.0, 110.0, &PERSISTENCE));
        // The same swing whose last evaluation gave its outputs back after 5 s.
        let given_back = |t: f64| {
            if t >= 105.0 {
                swing(t - 20.0)
            } else {
                swing(t)
            }
        };
        assert!(!persistent(
            &t,
            &series(&given_back),
            0.0,
            110.0,
            &PERSISTENCE
        ));
    }

    #[test]
    fn a_step_caught_over_two_samples_is_kept_once_it_rose_whole() {
        // An evaluation keeps 20 GiB every 20 s; its last step is sampled a quarter risen
        // at t = 100, whole from t = 101.
        let kept = |t: f64| {
            let whole = 10.0 * GIB + (t / 20.0).floor() * 20.0 * GIB;
            if t == 100.0 {
                whole - 15.0 * GIB
            } else {
                whole
            }
        };
        let t = trend(kept, 110.0).unwrap();
        let s = t.stairs.expect("a staircase");
        assert_eq!((s.last, s.reached), (100.0, 101.0));
        let mut series = Series::new(1.0, 300.0);
        for i in 0..=110 {
            series.push(i as f64, kept(i as f64));
        }
        assert!(persistent(&t, &series, 0.0, 110.0, &PERSISTENCE));
    }

    #[test]
    fn a_floor_that_rises_for_a_minute_and_falls_back_is_no_leak() {
        let floor = |t: f64| {
            GIB + if (100.0..160.0).contains(&t) {
                0.5 * GIB
            } else {
                0.0
            }
        };
        let steady = |t: f64| GIB + 0.01 * GIB * t;
        let series = |f: &dyn Fn(f64) -> f64| {
            let mut s = Series::new(1.0, 600.0);
            for i in 0..=240 {
                s.push(i as f64, f(i as f64));
            }
            s
        };
        let rising = trend(steady, 240.0).unwrap();
        assert!(persistent(
            &rising,
            &series(&steady),
            0.0,
            240.0,
            &LEAK_PERSISTENCE
        ));
        assert!(!persistent(
            &rising,
            &series(&floor),
            0.0,
            240.0,
            &LEAK_PERSISTENCE
        ));
    }

    #[test]
    fn records_that_come_and_go_are_not_persistent_growth() {
        let series = |f: &dyn Fn(f64) -> f64| {
            let mut s = Series::new(1.0, 120.0);
            for i in 0..120 {
                s.push(i as f64, f(i as f64));
            }
            s
        };
        // Bursts of requests, each larger than the last, then back to 2 GiB.
        let bursts = |t: f64| {
            if (t as u64 % 20) < 6 {
                2.0 * GIB + (t / 20.0).floor() * 0.5 * GIB
            } else {
                2.0 * GIB
            }
        };
        let records = |t: f64| 2.0 * GIB + (t / 20.0).floor() * 0.5 * GIB;
        let growth = trend(records, 119.0).unwrap();
        assert!(!persistent(
            &growth,
            &series(&bursts),
            0.0,
            119.0,
            &PERSISTENCE
        ));
        // The same records kept: a cache that grows and stays.
        assert!(persistent(
            &growth,
            &series(&records),
            0.0,
            119.0,
            &PERSISTENCE
        ));
    }
}
