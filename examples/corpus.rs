//! Prints the forecast table of bench/RESULTS.md for the runs in a corpus folder, replayed at
//! the production rate (NVML every second, one allocator report a second) at four phases.
//!
//! cargo build --release && cargo run --release --example corpus -- tests/traces/corpus

#[path = "../bench/corpus.rs"]
mod corpus;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/tests/traces/corpus").into());
    let bin = std::env::var("GPUMEM_BIN").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/target/release/gpumem-exporter"
        )
        .into()
    });
    let mut all = vec![];
    for run in corpus::runs(std::path::Path::new(&dir)) {
        all.extend(corpus::evaluate(
            std::path::Path::new(&bin),
            &run,
            &[0.0, 0.25, 0.5, 0.75],
        ));
    }
    print!("{}", corpus::table(&all));
}
