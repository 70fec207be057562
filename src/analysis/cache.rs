//! What a caching allocator gives back before it fails a request. A request the driver refuses
//! makes it return its empty segments and try again; free bytes split among live blocks stay.

use crate::model::{DeviceStats, Time};
use std::collections::VecDeque;

/// Bytes of cache in segments with nothing allocated in them, as reported now. A client that
/// does not say which free bytes are split gives back nothing.
fn releasable(a: &DeviceStats) -> f64 {
    let Some(split) = a.inactive_split_bytes else {
        return 0.0;
    };
    let active = a.active_bytes.unwrap_or(a.allocated_bytes);
    a.reserved_bytes
        .saturating_sub(active)
        .saturating_sub(split) as f64
}

/// Bytes its cache can give back at its peak: what it holds less its peak and less the free
/// bytes split among live blocks, and no more than its empty segments now (the peak fills some).
pub fn spare_at_peak(a: &DeviceStats, held: f64, peak: f64) -> f64 {
    let split = a.inactive_split_bytes.unwrap_or(a.reserved_bytes) as f64;
    releasable(a).min(held - peak - split)
}

/// Seconds between the readings `Spares` keeps, and how many it keeps: ten minutes and more,
/// the leak test's window.
const SPARES_EVERY: f64 = 10.0;
const SPARES_KEPT: usize = 64;

/// What a process's cache would give back at its peak (`spare_at_peak`), now and over the last
/// minutes: whether what it holds rose because its cache grew or because it keeps more.
#[derive(Debug, Clone, Default)]
pub struct Spares {
    readings: VecDeque<(Time, f64)>,
    now: f64,
}

impl Spares {
    /// `spare` at `t`; a negative one (nothing to give back) counts as none.
    pub fn push(&mut self, t: Time, spare: f64) {
        let spare = spare.max(0.0);
        self.now = spare;
        if self.readings.back().is_none_or(|r| t - r.0 >= SPARES_EVERY) {
            // Room made before the push: the queue never grows past what it keeps.
            if self.readings.len() == SPARES_KEPT {
                self.readings.pop_front();
            }
            self.readings.push_back((t, spare));
        }
    }

    /// A rise of what it holds since `since` is its cache's where its spare grew by most of
    /// it: segments with nothing in them at its peak (a warm-up whose every record batch took
    /// one of its own), no memory kept. A leak keeps what it takes; a cache that was there all
    /// along (the reading at or after `since`, the oldest where none is as old) explains none
    /// of it.
    pub fn explain(&self, since: Time, rise: f64) -> bool {
        let then = self
            .readings
            .iter()
            .find(|r| r.0 >= since)
            .or(self.readings.back())
            .map_or(self.now, |r| r.1);
        self.now - then >= 0.5 * rise
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = 1073741824.0;

    fn report(allocated: f64, reserved: f64, split: Option<f64>) -> DeviceStats {
        DeviceStats {
            uuid: "GPU-0".into(),
            allocated_bytes: (allocated * GIB) as u64,
            reserved_bytes: (reserved * GIB) as u64,
            active_bytes: Some((allocated * GIB) as u64),
            inactive_split_bytes: split.map(|s| (s * GIB) as u64),
            ..Default::default()
        }
    }

    #[test]
    fn empty_segments_are_given_back_and_split_free_bytes_are_not() {
        // A warm-up whose record batches each took a segment of their own (as recorded:
        // h-warmup-saturate-6): 75.5 GiB held, 0.28 allocated between steps, 13.8 at the peak.
        let warm = report(0.28, 75.5, Some(0.26));
        assert!((releasable(&warm) / GIB - 74.96).abs() < 0.01);
        let spare = spare_at_peak(&warm, 75.5 * GIB, 13.8 * GIB) / GIB;
        assert!((spare - 61.44).abs() < 0.01, "{spare}");
        // A leak beside a fragmented cache (kept-logits): 77.8 GiB held, 74.7 at the peak,
        // 5.5 free in split segments: nothing to give back at the peak.
        let leak = report(70.0, 77.8, Some(5.5));
        assert!(spare_at_peak(&leak, 77.8 * GIB, 74.7 * GIB) < 0.0);
        // Without the split bytes reported, nothing is known to be given back.
        let silent = report(0.28, 75.5, None);
        assert_eq!(releasable(&silent), 0.0);
        assert!(spare_at_peak(&silent, 75.5 * GIB, 13.8 * GIB) < 0.0);
    }

    #[test]
    fn a_rise_is_the_caches_where_its_spare_grew_by_most_of_it() {
        // A warm-up: 62 GiB more held over 200 s, 61 of them empty segments at its peak.
        let mut warm = Spares::default();
        // A leak under a cache of 1 GiB that was there all along: 0.6 GiB more held.
        let mut leak = Spares::default();
        for t in 0..=200 {
            let t = t as f64;
            warm.push(t, 61.0 * GIB * t / 200.0);
            leak.push(t, 0.85 * GIB);
        }
        assert!(warm.explain(0.0, 62.0 * GIB));
        assert!(!leak.explain(0.0, 0.6 * GIB));
        // Since 100 s the warm-up's cache grew by half as much, and so did what it holds.
        assert!(warm.explain(100.0, 31.0 * GIB));
        // Readings older than the ones kept: the oldest kept stands for them.
        let mut long = Spares::default();
        for t in 0..2000 {
            long.push(t as f64, t as f64);
        }
        assert_eq!(long.readings.len(), SPARES_KEPT);
        assert!(long.readings.capacity() < 2 * SPARES_KEPT);
        assert!(long.explain(0.0, 2.0 * (1999.0 - long.readings[0].1)));
        assert!(!long.explain(0.0, 2.0 * (1999.0 - long.readings[0].1) + 1.0));
    }
}
