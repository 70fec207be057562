//! Bounded history of every GPU and process.
//!
//! A series keeps one bucket per `resolution` (min, max and last of the samples inside it) for
//! `window`. Memory is bounded by `window / resolution` per series whatever the sample rate, and
//! the bucket minima are exactly what the floor analysis needs: a training step's sawtooth is
//! shorter than a bucket, so a bucket's minimum sits on the floor.

use std::collections::VecDeque;

use crate::model::Time;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Start of the bucket (a multiple of the resolution).
    pub t: Time,
    /// Timestamp of the last sample folded in.
    pub t_last: Time,
    pub min: f64,
    pub max: f64,
    pub last: f64,
    pub n: u32,
}

impl Bucket {
    /// The bucket's representative time: the middle of its span.
    pub fn mid(&self, resolution: f64) -> Time {
        self.t + resolution / 2.0
    }
}

#[derive(Debug, Clone)]
pub struct Series {
    buckets: VecDeque<Bucket>,
    resolution: f64,
    capacity: usize,
}

impl Series {
    pub fn new(resolution: f64, window: f64) -> Self {
        let capacity = ((window / resolution).ceil() as usize).max(2);
        Series {
            buckets: VecDeque::with_capacity(capacity.min(64)),
            resolution,
            capacity,
        }
    }

    pub fn resolution(&self) -> f64 {
        self.resolution
    }

    pub fn push(&mut self, t: Time, v: f64) {
        if !v.is_finite() || !t.is_finite() {
            return;
        }
        let start = (t / self.resolution).floor() * self.resolution;
        match self.buckets.back_mut() {
            // Samples that arrive late (clock steps, merged traces) fold into the newest bucket
            // rather than rewriting the past.
            Some(b) if start <= b.t => {
                b.min = b.min.min(v);
                b.max = b.max.max(v);
                if t >= b.t_last {
                    b.last = v;
                    b.t_last = t;
                }
                b.n += 1;
            }
            _ => {
                if self.buckets.len() == self.capacity {
                    self.buckets.pop_front();
                }
                self.buckets.push_back(Bucket {
                    t: start,
                    t_last: t,
                    min: v,
                    max: v,
                    last: v,
                    n: 1,
                });
            }
        }
    }

    pub fn buckets(&self) -> &VecDeque<Bucket> {
        &self.buckets
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn last(&self) -> Option<(Time, f64)> {
        self.buckets.back().map(|b| (b.t_last, b.last))
    }

    pub fn first_time(&self) -> Option<Time> {
        self.buckets.front().map(|b| b.t)
    }

    /// Buckets whose start is at or after `t0`.
    pub fn since(&self, t0: Time) -> impl Iterator<Item = &Bucket> {
        let first = self
            .buckets
            .partition_point(|b| b.t + self.resolution <= t0);
        self.buckets.range(first..)
    }

    pub fn max_since(&self, t0: Time) -> Option<f64> {
        self.since(t0).map(|b| b.max).reduce(f64::max)
    }

    /// Drop buckets older than `t0`.
    pub fn trim_before(&mut self, t0: Time) {
        while self
            .buckets
            .front()
            .is_some_and(|b| b.t + self.resolution <= t0)
        {
            self.buckets.pop_front();
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
        let b = s.buckets().back().unwrap();
        assert_eq!((b.min, b.max, b.n), (0.0, 9.0, 10));
        assert_eq!(b.t, 99.0);
    }

    #[test]
    fn late_samples_do_not_rewrite_the_past() {
        let mut s = Series::new(1.0, 100.0);
        s.push(5.5, 1.0);
        s.push(3.2, 7.0);
        assert_eq!(s.len(), 1);
        assert_eq!(s.last(), Some((5.5, 1.0)));
        assert_eq!(s.buckets()[0].max, 7.0);
    }

    #[test]
    fn since_and_trim() {
        let mut s = Series::new(1.0, 100.0);
        for i in 0..20 {
            s.push(i as f64, i as f64);
        }
        assert_eq!(s.since(15.0).count(), 5);
        assert_eq!(s.max_since(10.0), Some(19.0));
        s.trim_before(10.0);
        assert_eq!(s.first_time(), Some(10.0));
    }

    #[test]
    fn non_finite_values_are_ignored() {
        let mut s = Series::new(1.0, 100.0);
        s.push(1.0, f64::NAN);
        s.push(f64::INFINITY, 1.0);
        assert!(s.is_empty());
    }
}
