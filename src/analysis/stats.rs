//! Robust trend statistics on short series: Theil–Sen slope and the Mann–Kendall test.
//! Both are O(n²) in the number of points, which stays small (floor windows, not raw samples).

pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// A fitted line: value at `t` is `intercept + slope * (t - t_ref)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    pub slope: f64,
    pub intercept: f64,
    pub t_ref: f64,
}

impl Line {
    pub fn at(&self, t: f64) -> f64 {
        self.intercept + self.slope * (t - self.t_ref)
    }
}

#[cfg(test)]
fn pairwise_slopes(points: &[(f64, f64)]) -> Vec<f64> {
    slope_keys(points).into_iter().map(from_key).collect()
}

/// The pairwise slopes as integers in the order of `f64::total_cmp`: selecting among integers
/// is the same selection for a fraction of the work of comparing floats through it.
fn slope_keys(points: &[(f64, f64)]) -> Vec<i64> {
    let n = points.len();
    let mut keys = Vec::with_capacity(n * n.saturating_sub(1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            let dt = points[j].0 - points[i].0;
            if dt.abs() > f64::EPSILON {
                keys.push(to_key((points[j].1 - points[i].1) / dt));
            }
        }
    }
    keys
}

/// `f64::total_cmp`'s own mapping: negative values have all but the sign bit flipped, so the
/// integers sort as the floats do. Its own inverse (`from_key`).
fn flip(bits: i64) -> i64 {
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

fn to_key(x: f64) -> i64 {
    flip(x.to_bits() as i64)
}

fn from_key(k: i64) -> f64 {
    f64::from_bits(flip(k) as u64)
}

/// Theil–Sen estimator: the median of all pairwise slopes, with the median-residual intercept.
/// A sawtooth, a spike or a step at the edge moves it far less than least squares.
pub fn theil_sen(points: &[(f64, f64)]) -> Option<Line> {
    theil_sen_bounded(points, None).map(|(line, _)| line)
}

/// Theil–Sen and, with `alpha`, the one-sided lower confidence bound of its slope, from one
/// set of pairwise slopes (the O(n²) part of every trend fit).
pub fn theil_sen_bounded(points: &[(f64, f64)], alpha: Option<f64>) -> Option<(Line, f64)> {
    theil_sen_interval(points, alpha).map(|(line, lower, _)| (line, lower))
}

/// Theil–Sen with both one-sided bounds of its slope at level `1 − alpha` (the upper bound is
/// the order statistic as far above the median as the lower one is below).
pub fn theil_sen_interval(points: &[(f64, f64)], alpha: Option<f64>) -> Option<(Line, f64, f64)> {
    let n = points.len();
    if n < 2 {
        return None;
    }
    let mut slopes = slope_keys(points);
    if slopes.is_empty() {
        return None;
    }
    // Only two or three order statistics are needed: select them rather than sort all
    // n(n-1)/2 slopes.
    let m = slopes.len();
    let mid = m / 2;
    let (below, &mut upper, above) = slopes.select_nth_unstable(mid);
    let slope = if m % 2 == 1 {
        from_key(upper)
    } else {
        // The largest of the lower half is the other middle value.
        let other = below
            .iter()
            .copied()
            .max()
            .map_or(f64::NEG_INFINITY, from_key);
        (other + from_key(upper)) / 2.0
    };
    let rank = alpha.and_then(|a| lower_bound_rank(m, n, a));
    let mut nth = |r: usize| {
        from_key(match r.cmp(&mid) {
            std::cmp::Ordering::Less => *below.select_nth_unstable(r).1,
            std::cmp::Ordering::Equal => upper,
            std::cmp::Ordering::Greater => *above.select_nth_unstable(r - mid - 1).1,
        })
    };
    let lower = rank.map_or(f64::NEG_INFINITY, &mut nth);
    let high = rank.map_or(f64::INFINITY, |r| nth(m - 1 - r));
    let t_ref = points.iter().map(|p| p.0).sum::<f64>() / n as f64;
    let mut residuals: Vec<f64> = points
        .iter()
        .map(|&(t, v)| v - slope * (t - t_ref))
        .collect();
    let intercept = median(&mut residuals)?;
    Some((
        Line {
            slope,
            intercept,
            t_ref,
        },
        lower,
        high,
    ))
}

/// The rank (0-based, among the `m` pairwise slopes of `n` points) of the lower bound at level
/// `1 − alpha`; None where there are too few points for a bound at this level.
fn lower_bound_rank(m: usize, n: usize, alpha: f64) -> Option<usize> {
    if n < 3 {
        return None;
    }
    let nf = n as f64;
    let var_s = nf * (nf - 1.0) * (2.0 * nf + 5.0) / 18.0;
    let c = normal_quantile(1.0 - alpha) * var_s.sqrt();
    let m1 = (m as f64 - c) / 2.0;
    (m1 >= 1.0).then(|| (m1.floor() as usize - 1).min(m - 1))
}

/// Inverse of the standard normal CDF, by bisection. Every fit asks for the same level, so the
/// last answer is kept.
pub fn normal_quantile(p: f64) -> f64 {
    thread_local! {
        static LAST: std::cell::Cell<(f64, f64)> = const { std::cell::Cell::new((f64::NAN, 0.0)) };
    }
    let (last_p, last_q) = LAST.get();
    if last_p == p {
        return last_q;
    }
    let q = bisect_normal_quantile(p);
    LAST.set((p, q));
    q
}

fn bisect_normal_quantile(p: f64) -> f64 {
    let (mut lo, mut hi) = (-10.0, 10.0);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if normal_cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// Mann–Kendall trend test. Returns the statistic S and the one-sided p-value for an
/// increasing trend (normal approximation with continuity and tie corrections).
pub fn mann_kendall_increasing(values: &[f64]) -> Option<(i64, f64)> {
    let n = values.len();
    if n < 3 {
        return None;
    }
    let mut s: i64 = 0;
    for i in 0..n {
        for j in i + 1..n {
            s += match values[j].partial_cmp(&values[i]) {
                Some(std::cmp::Ordering::Greater) => 1,
                Some(std::cmp::Ordering::Less) => -1,
                _ => 0,
            };
        }
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && sorted[j + 1] == sorted[i] {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        if t > 1.0 {
            tie_term += t * (t - 1.0) * (2.0 * t + 5.0);
        }
        i = j + 1;
    }
    let nf = n as f64;
    let var = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - tie_term) / 18.0;
    if var <= 0.0 {
        return Some((s, 1.0));
    }
    let z = if s > 0 {
        (s as f64 - 1.0) / var.sqrt()
    } else if s < 0 {
        (s as f64 + 1.0) / var.sqrt()
    } else {
        0.0
    };
    Some((s, 1.0 - normal_cdf(z)))
}

/// Least squares of `y = a + b·x`: (a, b, residual sum of squares).
fn least_squares(xy: impl Iterator<Item = (f64, f64)> + Clone) -> Option<(f64, f64, f64)> {
    let (mut n, mut sx, mut sy) = (0.0, 0.0, 0.0);
    for (x, y) in xy.clone() {
        n += 1.0;
        sx += x;
        sy += y;
    }
    if n < 3.0 {
        return None;
    }
    let (mx, my) = (sx / n, sy / n);
    let (mut sxx, mut sxy) = (0.0, 0.0);
    for (x, y) in xy.clone() {
        sxx += (x - mx) * (x - mx);
        sxy += (x - mx) * (y - my);
    }
    if sxx <= 0.0 {
        return None;
    }
    let b = sxy / sxx;
    let a = my - b * mx;
    let sse = xy.map(|(x, y)| (y - a - b * x).powi(2)).sum();
    Some((a, b, sse))
}

/// A rise that slows towards a level: `y = level − B·e^(−(t − t₀)/τ)` with `B > 0`, compared
/// with a straight line on the same points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Saturating {
    /// The level the rise approaches.
    pub level: f64,
    /// The seconds in which what is left of the rise falls by a factor e.
    pub tau: f64,
    /// What is left of it at the first point, `t0` (negative: below the level).
    pub b: f64,
    pub t0: f64,
    /// Residual sum of squares of the saturating fit over that of the line (at most 1).
    pub ratio: f64,
}

/// The best saturating fit of `points` (time, value) over time constants from a sixteenth of
/// the span to twice it (a longer one is a line within the window), or `None` where no rise
/// that slows fits (the points fall, or speed up).
pub fn saturating(points: &[(f64, f64)]) -> Option<Saturating> {
    let (t0, t1) = (points.first()?.0, points.last()?.0);
    let span = t1 - t0;
    if points.len() < 8 || span <= 0.0 {
        return None;
    }
    let (_, _, linear) = least_squares(points.iter().copied())?;
    if linear <= 0.0 {
        return None;
    }
    // Each time constant's exponentials once, not once per pass of the least squares: they
    // are most of the forecast's CPU time.
    let mut xs = vec![0.0; points.len()];
    let mut fit = |tau: f64| {
        for (x, &(t, _)) in xs.iter_mut().zip(points) {
            *x = (-(t - t0) / tau).exp();
        }
        let xy = xs.iter().zip(points).map(|(&x, &(_, y))| (x, y));
        // b < 0: the curve rises and slows down.
        least_squares(xy)
            .filter(|&(_, b, _)| b < 0.0)
            .map(|(level, b, sse)| Saturating {
                level,
                tau,
                b,
                t0,
                ratio: (sse / linear).min(1.0),
            })
    };
    let lowest = |a: Option<Saturating>, b: Option<Saturating>| match (a, b) {
        (Some(a), Some(b)) => Some(if b.ratio < a.ratio { b } else { a }),
        (a, b) => a.or(b),
    };
    // A grid a half-octave apart finds the valley; the time constant is then narrowed within
    // it, since a half-octave off moves the level the curve heads for by a large part of what
    // is left of the rise.
    let (lo, hi) = (span / 16.0, span * 2.0);
    let grid = (0..=10).map(|k| lo * 2f64.powf(k as f64 / 2.0));
    let coarse = grid.map(&mut fit).fold(None, lowest)?;
    let (mut a, mut b) = (
        (coarse.tau / STEP).max(lo).ln(),
        (coarse.tau * STEP).min(hi).ln(),
    );
    // Golden section: each step keeps one of its two inner points as an inner point of the
    // next bracket, so it fits one new time constant, not two.
    let r = |f: &Option<Saturating>| f.map_or(f64::INFINITY, |s| s.ratio);
    let (mut m1, mut m2) = (b - (b - a) / GOLDEN, a + (b - a) / GOLDEN);
    let (mut f1, mut f2) = (fit(m1.exp()), fit(m2.exp()));
    let mut best = lowest(lowest(Some(coarse), f1), f2);
    for _ in 1..REFINE_STEPS {
        if r(&f1) <= r(&f2) {
            (b, m2, f2) = (m2, m1, f1);
            m1 = b - (b - a) / GOLDEN;
            f1 = fit(m1.exp());
            best = lowest(best, f1);
        } else {
            (a, m1, f1) = (m1, m2, f2);
            m2 = a + (b - a) / GOLDEN;
            f2 = fit(m2.exp());
            best = lowest(best, f2);
        }
    }
    best
}

/// The coarse grid's spacing of time constants, a half-octave.
const STEP: f64 = std::f64::consts::SQRT_2;
const GOLDEN: f64 = 1.618_033_988_749_895;
/// Time constants the golden section fits within one grid spacing either side of the best:
/// the last lie within about a thousandth of that bracket's width.
const REFINE_STEPS: usize = 15;

impl Saturating {
    /// The curve at `t`.
    pub fn at(&self, t: f64) -> f64 {
        self.level + self.b * (-(t - self.t0) / self.tau).exp()
    }
}

/// Squared residuals of the best line through `points`.
pub fn line_residuals(points: &[(f64, f64)]) -> Option<f64> {
    least_squares(points.iter().copied()).map(|(_, _, sse)| sse)
}

/// Standard normal CDF via the complementary error function (Abramowitz–Stegun 7.1.26 is too
/// coarse in the tails we test at, so this uses the W. J. Cody-style rational erfc).
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    // Numerical Recipes' erfcc: fractional error below 1.2e-7 everywhere.
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn a_saturating_fit_finds_a_time_constant_between_its_grid_points() {
        // 2 s apart over 120 s the grid tries 42.4 s and 60 s; the rise's own 51 s lies
        // half-way, where either grid point misses the level by gigabytes.
        let gib = (1u64 << 30) as f64;
        let pts: Vec<(f64, f64)> = (0..=60)
            .map(|i| {
                let t = 2.0 * i as f64;
                (t, gib * (10.0 + 100.0 * (1.0 - (-t / 51.0).exp())))
            })
            .collect();
        let s = saturating(&pts).expect("a rise that slows");
        assert!((s.tau - 51.0).abs() < 0.5, "tau {}", s.tau);
        assert!(
            (s.level - 110.0 * gib).abs() < 0.2 * gib,
            "{} GiB",
            s.level / gib
        );
    }

    #[test]
    fn normal_cdf_known_values() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(-2.326_348) - 0.01).abs() < 1e-6);
    }

    #[test]
    fn theil_sen_ignores_an_outlier() {
        let mut pts: Vec<(f64, f64)> = (0..20).map(|i| (i as f64, 2.0 * i as f64 + 1.0)).collect();
        pts[10].1 = 1e9;
        let l = theil_sen(&pts).unwrap();
        assert!((l.slope - 2.0).abs() < 1e-9);
        assert!((l.at(0.0) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn quantile_inverts_the_cdf() {
        assert!((normal_quantile(0.99) - 2.326_348).abs() < 1e-5);
        assert!((normal_quantile(0.5)).abs() < 1e-6);
    }

    #[test]
    fn mann_kendall_flat_and_rising() {
        let flat = vec![5.0; 20];
        assert!(mann_kendall_increasing(&flat).unwrap().1 > 0.4);
        let rising: Vec<f64> = (0..20).map(|i| i as f64).collect();
        let (s, p) = mann_kendall_increasing(&rising).unwrap();
        assert_eq!(s, 190);
        assert!(p < 1e-6);
        let falling: Vec<f64> = (0..20).map(|i| -(i as f64)).collect();
        assert!(mann_kendall_increasing(&falling).unwrap().1 > 0.99);
    }

    proptest! {
        #[test]
        fn a_lines_slope_is_its_slope(slope in -1e9f64..1e9, icpt in -1e12f64..1e12, n in 3usize..60, dt in 0.1f64..10.0) {
            let pts: Vec<(f64, f64)> = (0..n).map(|i| (i as f64 * dt, icpt + slope * i as f64 * dt)).collect();
            let l = theil_sen(&pts).unwrap();
            prop_assert!((l.slope - slope).abs() <= 1e-6 * slope.abs().max(1.0));
        }

        #[test]
        fn selected_order_statistics_equal_the_sorted_ones(
            values in proptest::collection::vec(-1e6f64..1e6, 3..60),
        ) {
            let pts: Vec<(f64, f64)> = values.iter().enumerate().map(|(i, v)| (i as f64, *v)).collect();
            let (line, lower) = theil_sen_bounded(&pts, Some(0.01)).unwrap();
            let mut sorted = pairwise_slopes(&pts);
            sorted.sort_by(f64::total_cmp);
            let m = sorted.len();
            let median = if m % 2 == 1 { sorted[m / 2] } else { (sorted[m / 2 - 1] + sorted[m / 2]) / 2.0 };
            prop_assert_eq!(line.slope, median);
            let want = lower_bound_rank(m, pts.len(), 0.01).map_or(f64::NEG_INFINITY, |r| sorted[r]);
            prop_assert_eq!(lower, want);
        }

        #[test]
        fn mann_kendall_p_is_a_probability(values in proptest::collection::vec(-1e6f64..1e6, 3..50)) {
            let (_, p) = mann_kendall_increasing(&values).unwrap();
            prop_assert!((0.0..=1.0).contains(&p));
        }
    }
}
