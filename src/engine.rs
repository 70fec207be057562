//! The engine: takes observations and allocator reports, keeps the bounded history, runs the
//! analysis and builds snapshots. Single-threaded and clock-free; callers own locking and time.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::analysis::fragmentation::{self, AllocatorView};
use crate::analysis::imbalance::imbalance_ratio;
use crate::analysis::leak::{self, LeakEstimate, LeakParams, LeakState};
use crate::analysis::oom::{self, DemandPart, EtaParams, RiskInputs, RiskLevel, RiskParams};
use crate::analysis::trend::{fit_demand, Trend};
use crate::config::Config;
use crate::history::{Changes, Series};
use crate::model::{Component, DeviceStats, EventKind, Identity, Report};
use crate::model::{DeviceMemory, GpuIdentity, Observation, RejectReason, Rejection, Time};
use crate::snapshot::{GpuView, PodLabels, ProcessView, Snapshot};

type ProcKey = (u32, String);

/// Frees of the allocator after which a process counts as working (`ProcState::freed_at`): one
/// free also comes from loading or compiling (a temporary buffer dropped); three are steps.
const WORKING_FREES: u32 = 3;
/// Window over which allocator retries count as "recent".
const RETRY_WINDOW: f64 = 60.0;
/// The high-water mark of a process's allocated bytes is taken over this window: a step's
/// peak is caught by a 1 s report only now and then, and the allocator's own peak only when it
/// sets a new record.
const HIGH_WATER_WINDOW: f64 = 10.0;
/// Ranks of a job are compared by their highest allocated bytes over this window.
const IMBALANCE_WINDOW: f64 = 60.0;
/// Distinct phase names counted per process (`gpumem_process_phase_entries_total` series).
pub const MAX_PHASES_PER_PROCESS: usize = 64;

/// How long and how fine the history of one memory series is.
#[derive(Debug, Clone, Copy)]
struct SeriesShape {
    res: f64,
    /// Kept at `res` for this long (the OOM forecast's window)...
    fine_window: f64,
    /// ...and at the leak test's floor window for the whole history.
    coarse_res: f64,
    window: f64,
}

impl SeriesShape {
    fn series(self) -> Series {
        Series::tiered(self.res, self.fine_window, self.coarse_res, self.window)
    }
}

struct GpuState {
    id: GpuIdentity,
    memory: Option<DeviceMemory>,
    used: Series,
    peak_lifetime: Option<u64>,
    first_seen: Time,
    leak_state: LeakState,
    /// The device's own leak test and the half floor window it was computed in (see
    /// `ProcState::leak_key`).
    leak: Option<LeakEstimate>,
    leak_key: Option<i64>,
    analysis: GpuAnalysis,
    risk: Option<oom::Held>,
    /// NVML's used bytes less those of the processes it listed, from the latest reading whose
    /// process list was read.
    unattributed: Option<u64>,
}

#[derive(Default, Clone)]
struct GpuAnalysis {
    /// The earliest failing process's forecast.
    eta: Option<oom::Eta>,
    /// The steepest credible demand trend on the GPU, the one an ETA leans on most.
    trend: Option<Trend>,
    leak_slope: Option<f64>,
    leak_suspected: bool,
    /// The level assessed now (before the hold) and the allocator retries of the last minute:
    /// with the device's peak, whether headroom is tight but steady (`oom::tight`, read when a
    /// snapshot is built, where the peak is read anyway).
    assessed: RiskLevel,
    retries: u64,
}

struct ProcState {
    comm: Option<String>,
    pod: Option<PodLabels>,
    first_seen: Time,
    last_listed: Option<Time>,
    listed_now: bool,
    last_report: Option<Time>,
    /// Its first report: a process reports a moment before NVML lists it.
    first_report: Option<Time>,
    nvml_used: Option<u64>,
    nvml_series: Series,
    alloc: Option<DeviceStats>,
    alloc_series: Series,
    retries: Changes,
    largest_free: Option<(Time, u64)>,
    last_oom: Option<Time>,
    identity: Identity,
    phase: Option<String>,
    phase_entries: BTreeMap<String, u64>,
    components: Vec<Component>,
    leak_state: LeakState,
    leak: Option<LeakEstimate>,
    /// The half floor window (`LeakParams::half_window`) and the reporting state `leak` was
    /// computed for: the fit runs twice per floor window, not every second.
    leak_key: Option<(i64, bool)>,
    leak_suspected: bool,
    /// What the process needs to get through its next step, one point per analysis (the
    /// forecast's window, and coarser over the history window: what it needed before the
    /// forecast's window), and what it holds now.
    demand: Series,
    held_now: f64,
    /// When it last gave memory back to the driver (an emptied cache, the end of an
    /// evaluation phase): it will ask for it again.
    gave_back_at: Option<Time>,
    /// The high-water mark of the allocator's bytes plus the process's overhead (reporting
    /// processes): its steps show a staircase the held bytes hide while the cache absorbs it.
    /// Tiered like `demand`.
    peak_need: Series,
    /// The allocator's peak of allocated bytes and when it last rose.
    peak: Option<(u64, Time)>,
    /// When the allocator first freed memory: the leak test's history starts there.
    first_free: Option<Time>,
    /// When the allocator had freed memory `WORKING_FREES` times (allocated fell by a step
    /// below its maximum since the last free): the process is working, its step has run a few
    /// times, no longer loading or compiling.
    freed_at: Option<Time>,
    frees: (u32, f64),
    /// Segments taken from the driver (time, bytes) within the forecast's window.
    segments: VecDeque<(Time, f64)>,
    /// Its credible demand trend, and its own forecast.
    demand_trend: Option<Trend>,
    eta: Option<oom::Eta>,
    risk: Option<oom::Held>,
}

impl ProcState {
    fn new(t: Time, shape: SeriesShape) -> Self {
        ProcState {
            comm: None,
            pod: None,
            first_seen: t,
            last_listed: None,
            listed_now: false,
            last_report: None,
            first_report: None,
            nvml_used: None,
            nvml_series: shape.series(),
            alloc: None,
            alloc_series: shape.series(),
            retries: Changes::new(RETRY_WINDOW),
            largest_free: None,
            last_oom: None,
            identity: Identity::default(),
            phase: None,
            phase_entries: BTreeMap::new(),
            components: Vec::new(),
            leak_state: LeakState::default(),
            leak: None,
            leak_key: None,
            leak_suspected: false,
            demand: shape.series(),
            held_now: 0.0,
            gave_back_at: None,
            peak_need: shape.series(),
            peak: None,
            freed_at: None,
            first_free: None,
            frees: (0, 0.0),
            segments: VecDeque::new(),
            demand_trend: None,
            eta: None,
            risk: None,
        }
    }

    /// Still reporting: a report within `ttl`, unless NVML has since stopped listing the
    /// process without a report after its last listing (it exited; its series go at once).
    fn reporting(&self, now: Time, ttl: f64) -> bool {
        let Some(r) = self.last_report else {
            return false;
        };
        let dropped_by_nvml = !self.listed_now && self.last_listed.is_some_and(|l| r <= l);
        now - r <= ttl && !dropped_by_nvml && self.alloc.is_some()
    }

    /// When the warm-up ends (`EtaParams::warmup`).
    fn warm_from(&self, warmup: f64) -> Time {
        let by_age = self.first_seen + warmup;
        self.freed_at.map_or(by_age, |t| t.min(by_age))
    }

    fn last_activity(&self) -> Time {
        self.last_listed
            .into_iter()
            .chain(self.last_report)
            .fold(self.first_seen, f64::max)
    }

    /// The series the leak and ETA analyses read: the allocator's view where the process
    /// reports (NVML cannot see a leak the cache absorbs), NVML's otherwise.
    fn demand_series(&self, reporting: bool) -> &Series {
        if reporting {
            &self.alloc_series
        } else {
            &self.nvml_series
        }
    }
}

/// Which (pid, GPU) pairs may move the GPU's own analysis: a process speaks for itself only
/// on the GPUs NVML lists it on (`ingest.require_nvml_listing`), or listed within
/// `ingest.listing_grace`. Anyone who can reach the ingest socket can send a report; only a
/// process that really holds memory on a GPU is listed there.
#[derive(Debug, Clone, Copy)]
struct Trust {
    required: bool,
    grace: f64,
}

impl Trust {
    fn vouches(self, p: &ProcState, now: Time) -> bool {
        !self.required || p.listed_now || p.last_listed.is_some_and(|l| now - l <= self.grace)
    }
}

/// What became of an accepted report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    /// GPUs the report spoke of where NVML does not list the sender: its numbers are kept as
    /// the process's own, with no effect on the GPU's risk, forecast, fragmentation or
    /// imbalance.
    pub unlisted: Vec<String>,
    /// Device entries and OOM events that had no effect at GPU level for that reason.
    pub unlisted_items: u64,
    /// How long the sender has been reporting on those GPUs: a process that has just started
    /// is listed at the next sample, one that stays unlisted longer than the grace is not.
    pub unlisted_for: f64,
}

/// Looks up a process's pod; the Kubernetes attribution plugs in here.
pub trait PodResolver: Send {
    fn resolve(&mut self, pid: u32) -> Option<PodLabels>;
}

/// The current snapshot of an engine behind its lock (`Engine::current`).
pub fn current(engine: &Mutex<Engine>) -> Arc<Snapshot> {
    engine.lock().unwrap_or_else(|e| e.into_inner()).current()
}

pub struct Engine {
    cfg: Config,
    source: String,
    res: f64,
    window: f64,
    leak_params: LeakParams,
    eta_params: EtaParams,
    risk_params: RiskParams,
    gpus: Vec<GpuState>,
    // Ordered, so that sums over processes add up in the same order on every run.
    procs: BTreeMap<ProcKey, ProcState>,
    now: Time,
    last_analysis: Option<Time>,
    pod_resolver: Option<Box<dyn PodResolver>>,
    /// Counts the samples and reports folded in: a snapshot is current while this is unchanged.
    changes: u64,
    published: Option<(u64, Arc<Snapshot>)>,
}

impl Engine {
    pub fn new(cfg: &Config, source: &str) -> Self {
        Engine {
            res: cfg.history.resolution.as_secs_f64(),
            window: cfg.history.window.as_secs_f64(),
            leak_params: LeakParams::from_config(&cfg.analysis),
            eta_params: EtaParams::from_config(&cfg.analysis),
            risk_params: RiskParams::from_config(&cfg.analysis.risk),
            cfg: cfg.clone(),
            source: source.to_string(),
            gpus: Vec::new(),
            procs: BTreeMap::new(),
            now: f64::NEG_INFINITY,
            last_analysis: None,
            pod_resolver: None,
            changes: 0,
            published: None,
        }
    }

    pub fn set_pod_resolver(&mut self, r: Box<dyn PodResolver>) {
        self.pod_resolver = Some(r);
    }

    pub fn now(&self) -> Time {
        self.now
    }

    pub fn tracked_processes(&self) -> usize {
        self.procs.len()
    }

    fn trust(&self) -> Trust {
        Trust {
            required: self.cfg.ingest.require_nvml_listing,
            grace: self.cfg.ingest.listing_grace.as_secs_f64(),
        }
    }

    fn shape(&self) -> SeriesShape {
        let a = &self.cfg.analysis;
        SeriesShape {
            res: self.res,
            fine_window: a.eta_window.as_secs_f64(),
            coarse_res: a.floor_window.as_secs_f64(),
            window: self.window,
        }
    }

    fn new_proc(&self, t: Time) -> ProcState {
        ProcState::new(t, self.shape())
    }

    /// Fold one observation in, then analyse if a history bucket has closed since last time.
    pub fn observe(&mut self, obs: &Observation) {
        self.changes += 1;
        let t = obs.t;
        self.now = self.now.max(t);
        for r in &obs.gpus {
            let idx = match self.gpus.iter().position(|g| g.id.uuid == r.id.uuid) {
                Some(i) => i,
                None => {
                    self.gpus.push(GpuState {
                        id: r.id.clone(),
                        memory: None,
                        used: self.shape().series(),
                        peak_lifetime: None,
                        first_seen: t,
                        leak_state: LeakState::default(),
                        leak: None,
                        leak_key: None,
                        analysis: GpuAnalysis::default(),
                        risk: None,
                        unattributed: None,
                    });
                    self.gpus.len() - 1
                }
            };
            let g = &mut self.gpus[idx];
            g.id = r.id.clone();
            g.memory = r.memory;
            let Some(m) = r.memory else {
                continue;
            };
            g.used.push(t, m.used as f64);
            g.peak_lifetime = Some(g.peak_lifetime.unwrap_or(0).max(m.used));
            // A failed process list would make every byte look unattributed.
            g.unattributed = r.errors.is_empty().then(|| {
                let listed: u64 = r.processes.iter().map(|p| p.used_bytes).sum();
                m.used.saturating_sub(listed)
            });
            let uuid = r.id.uuid.clone();
            let report_ttl = self.cfg.ingest.expire_after.as_secs_f64();
            for p in self.procs.iter_mut().filter(|(k, _)| k.1 == uuid) {
                p.1.listed_now = false;
            }
            for p in &r.processes {
                let key = (p.pid, uuid.clone());
                if !self.procs.contains_key(&key) {
                    if !self.make_room(true) {
                        tracing::debug!(pid = p.pid, "process table full of listed processes");
                        continue;
                    }
                    let st = self.new_proc(t);
                    self.procs.insert(key.clone(), st);
                }
                let st = self.procs.get_mut(&key).expect("inserted above");
                st.listed_now = true;
                st.last_listed = Some(t);
                // Without reports, a rise in NVML's bytes is the size of what it took.
                if !st.reporting(t, report_ttl) {
                    if let Some(prev) = st.nvml_used.filter(|&u| p.used_bytes > u) {
                        st.segments.push_back((t, (p.used_bytes - prev) as f64));
                    }
                }
                st.nvml_used = Some(p.used_bytes);
                // The analysis reads NVML's bytes only for a process that does not report:
                // keeping both histories would double the memory of every reporting process.
                if st.reporting(t, report_ttl) {
                    if !st.nvml_series.is_empty() {
                        st.nvml_series.clear();
                    }
                } else {
                    st.nvml_series.push(t, p.used_bytes as f64);
                }
                if p.comm.is_some() {
                    st.comm = p.comm.clone();
                }
            }
        }
        for (pid, report) in &obs.reports {
            // The simulator's and replay's reports take the same path as real ones.
            if let Err(e) = self.report(*pid, t, report) {
                // A warning per report would flood the log whenever the process table is full
                // (gpumem_exporter_tracked_processes shows that).
                tracing::debug!(pid, error = %e, "source produced a report the ingest path rejects");
            }
        }
        self.expire(t);
        if self
            .last_analysis
            .is_none_or(|last| t - last >= self.res || t < last)
        {
            self.analyse(t);
            self.last_analysis = Some(t);
        }
    }

    /// Stay under `history.max_processes`: forget the least recently active entry that is no
    /// longer active; for a process NVML lists (`listed`), else the report-only entry that
    /// reported least recently. NVML-listed processes always find room while any entry is
    /// report-only, so reports from processes that are not on a GPU cannot crowd them out.
    fn make_room(&mut self, listed: bool) -> bool {
        if self.procs.len() < self.cfg.history.max_processes {
            return true;
        }
        let expire = self.cfg.ingest.expire_after.as_secs_f64();
        let now = self.now;
        let trust = self.trust();
        let oldest = |filter: &dyn Fn(&ProcState) -> bool| {
            self.procs
                .iter()
                .filter(|(_, p)| filter(p))
                .min_by(|a, b| a.1.last_activity().total_cmp(&b.1.last_activity()))
                .map(|(k, _)| k.clone())
        };
        let mut victim = oldest(&|p| !p.listed_now && !p.reporting(now, expire));
        if victim.is_none() && listed {
            victim = oldest(&|p| !p.listed_now && !trust.vouches(p, now));
        }
        match victim {
            Some(k) => {
                self.procs.remove(&k);
                true
            }
            None => false,
        }
    }

    fn expire(&mut self, now: Time) {
        let keep = self.cfg.history.expire_after.as_secs_f64();
        let report_ttl = self.cfg.ingest.expire_after.as_secs_f64();
        self.procs.retain(|_, p| {
            p.listed_now || p.reporting(now, report_ttl) || now - p.last_activity() <= keep
        });
    }

    /// Apply an allocator report from `pid` received at `t`. The pid comes from the transport.
    /// A report naming a GPU this host does not have is refused whole; one from a process NVML
    /// does not list on a GPU is kept as that process's own (see `Trust`).
    pub fn report(&mut self, pid: u32, t: Time, report: &Report) -> Result<Applied, Rejection> {
        let t = if t.is_finite() { t } else { self.now };
        // An OOM event names its device: the observer fires while the allocator is failing and
        // sends no statistics, so the event may be the first word from that (pid, GPU).
        let oom_devices: Vec<(usize, &str)> = report
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == EventKind::Oom && !e.name.is_empty())
            .map(|(i, e)| (i, e.name.as_str()))
            .collect();
        for (field, uuid) in report
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| (format!("devices[{i}].uuid"), d.uuid.as_str()))
            .chain(
                oom_devices
                    .iter()
                    .map(|(i, u)| (format!("events[{i}].name"), *u)),
            )
        {
            if !self.gpus.iter().any(|g| g.id.uuid == uuid) {
                return Err(self.unknown_gpu(&field, uuid));
            }
        }
        self.changes += 1;
        let wanted: Vec<ProcKey> = report
            .devices
            .iter()
            .map(|d| d.uuid.as_str())
            .chain(oom_devices.iter().map(|(_, u)| *u))
            .map(|u| (pid, u.to_string()))
            .collect();
        for key in wanted {
            if !self.procs.contains_key(&key) {
                // NVML would have listed it already: this entry is report-only.
                if !self.make_room(false) {
                    return Err(Rejection {
                        reason: RejectReason::TooManyProcesses,
                        message: format!(
                            "the exporter already tracks {} processes (history.max_processes)",
                            self.cfg.history.max_processes
                        ),
                    });
                }
                let st = self.new_proc(t);
                self.procs.insert(key, st);
            }
        }
        let trust = self.trust();
        let mut applied = Applied::default();
        for d in &report.devices {
            let st = self
                .procs
                .get_mut(&(pid, d.uuid.clone()))
                .expect("inserted above");
            let vouched = trust.vouches(st, t);
            let first = *st.first_report.get_or_insert(t);
            if !vouched {
                applied.unlisted.push(d.uuid.clone());
                applied.unlisted_items += 1;
                applied.unlisted_for = applied.unlisted_for.max(t - first);
            }
            st.last_report = Some(t);
            st.alloc_series.push(t, d.allocated_bytes as f64);
            // Retries and OOMs raise the GPU's risk: only a process on that GPU may say so.
            if let Some(r) = d.alloc_retries.filter(|_| vouched) {
                st.retries.push(t, r);
            }
            if let Some(lb) = d.largest_free_block_bytes {
                st.largest_free = Some((t, lb));
            }
            if let Some(prev) = &st.alloc {
                // New segments: their mean size is the size of request the allocator had to
                // take from the driver.
                if d.reserved_bytes > prev.reserved_bytes {
                    let n = match (d.segments, prev.segments) {
                        (Some(a), Some(b)) if a > b => a - b,
                        _ => 1,
                    };
                    let size = (d.reserved_bytes - prev.reserved_bytes) as f64 / n as f64;
                    st.segments.push_back((t, size));
                }
            }
            if st.freed_at.is_none() {
                let allocated = d.allocated_bytes as f64;
                let (n, high) = &mut st.frees;
                if allocated < *high - oom::MIN_STEP_BYTES {
                    *n += 1;
                    *high = allocated;
                    st.first_free.get_or_insert(t);
                    if *n >= WORKING_FREES {
                        st.freed_at = Some(t);
                    }
                } else {
                    *high = high.max(allocated);
                }
            }
            if let Some(pk) = d.allocated_peak_bytes {
                if st.peak.is_none_or(|(old, _)| pk > old) {
                    st.peak = Some((pk, t));
                }
            }
            let prev_ooms = st.alloc.as_ref().and_then(|a| a.ooms).unwrap_or(0);
            if vouched && d.ooms.is_some_and(|o| o > prev_ooms) && st.alloc.is_some() {
                st.last_oom = Some(t);
            }
            st.alloc = Some(d.clone());
        }
        // Identity, phases, marks and components belong to the process, whichever of its GPUs
        // a report carries (a mark-only report carries none).
        for (key, st) in self.procs.range_mut((pid, String::new())..) {
            if key.0 != pid {
                break;
            }
            let vouched = trust.vouches(st, t);
            if report.identity != Identity::default() {
                st.identity = report.identity.clone();
            }
            if let Some(c) = &report.components {
                st.components = c.clone();
            }
            for e in &report.events {
                match e.kind {
                    // Each phase name is a label value: cap how many one process can add.
                    EventKind::Phase
                        if st.phase_entries.len() < MAX_PHASES_PER_PROCESS
                            || st.phase_entries.contains_key(&e.name) =>
                    {
                        *st.phase_entries.entry(e.name.clone()).or_insert(0) += 1;
                    }
                    EventKind::Oom if e.name.is_empty() || e.name == key.1 => {
                        if vouched {
                            st.last_oom = Some(t);
                        } else {
                            applied.unlisted_items += 1;
                            if !applied.unlisted.contains(&key.1) {
                                applied.unlisted.push(key.1.clone());
                            }
                        }
                    }
                    _ => {}
                }
            }
            if let Some(phase) = &report.phase {
                st.phase = phase.clone();
            } else if let Some(e) = report
                .events
                .iter()
                .rev()
                .find(|e| e.kind == EventKind::Phase)
            {
                st.phase = Some(e.name.clone());
            }
        }
        self.now = self.now.max(t);
        Ok(applied)
    }

    fn unknown_gpu(&self, field: &str, uuid: &str) -> Rejection {
        const SHOWN: usize = 8;
        let known: Vec<&str> = self
            .gpus
            .iter()
            .take(SHOWN)
            .map(|g| g.id.uuid.as_str())
            .collect();
        let more = if self.gpus.len() > SHOWN { ", ..." } else { "" };
        Rejection {
            reason: RejectReason::UnknownGpu,
            message: if known.is_empty() {
                format!("{field}: {uuid} is not a GPU of this host (no GPU has been read yet)")
            } else {
                format!(
                    "{field}: {uuid} is not a GPU of this host (it has {}: {}{more})",
                    self.gpus.len(),
                    known.join(", ")
                )
            },
        }
    }

    fn reporting(&self, p: &ProcState, now: Time) -> bool {
        p.reporting(now, self.cfg.ingest.expire_after.as_secs_f64())
    }

    fn analyse(&mut self, now: Time) {
        let lp = self.leak_params;
        let warmup = self.eta_params.warmup;
        let ttl = self.cfg.ingest.expire_after.as_secs_f64();
        let eta_window = self.cfg.analysis.eta_window.as_secs_f64();
        for p in self.procs.values_mut() {
            let reporting = p.reporting(now, ttl);
            let warm = p.warm_from(warmup);
            let key = (lp.half_window(now), reporting);
            let series = p.demand_series(reporting);
            let leak_from = p.first_free.map_or(warm, |t| t.min(warm));
            let estimate =
                (p.leak_key != Some(key)).then(|| leak::estimate(series, leak_from, now, &lp));
            if let Some(e) = estimate {
                p.leak = e;
                p.leak_key = Some(key);
            }
            p.leak_suspected = p.leak_state.update(p.leak.as_ref(), now, lp.persistence);
            while p.segments.front().is_some_and(|s| s.0 < now - eta_window) {
                p.segments.pop_front();
            }
            if p.listed_now || reporting {
                let peak = Self::peak_need(p, reporting, now);
                let (need, held) = Self::need_and_held(p, peak, warmup);
                p.demand.push(now, need);
                if now >= warm && held < p.held_now - oom::MIN_STEP_BYTES {
                    p.gave_back_at = Some(now);
                }
                p.held_now = held;
                if let Some(peak) = peak {
                    p.peak_need.push(now, peak);
                }
            }
            // Only the points since the warm-up: a loading ramp is no part of the trend, and a
            // trend becomes credible only once it has lasted `eta_min_span` after it.
            // Of the two views of its growth, the steeper credible one: the held bytes grow
            // faster than the peak when split segments serve new peaks only in part, the peak
            // shows steps the cache absorbs for a while.
            // Demand counts as growth only above what the process already needed before the
            // window, its loading included: a peak that comes back to the same height (an
            // evaluation, a burst of requests, a cache taken again after `empty_cache`) is a
            // recurring need, not growth.
            let from = warm.max(now - eta_window);
            let fit = |s: &Series| {
                let before = s.max_before(from).unwrap_or(f64::NEG_INFINITY);
                let points: Vec<(f64, f64)> =
                    s.since(from).map(|b| (b.t, b.max().max(before))).collect();
                fit_demand(&points, oom::MIN_STEP_BYTES)
            };
            let ep = self.eta_params;
            p.demand_trend = if now >= warm {
                [
                    (fit(&p.demand), &p.demand),
                    (fit(&p.peak_need), &p.peak_need),
                ]
                .into_iter()
                .filter_map(|(t, raw)| t.zip(Some(raw)))
                .filter(|(t, raw)| oom::credible(t, &ep) && oom::persistent(t, raw, from, now))
                .map(|(t, _)| t)
                .max_by(|a, b| a.slope.total_cmp(&b.slope))
            } else {
                None
            };
        }
        // A process NVML does not list on a GPU has no forecast or risk there (see `Trust`).
        let trust = self.trust();
        for p in self.procs.values_mut().filter(|p| !trust.vouches(p, now)) {
            p.eta = None;
            p.risk = None;
        }
        for gi in 0..self.gpus.len() {
            let analysis = self.analyse_gpu(gi, now);
            self.gpus[gi].analysis = analysis;
        }
    }

    /// The size of request that fails: the second largest segment the process took from the
    /// driver recently (the requests that fail are the ones a step makes again and again; a
    /// buffer allocated once is no guide). Segments taken while loading do not count.
    fn request(p: &ProcState, warmup: f64) -> f64 {
        let (mut first, mut second) = (0.0f64, 0.0f64);
        let warm = p.warm_from(warmup);
        for s in p.segments.iter().filter(|s| s.0 >= warm) {
            if s.1 > first {
                second = first;
                first = s.1;
            } else if s.1 > second {
                second = s.1;
            }
        }
        second
    }

    /// The high-water mark of a reporting process's allocated bytes over the last
    /// `HIGH_WATER_WINDOW` seconds, plus what it holds outside the allocator.
    fn peak_need(p: &ProcState, reporting: bool, now: Time) -> Option<f64> {
        let a = p.alloc.as_ref().filter(|_| reporting)?;
        let nvml = if p.listed_now { p.nvml_used } else { None };
        let overhead = nvml
            .map(|u| (u as f64 - a.reserved_bytes as f64).max(0.0))
            .unwrap_or(0.0);
        let since = now - HIGH_WATER_WINDOW;
        let sampled = p
            .alloc_series
            .max_since(since)
            .unwrap_or(a.allocated_bytes as f64);
        // A new record of the allocator's peak is the exact peak of a recent step.
        let record = p
            .peak
            .filter(|(_, t)| *t >= since)
            .map_or(0.0, |(v, _)| v as f64);
        Some(sampled.max(record) + overhead)
    }

    /// Bytes the process needs to get through its next step and bytes it holds from the driver,
    /// given its `peak_need` (reporting processes).
    fn need_and_held(p: &ProcState, peak: Option<f64>, warmup: f64) -> (f64, f64) {
        let nvml = if p.listed_now { p.nvml_used } else { None };
        match (peak, &p.alloc) {
            (Some(peak), Some(a)) => {
                let held = nvml.map_or(a.reserved_bytes as f64, |u| u as f64);
                // Two ways to run out, whichever comes first. The cache keeps growing segment
                // by segment (split segments serve a new peak only in part), and the segment
                // after the last one that fits fails: on average when the free memory beside
                // the held bytes is gone. Or the next peak, with one more request of the size
                // it takes, does not fit at all.
                ((peak + Self::request(p, warmup)).max(held), held)
            }
            _ => {
                let used = nvml.unwrap_or(0) as f64;
                (used, used)
            }
        }
    }

    fn analyse_gpu(&mut self, gi: usize, now: Time) -> GpuAnalysis {
        let g = &self.gpus[gi];
        let Some(m) = g.memory else {
            return GpuAnalysis::default();
        };
        let uuid = g.id.uuid.clone();
        let warmup = self.eta_params.warmup;
        let eta_window = self.cfg.analysis.eta_window.as_secs_f64();
        let mut keys = Vec::new();
        let mut parts = Vec::new();
        let mut attributed = 0.0;
        let mut slope_sum = None::<f64>;
        let mut any_suspected = false;
        let trust = self.trust();
        for (k, p) in self.procs.iter().filter(|(k, _)| k.1 == uuid) {
            let reporting = self.reporting(p, now);
            if !(p.listed_now || reporting) || !trust.vouches(p, now) {
                continue;
            }
            // What `analyse` pushed for this tick (the same condition pushes it).
            let newest = |s: &Series| s.newest().map_or(0.0, |b| b.last());
            let (need, held) = (newest(&p.demand), p.held_now);
            attributed += held;
            let trend = p.demand_trend;
            // Took memory from the driver, or gave some back that it will want again (an
            // emptied cache, an eval phase), within the window and after warm-up (loading is
            // a rise that ends).
            let warm = p.warm_from(warmup);
            let cycles = p.gave_back_at.is_some_and(|t| t >= now - eta_window)
                || p.segments.iter().any(|s| s.0 >= warm);
            parts.push(DemandPart {
                need,
                held,
                asks: need > held || trend.is_some() || cycles,
                trend,
            });
            keys.push(k.clone());
            if let Some(l) = &p.leak {
                *slope_sum.get_or_insert(0.0) += l.trend.slope;
            }
            any_suspected |= p.leak_suspected;
        }
        // Memory no listed process accounts for holds its place and asks for nothing.
        let unattributed = (m.used as f64 - attributed).max(0.0);
        parts.push(DemandPart {
            need: unattributed,
            held: unattributed,
            ..Default::default()
        });
        let capacity = (m.total - m.reserved) as f64;
        let mut first: Option<oom::Eta> = None;
        let (mut retries, mut oom_age) = (0, None::<f64>);
        for (i, key) in keys.iter().enumerate() {
            let e = oom::eta(capacity, &parts, i, &self.eta_params);
            if let Some(e) = e {
                if first.is_none_or(|f| e.seconds < f.seconds) {
                    first = Some(e);
                }
            }
            let Some(p) = self.procs.get_mut(key) else {
                continue;
            };
            p.eta = e;
            // A process's risk is its own forecast (a neighbour's growth shortens it when the
            // process asks for memory) and what its own allocator says: the big flat process
            // is not the one at risk, the one that grows or must take memory back is.
            let own = RiskInputs {
                eta: e.map(|e| e.seconds),
                rising: parts[i].trend.is_some(),
                recent_retries: Self::recent_retries(p, now),
                oom_age: p.last_oom.map(|t| now - t),
                ..Default::default()
            };
            retries += own.recent_retries;
            if let Some(a) = own.oom_age {
                oom_age = Some(oom_age.map_or(a, |b| b.min(a)));
            }
            p.risk = Some(oom::hold(p.risk, now, oom::assess(&own, &self.risk_params)));
        }
        let trend = parts
            .iter()
            .filter_map(|p| p.trend)
            .max_by(|a, b| a.slope.total_cmp(&b.slope));
        let assessed = oom::assess(
            &RiskInputs {
                eta: first.map(|e| e.seconds),
                rising: trend.is_some(),
                used_fraction: (m.total > 0).then(|| 1.0 - m.free as f64 / m.total as f64),
                recent_retries: retries,
                oom_age,
            },
            &self.risk_params,
        );

        // Without per-process data the device's own floor is all there is.
        let g = &mut self.gpus[gi];
        let key = self.leak_params.half_window(now);
        if g.leak_key != Some(key) {
            g.leak = leak::estimate(&g.used, g.first_seen, now, &self.leak_params);
            g.leak_key = Some(key);
        }
        let device_leak = g.leak;
        let device_flag =
            g.leak_state
                .update(device_leak.as_ref(), now, self.leak_params.persistence);
        let leak_slope = slope_sum.or(device_leak.map(|l| l.trend.slope));
        g.risk = Some(oom::hold(g.risk, now, assessed));
        GpuAnalysis {
            eta: first,
            trend,
            leak_slope,
            leak_suspected: any_suspected || (slope_sum.is_none() && device_flag),
            assessed: assessed.0,
            retries,
        }
    }

    fn process_view(&mut self, key: &ProcKey, now: Time) -> Option<ProcessView> {
        let ttl = self.cfg.ingest.expire_after.as_secs_f64();
        let block_ttl = self.cfg.ingest.largest_block_ttl.as_secs_f64();
        let gpu = self
            .gpus
            .iter()
            .find(|g| g.id.uuid == key.1)
            .map(|g| g.id.index);
        let trust = self.trust();
        let resolver = self.pod_resolver.as_mut();
        let p = self.procs.get_mut(key)?;
        let reporting = p.reporting(now, ttl);
        if !(p.listed_now || reporting) {
            return None;
        }
        // Unverified: the process's own numbers only, nothing derived that an alert reads.
        let verified = trust.vouches(p, now);
        if p.pod.is_none() {
            if let Some(r) = resolver {
                p.pod = r.resolve(key.0);
            }
        }
        let alloc = if reporting { p.alloc.clone() } else { None };
        let largest = p
            .largest_free
            .filter(|(t, _)| now - t <= block_ttl)
            .map(|(_, v)| v);
        let view = alloc.as_ref().filter(|_| verified).map(|a| AllocatorView {
            allocated: a.allocated_bytes as f64,
            reserved: a.reserved_bytes as f64,
            inactive_split: a.inactive_split_bytes.map(|v| v as f64),
            largest_free_block: largest.map(|v| v as f64),
        });
        let nvml_used = if p.listed_now { p.nvml_used } else { None };
        let overhead = match (nvml_used, &alloc) {
            (Some(u), Some(a)) => Some(u as f64 - a.reserved_bytes as f64),
            _ => None,
        };
        Some(ProcessView {
            gpu,
            uuid: key.1.clone(),
            pid: key.0,
            comm: p.comm.clone().unwrap_or_default(),
            pod: p.pod.clone(),
            nvml_used,
            largest_free_block: if alloc.is_some() { largest } else { None },
            overhead,
            identity: p.identity.clone(),
            phase: if alloc.is_some() {
                p.phase.clone()
            } else {
                None
            },
            phase_entries: p
                .phase_entries
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            components: p.components.clone(),
            verified,
            leak_slope: p.leak.filter(|_| verified).map(|l| l.trend.slope),
            leak_p_value: p.leak.filter(|_| verified).map(|l| l.trend.p_value),
            leak_suspected: p.leak_suspected && verified,
            eta_seconds: p.eta.map(|e| e.seconds),
            risk: RiskLevel::Low,
            fragmentation: view.as_ref().and_then(fragmentation::fragmentation_ratio),
            cached_unallocated: view
                .as_ref()
                .and_then(fragmentation::cached_unallocated_ratio),
            allocator: alloc,
            age: now - p.first_seen,
        })
    }

    fn recent_retries(p: &ProcState, now: Time) -> u64 {
        p.retries.growth(now, RETRY_WINDOW)
    }

    /// The snapshot of what the engine holds now, built only when something was folded in
    /// since the last one. Scrapes and the live view ask for it; the sampler does not, so a
    /// sample costs no snapshot that nobody reads (at 8 GPUs × 64 processes, one costs about a
    /// third of what the rest of a sample does; with Prometheus scraping every 15 s and
    /// sampling every second, fourteen in fifteen went unread).
    pub fn current(&mut self) -> Arc<Snapshot> {
        match &self.published {
            Some((changes, snap)) if *changes == self.changes => Arc::clone(snap),
            _ => {
                let snap = Arc::new(self.snapshot());
                self.published = Some((self.changes, Arc::clone(&snap)));
                snap
            }
        }
    }

    /// Build the snapshot for the latest observation (`current` reuses it while nothing
    /// changed).
    pub fn snapshot(&mut self) -> Snapshot {
        let now = self.now;
        let mut keys: Vec<ProcKey> = self.procs.keys().cloned().collect();
        keys.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
        let mut order: Vec<usize> = (0..self.gpus.len()).collect();
        order.sort_by_key(|&i| self.gpus[i].id.index);
        let mut processes: Vec<ProcessView> = keys
            .iter()
            .filter_map(|k| self.process_view(k, now))
            .collect();
        let peak_window = self.cfg.analysis.peak_window.as_secs_f64();
        let mut gpus = Vec::with_capacity(self.gpus.len());
        for g in order.iter().map(|&i| &self.gpus[i]) {
            let on_gpu: Vec<&ProcessView> = processes
                .iter()
                .filter(|p| p.uuid == g.id.uuid && p.verified)
                .collect();
            let views: Vec<AllocatorView> = on_gpu
                .iter()
                .filter_map(|p| {
                    p.allocator.as_ref().map(|a| AllocatorView {
                        allocated: a.allocated_bytes as f64,
                        reserved: a.reserved_bytes as f64,
                        inactive_split: a.inactive_split_bytes.map(|v| v as f64),
                        largest_free_block: p.largest_free_block.map(|v| v as f64),
                    })
                })
                .collect();
            let (cached, frag) = if views.is_empty() {
                (None, None)
            } else {
                fragmentation::combine(&views)
            };
            let up = g.memory.is_some();
            // The history keeps f32 values: never show a peak below the current reading.
            let peak = g
                .used
                .max_since(now - peak_window)
                .map(|v| (v as u64).max(g.memory.map(|m| m.used).unwrap_or(0)));
            let headroom_tight = match (peak, g.memory) {
                (Some(peak), Some(m)) => oom::tight(
                    g.analysis.assessed,
                    g.analysis.retries,
                    peak as f64 / m.total.max(1) as f64,
                    &self.risk_params,
                ),
                _ => false,
            };
            let mut view = GpuView {
                id: g.id.clone(),
                up,
                memory: g.memory,
                peak_lifetime: g.peak_lifetime,
                peak_window: peak,
                eta_seconds: g.analysis.eta.map(|e| e.seconds),
                eta_lower_seconds: g.analysis.eta.map(|e| e.lower),
                eta_upper_seconds: g.analysis.eta.and_then(|e| e.upper),
                growth_bytes_per_second: g.analysis.eta.map(|e| e.slope),
                trend: g.analysis.trend,
                risk: RiskLevel::Low,
                risk_reason: oom::RiskReason::None,
                recommendation: "",
                leak_slope: g.analysis.leak_slope,
                leak_suspected: g.analysis.leak_suspected,
                headroom_tight,
                fragmentation: frag,
                cached_unallocated: cached,
                unattributed: g.unattributed.filter(|_| up),
            };
            if let (true, Some(r)) = (up, g.risk) {
                view.risk = r.level;
                view.risk_reason = r.reason;
                view.recommendation = oom::recommendation(r.level, r.reason, frag);
            }
            gpus.push(view);
        }
        for p in &mut processes {
            p.risk = self.procs[&(p.pid, p.uuid.clone())]
                .risk
                .map_or(RiskLevel::Low, |r| r.level);
        }
        let used: Vec<f64> = gpus
            .iter()
            .filter_map(|g| g.memory.map(|m| m.used as f64))
            .collect();
        // Ranks are compared by their high-water marks over a minute of reports: allocated
        // bytes caught at a random phase of each rank's step make balanced ranks look up to
        // 1.7 apart.
        let mut jobs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for p in processes.iter().filter(|p| p.verified) {
            if let Some(job) = &p.identity.job {
                let v = p
                    .allocator
                    .as_ref()
                    .and_then(|_| {
                        self.procs[&(p.pid, p.uuid.clone())]
                            .alloc_series
                            .max_since(now - IMBALANCE_WINDOW)
                    })
                    .or(p.nvml_used.map(|u| u as f64));
                if let Some(v) = v {
                    jobs.entry(job.clone()).or_default().push(v);
                }
            }
        }
        Snapshot {
            t: now,
            source: self.source.clone(),
            gpus,
            processes,
            node_imbalance: imbalance_ratio(&used),
            job_imbalance: jobs
                .into_iter()
                .filter_map(|(j, v)| imbalance_ratio(&v).map(|r| (j, r)))
                .collect(),
            peak_window_label: humantime::format_duration(self.cfg.analysis.peak_window)
                .to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::oom::RiskReason;
    use crate::model::{GpuReading, ProcessReading};

    fn obs(t: Time, pids: &[u32]) -> Observation {
        Observation {
            t,
            gpus: vec![GpuReading {
                id: GpuIdentity {
                    index: 0,
                    uuid: "GPU-0".into(),
                    name: "test".into(),
                    pci_bus_id: String::new(),
                    mig: None,
                },
                memory: Some(DeviceMemory {
                    total: 100 << 30,
                    reserved: 0,
                    used: 10 << 30,
                    free: 90 << 30,
                }),
                processes: pids
                    .iter()
                    .map(|&pid| ProcessReading {
                        pid,
                        used_bytes: 5 << 30,
                        comm: Some("python3".into()),
                    })
                    .collect(),
                errors: vec![],
            }],
            reports: pids
                .iter()
                .map(|&pid| {
                    (
                        pid,
                        Report {
                            version: 1,
                            devices: vec![DeviceStats {
                                uuid: "GPU-0".into(),
                                allocated_bytes: 1 << 30,
                                reserved_bytes: 4 << 30,
                                ..Default::default()
                            }],
                            ..Default::default()
                        },
                    )
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn an_exited_process_loses_its_series_at_once() {
        let mut e = Engine::new(&Config::default(), "test");
        for i in 0..10 {
            e.observe(&obs(i as f64, &[7, 8]));
        }
        assert_eq!(e.snapshot().processes.len(), 2);
        // pid 8 exits: NVML stops listing it and it sends nothing more.
        e.observe(&obs(10.0, &[7]));
        let pids: Vec<u32> = e.snapshot().processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, vec![7]);
    }

    #[test]
    fn the_current_snapshot_is_built_once_per_change() {
        let mut e = Engine::new(&Config::default(), "test");
        e.observe(&obs(1.0, &[7]));
        let first = e.current();
        assert!(
            Arc::ptr_eq(&first, &e.current()),
            "nothing new: the same one"
        );
        e.observe(&obs(2.0, &[7, 8]));
        let second = e.current();
        assert_eq!((second.t, second.processes.len()), (2.0, 2));
        // A report alone (no sample) shows at once.
        let mut r = obs(2.0, &[9]).reports.remove(0).1;
        r.devices[0].allocated_bytes = 3 << 30;
        e.report(9, 2.5, &r).unwrap();
        let third = e.current();
        assert!(!Arc::ptr_eq(&second, &third));
        let p9 = third.processes.iter().find(|p| p.pid == 9).expect("pid 9");
        assert_eq!(p9.allocator.as_ref().unwrap().allocated_bytes, 3 << 30);
    }

    #[test]
    fn a_reporting_process_nvml_does_not_list_keeps_only_its_own_numbers() {
        let mut e = Engine::new(&Config::default(), "test");
        let mut o = obs(0.0, &[7]);
        o.gpus[0].processes.clear();
        e.observe(&o);
        let snap = e.snapshot();
        assert_eq!(snap.processes.len(), 1);
        let p = &snap.processes[0];
        assert!(p.allocator.is_some());
        assert!(p.nvml_used.is_none());
        assert!(!p.verified);
        assert_eq!((p.fragmentation, p.leak_slope), (None, None));
        assert_eq!(snap.gpus[0].fragmentation, None, "nothing at GPU level");
    }

    #[test]
    fn without_the_listing_check_a_reporting_process_counts_in_full() {
        let mut cfg = Config::default();
        cfg.ingest.require_nvml_listing = false;
        let mut e = Engine::new(&cfg, "test");
        let mut o = obs(0.0, &[7]);
        o.gpus[0].processes.clear();
        o.reports[0].1.devices[0].inactive_split_bytes = Some(1 << 30);
        e.observe(&o);
        let snap = e.snapshot();
        assert!(snap.processes[0].verified);
        assert!(snap.gpus[0].fragmentation.is_some());
    }

    /// An OOM event and retry counters for GPU-0 from `pid`, the way a real OOM observer and
    /// client would send them.
    fn oom_report(pid_retries: u64) -> Report {
        Report {
            version: 1,
            devices: vec![DeviceStats {
                uuid: "GPU-0".into(),
                allocated_bytes: 1 << 30,
                reserved_bytes: 2 << 30,
                alloc_retries: Some(pid_retries),
                ooms: Some(pid_retries),
                ..Default::default()
            }],
            events: vec![crate::model::Event {
                kind: EventKind::Oom,
                name: "GPU-0".into(),
                message: None,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn forged_ooms_and_retries_from_a_process_not_on_the_gpu_move_nothing_there() {
        let mut e = Engine::new(&Config::default(), "test");
        for i in 0..5 {
            e.observe(&obs(i as f64, &[7]));
        }
        // pid 99 never touched the GPU: NVML does not list it.
        for (i, n) in [(5, 0), (6, 5), (7, 50)] {
            let a = e.report(99, i as f64, &oom_report(n)).unwrap();
            assert_eq!(a.unlisted, vec!["GPU-0".to_string()]);
            assert_eq!(a.unlisted_for, i as f64 - 5.0, "reporting since t = 5");
            e.observe(&obs(i as f64 + 0.5, &[7]));
        }
        let snap = e.snapshot();
        assert_eq!(snap.gpus[0].risk, RiskLevel::Low, "{:?}", snap.gpus[0]);
        let forger = snap.processes.iter().find(|p| p.pid == 99).unwrap();
        assert_eq!((forger.verified, forger.risk), (false, RiskLevel::Low));
        // The same words from pid 7, which NVML lists there, page.
        for (i, n) in [(8, 0), (9, 5)] {
            let a = e.report(7, i as f64, &oom_report(n)).unwrap();
            assert!(a.unlisted.is_empty());
            e.observe(&obs(i as f64 + 0.5, &[7]));
        }
        assert_eq!(e.snapshot().gpus[0].risk, RiskLevel::Critical);
    }

    #[test]
    fn a_process_stays_trusted_for_the_grace_period_after_its_last_listing() {
        let mut e = Engine::new(&Config::default(), "test");
        e.observe(&obs(0.0, &[7]));
        // NVML misses it for a few samples (it still reports).
        let mut o = obs(5.0, &[7]);
        o.gpus[0].processes.clear();
        e.observe(&o);
        assert!(e
            .report(7, 5.5, &oom_report(0))
            .unwrap()
            .unlisted
            .is_empty());
        let mut o = obs(30.0, &[7]);
        o.gpus[0].processes.clear();
        e.observe(&o);
        let a = e.report(7, 30.5, &oom_report(1)).unwrap();
        assert_eq!(a.unlisted, vec!["GPU-0".to_string()], "grace is over");
    }

    #[test]
    fn a_report_naming_a_gpu_the_host_lacks_is_refused_whole() {
        let mut e = Engine::new(&Config::default(), "test");
        e.observe(&obs(0.0, &[7]));
        let mut r = oom_report(0);
        r.devices[0].uuid = "GPU-elsewhere".into();
        let err = e.report(7, 1.0, &r).unwrap_err();
        assert_eq!(err.reason, RejectReason::UnknownGpu);
        assert!(
            err.message.contains("devices[0].uuid") && err.message.contains("GPU-0"),
            "{err}"
        );
        // An OOM event alone names its GPU too.
        let mut r = oom_report(0);
        r.devices.clear();
        r.events[0].name = "GPU-elsewhere".into();
        let err = e.report(7, 1.0, &r).unwrap_err();
        assert!(err.message.starts_with("events[0].name"), "{err}");
        assert_eq!(e.tracked_processes(), 1, "nothing was added");
        let before = e.current();
        assert!(Arc::ptr_eq(&before, &e.current()), "nothing changed");
    }

    #[test]
    fn listed_processes_always_find_room_in_a_table_full_of_report_only_entries() {
        let mut cfg = Config::default();
        cfg.history.max_processes = 8;
        let mut e = Engine::new(&cfg, "test");
        e.observe(&obs(0.0, &[1]));
        let mut refused = 0;
        for pid in 100..120 {
            if let Err(r) = e.report(pid, 0.5, &oom_report(0)) {
                assert_eq!(r.reason, RejectReason::TooManyProcesses);
                refused += 1;
            }
        }
        assert_eq!(refused, 13, "7 report-only entries fit beside pid 1");
        let listed: Vec<u32> = (1..=6).collect();
        e.observe(&obs(1.0, &listed));
        let snap = e.snapshot();
        for pid in &listed {
            let p = snap.processes.iter().find(|p| p.pid == *pid);
            assert!(p.is_some_and(|p| p.verified), "pid {pid} is listed");
        }
        assert_eq!(e.tracked_processes(), 8);
    }

    #[test]
    fn the_process_at_risk_is_the_one_that_grows_not_the_largest() {
        let gib = (1u64 << 30) as f64;
        let mut e = Engine::new(&Config::default(), "test");
        for t in 0..200u32 {
            let t = t as f64;
            // pid 7 leaks 0.2 GiB/s under a 2 GiB sawtooth; pid 8 holds 50 GiB and stays flat.
            let floor = 5.0 * gib + 0.2 * gib * t;
            let allocated = floor + if t as u64 % 2 == 0 { 2.0 * gib } else { 0.0 };
            let reserved = floor + 2.5 * gib;
            let mut o = obs(t, &[7, 8]);
            let g = &mut o.gpus[0];
            let m = g.memory.as_mut().unwrap();
            m.used = (reserved + 0.5 * gib + 50.0 * gib) as u64;
            m.free = m.total - m.used;
            g.processes[0].used_bytes = (reserved + 0.5 * gib) as u64;
            g.processes[1].used_bytes = (50.0 * gib) as u64;
            o.reports.truncate(1);
            let d = &mut o.reports[0].1.devices[0];
            d.allocated_bytes = allocated as u64;
            d.reserved_bytes = reserved as u64;
            d.allocated_peak_bytes = Some((floor + 2.0 * gib) as u64);
            e.observe(&o);
        }
        let snap = e.snapshot();
        assert!(
            snap.gpus[0].risk >= RiskLevel::High,
            "{:?}",
            snap.gpus[0].risk
        );
        let risk = |pid| snap.processes.iter().find(|p| p.pid == pid).unwrap().risk;
        assert!(risk(7) >= RiskLevel::High, "the grower: {:?}", risk(7));
        assert_eq!(risk(8), RiskLevel::Low, "the large flat neighbour");
        let eta = |pid| {
            snap.processes
                .iter()
                .find(|p| p.pid == pid)
                .unwrap()
                .eta_seconds
        };
        assert!(eta(7).is_some() && eta(8).is_none());
    }

    /// Training at 60 GiB, and every 40 s an evaluation that takes the process to 97 GiB of a
    /// 100 GiB GPU with allocator retries, then `empty_cache`: the same peak every time.
    fn tight_eval(t: f64, grow: f64) -> Observation {
        let gib = (1u64 << 30) as f64;
        let base = 60.0 * gib + grow * t;
        let eval = (t as u64 % 40) >= 32;
        let allocated = base
            + if eval {
                34.0 * gib
            } else {
                2.0 * gib * (t as u64 % 2) as f64
            };
        let reserved = if eval {
            base + 36.0 * gib
        } else {
            base + 3.0 * gib
        };
        let mut o = obs(t, &[7]);
        let g = &mut o.gpus[0];
        let m = g.memory.as_mut().unwrap();
        m.used = (reserved + 0.5 * gib) as u64;
        m.free = m.total - m.used;
        g.processes[0].used_bytes = m.used;
        let d = &mut o.reports[0].1.devices[0];
        d.allocated_bytes = allocated as u64;
        d.reserved_bytes = reserved as u64;
        d.allocated_peak_bytes = Some((base + 34.0 * gib) as u64);
        // Two retries at the start of every evaluation.
        d.alloc_retries = Some(2 * (t as u64 / 40 + u64::from((t as u64 % 40) >= 32)));
        o
    }

    #[test]
    fn a_tight_but_steady_job_is_a_ticket_not_a_page() {
        let mut e = Engine::new(&Config::default(), "test");
        let mut tight_seen = false;
        for t in 0..400u32 {
            e.observe(&tight_eval(t as f64, 0.0));
            let snap = e.snapshot();
            let g = &snap.gpus[0];
            assert!(
                g.risk < RiskLevel::High,
                "t={t}: {:?} {:?}",
                g.risk,
                g.risk_reason
            );
            assert!(g.eta_seconds.is_none(), "t={t}: ETA {:?}", g.eta_seconds);
            tight_seen |= g.headroom_tight;
        }
        assert!(tight_seen, "retries near the limit are tight headroom");
    }

    #[test]
    fn the_same_job_with_a_growing_floor_pages() {
        // The job above with 30 MiB/s of growth under it: its peaks no longer come back to
        // the same height.
        let mut e = Engine::new(&Config::default(), "test");
        let mut worst = RiskLevel::Low;
        for t in 0..100u32 {
            e.observe(&tight_eval(t as f64, 30.0 * 1048576.0));
            worst = worst.max(e.snapshot().gpus[0].risk);
        }
        assert!(worst >= RiskLevel::High, "{worst:?}");
    }

    #[test]
    fn balanced_ranks_at_different_phases_of_their_step_are_balanced() {
        let mut e = Engine::new(&Config::default(), "test");
        let gib = (1u64 << 30) as f64;
        let pids: Vec<u32> = (100..108).collect();
        for t in 0..30 {
            let mut o = obs(t as f64, &pids);
            o.reports.clear();
            e.observe(&o);
            for rank in 0..8u32 {
                // A 0.37 s step: allocated swings 2 -> 6 GiB, each rank at its own phase.
                let phase = (t as f64 / 0.37 + rank as f64 * 0.13).fract();
                let r = Report {
                    version: 1,
                    identity: Identity {
                        job: Some("llm".into()),
                        rank: Some(rank as u64),
                        ..Default::default()
                    },
                    devices: vec![DeviceStats {
                        uuid: "GPU-0".into(),
                        allocated_bytes: ((2.0 + 4.0 * phase) * gib) as u64,
                        reserved_bytes: (7.0 * gib) as u64,
                        allocated_peak_bytes: Some((6.0 * gib) as u64),
                        ..Default::default()
                    }],
                    ..Default::default()
                };
                e.report(100 + rank, t as f64, &r).unwrap();
            }
        }
        let snap = e.snapshot();
        let (_, ratio) = snap.job_imbalance[0];
        assert!(ratio < 1.1, "balanced ranks read {ratio}");
    }

    #[test]
    fn allocator_retries_without_growth_are_medium_and_tight_for_a_minute() {
        let mut e = Engine::new(&Config::default(), "test");
        let with_retries = |t: Time, retries: u64| {
            let mut o = obs(t, &[7]);
            o.reports[0].1.devices[0].alloc_retries = Some(retries);
            o
        };
        for i in 0..100 {
            // Two retries at t = 30, none before or after.
            e.observe(&with_retries(i as f64, if i < 30 { 4 } else { 6 }));
            let gpu = &e.snapshot().gpus[0];
            // Nothing grows: medium (tight headroom, a ticket) for the minute the retries count,
            // then held for RISK_HOLD seconds.
            let expect = if (30..90 + oom::RISK_HOLD as i32).contains(&i) {
                (RiskLevel::Medium, RiskReason::AllocRetries)
            } else {
                (RiskLevel::Low, RiskReason::None)
            };
            assert_eq!((gpu.risk, gpu.risk_reason), expect, "at t = {i}");
            assert_eq!(
                gpu.headroom_tight,
                (30..90).contains(&i),
                "tight at t = {i}"
            );
        }
    }

    #[test]
    fn memory_no_listed_process_accounts_for_is_unattributed() {
        let mut e = Engine::new(&Config::default(), "test");
        // 10 GiB used, one listed process holding 5 GiB.
        e.observe(&obs(0.0, &[7]));
        assert_eq!(e.snapshot().gpus[0].unattributed, Some(5 << 30));
        e.observe(&obs(1.0, &[7, 8]));
        assert_eq!(e.snapshot().gpus[0].unattributed, Some(0));
        // Without a process list, nothing can be said.
        let mut o = obs(2.0, &[]);
        o.gpus[0].errors.push(crate::model::ErrorKind::NotSupported);
        e.observe(&o);
        assert_eq!(e.snapshot().gpus[0].unattributed, None);
    }
}
