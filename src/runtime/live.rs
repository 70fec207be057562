//! The live runtime: the sampler thread feeding the engine, and the state the sampler, the
//! ingest endpoints and the web servers share.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::telemetry::Counters;
use crate::config::{Config, SourceSpec};
use crate::engine::Engine;
use crate::k8s::pods::KubeResolver;
use crate::model::{Observation, Time};
use crate::pace::{unpoisoned, Pace, Stop};
use crate::source::Source;

pub fn unix_now() -> Time {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The source's clock: Unix time for live sources; for replay, trace time running at
/// `replay.speed` from the trace's start.
pub fn source_clock(cfg: &Config) -> Arc<dyn Fn() -> Time + Send + Sync> {
    match cfg.source {
        SourceSpec::Replay(_) => {
            let started = Instant::now();
            let speed = cfg.replay.speed;
            Arc::new(move || started.elapsed().as_secs_f64() * speed)
        }
        _ => Arc::new(unix_now),
    }
}

/// Everything the sampler and the servers share.
#[derive(Clone)]
pub struct Shared {
    pub engine: Arc<Mutex<Engine>>,
    pub counters: Arc<Counters>,
    pub ready: Arc<AtomicBool>,
    pub stop: Arc<Stop>,
}

impl Shared {
    pub fn new(cfg: &Config, source_kind: &str) -> Self {
        Shared {
            engine: Arc::new(Mutex::new(Engine::new(cfg, source_kind))),
            counters: Arc::new(Counters::default()),
            ready: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(Stop::default()),
        }
    }

    /// Take one sample and record it.
    pub fn step(&self, source: &mut dyn Source, t: Time) {
        self.record(source.sample(t));
    }

    /// Fold a sample into the engine.
    pub fn record(&self, obs: Observation) {
        super::fold(&self.counters, &obs, |o| {
            let mut engine = unpoisoned(self.engine.lock());
            super::observe(&mut engine, o)
        });
        self.ready.store(true, Ordering::Release);
    }

    /// Name the pods of processes the engine has no pod for: the cgroup reads happen here,
    /// with the engine's lock released, so that no scrape or report waits on `/proc`.
    pub fn attribute_pods(&self, pods: &mut KubeResolver) {
        let wanted = unpoisoned(self.engine.lock()).pods_wanted();
        let found: Vec<_> = wanted
            .into_iter()
            .filter_map(|pid| pods.resolve(pid).map(|p| (pid, p)))
            .collect();
        if !found.is_empty() {
            unpoisoned(self.engine.lock()).attribute_pods(&found);
        }
    }
}

/// The sampling loop on its own OS thread: NVML calls block, so they stay off the runtime.
/// With `pods`, each sample is followed by naming the pods of new processes.
pub fn spawn_sampler(
    shared: Shared,
    source: Box<dyn Source>,
    interval: Duration,
    clock: Arc<dyn Fn() -> Time + Send + Sync>,
    mut pods: Option<KubeResolver>,
) -> std::thread::JoinHandle<()> {
    let stop = Arc::clone(&shared.stop);
    let pace = Pace {
        interval,
        clock,
        deliver: Box::new(move |obs| {
            shared.record(obs);
            if let Some(pods) = pods.as_mut() {
                shared.attribute_pods(pods);
            }
        }),
        stop,
    };
    std::thread::Builder::new()
        .name("sampler".into())
        .spawn(move || source.run(pace))
        .expect("spawn the sampler thread")
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::RwLock;

    use super::*;
    use crate::engine::current;
    use crate::k8s::pods::PodInfo;
    use crate::model::{DeviceMemory, GpuIdentity, GpuReading, ProcessReading};

    #[test]
    fn the_sampler_names_the_pods_of_new_processes() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("4242")).unwrap();
        std::fs::write(
            root.path().join("4242/cgroup"),
            "0::/kubepods.slice/kubepods-pod6f1e2b3c_4d5e_6f70_8192_a3b4c5d6e7f8.slice/cri-containerd-8b2f0c9e2a5d4c7e9f1a3b5c7d9e1f2a3b4c5d6e7f8091a2b3c4d5e6f7a8b9c0.scope\n",
        )
        .unwrap();
        let pod = PodInfo {
            namespace: "ml".into(),
            name: "trainer-0".into(),
            containers: vec![(
                "8b2f0c9e2a5d4c7e9f1a3b5c7d9e1f2a3b4c5d6e7f8091a2b3c4d5e6f7a8b9c0".into(),
                "pytorch".into(),
            )],
        };
        let index = HashMap::from([("6f1e2b3c-4d5e-6f70-8192-a3b4c5d6e7f8".to_string(), pod)]);
        let mut pods = KubeResolver::new(
            Arc::new(RwLock::new(index)),
            root.path().into(),
            Duration::from_secs(60),
        );
        let shared = Shared::new(&Config::default(), "test");
        let listed = |pid| Observation {
            t: 1.0,
            gpus: vec![GpuReading {
                id: GpuIdentity {
                    uuid: "GPU-0".into(),
                    ..Default::default()
                },
                memory: Some(DeviceMemory {
                    total: 80 << 30,
                    reserved: 0,
                    used: 10 << 30,
                    free: 70 << 30,
                }),
                processes: vec![ProcessReading {
                    pid,
                    used_bytes: 8 << 30,
                    comm: None,
                }],
                errors: vec![],
            }],
            ..Default::default()
        };
        shared.record(listed(4242));
        assert_eq!(current(&shared.engine).processes[0].pod, None);
        shared.attribute_pods(&mut pods);
        let snap = current(&shared.engine);
        let labels = snap.processes[0].pod.as_ref().expect("pod named");
        assert_eq!(
            (
                labels.namespace.as_str(),
                labels.pod.as_str(),
                labels.container.as_str()
            ),
            ("ml", "trainer-0", "pytorch")
        );
    }
}
