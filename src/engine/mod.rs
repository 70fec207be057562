//! The engine: takes observations and allocator reports, keeps the bounded history, runs the
//! analysis and builds snapshots. Single-threaded and clock-free; callers own locking and time.
//!
//! Its rooms: this one observes and keeps the books (processes, reports, trust, the table's
//! bounds); `analyse` runs each process's leak test and demand (`analysis::demand`) and each
//! GPU's forecast; `view` builds the snapshots from the engine's state alone (it runs under the
//! caller's lock: pods are looked up outside it, `pods_wanted` / `attribute_pods`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::analysis::demand::{Demand, DemandParams, Moment};
use crate::analysis::fragmentation::{self, AllocatorView};
use crate::analysis::imbalance::imbalance_ratio;
use crate::analysis::incident::ProcessOoms;
use crate::analysis::leak::{self, LeakEstimate, LeakParams, LeakState};
use crate::analysis::oom::{self, DemandPart, RiskInputs, RiskLevel, RiskParams};
use crate::analysis::trend::Trend;
use crate::config::Config;
use crate::history::{Changes, Series};
use crate::model::{Component, DeviceStats, EventKind, Identity, Report};
use crate::model::{DeviceMemory, GpuIdentity, Observation, RejectReason, Rejection, Time};
use crate::snapshot::{GpuView, PodLabels, ProcessView, Snapshot};
use incidents::OomSignal;

type ProcKey = (u32, String);

/// Window over which allocator retries count as "recent".
const RETRY_WINDOW: f64 = 60.0;
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

/// A process's series that only the leak test (5 s floors, read from the coarse tier once the
/// fine one does not reach back), the imbalance (a minute) and the high-water mark (10 s) read
/// keep their 1 s buckets this long: the forecast's window is the demand's, not theirs.
const FLOORS_FINE_WINDOW: f64 = 120.0;

impl SeriesShape {
    /// What the forecast fits: 1 s buckets over its whole window.
    fn series(self) -> Series {
        Series::tiered(self.res, self.fine_window, self.coarse_res, self.window)
    }

    /// The views of a process's demand: pushed once per analysis, so one value a bucket. Past
    /// the forecast's window they are read for what the process needed before it, their
    /// maxima alone (`Demand::update`).
    fn demand(self) -> Series {
        self.series().one_value_a_bucket().peaks_past()
    }

    /// What is read as floors and recent maxima only: past its fine buckets, floors alone.
    fn floors(self) -> Series {
        Series::tiered(
            self.res,
            self.fine_window.min(FLOORS_FINE_WINDOW),
            self.coarse_res,
            self.window,
        )
        .floors_past()
    }

    /// What is read for its floors alone.
    fn floors_only(self) -> Series {
        self.floors().floors_only()
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
    risk: Option<oom::Risk>,
    /// NVML's used bytes less those of the processes it listed, from the latest reading whose
    /// process list was read.
    unattributed: Option<u64>,
    /// Its used bytes at the last analysis.
    used_at_analysis: Option<u64>,
    /// Its OOM events, the driver of its risk, the forecast's score (`incidents`).
    incidents: incidents::GpuIncidents,
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
    last_listed: Option<Time>,
    listed_now: bool,
    last_report: Option<Time>,
    /// Its first report: a process reports a moment before NVML lists it.
    first_report: Option<Time>,
    nvml_used: Option<u64>,
    /// NVML's bytes over time, read for their floors alone (the leak test of a process that
    /// does not report).
    nvml_series: Series,
    alloc: Option<DeviceStats>,
    alloc_series: Series,
    retries: Changes,
    largest_free: Option<(Time, u64)>,
    /// Its failed requests as its client's events and its allocator's counter tell them,
    /// counted once, and grouped into out-of-memory events.
    ooms: ProcessOoms,
    /// The last rise of NVML's bytes while it does not report (when, and by how much): the
    /// step an inferred OOM compares the GPU's free memory with.
    last_rise: Option<(Time, u64)>,
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
    /// What it asks for, needs and holds (`analysis::demand`).
    demand: Demand,
    /// Its own forecast.
    eta: Option<oom::Eta>,
    risk: Option<oom::Risk>,
}

impl ProcState {
    fn new(t: Time, shape: SeriesShape) -> Self {
        ProcState {
            comm: None,
            pod: None,
            last_listed: None,
            listed_now: false,
            last_report: None,
            first_report: None,
            nvml_used: None,
            nvml_series: shape.floors_only(),
            alloc: None,
            alloc_series: shape.floors(),
            retries: Changes::new(RETRY_WINDOW),
            largest_free: None,
            ooms: ProcessOoms::default(),
            last_rise: None,
            identity: Identity::default(),
            phase: None,
            phase_entries: BTreeMap::new(),
            components: Vec::new(),
            leak_state: LeakState::default(),
            leak: None,
            leak_key: None,
            leak_suspected: false,
            demand: Demand::new(t, shape.demand(), shape.floors().one_value_a_bucket()),
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

    /// The allocator's largest free block as last reported, while no older than `ttl`: the
    /// client measures it less often than it reports (a snapshot of the allocator costs more).
    fn largest_free_block(&self, now: Time, ttl: f64) -> Option<u64> {
        self.largest_free
            .filter(|(t, _)| now - t <= ttl)
            .map(|(_, v)| v)
    }

    fn last_activity(&self) -> Time {
        self.last_listed
            .into_iter()
            .chain(self.last_report)
            .fold(self.demand.appeared(), f64::max)
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
    demand_params: DemandParams,
    risk_params: RiskParams,
    gpus: Vec<GpuState>,
    // Ordered, so that sums over processes add up in the same order on every run. Boxed: a
    // process's state is about 2.6 kB, and a B-tree's leaves hold room for eleven of them
    // whether they are full or not (2.4 MB of nodes for 512 processes, 1.3 MB boxed).
    procs: BTreeMap<ProcKey, Box<ProcState>>,
    now: Time,
    last_analysis: Option<Time>,
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
            demand_params: DemandParams::from_config(&cfg.analysis),
            risk_params: RiskParams::from_config(&cfg.analysis.risk),
            cfg: cfg.clone(),
            source: source.to_string(),
            gpus: Vec::new(),
            procs: BTreeMap::new(),
            now: f64::NEG_INFINITY,
            last_analysis: None,
            changes: 0,
            published: None,
        }
    }

    /// Processes shown whose pod is not known: the runtime looks them up outside the lock
    /// (`attribute_pods`), so that a snapshot reads no `/proc`.
    pub fn pods_wanted(&self) -> Vec<u32> {
        let ttl = self.cfg.ingest.expire_after.as_secs_f64();
        let mut pids: Vec<u32> = self
            .procs
            .iter()
            .filter(|(_, p)| p.pod.is_none() && (p.listed_now || p.reporting(self.now, ttl)))
            .map(|(k, _)| k.0)
            .collect();
        pids.dedup();
        pids
    }

    /// The pods found for `pods_wanted`.
    pub fn attribute_pods(&mut self, found: &[(u32, PodLabels)]) {
        for (pid, pod) in found {
            let of_pid = self
                .procs
                .range_mut((*pid, String::new())..)
                .take_while(|(k, _)| k.0 == *pid);
            for (_, p) in of_pid.filter(|(_, p)| p.pod.is_none()) {
                p.pod = Some(pod.clone());
                self.changes += 1;
            }
        }
    }

    pub fn now(&self) -> Time {
        self.now
    }

    pub fn tracked_processes(&self) -> usize {
        self.procs.len()
    }

    /// Forget what `pid`'s reports alone put in the table: its entries on GPUs where NVML does
    /// not list it now. The ingest endpoint makes room this way for a sender the kernel vouches
    /// for, at the cost of one it cannot (src/ingest/admission.rs). How many entries went.
    pub fn forget_reporter(&mut self, pid: u32) -> usize {
        let before = self.procs.len();
        self.procs.retain(|k, p| k.0 != pid || p.listed_now);
        let gone = before - self.procs.len();
        if gone > 0 {
            self.changes += 1;
        }
        gone
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

    fn new_proc(&self, t: Time) -> Box<ProcState> {
        Box::new(ProcState::new(t, self.shape()))
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
                        used_at_analysis: None,
                        incidents: Default::default(),
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
            let mut was_listed = Vec::new();
            for p in self.procs.iter_mut().filter(|(k, _)| k.1 == uuid) {
                if p.1.listed_now {
                    was_listed.push(p.0 .0);
                }
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
                        st.demand.driver_rise(t, (p.used_bytes - prev) as f64);
                        st.last_rise = Some((t, p.used_bytes - prev));
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
            // A process list that could not be read says nothing about who is gone.
            if r.errors.is_empty() {
                self.infer_ooms(idx, t, &was_listed, m.free);
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
        if self.analysis_due(t) {
            self.analyse(t);
            self.last_analysis = Some(t);
        }
    }

    /// At most one analysis per history bucket, and one for every sample that comes a whole
    /// sampling interval after the last: a sampler's ticks land a fraction of a millisecond early
    /// or late (up to 0.3 ms on a four-H100 host), and held to a strict `res` apart, a tick
    /// 0.9997 s after the analysed one would be passed over (a live exporter on 1 s ticks there
    /// analysed two seconds in three, and its loading, stairs and floors saw other points than
    /// the replay of the same samples).
    fn analysis_due(&self, t: Time) -> bool {
        let slack = 0.5 * self.cfg.sample_interval.as_secs_f64().min(self.res);
        self.last_analysis
            .is_none_or(|last| t - last >= self.res - slack || t < last)
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
        // Each signal of failed requests, by process, counted once the report is in.
        let mut ooms: Vec<(ProcKey, OomSignal)> = Vec::new();
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
            // Retries raise the GPU's risk and OOMs count on it: only a process on that GPU may
            // say so.
            if let Some(r) = d.alloc_retries.filter(|_| vouched) {
                st.retries.push(t, r);
            }
            if let Some(lb) = d.largest_free_block_bytes {
                st.largest_free = Some((t, lb));
            }
            st.demand.allocator(t, st.alloc.as_ref(), d);
            let prev_ooms = st.alloc.as_ref().and_then(|a| a.ooms).unwrap_or(0);
            if let Some(o) = d
                .ooms
                .filter(|&o| vouched && o > prev_ooms && st.alloc.is_some())
            {
                ooms.push(((pid, d.uuid.clone()), OomSignal::Counter(o - prev_ooms)));
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
                            let event = OomSignal::Event {
                                request: e.request_bytes,
                                free: e.free_bytes,
                            };
                            ooms.push((key.clone(), event));
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
        for (key, signal) in ooms {
            self.reported_oom(&key, t, signal);
        }
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
}

mod analyse;
mod incidents;
#[cfg(test)]
mod oom_event_tests;
#[cfg(test)]
mod tests;
mod view;
