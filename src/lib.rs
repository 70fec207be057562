//! gpumem-exporter: GPU memory for Prometheus. Samples NVML and allocator reports from inside
//! training processes, computes leak slope, seconds-to-OOM, risk, fragmentation and imbalance,
//! and serves them on `/metrics`.
//!
//! Samples flow one way: [`source`] → [`engine`] (bounded [`history`], [`analysis`]) →
//! [`snapshot`] → [`exporter`] (`/metrics`), the CLI [`commands`] and the replay timeline.

pub mod analysis;
pub mod cli;
pub mod commands;
pub mod config;
pub mod engine;
pub mod exporter;
pub mod history;
pub mod ingest;
pub mod k8s;
pub mod model;
pub mod snapshot;
pub mod source;

/// Set up logging to stderr at the configured level (`RUST_LOG` wins when set).
pub fn init_logging(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("gpumem_exporter={level},warn"))
    });
    // Colour only for a person at a terminal: a log file or a pipe gets plain text, and
    // NO_COLOR (no-color.org) turns it off everywhere.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .try_init();
}
