//! `fragment`: allocator fragmentation over time per GPU: the true fragmentation ratio (free
//! cache stranded in split segments) and the cached-but-unallocated ratio, against the bands
//! (0.15 good, 0.30 moderate, 0.40 severe), with segment counts, allocator
//! retries and advice.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::process::ExitCode;

use serde::Serialize;

use super::chart::{self, HLine, Line, Marker, Panel};
use super::schema;
use super::workflow::{self, round, selected};
use crate::analysis::fragmentation::{advice, band, Bands, BANDS};
use crate::cli::FragmentArgs;
use crate::config::Config;
use crate::model::EventKind;
use crate::runtime::stepped::Sampler;

const MAX_POINTS: usize = 20_000;
const MAX_MARKERS: usize = 30;

#[derive(Debug, Clone, Serialize, Default)]
pub struct FragSeries {
    pub t: Vec<f64>,
    pub fragmentation: Vec<Option<f64>>,
    pub cached_unallocated: Vec<Option<f64>>,
    pub segments: Vec<Option<u64>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FragProcess {
    pub pid: u32,
    pub comm: String,
    pub job: Option<String>,
    pub rank: Option<u64>,
    pub fragmentation: Option<f64>,
    pub cached_unallocated: Option<f64>,
    pub segments: Option<u64>,
    pub inactive_split_bytes: Option<u64>,
    pub largest_free_block_bytes: Option<u64>,
    pub reserved_bytes: Option<u64>,
    pub allocated_bytes: Option<u64>,
    /// Allocator retries (cache flushes to fit an allocation) during the run.
    pub alloc_retries: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FragDevice {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    /// At the end of the run.
    pub fragmentation: Option<f64>,
    pub cached_unallocated: Option<f64>,
    pub avg_fragmentation: Option<f64>,
    pub max_fragmentation: Option<f64>,
    pub p95_fragmentation: Option<f64>,
    pub avg_cached_unallocated: Option<f64>,
    pub max_cached_unallocated: Option<f64>,
    /// Band of the average fragmentation: good, moderate, serious, severe.
    pub band: Option<&'static str>,
    /// Share of the samples in each band.
    pub time_in_band: BTreeMap<&'static str, f64>,
    pub segments: Option<u64>,
    pub max_segments: Option<u64>,
    pub alloc_retries: u64,
    pub empty_cache_events: u64,
    /// Seconds into the run of the `empty_cache` events (the first 1000).
    pub empty_cache_at: Vec<f64>,
    pub advice: Vec<String>,
    pub processes: Vec<FragProcess>,
    pub num_snapshots: u64,
    pub series: FragSeries,
}

#[derive(Debug, Clone, Serialize)]
pub struct FragmentReport {
    #[serde(flatten)]
    pub header: schema::RunHeader,
    pub bands: Bands,
    pub devices: BTreeMap<String, FragDevice>,
}

#[derive(Default)]
struct ProcAcc {
    view: Option<FragProcess>,
    retries_first: Option<u64>,
    retries_last: Option<u64>,
}

#[derive(Default)]
struct DevAcc {
    index: u32,
    uuid: String,
    name: String,
    frag: Vec<f64>,
    cached: Vec<f64>,
    last_frag: Option<f64>,
    last_cached: Option<f64>,
    segments: Option<u64>,
    max_segments: Option<u64>,
    empty_cache: Vec<f64>,
    procs: BTreeMap<u32, ProcAcc>,
    n: u64,
    series: FragSeries,
    stride: usize,
    counter: usize,
}

fn thin<T>(v: &mut Vec<T>) {
    let mut i = 0;
    v.retain(|_| {
        i += 1;
        (i - 1) % 2 == 0
    });
}

fn stats(v: &[f64]) -> (Option<f64>, Option<f64>, Option<f64>) {
    if v.is_empty() {
        return (None, None, None);
    }
    let avg = v.iter().sum::<f64>() / v.len() as f64;
    let max = v.iter().copied().fold(f64::MIN, f64::max);
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let p95 = s[((s.len() - 1) as f64 * 0.95).round() as usize];
    (
        Some(round(avg, 4)),
        Some(round(max, 4)),
        Some(round(p95, 4)),
    )
}

pub fn panels(r: &FragmentReport) -> Vec<Panel> {
    let mut devs: Vec<&FragDevice> = r.devices.values().collect();
    devs.sort_by_key(|d| d.index);
    devs.into_iter()
        .map(|d| {
            let s = &d.series;
            let pts = |v: &[Option<f64>]| s.t.iter().copied().zip(v.iter().copied()).collect();
            Panel {
                title: format!(
                    "GPU {} · {} · fragmentation {}",
                    d.index,
                    d.name,
                    d.band.unwrap_or("unknown")
                ),
                y_label: "ratio".into(),
                x_max: s.t.last().copied().unwrap_or(0.0).max(r.header.duration),
                y_max: 1.0,
                lines: vec![
                    Line {
                        label: "fragmentation (split free / free cached)".into(),
                        color: chart::RED,
                        width: 1,
                        points: pts(&s.fragmentation),
                    },
                    Line {
                        label: "cached unallocated ((reserved-allocated)/reserved)".into(),
                        color: chart::BLUE,
                        width: 1,
                        points: pts(&s.cached_unallocated),
                    },
                ],
                hlines: vec![
                    HLine {
                        y: r.bands.good_below,
                        label: format!("{:.2} good", r.bands.good_below),
                        color: chart::GREEN,
                    },
                    HLine {
                        y: r.bands.moderate_below,
                        label: format!("{:.2} moderate", r.bands.moderate_below),
                        color: chart::YELLOW,
                    },
                    HLine {
                        y: r.bands.serious_below,
                        label: format!("{:.2} severe", r.bands.serious_below),
                        color: chart::RED,
                    },
                ],
                // empty_cache events, when few enough to tell apart.
                markers: d
                    .empty_cache_at
                    .iter()
                    .filter(|_| d.empty_cache_at.len() <= MAX_MARKERS)
                    .map(|&x| Marker {
                        x,
                        label: String::new(),
                        color: chart::PURPLE,
                    })
                    .collect(),
                bands: vec![],
            }
        })
        .collect()
}

pub fn run(cfg: &Config, args: FragmentArgs) -> anyhow::Result<ExitCode> {
    if let Some(o) = &args.output {
        workflow::check_writable(o, "--output")?;
    }
    let plots = workflow::check_plots(&args.plot)?;
    let mut sampler = Sampler::open(cfg, args.sampling.interval)?;
    sampler.check_devices(&args.sampling.devices)?;
    crate::logging::init(cfg);
    let limit = workflow::run_limit(&args.sampling, sampler.is_replay());
    let devices = args.sampling.devices.clone();
    let mut accs: BTreeMap<u32, DevAcc> = BTreeMap::new();
    let end = sampler.run(limit, Some("fragment"), |tick| {
        let snap = tick.snap;
        for g in snap.gpus.iter().filter(|g| selected(&devices, g.id.index)) {
            if g.memory.is_none() {
                continue;
            }
            let a = accs.entry(g.id.index).or_default();
            a.index = g.id.index;
            a.uuid = g.id.uuid.clone();
            a.name = g.id.name.clone();
            a.n += 1;
            if let Some(f) = g.fragmentation {
                a.frag.push(f);
            }
            if let Some(c) = g.cached_unallocated {
                a.cached.push(c);
            }
            a.last_frag = g.fragmentation;
            a.last_cached = g.cached_unallocated;
            let mut segs = None::<u64>;
            for p in snap.processes.iter().filter(|p| p.uuid == g.id.uuid) {
                let Some(al) = &p.allocator else { continue };
                if let Some(s) = al.segments {
                    *segs.get_or_insert(0) += s;
                }
                let pa = a.procs.entry(p.pid).or_default();
                if let Some(r) = al.alloc_retries {
                    pa.retries_first.get_or_insert(r);
                    pa.retries_last = Some(r);
                }
                pa.view = Some(FragProcess {
                    pid: p.pid,
                    comm: p.comm.clone(),
                    job: p.identity.job.clone(),
                    rank: p.identity.rank,
                    fragmentation: p.fragmentation.map(|v| round(v, 4)),
                    cached_unallocated: p.cached_unallocated.map(|v| round(v, 4)),
                    segments: al.segments,
                    inactive_split_bytes: al.inactive_split_bytes,
                    largest_free_block_bytes: p.largest_free_block,
                    reserved_bytes: Some(al.reserved_bytes),
                    allocated_bytes: Some(al.allocated_bytes),
                    alloc_retries: 0,
                });
            }
            a.segments = segs;
            if let Some(s) = segs {
                a.max_segments = Some(a.max_segments.map_or(s, |m| m.max(s)));
            }
            if a.stride == 0 {
                a.stride = 1;
            }
            if a.counter % a.stride == 0 {
                a.series.t.push(round(tick.t, 3));
                a.series
                    .fragmentation
                    .push(g.fragmentation.map(|v| round(v, 4)));
                a.series
                    .cached_unallocated
                    .push(g.cached_unallocated.map(|v| round(v, 4)));
                a.series.segments.push(segs);
                if a.series.t.len() > MAX_POINTS {
                    thin(&mut a.series.t);
                    thin(&mut a.series.fragmentation);
                    thin(&mut a.series.cached_unallocated);
                    thin(&mut a.series.segments);
                    a.stride *= 2;
                }
            }
            a.counter += 1;
        }
        for (pid, report) in &tick.obs.reports {
            for e in &report.events {
                if e.kind == EventKind::Mark && e.name == "empty_cache" {
                    for a in accs.values_mut() {
                        if a.procs.contains_key(pid) && a.empty_cache.len() < 10_000 {
                            a.empty_cache.push(round(tick.t, 3));
                        }
                    }
                }
            }
        }
        ControlFlow::Continue(())
    });
    let mut out = BTreeMap::new();
    for (index, a) in accs {
        let (avg_f, max_f, p95_f) = stats(&a.frag);
        let (avg_c, max_c, _) = stats(&a.cached);
        let mut time_in_band = BTreeMap::new();
        if !a.frag.is_empty() {
            for b in ["good", "moderate", "serious", "severe"] {
                let n = a.frag.iter().filter(|f| band(**f) == b).count();
                time_in_band.insert(b, round(n as f64 / a.frag.len() as f64, 4));
            }
        }
        let processes: Vec<FragProcess> = a
            .procs
            .into_values()
            .filter_map(|p| {
                let retries = p
                    .retries_last
                    .unwrap_or(0)
                    .saturating_sub(p.retries_first.unwrap_or(0));
                p.view.map(|v| FragProcess {
                    alloc_retries: retries,
                    ..v
                })
            })
            .collect();
        let retries: u64 = processes.iter().map(|p| p.alloc_retries).sum();
        let mut adv = Vec::new();
        match avg_f {
            Some(f) => {
                adv.push(advice(f).to_string());
                if max_f.is_some_and(|m| band(m) != band(f)) {
                    adv.push(format!(
                        "At its worst the ratio reached {:.2} ({}): {}",
                        max_f.unwrap_or(0.0),
                        band(max_f.unwrap_or(0.0)),
                        advice(max_f.unwrap_or(0.0))
                    ));
                }
                if avg_c.is_some_and(|c| c > 0.3) && f < BANDS.good_below {
                    adv.push("Much of the cache is free but in whole segments: that is reusable cache, not fragmentation; torch.cuda.empty_cache() would only hand it back to the driver".into());
                }
            }
            None => adv.push("No allocator reports: fragmentation needs the in-process reporter (docs/ingest.md); NVML cannot see inside the allocator".into()),
        }
        if retries > 0 {
            adv.push(format!("{retries} allocator retries during the run: the allocator had to flush its cache to fit allocations; set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True or reduce peak memory"));
        }
        out.insert(
            index.to_string(),
            FragDevice {
                index,
                uuid: a.uuid,
                name: a.name,
                fragmentation: a.last_frag.map(|v| round(v, 4)),
                cached_unallocated: a.last_cached.map(|v| round(v, 4)),
                avg_fragmentation: avg_f,
                max_fragmentation: max_f,
                p95_fragmentation: p95_f,
                avg_cached_unallocated: avg_c,
                max_cached_unallocated: max_c,
                band: avg_f.map(band),
                time_in_band,
                segments: a.segments,
                max_segments: a.max_segments,
                alloc_retries: retries,
                empty_cache_events: a.empty_cache.len() as u64,
                empty_cache_at: a.empty_cache.iter().take(1000).copied().collect(),
                advice: adv,
                processes,
                num_snapshots: a.n,
                series: a.series,
            },
        );
    }
    if out.is_empty() {
        anyhow::bail!("no GPU memory was read: nothing to report");
    }
    let report = FragmentReport {
        header: schema::RunHeader::new("fragment", cfg, &end),
        bands: BANDS,
        devices: out,
    };
    for (path, kind) in &plots {
        chart::render_panels(path, *kind, &panels(&report), "seconds")?;
    }
    workflow::emit(args.output.as_deref(), &report, print_table)?;
    for (path, _) in &plots {
        eprintln!("chart written to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(r: &FragmentReport) {
    println!(
        "fragmentation of {} over {:.1} s (bands: <{:.2} good, <{:.2} moderate, <{:.2} serious, else severe)",
        r.header.source,
        r.header.duration,
        r.bands.good_below,
        r.bands.moderate_below,
        r.bands.serious_below
    );
    println!(
        "{:<4} {:>6} {:>6} {:>6} {:>8} {:<9} {:>9} {:>8}",
        "GPU", "frag", "avg", "max", "cached", "band", "segments", "retries"
    );
    let mut devs: Vec<&FragDevice> = r.devices.values().collect();
    devs.sort_by_key(|d| d.index);
    let f = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
    for d in &devs {
        println!(
            "{:<4} {:>6} {:>6} {:>6} {:>8} {:<9} {:>9} {:>8}",
            d.index,
            f(d.fragmentation),
            f(d.avg_fragmentation),
            f(d.max_fragmentation),
            f(d.avg_cached_unallocated),
            d.band.unwrap_or("-"),
            d.segments
                .map(|s| s.to_string())
                .unwrap_or_else(|| "-".into()),
            d.alloc_retries
        );
    }
    for d in devs {
        for a in &d.advice {
            println!("GPU {}: {a}", d.index);
        }
    }
}
