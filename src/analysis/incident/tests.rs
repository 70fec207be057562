//! The incident tracker's tests: drivers, holds, episodes and their scores.

use super::*;
use RiskLevel::*;

const GIB: f64 = (1u64 << 30) as f64;

fn grower(pid: u32, slope: f64) -> Contender {
    Contender {
        who: Some(pid),
        growth: Some(slope),
        eta: Some(30.0),
        held: 10.0 * GIB,
        risk: Critical,
        slowed: false,
    }
}

/// A process between two steps of its staircase, its own forecast expecting the next one
/// (`High`) or not any more (`Low`).
fn between(pid: u32, own: RiskLevel) -> Contender {
    Contender {
        risk: own,
        ..flat(pid)
    }
}

fn flat(pid: u32) -> Contender {
    Contender {
        who: Some(pid),
        held: 20.0 * GIB,
        ..Default::default()
    }
}

const NOBODY: Contender = Contender {
    who: None,
    growth: None,
    eta: None,
    held: 0.0,
    risk: Low,
    slowed: false,
};

fn at(level: RiskLevel) -> (RiskLevel, RiskReason) {
    let reason = if level == Low {
        RiskReason::None
    } else {
        RiskReason::Eta
    };
    (level, reason)
}

/// Steps `t` from `from` to `to` (exclusive) every second with one assessment and one set of
/// processes; the published levels.
fn run(
    tr: &mut Tracker,
    from: u32,
    to: u32,
    level: RiskLevel,
    on_gpu: &[Contender],
) -> Vec<Published> {
    (from..to)
        .map(|t| tr.step(t as f64, at(level), on_gpu))
        .collect()
}

#[test]
fn the_driver_is_the_steepest_growth_then_the_soonest_failure_then_the_largest() {
    let a = grower(1, 1e6);
    let b = grower(2, 5e6);
    assert_eq!(candidate(&[a, b, NOBODY]), Some(Some(2)));
    let victim = Contender {
        eta: Some(40.0),
        ..flat(3)
    };
    assert_eq!(candidate(&[flat(4), victim, NOBODY]), Some(Some(3)));
    let unaccounted = Contender {
        held: 50.0 * GIB,
        ..NOBODY
    };
    assert_eq!(candidate(&[flat(4), unaccounted]), Some(None));
    assert_eq!(candidate(&[]), None);
}

#[test]
fn the_page_ends_with_its_forecast_or_its_driver_not_a_hold_later() {
    let mut tr = Tracker::default();
    let p = run(&mut tr, 0, 30, Critical, &[grower(7, 1e8), NOBODY]);
    assert_eq!(p[29].risk.level, Critical);
    assert_eq!(p[29].driver, Some(Some(7)));
    // The process crashed: its memory is free, the forecast says low at once.
    let after = tr.step(30.0, at(Low), &[NOBODY]);
    assert_eq!(after.risk.level, Low, "no hold for a driver that is gone");
    assert_eq!(after.driver, None);
    // The same process lives on, its forecast taken back: low at once too.
    let mut tr = Tracker::default();
    run(&mut tr, 0, 30, Critical, &[grower(7, 1e8), NOBODY]);
    let still = tr.step(30.0, at(Low), &[flat(7), NOBODY]);
    assert_eq!(still.risk.level, Low, "no hold for a forecast taken back");
}

#[test]
fn a_staircase_whose_steps_keep_coming_keeps_one_page_across_its_gaps() {
    let mut tr = Tracker::default();
    let on = [grower(7, 1e8), NOBODY];
    // Between two steps the forecast has no critical ETA, but the process's own forecast
    // still expects its next step (high).
    let expecting = [between(7, High), NOBODY];
    run(&mut tr, 0, 10, Critical, &on);
    // 60 s between two steps with no critical forecast: still critical, same driver.
    let gap = run(&mut tr, 10, 70, Low, &expecting);
    assert!(gap
        .iter()
        .all(|p| p.risk.level == Critical && p.driver == Some(Some(7))));
    run(&mut tr, 70, 80, Critical, &on);
    // The crash.
    let scored = tr.oom(80.2, OomKind::Reported);
    assert_eq!(scored.outcome, Outcome::Paged);
    assert!((scored.lead.unwrap() - 80.2).abs() < 1e-9, "{scored:?}");
    assert_eq!(tr.step(81.0, at(Low), &[NOBODY]).risk.level, Low);
    assert_eq!(tr.score().episodes, [1, 0], "one page, followed by its OOM");
    // The bridge is bounded: a forecast that never says critical again lets go after
    // CRITICAL_HOLD, though its process lives on expecting growth.
    let mut tr = Tracker::default();
    run(&mut tr, 0, 10, Critical, &on);
    let long = run(&mut tr, 10, 200, Low, &expecting);
    let last_critical = long.iter().rposition(|p| p.risk.level == Critical).unwrap();
    assert_eq!(10 + last_critical as u32, 9 + CRITICAL_HOLD as u32);
}

#[test]
fn a_staircase_whose_next_step_does_not_come_lets_go_once_its_own_risk_falls() {
    let mut tr = Tracker::default();
    run(&mut tr, 0, 10, Critical, &[grower(7, 1e8), NOBODY]);
    // The next step is due; the process's own forecast expects it until 40 s, then no
    // longer (the step did not come).
    let waiting = run(&mut tr, 10, 40, Low, &[between(7, High), NOBODY]);
    assert!(waiting.iter().all(|p| p.risk.level == Critical));
    let after = run(&mut tr, 40, 100, Low, &[between(7, Low), NOBODY]);
    assert!(
        after
            .iter()
            .all(|p| p.risk.level == Low && p.driver.is_none()),
        "critical falls at the first analysis after its own risk fell: {:?}",
        after[0]
    );
    // The page ended without an OOM: a false alarm, scored as such.
    assert_eq!(tr.score().episodes, [0, 1]);
}

#[test]
fn a_healthy_jobs_critical_is_never_held_after_its_own_risk_fell() {
    // Critical for 20 s, then the forecast is taken back: the GPU's own forecast and the
    // process's fall together, and the level with them, at the first analysis.
    let mut tr = Tracker::default();
    run(&mut tr, 0, 20, Critical, &[grower(7, 1e8), NOBODY]);
    let after = run(&mut tr, 20, 200, Low, &[between(7, Low), NOBODY]);
    assert!(after.iter().all(|p| p.risk.level == Low));
    // Its own risk falls later than the GPU's forecast: critical holds until it does and
    // not a second longer, however long the job lives on.
    let mut tr = Tracker::default();
    run(&mut tr, 0, 20, Critical, &[grower(7, 1e8), NOBODY]);
    run(&mut tr, 20, 50, Low, &[between(7, High), NOBODY]);
    let after = run(&mut tr, 50, 300, Low, &[between(7, Low), NOBODY]);
    assert!(after.iter().all(|p| p.risk.level == Low));
    // A GPU held at high by its forecast (nearly full while something grows) is no reason
    // to hold critical for a process whose own risk fell.
    let mut tr = Tracker::default();
    run(&mut tr, 0, 20, Critical, &[grower(7, 1e8), NOBODY]);
    let after = run(&mut tr, 20, 60, High, &[between(7, Medium), NOBODY]);
    assert!(after.iter().all(|p| p.risk.level == High));
}

#[test]
fn a_smooth_rise_that_slowed_holds_no_page() {
    // A cache that fills ever more slowly: critical for 2 s, then its own forecast is high
    // with an ETA of two minutes and more (the rise now runs at under half its pace).
    let slowed = Contender {
        slowed: true,
        ..between(7, High)
    };
    let mut tr = Tracker::default();
    run(&mut tr, 0, 2, Critical, &[grower(7, 1e8), NOBODY]);
    let after = run(&mut tr, 2, 30, High, &[slowed, NOBODY]);
    assert!(
        after.iter().all(|p| p.risk.level == High),
        "high, not a held critical, from the first analysis: {:?}",
        after[0]
    );
    // The same forecast whose ETA only wandered past critical's band is held.
    let mut tr = Tracker::default();
    run(&mut tr, 0, 2, Critical, &[grower(7, 1e8), NOBODY]);
    let after = run(&mut tr, 2, 30, High, &[between(7, High), NOBODY]);
    assert!(after.iter().all(|p| p.risk.level == Critical));
    // Two trials of a sweep that each rise slowly, each forecast beside the other standing
    // still: together they fail sooner than either alone, and the page holds.
    let trial = |pid| Contender {
        slowed: true,
        ..between(pid, High)
    };
    let mut tr = Tracker::default();
    run(
        &mut tr,
        0,
        2,
        Critical,
        &[grower(7, 1e8), grower(8, 9e7), NOBODY],
    );
    let after = run(&mut tr, 2, 30, High, &[trial(7), trial(8), NOBODY]);
    assert!(after.iter().all(|p| p.risk.level == Critical));
}

#[test]
fn three_jobs_in_a_row_are_three_episodes_each_scored() {
    let mut tr = Tracker::default();
    for (job, pid) in [(0u32, 101u32), (1, 102), (2, 103)] {
        let t0 = job * 200;
        run(&mut tr, t0, t0 + 60, Low, &[flat(pid), NOBODY]);
        run(
            &mut tr,
            t0 + 60,
            t0 + 100,
            High,
            &[grower(pid, 1e8), NOBODY],
        );
        let p = run(
            &mut tr,
            t0 + 100,
            t0 + 130,
            Critical,
            &[grower(pid, 1e8), NOBODY],
        );
        assert_eq!(p[0].driver, Some(Some(pid)));
        let s = tr.oom(f64::from(t0 + 130), OomKind::Reported);
        assert_eq!(s.outcome, Outcome::Paged);
        assert!((s.lead.unwrap() - 30.0).abs() < 1e-9);
        // Gone at the next sample: low at once, no driver.
        let after = run(&mut tr, t0 + 131, t0 + 200, Low, &[NOBODY]);
        assert!(after
            .iter()
            .all(|p| p.risk.level == Low && p.driver.is_none()));
    }
    let s = tr.score();
    assert_eq!(s.ooms(OomKind::Reported, Outcome::Paged), 3);
    assert_eq!(s.episodes(EpisodeOutcome::Oom), 3);
    assert_eq!(s.episodes(EpisodeOutcome::NoOom), 0);
    assert!((s.lead_seconds(OomKind::Reported, Outcome::Paged) - 90.0).abs() < 1e-9);
}

#[test]
fn processes_that_run_a_gpu_out_of_memory_together_are_one_incident() {
    let members = |tr: &Tracker| -> Vec<(Driver, bool)> {
        tr.incident()
            .map(|i| i.members.iter().map(|m| (m.who, m.on_gpu)).collect())
            .unwrap_or_default()
    };
    // Process 1 grows to critical, stops (its level still held), and process 2 grows to
    // critical in turn: one incident, still named after 1, naming both.
    let mut tr = Tracker::default();
    run(&mut tr, 0, 20, Critical, &[grower(1, 1e8), flat(2), NOBODY]);
    let p = run(
        &mut tr,
        20,
        40,
        Critical,
        &[flat(1), grower(2, 1e8), NOBODY],
    );
    assert!(p
        .iter()
        .all(|p| (p.risk.level, p.driver) == (Critical, Some(Some(1)))));
    assert_eq!(members(&tr), [(Some(1), true), (Some(2), true)]);
    // Three trials of a sweep leaking on one GPU by turns, each step steeper than the last
    // one's: one page for them all.
    let mut tr = Tracker::default();
    let trials = [101, 102, 103];
    run(
        &mut tr,
        0,
        10,
        High,
        &[grower(101, 1e7), flat(102), flat(103)],
    );
    for k in 0..9u32 {
        let grows = trials[k as usize % 3];
        let on: Vec<Contender> = trials
            .iter()
            .map(|&t| {
                if t == grows {
                    grower(t, 1e8 * f64::from(k + 1))
                } else {
                    between(t, High)
                }
            })
            .collect();
        let p = run(&mut tr, 10 + 10 * k, 20 + 10 * k, Critical, &on);
        assert!(p.iter().all(|p| p.driver == Some(Some(101))), "{p:?}");
    }
    assert_eq!(
        members(&tr),
        [(Some(101), true), (Some(102), true), (Some(103), true)]
    );
    // The first trial fails; the others still grow towards the limit: the same incident,
    // under the same name, its OOM event its own.
    assert_eq!(tr.oom(100.0, OomKind::Reported).outcome, Outcome::Paged);
    let p = run(
        &mut tr,
        100,
        110,
        Critical,
        &[grower(102, 1e9), between(103, High)],
    );
    assert!(p.iter().all(|p| p.driver == Some(Some(101))));
    assert_eq!(
        members(&tr),
        [(Some(101), false), (Some(102), true), (Some(103), true)]
    );
    for t in [110.0, 110.5] {
        assert_eq!(tr.oom(t, OomKind::Reported).outcome, Outcome::Paged);
    }
    assert_eq!(tr.step(111.0, at(Low), &[]).driver, None);
    run(&mut tr, 112, 130, Low, &[]);
    let s = tr.score();
    assert_eq!(
        s.ooms(OomKind::Reported, Outcome::Paged),
        3,
        "an event each"
    );
    assert_eq!(s.episodes, [1, 0], "one page");
    // One of two fails and its memory comes back: the page ends at once; what the other's
    // own forecast says now is the level.
    let mut tr = Tracker::default();
    run(
        &mut tr,
        0,
        20,
        Critical,
        &[grower(1, 1e8), grower(2, 1e7), NOBODY],
    );
    let p = tr.step(20.0, at(Low), &[between(2, Critical), NOBODY]);
    assert_eq!((p.risk.level, p.driver), (Low, None));
    // A weaker grower beside a driver that still grows changes nothing.
    let mut tr = Tracker::default();
    run(&mut tr, 0, 20, Critical, &[grower(1, 1e7), NOBODY]);
    let p = tr.step(
        20.0,
        at(Critical),
        &[grower(1, 1e7), grower(2, 1e8), NOBODY],
    );
    assert_eq!(p.driver, Some(Some(1)));
}

#[test]
fn once_the_gpu_let_go_and_its_processes_are_gone_a_new_growth_is_a_new_incident() {
    // The incident's process crashes, the GPU falls below high, then a new process grows.
    let mut tr = Tracker::default();
    run(&mut tr, 0, 20, Critical, &[grower(1, 1e8), NOBODY]);
    tr.oom(20.0, OomKind::Reported);
    run(&mut tr, 20, 40, Low, &[NOBODY]);
    let p = run(&mut tr, 40, 60, Critical, &[grower(2, 1e8), NOBODY]);
    assert_eq!(p[0].driver, Some(Some(2)));
    assert_eq!(tr.incident().map(|i| i.number), Some(2));
    // Its processes gone while a newcomer, never part of it, already grows at critical:
    // a new incident at once.
    let mut tr = Tracker::default();
    run(&mut tr, 0, 20, Critical, &[grower(1, 1e8), flat(3), NOBODY]);
    let p = tr.step(20.0, at(Critical), &[grower(3, 1e8), NOBODY]);
    assert_eq!((p.risk.level, p.driver), (Critical, Some(Some(3))));
    run(&mut tr, 21, 40, Critical, &[grower(3, 1e8), NOBODY]);
    assert_eq!(
        tr.score().episodes(EpisodeOutcome::NoOom),
        1,
        "the first page ended"
    );
    // A process that stays, after the GPU fell below high: its next growth is a new page.
    let mut tr = Tracker::default();
    run(&mut tr, 0, 20, Critical, &[grower(1, 1e8), NOBODY]);
    run(&mut tr, 20, 60, Low, &[flat(1), NOBODY]);
    run(&mut tr, 60, 70, Critical, &[grower(1, 1e8), NOBODY]);
    assert_eq!(tr.incident().map(|i| i.number), Some(2));
}

#[test]
fn an_oom_is_paged_warned_or_missed_by_what_the_gpu_showed_then() {
    let mut tr = Tracker::default();
    run(&mut tr, 0, 50, High, &[grower(1, 1e8), NOBODY]);
    let s = tr.oom(50.0, OomKind::Inferred);
    assert_eq!((s.outcome, s.lead), (Outcome::Warned, Some(50.0)));
    let mut tr = Tracker::default();
    run(&mut tr, 0, 50, Medium, &[grower(1, 1e8), NOBODY]);
    let s = tr.oom(50.0, OomKind::Reported);
    assert_eq!((s.outcome, s.lead), (Outcome::Missed, None));
    // The exporter saw the process gone a second before its client's report came.
    let mut tr = Tracker::default();
    run(&mut tr, 0, 50, Critical, &[grower(1, 1e8), NOBODY]);
    tr.step(50.0, at(Low), &[NOBODY]);
    let s = tr.oom(51.0, OomKind::Reported);
    assert_eq!((s.outcome, s.lead), (Outcome::Paged, Some(51.0)));
    assert_eq!(tr.score().episodes(EpisodeOutcome::Oom), 1);
    // Much later, an OOM is a miss, and the episode is not counted twice.
    run(&mut tr, 51, 100, Low, &[NOBODY]);
    assert_eq!(tr.oom(100.0, OomKind::Reported).outcome, Outcome::Missed);
    let s = tr.score();
    assert_eq!(s.episodes, [1, 0]);
    assert_eq!(s.ooms(OomKind::Reported, Outcome::Paged), 1);
    assert_eq!(s.ooms(OomKind::Reported, Outcome::Missed), 1);
}

#[test]
fn a_critical_episode_no_oom_follows_is_counted_as_such() {
    let mut tr = Tracker::default();
    run(&mut tr, 0, 20, Critical, &[grower(1, 1e8), NOBODY]);
    // Someone killed the job.
    run(&mut tr, 20, 20 + OOM_GRACE as u32, Low, &[NOBODY]);
    assert_eq!(tr.score().episodes, [0, 0], "within the grace: not yet");
    run(&mut tr, 30, 40, Low, &[NOBODY]);
    assert_eq!(tr.score().episodes(EpisodeOutcome::NoOom), 1);
}

#[test]
fn the_memory_no_process_accounts_for_can_drive_and_never_exits() {
    let mut tr = Tracker::default();
    let lump = Contender {
        held: 70.0 * GIB,
        ..NOBODY
    };
    let p = run(&mut tr, 0, 5, High, &[flat(1), lump]);
    assert_eq!(p[4].driver, Some(None));
}

#[test]
fn an_oom_shows_in_two_signals_and_counts_once() {
    let mut pair = OomPairing::default();
    assert!(pair.event(10.0));
    assert_eq!(
        pair.counter(11.0, 1),
        0,
        "the counter catches up with the event"
    );
    assert_eq!(
        pair.counter(20.0, 1),
        1,
        "a rise without an event is an OOM"
    );
    assert!(
        !pair.event(20.5),
        "the event that comes after it is the same OOM"
    );
    assert!(pair.event(30.0));
    assert!(pair.event(31.0));
    assert_eq!(pair.counter(32.0, 3), 1, "two of the three were events");
    assert!(!pair.event(40.0), "the third one's event, late");
    // Long apart, they are different OOMs.
    assert!(pair.event(41.0));
    assert_eq!(pair.counter(41.0 + PAIR_WINDOW + 1.0, 1), 1);
}

#[test]
fn the_failed_requests_of_one_burst_are_one_event() {
    let mut p = ProcessOoms::default();
    // A cascade: the first request opens event 1, the others join it.
    assert_eq!(p.event(10.0, 1), Place::Opens { requests: 1 });
    for k in 1..25 {
        let t = 10.0 + f64::from(k) * 0.001;
        assert_eq!(
            p.event(t, 2),
            Place::Joins {
                event: 1,
                requests: 1
            }
        );
    }
    // The counter of those 25, a report later: nothing new, still the same event.
    assert_eq!(
        p.counter(11.0, 25, 2),
        Place::Joins {
            event: 1,
            requests: 0
        }
    );
    // Carried on, failed again a minute later: event 2, its counter with it.
    assert_eq!(p.event(70.0, 2), Place::Opens { requests: 1 });
    assert_eq!(
        p.counter(70.8, 1, 3),
        Place::Joins {
            event: 2,
            requests: 0
        }
    );
    // A counter that catches up after the window is no new event.
    assert_eq!(p.event(100.0, 3), Place::Opens { requests: 1 });
    assert_eq!(p.counter(100.0 + BURST_WINDOW + 1.0, 1, 4), Place::Nothing);
    // The counter alone, jumping by many in one report: one event of them all.
    let mut p = ProcessOoms::default();
    assert_eq!(p.counter(5.0, 25, 1), Place::Opens { requests: 25 });
    // Its observer's events after it are the same requests, with their sizes.
    assert_eq!(
        p.event(5.2, 2),
        Place::Joins {
            event: 1,
            requests: 0
        }
    );
    // A failure on every step for longer than the window: one event per window.
    let mut p = ProcessOoms::default();
    let opened = (0..20)
        .filter(|&i| matches!(p.event(f64::from(i), 1 + i as u64), Place::Opens { .. }))
        .count();
    assert_eq!(opened, 4);
}

#[test]
fn a_vanished_process_is_an_inferred_oom_only_on_a_full_gpu() {
    let mib = 1u64 << 20;
    assert!(inferred_oom(40 * mib, None, None));
    assert!(!inferred_oom(2048 * mib, None, None));
    let step = Some((100.0, 786 * mib));
    // Its next step after loading, or a step of a load under way, could not fit; the rise
    // of a load that ended is no step under way.
    assert!(inferred_oom(500 * mib, step, Some(50.0)));
    assert!(inferred_oom(500 * mib, step, None));
    assert!(!inferred_oom(900 * mib, step, Some(50.0)));
    assert!(!inferred_oom(500 * mib, step, Some(100.0)));
}
