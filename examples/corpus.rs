//! Prints the forecast table of bench/RESULTS.md for the runs in a corpus folder, replayed at
//! the production rate (NVML every second, one allocator report a second) at four phases.
//!
//! cargo build --release && cargo run --release --example corpus -- tests/traces/corpus/holdout

#[path = "../bench/corpus.rs"]
mod corpus;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/tests/traces/corpus/dev").into());
    let bin = corpus::detection::release_bin();
    let mut all = vec![];
    for run in corpus::runs(std::path::Path::new(&dir)) {
        all.extend(corpus::evaluate(&bin, &run, &[0.0, 0.25, 0.5, 0.75]));
    }
    print!("{}", corpus::table(&all));
}
