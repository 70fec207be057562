//! Bounded history of every GPU and process.
//!
//! A series keeps one bucket per `resolution` (min and max of the samples inside it) for
//! `window`. Memory is bounded by `window / resolution` per series whatever the sample rate, and
//! the bucket minima are exactly what the floor analysis needs: a training step's sawtooth is
//! shorter than a bucket, so a bucket's minimum sits on the floor.
//!
//! Values are `f32`: byte counts up to 2^47 (128 TiB) keep a precision of 16 KiB, far below
//! anything the analysis looks at. A bucket is 8 bytes, or 4 in a series that gets one value a
//! bucket (`one_value_a_bucket`) or is read for its floors or its peaks alone (`floors_only`,
//! and past the fine window `floors_past`, `peaks_past`); bench/RESULTS.md has what a process
//! costs.

mod ring;

use std::collections::VecDeque;

use crate::model::Time;
use ring::{Floor, Payload, Ring, Span};

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
    fn of(number: i64, resolution: f64, s: Span, last: f32) -> Self {
        Bucket {
            // As `push` computes a start, so that equal starts compare equal.
            t: number as f64 * resolution,
            min: s.min,
            max: s.max,
            last,
        }
    }

    pub fn min(&self) -> f64 {
        self.min as f64
    }
    pub fn max(&self) -> f64 {
        self.max as f64
    }
    /// The newest sample's value in the newest bucket; a bucket before it keeps no last
    /// value and reads its maximum.
    pub fn last(&self) -> f64 {
        self.last as f64
    }
}

/// A ring of buckets of one of the three kinds (`ring::Payload`), read as spans.
#[derive(Debug, Clone)]
enum Buckets {
    /// One value, the highest: a view pushed once per bucket.
    One(Ring<f32>),
    Span(Ring<Span>),
    /// The least value only: the long past of a series read there for its floors.
    Floor(Ring<Floor>),
}

/// The buckets of a ring with their numbers, as spans.
#[derive(Debug, Clone)]
enum BucketsIter<'a> {
    One(ring::Iter<'a, f32>),
    Span(ring::Iter<'a, Span>),
    Floor(ring::Iter<'a, Floor>),
}

impl Iterator for BucketsIter<'_> {
    type Item = (i64, Span);
    fn next(&mut self) -> Option<(i64, Span)> {
        match self {
            BucketsIter::One(i) => i.next().map(|(n, v)| (n, v.span())),
            BucketsIter::Span(i) => i.next(),
            BucketsIter::Floor(i) => i.next().map(|(n, v)| (n, v.span())),
        }
    }
}

/// `$body` on the ring of any kind, bound to `$r`.
macro_rules! each {
    ($buckets:expr, $r:ident => $body:expr) => {
        match $buckets {
            Buckets::One($r) => $body,
            Buckets::Span($r) => $body,
            Buckets::Floor($r) => $body,
        }
    };
}

impl Buckets {
    fn capacity(&self) -> usize {
        each!(self, r => r.capacity())
    }
    fn len(&self) -> usize {
        each!(self, r => r.len())
    }
    fn first_number(&self) -> Option<i64> {
        each!(self, r => r.first_number())
    }
    fn newest(&self) -> Option<(i64, Span)> {
        each!(self, r => r.newest().map(|(n, v)| (n, v.span())))
    }
    /// Folds `v` into bucket `number`; the buckets that made room go to `evicted`.
    fn push(&mut self, number: i64, v: f32, mut evicted: impl FnMut(i64, Span)) {
        each!(self, r => r.push(number, v, |n, v| evicted(n, v.span())))
    }
    /// Folds `span` into bucket `number`, the newest or a newer one.
    fn absorb(&mut self, number: i64, span: Span) {
        each!(self, r => match r.newest() {
            Some((n, _)) if n == number => {
                if let Some(b) = r.newest_mut() {
                    b.merge(span);
                }
            }
            _ => r.push_new(number, Payload::of(span), |_, _| {}),
        })
    }
    fn pop_front(&mut self) {
        each!(self, r => {
            r.pop_front();
        })
    }
    fn iter_from(&self, from: i64) -> BucketsIter<'_> {
        match self {
            Buckets::One(r) => BucketsIter::One(r.iter_from(from)),
            Buckets::Span(r) => BucketsIter::Span(r.iter_from(from)),
            Buckets::Floor(r) => BucketsIter::Floor(r.iter_from(from)),
        }
    }
    fn clear(&mut self) {
        each!(self, r => r.clear())
    }
    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        each!(self, r => r.heap_bytes())
    }
}

/// Coarse buckets over the whole window. Where the fine buckets reach, a coarse bucket is
/// the span of the fine ones inside it and is not stored; only the buckets older than the
/// fine ones are (`past`), as the fine buckets leave. The series reads exactly as if it kept
/// both tiers in full: the coarse buckets numbered less than `capacity` before that of the
/// newest fine bucket.
#[derive(Debug, Clone)]
struct Coarse {
    resolution: f64,
    /// Coarse buckets of the whole window (what a full coarse tier would hold).
    capacity: usize,
    past: Buckets,
}

impl Coarse {
    /// The coarse bucket that fine bucket `n` falls in.
    fn group(&self, n: i64, fine_resolution: f64) -> i64 {
        (n as f64 * fine_resolution / self.resolution).floor() as i64
    }

    /// The oldest coarse bucket a full coarse tier keeps while its newest is `newest`.
    fn reach(&self, newest: i64) -> i64 {
        newest - self.capacity as i64 + 1
    }

    /// Stores fine bucket `n` as it leaves the fine tier.
    fn absorb(&mut self, n: i64, span: Span, fine_resolution: f64) {
        let g = self.group(n, fine_resolution);
        self.past.absorb(g, span);
    }

    /// Drops the stored buckets a full coarse tier whose newest is `newest` no longer keeps.
    fn trim(&mut self, newest: i64) {
        let reach = self.reach(newest);
        while self.past.first_number().is_some_and(|f| f < reach) {
            self.past.pop_front();
        }
    }
}

/// A series: fine buckets for the recent past and, optionally, coarse buckets for the long
/// window. The OOM forecast fits 1-second floors over its window; the leak test fits 5-second
/// floors over ten minutes; a coarse bucket *is* such a floor window, so nothing is lost by
/// not keeping ten minutes of 1-second buckets (a fifth of the memory).
#[derive(Debug, Clone)]
pub struct Series {
    fine: Buckets,
    resolution: f64,
    /// Time and value of the newest sample folded in.
    last_t: Time,
    last: f32,
    coarse: Option<Coarse>,
}

/// Which buckets a window is read from (`Series::tier_for`).
#[derive(Debug, Clone, Copy)]
pub struct Tier<'a> {
    series: &'a Series,
    coarse: bool,
}

impl Series {
    pub fn new(resolution: f64, window: f64) -> Self {
        Series {
            fine: Buckets::Span(Ring::new(capacity(window, resolution))),
            resolution,
            last_t: f64::NEG_INFINITY,
            last: 0.0,
            coarse: None,
        }
    }

    /// `resolution` buckets over `fine_window`, and `coarse_resolution` buckets over `window`.
    pub fn tiered(resolution: f64, fine_window: f64, coarse_resolution: f64, window: f64) -> Self {
        if coarse_resolution <= resolution || fine_window >= window {
            return Series::new(resolution, window);
        }
        let fine = capacity(fine_window, resolution);
        let capacity = capacity(window, coarse_resolution);
        let ratio = (coarse_resolution / resolution).ceil();
        // A full fine tier spans at least this many coarse buckets: the rest of the window
        // is all that is stored coarse (one more for the bucket both share).
        let spanned = (fine as f64 / ratio).floor() as usize;
        Series {
            coarse: Some(Coarse {
                resolution: coarse_resolution,
                capacity,
                past: Buckets::Span(Ring::new(capacity.saturating_sub(spanned) + 1)),
            }),
            ..Series::new(resolution, fine_window)
        }
    }

    /// The same series with fine buckets of one value (4 bytes, not 8), for a view pushed
    /// at most once per bucket (once per analysis). A second value in a bucket, which only a
    /// clock stepping back brings, is kept as the higher of the two.
    pub fn one_value_a_bucket(mut self) -> Self {
        let capacity = self.fine.capacity();
        self.clear();
        self.fine = Buckets::One(Ring::new(capacity));
        self
    }

    /// The same series keeping only the least value of each bucket past its fine window (4
    /// bytes a coarse bucket, not 8), for a series read there for its floors alone: the leak
    /// test's minima. A bucket there reads its floor as its top.
    pub fn floors_past(self) -> Self {
        self.with_past(|n| Buckets::Floor(Ring::new(n)))
    }

    /// The same series keeping only the highest value of each bucket past its fine window (4
    /// bytes a coarse bucket), for a series read there for its maxima alone (what a process
    /// needed before the forecast's window). A bucket there reads its top as its floor.
    pub fn peaks_past(self) -> Self {
        self.with_past(|n| Buckets::One(Ring::new(n)))
    }

    fn with_past(mut self, kind: impl FnOnce(usize) -> Buckets) -> Self {
        self.clear();
        if let Some(c) = &mut self.coarse {
            c.past = kind(c.past.capacity());
        }
        self
    }

    /// The same series keeping only the least value of every bucket, fine or coarse (4 bytes
    /// each), for a series read for its floors alone. Its buckets read their floor as their
    /// top; the newest sample's value is kept apart, as in every series.
    pub fn floors_only(self) -> Self {
        let mut s = self.floors_past();
        s.fine = Buckets::Floor(Ring::new(s.fine.capacity()));
        s
    }

    pub fn push(&mut self, t: Time, v: f64) {
        if !v.is_finite() || !t.is_finite() {
            return;
        }
        let v32 = v as f32;
        if t >= self.last_t {
            self.last = v32;
            self.last_t = t;
        }
        let number = (t / self.resolution).floor() as i64;
        let res = self.resolution;
        let Some(c) = &mut self.coarse else {
            self.fine.push(number, v32, |_, _| {});
            return;
        };
        let newer = self.fine.newest().is_none_or(|(n, _)| number > n);
        self.fine
            .push(number, v32, |n, span| c.absorb(n, span, res));
        if newer {
            c.trim(c.group(number, res));
        }
    }

    /// The buckets to read windows of `width` seconds from, starting at `from`: the coarse
    /// ones when they are no wider than the window and the fine ones do not reach back.
    pub fn tier_for(&self, width: f64, from: Time) -> Tier<'_> {
        let coarse = self.coarse.as_ref().is_some_and(|c| {
            c.resolution <= width + 1e-9
                && self
                    .fine
                    .first_number()
                    .is_none_or(|f| f as f64 * self.resolution > from)
        });
        Tier {
            series: self,
            coarse,
        }
    }

    pub fn resolution(&self) -> f64 {
        self.resolution
    }
    pub fn newest(&self) -> Option<Bucket> {
        self.fine
            .newest()
            .map(|(n, s)| Bucket::of(n, self.resolution, s, self.last))
    }
    pub fn is_empty(&self) -> bool {
        self.fine.len() == 0
    }
    #[cfg(test)]
    fn len(&self) -> usize {
        self.fine.len()
    }
    #[cfg(test)]
    fn last(&self) -> Option<(Time, f64)> {
        self.newest().map(|_| (self.last_t, self.last as f64))
    }
    #[cfg(test)]
    fn first_time(&self) -> Option<Time> {
        self.tier_for(f64::INFINITY, f64::NEG_INFINITY).first_time()
    }
    pub fn since(&self, t0: Time) -> impl Iterator<Item = Bucket> + '_ {
        self.fine_since(t0)
    }
    pub fn max_since(&self, t0: Time) -> Option<f64> {
        self.tier_for(f64::INFINITY, t0).max_since(t0)
    }
    /// The highest value of the buckets that end by `t`, over the whole window (the coarse
    /// buckets where there are).
    pub fn max_before(&self, t: Time) -> Option<f64> {
        let tier = Tier {
            series: self,
            coarse: self.coarse.is_some(),
        };
        let res = tier.resolution();
        tier.since(f64::NEG_INFINITY)
            .take_while(|b| b.t + res <= t)
            .map(|b| b.max())
            .reduce(f64::max)
    }
    /// When the series first came within reach of `level`: the start of the first bucket,
    /// over the whole window (the coarse buckets where there are), whose top is at least
    /// `level`, and whether it is the oldest bucket kept (then it may have got there before).
    pub fn first_reached(&self, level: f64) -> Option<(Time, bool)> {
        let tier = Tier {
            series: self,
            coarse: self.coarse.is_some(),
        };
        tier.since(f64::NEG_INFINITY)
            .enumerate()
            .find(|(_, b)| b.max() >= level)
            .map(|(i, b)| (b.t, i == 0))
    }
    pub fn clear(&mut self) {
        self.fine.clear();
        self.last_t = f64::NEG_INFINITY;
        if let Some(c) = &mut self.coarse {
            c.past.clear();
        }
    }

    fn fine_since(&self, t0: Time) -> impl Iterator<Item = Bucket> + '_ {
        let res = self.resolution;
        // The first bucket that ends after `t0`, as a number.
        let from = ((t0 / res).floor() as i64).saturating_sub(1);
        let newest = self.fine.newest().map(|b| b.0);
        self.fine
            .iter_from(from)
            .map(move |(n, s)| {
                let last = if Some(n) == newest { self.last } else { s.max };
                Bucket::of(n, res, s, last)
            })
            .skip_while(move |b| b.t + res <= t0)
    }

    /// The coarse buckets, oldest first: those stored, then the fine ones gathered, the
    /// oldest left out where the fine ones reach further back than a full coarse tier.
    fn coarse_buckets<'a>(&'a self, c: &'a Coarse) -> impl Iterator<Item = Bucket> + 'a {
        let res = self.resolution;
        let reach = self
            .fine
            .newest()
            .map_or(i64::MIN, |(n, _)| c.reach(c.group(n, res)));
        let mut fine = self
            .fine
            .iter_from(i64::MIN)
            .map(move |(n, s)| (c.group(n, res), s))
            .skip_while(move |b| b.0 < reach)
            .peekable();
        let mut past = c.past.iter_from(i64::MIN).peekable();
        std::iter::from_fn(move || {
            let (g, mut span) = match past.next() {
                Some(b) => b,
                None => fine.next()?,
            };
            if past.peek().is_none() {
                while let Some(&(f, s)) = fine.peek() {
                    if f != g {
                        break;
                    }
                    span.merge(s);
                    fine.next();
                }
            }
            Some(Bucket::of(g, c.resolution, span, span.max))
        })
    }

    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        self.fine.heap_bytes() + self.coarse.as_ref().map_or(0, |c| c.past.heap_bytes())
    }
}

/// Buckets of `resolution` over `window`.
fn capacity(window: f64, resolution: f64) -> usize {
    ((window / resolution).ceil() as usize).max(2)
}

impl<'a> Tier<'a> {
    pub fn resolution(&self) -> f64 {
        match (&self.series.coarse, self.coarse) {
            (Some(c), true) => c.resolution,
            _ => self.series.resolution,
        }
    }

    /// Buckets whose end is after `t0`, oldest first.
    pub fn since(&self, t0: Time) -> Box<dyn Iterator<Item = Bucket> + 'a> {
        let s = self.series;
        match (&s.coarse, self.coarse) {
            (Some(c), true) => {
                let res = c.resolution;
                Box::new(s.coarse_buckets(c).skip_while(move |b| b.t + res <= t0))
            }
            _ => Box::new(s.fine_since(t0)),
        }
    }

    /// The newest bucket.
    pub fn newest(&self) -> Option<Bucket> {
        let s = self.series;
        match (&s.coarse, self.coarse) {
            (Some(c), true) => {
                // The newest coarse bucket is that of the newest fine buckets.
                let (n, _) = s.fine.newest()?;
                let g = c.group(n, s.resolution);
                let from = (g as f64 * c.resolution / s.resolution).floor() as i64 - 1;
                let span = s
                    .fine
                    .iter_from(from)
                    .filter(|&(f, _)| c.group(f, s.resolution) == g)
                    .map(|b| b.1)
                    .chain(c.past.newest().filter(|p| p.0 == g).map(|p| p.1))
                    .reduce(|mut a, b| {
                        a.merge(b);
                        a
                    })?;
                Some(Bucket::of(g, c.resolution, span, s.last))
            }
            _ => s.newest(),
        }
    }

    /// Seconds of the newest bucket that samples have covered (its start to the last sample).
    pub fn newest_seen(&self) -> Option<f64> {
        let res = self.resolution();
        self.newest()
            .map(|b| (self.series.last_t - b.t).clamp(0.0, res))
    }

    pub fn first_time(&self) -> Option<Time> {
        self.since(f64::NEG_INFINITY).next().map(|b| b.t)
    }

    pub fn max_since(&self, t0: Time) -> Option<f64> {
        self.since(t0).map(|b| b.max()).reduce(f64::max)
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
        assert_eq!(s.since(14.5).next().map(|b| b.t), Some(14.0));
        assert_eq!(s.max_since(10.0), Some(19.0));
    }

    #[test]
    fn a_level_is_first_reached_where_its_bucket_begins_and_unknown_before_the_oldest() {
        // 1 GiB-ish until 100 s, 3 from then on, kept 5 s coarse past the last 120 s.
        let mut s = Series::tiered(1.0, 120.0, 5.0, 600.0);
        for i in 0..300 {
            s.push(i as f64, if i < 100 { 1.0 } else { 3.0 });
        }
        assert_eq!(s.first_reached(3.0), Some((100.0, false)));
        assert_eq!(
            s.first_reached(0.5),
            Some((0.0, true)),
            "held from the oldest bucket"
        );
        assert_eq!(s.first_reached(4.0), None);
        // Once the level's start has left what is kept, the oldest bucket is all it knows.
        for i in 300..800 {
            s.push(i as f64, 3.0);
        }
        assert_eq!(s.first_reached(3.0).map(|r| r.1), Some(true));
    }

    #[test]
    fn a_full_series_holds_exactly_its_window() {
        let mut s = Series::new(1.0, 600.0);
        for i in 0..5000 {
            s.push(i as f64, 1e9);
        }
        assert_eq!(s.len(), 600);
        assert!(s.heap_bytes() <= 600 * 8 + 64, "{}", s.heap_bytes());
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
        // 120 fine buckets of 8 bytes; stored coarse, only the 480 s before them.
        assert!(
            s.heap_bytes() <= 120 * 8 + 97 * 8 + 2 * 64,
            "{}",
            s.heap_bytes()
        );
        // A coarse bucket's minimum is the minimum of the fine buckets it spans.
        let coarse = s.tier_for(5.0, 500.0);
        let b = coarse.since(580.0).next().unwrap();
        let fine_min = s
            .since(580.0)
            .take(5)
            .map(|b| b.min())
            .fold(f64::MAX, f64::min);
        assert_eq!(b.min(), fine_min);
        assert_eq!(s.max_since(0.0), s.tier_for(5.0, 0.0).max_since(0.0));
        assert_eq!(s.first_time(), Some(0.0), "ten minutes of coarse buckets");
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

    /// Buckets (start, min, max) of one tier as a series would keep them if it stored both
    /// tiers in full: those numbered less than `capacity` before the newest, late samples
    /// folded into the newest.
    fn full_tier(samples: &[(f64, f64)], resolution: f64, capacity: usize) -> Vec<(f64, f32, f32)> {
        let mut out: VecDeque<(i64, f32, f32)> = VecDeque::new();
        for &(t, v) in samples {
            let (n, v) = ((t / resolution).floor() as i64, v as f32);
            match out.back_mut() {
                Some(b) if n <= b.0 => {
                    b.1 = b.1.min(v);
                    b.2 = b.2.max(v);
                }
                _ => {
                    while out.front().is_some_and(|f| n - f.0 >= capacity as i64) {
                        out.pop_front();
                    }
                    out.push_back((n, v, v));
                }
            }
        }
        out.iter()
            .map(|b| (b.0 as f64 * resolution, b.1, b.2))
            .collect()
    }

    fn read(s: &Series, coarse: bool) -> Vec<(f64, f32, f32)> {
        Tier { series: s, coarse }
            .since(f64::NEG_INFINITY)
            .map(|b| (b.t, b.min, b.max))
            .collect()
    }

    /// Samples a second apart with a few per bucket, gaps from a bucket to longer than the
    /// window, and (`back`) the clock stepping back.
    fn irregular(seed: u64, per_bucket: u64, back: bool) -> Vec<(f64, f64)> {
        let mut x = seed;
        let mut next = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        let mut t = 1_763_700_000.0;
        let mut out = Vec::new();
        for _ in 0..3000 {
            let r = next();
            t += match r % 100 {
                0 => 2.0 + (r % 7) as f64,
                1 => 30.0 + (r % 400) as f64,
                2 => 700.0,
                3 if back => -3.5,
                _ => 1.0,
            };
            for k in 0..per_bucket {
                let v = 4e9 + (next() % 1_000_000) as f64 * 1024.0;
                out.push((t + k as f64 / per_bucket as f64, v));
            }
        }
        out
    }

    #[test]
    fn coarse_buckets_read_as_if_both_tiers_were_kept() {
        for (seed, per_bucket) in [(1, 1), (2, 1), (3, 4), (4, 9)] {
            // A view of one value a bucket has no clock that steps back (see `Payload for f32`).
            let samples = irregular(seed, per_bucket, per_bucket > 1);
            let mut s = Series::tiered(1.0, 300.0, 5.0, 600.0);
            if per_bucket == 1 {
                s = s.one_value_a_bucket();
            }
            for (i, &(t, v)) in samples.iter().enumerate() {
                s.push(t, v);
                if i % 97 == 0 || i + 1 == samples.len() {
                    let seen = &samples[..=i];
                    assert_eq!(read(&s, false), full_tier(seen, 1.0, 300), "fine at {i}");
                    assert_eq!(read(&s, true), full_tier(seen, 5.0, 120), "coarse at {i}");
                }
            }
        }
    }

    #[test]
    fn a_floors_past_keeps_every_floor_in_four_bytes() {
        for (seed, per_bucket) in [(5, 1), (6, 4), (7, 9)] {
            let samples = irregular(seed, per_bucket, per_bucket > 1);
            let mut s = Series::tiered(1.0, 120.0, 5.0, 600.0).floors_past();
            for (i, &(t, v)) in samples.iter().enumerate() {
                s.push(t, v);
                if i % 97 == 0 || i + 1 == samples.len() {
                    let seen = &samples[..=i];
                    assert_eq!(read(&s, false), full_tier(seen, 1.0, 120), "fine at {i}");
                    let floors = |b: Vec<(f64, f32, f32)>| -> Vec<(f64, f32)> {
                        b.iter().map(|b| (b.0, b.1)).collect()
                    };
                    assert_eq!(
                        floors(read(&s, true)),
                        floors(full_tier(seen, 5.0, 120)),
                        "coarse floors at {i}"
                    );
                }
            }
        }
        let mut s = Series::tiered(1.0, 120.0, 5.0, 600.0).floors_past();
        for i in 0..6000 {
            s.push(i as f64 * 0.1, 1e9 + (i % 7) as f64);
        }
        // 120 fine buckets of 8 bytes, the 97 coarse ones past them of 4.
        assert!(
            s.heap_bytes() <= 120 * 8 + 97 * 4 + 2 * 64,
            "{}",
            s.heap_bytes()
        );
    }

    #[test]
    fn a_series_of_floors_only_keeps_every_floor_in_four_bytes() {
        let samples = irregular(8, 4, true);
        let mut s = Series::tiered(1.0, 120.0, 5.0, 600.0).floors_only();
        let floors =
            |b: Vec<(f64, f32, f32)>| -> Vec<(f64, f32)> { b.iter().map(|b| (b.0, b.1)).collect() };
        for (i, &(t, v)) in samples.iter().enumerate() {
            s.push(t, v);
            if i % 97 == 0 || i + 1 == samples.len() {
                let seen = &samples[..=i];
                assert_eq!(floors(read(&s, false)), floors(full_tier(seen, 1.0, 120)));
                assert_eq!(floors(read(&s, true)), floors(full_tier(seen, 5.0, 120)));
            }
        }
        let &(t, v) = samples.iter().max_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
        assert_eq!(
            s.last(),
            Some((t, v as f32 as f64)),
            "the newest sample's value"
        );
        assert!(
            s.heap_bytes() <= 120 * 4 + 97 * 4 + 2 * 64,
            "{}",
            s.heap_bytes()
        );
    }

    #[test]
    fn one_value_buckets_cost_four_bytes_and_read_back_within_f32() {
        let mut s = Series::tiered(1.0, 300.0, 5.0, 600.0).one_value_a_bucket();
        let value = |i: i64| 3.0e10 + (i * 7919 % 1000) as f64 * 1.0e6 + 123.0;
        for i in 0..1200 {
            s.push(i as f64 + 0.25, value(i));
        }
        // 300 buckets of 4 bytes, and past them 5 s buckets of 8 bytes to ten minutes.
        assert!(
            s.heap_bytes() <= 300 * 4 + 61 * 8 + 2 * 64,
            "{}",
            s.heap_bytes()
        );
        for b in s.since(0.0) {
            let v = value(b.t as i64);
            assert!(
                (b.max() - v).abs() <= v * f64::from(f32::EPSILON) / 2.0,
                "{}",
                b.t
            );
            assert_eq!(b.min(), b.max());
        }
        assert_eq!(s.since(0.0).count(), 300);
        assert_eq!(s.newest().unwrap().last(), value(1199) as f32 as f64);
    }

    #[test]
    fn skipped_buckets_cost_no_memory_past_the_window() {
        // An analysis a second whose samples come a few milliseconds late now and then: about
        // one bucket in three is skipped, the next sample landing two buckets after the last.
        let mut s = Series::tiered(1.0, 300.0, 5.0, 600.0).one_value_a_bucket();
        let mut t = 1_763_700_000.999;
        for i in 0..2000 {
            t += 1.0 + if i % 3 == 0 { 0.002 } else { -0.001 };
            s.push(t, 1e9 + i as f64);
        }
        let newest = s.newest().unwrap().t;
        let fine = s.since(f64::NEG_INFINITY).next().unwrap().t;
        assert!(fine > newest - 300.0, "fine from {fine}, newest {newest}");
        let coarse = s.tier_for(5.0, 0.0).first_time().unwrap();
        assert!(
            coarse > newest - 600.0,
            "coarse from {coarse}, newest {newest}"
        );
        // No more than the 300 slots of a full fine tier, markers included, and the 61
        // coarse buckets past it.
        assert!(
            s.heap_bytes() <= 300 * 4 + 61 * 8 + 2 * 64,
            "{}",
            s.heap_bytes()
        );
    }

    #[test]
    fn past_the_fine_window_buckets_are_coarse_and_go_at_the_window() {
        let mut s = Series::tiered(1.0, 120.0, 5.0, 600.0).one_value_a_bucket();
        for i in 0..1000 {
            s.push(i as f64, i as f64);
        }
        // Two minutes at 1 s (880..=999), then 5 s buckets back to ten minutes (400..880).
        assert_eq!(s.tier_for(5.0, 879.0).resolution(), 5.0);
        assert_eq!(s.tier_for(5.0, 880.0).resolution(), 1.0);
        let coarse: Vec<_> = s.tier_for(5.0, 0.0).since(0.0).collect();
        assert_eq!(coarse.len(), 120);
        assert_eq!(coarse[0].t, 400.0, "older buckets have left");
        // The bucket across the boundary spans a stored part and a fine part.
        let b = s.tier_for(5.0, 0.0).since(875.0).next().unwrap();
        assert_eq!((b.t, b.min(), b.max()), (875.0, 875.0, 879.0));
        let b = s.tier_for(5.0, 0.0).since(880.0).next().unwrap();
        assert_eq!((b.t, b.min(), b.max()), (880.0, 880.0, 884.0));
        assert_eq!(s.max_before(880.0), Some(879.0));
        assert_eq!(s.max_before(402.0), None, "no bucket ends by then");
    }

    #[test]
    fn a_cleared_series_starts_afresh() {
        let mut s = Series::tiered(1.0, 120.0, 5.0, 600.0);
        for i in 0..1000 {
            s.push(i as f64, 1.0);
        }
        s.clear();
        assert!(s.is_empty());
        assert_eq!(s.heap_bytes(), 0);
        s.push(2000.0, 5.0);
        assert_eq!(read(&s, true), [(2000.0, 5.0, 5.0)]);
    }
}
