//! `leak`: which process leaks. Per process: the slope of its memory floor (the allocator's
//! allocated bytes where it reports, NVML's used otherwise), its significance, a verdict, and
//! what to check.
//!
//! Verdicts: `leak` (the engine's leak flag was up at the end: the floor rose faster than the
//! threshold, significantly, for `analysis.leak_persistence`), `suspect` (the flag was up
//! during the run but not at its end, or the floor rises faster than the threshold with
//! p < 0.05 without having persisted yet), `none`, and `insufficient_data` (not enough floor
//! history after the warm-up to judge: `analysis.warmup` + `analysis.leak_min_span`).

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::process::ExitCode;

use serde::Serialize;

use super::schema;
use super::workflow::{self, round, selected};
use crate::cli::LeakArgs;
use crate::config::Config;
use crate::runtime::stepped::{self, Sampler};
use crate::units::MIB;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    InsufficientData,
    None,
    Suspect,
    Leak,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::InsufficientData => "insufficient_data",
            Verdict::None => "none",
            Verdict::Suspect => "suspect",
            Verdict::Leak => "leak",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessLeak {
    pub pid: u32,
    pub comm: String,
    pub gpu: Option<u32>,
    pub uuid: String,
    pub job: Option<String>,
    pub rank: Option<u64>,
    /// Which memory the floor is of: `allocator` (allocated bytes) or `nvml` (used bytes).
    pub measured: &'static str,
    /// Floor slope at the end of the run, MiB per minute.
    pub slope_mib_per_min: Option<f64>,
    /// One-sided Mann–Kendall p-value of "the floor rises".
    pub p_value: Option<f64>,
    pub verdict: Verdict,
    /// Seconds into the run when the engine's leak flag first went up.
    pub flagged_at: Option<f64>,
    /// Change of NVML's used for this process from the end of its warm-up to the end of the
    /// run, MiB (a leak the allocator's cache absorbs leaves it flat).
    pub nvml_used_change_mib: Option<f64>,
    /// Change of the allocated bytes' per-second minimum over the same span, MiB.
    pub allocated_floor_change_mib: Option<f64>,
    pub first_seen: f64,
    pub last_seen: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceLeak {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    /// Sum of the process slopes on the GPU (or the device's own floor), MiB per minute.
    pub slope_mib_per_min: Option<f64>,
    pub leak_suspected: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Suspect {
    pub pid: u32,
    pub comm: String,
    pub gpu: Option<u32>,
    pub job: Option<String>,
    pub rank: Option<u64>,
    pub slope_mib_per_min: f64,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Serialize)]
pub struct LeakReport {
    #[serde(flatten)]
    pub header: schema::RunHeader,
    pub threshold_mib_per_min: f64,
    pub significance: f64,
    /// The worst verdict over all processes.
    pub verdict: Verdict,
    /// The process with the steepest floor among those judged leak (else suspect).
    pub suspect: Option<Suspect>,
    pub processes: Vec<ProcessLeak>,
    pub devices: Vec<DeviceLeak>,
    /// What to check, for the verdict.
    pub advice: Vec<String>,
}

struct Track {
    pid: u32,
    uuid: String,
    gpu: Option<u32>,
    comm: String,
    job: Option<String>,
    rank: Option<u64>,
    reporting: bool,
    slope: Option<f64>,
    p_value: Option<f64>,
    flagged_now: bool,
    flagged_at: Option<f64>,
    nvml_first: Option<u64>,
    nvml_last: Option<u64>,
    /// (second, min allocated within it) of the first and the latest whole second.
    alloc_first: Option<(i64, f64)>,
    alloc_last: Option<(i64, f64)>,
    first_seen: f64,
    last_seen: f64,
}

/// The verdict for one process (see the module's documentation).
pub fn verdict(
    slope: Option<f64>,
    p_value: Option<f64>,
    flagged_now: bool,
    flagged_ever: bool,
    threshold: f64,
) -> Verdict {
    let Some(slope) = slope else {
        return if flagged_ever {
            Verdict::Suspect
        } else {
            Verdict::InsufficientData
        };
    };
    if flagged_now {
        Verdict::Leak
    } else if flagged_ever || (slope > threshold && p_value.is_some_and(|p| p < 0.05)) {
        Verdict::Suspect
    } else {
        Verdict::None
    }
}

fn advice(verdict: Verdict, procs: &[ProcessLeak], threshold: f64) -> Vec<String> {
    let mut out = Vec::new();
    match verdict {
        Verdict::Leak | Verdict::Suspect => {
            for p in procs.iter().filter(|p| p.verdict >= Verdict::Suspect) {
                let who = match (&p.job, p.rank) {
                    (Some(j), Some(r)) => format!("pid {} (job {j}, rank {r})", p.pid),
                    (Some(j), None) => format!("pid {} (job {j})", p.pid),
                    _ => format!("pid {}", p.pid),
                };
                out.push(format!(
                    "{who} on GPU {}: the {} floor rises {:.0} MiB/min ({})",
                    p.gpu.map(|g| g.to_string()).unwrap_or_else(|| "?".into()),
                    if p.measured == "allocator" {
                        "allocated"
                    } else {
                        "NVML used"
                    },
                    p.slope_mib_per_min.unwrap_or(0.0),
                    p.verdict.as_str()
                ));
                if let (Some(n), Some(a)) = (p.nvml_used_change_mib, p.allocated_floor_change_mib)
                {
                    if a > 2.0 * n.max(0.0) + 64.0 {
                        out.push(format!(
                            "NVML's used for pid {} changed {n:+.0} MiB while its allocated floor grew {a:+.0} MiB: the allocator's cache absorbs the leak, nvidia-smi will not show it until the cache runs out",
                            p.pid
                        ));
                    }
                }
            }
            out.extend(
                [
                    "Tensors kept across steps: losses or outputs appended to a list without .detach() or .item()",
                    "Views or slices of activations kept alive keep their whole storage: .clone() the slice or keep a Python number",
                    "Caches and dicts that grow with steps (memoised results, metrics history, hooks storing tensors)",
                    "Autograd graphs kept alive: retain_graph=True, or a loss accumulated as a tensor over steps",
                    "Compare torch.cuda.memory_snapshot() taken at two steps to find the allocation site that grows",
                ]
                .map(String::from),
            );
            if procs
                .iter()
                .any(|p| p.verdict >= Verdict::Suspect && p.measured == "nvml")
            {
                out.push("Only NVML's view is available for some processes: send allocator reports (docs/ingest.md) to see allocated bytes and tell a leak from cache growth".into());
            }
        }
        Verdict::None => out.push(format!(
            "No floor rises faster than {threshold} MiB/min with significance; nothing to do"
        )),
        Verdict::InsufficientData => out.push(
            "Not enough history to judge: a process needs the warm-up (15 s by default) plus 30 s of floor; run longer (--duration)"
                .into(),
        ),
    }
    out
}

pub fn run(cfg: &Config, args: LeakArgs) -> anyhow::Result<ExitCode> {
    let mut cfg = cfg.clone();
    let threshold = args
        .threshold
        .unwrap_or(cfg.analysis.leak_threshold_mib_per_min);
    if !(threshold.is_finite() && threshold > 0.0) {
        return Err(stepped::usage(
            "--threshold",
            format!("{threshold} is not a positive number of MiB per minute"),
        ));
    }
    cfg.analysis.leak_threshold_mib_per_min = threshold;
    if let Some(o) = &args.output {
        workflow::check_writable(o, "--output")?;
    }
    let mut sampler = Sampler::open(&cfg, args.sampling.interval)?;
    sampler.check_devices(&args.sampling.devices)?;
    crate::logging::init(&cfg);
    let limit = workflow::run_limit(&args.sampling, sampler.is_replay());
    let devices = args.sampling.devices.clone();
    let warmup = cfg.analysis.warmup.as_secs_f64();
    let mut tracks: BTreeMap<(u32, String), Track> = BTreeMap::new();
    let mut gpus: BTreeMap<u32, DeviceLeak> = BTreeMap::new();
    let end = sampler.run(limit, Some("leak"), |tick| {
        let snap = tick.snap;
        for g in snap.gpus.iter().filter(|g| selected(&devices, g.id.index)) {
            gpus.insert(
                g.id.index,
                DeviceLeak {
                    index: g.id.index,
                    uuid: g.id.uuid.clone(),
                    name: g.id.name.clone(),
                    slope_mib_per_min: g.leak_slope.map(|s| round(s * 60.0 / MIB, 2)),
                    leak_suspected: g.leak_suspected,
                },
            );
        }
        for p in &snap.processes {
            if !p.gpu.is_some_and(|g| selected(&devices, g)) && !devices.is_empty() {
                continue;
            }
            let tr = tracks
                .entry((p.pid, p.uuid.clone()))
                .or_insert_with(|| Track {
                    pid: p.pid,
                    uuid: p.uuid.clone(),
                    gpu: p.gpu,
                    comm: String::new(),
                    job: None,
                    rank: None,
                    reporting: false,
                    slope: None,
                    p_value: None,
                    flagged_now: false,
                    flagged_at: None,
                    nvml_first: None,
                    nvml_last: None,
                    alloc_first: None,
                    alloc_last: None,
                    first_seen: round(tick.t, 3),
                    last_seen: round(tick.t, 3),
                });
            if !p.comm.is_empty() {
                tr.comm = p.comm.clone();
            }
            if p.identity.job.is_some() {
                tr.job = p.identity.job.clone();
            }
            if p.identity.rank.is_some() {
                tr.rank = p.identity.rank;
            }
            tr.reporting = p.allocator.is_some();
            tr.slope = p.leak_slope;
            tr.p_value = p.leak_p_value;
            tr.flagged_now = p.leak_suspected;
            if p.leak_suspected && tr.flagged_at.is_none() {
                tr.flagged_at = Some(round(tick.t, 3));
            }
            // Changes are measured from the end of the warm-up (model load, cache growth).
            let warm = tick.t - tr.first_seen >= warmup;
            if let Some(u) = p.nvml_used.filter(|_| warm) {
                tr.nvml_first.get_or_insert(u);
                tr.nvml_last = Some(u);
            }
            if let Some(a) = p.allocator.as_ref().filter(|_| warm) {
                let sec = tick.t.floor() as i64;
                let v = a.allocated_bytes as f64;
                let upd = |slot: &mut Option<(i64, f64)>| match slot {
                    Some((s, m)) if *s == sec => *m = m.min(v),
                    _ => *slot = Some((sec, v)),
                };
                match &mut tr.alloc_first {
                    Some((s, m)) if *s == sec => *m = m.min(v),
                    Some(_) => {}
                    None => tr.alloc_first = Some((sec, v)),
                }
                upd(&mut tr.alloc_last);
            }
            tr.last_seen = round(tick.t, 3);
        }
        ControlFlow::Continue(())
    });
    let mut processes: Vec<ProcessLeak> = tracks
        .into_values()
        .map(|t| {
            let slope = t.slope.map(|s| round(s * 60.0 / MIB, 2));
            let v = verdict(
                slope,
                t.p_value,
                t.flagged_now,
                t.flagged_at.is_some(),
                threshold,
            );
            ProcessLeak {
                pid: t.pid,
                comm: t.comm,
                gpu: t.gpu,
                uuid: t.uuid,
                job: t.job,
                rank: t.rank,
                measured: if t.reporting { "allocator" } else { "nvml" },
                slope_mib_per_min: slope,
                p_value: t.p_value.map(|p| if p < 1e-6 { 0.0 } else { round(p, 6) }),
                verdict: v,
                flagged_at: t.flagged_at,
                nvml_used_change_mib: match (t.nvml_first, t.nvml_last) {
                    (Some(a), Some(b)) => Some(round((b as f64 - a as f64) / MIB, 1)),
                    _ => None,
                },
                allocated_floor_change_mib: match (t.alloc_first, t.alloc_last) {
                    (Some(a), Some(b)) if b.0 > a.0 => Some(round((b.1 - a.1) / MIB, 1)),
                    _ => None,
                },
                first_seen: t.first_seen,
                last_seen: t.last_seen,
            }
        })
        .collect();
    processes.sort_by(|a, b| {
        b.verdict.cmp(&a.verdict).then(
            b.slope_mib_per_min
                .unwrap_or(f64::MIN)
                .total_cmp(&a.slope_mib_per_min.unwrap_or(f64::MIN)),
        )
    });
    let overall = processes
        .iter()
        .map(|p| p.verdict)
        .max()
        .unwrap_or(Verdict::InsufficientData);
    let suspect = processes
        .iter()
        .find(|p| p.verdict >= Verdict::Suspect)
        .map(|p| Suspect {
            pid: p.pid,
            comm: p.comm.clone(),
            gpu: p.gpu,
            job: p.job.clone(),
            rank: p.rank,
            slope_mib_per_min: p.slope_mib_per_min.unwrap_or(0.0),
            verdict: p.verdict,
        });
    let report = LeakReport {
        header: schema::RunHeader::new("leak", &cfg, &end),
        threshold_mib_per_min: threshold,
        significance: cfg.analysis.leak_significance,
        verdict: overall,
        advice: advice(overall, &processes, threshold),
        suspect,
        processes,
        devices: gpus.into_values().collect(),
    };
    workflow::emit(args.output.as_deref(), &report, print_table)?;
    Ok(ExitCode::SUCCESS)
}

fn print_table(r: &LeakReport) {
    println!(
        "leak check of {} over {:.1} s, threshold {} MiB/min: {}",
        r.header.source,
        r.header.duration,
        r.threshold_mib_per_min,
        r.verdict.as_str()
    );
    println!(
        "{:<8} {:<4} {:<12} {:<10} {:>5} {:>12} {:>9} {:<17}",
        "pid", "GPU", "comm", "job", "rank", "MiB/min", "p", "verdict"
    );
    for p in &r.processes {
        let comm: String = p.comm.chars().take(12).collect();
        let job: String = p.job.clone().unwrap_or_default().chars().take(10).collect();
        println!(
            "{:<8} {:<4} {:<12} {:<10} {:>5} {:>12} {:>9} {:<17}",
            p.pid,
            p.gpu.map(|g| g.to_string()).unwrap_or_else(|| "-".into()),
            comm,
            job,
            p.rank.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
            p.slope_mib_per_min
                .map(|s| format!("{s:.1}"))
                .unwrap_or_else(|| "-".into()),
            p.p_value
                .map(|v| format!("{v:.4}"))
                .unwrap_or_else(|| "-".into()),
            p.verdict.as_str()
        );
    }
    for a in &r.advice {
        println!("- {a}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(
            verdict(None, None, false, false, 10.0),
            Verdict::InsufficientData
        );
        assert_eq!(
            verdict(Some(200.0), Some(0.0), true, true, 10.0),
            Verdict::Leak
        );
        assert_eq!(
            verdict(Some(200.0), Some(0.001), false, false, 10.0),
            Verdict::Suspect
        );
        assert_eq!(
            verdict(Some(1.0), Some(0.3), false, true, 10.0),
            Verdict::Suspect
        );
        assert_eq!(
            verdict(Some(5.0), Some(0.001), false, false, 10.0),
            Verdict::None
        );
        assert_eq!(
            verdict(Some(50.0), Some(0.4), false, false, 10.0),
            Verdict::None
        );
    }
}
