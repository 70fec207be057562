//! The engine's out-of-memory events: reported ones counted once per failure however the
//! client's signals arrive, inferred ones for processes without a client that vanish from a full
//! GPU.

use super::tests::{listed_only, obs, oom_report};
use super::*;

#[test]
fn forged_ooms_and_retries_from_a_process_not_on_the_gpu_move_nothing_there() {
    let mut e = Engine::new(&Config::default(), "test");
    for i in 0..5 {
        e.observe(&obs(i as f64, &[7]));
    }
    // pid 99 never touched the GPU: NVML does not list it.
    for (i, n) in [(5, 0), (6, 5), (7, 50)] {
        let a = e.report(99, i as f64, &oom_report(n)).unwrap();
        assert_eq!(a.unlisted, vec!["GPU-0".to_string()]);
        assert_eq!(a.unlisted_for, i as f64 - 5.0, "reporting since t = 5");
        e.observe(&obs(i as f64 + 0.5, &[7]));
    }
    let ooms = |snap: &crate::snapshot::Snapshot| -> u64 {
        snap.gpus[0].oom_counts.iter().map(|c| c.count).sum()
    };
    let snap = e.snapshot();
    assert_eq!(snap.gpus[0].risk, RiskLevel::Low, "{:?}", snap.gpus[0]);
    assert_eq!(ooms(&snap), 0, "no OOM counted on the GPU");
    assert!(snap.gpus[0].oom_events.is_empty());
    let forger = snap.processes.iter().find(|p| p.pid == 99).unwrap();
    assert_eq!((forger.verified, forger.risk), (false, RiskLevel::Low));
    // The same words from pid 7, which NVML lists there, count: its event, then its allocator's
    // counter at 5 (the event was one of those five), a second apart: one failure of five
    // requests.
    for (i, n) in [(8, 0), (9, 5)] {
        let a = e.report(7, i as f64, &oom_report(n)).unwrap();
        assert!(a.unlisted.is_empty());
        e.observe(&obs(i as f64 + 0.5, &[7]));
    }
    let snap = e.snapshot();
    assert_eq!(ooms(&snap), 1);
    assert_eq!(snap.gpus[0].oom_failed_requests, 5);
    assert_eq!(snap.gpus[0].oom_events.len(), 1);
    assert_eq!(
        (
            snap.gpus[0].oom_events[0].pid,
            snap.gpus[0].oom_events[0].requests
        ),
        (7, Some(5))
    );
    // An OOM is an event of its own, not a level of the forecast.
    assert!(snap.gpus[0].risk < RiskLevel::High);
}

/// A failed request of `pid` on GPU-0, as PyTorch's out-of-memory observer sends it (a report
/// of its own, without statistics).
fn failed_request(request: u64, free: u64) -> Report {
    Report {
        version: 1,
        events: vec![crate::model::Event {
            request_bytes: Some(request),
            free_bytes: Some(free),
            ..crate::model::Event::named(EventKind::Oom, "GPU-0")
        }],
        ..Default::default()
    }
}

/// The allocator's statistics of GPU-0 with its OOM counter at `ooms`.
fn stats(ooms: u64) -> Report {
    Report {
        version: 1,
        devices: vec![DeviceStats {
            uuid: "GPU-0".into(),
            allocated_bytes: 1 << 30,
            reserved_bytes: 4 << 30,
            ooms: Some(ooms),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Out-of-memory events of GPU-0: (events, failed requests, outcomes scored).
fn counted(e: &mut Engine) -> (u64, u64, u64) {
    use crate::analysis::incident::{OomKind, Outcome};
    let snap = e.snapshot();
    let g = &snap.gpus[0];
    let scored = OomKind::ALL
        .iter()
        .flat_map(|&k| Outcome::ALL.map(|o| g.score.ooms(k, o)))
        .sum();
    (
        g.oom_counts.iter().map(|c| c.count).sum(),
        g.oom_failed_requests,
        scored,
    )
}

#[test]
fn a_burst_of_failed_requests_is_one_oom_event_and_one_score_outcome() {
    let mib = 1u64 << 20;
    let mut e = Engine::new(&Config::default(), "test");
    for i in 0..20 {
        e.observe(&obs(i as f64, &[7]));
    }
    e.report(7, 20.0, &stats(0)).unwrap();
    // The backward pass fails 25 requests of 38-126 MiB within 30 ms, each its own report.
    for k in 0..25u64 {
        let request = (38 + (k * 37) % 89) * mib;
        let t = 20.1 + k as f64 * 0.00125;
        e.report(7, t, &failed_request(request, 4 * mib)).unwrap();
    }
    // Its statistics a moment later: the counter says 25, the same requests.
    e.report(7, 20.6, &stats(25)).unwrap();
    e.observe(&obs(21.0, &[7]));
    assert_eq!(counted(&mut e), (1, 25, 1));
    let snap = e.snapshot();
    let ev = &snap.gpus[0].oom_events;
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].requests, Some(25));
    assert_eq!(ev[0].request_bytes, Some(126 * mib), "the largest request");
    assert_eq!(ev[0].free_bytes, Some(4 * mib));
    // The counter alone, jumping by 25 in one report, says the same.
    let mut e = Engine::new(&Config::default(), "test");
    for i in 0..20 {
        e.observe(&obs(i as f64, &[7]));
    }
    e.report(7, 20.0, &stats(0)).unwrap();
    e.report(7, 21.0, &stats(25)).unwrap();
    e.observe(&obs(21.5, &[7]));
    assert_eq!(counted(&mut e), (1, 25, 1));
    // Its counter first, its events after (the observer's reports wait on the same socket).
    let mut e = Engine::new(&Config::default(), "test");
    for i in 0..20 {
        e.observe(&obs(i as f64, &[7]));
    }
    e.report(7, 20.0, &stats(0)).unwrap();
    e.report(7, 21.0, &stats(3)).unwrap();
    for request in [40, 90, 60] {
        e.report(7, 21.01, &failed_request(request * mib, 4 * mib))
            .unwrap();
    }
    e.observe(&obs(21.5, &[7]));
    assert_eq!(counted(&mut e), (1, 3, 1));
    let snap = e.snapshot();
    assert_eq!(snap.gpus[0].oom_events[0].request_bytes, Some(90 * mib));
}

#[test]
fn a_process_that_fails_recovers_and_fails_again_has_two_oom_events() {
    let mib = 1u64 << 20;
    let mut e = Engine::new(&Config::default(), "test");
    // NVML's readings; the process's own reports are the test's.
    let listed = |t| Observation {
        reports: vec![],
        ..obs(t, &[7])
    };
    e.observe(&listed(0.0));
    e.report(7, 0.5, &stats(0)).unwrap();
    let mut failures = 0;
    for i in 1..=90 {
        let t = i as f64;
        e.observe(&listed(t));
        // It catches the error at 20 s (three requests), carries on, and fails again at 80 s.
        if i == 20 || i == 80 {
            let n = if i == 20 { 3 } else { 1 };
            for _ in 0..n {
                e.report(7, t + 0.1, &failed_request(64 * mib, 8 * mib))
                    .unwrap();
            }
            failures += n;
        }
        e.report(7, t + 0.5, &stats(failures)).unwrap();
    }
    assert_eq!(counted(&mut e), (2, 4, 2));
    let snap = e.snapshot();
    let ev = &snap.gpus[0].oom_events;
    assert_eq!(
        ev.iter().map(|e| (e.t, e.requests)).collect::<Vec<_>>(),
        [(20.1, Some(3)), (80.1, Some(1))]
    );
    assert_eq!(
        (ev[0].event, ev[1].event),
        (1, 2),
        "numbered by event, not request"
    );
}

#[test]
fn a_process_without_a_client_that_vanishes_from_a_full_gpu_is_an_inferred_oom() {
    use crate::analysis::incident::OomKind;
    let mib = 1u64 << 20;
    let mut e = Engine::new(&Config::default(), "test");
    // Growing by 512 MiB a second until 300 MiB are left (its next step cannot fit), then gone.
    for i in 0..=10u64 {
        let used = (80 << 30) + i * 512 * mib;
        let free = (100 << 30) - used - (15 << 30) + 300 * mib;
        e.observe(&listed_only(i as f64, &[(40, used)], free));
    }
    e.observe(&listed_only(11.0, &[], 95 << 30));
    let snap = e.snapshot();
    let g = &snap.gpus[0];
    let ev = &g.oom_events[..];
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!((ev[0].kind, ev[0].pid), (OomKind::Inferred, 40));
    assert_eq!(ev[0].free_bytes, Some(300 * mib));
    let count = |kind| {
        g.oom_counts
            .iter()
            .filter(|c| c.kind == kind)
            .map(|c| c.count)
            .sum::<u64>()
    };
    assert_eq!((count(OomKind::Inferred), count(OomKind::Reported)), (1, 0));
    // The same exit from a GPU with room to spare is the end of a job.
    let mut e = Engine::new(&Config::default(), "test");
    for i in 0..10 {
        e.observe(&listed_only(i as f64, &[(40, 20 << 30)], 75 << 30));
    }
    e.observe(&listed_only(10.0, &[], 95 << 30));
    assert!(e.snapshot().gpus[0].oom_events.is_empty());
    // A process whose last rise was a load, which then ended (it served flat for minutes
    // beside 3 GiB free, less than that rise): its exit is the end of a job too.
    let mut e = Engine::new(&Config::default(), "test");
    for i in 0..300 {
        let used = if i < 30 { 4u64 << 30 } else { 20 << 30 };
        e.observe(&listed_only(i as f64, &[(40, used)], 3 << 30));
    }
    e.observe(&listed_only(300.0, &[], 95 << 30));
    assert!(e.snapshot().gpus[0].oom_events.is_empty());
    // Segments of a request that grows (each larger than the one before, the earlier ones
    // able to hold the next), the last larger than what is free: the allocator would have
    // given the earlier ones back for the next, so its exit is the end of a job. Steps of
    // one size are kept tensors: the next could not fit.
    let exits_after = |sizes: [u64; 4], exit: u64| {
        let mut e = Engine::new(&Config::default(), "test");
        for i in 0..exit {
            let up: u64 = (0..4)
                .filter(|k| i >= 90 + 30 * k)
                .map(|k| sizes[k as usize])
                .sum();
            e.observe(&listed_only(i as f64, &[(40, (10 + up) << 30)], 5 << 30));
        }
        e.observe(&listed_only(exit as f64, &[], 95 << 30));
        e.snapshot().gpus[0].oom_events.len()
    };
    assert_eq!(
        exits_after([10, 11, 12, 13], 241),
        0,
        "a request that grows"
    );
    assert_eq!(exits_after([12, 12, 12, 12], 241), 1, "steps of one size");
    // Its steps read as the cache's when they came stay the cache's once the window has slid
    // past the steps that told (the job served flat for minutes after its last new batch).
    assert_eq!(exits_after([10, 11, 12, 13], 600), 0, "long after");
    assert_eq!(
        exits_after([12, 12, 12, 12], 600),
        1,
        "long after, one size"
    );
    // And a process with a client says so itself: nothing is inferred.
    let mut e = Engine::new(&Config::default(), "test");
    let full = |t, pids: &[u32]| {
        let mut o = obs(t, pids);
        o.gpus[0].memory = Some(DeviceMemory {
            total: 100 << 30,
            reserved: 0,
            used: (100 << 30) - 10 * mib,
            free: 10 * mib,
        });
        o
    };
    for i in 0..10 {
        e.observe(&full(i as f64, &[7]));
    }
    e.observe(&obs(10.0, &[]));
    assert!(e.snapshot().gpus[0].oom_events.is_empty());
}
