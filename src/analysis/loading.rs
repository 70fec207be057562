//! When a process has finished loading: the rise its memory makes as it starts (a CUDA
//! context, the weights, the optimizer's state at the first step, `torch.compile`'s graphs, a
//! first batch of rollouts) is a rise that ends by itself, and the OOM forecast extrapolates
//! only what comes after it.
//!
//! Read from the process's footprint alone (the bytes it holds from the driver), so the same
//! rule holds whether or not the process sends allocator reports, whatever its allocator does.
//! A process is loading while its footprint moves by large parts of itself: over the last
//! `STRETCH` seconds it rose by more than `SHARE` of what it held at their start. Start-up comes
//! in stages (the context, seconds of work on the CPU, the weights, the first step), and work
//! can come in rounds that take much and give it all back (rollouts that fill a KV cache and
//! drop it, a notebook that loads a dataset, computes and frees it), so a pause does not end
//! loading for good: a later rise of that size is loading again. Growth is what is small beside
//! what the process holds: weights taken in one block and then a cache that grows a little
//! every second; a model loaded and then a leak. Whatever it does, one loading lasts at most
//! `max` seconds: a process that keeps taking large parts of itself for longer is growing, until
//! it stops taking them: then it was a load after all, known in hindsight, that ended where the
//! stretch that showed it began, and what follows (a leak at its own pace) is read from there.
//!
//! A load is known only in hindsight, as a rise that stopped; loads that repeat without giving
//! memory back are a staircase. So after its start-up (`YOUNG` times `max`), a process loads
//! again only once it gave back at least half of what its last loading took (a round that
//! frees what it took); an evaluation that keeps its outputs, a cache that grows by large
//! blocks, rise after rise with nothing given back, is growth, step by step. While young too, a
//! rise the size of the last load (within `REPEAT`), which kept what it took, is that load
//! again, not a stage: start-up's stages (a context, the weights, the optimizer's state) differ
//! in size, a schedule's steps do not. Where the allocator's report shows both in use, the load
//! it repeats was that schedule's first step, and loading ended where it had ended before it.

use crate::model::Time;
use std::collections::VecDeque;

/// Seconds of footprint a rise is judged over.
pub const STRETCH: f64 = 20.0;
/// A rise over `STRETCH` of more than this share of what the process held is loading.
const SHARE: f64 = 0.25;
/// Start-up lasts this many loading caps from the process's first point: a context, the
/// weights and the optimizer's state come in stages with pauses between them.
const YOUNG: f64 = 2.0;
/// A rise within this share of the last load's size is that load repeated.
const REPEAT: f64 = 0.25;
/// Seconds without a rise that end a stage of a loading under way.
const PAUSE: f64 = STRETCH / 2.0;

/// A stage of the loading under way: rises with less than `PAUSE` between them.
#[derive(Debug, Clone, Copy)]
struct Stage {
    /// The footprint before its first rise, at its highest, and when it last rose.
    base: f64,
    top: f64,
    last_rise: Time,
}

#[derive(Debug, Clone, Default)]
pub struct Loading {
    /// Points of the last stretch, and the one just before it, oldest first.
    recent: VecDeque<(Time, f64)>,
    ended: Option<Time>,
    /// When the loading under way began (the first point's time, at first).
    began: Option<Time>,
    /// Ended by the cap: a rise that never paused is growth until it pauses.
    capped: bool,
    /// Where the last loading began, if it ended with its rise still going (its cap cut it,
    /// or its pace fell under a large part of what it holds but not under a large part of the
    /// pace it loaded at): the rise the forecast then reads began there.
    rise_began: Option<Time>,
    /// What each stretch measured rose by, over the last stretch: the pace a loading had
    /// just before it ended.
    rises: VecDeque<(Time, f64)>,
    /// The first point's time.
    appeared: Option<Time>,
    /// The last loading's footprint where it began and at its highest.
    base: f64,
    top: f64,
    /// The lowest footprint since the last loading ended.
    low_since: f64,
    /// Where loading had ended before a young process's step began it again: if a step after
    /// it repeats that step, with nothing given back and both in use, the step was the first of
    /// a schedule (an evaluation that keeps its outputs), known in hindsight, and loading ended
    /// here.
    ended_before: Option<Time>,
    /// The stage of the loading under way that is rising, and the last that ended, with
    /// the lowest footprint since it ended.
    stage: Option<Stage>,
    last_stage: Option<(Stage, f64)>,
    /// A young process's step is still rising and may be a stage of start-up or a repeat:
    /// it is loading until the step stops and tells which.
    deciding: bool,
    /// The last step judged a repeat of a load (its base and top), while the footprint holds
    /// it: a step is judged once. A stretch whose lowest point lies inside it (the step caught
    /// half risen at the stretch's first point) is measured from its top, not as a smaller
    /// rise of its own.
    judged: Option<(f64, f64)>,
}

impl Loading {
    pub fn new() -> Self {
        Self::default()
    }

    /// Since when the process has been done loading, if it is.
    pub fn ended(&self) -> Option<Time> {
        self.ended.filter(|_| !self.deciding)
    }

    /// Where the rise that the last loading was began, while that rise went on past the
    /// loading's end (cut by the cap, or slowed without a break): it is one rise from there,
    /// and its shape is read from there (does it slow down?).
    pub fn rise_began(&self) -> Option<Time> {
        self.rise_began.filter(|_| self.ended().is_some())
    }

    /// The footprint is `bytes` at `t` (one point per analysis), of which `in_use` at its
    /// latest peak where the process reports it; `max` caps how long loading may last.
    /// `min_step` is a segment: a smaller rise is no rise.
    pub fn push(&mut self, t: Time, bytes: f64, in_use: Option<f64>, max: f64, min_step: f64) {
        if self.appeared.is_none() {
            self.appeared = Some(t);
            self.base = bytes;
            self.top = bytes;
        }
        self.began.get_or_insert(t);
        self.stages(t, bytes, min_step);
        let was_deciding = std::mem::take(&mut self.deciding);
        if self.ended.is_none() {
            self.top = self.top.max(bytes);
        } else {
            self.low_since = self.low_since.min(bytes);
        }
        if self.judged.is_some_and(|(_, top)| bytes < top - min_step) {
            self.judged = None;
        }
        self.recent.push_back((t, bytes));
        while self.recent.len() >= 2 && self.recent[1].0 <= t - STRETCH {
            self.recent.pop_front();
        }
        if self.recent.front().is_some_and(|p| p.0 <= t - STRETCH) {
            // The stretch's lowest point: where the footprint stopped moving in large parts
            // (the end of a ramp, a block taken, a cache given back).
            let (since, low) =
                self.recent
                    .iter()
                    .fold((t, f64::INFINITY), |a, p| if p.1 < a.1 { *p } else { a });
            let low = match self.judged {
                Some((base, top)) if low > base && low < top => top,
                _ => low,
            };
            let rise = bytes - low;
            // The stretch that ended a stretch ago, where this one began.
            let before = self
                .rises
                .front()
                .filter(|r| r.0 <= t - STRETCH)
                .map(|r| r.1);
            self.rises.push_back((t, rise));
            while self.rises.len() >= 2 && self.rises[1].0 <= t - STRETCH {
                self.rises.pop_front();
            }
            let young = self.appeared.is_some_and(|a| t - a < YOUNG * max);
            let took = self.top - self.base;
            let gave_back = took >= min_step && self.low_since <= self.top - 0.5 * took;
            let rising = self.stage.is_some_and(|s| s.last_rise >= t);
            // A young process's step left undecided while it rose is judged once it stopped,
            // though what it took may be given back already (a rollout).
            let settled = was_deciding && !rising;
            // Undecided it stays while it rises, however slowly.
            self.deciding = was_deciding && rising;
            if settled || (rise >= min_step && rise > SHARE * low) {
                // A rise the size of the last load, which kept what it took, is that load
                // again: a schedule of steps (an evaluation that keeps its outputs), not a
                // start-up stage, however young the process.
                // Its size is the stage's under way: steps that come less than a stretch apart
                // fall into one stretch together.
                let step = self.stage.map_or(rise, |s| s.top - s.base);
                let repeat = !gave_back && repeats(step, took, min_step);
                // The load it repeats was that schedule's first step where both stay in use
                // (half of what they took at least): a warm-up's record batches take segments
                // of a size again and again that its cache then holds unused, and without the
                // allocator's report the two cannot be told apart.
                let both_in_use =
                    || in_use.is_some_and(|u| u - self.base >= 0.5 * (bytes - self.base));
                if repeat && self.ended.is_some() && both_in_use() {
                    if let Some(before) = self.ended_before.take() {
                        self.ended = Some(before);
                        self.rise_began = None;
                    }
                }
                // A step still rising may yet reach the last load's size: its size is judged
                // at the first point after it stopped.
                let undecided = rising && step < (1.0 + REPEAT) * took;
                let stage = young && !repeat && !undecided;
                self.deciding = young && !repeat && undecided && !gave_back;
                if !self.capped && (stage || gave_back) && self.ended.is_some() {
                    self.ended_before = self.ended.take().filter(|_| !gave_back);
                    self.began = Some(since);
                    self.rise_began = None;
                    (self.base, self.top) = match self.stage.filter(|_| settled) {
                        Some(s) => (s.base, s.top.max(bytes)),
                        None => (low, bytes),
                    };
                    // A step still rising is the loading's first stage whole: caught over
                    // two points, its size is not what is left of it after the first.
                    self.stage = self.stage.filter(|s| !settled && s.last_rise >= t);
                    self.last_stage = None;
                }
            } else {
                // A rise the cap cut that stops taking large parts of itself was a load after
                // all, known now: it ended where this stretch began, and what comes after it
                // (a leak at its own pace) is read from there, not through the ramp.
                if std::mem::take(&mut self.capped) || self.ended.is_none() {
                    // A rise whose pace fell under a large part of what it holds, but still
                    // takes a large part of what the stretch before took, is the loading's
                    // rise going on, as one the cap cut is (a cache that fills ever more
                    // slowly from the process's first seconds); weights taken in a block and
                    // a leak after them are not one rise.
                    if self.ended.is_none()
                        && rise >= min_step
                        && before.is_some_and(|b| rise > SHARE * b)
                    {
                        self.rise_began = self.began;
                    }
                    self.ended = Some(since);
                    self.low_since = bytes;
                }
            }
        }
        let began = self.began.unwrap_or(t);
        if self.ended.is_none() && t - began >= max {
            self.ended = Some(began + max);
            self.capped = true;
            self.rise_began = Some(began);
            self.low_since = bytes;
        }
    }

    /// Follows the stages of the loading under way. Steps that come less than a stretch
    /// apart never let it end by a pause; a stage the size of the one before it, which kept
    /// what that one took, repeats it: loading ended with the stage before the first of the
    /// two (the weights, say, before evaluations that each keep their outputs), and from
    /// there on `push` reads the steps as repeats of a load, not stages.
    fn stages(&mut self, t: Time, bytes: f64, min_step: f64) {
        if self.ended.is_some() {
            // Done loading: only the stage under way matters, for its size.
            match self.recent.back() {
                Some(&(_, prev)) if bytes - prev >= min_step => self.rise(t, prev, bytes),
                _ => {}
            }
            return;
        }
        if let Some((_, low)) = &mut self.last_stage {
            *low = low.min(bytes);
        }
        let Some(&(_, prev)) = self.recent.back() else {
            return;
        };
        if bytes - prev >= min_step {
            self.rise(t, prev, bytes);
            return;
        }
        let Some(s) = self.stage.filter(|s| t - s.last_rise >= PAUSE) else {
            return;
        };
        self.stage = None;
        let took = s.top - s.base;
        if let Some((before, low)) = self.last_stage {
            let took_before = before.top - before.base;
            let kept = low > before.top - 0.5 * took_before;
            if kept && repeats(took, took_before, min_step) {
                self.ended = Some(before.last_rise);
                self.base = before.base;
                self.top = before.top;
                self.low_since = low;
                self.last_stage = None;
                self.judged = Some((s.base, s.top));
                return;
            }
        }
        self.last_stage = Some((s, bytes));
    }

    /// The footprint rose by a step from `prev` to `bytes` at `t`.
    fn rise(&mut self, t: Time, prev: f64, bytes: f64) {
        match &mut self.stage {
            Some(s) if t - s.last_rise < PAUSE => {
                s.top = s.top.max(bytes);
                s.last_rise = t;
            }
            _ => {
                self.stage = Some(Stage {
                    base: prev,
                    top: bytes,
                    last_rise: t,
                })
            }
        }
    }
}

/// A rise of `step` is a load of `took` again: its size within `REPEAT` of a load that took a
/// segment at least.
fn repeats(step: f64, took: f64, min_step: f64) -> bool {
    took >= min_step && (step - took).abs() <= REPEAT * took
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = 1073741824.0;
    const SEG: f64 = 64.0 * 1048576.0;

    fn run(f: impl Fn(f64) -> f64, from: f64, to: f64, max: f64) -> Option<Time> {
        let mut l = Loading::new();
        let mut t = from;
        while t <= to {
            l.push(t, f(t), Some(f(t)), max, SEG);
            t += 1.0;
        }
        l.ended()
    }

    #[test]
    fn a_block_then_slow_growth_has_loaded_at_the_block() {
        // A context, a 120 GiB block at t = 6, then 0.25 GiB/s: small beside 120 GiB.
        let f = |t: f64| {
            if t < 6.0 {
                GIB
            } else {
                121.0 * GIB + 0.25 * GIB * (t - 6.0)
            }
        };
        assert_eq!(run(f, 0.0, 25.0, 60.0), None, "the block is in the stretch");
        let end = run(f, 0.0, 30.0, 60.0).expect("growth is small beside the block");
        assert!((6.0..=7.0).contains(&end), "{end}");
    }

    #[test]
    fn a_ramp_that_keeps_taking_large_parts_of_itself_is_loading_until_its_cap() {
        let f = |t: f64| GIB * (1.0 + t);
        assert_eq!(run(f, 0.0, 59.0, 60.0), None);
        assert_eq!(run(f, 0.0, 61.0, 60.0), Some(60.0));
    }

    #[test]
    fn a_rise_the_cap_cut_is_known_from_where_it_began() {
        let mut l = Loading::new();
        for t in 0..=90 {
            l.push(t as f64, GIB * (1.0 + t as f64), None, 60.0, SEG);
        }
        assert_eq!(l.ended(), Some(60.0));
        assert_eq!(l.rise_began(), Some(0.0));
        // A block taken at once is no rise the cap cut.
        let mut l = Loading::new();
        for t in 0..=30 {
            l.push(t as f64, 2.0 * GIB, None, 60.0, SEG);
        }
        assert_eq!(l.ended(), Some(0.0));
        assert_eq!(l.rise_began(), None);
    }

    #[test]
    fn a_rise_that_slows_below_a_large_part_of_itself_without_a_break_is_one_rise() {
        // A cache filling along 1 - e^(-t/30) to 100 GiB: 20 s take less than a quarter of
        // what it holds from about 53 s on, while it still rises by gigabytes, at two thirds
        // of the pace of the 20 s before.
        let mut l = Loading::new();
        for t in 0..=70 {
            let t = t as f64;
            l.push(
                t,
                GIB * (1.0 + 100.0 * (1.0 - (-t / 30.0).exp())),
                None,
                60.0,
                SEG,
            );
        }
        assert!(l.ended().is_some_and(|e| e < 40.0), "{:?}", l.ended());
        assert_eq!(l.rise_began(), Some(0.0));
        // Weights of 60 GiB taken over 10 s from 20 s on, then a leak of 0.2 GiB/s: the
        // loading ends as the leak's 4 GiB per stretch fall under a quarter of what it holds,
        // but they are no quarter of the 60 GiB the stretch before took: a load and a leak.
        let mut l = Loading::new();
        for t in 0..=90 {
            let t = t as f64;
            let gib = 1.0 + 6.0 * (t - 20.0).clamp(0.0, 10.0) + 0.2 * (t - 30.0).max(0.0);
            l.push(t, GIB * gib, None, 60.0, SEG);
        }
        assert!(l.ended().is_some(), "{:?}", l.ended());
        assert_eq!(l.rise_began(), None);
    }

    #[test]
    fn a_rise_the_cap_cut_that_stops_taking_large_parts_of_itself_was_a_load() {
        // Weights read at 1 GiB/s for 150 s, then a leak of 0.1 GiB/s: the cap ends the loading
        // at 60 s while it still takes large parts of itself; once a stretch takes less than a
        // quarter of what it held, the rise was a load that ended where that stretch began
        // (before, the cap's end stood, and the fit of the leak read through the ramp).
        let f = |t: f64| GIB * (1.0 + t.min(150.0) + 0.1 * (t - 150.0).max(0.0));
        assert_eq!(run(f, 0.0, 70.0, 60.0), Some(60.0));
        let end = run(f, 0.0, 250.0, 60.0).unwrap();
        assert!(end > 60.0 && end <= 150.0, "{end}");
    }

    #[test]
    fn start_up_in_stages_is_loading() {
        // A CUDA context, 20 s on the CPU, the weights, 10 s more, the optimizer's state.
        let f = |t: f64| {
            GIB * (0.5 + if t >= 25.0 { 1.0 } else { 0.0 } + if t >= 35.0 { 2.0 } else { 0.0 })
        };
        assert!(
            run(f, 0.0, 24.0, 60.0).is_some(),
            "a pause after the context"
        );
        assert_eq!(
            run(f, 0.0, 50.0, 60.0),
            None,
            "the weights are loading again"
        );
        assert_eq!(run(f, 0.0, 56.0, 60.0), Some(35.0));
    }

    #[test]
    fn a_first_ramp_that_gives_its_memory_back_is_start_up() {
        // Rollouts grow a cache for 30 s at the start, then it is emptied: its second round
        // after the cap comes back to a height seen before (the forecast clips it there).
        let f = |t: f64| {
            if t < 30.0 {
                GIB + 1.5 * GIB * t
            } else {
                2.0 * GIB
            }
        };
        assert_eq!(run(f, 0.0, 29.0, 60.0), None);
        assert_eq!(
            run(f, 0.0, 31.0, 60.0),
            Some(30.0),
            "growth counts after the ramp"
        );
    }

    #[test]
    fn loads_that_repeat_without_giving_memory_back_are_growth() {
        // Trained from t = 0 at 10 GiB; from t = 150 an evaluation keeps 3 GiB of outputs
        // every 35 s: after start-up, each is a step of growth, not loading again.
        let kept = |t: f64| 10.0 * GIB + 3.0 * GIB * ((t - 115.0) / 35.0).floor().max(0.0);
        assert_eq!(run(kept, 0.0, 400.0, 60.0), Some(0.0));
        // Rounds that take as much and free it all load again each time.
        let rounds = |t: f64| 10.0 * GIB + if t % 70.0 >= 35.0 { 6.0 * GIB } else { 0.0 };
        assert_eq!(
            run(rounds, 0.0, 390.0, 60.0),
            None,
            "a round at 385 s is loading"
        );
    }

    #[test]
    fn a_load_repeated_while_young_is_a_step_of_growth() {
        // Loaded to 20 GiB at once, then from t = 40 an evaluation keeps 8 GiB every 22 s, all
        // within the first two loading caps: the first step may be a stage of start-up, the
        // second, the same size with nothing given back, is that load again.
        // Known in hindsight, the first was a step too: loading ended with the weights.
        let f = |t: f64| 20.0 * GIB + 8.0 * GIB * ((t - 18.0) / 22.0).floor().max(0.0);
        assert_eq!(run(f, 0.0, 50.0, 60.0), None, "the first step is loading");
        assert_eq!(run(f, 0.0, 61.0, 60.0), Some(40.0), "until it is repeated");
        assert_eq!(
            run(f, 0.0, 110.0, 60.0),
            Some(0.0),
            "the second is growth, so was it"
        );
        // Stages of other sizes stay stages (start_up_in_stages_is_loading).
        // The same steps held as cache (20 GiB in use throughout: a warm-up's segments for
        // ever longer batches), or without the allocator's report: the first stays loading.
        for in_use in [Some(20.0 * GIB), None] {
            let mut l = Loading::new();
            for t in 0..=110 {
                l.push(t as f64, f(t as f64), in_use, 60.0, SEG);
            }
            assert_eq!(l.ended(), Some(40.0), "{in_use:?}");
        }
    }

    #[test]
    fn a_stage_repeated_before_loading_could_pause_is_a_step_of_growth() {
        // The weights, 8 GiB at t = 2, then from t = 20 an evaluation keeps 20 GiB every 18 s:
        // never a stretch without a large rise. The second evaluation repeats the first, so
        // loading ended with it; the third is a repeat too, not a stage.
        let f = |t: f64| {
            let weights = if t >= 2.0 { 9.0 * GIB } else { GIB };
            weights + 20.0 * GIB * ((t - 2.0) / 18.0).floor().max(0.0)
        };
        assert_eq!(run(f, 0.0, 47.0, 60.0), None, "not before the repeat ended");
        assert_eq!(run(f, 0.0, 49.0, 60.0), Some(20.0));
        assert_eq!(run(f, 0.0, 200.0, 60.0), Some(20.0));
        // Each step taken over two points, a fifth and then the rest: the stretch before a
        // step reaches back into the one before, so a step is known only once it stopped.
        let two = |t: f64| {
            let first_point = t >= 20.0 && (t - 2.0).rem_euclid(18.0) < 1.0;
            f(t) - if first_point { 16.0 * GIB } else { 0.0 }
        };
        assert_eq!(run(two, 0.0, 200.0, 60.0), Some(21.0));
        // Stages of other sizes (a context, the weights, the optimizer's state) stay one
        // loading: start_up_in_stages_is_loading.
    }

    #[test]
    fn steps_caught_half_risen_are_judged_whole_and_once() {
        // A model at 9.7 GiB from t = 14; from t = 34 an evaluation keeps 21.4 GiB every 21 s,
        // each step caught over two points, half of it at the first. The first step restarts
        // the loading and is measured whole; the second repeats it, so the first was a step of
        // growth too and loading ended with the model; the half-risen point of the second, at
        // the first point of a later stretch, does not make it a smaller stage of its own.
        let f = |t: f64| {
            let base = if t < 14.0 { 8.0 } else { 9.7 };
            let steps: f64 = [34.0, 55.0, 76.0, 97.0]
                .iter()
                .map(|&s| {
                    if t >= s + 1.0 {
                        21.4
                    } else if t >= s {
                        10.7
                    } else {
                        0.0
                    }
                })
                .sum();
            GIB * (base + steps)
        };
        assert_eq!(run(f, 13.0, 50.0, 60.0), None);
        assert_eq!(run(f, 13.0, 66.0, 60.0), Some(13.0));
        assert_eq!(run(f, 13.0, 80.0, 60.0), Some(13.0));
        assert_eq!(run(f, 13.0, 110.0, 60.0), Some(13.0));
    }

    #[test]
    fn shards_loaded_without_pauses_load_until_the_cap() {
        // 1 GiB every 5 s from slow storage for two minutes: one stage, however equal its
        // shards.
        let f = |t: f64| GIB * (1.0 + (t / 5.0).floor().min(24.0));
        assert_eq!(run(f, 0.0, 59.0, 60.0), None);
        assert_eq!(run(f, 0.0, 61.0, 60.0), Some(60.0));
    }

    #[test]
    fn a_young_round_that_rises_slowly_is_a_stage_once_it_stopped() {
        // Loaded to 50 GiB by t = 20, then rounds every 45 s from t = 40: the cache dips 4 GiB for 3 s,
        // fills at 0.6 GiB/s for 25 s and is dropped. Only while the dip is in the stretch
        // does a round take a quarter of what the process holds; it is undecided from then
        // until it stops rising, and then a round taken and freed: loading again.
        let f = |t: f64| {
            let r = (t - 40.0).rem_euclid(45.0);
            GIB * (1.0 + 49.0 * (t / 20.0).min(1.0))
                + match r {
                    _ if t < 40.0 => 0.0,
                    r if r < 3.0 => -4.0 * GIB,
                    r if r < 28.0 => 0.6 * GIB * (r - 3.0),
                    _ => 0.0,
                }
        };
        assert!(run(f, 0.0, 50.0, 60.0).is_some());
        assert_eq!(run(f, 0.0, 62.0, 60.0), None, "undecided while it rises");
        assert_eq!(run(f, 0.0, 66.0, 60.0), None, "however slowly");
        assert!(
            run(f, 0.0, 75.0, 60.0).is_some_and(|e| e >= 60.0),
            "loaded again after the round"
        );
    }

    #[test]
    fn a_process_that_takes_its_memory_at_once_has_loaded() {
        assert_eq!(run(|_| 2.0 * GIB, 100.0, 125.0, 60.0), Some(100.0));
    }
}
