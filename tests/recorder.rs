//! The Python client's recorder (`python -m gpumem_client record`) end to end on a machine
//! without a GPU: its real NVML path over the stand-in library (tests/nvml_standin), real jobs
//! (tests/recorder/job.py) in real process groups, real signals, and the traces it leaves
//! replayed by this exporter. Needs `python3` and `cc`; without them the tests fail, loudly.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use common::BIN;
use serde_json::Value;

const UUIDS: [&str; 2] = [
    "GPU-5a1d0000-0000-4000-8000-000000000000",
    "GPU-5a1d0000-0000-4000-8000-000000000001",
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

struct Setup {
    dir: tempfile::TempDir,
    lib: PathBuf,
    script: PathBuf,
    marks: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("lib");
        let built = Command::new("bash")
            .arg(repo().join("tests/nvml_standin/build.sh"))
            .arg(&lib)
            .output()
            .expect("bash runs");
        assert!(
            built.status.success(),
            "the stand-in NVML library did not build (needs cc): {}",
            String::from_utf8_lossy(&built.stderr)
        );
        let script = dir.path().join("gpus.txt");
        let mut text = String::new();
        for (i, u) in UUIDS.iter().enumerate() {
            text += &format!("gpu {i} {u} 85899345920 536870912 536870912 Stand-in H100\n");
        }
        std::fs::write(&script, text).unwrap();
        let marks = dir.path().join("marks");
        std::fs::create_dir(&marks).unwrap();
        Setup {
            dir,
            lib,
            script,
            marks,
        }
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("run.jsonl")
    }

    /// The recorder around `python3 [py_flags] job.py job_args`.
    fn record(&self, rec_args: &[&str], py_flags: &[&str], job_args: &[&str]) -> Child {
        let mut cmd = Command::new("python3");
        cmd.args(["-m", "gpumem_client", "record", "-o"])
            .arg(self.out())
            .args(["--interval", "0.2"])
            .args(rec_args)
            .args(["--", "python3"])
            .args(py_flags)
            .arg(repo().join("tests/recorder/job.py"))
            .args(job_args)
            .arg(format!("marks={}", self.marks.display()));
        cmd.env("LD_LIBRARY_PATH", &self.lib)
            .env("GPUMEM_NVML_SCRIPT", &self.script)
            .env("FAKE_TORCH_UUIDS", UUIDS.join(","))
            .env(
                "PYTHONPATH",
                format!(
                    "{}:{}",
                    repo().join("clients/python").display(),
                    repo().join("tests/recorder/faketorch").display()
                ),
            );
        cmd.spawn().expect("python3 is needed to test the recorder")
    }

    /// Pids of the job's processes, as they wrote them.
    fn job_pids(&self, kind: &str) -> Vec<u32> {
        let mut v: Vec<u32> = std::fs::read_dir(&self.marks)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                name.strip_prefix(&format!("{kind}-"))?.parse().ok()
            })
            .collect();
        v.sort();
        v
    }
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_exit(child: &mut Child) -> ExitStatus {
    let mut status = None;
    wait_until("the recorder to exit", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    status.unwrap()
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a pid this test started.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0);
}

/// Gone, or a zombie nobody has reaped yet: either way it runs no more.
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().to_string())
        })
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The traces next to the output, the output first.
fn traces(s: &Setup) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(s.dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("run") && n.ends_with(".jsonl")
        })
        .collect();
    v.sort_by_key(|p| (p != &s.out(), p.clone()));
    v
}

fn summary(files: &[PathBuf]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("summary.json");
    let r = Command::new(BIN)
        .arg("replay")
        .args(files)
        .arg("--summary")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "replay failed: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

#[test]
fn sigterm_reaches_every_process_of_the_job_on_every_gpu_and_the_recorder_exits_with_its_status() {
    let s = Setup::new();
    // A leader on GPU 0 and a worker it starts on GPU 1, both leaving with status 3 on SIGTERM.
    let mut rec = s.record(
        &["--grace", "20"],
        &[],
        &["gpu=0", "worker=1", "term=exit3"],
    );
    wait_until("a trace per process and GPU", || traces(&s).len() == 2);
    let pids = s.job_pids("pid");
    assert_eq!(pids.len(), 2);
    signal(rec.id(), libc::SIGTERM);
    let status = wait_exit(&mut rec);
    assert_eq!(status.code(), Some(3), "the job's own status");
    assert_eq!(s.job_pids("term"), pids, "both processes heard SIGTERM");
    let files = traces(&s);
    let headers: Vec<Value> = files.iter().map(|f| lines(f)[0].clone()).collect();
    let mut gpus: Vec<&str> = headers
        .iter()
        .map(|h| h["gpu_uuid"].as_str().unwrap())
        .collect();
    gpus.sort();
    assert_eq!(gpus, UUIDS, "each process's trace names its GPU");
    for h in &headers {
        assert_eq!(h["complete"], true);
        assert_eq!(h["stopped_by"], "SIGTERM");
        assert_eq!(h["exit_code"], 3);
        assert!(pids.contains(&(h["pid"].as_u64().unwrap() as u32)));
    }
    let v = summary(&files);
    assert_eq!(v["gpus"].as_array().unwrap().len(), 2);
    assert!(v["oom_t"].is_null());
    let dot_parts = s.dir.path().join(".run.jsonl.parts");
    assert!(!dot_parts.exists(), "the raw parts are cleaned up");
}

#[test]
fn a_job_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let s = Setup::new();
    let mut rec = s.record(&["--grace", "1"], &[], &["gpu=0", "term=ignore"]);
    wait_until("the trace", || {
        s.out().exists() && lines(&s.out()).len() > 3
    });
    signal(rec.id(), libc::SIGTERM);
    let status = wait_exit(&mut rec);
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGKILL),
        "killed, and said so"
    );
    let pid = s.job_pids("pid")[0];
    assert!(!running(pid));
    let h = &lines(&s.out())[0];
    assert_eq!(
        (h["complete"].clone(), h["stopped_by"].clone()),
        (true.into(), "SIGTERM".into())
    );
}

#[test]
fn after_sigkill_the_output_replays_and_the_job_does_not_outlive_the_recorder() {
    let s = Setup::new();
    // `python3 -I` ignores PYTHONPATH: no allocator sampling inside, NVML alone sees the job.
    let mut rec = s.record(&["--grace", "2"], &["-I"], &["gpu=1", "term=ignore"]);
    wait_until("some seconds of trace", || {
        s.out().exists() && lines(&s.out()).len() > 10
    });
    signal(rec.id(), libc::SIGKILL);
    wait_exit(&mut rec);
    let pid = s.job_pids("pid")[0];
    wait_until("the job to be stopped", || !running(pid));
    let got = lines(&s.out());
    assert_eq!(
        got[0]["complete"], false,
        "cut short, and the header says so"
    );
    assert_eq!(got[0]["gpu_uuid"], UUIDS[1]);
    assert_eq!(got[0]["pid"].as_u64(), Some(pid as u64));
    assert!(got.iter().all(|l| l.get("torch").is_none()), "NVML only");
    let v = summary(&[s.out()]);
    assert!(v["end_t"].as_f64().unwrap() >= 1.0, "{v}");
    wait_until("the watchdog to clean up", || {
        !s.dir.path().join(".run.jsonl.parts").exists()
    });
}

#[test]
fn a_python_jobs_allocator_and_its_out_of_memory_error_land_in_the_trace_of_its_gpu() {
    let s = Setup::new();
    let mut rec = s.record(&[], &[], &["gpu=1", "torch=1", "oom_after=2", "run=20"]);
    let status = wait_exit(&mut rec);
    assert_eq!(
        status.code(),
        Some(1),
        "the job's uncaught OutOfMemoryError"
    );
    let files = traces(&s);
    // The worker also holds a little on GPU 0 (as a DDP worker's context does): the trace of
    // its own GPU is the one that must hold the allocator and the failure.
    let gpu1 = files
        .iter()
        .find(|f| lines(f)[0]["gpu_uuid"] == UUIDS[1])
        .expect("a trace of GPU 1");
    let got = lines(gpu1);
    let h = &got[0];
    assert_eq!(
        (h["truth"].as_str(), h["gpu_uuid"].as_str()),
        (Some("oom"), Some(UUIDS[1]))
    );
    assert_eq!(h["torch"], "0.0+standin");
    assert!(
        got.iter().any(|l| l.get("torch").is_some()),
        "allocator samples"
    );
    let times: Vec<f64> = got[1..].iter().map(|l| l["t"].as_f64().unwrap()).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "tidied into time order"
    );
    let v = summary(&files);
    assert_eq!(v["oom_t"], h["oom_t"]);
    assert_eq!(
        v["gpu_uuid"], UUIDS[1],
        "the verdict is about the GPU that failed"
    );
    assert_eq!(v["failure"]["request_bytes"].as_u64(), Some(8 << 30));
    assert_eq!(v["failure"]["gpu_uuid"], UUIDS[1]);
}
