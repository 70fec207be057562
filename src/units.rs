//! Durations and byte sizes as people write them on the command line and in the config file:
//! one parser for every flag that takes a time.

use std::time::Duration;

pub const MIB: f64 = 1048576.0;
pub const GIB: f64 = 1073741824.0;

/// The sampling intervals the exporter accepts.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// Seconds written as a number (`90`, `2.5`, `-1`) or a duration (`90s`, `2m`, `500ms`,
/// `-1s`), of either sign: only the writing is checked here.
fn signed_seconds(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let v = match s.parse::<f64>() {
        Ok(v) => v,
        Err(_) => {
            let (sign, magnitude) = match s.strip_prefix('-') {
                Some(rest) => (-1.0, rest),
                None => (1.0, s),
            };
            humantime::parse_duration(magnitude)
                .map(|d| sign * d.as_secs_f64())
                .map_err(|_| format!("`{s}` is not a duration such as 500ms, 1s, 2m or 2.5"))?
        }
    };
    if !v.is_finite() {
        return Err(format!("`{s}` is not a finite number of seconds"));
    }
    Ok(v)
}

/// Seconds, not negative.
fn seconds(s: &str) -> Result<f64, String> {
    match signed_seconds(s)? {
        v if v < 0.0 => Err(format!("`{}`: must not be negative", s.trim())),
        v => Ok(v),
    }
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

/// A sampling interval within what the exporter accepts; any value outside it, negative
/// included, is answered with the range.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let v = signed_seconds(s)?;
    if v < MIN_INTERVAL.as_secs_f64() || v > MAX_INTERVAL.as_secs_f64() {
        return Err(format!(
            "`{}` is out of range; accepted: 10ms..60s (0.01..60 seconds)",
            s.trim()
        ));
    }
    Ok(Duration::from_secs_f64(v))
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
        for v in ["-1s", "-1", "0", "61s"] {
            let e = parse_interval(v).unwrap_err();
            assert!(e.contains("out of range; accepted: 10ms..60s"), "{v}: {e}");
        }
        assert!(parse_duration("-2m")
            .unwrap_err()
            .contains("must not be negative"));
    }
}
