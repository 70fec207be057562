//! Bounded history of every GPU and process.
//!
//! A series keeps one bucket per `resolution` (min, max and last of the samples inside it) for
//! `window`. Memory is bounded by `window / resolution` per series whatever the sample rate, and
//! the bucket minima are exactly what the floor analysis needs: a training step's sawtooth is
//! shorter than a bucket, so a bucket's minimum sits on the floor.

use std::collections::VecDeque;

use crate::model::Time;

/// One bucket as the analysis reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Start of the bucket (a multiple of the resolution).
    pub t: Time,
    min: f32,
    max: f32,
    last: f32,
}

impl Bucket {
    pub fn min(&self) -> f64 {
        self.min as f64
    }
    pub fn max(&self) -> f64 {
        self.max as f64
    }
    pub fn last(&self) -> f64 {
        self.last as f64
    }
}

/// One bucket as stored: 16 bytes. Its start is a bucket number counted from the tier's first
/// bucket, and values are `f32`: byte counts up to 2^47 (128 TiB) keep a precision of 16 KiB,
/// far below anything the analysis looks at (bench/RESULTS.md has what a process costs).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stored {
    /// Bucket number after `Tier::base`.
    offset: u32,
    min: f32,
    max: f32,
    last: f32,
}

/// Buckets of one width over one window.
#[derive(Debug, Clone)]
pub struct Tier {
    buckets: VecDeque<Stored>,
    /// Bucket number (start / resolution) that offsets count from.
    base: i64,
    /// Time of the newest sample folded in.
    last_t: Time,
    resolution: f64,
    capacity: usize,
}

/// A series: fine buckets for the recent past and, optionally, coarse buckets for the long
/// window. The OOM forecast fits 1-second floors over two minutes; the leak test fits 5-second
/// floors over ten; a coarse bucket *is* such a floor window, so nothing is lost by not keeping
/// ten minutes of 1-second buckets (a fifth of the memory).
#[derive(Debug, Clone)]
pub struct Series {
    fine: Tier,
    coarse: Option<Tier>,
}

impl Series {
    pub fn new(resolution: f64, window: f64) -> Self {
        Series {
            fine: Tier::new(resolution, window),
            coarse: None,
        }
    }

    /// `resolution` buckets over `fine_window`, and `coarse_resolution` buckets over `window`.
    pub fn tiered(resolution: f64, fine_window: f64, coarse_resolution: f64, window: f64) -> Self {
        if coarse_resolution <= resolution || fine_window >= window {
            return Series::new(resolution, window);
        }
        Series {
            fine: Tier::new(resolution, fine_window),
            coarse: Some(Tier::new(coarse_resolution, window)),
        }
    }

    pub fn push(&mut self, t: Time, v: f64) {
        self.fine.push(t, v);
        if let Some(c) = &mut self.coarse {
            c.push(t, v);
        }
    }

    /// The tier to read windows of `width` seconds from, starting at `from`: the coarse one
    /// when its buckets are no wider than the window and the fine one does not reach back.
    pub fn tier_for(&self, width: f64, from: Time) -> &Tier {
        match &self.coarse {
            Some(c)
                if c.resolution <= width + 1e-9
                    && self.fine.first_time().is_none_or(|f| f > from) =>
            {
                c
            }
            _ => &self.fine,
        }
    }

    pub fn resolution(&self) -> f64 {
        self.fine.resolution
    }
    pub fn newest(&self) -> Option<Bucket> {
        self.fine.newest()
    }
    pub fn is_empty(&self) -> bool {
        self.fine.is_empty()
    }
    #[cfg(test)]
    fn len(&self) -> usize {
        self.fine.buckets.len()
    }
    #[cfg(test)]
    fn last(&self) -> Option<(Time, f64)> {
        self.fine
            .buckets
            .back()
            .map(|b| (self.fine.last_t, b.last as f64))
    }
    #[cfg(test)]
    fn first_time(&self) -> Option<Time> {
        self.coarse
            .as_ref()
            .and_then(|c| c.first_time())
            .or(self.fine.first_time())
    }
    pub fn since(&self, t0: Time) -> impl Iterator<Item = Bucket> + '_ {
        self.fine.since(t0)
    }
    pub fn max_since(&self, t0: Time) -> Option<f64> {
        self.tier_for(f64::INFINITY, t0).max_since(t0)
    }
    /// The highest value of the buckets that end by `t`, over the whole window (the coarse
    /// tier where there is one).
    pub fn max_before(&self, t: Time) -> Option<f64> {
        let tier = self.coarse.as_ref().unwrap_or(&self.fine);
        tier.since(f64::NEG_INFINITY)
            .take_while(|b| b.t + tier.resolution <= t)
            .map(|b| b.max())
            .reduce(f64::max)
    }
    pub fn clear(&mut self) {
        self.fine.clear();
        if let Some(c) = &mut self.coarse {
            c.clear();
        }
    }
    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        self.fine.heap_bytes() + self.coarse.as_ref().map_or(0, Tier::heap_bytes)
    }
}

impl Tier {
    pub fn new(resolution: f64, window: f64) -> Self {
        let capacity = ((window / resolution).ceil() as usize).max(2);
        Tier {
            buckets: VecDeque::new(),
            base: 0,
            last_t: f64::NEG_INFINITY,
            resolution,
            capacity,
        }
    }

    pub fn resolution(&self) -> f64 {
        self.resolution
    }

    fn number(&self, s: &Stored) -> i64 {
        self.base + i64::from(s.offset)
    }

    fn view(&self, s: &Stored) -> Bucket {
        Bucket {
            // As `push` computes a start, so that equal starts compare equal.
            t: self.number(s) as f64 * self.resolution,
            min: s.min,
            max: s.max,
            last: s.last,
        }
    }

    pub fn push(&mut self, t: Time, v: f64) {
        if !v.is_finite() || !t.is_finite() {
            return;
        }
        let number = (t / self.resolution).floor() as i64;
        let v32 = v as f32;
        let newest = self.buckets.back().map(|b| self.number(b));
        match (newest, self.buckets.back_mut()) {
            // Samples that arrive late (clock steps, merged traces) fold into the newest bucket
            // rather than rewriting the past.
            (Some(n), Some(b)) if number <= n => {
                b.min = b.min.min(v32);
                b.max = b.max.max(v32);
                if t >= self.last_t {
                    b.last = v32;
                    self.last_t = t;
                }
            }
            _ => {
                if self.buckets.len() == self.capacity {
                    self.buckets.pop_front();
                } else if self.buckets.len() == self.buckets.capacity() {
                    // Grow geometrically, but never past the window: a full series holds
                    // exactly `capacity` buckets.
                    let more = self
                        .buckets
                        .len()
                        .max(16)
                        .min(self.capacity - self.buckets.len());
                    self.buckets.reserve_exact(more);
                }
                let offset = match self.buckets.front() {
                    Some(_) if number - self.base < i64::from(u32::MAX) => number - self.base,
                    // First bucket, or offsets about to overflow (136 years of 1 s buckets):
                    // count from the oldest bucket kept.
                    front => {
                        let new_base = front.map_or(number, |f| self.number(f));
                        for b in self.buckets.iter_mut() {
                            b.offset = (self.base + i64::from(b.offset) - new_base) as u32;
                        }
                        self.base = new_base;
                        number - new_base
                    }
                };
                self.buckets.push_back(Stored {
                    offset: offset as u32,
                    min: v32,
                    max: v32,
                    last: v32,
                });
                self.last_t = t;
            }
        }
    }

    /// The newest bucket.
    pub fn newest(&self) -> Option<Bucket> {
        self.buckets.back().map(|b| self.view(b))
    }

    /// Seconds of the newest bucket that samples have covered (its start to the last sample).
    pub fn newest_seen(&self) -> Option<f64> {
        self.newest()
            .map(|b| (self.last_t - b.t).clamp(0.0, self.resolution))
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    pub fn first_time(&self) -> Option<Time> {
        self.buckets.front().map(|b| self.view(b).t)
    }

    /// Buckets whose start is at or after `t0`.
    pub fn since(&self, t0: Time) -> impl Iterator<Item = Bucket> + '_ {
        let first = self
            .buckets
            .partition_point(|b| self.view(b).t + self.resolution <= t0);
        self.buckets.range(first..).map(|b| self.view(b))
    }

    pub fn max_since(&self, t0: Time) -> Option<f64> {
        self.since(t0).map(|b| b.max()).reduce(f64::max)
    }

    /// Forget everything and give the memory back.
    pub fn clear(&mut self) {
        self.buckets = VecDeque::new();
        self.last_t = f64::NEG_INFINITY;
    }

    /// Bytes held by the buckets.
    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Stored>()
    }
}

/// A cumulative counter kept only where it changed. "How much did it grow in the last
/// minute" needs nothing else, and most counters (allocator retries) never change: one entry,
/// where a series of 1 s buckets would hold a minute of identical values.
#[derive(Debug, Clone)]
pub struct Changes {
    /// (time, value) at the first observation and at every change, oldest first: every entry
    /// of the last `keep` seconds and the one before them.
    entries: VecDeque<(Time, u64)>,
    keep: f64,
}

impl Changes {
    /// Answers growth questions over windows up to `keep` seconds.
    pub fn new(keep: f64) -> Self {
        Changes {
            entries: VecDeque::new(),
            keep,
        }
    }

    pub fn push(&mut self, t: Time, v: u64) {
        if self.entries.back().is_none_or(|&(_, last)| last != v) {
            self.entries.push_back((t, v));
        }
        while self.entries.len() >= 2 && self.entries[1].0 <= t - self.keep {
            self.entries.pop_front();
        }
    }

    /// Growth over the `window` seconds before `now`, from the value then (or the first one
    /// seen); 0 if the counter went down (a restart).
    pub fn growth(&self, now: Time, window: f64) -> u64 {
        let since = now - window;
        let before = self
            .entries
            .iter()
            .take_while(|(t, _)| *t <= since)
            .last()
            .or(self.entries.front());
        match (before, self.entries.back()) {
            (Some(&(_, before)), Some(&(_, last))) => last.saturating_sub(before),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_fold_samples_and_stay_bounded() {
        let mut s = Series::new(1.0, 10.0);
        for i in 0..1000 {
            let t = i as f64 * 0.1;
            s.push(t, (i % 10) as f64);
        }
        assert_eq!(s.len(), 10, "capacity is window / resolution");
        let b = s.newest().unwrap();
        assert_eq!((b.min(), b.max(), b.last()), (0.0, 9.0, 9.0));
        assert_eq!(b.t, 99.0);
        assert_eq!(s.first_time(), Some(90.0));
    }

    #[test]
    fn late_samples_do_not_rewrite_the_past() {
        let mut s = Series::new(1.0, 100.0);
        s.push(5.5, 1.0);
        s.push(3.2, 7.0);
        assert_eq!(s.len(), 1);
        assert_eq!(s.last(), Some((5.5, 1.0)));
        assert_eq!(s.newest().unwrap().max(), 7.0);
    }

    #[test]
    fn since_and_max() {
        let mut s = Series::new(1.0, 100.0);
        for i in 0..20 {
            s.push(i as f64, i as f64);
        }
        assert_eq!(s.since(15.0).count(), 5);
        assert_eq!(s.max_since(10.0), Some(19.0));
    }

    #[test]
    fn a_full_series_holds_exactly_its_window() {
        let mut s = Series::new(1.0, 600.0);
        for i in 0..5000 {
            s.push(i as f64, 1e9);
        }
        assert_eq!(s.len(), 600);
        assert!(s.heap_bytes() <= 600 * std::mem::size_of::<Stored>() + 64);
        assert_eq!(std::mem::size_of::<Stored>(), 16);
    }

    #[test]
    fn tiers_keep_the_recent_past_fine_and_the_window_coarse() {
        let mut s = Series::tiered(1.0, 120.0, 5.0, 600.0);
        for i in 0..6000 {
            let t = i as f64 * 0.1;
            s.push(t, 1e9 + (i % 7) as f64 * 1e6 + t);
        }
        // Recent windows of 1 s come from the fine tier, long ones from the coarse tier.
        assert_eq!(s.tier_for(1.0, 590.0).resolution(), 1.0);
        assert_eq!(s.tier_for(5.0, 100.0).resolution(), 5.0);
        assert_eq!(
            s.tier_for(1.0, 100.0).resolution(),
            1.0,
            "no coarse tier finer than asked"
        );
        assert!(s.heap_bytes() <= (120 + 120) * std::mem::size_of::<Stored>() + 64 * 16);
        // A coarse bucket's minimum is the minimum of the fine buckets it spans.
        let coarse = s.tier_for(5.0, 500.0);
        let b = coarse.since(580.0).next().unwrap();
        let fine_min = s
            .since(580.0)
            .take(5)
            .map(|b| b.min())
            .fold(f64::MAX, f64::min);
        assert!((b.min() - fine_min).abs() < 1e3);
        assert_eq!(s.max_since(0.0), s.tier_for(5.0, 0.0).max_since(0.0));
    }

    #[test]
    fn non_finite_values_are_ignored() {
        let mut s = Series::new(1.0, 100.0);
        s.push(1.0, f64::NAN);
        s.push(f64::INFINITY, 1.0);
        assert!(s.is_empty());
    }

    #[test]
    fn changes_count_growth_within_the_window_only() {
        let mut c = Changes::new(60.0);
        for t in 0..200 {
            // 5 at start, +3 at t = 100, +4 at t = 150.
            let v = 5 + if t >= 100 { 3 } else { 0 } + if t >= 150 { 4 } else { 0 };
            c.push(t as f64, v);
        }
        assert_eq!(
            c.growth(199.0, 60.0),
            4,
            "the +3 at 100 is older than a minute"
        );
        assert_eq!(c.growth(199.0, 10.0), 0);
        assert_eq!(c.entries.len(), 2, "only changes within reach are kept");
        let mut c = Changes::new(60.0);
        c.push(0.0, 7);
        c.push(10.0, 9);
        assert_eq!(
            c.growth(20.0, 60.0),
            2,
            "growth since the first observation"
        );
        c.push(30.0, 1);
        assert_eq!(c.growth(31.0, 60.0), 0, "a reset is not negative growth");
    }

    #[test]
    fn bucket_starts_are_exact_at_unix_times_and_fine_resolutions() {
        let mut s = Series::new(0.1, 60.0);
        let t0 = 1_763_700_000.05;
        for i in 0..1000 {
            s.push(t0 + i as f64 * 0.1, i as f64);
        }
        assert_eq!(s.len(), 600);
        for b in s.since(0.0) {
            assert_eq!(b.t, (b.t / 0.1).floor() * 0.1, "a start on the grid");
        }
        let newest = s.newest().unwrap();
        assert_eq!(newest.t, ((t0 + 99.9) / 0.1).floor() * 0.1);
        assert_eq!(s.last(), Some((t0 + 999.0 * 0.1, 999.0)));
    }
}
