//! Batch replay: the engine over recorded traces as fast as the CPU goes, writing what
//! `/metrics` would show at each second of trace time, and the verdict on the recording: when
//! an allocation failed, and from when the exporter would have warned and paged.

use std::collections::BTreeMap;
use std::io::Write;
use std::ops::ControlFlow;

use serde::Serialize;

use crate::analysis::oom::RiskLevel;
use crate::analysis::verdict::{self, ForecastAt, Verdict};
use crate::cli::ReplayArgs;
use crate::commands::chart::{self, Band, HLine, Line, Marker, Panel};
use crate::commands::workflow;
use crate::config::Config;
use crate::engine::Engine;
use crate::exporter::families::{families_named, names};
use crate::exporter::http::VERSION;
use crate::model::{GpuIdentity, Time};
use crate::pace::{drive, Stop, Ticks};
use crate::runtime::telemetry::Counters;
use crate::runtime::{fold, observe};
use crate::snapshot::Snapshot;
use crate::source::replay::{Failure, ReplaySource};
use crate::source::Source;

#[derive(Serialize)]
pub struct TimelineMetric<'a> {
    pub name: &'a str,
    pub labels: BTreeMap<&'a str, &'a str>,
    pub value: f64,
}

#[derive(Serialize)]
pub struct TimelineLine<'a> {
    pub t: i64,
    pub metrics: Vec<TimelineMetric<'a>>,
}

/// Drive `source` through its whole timeline at the configured sample interval (NVML is read
/// that often, as live), calling `at_second` with the snapshot at each whole second of trace
/// time.
pub fn run_timeline(
    cfg: &Config,
    source: &mut ReplaySource,
    mut at_second: impl FnMut(i64, &Snapshot, &Counters) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut engine = Engine::new(cfg, source.kind());
    let counters = Counters::default();
    let Some(first) = source.next_time() else {
        return Ok(());
    };
    let mut second = first.floor().max(0.0) as i64;
    let mut snapshot = engine.current();
    let step = cfg.sample_interval.as_secs_f64();
    // The clock ticks on whole seconds of trace time (and `step` after), as a live exporter's
    // does whatever the recording's phase: shifting a trace shifts what each tick sees.
    let mut t = first.floor();
    while t + step <= first {
        t += step;
    }
    let mut result = Ok(());
    drive(source, &mut Grid { t, step }, &Stop::default(), |obs| {
        while (second as f64) < obs.t {
            if let Err(e) = at_second(second, &snapshot, &counters) {
                result = Err(e);
                return ControlFlow::Break(());
            }
            second += 1;
        }
        fold(&counters, &obs, |o| observe(&mut engine, o));
        snapshot = engine.current();
        ControlFlow::Continue(())
    });
    result?;
    at_second(second, &snapshot, &counters)
}

/// A live exporter's ticks over a trace: every `step` from `t` while items remain.
struct Grid {
    t: Time,
    step: f64,
}

impl Ticks for Grid {
    fn next(&mut self, next_item: Option<Time>, _: &Stop) -> Option<Time> {
        next_item?;
        let t = self.t;
        self.t += self.step;
        Some(t)
    }
}

/// NVML's view of a GPU at one second: used (reserve included), free, total bytes.
#[derive(Clone, Copy)]
struct Memory {
    used: u64,
    free: u64,
    total: u64,
}

/// What one GPU showed, second by second, for the verdict and the chart.
struct GpuSeconds {
    id: GpuIdentity,
    forecast: Vec<ForecastAt>,
    memory: Vec<(f64, Option<Memory>)>,
    /// pid → (t, bytes NVML charges it).
    processes: BTreeMap<u32, Vec<(f64, Option<u64>)>>,
}

impl GpuSeconds {
    fn record(&mut self, t: f64, snap: &Snapshot) {
        let Some(g) = snap.gpus.iter().find(|g| g.id.uuid == self.id.uuid) else {
            return;
        };
        self.forecast.push(ForecastAt {
            t,
            risk: g.risk,
            eta: g.eta_seconds,
            lower: g.eta_lower_seconds,
            upper: g.eta_upper_seconds,
        });
        self.memory.push((
            t,
            g.memory.map(|m| Memory {
                used: m.used + m.reserved,
                free: m.free,
                total: m.total,
            }),
        ));
        for p in snap.processes.iter().filter(|p| p.uuid == self.id.uuid) {
            let series = self.processes.entry(p.pid).or_default();
            series.push((t, p.nvml_used));
        }
    }
}

#[derive(Serialize)]
struct FailureOut<'a> {
    t: f64,
    pid: u32,
    gpu_index: u32,
    gpu_uuid: &'a str,
    request_bytes: Option<u64>,
    device_free_bytes: Option<u64>,
    message: Option<&'a str>,
}

#[derive(Serialize)]
struct GpuVerdict<'a> {
    index: u32,
    uuid: &'a str,
    name: &'a str,
    #[serde(flatten)]
    verdict: Verdict,
}

/// The `--summary` file: the verdict on the GPU that failed (without a failure, the one that
/// warned longest), the failure, and each GPU's own verdict.
#[derive(Serialize)]
struct Summary<'a> {
    files: Vec<String>,
    start_t: f64,
    end_t: f64,
    #[serde(flatten)]
    verdict: &'a Verdict,
    gpu_index: Option<u32>,
    gpu_uuid: Option<&'a str>,
    failure: Option<FailureOut<'a>>,
    gpus: Vec<GpuVerdict<'a>>,
}

/// `replay`: the timeline (`--output`), the verdict (`--summary`, and printed for a person when
/// there is no timeline to write) and the chart (`--chart`).
pub fn run(cfg: &Config, args: &ReplayArgs) -> anyhow::Result<()> {
    if let Some(o) = &args.output {
        workflow::check_writable(o, "--output")?;
    }
    if let Some(s) = &args.summary {
        workflow::check_writable(s, "--summary")?;
    }
    let known = names();
    if let Some(bad) = args.metrics.iter().find(|m| !known.contains(&m.as_str())) {
        anyhow::bail!(
            "--metrics: no metric family is named `{bad}` (docs/metrics.md lists them, e.g. gpumem_oom_risk_level)"
        );
    }
    let keep = |name: &str| args.metrics.is_empty() || args.metrics.iter().any(|m| m == name);
    let chart_kind = match &args.chart {
        Some(c) => Some(workflow::check_plot(c, "--chart")?),
        None => None,
    };
    let mut source = ReplaySource::open_with(&args.files, cfg.replay.disorder())?
        .with_report_interval(cfg.replay.report_interval.as_secs_f64());
    let mut gpus: Vec<GpuSeconds> = source
        .gpu_ids()
        .into_iter()
        .map(|id| GpuSeconds {
            id,
            forecast: vec![],
            memory: vec![],
            processes: BTreeMap::new(),
        })
        .collect();
    let mut timeline = match &args.output {
        None => None,
        Some(o) if o.as_os_str() == "-" => {
            Some(Box::new(std::io::stdout().lock()) as Box<dyn Write>)
        }
        Some(o) => Some(Box::new(
            std::fs::File::create(o)
                .map_err(|e| anyhow::anyhow!("--output: cannot write {}: {e}", o.display()))?,
        ) as Box<dyn Write>),
    }
    .map(std::io::BufWriter::new);
    let mut lines = 0u64;
    run_timeline(cfg, &mut source, |t, snap, counters| {
        for g in &mut gpus {
            g.record(t as f64, snap);
        }
        if let Some(out) = timeline.as_mut() {
            write_second(out, t, snap, counters, &keep)?;
            lines += 1;
        }
        Ok(())
    })?;
    if let (Some(out), Some(o)) = (timeline.as_mut(), &args.output) {
        out.flush()?;
        tracing::info!(lines, output = %o.display(), "timeline written");
    }
    let failures = source.failures();
    let failure = failures.first();
    let verdicts: Vec<Verdict> = gpus
        .iter()
        .map(|g| {
            // A failure is judged on its own GPU; the others have none of their own.
            let oom = failure.filter(|f| f.gpu.uuid == g.id.uuid).map(|f| f.t);
            verdict::verdict(&g.forecast, oom)
        })
        .collect();
    let main = match failure {
        Some(f) => gpus.iter().position(|g| g.id.uuid == f.gpu.uuid),
        None => (0..gpus.len()).max_by_key(|&i| {
            // The longest warning; the first GPU among equals.
            (verdicts[i].seconds_at_warning, std::cmp::Reverse(i))
        }),
    };
    let empty = verdict::verdict(&[], None);
    let main_verdict = main.map_or(&empty, |i| &verdicts[i]);
    let (start_t, end_t) = gpus
        .iter()
        .flat_map(|g| g.forecast.iter().map(|s| s.t))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), t| {
            (a.min(t), b.max(t))
        });
    let (start_t, end_t) = if start_t.is_finite() {
        (start_t, end_t)
    } else {
        (0.0, 0.0)
    };
    let summary = Summary {
        files: args.files.iter().map(|f| f.display().to_string()).collect(),
        start_t,
        end_t,
        verdict: main_verdict,
        gpu_index: main.map(|i| gpus[i].id.index),
        gpu_uuid: main.map(|i| gpus[i].id.uuid.as_str()),
        failure: failure.map(|f| FailureOut {
            t: f.t,
            pid: f.pid,
            gpu_index: f.gpu.index,
            gpu_uuid: &f.gpu.uuid,
            request_bytes: f.request_bytes,
            device_free_bytes: f.device_free,
            message: f.message.as_deref(),
        }),
        gpus: gpus
            .iter()
            .zip(verdicts.iter().cloned())
            .map(|(g, verdict)| GpuVerdict {
                index: g.id.index,
                uuid: &g.id.uuid,
                name: &g.id.name,
                verdict,
            })
            .collect(),
    };
    if let Some(path) = &args.summary {
        workflow::write_json_for("--summary", path, &summary)?;
    }
    if let (Some(path), Some(kind)) = (&args.chart, chart_kind) {
        let panels: Vec<Panel> = gpus
            .iter()
            .zip(&verdicts)
            .flat_map(|(g, v)| chart_panels(g, v, failure, end_t))
            .collect();
        chart::render_panels(path, kind, &panels, "seconds (recording's clock)")?;
    }
    if args.output.is_none() {
        print!("{}", human(&summary, gpus.len(), failure));
    }
    Ok(())
}

fn write_second(
    out: &mut impl Write,
    t: i64,
    snap: &Snapshot,
    counters: &Counters,
    keep: &dyn Fn(&str) -> bool,
) -> anyhow::Result<()> {
    let fams = families_named(snap, counters, VERSION, keep);
    let metrics = fams
        .iter()
        .flat_map(|f| {
            f.series.iter().map(move |s| TimelineMetric {
                name: f.name,
                labels: s.labels.iter().map(|(k, v)| (*k, v.as_str())).collect(),
                value: s.value,
            })
        })
        .collect();
    serde_json::to_writer(&mut *out, &TimelineLine { t, metrics })?;
    out.write_all(b"\n")?;
    Ok(())
}

fn gib(bytes: u64) -> String {
    format!("{} GiB", workflow::gib(bytes as f64))
}

fn secs(v: Option<f64>) -> String {
    v.map_or("none".into(), |s| format!("{s:.0} s"))
}

/// The verdict in words.
fn human(s: &Summary, gpus: usize, failure: Option<&Failure>) -> String {
    let mut out = format!(
        "{} file(s), {} GPU(s), {:.0}–{:.0} s on the recording's clock.\n",
        s.files.len(),
        gpus,
        s.start_t,
        s.end_t
    );
    let v = s.verdict;
    match failure {
        Some(f) => {
            let asked = f
                .request_bytes
                .map_or(String::new(), |b| format!(", asking for {}", gib(b)));
            let free = f
                .device_free
                .map_or(String::new(), |b| format!(" with {} free", gib(b)));
            out += &format!(
                "Out of memory at {:.1} s: pid {} on GPU {} ({}){asked}{free}.\n",
                f.t, f.pid, f.gpu.index, f.gpu.uuid
            );
            if let Some(m) = &f.message {
                let first = m.lines().next().unwrap_or("");
                out += &format!("  {}\n", first.chars().take(200).collect::<String>());
            }
            let lead = |from: Option<f64>, lead: Option<f64>, what: &str| match (from, lead) {
                (Some(from), Some(lead)) => {
                    format!("{what} from {from:.0} s, {lead:.0} s before the failure, without a break.\n")
                }
                _ => format!("{what}: not in the last second before the failure.\n"),
            };
            out += &lead(
                v.warning_from_t,
                v.warning_lead_s,
                "Warned (risk high or critical)",
            );
            out += &lead(
                v.critical_from_t,
                v.critical_lead_s,
                "Paged (risk critical)",
            );
            let etas: Vec<String> = verdict::ETA_READ_BEFORE_S
                .iter()
                .filter_map(|k| v.eta_before.get(&k.to_string()).map(|e| (k, e)))
                .map(|(k, e)| {
                    let bounds = match (e.eta_lower_s, e.eta_upper_s) {
                        (Some(l), Some(u)) => format!(" ({l:.0}–{u:.0} s)"),
                        (Some(l), None) => format!(" (at least {l:.0} s)"),
                        _ => String::new(),
                    };
                    format!("{k} s before: {}{bounds}", secs(e.eta_s))
                })
                .collect();
            if !etas.is_empty() {
                out += &format!("ETA {}.\n", etas.join("; "));
            }
        }
        None => {
            out += &format!(
                "No allocation failed. Risk high or critical for {} s, critical for {} s; shortest ETA {}.\n",
                v.seconds_at_warning,
                v.seconds_at_critical,
                secs(v.min_eta_s)
            );
            if let Some(from) = v.warning_from_t {
                out += &format!(
                    "At the end it was still warning (since {from:.0} s){}.\n",
                    if v.critical_from_t.is_some() {
                        " and paging"
                    } else {
                        ""
                    }
                );
            }
        }
    }
    out += "The shipped rules page at the first evaluation at critical and warn after 30 s at high or above.\n";
    out
}

fn risk_color(r: RiskLevel) -> Option<(chart::Rgb, &'static str)> {
    match r {
        RiskLevel::Low => None,
        RiskLevel::Medium => Some((chart::YELLOW, "risk medium")),
        RiskLevel::High => Some((chart::ORANGE, "risk high")),
        RiskLevel::Critical => Some((chart::RED, "risk critical")),
    }
}

/// Runs of one risk level as shaded bands.
fn risk_bands(forecast: &[ForecastAt]) -> Vec<Band> {
    let mut bands: Vec<Band> = Vec::new();
    let mut prev: Option<(RiskLevel, f64)> = None;
    for s in forecast {
        match prev {
            Some((r, _)) if r == s.risk => {}
            _ => {
                if let Some((r, from)) = prev {
                    if let Some((color, label)) = risk_color(r) {
                        bands.push(Band {
                            x0: from,
                            x1: s.t,
                            label: label.into(),
                            color,
                        });
                    }
                }
                prev = Some((s.risk, s.t));
            }
        }
    }
    if let (Some((r, from)), Some(last)) = (prev, forecast.last()) {
        if let Some((color, label)) = risk_color(r) {
            bands.push(Band {
                x0: from,
                x1: last.t + 1.0,
                label: label.into(),
                color,
            });
        }
    }
    bands
}

/// Two panels per GPU: memory with the processes and the failing request, and the ETA against
/// the time that was really left; both shaded by risk level.
fn chart_panels(g: &GpuSeconds, v: &Verdict, failure: Option<&Failure>, end_t: f64) -> Vec<Panel> {
    const G: f64 = crate::units::GIB;
    let x_max = (end_t + 1.0).max(1.0);
    let total = g
        .memory
        .iter()
        .find_map(|(_, m)| m.map(|m| m.total))
        .unwrap_or(0) as f64
        / G;
    let mine = failure.filter(|f| f.gpu.uuid == g.id.uuid);
    let palette = [
        chart::PURPLE,
        chart::GREEN,
        chart::GREY,
        chart::YELLOW,
        chart::BLUE,
    ];
    let mut lines = vec![
        Line {
            label: "device used".into(),
            color: chart::BLUE,
            width: 2,
            points: g
                .memory
                .iter()
                .map(|(t, m)| (*t, m.map(|m| m.used as f64 / G)))
                .collect(),
        },
        Line {
            label: "device free".into(),
            color: chart::GREEN,
            width: 2,
            points: g
                .memory
                .iter()
                .map(|(t, m)| (*t, m.map(|m| m.free as f64 / G)))
                .collect(),
        },
    ];
    for (i, (pid, series)) in g.processes.iter().enumerate() {
        lines.push(Line {
            label: format!("pid {pid}"),
            color: palette[i % palette.len()],
            width: 1,
            points: series
                .iter()
                .map(|(t, b)| (*t, b.map(|b| b as f64 / G)))
                .collect(),
        });
    }
    let mut markers = vec![];
    if let Some(f) = mine {
        let used = g
            .memory
            .iter()
            .rev()
            .find(|(t, m)| *t <= f.t && m.is_some())
            .and_then(|(_, m)| m.map(|m| m.used as f64 / G))
            .unwrap_or(0.0);
        if let Some(req) = f.request_bytes {
            lines.push(Line {
                label: format!("failing request ({})", gib(req)),
                color: chart::RED,
                width: 10,
                points: vec![(f.t, Some(used)), (f.t, Some(used + req as f64 / G))],
            });
        }
        markers.push(Marker {
            x: f.t,
            label: format!("out of memory at {:.1} s", f.t),
            color: chart::RED,
        });
    }
    let bands = risk_bands(&g.forecast);
    let memory = Panel {
        title: format!("GPU {} · {} · memory", g.id.index, g.id.name),
        y_label: "GiB".into(),
        x_max,
        y_max: (total * 1.08).max(0.1),
        lines,
        hlines: vec![HLine {
            y: total,
            label: format!("capacity {total:.1} GiB"),
            color: chart::GREY,
        }],
        markers: markers.clone(),
        bands: bands.clone(),
    };
    let mut eta_lines = vec![
        Line {
            label: "ETA".into(),
            color: chart::ORANGE,
            width: 2,
            points: g.forecast.iter().map(|s| (s.t, s.eta)).collect(),
        },
        Line {
            label: "ETA bounds".into(),
            color: chart::GREY,
            width: 1,
            points: g.forecast.iter().map(|s| (s.t, s.lower)).collect(),
        },
        Line {
            label: String::new(),
            color: chart::GREY,
            width: 1,
            points: g.forecast.iter().map(|s| (s.t, s.upper)).collect(),
        },
    ];
    // The ETA axis: the longest time really left, else what the forecast showed, at most 15 min.
    let mut y_max = 300.0f64;
    if let Some(f) = mine {
        let start = g.forecast.first().map_or(0.0, |s| s.t);
        y_max = (f.t - start).clamp(60.0, 900.0);
        eta_lines.push(Line {
            label: "time really left".into(),
            color: chart::INK,
            width: 2,
            points: g
                .forecast
                .iter()
                .filter(|s| s.t <= f.t)
                .map(|s| (s.t, Some(f.t - s.t)))
                .collect(),
        });
    } else if let Some(m) = v.min_eta_s {
        y_max = (m * 2.0).clamp(60.0, 900.0);
    }
    for l in &mut eta_lines {
        for p in &mut l.points {
            p.1 = p.1.map(|y| y.min(y_max));
        }
    }
    let eta = Panel {
        title: format!(
            "GPU {} · forecast: ETA against the time really left",
            g.id.index
        ),
        y_label: "seconds".into(),
        x_max,
        y_max,
        lines: eta_lines,
        hlines: vec![],
        markers,
        bands,
    };
    vec![memory, eta]
}
