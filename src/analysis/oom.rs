//! When will an allocation fail, and how worried should anyone be.
//!
//! The forecast is of the *failed allocation*, not of the moment `nvidia-smi` shows the device
//! full. A caching allocator under pressure frees its own cached blocks and retries before it
//! raises out-of-memory, so what must fit is each process's peak demand (floor plus the per-step
//! swing, plus what lives outside the allocator), not what it happens to hold.

use super::trend::{Saturation, Trend};

/// Steps smaller than this are noise at GPU scale: PyTorch's smallest large-pool segment is
/// 20 MiB, and a one-off allocation under 64 MiB moves no forecast.
pub const MIN_STEP_BYTES: f64 = 64.0 * 1048576.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EtaParams {
    /// Points of a trend before it may be extrapolated.
    pub min_points: usize,
    /// Seconds of trend before it may be extrapolated.
    pub min_span: f64,
    pub significance: f64,
    pub max_extrapolation: f64,
    pub horizon: f64,
    /// A process's own growth counts only after its warm-up: loading a model is a ramp that
    /// stops by itself. It ends this long after the process appears, or earlier once its
    /// allocator frees memory (a training step or a request has run: loading only adds).
    pub warmup: f64,
}

impl EtaParams {
    pub fn from_config(a: &crate::config::AnalysisConfig) -> Self {
        EtaParams {
            min_points: 8,
            min_span: a.eta_min_span.as_secs_f64(),
            significance: 0.01,
            max_extrapolation: a.eta_max_extrapolation,
            horizon: a.eta_horizon.as_secs_f64(),
            warmup: a.eta_warmup.as_secs_f64(),
        }
    }
}

/// One process's share of a GPU, as the forecast of the first failing allocation sees it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DemandPart {
    /// Bytes the process needs to get through its next step: at least what it holds (its cache
    /// grows segment by segment, and the segment after the last that fits fails), and its
    /// high-water mark of allocated bytes, what it holds outside the allocator and one more
    /// request of the size it takes (NVML's bytes for a process that does not report).
    pub need: f64,
    /// Bytes it holds from the driver now. Under pressure a caching allocator frees its own
    /// cache and retries, but its neighbours keep theirs.
    pub held: f64,
    /// It asks the driver for memory: its peak exceeds what it holds, its demand grows, or it
    /// gave memory back and took it again within the window.
    pub asks: bool,
    /// Its demand trend, where credible (see `credible`).
    pub trend: Option<Trend>,
    /// Another credible reading of the same demand, less steep (`Demand`'s views).
    pub fallback: Option<Trend>,
    /// Where its trend is a peak rising smoothly inside its cache: how the driver will see
    /// that growth.
    pub segments: Option<Segments>,
}

/// Segments of one process a forecast looks at, at most (141 GiB in 64 MiB segments is 2,256).
const MAX_SEGMENTS: usize = 4096;

/// A peak that rises smoothly inside a caching allocator's cache reaches the driver in
/// segments: none while the cache serves its requests, then one of the request's size each
/// time the peak has grown by that much. Several such processes take theirs each on its own
/// schedule, and a segment comes whole or fails: room for one and a half is room for one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segments {
    /// Bytes the peak can still rise before a request no longer fits what the process holds.
    pub cache: f64,
    /// Bytes of the segment it then takes: the size of its requests.
    pub size: f64,
}

/// How far the truth strays from the point ETA beyond what the growth's confidence interval
/// says: the room itself is uncertain (the size of the failing request, a neighbour's cache
/// given back or not), and steps are not a line. Calibrated on recorded crashes: over the
/// seconds 20–120 s before each crash of the development corpus, the time really left was at
/// least 0.70 × the ETA at 95 % of them and at most 3.1 × at 90 % (docs/forecast.md, with the
/// held-out check).
pub const ETA_LOWER_FACTOR: f64 = 0.7;
pub const ETA_UPPER_FACTOR: f64 = 3.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Eta {
    pub seconds: f64,
    /// The earliest the failure is credible: the room closing at the upper confidence bound of
    /// the growth.
    pub lower: f64,
    /// The latest: the room closing at the lower confidence bound of the growth; `None` where
    /// that bound does not exclude a halt (the growth may stop before the room is gone).
    pub upper: Option<f64>,
    /// Growth that closes the room, bytes per second.
    pub slope: f64,
    /// Room left before the request fails, bytes (negative: it no longer fits).
    pub headroom: f64,
    /// How long the smooth rises that make it have been seen rising, seconds (their spans,
    /// weighted by their pace); `None` where steps or segments on a schedule make it.
    pub seen: Option<f64>,
}

/// How many steps a staircase may be extrapolated over, per step it has shown: the count's
/// counterpart of `eta_max_extrapolation`, which bounds the seconds.
pub const STAIRS_EXTRAPOLATION: f64 = 2.0;

/// Room left for part `i`'s next step beside what the others hold.
pub fn headroom(capacity: f64, parts: &[DemandPart], i: usize) -> f64 {
    let others: f64 = parts
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, d)| d.held)
        .sum();
    let d = &parts[i];
    capacity - others - d.need
}

/// Seconds until part `i`'s next large allocation fails, if it asks for memory and the room
/// is closing within what the evidence supports. Every credible trend closes it: its own need
/// and its neighbours' holdings (a growing neighbour's holdings grow with it).
pub fn eta(capacity: f64, parts: &[DemandPart], i: usize, p: &EtaParams) -> Option<Eta> {
    let d = &parts[i];
    if !d.asks {
        return None;
    }
    let growing: Vec<&Trend> = parts.iter().filter_map(|d| d.trend.as_ref()).collect();
    let in_segments: Vec<(&Trend, Segments)> = parts
        .iter()
        .filter_map(|d| d.trend.as_ref().zip(d.segments))
        .collect();
    let in_steps: Vec<&Trend> = parts
        .iter()
        .filter(|d| d.segments.is_none())
        .filter_map(|d| d.trend.as_ref())
        .collect();
    let slope: f64 = growing.iter().map(|t| t.slope).sum();
    if slope <= 0.0 {
        return None;
    }
    let fast: f64 = growing.iter().map(|t| t.slope_upper.max(t.slope)).sum();
    let slow: f64 = growing
        .iter()
        .map(|t| t.slope_lower.clamp(0.0, t.slope))
        .sum();
    // A growing neighbour fills its own cache (what it holds beyond its need) before it takes
    // memory from the room: its steps are served there first. One that grows in segments
    // takes them from the room on its own schedule, its own included.
    let slack: f64 = parts
        .iter()
        .enumerate()
        .filter(|(j, d)| *j != i && d.trend.is_some() && d.segments.is_none())
        .map(|(_, d)| (d.held - d.need).max(0.0))
        .sum();
    let own = if d.trend.is_some() && d.segments.is_some() {
        d.need - d.held
    } else {
        0.0
    };
    let room = headroom(capacity, parts, i) + own + slack;
    // Rises that slow towards a level the room holds with a segment to spare are over: a
    // load, a warm-up, a cache that fills ever more slowly.
    let rest: Option<f64> = growing.iter().map(|t| t.saturation.map(|s| s.rest)).sum();
    if rest.is_some_and(|r| r + MIN_STEP_BYTES <= room) {
        return None;
    }
    let seconds = if room < 0.0 {
        0.0
    } else if let Some(curves) = on_curves(&growing) {
        // A rise that slows is on course to fill the room at the pace of its curve, not of
        // the line through the window, which its older, faster part steepens. Its need is
        // what must fit: the segments it would take on the way are its cache's to give back.
        curves.reaching(room - own - MIN_STEP_BYTES, p.horizon)?
    } else {
        match first_step_short(room, &in_steps, &in_segments) {
            Some(s) => s,
            // A reading that cannot say when does not silence one that can: the high-water
            // mark may catch one large step in small parts that the need shows whole. The
            // one growing part is the one with a trend.
            None if growing.len() == 1 => {
                let j = parts.iter().position(|d| d.trend.is_some())?;
                let alt = parts[j].fallback?;
                let mut parts = parts.to_vec();
                parts[j].trend = Some(alt);
                parts[j].fallback = None;
                return eta(capacity, &parts, i, p);
            }
            None => return None,
        }
    };
    // The trend that contributes most decides how far ahead we may look.
    let span = growing
        .iter()
        .max_by(|a, b| a.slope.total_cmp(&b.slope))
        .map_or(0.0, |t| t.span);
    if seconds > p.horizon || seconds > p.max_extrapolation * span {
        return None;
    }
    let smooth = in_segments.is_empty() && growing.iter().all(|t| t.stairs.is_none());
    let pace = |t: &&Trend| t.slope.max(0.0);
    let seen = smooth.then(|| {
        growing.iter().map(|t| pace(t) * t.span).sum::<f64>()
            / growing.iter().map(pace).sum::<f64>()
    });
    Some(Eta {
        seconds,
        lower: (room / fast).max(0.0).min(ETA_LOWER_FACTOR * seconds),
        upper: (slow > 0.0).then(|| (room / slow).max(ETA_UPPER_FACTOR * seconds)),
        slope,
        headroom: room,
        seen,
    })
}

/// Smooth trends, some on a saturating curve (`Saturation::tau`): what they add together
/// after some seconds.
struct Curves<'a>(&'a [&'a Trend]);

/// The growing trends as curves, where one at least slows on a smooth curve and every
/// staircase among them slows on one: its steps, however many, come as its curve has them
/// (ever more rarely), not on a schedule of their own.
fn on_curves<'a>(growing: &'a [&'a Trend]) -> Option<Curves<'a>> {
    let curved = |t: &Trend| t.saturation.is_some_and(|s| s.tau.is_some());
    let smooth = growing.iter().all(|t| t.stairs.is_none() || curved(t));
    (smooth && growing.iter().any(|t| curved(t))).then_some(Curves(growing))
}

impl Curves<'_> {
    fn added(&self, seconds: f64) -> f64 {
        self.0
            .iter()
            .map(|t| match t.saturation {
                Some(Saturation {
                    rest,
                    tau: Some(tau),
                }) => rest * (1.0 - (-seconds / tau).exp()),
                _ => t.slope * seconds,
            })
            .sum()
    }

    /// The seconds until they have added `bytes`, if within `horizon`.
    fn reaching(&self, bytes: f64, horizon: f64) -> Option<f64> {
        if bytes <= 0.0 {
            return Some(0.0);
        }
        if self.added(horizon) < bytes {
            return None;
        }
        // What they add only grows: halve the interval that holds the crossing.
        let (mut lo, mut hi) = (0.0, horizon);
        while hi - lo > 0.1 {
            let mid = 0.5 * (lo + hi);
            if self.added(mid) < bytes {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(hi)
    }
}

/// When the room no longer holds what the growing trends add: each staircase's steps come on
/// its own schedule, each smooth trend takes its slope (alone, they close the room at their
/// summed slope), and the first step that does not fit fails (or the room runs out under the
/// smooth ones between steps). Several processes stepping together fill the room step by step, as
/// one does: between their steps the ETA counts down to the next one that cannot fit, not the
/// room over their summed slopes, which stands still while the steps are apart.
///
/// A staircase's next step is due its gap after the last; one that is late by some seconds is
/// expected that much later again, and every gap after it is that long: the ETA grows while a
/// step does not come. It is extrapolated over at most `STAIRS_EXTRAPOLATION` times the steps
/// it has shown: two steps and room for six more is a rise that may well end (a checkpoint's
/// copy taken twice), not a schedule to count down. `None` where the steps the evidence
/// supports all fit and nothing smooth grows.
fn first_step_short(
    room: f64,
    growing: &[&Trend],
    in_segments: &[(&Trend, Segments)],
) -> Option<f64> {
    let smooth: f64 = growing
        .iter()
        .filter(|t| t.stairs.is_none())
        .map(|t| t.slope)
        .sum();
    // Enough of each one's segments to fill the room.
    let segments = in_segments.iter().flat_map(|(t, s)| {
        let every = s.size / t.slope;
        let count = ((room.max(0.0) / s.size).ceil() as usize + 1).min(MAX_SEGMENTS);
        (0..count).map(move |k| (s.cache / t.slope + k as f64 * every, s.size))
    });
    let mut steps: Vec<(f64, f64)> = growing
        .iter()
        .filter_map(|t| t.stairs.map(|s| (t.quiet, s)))
        .flat_map(|(quiet, s)| {
            let next = (s.gap - quiet).abs();
            let every = s.gap.max(quiet);
            let supported = (STAIRS_EXTRAPOLATION * s.count as f64) as usize;
            (0..supported).map(move |k| (next + k as f64 * every, s.step))
        })
        .chain(segments)
        .collect();
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut taken = 0.0;
    for (at, step) in steps {
        if smooth > 0.0 && taken + smooth * at > room {
            return Some((room - taken) / smooth);
        }
        taken += step;
        if taken + smooth * at > room {
            return Some(at);
        }
    }
    (smooth > 0.0).then(|| (room - taken) / smooth)
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskLevel {
    #[default]
    Low = 0,
    Medium = 1,
    High = 2,
    Critical = 3,
}

impl RiskLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            RiskLevel::Low => "low",
            RiskLevel::Medium => "medium",
            RiskLevel::High => "high",
            RiskLevel::Critical => "critical",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskReason {
    None,
    Eta,
    UsedFraction,
    AllocRetries,
}

impl RiskReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RiskReason::None => "none",
            RiskReason::Eta => "eta",
            RiskReason::UsedFraction => "used_fraction",
            RiskReason::AllocRetries => "alloc_retries",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RiskParams {
    pub critical_eta: f64,
    pub high_eta: f64,
    pub medium_eta: f64,
    pub medium_used: f64,
    pub high_used: f64,
    pub high_used_needs_growth: bool,
}

impl RiskParams {
    pub fn from_config(r: &crate::config::RiskConfig) -> Self {
        RiskParams {
            critical_eta: r.critical_eta.as_secs_f64(),
            high_eta: r.high_eta.as_secs_f64(),
            medium_eta: r.medium_eta.as_secs_f64(),
            medium_used: r.medium_used_fraction,
            high_used: r.high_used_fraction,
            high_used_needs_growth: r.high_used_needs_growth,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RiskInputs {
    pub eta: Option<f64>,
    /// `Eta::seen`: how long the smooth rises behind the ETA have been seen rising.
    pub eta_seen: Option<f64>,
    /// Demand on the GPU grows towards the limit within what the evidence supports: there is
    /// an ETA. A significant rise whose end is beyond `EtaParams::max_extrapolation` times its
    /// span is not yet growth towards a failure.
    pub rising: bool,
    /// Share of the device not free, as `nvidia-smi` shows it.
    pub used_fraction: Option<f64>,
    /// Allocator retries within the last minute.
    pub recent_retries: u64,
    /// The memory rose by a segment or more since the last analysis: growth under way at this
    /// very analysis (a step caught over two samples is half risen at the first).
    pub growing_now: bool,
}

/// The risk level (low, medium, high, critical), with the reason that set it.
/// `standing`: what this assessment was at the last analysis. An ETA within `ETA_BAND` of the
/// threshold of a level at or under it keeps that level, and so does memory that rises at
/// this analysis: the trend is read again once the rise under way has settled (a step caught
/// half risen is no step yet), and the moment memory stops moving only an ETA keeps a level.
///
/// A smooth rise is critical only once its ETA is no longer than the rise has been seen
/// (`eta_seen`): a rise seen for s seconds may still be a curve that levels off with a time
/// constant as short as s (a shorter one would show its bend within them), and such a curve adds
/// only its pace times s more. Within that the failure is certain; beyond it the rise may be a
/// warm-up or a cache that fills ever more slowly, and it warns (high). Steps and segments come
/// on a schedule the evidence counts instead (`STAIRS_EXTRAPOLATION`).
pub fn assess(i: &RiskInputs, p: &RiskParams, standing: Option<Risk>) -> (RiskLevel, RiskReason) {
    let standing_level = standing.map_or(RiskLevel::Low, |s| s.level);
    let mut best = (RiskLevel::Low, RiskReason::None);
    let mut raise = |level: RiskLevel, reason: RiskReason| {
        if level > best.0 {
            best = (level, reason);
        }
    };
    if let Some(eta) = i.eta {
        let within = |level: RiskLevel, threshold: f64| {
            eta <= threshold
                * if standing_level >= level {
                    ETA_BAND
                } else {
                    1.0
                }
        };
        let seen_enough = i
            .eta_seen
            .is_none_or(|seen| within(RiskLevel::Critical, seen));
        if within(RiskLevel::Critical, p.critical_eta) && seen_enough {
            raise(RiskLevel::Critical, RiskReason::Eta);
        } else if within(RiskLevel::High, p.high_eta) {
            raise(RiskLevel::High, RiskReason::Eta);
        } else if within(RiskLevel::Medium, p.medium_eta) {
            raise(RiskLevel::Medium, RiskReason::Eta);
        }
    }
    // A full GPU is no risk in itself: servers take 90 % up front and stay there. Only a full
    // GPU whose demand still grows is.
    let used = i.used_fraction.unwrap_or(0.0);
    if used >= p.high_used && (i.rising || !p.high_used_needs_growth) {
        raise(RiskLevel::High, RiskReason::UsedFraction);
    } else if used >= p.medium_used {
        raise(RiskLevel::Medium, RiskReason::UsedFraction);
    }
    if i.recent_retries > 0 {
        // Retries mean the allocator already had to flush its cache to make an allocation fit:
        // while demand grows, the next step up may not fit at all. Without growth they are
        // the same peak fitting the same way again (an evaluation, a burst of requests): tight
        // but steady headroom, a ticket (`tight`), not a page. Never critical on their own:
        // when the failure comes is the ETA's to say (a slower job retries as early).
        let level = if i.rising {
            RiskLevel::High
        } else {
            RiskLevel::Medium
        };
        raise(level, RiskReason::AllocRetries);
    }
    if let Some(s) = standing.filter(|_| i.growing_now) {
        raise(s.level, s.reason);
    }
    best
}

/// Tight but steady headroom, worth a ticket, never a page: the allocator had to flush its
/// cache to fit an allocation within the last minute (`retries`), or the device's peak over the
/// peak window came within `high_used` of full, while nothing grows towards the limit (the
/// risk stays under high). A job that runs like this works until its inputs change; a longer
/// sequence, a larger evaluation batch or a new neighbour tips it over.
pub fn tight(level: RiskLevel, retries: u64, peak_used_fraction: f64, p: &RiskParams) -> bool {
    level < RiskLevel::High && (retries > 0 || peak_used_fraction >= p.high_used)
}

/// A risk level with the reason that set it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Risk {
    pub level: RiskLevel,
    pub reason: RiskReason,
}

impl From<(RiskLevel, RiskReason)> for Risk {
    fn from((level, reason): (RiskLevel, RiskReason)) -> Self {
        Risk { level, reason }
    }
}

/// How far past the threshold of the level it stands at an ETA may be before that level falls:
/// a quarter. The ETA is recomputed from the evidence every second and hovers at a threshold
/// (59, 61, 58 s); without a band each crossing would end the page and the next open another.
/// A band on the ETA, not a time: a level stands only on an ETA of this analysis, and falls
/// the moment the evidence that made the ETA is gone.
pub const ETA_BAND: f64 = 1.25;

/// What to do about it, in a sentence an operator can act on.
pub fn recommendation(
    level: RiskLevel,
    reason: RiskReason,
    fragmentation: Option<f64>,
) -> &'static str {
    if fragmentation.is_some_and(|f| f >= super::fragmentation::BANDS.moderate_below)
        && level >= RiskLevel::Medium
    {
        return "Fragmented cache: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, avoid mixing many tensor shapes, call torch.cuda.empty_cache() at phase boundaries";
    }
    match (level, reason) {
        (RiskLevel::Low, _) => "No action needed",
        (_, RiskReason::AllocRetries) => "The allocator is flushing its cache to fit allocations: reduce the batch size or sequence length, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        (RiskLevel::Critical, _) => "Reduce batch size immediately, or checkpoint now: memory will run out within a minute",
        (RiskLevel::High, RiskReason::Eta) => "Memory keeps growing towards the limit: look for a leak (tensors kept across steps, growing caches), reduce batch size, enable gradient checkpointing",
        (RiskLevel::High, _) => "Little headroom left: reduce batch size, enable gradient checkpointing or mixed precision",
        _ => "Watch memory growth; consider gradient checkpointing or mixed precision for more headroom",
    }
}

#[cfg(test)]
mod tests {
    use super::super::evidence::testing::{params, trend, GIB};
    use super::super::evidence::{credible, RISE_WAIT};
    use super::*;

    fn part(need: f64, held: f64, trend: Option<Trend>, age: f64) -> DemandPart {
        DemandPart {
            need,
            held,
            asks: true,
            trend: trend.filter(|t| age >= params().warmup && credible(t, &params())),
            fallback: None,
            segments: None,
        }
    }

    #[test]
    fn eta_on_a_clean_ramp_is_right_within_5_percent() {
        let rate = 2.0 * GIB / 60.0;
        let demand = |t: f64| 10.0 * GIB + rate * t;
        let now = 200.0;
        let p = part(demand(now), demand(now), trend(demand, now), now);
        let e = eta(25.0 * GIB, &[p], 0, &params()).expect("an ETA on a clean ramp");
        let truth = (25.0 * GIB - demand(now)) / rate;
        assert!(
            (e.seconds - truth).abs() / truth < 0.05,
            "{} vs {truth}",
            e.seconds
        );
        assert!(e.lower <= e.seconds);
        // A smooth rise has been seen for its trend's span.
        let span = p.trend.unwrap().span;
        assert_eq!(e.seen, Some(span));
    }

    #[test]
    fn the_failing_request_comes_before_free_reaches_zero() {
        // The next step needs one more 786 MiB request than the process holds: the room is
        // gone that much earlier.
        let rate = 2.0 * GIB / 60.0;
        let demand = |t: f64| 10.0 * GIB + rate * t;
        let request = 786.0 * 1048576.0;
        let held = part(demand(100.0), demand(100.0), trend(demand, 100.0), 100.0);
        let stepping = DemandPart {
            need: held.need + request,
            ..held
        };
        let without = eta(20.0 * GIB, &[held], 0, &params()).unwrap().seconds;
        let with = eta(20.0 * GIB, &[stepping], 0, &params()).unwrap().seconds;
        assert!(
            (without - with - request / rate).abs() < 1.0,
            "{without} {with}"
        );
    }

    #[test]
    fn a_loading_ramp_is_not_an_oom() {
        // A young process loading 30 GiB over 40 s: its own ramp does not count yet.
        let load = |t: f64| GIB * (0.75 * t).min(30.0);
        let young = part(load(30.0), load(30.0), trend(load, 30.0), 30.0);
        assert!(eta(80.0 * GIB, &[young], 0, &params()).is_none());
        // An old process that allocated a 20 GiB buffer once: a change of level, no slope.
        let step = |t: f64| GIB * if t < 100.0 { 10.0 } else { 30.0 };
        for now in [105.0, 130.0, 200.0] {
            let old = part(step(now), step(now), trend(step, now), now);
            assert!(eta(80.0 * GIB, &[old], 0, &params()).is_none(), "at {now}");
        }
    }

    #[test]
    fn a_neighbours_cache_is_not_given_back() {
        let rate = 0.1 * GIB;
        let grow = |t: f64| 10.0 * GIB + rate * (t - 300.0);
        // The leaker needs 10 GiB at its peak and holds 12; the neighbour needs 5 and holds 20.
        let parts = [
            part(10.0 * GIB, 12.0 * GIB, trend(grow, 300.0), 300.0),
            part(5.0 * GIB, 20.0 * GIB, None, 300.0),
        ];
        let e = eta(40.0 * GIB, &parts, 0, &params()).unwrap();
        // The leaker fails first: 40 - 10 - 20 = 10 GiB of room at 0.1 GiB/s.
        assert!((e.seconds - 100.0).abs() / 100.0 < 0.02, "{}", e.seconds);
    }

    #[test]
    fn a_neighbour_grows_into_its_own_cache_before_the_room() {
        let rate = 0.1 * GIB;
        let grow = |t: f64| 10.0 * GIB + rate * (t - 300.0);
        // The grower needs 10 GiB and holds 20: its next 10 GiB come from its cache. The
        // other process asks for one more GiB than the 5 it holds.
        let parts = [
            part(10.0 * GIB, 20.0 * GIB, trend(grow, 300.0), 300.0),
            part(6.0 * GIB, 5.0 * GIB, None, 300.0),
        ];
        let e = eta(34.0 * GIB, &parts, 1, &params()).unwrap();
        // 34 - 20 - 6 = 8 GiB of room, reached once the grower's cache is full: 18 GiB.
        assert!((e.seconds - 180.0).abs() / 180.0 < 0.02, "{}", e.seconds);
    }

    #[test]
    fn a_flat_process_that_asks_for_nothing_does_not_fail() {
        let grow = |t: f64| 10.0 * GIB + 0.1 * GIB * t;
        let mut flat = part(30.0 * GIB, 30.0 * GIB, None, 300.0);
        flat.asks = false;
        let parts = [
            part(grow(300.0), grow(300.0), trend(grow, 300.0), 300.0),
            flat,
        ];
        assert!(eta(80.0 * GIB, &parts, 1, &params()).is_none());
        assert!(eta(80.0 * GIB, &parts, 0, &params()).is_some());
    }

    #[test]
    fn the_bounds_hold_the_point_and_an_open_upper_bound_means_growth_may_stop() {
        let rate = 2.0 * GIB / 60.0;
        let demand = |t: f64| 10.0 * GIB + rate * t;
        let p = part(demand(200.0), demand(200.0), trend(demand, 200.0), 200.0);
        let e = eta(25.0 * GIB, &[p], 0, &params()).unwrap();
        let upper = e.upper.expect("a clean ramp does not stop");
        assert!(e.lower <= ETA_LOWER_FACTOR * e.seconds + 1e-9 && e.lower > 0.0);
        assert!(upper >= ETA_UPPER_FACTOR * e.seconds - 1e-9);
        let flat = Trend {
            slope_lower: -1.0,
            ..p.trend.unwrap()
        };
        let q = DemandPart {
            trend: Some(flat),
            ..p
        };
        assert_eq!(eta(25.0 * GIB, &[q], 0, &params()).unwrap().upper, None);
    }

    #[test]
    fn a_staircase_fails_at_the_first_step_that_no_longer_fits_when_it_is_due() {
        // +1 GiB every 20 s, the last step at t = 100; 2.5 GiB of room: two more steps fit,
        // the third fails when it comes, at 160.
        let stair = |t: f64| 10.0 * GIB + (t / 20.0).floor() * GIB;
        let now = 110.0;
        let t = trend(stair, now).expect("a staircase");
        assert!(t.stairs.is_some());
        let p = part(stair(now), stair(now), Some(t), now);
        let e = eta(stair(now) + 2.5 * GIB, &[p], 0, &params()).expect("an ETA");
        assert!((e.seconds - 50.0).abs() < 1.0, "{}", e.seconds);
        // With less room than a step, the next step fails: at 120.
        let e = eta(stair(now) + 0.5 * GIB, &[p], 0, &params()).unwrap();
        assert!((e.seconds - 10.0).abs() < 1.0, "{}", e.seconds);
        // Its steps are counted, not the seconds it has been seen.
        assert_eq!(e.seen, None);
    }

    #[test]
    fn staircases_of_several_processes_fill_the_room_step_by_step() {
        // Two processes each +1 GiB every 60 s, together, the last steps at t = 120; 1.5 GiB of
        // room: one step fits, the two together do not, at 180. Between the steps the ETA
        // counts down to them; their summed slopes over the room would stand still at 45 s.
        let stair = |t: f64| 10.0 * GIB + (t / 60.0).floor() * GIB;
        let at = |now: f64| {
            let t = trend(stair, now).expect("a staircase");
            assert!(t.stairs.is_some(), "{t:?}");
            let p = part(stair(now), stair(now), Some(t), now);
            let cap = 2.0 * stair(120.0) + 1.5 * GIB;
            eta(cap, &[p, p], 0, &params()).expect("an ETA").seconds
        };
        assert!((at(125.0) - 55.0).abs() < 1.0, "{}", at(125.0));
        assert!((at(165.0) - 15.0).abs() < 1.0, "{}", at(165.0));
        // With room for both steps and one more, the third step of either fails, a gap later.
        let t = trend(stair, 125.0).unwrap();
        let p = part(stair(125.0), stair(125.0), Some(t), 125.0);
        let e = eta(2.0 * stair(120.0) + 2.5 * GIB, &[p, p], 0, &params()).unwrap();
        assert!((e.seconds - 115.0).abs() < 1.0, "{}", e.seconds);
    }

    #[test]
    fn peaks_that_rise_inside_their_caches_fail_at_the_segment_that_no_longer_fits() {
        // Two processes whose peaks rise 8 MiB/s inside their caches, 0.25 and 0.5 GiB short
        // of a 1 GiB request no longer fitting what they hold; 1.5 GiB of room beside them.
        // The first takes its segment after 32 s, the second's finds 0.5 GiB at 64 s and
        // fails. Room and caches pooled over the summed slopes would say 144 s, and stand still
        // while neither process takes anything.
        let rate = 8.0 * 1048576.0;
        let peak = |t: f64| 10.0 * GIB + rate * t;
        let now = 200.0;
        let t = trend(peak, now).expect("a rise");
        let held = 12.0 * GIB;
        let request = GIB;
        let proc = |cache: f64| DemandPart {
            segments: Some(Segments {
                cache,
                size: request,
            }),
            ..part(held - cache, held, Some(t), now)
        };
        let parts = [proc(0.25 * GIB), proc(0.5 * GIB)];
        let cap = 2.0 * held + 1.5 * GIB;
        let e = eta(cap, &parts, 0, &params()).expect("an ETA");
        assert!((e.seconds - 64.0).abs() < 1.0, "{}", e.seconds);
        // Ten seconds on, both caches 80 MiB fuller: ten seconds less, nothing else moved.
        let later = [
            proc(0.25 * GIB - 10.0 * rate),
            proc(0.5 * GIB - 10.0 * rate),
        ];
        let e = eta(cap, &later, 1, &params()).expect("an ETA");
        assert!((e.seconds - 54.0).abs() < 1.0, "{}", e.seconds);
        // Room for both segments: the first's second segment fails, 128 s after its first.
        let e = eta(cap + GIB, &parts, 0, &params()).expect("an ETA");
        assert!((e.seconds - 160.0).abs() < 1.0, "{}", e.seconds);
    }

    #[test]
    fn a_step_that_does_not_come_takes_the_forecast_back() {
        // +1 GiB every 20 s until t = 100, then nothing: 0.5 GiB of room, so the next step
        // would fail. The ETA does not count down to 0 and stay there: it grows while the
        // step is late, and the trend is gone once 1.5 gaps have passed.
        let stair = |t: f64| 10.0 * GIB + (t.min(100.0) / 20.0).floor() * GIB;
        let cap = stair(100.0) + 0.5 * GIB;
        let at = |now: f64| {
            let t = trend(stair, now).filter(|t| credible(t, &params()));
            t.and_then(|t| {
                eta(
                    cap,
                    &[part(stair(now), stair(now), Some(t), now)],
                    0,
                    &params(),
                )
            })
        };
        let due = at(110.0).expect("the next step is due at 120").seconds;
        assert!((due - 10.0).abs() < 1.0, "{due}");
        // Late, the step is expected as much later as it is late: the ETA grows.
        let late = at(122.0).expect("still within 1.5 gaps").seconds;
        let later = at(128.0).expect("still within 1.5 gaps").seconds;
        assert!(
            later > late,
            "{late} then {later}: a late step is not a countdown"
        );
        assert!(at(131.0).is_none(), "1.5 gaps without a step");
        // With room for two more steps, a late step makes every gap that long.
        let roomy = |now: f64| {
            let t = trend(stair, now).filter(|t| credible(t, &params()))?;
            let p = part(stair(now), stair(now), Some(t), now);
            eta(cap + 2.0 * GIB, &[p], 0, &params())
        };
        assert!(roomy(128.0).unwrap().seconds > roomy(110.0).unwrap().seconds);
        // A smooth rise that stopped is taken back after `RISE_WAIT`.
        let ramp = |t: f64| 10.0 * GIB + 0.05 * GIB * t.min(200.0);
        assert!(trend(ramp, 200.0).is_some_and(|t| credible(&t, &params())));
        let quiet = trend(ramp, 200.0 + RISE_WAIT + 2.0).unwrap();
        assert!(!credible(&quiet, &params()), "quiet for {} s", quiet.quiet);
    }

    #[test]
    fn a_rise_that_slows_to_a_level_with_room_to_spare_is_no_oom() {
        // A cache warming up by steps every 12 s, each half the last, towards 30 GiB: a
        // staircase (whose steps keep coming) that slows down.
        let warm = |t: f64| 30.0 * GIB - 16.0 * GIB * 0.5f64.powf((t / 12.0).floor());
        let now = 100.0;
        let t = trend(warm, now).expect("a rise");
        assert!(t.stairs.is_some() && credible(&t, &params()), "{t:?}");
        assert!(t.saturation.is_some(), "a saturating rise");
        let p = part(warm(now), warm(now), Some(t), now);
        assert!(eta(32.0 * GIB, &[p], 0, &params()).is_none());
        // The same rise towards a level the card cannot hold is on course to fail.
        let tight = 30.0 * GIB - 0.5 * (30.0 * GIB - warm(now));
        assert!(eta(tight, &[p], 0, &params()).is_some());
        // A rise that keeps its rate is no saturation.
        let line = |t: f64| 10.0 * GIB + 0.05 * GIB * t;
        assert!(trend(line, now).unwrap().saturation.is_none());
    }

    #[test]
    fn a_rise_that_slows_towards_a_level_past_the_card_fills_it_at_the_curves_pace() {
        // 10 GiB, then 40 GiB more along 1 - e^(-t/50), read at 50 s: at 35.3 GiB, 14.7 GiB
        // short of its level and rising at 0.29 GiB/s, where the line through its 50 s rises
        // at 0.5 GiB/s. The card holds 45 GiB: the curve takes the 9.7 GiB of room (less a
        // segment) in 50 ln(14.7 / 5.0) = 54 s; the line would say 19 s.
        let warm = |t: f64| 10.0 * GIB + 40.0 * GIB * (1.0 - (-t / 50.0).exp());
        let now = 50.0;
        let t = trend(warm, now).expect("a rise");
        let s = t.saturation.expect("a rise that slows");
        assert!(s.tau.is_some() && t.stairs.is_none(), "{t:?}");
        // A process up for 100 s (past its warm-up) whose rise began at its 50th.
        let p = part(warm(now), warm(now), Some(t), 100.0);
        let e = eta(45.0 * GIB, &[p], 0, &params()).expect("the level does not fit");
        assert!((48.0..60.0).contains(&e.seconds), "{}", e.seconds);
        // A level the card holds with a segment to spare: no ETA.
        assert!(eta(51.0 * GIB, &[p], 0, &params()).is_none());
    }

    #[test]
    fn a_reading_that_cannot_say_when_gives_way_to_one_that_can() {
        let now = 100.0;
        // The high-water mark's reading: 1 GiB every 5 s, twenty steps, room for 41 more.
        let parts_of = |t: f64| 10.0 * GIB + (t / 5.0).floor() * GIB;
        let fine = trend(parts_of, now).unwrap();
        assert!(fine.stairs.is_some_and(|s| s.count >= 19), "{fine:?}");
        // The allocator's record: 12 GiB every 40 s, two steps, room for three more.
        let whole = |t: f64| 10.0 * GIB + (t / 40.0).floor() * 12.0 * GIB;
        let coarse = trend(whole, now).unwrap();
        assert!(coarse.stairs.is_some_and(|s| s.count == 2), "{coarse:?}");
        let mut p = part(whole(now), whole(now), Some(fine), now);
        let capacity = whole(now) + 41.0 * GIB;
        assert!(eta(capacity, &[p], 0, &params()).is_none());
        p.fallback = Some(coarse);
        let e = eta(capacity, &[p], 0, &params()).expect("the record's staircase says when");
        assert!(
            (e.seconds - (20.0 + 3.0 * 40.0)).abs() < 5.0,
            "{}",
            e.seconds
        );
    }

    #[test]
    fn a_staircase_is_extrapolated_over_at_most_twice_the_steps_it_has_shown() {
        // Two steps of 2 GiB, 40 s apart (a checkpoint's copy taken twice).
        let stair = |t: f64| 10.0 * GIB + (t / 40.0).floor().min(2.0) * 2.0 * GIB;
        let now = 100.0;
        let t = trend(stair, now).unwrap();
        assert_eq!(t.stairs.map(|s| s.count), Some(2), "{t:?}");
        let p = part(stair(now), stair(now), Some(t), now);
        // Room for six more steps: a rise that may well end, no ETA.
        assert!(eta(14.0 * GIB + 6.5 * 2.0 * GIB, &[p], 0, &params()).is_none());
        // Room for three: the fourth step fails, on the staircase's schedule.
        let e = eta(14.0 * GIB + 3.5 * 2.0 * GIB, &[p], 0, &params()).expect("three steps ahead");
        assert!(
            (e.seconds - (20.0 + 3.0 * 40.0)).abs() < 5.0,
            "{}",
            e.seconds
        );
    }

    #[test]
    fn tight_headroom_is_tight_only_without_high_risk() {
        let p = RiskParams::from_config(&crate::config::RiskConfig::default());
        assert!(tight(RiskLevel::Medium, 2, 0.5, &p));
        assert!(tight(RiskLevel::Low, 0, 0.97, &p));
        assert!(!tight(RiskLevel::Low, 0, 0.8, &p));
        assert!(!tight(RiskLevel::High, 2, 0.97, &p));
    }

    #[test]
    fn a_level_stands_on_an_eta_within_its_band_and_falls_when_the_eta_is_gone() {
        let p = RiskParams::from_config(&crate::config::RiskConfig::default());
        let eta = |s: f64| RiskInputs {
            eta: Some(s),
            rising: true,
            ..Default::default()
        };
        let level = |i: RiskInputs, standing: RiskLevel| {
            let standing = Risk {
                level: standing,
                reason: RiskReason::Eta,
            };
            assess(&i, &p, Some(standing)).0
        };
        let past = p.critical_eta * 1.1;
        // Reached from below, a threshold is the threshold; once critical, an ETA hovering a
        // little past it keeps the page, one far past it or none at all does not.
        assert_eq!(level(eta(past), RiskLevel::Low), RiskLevel::High);
        assert_eq!(level(eta(past), RiskLevel::Critical), RiskLevel::Critical);
        let beyond = p.critical_eta * (ETA_BAND + 0.05);
        assert_eq!(level(eta(beyond), RiskLevel::Critical), RiskLevel::High);
        assert_eq!(
            level(RiskInputs::default(), RiskLevel::Critical),
            RiskLevel::Low
        );
        // The same band under high.
        let past_high = p.high_eta * 1.1;
        assert_eq!(level(eta(past_high), RiskLevel::Medium), RiskLevel::Medium);
        assert_eq!(level(eta(past_high), RiskLevel::High), RiskLevel::High);
        assert_eq!(level(eta(past_high), RiskLevel::Critical), RiskLevel::High);
    }

    #[test]
    fn a_smooth_rise_is_critical_only_once_it_has_been_seen_as_long_as_its_eta() {
        let p = RiskParams::from_config(&crate::config::RiskConfig::default());
        let level = |eta: f64, seen: Option<f64>, standing: RiskLevel| {
            let i = RiskInputs {
                eta: Some(eta),
                eta_seen: seen,
                rising: true,
                ..Default::default()
            };
            let standing = Risk {
                level: standing,
                reason: RiskReason::Eta,
            };
            assess(&i, &p, Some(standing)).0
        };
        // 40 s left on a rise seen for 20 s: it may yet level off, a warning.
        assert_eq!(level(40.0, Some(20.0), RiskLevel::High), RiskLevel::High);
        // Seen for 40 s, it fills the room even if it levels off now.
        assert_eq!(
            level(40.0, Some(40.0), RiskLevel::High),
            RiskLevel::Critical
        );
        // A schedule of steps is critical on its ETA alone.
        assert_eq!(level(40.0, None, RiskLevel::High), RiskLevel::Critical);
        // Once critical, the ETA may wander within the band past the seconds seen, not further.
        assert_eq!(
            level(45.0, Some(40.0), RiskLevel::Critical),
            RiskLevel::Critical
        );
        assert_eq!(
            level(55.0, Some(40.0), RiskLevel::Critical),
            RiskLevel::High
        );
    }

    #[test]
    fn memory_rising_now_keeps_the_level_reached_and_nothing_else_does() {
        let p = RiskParams::from_config(&crate::config::RiskConfig::default());
        let critical = Some(Risk {
            level: RiskLevel::Critical,
            reason: RiskReason::Eta,
        });
        let rising = RiskInputs {
            growing_now: true,
            ..Default::default()
        };
        // A step caught half risen: no ETA at this analysis, memory moving up.
        assert_eq!(assess(&rising, &p, critical).0, RiskLevel::Critical);
        // It stopped: no ETA, nothing moves, the level falls at once.
        assert_eq!(
            assess(&RiskInputs::default(), &p, critical).0,
            RiskLevel::Low
        );
        // A rise raises nothing that was not reached on an ETA before.
        assert_eq!(assess(&rising, &p, None).0, RiskLevel::Low);
    }

    #[test]
    fn risk_levels() {
        let p = RiskParams::from_config(&crate::config::RiskConfig::default());
        let a = |i: RiskInputs| assess(&i, &p, None);
        assert_eq!(a(RiskInputs::default()), (RiskLevel::Low, RiskReason::None));
        assert_eq!(
            a(RiskInputs {
                eta: Some(30.0),
                ..Default::default()
            })
            .0,
            RiskLevel::Critical
        );
        assert_eq!(
            a(RiskInputs {
                eta: Some(200.0),
                ..Default::default()
            })
            .0,
            RiskLevel::High
        );
        assert_eq!(
            a(RiskInputs {
                eta: Some(1000.0),
                ..Default::default()
            })
            .0,
            RiskLevel::Medium
        );
        assert_eq!(
            a(RiskInputs {
                used_fraction: Some(0.9),
                ..Default::default()
            }),
            (RiskLevel::Medium, RiskReason::UsedFraction)
        );
        // Full and flat (a server that took 90 % up front) is not high risk; full and rising is.
        assert_eq!(
            a(RiskInputs {
                used_fraction: Some(0.97),
                ..Default::default()
            })
            .0,
            RiskLevel::Medium
        );
        assert_eq!(
            a(RiskInputs {
                used_fraction: Some(0.97),
                rising: true,
                ..Default::default()
            })
            .0,
            RiskLevel::High
        );
        assert_eq!(
            a(RiskInputs {
                used_fraction: Some(0.5),
                recent_retries: 3,
                ..Default::default()
            }),
            (RiskLevel::Medium, RiskReason::AllocRetries)
        );
        assert_eq!(
            a(RiskInputs {
                recent_retries: 1,
                rising: true,
                ..Default::default()
            }),
            (RiskLevel::High, RiskReason::AllocRetries)
        );
    }
}
