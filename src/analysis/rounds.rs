//! Rounds: a process that repeats a phase (rollouts that fill a KV cache and free it, an
//! evaluation, a notebook's loads) takes a large part of itself and gives it back, round after
//! round. Each round on its own looks like a load that ended; what must fit is the next
//! round's peak, and peaks that rise round after round are growth towards the card's limit
//! however much each round gives back.
//!
//! Read from the process's footprint (the bytes it holds from the driver), so the same rule
//! holds with or without allocator reports. Pure: time is the samples' time.

use std::collections::VecDeque;

use super::oom::MIN_STEP_BYTES;
use super::stats::{mann_kendall_increasing, median, theil_sen_interval};
use super::trend::{Stairs, Trend};
use crate::model::Time;

/// Rounds whose peaks are read for a trend, at most: older ones say little of the next.
const KEEP: usize = 12;
/// Peaks it takes for a trend: three rises in a row.
const MIN_ROUNDS: usize = 4;
/// The peaks must rise with Mann–Kendall p under this.
const SIGNIFICANCE: f64 = 0.05;

#[derive(Debug, Clone, Default)]
pub struct Rounds {
    /// The peaks of the rounds that ended (time of the peak, bytes), oldest first.
    peaks: VecDeque<(Time, f64)>,
    /// The round under way: its lowest point before it rose, and its highest since.
    trough: f64,
    high: Option<(Time, f64)>,
}

impl Rounds {
    pub fn new() -> Self {
        Self::default()
    }

    /// The footprint is `bytes` at `t` (one point per analysis). A round ends when the
    /// process gives back at least half of what it took in it (and a segment at least).
    pub fn push(&mut self, t: Time, bytes: f64, window: f64) {
        match self.high {
            None => {
                self.trough = bytes;
                self.high = Some((t, bytes));
            }
            Some((_, high)) => {
                let took = high - self.trough;
                if took >= MIN_STEP_BYTES && bytes <= high - 0.5 * took {
                    self.peaks.extend(self.high);
                    self.trough = bytes;
                    self.high = Some((t, bytes));
                } else if bytes > high {
                    self.high = Some((t, bytes));
                } else if bytes < self.trough {
                    // Still falling from the last round, or flat: a round starts from here.
                    self.trough = bytes;
                    self.high = Some((t, bytes));
                }
            }
        }
        while self.peaks.len() > KEEP || self.peaks.front().is_some_and(|p| p.0 < t - window) {
            self.peaks.pop_front();
        }
    }

    /// The highest peak of the rounds in view, and the round under way's, if higher: what the
    /// next round must fit at least.
    pub fn peak(&self) -> Option<f64> {
        self.peaks
            .iter()
            .map(|p| p.1)
            .chain(self.high.map(|h| h.1))
            .reduce(f64::max)
    }

    /// Peaks that rise round after round as a staircase: a step of the median rise every
    /// median period, the next due a period after the last peak. `None` unless at least
    /// `MIN_ROUNDS` peaks rise significantly, the latest is the highest, and the next round is
    /// not overdue (`oom::current`).
    pub fn trend(&self, now: Time) -> Option<Trend> {
        if self.peaks.len() < MIN_ROUNDS {
            return None;
        }
        let pts: Vec<(f64, f64)> = self.peaks.iter().copied().collect();
        let values: Vec<f64> = pts.iter().map(|p| p.1).collect();
        let (_, p_value) = mann_kendall_increasing(&values)?;
        let (last_t, last) = pts[pts.len() - 1];
        let first = pts[0];
        if p_value >= SIGNIFICANCE || values.iter().any(|v| *v > last) {
            return None;
        }
        if last - first.1 < MIN_STEP_BYTES {
            return None;
        }
        let mut rises: Vec<f64> = pts.windows(2).map(|w| w[1].1 - w[0].1).collect();
        let mut periods: Vec<f64> = pts.windows(2).map(|w| w[1].0 - w[0].0).collect();
        let step = median(&mut rises)?;
        let gap = median(&mut periods)?;
        if step <= 0.0 || gap <= 0.0 {
            return None;
        }
        let (line, slope_lower, slope_upper) = theil_sen_interval(&pts, Some(0.01))?;
        let trend = Trend {
            slope: step / gap,
            slope_lower,
            slope_upper,
            p_value,
            span: last_t - first.0,
            points: pts.len(),
            floor_now: line.at(last_t),
            recent_slope: step / gap,
            swing: 0.0,
            stairs: Some(Stairs {
                step,
                gap,
                next_in: (last_t + gap - now).max(0.0),
                last: last_t,
                below: pts[pts.len() - 2].1,
                count: pts.len() - 1,
            }),
            quiet: now - last_t,
            saturation: None,
        };
        super::oom::current(&trend).then_some(trend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = 1073741824.0;

    /// Rounds of `period` seconds: a rise to `peak(k)` for half of it, then back to 10 GiB.
    fn run(peak: impl Fn(usize) -> f64, period: f64, to: f64) -> Rounds {
        let mut r = Rounds::new();
        let mut t = 0.0;
        while t <= to {
            let k = (t / period) as usize;
            let phase = t % period / period;
            let v = if phase < 0.5 {
                10.0 * GIB + (peak(k) - 10.0 * GIB) * phase * 2.0
            } else {
                10.0 * GIB
            };
            r.push(t, v, 300.0);
            t += 1.0;
        }
        r
    }

    #[test]
    fn peaks_that_rise_round_after_round_are_a_staircase() {
        let r = run(|k| 20.0 * GIB + k as f64 * 2.0 * GIB, 40.0, 200.0);
        let t = r.trend(200.0).expect("five rounds, each higher");
        let s = t.stairs.unwrap();
        assert!((s.step - 2.0 * GIB).abs() < 0.15 * GIB, "{}", s.step);
        assert!((s.gap - 40.0).abs() < 1.5, "{}", s.gap);
        assert!(r.peak().unwrap() >= 27.0 * GIB);
    }

    #[test]
    fn rounds_that_come_back_to_the_same_peak_are_no_trend() {
        let r = run(|_| 20.0 * GIB, 40.0, 300.0);
        assert!(r.trend(300.0).is_none());
        // Peaks of varying height, no rise: the largest batch so far is no trend.
        let r = run(
            |k| [20.0, 23.0, 19.0, 22.0, 21.0, 20.5, 22.5][k % 7] * GIB,
            40.0,
            280.0,
        );
        assert!(r.trend(280.0).is_none());
    }

    #[test]
    fn a_round_that_does_not_come_takes_the_trend_back() {
        let r = run(|k| 20.0 * GIB + k as f64 * 2.0 * GIB, 40.0, 200.0);
        assert!(r.trend(200.0).is_some());
        // No round since: 1.5 periods after the last peak the trend is gone.
        assert!(r.trend(200.0 + 70.0).is_none());
    }
}
