//! Derived numbers: pure functions of the history. No I/O, no clock: time is the samples'
//! timestamps, so a trace replayed at any speed gives the numbers it gives live.

pub mod cache;
pub mod demand;
pub mod evidence;
pub mod fragmentation;
pub mod imbalance;
pub mod incident;
pub mod leak;
pub mod loading;
pub mod oom;
pub mod rounds;
pub mod stats;
pub mod trend;
pub mod verdict;
