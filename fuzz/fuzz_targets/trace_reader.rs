//! The trace reader on arbitrary bytes; what it accepts is replayed to the end.
#![no_main]

use gpumem_exporter::source::replay::{parse_trace, ReplaySource};
use gpumem_exporter::source::Source;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(trace) = parse_trace(data, "fuzz") else {
        return;
    };
    let mut src = ReplaySource::from_traces(vec![trace]);
    let _ = src.duration();
    let mut steps = 0;
    while let Some(t) = src.next_time() {
        let _ = src.sample(t);
        steps += 1;
        assert!(steps <= data.len() + 1, "replay did not advance");
    }
});
