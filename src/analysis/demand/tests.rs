use super::*;

const GIB: f64 = 1073741824.0;
const MIB: f64 = 1048576.0;

#[test]
fn coarse_points_stay_where_they_were_as_new_points_come() {
    // 7 GiB steps every 14 s, read over 130 to 200 points (two to a group).
    let stair = |t: f64| 40.0 * GIB + (t / 14.0).floor() * 7.0 * GIB;
    let at = |now: usize| {
        let pts: Vec<(f64, f64)> = (0..=now).map(|i| (i as f64, stair(i as f64))).collect();
        coarsened(&pts, FIT_POINTS)
    };
    for now in 130..200 {
        let (a, b) = (at(now), at(now + 1));
        assert!(a.len() <= FIT_POINTS + 2, "{} points", a.len());
        assert_eq!(
            a.last().unwrap().0,
            now as f64,
            "the newest point ends a group"
        );
        // Every group but the newest is the same a second later.
        assert_eq!(a[..a.len() - 1], b[..a.len() - 1], "at {now}");
    }
    // Ten minutes: 5 s buckets, then the last two minutes in 1 s ones. The fit's cost
    // grows with the square of its points: they stay within the bound.
    let tiers: Vec<(f64, f64)> = (0..96)
        .map(|i| i as f64 * 5.0)
        .chain((480..=600).map(|i| i as f64))
        .map(|t| (t, stair(t)))
        .collect();
    let c = coarsened(&tiers, FIT_POINTS);
    assert!(c.len() <= FIT_POINTS + 1, "{} points", c.len());
    assert_eq!(c.last().unwrap().0, 600.0);
}

fn params() -> DemandParams {
    DemandParams::from_config(&crate::config::AnalysisConfig::default())
}

/// One process as the engine feeds it: reports, then one analysis per second.
struct Proc {
    demand: Demand,
    allocated: Series,
    last: Option<DeviceStats>,
    /// The largest free block as last measured (the engine keeps it between reports).
    block: Option<u64>,
    p: DemandParams,
}

impl Proc {
    fn new(t: Time) -> Self {
        Self::keeping(t, Series::tiered(1.0, 120.0, 5.0, 3600.0))
    }

    /// Its views kept in series of the shape of `history`.
    fn keeping(t: Time, history: Series) -> Self {
        let allocated = Series::tiered(1.0, 120.0, 5.0, 3600.0);
        Proc {
            demand: Demand::new(t, history.clone(), allocated.clone()),
            allocated,
            last: None,
            block: None,
            p: params(),
        }
    }

    /// A report at `t` of `allocated` and `reserved` GiB, then the analysis at `t`.
    fn step(&mut self, t: Time, allocated: f64, reserved: f64) {
        let d = DeviceStats {
            uuid: "GPU-0".into(),
            allocated_bytes: (allocated * GIB) as u64,
            reserved_bytes: (reserved * GIB) as u64,
            ..Default::default()
        };
        self.demand.allocator(t, self.last.as_ref(), &d);
        self.allocated.push(t, d.allocated_bytes as f64);
        self.last = Some(d);
        self.analyse(t, None);
    }

    fn analyse(&mut self, t: Time, driver_bytes: Option<u64>) {
        let m = Moment {
            active: true,
            allocator: self.last.as_ref(),
            driver_bytes,
            allocated: &self.allocated,
            largest_free_block: self.block,
        };
        self.demand.update(t, &m, &self.p);
    }

    fn part(&self, t: Time) -> DemandPart {
        self.demand.part(t, &self.p)
    }

    /// Three steps of a training loop at `t`, `t + 1`, `t + 2`..: 4 GiB at the peak,
    /// 2 GiB between, 8 GiB of cache.
    fn train(&mut self, from: Time, to: Time) {
        let mut t = from;
        while t < to {
            let a = if (t as i64) % 2 == 0 { 4.0 } else { 2.0 };
            self.step(t, a, 8.0);
            t += 1.0;
        }
    }
}

#[test]
fn views_whose_past_keeps_its_peaks_alone_read_as_if_they_kept_it_whole() {
    // The engine's shape: 1 s over the forecast's window, 5 s to ten minutes.
    let whole = Series::tiered(1.0, 300.0, 5.0, 600.0).one_value_a_bucket();
    let mut a = Proc::keeping(0.0, whole.clone());
    let mut b = Proc::keeping(0.0, whole.peaks_past());
    // Long enough to fill both tiers twice: a sawtooth over a floor that leaks, steps
    // now and then, a cache emptied and taken again, a few seconds without reports.
    let mut x: u64 = 7;
    for t in 0..1500 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        let t = t as f64;
        if (x >> 60) == 0 {
            continue;
        }
        let floor = 4.0 + t / 600.0 + (t / 170.0).floor() * 0.5;
        let peak = if (x >> 33) % 3 == 0 { 3.0 } else { 1.0 };
        let reserved = if (t as i64 / 250) % 2 == 0 {
            floor + 4.0
        } else {
            floor + peak
        };
        for p in [&mut a, &mut b] {
            p.step(t, floor + peak, reserved);
        }
        assert_eq!(a.demand.trend(), b.demand.trend(), "at {t}");
        assert_eq!(a.part(t), b.part(t), "at {t}");
    }
    assert!(a.demand.trend().is_some(), "the leak was seen");
}

#[test]
fn loading_ends_where_the_footprint_stops_taking_large_parts_of_itself() {
    // Holds 4 GiB from the start: loaded from its first point, known a stretch later.
    let mut idle = Proc::new(100.0);
    for t in 100..125 {
        idle.step(t as f64, 3.0, 4.0);
    }
    assert_eq!(idle.demand.loaded_from(), Some(100.0));
    assert_eq!(idle.demand.leak_from(&idle.p), 100.0);

    // Its first free starts the leak test; loading is the footprint's to end.
    let mut working = Proc::new(100.0);
    working.train(100.0, 110.0);
    assert_eq!(working.demand.loaded_from(), None);
    assert_eq!(working.demand.leak_from(&working.p), 101.0);
    // A young process whose footprint doubles is loading.
    let mut loading = Proc::new(0.0);
    for t in 0..40 {
        let r = 2.0 + 0.2 * t as f64;
        loading.step(t as f64, r, r);
    }
    assert_eq!(loading.demand.loaded_from(), None);
    assert!(loading.demand.trend().is_none());
}

#[test]
fn the_need_is_the_recent_peak_plus_one_request_and_at_least_what_it_holds() {
    let mut p = Proc::new(0.0);
    p.train(0.0, 30.0);
    assert_eq!(p.demand.loaded_from(), Some(0.0));
    // Loaded, the cache grows by a 1 GiB segment and a 512 MiB one.
    p.step(30.0, 2.0, 9.0);
    p.step(31.0, 2.0, 9.5);
    p.step(32.0, 6.0, 9.5);
    // The peak over the last 10 s (6 GiB) and the second largest segment (512 MiB) do not
    // reach the 9.5 GiB it holds.
    let part = p.part(32.0);
    assert_eq!(part.held, 9.5 * GIB);
    assert_eq!(part.need, 9.5 * GIB);
    // It took segments after loading: it asks.
    assert!(part.asks);
    // NVML's bytes beyond the cache (the CUDA context, 1 GiB here) count in both.
    p.step(33.0, 9.25, 9.5);
    p.analyse(33.0, Some((10.5 * GIB) as u64));
    let part = p.part(33.0);
    assert_eq!(part.held, 10.5 * GIB);
    assert_eq!(part.need, (9.25 + 1.0) * GIB + 512.0 * MIB);
}

#[test]
fn segments_taken_while_loading_do_not_size_the_request() {
    let mut p = Proc::new(0.0);
    // Loading: a 20 GiB buffer and a 10 GiB one, no frees.
    p.step(0.0, 1.0, 1.0);
    p.step(1.0, 21.0, 21.0);
    p.step(2.0, 31.0, 31.0);
    for t in 3..70 {
        p.step(t as f64, 29.0 + (t % 2) as f64 * 2.0, 31.0);
    }
    assert!(p.demand.loaded_from().is_some_and(|l| l < 70.0));
    assert_eq!(p.demand.request(), 0.0);
    p.step(71.0, 31.0, 31.25);
    p.step(72.0, 31.0, 31.75);
    assert_eq!(p.demand.request(), 256.0 * MIB);
    // A slow job takes its next segment long after: the size of what it asks for is
    // remembered past the window (and with it, that it took memory after loading no
    // longer makes it ask).
    let later = 72.0 + 2.0 * p.p.window;
    p.step(later, 31.0, 31.75);
    assert_eq!(p.demand.request(), 256.0 * MIB);
    assert!(!p.part(later).asks);
}

#[test]
fn one_segment_since_loading_of_a_size_taken_while_loading_sizes_the_request() {
    let seg = 786.0 * MIB;
    let load = |p: &mut Proc| {
        // Loading: 10 GiB of weights, two segments of 786 MiB for its first steps'
        // activations, then 10 GiB more (its optimizer's state).
        p.step(0.0, 1.0, 1.0);
        p.step(1.0, 11.0, 11.0);
        p.step(2.0, 11.5, 11.0 + seg / GIB);
        p.step(3.0, 11.5, 11.0 + 2.0 * seg / GIB);
        p.step(4.0, 21.0, 21.0 + 2.0 * seg / GIB);
        for t in 5..70 {
            p.step(t as f64, 21.0 + (t % 2) as f64, 21.0 + 2.0 * seg / GIB);
        }
        assert!(p.demand.loaded_from().is_some_and(|l| l < 70.0));
        assert_eq!(p.demand.request(), 0.0);
    };
    // One more of that size since loading: a step's request, made again.
    let mut again = Proc::new(0.0);
    load(&mut again);
    again.step(71.0, 22.0, 21.0 + 3.0 * seg / GIB);
    assert_eq!(again.demand.request(), seg);
    // One of another size: a buffer allocated once, for all it shows.
    let mut once = Proc::new(0.0);
    load(&mut once);
    once.step(71.0, 22.0, 21.0 + 2.0 * seg / GIB + 0.5);
    assert_eq!(once.demand.request(), 0.0);
}

/// A process NVML lists with `bytes` that sends no reports.
fn driver_only(none: &Series, bytes: u64) -> Moment<'_> {
    Moment {
        active: true,
        allocator: None,
        driver_bytes: Some(bytes),
        allocated: none,
        largest_free_block: None,
    }
}

#[test]
fn a_process_that_does_not_report_needs_and_holds_its_driver_bytes() {
    let none = Series::tiered(1.0, 120.0, 5.0, 3600.0);
    let mut d = Demand::new(0.0, none.clone(), none.clone());
    let p = params();
    let m = driver_only(&none, (6.0 * GIB) as u64);
    for t in 0..70 {
        d.update(t as f64, &m, &p);
    }
    d.driver_rise(70.0, 2.0 * GIB);
    d.update(70.0, &m, &p);
    let part = d.part(70.0, &p);
    assert_eq!((part.need, part.held), (6.0 * GIB, 6.0 * GIB));
    // The rise after loading is memory it asked for...
    assert!(part.asks);
    // ...and asks no more once the window has passed.
    d.update(70.0 + p.window + 1.0, &m, &p);
    assert!(!d.part(70.0 + p.window + 1.0, &p).asks);
}

/// A process NVML alone sees, its views kept as the engine keeps them, and the empty series
/// its allocator's views read.
fn nvml_alone() -> (Demand, Series) {
    let none = Series::tiered(1.0, 120.0, 5.0, 3600.0);
    let views = Series::tiered(1.0, 300.0, 5.0, 600.0).one_value_a_bucket();
    (Demand::new(0.0, views.peaks_past(), none.clone()), none)
}

#[test]
fn steps_of_a_request_that_grows_are_cache_without_the_report() {
    // NVML alone: 20 GiB from the start, then a segment every 30 s from 90 s on. Segments
    // that each take more than the one before are the allocator's for a new largest request
    // (the earlier ones free when it comes, given back before a refusal): no growth once the
    // earlier ones could hold the next. Segments of one size are kept tensors: growth.
    let trend_after = |sizes: [f64; 4]| {
        let (mut d, none) = nvml_alone();
        let p = params();
        let mut last = None;
        for t in 0..=215 {
            let t = t as f64;
            let up: f64 = sizes
                .iter()
                .enumerate()
                .filter(|(k, _)| t >= 90.0 + 30.0 * *k as f64)
                .map(|(_, s)| s)
                .sum();
            d.update(t, &driver_only(&none, ((20.0 + up) * GIB) as u64), &p);
            last = d.trend();
        }
        last
    };
    assert!(
        trend_after([10.0, 10.0, 10.0, 10.0]).is_some_and(|t| t.stairs.is_some()),
        "steps of one size"
    );
    assert_eq!(
        trend_after([10.0, 11.0, 12.0, 13.0]),
        None,
        "steps that each grow"
    );
}

#[test]
fn a_start_up_step_is_the_start_ups_after_the_window_slid_past_the_loading() {
    // NVML alone: 40 GiB held from the start, the first batch's 3 GiB 14 s later, one step
    // of 3 GiB at 200 s. The start-up step is no step of a staircase while the window
    // begins at the loading's end, nor once the window slid past it with the start-up
    // step still inside.
    let (mut d, none) = nvml_alone();
    let p = params();
    assert_eq!(p.window, 300.0);
    for t in 0..=330 {
        let t = t as f64;
        let gib = 40.0 + if t >= 14.0 { 3.0 } else { 0.0 } + if t >= 200.0 { 3.0 } else { 0.0 };
        d.update(t, &driver_only(&none, (gib * GIB) as u64), &p);
        if t >= 200.0 {
            assert!(d.loaded_from().is_some_and(|l| l < 14.0), "at {t}");
            assert_eq!(d.trend().and_then(|tr| tr.stairs), None, "at {t}");
        }
    }
}

#[test]
fn a_steady_process_of_any_size_asks_for_nothing() {
    // 8.85 GiB and 228 bytes: the history keeps it to a few KiB, rounded up here.
    let bytes = 9_502_312_220u64;
    assert!(f64::from(bytes as f32) > bytes as f64);
    let none = Series::tiered(1.0, 120.0, 5.0, 3600.0);
    let mut d = Demand::new(0.0, none.clone(), none.clone());
    let p = params();
    let m = driver_only(&none, bytes);
    for t in 0..100 {
        d.update(t as f64, &m, &p);
    }
    let part = d.part(99.0, &p);
    assert_eq!((part.need, part.held), (bytes as f64, bytes as f64));
    assert!(
        !part.asks,
        "a flat process does not ask for its own rounding"
    );
}

#[test]
fn steady_growth_after_loading_is_a_trend_of_its_pace() {
    // A 20 GiB block, then 0.05 GiB/s: small beside the block, so loading has ended with
    // it and the growth counts from there, once it has lasted `eta_min_span`.
    let mut p = Proc::new(0.0);
    p.step(0.0, 1.0, 1.0);
    let at = |t: i64| 21.0 + (t - 1) as f64 * 0.05;
    for t in 1..20 {
        p.step(t as f64, at(t), at(t));
        assert!(p.demand.trend().is_none(), "no trend yet at {t}");
    }
    for t in 20..80 {
        p.step(t as f64, at(t), at(t));
    }
    assert_eq!(p.demand.loaded_from(), Some(1.0));
    let trend = p.demand.trend().expect("80 s of steady growth");
    let pace = trend.slope / GIB;
    assert!((pace - 0.05).abs() < 0.01, "{pace} GiB/s");
    assert!(p.part(79.0).asks);
}

#[test]
fn a_ramp_from_the_start_is_loading() {
    let mut p = Proc::new(0.0);
    for t in 0..59 {
        let a = 1.0 + t as f64 * 0.25;
        p.step(t as f64, a, a);
    }
    assert!(p.demand.trend().is_none());
}

#[test]
fn a_peak_that_comes_back_to_the_same_height_is_not_growth() {
    let mut p = Proc::new(0.0);
    p.train(0.0, 10.0);
    // Training at 3 GiB, an evaluation at 6 GiB every 30 s, in a 6.5 GiB cache.
    for t in 10..400 {
        let a = if t % 30 < 3 {
            6.0
        } else {
            3.0 - (t % 2) as f64
        };
        p.step(t as f64, a, 6.5);
        assert!(p.demand.trend().is_none(), "a trend at {t}");
    }
}

#[test]
fn a_report_a_moment_behind_nvml_is_not_overhead() {
    // 8 GiB reserved and 0.5 GiB outside the allocator; at t = 60 NVML sees a new 3 GiB
    // segment one report before the allocator says so.
    let mut p = Proc::new(0.0);
    for t in 0..60 {
        p.step(t as f64, 4.0 - (t % 2) as f64, 8.0);
        p.analyse(t as f64, Some((8.5 * GIB) as u64));
    }
    p.analyse(60.0, Some((11.5 * GIB) as u64));
    let peak = p.demand.peak_need.newest().unwrap().last();
    assert!((peak - 4.5 * GIB).abs() < 0.01 * GIB, "{}", peak / GIB);
    let record = p.demand.record_need.newest().map(|b| b.last());
    assert!(record.is_none_or(|r| r < 5.0 * GIB), "{record:?}");
}

#[test]
fn a_one_off_the_high_water_mark_holds_is_no_step_of_growth() {
    // Training in a 16 GiB cache whose sampled peaks rise by 2 GiB at t = 40 and at t = 70,
    // each caught every other second: a staircase of the high-water mark. The same job
    // whose second rise is one sample only (a checkpoint's gathered copy) shows the same
    // step while the mark holds it, for its window, and then falls back.
    let run = |sustained: bool| {
        let mut p = Proc::new(0.0);
        let mut trends = Vec::new();
        for t in 0..100 {
            let peak = 4.0
                + if t >= 40 { 2.0 } else { 0.0 }
                + if t >= 70 && (sustained || t == 70) {
                    2.0
                } else {
                    0.0
                };
            let a = if t % 2 == 0 { peak } else { 2.0 };
            p.step(t as f64, a, 16.0);
            trends.push((t, p.demand.trend().is_some()));
        }
        trends
    };
    let grows = run(true);
    assert!(grows.iter().any(|&(t, on)| t >= 80 && on), "{grows:?}");
    let one_off = run(false);
    let on: Vec<_> = one_off.iter().filter(|x| x.1 && x.0 >= 70).collect();
    assert!(on.is_empty(), "{on:?}");
}

#[test]
fn the_allocators_record_shows_a_staircase_the_cache_absorbs() {
    // A batch that grows every 20 s: the allocator's peak rises by 1 GiB a stage while the
    // cache (12 GiB) absorbs it and what the process holds stays flat; samples a second
    // apart never catch a peak.
    let mut p = Proc::new(0.0);
    for t in 0..110 {
        let stage = (t / 20) as f64;
        let d = DeviceStats {
            uuid: "GPU-0".into(),
            allocated_bytes: (4.0 * GIB) as u64,
            reserved_bytes: (12.0 * GIB) as u64,
            allocated_peak_bytes: Some(((6.0 + stage) * GIB) as u64),
            ..Default::default()
        };
        p.demand.allocator(t as f64, p.last.as_ref(), &d);
        p.allocated.push(t as f64, d.allocated_bytes as f64);
        p.last = Some(d);
        p.analyse(t as f64, None);
    }
    let t = p.demand.trend().expect("a staircase of records");
    assert!(
        (t.slope / GIB - 0.05).abs() < 0.01,
        "{} GiB/s",
        t.slope / GIB
    );
    assert!(t.stairs.is_some());
}

#[test]
fn a_cache_serves_only_requests_of_a_known_size() {
    // Loaded to 20 GiB reserved; then allocated leaks at 0.02 GiB/s inside the cache, its
    // largest free block 3 GiB. `segments` GiB-sized segments were taken after loading.
    let leak = |segments: u64, block: f64| {
        let mut p = Proc::new(0.0);
        for t in 0..200 {
            let taken = if t >= 60 {
                segments.min((t as u64 - 60) / 10 + 1)
            } else {
                0
            };
            let reserved = 20.0 + taken as f64;
            let allocated = if t < 60 {
                12.0
            } else {
                12.0 + 0.02 * (t - 60) as f64
            };
            let d = DeviceStats {
                uuid: "GPU-0".into(),
                allocated_bytes: (allocated * GIB) as u64,
                reserved_bytes: (reserved * GIB) as u64,
                allocated_peak_bytes: Some((allocated * GIB) as u64),
                // Measured every tenth report only, as a client's snapshots are.
                largest_free_block_bytes: (t % 10 == 0).then_some((block * GIB) as u64),
                segments: Some(10 + taken),
                ..Default::default()
            };
            p.block = d.largest_free_block_bytes.or(p.block);
            p.demand.allocator(t as f64, p.last.as_ref(), &d);
            p.allocated.push(t as f64, d.allocated_bytes as f64);
            p.last = Some(d);
            p.analyse(t as f64, None);
        }
        assert!(p.demand.trend().is_some(), "a leak of 0.02 GiB/s");
        p.part(199.0)
    };
    // Requests of 1 GiB, which the 3 GiB block serves: the need is the peak and one
    // request, below what the process holds.
    let known = leak(2, 3.0);
    assert!(
        known.need < known.held - GIB,
        "{} {}",
        known.need / GIB,
        known.held / GIB
    );
    // The driver will see that smooth rise as 1 GiB segments, the first once the peak has
    // used what the process holds beyond it and one request.
    let seen = known
        .segments
        .expect("a rise served by its cache, in segments");
    assert_eq!(seen.size, GIB);
    assert!(
        (seen.cache - (known.held - known.need)).abs() < 1.0,
        "{seen:?}"
    );
    // No segment taken since loading: the size of the request that would fail is unknown,
    // and the cache is not counted as room for it.
    let unknown = leak(0, 3.0);
    assert!(
        unknown.need >= unknown.held,
        "{} {}",
        unknown.need / GIB,
        unknown.held / GIB
    );
    assert_eq!(unknown.segments, None);
    // Split into blocks smaller than a request (fragmentation), the cache serves none: its
    // rise is not read as segments to come later.
    let split = leak(2, 0.5);
    assert!(split.need >= split.held);
    assert_eq!(split.segments, None);
}

#[test]
fn memory_given_back_is_asked_for_again_within_the_window() {
    let mut p = Proc::new(0.0);
    p.train(0.0, 100.0);
    assert!(!p.part(99.0).asks, "a steady process asks for nothing");
    // empty_cache(): the cache falls from 8 GiB to 4 GiB.
    p.step(100.0, 2.0, 4.0);
    assert!(p.part(100.0).asks);
    for t in 101..(101 + p.p.window as i64) {
        p.step(t as f64, 2.0, 4.0);
    }
    let t = 101.0 + p.p.window;
    p.step(t, 2.0, 4.0);
    assert!(!p.part(t).asks);
}

/// NVML alone: a server's sessions fill its cache along 1 - e^(-t/tau) towards 120 GiB of a
/// 141 GiB card, the sessions it holds wandering by 3 GiB about the curve; the seconds at which
/// its rise, read whole from its first second, says how much is left of it (within a fifth),
/// each of them without an ETA.
fn read_whole(tau: f64) -> usize {
    let (mut d, none) = nvml_alone();
    let p = params();
    let card = 141.0 * GIB;
    let curve = |t: f64| 0.5 + 120.0 * (1.0 - (-t / tau).exp());
    let mut whole = 0;
    for t in 0..=130 {
        let t = t as f64;
        let gib = curve(t) + 3.0 * (t / 7.0).sin();
        d.update(t, &driver_only(&none, (gib * GIB) as u64), &p);
        if d.loading.ended().is_none() {
            continue;
        }
        assert_eq!(d.loading.rise_began(), Some(0.0), "one rise at {t}");
        let left = 120.5 - curve(t);
        let read = d.trend().and_then(|tr| tr.saturation);
        if read.is_some_and(|s| (s.rest / GIB - left).abs() < 0.2 * left) {
            whole += 1;
            let e = oom::eta(card, &[d.part(t, &p)], 0, &p.eta);
            assert!(e.is_none(), "at {t}: {e:?}");
        }
    }
    whole
}

#[test]
fn a_rise_that_slows_past_the_loadings_cap_is_read_whole() {
    // Time constant 60 s: its loading is capped at 60 s while it still rises, one rise with
    // what came before. Over its tail alone (from the cap) the curve is no clearly better fit
    // than a line, and the line gives an ETA of a minute or two; read whole, the rise slows
    // towards a level the card holds, and there is no ETA.
    let whole = read_whole(60.0);
    assert!(whole >= 5, "read whole at {whole} s");
}

#[test]
fn a_rise_that_slowed_below_a_large_part_of_itself_without_a_break_is_read_whole() {
    // Time constant 30 s: its loading ends before the cap, at about 33 s, once 20 s take less
    // than a quarter of what it holds; it still rises at about 1 GiB/s with 30 GiB of room, a
    // line's ETA of half a minute, but is the same rise going on.
    let whole = read_whole(30.0);
    assert!(whole >= 5, "read whole at {whole} s");
}

#[test]
fn a_smooth_rise_that_slowed_but_goes_on_is_forecast_at_its_pace_now() {
    // NVML alone: weights of 20 GiB, then from 130 s a cache that grows by 0.8 GiB/s for 50 s,
    // and from 180 s by 0.08 GiB/s (requests that keep their keys and values), on a card of
    // 73 GiB. At 260 s it holds 66.4 GiB: the line through the window is steeper than the
    // pace now by more than twice. The room (6.6 GiB less a segment) closes at the pace now,
    // in about 80 s; a slowed rise that goes on is no reason for no ETA.
    let (mut d, none) = nvml_alone();
    let p = params();
    let gib = |t: f64| 20.0 + 0.8 * (t - 130.0).clamp(0.0, 50.0) + 0.08 * (t - 180.0).max(0.0);
    for t in 0..=260 {
        let t = t as f64;
        d.update(t, &driver_only(&none, (gib(t) * GIB) as u64), &p);
    }
    let tr = d.trend().expect("growth");
    assert!((tr.slope / GIB - 0.08).abs() < 0.02, "{tr:?}");
    let e = oom::eta(73.0 * GIB, &[d.part(260.0, &p)], 0, &p.eta).expect("an ETA");
    assert!((60.0..100.0).contains(&e.seconds), "{e:?}");
}
