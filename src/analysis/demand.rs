//! One process's demand on one GPU: what it asks the driver for, what it needs to get through
//! its next step, what it holds, and whether that need grows. The OOM forecast (`oom::eta`)
//! reads one `DemandPart` per process from here.
//!
//! Fed by the engine: the allocator's statistics as they arrive (`allocator`), a rise in the
//! driver's bytes for a process that does not report (`driver_rise`), and once per analysis
//! the process's state at that moment (`update`). Pure: time is the samples' timestamps.

use std::collections::VecDeque;

use super::loading::Loading;
use super::oom::{self, DemandPart, EtaParams};
use super::rounds::Rounds;
use super::trend::{fit_demand, saturation_through, steps, Reading, Trend};
use super::{cache, evidence};
use crate::history::Series;
use crate::model::{DeviceStats, Time};

/// What a process holds outside its allocator (the CUDA context, libraries) is its median over
/// this window: NVML's reading and the allocator's report come a moment apart, and a cache taken
/// or given back between them would otherwise read as overhead, or its absence, for a report.
const OVERHEAD_WINDOW: f64 = 10.0;

/// Points a demand trend is fitted on at most: a longer window is read in wider buckets (the
/// fit's cost grows with the square of its points).
const FIT_POINTS: usize = 120;
/// Large segments are rounded to 2 MiB: two taken for requests of one size are within this of
/// each other.
const SEGMENT_ROUNDING: f64 = 2.0 * 1048576.0;

/// `points` in at most `n` groups of neighbours, each its last time and its highest value
/// (demand is a high-water mark). Groups lie on a grid of fixed times, the newest one ending at
/// the newest point: groups counted back from the newest point would fall differently at every
/// new point, and a staircase read from them would change its steps every other second
/// (c-eval-kept: steps of 7.8 and 1.4 GB by turns, and an ETA there and gone by turns). The
/// grid's width is the finest spacing times a power of two, wide enough for `n` groups over
/// the span: it changes only when the span doubles, and points of a coarser tier (5 s apart
/// beside 1 s) are not counted as if they were as close as the finest.
fn coarsened(points: &[(f64, f64)], n: usize) -> Vec<(f64, f64)> {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return Vec::new();
    };
    if points.len() <= n.max(1) {
        return points.to_vec();
    }
    let spacing = points
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .filter(|d| *d > 0.0)
        .fold(f64::INFINITY, f64::min);
    // One more group than the span holds: the grid's ends cut the first and last groups.
    let needed = (last.0 - first.0) / (n.max(2) - 1) as f64;
    let mut width = spacing;
    while width < needed {
        width *= 2.0;
    }
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(n + 2);
    let mut group = None;
    for &(t, v) in points {
        // Half a spacing in, so that a point on a boundary is not split by rounding.
        let g = ((t + 0.5 * spacing) / width).floor();
        match out.last_mut() {
            Some(last) if group == Some(g) => *last = (t, last.1.max(v)),
            _ => {
                out.push((t, v));
                group = Some(g);
            }
        }
    }
    out
}

/// Segments a process keeps the size of, however long ago it took them.
const SEGMENTS_KEPT: usize = 8;

/// The high-water mark of a process's allocated bytes is taken over this window: a step's
/// peak is caught by a 1 s report only now and then, and the allocator's own peak only when it
/// sets a new record.
const HIGH_WATER_WINDOW: f64 = 10.0;

/// The three readings of a process's need that its growth is fitted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    /// What it needs to get through its next step (`Demand::need`).
    Need,
    /// The high-water mark of its allocated bytes (`Demand::peak_need`).
    Peak,
    /// The allocator's own record of its peak (`Demand::record_need`).
    Record,
}

impl View {
    /// What its points read: the peak view is a high-water mark; the others are bytes in use
    /// while the allocator reports, else the driver's segments.
    fn reading(self, reports: bool) -> Reading {
        match self {
            View::Peak => Reading::HighWater,
            _ if reports => Reading::InUse,
            _ => Reading::Segments,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            View::Need => "need",
            View::Peak => "peak",
            View::Record => "record",
        }
    }
}

/// What the demand model reads from the configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DemandParams {
    pub eta: EtaParams,
    /// The forecast's window: segments, give-backs and the trend's points are taken over it.
    pub window: f64,
}

impl DemandParams {
    pub fn from_config(a: &crate::config::AnalysisConfig) -> Self {
        DemandParams {
            eta: EtaParams::from_config(a),
            window: a.eta_window.as_secs_f64(),
        }
    }
}

/// The process as one analysis sees it.
#[derive(Debug, Clone, Copy)]
pub struct Moment<'a> {
    /// NVML lists it now, or it reports: only then does it hold or need anything.
    pub active: bool,
    /// Its allocator's latest statistics, while it reports.
    pub allocator: Option<&'a DeviceStats>,
    /// NVML's bytes for it, while NVML lists it.
    pub driver_bytes: Option<u64>,
    /// Its allocated bytes as reported, over time.
    pub allocated: &'a Series,
    /// Its allocator's largest free block as last measured (the client measures it less
    /// often than it reports; a report that carries it is the last measurement), while recent.
    pub largest_free_block: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Demand {
    appeared: Time,
    /// The allocated bytes the next free must fall from (its maximum since the process
    /// appeared), until the first free.
    high: f64,
    /// When the allocator first freed memory: the leak test's history starts there.
    first_free: Option<Time>,
    /// The rise of its footprint from its appearance, which ends by itself.
    loading: Loading,
    /// The allocator's peak of allocated bytes and when it last rose.
    peak: Option<(u64, Time)>,
    /// Segments taken from the driver (time, bytes) within the window, and at least the last
    /// `SEGMENTS_KEPT` of any age: a slow job takes a segment now and then, and the size of
    /// what it asks for does not change with its pace.
    segments: VecDeque<(Time, f64)>,
    /// What it needs to get through its next step, one point per analysis (fine over the
    /// window, coarser over the history: what it needed before the window).
    need: Series,
    /// The high-water mark of the allocator's bytes plus the process's overhead (reporting
    /// processes): its steps show a staircase the held bytes hide while the cache absorbs it.
    peak_need: Series,
    /// The allocator's own record of its peak plus the overhead (reporting processes): a
    /// 1 s report catches a step's peak only by luck, the allocator saw every one. A batch that
    /// grows every stage raises it stage by stage while the cache still absorbs the steps.
    record_need: Series,
    held: f64,
    /// What it needs at the last analysis, exact: `need` keeps its points at the history's
    /// precision (a few KiB at GPU scale), and a need rounded up past what is held would read
    /// as a request for memory.
    need_now: f64,
    /// What it held from the driver, over time (its footprint).
    footprint: Series,
    /// What it holds outside the allocator (NVML's bytes less the allocator's reserved), over
    /// the last `OVERHEAD_WINDOW` seconds.
    overheads: VecDeque<(Time, f64)>,
    /// When it last gave memory back to the driver (an emptied cache, the end of an evaluation
    /// phase): it will ask for it again.
    gave_back_at: Option<Time>,
    /// Its credible growth.
    trend: Option<Trend>,
    /// The need's own credible growth where a steeper view of its peaks was chosen, for when
    /// that view cannot say when it fails (`oom::eta`). Only the need: what the process holds
    /// or keeps allocated now. The allocator's record of a peak rises with a one-off (a
    /// checkpoint's gathered copy) as much as with growth, and never falls back. Boxed: rarely
    /// there, and a process's books stay small at 64 processes a GPU.
    fallback: Option<Box<Trend>>,
    /// The rounds it takes and gives back, and whether their peaks rise (whether or not they
    /// are the steepest reading of its growth).
    rounds: Rounds,
    rounds_rise: bool,
    /// Where its growth is a view of its allocator's peak whose next step its cache can still
    /// serve (the peak and a request, a segment short of what it holds): that peak and request,
    /// the need the room is measured from instead of what it holds.
    served_need: Option<f64>,
    /// Where its growth is a view of its peak that rises smoothly, the size of its requests
    /// known and its cache serving them: how the driver will see that growth.
    in_segments: Option<oom::Segments>,
    /// What its cache would give back at its peak, now and over the last minutes.
    spares: cache::Spares,
    /// The last analysis at which, without its allocator's report, its latest steps each
    /// took more than the one before and the earlier ones could hold the next: the segments
    /// of a request that grows, which the allocator gives back before it refuses the next
    /// (`update`). A step seen before it was the cache's, also once the window has slid past
    /// the steps that told.
    requests_grew_at: Option<Time>,
}

impl Demand {
    /// A process first seen at `t`; `history` is an empty series of the shape its need is kept
    /// in, `floors` one for what it holds (read by the leak test only).
    pub fn new(t: Time, history: Series, floors: Series) -> Self {
        Demand {
            appeared: t,
            high: 0.0,
            first_free: None,
            loading: Loading::new(),
            peak: None,
            segments: VecDeque::new(),
            need: history.clone(),
            peak_need: history.clone(),
            record_need: history,
            footprint: floors,
            overheads: VecDeque::new(),
            held: 0.0,
            need_now: 0.0,
            gave_back_at: None,
            trend: None,
            rounds: Rounds::new(),
            rounds_rise: false,
            served_need: None,
            in_segments: None,
            spares: cache::Spares::default(),
            fallback: None,
            requests_grew_at: None,
        }
    }

    pub fn appeared(&self) -> Time {
        self.appeared
    }

    /// The last analysis at which its steps read as segments of a request that grows, which
    /// the earlier ones could hold (`update`): a step taken before it that the room
    /// does not hold is no failure.
    pub fn requests_grew_at(&self) -> Option<Time> {
        self.requests_grew_at
    }

    /// When its loading ended (`analysis::loading`), once it has: its growth counts from
    /// there.
    pub fn loaded_from(&self) -> Option<Time> {
        self.loading.ended()
    }

    /// Where a leak test of the process's bytes starts: its first free, or the end of its
    /// loading (at most `EtaParams::warmup` after it appeared).
    pub fn leak_from(&self, p: &DemandParams) -> Time {
        let loaded = self.loaded_from().unwrap_or(self.appeared + p.eta.warmup);
        self.first_free.map_or(loaded, |t| t.min(loaded))
    }

    /// What it held from the driver, over time.
    pub fn footprint(&self) -> &Series {
        &self.footprint
    }

    /// What its cache would give back at its peak, over the last minutes.
    pub fn spares(&self) -> &cache::Spares {
        &self.spares
    }

    /// The credible growth of its need, as of the last `update`.
    pub fn trend(&self) -> Option<Trend> {
        self.trend
    }

    /// Its allocator reported `now` after `prev`.
    pub fn allocator(&mut self, t: Time, prev: Option<&DeviceStats>, now: &DeviceStats) {
        if let Some(prev) = prev {
            // New segments: their mean size is the size of request the allocator had to take
            // from the driver.
            if now.reserved_bytes > prev.reserved_bytes {
                let n = match (now.segments, prev.segments) {
                    (Some(a), Some(b)) if a > b => a - b,
                    _ => 1,
                };
                let size = (now.reserved_bytes - prev.reserved_bytes) as f64 / n as f64;
                self.segments.push_back((t, size));
            }
        }
        if self.first_free.is_none() {
            let allocated = now.allocated_bytes as f64;
            if allocated < self.high - oom::MIN_STEP_BYTES {
                self.first_free = Some(t);
            }
            self.high = self.high.max(allocated);
        }
        if let Some(pk) = now.allocated_peak_bytes {
            if self.peak.is_none_or(|(old, _)| pk > old) {
                self.peak = Some((pk, t));
            }
        }
    }

    /// The driver's bytes for a process that does not report rose by `bytes` at `t`: the size
    /// of what it took.
    pub fn driver_rise(&mut self, t: Time, bytes: f64) {
        self.segments.push_back((t, bytes));
    }

    /// One analysis at `now`: the need and held bytes of this moment, and the growth.
    pub fn update(&mut self, now: Time, m: &Moment, p: &DemandParams) {
        while self.segments.len() > SEGMENTS_KEPT
            && self.segments.front().is_some_and(|s| s.0 < now - p.window)
        {
            self.segments.pop_front();
        }
        // What its cache would give back at its peak (none while it does not report).
        let mut spare = 0.0;
        if m.active {
            if let (Some(a), Some(u)) = (m.allocator, m.driver_bytes) {
                self.overheads
                    .push_back((now, (u as f64 - a.reserved_bytes as f64).max(0.0)));
            }
            while self
                .overheads
                .front()
                .is_some_and(|o| o.0 < now - OVERHEAD_WINDOW)
            {
                self.overheads.pop_front();
            }
            let overhead = self.overhead();
            let peak = self.peak_need(m, now, overhead);
            let (need, held) = self.need_and_held(m, peak);
            let was_loaded = self.loaded_from();
            self.loading
                .push(now, held, peak, p.eta.warmup, oom::MIN_STEP_BYTES);
            self.need.push(now, need);
            self.need_now = need;
            if self.loaded_from().is_some() && held < self.held - oom::MIN_STEP_BYTES {
                self.gave_back_at = Some(now);
            }
            self.held = held;
            self.footprint.push(now, held);
            self.rounds.push(now, held, p.window);
            if self.loaded_from() != was_loaded && self.loaded_from().is_some() {
                self.rounds.loaded(now, held);
            }
            if let Some(peak) = peak {
                self.peak_need.push(now, peak);
            }
            let record = self.record_need(m, overhead);
            if let Some(record) = record {
                self.record_need.push(now, record);
            }
            if let Some(a) = m.allocator {
                let top = peak.into_iter().chain(record).reduce(f64::max);
                spare = cache::spare_at_peak(a, held, top.unwrap_or(held));
            }
        }
        // Only the points since loading ended: a loading ramp is no part of the trend, and a
        // trend becomes credible only once it has lasted `eta_min_span` after it.
        // Of the two views of its growth, the steeper credible one: the held bytes grow
        // faster than the peak when split segments serve new peaks only in part, the peak
        // shows steps the cache absorbs for a while.
        // Demand counts as growth only above what the process already needed before the
        // window, its loading included: a peak that comes back to the same height (an
        // evaluation, a burst of requests, a cache taken again after `empty_cache`) is a
        // recurring need, not growth.
        // Rounds that rise are growth whether or not the round under way is loading.
        let rounds = self.rounds.trend(now);
        tracing::trace!(at = now, rounds = ?self.rounds, trend = rounds.is_some(), "demand rounds");
        self.rounds_rise = rounds.is_some();
        self.served_need = None;
        self.in_segments = None;
        self.spares.push(now, spare);
        let Some(loaded) = self.loaded_from() else {
            self.trend = rounds;
            return;
        };
        let from = loaded.max(now - p.window);
        let rise_began = self.loading.rise_began();
        let fit = |s: &Series, reading: Reading| {
            let before = s.max_before(from).unwrap_or(f64::NEG_INFINITY);
            let points: Vec<(f64, f64)> =
                s.since(from).map(|b| (b.t, b.max().max(before))).collect();
            // Where the window cut the history after loading, the level it cut began when the
            // series reached it (the loading's end at the earliest): the time before its first
            // step is a tread from there, as it was before the window slid past that moment.
            // Unknown where the oldest bucket kept had already reached it.
            let start = if from == loaded {
                Some(loaded)
            } else {
                points
                    .first()
                    .and_then(|p| s.first_reached(p.1 - oom::MIN_STEP_BYTES))
                    .filter(|&(r, oldest)| !oldest || r <= loaded)
                    .map(|(r, _)| r.max(loaded))
            };
            let tail = coarsened(&points, FIT_POINTS);
            let mut t = fit_demand(&tail, oom::MIN_STEP_BYTES, start, reading)?;
            // A rise that went on past the loading's cap is one rise from where that loading
            // began: whether it slows is read over all of it, not over its tail alone, where a
            // line through the window is steeper than its pace now.
            if let Some(began) = rise_began.filter(|_| from == loaded) {
                let whole: Vec<(f64, f64)> = s.since(began).map(|b| (b.t, b.max())).collect();
                if let Some(sat) = saturation_through(&coarsened(&whole, FIT_POINTS), &tail) {
                    t.saturation = Some(sat);
                }
            }
            Some(t)
        };
        // Read over the whole window, loading included: a warm-up's first new largest
        // batches come while its loading is still read as one. Memory given back within it
        // says otherwise: the allocator flushed its cache under pressure (a refused request)
        // and took the memory again, so the earlier segments were not enough to spare (a
        // curriculum whose every stage needs all it holds and more).
        let requests_grow =
            m.allocator.is_none() && self.gave_back_at.is_none_or(|t| t < now - p.window) && {
                let window: Vec<(f64, f64)> = self
                    .need
                    .since(now - p.window)
                    .map(|b| (b.t, b.max()))
                    .collect();
                steps(&coarsened(&window, FIT_POINTS), oom::MIN_STEP_BYTES, false)
                    .growing
                    .is_some_and(|g| g.earlier >= g.next)
            };
        if requests_grow {
            self.requests_grew_at = Some(now);
        }
        // Records that stop coming (the longest sequence so far, the largest burst) stop
        // counting once their next step is no longer due (`fit_demand`).
        let trace = tracing::enabled!(tracing::Level::TRACE);
        let mut best: Option<Trend> = None;
        let mut fallback: Option<Trend> = None;
        let mut best_view: Option<View> = None;
        let request = self.request();
        for (view, s) in [
            (View::Need, &self.need),
            (View::Peak, &self.peak_need),
            (View::Record, &self.record_need),
        ] {
            let Some(t) = fit(s, view.reading(m.allocator.is_some())) else {
                continue;
            };
            // Steps of what it holds that its empty segments would serve at its peak, with a
            // request to spare, are its cache's: a request the driver refuses makes the
            // allocator give those back and try again (a warm-up whose every record batch
            // took a segment of its own, holding the card at 97 % with a fifth of it in use).
            // Free bytes split among live blocks are given back by nobody.
            let cache_steps =
                view == View::Need && t.stairs.is_some_and(|st| spare >= st.step + request);
            // Without the allocator's report nothing says which segments are empty, but steps
            // that each take more than the one before are what the allocator takes for a
            // request that grows (a new largest batch, a segment of the whole request each
            // time none it holds is large enough): the earlier segments are free when the next
            // one comes, and a refused request makes it give them back and try again. Where
            // they could hold the next step, the steps are its cache's. Kept tensors come in
            // steps of one size (an evaluation's outputs, a trial's leak).
            let growing_request = view == View::Need && t.stairs.is_some() && requests_grow;
            let credible = !cache_steps && !growing_request && evidence::credible(&t, &p.eta);
            // A high-water mark holds a one-off (a checkpoint's gathered copy) for its whole
            // window: a step of it is kept only once it outlived the window.
            let outlived = view != View::Peak
                || t.stairs
                    .is_none_or(|st| now - st.reached > HIGH_WATER_WINDOW);
            // The costlier test, for a credible trend only (or for the log).
            let persistent = (credible || trace)
                && outlived
                && evidence::persistent(&t, s, from, now, &evidence::PERSISTENCE);
            if trace {
                tracing::trace!(
                    at = now,
                    view = view.as_str(),
                    slope = t.slope,
                    span = t.span,
                    p_value = t.p_value,
                    recent_slope = t.recent_slope,
                    quiet = t.quiet,
                    stairs = ?t.stairs,
                    saturation = ?t.saturation,
                    credible,
                    persistent,
                    "demand trend"
                );
            }
            if !(credible && persistent) {
                continue;
            }
            if view == View::Need {
                fallback = Some(t);
            }
            if best.is_none_or(|b| t.slope >= b.slope) {
                best = Some(t);
                best_view = Some(view);
                // Requests the cache can serve are no step towards an OOM: a peak view's
                // room is measured from the peak while the cache holds its next step in one
                // free block (split blocks serve no large request).
                let level = s.newest().map_or(f64::INFINITY, |b| b.last()) + request;
                let next = t.stairs.map_or(request, |st| st.step.max(request));
                // The block as last measured, no larger than what the cache holds free now.
                let block = m.allocator.map_or(0.0, |a| {
                    let free = a.reserved_bytes.saturating_sub(a.allocated_bytes);
                    m.largest_free_block.map_or(0, |b| b.min(free)) as f64
                });
                // A request of unknown size (no step, no segment taken since loading) is
                // no request the cache is known to serve.
                self.served_need = (view != View::Need
                    && next > 0.0
                    && next <= block
                    && level + oom::MIN_STEP_BYTES <= self.held)
                    .then_some(level);
                // Served there, a smooth rise reaches the driver in segments of the
                // request's size, the first once its peak and one request outgrow what it
                // holds.
                self.in_segments = self
                    .served_need
                    .filter(|_| t.stairs.is_none() && request >= oom::MIN_STEP_BYTES)
                    .map(|_| oom::Segments {
                        cache: (self.held - level).max(0.0),
                        size: request,
                    });
            }
        }
        if let Some(r) = rounds.filter(|r| best.is_none_or(|b| r.slope > b.slope)) {
            self.served_need = None;
            self.in_segments = None;
            best = Some(r);
            best_view = None;
        }
        self.trend = best;
        self.fallback = fallback
            .filter(|_| matches!(best_view, Some(View::Peak | View::Record)))
            .map(Box::new);
    }

    /// Its share of the GPU as of the last `update` at `now` (an active process).
    pub fn part(&self, now: Time, p: &DemandParams) -> DemandPart {
        let mut need = self.need_now;
        if let Some(served) = self.served_need {
            need = need.min(served);
        }
        // Its rounds rising, it needs what its highest round took, whatever it holds between
        // and whichever view's growth is the steepest: a peak view's high-water mark forgets
        // the round's peak a window after it (c-rising-peaks-7: three seconds with no ETA as
        // the next rollout began).
        if self.rounds_rise {
            need = need.max(self.rounds.peak().unwrap_or(0.0));
        }
        // Took memory from the driver, or gave some back that it will want again (an emptied
        // cache, an eval phase), within the window and after loading (a rise that ends).
        let cycles = self.gave_back_at.is_some_and(|t| t >= now - p.window)
            || self
                .loaded_from()
                .is_some_and(|l| self.segments.iter().any(|s| s.0 > l.max(now - p.window)));
        DemandPart {
            need,
            held: self.held,
            asks: need > self.held || self.trend.is_some() || cycles,
            trend: self.trend,
            fallback: self.fallback.as_deref().copied(),
            segments: self.in_segments,
        }
    }

    /// The size of request that fails: the second largest segment the process took from the
    /// driver recently (the requests that fail are the ones a step makes again and again; a
    /// buffer allocated once is no guide). Segments taken while loading do not count, but
    /// they say whether one taken since is made again: a single segment since loading of a
    /// size the process also took while loading (its first steps' activations) is a step's
    /// request, not a buffer allocated once.
    fn request(&self) -> f64 {
        let (mut first, mut second) = (0.0f64, 0.0f64);
        let loaded = self.loaded_from().unwrap_or(f64::INFINITY);
        for s in self.segments.iter().filter(|s| s.0 > loaded) {
            if s.1 > first {
                second = first;
                first = s.1;
            } else if s.1 > second {
                second = s.1;
            }
        }
        let again = |size: f64| {
            self.segments
                .iter()
                .any(|s| s.0 <= loaded && (s.1 - size).abs() < SEGMENT_ROUNDING)
        };
        if second == 0.0 && first > 0.0 && again(first) {
            first
        } else {
            second
        }
    }

    /// The high-water mark of a reporting process's allocated bytes over the last
    /// `HIGH_WATER_WINDOW` seconds, plus what it holds outside the allocator.
    fn peak_need(&self, m: &Moment, now: Time, overhead: f64) -> Option<f64> {
        let a = m.allocator?;
        let since = now - HIGH_WATER_WINDOW;
        let sampled = m
            .allocated
            .max_since(since)
            .unwrap_or(a.allocated_bytes as f64);
        // A new record of the allocator's peak is the exact peak of a recent step.
        let record = self
            .peak
            .filter(|(_, t)| *t >= since)
            .map_or(0.0, |(v, _)| v as f64);
        Some(sampled.max(record) + overhead)
    }

    /// The allocator's record of its peak plus what the process holds outside the allocator.
    fn record_need(&self, m: &Moment, overhead: f64) -> Option<f64> {
        m.allocator.and(self.peak).map(|(v, _)| v as f64 + overhead)
    }

    /// What it holds outside the allocator: the median over `OVERHEAD_WINDOW`.
    fn overhead(&self) -> f64 {
        let now = self.overheads.back().map_or(0.0, |o| o.1);
        let mut o: Vec<f64> = self.overheads.iter().map(|o| o.1).collect();
        super::stats::median(&mut o).map_or(now, |m| m.min(now))
    }

    /// Bytes the process needs to get through its next step and bytes it holds from the
    /// driver, given its `peak_need` (reporting processes).
    fn need_and_held(&self, m: &Moment, peak: Option<f64>) -> (f64, f64) {
        match (peak, m.allocator) {
            (Some(peak), Some(a)) => {
                let held = m.driver_bytes.map_or(a.reserved_bytes as f64, |u| u as f64);
                // Two ways to run out, whichever comes first. The cache keeps growing segment
                // by segment (split segments serve a new peak only in part), and the segment
                // after the last one that fits fails: on average when the free memory beside
                // the held bytes is gone. Or the next peak, with one more request of the size
                // it takes, does not fit at all.
                ((peak + self.request()).max(held), held)
            }
            _ => {
                let used = m.driver_bytes.unwrap_or(0) as f64;
                (used, used)
            }
        }
    }
}

#[cfg(test)]
mod tests;
