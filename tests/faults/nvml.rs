//! (a) Scripted NVML faults through `DeviceSource` and the engine: a GPU lost mid-run, a call
//! that hangs past its deadline, NVML failing at start, a driver reload, a process that exits
//! between being listed and being read.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::sample_value;
use gpumem_exporter::config::{Config, NvmlConfig};
use gpumem_exporter::engine::current;
use gpumem_exporter::exporter::encode;
use gpumem_exporter::model::{DeviceMemory, ErrorKind, GpuIdentity};
use gpumem_exporter::runtime::live::{spawn_sampler, unix_now, Shared};
use gpumem_exporter::source::device::{Backend, DeviceSource};

const GIB: u64 = 1 << 30;

/// A backend whose GPUs can be lost, hung, driver-failed and whose processes come and go.
#[derive(Default)]
struct Script {
    count: u32,
    /// `init` fails (no driver at start).
    no_nvml: AtomicBool,
    /// Every call fails with a driver error (a driver reload in progress).
    driver_gone: AtomicBool,
    /// The driver came back, but handles from before the reload stay invalid until `init`.
    stale_handles: AtomicBool,
    lost: Mutex<HashSet<u32>>,
    /// `memory` blocks while its GPU is in here (at most 10 s).
    hung: Mutex<HashSet<u32>>,
    /// (pid, used) per GPU.
    procs: Mutex<HashMap<u32, Vec<(u32, u64)>>>,
    /// The process list of a GPU fails with this kind.
    procs_fail: Mutex<HashMap<u32, ErrorKind>>,
    inits: AtomicU32,
    /// Calls of `memory` per GPU.
    memory_calls: Mutex<HashMap<u32, u32>>,
}

struct Scripted(Arc<Script>);

impl Backend for Scripted {
    fn init(&self) -> Result<u32, ErrorKind> {
        self.0.inits.fetch_add(1, Ordering::SeqCst);
        if self.0.no_nvml.load(Ordering::SeqCst) || self.0.driver_gone.load(Ordering::SeqCst) {
            return Err(ErrorKind::Driver);
        }
        self.0.stale_handles.store(false, Ordering::SeqCst);
        Ok(self.0.count)
    }
    fn identity(&self, index: u32) -> Result<GpuIdentity, ErrorKind> {
        Ok(GpuIdentity {
            index,
            uuid: format!("GPU-fault-{index}"),
            name: "Scripted GPU".into(),
            pci_bus_id: format!("00000000:{index:02X}:00.0"),
            mig: None,
        })
    }
    fn memory(&self, index: u32) -> Result<DeviceMemory, ErrorKind> {
        *self
            .0
            .memory_calls
            .lock()
            .unwrap()
            .entry(index)
            .or_default() += 1;
        let until = Instant::now() + Duration::from_secs(10);
        while self.0.hung.lock().unwrap().contains(&index) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        if self.0.driver_gone.load(Ordering::SeqCst) || self.0.stale_handles.load(Ordering::SeqCst)
        {
            return Err(ErrorKind::Driver);
        }
        if self.0.lost.lock().unwrap().contains(&index) {
            return Err(ErrorKind::GpuLost);
        }
        let used = (index as u64 + 1) * GIB;
        Ok(DeviceMemory {
            total: 80 * GIB,
            reserved: GIB / 2,
            used,
            free: 80 * GIB - GIB / 2 - used,
        })
    }
    fn processes(&self, index: u32) -> Result<Vec<(u32, u64)>, ErrorKind> {
        if self.0.driver_gone.load(Ordering::SeqCst) {
            return Err(ErrorKind::Driver);
        }
        if let Some(k) = self.0.procs_fail.lock().unwrap().get(&index) {
            return Err(*k);
        }
        Ok(self
            .0
            .procs
            .lock()
            .unwrap()
            .get(&index)
            .cloned()
            .unwrap_or_default())
    }
}

struct Rig {
    script: Arc<Script>,
    source: DeviceSource<Scripted>,
    shared: Shared,
    t: f64,
    _proc_root: tempfile::TempDir,
}

fn nvml_config(deadline_ms: u64, proc_root: &Path) -> NvmlConfig {
    NvmlConfig {
        deadline: Duration::from_millis(deadline_ms),
        read_comm: true,
        proc_root: proc_root.to_path_buf(),
    }
}

impl Rig {
    fn new(count: u32, deadline_ms: u64) -> Rig {
        let script = Arc::new(Script {
            count,
            ..Default::default()
        });
        let proc_root = tempfile::tempdir().unwrap();
        let cfg = Config {
            nvml: nvml_config(deadline_ms, proc_root.path()),
            ..Config::default()
        };
        let source = DeviceSource::new(Scripted(Arc::clone(&script)), &cfg.nvml).unwrap();
        let shared = Shared::new(&cfg, "nvml");
        Rig {
            script,
            source,
            shared,
            t: 1_700_000_000.0,
            _proc_root: proc_root,
        }
    }

    /// Take one sample one second after the last; return the metrics text.
    fn step(&mut self) -> String {
        self.t += 1.0;
        self.shared.step(&mut self.source, self.t);
        self.metrics()
    }

    fn metrics(&self) -> String {
        metrics_text(&self.shared)
    }

    fn set_comm(&self, pid: u32, comm: Option<&str>) {
        let dir = self._proc_root.path().join(pid.to_string());
        match comm {
            Some(c) => {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("comm"), format!("{c}\n")).unwrap();
            }
            None => {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
}

/// What a scrape of `shared` would return, in the text format.
fn metrics_text(shared: &Shared) -> String {
    let mut out = String::new();
    encode::text(&current(&shared.engine), &shared.counters, "test", &mut out).unwrap();
    out
}

fn up(m: &str, gpu: u32) -> Option<f64> {
    sample_value(m, "gpumem_device_up", &[("gpu", &gpu.to_string())])
}

fn used(m: &str, gpu: u32) -> Option<f64> {
    sample_value(m, "gpumem_used_bytes", &[("gpu", &gpu.to_string())])
}

fn errors(m: &str, gpu: u32, kind: &str) -> f64 {
    sample_value(
        m,
        "gpumem_exporter_sample_errors_total",
        &[("gpu", &gpu.to_string()), ("kind", kind)],
    )
    .unwrap_or(0.0)
}

fn process_lines(m: &str, pid: u32) -> Vec<&str> {
    let needle = format!("pid=\"{pid}\"");
    m.lines()
        .filter(|l| !l.starts_with('#') && l.contains(&needle))
        .collect()
}

#[test]
fn a_gpu_lost_mid_run_goes_down_and_the_others_keep_their_values() {
    let mut rig = Rig::new(3, 500);
    let m = rig.step();
    for g in 0..3 {
        assert_eq!(up(&m, g), Some(1.0), "{m}");
    }
    let before: Vec<_> = (0..3).map(|g| used(&m, g)).collect();
    assert_eq!(before[2], Some(3.0 * GIB as f64));

    rig.script.lost.lock().unwrap().insert(1);
    let m = rig.step();
    assert_eq!(up(&m, 1), Some(0.0));
    assert_eq!(errors(&m, 1, "gpu_lost"), 1.0);
    assert_eq!(up(&m, 0), Some(1.0));
    assert_eq!(up(&m, 2), Some(1.0));
    assert_eq!(used(&m, 0), before[0]);
    assert_eq!(used(&m, 2), before[2]);
    let m = rig.step();
    assert_eq!(errors(&m, 1, "gpu_lost"), 2.0, "counted every sample");
    assert_eq!(errors(&m, 0, "gpu_lost"), 0.0);
    // A lost GPU is not a driver failure: no reinitialisation for it.
    assert_eq!(
        sample_value(&m, "gpumem_exporter_nvml_reinit_total", &[]),
        Some(0.0)
    );
}

#[test]
fn a_hung_call_times_out_the_others_go_on_and_it_recovers() {
    let mut rig = Rig::new(3, 100);
    rig.step();
    rig.script.hung.lock().unwrap().insert(2);
    let started = Instant::now();
    let m = rig.step();
    // The hung call blocks for 10 s; the deadline is 100 ms.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the sample waited for the hung GPU: {:?}",
        started.elapsed()
    );
    assert_eq!(up(&m, 2), Some(0.0));
    assert_eq!(errors(&m, 2, "timeout"), 1.0);
    assert_eq!(up(&m, 0), Some(1.0));
    assert_eq!(up(&m, 1), Some(1.0));
    // Still hung: reported down without being called again.
    let script = Arc::clone(&rig.script);
    let calls = |gpu| script.memory_calls.lock().unwrap()[&gpu];
    let before = calls(2);
    let m = rig.step();
    assert_eq!(calls(2), before, "a stuck GPU was called again");
    assert_eq!(up(&m, 2), Some(0.0));
    assert_eq!(errors(&m, 2, "timeout"), 2.0);
    assert_eq!(up(&m, 1), Some(1.0));

    rig.script.hung.lock().unwrap().clear();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let m = rig.step();
        if up(&m, 2) == Some(1.0) {
            assert_eq!(used(&m, 2), Some(3.0 * GIB as f64));
            break;
        }
        assert!(Instant::now() < deadline, "the GPU did not come back: {m}");
    }
}

/// The exporter's own loop (the reader keeps the rhythm, a watchdog covers it), with the
/// first GPU hanging: the ones after it are still read every sample.
#[test]
fn the_exporters_sampling_loop_rides_out_a_hung_first_gpu() {
    let Rig {
        script,
        source,
        shared,
        _proc_root,
        ..
    } = Rig::new(3, 100);
    let sampler = spawn_sampler(
        shared.clone(),
        Box::new(source),
        Duration::from_millis(20),
        Arc::new(unix_now),
        None,
    );
    let wait_for = |what: &str, ok: &dyn Fn(&str) -> bool| {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let m = metrics_text(&shared);
            if ok(&m) {
                return m;
            }
            assert!(Instant::now() < until, "{what}: {m}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait_for("all GPUs up", &|m| (0..3).all(|g| up(m, g) == Some(1.0)));
    script.hung.lock().unwrap().insert(0);
    let m = wait_for("GPU 0 down for a timeout", &|m| {
        up(m, 0) == Some(0.0) && errors(m, 0, "timeout") >= 1.0
    });
    assert_eq!(up(&m, 1), Some(1.0), "{m}");
    assert_eq!(up(&m, 2), Some(1.0), "{m}");
    let samples = |m: &str| sample_value(m, "gpumem_exporter_samples_total", &[]).unwrap();
    let before = samples(&m);
    let m = wait_for("sampling goes on", &|m| samples(m) >= before + 5.0);
    assert_eq!(up(&m, 0), Some(0.0), "still hung: {m}");
    assert_eq!(used(&m, 2), Some(3.0 * GIB as f64));
    script.hung.lock().unwrap().clear();
    wait_for("GPU 0 back", &|m| up(m, 0) == Some(1.0));
    shared.stop.set();
    sampler.join().unwrap();
}

#[test]
fn nvml_failing_at_start_is_an_error_not_a_panic() {
    let script = Arc::new(Script {
        count: 2,
        no_nvml: AtomicBool::new(true),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let r = DeviceSource::new(Scripted(Arc::clone(&script)), &nvml_config(100, dir.path()));
    let e = r.err().expect("no NVML: DeviceSource::new fails");
    assert!(e.to_string().contains("NVML"), "{e}");
}

#[test]
fn a_driver_reload_fails_everything_then_reinitialises() {
    let mut rig = Rig::new(2, 200);
    rig.script
        .procs
        .lock()
        .unwrap()
        .insert(0, vec![(4242, GIB)]);
    let m = rig.step();
    assert_eq!(up(&m, 0), Some(1.0));
    let inits = rig.script.inits.load(Ordering::SeqCst);

    rig.script.driver_gone.store(true, Ordering::SeqCst);
    rig.script.stale_handles.store(true, Ordering::SeqCst);
    for n in 1..=3 {
        let m = rig.step();
        assert_eq!(up(&m, 0), Some(0.0));
        assert_eq!(up(&m, 1), Some(0.0));
        assert_eq!(errors(&m, 0, "driver"), n as f64);
        assert_eq!(
            sample_value(&m, "gpumem_exporter_nvml_reinit_total", &[]),
            Some(0.0),
            "init keeps failing while the driver is away"
        );
    }
    assert!(
        rig.script.inits.load(Ordering::SeqCst) > inits,
        "init was retried"
    );

    // The driver is back; the old handles fail until NVML is initialised again, which the
    // sample that sees every GPU fail does.
    rig.script.driver_gone.store(false, Ordering::SeqCst);
    let m = rig.step();
    assert_eq!(up(&m, 0), Some(0.0));
    assert_eq!(
        sample_value(&m, "gpumem_exporter_nvml_reinit_total", &[]),
        Some(1.0)
    );
    let m = rig.step();
    assert_eq!(up(&m, 0), Some(1.0), "{m}");
    assert_eq!(up(&m, 1), Some(1.0));
    assert!(sample_value(&m, "gpumem_exporter_nvml_reinit_total", &[]).unwrap() >= 1.0);
    assert!(!process_lines(&m, 4242).is_empty(), "processes are back");
}

#[test]
fn a_process_that_exits_between_list_and_read_just_disappears() {
    let mut rig = Rig::new(2, 200);
    rig.set_comm(4242, Some("trainer"));
    rig.set_comm(4343, Some("other"));
    rig.script
        .procs
        .lock()
        .unwrap()
        .insert(0, vec![(4242, 3 * GIB), (4343, GIB)]);
    let m = rig.step();
    let lines = process_lines(&m, 4242);
    assert!(!lines.is_empty(), "{m}");
    assert!(
        m.contains("trainer"),
        "the comm label comes from the proc root: {m}"
    );

    // Listed, but gone before its name could be read: no name, no panic, still counted.
    rig.set_comm(4242, None);
    rig.set_comm(4444, None);
    rig.script
        .procs
        .lock()
        .unwrap()
        .insert(0, vec![(4242, 3 * GIB), (4343, GIB), (4444, GIB)]);
    let m = rig.step();
    assert!(!process_lines(&m, 4444).is_empty(), "{m}");

    // The process list itself fails because a process went away mid-query: the GPU stays up.
    rig.script
        .procs_fail
        .lock()
        .unwrap()
        .insert(0, ErrorKind::ProcessGone);
    let m = rig.step();
    assert_eq!(up(&m, 0), Some(1.0));
    assert_eq!(errors(&m, 0, "process_gone"), 1.0);
    rig.script.procs_fail.lock().unwrap().clear();

    // Then 4242 and 4444 are no longer listed: their NVML series go at once, 4343 stays.
    rig.script
        .procs
        .lock()
        .unwrap()
        .insert(0, vec![(4343, GIB)]);
    let m = rig.step();
    let used_of = |m: &str, pid: u32| {
        sample_value(m, "gpumem_process_used_bytes", &[("pid", &pid.to_string())])
    };
    assert_eq!(used_of(&m, 4242), None, "{m}");
    assert_eq!(used_of(&m, 4444), None, "{m}");
    assert_eq!(used_of(&m, 4343), Some(GIB as f64));
    // And after history.expire_after they are forgotten altogether.
    rig.t += 60.0;
    let m = rig.step();
    assert!(process_lines(&m, 4242).is_empty(), "{m}");
    assert!(process_lines(&m, 4444).is_empty(), "{m}");
    assert_eq!(
        sample_value(&m, "gpumem_exporter_tracked_processes", &[]),
        Some(1.0)
    );
}
