use super::*;
use crate::analysis::oom::RiskReason;
use crate::model::{GpuReading, ProcessReading};

pub(super) fn obs(t: Time, pids: &[u32]) -> Observation {
    Observation {
        t,
        gpus: vec![GpuReading {
            id: GpuIdentity {
                index: 0,
                uuid: "GPU-0".into(),
                name: "test".into(),
                pci_bus_id: String::new(),
                mig: None,
            },
            memory: Some(DeviceMemory {
                total: 100 << 30,
                reserved: 0,
                used: 10 << 30,
                free: 90 << 30,
            }),
            processes: pids
                .iter()
                .map(|&pid| ProcessReading {
                    pid,
                    used_bytes: 5 << 30,
                    comm: Some("python3".into()),
                })
                .collect(),
            errors: vec![],
        }],
        reports: pids
            .iter()
            .map(|&pid| {
                (
                    pid,
                    Report {
                        version: 1,
                        devices: vec![DeviceStats {
                            uuid: "GPU-0".into(),
                            allocated_bytes: 1 << 30,
                            reserved_bytes: 4 << 30,
                            ..Default::default()
                        }],
                        ..Default::default()
                    },
                )
            })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn every_sample_is_analysed_however_its_tick_jitters() {
    let mut e = Engine::new(&Config::default(), "test");
    // 1 s ticks as a live sampler delivers them, early or late by up to 0.3 ms (the most the
    // live exporters' logs showed on a four-H100 host).
    for (i, jitter) in [0.0, -2e-5, 3e-4, -3e-4, -3e-5, 2e-5].iter().enumerate() {
        let t = 100.0 + i as f64 + jitter;
        e.observe(&obs(t, &[7]));
        assert_eq!(e.last_analysis, Some(t), "tick {i}");
    }
    // Samples faster than the history's buckets are analysed once a bucket.
    let cfg = Config {
        sample_interval: std::time::Duration::from_millis(250),
        ..Default::default()
    };
    let mut e = Engine::new(&cfg, "test");
    let analysed = (0..40)
        .filter(|&k| {
            let t = 10.0 + 0.25 * k as f64;
            e.observe(&obs(t, &[7]));
            e.last_analysis == Some(t)
        })
        .count();
    assert_eq!(analysed, 10);
}

#[test]
fn an_exited_process_loses_its_series_at_once() {
    let mut e = Engine::new(&Config::default(), "test");
    for i in 0..10 {
        e.observe(&obs(i as f64, &[7, 8]));
    }
    assert_eq!(e.snapshot().processes.len(), 2);
    // pid 8 exits: NVML stops listing it and it sends nothing more.
    e.observe(&obs(10.0, &[7]));
    let pids: Vec<u32> = e.snapshot().processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, vec![7]);
}

#[test]
fn the_current_snapshot_is_built_once_per_change() {
    let mut e = Engine::new(&Config::default(), "test");
    e.observe(&obs(1.0, &[7]));
    let first = e.current();
    assert!(
        Arc::ptr_eq(&first, &e.current()),
        "nothing new: the same one"
    );
    e.observe(&obs(2.0, &[7, 8]));
    let second = e.current();
    assert_eq!((second.t, second.processes.len()), (2.0, 2));
    // A report alone (no sample) shows at once.
    let mut r = obs(2.0, &[9]).reports.remove(0).1;
    r.devices[0].allocated_bytes = 3 << 30;
    e.report(9, 2.5, &r).unwrap();
    let third = e.current();
    assert!(!Arc::ptr_eq(&second, &third));
    let p9 = third.processes.iter().find(|p| p.pid == 9).expect("pid 9");
    assert_eq!(p9.allocator.as_ref().unwrap().allocated_bytes, 3 << 30);
}

#[test]
fn a_reporting_process_nvml_does_not_list_keeps_only_its_own_numbers() {
    let mut e = Engine::new(&Config::default(), "test");
    let mut o = obs(0.0, &[7]);
    o.gpus[0].processes.clear();
    e.observe(&o);
    let snap = e.snapshot();
    assert_eq!(snap.processes.len(), 1);
    let p = &snap.processes[0];
    assert!(p.allocator.is_some());
    assert!(p.nvml_used.is_none());
    assert!(!p.verified);
    assert_eq!((p.fragmentation, p.leak_slope), (None, None));
    assert_eq!(snap.gpus[0].fragmentation, None, "nothing at GPU level");
}

#[test]
fn without_the_listing_check_a_reporting_process_counts_in_full() {
    let mut cfg = Config::default();
    cfg.ingest.require_nvml_listing = false;
    let mut e = Engine::new(&cfg, "test");
    let mut o = obs(0.0, &[7]);
    o.gpus[0].processes.clear();
    o.reports[0].1.devices[0].inactive_split_bytes = Some(1 << 30);
    e.observe(&o);
    let snap = e.snapshot();
    assert!(snap.processes[0].verified);
    assert!(snap.gpus[0].fragmentation.is_some());
}

/// An OOM event and retry counters for GPU-0 from `pid`, the way a real OOM observer and
/// client would send them.
pub(super) fn oom_report(pid_retries: u64) -> Report {
    Report {
        version: 1,
        devices: vec![DeviceStats {
            uuid: "GPU-0".into(),
            allocated_bytes: 1 << 30,
            reserved_bytes: 2 << 30,
            alloc_retries: Some(pid_retries),
            ooms: Some(pid_retries),
            ..Default::default()
        }],
        events: vec![crate::model::Event::named(EventKind::Oom, "GPU-0")],
        ..Default::default()
    }
}

#[test]
fn a_process_stays_trusted_for_the_grace_period_after_its_last_listing() {
    let mut e = Engine::new(&Config::default(), "test");
    e.observe(&obs(0.0, &[7]));
    // NVML misses it for a few samples (it still reports).
    let mut o = obs(5.0, &[7]);
    o.gpus[0].processes.clear();
    e.observe(&o);
    assert!(e
        .report(7, 5.5, &oom_report(0))
        .unwrap()
        .unlisted
        .is_empty());
    let mut o = obs(30.0, &[7]);
    o.gpus[0].processes.clear();
    e.observe(&o);
    let a = e.report(7, 30.5, &oom_report(1)).unwrap();
    assert_eq!(a.unlisted, vec!["GPU-0".to_string()], "grace is over");
}

#[test]
fn a_report_naming_a_gpu_the_host_lacks_is_refused_whole() {
    let mut e = Engine::new(&Config::default(), "test");
    e.observe(&obs(0.0, &[7]));
    let mut r = oom_report(0);
    r.devices[0].uuid = "GPU-elsewhere".into();
    let err = e.report(7, 1.0, &r).unwrap_err();
    assert_eq!(err.reason, RejectReason::UnknownGpu);
    assert!(
        err.message.contains("devices[0].uuid") && err.message.contains("GPU-0"),
        "{err}"
    );
    // An OOM event alone names its GPU too.
    let mut r = oom_report(0);
    r.devices.clear();
    r.events[0].name = "GPU-elsewhere".into();
    let err = e.report(7, 1.0, &r).unwrap_err();
    assert!(err.message.starts_with("events[0].name"), "{err}");
    assert_eq!(e.tracked_processes(), 1, "nothing was added");
    let before = e.current();
    assert!(Arc::ptr_eq(&before, &e.current()), "nothing changed");
}

#[test]
fn listed_processes_always_find_room_in_a_table_full_of_report_only_entries() {
    let mut cfg = Config::default();
    cfg.history.max_processes = 8;
    let mut e = Engine::new(&cfg, "test");
    e.observe(&obs(0.0, &[1]));
    let mut refused = 0;
    for pid in 100..120 {
        if let Err(r) = e.report(pid, 0.5, &oom_report(0)) {
            assert_eq!(r.reason, RejectReason::TooManyProcesses);
            refused += 1;
        }
    }
    assert_eq!(refused, 13, "7 report-only entries fit beside pid 1");
    let listed: Vec<u32> = (1..=6).collect();
    e.observe(&obs(1.0, &listed));
    let snap = e.snapshot();
    for pid in &listed {
        let p = snap.processes.iter().find(|p| p.pid == *pid);
        assert!(p.is_some_and(|p| p.verified), "pid {pid} is listed");
    }
    assert_eq!(e.tracked_processes(), 8);
}

#[test]
fn the_process_at_risk_is_the_one_that_grows_not_the_largest() {
    let gib = (1u64 << 30) as f64;
    let mut e = Engine::new(&Config::default(), "test");
    for t in 0..200u32 {
        let t = t as f64;
        // pid 7 leaks 0.2 GiB/s under a 2 GiB sawtooth; pid 8 holds 50 GiB and stays flat.
        let floor = 5.0 * gib + 0.2 * gib * t;
        let allocated = floor + if t as u64 % 2 == 0 { 2.0 * gib } else { 0.0 };
        let reserved = floor + 2.5 * gib;
        let mut o = obs(t, &[7, 8]);
        let g = &mut o.gpus[0];
        let m = g.memory.as_mut().unwrap();
        m.used = (reserved + 0.5 * gib + 50.0 * gib) as u64;
        m.free = m.total - m.used;
        g.processes[0].used_bytes = (reserved + 0.5 * gib) as u64;
        g.processes[1].used_bytes = (50.0 * gib) as u64;
        o.reports.truncate(1);
        let d = &mut o.reports[0].1.devices[0];
        d.allocated_bytes = allocated as u64;
        d.reserved_bytes = reserved as u64;
        d.allocated_peak_bytes = Some((floor + 2.0 * gib) as u64);
        e.observe(&o);
    }
    let snap = e.snapshot();
    assert!(
        snap.gpus[0].risk >= RiskLevel::High,
        "{:?}",
        snap.gpus[0].risk
    );
    let risk = |pid| snap.processes.iter().find(|p| p.pid == pid).unwrap().risk;
    assert!(risk(7) >= RiskLevel::High, "the grower: {:?}", risk(7));
    assert_eq!(risk(8), RiskLevel::Low, "the large flat neighbour");
    let eta = |pid| {
        snap.processes
            .iter()
            .find(|p| p.pid == pid)
            .unwrap()
            .eta_seconds
    };
    assert!(eta(7).is_some() && eta(8).is_none());
}

/// Training at 60 GiB, and every 40 s an evaluation that takes the process to 97 GiB of a
/// 100 GiB GPU with allocator retries, then `empty_cache`: the same peak every time.
fn tight_eval(t: f64, grow: f64) -> Observation {
    let gib = (1u64 << 30) as f64;
    let base = 60.0 * gib + grow * t;
    let eval = (t as u64 % 40) >= 32;
    let allocated = base
        + if eval {
            34.0 * gib
        } else {
            2.0 * gib * (t as u64 % 2) as f64
        };
    let reserved = if eval {
        base + 36.0 * gib
    } else {
        base + 3.0 * gib
    };
    let mut o = obs(t, &[7]);
    let g = &mut o.gpus[0];
    let m = g.memory.as_mut().unwrap();
    m.used = (reserved + 0.5 * gib) as u64;
    m.free = m.total - m.used;
    g.processes[0].used_bytes = m.used;
    let d = &mut o.reports[0].1.devices[0];
    d.allocated_bytes = allocated as u64;
    d.reserved_bytes = reserved as u64;
    d.allocated_peak_bytes = Some((base + 34.0 * gib) as u64);
    // Two retries at the start of every evaluation.
    d.alloc_retries = Some(2 * (t as u64 / 40 + u64::from((t as u64 % 40) >= 32)));
    o
}

#[test]
fn a_tight_but_steady_job_is_a_ticket_not_a_page() {
    let mut e = Engine::new(&Config::default(), "test");
    let mut tight_seen = false;
    for t in 0..400u32 {
        e.observe(&tight_eval(t as f64, 0.0));
        let snap = e.snapshot();
        let g = &snap.gpus[0];
        assert!(
            g.risk < RiskLevel::High,
            "t={t}: {:?} {:?}",
            g.risk,
            g.risk_reason
        );
        assert!(g.eta_seconds.is_none(), "t={t}: ETA {:?}", g.eta_seconds);
        tight_seen |= g.headroom_tight;
    }
    assert!(tight_seen, "retries near the limit are tight headroom");
}

#[test]
fn the_same_job_with_a_growing_floor_pages() {
    // The job above with 30 MiB/s of growth under it: its peaks no longer come back to
    // the same height.
    let mut e = Engine::new(&Config::default(), "test");
    let mut worst = RiskLevel::Low;
    for t in 0..100u32 {
        e.observe(&tight_eval(t as f64, 30.0 * 1048576.0));
        worst = worst.max(e.snapshot().gpus[0].risk);
    }
    assert!(worst >= RiskLevel::High, "{worst:?}");
}

#[test]
fn balanced_ranks_at_different_phases_of_their_step_are_balanced() {
    let mut e = Engine::new(&Config::default(), "test");
    let gib = (1u64 << 30) as f64;
    let pids: Vec<u32> = (100..108).collect();
    for t in 0..30 {
        let mut o = obs(t as f64, &pids);
        o.reports.clear();
        e.observe(&o);
        for rank in 0..8u32 {
            // A 0.37 s step: allocated swings 2 -> 6 GiB, each rank at its own phase.
            let phase = (t as f64 / 0.37 + rank as f64 * 0.13).fract();
            let r = Report {
                version: 1,
                identity: Identity {
                    job: Some("llm".into()),
                    rank: Some(rank as u64),
                    ..Default::default()
                },
                devices: vec![DeviceStats {
                    uuid: "GPU-0".into(),
                    allocated_bytes: ((2.0 + 4.0 * phase) * gib) as u64,
                    reserved_bytes: (7.0 * gib) as u64,
                    allocated_peak_bytes: Some((6.0 * gib) as u64),
                    ..Default::default()
                }],
                ..Default::default()
            };
            e.report(100 + rank, t as f64, &r).unwrap();
        }
    }
    let snap = e.snapshot();
    let (_, ratio) = snap.job_imbalance[0];
    assert!(ratio < 1.1, "balanced ranks read {ratio}");
}

#[test]
fn allocator_retries_without_growth_are_medium_and_tight_for_a_minute() {
    let mut e = Engine::new(&Config::default(), "test");
    let with_retries = |t: Time, retries: u64| {
        let mut o = obs(t, &[7]);
        o.reports[0].1.devices[0].alloc_retries = Some(retries);
        o
    };
    for i in 0..100 {
        // Two retries at t = 30, none before or after.
        e.observe(&with_retries(i as f64, if i < 30 { 4 } else { 6 }));
        let gpu = &e.snapshot().gpus[0];
        // Nothing grows: medium (tight headroom, a ticket) for the minute the retries count,
        // and not a second longer.
        let expect = if (30..90).contains(&i) {
            (RiskLevel::Medium, RiskReason::AllocRetries)
        } else {
            (RiskLevel::Low, RiskReason::None)
        };
        assert_eq!((gpu.risk, gpu.risk_reason), expect, "at t = {i}");
        assert_eq!(
            gpu.headroom_tight,
            (30..90).contains(&i),
            "tight at t = {i}"
        );
    }
}

#[test]
fn memory_no_listed_process_accounts_for_is_unattributed() {
    let mut e = Engine::new(&Config::default(), "test");
    // 10 GiB used, one listed process holding 5 GiB.
    e.observe(&obs(0.0, &[7]));
    assert_eq!(e.snapshot().gpus[0].unattributed, Some(5 << 30));
    e.observe(&obs(1.0, &[7, 8]));
    assert_eq!(e.snapshot().gpus[0].unattributed, Some(0));
    // Without a process list, nothing can be said.
    let mut o = obs(2.0, &[]);
    o.gpus[0].errors.push(crate::model::ErrorKind::NotSupported);
    e.observe(&o);
    assert_eq!(e.snapshot().gpus[0].unattributed, None);
}

#[test]
fn pods_are_asked_for_once_known_and_shown_in_the_next_snapshot() {
    let mut e = Engine::new(&Config::default(), "test");
    e.observe(&obs(0.0, &[7, 8]));
    assert_eq!(e.pods_wanted(), vec![7, 8]);
    let before = e.current();
    let pod = PodLabels {
        namespace: "ml".into(),
        pod: "trainer-0".into(),
        container: "pytorch".into(),
    };
    e.attribute_pods(&[(8, pod.clone())]);
    assert_eq!(e.pods_wanted(), vec![7]);
    let after = e.current();
    assert!(!Arc::ptr_eq(&before, &after), "a pod found is a change");
    let shown: Vec<_> = after
        .processes
        .iter()
        .map(|p| (p.pid, p.pod.clone()))
        .collect();
    assert_eq!(shown, vec![(7, None), (8, Some(pod))]);
}

/// GPU 0 with processes NVML lists and no client: `(pid, bytes)`, and the free bytes.
pub(super) fn listed_only(t: Time, procs: &[(u32, u64)], free: u64) -> Observation {
    let mut o = obs(t, &[]);
    let g = &mut o.gpus[0];
    g.processes = procs
        .iter()
        .map(|&(pid, used_bytes)| ProcessReading {
            pid,
            used_bytes,
            comm: Some("worker".into()),
        })
        .collect();
    let total = g.memory.unwrap().total;
    g.memory = Some(DeviceMemory {
        total,
        reserved: 0,
        used: total - free,
        free,
    });
    o
}

#[test]
fn a_crash_ends_its_page_at_once_and_is_scored_as_paged() {
    use crate::analysis::incident::{EpisodeOutcome, OomKind, Outcome};
    use crate::config::{Scenario, SimGpuConfig};
    use crate::source::{sim::SimSource, Source};
    let mut cfg = Config::default();
    cfg.sim.gpus = vec![SimGpuConfig {
        ramp_seconds: Some(120.0),
        ..SimGpuConfig::new(Scenario::Oom)
    }];
    let mut src = SimSource::new(&cfg.sim);
    let mut e = Engine::new(&cfg, "sim");
    let mut seen = Vec::new();
    for i in 0..=140 {
        let t = i as f64;
        e.observe(&src.sample(t));
        let snap = e.snapshot();
        let g = &snap.gpus[0];
        seen.push((t, g.risk, g.driver.as_ref().and_then(|d| d.pid)));
    }
    let crash = 120.0;
    let pid = 1000;
    let before: Vec<_> = seen.iter().filter(|s| s.0 < crash).collect();
    let critical_from = before
        .iter()
        .rev()
        .take_while(|s| s.1 == RiskLevel::Critical)
        .last()
        .expect("the ramp pages before its crash")
        .0;
    assert!(
        critical_from < crash - 20.0,
        "critical from {critical_from}"
    );
    assert!(before
        .iter()
        .filter(|s| s.1 >= RiskLevel::High)
        .all(|s| s.2 == Some(pid)));
    // The first sample after the crash: the process is gone, and with it the page.
    let after = seen.iter().find(|s| s.0 >= crash).unwrap();
    assert!(after.1 < RiskLevel::High, "{after:?}");
    assert_eq!(after.2, None, "no driver below high");
    let snap = e.snapshot();
    let g = &snap.gpus[0];
    assert_eq!(g.oom_events.len(), 1);
    let ev = &g.oom_events[0];
    assert_eq!(
        (ev.kind, ev.pid, ev.outcome),
        (OomKind::Reported, pid, Outcome::Paged)
    );
    assert!(
        (ev.lead.unwrap() - (crash - critical_from)).abs() <= 1.0,
        "{ev:?}"
    );
    assert!(ev.request_bytes.is_some() && ev.free_bytes.is_some());
    assert_eq!(g.score.ooms(OomKind::Reported, Outcome::Paged), 1);
    assert_eq!(g.score.episodes(EpisodeOutcome::Oom), 1);
    assert_eq!(g.score.episodes(EpisodeOutcome::NoOom), 0);
}

#[test]
fn two_processes_leaking_by_turns_on_one_gpu_get_one_page_naming_both() {
    use crate::analysis::incident::{EpisodeOutcome, OomKind, Outcome};
    let mib = 1u64 << 20;
    let mut e = Engine::new(&Config::default(), "test");
    // Two trials of a sweep without the client, 30 GiB each on a 100 GiB GPU, leaking 300 MiB a
    // second by turns of 20 s, until the step of pid 40 at 128 s leaves 212 MiB: it crashes.
    let (mut a, mut b) = (30u64 << 30, 30u64 << 30);
    let mut critical = vec![];
    for i in 0..=128u64 {
        if (i / 20) % 2 == 0 {
            a += 300 * mib;
        } else {
            b += 300 * mib;
        }
        let free = (100u64 << 30) - a - b - (2 << 30);
        e.observe(&listed_only(i as f64, &[(40, a), (41, b)], free));
        let snap = e.snapshot();
        let g = &snap.gpus[0];
        if g.risk == RiskLevel::Critical {
            let d = g.driver.as_ref().expect("a page names its incident");
            critical.push((i, d.pid, d.others_text()));
        }
    }
    e.observe(&listed_only(129.0, &[(41, b)], (98u64 << 30) - b));
    // Critical from about a minute before the crash to it, unbroken, each second the same
    // incident: the label that names it never changes, and the text names the other trial.
    assert!(critical.len() >= 20, "{critical:?}");
    let (first, last) = (critical[0].0, critical[critical.len() - 1].0);
    assert_eq!(last, 128);
    assert_eq!(
        critical.len() as u64,
        last - first + 1,
        "unbroken: {critical:?}"
    );
    let (_, driver, others) = &critical[0];
    assert!(
        critical.iter().all(|c| (&c.1, &c.2) == (driver, others)),
        "{critical:?}"
    );
    let other = if *driver == Some(40) { 41 } else { 40 };
    assert_eq!(others, &format!("worker (pid {other})"));
    // The crash: an OOM event of its own, paged; the page ends with its process gone.
    let snap = e.snapshot();
    let g = &snap.gpus[0];
    assert!(g.risk < RiskLevel::High, "{:?}", g.risk);
    assert_eq!(g.oom_events.len(), 1);
    assert_eq!(
        (g.oom_events[0].pid, g.oom_events[0].outcome),
        (40, Outcome::Paged)
    );
    for i in 130..150 {
        e.observe(&listed_only(i as f64, &[(41, b)], (98u64 << 30) - b));
    }
    let score = e.snapshot().gpus[0].score;
    assert_eq!(score.ooms(OomKind::Inferred, Outcome::Paged), 1);
    assert_eq!(
        (
            score.episodes(EpisodeOutcome::Oom),
            score.episodes(EpisodeOutcome::NoOom)
        ),
        (1, 0),
        "one page"
    );
}

/// A warm-up whose record batches each take a segment of their own: 9 GiB more held every 40 s
/// from 50 GiB to 95 of a 100 GiB card, then flat; 2 GiB allocated between steps and 8 at the
/// peak. `split`: what its client says of its free bytes split among live blocks.
fn record_batches(t: f64, split: Option<u64>) -> Observation {
    let gib = 1u64 << 30;
    let taken = if t >= 60.0 {
        (((t - 60.0) / 40.0) as u64 + 1).min(5)
    } else {
        0
    };
    let reserved = (50 + 9 * taken) * gib;
    let mut o = obs(t, &[7]);
    let g = &mut o.gpus[0];
    let m = g.memory.as_mut().unwrap();
    m.used = reserved + gib / 2;
    m.free = m.total - m.used;
    g.processes[0].used_bytes = m.used;
    let d = &mut o.reports[0].1.devices[0];
    let allocated = if t as u64 % 2 == 0 { 8 * gib } else { 2 * gib };
    d.allocated_bytes = allocated;
    d.active_bytes = Some(allocated);
    d.reserved_bytes = reserved;
    d.inactive_split_bytes = split;
    d.allocated_peak_bytes = Some(8 * gib + taken * gib / 5);
    d.segments = Some(10 + taken);
    o
}

#[test]
fn a_cache_whose_empty_segments_would_serve_its_next_step_is_not_paged_nor_a_leak() {
    // The worst risk, and whether the process was ever flagged as leaking.
    let worst = |split: Option<u64>| {
        let mut e = Engine::new(&Config::default(), "test");
        (0..360u32)
            .map(|t| {
                e.observe(&record_batches(t as f64, split));
                let s = e.snapshot();
                (s.gpus[0].risk, s.processes.iter().any(|p| p.leak_suspected))
            })
            .reduce(|a, b| (a.0.max(b.0), a.1 || b.1))
            .unwrap()
    };
    // Its client says the cache is empty segments: a refused request makes the allocator give
    // them back, so the steps of what it holds are no way to run out, and no leak.
    let (risk, leak) = worst(Some(1 << 28));
    assert!(risk < RiskLevel::High);
    assert!(!leak);
    // Without that, a staircase whose next step does not fit the 5 GiB left is paged, and
    // what it holds rose step by step for minutes: a leak as far as anyone can tell.
    let (risk, leak) = worst(None);
    assert!(risk >= RiskLevel::High);
    assert!(leak);
}
