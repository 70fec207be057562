//! Sampling real GPUs through a blocking backend (NVML), one worker thread per GPU.
//!
//! A sick GPU can make an NVML call hang. Each GPU therefore has its own thread; a sample waits
//! for all of them up to a deadline, reports the late ones down, and does not ask a GPU again
//! until its thread has come back. When the backend fails as a whole (driver reload), it is
//! initialised again.
//!
//! Asking a worker and waiting for its answer costs two thread wake-ups per GPU per sample,
//! which at a 10 ms interval is a fifth of the cost of the NVML calls themselves. So while the
//! sampler keeps its rhythm, each worker reads its GPU on its own shortly before the next
//! sample is due (`lead` ahead) and leaves the reading where the sampler picks it up without
//! waking anyone. A sample that finds no fresh reading (the first one, an irregular caller,
//! a worker still inside a call) asks as before, under the same deadline.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Source;
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

/// When the sampler last sampled, which tells the workers when to read ahead of the next one.
struct Rhythm {
    epoch: Instant,
    /// Nanoseconds after `epoch` of the last sample; 0 before the first.
    last_sample: AtomicU64,
    interval: Duration,
    lead: Duration,
}

impl Rhythm {
    fn nanos(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_nanos() as u64
    }
    fn at(&self, nanos: u64) -> Instant {
        self.epoch + Duration::from_nanos(nanos)
    }
}

/// What a worker and the sampler share, under one small lock.
#[derive(Default)]
struct Slot {
    /// Set while the worker is inside a backend call.
    reading_since: Option<Instant>,
    /// A reading taken ahead of a sample and not yet picked up: when it began, how long the
    /// calls took, and what they returned.
    ahead: Option<(Instant, Duration, GpuReading)>,
    /// The sample waiting for the call in progress.
    wanted: Option<u64>,
}

struct Worker {
    tx: Sender<u64>,
    slot: Arc<Mutex<Slot>>,
}

type Answer = (u32, u64, GpuReading);

pub struct DeviceSource<B: Backend> {
    backend: Arc<B>,
    deadline: Duration,
    read_comm: bool,
    proc_root: PathBuf,
    workers: Vec<Worker>,
    identities: Vec<GpuIdentity>,
    results_tx: Sender<Answer>,
    results_rx: Receiver<Answer>,
    rhythm: Arc<Rhythm>,
    seq: u64,
    /// GPU readings a sample found read ahead, without asking.
    pub read_ahead: u64,
}

fn lock(slot: &Mutex<Slot>) -> std::sync::MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|e| e.into_inner())
}

impl<B: Backend> DeviceSource<B> {
    /// `interval`: how often the caller samples, so that workers can read just ahead of it.
    pub fn new(backend: B, cfg: &NvmlConfig, interval: Duration) -> anyhow::Result<Self> {
        let (results_tx, results_rx) = mpsc::channel();
        let mut s = DeviceSource {
            backend: Arc::new(backend),
            deadline: cfg.deadline,
            read_comm: cfg.read_comm,
            proc_root: cfg.proc_root.clone(),
            workers: Vec::new(),
            identities: Vec::new(),
            results_tx,
            results_rx,
            rhythm: Arc::new(Rhythm {
                epoch: Instant::now(),
                last_sample: AtomicU64::new(0),
                interval,
                lead: cfg.read_ahead.min(interval / 2),
            }),
            seq: 0,
            read_ahead: 0,
        };
        s.start_workers()
            .map_err(|k| anyhow::anyhow!("NVML failed to list GPUs ({})", k.as_str()))?;
        Ok(s)
    }

    fn start_workers(&mut self) -> Result<(), ErrorKind> {
        let count = self.backend.init()?;
        // Dropping the old senders ends the old threads once they come back.
        self.workers.clear();
        self.identities = (0..count)
            .map(|i| {
                self.backend.identity(i).unwrap_or(GpuIdentity {
                    index: i,
                    uuid: format!("GPU-unknown-{i}"),
                    name: String::new(),
                    pci_bus_id: String::new(),
                })
            })
            .collect();
        for index in 0..count {
            let (tx, rx) = mpsc::channel::<u64>();
            let slot = Arc::new(Mutex::new(Slot::default()));
            let worker = GpuWorker {
                index,
                backend: Arc::clone(&self.backend),
                id: self.identities[index as usize].clone(),
                slot: Arc::clone(&slot),
                rhythm: Arc::clone(&self.rhythm),
                results: self.results_tx.clone(),
                read_comm: self.read_comm,
                proc_root: self.proc_root.clone(),
                comms: HashMap::new(),
            };
            std::thread::Builder::new()
                .name(format!("gpu-{index}"))
                .spawn(move || worker.run(rx))
                .expect("spawn a GPU worker thread");
            self.workers.push(Worker { tx, slot });
        }
        Ok(())
    }

    fn down(&self, index: u32, kind: ErrorKind) -> GpuReading {
        GpuReading {
            id: self.identities[index as usize].clone(),
            memory: None,
            processes: vec![],
            errors: vec![kind],
        }
    }
}

struct GpuWorker<B: Backend> {
    index: u32,
    backend: Arc<B>,
    id: GpuIdentity,
    slot: Arc<Mutex<Slot>>,
    rhythm: Arc<Rhythm>,
    results: Sender<Answer>,
    read_comm: bool,
    proc_root: PathBuf,
    comms: HashMap<u32, Option<String>>,
}

impl<B: Backend> GpuWorker<B> {
    fn run(mut self, rx: Receiver<u64>) {
        // The sample the last reading ahead was for.
        let mut read_ahead_of = 0u64;
        loop {
            let r = &self.rhythm;
            let last = r.last_sample.load(Ordering::Acquire);
            // Ahead of the sample after `last`; if that one was already read for, ahead of the
            // one after (by then `last` has usually moved on and is checked again on waking).
            let due = if last == 0 || r.lead.is_zero() {
                None
            } else if last != read_ahead_of {
                Some(r.at(last) + r.interval - r.lead)
            } else {
                Some(r.at(last) + r.interval * 2 - r.lead)
            };
            let msg = match due {
                Some(d) => rx.recv_timeout(d.saturating_duration_since(Instant::now())),
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match msg {
                Ok(seq) => {
                    if !self.deliver(Some(seq)) {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    let last = r.last_sample.load(Ordering::Acquire);
                    let due_now = r.at(last) + r.interval - r.lead;
                    if last != read_ahead_of && Instant::now() >= due_now {
                        read_ahead_of = last;
                        if !self.deliver(None) {
                            return;
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// Read the GPU; answer the sample `asked` (or one that started waiting meanwhile), or
    /// leave the reading ahead for the next sample. False when the sampler is gone.
    fn deliver(&mut self, asked: Option<u64>) -> bool {
        let began = Instant::now();
        lock(&self.slot).reading_since = Some(began);
        let reading = self.read();
        let answer = {
            let mut slot = lock(&self.slot);
            slot.reading_since = None;
            match slot.wanted.take().or(asked) {
                Some(seq) => Some((seq, reading)),
                None => {
                    slot.ahead = Some((began, began.elapsed(), reading));
                    None
                }
            }
        };
        match answer {
            Some((seq, reading)) => self.results.send((self.index, seq, reading)).is_ok(),
            None => true,
        }
    }

    fn comm(&mut self, pid: u32) -> Option<String> {
        if !self.read_comm {
            return None;
        }
        let root = &self.proc_root;
        self.comms
            .entry(pid)
            .or_insert_with(|| {
                std::fs::read_to_string(root.join(pid.to_string()).join("comm"))
                    .ok()
                    .map(|s| s.trim_end().to_string())
            })
            .clone()
    }

    fn read(&mut self) -> GpuReading {
        let mut errors = Vec::new();
        let memory = match self.backend.memory(self.index) {
            Ok(m) => Some(m),
            Err(k) => {
                errors.push(k);
                None
            }
        };
        let mut processes = Vec::new();
        if memory.is_some() {
            match self.backend.processes(self.index) {
                Ok(list) => {
                    self.comms.retain(|pid, _| list.iter().any(|p| p.0 == *pid));
                    for (pid, used) in list {
                        let comm = self.comm(pid);
                        processes.push(ProcessReading {
                            pid,
                            used_bytes: used,
                            comm,
                        });
                    }
                }
                // The device answered; its process list did not. Keep the device up.
                Err(k) => errors.push(k),
            }
        }
        GpuReading {
            id: self.id.clone(),
            memory,
            processes,
            errors,
        }
    }
}

impl<B: Backend> Source for DeviceSource<B> {
    fn kind(&self) -> &'static str {
        "nvml"
    }

    fn sample(&mut self, t: Time) -> Observation {
        let started = Instant::now();
        let previous = self
            .rhythm
            .last_sample
            .swap(self.rhythm.nanos(started).max(1), Ordering::AcqRel);
        self.seq += 1;
        let seq = self.seq;
        let n = self.workers.len();
        let mut answers: Vec<Option<GpuReading>> = vec![None; n];
        // Each worker asked, with when its answer is due.
        let mut waiting: Vec<(usize, Instant)> = Vec::new();
        // What the sample took is what its GPUs' calls took, some of which began before it:
        // readings taken ahead (the slowest of them), and calls already running when it came
        // (from the earliest start).
        let mut slowest_ahead = Duration::ZERO;
        let mut earliest = started;
        for (i, w) in self.workers.iter().enumerate() {
            let mut slot = lock(&w.slot);
            // A reading taken since the previous sample is this sample's.
            if let Some((began, took, reading)) = slot.ahead.take() {
                if previous != 0 && began >= self.rhythm.at(previous) {
                    answers[i] = Some(reading);
                    slowest_ahead = slowest_ahead.max(took);
                    self.read_ahead += 1;
                    continue;
                }
            }
            if let Some(since) = slot.reading_since {
                // Inside a call: wait for it up to the deadline from when it began, which for
                // a GPU that hangs has long passed.
                if since + self.deadline <= started {
                    answers[i] = Some(self.down(i as u32, ErrorKind::Timeout));
                } else {
                    slot.wanted = Some(seq);
                    earliest = earliest.min(since);
                    waiting.push((i, since + self.deadline));
                }
                continue;
            }
            drop(slot);
            if w.tx.send(seq).is_err() {
                answers[i] = Some(self.down(i as u32, ErrorKind::Other));
                continue;
            }
            waiting.push((i, started + self.deadline));
        }
        let until = waiting.iter().map(|w| w.1).max().unwrap_or(started);
        let mut asked = waiting.len();
        while asked > 0 {
            let left = until.saturating_duration_since(Instant::now());
            match self.results_rx.recv_timeout(left) {
                Ok((index, s, reading)) if s == seq && (index as usize) < n => {
                    answers[index as usize] = Some(reading);
                    asked -= 1;
                }
                Ok(_) => {} // a late answer to an earlier sample
                Err(_) => break,
            }
        }
        for (i, w) in self.workers.iter().enumerate() {
            if answers[i].is_none() {
                // Late: whatever it brings back belongs to no sample.
                let mut slot = lock(&w.slot);
                if slot.wanted == Some(seq) {
                    slot.wanted = None;
                }
            }
        }
        let gpus: Vec<GpuReading> = answers
            .into_iter()
            .enumerate()
            .map(|(i, a)| a.unwrap_or_else(|| self.down(i as u32, ErrorKind::Timeout)))
            .collect();
        // Every GPU failing with a driver error means NVML itself is gone (driver reload).
        let whole_failure = !gpus.is_empty()
            && gpus
                .iter()
                .all(|g| g.memory.is_none() && g.errors.contains(&ErrorKind::Driver));
        let mut reinitialised = false;
        if (whole_failure || gpus.is_empty()) && self.start_workers().is_ok() {
            reinitialised = true;
            tracing::warn!(gpus = self.workers.len(), "NVML initialised again");
        }
        Observation {
            t,
            gpus,
            reports: vec![],
            duration_seconds: earliest.elapsed().max(slowest_ahead).as_secs_f64(),
            reinitialised,
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

    fn source(s: &Arc<Scripted>, deadline_ms: u64) -> DeviceSource<Arc<Scripted>> {
        let cfg = NvmlConfig {
            deadline: Duration::from_millis(deadline_ms),
            read_comm: false,
            ..NvmlConfig::default()
        };
        DeviceSource::new(Arc::clone(s), &cfg, Duration::from_secs(1)).unwrap()
    }

    #[test]
    fn a_hung_gpu_is_down_and_the_others_go_on() {
        let s = Arc::new(Scripted::default());
        *s.count.lock().unwrap() = 3;
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
        let s = Arc::new(Scripted::default());
        *s.count.lock().unwrap() = 2;
        let mut src = source(&s, 200);
        s.lost.lock().unwrap().push(0);
        let o = src.sample(1.0);
        assert_eq!(o.gpus[0].errors, vec![ErrorKind::GpuLost]);
        assert!(o.gpus[1].is_up());
        assert_eq!(o.gpus[1].processes[0].pid, 4242);
    }

    #[test]
    fn a_driver_reload_reinitialises() {
        let s = Arc::new(Scripted::default());
        *s.count.lock().unwrap() = 2;
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

    /// Sample `s`'s GPUs `samples` times on a regular rhythm; `each` sees every observation.
    /// Returns how many GPU readings were found read ahead.
    fn sample_regularly(
        s: &Arc<Scripted>,
        interval: Duration,
        read_ahead: Duration,
        samples: u32,
        mut each: impl FnMut(u32, &Observation),
    ) -> u64 {
        let cfg = NvmlConfig {
            deadline: Duration::from_millis(200),
            read_ahead,
            read_comm: false,
            ..NvmlConfig::default()
        };
        let mut src = DeviceSource::new(Arc::clone(s), &cfg, interval).unwrap();
        let start = Instant::now();
        for k in 0..samples {
            std::thread::sleep((start + interval * k).saturating_duration_since(Instant::now()));
            each(k, &src.sample(f64::from(k)));
        }
        src.read_ahead
    }

    #[test]
    fn a_regular_sampler_finds_readings_taken_ahead_and_changes_show() {
        let s = Arc::new(Scripted::default());
        *s.count.lock().unwrap() = 2;
        // A generous read-ahead, so that a loaded test machine still wakes the workers in time.
        let read_ahead = sample_regularly(
            &s,
            Duration::from_millis(50),
            Duration::from_millis(20),
            20,
            |k, o| {
                assert_eq!(o.gpus.len(), 2);
                assert!(o.gpus[0].is_up(), "sample {k}");
                // A change shows within one sample: the reading ahead may predate it.
                if k >= 12 {
                    assert_eq!(o.gpus[1].errors, vec![ErrorKind::GpuLost], "sample {k}");
                }
                if k == 9 {
                    s.lost.lock().unwrap().push(1);
                }
            },
        );
        // The first sample has to ask; on a regular rhythm most of the rest need not. (Loose:
        // a loaded machine may wake a worker late now and then.)
        assert!(
            read_ahead >= 20,
            "{read_ahead} of 38 GPU readings were read ahead"
        );
    }

    #[test]
    fn without_reading_ahead_every_sample_asks() {
        let s = Arc::new(Scripted::default());
        *s.count.lock().unwrap() = 1;
        let read_ahead =
            sample_regularly(&s, Duration::from_millis(30), Duration::ZERO, 6, |_, o| {
                assert!(o.gpus[0].is_up());
            });
        assert_eq!(read_ahead, 0);
    }

    #[test]
    fn a_sample_takes_as_long_as_its_slowest_gpu_even_when_read_ahead() {
        let s = Arc::new(Scripted::default());
        *s.count.lock().unwrap() = 2;
        *s.slow.lock().unwrap() = Duration::from_millis(25);
        let read_ahead = sample_regularly(
            &s,
            Duration::from_millis(100),
            Duration::from_millis(40),
            6,
            |k, o| {
                assert!(o.gpus.iter().all(|g| g.is_up()), "sample {k}");
                // gpumem_exporter_sample_duration_seconds: the GPU calls, wherever they ran.
                assert!(
                    o.duration_seconds >= 0.025,
                    "sample {k}: {}",
                    o.duration_seconds
                );
            },
        );
        assert!(read_ahead > 0, "no reading was taken ahead");
    }
}
