//! Allocator reports from inside training processes (docs/ingest.md).

pub mod admission;
pub mod report;
pub mod server;
pub mod socket;
