//! `sweep`: peak memory across profile reports of a parameter sweep, as a table (rows: the
//! `--y` tag's values, columns: the `--x` tag's) and a heatmap.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::process::ExitCode;

use serde::Serialize;

use super::chart::{self, Heatmap};
use super::schema::{read_report, ProfileReport, SCHEMA_VERSION};
use super::workflow;
use crate::cli::SweepArgs;
use crate::runtime::stepped;
use crate::units::GIB;

#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub x: String,
    pub y: String,
    /// Peak bytes: the highest over the report's GPUs.
    pub peak_bytes: u64,
    /// GPU index where the peak was.
    pub gpu: u32,
    pub report: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    pub schema_version: u32,
    pub kind: &'static str,
    pub generated_at: String,
    pub x: String,
    pub y: String,
    /// Which peak: used (NVML), allocated or reserved (allocator).
    pub metric: String,
    pub x_values: Vec<String>,
    pub y_values: Vec<String>,
    /// `matrix[row][col]`: peak bytes for y_values[row], x_values[col]; null where no report.
    pub matrix: Vec<Vec<Option<u64>>>,
    pub cells: Vec<Cell>,
    /// Reports left out, and why.
    pub skipped: Vec<String>,
    /// The GPU indices every tabulated report has: peaks are taken over these only.
    pub gpus: Vec<String>,
    /// Where the reports cover different GPUs: which were left out of which report.
    pub note: Option<String>,
}

/// Tagged reports without a GPU that all of them have.
#[derive(Debug, thiserror::Error)]
#[error("the reports have no GPU in common ({0}): a sweep compares runs on the same GPUs (profile --devices picks them)")]
pub struct NoCommonGpu(pub String);

/// Numbers in numeric order, then everything else in text order.
pub fn value_order(a: &str, b: &str) -> Ordering {
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x.total_cmp(&y),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        _ => a.cmp(b),
    }
}

/// The report's peak for `metric` over its GPUs among `gpus`, with the GPU.
pub fn peak(r: &ProfileReport, gpus: &[String], metric: &str) -> Option<(u64, u32)> {
    gpus.iter()
        .filter_map(|i| r.devices.get(i))
        .filter_map(|d| {
            let v = match metric {
                "allocated" => d.peak.allocated,
                "reserved" => d.peak.reserved,
                _ => Some(d.peak_memory),
            };
            v.map(|v| (v, d.index))
        })
        .max_by_key(|(v, _)| *v)
}

/// GPU indices in numeric order.
fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort_by_key(|k| (k.parse::<u64>().unwrap_or(u64::MAX), k.clone()));
    v
}

/// Peaks across reports are peaks of the same GPUs: where the tagged reports cover different
/// ones (2 against 5), only those every one of them has count, and the report says so. Refused
/// when they have none in common.
pub fn build(
    reports: &[(String, ProfileReport)],
    x: &str,
    y: &str,
    metric: &str,
) -> Result<SweepReport, NoCommonGpu> {
    let mut skipped = Vec::new();
    let tagged: Vec<&(String, ProfileReport)> = reports
        .iter()
        .filter(|(file, r)| {
            let has = r.tags.contains_key(x) && r.tags.contains_key(y);
            if !has {
                skipped.push(format!("{file}: no tag `{x}` or `{y}`"));
            }
            has
        })
        .collect();
    let mut gpus: Vec<String> = tagged
        .first()
        .map(|(_, r)| r.devices.keys().cloned().collect())
        .unwrap_or_default();
    gpus.retain(|i| tagged.iter().all(|(_, r)| r.devices.contains_key(i)));
    let gpus = sorted(gpus);
    let mut left_out = Vec::new();
    for (file, r) in &tagged {
        let extra = sorted(
            r.devices
                .keys()
                .filter(|k| !gpus.contains(k))
                .cloned()
                .collect(),
        );
        if !extra.is_empty() {
            left_out.push(format!("GPUs {} of {file}", extra.join(", ")));
        }
    }
    if gpus.is_empty() && !tagged.is_empty() {
        let each: Vec<String> = tagged
            .iter()
            .map(|(file, r)| {
                let g = sorted(r.devices.keys().cloned().collect());
                format!(
                    "{file}: GPUs {}",
                    if g.is_empty() {
                        "none".into()
                    } else {
                        g.join(", ")
                    }
                )
            })
            .collect();
        return Err(NoCommonGpu(each.join("; ")));
    }
    let note = (!left_out.is_empty()).then(|| {
        format!(
            "the reports cover different GPUs: peaks are taken over GPUs {} only, which every report has ({} left out)",
            gpus.join(", "),
            left_out.join("; ")
        )
    });
    let mut cells: BTreeMap<(String, String), Cell> = BTreeMap::new();
    for (file, r) in tagged {
        let (Some(xv), Some(yv)) = (r.tags.get(x), r.tags.get(y)) else {
            continue;
        };
        let Some((v, gpu)) = peak(r, &gpus, metric) else {
            skipped.push(format!("{file}: no {metric} peak"));
            continue;
        };
        let key = (xv.clone(), yv.clone());
        match cells.get(&key) {
            Some(c) if c.peak_bytes >= v => {
                skipped.push(format!(
                    "{file}: same {x}={xv}, {y}={yv} as {}; the higher peak is kept",
                    c.report
                ));
            }
            prev => {
                if let Some(c) = prev {
                    skipped.push(format!(
                        "{}: same {x}={xv}, {y}={yv} as {file}; the higher peak is kept",
                        c.report
                    ));
                }
                cells.insert(
                    key,
                    Cell {
                        x: xv.clone(),
                        y: yv.clone(),
                        peak_bytes: v,
                        gpu,
                        report: file.clone(),
                    },
                );
            }
        }
    }
    let mut xs: Vec<String> = cells.keys().map(|k| k.0.clone()).collect();
    let mut ys: Vec<String> = cells.keys().map(|k| k.1.clone()).collect();
    xs.sort_by(|a, b| value_order(a, b));
    xs.dedup();
    ys.sort_by(|a, b| value_order(a, b));
    ys.dedup();
    let matrix = ys
        .iter()
        .map(|yv| {
            xs.iter()
                .map(|xv| cells.get(&(xv.clone(), yv.clone())).map(|c| c.peak_bytes))
                .collect()
        })
        .collect();
    Ok(SweepReport {
        schema_version: SCHEMA_VERSION,
        kind: "sweep",
        generated_at: workflow::now_rfc3339(),
        x: x.into(),
        y: y.into(),
        metric: metric.into(),
        x_values: xs,
        y_values: ys,
        matrix,
        cells: cells.into_values().collect(),
        skipped,
        gpus,
        note,
    })
}

pub fn print_table(s: &SweepReport) {
    println!(
        "peak {} memory (GiB), rows {} x columns {}",
        s.metric, s.y, s.x
    );
    let corner = format!("{} \\ {}", s.y, s.x);
    let w0 = corner
        .len()
        .max(s.y_values.iter().map(|v| v.len()).max().unwrap_or(0));
    let wc = s.x_values.iter().map(|v| v.len()).max().unwrap_or(0).max(8);
    print!("{corner:<w0$}");
    for xv in &s.x_values {
        print!(" {xv:>wc$}");
    }
    println!();
    for (yv, row) in s.y_values.iter().zip(&s.matrix) {
        print!("{yv:<w0$}");
        for v in row {
            let cell = v
                .map(|b| format!("{:.2}", b as f64 / GIB))
                .unwrap_or_else(|| "-".into());
            print!(" {cell:>wc$}");
        }
        println!();
    }
    for s in &s.skipped {
        eprintln!("skipped {s}");
    }
}

pub fn heatmap(s: &SweepReport) -> Heatmap {
    Heatmap {
        title: format!("peak {} memory: {} x {}", s.metric, s.y, s.x),
        x_label: s.x.clone(),
        y_label: s.y.clone(),
        cols: s.x_values.clone(),
        rows: s.y_values.clone(),
        values: s
            .matrix
            .iter()
            .map(|r| r.iter().map(|v| v.map(|b| b as f64 / GIB)).collect())
            .collect(),
        unit: "GiB".into(),
    }
}

pub fn run(args: SweepArgs) -> anyhow::Result<ExitCode> {
    for p in &args.reports {
        if !p.is_file() {
            return Err(stepped::usage(
                "REPORT.json",
                format!("{} is not a readable file", p.display()),
            ));
        }
    }
    if args.x == args.y {
        return Err(stepped::usage(
            "--y",
            format!("`{}` is also --x; sweep needs two different tags", args.y),
        ));
    }
    if let Some(o) = &args.output {
        workflow::check_writable(o, "--output")?;
    }
    let plots = workflow::check_plots(&args.plot)?;
    let mut reports = Vec::new();
    for p in &args.reports {
        reports.push((p.display().to_string(), read_report(p)?));
    }
    let s = build(&reports, &args.x, &args.y, &args.metric)?;
    if let Some(note) = &s.note {
        eprintln!("note: {note}");
    }
    if s.cells.is_empty() {
        for k in &s.skipped {
            eprintln!("skipped {k}");
        }
        anyhow::bail!(
            "no report carries both tags `{}` and `{}` (profile --tag {}=... --tag {}=...)",
            args.x,
            args.y,
            args.x,
            args.y
        );
    }
    workflow::emit(args.output.as_deref(), &s, print_table)?;
    for (path, kind) in &plots {
        chart::render_heatmap(path, *kind, &heatmap(&s))?;
        eprintln!("heatmap written to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_values_sort_as_numbers() {
        let mut v = vec!["16", "8", "128", "x"];
        v.sort_by(|a, b| value_order(a, b));
        assert_eq!(v, ["8", "16", "128", "x"]);
    }
}
