//! The subcommands. Each uses the same engine as the exporter.

pub mod chart;
pub mod compare;
pub mod fragment;
pub mod leak;
pub mod oom;
pub mod profile;
pub mod replay;
pub mod serve;
pub mod sweep;
pub mod top;
pub mod workflow;
