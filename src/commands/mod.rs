//! The subcommands. Each uses the same engine as the exporter.

pub mod replay;
pub mod serve;
