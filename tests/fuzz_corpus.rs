//! Every file of the fuzzing corpora (fuzz/corpus/<target>/) through the function its fuzz
//! target drives, as a plain test: the seeds and every crash the fuzzers ever found stay
//! covered in CI, without libFuzzer or a nightly compiler.

use std::path::{Path, PathBuf};

use gpumem_exporter::config::Config;
use gpumem_exporter::ingest::report::{parse, MAX_BYTES};
use gpumem_exporter::source::replay::{parse_trace, ReplaySource};
use gpumem_exporter::source::Source;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(
        files.len() >= 10,
        "{}: expected a seed corpus, found {} files",
        dir.display(),
        files.len()
    );
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// The same body as fuzz/fuzz_targets/ingest_body.rs.
fn ingest_body(data: &[u8]) -> bool {
    match parse(data) {
        Ok(r) => {
            assert!(r.devices.len() <= 64 && r.events.len() <= 256);
            for d in &r.devices {
                assert!(!d.uuid.is_empty() && d.uuid.chars().count() <= 96);
                assert!(d.reserved_bytes <= MAX_BYTES && d.allocated_bytes <= MAX_BYTES);
                assert!(!d.uuid.chars().any(char::is_control));
            }
            if let Some(job) = &r.identity.job {
                assert!(job.chars().count() <= 128 && !job.chars().any(char::is_control));
            }
            true
        }
        Err(_) => false,
    }
}

/// The same body as fuzz/fuzz_targets/config_yaml.rs.
fn config_yaml(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    match Config::from_yaml(text) {
        Ok(mut cfg) => {
            cfg.web.config_file = None;
            cfg.validate().is_ok()
        }
        Err(_) => false,
    }
}

/// The same body as fuzz/fuzz_targets/trace_reader.rs.
fn trace_reader(data: &[u8]) -> bool {
    let Ok(trace) = parse_trace(data, "fuzz") else {
        return false;
    };
    let mut src = ReplaySource::from_traces(vec![trace]);
    let _ = src.duration();
    let mut steps = 0;
    while let Some(t) = src.next_time() {
        let _ = src.sample(t);
        steps += 1;
        assert!(steps <= data.len() + 1, "replay did not advance");
    }
    true
}

fn replay(target: &str, f: fn(&[u8]) -> bool) {
    let mut accepted = 0;
    let files = corpus(target);
    for (path, bytes) in &files {
        let ok = std::panic::catch_unwind(|| f(bytes))
            .unwrap_or_else(|_| panic!("{target}: {} panicked", path.display()));
        accepted += ok as usize;
    }
    // The seeds hold valid inputs as well as broken ones: both paths stay exercised.
    assert!(accepted > 0, "{target}: no corpus file was accepted");
    assert!(
        accepted < files.len(),
        "{target}: every corpus file was accepted"
    );
}

#[test]
fn ingest_body_corpus() {
    replay("ingest_body", ingest_body);
}

#[test]
fn config_yaml_corpus() {
    replay("config_yaml", config_yaml);
}

#[test]
fn trace_reader_corpus() {
    replay("trace_reader", trace_reader);
}
