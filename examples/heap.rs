//! The exporter's live heap at 8 GPUs × 64 processes (or GPUS × PROCS), counted by a global
//! allocator: the simulator sampled once a simulated second for SECONDS (660: the history full),
//! a snapshot built and encoded as text after each sample, as a scrape a second does. Runs in
//! simulated time, so a full history takes seconds, not eleven minutes.
//!
//! cargo run --release --example heap
//! GPUS=1 PROCS=8 SECONDS=660 cargo run --release --example heap
//! JITTER_MS=5 cargo run --release --example heap   # samples up to 5 ms late, as live
//!
//! Prints the live heap (bytes held at the end of a second, after the scrape is dropped), the
//! highest live heap seen inside a second, and the allocations per second.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use gpumem_exporter::config::{Config, Scenario, SimGpuConfig};
use gpumem_exporter::engine::Engine;
use gpumem_exporter::exporter::encode;
use gpumem_exporter::runtime::telemetry::Counters;
use gpumem_exporter::source::sim::SimSource;
use gpumem_exporter::source::Source;

struct Counting;

static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);
static CALLS: AtomicU64 = AtomicU64::new(0);

fn grew(by: u64) {
    let live = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(live, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        CALLS.fetch_add(1, Relaxed);
        grew(l.size() as u64);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as u64, Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        CALLS.fetch_add(1, Relaxed);
        if new >= l.size() {
            grew((new - l.size()) as u64);
        } else {
            LIVE.fetch_sub((l.size() - new) as u64, Relaxed);
        }
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: Counting = Counting;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn mib(b: u64) -> String {
    format!("{:.2} MiB", b as f64 / 1048576.0)
}

fn main() {
    let (gpus, procs, seconds) = (env("GPUS", 8), env("PROCS", 64), env("SECONDS", 660));
    let jitter_ms = env("JITTER_MS", 0) as f64;
    let mut cfg = Config::default();
    cfg.sim.gpus = (0..gpus)
        .map(|_| SimGpuConfig {
            processes: Some(procs as u32),
            ..SimGpuConfig::new(Scenario::Processes)
        })
        .collect();
    let mut src = SimSource::new(&cfg.sim);
    let mut engine = Engine::new(&cfg, "sim");
    let counters = Counters::default();
    let mut out = String::new();
    let t0 = 1.8e9;
    let mut calls_before = 0;
    println!("{gpus} GPUs x {procs} processes, 1 s sampling, a text scrape after each sample");
    println!(
        "{:>6} {:>14} {:>14} {:>12}",
        "t_s", "live", "peak in s", "allocs/s"
    );
    for i in 0..=seconds {
        PEAK.store(LIVE.load(Relaxed), Relaxed);
        // A live sampler wakes a little late, by a varying amount: with JITTER_MS, up to that
        // much (a fixed pseudo-random sequence), so that some analyses land two buckets apart
        // as they do live.
        let late = jitter_ms * ((i * 7919) % 1000) as f64 / 1e6;
        let obs = src.sample(t0 + i as f64 + late);
        engine.observe(&obs);
        drop(obs);
        let snap = engine.current();
        out.clear();
        encode::text(&snap, &counters, "heap", &mut out).expect("encode");
        drop(snap);
        if i % 60 == 0 || i == seconds {
            let calls = CALLS.load(Relaxed);
            let per_s = if i == 0 {
                calls
            } else {
                (calls - calls_before) / 60
            };
            calls_before = calls;
            println!(
                "{i:>6} {:>14} {:>14} {per_s:>12}",
                mib(LIVE.load(Relaxed) - out.capacity() as u64),
                mib(PEAK.load(Relaxed) - out.capacity() as u64),
            );
        }
    }
    println!(
        "(the scrape's text, {} kB, is left out: the server streams it in 64 kB chunks)",
        out.len() / 1000
    );
}
