//! Prints the forecast table of docs/forecast.md for the runs in a corpus folder, replayed at
//! the production rate (NVML every second, one allocator report a second) at four phases, as
//! recorded and under each transformation of the invariance tests, and the targets each run
//! misses (before the floors tests/corpus.rs allows).
//!
//! cargo build --release && cargo run --release --example corpus -- data/corpus/holdout
//! cargo run --release --example corpus -- data/corpus/dev --variants
//!
//! GPUMEM_BENCH_CONFIG=FILE replays with that configuration file (to try `analysis.*`).

#[path = "../bench/corpus.rs"]
mod corpus;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/data/corpus/dev").into());
    let variants = if args.iter().any(|a| a == "--variants") {
        corpus::VARIANTS.to_vec()
    } else {
        vec![corpus::Variant::Recorded]
    };
    let bin = corpus::detection::release_bin();
    let runs = corpus::runs(std::path::Path::new(&dir));
    let phases = [0.0, 0.25, 0.5, 0.75];
    let recorded: Vec<Vec<corpus::Score>> = runs
        .iter()
        .map(|r| corpus::evaluate(&bin, r, &phases))
        .collect();
    let mut misses = vec![];
    for v in variants {
        let mut all = vec![];
        for (run, rec) in runs.iter().zip(&recorded) {
            let scores = if v == corpus::Variant::Recorded {
                rec.clone()
            } else {
                corpus::evaluate_variant(&bin, run, v, &phases)
            };
            misses.extend(corpus::misses(run, v, &scores, rec));
            all.extend(scores);
        }
        println!("\n#### {}\n", v.name());
        print!("{}", corpus::table(&all));
    }
    println!("\n#### targets missed\n");
    for m in &misses {
        println!("- {m}");
    }
}
