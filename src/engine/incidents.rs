//! The engine's incidents: out-of-memory errors as they become known (a client's report, or a
//! process without one that vanished from a full GPU), each GPU's incident tracker
//! (`analysis::incident`: its driver, the level that pages, the forecast's score), and what a
//! snapshot shows of them.

use std::collections::VecDeque;

use super::*;
use crate::analysis::evidence;
use crate::analysis::incident::{self, Contender, OomKind, Place, Tracker};
use crate::snapshot::{DriverView, IncidentProcess, OomCount, OomEventView};

/// How long an OOM event's own series are served: two scrapes at a minute's interval see it,
/// and the alert on it resolves this long after it fired.
pub const OOM_EVENT_TTL: f64 = 120.0;
/// The most recent OOM events served per GPU (a crash loop cannot flood a scrape).
pub const MAX_OOM_EVENTS: usize = 16;
/// A training job's own `gpumem_oom_events_total` series stays this long after its last
/// process on the GPU was seen, and at most this many jobs per GPU have one: the counter keeps
/// a job's OOMs apart without a series for every job a node ever ran.
const JOB_RETAIN: f64 = 3600.0;
const MAX_JOBS: usize = 32;

/// One GPU's incidents.
#[derive(Default)]
pub(super) struct GpuIncidents {
    pub(super) tracker: Tracker,
    events: VecDeque<OomEventView>,
    /// OOM events counted on this GPU so far: the number of the next one.
    counted: u64,
    /// The requests that failed in its reported OOM events.
    failed_requests: u64,
    /// (kind, training job) → (OOMs, last time a process of the job was seen here).
    by_job: BTreeMap<(OomKind, String), (u64, Time)>,
    /// The GPU's free bytes at its previous reading with a process list.
    free_before: Option<u64>,
    /// The open incident's number and its processes as they were known when they joined (pid,
    /// comm, pod): its driver's are the page's labels, which must not change while it lasts,
    /// and a process that has gone is still named.
    named: Option<(u64, Vec<Named>)>,
}

type Named = (Option<u32>, String, Option<PodLabels>);

impl GpuIncidents {
    pub(super) fn failed_requests(&self) -> u64 {
        self.failed_requests
    }

    fn touch_job(&mut self, kind: OomKind, job: &str, t: Time) -> &mut (u64, Time) {
        let e = self.by_job.entry((kind, job.to_string())).or_insert((0, t));
        e.1 = e.1.max(t);
        e
    }

    /// Jobs long gone lose their series, the oldest first beyond `MAX_JOBS`; the GPU's own
    /// (`job=""`) series of each kind stay.
    fn prune_jobs(&mut self, now: Time) {
        self.by_job
            .retain(|(_, job), (_, seen)| job.is_empty() || now - *seen <= JOB_RETAIN);
        while self.by_job.keys().filter(|(_, j)| !j.is_empty()).count() > MAX_JOBS {
            let oldest = self
                .by_job
                .iter()
                .filter(|((_, j), _)| !j.is_empty())
                .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => self.by_job.remove(&k),
                None => break,
            };
        }
    }
}

/// A process's word of failed requests: its client's OOM event (one request, with its size and
/// the free memory then, where the client caught them) or its allocator's counter rising.
pub(super) enum OomSignal {
    Event {
        request: Option<u64>,
        free: Option<u64>,
    },
    Counter(u64),
}

impl Engine {
    /// Failed requests that process `key` reported at `t`: the first of a burst is an OOM event,
    /// counted and scored; the rest join it (`incident::ProcessOoms`).
    pub(super) fn reported_oom(&mut self, key: &ProcKey, t: Time, signal: OomSignal) {
        let Some(gi) = self.gpus.iter().position(|g| g.id.uuid == key.1) else {
            return;
        };
        let next = self.gpus[gi].incidents.counted + 1;
        let Some(p) = self.procs.get_mut(key) else {
            return;
        };
        let (place, request, free) = match signal {
            OomSignal::Event { request, free } => (p.ooms.event(t, next), request, free),
            OomSignal::Counter(k) => (p.ooms.counter(t, k, next), None, None),
        };
        match place {
            Place::Nothing => {}
            Place::Opens { requests } => {
                self.count_oom(key, t, OomKind::Reported, Some(requests), request, free);
            }
            Place::Joins { event, requests } => {
                let inc = &mut self.gpus[gi].incidents;
                inc.failed_requests += requests;
                // Served while it is among the latest: its requests and the largest of them.
                if let Some(ev) = inc.events.iter_mut().find(|e| e.event == event) {
                    *ev.requests.get_or_insert(0) += requests;
                    if request > ev.request_bytes {
                        ev.request_bytes = request;
                        ev.free_bytes = free;
                    }
                }
                self.changes += 1;
            }
        }
    }

    /// An out-of-memory event of process `key` at `t` (`requests` failed in it, where known):
    /// counted on its GPU and scored by the GPU's tracker.
    pub(super) fn count_oom(
        &mut self,
        key: &ProcKey,
        t: Time,
        kind: OomKind,
        requests: Option<u64>,
        request_bytes: Option<u64>,
        free_bytes: Option<u64>,
    ) {
        let Some(gi) = self.gpus.iter().position(|g| g.id.uuid == key.1) else {
            return;
        };
        let (comm, pod, job) = match self.procs.get(key) {
            Some(p) => (
                p.comm.clone().unwrap_or_default(),
                p.pod.clone(),
                p.identity.job.clone().unwrap_or_default(),
            ),
            None => (String::new(), None, String::new()),
        };
        let inc = &mut self.gpus[gi].incidents;
        let scored = inc.tracker.oom(t, kind);
        inc.touch_job(kind, &job, t).0 += 1;
        inc.counted += 1;
        inc.failed_requests += requests.unwrap_or(0);
        inc.events.push_back(OomEventView {
            t,
            event: inc.counted,
            kind,
            pid: key.0,
            comm,
            job,
            pod,
            requests,
            request_bytes,
            free_bytes,
            outcome: scored.outcome,
            lead: scored.lead,
        });
        while inc.events.len() > MAX_OOM_EVENTS {
            inc.events.pop_front();
        }
        tracing::info!(
            pid = key.0,
            gpu = %key.1,
            kind = kind.as_str(),
            outcome = scored.outcome.as_str(),
            lead_s = scored.lead.unwrap_or(0.0),
            "out of memory"
        );
        self.changes += 1;
    }

    /// After GPU `gi`'s process list was read at `t`: every process without a client that was
    /// listed at the previous reading (`was_listed`) and is gone now, from a GPU that was full
    /// but for a segment or its last step, is an inferred OOM.
    pub(super) fn infer_ooms(&mut self, gi: usize, t: Time, was_listed: &[u32], free_now: u64) {
        let uuid = self.gpus[gi].id.uuid.clone();
        let free_before = self.gpus[gi].incidents.free_before.replace(free_now);
        let Some(free_before) = free_before else {
            return;
        };
        // One key, its pid changed: the uuid is copied only for a process that vanished.
        let mut key: ProcKey = (0, uuid);
        let mut vanished: Vec<ProcKey> = Vec::new();
        for &pid in was_listed {
            key.0 = pid;
            let Some(p) = self
                .procs
                .get(&key)
                .filter(|p| !p.listed_now && p.last_report.is_none())
            else {
                continue;
            };
            // A step of a request whose earlier segments could hold the next is the cache's.
            let grew = p.demand.requests_grew_at();
            let rise = p.last_rise.filter(|(at, _)| grew.is_none_or(|g| g < *at));
            let inferred = incident::inferred_oom(free_before, rise, p.demand.loaded_from());
            tracing::debug!(at = t, pid, free_before, last_rise = ?p.last_rise, loaded_from = ?p.demand.loaded_from(), inferred, "vanished without a client");
            if inferred {
                vanished.push(key.clone());
            }
        }
        for key in vanished {
            self.count_oom(&key, t, OomKind::Inferred, None, None, Some(free_before));
        }
    }

    /// GPU `gi`'s incident step after its forecast was assessed: who is on it now (the
    /// processes behind `parts`, by `keys`, and the memory no process accounts for, the part
    /// after them) and the level it publishes.
    pub(super) fn step_incidents(
        &mut self,
        gi: usize,
        now: Time,
        assessed: (RiskLevel, oom::RiskReason),
        keys: &[ProcKey],
        parts: &[DemandPart],
    ) -> oom::Risk {
        let contenders: Vec<Contender> = parts
            .iter()
            .enumerate()
            .map(|(i, part)| {
                let key = keys.get(i);
                let p = key.and_then(|k| self.procs.get(k));
                Contender {
                    who: key.map(|k| k.0),
                    growth: part.trend.map(|t| t.slope),
                    eta: p.and_then(|p| p.eta).map(|e| e.seconds),
                    held: part.held,
                    // Assessed this analysis, before the GPU's step (`analyse_gpu`).
                    risk: p.and_then(|p| p.risk).map_or(RiskLevel::Low, |r| r.level),
                    slowed: p.and_then(|p| p.eta).is_some_and(|e| {
                        e.seen.is_some()
                            && e.seconds * evidence::SLOWED > self.risk_params.critical_eta
                    }),
                }
            })
            .collect();
        let jobs: Vec<String> = keys
            .iter()
            .filter_map(|k| self.procs.get(k)?.identity.job.clone())
            .collect();
        let inc = &mut self.gpus[gi].incidents;
        for kind in OomKind::ALL {
            inc.touch_job(kind, "", now);
        }
        // A job's series exists from its first sight, so that its first OOM is an increase.
        for job in &jobs {
            inc.touch_job(OomKind::Reported, job, now);
        }
        inc.prune_jobs(now);
        while inc
            .events
            .front()
            .is_some_and(|e| now - e.t > OOM_EVENT_TTL)
        {
            inc.events.pop_front();
        }
        let risk = inc.tracker.step(now, assessed, &contenders).risk;
        inc.named = inc.tracker.incident().map(|i| {
            let mut named = match inc.named.take() {
                Some((n, named)) if n == i.number => named,
                _ => vec![],
            };
            // A process joins while it is on the GPU: among this analysis's.
            for m in &i.members[named.len()..] {
                let key = keys.iter().find(|k| Some(k.0) == m.who);
                let p = key.and_then(|k| self.procs.get(k));
                named.push((
                    m.who,
                    p.and_then(|p| p.comm.clone()).unwrap_or_default(),
                    p.and_then(|p| p.pod.clone()),
                ));
            }
            (i.number, named)
        });
        risk
    }

    /// What a snapshot shows of GPU `g`'s incidents at `now`.
    pub(super) fn incident_view(
        &self,
        g: &GpuState,
        now: Time,
    ) -> (Option<DriverView>, Vec<OomEventView>, Vec<OomCount>) {
        let inc = &g.incidents;
        let driver = match (inc.tracker.incident(), &inc.named) {
            (Some(i), Some((_, named))) => named.first().map(|(pid, comm, pod)| DriverView {
                pid: *pid,
                comm: comm.clone(),
                pod: pod.clone(),
                others: named[1..]
                    .iter()
                    .zip(&i.members[1..])
                    .map(|((pid, comm, _), m)| IncidentProcess {
                        pid: *pid,
                        comm: comm.clone(),
                        on_gpu: m.on_gpu,
                    })
                    .collect(),
            }),
            _ => None,
        };
        let events = inc
            .events
            .iter()
            .filter(|e| now - e.t <= OOM_EVENT_TTL)
            .cloned()
            .collect();
        let counts = inc
            .by_job
            .iter()
            .map(|((kind, job), (n, _))| OomCount {
                kind: *kind,
                job: job.clone(),
                count: *n,
            })
            .collect();
        (driver, events, counts)
    }
}
