//! The storage under a series: buckets of one width, the newest `capacity` of them, each as
//! small as what is read from it allows.
//!
//! A bucket's start is not stored with it: bucket numbers come in runs of consecutive numbers
//! (one run, unless samples skipped buckets), kept beside the values.

use std::collections::{vec_deque, VecDeque};

/// What a bucket keeps of the samples folded into it.
pub(super) trait Payload: Copy {
    fn first(v: f32) -> Self;
    fn fold(&mut self, v: f32);
    fn span(&self) -> Span;
}

/// A bucket of a view pushed once per bucket (one analysis a second): 4 bytes, its one value.
impl Payload for f32 {
    fn first(v: f32) -> Self {
        v
    }
    /// A second value comes only when the clock steps back. The bucket keeps the higher one:
    /// these views are high-water marks, read for their maxima.
    fn fold(&mut self, v: f32) {
        *self = self.max(v);
    }
    fn span(&self) -> Span {
        Span {
            min: *self,
            max: *self,
        }
    }
}

/// A bucket of a series sampled more often than its buckets: 8 bytes, the least and the
/// highest value. The last value is read from the newest bucket only, and the series keeps
/// that one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Span {
    pub min: f32,
    pub max: f32,
}

impl Span {
    pub fn merge(&mut self, o: Span) {
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }
}

impl Payload for Span {
    fn first(v: f32) -> Self {
        Span { min: v, max: v }
    }
    fn fold(&mut self, v: f32) {
        self.merge(Span { min: v, max: v });
    }
    fn span(&self) -> Span {
        *self
    }
}

/// Bucket numbers as runs (first number, length).
#[derive(Debug, Clone, Default)]
struct Runs(VecDeque<(i64, u32)>);

impl Runs {
    fn push(&mut self, n: i64) {
        match self.0.back_mut() {
            Some((s, l)) if *s + i64::from(*l) == n && *l < u32::MAX => *l += 1,
            _ => self.0.push_back((n, 1)),
        }
    }

    fn pop_front(&mut self) {
        if let Some(f) = self.0.front_mut() {
            f.0 += 1;
            f.1 -= 1;
            if f.1 == 0 {
                self.0.pop_front();
            }
        }
    }

    fn first(&self) -> Option<i64> {
        self.0.front().map(|r| r.0)
    }

    fn last(&self) -> Option<i64> {
        self.0.back().map(|&(s, l)| s + i64::from(l) - 1)
    }
}

/// Buckets of one width: at most `capacity`, the oldest dropped first.
#[derive(Debug, Clone)]
pub(super) struct Ring<P> {
    values: VecDeque<P>,
    numbers: Runs,
    capacity: usize,
}

impl<P: Payload> Ring<P> {
    pub fn new(capacity: usize) -> Self {
        Ring {
            values: VecDeque::new(),
            numbers: Runs::default(),
            capacity: capacity.max(1),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn first_number(&self) -> Option<i64> {
        self.numbers.first()
    }

    pub fn newest(&self) -> Option<(i64, P)> {
        Some((self.numbers.last()?, *self.values.back()?))
    }

    /// Folds `v` into bucket `number`: into the newest bucket when `number` is not newer (late
    /// samples do not rewrite the past), else into a new one. Returns the bucket that made
    /// room for it.
    pub fn push(&mut self, number: i64, v: f32) -> Option<(i64, P)> {
        match (self.numbers.last(), self.values.back_mut()) {
            (Some(n), Some(b)) if number <= n => {
                b.fold(v);
                None
            }
            _ => self.push_new(number, P::first(v)),
        }
    }

    /// Appends bucket `number`, newer than every bucket held.
    pub fn push_new(&mut self, number: i64, p: P) -> Option<(i64, P)> {
        let evicted = if self.values.len() == self.capacity {
            self.pop_front()
        } else {
            if self.values.len() == self.values.capacity() {
                // Grow geometrically, but never past the capacity: a full ring holds exactly
                // `capacity` buckets.
                let more = self
                    .values
                    .len()
                    .max(16)
                    .min(self.capacity - self.values.len());
                self.values.reserve_exact(more);
            }
            None
        };
        self.values.push_back(p);
        self.numbers.push(number);
        evicted
    }

    pub fn newest_mut(&mut self) -> Option<&mut P> {
        self.values.back_mut()
    }

    pub fn pop_front(&mut self) -> Option<(i64, P)> {
        let n = self.numbers.first()?;
        self.numbers.pop_front();
        Some((n, self.values.pop_front()?))
    }

    /// The buckets numbered `from` or later, oldest first.
    pub fn iter_from(&self, from: i64) -> Iter<'_, P> {
        let mut skipped = 0usize;
        let mut run = 0;
        let mut next = i64::MAX;
        let mut end = i64::MAX;
        for (i, &(s, l)) in self.numbers.0.iter().enumerate() {
            let e = s + i64::from(l);
            if from < e {
                run = i;
                next = from.max(s);
                end = e;
                skipped += (next - s) as usize;
                break;
            }
            skipped += l as usize;
            run = i + 1;
        }
        Iter {
            runs: &self.numbers.0,
            run,
            next,
            end,
            values: self.values.range(skipped.min(self.values.len())..),
        }
    }

    pub fn iter(&self) -> Iter<'_, P> {
        self.iter_from(i64::MIN)
    }

    /// Forget everything and give the memory back.
    pub fn clear(&mut self) {
        self.values = VecDeque::new();
        self.numbers = Runs::default();
    }

    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        self.values.capacity() * std::mem::size_of::<P>()
            + self.numbers.0.capacity() * std::mem::size_of::<(i64, u32)>()
    }
}

/// Buckets of a ring with their numbers, oldest first.
#[derive(Debug, Clone)]
pub(super) struct Iter<'a, P> {
    runs: &'a VecDeque<(i64, u32)>,
    run: usize,
    next: i64,
    end: i64,
    values: vec_deque::Iter<'a, P>,
}

impl<P: Copy> Iterator for Iter<'_, P> {
    type Item = (i64, P);

    fn next(&mut self) -> Option<(i64, P)> {
        if self.next >= self.end {
            self.run += 1;
            let &(s, l) = self.runs.get(self.run)?;
            self.next = s;
            self.end = s + i64::from(l);
        }
        let v = *self.values.next()?;
        self.next += 1;
        Some((self.next - 1, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_survive_gaps_and_eviction() {
        let mut r: Ring<f32> = Ring::new(4);
        for n in [10, 11, 15, 16, 17] {
            r.push(n, n as f32);
        }
        let got: Vec<_> = r.iter().collect();
        assert_eq!(got, [(11, 11.0), (15, 15.0), (16, 16.0), (17, 17.0)]);
        assert_eq!(r.first_number(), Some(11));
        let from: Vec<_> = r.iter_from(12).map(|b| b.0).collect();
        assert_eq!(
            from,
            [15, 16, 17],
            "a number inside a gap starts at the next bucket"
        );
        assert_eq!(r.iter_from(16).map(|b| b.0).collect::<Vec<_>>(), [16, 17]);
        assert_eq!(r.iter_from(18).count(), 0);
        // The run of 10..=11 is gone once both have been evicted.
        r.push(18, 18.0);
        assert_eq!(r.numbers.0.len(), 1);
        assert_eq!(r.iter().map(|b| b.0).collect::<Vec<_>>(), [15, 16, 17, 18]);
    }

    #[test]
    fn a_one_value_bucket_keeps_the_higher_of_two() {
        let mut r: Ring<f32> = Ring::new(4);
        r.push(3, 5.0);
        r.push(2, 7.0);
        r.push(3, 6.0);
        assert_eq!(r.iter().collect::<Vec<_>>(), [(3, 7.0)]);
        let mut s: Ring<Span> = Ring::new(4);
        s.push(3, 5.0);
        s.push(3, 7.0);
        s.push(3, 2.0);
        assert_eq!(s.newest(), Some((3, Span { min: 2.0, max: 7.0 })));
    }

    #[test]
    fn buckets_cost_four_and_eight_bytes() {
        assert_eq!(std::mem::size_of::<f32>(), 4);
        assert_eq!(std::mem::size_of::<Span>(), 8);
        let mut r: Ring<f32> = Ring::new(300);
        for n in 0..1000 {
            r.push(n, 1.0);
        }
        assert_eq!(r.len(), 300);
        assert_eq!(r.values.capacity(), 300, "never grown past the capacity");
        assert!(r.heap_bytes() <= 300 * 4 + 4 * 16);
    }
}
