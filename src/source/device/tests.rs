use super::*;
use std::sync::atomic::{AtomicBool, AtomicU32};
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
    /// Each entry makes one memory call to that GPU panic.
    pub panic_on_memory: Mutex<Vec<u32>>,
    /// While set, init does not return.
    pub hang_init: AtomicBool,
    /// Calls to init in progress, and the most there ever were at once.
    pub in_init: AtomicU32,
    pub most_in_init: AtomicU32,
}

impl Backend for Arc<Scripted> {
    fn init(&self) -> Result<u32, ErrorKind> {
        let now = self.in_init.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_init.fetch_max(now, Ordering::SeqCst);
        *self.inits.lock().unwrap() += 1;
        while self.hang_init.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let r = if self.driver_gone.load(Ordering::SeqCst) {
            Err(ErrorKind::Driver)
        } else {
            Ok(*self.count.lock().unwrap())
        };
        self.in_init.fetch_sub(1, Ordering::SeqCst);
        r
    }
    fn identity(&self, index: u32) -> Result<GpuIdentity, ErrorKind> {
        Ok(GpuIdentity {
            index,
            uuid: format!("GPU-{index}"),
            name: "Scripted".into(),
            pci_bus_id: String::new(),
            mig: None,
        })
    }
    fn memory(&self, index: u32) -> Result<DeviceMemory, ErrorKind> {
        let panics = {
            // Not panicking while holding the lock: that would poison it for the test.
            let mut p = self.panic_on_memory.lock().unwrap();
            p.iter()
                .position(|&i| i == index)
                .map(|k| p.remove(k))
                .is_some()
        };
        if panics {
            // A panic without the hook's report: a backtrace, where enabled, can take a
            // loaded machine longer than a short deadline to write.
            std::panic::resume_unwind(Box::new(format!("scripted panic reading GPU {index}")));
        }
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

/// Generous at start, where `new` allows one deadline: these tests are about the calls
/// after it, and a loaded machine can take a short deadline to start a thread.
fn source(s: &Arc<Scripted>, deadline_ms: u64) -> DeviceSource<Arc<Scripted>> {
    let cfg = nvml_config(deadline_ms);
    DeviceSource::start(Arc::clone(s), &cfg, Duration::from_secs(10)).unwrap()
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
    // Down while the stuck call lasts (300 ms), up at the first sample after it came back.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut t = 3.0;
    while !src.sample(t).gpus[1].is_up() {
        assert!(
            std::time::Instant::now() < deadline,
            "recovers once it answers again"
        );
        std::thread::sleep(Duration::from_millis(20));
        t += 1.0;
    }
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

fn all_down_for_the_driver(o: &Observation) -> bool {
    !o.gpus.is_empty()
        && o.gpus
            .iter()
            .all(|g| !g.is_up() && g.errors == vec![ErrorKind::Driver])
}

fn inits(s: &Scripted) -> u32 {
    *s.inits.lock().unwrap()
}

#[test]
fn a_panicking_call_is_that_gpu_down_and_the_reader_goes_on() {
    let s = scripted(3);
    let mut src = source(&s, 200);
    s.panic_on_memory.lock().unwrap().push(1);
    let o = src.sample(1.0);
    assert!(o.gpus[0].is_up() && o.gpus[2].is_up());
    assert_eq!(o.gpus[1].errors, vec![ErrorKind::Other]);
    assert_eq!(o.reader_restarts, 1);
    assert!(
        src.core.state().calling.is_none(),
        "no call left in progress for the watchdog to find stuck"
    );
    for t in 2..6 {
        let o = src.sample(t as f64);
        assert!(o.gpus.iter().all(|g| g.is_up()), "sample {t}");
        assert_eq!(o.reader_restarts, 0);
    }
    assert_eq!(src.core.reader_restarts.load(Ordering::Relaxed), 1);
}

#[test]
fn a_paced_run_survives_a_panicking_call() {
    let s = scripted(3);
    let src = source(&s, 200);
    let core = Arc::clone(&src.core);
    let (stop, rx, h) = run_paced(src, Duration::from_millis(20));
    let next = || rx.recv_timeout(Duration::from_secs(5)).expect("a sample");
    assert!(next().gpus.iter().all(|g| g.is_up()));
    s.panic_on_memory.lock().unwrap().push(1);
    let mut hit = None;
    for _ in 0..20 {
        let o = next();
        if !o.gpus[1].is_up() {
            hit = Some(o);
            break;
        }
        assert_eq!(o.reader_restarts, 0);
    }
    let o = hit.expect("the panicking GPU is reported down");
    assert_eq!(o.gpus[1].errors, vec![ErrorKind::Other]);
    assert!(o.gpus[0].is_up() && o.gpus[2].is_up());
    assert_eq!(o.reader_restarts, 1);
    for k in 0..20 {
        let o = next();
        assert!(o.gpus.iter().all(|g| g.is_up()), "sample {k} after");
        assert_eq!(o.reader_restarts, 0);
    }
    assert_eq!(core.reader_restarts.load(Ordering::Relaxed), 1);
    stop.set();
    h.join().unwrap();
}

#[test]
fn a_paced_run_survives_a_panicking_hand_off() {
    let s = scripted(2);
    let src = source(&s, 200);
    let core = Arc::clone(&src.core);
    let stop = Arc::new(Stop::default());
    let (tx, rx) = mpsc::channel();
    let mut handed = 0;
    let pace = Pace {
        interval: Duration::from_millis(20),
        clock: Arc::new(|| 0.0),
        deliver: Box::new(move |o: Observation| {
            handed += 1;
            if handed == 3 {
                std::panic::resume_unwind(Box::new("scripted panic handing a sample on"));
            }
            let _ = tx.send(o);
        }),
        stop: Arc::clone(&stop),
    };
    let h = std::thread::spawn(move || Box::new(src).run(pace));
    let mut restarts = 0;
    for k in 0..20 {
        let o = rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("sample {k} is handed on"));
        assert!(o.gpus.iter().all(|g| g.is_up()));
        restarts += o.reader_restarts;
    }
    assert_eq!(restarts, 1, "the next observation counts the restart");
    assert_eq!(core.reader_restarts.load(Ordering::Relaxed), 1);
    stop.set();
    h.join().unwrap();
}

#[test]
fn a_hanging_init_is_left_behind_and_the_gpus_come_back() {
    let s = scripted(2);
    let mut src = source(&s, 200);
    s.hang_init.store(true, Ordering::SeqCst);
    s.driver_gone.store(true, Ordering::SeqCst);
    let before = inits(&s);
    // The reload shows in this sample; its initialisation hangs and is left behind.
    let o = src.sample(1.0);
    assert!(all_down_for_the_driver(&o), "{o:?}");
    assert!(!o.reinitialised);
    for t in 2..6 {
        assert!(all_down_for_the_driver(&src.sample(t as f64)), "sample {t}");
    }
    assert_eq!(
        inits(&s),
        before + 1,
        "nobody initialises while an initialisation is stuck"
    );
    s.driver_gone.store(false, Ordering::SeqCst);
    s.hang_init.store(false, Ordering::SeqCst);
    let mut back = false;
    for t in 6..100 {
        if src.sample(t as f64).gpus.iter().all(|g| g.is_up()) {
            back = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(back, "the GPUs come back once the driver does");
    assert_eq!(s.most_in_init.load(Ordering::SeqCst), 1);
}

#[test]
fn a_paced_run_rides_out_a_hanging_init() {
    let s = scripted(2);
    let src = source(&s, 200);
    let core = Arc::clone(&src.core);
    let (stop, rx, h) = run_paced(src, Duration::from_millis(20));
    let next = || rx.recv_timeout(Duration::from_secs(5)).expect("a sample");
    assert!(next().gpus.iter().all(|g| g.is_up()));
    s.hang_init.store(true, Ordering::SeqCst);
    s.driver_gone.store(true, Ordering::SeqCst);
    // The first sample that sees the reload is handed on once the watchdog gives its
    // initialisation up; the samples after it keep coming, all down.
    let mut first = None;
    for _ in 0..50 {
        let o = next();
        if all_down_for_the_driver(&o) {
            first = Some(inits(&s));
            break;
        }
    }
    let stuck_inits = first.expect("the GPUs are reported down");
    for k in 0..10 {
        assert!(all_down_for_the_driver(&next()), "sample {k} while stuck");
    }
    assert_eq!(inits(&s), stuck_inits, "nobody initialises meanwhile");
    assert!(core.watchdog_wakes.load(Ordering::Relaxed) >= 1);
    s.driver_gone.store(false, Ordering::SeqCst);
    s.hang_init.store(false, Ordering::SeqCst);
    let mut back = false;
    for _ in 0..200 {
        if next().gpus.iter().all(|g| g.is_up()) {
            back = true;
            break;
        }
    }
    assert!(back, "the GPUs come back once the driver does");
    assert_eq!(s.most_in_init.load(Ordering::SeqCst), 1);
    stop.set();
    h.join().unwrap();
}

#[test]
fn a_hanging_init_at_start_is_an_error() {
    let s = scripted(2);
    s.hang_init.store(true, Ordering::SeqCst);
    let started = Instant::now();
    // `new` waits `start_limit` (30 s at least); the same path with a short limit.
    assert_eq!(
        start_limit(Duration::from_millis(100)),
        Duration::from_secs(30)
    );
    let r = DeviceSource::start(
        Arc::clone(&s),
        &nvml_config(100),
        Duration::from_millis(300),
    );
    let took = started.elapsed();
    s.hang_init.store(false, Ordering::SeqCst);
    let Err(e) = r else {
        panic!("a source from an initialisation that never came back");
    };
    assert!(e.to_string().contains("nvml.deadline"), "{e}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}
