//! Sampling real GPUs through a blocking backend (NVML).
//!
//! One reader thread makes a sample's calls, GPU after GPU, and hands the observation on from
//! that same thread: a sample costs one thread wake-up however many GPUs there are, as a plain
//! loop of the same calls would. (A thread per GPU, asked by a sampler thread, cost a third
//! more CPU than the calls themselves at the default interval.)
//!
//! A sick GPU can make a call hang. A watchdog then reports that GPU down, leaves the stuck
//! thread to it, and starts a new reader that finishes the sample and carries on; nobody calls
//! that GPU again until the stuck call has come back. The watchdog costs nothing while calls
//! return in time: it sleeps on a timer that each sample pushes further out.
//!
//! When the backend fails as a whole (driver reload), it is initialised again, under the same
//! deadline as every call: an initialisation that hangs is left to its thread like a stuck
//! call, and until it comes back nobody initialises again and every sample reports the GPUs
//! down for the driver without asking them. At start, an initialisation that hangs is an error
//! rather than an exporter that never serves.
//!
//! A panic in the reader costs one reading or one observation, never the reader: a backend
//! call that panics is that GPU down in that sample, a hand-off that panics loses that
//! observation, and the reader goes on with the next sample. The next observation counts
//! the restart.
//!
//! `Source::sample` asks the reader for one sample and waits for it (the command-line
//! workflows, tests); `Source::run` lets the reader keep the exporter's rhythm itself.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Source;
use crate::config::NvmlConfig;
use crate::model::{
    DeviceMemory, ErrorKind, GpuIdentity, GpuReading, Observation, ProcessReading, Time,
};
use crate::pace::{unpoisoned, Pace, Schedule, Stop};

/// The calls the sampler needs. NVML implements it; tests implement it with scripted faults.
pub trait Backend: Send + Sync + 'static {
    /// (Re)initialise and return the number of GPUs.
    fn init(&self) -> Result<u32, ErrorKind>;
    fn identity(&self, index: u32) -> Result<GpuIdentity, ErrorKind>;
    fn memory(&self, index: u32) -> Result<DeviceMemory, ErrorKind>;
    /// (pid, used bytes) of compute and graphics processes; a pid in both lists once.
    fn processes(&self, index: u32) -> Result<Vec<(u32, u64)>, ErrorKind>;
}

/// What the readers and the watchdog share.
struct Core<B: Backend> {
    backend: B,
    deadline: Duration,
    read_comm: bool,
    proc_root: PathBuf,
    state: Mutex<State>,
    /// Times the watchdog's timer fired (a healthy run needs none).
    watchdog_wakes: AtomicU64,
    /// Panics the readers survived since start.
    reader_restarts: AtomicU64,
    /// How many of those observations have carried to whoever they were handed to.
    restarts_handed_on: AtomicU64,
}

struct State {
    /// The reader that owns the sampling. A reader whose number this no longer is was
    /// superseded while stuck in a call, and stops when the call comes back.
    reader: u64,
    identities: Vec<GpuIdentity>,
    /// Per GPU: since when a superseded reader has been stuck in a call to it.
    stuck: Vec<Option<Instant>>,
    /// Since when a superseded reader has been stuck initialising the backend.
    init_stuck: Option<Instant>,
    /// A stuck initialisation came back after all: the next sample initialises again to learn
    /// the GPUs it found. (Its own reader cannot install them: the reader that took over may
    /// be in a sample over the GPUs known before.)
    reinit_wanted: bool,
    /// The call the current reader is in, since when.
    calling: Option<(Call, Instant)>,
    /// The sample in progress.
    round: Option<Round>,
}

/// A backend call the deadline applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    /// Reading the GPU of this index.
    Gpu(usize),
    /// Initialising the backend and listing the GPUs.
    Init,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Call::Gpu(i) => write!(f, "reading GPU {i}"),
            Call::Init => f.write_str("initialising NVML"),
        }
    }
}

struct Round {
    t: Time,
    began: Instant,
    readings: Vec<Option<GpuReading>>,
}

/// Where a reader's work on a sample ended.
enum Finished {
    /// The sample, to hand on.
    Done(Observation),
    /// `me` was superseded: the reader that took over hands the sample on; this one stops.
    Superseded,
    /// No sample in progress (a reader resumed after the sample was handed on).
    Nothing,
}

/// What the watchdog found.
enum Check {
    /// The reader has been in one call for the deadline; a new reader with this number must
    /// take over.
    TakeOver(u64),
    /// The reader is in a call that may still come back in time: look again then.
    Again(Instant),
    /// No call in progress.
    Idle,
}

/// Names of processes by pid, read once per process from `/proc/<pid>/comm`.
type Comms = HashMap<u32, Option<String>>;

fn down(id: &GpuIdentity, kind: ErrorKind) -> GpuReading {
    GpuReading {
        id: id.clone(),
        memory: None,
        processes: vec![],
        errors: vec![kind],
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)")
}

impl<B: Backend> Core<B> {
    fn state(&self) -> MutexGuard<'_, State> {
        unpoisoned(self.state.lock())
    }

    /// The GPUs as the backend lists them now; none when it cannot list them.
    fn identities(&self) -> Result<Vec<GpuIdentity>, ErrorKind> {
        let count = self.backend.init()?;
        Ok((0..count)
            .map(|i| {
                self.backend.identity(i).unwrap_or(GpuIdentity {
                    index: i,
                    uuid: format!("GPU-unknown-{i}"),
                    name: String::new(),
                    pci_bus_id: String::new(),
                    mig: None,
                })
            })
            .collect())
    }

    /// Start the sample at `t` as reader `me`; false when `me` has been superseded.
    fn begin(&self, me: u64, t: Time) -> bool {
        let mut st = self.state();
        if st.reader != me {
            return false;
        }
        let n = st.identities.len();
        st.round = Some(Round {
            t,
            began: Instant::now(),
            readings: vec![None; n],
        });
        true
    }

    /// The time of the sample in progress.
    fn round_time(&self) -> Option<Time> {
        self.state().round.as_ref().map(|r| r.t)
    }

    /// Read the GPUs the sample in progress still lacks, initialise the backend again when it
    /// failed as a whole, and complete the sample.
    fn finish(&self, me: u64, comms: &mut Comms) -> Finished {
        loop {
            let (index, id) = {
                let mut guard = self.state();
                let st = &mut *guard;
                if st.reader != me {
                    return Finished::Superseded;
                }
                let Some(round) = st.round.as_mut() else {
                    return Finished::Nothing;
                };
                let Some(i) = round.readings.iter().position(Option::is_none) else {
                    break;
                };
                if st.stuck.get(i).is_some_and(Option::is_some) {
                    round.readings[i] = Some(down(&st.identities[i], ErrorKind::Timeout));
                    continue;
                }
                if st.init_stuck.is_some() {
                    // Not asked: the initialisation began because every GPU failed for the
                    // driver (or after one that did), so asking would tell nothing new, and the
                    // handles belong to the library state it is rebuilding, so every call
                    // could hang behind it. Down for the driver rather than a timeout: no GPU
                    // was asked; the driver is what does not answer.
                    round.readings[i] = Some(down(&st.identities[i], ErrorKind::Driver));
                    continue;
                }
                st.calling = Some((Call::Gpu(i), Instant::now()));
                (i, st.identities[i].clone())
            };
            let reading = self.read(index, id, comms);
            let mut st = self.state();
            if st.reader != me {
                // It came back after all; the next sample asks it again.
                if let Some(s) = st.stuck.get_mut(index) {
                    *s = None;
                }
                return Finished::Superseded;
            }
            st.calling = None;
            if let Some(round) = st.round.as_mut() {
                round.readings[index] = Some(reading);
            }
        }
        // The sample stays in progress while the backend is initialised: if that hangs, the
        // reader that takes over hands it on.
        let init = {
            let mut st = self.state();
            if st.reader != me {
                return Finished::Superseded;
            }
            let Some(round) = st.round.as_ref() else {
                return Finished::Nothing;
            };
            // Every GPU failing with a driver error means NVML itself is gone (driver reload);
            // no GPU at all, that it may not have been ready.
            let whole_failure = round
                .readings
                .iter()
                .flatten()
                .all(|g| g.memory.is_none() && g.errors.contains(&ErrorKind::Driver));
            let due = (whole_failure || st.reinit_wanted) && st.init_stuck.is_none();
            if due {
                st.calling = Some((Call::Init, Instant::now()));
                st.reinit_wanted = false;
            }
            due
        };
        let listed = init.then(|| self.guarded(Call::Init, || self.identities()));
        let mut st = self.state();
        if st.reader != me {
            if init {
                st.init_stuck = None;
                st.reinit_wanted = matches!(listed, Some(Ok(_)));
            }
            return Finished::Superseded;
        }
        let mut reinitialised = false;
        if init {
            st.calling = None;
            if let Some(Ok(ids)) = listed {
                st.stuck.resize(ids.len(), None);
                st.identities = ids;
                reinitialised = true;
                tracing::warn!(gpus = st.identities.len(), "NVML initialised again");
            }
        }
        let Some(round) = st.round.take() else {
            return Finished::Nothing;
        };
        drop(st);
        let gpus: Vec<GpuReading> = round.readings.into_iter().flatten().collect();
        comms.retain(|pid, _| {
            gpus.iter()
                .any(|g| g.processes.iter().any(|p| p.pid == *pid))
        });
        Finished::Done(Observation {
            t: round.t,
            gpus,
            reports: vec![],
            duration_seconds: round.began.elapsed().as_secs_f64(),
            reinitialised,
            reader_restarts: self.restarts_to_hand_on(),
        })
    }

    fn read(&self, index: usize, id: GpuIdentity, comms: &mut Comms) -> GpuReading {
        let index32 = index as u32;
        let call = Call::Gpu(index);
        let mut errors = Vec::new();
        let memory = match self.guarded(call, || self.backend.memory(index32)) {
            Ok(m) => Some(m),
            Err(k) => {
                errors.push(k);
                None
            }
        };
        let mut processes = Vec::new();
        if memory.is_some() {
            match self.guarded(call, || self.backend.processes(index32)) {
                Ok(list) => {
                    for (pid, used) in list {
                        processes.push(ProcessReading {
                            pid,
                            used_bytes: used,
                            comm: self.comm(pid, comms),
                        });
                    }
                }
                // The device answered; its process list did not. Keep the device up.
                Err(k) => errors.push(k),
            }
        }
        GpuReading {
            id,
            memory,
            processes,
            errors,
        }
    }

    fn comm(&self, pid: u32, comms: &mut Comms) -> Option<String> {
        if !self.read_comm {
            return None;
        }
        comms
            .entry(pid)
            .or_insert_with(|| {
                std::fs::read_to_string(self.proc_root.join(pid.to_string()).join("comm"))
                    .ok()
                    .map(|s| s.trim_end().to_string())
            })
            .clone()
    }

    /// A backend call whose panic is its failure (`Other`), so that it costs one reading and
    /// the bookkeeping around the call (`calling`, `stuck`) stays right. Unwind safety: what a
    /// panic can leave half-changed is the backend's own state, and NVML's is replaced whole by
    /// the next initialisation. (This relies on panics unwinding: no `panic = "abort"` in a
    /// profile.)
    fn guarded<T>(
        &self,
        call: Call,
        f: impl FnOnce() -> Result<T, ErrorKind>,
    ) -> Result<T, ErrorKind> {
        catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
            self.restarted(&call.to_string(), &*panic);
            Err(ErrorKind::Other)
        })
    }

    fn restarted(&self, during: &str, panic: &(dyn Any + Send)) {
        self.reader_restarts.fetch_add(1, Ordering::Relaxed);
        tracing::error!(
            during,
            panic = panic_message(panic),
            "the GPU reader panicked; it goes on with the next sample"
        );
    }

    fn restarts_to_hand_on(&self) -> u32 {
        let n = self
            .reader_restarts
            .load(Ordering::Relaxed)
            .saturating_sub(self.restarts_handed_on.load(Ordering::Relaxed));
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// After an observation reached its receiver: an observation lost on the way leaves its
    /// restarts to the next one.
    fn handed_on(&self, restarts: u32) {
        self.restarts_handed_on
            .fetch_add(u64::from(restarts), Ordering::Relaxed);
    }

    /// One sample's work; a panic outside the backend calls (which are guarded on their own)
    /// costs the GPUs not read yet, not the reader.
    fn attempt(&self, me: u64, t: Option<Time>, work: impl FnOnce() -> Finished) -> Finished {
        catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|panic| self.recover(me, t, &*panic))
    }

    /// After a panic in a sample's work: the sample in progress (or, with no sample in
    /// progress, the one at `t`), with the GPUs it had not read down; unless `me` has been
    /// superseded, whose successor carries on alone.
    fn recover(&self, me: u64, t: Option<Time>, panic: &(dyn Any + Send)) -> Finished {
        self.restarted("sampling", panic);
        let mut guard = self.state();
        let st = &mut *guard;
        if st.reader != me {
            return Finished::Superseded;
        }
        st.calling = None;
        let (t, began, readings) = match st.round.take() {
            Some(r) => (r.t, r.began, r.readings),
            None => match t {
                Some(t) => (t, Instant::now(), vec![None; st.identities.len()]),
                None => return Finished::Nothing,
            },
        };
        let gpus = readings
            .into_iter()
            .zip(&st.identities)
            .map(|(r, id)| r.unwrap_or_else(|| down(id, ErrorKind::Other)))
            .collect();
        drop(guard);
        Finished::Done(Observation {
            t,
            gpus,
            duration_seconds: began.elapsed().as_secs_f64(),
            reader_restarts: self.restarts_to_hand_on(),
            ..Observation::default()
        })
    }

    /// The watchdog's look at the reader: when it has been in one call for the deadline, that
    /// GPU (or every GPU, for an initialisation) is reported down until the call comes back,
    /// and a new reader must take over.
    fn check(&self, now: Instant) -> Check {
        let mut st = self.state();
        match st.calling {
            Some((call, since)) if now >= since + self.deadline => {
                match call {
                    Call::Gpu(i) => {
                        tracing::warn!(gpu = i, deadline = ?self.deadline, "an NVML call did not come back in time; the GPU is reported down until it does");
                        st.stuck[i] = Some(since);
                    }
                    Call::Init => {
                        tracing::warn!(deadline = ?self.deadline, "NVML initialisation did not come back in time; the GPUs are reported down until it does");
                        st.init_stuck = Some(since);
                    }
                }
                st.calling = None;
                st.reader += 1;
                Check::TakeOver(st.reader)
            }
            Some((_, since)) => Check::Again(since + self.deadline),
            None => Check::Idle,
        }
    }
}

/// How a reader is asked for samples.
enum Asked {
    /// One sample per request, answered on a channel (`Source::sample`).
    Requests {
        requests: Arc<Mutex<Receiver<Time>>>,
        answers: Sender<Observation>,
    },
    /// Every interval, handed on at once (`Source::run`).
    Rhythm(Arc<Rhythm>),
}

/// The exporter's sampling loop, kept by whichever reader is current.
struct Rhythm {
    schedule: Mutex<Schedule>,
    clock: Arc<dyn Fn() -> Time + Send + Sync>,
    deliver: Mutex<Box<dyn FnMut(Observation) + Send>>,
    stop: Arc<Stop>,
    /// The watchdog's: each sample sets it to the deadline after the next one is due.
    timer: Arc<Timer>,
}

fn spawn_reader<B: Backend>(core: &Arc<Core<B>>, me: u64, asked: Asked, resume: bool) {
    let core = Arc::clone(core);
    std::thread::Builder::new()
        .name("gpu-reader".into())
        .spawn(move || core.reader(me, asked, resume))
        .expect("spawn a GPU reader thread");
}

impl<B: Backend> Core<B> {
    /// A reader's loop. `resume`: first complete the sample a stuck reader left, if any.
    fn reader(&self, me: u64, asked: Asked, resume: bool) {
        let mut comms = Comms::new();
        let mut resuming = resume;
        match asked {
            Asked::Requests { requests, answers } => loop {
                let (t, begun) = if std::mem::take(&mut resuming) {
                    match self.round_time() {
                        Some(t) => (t, true),
                        None => continue,
                    }
                } else {
                    let Ok(t) = unpoisoned(requests.lock()).recv() else {
                        return;
                    };
                    (t, false)
                };
                // Every request is answered, even after a panic: its sender waits for it.
                let finished = self.attempt(me, Some(t), || {
                    if !begun && !self.begin(me, t) {
                        return Finished::Superseded;
                    }
                    self.finish(me, &mut comms)
                });
                match finished {
                    Finished::Done(obs) => {
                        let restarts = obs.reader_restarts;
                        if answers.send(obs).is_err() {
                            return;
                        }
                        self.handed_on(restarts);
                    }
                    Finished::Nothing => {}
                    Finished::Superseded => return,
                }
            },
            Asked::Rhythm(r) => loop {
                let begun = std::mem::take(&mut resuming);
                if !begun {
                    let next = unpoisoned(r.schedule.lock()).next();
                    if r.stop.wait_until(next) {
                        return;
                    }
                }
                let finished = self.attempt(me, None, || {
                    if !begun && !self.begin(me, (r.clock)()) {
                        return Finished::Superseded;
                    }
                    self.finish(me, &mut comms)
                });
                match finished {
                    Finished::Done(obs) => self.hand_on(&r, obs),
                    Finished::Nothing => {}
                    Finished::Superseded => return,
                }
                let next = unpoisoned(r.schedule.lock()).advance();
                r.timer.arm_at(next + self.deadline);
            },
        }
    }

    /// Hand an observation to the exporter; a panic there loses that observation, not the
    /// reader. Unwind safety: what `deliver` changes is the exporter's, kept behind locks that
    /// recover from poisoning, as `deliver`'s own lock does here.
    fn hand_on(&self, r: &Rhythm, obs: Observation) {
        let restarts = obs.reader_restarts;
        match catch_unwind(AssertUnwindSafe(|| (unpoisoned(r.deliver.lock()))(obs))) {
            Ok(()) => self.handed_on(restarts),
            Err(panic) => self.restarted("handing a sample on", &*panic),
        }
    }
}

/// How long the first initialisation and listing may take: without persistence mode the
/// driver sets every GPU up on first use, which takes seconds on a large node, far beyond a
/// call's deadline. Only a hang should stop the start.
pub fn start_limit(deadline: Duration) -> Duration {
    deadline.max(Duration::from_secs(30))
}

/// The GPUs at start, listed on a thread of its own within `start_limit`. A backend that hangs
/// there is an error, not an exporter that never serves: the process exits and whoever runs
/// it (systemd, Kubernetes) starts it again. The stuck thread cannot be cancelled; it goes
/// with the process.
fn list_at_start<B: Backend>(
    core: &Arc<Core<B>>,
    within: Duration,
) -> anyhow::Result<Vec<GpuIdentity>> {
    let (tx, rx) = mpsc::channel();
    let c = Arc::clone(core);
    std::thread::Builder::new()
        .name("gpu-init".into())
        .spawn(move || {
            let _ = tx.send(c.identities());
        })?;
    match rx.recv_timeout(within) {
        Ok(Ok(ids)) => Ok(ids),
        Ok(Err(k)) => Err(anyhow::anyhow!("NVML failed to list GPUs ({})", k.as_str())),
        Err(RecvTimeoutError::Timeout) => Err(anyhow::anyhow!(
            "NVML did not list the GPUs within {} (the longer of nvml.deadline and 30 s): the driver does not answer",
            humantime::format_duration(within)
        )),
        Err(RecvTimeoutError::Disconnected) => {
            Err(anyhow::anyhow!("NVML panicked listing the GPUs"))
        }
    }
}

pub struct DeviceSource<B: Backend> {
    core: Arc<Core<B>>,
    request: Sender<Time>,
    requests: Arc<Mutex<Receiver<Time>>>,
    answers_tx: Sender<Observation>,
    answers: Receiver<Observation>,
}

impl<B: Backend> DeviceSource<B> {
    pub fn new(backend: B, cfg: &NvmlConfig) -> anyhow::Result<Self> {
        Self::start(backend, cfg, start_limit(cfg.deadline))
    }

    /// `new`, waiting `first_listing` for the GPUs at start.
    fn start(backend: B, cfg: &NvmlConfig, first_listing: Duration) -> anyhow::Result<Self> {
        let core = Arc::new(Core {
            backend,
            deadline: cfg.deadline,
            read_comm: cfg.read_comm,
            proc_root: cfg.proc_root.clone(),
            state: Mutex::new(State {
                reader: 0,
                identities: Vec::new(),
                stuck: Vec::new(),
                init_stuck: None,
                reinit_wanted: false,
                calling: None,
                round: None,
            }),
            watchdog_wakes: AtomicU64::new(0),
            reader_restarts: AtomicU64::new(0),
            restarts_handed_on: AtomicU64::new(0),
        });
        let ids = list_at_start(&core, first_listing)?;
        {
            let mut st = core.state();
            st.stuck = vec![None; ids.len()];
            st.identities = ids;
        }
        let (request, requests) = mpsc::channel();
        let (answers_tx, answers) = mpsc::channel();
        let s = DeviceSource {
            core,
            request,
            requests: Arc::new(Mutex::new(requests)),
            answers_tx,
            answers,
        };
        spawn_reader(&s.core, 0, s.asked(), false);
        Ok(s)
    }

    fn asked(&self) -> Asked {
        Asked::Requests {
            requests: Arc::clone(&self.requests),
            answers: self.answers_tx.clone(),
        }
    }
}

impl<B: Backend> Source for DeviceSource<B> {
    fn kind(&self) -> &'static str {
        "nvml"
    }

    fn gpu_indices(&self) -> Vec<u32> {
        self.core
            .state()
            .identities
            .iter()
            .map(|g| g.index)
            .collect()
    }

    fn sample(&mut self, t: Time) -> Observation {
        // Both channels stay open while `self` holds their other ends (for the readers that
        // take over), so sending cannot fail and waiting can only time out.
        let _ = self.request.send(t);
        // This thread is the watchdog while it waits.
        let mut wait = self.core.deadline / 4;
        loop {
            if let Ok(obs) = self.answers.recv_timeout(wait) {
                return obs;
            }
            let now = Instant::now();
            wait = match self.core.check(now) {
                Check::TakeOver(me) => {
                    spawn_reader(&self.core, me, self.asked(), true);
                    self.core.deadline / 4
                }
                Check::Again(at) => at.saturating_duration_since(now),
                Check::Idle => self.core.deadline / 4,
            };
        }
    }

    /// The reader keeps the rhythm and hands each sample on from its own thread; this thread
    /// is the watchdog, asleep on its timer unless a call overruns.
    fn run(mut self: Box<Self>, pace: Pace) {
        let timer = match Timer::new() {
            Ok(t) => Arc::new(t),
            Err(e) => {
                tracing::warn!(error = %e, "no timer for the NVML watchdog; sampling through a second thread");
                return pace.run_plain(&mut *self);
            }
        };
        let core = Arc::clone(&self.core);
        // The request reader stops: its channel closes.
        drop(self);
        let Pace {
            interval,
            clock,
            deliver,
            stop,
        } = pace;
        let rhythm = Arc::new(Rhythm {
            schedule: Mutex::new(Schedule::new(interval)),
            clock,
            deliver: Mutex::new(deliver),
            stop: Arc::clone(&stop),
            timer: Arc::clone(&timer),
        });
        timer.arm_at(Instant::now() + core.deadline);
        let wake = Arc::clone(&timer);
        stop.on_set(Box::new(move || wake.arm_at(Instant::now())));
        let me = {
            let mut st = core.state();
            st.reader += 1;
            st.reader
        };
        spawn_reader(&core, me, Asked::Rhythm(Arc::clone(&rhythm)), false);
        loop {
            timer.wait();
            if stop.is_set() {
                return;
            }
            core.watchdog_wakes.fetch_add(1, Ordering::Relaxed);
            let now = Instant::now();
            match core.check(now) {
                Check::TakeOver(me) => {
                    spawn_reader(&core, me, Asked::Rhythm(Arc::clone(&rhythm)), true);
                    timer.arm_at(now + core.deadline);
                }
                Check::Again(at) => timer.arm_at(at),
                // Between calls but late (a slow hand-off): look again a deadline on.
                Check::Idle => timer.arm_at(now + core.deadline),
            }
        }
    }
}

/// A one-shot monotonic timer (timerfd) that a thread sleeps on and others re-arm without
/// waking it.
struct Timer(OwnedFd);

impl Timer {
    fn new() -> std::io::Result<Timer> {
        // SAFETY: timerfd_create has no memory arguments; a valid fd is owned from here on.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor nobody else owns.
        Ok(Timer(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Fire at `at` (at once if it has passed), replacing the previous setting.
    fn arm_at(&self, at: Instant) {
        // A zero value would disarm it.
        let d = at
            .saturating_duration_since(Instant::now())
            .max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid fd and itimerspec; the old value is not asked for.
        unsafe { libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }

    /// Sleep until it fires.
    fn wait(&self) {
        let mut expirations = [0u8; 8];
        loop {
            // SAFETY: reads at most 8 bytes into an 8-byte buffer.
            let n = unsafe { libc::read(self.0.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
            if n == 8 {
                return;
            }
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // Cannot happen on a timerfd; do not spin if it does.
            std::thread::sleep(Duration::from_millis(100));
            return;
        }
    }
}

#[cfg(test)]
mod tests;
