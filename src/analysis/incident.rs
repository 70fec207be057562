//! Incidents: which processes run a GPU out of memory, how long the level that pages holds, and
//! how the forecast did against the out-of-memory errors that came.
//!
//! A page is about one incident: the GPU heading for its limit, from the analysis its level
//! reaches high until it falls below high or every process of it is gone. Its *driver*, the
//! process whose growth took the GPU there when it began, names it for its whole life, so that
//! the page keeps one identity (a label that changed would be a new alert, and a new page);
//! every process that drives it later, or whose own forecast says it will fail in it, joins it,
//! and the page names them all. Several processes of one job (or several jobs) that run one GPU
//! out of memory together are one incident, and one page.
//!
//! The level is what the forecast assesses from this analysis's evidence (`oom::assess`, whose
//! band on the ETA keeps a forecast hovering at a threshold from flapping, never a time); here
//! a critical level also holds while a process of the incident still expects to fail soon (its
//! own risk is high or above): across a staircase's gaps (a batch that grows by stages), and
//! while a smooth forecast's ETA wanders past critical's band and back (trials leaking in their
//! caches, a cache whose rise slows before it runs out). Once their own risk falls, so does the
//! GPU's critical. When a process of the incident exits (an OOM, the end of its job, a kill)
//! that hold ends at once, and the level is what the forecast says of the processes still
//! there; when all of them are gone, so is the incident, and the next growth is a new one.
//!
//! Each out-of-memory event is scored against what the GPU showed when it came (paged:
//! critical; warned: high; missed), and each critical episode against what followed it (an
//! OOM or none). Pure: time is the samples' time.

use serde::Serialize;

use crate::model::Time;

use super::oom::{Risk, RiskLevel, RiskReason, MIN_STEP_BYTES};

/// Who drives a GPU's risk: a process by pid, or `None` for memory no listed process accounts
/// for.
pub type Driver = Option<u32>;

/// How long a critical level holds at most: two minutes after the forecast last said critical,
/// and only while a process of the incident still expects to fail soon (its own risk is high or
/// above): a staircase's gap, or a smooth forecast's ETA between critical's band and high's.
/// Held for staircases and rounds only, 56 crash rows of 15 corpus runs lost held critical
/// (docs/forecast.md, "The hold is not for staircases only"). A healthy job's own risk falls as
/// soon as its expected growth is late (a staircase's step 1.5 gaps after the last, a smooth
/// rise quiet for 15 s), and the GPU's critical falls with it; the crash, the end of the job or
/// a kill ends the hold at once.
pub const CRITICAL_HOLD: f64 = 120.0;

/// An OOM still counts for a critical (or high) stretch that ended at most this long before
/// it: the exporter may see the failing process gone a sample before its client's report of
/// the error arrives. A critical episode is scored `no_oom` this long after it ended.
pub const OOM_GRACE: f64 = 10.0;

/// One OOM shows in two signals of a process, its client's OOM event and its allocator's
/// `num_ooms`, a moment apart and in either order; within this window they are one OOM.
pub const PAIR_WINDOW: f64 = 60.0;

/// A process's failed requests within this many seconds of the first of its burst are one
/// out-of-memory event: one failure of one process. One failure cascades (the backward pass
/// that crashed a ResNet-50 on an H100 failed 25 requests within 30 ms), and its signals are
/// spread further by the way they travel: the allocator's counter of those requests comes in
/// the process's next report (a second later by default), and a recording is replayed on the
/// sample clock (a second). The exporter cannot see a successful allocation between two
/// failed ones (reports carry totals, about once a second), so the burst is a window from its
/// first failed request, not a wait for the process to allocate again: 5 s holds a cascade and
/// its counter at report intervals up to a few seconds, bounds a process that fails on every
/// step to one event per window, and leaves a process that catches its error, carries on and
/// fails again later with an event for each failure.
pub const BURST_WINDOW: f64 = 5.0;

/// How an out-of-memory error became known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OomKind {
    /// A process's client said so (an OOM event, its allocator's OOM counter).
    Reported,
    /// A process without a client vanished from a GPU that was full.
    Inferred,
}

impl OomKind {
    pub const ALL: [OomKind; 2] = [OomKind::Reported, OomKind::Inferred];

    pub fn as_str(self) -> &'static str {
        match self {
            OomKind::Reported => "reported",
            OomKind::Inferred => "inferred",
        }
    }
}

/// What the GPU showed when an OOM came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// At critical: the page was out.
    Paged,
    /// At high but not critical: a warning only.
    Warned,
    /// Below high: nothing said it.
    Missed,
}

impl Outcome {
    pub const ALL: [Outcome; 3] = [Outcome::Paged, Outcome::Warned, Outcome::Missed];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Paged => "paged",
            Outcome::Warned => "warned",
            Outcome::Missed => "missed",
        }
    }
}

/// What followed a critical episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeOutcome {
    /// An OOM while it was open, or within `OOM_GRACE` after it ended.
    Oom,
    /// None: a false alarm, or someone acted in time.
    NoOom,
}

impl EpisodeOutcome {
    pub const ALL: [EpisodeOutcome; 2] = [EpisodeOutcome::Oom, EpisodeOutcome::NoOom];

    pub fn as_str(self) -> &'static str {
        match self {
            EpisodeOutcome::Oom => "oom",
            EpisodeOutcome::NoOom => "no_oom",
        }
    }
}

/// The forecast's score on one GPU since the exporter started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Score {
    /// OOMs by kind (`OomKind::ALL` order) and outcome (`Outcome::ALL` order).
    pub ooms: [[u64; 3]; 2],
    /// Their leads summed, seconds: at critical for `paged`, at high for `warned`.
    pub lead_seconds: [[f64; 3]; 2],
    /// Critical episodes by outcome (`EpisodeOutcome::ALL` order), once scored.
    pub episodes: [u64; 2],
}

impl Score {
    pub fn ooms(&self, kind: OomKind, outcome: Outcome) -> u64 {
        self.ooms[kind as usize][outcome as usize]
    }

    pub fn lead_seconds(&self, kind: OomKind, outcome: Outcome) -> f64 {
        self.lead_seconds[kind as usize][outcome as usize]
    }

    pub fn episodes(&self, outcome: EpisodeOutcome) -> u64 {
        self.episodes[outcome as usize]
    }
}

/// One candidate for the driver: a process on the GPU now, or the memory no process accounts
/// for (`who: None`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Contender {
    pub who: Driver,
    /// The slope of its credible demand trend, bytes per second, while it grows.
    pub growth: Option<f64>,
    /// Seconds until its own next large allocation fails.
    pub eta: Option<f64>,
    /// Bytes it holds.
    pub held: f64,
    /// Its own risk level as the forecast assesses it now (never an incident's hold): high or above while it expects to fail soon. Low for memory no
    /// process accounts for.
    pub risk: RiskLevel,
}

/// Who drives the risk now: the steepest credible growth; without growth, the process whose
/// allocation fails first; without a forecast, the largest holder.
pub fn candidate(contenders: &[Contender]) -> Option<Driver> {
    let steepest = contenders
        .iter()
        .filter_map(|c| c.growth.map(|g| (g, c.who)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let soonest = || {
        contenders
            .iter()
            .filter_map(|c| c.eta.map(|e| (e, c.who)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    };
    let largest = || {
        contenders
            .iter()
            .map(|c| (c.held, c.who))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    };
    steepest.or_else(soonest).or_else(largest).map(|(_, w)| w)
}

/// A process without a client that vanished: an OOM is inferred where the GPU's free memory,
/// when it was last seen, was within a segment (`MIN_STEP_BYTES`) of full, or within the last
/// step it grew by (`rise`: when, and by how much; the next such step could not fit). A rise
/// counts while the process still loads or once its loading has ended (`loaded`):
/// the rise of a load that ended after it is no step under way when the process goes (a model
/// loaded, then served).
pub fn inferred_oom(free: u64, rise: Option<(Time, u64)>, loaded: Option<Time>) -> bool {
    let step = rise
        .filter(|(at, _)| loaded.is_none_or(|l| *at > l))
        .map_or(0, |(_, bytes)| bytes);
    (free as f64) <= MIN_STEP_BYTES.max(step as f64)
}

/// One process's OOMs as its two signals tell them, each OOM counted once.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OomPairing {
    /// OOM events counted that the allocator's counter has not shown yet.
    events_ahead: u64,
    /// Rises of the counter counted that no event has matched yet.
    counter_ahead: u64,
    last: f64,
}

impl OomPairing {
    fn expire(&mut self, t: f64) {
        if t - self.last > PAIR_WINDOW {
            *self = OomPairing::default();
        }
        self.last = t;
    }

    /// An OOM event at `t`: whether it is an OOM not counted yet.
    pub fn event(&mut self, t: f64) -> bool {
        self.expire(t);
        if self.counter_ahead > 0 {
            self.counter_ahead -= 1;
            false
        } else {
            self.events_ahead += 1;
            true
        }
    }

    /// The allocator's counter rose by `k` at `t`: how many of those OOMs are new.
    pub fn counter(&mut self, t: f64, k: u64) -> u64 {
        self.expire(t);
        let matched = k.min(self.events_ahead);
        self.events_ahead -= matched;
        self.counter_ahead += k - matched;
        k - matched
    }
}

/// Where failed requests of a process go among its out-of-memory events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Nowhere: the other signal counted them, and no event of the process is open.
    Nothing,
    /// They begin an event, numbered as the caller said (`next`); `requests` of them are new.
    Opens { requests: u64 },
    /// They belong to the open event `event`; `requests` of them are new (0: the other signal
    /// counted them, but an OOM event's request size may still be news).
    Joins { event: u64, requests: u64 },
}

/// One process's out-of-memory errors: its failed requests as its two signals tell them, each
/// counted once (`OomPairing`), and grouped into events (`BURST_WINDOW`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessOoms {
    pairing: OomPairing,
    /// The open event: when its first failed request came, and its number.
    burst: Option<(f64, u64)>,
}

impl ProcessOoms {
    /// An OOM event (one failed request) at `t`; `next` is the number a new event would take.
    pub fn event(&mut self, t: f64, next: u64) -> Place {
        let new = u64::from(self.pairing.event(t));
        self.place(t, new, next)
    }

    /// The allocator's counter rose by `k` at `t`; `next` as for `event`.
    pub fn counter(&mut self, t: f64, k: u64, next: u64) -> Place {
        let new = self.pairing.counter(t, k);
        self.place(t, new, next)
    }

    fn place(&mut self, t: f64, requests: u64, next: u64) -> Place {
        match self.burst {
            Some((since, event)) if t - since <= BURST_WINDOW => Place::Joins { event, requests },
            _ if requests == 0 => Place::Nothing,
            _ => {
                self.burst = Some((t, next));
                Place::Opens { requests }
            }
        }
    }
}

/// What the tracker publishes for a GPU after a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Published {
    /// The level that pages and warns, with its reason.
    pub risk: Risk,
    /// The driver of its incident, while it is high or above.
    pub driver: Option<Driver>,
}

/// A process of an incident.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Member {
    pub who: Driver,
    /// Still on the GPU.
    pub on_gpu: bool,
}

/// One incident on a GPU (see the module's documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Incident {
    /// Its number among the GPU's incidents since the exporter started.
    pub number: u64,
    /// Its processes in the order they joined: the first is its driver, who names it.
    pub members: Vec<Member>,
}

impl Incident {
    pub fn driver(&self) -> Driver {
        self.members[0].who
    }

    fn has(&self, who: Driver) -> bool {
        self.members.iter().any(|m| m.who == who)
    }

    fn join(&mut self, who: Driver) {
        if !self.has(who) {
            self.members.push(Member { who, on_gpu: true });
        }
    }
}

/// An OOM as scored when it came.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub outcome: Outcome,
    /// Seconds the GPU had been at the outcome's level (critical, high) when it came.
    pub lead: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Episode {
    since: f64,
    /// The incident it is a stretch of.
    incident: u64,
    /// The last time the forecast itself (not a hold) said critical.
    assessed: f64,
    reason: RiskReason,
    oom: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Ended {
    since: f64,
    end: f64,
    oom: bool,
}

/// One GPU's incidents: the open one, its critical episodes and high stretches, its score.
#[derive(Debug, Clone, Default)]
pub struct Tracker {
    /// The forecast's own level at the last analysis, before the incident's part.
    forecast: Option<Risk>,
    incident: Option<Incident>,
    /// Incidents opened so far: the number of the last one.
    opened: u64,
    critical: Option<Episode>,
    /// Critical episodes that ended within `OOM_GRACE`.
    ended: Vec<Ended>,
    /// Since when the level has been high or above, and the last such stretch that ended.
    high_since: Option<f64>,
    high_ended: Option<Ended>,
    score: Score,
}

impl Tracker {
    pub fn score(&self) -> &Score {
        &self.score
    }

    /// The open incident, while the published level is high or above.
    pub fn incident(&self) -> Option<&Incident> {
        self.incident.as_ref()
    }

    /// The level the forecast itself (not the incident) stood at after the last analysis: the
    /// band `oom::assess` keeps it in.
    pub fn standing(&self) -> Option<Risk> {
        self.forecast
    }

    /// The driver of the open incident.
    pub fn driver(&self) -> Option<Driver> {
        self.incident.as_ref().map(Incident::driver)
    }

    /// One analysis of the GPU: the forecast's assessment now and who is on the GPU now (every
    /// process there, and the memory no process accounts for).
    pub fn step(
        &mut self,
        now: f64,
        assessed: (RiskLevel, RiskReason),
        contenders: &[Contender],
    ) -> Published {
        let alive = |d: Driver| contenders.iter().any(|c| c.who == d);
        // A process of the incident is gone: so is every hold it kept, and what is left is what
        // the forecast says of the processes still there.
        let mut gone = false;
        if let Some(i) = &mut self.incident {
            for m in i.members.iter_mut().filter(|m| m.on_gpu && !alive(m.who)) {
                m.on_gpu = false;
                gone = true;
            }
            if !i.members.iter().any(|m| m.on_gpu) {
                self.incident = None;
            }
        }
        let mut risk = Risk::from(assessed);
        self.forecast = Some(risk);
        // A staircase between two steps, a smooth forecast whose ETA wandered past critical's
        // band: the page holds while a process of its incident still expects to fail soon,
        // never after their own risk has fallen (nor as one of them goes: what the others
        // expect now is the forecast's to say).
        if let (Some(e), Some(i), false) = (self.critical, &self.incident, gone) {
            let expecting = contenders
                .iter()
                .any(|c| c.risk >= RiskLevel::High && i.has(c.who));
            if e.incident == i.number
                && risk.level < RiskLevel::Critical
                && now - e.assessed <= CRITICAL_HOLD
                && expecting
            {
                risk.level = RiskLevel::Critical;
                risk.reason = e.reason;
            }
        }
        if risk.level >= RiskLevel::High {
            let drives = candidate(contenders).unwrap_or(None);
            let i = match &mut self.incident {
                Some(i) => i,
                None => {
                    self.opened += 1;
                    self.incident.insert(Incident {
                        number: self.opened,
                        members: vec![Member {
                            who: drives,
                            on_gpu: true,
                        }],
                    })
                }
            };
            // Whoever grows steepest now drives it too; whoever expects to fail soon is in it.
            for c in contenders {
                let steepest = c.who == drives && c.growth.is_some();
                if steepest || c.risk >= RiskLevel::High {
                    i.join(c.who);
                }
            }
        } else {
            self.incident = None;
        }
        self.follow(now, risk, assessed.0 == RiskLevel::Critical);
        Published {
            risk,
            driver: self.driver(),
        }
    }

    /// Open and close the critical episodes and high stretches the published level makes.
    fn follow(&mut self, now: f64, risk: Risk, assessed_critical: bool) {
        let incident = self.incident.as_ref().map_or(0, |i| i.number);
        match &mut self.critical {
            Some(e) if risk.level == RiskLevel::Critical && e.incident == incident => {
                if assessed_critical {
                    e.assessed = now;
                    e.reason = risk.reason;
                }
            }
            _ => {
                self.close_critical(now);
                if risk.level == RiskLevel::Critical {
                    self.critical = Some(Episode {
                        since: now,
                        incident,
                        assessed: now,
                        reason: risk.reason,
                        oom: false,
                    });
                }
            }
        }
        if risk.level >= RiskLevel::High {
            self.high_since.get_or_insert(now);
        } else if let Some(since) = self.high_since.take() {
            self.high_ended = Some(Ended {
                since,
                end: now,
                oom: false,
            });
        }
        let score = &mut self.score;
        self.ended.retain(|e| {
            let keep = now - e.end <= OOM_GRACE;
            if !keep && !e.oom {
                score.episodes[EpisodeOutcome::NoOom as usize] += 1;
            }
            keep
        });
    }

    fn close_critical(&mut self, now: f64) {
        if let Some(e) = self.critical.take() {
            self.ended.push(Ended {
                since: e.since,
                end: now,
                oom: e.oom,
            });
        }
    }

    /// An out-of-memory error on the GPU at `t`, scored against what the GPU showed then.
    pub fn oom(&mut self, t: f64, kind: OomKind) -> Scored {
        let within = |e: &Ended| t - e.end <= OOM_GRACE;
        let oom_episodes = &mut self.score.episodes[EpisodeOutcome::Oom as usize];
        let mut count_episode = |oom: &mut bool| {
            if !*oom {
                *oom = true;
                *oom_episodes += 1;
            }
        };
        let paged = if let Some(e) = self.critical.as_mut() {
            count_episode(&mut e.oom);
            Some(e.since)
        } else if let Some(e) = self.ended.iter_mut().rev().find(|e| within(e)) {
            count_episode(&mut e.oom);
            Some(e.since)
        } else {
            None
        };
        let high = self
            .high_since
            .or(self.high_ended.filter(within).map(|e| e.since));
        let (outcome, since) = match (paged, high) {
            (Some(s), _) => (Outcome::Paged, Some(s)),
            (None, Some(s)) => (Outcome::Warned, Some(s)),
            (None, None) => (Outcome::Missed, None),
        };
        let lead = since.map(|s| (t - s).max(0.0));
        self.score.ooms[kind as usize][outcome as usize] += 1;
        self.score.lead_seconds[kind as usize][outcome as usize] += lead.unwrap_or(0.0);
        Scored { outcome, lead }
    }
}

#[cfg(test)]
mod tests {
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
}
