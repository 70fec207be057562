//! When samples are taken and when a run stops: the one loop every runtime drives a source
//! with (`drive`), the ticks it follows (on the wall clock for a live source, in trace time
//! for a replay), the schedule of a live loop, and the stop that ends any of them.

use std::ops::ControlFlow;
use std::sync::{Arc, Condvar, LockResult, Mutex};
use std::time::{Duration, Instant};

use crate::model::{Observation, Time};

/// What `drive` needs of a source (every `source::Source` is one).
pub trait Sampled {
    /// An observation at time `t`.
    fn take(&mut self, t: Time) -> Observation;
    /// The time of the next recorded item, for a replay.
    fn next_item(&self) -> Option<Time>;
}

/// When the next sample is taken, in the source's time; `None` ends the run. `next_item` is
/// the time of the source's next recorded item (a replay's).
pub trait Ticks {
    fn next(&mut self, next_item: Option<Time>, stop: &Stop) -> Option<Time>;
}

/// The one sampling loop: sample at each tick, hand the observation on, until the ticks end,
/// the receiver breaks, or a stop.
pub fn drive<S: Sampled + ?Sized>(
    source: &mut S,
    ticks: &mut dyn Ticks,
    stop: &Stop,
    mut on: impl FnMut(Observation) -> ControlFlow<()>,
) {
    while let Some(t) = ticks.next(source.next_item(), stop) {
        if on(source.take(t)).is_break() {
            break;
        }
    }
}

/// Live ticks: one per interval on the wall clock from the first (at once), until a stop or
/// `until`; each takes its time from `clock`.
pub struct Wall {
    schedule: Option<Schedule>,
    interval: Duration,
    clock: Arc<dyn Fn() -> Time + Send + Sync>,
    until: Option<Instant>,
}

impl Wall {
    pub fn new(
        interval: Duration,
        clock: Arc<dyn Fn() -> Time + Send + Sync>,
        until: Option<Instant>,
    ) -> Self {
        Wall {
            schedule: None,
            interval,
            clock,
            until,
        }
    }
}

impl Ticks for Wall {
    fn next(&mut self, _: Option<Time>, stop: &Stop) -> Option<Time> {
        if stop.is_set() {
            return None;
        }
        match &mut self.schedule {
            None => self.schedule = Some(Schedule::new(self.interval)),
            Some(schedule) => {
                if self.until.is_some_and(|d| Instant::now() >= d) {
                    return None;
                }
                let next = schedule.advance();
                let wake = self.until.map_or(next, |d| next.min(d));
                if stop.wait_until(wake) {
                    return None;
                }
            }
        }
        Some((self.clock)())
    }
}

/// How a source is run as a live sampling loop (`Source::run`).
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

impl Pace {
    /// The plain live loop on the calling thread: `drive` on `Wall` ticks.
    pub fn run_plain<S: Sampled + ?Sized>(mut self, source: &mut S) {
        let mut ticks = Wall::new(self.interval, self.clock, None);
        drive(source, &mut ticks, &self.stop, |obs| {
            (self.deliver)(obs);
            ControlFlow::Continue(())
        });
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Remembers the times it was sampled at.
    #[derive(Default)]
    struct Counting {
        times: Vec<Time>,
    }

    impl Sampled for Counting {
        fn take(&mut self, t: Time) -> Observation {
            self.times.push(t);
            Observation {
                t,
                ..Default::default()
            }
        }
        fn next_item(&self) -> Option<Time> {
            None
        }
    }

    fn clock() -> Arc<dyn Fn() -> Time + Send + Sync> {
        let n = Arc::new(Mutex::new(0.0));
        Arc::new(move || {
            let mut n = unpoisoned(n.lock());
            *n += 1.0;
            *n
        })
    }

    #[test]
    fn the_receiver_ends_a_run_by_breaking() {
        let mut s = Counting::default();
        let mut ticks = Wall::new(Duration::from_millis(1), clock(), None);
        let mut seen = 0;
        drive(&mut s, &mut ticks, &Stop::default(), |_| {
            seen += 1;
            if seen == 3 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(s.times, vec![1.0, 2.0, 3.0]);
    }

    #[test]
    fn a_wall_run_past_its_end_takes_one_sample_and_a_stop_takes_none() {
        let mut s = Counting::default();
        let mut ticks = Wall::new(Duration::from_secs(3600), clock(), Some(Instant::now()));
        drive(&mut s, &mut ticks, &Stop::default(), |_| {
            ControlFlow::Continue(())
        });
        assert_eq!(s.times.len(), 1);

        let stop = Stop::default();
        stop.set();
        let mut s = Counting::default();
        let mut ticks = Wall::new(Duration::from_secs(3600), clock(), None);
        drive(&mut s, &mut ticks, &stop, |_| ControlFlow::Continue(()));
        assert!(s.times.is_empty());
    }

    #[test]
    fn a_stop_from_another_thread_wakes_a_run_waiting_for_its_next_tick() {
        let stop = Arc::new(Stop::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let runner = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut s = Counting::default();
                let mut ticks = Wall::new(Duration::from_secs(3600), clock(), None);
                drive(&mut s, &mut ticks, &stop, |_| {
                    let _ = tx.send(());
                    ControlFlow::Continue(())
                });
                s.times.len()
            })
        };
        rx.recv().unwrap();
        stop.set();
        // An hour until the next tick: only the stop can end it.
        assert_eq!(runner.join().unwrap(), 1);
    }
}
