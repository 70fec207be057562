//! What the report commands (`profile`, `oom`, `leak`, `fragment`, `top`, ...) share: flag
//! parsing and checks made before any sampling starts, the sampling loop over the same engine
//! the exporter runs, a progress bar, Ctrl-C, and writing reports.
//!
//! Replay sources run as fast as the CPU goes, stepping on the trace's own timestamps (as the
//! replay timeline does), so a duration is in trace seconds. Live sources (NVML, the simulator)
//! sample on the wall clock every `--interval`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use super::chart::ImageKind;
use crate::cli::SamplingArgs;
use crate::config::{Config, SourceSpec};
use crate::runtime::stepped::usage;
use crate::units::GIB;

/// Duration of a live run when `--duration` is not given.
pub const DEFAULT_DURATION: f64 = 60.0;

/// Fail now, not after the run, when `path` cannot be written.
pub fn check_writable(path: &Path, flag: &str) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    if path.is_dir() {
        return Err(usage(
            flag,
            format!("{} is a directory, not a file", path.display()),
        ));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() {
        return Err(usage(
            flag,
            format!(
                "cannot write {}: directory {} does not exist",
                path.display(),
                parent.display()
            ),
        ));
    }
    let existed = path.exists();
    let opened = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path);
    match opened {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => Err(usage(flag, format!("cannot write {}: {e}", path.display()))),
    }
}

pub fn check_plot(path: &Path, flag: &str) -> anyhow::Result<ImageKind> {
    if !super::chart::AVAILABLE {
        return Err(usage(
            flag,
            "this build draws no charts (it was built without the `charts` feature)",
        ));
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase());
    let kind = match ext.as_deref() {
        Some("png") => ImageKind::Png,
        Some("svg") => ImageKind::Svg,
        _ => {
            return Err(usage(
                flag,
                format!(
                    "{}: the chart's file name must end in .png or .svg",
                    path.display()
                ),
            ))
        }
    };
    check_writable(path, flag)?;
    Ok(kind)
}

/// Every `--plot` chart's kind, checked before any sampling starts.
pub fn check_plots(plots: &[PathBuf]) -> anyhow::Result<Vec<(PathBuf, ImageKind)>> {
    plots
        .iter()
        .map(|p| check_plot(p, "--plot").map(|k| (p.clone(), k)))
        .collect()
}

/// Show a finished report: its table for a person unless `--output -` puts the JSON on
/// stdout (the two would mix), and the JSON where `--output` names a file, saying where.
pub fn emit<R: Serialize>(
    output: Option<&Path>,
    report: &R,
    table: impl FnOnce(&R),
) -> anyhow::Result<()> {
    if output.is_none_or(|o| o.as_os_str() != "-") {
        table(report);
    }
    if let Some(o) = output {
        write_json(o, report)?;
        if o.as_os_str() != "-" {
            eprintln!("report written to {}", o.display());
        }
    }
    Ok(())
}

/// Write a report as pretty JSON to a file, or to stdout for `-`.
pub fn write_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    write_json_for("--output", path, value)
}

/// [`write_json`] for a file named by `flag` (errors name it).
pub fn write_json_for(flag: &str, path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()?;
    } else {
        std::fs::write(path, text)
            .map_err(|e| anyhow::anyhow!("{flag}: cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// RFC 3339, UTC, whole seconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// The source as the report names it: `nvml`, `sim` or `replay:<file names>`.
pub fn source_label(cfg: &Config) -> String {
    match &cfg.source {
        SourceSpec::Replay(files) => format!(
            "replay:{}",
            files
                .iter()
                .map(|f| f
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default())
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.kind().to_string(),
    }
}

pub fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

/// The run's length: `--duration`, else the whole trace (replay) or the default (live).
pub fn run_limit(sampling: &SamplingArgs, replay: bool) -> Option<f64> {
    match sampling.duration {
        Some(d) => Some(d),
        None if replay => None,
        None => Some(DEFAULT_DURATION),
    }
}

/// Whether GPU `index` is one the user asked for (`--devices`, empty: all).
pub fn selected(devices: &[u32], index: u32) -> bool {
    devices.is_empty() || devices.contains(&index)
}

/// Format bytes as GiB with one decimal.
pub fn gib(v: f64) -> String {
    format!("{:.1}", v / GIB)
}
