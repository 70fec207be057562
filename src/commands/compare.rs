//! `compare`: the difference between two profile reports (B against the baseline A): peaks and
//! averages per GPU and in total, with the tags side by side.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use serde::Serialize;

use super::schema::{read_report, DeviceProfile, ProfileReport, SCHEMA_VERSION};
use super::workflow::{self, round};
use crate::cli::CompareArgs;
use crate::runtime::stepped;
use crate::units::GIB;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Delta {
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// b − a.
    pub delta: Option<f64>,
    /// (b − a) / a × 100.
    pub delta_percent: Option<f64>,
}

impl Delta {
    pub fn new(a: Option<f64>, b: Option<f64>) -> Self {
        let delta = match (a, b) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let delta_percent = match (a, delta) {
            (Some(a), Some(d)) if a != 0.0 => Some(round(d / a * 100.0, 2)),
            _ => None,
        };
        Delta {
            a,
            b,
            delta,
            delta_percent,
        }
    }
}

/// The quantities compared, in table order: (key, label, unit: bytes or plain).
const METRICS: [(&str, &str, bool); 8] = [
    ("peak_used", "peak used (NVML)", true),
    ("peak_allocated", "peak allocated", true),
    ("peak_reserved", "peak reserved", true),
    ("current_used", "used at end", true),
    ("avg_utilization", "avg utilization %", false),
    ("max_utilization", "max utilization %", false),
    ("avg_fragmentation", "avg fragmentation", false),
    ("max_fragmentation", "max fragmentation", false),
];

fn metric(d: &DeviceProfile, key: &str) -> Option<f64> {
    match key {
        "peak_used" => Some(d.peak_memory as f64),
        "peak_allocated" => d.peak.allocated.map(|v| v as f64),
        "peak_reserved" => d.peak.reserved.map(|v| v as f64),
        "current_used" => Some(d.current_memory.used as f64),
        "avg_utilization" => Some(d.statistics.avg_utilization),
        "max_utilization" => Some(d.statistics.max_utilization),
        "avg_fragmentation" => d.statistics.avg_fragmentation,
        "max_fragmentation" => d.statistics.max_fragmentation,
        _ => None,
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub file: String,
    pub source: String,
    pub generated_at: String,
    pub duration: f64,
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TagRow {
    pub key: String,
    pub a: Option<String>,
    pub b: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub schema_version: u32,
    pub kind: &'static str,
    pub generated_at: String,
    pub a: Side,
    pub b: Side,
    pub tags: Vec<TagRow>,
    /// The GPU indices both reports have: the only ones compared.
    pub gpus: Vec<String>,
    /// GPU indices only one report has, left out of the comparison (and of the totals).
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    /// Per GPU index both have: metric → delta.
    pub devices: BTreeMap<String, BTreeMap<String, Delta>>,
    /// Over the GPUs both have: byte peaks summed, utilization and fragmentation averaged.
    pub totals: BTreeMap<String, Delta>,
}

/// Reports without a GPU in common: nothing to compare.
#[derive(Debug, thiserror::Error)]
#[error("the reports have no GPU in common (A: GPUs {a}; B: GPUs {b}): compare profiles of the same GPUs (profile --devices picks them)")]
pub struct NoCommonGpu {
    pub a: String,
    pub b: String,
}

fn side(file: &str, r: &ProfileReport) -> Side {
    Side {
        file: file.to_string(),
        source: r.source.clone(),
        generated_at: r.generated_at.clone(),
        duration: r.duration,
        tags: r.tags.clone(),
    }
}

/// Sum (bytes) or mean (ratios) of a metric over the report's GPUs among `gpus`.
fn total(r: &ProfileReport, gpus: &[String], key: &str, bytes: bool) -> Option<f64> {
    let v: Vec<f64> = gpus
        .iter()
        .filter_map(|i| r.devices.get(i))
        .filter_map(|d| metric(d, key))
        .collect();
    if v.is_empty() {
        return None;
    }
    let sum: f64 = v.iter().sum();
    Some(if bytes { sum } else { sum / v.len() as f64 })
}

/// GPU indices in numeric order.
fn sorted_indices<'a>(keys: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut v: Vec<String> = keys.cloned().collect();
    v.sort_by_key(|k| (k.parse::<u64>().unwrap_or(u64::MAX), k.clone()));
    v
}

/// Compare B with A on the GPUs both have: a total over different GPU sets (2 against 5)
/// would be a difference of hardware, not of runs. Refused when they have none in common.
pub fn compare(
    a_file: &str,
    a: &ProfileReport,
    b_file: &str,
    b: &ProfileReport,
) -> Result<Comparison, NoCommonGpu> {
    let keys: BTreeSet<&String> = a.tags.keys().chain(b.tags.keys()).collect();
    let tags = keys
        .into_iter()
        .map(|k| TagRow {
            key: k.clone(),
            a: a.tags.get(k).cloned(),
            b: b.tags.get(k).cloned(),
        })
        .collect();
    let gpus = sorted_indices(a.devices.keys().filter(|k| b.devices.contains_key(*k)));
    let only_in_a = sorted_indices(a.devices.keys().filter(|k| !b.devices.contains_key(*k)));
    let only_in_b = sorted_indices(b.devices.keys().filter(|k| !a.devices.contains_key(*k)));
    if gpus.is_empty() {
        return Err(NoCommonGpu {
            a: list_or_none(&sorted_indices(a.devices.keys())),
            b: list_or_none(&sorted_indices(b.devices.keys())),
        });
    }
    let mut devices = BTreeMap::new();
    for i in &gpus {
        let (da, db) = (a.devices.get(i), b.devices.get(i));
        let mut m = BTreeMap::new();
        for (key, _, _) in METRICS {
            let va = da.and_then(|d| metric(d, key));
            let vb = db.and_then(|d| metric(d, key));
            if va.is_some() || vb.is_some() {
                m.insert(key.to_string(), Delta::new(va, vb));
            }
        }
        devices.insert(i.clone(), m);
    }
    let mut totals = BTreeMap::new();
    for (key, _, bytes) in METRICS {
        let (va, vb) = (total(a, &gpus, key, bytes), total(b, &gpus, key, bytes));
        if va.is_some() || vb.is_some() {
            totals.insert(key.to_string(), Delta::new(va, vb));
        }
    }
    Ok(Comparison {
        schema_version: SCHEMA_VERSION,
        kind: "compare",
        generated_at: workflow::now_rfc3339(),
        a: side(a_file, a),
        b: side(b_file, b),
        tags,
        gpus,
        only_in_a,
        only_in_b,
        devices,
        totals,
    })
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

impl Comparison {
    /// What was left out, in words, where the GPU sets differ.
    pub fn gpu_note(&self) -> Option<String> {
        if self.only_in_a.is_empty() && self.only_in_b.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        if !self.only_in_a.is_empty() {
            parts.push(format!("GPUs {} only in A", self.only_in_a.join(", ")));
        }
        if !self.only_in_b.is_empty() {
            parts.push(format!("GPUs {} only in B", self.only_in_b.join(", ")));
        }
        Some(format!(
            "the reports cover different GPUs ({}): compared on GPUs {} only, the totals too",
            parts.join("; "),
            self.gpus.join(", ")
        ))
    }
}

fn fmt(v: Option<f64>, bytes: bool) -> String {
    match v {
        None => "-".into(),
        Some(v) if bytes => format!("{:.2} GiB", v / GIB),
        Some(v) if v.abs() < 1.0 => format!("{v:.3}"),
        Some(v) => format!("{v:.1}"),
    }
}

fn fmt_delta(d: &Delta, bytes: bool) -> String {
    match d.delta {
        None => "-".into(),
        Some(x) => {
            let sign = if x > 0.0 { "+" } else { "" };
            let body = if bytes {
                format!("{sign}{:.2} GiB", x / GIB)
            } else if x.abs() < 1.0 {
                format!("{sign}{x:.3}")
            } else {
                format!("{sign}{x:.1}")
            };
            match d.delta_percent {
                Some(p) => format!("{body} ({}{p:.1}%)", if p > 0.0 { "+" } else { "" }),
                None => body,
            }
        }
    }
}

pub fn print_table(c: &Comparison) {
    println!("A: {} ({}, {:.1} s)", c.a.file, c.a.source, c.a.duration);
    println!("B: {} ({}, {:.1} s)", c.b.file, c.b.source, c.b.duration);
    if !c.tags.is_empty() {
        println!();
        println!("{:<24} {:<20} {:<20}", "tag", "A", "B");
        for t in &c.tags {
            let mark = if t.a != t.b { " *" } else { "" };
            println!(
                "{:<24} {:<20} {:<20}{mark}",
                t.key,
                t.a.as_deref().unwrap_or("-"),
                t.b.as_deref().unwrap_or("-")
            );
        }
    }
    let mut sections: Vec<(String, &BTreeMap<String, Delta>)> = Vec::new();
    let mut idx: Vec<&String> = c.devices.keys().collect();
    idx.sort_by_key(|k| k.parse::<u64>().unwrap_or(u64::MAX));
    for i in idx {
        sections.push((format!("GPU {i}"), &c.devices[i]));
    }
    let total = if c.gpu_note().is_some() {
        format!("total (GPUs {})", c.gpus.join(", "))
    } else {
        "total (all GPUs)".into()
    };
    sections.push((total, &c.totals));
    for (title, m) in sections {
        println!();
        println!("{:<22} {:>14} {:>14} {:>24}", title, "A", "B", "B - A");
        for (key, label, bytes) in METRICS {
            if let Some(d) = m.get(key) {
                println!(
                    "{:<22} {:>14} {:>14} {:>24}",
                    label,
                    fmt(d.a, bytes),
                    fmt(d.b, bytes),
                    fmt_delta(d, bytes)
                );
            }
        }
    }
}

pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    for (p, name) in [(&args.a, "A.json"), (&args.b, "B.json")] {
        if !p.is_file() {
            return Err(stepped::usage(
                name,
                format!("{} is not a readable file", p.display()),
            ));
        }
    }
    if let Some(o) = &args.output {
        workflow::check_writable(o, "--output")?;
    }
    let a = read_report(&args.a)?;
    let b = read_report(&args.b)?;
    let c = compare(
        &args.a.display().to_string(),
        &a,
        &args.b.display().to_string(),
        &b,
    )?;
    // On stderr, so that it shows beside the table and the JSON alike.
    if let Some(note) = c.gpu_note() {
        eprintln!("note: {note}");
    }
    let json_on_stdout = args.json || args.output.as_deref().is_some_and(|o| o.as_os_str() == "-");
    if json_on_stdout {
        workflow::write_json(std::path::Path::new("-"), &c)?;
    } else {
        print_table(&c);
    }
    if let Some(o) = args.output.as_ref().filter(|o| o.as_os_str() != "-") {
        workflow::write_json(o, &c)?;
        eprintln!("comparison written to {}", o.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas() {
        let d = Delta::new(Some(100.0), Some(150.0));
        assert_eq!(d.delta, Some(50.0));
        assert_eq!(d.delta_percent, Some(50.0));
        let d = Delta::new(None, Some(1.0));
        assert_eq!(d.delta, None);
        assert_eq!(Delta::new(Some(0.0), Some(1.0)).delta_percent, None);
    }
}
