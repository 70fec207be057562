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
//! return in time: it sleeps on a timer that each sample pushes further out. When the backend
//! fails as a whole (driver reload), it is initialised again.
//!
//! `Source::sample` asks the reader for one sample and waits for it (the command-line
//! workflows, tests); `Source::run` lets the reader keep the exporter's rhythm itself.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{unpoisoned, Pace, Schedule, Source, Stop};
use crate::config::NvmlConfig;
use crate::model::{
    DeviceMemory, ErrorKind, GpuIdentity, GpuReading, Observation, ProcessReading, Time,
};

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
}

struct State {
    /// The reader that owns the sampling. A reader whose number this no longer is was
    /// superseded while stuck in a call, and stops when the call comes back.
    reader: u64,
    identities: Vec<GpuIdentity>,
    /// Per GPU: since when a superseded reader has been stuck in a call to it.
    stuck: Vec<Option<Instant>>,
    /// The call the current reader is in: which GPU, since when.
    calling: Option<(usize, Instant)>,
    /// The sample in progress.
    round: Option<Round>,
}

struct Round {
    t: Time,
    began: Instant,
    readings: Vec<Option<GpuReading>>,
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

    /// Read the GPUs the sample in progress still lacks and complete it; None when `me` was
    /// superseded meanwhile (the reader that took over completes it).
    fn finish(&self, me: u64, comms: &mut Comms) -> Option<Observation> {
        loop {
            let (index, id) = {
                let mut guard = self.state();
                let st = &mut *guard;
                if st.reader != me {
                    return None;
                }
                let round = st.round.as_mut()?;
                let Some(i) = round.readings.iter().position(Option::is_none) else {
                    break;
                };
                if st.stuck.get(i).is_some_and(Option::is_some) {
                    round.readings[i] = Some(down(&st.identities[i], ErrorKind::Timeout));
                    continue;
                }
                st.calling = Some((i, Instant::now()));
                (i, st.identities[i].clone())
            };
            let reading = self.read(index, id, comms);
            let mut st = self.state();
            if st.reader != me {
                // It came back after all; the next sample asks it again.
                if let Some(s) = st.stuck.get_mut(index) {
                    *s = None;
                }
                return None;
            }
            st.calling = None;
            if let Some(round) = st.round.as_mut() {
                round.readings[index] = Some(reading);
            }
        }
        let round = self.state().round.take()?;
        let gpus: Vec<GpuReading> = round.readings.into_iter().flatten().collect();
        comms.retain(|pid, _| {
            gpus.iter()
                .any(|g| g.processes.iter().any(|p| p.pid == *pid))
        });
        // Every GPU failing with a driver error means NVML itself is gone (driver reload).
        let whole_failure = !gpus.is_empty()
            && gpus
                .iter()
                .all(|g| g.memory.is_none() && g.errors.contains(&ErrorKind::Driver));
        let mut reinitialised = false;
        if whole_failure || gpus.is_empty() {
            if let Ok(ids) = self.identities() {
                let mut st = self.state();
                st.stuck.resize(ids.len(), None);
                st.identities = ids;
                reinitialised = true;
                tracing::warn!(gpus = st.identities.len(), "NVML initialised again");
            }
        }
        Some(Observation {
            t: round.t,
            gpus,
            reports: vec![],
            duration_seconds: round.began.elapsed().as_secs_f64(),
            reinitialised,
        })
    }

    fn read(&self, index: usize, id: GpuIdentity, comms: &mut Comms) -> GpuReading {
        let index32 = index as u32;
        let mut errors = Vec::new();
        let memory = match self.backend.memory(index32) {
            Ok(m) => Some(m),
            Err(k) => {
                errors.push(k);
                None
            }
        };
        let mut processes = Vec::new();
        if memory.is_some() {
            match self.backend.processes(index32) {
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

    /// The watchdog's look at the reader: when it has been in one call for the deadline, that
    /// GPU is reported down in the sample in progress and stuck until the call comes back, and
    /// a new reader must take over.
    fn check(&self, now: Instant) -> Check {
        let mut st = self.state();
        match st.calling {
            Some((i, since)) if now >= since + self.deadline => {
                tracing::warn!(gpu = i, deadline = ?self.deadline, "an NVML call did not come back in time; the GPU is reported down until it does");
                st.stuck[i] = Some(since);
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
    /// A reader's loop. `resume`: first complete the sample a stuck reader left.
    fn reader(&self, me: u64, asked: Asked, resume: bool) {
        let mut comms = Comms::new();
        let mut pending = resume;
        match asked {
            Asked::Requests { requests, answers } => loop {
                if !pending {
                    let t = unpoisoned(requests.lock()).recv();
                    if !t.is_ok_and(|t| self.begin(me, t)) {
                        return;
                    }
                }
                pending = false;
                let Some(obs) = self.finish(me, &mut comms) else {
                    return;
                };
                if answers.send(obs).is_err() {
                    return;
                }
            },
            Asked::Rhythm(r) => loop {
                if !pending {
                    let next = unpoisoned(r.schedule.lock()).next();
                    if r.stop.wait_until(next) || !self.begin(me, (r.clock)()) {
                        return;
                    }
                }
                pending = false;
                let Some(obs) = self.finish(me, &mut comms) else {
                    return;
                };
                (unpoisoned(r.deliver.lock()))(obs);
                let next = unpoisoned(r.schedule.lock()).advance();
                r.timer.arm_at(next + self.deadline);
            },
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
        let core = Core {
            backend,
            deadline: cfg.deadline,
            read_comm: cfg.read_comm,
            proc_root: cfg.proc_root.clone(),
            state: Mutex::new(State {
                reader: 0,
                identities: Vec::new(),
                stuck: Vec::new(),
                calling: None,
                round: None,
            }),
            watchdog_wakes: AtomicU64::new(0),
        };
        let ids = core
            .identities()
            .map_err(|k| anyhow::anyhow!("NVML failed to list GPUs ({})", k.as_str()))?;
        {
            let mut st = core.state();
            st.stuck = vec![None; ids.len()];
            st.identities = ids;
        }
        let (request, requests) = mpsc::channel();
        let (answers_tx, answers) = mpsc::channel();
        let s = DeviceSource {
            core: Arc::new(core),
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
                return super::run_plain(&mut *self, pace);
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
pub mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Mutex;

    /// A backend whose GPUs can be made to fail, hang, vanish and come back.
    #[derive(Default)]
    pub struct Scripted {
        pub count: Mutex<u32>,
        pub hang: Mutex<Vec<u32>>,
        pub lost: Mutex<Vec<u32>>,
        pub driver_gone: AtomicBool,
        pub inits: Mutex<u32>,
        /// Every memory call takes this long.
        pub slow: Mutex<Duration>,
    }

    impl Backend for Arc<Scripted> {
        fn init(&self) -> Result<u32, ErrorKind> {
            *self.inits.lock().unwrap() += 1;
            if self.driver_gone.load(Ordering::SeqCst) {
                return Err(ErrorKind::Driver);
            }
            Ok(*self.count.lock().unwrap())
        }
        fn identity(&self, index: u32) -> Result<GpuIdentity, ErrorKind> {
            Ok(GpuIdentity {
                index,
                uuid: format!("GPU-{index}"),
                name: "Scripted".into(),
                pci_bus_id: String::new(),
            })
        }
        fn memory(&self, index: u32) -> Result<DeviceMemory, ErrorKind> {
            if self.hang.lock().unwrap().contains(&index) {
                std::thread::sleep(Duration::from_millis(300));
            }
            std::thread::sleep(*self.slow.lock().unwrap());
            if self.driver_gone.load(Ordering::SeqCst) {
                return Err(ErrorKind::Driver);
            }
            if self.lost.lock().unwrap().contains(&index) {
                return Err(ErrorKind::GpuLost);
            }
            Ok(DeviceMemory {
                total: 100,
                reserved: 1,
                used: 9,
                free: 90,
            })
        }
        fn processes(&self, _index: u32) -> Result<Vec<(u32, u64)>, ErrorKind> {
            Ok(vec![(4242, 9)])
        }
    }

    fn scripted(gpus: u32) -> Arc<Scripted> {
        let s = Arc::new(Scripted::default());
        *s.count.lock().unwrap() = gpus;
        s
    }

    fn nvml_config(deadline_ms: u64) -> NvmlConfig {
        NvmlConfig {
            deadline: Duration::from_millis(deadline_ms),
            read_comm: false,
            ..NvmlConfig::default()
        }
    }

    fn source(s: &Arc<Scripted>, deadline_ms: u64) -> DeviceSource<Arc<Scripted>> {
        DeviceSource::new(Arc::clone(s), &nvml_config(deadline_ms)).unwrap()
    }

    #[test]
    fn a_hung_gpu_is_down_and_the_others_go_on() {
        let s = scripted(3);
        let mut src = source(&s, 50);
        s.hang.lock().unwrap().push(1);
        let o = src.sample(1.0);
        assert!(o.gpus[0].is_up() && o.gpus[2].is_up());
        assert!(!o.gpus[1].is_up());
        assert_eq!(o.gpus[1].errors, vec![ErrorKind::Timeout]);
        // Still busy: not asked again, reported down at once.
        let o = src.sample(2.0);
        assert!(!o.gpus[1].is_up());
        s.hang.lock().unwrap().clear();
        std::thread::sleep(Duration::from_millis(400));
        let o = src.sample(3.0);
        assert!(o.gpus[1].is_up(), "recovers once it answers again");
    }

    #[test]
    fn a_lost_gpu_is_down_with_its_kind() {
        let s = scripted(2);
        let mut src = source(&s, 200);
        s.lost.lock().unwrap().push(0);
        let o = src.sample(1.0);
        assert_eq!(o.gpus[0].errors, vec![ErrorKind::GpuLost]);
        assert!(o.gpus[1].is_up());
        assert_eq!(o.gpus[1].processes[0].pid, 4242);
    }

    #[test]
    fn a_driver_reload_reinitialises() {
        let s = scripted(2);
        let mut src = source(&s, 200);
        s.driver_gone.store(true, Ordering::SeqCst);
        let o = src.sample(1.0);
        assert!(o.gpus.iter().all(|g| !g.is_up()));
        assert!(!o.reinitialised, "init fails while the driver is away");
        s.driver_gone.store(false, Ordering::SeqCst);
        let o = src.sample(2.0);
        assert!(o.gpus.iter().all(|g| g.is_up()));
        let o2 = src.sample(3.0);
        assert!(o2.gpus.iter().all(|g| g.is_up()));
        assert!(*s.inits.lock().unwrap() >= 2);
    }

    #[test]
    fn a_sample_takes_as_long_as_its_gpus_calls() {
        let s = scripted(2);
        *s.slow.lock().unwrap() = Duration::from_millis(25);
        let mut src = source(&s, 500);
        let o = src.sample(1.0);
        assert!(o.gpus.iter().all(|g| g.is_up()));
        // gpumem_exporter_sample_duration_seconds: the calls, one GPU after the other.
        assert!(o.duration_seconds >= 0.05, "{}", o.duration_seconds);
    }

    /// Run `src` as the exporter does; observations arrive on the returned channel.
    fn run_paced(
        src: DeviceSource<Arc<Scripted>>,
        interval: Duration,
    ) -> (
        Arc<Stop>,
        Receiver<Observation>,
        std::thread::JoinHandle<()>,
    ) {
        let stop = Arc::new(Stop::default());
        let (tx, rx) = mpsc::channel();
        let pace = Pace {
            interval,
            clock: Arc::new(|| 0.0),
            deliver: Box::new(move |o| {
                let _ = tx.send(o);
            }),
            stop: Arc::clone(&stop),
        };
        let h = std::thread::spawn(move || Box::new(src).run(pace));
        (stop, rx, h)
    }

    #[test]
    fn a_paced_run_keeps_its_rhythm_and_its_watchdog_sleeps() {
        let s = scripted(3);
        // The default deadline: far above a loaded test machine's scheduling delays, and
        // shorter than the run, so a timer left unarmed would fire.
        let src = source(&s, 500);
        let core = Arc::clone(&src.core);
        let (stop, rx, h) = run_paced(src, Duration::from_millis(20));
        let started = Instant::now();
        for k in 0..40 {
            let o = rx.recv_timeout(Duration::from_secs(5)).expect("a sample");
            assert_eq!(o.gpus.len(), 3);
            assert!(o.gpus.iter().all(|g| g.is_up()), "sample {k}");
        }
        // 40 samples at 20 ms: the rhythm, not a burst.
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(760), "{took:?}");
        assert_eq!(core.watchdog_wakes.load(Ordering::Relaxed), 0);
        stop.set();
        h.join().unwrap();
    }

    #[test]
    fn a_paced_run_rides_out_a_hung_gpu_and_takes_it_back() {
        let s = scripted(3);
        let src = source(&s, 50);
        let core = Arc::clone(&src.core);
        let (stop, rx, h) = run_paced(src, Duration::from_millis(20));
        let next = || rx.recv_timeout(Duration::from_secs(5)).expect("a sample");
        assert!(next().gpus.iter().all(|g| g.is_up()));
        s.hang.lock().unwrap().push(1);
        // Within a few samples GPU 1 is down for a timeout while the others are read.
        let mut down = None;
        for _ in 0..20 {
            let o = next();
            if !o.gpus[1].is_up() {
                down = Some(o);
                break;
            }
        }
        let o = down.expect("the hung GPU is reported down");
        assert_eq!(o.gpus[1].errors, vec![ErrorKind::Timeout]);
        assert!(o.gpus[0].is_up() && o.gpus[2].is_up());
        // Samples keep coming while the call is stuck: not asked again, down at once.
        for _ in 0..3 {
            let o = next();
            assert!(!o.gpus[1].is_up() && o.gpus[2].is_up());
            assert!(o.duration_seconds < 0.05, "{}", o.duration_seconds);
        }
        assert!(core.watchdog_wakes.load(Ordering::Relaxed) >= 1);
        s.hang.lock().unwrap().clear();
        let mut back = false;
        for _ in 0..100 {
            if next().gpus[1].is_up() {
                back = true;
                break;
            }
        }
        assert!(back, "the GPU is read again once its call comes back");
        stop.set();
        h.join().unwrap();
    }
}
