//! The exporter's real NVML path (`--source nvml`: nvml-wrapper loading libnvidia-ml.so.1,
//! its calls, their errors, the calls the library lacks) on a machine without a GPU. The
//! exporter loads the stand-in library that tests/nvml_standin builds, whose GPUs, processes
//! and faults come from a script it reads again on every call: rewriting the script changes
//! the devices under the running exporter.

mod common;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{sample_value, Exporter, Launch, BIN};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

struct Gpu {
    uuid: &'static str,
    name: &'static str,
    total: u64,
    used: u64,
    reserved: u64,
}

/// Two GPUs of different sizes and fill, so that a number read from the wrong one shows.
const GPUS: [Gpu; 2] = [
    Gpu {
        uuid: "GPU-5a1d0000-0000-4000-8000-000000000000",
        name: "NVIDIA Stand-in 80GB",
        total: 80 * GIB,
        used: 12 * GIB,
        reserved: 512 * MIB,
    },
    Gpu {
        uuid: "GPU-5a1d0001-0000-4000-8000-000000000001",
        name: "NVIDIA Stand-in 40GB",
        total: 40 * GIB,
        used: 3 * GIB,
        reserved: 256 * MIB,
    },
];

/// The one process, on GPU 0. No such process needs to exist: the exporter takes NVML's word.
const PID: u32 = 4242;
const PID_BYTES: u64 = 10 * GIB;

/// The two GPUs and the process, then `extra` directives.
fn script(extra: &str) -> String {
    let mut s = String::from("# index uuid total used reserved name\n");
    for (i, g) in GPUS.iter().enumerate() {
        s += &format!(
            "gpu {i} {} {} {} {} {}\n",
            g.uuid, g.total, g.used, g.reserved, g.name
        );
    }
    s += &format!("proc 0 {PID} {PID_BYTES}\n{extra}");
    s
}

/// The stand-in library, built into a fresh folder, and the script beside it.
struct StandIn {
    dir: tempfile::TempDir,
}

impl StandIn {
    /// Built by the same script the Python tests use. A machine without a C compiler fails
    /// here rather than skipping: CI must run this path.
    fn build() -> StandIn {
        let dir = tempfile::tempdir().unwrap();
        let build = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nvml_standin/build.sh");
        let out = Command::new("bash")
            .arg(&build)
            .arg(dir.path())
            .output()
            .expect("run bash");
        assert!(
            out.status.success(),
            "building the NVML stand-in failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(dir.path().join("libnvidia-ml.so.1").is_file());
        StandIn { dir }
    }

    fn script_path(&self) -> PathBuf {
        self.dir.path().join("gpus.txt")
    }

    /// Replace the script whole: the library reads it on every call and must never see half
    /// of it.
    fn write(&self, text: &str) {
        let tmp = self.dir.path().join("gpus.txt.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.script_path()).unwrap();
    }

    /// The library first on the search path (before a real driver's, on a machine that has
    /// one), and the script it reads.
    fn env(&self) -> Vec<(&'static str, OsString)> {
        let mut path = OsString::from(self.dir.path());
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
            path.push(":");
            path.push(old);
        }
        vec![
            ("LD_LIBRARY_PATH", path),
            ("GPUMEM_NVML_SCRIPT", self.script_path().into_os_string()),
        ]
    }

    /// The exporter on `--source nvml`, sampling every 100 ms.
    fn exporter(&self) -> Exporter {
        let env = self.env();
        let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
        Exporter::launch_on("nvml", &env, Launch::default())
    }

    /// The exporter on `--source nvml` when it is expected to stop by itself: its exit code
    /// and what it wrote on stderr.
    fn run_to_exit(&self) -> (Option<i32>, String) {
        let socket = self.dir.path().join("ingest.sock");
        let log = self.dir.path().join("exporter.log");
        let mut child = Command::new(BIN)
            .args(["--source", "nvml", "--web.listen-address"])
            .arg("127.0.0.1:0")
            .arg("--ingest.socket")
            .arg(&socket)
            .envs(self.env())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start the exporter");
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the exporter was still running after 60 s:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        (status.code(), std::fs::read_to_string(&log).unwrap())
    }
}

/// A series of GPU `gpu`.
fn gauge(m: &str, name: &str, gpu: usize) -> Option<f64> {
    sample_value(m, name, &[("gpu", &gpu.to_string())])
}

fn up(m: &str, gpu: usize) -> bool {
    gauge(m, "gpumem_device_up", gpu) == Some(1.0)
}

fn errors(m: &str, gpu: usize, kind: &str) -> f64 {
    sample_value(
        m,
        "gpumem_exporter_sample_errors_total",
        &[("gpu", &gpu.to_string()), ("kind", kind)],
    )
    .unwrap_or(0.0)
}

fn process_bytes(m: &str, gpu: usize, pid: u32) -> Option<f64> {
    sample_value(
        m,
        "gpumem_process_used_bytes",
        &[("gpu", &gpu.to_string()), ("pid", &pid.to_string())],
    )
}

/// Scrape until `ok` holds and return that scrape. The exporter samples every 100 ms; the
/// deadline is for a loaded CI machine, not a measurement.
fn scrape_until(e: &Exporter, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = e.metrics();
        if ok(&m) {
            return m;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within 30 s\n--- last /metrics:\n{m}\n--- exporter log:\n{}",
            e.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Both GPUs up, GPU 0's process listed: the script as written has been read.
fn all_up(m: &str) -> bool {
    up(m, 0) && up(m, 1) && process_bytes(m, 0, PID).is_some()
}

/// GPU `i`'s memory series carry the script's numbers, free being what neither used nor
/// reserved takes.
fn assert_memory(m: &str, i: usize) {
    let g = &GPUS[i];
    let v = |name| gauge(m, name, i).unwrap_or_else(|| panic!("{name} of GPU {i}:\n{m}"));
    assert_eq!(v("gpumem_total_bytes"), g.total as f64, "GPU {i}");
    assert_eq!(v("gpumem_used_bytes"), g.used as f64, "GPU {i}");
    assert_eq!(v("gpumem_reserved_bytes"), g.reserved as f64, "GPU {i}");
    assert_eq!(
        v("gpumem_free_bytes"),
        (g.total - g.used - g.reserved) as f64,
        "GPU {i}"
    );
}

#[test]
fn serves_the_gpus_and_processes_nvml_reports() {
    let s = StandIn::build();
    s.write(&script(""));
    let e = s.exporter();
    let m = scrape_until(&e, "both GPUs up with the process", all_up);
    assert_eq!(
        sample_value(&m, "gpumem_exporter_build_info", &[("source", "nvml")]),
        Some(1.0)
    );
    for (i, g) in GPUS.iter().enumerate() {
        // Identity from nvmlDeviceGetUUID and nvmlDeviceGetName. The stand-in has no PCI
        // info: a call the library lacks leaves its label empty rather than failing the GPU.
        let info = sample_value(
            &m,
            "gpumem_gpu_info",
            &[
                ("gpu", &i.to_string()),
                ("uuid", g.uuid),
                ("name", g.name),
                ("pci_bus_id", ""),
            ],
        );
        assert_eq!(info, Some(1.0), "GPU {i}'s identity:\n{m}");
        // Used without the reservation: nvmlDeviceGetMemoryInfo_v2, not v1 (whose used
        // includes it).
        assert_memory(&m, i);
    }
    assert_eq!(process_bytes(&m, 0, PID), Some(PID_BYTES as f64), "{m}");
    assert!(
        !m.lines()
            .any(|l| l.starts_with("gpumem_process_used_bytes{gpu=\"1\"")),
        "no process on GPU 1:\n{m}"
    );
    // What the listed processes do not account for: the process list was joined to the GPU.
    assert_eq!(
        gauge(&m, "gpumem_unattributed_bytes", 0),
        Some((GPUS[0].used - PID_BYTES) as f64)
    );
    // Graphics processes, PCI info and MIG mode are missing from the library: not supported,
    // which is no error.
    for i in 0..2 {
        for kind in ["gpu_lost", "not_supported", "driver", "timeout", "other"] {
            assert_eq!(errors(&m, i, kind), 0.0, "GPU {i}, {kind}:\n{m}");
        }
    }
}

#[test]
fn a_lost_gpu_is_down_while_the_other_serves_and_it_comes_back() {
    let s = StandIn::build();
    s.write(&script(""));
    let e = s.exporter();
    scrape_until(&e, "both GPUs up with the process", all_up);

    // GPU 1 falls off the bus: its memory call answers NVML_ERROR_GPU_IS_LOST.
    s.write(&script("fail memory 1 15\n"));
    let m = scrape_until(&e, "GPU 1 down for gpu_lost", |m| {
        !up(m, 1) && errors(m, 1, "gpu_lost") > 0.0
    });
    assert!(up(&m, 0), "GPU 0 is not affected:\n{m}");
    assert_memory(&m, 0);
    assert_eq!(process_bytes(&m, 0, PID), Some(PID_BYTES as f64));
    // No stale numbers stand in for the ones GPU 1 did not give.
    assert_eq!(gauge(&m, "gpumem_used_bytes", 1), None, "{m}");
    assert_eq!(errors(&m, 0, "gpu_lost"), 0.0);
    // A lost GPU is not the driver gone: nothing to initialise again.
    assert_eq!(
        sample_value(&m, "gpumem_exporter_nvml_reinit_total", &[]),
        Some(0.0)
    );
    // Still sampling while it is down: the count goes on rising.
    let lost = errors(&m, 1, "gpu_lost");
    scrape_until(&e, "more samples with GPU 1 down", |m| {
        errors(m, 1, "gpu_lost") > lost && up(m, 0)
    });

    // It answers again: the same handle is read again, without a restart.
    s.write(&script(""));
    let m = scrape_until(&e, "GPU 1 back up", |m| up(m, 1));
    for i in 0..2 {
        assert_memory(&m, i);
    }
    assert_eq!(process_bytes(&m, 0, PID), Some(PID_BYTES as f64));
}

#[test]
fn a_gpu_nvml_gives_no_handle_for_at_start_is_down_and_the_others_are_served() {
    let s = StandIn::build();
    // GPU 1 is off the bus before the exporter starts: nvmlDeviceGetHandleByIndex answers
    // NVML_ERROR_GPU_IS_LOST. The exporter must start and serve GPU 0.
    s.write(&script("fail handle 1 15\n"));
    let e = s.exporter();
    let m = scrape_until(&e, "GPU 0 up with its process, GPU 1 down", |m| {
        up(m, 0) && process_bytes(m, 0, PID).is_some() && errors(m, 1, "gpu_lost") > 0.0
    });
    assert_memory(&m, 0);
    assert_eq!(
        gauge(&m, "gpumem_device_up", 1),
        Some(0.0),
        "GPU 1 is shown, down:\n{m}"
    );
    assert_eq!(gauge(&m, "gpumem_used_bytes", 1), None, "{m}");
    assert!(e.log().contains("no handle"), "{}", e.log());
}

#[test]
fn a_gpu_whose_name_nvml_will_not_give_keeps_its_uuid() {
    let s = StandIn::build();
    s.write(&script("fail name 0 999\n"));
    let e = s.exporter();
    let m = scrape_until(&e, "both GPUs up with the process", all_up);
    assert_eq!(
        sample_value(
            &m,
            "gpumem_gpu_info",
            &[("gpu", "0"), ("uuid", GPUS[0].uuid)]
        ),
        Some(1.0),
        "GPU 0 under its own uuid:\n{m}"
    );
    assert_memory(&m, 0);
}

#[test]
fn a_call_that_hangs_past_the_deadline_is_that_gpu_down_until_it_comes_back() {
    let s = StandIn::build();
    s.write(&script(""));
    let e = s.exporter();
    scrape_until(&e, "both GPUs up with the process", all_up);

    // Six times `nvml.deadline` (500 ms): a hang, however loaded the machine.
    s.write(&script("sleep memory 1 3000\n"));
    let m = scrape_until(&e, "GPU 1 down for a timeout", |m| {
        !up(m, 1) && errors(m, 1, "timeout") > 0.0
    });
    assert!(up(&m, 0), "GPU 0 is read while GPU 1's call hangs:\n{m}");
    assert_memory(&m, 0);
    assert_eq!(errors(&m, 0, "timeout"), 0.0);

    // Once the stuck call has come back, the next one is read in time.
    s.write(&script(""));
    let m = scrape_until(&e, "GPU 1 back up", |m| up(m, 1));
    assert_memory(&m, 1);
}

#[test]
fn without_a_driver_the_exporter_stops_at_start_saying_nvml_is_not_available() {
    let s = StandIn::build();
    // No script: nvmlInit_v2 answers NVML_ERROR_DRIVER_NOT_LOADED, as on a machine whose
    // driver is not loaded. The exporter opens NVML before it serves and stops with the error
    // and the way to run without a GPU, for whoever runs it to see and restart it.
    let (code, stderr) = s.run_to_exit();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "gpumem-exporter: NVML is not available on this machine (NVIDIA driver is not loaded)"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("--source sim"), "{stderr}");
    assert!(!stderr.contains("serving metrics"), "{stderr}");
}

#[test]
fn a_malformed_script_is_named_on_stderr_and_fails_every_call() {
    let s = StandIn::build();
    s.write(&script("proc 0 not-a-pid 1\n"));
    // Every call answers NVML_ERROR_UNKNOWN, nvmlInit_v2 first; the stand-in names the line
    // (the script's fifth: a comment, two GPUs, the process, this one).
    let (code, stderr) = s.run_to_exit();
    assert_eq!(code, Some(1), "{stderr}");
    let named = format!("nvml-standin: {}:5: ", s.script_path().display());
    assert!(stderr.contains(&named), "{stderr}");
    assert!(stderr.contains("proc 0 not-a-pid 1"), "{stderr}");
    assert!(
        stderr
            .contains("NVML is not available on this machine (an internal driver error occurred)"),
        "{stderr}"
    );
}
