//! Durations and byte sizes as people write them on the command line and in the config file:
//! one parser for every flag that takes a time.

use std::time::Duration;

pub const MIB: f64 = 1048576.0;
pub const GIB: f64 = 1073741824.0;

/// The sampling intervals the exporter accepts.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// Seconds written as a number (`90`, `2.5`) or a duration (`90s`, `2m`, `500ms`); not negative.
fn seconds(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let v = match s.parse::<f64>() {
        Ok(v) => v,
        Err(_) => humantime::parse_duration(s)
            .map(|d| d.as_secs_f64())
            .map_err(|_| format!("`{s}` is not a duration such as 500ms, 1s, 2m or 2.5"))?,
    };
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{s}`: must not be negative"));
    }
    Ok(v)
}

/// A duration, zero included (`--replay.report-interval 0s`: every recorded sample).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    seconds(s).map(Duration::from_secs_f64)
}

/// More than zero seconds (`--duration`).
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    match seconds(s)? {
        v if v > 0.0 => Ok(v),
        _ => Err(format!("`{}`: must be more than zero seconds", s.trim())),
    }
}

/// A sampling interval within what the exporter accepts.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = Duration::from_secs_f64(parse_seconds(s)?);
    if d < MIN_INTERVAL || d > MAX_INTERVAL {
        return Err(format!("`{s}` is out of range; accepted: 0.01..60 seconds"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_durations_mean_the_same() {
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_seconds("2m"), Ok(120.0));
        assert!(parse_seconds("0").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("soon").unwrap_err().contains("soon"));
        assert_eq!(parse_interval("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_interval("5ms").unwrap_err().contains("out of range"));
    }
}
