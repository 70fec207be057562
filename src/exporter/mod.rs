//! What Prometheus and people see: metric families, their encodings, and the HTTP endpoints.

pub mod encode;
pub mod families;
pub mod http;
pub mod webconfig;
