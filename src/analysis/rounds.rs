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
/// The last rounds' gaps are within this factor of their median.
const REGULARITY: f64 = 3.0;
/// The peaks must rise with Mann–Kendall p under this.
const SIGNIFICANCE: f64 = 0.05;

#[derive(Debug, Clone, Default)]
pub struct Rounds {
    /// The peaks of the rounds that ended (time of the peak, bytes), oldest first.
    peaks: VecDeque<(Time, f64)>,
    /// The round under way: its lowest point before it rose, and its highest since.
    trough: f64,
    high: Option<(Time, f64)>,
    /// What the last round that ended took, from its trough to its peak.
    last_took: f64,
    /// The start-up load has been set aside (`loaded`).
    started: bool,
    /// The oldest peak is what the load gave back before it was known to have ended
    /// (`loaded`), while it is in view.
    load_peak: bool,
}

impl Rounds {
    pub fn new() -> Self {
        Self::default()
    }

    /// The footprint is `bytes` at `t` (one point per analysis). A round ends when the
    /// process gives back at least half of what it took in it (and a segment at least). A
    /// round is a cycle at the job's own scale: a rise and fall of less than half of what the
    /// last round took (the cache taken back in part after a round, a small batch between
    /// rollouts) is a ripple within the next round, not a round of its own.
    pub fn push(&mut self, t: Time, bytes: f64, window: f64) {
        match self.high {
            None => {
                self.trough = bytes;
                self.high = Some((t, bytes));
            }
            Some((_, high)) => {
                let took = high - self.trough;
                let least = MIN_STEP_BYTES.max(0.5 * self.last_took);
                if took >= least && bytes <= high - 0.5 * took {
                    self.last_took = took;
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
            self.load_peak = false;
        }
    }

    /// The process's start-up load ended at `t` with the footprint at `bytes`: its rise is no
    /// round's, so the round under way starts here. A job that loads most of what it holds
    /// and then repeats a phase never gives half of the load back; its rounds are measured
    /// from what it holds once loaded. Only the first load counts: a later "load" that ends
    /// (a rollout's rise read as loading again) is the rise of a round.
    ///
    /// A load is what stays: where the footprint had already given back a segment or more of
    /// its rise when the loading is known to have ended (a first rollout that began as the
    /// weights were in), what it gave back was a round's, and its highest point the first
    /// round's peak, once the rounds after it reach it: one they stay below was the load's own
    /// (a copy of the weights freed at its end), and no round (`counted`).
    pub fn loaded(&mut self, t: Time, bytes: f64) {
        if !self.started {
            self.started = true;
            // What the round took is not set from it: were it the load's own, rounds of less
            // than half of it would read as ripples.
            if let Some(high) = self.high.filter(|h| h.1 - bytes >= MIN_STEP_BYTES) {
                self.peaks.push_back(high);
                self.load_peak = true;
            }
            self.trough = bytes;
            self.high = Some((t, bytes));
        }
    }

    /// The highest peak of the rounds in view, and the round under way's, if higher: what the
    /// next round must fit at least.
    pub fn peak(&self) -> Option<f64> {
        self.counted()
            .map(|p| p.1)
            .chain(self.high.map(|h| h.1))
            .reduce(f64::max)
    }

    /// The peaks that count as rounds': the load's give-back only once the latest round
    /// reaches it.
    fn counted(&self) -> impl Iterator<Item = &(Time, f64)> {
        let latest = self.peaks.back().map_or(f64::INFINITY, |p| p.1);
        let transient = self.load_peak && self.peaks.front().is_some_and(|p| p.1 > latest);
        self.peaks.iter().skip(transient as usize)
    }

    /// Peaks that rise round after round as a staircase: a step of the median rise every
    /// median period, the next due a period after the last peak. `None` unless at least
    /// `MIN_ROUNDS` peaks rise significantly, the latest is the highest, and the next round is
    /// not overdue (`evidence::current`).
    pub fn trend(&self, now: Time) -> Option<Trend> {
        let pts: Vec<(f64, f64)> = self.counted().copied().collect();
        if pts.len() < MIN_ROUNDS {
            return None;
        }
        let values: Vec<f64> = pts.iter().map(|p| p.1).collect();
        let (_, p_value) = mann_kendall_increasing(&values)?;
        let (last_t, last) = pts[pts.len() - 1];
        let first = pts[0];
        if p_value >= SIGNIFICANCE || values.iter().any(|v| *v > last) {
            return None;
        }
        // Each of the last rounds higher than the one before: peaks that scatter (a bursty
        // job's batches of random size) have a highest yet now and then, and a rising tendency
        // over a few rounds by chance; a schedule that rises does not fall back on the way.
        if values[values.len() - MIN_ROUNDS..]
            .windows(2)
            .any(|w| w[1] <= w[0])
        {
            return None;
        }
        if last - first.1 < MIN_STEP_BYTES {
            return None;
        }
        let mut rises: Vec<f64> = pts.windows(2).map(|w| w[1].1 - w[0].1).collect();
        let mut periods: Vec<f64> = pts.windows(2).map(|w| w[1].0 - w[0].0).collect();
        let shortest = periods[periods.len() + 1 - MIN_ROUNDS..]
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let step = median(&mut rises)?;
        let gap = median(&mut periods)?;
        if step <= 0.0 || gap <= 0.0 {
            return None;
        }
        // A round is a phase the job repeats, so its rounds take comparable times: two bursts
        // seconds apart after rounds of minutes are one phase's, and no schedule to extrapolate.
        if shortest * REGULARITY < gap {
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
                reached: last_t,
                count: pts.len() - 1,
            }),
            quiet: now - last_t,
            saturation: None,
        };
        super::evidence::current(&trend).then_some(trend)
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
        // Peaks that scatter upwards, one falling back among the last four: no schedule.
        let r = run(
            |k| [18.0, 19.0, 21.0, 20.0, 22.0][k.min(4)] * GIB,
            40.0,
            200.0,
        );
        assert!(r.trend(200.0).is_none());
    }

    #[test]
    fn a_ripple_after_a_round_is_no_round() {
        // Five rounds of rising peaks; after each, the cache is taken back in part (2 GiB)
        // and given back again before the next rollout.
        let mut r = Rounds::new();
        for k in 0..5 {
            let t0 = k as f64 * 40.0;
            let peak = 20.0 * GIB + k as f64 * 2.0 * GIB;
            for i in 0..40 {
                let t = t0 + i as f64;
                let v = match i {
                    0..=19 => 10.0 * GIB + (peak - 10.0 * GIB) * i as f64 / 19.0,
                    20..=24 => 10.0 * GIB,
                    25..=29 => 12.0 * GIB,
                    _ => 9.5 * GIB,
                };
                r.push(t, v, 300.0);
            }
        }
        let t = r
            .trend(200.0)
            .expect("five rounds, each higher, ripples between them");
        assert!((t.stairs.unwrap().step - 2.0 * GIB).abs() < 0.15 * GIB);
    }

    #[test]
    fn a_load_is_no_round() {
        // 40 GiB loaded over 20 s and kept; then rollouts of 10 to 18 GiB that are given back:
        // never half of the load, but each a round.
        let rounds = |set_aside: bool| {
            let mut r = Rounds::new();
            for i in 0..=20 {
                r.push(i as f64, 2.0 * GIB * i as f64, 300.0);
            }
            if set_aside {
                r.loaded(20.0, 40.0 * GIB);
            }
            for k in 0..5 {
                let peak = 50.0 * GIB + k as f64 * 2.0 * GIB;
                for i in 0..40 {
                    let t = 21.0 + k as f64 * 40.0 + i as f64;
                    let v = if i < 20 {
                        40.0 * GIB + (peak - 40.0 * GIB) * i as f64 / 19.0
                    } else {
                        40.0 * GIB
                    };
                    r.push(t, v, 300.0);
                }
            }
            r
        };
        let r = rounds(true);
        assert!(r.trend(221.0).is_some(), "{r:?}");
        // Without the load set aside, the first round never ends.
        assert!(rounds(false).trend(221.0).is_none());
    }

    /// A load at 4 GiB/s to `top` GiB, then `hold` s at `level` GiB (what the load keeps), the
    /// loading known to have ended there; then one rollout to each of `peaks` (GiB) over 20 s,
    /// each followed by 10 s back at `level`. One point a second.
    fn load_then_rounds(top: f64, level: f64, hold: usize, peaks: &[f64]) -> Rounds {
        let mut load: Vec<f64> = (0..)
            .map(|i| 4.0 * i as f64)
            .take_while(|v| *v < top)
            .collect();
        load.push(top);
        load.extend(std::iter::repeat_n(level, hold));
        let mut rounds = vec![];
        for peak in peaks {
            rounds.extend((0..20).map(|i| level + (peak - level) * i as f64 / 19.0));
            rounds.extend(std::iter::repeat_n(level, 10));
        }
        let mut r = Rounds::new();
        for (t, v) in load.iter().enumerate() {
            r.push(t as f64, v * GIB, 600.0);
        }
        r.loaded(load.len() as f64, level * GIB);
        for (t, v) in rounds.iter().enumerate() {
            r.push((load.len() + t) as f64, v * GIB, 600.0);
        }
        r
    }

    #[test]
    fn a_first_round_that_began_as_the_load_ended_is_a_round() {
        // 60 GiB of weights and, at once, the first rollout to 80 GiB, given back before the
        // loading is known to have ended; then three rollouts, each 10 GiB higher. Four
        // rounds, four peaks: the fifth is due.
        let r = load_then_rounds(80.0, 60.0, 15, &[90.0, 100.0, 110.0]);
        let t = r.trend(136.0).expect("four rounds, each higher");
        assert!(
            (t.stairs.unwrap().step - 10.0 * GIB).abs() < 1.0 * GIB,
            "{t:?}"
        );
        // A load that stays is no round: the same rise kept has no peak to count.
        let mut kept = Rounds::new();
        for i in 0..40 {
            kept.push(i as f64, 60.0 * GIB + (i.min(25) as f64) * GIB, 600.0);
        }
        kept.loaded(40.0, 85.0 * GIB);
        assert_eq!(kept.peaks.len(), 0, "{kept:?}");
    }

    #[test]
    fn a_copy_the_load_freed_is_no_round() {
        // 60 GiB of weights read through a 20 GiB staging copy (80 GiB), the copy freed before
        // the loading is known to have ended; then rollouts of 10 to 16 GiB whose peaks rise
        // (70-76 GiB), below the copy: four rounds, a trend, and the copy no peak of theirs.
        let r = load_then_rounds(80.0, 60.0, 10, &[70.0, 72.0, 74.0, 76.0]);
        let t = r.trend(152.0).expect("four rounds, each higher");
        assert!(
            (t.stairs.unwrap().step - 2.0 * GIB).abs() < 0.2 * GIB,
            "{t:?}"
        );
        assert!(r.peak().unwrap() < 77.0 * GIB, "{r:?}");
    }

    #[test]
    fn rounds_far_shorter_than_the_others_are_no_schedule() {
        // Three rounds 100 s apart, then two bursts 8 s apart, each higher: no schedule.
        let mut r = Rounds::new();
        let mut t = 0.0;
        for (k, len) in [100.0, 100.0, 100.0, 8.0, 8.0].iter().enumerate() {
            let peak = (20.0 + 2.0 * k as f64) * GIB;
            let end = t + len;
            while t < end {
                let v = if end - t <= len / 2.0 {
                    peak
                } else {
                    10.0 * GIB
                };
                r.push(t, v, 600.0);
                t += 1.0;
            }
        }
        r.push(t, 10.0 * GIB, 600.0);
        assert!(r.trend(t).is_none(), "{r:?}");
    }

    #[test]
    fn a_round_that_does_not_come_takes_the_trend_back() {
        let r = run(|k| 20.0 * GIB + k as f64 * 2.0 * GIB, 40.0, 200.0);
        assert!(r.trend(200.0).is_some());
        // No round since: 1.5 periods after the last peak the trend is gone.
        assert!(r.trend(200.0 + 70.0).is_none());
    }
}
