//! Fragmentation of an allocator's cache.
//!
//! The usual ratio `(reserved − allocated) / reserved` counts whole free segments as
//! fragmentation, yet those are reusable. It is kept under its honest name, the cached but
//! unallocated ratio. True fragmentation is the share of the free cache stranded in split
//! segments (`inactive_split_bytes / free cached bytes`): a segment that is partly in use
//! cannot be given back to the driver, and its free pieces serve only requests that fit in
//! them. Whole free segments are not fragmentation: under pressure the allocator releases
//! them and retries, so they serve a request of any size. `1 − largest free block / free cached
//! bytes` would count them (a healthy PyTorch run holds its cache in many whole segments and
//! scores 0.9 on it), so it is used only where the allocator reports no split bytes (JAX).

/// Below this much free cache (or this share of the reserved bytes) the cache is all but in
/// use, and the ratio of a few leftover blocks would swing between 0 and 1 on noise.
pub const MIN_FREE_CACHED: f64 = (64u64 << 20) as f64;
pub const MIN_FREE_CACHED_SHARE: f64 = 0.02;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AllocatorView {
    pub allocated: f64,
    pub reserved: f64,
    pub inactive_split: Option<f64>,
    pub largest_free_block: Option<f64>,
}

impl AllocatorView {
    pub fn free_cached(&self) -> f64 {
        (self.reserved - self.allocated).max(0.0)
    }
}

pub fn cached_unallocated_ratio(v: &AllocatorView) -> Option<f64> {
    (v.reserved > 0.0).then(|| (v.free_cached() / v.reserved).clamp(0.0, 1.0))
}

pub fn fragmentation_ratio(v: &AllocatorView) -> Option<f64> {
    let free = v.free_cached();
    if free < MIN_FREE_CACHED.max(MIN_FREE_CACHED_SHARE * v.reserved) {
        return if v.reserved > 0.0 { Some(0.0) } else { None };
    }
    let r = match (v.inactive_split, v.largest_free_block) {
        (Some(split), _) => split / free,
        (None, Some(largest)) => 1.0 - largest / free,
        (None, None) => return None,
    };
    Some(r.clamp(0.0, 1.0))
}

/// Several processes on one GPU: each ratio weighted by the bytes it is a ratio of.
pub fn combine(views: &[AllocatorView]) -> (Option<f64>, Option<f64>) {
    let reserved: f64 = views.iter().map(|v| v.reserved).sum();
    let free: f64 = views.iter().map(|v| v.free_cached()).sum();
    let cached = (reserved > 0.0).then(|| (free / reserved).clamp(0.0, 1.0));
    let mut weighted = 0.0;
    let mut weight = 0.0;
    for v in views {
        if let Some(r) = fragmentation_ratio(v) {
            weighted += r * v.free_cached();
            weight += v.free_cached();
        }
    }
    let frag = if weight >= MIN_FREE_CACHED {
        Some((weighted / weight).clamp(0.0, 1.0))
    } else if views.iter().any(|v| fragmentation_ratio(v).is_some()) {
        Some(0.0)
    } else {
        None
    };
    (cached, frag)
}

/// Where a fragmentation ratio turns from one band to the next.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Bands {
    pub good_below: f64,
    pub moderate_below: f64,
    pub serious_below: f64,
}

/// The bands (below 0.15 good, 0.30 moderate, 0.40 severe: past 0.4 a large request often
/// finds no block that fits), the one place they are written: reports, charts, advice and the risk's
/// recommendation read them from here (the alert rules carry the same numbers).
pub const BANDS: Bands = Bands {
    good_below: 0.15,
    moderate_below: 0.30,
    serious_below: 0.40,
};

pub fn band(ratio: f64) -> &'static str {
    if ratio < BANDS.good_below {
        "good"
    } else if ratio < BANDS.moderate_below {
        "moderate"
    } else if ratio < BANDS.serious_below {
        "serious"
    } else {
        "severe"
    }
}

pub fn advice(ratio: f64) -> &'static str {
    match band(ratio) {
        "good" => "Fragmentation is low; nothing to do",
        "moderate" => "Some cache is in slivers: keep tensor shapes uniform, pre-allocate buffers that live across steps",
        "serious" => "Much of the cache is unusable for large requests: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, call torch.cuda.empty_cache() at phase boundaries",
        _ => "Severe fragmentation: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb), avoid interleaving long-lived and short-lived allocations of many sizes, empty the cache at phase boundaries",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const GIB: f64 = (1u64 << 30) as f64;

    fn view(alloc: f64, reserved: f64, split: Option<f64>, largest: Option<f64>) -> AllocatorView {
        AllocatorView {
            allocated: alloc,
            reserved,
            inactive_split: split,
            largest_free_block: largest,
        }
    }

    #[test]
    fn whole_free_segments_are_cached_not_fragmented() {
        // 4 GiB free in whole segments, the largest of them 1 GiB: reusable, not fragmented.
        let v = view(1.0 * GIB, 5.0 * GIB, Some(0.0), Some(1.0 * GIB));
        assert!((cached_unallocated_ratio(&v).unwrap() - 0.8).abs() < 1e-9);
        assert!(fragmentation_ratio(&v).unwrap() < 1e-9);
    }

    #[test]
    fn slivers_are_fragmentation() {
        let v = view(1.0 * GIB, 5.0 * GIB, Some(3.0 * GIB), Some(0.5 * GIB));
        assert!((fragmentation_ratio(&v).unwrap() - 0.75).abs() < 1e-9);
        // No split bytes reported (JAX): fall back on the largest free block.
        let v = view(1.0 * GIB, 5.0 * GIB, None, Some(1.0 * GIB));
        assert!((fragmentation_ratio(&v).unwrap() - 0.75).abs() < 1e-9);
    }

    #[test]
    fn no_free_cache_means_no_fragmentation() {
        let v = view(5.0 * GIB, 5.0 * GIB, Some(0.0), None);
        assert_eq!(fragmentation_ratio(&v), Some(0.0));
        assert_eq!(fragmentation_ratio(&view(0.0, 0.0, None, None)), None);
    }

    #[test]
    fn stale_largest_block_is_clamped() {
        // The largest block is sampled less often than the other numbers and may be stale.
        let v = view(1.0 * GIB, 2.0 * GIB, None, Some(3.0 * GIB));
        assert_eq!(fragmentation_ratio(&v), Some(0.0));
    }

    #[test]
    fn combined_is_weighted_by_free_cache() {
        let a = view(0.0, 4.0 * GIB, None, Some(1.0 * GIB)); // 0.75 of 4 GiB
        let b = view(0.0, 1.0 * GIB, None, Some(1.0 * GIB)); // 0 of 1 GiB
        let (cached, frag) = combine(&[a, b]);
        assert_eq!(cached, Some(1.0));
        assert!((frag.unwrap() - 0.6).abs() < 1e-9);
    }

    #[test]
    fn bands_split_where_the_docs_say() {
        assert_eq!(band(0.1), "good");
        assert_eq!(band(0.2), "moderate");
        assert_eq!(band(0.35), "serious");
        assert_eq!(band(0.45), "severe");
    }
}
