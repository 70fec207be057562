//! Prints the detection benchmark table (docs/analysis.md) for every trace in a folder.
//!
//! cargo build --release && cargo run --release --example detection -- data/traces

#[path = "../bench/detection.rs"]
mod detection;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/data/traces").into());
    let bin = detection::release_bin();
    let mut all = vec![];
    for group in detection::groups(std::path::Path::new(&dir)) {
        all.extend(detection::evaluate_group(
            &bin,
            &group,
            detection::PRODUCTION,
        ));
    }
    print!("{}", detection::table(&all));
}
