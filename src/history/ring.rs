//! The storage under a series: buckets of one width over the last `capacity` bucket numbers,
//! each as small as what is read from it allows.
//!
//! A bucket's start is not stored with it: buckets follow each other, and where samples
//! skipped buckets (an analysis a second lands now and then two seconds after the last) a
//! marker of the same size holds how many. Real values are finite, markers are NaN. The
//! capacity bounds the numbers a ring covers, skipped ones included, so buckets and markers
//! together never take more than `capacity` slots and never reach further back than the
//! window.

use std::collections::{vec_deque, VecDeque};

/// Longest gap one marker holds (the mantissa of an `f32` NaN).
const MAX_GAP: u32 = (1 << 23) - 1;

/// What a bucket keeps of the samples folded into it.
pub(super) trait Payload: Copy {
    /// A bucket of what `s` spans.
    fn of(s: Span) -> Self;
    /// Folds the span of more samples in.
    fn merge(&mut self, s: Span);
    fn span(&self) -> Span;
    /// A marker of `n` skipped buckets (1..=MAX_GAP).
    fn gap(n: u32) -> Self;
    /// The buckets this marker stands for, if it is one.
    fn skipped(&self) -> Option<u32>;

    fn first(v: f32) -> Self {
        Self::of(Span { min: v, max: v })
    }
    fn fold(&mut self, v: f32) {
        self.merge(Span { min: v, max: v });
    }
}

fn marker(n: u32) -> f32 {
    f32::from_bits(0x7F80_0000 | n)
}

fn marked(v: f32) -> Option<u32> {
    v.is_nan().then_some(v.to_bits() & MAX_GAP)
}

/// A bucket of a view pushed once per bucket (one analysis a second): 4 bytes, its one value.
/// A second value comes only when the clock steps back. The bucket keeps the higher one:
/// these views are high-water marks, read for their maxima.
impl Payload for f32 {
    fn of(s: Span) -> Self {
        s.max
    }
    fn merge(&mut self, s: Span) {
        *self = self.max(s.max);
    }
    fn span(&self) -> Span {
        Span {
            min: *self,
            max: *self,
        }
    }
    fn gap(n: u32) -> Self {
        marker(n)
    }
    fn skipped(&self) -> Option<u32> {
        marked(*self)
    }
}

/// A bucket that keeps the least of its samples only: 4 bytes, for the long past of a series
/// read there for its floors alone (the leak test's minima). It reads its floor as its top.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Floor(f32);

impl Payload for Floor {
    fn of(s: Span) -> Self {
        Floor(s.min)
    }
    fn merge(&mut self, s: Span) {
        self.0 = self.0.min(s.min);
    }
    fn span(&self) -> Span {
        Span {
            min: self.0,
            max: self.0,
        }
    }
    fn gap(n: u32) -> Self {
        Floor(marker(n))
    }
    fn skipped(&self) -> Option<u32> {
        marked(self.0)
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
    fn of(s: Span) -> Self {
        s
    }
    fn merge(&mut self, s: Span) {
        Span::merge(self, s);
    }
    fn span(&self) -> Span {
        *self
    }
    fn gap(n: u32) -> Self {
        Span {
            min: marker(n),
            max: 0.0,
        }
    }
    fn skipped(&self) -> Option<u32> {
        marked(self.min)
    }
}

/// Buckets of one width numbered at most `capacity - 1` before the newest, the oldest dropped
/// first.
#[derive(Debug, Clone)]
pub(super) struct Ring<P> {
    /// Buckets and markers, oldest first; the first and the last are buckets. Never more than
    /// `capacity`: `newest - first < capacity`, and a marker stands for one skipped number or
    /// more.
    values: VecDeque<P>,
    /// Number of the oldest and of the newest bucket.
    first: i64,
    newest: i64,
    buckets: usize,
    markers: usize,
    capacity: usize,
}

impl<P: Payload> Ring<P> {
    pub fn new(capacity: usize) -> Self {
        Ring {
            values: VecDeque::new(),
            first: 0,
            newest: 0,
            buckets: 0,
            markers: 0,
            capacity: capacity.max(1),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.buckets
    }

    pub fn first_number(&self) -> Option<i64> {
        (self.buckets > 0).then_some(self.first)
    }

    pub fn newest(&self) -> Option<(i64, P)> {
        Some((self.newest, *self.values.back()?))
    }

    /// Folds `v` into bucket `number`: into the newest bucket when `number` is not newer (late
    /// samples do not rewrite the past), else into a new one. The buckets that leave to make
    /// room for it go to `evicted`, oldest first.
    pub fn push(&mut self, number: i64, v: f32, evicted: impl FnMut(i64, P)) {
        match self.values.back_mut() {
            Some(b) if number <= self.newest => b.fold(v),
            _ => self.push_new(number, P::first(v), evicted),
        }
    }

    /// Appends bucket `number`, newer than every bucket held, after the buckets numbered
    /// `capacity` or more before it have gone to `evicted`, oldest first (with the markers
    /// after them).
    pub fn push_new(&mut self, number: i64, p: P, mut evicted: impl FnMut(i64, P)) {
        let reach = number - self.capacity as i64;
        while self.buckets > 0 && self.first <= reach {
            if let Some((n, b)) = self.pop_front() {
                evicted(n, b);
            }
        }
        if self.buckets == 0 {
            self.first = number;
        } else {
            let mut skipped = number - self.newest - 1;
            while skipped > 0 {
                let n = skipped.min(i64::from(MAX_GAP));
                self.append(P::gap(n as u32));
                self.markers += 1;
                skipped -= n;
            }
        }
        self.append(p);
        self.buckets += 1;
        self.newest = number;
    }

    fn append(&mut self, p: P) {
        let n = self.values.len();
        if n == self.values.capacity() {
            // Grow geometrically up to the capacity, never past it: the numbers held, buckets
            // and markers, span less than `capacity`, so a full ring of consecutive buckets
            // holds exactly `capacity` of them and one with gaps fewer slots.
            let want = (n * 2).max(16).min(self.capacity);
            self.values.reserve_exact(want.saturating_sub(n).max(1));
        }
        self.values.push_back(p);
    }

    pub fn newest_mut(&mut self) -> Option<&mut P> {
        self.values.back_mut()
    }

    pub fn pop_front(&mut self) -> Option<(i64, P)> {
        let p = self.values.pop_front()?;
        let n = self.first;
        self.buckets -= 1;
        self.first += 1;
        while let Some(g) = self.values.front().and_then(P::skipped) {
            self.values.pop_front();
            self.markers -= 1;
            self.first += i64::from(g);
        }
        Some((n, p))
    }

    /// Index and number of the first bucket numbered `from` or later; from the newest back,
    /// as reads mostly ask for the recent past.
    fn locate(&self, from: i64) -> (usize, i64) {
        if self.buckets == 0 || from <= self.first {
            return (0, self.first);
        }
        if from > self.newest {
            return (self.values.len(), self.newest + 1);
        }
        if self.markers == 0 {
            return ((from - self.first) as usize, from);
        }
        let (mut i, mut n) = (self.values.len() - 1, self.newest);
        loop {
            let mut j = i;
            let mut skipped = 0;
            while let Some(g) = self.values.get(j.wrapping_sub(1)).and_then(P::skipped) {
                skipped += i64::from(g);
                j -= 1;
            }
            let previous = n - 1 - skipped;
            if j == 0 || previous < from {
                return (i, n);
            }
            i = j - 1;
            n = previous;
        }
    }

    /// The buckets numbered `from` or later, oldest first.
    pub fn iter_from(&self, from: i64) -> Iter<'_, P> {
        let (i, next) = self.locate(from);
        Iter {
            next,
            values: self.values.range(i..),
        }
    }

    #[cfg(test)]
    pub fn iter(&self) -> Iter<'_, P> {
        self.iter_from(i64::MIN)
    }

    /// Forget everything and give the memory back.
    pub fn clear(&mut self) {
        *self = Ring::new(self.capacity);
    }

    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        self.values.capacity() * std::mem::size_of::<P>()
    }
}

/// Buckets of a ring with their numbers, oldest first.
#[derive(Debug, Clone)]
pub(super) struct Iter<'a, P> {
    next: i64,
    values: vec_deque::Iter<'a, P>,
}

impl<P: Payload> Iterator for Iter<'_, P> {
    type Item = (i64, P);

    fn next(&mut self) -> Option<(i64, P)> {
        loop {
            let v = *self.values.next()?;
            match v.skipped() {
                Some(g) => self.next += i64::from(g),
                None => {
                    self.next += 1;
                    return Some((self.next - 1, v));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push<P: Payload>(r: &mut Ring<P>, n: i64, v: f32) -> Vec<i64> {
        let mut out = Vec::new();
        r.push(n, v, |n, _| out.push(n));
        out
    }

    #[test]
    fn numbers_survive_gaps_and_eviction() {
        let mut r: Ring<f32> = Ring::new(8);
        for n in [10, 11, 15, 16, 17] {
            assert!(push(&mut r, n, n as f32).is_empty());
        }
        let got: Vec<_> = r.iter().collect();
        assert_eq!(
            got,
            [(10, 10.0), (11, 11.0), (15, 15.0), (16, 16.0), (17, 17.0)]
        );
        assert_eq!(r.first_number(), Some(10));
        let from: Vec<_> = r.iter_from(12).map(|b| b.0).collect();
        assert_eq!(
            from,
            [15, 16, 17],
            "a number inside a gap starts at the next bucket"
        );
        assert_eq!(r.iter_from(16).map(|b| b.0).collect::<Vec<_>>(), [16, 17]);
        assert_eq!(r.iter_from(18).count(), 0);
        // 18 pushes 10 out; the marker of 12..=14 goes with 11, the bucket before it.
        assert_eq!(push(&mut r, 18, 18.0), [10]);
        assert_eq!((r.markers, r.values.len()), (1, 6));
        assert_eq!(push(&mut r, 19, 19.0), [11]);
        assert_eq!((r.markers, r.values.len()), (0, 5));
        assert_eq!(r.first_number(), Some(15));
        assert_eq!(
            r.iter().map(|b| b.0).collect::<Vec<_>>(),
            [15, 16, 17, 18, 19]
        );
        // Every other bucket skipped: a marker of 4 bytes each, and reads from the back.
        let mut r: Ring<f32> = Ring::new(300);
        for n in 0..1000 {
            push(&mut r, 2 * n, n as f32);
        }
        assert_eq!((r.len(), r.markers), (150, 149));
        assert_eq!(r.first_number(), Some(1700));
        assert_eq!(r.iter_from(1997).next(), Some((1998, 999.0)));
        assert_eq!(r.iter_from(1701).next(), Some((1702, 851.0)));
        assert_eq!(r.iter().count(), 150);
        assert!(r.heap_bytes() <= 300 * 4, "{}", r.heap_bytes());
    }

    #[test]
    fn a_ring_with_gaps_keeps_its_window_in_its_capacity() {
        // Buckets one or two numbers apart, as an analysis a second with a little jitter
        // pushes them, and now and then a longer gap.
        let mut x = 7u64;
        let mut r: Ring<Span> = Ring::new(300);
        let mut n = 1_763_700_000i64;
        let mut left = Vec::new();
        for i in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            n += match (x >> 33) % 100 {
                0 => 50,
                1 => 400,
                k if k < 40 => 2,
                _ => 1,
            };
            let before: Vec<_> = r.iter().map(|b| b.0).collect();
            let gone = push(&mut r, n, i as f32);
            assert!(r.values.len() <= 300, "{} slots at {i}", r.values.len());
            assert!(r.heap_bytes() <= 300 * 8, "{} bytes at {i}", r.heap_bytes());
            let held: Vec<_> = r.iter().map(|b| b.0).collect();
            assert!(held[0] > n - 300, "{} held at {n}", held[0]);
            // What left is exactly the buckets out of reach, oldest first.
            let want: Vec<_> = before.iter().copied().filter(|&b| b <= n - 300).collect();
            assert_eq!(gone, want, "at {i}");
            assert_eq!(held.len() + gone.len(), before.len() + 1, "at {i}");
            assert_eq!(r.len(), held.len());
            left.extend(gone);
        }
        assert!(left.windows(2).all(|w| w[0] < w[1]), "evicted oldest first");
        // A gap longer than the window leaves only the new bucket.
        let newest = r.newest().unwrap().0;
        push(&mut r, newest + 1000, 1.0);
        assert_eq!(r.iter().map(|b| b.0).collect::<Vec<_>>(), [newest + 1000]);
        assert_eq!((r.len(), r.markers, r.values.len()), (1, 0, 1));
    }

    #[test]
    fn a_one_value_bucket_keeps_the_higher_of_two() {
        let mut r: Ring<f32> = Ring::new(4);
        push(&mut r, 3, 5.0);
        push(&mut r, 2, 7.0);
        push(&mut r, 3, 6.0);
        assert_eq!(r.iter().collect::<Vec<_>>(), [(3, 7.0)]);
        let mut s: Ring<Span> = Ring::new(4);
        push(&mut s, 3, 5.0);
        push(&mut s, 3, 7.0);
        push(&mut s, 3, 2.0);
        assert_eq!(s.newest(), Some((3, Span { min: 2.0, max: 7.0 })));
    }

    #[test]
    fn buckets_cost_four_and_eight_bytes() {
        assert_eq!(std::mem::size_of::<f32>(), 4);
        assert_eq!(std::mem::size_of::<Span>(), 8);
        let mut r: Ring<f32> = Ring::new(300);
        for n in 0..1000 {
            push(&mut r, n, 1.0);
        }
        assert_eq!(r.len(), 300);
        assert_eq!(r.values.capacity(), 300, "never grown past the capacity");
        assert_eq!(r.heap_bytes(), 300 * 4);
    }
}
