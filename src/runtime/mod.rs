//! The runtime every face uses: the live sampler and shared state (`serve`, `top`), the
//! stepped sampler (the report commands), and the exporter's telemetry about itself.

pub mod live;
pub mod stepped;
pub mod telemetry;
