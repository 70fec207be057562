//! `oom`: out-of-memory risk per GPU, as a `risk_assessment` report, from the engine's
//! forecast (seconds until the peak demand no longer fits) and risk levels.
//!
//! `--threshold PCT` maps onto the engine's risk settings: a GPU whose used share reaches PCT
//! is at least "high", and at least "medium" from PCT − 10. "critical" comes from the forecast
//! (memory runs out within `analysis.risk.critical_eta`, a minute by default) or an allocation
//! that just failed. Exit status 2 when any GPU reached critical during the run.

use std::collections::BTreeMap;
use std::io::Write;
use std::ops::ControlFlow;
use std::process::ExitCode;

use serde::Serialize;

use super::schema;
use super::workflow::{self, round, selected};
use crate::analysis::oom::{RiskLevel, RiskReason};
use crate::analysis::trend::Trend;
use crate::cli::OomArgs;
use crate::config::Config;
use crate::runtime::stepped::{self, Sampler};
use crate::snapshot::{GpuView, Snapshot};
use crate::units::MIB;

#[derive(Debug, Clone, Serialize)]
pub struct RiskAssessment {
    pub risk_level: RiskLevel,
    pub confidence: f64,
    pub current_usage_percent: f64,
    /// MiB per second (the field's name says MB, as the report's readers expect).
    pub growth_rate_mb_per_sec: f64,
    pub predicted_oom_time_seconds: Option<f64>,
    pub recommendation: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct LevelChange {
    pub t: f64,
    pub from: Option<RiskLevel>,
    pub to: RiskLevel,
    pub reason: RiskReason,
    pub usage_percent: f64,
    pub predicted_oom_time_seconds: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Worst {
    pub risk_level: RiskLevel,
    pub reason: RiskReason,
    pub t: f64,
    pub usage_percent: f64,
    pub predicted_oom_time_seconds: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceRisk {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    /// The assessment at the end of the run.
    pub risk_assessment: RiskAssessment,
    /// What set the level: none, eta, used_fraction, alloc_retries.
    pub reason: RiskReason,
    /// The highest level during the run, and when it was first reached.
    pub worst: Worst,
    pub level_changes: Vec<LevelChange>,
    pub max_usage_percent: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Thresholds {
    pub medium_used_percent: f64,
    pub high_used_percent: f64,
    pub critical_eta_seconds: f64,
    pub high_eta_seconds: f64,
    pub medium_eta_seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct OomReport {
    #[serde(flatten)]
    pub header: schema::RunHeader,
    pub threshold_percent: Option<f64>,
    pub thresholds: Thresholds,
    pub critical_reached: bool,
    pub devices: BTreeMap<String, DeviceRisk>,
}

/// The engine's risk settings for `--threshold PCT`.
pub fn apply_threshold(cfg: &mut Config, pct: f64) {
    cfg.analysis.risk.high_used_fraction = pct / 100.0;
    cfg.analysis.risk.medium_used_fraction = ((pct - 10.0) / 100.0).max(0.0);
    cfg.analysis.risk.high_used_needs_growth = false;
}

/// Points of a floor trend for full confidence.
const FULL_POINTS: f64 = 12.0;

/// How sure the level is, 0..1. Observed facts (the allocator retried, the device is that
/// full) are sure; a forecast is as sure as its trend is significant and
/// long; "low" is as sure as there is evidence, less when the floor rises significantly.
pub fn confidence(reason: RiskReason, trend: Option<&Trend>) -> f64 {
    let evidence = |t: &Trend| (t.points as f64 / FULL_POINTS).min(1.0);
    let c = match reason {
        RiskReason::AllocRetries => 0.9,
        RiskReason::UsedFraction => 0.95,
        RiskReason::Eta => trend
            .map(|t| (1.0 - t.p_value) * evidence(t))
            .unwrap_or(0.5),
        RiskReason::None => match trend {
            None => 0.2,
            Some(t) if t.slope > 0.0 && t.p_value < 0.01 => 0.6 * evidence(t),
            Some(t) => evidence(t),
        },
    };
    round(c.clamp(0.0, 1.0), 2)
}

/// Per GPU: its risk level over the run, its worst moment and its last assessment.
struct DeviceState {
    index: u32,
    uuid: String,
    name: String,
    level: Option<RiskLevel>,
    changes: Vec<LevelChange>,
    worst: Option<Worst>,
    max_usage: f64,
    last: Option<(RiskAssessment, RiskReason)>,
}

fn usage_percent(g: &GpuView) -> f64 {
    round(g.used_fraction().unwrap_or(0.0) * 100.0, 2)
}

fn assess(g: &GpuView, trend: Option<&Trend>) -> RiskAssessment {
    let growth = g
        .growth_bytes_per_second
        .or(trend.map(|t| t.slope))
        .unwrap_or(0.0);
    RiskAssessment {
        risk_level: g.risk,
        confidence: confidence(g.risk_reason, trend),
        current_usage_percent: usage_percent(g),
        growth_rate_mb_per_sec: round(growth / MIB, 3),
        predicted_oom_time_seconds: g.eta_seconds.map(|e| round(e, 1)),
        recommendation: g.recommendation.to_string(),
    }
}

fn describe(g: &GpuView) -> String {
    let eta = g
        .eta_seconds
        .map(|e| format!("  oom in {:.0} s", e))
        .unwrap_or_default();
    format!(
        "used {:.1}%{eta}  reason {}",
        usage_percent(g),
        g.risk_reason.as_str()
    )
}

pub fn run(cfg: &Config, args: OomArgs) -> anyhow::Result<ExitCode> {
    let mut cfg = cfg.clone();
    if let Some(t) = args.threshold {
        if !(t.is_finite() && t > 0.0 && t <= 100.0) {
            return Err(stepped::usage(
                "--threshold",
                format!("{t} is not a percentage in (0, 100]"),
            ));
        }
        apply_threshold(&mut cfg, t);
    }
    if let Some(o) = &args.output {
        workflow::check_writable(o, "--output")?;
    }
    let mut sampler = Sampler::open(&cfg, args.sampling.interval)?;
    sampler.check_devices(&args.sampling.devices)?;
    crate::logging::init(&cfg);
    let limit = if args.monitor {
        None
    } else {
        workflow::run_limit(&args.sampling, sampler.is_replay())
    };
    let mut states: BTreeMap<u32, DeviceState> = BTreeMap::new();
    let devices = args.sampling.devices.clone();
    let mut stdout = std::io::stdout();
    let progress = if args.monitor { None } else { Some("oom") };
    let end = sampler.run(limit, progress, |tick| {
        let snap: &Snapshot = tick.snap;
        for g in snap.gpus.iter().filter(|g| selected(&devices, g.id.index)) {
            if g.memory.is_none() {
                continue;
            }
            let st = states.entry(g.id.index).or_insert_with(|| DeviceState {
                index: g.id.index,
                uuid: g.id.uuid.clone(),
                name: g.id.name.clone(),
                level: None,
                changes: Vec::new(),
                worst: None,
                max_usage: 0.0,
                last: None,
            });
            let usage = usage_percent(g);
            st.max_usage = st.max_usage.max(usage);
            if st.level != Some(g.risk) {
                let change = LevelChange {
                    t: round(tick.t, 3),
                    from: st.level,
                    to: g.risk,
                    reason: g.risk_reason,
                    usage_percent: usage,
                    predicted_oom_time_seconds: g.eta_seconds.map(|e| round(e, 1)),
                };
                let line = match st.level {
                    Some(from) => format!(
                        "[{:>8.1}s] GPU {} ({}): {} -> {}  {}",
                        tick.t,
                        g.id.index,
                        g.id.name,
                        from.as_str(),
                        g.risk.as_str(),
                        describe(g)
                    ),
                    None => format!(
                        "[{:>8.1}s] GPU {} ({}): {}  {}",
                        tick.t,
                        g.id.index,
                        g.id.name,
                        g.risk.as_str(),
                        describe(g)
                    ),
                };
                if args.monitor || st.level.is_some() {
                    let _ = writeln!(stdout, "{line}");
                    let _ = stdout.flush();
                }
                st.changes.push(change);
                st.level = Some(g.risk);
            }
            if st.worst.as_ref().is_none_or(|w| g.risk > w.risk_level) {
                st.worst = Some(Worst {
                    risk_level: g.risk,
                    reason: g.risk_reason,
                    t: round(tick.t, 3),
                    usage_percent: usage,
                    predicted_oom_time_seconds: g.eta_seconds.map(|e| round(e, 1)),
                });
            }
            st.last = Some((assess(g, g.trend.as_ref()), g.risk_reason));
        }
        ControlFlow::Continue(())
    });
    let mut devices_out = BTreeMap::new();
    let mut critical = false;
    for (index, st) in states {
        let Some((assessment, reason)) = st.last else {
            continue;
        };
        let worst = st.worst.expect("set with the first sample");
        critical |= worst.risk_level == RiskLevel::Critical;
        devices_out.insert(
            index.to_string(),
            DeviceRisk {
                index: st.index,
                uuid: st.uuid,
                name: st.name,
                risk_assessment: assessment,
                reason,
                worst,
                level_changes: st.changes,
                max_usage_percent: st.max_usage,
            },
        );
    }
    if devices_out.is_empty() {
        anyhow::bail!("no GPU memory was read: nothing to assess");
    }
    let r = &cfg.analysis.risk;
    let report = OomReport {
        header: schema::RunHeader::new("oom", &cfg, &end),
        threshold_percent: args.threshold,
        thresholds: Thresholds {
            medium_used_percent: round(r.medium_used_fraction * 100.0, 2),
            high_used_percent: round(r.high_used_fraction * 100.0, 2),
            critical_eta_seconds: r.critical_eta.as_secs_f64(),
            high_eta_seconds: r.high_eta.as_secs_f64(),
            medium_eta_seconds: r.medium_eta.as_secs_f64(),
        },
        critical_reached: critical,
        devices: devices_out,
    };
    workflow::emit(args.output.as_deref(), &report, print_table)?;
    Ok(if critical {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_table(r: &OomReport) {
    println!(
        "{:<4} {:<9} {:>5} {:>7} {:>10} {:>9} {:<9} {:<14}",
        "GPU", "risk", "conf", "used %", "MiB/s", "OOM in", "worst", "reason"
    );
    let mut devs: Vec<&DeviceRisk> = r.devices.values().collect();
    devs.sort_by_key(|d| d.index);
    for d in &devs {
        let a = &d.risk_assessment;
        println!(
            "{:<4} {:<9} {:>5.2} {:>7.1} {:>10.2} {:>9} {:<9} {:<14}",
            d.index,
            a.risk_level.as_str(),
            a.confidence,
            a.current_usage_percent,
            a.growth_rate_mb_per_sec,
            a.predicted_oom_time_seconds
                .map(|s| format!("{s:.0} s"))
                .unwrap_or_else(|| "-".into()),
            d.worst.risk_level.as_str(),
            d.reason.as_str(),
        );
    }
    for d in devs {
        if d.risk_assessment.risk_level > RiskLevel::Low {
            println!("GPU {}: {}", d.index, d.risk_assessment.recommendation);
        }
    }
    if r.critical_reached {
        println!("critical risk reached during the run");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_maps_onto_the_risk_settings() {
        let mut c = Config::default();
        apply_threshold(&mut c, 85.0);
        assert!((c.analysis.risk.high_used_fraction - 0.85).abs() < 1e-9);
        assert!((c.analysis.risk.medium_used_fraction - 0.75).abs() < 1e-9);
        apply_threshold(&mut c, 5.0);
        assert_eq!(c.analysis.risk.medium_used_fraction, 0.0);
    }

    #[test]
    fn confidence_follows_the_evidence() {
        let t = |p: f64, n: usize, slope: f64| Trend {
            slope,
            slope_lower: slope,
            slope_upper: slope,
            p_value: p,
            span: 60.0,
            points: n,
            floor_now: 0.0,
            recent_slope: slope,
            swing: 0.0,
            stairs: None,
            quiet: 0.0,
            saturation: None,
        };
        assert_eq!(confidence(RiskReason::UsedFraction, None), 0.95);
        assert!(
            confidence(RiskReason::Eta, Some(&t(0.001, 30, 1.0)))
                > confidence(RiskReason::Eta, Some(&t(0.001, 4, 1.0)))
        );
        assert!(
            confidence(RiskReason::Eta, Some(&t(0.001, 30, 1.0)))
                > confidence(RiskReason::Eta, Some(&t(0.2, 30, 1.0)))
        );
        assert!(
            confidence(RiskReason::None, Some(&t(0.001, 30, 1.0)))
                < confidence(RiskReason::None, Some(&t(0.5, 30, 0.0)))
        );
    }
}
