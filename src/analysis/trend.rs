//! The floor of a memory series and its trend.
//!
//! Training memory is a sawtooth: every step allocates activations and frees them. What leaks
//! or runs out is the *floor* under the teeth, so trends are fitted on per-window minima, never
//! on raw samples (a least-squares slope over raw samples swings by ±200 MiB/min on a run
//! without any leak).

use super::stats::{mann_kendall_increasing, median, theil_sen, theil_sen_interval};
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
    floor_points_on(series, from, to, window, 0.0)
}

/// `floor_points` on windows that start at `from`, for a window that is a share of the span
/// from `from` to `to` and changes with it: on a fixed grid such windows would fall
/// differently every second, and a span of four of them would leave three points at one
/// second and five at the next (both ends under half covered), a test of them passing and
/// failing in turn on a steady rise.
pub fn floor_points_since(series: &Series, from: Time, to: Time, window: f64) -> Vec<FloorPoint> {
    floor_points_on(series, from, to, window, from)
}

fn floor_points_on(
    series: &Series,
    from: Time,
    to: Time,
    window: f64,
    origin: Time,
) -> Vec<FloorPoint> {
    let tier = series.tier_for(window, from);
    let res = tier.resolution();
    let needed = ((window / res) * 0.5).ceil().max(1.0) as usize;
    let newest = tier.newest().map(|b| b.t);
    let newest_seen = tier.newest_seen().unwrap_or(res);
    let mut out = Vec::new();
    // (window index, min, max, buckets, seconds the newest bucket has been filling)
    let mut current: Option<(i64, f64, f64, usize, f64)> = None;
    let flush = |c: (i64, f64, f64, usize, f64), out: &mut Vec<FloorPoint>| {
        let start = origin + c.0 as f64 * window;
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
        let key = ((b.t - origin) / window).floor() as i64;
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
    /// One-sided 99 % upper confidence bound of that slope.
    pub slope_upper: f64,
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
    /// A staircase (`fit_demand`): the median size of its steps, the median gap between them
    /// and the seconds from the last point until the next is due; `None` for a smooth trend.
    #[serde(skip)]
    pub stairs: Option<Stairs>,
    /// Seconds from the demand's last rise (`fit_demand`: its last step, or the last time it
    /// rose by `RISE_SECONDS` of its pace now above where it last rose) to the last point: how
    /// old the evidence of growth is.
    #[serde(skip)]
    pub quiet: f64,
    /// Where a rise that slows towards a level fits clearly better than a line (`fit_demand`),
    /// how much more it is on course to rise: a load, a warm-up or a cache that fills ever more
    /// slowly.
    #[serde(skip)]
    pub saturation: Option<Saturation>,
}

/// What is left of a rise that slows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Saturation {
    /// How much more it is on course to rise.
    pub rest: f64,
    /// For a smooth rise, the seconds in which what is left falls by a factor e: how fast it
    /// takes the rest (`oom::eta`). `None` for steps that shrink.
    pub tau: Option<f64>,
}

/// A demand that grows rises by its pace now times this, on average, between two of its
/// rises: what `Trend::quiet` counts from.
pub const RISE_SECONDS: f64 = 5.0;
/// Two steps whose larger is more than this many times the smaller are unlike: no schedule.
const UNLIKE_STEPS: f64 = 3.0;

/// What a demand series reads, which decides what its steps can mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Segments the driver hands out (no allocator report): their sizes are the allocator's,
    /// which takes ever larger ones for a request that grows.
    Segments,
    /// Bytes in use, as the allocator reports them.
    InUse,
    /// The high-water mark of bytes in use over a short window: it shows a one-off peak for
    /// the window and forgets it after.
    HighWater,
}

/// The saturating fit is clearly better than the line when it leaves at most this share of
/// the line's squared residuals.
pub const SATURATING_RATIO: f64 = 0.5;

/// The steps of a staircase trend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stairs {
    pub step: f64,
    pub gap: f64,
    pub next_in: f64,
    /// When the last step came, and the level it rose from.
    pub last: Time,
    pub below: f64,
    /// When the last step had risen whole: a step caught over several samples is partly
    /// risen at `last`.
    pub reached: Time,
    /// Steps seen: how far the schedule may be extrapolated (`oom::eta`).
    pub count: usize,
}

/// The latest steps, three or more, each larger than the one before by `min_step` at least:
/// what a caching allocator takes from the driver for a request that grows (a new largest
/// batch), a segment of the whole request each time none it holds is large enough.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Growing {
    /// Bytes the steps before the last of them took.
    pub earlier: f64,
    /// The next step, were it to grow by as little as any of them grew on the one before.
    pub next: f64,
}

pub fn fit(points: &[FloorPoint]) -> Option<Trend> {
    if points.len() < 3 {
        return None;
    }
    let xy: Vec<(f64, f64)> = points.iter().map(|p| (p.t, p.min)).collect();
    let (line, slope_lower, slope_upper) = theil_sen_interval(&xy, Some(0.01))?;
    let mins: Vec<f64> = points.iter().map(|p| p.min).collect();
    let (_, p_value) = mann_kendall_increasing(&mins)?;
    let recent_slope = theil_sen(latest_third(&xy))
        .map(|l| l.slope)
        .unwrap_or(line.slope);
    let mut swings: Vec<f64> = points.iter().map(|p| p.max - p.min).collect();
    let last_t = points[points.len() - 1].t;
    Some(Trend {
        slope: line.slope,
        slope_lower,
        slope_upper,
        p_value,
        span: last_t - points[0].t,
        points: points.len(),
        floor_now: line.at(last_t),
        recent_slope,
        swing: median(&mut swings).unwrap_or(0.0),
        stairs: None,
        quiet: 0.0,
        saturation: None,
    })
}

/// The steps of a demand series: jumps between neighbouring points far above the noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Steps {
    /// Upward jumps (of a high-water mark, those it kept).
    pub count: usize,
    /// Index of the point just after the last upward jump.
    pub after_last: usize,
    /// Share of the whole rise (highest − first) that the upward jumps make.
    pub rise_share: f64,
    /// Median time between upward jumps.
    pub median_gap: f64,
    /// The largest upward jump: its share of the whole rise and the index just after it.
    pub largest_share: f64,
    pub after_largest: usize,
    /// Time of the first upward jump, and the index just after it.
    pub first_t: f64,
    pub after_first: usize,
    /// Time of the last upward jump, and of the point where it had risen whole.
    pub last_t: f64,
    pub last_reached: f64,
    /// Median size of the upward jumps.
    pub median_step: f64,
    /// The level the last upward jump rose from.
    pub below_last: f64,
    /// The size of the last upward jump.
    pub last_step: f64,
    /// Where every upward jump is smaller than the one before it, the largest ratio of a jump
    /// to the one before: the slowest the steps shrink.
    pub shrink: Option<f64>,
    /// The latest jumps, where three or more each were larger than the one before by
    /// `min_step` at least.
    pub growing: Option<Growing>,
}

/// Upward jumps of at least `min_step` and eight robust standard deviations of the
/// point-to-point changes. A caching allocator takes memory from the driver in segments, so
/// NVML sees growth as a staircase; a buffer allocated once is a single step. Of a high-water
/// mark (`high_water`), only the jumps it kept.
pub fn steps(points: &[(f64, f64)], min_step: f64, high_water: bool) -> Steps {
    let mut diffs: Vec<f64> = points.windows(2).map(|w| (w[1].1 - w[0].1).abs()).collect();
    let sigma = 1.4826 * median(&mut diffs).unwrap_or(0.0);
    let threshold = min_step.max(8.0 * sigma);
    // (index after the jump, its time, its size, the level it rose from); a jump caught over
    // two neighbouring samples is one jump.
    let mut jumps: Vec<(usize, f64, f64, f64)> = Vec::new();
    for (i, w) in points.windows(2).enumerate() {
        let d = w[1].1 - w[0].1;
        if d >= threshold && d > 0.0 {
            match jumps.last_mut() {
                Some(j) if j.0 == i => {
                    j.0 = i + 1;
                    j.2 += d;
                }
                _ => jumps.push((i + 1, w[1].0, d, w[0].1)),
            }
        }
    }
    // A jump a high-water mark gave back before the next one (fell below half of it) was a
    // peak the window forgot: a one-off (a checkpoint's gathered copy) or the work's own swing
    // (a batch's activations peaking higher than the last), no level the demand keeps. A
    // staircase's steps are kept, and one given back since is no evidence of a step now. Of
    // bytes held, a give-back is the allocator's (a flush under pressure, `empty_cache`), and
    // the steps before it were taken.
    if high_water {
        // Each jump is judged on the points from its top up to the next jump's (or the end).
        let tops: Vec<usize> = jumps.iter().map(|j| j.0).collect();
        let mut next = tops.into_iter().skip(1);
        jumps.retain(|j| {
            let until = next.next().unwrap_or(points.len());
            points[j.0..until].iter().all(|p| p.1 >= j.3 + 0.5 * j.2)
        });
    }
    let jumped: f64 = jumps.iter().map(|j| j.2).sum();
    // From the first point to the highest: an allocator that gives cache back under pressure
    // after its last step does not make the steps before it a bigger share of the rise.
    let rise = match points.first() {
        Some(a) => points.iter().map(|p| p.1).fold(a.1, f64::max) - a.1,
        None => 0.0,
    };
    let mut gaps: Vec<f64> = jumps.windows(2).map(|w| w[1].1 - w[0].1).collect();
    let mut sizes: Vec<f64> = jumps.iter().map(|j| j.2).collect();
    let largest = jumps.iter().max_by(|a, b| a.2.total_cmp(&b.2));
    let shrinking = shrink(&sizes);
    let growing = growing(&sizes, min_step);
    Steps {
        largest_share: match largest {
            Some(j) if rise > 0.0 => j.2 / rise,
            _ => 0.0,
        },
        after_largest: largest.map_or(0, |j| j.0),
        count: jumps.len(),
        after_last: jumps.last().map_or(0, |j| j.0),
        rise_share: if rise > 0.0 { jumped / rise } else { 0.0 },
        median_gap: median(&mut gaps).unwrap_or(f64::INFINITY),
        first_t: jumps.first().map_or(f64::INFINITY, |j| j.1),
        after_first: jumps.first().map_or(0, |j| j.0),
        last_t: jumps.last().map_or(f64::NEG_INFINITY, |j| j.1),
        last_reached: jumps.last().map_or(f64::NEG_INFINITY, |j| points[j.0].0),
        below_last: jumps.last().map_or(f64::NAN, |j| j.3),
        last_step: jumps.last().map_or(0.0, |j| j.2),
        shrink: shrinking,
        growing,
        median_step: median(&mut sizes).unwrap_or(0.0),
    }
}

/// The latest step sizes that each exceed the one before by `min_step` at least, where there
/// are three or more: what those before the last took, and the next at the least growth seen.
fn growing(sizes: &[f64], min_step: f64) -> Option<Growing> {
    let from = sizes
        .windows(2)
        .rposition(|w| w[1] - w[0] < min_step)
        .map_or(0, |i| i + 1);
    let run = &sizes[from..];
    let (&last, before) = run.split_last()?;
    let least = run.windows(2).map(|w| w[1] - w[0]).reduce(f64::min)?;
    (run.len() >= 3).then(|| Growing {
        earlier: before.iter().sum(),
        next: last + least,
    })
}

/// The largest ratio of a step to the one before, where there are two or more and each is
/// smaller than the one before.
fn shrink(sizes: &[f64]) -> Option<f64> {
    sizes
        .windows(2)
        .map(|w| w[1] / w[0])
        .reduce(f64::max)
        .filter(|&r| r < 1.0)
}

/// When `points` last rose by `by` above the level of their previous rise (the first point's
/// time where they never did).
fn last_rise(points: &[(f64, f64)], by: f64) -> f64 {
    let by = by.max(1.0);
    let mut level = points[0].1;
    let mut at = points[0].0;
    for &(t, y) in &points[1..] {
        if y >= level + by {
            level = y;
            at = t;
        }
    }
    at
}

/// Points that rise with significance: at least eight, Mann–Kendall p < 0.01, a positive slope.
fn rising(points: &[(f64, f64)]) -> bool {
    if points.len() < 8 {
        return false;
    }
    let ys: Vec<f64> = points.iter().map(|p| p.1).collect();
    mann_kendall_increasing(&ys).is_some_and(|(_, p)| p < 0.01)
        && theil_sen(points).is_some_and(|l| l.slope > 0.0)
}

/// The trend of a process's demand (its high-water need, one point a second), aware of steps:
/// - a step that alone makes more than two thirds of the rise, out of a level that did not
///   rise before it, is a change of level (a buffer allocated once, a model loaded), not a
///   slope: the fit starts after it;
/// - two or more make a staircase (a cache grown segment by segment, a curriculum raising the
///   sequence length): the slope is fitted over all of it, and it counts as rising now only
///   while the next step is due (within two median gaps of the last).
///
/// `start`: when the points' first level began, where that is known (the process's loading
/// ended and the points begin there, or the series reached the level a window cut, after
/// loading); only then is the time before the first step a tread.
pub fn fit_demand(
    points: &[(f64, f64)],
    min_step: f64,
    start: Option<f64>,
    reading: Reading,
) -> Option<Trend> {
    if points.len() < 3 {
        return None;
    }
    let in_use = reading != Reading::Segments;
    let high_water = reading == Reading::HighWater;
    let mut pts = points;
    let mut st = steps(pts, min_step, high_water);
    // A step that follows a rise is part of the growth: only one out of a level is a change of
    // level.
    // A first step out of no tread (the level it rose from held less than half the
    // staircase's gap: the work's first batch after its load, the load's last shard, a
    // trainer's first peak after its weights) ends the rise before it, once; a staircase's
    // steps rise from levels that held. Measured against the staircase's own gap, so that the
    // same job twice as slow reads the same; read only from a start (the loading's end, or a
    // change of level cut off): a window cuts a tread at any length, unless the time its level
    // was reached is known.
    let mut start = start;
    let mut treads_checked = false;
    loop {
        // Two steps of bytes in use (`in_use`: the allocator's report says what the process
        // holds in tensors) are a schedule only where they are alike, as a repeated phase's
        // are (two evaluations' kept outputs, a trial's leak twice): a KV pool taken after a
        // load's last shard, or a checkpoint's gathered copy after the model's load, repeats
        // neither, and the larger is a change of level, whatever rose before it. Segments the
        // driver sees are sized by the allocator: a request that grows takes ever larger ones.
        let unlike_pair = in_use && st.count == 2 && {
            let (last, other) = (st.last_step, 2.0 * st.median_step - st.last_step);
            last.max(other) > UNLIKE_STEPS * last.min(other)
        };
        let out_of_a_level = st.count > 0
            && (unlike_pair
                || st.largest_share > 2.0 / 3.0 && !rising(&pts[..st.after_largest - 1]));
        let out_of_no_tread = start.is_some_and(|s| {
            !treads_checked && st.count > 1 && st.first_t - s < 0.5 * st.median_gap
        });
        if out_of_a_level {
            pts = &pts[st.after_largest..];
            start = Some(pts[0].0);
        } else if out_of_no_tread {
            treads_checked = true;
            pts = &pts[st.after_first..];
        } else {
            break;
        }
        if pts.len() < 3 {
            return None;
        }
        st = steps(pts, min_step, high_water);
    }
    let stepwise = st.count > 0 && st.rise_share >= 0.5;
    let (line, slope_lower, slope_upper) = theil_sen_interval(pts, Some(0.01))?;
    let ys: Vec<f64> = pts.iter().map(|p| p.1).collect();
    let (_, p_value) = mann_kendall_increasing(&ys)?;
    let last_t = pts[pts.len() - 1].0;
    let recent_slope = if stepwise {
        let due = last_t - st.last_t <= 2.0 * st.median_gap;
        if due {
            line.slope
        } else {
            0.0
        }
    } else {
        theil_sen(latest_third(pts)).map_or(line.slope, |l| l.slope)
    };
    let quiet = if stepwise {
        last_t - st.last_t
    } else {
        // Five seconds of its pace now, not of the line through its window: a rise that slows
        // (a cache filling ever more slowly) rises by that line's five seconds ever more
        // rarely while it still rises at its own pace. Under half the line's pace it has
        // slowed (`evidence::SLOWED`): a swing's new highs about a level that holds are no
        // rise of that size.
        let pace_now = if line.slope > 0.0 {
            recent_slope.clamp(super::evidence::SLOWED * line.slope, line.slope)
        } else {
            line.slope
        };
        last_t - last_rise(pts, pace_now * RISE_SECONDS)
    };
    let smooth = smooth_saturation(pts);
    // Steps that shrink, each to at most `r` of the one before, have at most the rest of
    // that geometric series to come: a rise that slows step by step (a checkpoint's copy
    // gathered again, a little larger than the last; a cache warmed by ever rarer sizes) is
    // over by then. A step as large as the last, or larger, takes it back. A last step seen
    // at the last point only may be half risen: its size is known a point later.
    let settled = st.after_last + 1 < pts.len();
    let stepped = st
        .shrink
        .filter(|_| stepwise && settled)
        .map(|r| Saturation {
            rest: st.last_step * r / (1.0 - r),
            tau: None,
        });
    let saturation = smooth
        .into_iter()
        .chain(stepped)
        .reduce(|a, b| if b.rest > a.rest { b } else { a });
    // A smooth rise that slowed but goes on is growth at its pace now: the line through the
    // window, steepened by its older, faster part, is not what closes the room, and no trend
    // at all is not either.
    let stairs =
        (stepwise && st.median_gap.is_finite() && st.median_step > 0.0).then_some(Stairs {
            step: st.median_step,
            gap: st.median_gap,
            next_in: (st.last_t + st.median_gap - last_t).max(0.0),
            last: st.last_t,
            below: st.below_last,
            reached: st.last_reached,
            count: st.count,
        });
    let pace = if stairs.is_none()
        && recent_slope > 0.0
        && recent_slope < super::evidence::SLOWED * line.slope
    {
        recent_slope / line.slope
    } else {
        1.0
    };
    Some(Trend {
        slope: pace * line.slope,
        slope_lower: pace * slope_lower,
        slope_upper: pace * slope_upper,
        p_value,
        span: last_t - pts[0].0,
        points: pts.len(),
        floor_now: line.at(last_t),
        recent_slope,
        swing: 0.0,
        quiet,
        saturation,
        stairs,
    })
}

/// Where a rise that slows towards a level fits `pts` clearly better than a line
/// (`SATURATING_RATIO`), and its latest third as well as a line through that third could: how
/// much more it is on course to rise after the last point, and how fast.
pub fn smooth_saturation(pts: &[(f64, f64)]) -> Option<Saturation> {
    saturation_through(pts, latest_third(pts))
}

/// The latest third of a fit's points, three at least: where a rise that levelled off, or
/// one that goes on past a bend, shows first.
fn latest_third<T>(pts: &[T]) -> &[T] {
    &pts[pts.len() - (pts.len() / 3).max(3).min(pts.len())..]
}

/// A saturating curve fitted over `whole`, a rise that `tail` ends: kept only where it fits
/// `whole` clearly better than a line and the tail as well as a line through the tail alone
/// could, within a factor of `1 / SATURATING_RATIO`. A load that stopped and then a leak at a
/// steady pace bend as one curve would, but the leak is a line the curve leaves behind.
pub fn saturation_through(whole: &[(f64, f64)], tail: &[(f64, f64)]) -> Option<Saturation> {
    let last_y = tail.last()?.1;
    let s = super::stats::saturating(whole).filter(|s| s.ratio <= SATURATING_RATIO)?;
    let line = super::stats::line_residuals(tail)?;
    let curve: f64 = tail.iter().map(|&(t, y)| (y - s.at(t)).powi(2)).sum();
    if curve * SATURATING_RATIO > line {
        return None;
    }
    // Its pace is extrapolated only where the bend was seen: a time constant longer than the
    // points span is a line bent a little, whose rest may bound the rise but not time it.
    let span = whole.last()?.0 - whole.first()?.0;
    Some(Saturation {
        rest: (s.level - last_y).max(0.0),
        tau: (s.tau <= span).then_some(s.tau),
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

#[cfg(test)]
mod demand_tests {
    use super::*;

    /// The fit of driver-level points (no allocator's report), with 64 MiB steps.
    fn segments_fit(points: &[(f64, f64)], start: Option<f64>) -> Option<Trend> {
        fit_demand(points, 64.0 * 1048576.0, start, Reading::Segments)
    }

    const GIB: f64 = (1u64 << 30) as f64;

    fn series(f: impl Fn(f64) -> f64, n: usize) -> Vec<(f64, f64)> {
        (0..n).map(|i| (i as f64, f(i as f64))).collect()
    }

    #[test]
    fn a_whole_rise_read_through_its_tail_is_kept_only_where_the_tail_bends_as_it_does() {
        // A cache filling along 1 - e^(-t/60) from 0 to 120 s, the tail from 60 s.
        let fills = series(|t| GIB * (1.0 + 100.0 * (1.0 - (-t / 60.0).exp())), 121);
        let s = saturation_through(&fills, &fills[60..]).expect("one rise that slows");
        let left = 100.0 * (-2.0f64).exp() * GIB;
        assert!((s.rest - left).abs() < 0.05 * left, "{} GiB", s.rest / GIB);
        assert!(
            s.tau.is_some_and(|tau| (50.0..70.0).contains(&tau)),
            "{s:?}"
        );
        // Weights read at 1.7 GiB/s for 30 s, then a leak of 0.2 GiB/s from 30 to 120 s: the
        // whole bends as a curve would, its tail is a line the curve leaves behind.
        let leaks = series(
            |t| GIB * (1.0 + 1.7 * t.min(30.0) + 0.2 * (t - 30.0).max(0.0)),
            121,
        );
        let bends = crate::analysis::stats::saturating(&leaks);
        assert!(
            bends.is_some_and(|s| s.ratio <= SATURATING_RATIO),
            "the whole bends"
        );
        assert_eq!(saturation_through(&leaks, &leaks[60..]), None);
        // Read over the window alone the same: its latest third is a line.
        assert_eq!(smooth_saturation(&leaks), None);
    }

    #[test]
    fn two_unlike_steps_of_bytes_in_use_are_no_staircase() {
        // Weights read at 0.1 GiB/s, a last shard of 4 GiB at 60 s, a pool of 40 GiB 9 s later,
        // then flat: the median of the two steps (22 GiB every 9 s) is nothing the job repeats.
        let load_then_pool = |big: f64| {
            move |t: f64| {
                GIB * (0.1 * t.min(59.0)
                    + if t >= 60.0 { 4.0 } else { 0.0 }
                    + if t >= 69.0 { big } else { 0.0 })
            }
        };
        let fit = |big: f64, reading: Reading| {
            fit_demand(
                &series(load_then_pool(big), 100),
                64.0 * 1048576.0,
                Some(0.0),
                reading,
            )
            .and_then(|t| t.stairs)
        };
        assert_eq!(
            fit(40.0, Reading::InUse),
            None,
            "a pool after the last shard"
        );
        // Segments the driver sees may grow so (a request that grows takes ever larger ones),
        // and two steps alike are a schedule with or without the report.
        assert_eq!(fit(40.0, Reading::Segments).map(|s| s.count), Some(2));
        let alike = fit(5.0, Reading::InUse).map(|s| s.count);
        assert_eq!(alike, Some(2), "two steps alike");
    }

    #[test]
    fn one_step_is_a_change_of_level_not_a_slope() {
        // 10 GiB, then a 2 GiB buffer at t = 60, then flat with a little noise.
        let pts = series(
            |t| 10.0 * GIB + if t >= 60.0 { 2.0 * GIB } else { 0.0 } + (t * 7.0).sin() * 1e6,
            120,
        );
        let tr = segments_fit(&pts, Some(0.0)).unwrap();
        assert!(tr.slope.abs() < 1e5, "slope {}", tr.slope);
        assert_eq!(tr.points, 60, "fitted after the step");
    }

    #[test]
    fn a_step_out_of_no_tread_ends_the_rise_before_it() {
        // Loaded at 10 GiB when the points start; the work's first batch adds 3 GiB, then one
        // step of 3 GiB (a checkpoint's copy) at 40 s.
        let demand = |first: f64| {
            move |t: f64| {
                GIB * (10.0
                    + if t >= first { 3.0 } else { 0.0 }
                    + if t >= 40.0 { 3.0 } else { 0.0 })
            }
        };
        // The job as it ran, and twice as slow: every time doubled.
        for slower in [1.0, 2.0] {
            let pts = |f: &dyn Fn(f64) -> f64| -> Vec<(f64, f64)> {
                (0..=60).map(|i| (slower * i as f64, f(i as f64))).collect()
            };
            let batch_at_once = segments_fit(&pts(&demand(6.0)), Some(0.0));
            assert!(
                batch_at_once.is_none_or(|t| t.stairs.is_none()),
                "×{slower}: {batch_at_once:?}"
            );
            // The same first step after a level held 20 s: two steps of a staircase.
            let after_a_tread = segments_fit(&pts(&demand(20.0)), Some(0.0)).unwrap();
            assert_eq!(after_a_tread.stairs.map(|s| s.count), Some(2), "×{slower}");
            // Where a window cut the history, the level before its first step held for who
            // knows how long: both steps count.
            let cut = segments_fit(&pts(&demand(6.0)), None).unwrap();
            assert_eq!(cut.stairs.map(|s| s.count), Some(2), "×{slower}");
            // A window that cut the level the work began at, 3 s after it began: its first
            // step is still 6 s from the start, the start-up's.
            let slid = &pts(&demand(6.0))[3..];
            let held = segments_fit(slid, Some(0.0));
            assert!(
                held.is_none_or(|t| t.stairs.is_none()),
                "×{slower}: {held:?}"
            );
        }
    }

    #[test]
    fn a_staircase_is_growth_while_it_goes_on() {
        // +800 MiB every 20 s.
        let stair = |t: f64| 10.0 * GIB + (t / 20.0).floor() * 800.0 * 1048576.0;
        let tr = segments_fit(&series(stair, 120), Some(0.0)).unwrap();
        let rate = 800.0 * 1048576.0 / 20.0;
        assert!(
            (tr.slope - rate).abs() / rate < 0.2,
            "{} vs {rate}",
            tr.slope
        );
        assert!(tr.recent_slope > 0.0);
        // The same staircase that stopped 60 s ago is not rising now.
        let stopped = |t: f64| stair(t.min(60.0));
        let tr = segments_fit(&series(stopped, 120), Some(0.0)).unwrap();
        assert_eq!(tr.recent_slope, 0.0);
    }

    #[test]
    fn the_latest_steps_that_each_grow_are_a_request_that_grows() {
        // From 10 GiB: a load's 20 GiB, then steps every 30 s.
        let growing = |sizes: &[f64]| {
            let level = |t: f64| {
                let up: f64 = sizes
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| t >= 30.0 * (*k + 1) as f64)
                    .map(|(_, s)| s)
                    .sum();
                GIB * (10.0 + if t >= 5.0 { 20.0 } else { 0.0 } + up)
            };
            let pts = series(level, 30 * (sizes.len() + 1));
            steps(&pts, 64.0 * 1048576.0, false).growing
        };
        // The load's step is larger than the first after it: only the latest run counts.
        let g = growing(&[11.0, 12.0, 12.5]).unwrap();
        assert!((g.earlier - 23.0 * GIB).abs() < 1e6, "{}", g.earlier / GIB);
        assert!((g.next - 13.0 * GIB).abs() < 1e6, "{}", g.next / GIB);
        assert_eq!(growing(&[11.0, 12.0]), None, "two steps show no run");
        assert_eq!(
            growing(&[12.0, 12.0, 12.0]),
            None,
            "kept tensors of one size"
        );
        assert_eq!(growing(&[12.3, 13.0, 12.3]), None, "sizes that alternate");
        let after = growing(&[13.0, 12.0, 12.5, 13.0]).unwrap();
        assert!(
            (after.earlier - 24.5 * GIB).abs() < 1e6,
            "{}",
            after.earlier / GIB
        );
    }

    #[test]
    fn steps_that_shrink_have_the_rest_of_their_series_to_come() {
        // Steps at 20, 50 and 80 s from 40 GiB: 4, 2 and 1 GiB (each half the last), then
        // 4, 3.5 and 3 GiB (the slowest 7/8), then three of 2 GiB.
        let stairs = |sizes: [f64; 3]| {
            move |t: f64| {
                let up: f64 = [20.0, 50.0, 80.0]
                    .iter()
                    .zip(sizes)
                    .filter(|(at, _)| t >= **at)
                    .map(|(_, s)| s)
                    .sum();
                GIB * (40.0 + up)
            }
        };
        let rest = |sizes| {
            let tr = segments_fit(&series(stairs(sizes), 100), Some(0.0)).unwrap();
            assert_eq!(tr.stairs.map(|s| s.count), Some(3), "{sizes:?}");
            tr.saturation.map(|s| s.rest)
        };
        let halving = rest([4.0, 2.0, 1.0]).unwrap();
        assert!((halving - GIB).abs() < 1e6, "{}", halving / GIB);
        let slowly = rest([4.0, 3.5, 3.0]).unwrap();
        assert!((slowly - 21.0 * GIB).abs() < 1e6, "{}", slowly / GIB);
        assert_eq!(rest([2.0, 2.0, 2.0]), None, "steps that keep their size");
        // The last step seen at the last point only (half risen, perhaps): no bound yet.
        let pts = series(stairs([4.0, 2.0, 1.0]), 81);
        let tr = segments_fit(&pts, Some(0.0)).unwrap();
        assert_eq!(tr.stairs.map(|s| s.count), Some(3));
        assert_eq!(tr.saturation, None);
        assert_eq!(
            rest([1.0, 2.0, 1.5]),
            None,
            "one step larger than the one before"
        );
    }

    #[test]
    fn a_step_that_follows_a_rise_is_growth_not_a_change_of_level() {
        // 40 s of steady growth, then one large step: still one trend over all of it.
        let f = |t: f64| 10.0 * GIB + 0.02 * GIB * t + if t >= 40.0 { 3.0 * GIB } else { 0.0 };
        let tr = segments_fit(&series(f, 60), Some(0.0)).unwrap();
        assert_eq!(tr.points, 60, "the fit keeps the rise before the step");
        // The same step out of a flat level is a change of level.
        let g = |t: f64| 10.0 * GIB + if t >= 40.0 { 3.0 * GIB } else { 0.0 };
        let tr = segments_fit(&series(g, 60), Some(0.0)).unwrap();
        assert_eq!(tr.points, 20);
    }

    #[test]
    fn a_staircase_knows_its_steps_and_when_the_next_is_due() {
        // +800 MiB every 20 s, the last at t = 100.
        let stair = |t: f64| 10.0 * GIB + (t / 20.0).floor() * 800.0 * 1048576.0;
        let tr = segments_fit(&series(stair, 110), Some(0.0)).unwrap();
        let s = tr.stairs.expect("a staircase");
        assert!((s.step - 800.0 * 1048576.0).abs() < 1.0, "{}", s.step);
        assert_eq!(s.gap, 20.0);
        assert_eq!(s.last, 100.0);
        assert_eq!(s.next_in, 11.0, "due at 120, the last point at 109");
        assert_eq!(s.below, 10.0 * GIB + 4.0 * 800.0 * 1048576.0);
        // A smooth ramp has none.
        let tr = segments_fit(&series(|t| GIB + 1e7 * t, 100), Some(0.0)).unwrap();
        assert!(tr.stairs.is_none());
    }

    #[test]
    fn jumps_a_high_water_mark_gave_back_are_no_steps() {
        // A high-water mark of a training job at 90 GiB: its first batches take it to 95 GiB,
        // then its activations peak 2 GiB higher now and then and fall back, and a checkpoint
        // gathers 15 GiB at 60 s for 10 s. Only the step it kept is one.
        let swings = |t: f64| {
            GIB * (90.0
                + if t >= 10.0 { 5.0 } else { 0.0 }
                + if (30.0..40.0).contains(&t) || (80.0..90.0).contains(&t) {
                    2.0
                } else {
                    0.0
                }
                + if (60.0..70.0).contains(&t) { 15.0 } else { 0.0 })
        };
        let st = steps(&series(swings, 100), 64.0 * 1048576.0, true);
        assert_eq!((st.count, st.first_t, st.last_t), (1, 10.0, 10.0), "{st:?}");
        let tr = segments_fit(&series(swings, 100), Some(0.0));
        assert!(tr.is_none_or(|t| t.stairs.is_none()), "{tr:?}");
        // A jump is judged on what came after it: the latest, not yet given back, is a step.
        let st = steps(&series(swings, 85), 64.0 * 1048576.0, true);
        assert_eq!((st.count, st.last_t), (2, 80.0), "{st:?}");
        // Steps that hold are a staircase, though the level dips under each (by less than
        // half a step) before the next.
        let stair = |t: f64| {
            let dip = if t % 30.0 >= 25.0 { 0.8 } else { 0.0 };
            GIB * (90.0 + 2.0 * (t / 30.0).floor() - dip)
        };
        let st = steps(&series(stair, 100), 64.0 * 1048576.0, true);
        assert_eq!((st.count, st.last_t), (3, 90.0), "{st:?}");
    }

    #[test]
    fn a_rise_that_slows_is_current_at_its_pace_now_and_not_after_it_stops() {
        // A cache filling along 10 + 40 (1 - e^(-t/50)) GiB, sessions coming and going about
        // it (a swing of up to half a GiB). From 100 s to 170 s its pace falls from 0.11 to
        // 0.03 GiB/s, ever further under the line through its window: in 15 s it no longer
        // rises by five seconds of the line's pace, but it does by five of its own.
        let level = |t: f64| 10.0 * GIB + 40.0 * GIB * (1.0 - (-t / 50.0).exp());
        let swing = |t: f64| ((t as u64).wrapping_mul(2654435761) % 1000) as f64 / 2000.0 * GIB;
        let trend_at = |f: &dyn Fn(f64) -> f64, now: usize| {
            segments_fit(&series(f, now + 1), Some(0.0)).expect("a rise")
        };
        let rising = |t: f64| level(t) + swing(t);
        for now in 100..=170 {
            let t = trend_at(&rising, now);
            assert!(t.stairs.is_none(), "at {now}: {t:?}");
            assert!(
                t.quiet <= crate::analysis::evidence::RISE_WAIT,
                "at {now}: {t:?}"
            );
        }
        // The same cache held at its level, the sessions' swing going on: its new highs of
        // the swing are no rise at the pace it had, and 20 s on it is no longer current.
        for stop in [110, 130, 150] {
            let held = |t: f64| level(t.min(stop as f64)) + swing(t);
            for after in 20..=40 {
                let t = trend_at(&held, stop + after);
                assert!(
                    t.quiet > crate::analysis::evidence::RISE_WAIT,
                    "held from {stop} s, {after} s on: {t:?}"
                );
            }
        }
    }

    #[test]
    fn a_smooth_ramp_keeps_its_slope() {
        let tr = segments_fit(&series(|t| GIB + 1e7 * t, 100), Some(0.0)).unwrap();
        assert!((tr.slope - 1e7).abs() < 1e3);
        assert!(tr.slope_lower <= tr.slope && tr.slope <= tr.slope_upper);
        assert!(tr.p_value < 1e-6);
    }
}
