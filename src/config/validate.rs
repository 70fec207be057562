//! Validation of the effective configuration: the YAML file read, flags applied, and every
//! setting checked against its range once at start, each error naming its field.

use super::*;

impl Config {
    /// Parse a YAML document; errors name the field path.
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let de = serde_yaml_ng::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." {
                "config".to_string()
            } else {
                path
            };
            let mut message = e.into_inner().to_string();
            // The YAML parser puts the path where it stopped in front of its message; the
            // field already names it.
            if let Some((at, rest)) = message.split_once(": ") {
                let within = |sep: &str| field.starts_with(&format!("{at}{sep}"));
                if at == field || within(".") || within("[") {
                    message = rest.to_string();
                }
            }
            err(&field, message)
        })
    }

    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| err("--config", format!("cannot read {}: {e}", path.display())))?;
        Config::from_yaml(&text)
    }

    pub fn to_yaml(&self) -> String {
        serde_yaml_ng::to_string(self).expect("config serialises")
    }

    /// Everything a value's type cannot say: ranges and relations between fields.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.sample_interval < units::MIN_INTERVAL || self.sample_interval > units::MAX_INTERVAL
        {
            return Err(err(
                "sample_interval",
                format!(
                    "{} is out of range; accepted: 10ms..60s",
                    humantime::format_duration(self.sample_interval)
                ),
            ));
        }
        if !matches!(
            self.log_level.as_str(),
            "error" | "warn" | "info" | "debug" | "trace"
        ) {
            return Err(err(
                "log_level",
                format!(
                    "`{}` is not a level; accepted: error, warn, info, debug, trace",
                    self.log_level
                ),
            ));
        }
        if !matches!(self.log_format.as_str(), "logfmt" | "json") {
            return Err(err(
                "log_format",
                format!(
                    "`{}` is not a log format; accepted: logfmt, json",
                    self.log_format
                ),
            ));
        }
        parse_listen_address(&self.web.listen_address).map_err(|m| err("web.listen_address", m))?;
        check_telemetry_path(&self.web.telemetry_path).map_err(|m| err("web.telemetry_path", m))?;
        if !(1..=65_536).contains(&self.web.max_connections) {
            return Err(err("web.max_connections", "accepted: 1..65536"));
        }
        if self.web.idle_timeout < Duration::from_millis(100)
            || self.web.idle_timeout > Duration::from_secs(600)
        {
            return Err(err("web.idle_timeout", "accepted: 100ms..10m"));
        }
        if !(100..=10_000_000).contains(&self.web.max_series) {
            return Err(err("web.max_series", "accepted: 100..10000000"));
        }
        duration_in(
            "nvml.deadline",
            self.nvml.deadline,
            (Duration::from_millis(10), ""),
            (Duration::from_secs(60), ""),
        )?;
        let h = &self.history;
        if h.resolution < Duration::from_millis(100) || h.resolution > Duration::from_secs(60) {
            return Err(err("history.resolution", "accepted: 100ms..60s"));
        }
        if h.window < h.resolution * 10 || h.window > Duration::from_secs(24 * 3600) {
            return Err(err(
                "history.window",
                "accepted: at least 10 × history.resolution, at most 24h",
            ));
        }
        if h.max_processes == 0 || h.max_processes > 100_000 {
            return Err(err("history.max_processes", "accepted: 1..100000"));
        }
        let a = &self.analysis;
        if !(a.leak_threshold_mib_per_min.is_finite() && a.leak_threshold_mib_per_min > 0.0) {
            return Err(err(
                "analysis.leak_threshold_mib_per_min",
                "accepted: a number greater than 0",
            ));
        }
        if !(a.leak_significance > 0.0 && a.leak_significance < 0.5) {
            return Err(err("analysis.leak_significance", "accepted: 0 < p < 0.5"));
        }
        let none = Duration::ZERO;
        let day = Duration::from_secs(24 * 3600);
        let f = |field: &str, d: Duration, lo: (Duration, &str), hi: (Duration, &str)| {
            duration_in(field, d, lo, hi)
        };
        // Each window where its analysis can work: a floor of several buckets, a leak test on
        // several floors, a trend of several buckets, every window inside the history.
        f(
            "history.expire_after",
            h.expire_after,
            (
                self.sample_interval.max(Duration::from_secs(1)),
                "sample_interval, at least 1s",
            ),
            (day, ""),
        )?;
        f("analysis.warmup", a.warmup, (none, ""), (day, ""))?;
        f(
            "analysis.floor_window",
            a.floor_window,
            (h.resolution, "history.resolution"),
            (Duration::from_secs(600), ""),
        )?;
        f(
            "analysis.leak_window",
            a.leak_window,
            (h.resolution * 3, "3 × history.resolution"),
            (h.window, "history.window"),
        )?;
        f(
            "analysis.leak_min_span",
            a.leak_min_span,
            (a.floor_window * 3, "3 × analysis.floor_window"),
            (a.leak_window, "analysis.leak_window"),
        )?;
        f(
            "analysis.leak_persistence",
            a.leak_persistence,
            (none, ""),
            (day, ""),
        )?;
        f(
            "analysis.eta_window",
            a.eta_window,
            (h.resolution * 3, "3 × history.resolution"),
            (h.window, "history.window"),
        )?;
        f(
            "analysis.eta_min_span",
            a.eta_min_span,
            (h.resolution * 3, "3 × history.resolution"),
            (a.eta_window, "analysis.eta_window"),
        )?;
        f("analysis.eta_warmup", a.eta_warmup, (none, ""), (day, ""))?;
        // An ETA past the horizon is not shown: below medium_eta it could never say medium.
        f(
            "analysis.eta_horizon",
            a.eta_horizon,
            (a.risk.medium_eta, "analysis.risk.medium_eta"),
            (day * 7, ""),
        )?;
        f(
            "analysis.peak_window",
            a.peak_window,
            (h.resolution, "history.resolution"),
            (h.window, "history.window"),
        )?;
        f(
            "analysis.risk.critical_eta",
            a.risk.critical_eta,
            (Duration::from_secs(1), ""),
            (a.risk.high_eta, "analysis.risk.high_eta"),
        )?;
        if a.leak_threshold_mib_per_min > 1_048_576.0 {
            return Err(err(
                "analysis.leak_threshold_mib_per_min",
                format!(
                    "{} is out of range; accepted: more than 0, at most 1048576 (1 TiB a minute: above it no GPU could ever leak)",
                    a.leak_threshold_mib_per_min
                ),
            ));
        }
        if !(a.eta_max_extrapolation.is_finite() && a.eta_max_extrapolation >= 1.0) {
            return Err(err(
                "analysis.eta_max_extrapolation",
                "accepted: a number ≥ 1",
            ));
        }
        let r = &a.risk;
        if !(r.critical_eta <= r.high_eta && r.high_eta <= r.medium_eta) {
            return Err(err(
                "analysis.risk",
                "critical_eta ≤ high_eta ≤ medium_eta is required",
            ));
        }
        for (f, v) in [
            ("analysis.risk.medium_used_fraction", r.medium_used_fraction),
            ("analysis.risk.high_used_fraction", r.high_used_fraction),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(err(f, "accepted: a fraction in (0, 1]"));
            }
        }
        if r.medium_used_fraction > r.high_used_fraction {
            return Err(err(
                "analysis.risk.medium_used_fraction",
                "must not exceed high_used_fraction",
            ));
        }
        match u32::from_str_radix(self.ingest.socket_mode.trim_start_matches("0o"), 8) {
            Ok(m) if m <= 0o777 && m & 0o600 == 0o600 => {}
            Ok(m) if m <= 0o777 => {
                return Err(err(
                    "ingest.socket_mode",
                    format!(
                        "`{}` leaves the socket's owner unable to connect (connecting needs read and write); accepted: an octal mode with the owner's 6, 0600..0777, e.g. 0660",
                        self.ingest.socket_mode
                    ),
                ))
            }
            _ => {
                return Err(err(
                    "ingest.socket_mode",
                    format!(
                        "`{}` is not an octal mode; accepted: 0600..0777, e.g. 0660",
                        self.ingest.socket_mode
                    ),
                ))
            }
        }
        let socket_bytes = self.ingest.socket.as_os_str().len();
        if socket_bytes > crate::ingest::socket::MAX_PATH_BYTES {
            return Err(err(
                "ingest.socket",
                format!(
                    "`{}` is {socket_bytes} bytes long; a Unix socket's path holds at most {} bytes: choose a shorter one",
                    self.ingest.socket.display(),
                    crate::ingest::socket::MAX_PATH_BYTES
                ),
            ));
        }
        if let Some(a) = self.ingest.tcp_address() {
            let addr = parse_listen_address(a).map_err(|m| err("ingest.listen_address", m))?;
            if !addr.ip().is_loopback() && !self.ingest.allow_remote {
                return Err(err(
                    "ingest.listen_address",
                    "is not a loopback address; set ingest.allow_remote (--ingest.allow-remote) to open it",
                ));
            }
        }
        if self.ingest.max_body_bytes < 1024 || self.ingest.max_body_bytes > 64 << 20 {
            return Err(err("ingest.max_body_bytes", "accepted: 1024..67108864"));
        }
        let i = &self.ingest;
        // The client reports every second: a report is stale after two missed.
        duration_in(
            "ingest.expire_after",
            i.expire_after,
            (Duration::from_secs(2), ""),
            (Duration::from_secs(24 * 3600), ""),
        )?;
        // The client sends the largest free block at least every 30 s.
        duration_in(
            "ingest.largest_block_ttl",
            i.largest_block_ttl,
            (Duration::from_secs(30), ""),
            (Duration::from_secs(24 * 3600), ""),
        )?;
        if i.listing_grace > Duration::from_secs(300) {
            return Err(err("ingest.listing_grace", "accepted: 0s..5m"));
        }
        if !(1..=10_000).contains(&i.max_reports_per_second) {
            return Err(err("ingest.max_reports_per_second", "accepted: 1..10000"));
        }
        // Each within history.max_processes and the first in effect (the table clamps them):
        // a smaller table needs no second setting lowered with it.
        for (field, n) in [
            ("ingest.max_tcp_processes", i.max_tcp_processes),
            (
                "ingest.max_tcp_processes_per_address",
                i.max_tcp_processes_per_address,
            ),
        ] {
            if !(1..=100_000).contains(&n) {
                return Err(err(
                    field,
                    format!("{n} is out of range; accepted: 1..100000"),
                ));
            }
        }
        if !(1..=65_536).contains(&i.max_connections) {
            return Err(err("ingest.max_connections", "accepted: 1..65536"));
        }
        if i.max_connections_per_process == 0 || i.max_connections_per_process > i.max_connections {
            return Err(err(
                "ingest.max_connections_per_process",
                "accepted: 1..ingest.max_connections",
            ));
        }
        for (field, d) in [
            ("ingest.idle_timeout", i.idle_timeout),
            ("ingest.read_timeout", i.read_timeout),
        ] {
            if d < Duration::from_millis(100) || d > Duration::from_secs(600) {
                return Err(err(field, "accepted: 100ms..10m"));
            }
        }
        if self.sim.gpus.is_empty() || self.sim.gpus.len() > 64 {
            return Err(err("sim.gpus", "accepted: 1..64 GPUs"));
        }
        for (i, g) in self.sim.gpus.iter().enumerate() {
            if !(g.total_gib.is_finite() && g.total_gib >= 1.0 && g.total_gib <= 4096.0) {
                return Err(err(
                    &format!("sim.gpus[{i}].total_gib"),
                    "accepted: 1..4096",
                ));
            }
            if let Some(r) = g.ramp_seconds {
                if !(r.is_finite() && r >= 10.0) {
                    return Err(err(
                        &format!("sim.gpus[{i}].ramp_seconds"),
                        "accepted: at least 10",
                    ));
                }
            }
            if let Some(l) = g.leak_mib_per_min {
                if !(l.is_finite() && l >= 0.0) {
                    return Err(err(
                        &format!("sim.gpus[{i}].leak_mib_per_min"),
                        "accepted: a number ≥ 0",
                    ));
                }
            }
            if let Some(p) = g.processes {
                if p == 0 || p > 1024 {
                    return Err(err(
                        &format!("sim.gpus[{i}].processes"),
                        "accepted: 1..1024",
                    ));
                }
            }
        }
        duration_in(
            "kubernetes.refresh",
            self.kubernetes.refresh,
            (Duration::from_secs(1), ""),
            (Duration::from_secs(24 * 3600), ""),
        )?;
        let api = &self.kubernetes.api_url;
        if !(api.is_empty() || api.starts_with("https://") || api.starts_with("http://")) {
            return Err(err(
                "kubernetes.api_url",
                "must start with https:// (or http:// for a local proxy)",
            ));
        }
        if !(self.replay.speed.is_finite() && (0.01..=100_000.0).contains(&self.replay.speed)) {
            return Err(err(
                "replay.speed",
                format!(
                    "{} is out of range; accepted: 0.01..100000",
                    self.replay.speed
                ),
            ));
        }
        // 0 sends every recorded sample; otherwise a client's rate.
        let ri = self.replay.report_interval;
        if !ri.is_zero() && !(units::MIN_INTERVAL..=units::MAX_INTERVAL).contains(&ri) {
            return Err(err(
                "replay.report_interval",
                format!(
                    "`{}` is out of range; accepted: 0s (every recorded sample) or 10ms..1m (a client's rate)",
                    show_duration(ri)
                ),
            ));
        }
        Ok(())
    }
}

/// A duration as a person writes it: whole days as days (humantime would say `100d` as
/// `3months 8days 16h 19m 12s`), anything else as humantime does.
pub(super) fn show_duration(d: Duration) -> String {
    const DAY: u64 = 86_400;
    if d.as_secs() >= DAY && d.as_secs() % DAY == 0 && d.subsec_nanos() == 0 {
        format!("{}d", d.as_secs() / DAY)
    } else {
        humantime::format_duration(d).to_string()
    }
}

/// `d` within `lo..=hi`, or an error with the range; a bound comes with the setting it is
/// taken from, where it is one.
pub(super) fn duration_in(
    field: &str,
    d: Duration,
    lo: (Duration, &str),
    hi: (Duration, &str),
) -> Result<(), ConfigError> {
    if d >= lo.0 && d <= hi.0 {
        return Ok(());
    }
    let show = |(b, from): (Duration, &str)| {
        let v = show_duration(b);
        if from.is_empty() {
            v
        } else {
            format!("{from} ({v})")
        }
    };
    Err(err(
        field,
        format!(
            "`{}` is out of range; accepted: {}..{}",
            show_duration(d),
            show(lo),
            show(hi)
        ),
    ))
}

/// The web endpoints besides the telemetry path, which it must leave to them.
pub const WEB_ROUTES: [&str; 4] = ["/", "/-/healthy", "/-/ready", "/api/v1/snapshot"];

/// A telemetry path the router takes as a plain path: absolute, none of the other endpoints,
/// and nothing the router would read as a parameter (`{id}`, `*rest`, or the older `:id`).
pub(super) fn check_telemetry_path(p: &str) -> Result<(), String> {
    if !p.starts_with('/') {
        return Err(format!("`{p}` must be an absolute path, e.g. /metrics"));
    }
    if WEB_ROUTES.contains(&p) {
        return Err(format!(
            "`{p}` is the path of another endpoint ({}); choose another, e.g. /metrics",
            WEB_ROUTES.join(", ")
        ));
    }
    if let Some(c) = p
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-._~/".contains(*c)))
    {
        return Err(format!(
            "`{p}` holds `{c}`; accepted: letters, digits, `-`, `.`, `_`, `~` and `/`, e.g. /metrics"
        ));
    }
    Ok(())
}
