//! What a caching allocator gives back before it fails a request. A request the driver refuses
//! makes it return its empty segments and try again; free bytes split among live blocks stay.

use crate::model::DeviceStats;

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
}
