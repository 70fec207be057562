//! The allocator report parser on arbitrary bodies: it must answer Ok or a rejection, never
//! panic, and what it accepts must satisfy the documented limits.
#![no_main]

use gpumem_exporter::ingest::report::{parse, MAX_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = parse(data) {
        assert!(r.devices.len() <= 64 && r.events.len() <= 256);
        for d in &r.devices {
            assert!(!d.uuid.is_empty() && d.uuid.chars().count() <= 96);
            assert!(d.reserved_bytes <= MAX_BYTES && d.allocated_bytes <= MAX_BYTES);
            assert!(!d.uuid.chars().any(char::is_control));
        }
        if let Some(job) = &r.identity.job {
            assert!(job.chars().count() <= 128 && !job.chars().any(char::is_control));
        }
    }
});
