//! The floor of a memory series and its trend.
//!
//! Training memory is a sawtooth: every step allocates activations and frees them. What leaks
//! or runs out is the *floor* under the teeth, so trends are fitted on per-window minima, never
//! on raw samples (a least-squares slope over raw samples swings by ±200 MiB/min on a run
//! without any leak).

use super::stats::{mann_kendall_increasing, median, theil_sen, theil_sen_bounded};
use crate::history::Series;
use crate::model::Time;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloorPoint {
    /// Middle of the window.
    pub t: Time,
    pub min: f64,
    pub max: f64,
}

/// Per-window minima (and maxima) of the series between `from` and `to`. Windows are aligned to
/// multiples of `window` so that the same samples give the same points however they are
/// replayed. A window counts only when at least half of its buckets hold data: a window that
/// has barely begun has not yet seen its trough.
pub fn floor_points(series: &Series, from: Time, to: Time, window: f64) -> Vec<FloorPoint> {
    let tier = series.tier_for(window, from);
    let res = tier.resolution();
    let needed = ((window / res) * 0.5).ceil().max(1.0) as usize;
    let newest = tier.newest().map(|b| b.t);
    let newest_seen = tier.newest_seen().unwrap_or(res);
    let mut out = Vec::new();
    // (window index, min, max, buckets, seconds the newest bucket has been filling)
    let mut current: Option<(i64, f64, f64, usize, f64)> = None;
    let flush = |c: (i64, f64, f64, usize, f64), out: &mut Vec<FloorPoint>| {
        let start = c.0 as f64 * window;
        // Buckets still filling count for the time they have seen, so a window that has barely
        // begun, whose trough may be yet to come, is left out.
        let covered = (c.3 as f64 - 1.0) * res + c.4;
        if c.3 >= needed && covered >= window * 0.5 - 1e-9 || covered >= window - 1e-9 {
            out.push(FloorPoint {
                t: start + 0.5 * window,
                min: c.1,
                max: c.2,
            });
        }
    };
    for b in tier.since(from) {
        if b.t > to {
            break;
        }
        let key = (b.t / window).floor() as i64;
        let seen = if Some(b.t) == newest {
            newest_seen
        } else {
            res
        };
        current = match current {
            Some((k, mn, mx, n, _)) if k == key => {
                Some((k, mn.min(b.min()), mx.max(b.max()), n + 1, seen))
            }
            Some(c) => {
                flush(c, &mut out);
                Some((key, b.min(), b.max(), 1, seen))
            }
            None => Some((key, b.min(), b.max(), 1, seen)),
        };
    }
    if let Some(c) = current {
        flush(c, &mut out);
    }
    out
}

/// The fitted trend of a floor.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Trend {
    /// Theil–Sen slope of the floor, bytes per second.
    pub slope: f64,
    /// One-sided 99 % lower confidence bound of that slope.
    pub slope_lower: f64,
    /// One-sided Mann–Kendall p-value for "the floor rises".
    pub p_value: f64,
    /// Seconds between the first and the last floor point.
    pub span: f64,
    pub points: usize,
    /// The fitted floor at the last point.
    pub floor_now: f64,
    /// Theil–Sen slope over the most recent third of the points: a ramp that has levelled off
    /// shows here first.
    pub recent_slope: f64,
    /// Median of (max − min) per window: how far the teeth rise above the floor.
    pub swing: f64,
}

pub fn fit(points: &[FloorPoint]) -> Option<Trend> {
    if points.len() < 3 {
        return None;
    }
    let xy: Vec<(f64, f64)> = points.iter().map(|p| (p.t, p.min)).collect();
    let (line, slope_lower) = theil_sen_bounded(&xy, Some(0.01))?;
    let mins: Vec<f64> = points.iter().map(|p| p.min).collect();
    let (_, p_value) = mann_kendall_increasing(&mins)?;
    let recent_from = points.len() - (points.len() / 3).max(3).min(points.len());
    let recent_slope = theil_sen(&xy[recent_from..])
        .map(|l| l.slope)
        .unwrap_or(line.slope);
    let mut swings: Vec<f64> = points.iter().map(|p| p.max - p.min).collect();
    let last_t = points[points.len() - 1].t;
    Some(Trend {
        slope: line.slope,
        slope_lower,
        p_value,
        span: last_t - points[0].t,
        points: points.len(),
        floor_now: line.at(last_t),
        recent_slope,
        swing: median(&mut swings).unwrap_or(0.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sawtooth(series: &mut Series, from: f64, to: f64, floor: impl Fn(f64) -> f64) {
        let mut t = from;
        let mut i = 0u64;
        while t < to {
            // A step every 0.04 s: the allocated bytes climb 3 GiB above the floor and drop.
            let tooth = ((i % 25) as f64 / 25.0) * 3.0 * (1u64 << 30) as f64;
            series.push(t, floor(t) + tooth);
            t += 0.1;
            i += 7;
        }
    }

    #[test]
    fn a_pure_sawtooth_has_a_flat_floor() {
        let mut s = Series::new(1.0, 600.0);
        sawtooth(&mut s, 0.0, 300.0, |_| 1e9);
        let pts = floor_points(&s, 0.0, 300.0, 5.0);
        let tr = fit(&pts).unwrap();
        assert!(tr.slope.abs() < 1e3, "slope {}", tr.slope);
        assert!(tr.p_value > 0.05);
        assert!(tr.swing > 2e9);
    }

    #[test]
    fn a_rising_floor_is_found_under_the_teeth() {
        let mut s = Series::new(1.0, 600.0);
        let leak = 200.0 * 1048576.0 / 60.0;
        sawtooth(&mut s, 0.0, 300.0, |t| 1e9 + leak * t);
        let tr = fit(&floor_points(&s, 0.0, 300.0, 5.0)).unwrap();
        assert!(
            (tr.slope - leak).abs() / leak < 0.05,
            "{} vs {}",
            tr.slope,
            leak
        );
        assert!(tr.p_value < 1e-6);
    }

    #[test]
    fn half_empty_windows_do_not_count() {
        let mut s = Series::new(1.0, 600.0);
        for i in 0..12 {
            s.push(i as f64, 1.0);
        }
        // Windows [0,5) and [5,10) are full, [10,15) has 2 of 5 buckets.
        assert_eq!(floor_points(&s, 0.0, 12.0, 5.0).len(), 2);
    }
}
