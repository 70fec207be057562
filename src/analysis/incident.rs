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
//! caches, a cache whose rise slows before it runs out), but not once it is past twice the
//! threshold (the rise slowed under `evidence::SLOWED` of that pace, unless several processes
//! expect to fail together).
//! Once their own risk falls, so does the GPU's critical. When a process of the incident exits (an OOM, the end of its job, a kill)
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
/// above): a staircase's gap, or a smooth forecast's ETA between critical's band and twice
/// critical's threshold (a rise that kept over `evidence::SLOWED` of the pace that paged).
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
    /// Its own forecast is a smooth rise whose pace fell under `evidence::SLOWED` of the pace a
    /// critical ETA takes (its ETA past twice critical's threshold): a rise that slowed, not an
    /// ETA wandering about critical's band (recomputed every second, it moves by a few seconds;
    /// a sample that caught a step half risen). It holds no page: the page is re-earned from
    /// the pace now. Steps and segments on a schedule are held across their gaps as before.
    pub slowed: bool,
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
            // Several processes that each expect to fail were each forecast beside the others
            // standing still: together they fail sooner, however slowly each one rises.
            let mut expect = contenders
                .iter()
                .filter(|c| c.risk >= RiskLevel::High && i.has(c.who));
            let expecting = expect.clone().count() > 1 || expect.any(|c| !c.slowed);
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
mod tests;
