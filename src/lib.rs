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
pub mod connections;
pub mod engine;
pub mod exporter;
pub mod history;
pub mod ingest;
pub mod k8s;
pub mod logging;
pub mod model;
pub mod pace;
pub mod runtime;
pub mod settings;
pub mod snapshot;
pub mod source;
pub mod units;
