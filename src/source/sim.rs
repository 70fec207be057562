//! The built-in simulator: a node of GPUs whose processes behave like the real traces
//! (training sawtooth, allocator leak, ramp to OOM, fragmentation churn, a shared GPU).
//! Deterministic for a seed: the state is a function of (seed, GPU, elapsed time).

use super::Source;
use crate::config::{Scenario, SimConfig};
use crate::model::{Component, DeviceStats, Event, EventKind, Identity, Report};
use crate::model::{
    DeviceMemory, GpuIdentity, GpuReading, MigInstance, Observation, ProcessReading, Time,
};

const MIB: f64 = 1048576.0;
const GIB: f64 = 1073741824.0;
/// CUDA context, cuBLAS and friends: NVML per process = reserved + about this (DESIGN.md).
const CONTEXT_OVERHEAD: f64 = 520.0 * MIB;
/// What the driver keeps for itself on an 80 GiB part.
const DRIVER_RESERVED: f64 = 480.0 * MIB;
/// How long a simulated process that hit OOM stays away before it restarts.
const RESTART_DELAY: f64 = 10.0;

/// The `oom` scenario's cycle on one GPU: seconds of growth to the crash, and from one start to
/// the next (the crash, then a restart after `RESTART_DELAY`).
fn oom_cycle(g: &crate::config::SimGpuConfig) -> (f64, f64) {
    let ramp = g.ramp_seconds.unwrap_or(150.0);
    (ramp, ramp + RESTART_DELAY)
}

#[derive(Debug, Clone, Copy)]
struct SimProc {
    pid: u32,
    floor: f64,
    swing: f64,
    cache: f64,
    frag: bool,
    /// Bytes per second the floor grows by.
    leak: f64,
    comm: &'static str,
}

/// A uuid in NVML's form (`GPU-…`, `MIG-…`) drawn from `h`.
fn uuid_from(prefix: &str, h: u64) -> String {
    format!(
        "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        (h >> 32) as u32,
        (h >> 16) as u16,
        h as u16,
        (mix(h) >> 48) as u16,
        mix(h ^ 7) & 0xffff_ffff_ffff
    )
}

/// One memory domain: a whole GPU, or one of its MIG instances.
struct Domain {
    gpu: usize,
    /// (position, GPU instance id, profile) of a MIG instance.
    slot: Option<(usize, u32, &'static str)>,
    scenario: Scenario,
    uuid: String,
    name: String,
    total: f64,
    reserved: f64,
    base_pid: u32,
    /// Processes of the `processes` and `churn` scenarios.
    workers: u32,
}

impl Domain {
    fn capacity(&self) -> f64 {
        self.total - self.reserved
    }
}

/// The `mig` scenario's instances: (GPU instance id, profile, eighths of the memory, what runs
/// there).
const MIG_LAYOUT: [(u32, &str, f64, Scenario); 4] = [
    (1, "3g.40gb", 4.0, Scenario::Steady),
    (2, "2g.20gb", 2.0, Scenario::Oom),
    (3, "1g.10gb", 1.0, Scenario::Processes),
    (4, "1g.10gb", 1.0, Scenario::Idle),
];

pub struct SimSource {
    cfg: SimConfig,
    t0: Option<Time>,
    /// Elapsed time of the previous sample: a process that ran out of memory since then
    /// reports it.
    last_e: Option<f64>,
    names: Vec<String>,
}

/// SplitMix64: a good, tiny hash for deterministic noise.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn unit(seed: u64, a: u64, b: u64) -> f64 {
    (mix(seed ^ mix(a ^ mix(b))) >> 11) as f64 / (1u64 << 53) as f64
}

impl SimSource {
    pub fn new(cfg: &SimConfig) -> Self {
        let names = cfg
            .gpus
            .iter()
            .map(|g| {
                if g.total_gib >= 120.0 {
                    "NVIDIA H200 (simulated)".to_string()
                } else {
                    "NVIDIA H100 80GB HBM3 (simulated)".to_string()
                }
            })
            .collect();
        SimSource {
            cfg: cfg.clone(),
            t0: None,
            last_e: None,
            names,
        }
    }

    fn uuid(&self, gpu: usize) -> String {
        uuid_from("GPU", mix(self.cfg.seed ^ mix(gpu as u64 + 1)))
    }

    /// A MIG instance's uuid: `MIG-` and a uuid of its own, as CUDA reports it inside it.
    fn mig_uuid(&self, gpu: usize, slot: usize) -> String {
        uuid_from(
            "MIG",
            mix(self.cfg.seed ^ mix(gpu as u64 + 1) ^ mix(1000 + slot as u64)),
        )
    }

    /// The memory domains of a simulated GPU: the GPU itself, or its MIG instances.
    fn domains(&self, gpu: usize) -> Vec<Domain> {
        let g = &self.cfg.gpus[gpu];
        let base_pid = 1000 + 100 * gpu as u32;
        if g.scenario != Scenario::Mig {
            return vec![Domain {
                gpu,
                slot: None,
                scenario: g.scenario,
                uuid: self.uuid(gpu),
                name: self.names[gpu].clone(),
                total: g.total_gib * GIB,
                reserved: DRIVER_RESERVED,
                base_pid,
                workers: g.processes.unwrap_or(8),
            }];
        }
        // Seven slices of an 80 GiB part, each instance its own memory: a steady trainer, one
        // that runs out of its instance (not of the GPU), small workers, and an idle one.
        let slice = (g.total_gib * GIB - DRIVER_RESERVED) / 8.0;
        MIG_LAYOUT
            .iter()
            .enumerate()
            .map(
                |(slot, &(gpu_instance, profile, slices, scenario))| Domain {
                    gpu,
                    slot: Some((slot, gpu_instance, profile)),
                    scenario,
                    uuid: self.mig_uuid(gpu, slot),
                    name: format!("{} MIG {profile}", self.names[gpu]),
                    total: slices * slice,
                    reserved: 0.0,
                    base_pid: base_pid + 20 * (slot as u32 + 1),
                    workers: 3,
                },
            )
            .collect()
    }

    /// The processes of one memory domain running `scenario` at elapsed time `e`, with their
    /// generation (restarts).
    fn procs(&self, d: &Domain, e: f64) -> Vec<SimProc> {
        let g = &self.cfg.gpus[d.gpu];
        let (base_pid, capacity) = (d.base_pid, d.capacity());
        let leak = g.leak_mib_per_min.unwrap_or(300.0) * MIB / 60.0;
        let trainer = |pid, floor: f64, swing: f64, leak| SimProc {
            pid,
            floor,
            swing,
            cache: 1.0 * GIB,
            frag: false,
            leak,
            comm: "python3",
        };
        match d.scenario {
            Scenario::Idle | Scenario::Mig => vec![],
            Scenario::Steady => vec![trainer(base_pid, 6.0 * GIB, 4.0 * GIB, 0.0)],
            Scenario::Leak => vec![trainer(base_pid, 4.0 * GIB, 3.0 * GIB, leak)],
            Scenario::Shared => vec![
                trainer(base_pid, 20.0 * GIB, 4.0 * GIB, 0.0),
                trainer(base_pid + 1, 10.0 * GIB, 3.0 * GIB, leak),
            ],
            Scenario::Frag => vec![SimProc {
                frag: true,
                ..trainer(base_pid, 3.0 * GIB, 2.0 * GIB, 0.0)
            }],
            Scenario::Processes => (0..d.workers)
                .map(|i| SimProc {
                    comm: "worker",
                    ..trainer(base_pid * 10 + i, 256.0 * MIB, 128.0 * MIB, 0.0)
                })
                .collect(),
            Scenario::Churn => {
                let n = d.workers;
                (0..n)
                    .map(|i| {
                        // Staggered lifetimes, so some process ends every 20/n s.
                        let generation = ((e + 20.0 * i as f64 / n as f64) / 20.0).floor() as u32;
                        SimProc {
                            comm: "worker",
                            ..trainer(
                                base_pid * 10_000 + generation * n + i,
                                256.0 * MIB,
                                128.0 * MIB,
                                0.0,
                            )
                        }
                    })
                    .collect()
            }
            Scenario::Oom => {
                let (ramp, period) = oom_cycle(g);
                let generation = (e / period).floor() as u32;
                let local = e - generation as f64 * period;
                if local >= ramp {
                    return vec![];
                }
                let floor0 = 2.0 * GIB;
                let swing = 3.0 * GIB;
                // The peak (floor + swing + context) reaches capacity exactly at `ramp`.
                let rate = (capacity - CONTEXT_OVERHEAD - floor0 - swing) / ramp;
                vec![SimProc {
                    cache: 0.5 * GIB,
                    ..trainer(base_pid + generation, floor0, swing, rate)
                }]
            }
        }
    }

    /// One domain's reading, and the reports of its processes, at elapsed time `e`.
    fn sample_domain(&self, d: &Domain, e: f64, tick: u64, obs: &mut Observation) {
        let gi = d.gpu;
        let (total, capacity) = (d.total, d.capacity());
        let le = self.local_elapsed(d, e);
        // Draws and ranks per process: the whole GPU's as they always were, MIG instances'
        // after them.
        let stream = |pi: usize| match d.slot {
            None => gi * 16 + pi,
            Some((slot, _, _)) => 10_000 + gi * 128 + slot * 16 + pi,
        };
        let mut readings = Vec::new();
        let mut used = 0.0;
        for (pi, p) in self.procs(d, e).into_iter().enumerate() {
            let u = unit(self.cfg.seed, stream(pi) as u64, tick);
            let floor = p.floor + p.leak * le;
            let allocated = floor + p.swing * u;
            // A caching allocator keeps the high-water mark of what it needed plus a cache.
            let mut reserved = floor + p.swing + p.cache;
            let mut split = 0.05 * (reserved - allocated);
            let mut largest = 0.8 * (reserved - allocated);
            if p.frag {
                // Reserved creeps up between `empty_cache` calls every 60 s and the free
                // cache is mostly slivers.
                let since_empty = le % 60.0;
                reserved = floor + p.swing + 0.5 * GIB + since_empty / 60.0 * 8.0 * GIB;
                split = 0.6 * (reserved - allocated);
                largest = 0.25 * (reserved - allocated);
            }
            let reserved = reserved
                .min(capacity - used - CONTEXT_OVERHEAD)
                .max(allocated);
            let nvml = reserved + CONTEXT_OVERHEAD;
            used += nvml;
            readings.push(ProcessReading {
                pid: p.pid,
                used_bytes: nvml as u64,
                comm: Some(p.comm.to_string()),
            });
            let near_limit = used > 0.97 * capacity;
            let phase = ["forward", "backward", "optimizer"][(tick % 3) as usize];
            let mut events = vec![Event::named(EventKind::Phase, phase)];
            if p.frag && (le % 60.0) < 1.0 {
                events.push(Event::named(EventKind::Mark, "empty_cache"));
            }
            let retries = if near_limit { (le as u64) / 5 } else { 0 };
            obs.reports.push((
                p.pid,
                Report {
                    version: 1,
                    identity: Identity {
                        job: Some("sim-train".into()),
                        rank: Some(stream(pi) as u64),
                        local_rank: Some(stream(pi) as u64),
                        world_size: None,
                    },
                    devices: vec![DeviceStats {
                        uuid: d.uuid.clone(),
                        allocator: Some("pytorch".into()),
                        allocated_bytes: allocated as u64,
                        reserved_bytes: reserved as u64,
                        active_bytes: Some(allocated as u64),
                        inactive_split_bytes: Some(split.max(0.0) as u64),
                        segments: Some((reserved / (20.0 * MIB)) as u64),
                        alloc_retries: Some(retries),
                        ooms: Some(0),
                        allocated_peak_bytes: Some((floor + p.swing) as u64),
                        reserved_peak_bytes: Some(reserved as u64),
                        largest_free_block_bytes: Some(largest.max(0.0) as u64),
                    }],
                    phase: Some(Some(phase.to_string())),
                    events,
                    components: Some(vec![
                        Component {
                            component: "attention".into(),
                            parameters_bytes: Some((0.3 * p.floor) as u64),
                            gradients_bytes: Some((0.3 * p.floor) as u64),
                            optimizer_bytes: Some((0.6 * p.floor) as u64),
                        },
                        Component {
                            component: "mlp".into(),
                            parameters_bytes: Some((0.1 * p.floor) as u64),
                            gradients_bytes: Some((0.1 * p.floor) as u64),
                            optimizer_bytes: Some((0.2 * p.floor) as u64),
                        },
                    ]),
                },
            ));
        }
        let used = used.min(capacity);
        obs.gpus.push(GpuReading {
            id: GpuIdentity {
                index: gi as u32,
                uuid: d.uuid.clone(),
                name: d.name.clone(),
                pci_bus_id: format!("00000000:{:02X}:00.0", 0x18 + gi * 0x10),
                mig: d.slot.map(|(_, gpu_instance, profile)| MigInstance {
                    gpu_instance,
                    profile: profile.to_string(),
                }),
            },
            memory: Some(DeviceMemory {
                total: total as u64,
                reserved: d.reserved as u64,
                used: used as u64,
                free: (capacity - used) as u64,
            }),
            processes: readings,
            errors: vec![],
        });
    }

    /// The `oom` scenario's process ran out of memory between the samples at `from` and `e`:
    /// its client's OOM event, as PyTorch's out-of-memory observer has it sent (the failing
    /// request is a quarter of its step's swing; a quarter of that was left).
    fn oom_since(&self, d: &Domain, from: Option<f64>, e: f64) -> Option<(u32, Report)> {
        if d.scenario != Scenario::Oom {
            return None;
        }
        let from = from?;
        let (ramp, period) = oom_cycle(&self.cfg.gpus[d.gpu]);
        let generation = ((e - ramp) / period).floor();
        let end = generation * period + ramp;
        if generation < 0.0 || end <= from || end > e {
            return None;
        }
        let request = 0.75 * GIB;
        let event = Event {
            message: Some("CUDA out of memory (simulated)".into()),
            request_bytes: Some(request as u64),
            free_bytes: Some((request / 4.0) as u64),
            ..Event::named(EventKind::Oom, d.uuid.clone())
        };
        let report = Report {
            version: 1,
            events: vec![event],
            ..Default::default()
        };
        Some((d.base_pid + generation as u32, report))
    }

    fn local_elapsed(&self, d: &Domain, e: f64) -> f64 {
        let g = &self.cfg.gpus[d.gpu];
        if d.scenario == Scenario::Oom {
            let (_, period) = oom_cycle(g);
            e - (e / period).floor() * period
        } else {
            e
        }
    }
}

impl Source for SimSource {
    fn kind(&self) -> &'static str {
        "sim"
    }

    fn gpu_indices(&self) -> Vec<u32> {
        (0..self.cfg.gpus.len() as u32).collect()
    }

    fn sample(&mut self, t: Time) -> Observation {
        let t0 = *self.t0.get_or_insert(t);
        let e = (t - t0).max(0.0);
        let tick = (e * 10.0).floor() as u64;
        let mut obs = Observation {
            t,
            ..Default::default()
        };
        for gi in 0..self.cfg.gpus.len() {
            for d in self.domains(gi) {
                self.sample_domain(&d, e, tick, &mut obs);
                if let Some(oom) = self.oom_since(&d, self.last_e, e) {
                    obs.reports.push(oom);
                }
            }
        }
        self.last_e = Some(e);
        obs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{SimConfig, SimGpuConfig};

    fn sim(s: Scenario) -> SimSource {
        SimSource::new(&SimConfig {
            seed: 7,
            gpus: vec![SimGpuConfig::new(s)],
        })
    }

    #[test]
    fn deterministic_for_a_seed() {
        let a: Vec<_> = (0..50)
            .map(|i| sim(Scenario::Leak).sample(100.0 + i as f64))
            .collect();
        let mut s = sim(Scenario::Leak);
        let b: Vec<_> = (0..50).map(|i| s.sample(100.0 + i as f64)).collect();
        // Same elapsed time, same state: a fresh source starts its clock at its first sample.
        assert_eq!(a[0].gpus, b[0].gpus);
        assert_eq!(b[10].gpus, sim(Scenario::Leak).sample_at_elapsed(10.0).gpus);
    }

    #[test]
    fn churn_replaces_processes_with_new_pids() {
        let mut s = SimSource::new(&SimConfig {
            seed: 3,
            gpus: vec![SimGpuConfig {
                processes: Some(4),
                ..SimGpuConfig::new(Scenario::Churn)
            }],
        });
        let pids =
            |o: &Observation| -> Vec<u32> { o.gpus[0].processes.iter().map(|p| p.pid).collect() };
        let a = pids(&s.sample(0.0));
        let b = pids(&s.sample(6.0));
        let c = pids(&s.sample(41.0));
        assert_eq!(a.len(), 4);
        assert_eq!(
            a.iter().filter(|p| b.contains(p)).count(),
            3,
            "one of four replaced after 6 s"
        );
        assert!(a.iter().all(|p| !c.contains(p)), "all replaced after 40 s");
    }

    #[test]
    fn memory_adds_up() {
        let mut s = sim(Scenario::Shared);
        for i in 0..100 {
            let o = s.sample(i as f64);
            let m = o.gpus[0].memory.unwrap();
            assert_eq!(m.total, m.reserved + m.used + m.free);
            assert_eq!(o.gpus[0].processes.len(), 2);
            for (_, r) in &o.reports {
                let d = &r.devices[0];
                assert!(d.allocated_bytes <= d.reserved_bytes);
            }
        }
    }

    #[test]
    fn oom_scenario_fails_and_restarts_with_a_new_pid() {
        let mut s = SimSource::new(&SimConfig {
            seed: 1,
            gpus: vec![SimGpuConfig {
                ramp_seconds: Some(30.0),
                ..SimGpuConfig::new(Scenario::Oom)
            }],
        });
        let first = s.sample(0.0).gpus[0].processes[0].pid;
        let near_end = s.sample(29.0).gpus[0].memory.unwrap();
        assert!(near_end.free < (4.0 * GIB) as u64, "free {}", near_end.free);
        let crashed = s.sample(35.0);
        assert!(crashed.gpus[0].processes.is_empty());
        // Its client reported the error, once.
        let ooms: Vec<&(u32, Report)> = crashed
            .reports
            .iter()
            .filter(|(_, r)| r.events.iter().any(|e| e.kind == EventKind::Oom))
            .collect();
        assert_eq!(ooms.len(), 1);
        assert_eq!(ooms[0].0, first);
        let event = &ooms[0].1.events[0];
        assert_eq!(event.name, crashed.gpus[0].id.uuid);
        assert!(event.request_bytes > event.free_bytes);
        let later = s.sample(41.0);
        assert!(later
            .reports
            .iter()
            .all(|(_, r)| r.events.iter().all(|e| e.kind != EventKind::Oom)));
        let again = later.gpus[0].processes[0].pid;
        assert_ne!(first, again);
    }

    impl SimSource {
        fn sample_at_elapsed(&mut self, e: f64) -> Observation {
            self.t0 = Some(0.0);
            self.sample(e)
        }
    }
}
