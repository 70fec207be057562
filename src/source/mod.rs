//! Where readings come from: NVML on a real node, the simulator, or recorded traces.

pub mod device;
pub mod nvml;
pub mod replay;
pub mod sim;

use std::sync::{Arc, Condvar, LockResult, Mutex};
use std::time::{Duration, Instant};

use crate::config::{Config, SourceSpec};
use crate::model::{Observation, Time};

/// A source of observations. `sample` may block (NVML), so it is only ever called from the
/// dedicated sampler thread or from batch code, never on the async runtime.
pub trait Source: Send {
    fn kind(&self) -> &'static str;
    /// Observe at source time `t`: Unix seconds for live sources, trace seconds for replay.
    fn sample(&mut self, t: Time) -> Observation;
    /// The time of the next recorded item, for sources that have one (replay).
    fn next_time(&self) -> Option<Time> {
        None
    }
    /// The GPU indices it has, where known without sampling (the simulator, a trace).
    fn gpu_indices(&self) -> Option<Vec<u32>> {
        None
    }
    /// Sample every `pace.interval` until stopped, handing each observation to
    /// `pace.deliver`; returns once stopped. This: a plain loop on the calling thread.
    fn run(mut self: Box<Self>, pace: Pace) {
        run_plain(&mut *self, pace)
    }
}

/// The plain sampling loop: sample, hand on, sleep until the next tick.
pub fn run_plain<S: Source + ?Sized>(source: &mut S, mut pace: Pace) {
    let mut schedule = Schedule::new(pace.interval);
    while !pace.stop.is_set() {
        (pace.deliver)(source.sample((pace.clock)()));
        if pace.stop.wait_until(schedule.advance()) {
            break;
        }
    }
}

/// Which of a trace's allocator reports a replay sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reports {
    /// One per process every `replay.report_interval`, as the client sends them live.
    AtClientRate,
    /// Every recorded one (a workflow that takes every recorded sample).
    All,
}

/// Open the configured source: the one place a `--source` becomes a source.
pub fn open(cfg: &Config, reports: Reports) -> anyhow::Result<Box<dyn Source>> {
    Ok(match &cfg.source {
        SourceSpec::Sim => Box::new(sim::SimSource::new(&cfg.sim)),
        SourceSpec::Replay(files) => Box::new(
            replay::ReplaySource::open(files)?.with_report_interval(match reports {
                Reports::AtClientRate => cfg.replay.report_interval.as_secs_f64(),
                Reports::All => 0.0,
            }),
        ),
        SourceSpec::Nvml => Box::new(device::DeviceSource::new(
            nvml::NvmlBackend::open(device::start_limit(cfg.nvml.deadline))?,
            &cfg.nvml,
        )?),
    })
}

/// How a source is run as a sampling loop (`Source::run`).
pub struct Pace {
    pub interval: Duration,
    /// The source time of a sample taken now.
    pub clock: Arc<dyn Fn() -> Time + Send + Sync>,
    /// Receives every observation, on whichever thread took it.
    pub deliver: Box<dyn FnMut(Observation) + Send>,
    pub stop: Arc<Stop>,
}

/// The ticks of a sampling loop: one per interval from the first, skipping the ones missed
/// (a slow GPU) rather than catching up in a burst.
pub struct Schedule {
    next: Instant,
    interval: Duration,
}

impl Schedule {
    pub fn new(interval: Duration) -> Self {
        Schedule {
            next: Instant::now(),
            interval,
        }
    }

    /// The tick the loop is waiting for.
    pub fn next(&self) -> Instant {
        self.next
    }

    /// Move on after a sample.
    pub fn advance(&mut self) -> Instant {
        self.next += self.interval;
        let now = Instant::now();
        if self.next < now {
            self.next = now + self.interval;
        }
        self.next
    }
}

/// The request to stop, which also wakes a sampling loop from its wait for the next tick: it
/// then sleeps exactly once per sample, where polling a flag would wake it every few
/// milliseconds. Loops that sleep elsewhere (on a timer) register a waker.
#[derive(Default)]
pub struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
    wakers: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

/// A lock's guard even if a thread panicked holding it: the data here stays consistent.
pub(crate) fn unpoisoned<T>(r: LockResult<T>) -> T {
    r.unwrap_or_else(|e| e.into_inner())
}

impl Stop {
    pub fn set(&self) {
        *unpoisoned(self.stopped.lock()) = true;
        self.wake.notify_all();
        for w in unpoisoned(self.wakers.lock()).iter() {
            w();
        }
    }

    pub fn is_set(&self) -> bool {
        *unpoisoned(self.stopped.lock())
    }

    /// Call `waker` when stopped (at once if already stopped).
    pub fn on_set(&self, waker: Box<dyn Fn() + Send + Sync>) {
        let mut wakers = unpoisoned(self.wakers.lock());
        if self.is_set() {
            waker();
        }
        wakers.push(waker);
    }

    /// A stop that SIGINT (Ctrl-C) and SIGTERM set: the report commands end their run and
    /// still write what they have. Signals after the first are ignored.
    pub fn on_signals() -> std::io::Result<Arc<Stop>> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let stop = Arc::new(Stop::default());
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
        let set = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                if signals.forever().next().is_some() {
                    set.set();
                }
            })?;
        Ok(stop)
    }

    /// Resolves once stopped: the async servers end on the same stop as the sampler.
    pub fn wait(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let tx = Mutex::new(Some(tx));
        self.on_set(Box::new(move || {
            if let Some(tx) = unpoisoned(tx.lock()).take() {
                let _ = tx.send(());
            }
        }));
        async move {
            let _ = rx.await;
        }
    }

    /// Wait until `deadline` or a stop, whichever comes first; true when stopped.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let mut stopped = unpoisoned(self.stopped.lock());
        while !*stopped {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            stopped = unpoisoned(self.wake.wait_timeout(stopped, left)).0;
        }
        *stopped
    }
}
