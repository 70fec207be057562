//! The exceptions found on the development runs and the held-out plans up to
//! `reearned-twentieth` (H100s, and one plan on two H200s).

use super::allowance::{allow, Allowance};

/// Every exception, with its reason; nothing else may miss a target. docs/forecast.md has the
/// tables these come from. A limit follows the build down where a later change did better than
/// when it was written; its comment keeps the numbers as first scored.
/// An exception no run needs any more is taken out (`every_exception_is_still_needed`);
/// where its run keeps others, their comment still tells the numbers it was written for.
pub const ALLOWED: &[Allowance] = &[
    // A staircase of three steps 40 s apart whose first step the cache absorbs: two steps show
    // (the allocator's record of its peak) only 40 s before the crash, and one step alone is a
    // change of level. High holds from the second step; its ETA (the next step, when it is due)
    // is right from then on.
    allow("c-batch-warmup-2", None, "high", 38.0),
    allow("c-batch-warmup-2", None, "eta", 0.15),
    allow("c-batch-warmup-2", None, "bounds", 0.15),
    // Without the client NVML sees one step 40 s before the crash, from 1.46 to 0.32 GiB free:
    // the same as h-tight-eval's first evaluation (a step that leaves less room than itself),
    // which is healthy. A change of level is not growth, so nothing pages.
    allow("c-batch-warmup-2", Some("no client"), "critical", 0.0),
    allow("c-batch-warmup-2", Some("no client"), "high", 0.0),
    allow("c-batch-warmup-2", Some("no client"), "eta", 0.0),
    allow("c-batch-warmup-2", Some("no client"), "bounds", 0.0),
    // Without the client the sequence-length curriculum shows NVML steps only as the cache
    // grows; its allocator frees cache under pressure after the last one, and the staircase
    // is seen from its third step, 36 s before the crash (the anchor: 39 s). Its next step
    // comes 1.5 gaps late: the forecast is taken back 9 s before the crash and nothing holds
    // it (the level's 15 s hold did, until 2026-11-27). Critical from 27 s to 9 s before.
    allow("curriculum", Some("no client"), "critical", 0.0),
    // kept-views keeps a view every 10 steps: a staircase of 786 MiB segments whose steps come
    // 40 to 90 s apart as the allocator's cache absorbs them unevenly. The level of the ETA is
    // right (critical 83 s ahead, high 119 s, bounds hold the truth at 86 %), its point not:
    // a step due "one median gap" after the last comes early or late by half a gap.
    allow("kept-views", None, "eta", 0.30),
    allow("kept-views", Some("no client"), "bounds", 0.70),
    // Twice as slow, start-up and loads last longer than `analysis.eta_warmup` (60 s), and
    // what they take after that reads as growth: healthy-shared's 30 GiB checkpoint (80 s), the
    // ten jobs starting together on one GPU around h-ckpt. High for 18 to 20 s (no critical,
    // shortest ETA 75 s); the warning waits 30 s. (The notebook's larger loads and
    // healthy-prealloc's 90 % block, high for 16 and 41 s and stale, no longer are: a
    // staircase is extrapolated over at most twice the steps it has shown.)
    allow("healthy-shared", Some("slower ×2"), "leak_seconds", 5.0),
    // Held out, found when the held-out runs were scored (docs/forecast.md), not fixed:
    // - a cache that grows 768 MiB/s from its process's first second reads as loading for
    //   `analysis.eta_warmup`, as a checkpoint read at disk speed would: critical 21 s ahead
    //   (the anchor: 60 s).
    // Since 2026-11-29 (docs/forecast.md, "A smooth rise pages once it has been seen as long
    // as its ETA"): critical 19.9 s ahead (a smooth rise pages once seen as long as its ETA);
    allow("c-grower-young", None, "critical", 19.0),
    // - the batch warm-ups of the live run (stages of 25 s) and of c-batch-warmup-3 (30 s):
    //   two steps of the allocator's record show 24 s and 59 s before the crash, and one step
    //   is a change of level. The anchor pages on the step itself (74 and 48 s).
    allow("live-c-batch-warmup", None, "critical", 23.0),
    allow("c-batch-warmup-3", None, "high", 58.0),
    allow("c-batch-warmup-3", None, "eta", 0.18),
    allow("c-batch-warmup-3", None, "bounds", 0.29),
    // - expandable segments with 60 s of growth (the live run): a trend is extrapolated once it
    //   has lasted `analysis.eta_min_span` (20 s) after loading, which leaves at most 40 s.
    // Since 2026-11-29 (docs/forecast.md, "A smooth rise pages once it has been seen as long
    // as its ETA"): critical 23-24 s ahead (a smooth rise pages once seen as long as its ETA);
    allow("live-c-expandable", None, "critical", 23.0),
    // - without the client, curriculum-2 shows its staircase 37 s ahead (the anchor: 39 s), as
    //   curriculum does, and loses it before the crash as curriculum does.
    allow("curriculum-2", Some("no client"), "critical", 0.0),
    // - twice as slow, live torch.compile and the reinforcement-learning loop show their
    //   allocator's floor rising for 23 and 13 s. (cuDNN autotuning beside nine jobs, high
    //   for 26 s and a leak flag for 152 s twice as slow, no longer is: a floor whose last
    //   third is flat is no leak.)
    allow("live-h-compile", Some("slower ×2"), "leak_seconds", 12.0),
    // After the forecast took back what its evidence no longer holds (a smooth rise quiet for
    // 15 s, a staircase's step 1.5 gaps late): the KV cache's bounds hold the truth at 78 %
    // (80 % before), and with one expandable segment kept-logits-2's staircase pauses long
    // enough to lose its ETA for a moment: critical 41.6 s ahead, ETA within 35 % at 45 %;
    // since the cache's largest free block is remembered between its measurements, its
    // steps are measured from the peak for longer and the ETA is within 35 % at 22 %.
    allow(
        "live-kept-logits-2",
        Some("one expandable segment"),
        "critical",
        41.0,
    ),
    allow(
        "live-kept-logits-2",
        Some("one expandable segment"),
        "eta",
        0.21,
    ),
    allow(
        "live-kept-logits-2",
        Some("one expandable segment"),
        "bounds",
        0.21,
    ),
    allow("live-h-rl", Some("slower ×2"), "leak_seconds", 10.0),
    // The leak's persistence windows start at the fit's start (2026-11-27, see
    // `evidence::persistent`): twice as slow, h-rl's floor reads as a leak for 5 s.
    allow("h-rl", Some("slower ×2"), "leak_seconds", 5.0),
    // Issue 37's shapes, recorded on four H100s side by side (data/results/
    // h100x4-2026-11-26-reearned): what the forecast still misses, measured, not understood
    // or not fixed yet; docs/forecast.md has the numbers beside the anchor and the live pages.
    // - An evaluation that keeps its outputs: since a load repeated while the process is young
    //   is a step of growth (analysis::loading), critical is held 57-61 s ahead on every run
    //   and variant, with and without the client; high from 88-102 s (target 90), the ETA
    //   right at 46-82 % of the seconds (with one expandable segment 6-28 %, its bounds 41 %).
    //   Evaluations every 19 s (c-eval-kept-check, H200) never leave loading a stretch to
    //   end: a stage that repeats the one before it ends loading there, so they are paged
    //   55 s ahead with and without the client (18 and 0 s before).
    allow("c-eval-kept", None, "eta", 0.06),
    allow("c-eval-kept", None, "bounds", 0.53),
    allow("c-eval-kept-2", None, "eta", 0.28),
    // - Trials of a sweep leaking together on one GPU: critical held 41 s before the first
    //   failure (target 45); twice as slow 2 s; held out 27 s. Without the client none held,
    //   and none can be: the leak stays inside each trial's cache, and between the model
    //   ready and the crash NVML shows each trial take one segment (0.77 GiB, all three at
    //   once) and nothing else for 40-66 s (c-multi-leak-3 and its H200 run alike): one
    //   step is no trend.
    // Since 2026-11-29 (docs/forecast.md, "A smooth rise pages once it has been seen as long
    // as its ETA"): critical 20.7 s ahead (a smooth rise pages once seen as long as its ETA);
    allow("c-multi-leak", None, "critical", 20.0),
    allow("c-multi-leak", Some("no client"), "critical", 0.0),
    //   Since a trial's growth fills the free block its own cache holds before it closes
    //   the others' room (2026-11-27): twice as slow 1 s, held out 26 s; since the trials'
    //   staircases fill the room step by step, 0 s twice as slow (one segment each, then the
    //   crash, twice as far apart: the step that fails is one gap of the staircase away).
    allow("c-multi-leak", Some("slower ×2"), "slower", 0.0),
    allow("c-multi-leak-2", None, "critical", 26.0),
    // - Reinforcement-learning rounds whose peaks rise to a crash: critical from the fourth
    //   round's peak on, 73 s ahead (held out 34 s: its fourth peak comes 34 s before the
    //   crash), so high from then only (target 90 s), the ETA right at half the seconds.
    //   Twice as slow, a moment at critical during the start-up load, 373 s ahead (as before
    //   the rounds were measured from the end of the load).
    // Since 2026-11-29 (fourth; docs/forecast.md, "A load is what stays"): a first rollout
    // begun as the weights were in is a round, its peak the first; every job whose peaks rise
    // is paged a round earlier (these: critical 34 -> 58-70 s ahead, c-rising-peaks-4 and
    // h200-c-rising-peaks-4 0 -> 28 s, no longer exceptions), the limits below tightened.
    allow("c-rising-peaks-2", None, "high", 61.0),
    allow("c-rising-peaks-2", None, "eta", 0.43),
    allow("c-rising-peaks-2", None, "bounds", 0.44),
    // - A checkpoint that gathers part of the model: its first two gathers raise the
    //   allocator's peak twice and read as a staircase; high for 20 s. Held out, the cache's
    //   largest free block (measured every few reports) serves the next gather: nothing as
    //   recorded, high for 25 s twice as slow, 37 s on a 141 GiB card and 55 s beside a
    //   neighbour of 10 % (the room then holds fewer of its steps). No stale second.
    //   Since no level is held after its ETA is gone (2026-11-27): 6 s, and held out 11 s
    //   twice as slow, 23 s on a 141 GiB card. (Beside a neighbour 41 s, until a flat
    //   neighbour no longer asked for its own size rounded up by the history, 2026-11-27.)
    //   Since a step of the sampled high-water mark counts only once it outlived the mark's
    //   window (2026-11-27, third, `Demand::update`): never at high, no ETA, in any variant.
    // - Slow loads: the load's last shards read as a leak after `analysis.warmup` +
    //   `leak_min_span`, until 30 s of the floor (or one and a half of its steps' gaps) are
    //   flat: twice as slow 170 s, 120 of them while it still rises; held out 52 s as
    //   recorded (10 while it rises), 192 s twice as slow. No risk alert: the leak alert
    //   waits 5 minutes. (A minute of flat floor, until 2026-11-27, seventh: 25 s more on
    //   every slow load.)
    allow("h-slow-load", None, "leak_seconds", 170.0),
    allow("h-slow-load-2", None, "leak_seconds", 47.0),
    // (Twice as slow 205 s since the end of a loading the cap cut moves to where it stopped
    // taking large parts of itself.)
    allow("h-slow-load-2", Some("slower ×2"), "leak_seconds", 205.0),
    // - A staircase is extrapolated over at most twice the steps it has shown: leaks in
    //   segments warn up to 9 s later than before (high 81-89 s ahead, target 90), bounds
    //   hold the truth less often (62-76 %).
    allow("kept-logits", None, "high", 81.0),
    allow("kept-logits", None, "bounds", 0.62),
    allow("kept-logits-2", None, "high", 89.0),
    allow("kept-logits-2", None, "bounds", 0.7),
    allow("kept-views", None, "bounds", 0.76),
    allow("live-kept-logits", None, "bounds", 0.73),
    allow("live-kept-logits-2", None, "high", 83.0),
    allow("live-kept-logits-2", None, "bounds", 0.64),
    // - Held out and scored once (2026-11-27, the six shapes with new sizes and seeds, recorded
    //   after the rules above were written; docs/forecast.md has the live pages):
    //   an evaluation every 23 s: critical 61 s ahead (58 without the client), high from 88-89 s;
    //   since no level is held after its ETA is gone (2026-11-27) critical and high from 50 s:
    //   its peak view reads one evaluation's step, caught by the high-water mark in five
    //   parts, as a staircase of 1.5 GB steps 5.5 s apart, the steepest view, which may be
    //   extrapolated over twice its five steps only, short of the room: no ETA for 3 s at a
    //   time between two evaluations, which the 15 s hold used to bridge. Since the need's
    //   own staircase says when where that view cannot (2026-11-27, `oom::eta`): critical
    //   61 s, high 88 s ahead;
    allow("c-eval-kept-3", None, "high", 88.0),
    allow("c-eval-kept-3", None, "eta", 0.26),
    allow("c-eval-kept-3", None, "bounds", 0.68),
    //   three trials leaking together: critical 40 s ahead, none without the client or twice
    //   as slow (as c-multi-leak);
    // Since 2026-11-29 (docs/forecast.md, "A smooth rise pages once it has been seen as long
    // as its ETA"): critical 30 s ahead (a smooth rise pages once seen as long as its ETA);
    allow("c-multi-leak-3", None, "critical", 30.0),
    allow("c-multi-leak-3", Some("no client"), "critical", 0.0),
    //   rounds that rise: critical from the fourth peak, 34 s ahead (target met: the anchor
    //   leads by 5 s), so high no earlier; a job that fails in the round after its third peak
    //   shows too few rounds for a trend (three rising peaks are what chance gives one time in
    //   six) and is not held at critical (anchor: 1 s);
    allow("c-rising-peaks-3", None, "high", 67.0),
    //   without the level's hold its ETA is there only while a round's evidence is: within
    //   35 % at 6-7 % of the seconds (critical held 34 s ahead, as before);
    allow("c-rising-peaks-3", None, "eta", 0.41),
    allow("c-rising-peaks-3", None, "bounds", 0.47),
    //   a load of 95 s twice as slow reads as a leak after it (as h-slow-load).
    allow("h-slow-load-3", Some("slower ×2"), "leak_seconds", 77.0),
    // - The same plan again on 4x H200 with the build after the rules above (recordings named
    //   h200-*, scored once): the same shortfalls, the same reasons.
    allow("h200-c-eval-kept-3", None, "high", 89.0),
    allow("h200-c-eval-kept-3", None, "eta", 0.23),
    allow("h200-c-eval-kept-3", None, "bounds", 0.69),
    // Since 2026-11-29 (docs/forecast.md, "A smooth rise pages once it has been seen as long
    // as its ETA"): critical 15.7 s ahead (a smooth rise pages once seen as long as its ETA);
    allow("h200-c-multi-leak-3", None, "critical", 15.0),
    allow("h200-c-multi-leak-3", Some("no client"), "critical", 0.0),
    allow("h200-c-multi-leak-3", Some("slower ×2"), "slower", 0.0),
    allow("h200-c-rising-peaks-3", None, "high", 67.0),
    allow("h200-c-rising-peaks-3", None, "eta", 0.40),
    allow("h200-c-rising-peaks-3", None, "bounds", 0.47),
    allow(
        "h200-h-slow-load-3",
        Some("slower ×2"),
        "leak_seconds",
        72.0,
    ),
    // - Held out and scored once (2026-11-27, the `reearned-fifth` plan on four H100s, recorded
    //   after every rule above; data/results/h100x4-2026-11-27-fifth has the live pages and
    //   the first scoring). Each crash paged live before it, no healthy run paged or warned.
    //   A curriculum sized to leave one stage's room after its load: one step shows 50 s
    //   before the crash and is a change of level, the second 24 s before (the anchor's 74 s
    //   is its load's ramp extrapolated); without the client NVML shows the last step only;
    allow("c-curriculum-3", None, "critical", 23.0),
    allow("c-curriculum-3", Some("no client"), "critical", 0.0),
    //   evaluations every 26 s that keep their outputs: critical 57-60 s ahead, high from
    //   78 s, the ETA within 35 % at half the seconds (5 % with one expandable segment);
    allow("c-eval-kept-5", None, "high", 78.0),
    allow("c-eval-kept-5", None, "eta", 0.29),
    allow("c-eval-kept-5", None, "bounds", 0.53),
    //   logits kept every third step, without the client: NVML sees the cache's segments,
    //   high from 78 s;
    allow("c-kept-logits-3", Some("no client"), "high", 77.0),
    allow("c-kept-logits-3", Some("no client"), "eta", 0.58),
    allow("c-kept-logits-3", Some("no client"), "bounds", 0.58),
    //   a batch warm-up without the client: NVML sees the stages the cache did not absorb,
    //   critical 23 s ahead (54 with it);
    allow("c-batch-warmup-4", Some("no client"), "critical", 22.0),
    //   twice as slow, the load's last shards read as a leak (as h-slow-load), and the
    //   checkpoint gathers near the limit raise the allocator's record twice, 70 s apart:
    //   a staircase whose next step is due within one and a half gaps, high for 92 s (never
    //   critical). Since steps that shrink are bounded by the rest of their series
    //   (2026-11-27, third, `trend::fit_demand`): 6.2 then 3.3 GiB leave about 3.7 GiB to come,
    //   which the room holds; high for 5 s while the sampled high-water mark still held the
    //   second gather, and never since a step of the mark counts only once it outlived its
    //   window.
    allow("h-slow-load-4", Some("slower ×2"), "leak_seconds", 75.0),
    // - Held out and scored once (2026-11-27, the `reearned-sixth` plan on two H200s, recorded
    //   after every rule above but the loading's half-risen steps; data/results/
    //   h200x2-2026-11-27-sixth has the live pages and the scoring). Live, the four healthy
    //   jobs sent nothing; every crash was paged with the client, all but the batch warm-up
    //   without it. In replay no healthy run is at critical.
    //   A batch warm-up whose first batch takes 96 % of the card: the allocator's record rises
    //   twice, 22 s apart, the second 21 s before the crash (the anchor's 65 s is the load's
    //   ramp extrapolated); NVML sees 1.6 % of the card move, nothing to forecast from;
    allow("h200-c-batch-warmup-5", None, "critical", 20.0),
    allow("h200-c-batch-warmup-5", Some("no client"), "critical", 0.0),
    //   a curriculum whose stages the cache absorbs: NVML alone sees its last stage only;
    allow("h200-c-curriculum-4", Some("no client"), "critical", 0.0),
    //   evaluations every 21 s that keep 14 % of the card each: scored once, critical and
    //   high 41 s ahead (anchor 61): where a step was caught half risen, the loading took the
    //   rest of it for a stage of its own and began again. Since a step is measured whole and
    //   judged once (`analysis::loading`): critical 58 s, high 82 s ahead (63 with one
    //   expandable segment);
    allow("h200-c-eval-kept-6", None, "high", 81.0),
    allow("h200-c-eval-kept-6", None, "eta", 0.26),
    allow("h200-c-eval-kept-6", None, "bounds", 0.45),
    //   rounds from half the card: critical 31 s ahead (anchor 4), no trend before the fourth
    //   peak;
    allow("h200-c-rising-peaks-5", None, "high", 61.0),
    allow("h200-c-rising-peaks-5", None, "eta", 0.29),
    allow("h200-c-rising-peaks-5", None, "bounds", 0.41),
    //   the slow load's last shards read as a leak for 32 s (150 twice as slow; 27 and 125
    //   since 30 s of flat floor let a flag go), the slowed warm-up's last maxima for 80 s (the
    //   leak alert waits 5 minutes).
    allow("h200-h-slow-load-5", None, "leak_seconds", 5.0),
    allow(
        "h200-h-slow-load-5",
        Some("slower ×2"),
        "leak_seconds",
        95.0,
    ),
    // - Held out and scored once (2026-11-27, the `reearned-seventh` plan on four H200s,
    //   recorded with the build after every rule above; data/results/
    //   h200x4-2026-11-27-seventh). Five healthy kinds of older plans (RL rounds, bursty
    //   inference, dynamic padding, gathers of a fifth of the card, a cache emptied every
    //   10 s): nothing live, never at high in replay, in any variant. Evaluations every 30 s
    //   that keep their outputs: critical 59 s ahead (anchor 30), high from 60 s (30 with one
    //   expandable segment);
    allow("h200-c-eval-kept-7", None, "high", 33.0),
    allow("h200-c-eval-kept-7", None, "eta", 0.30),
    allow("h200-c-eval-kept-7", None, "bounds", 0.39),
    //   three trials leaking together (as c-multi-leak-3): critical 36 s ahead, none without
    //   the client or twice as slow.
    // Since 2026-11-29 (docs/forecast.md, "A smooth rise pages once it has been seen as long
    // as its ETA"): critical 25 s ahead (a smooth rise pages once seen as long as its ETA);
    allow("h200-c-multi-leak-4", None, "critical", 24.0),
    allow("h200-c-multi-leak-4", Some("no client"), "critical", 0.0),
    allow("h200-c-multi-leak-4", Some("slower ×2"), "slower", 0.0),
    // Held out, reearned-eighth (four H100s side by side, data/results/
    // h100x4-2026-11-27-eighth) and its check on two (h100x2-2026-11-27-eighth-check):
    // trials whose leak outgrows their caches, so that NVML alone sees each take segment after
    // segment. Live, one page each, client / NVML alone: 68 / 73, 41 / 46, 50 / 40, 42 / 47 s
    // ahead; the healthy sweeps of three trials beside 3 GiB free never at high. Since the
    // staircases of several processes fill the room step by step (`oom::first_step_short`),
    // critical is held 52-59 s ahead in every variant, twice as slow included. Short:
    // - high from 55-64 s where the growth lasted longer (target 90), without the client for
    //   the trials that keep logits every other step, in every variant for four trials at
    //   two rates; the ETA within 35 % at 29-37 % of the seconds, its bounds 33-39 %;
    allow("c-multi-leak-6", None, "high", 57.0),
    allow("c-multi-leak-6", None, "eta", 0.35),
    allow("c-multi-leak-6", None, "bounds", 0.36),
    allow("c-multi-leak-7", Some("no client"), "high", 54.0),
    allow("c-multi-leak-7", None, "eta", 0.34),
    allow("c-multi-leak-7", None, "bounds", 0.34),
    allow("c-multi-leak-8", Some("no client"), "high", 56.0),
    allow("c-multi-leak-8", None, "eta", 0.34),
    allow("c-multi-leak-8", None, "bounds", 0.34),
    // - twice as slow, the two trials' allocator's bytes grow smoothly from early on: high,
    //   and one phase's first critical, 307 s before the failure (target 300), until two
    //   unlike steps were no staircase (2026-11-29, fifth).
    // Held out, reearned-ninth (two H200s, data/results/h200x2-2026-11-27-ninth): two trials at
    // half c-multi-leak-7's pace, paged live 41 / 46 s ahead (client / NVML alone), critical
    // held 54 s in replay, its bounds holding the truth at 74 %. Twice as slow again it was
    // never critical (high for 396 s): each trial's allocator peak rises smoothly inside its
    // cache and the room was measured from what the trials hold, which moves only when one
    // takes a segment (ETA 142 s for the last 90 s). Since such a rise reaches the driver in
    // segments on its own schedule (`oom::Segments`, 2026-11-27, fifth): the ETA counts down
    // to the segment that no longer fits, critical 32 s ahead; it reads the cache as used up
    // when the peak and one request fill it, and the cache fails a request before that.
    allow("h200-c-multi-leak-9", None, "bounds", 0.77),
    allow("h200-c-multi-leak-9", Some("slower ×2"), "slower", 31.0),
    // Held out, reearned-tenth (four H100s side by side, data/results/h100x4-2026-11-27-tenth),
    // recorded with the build after `oom::Segments` and scored once. Trials slower again: two
    // at half h200-c-multi-leak-9's pace, three at another rate. Live, each paged with the
    // client only at the failure (4 s ahead, 2 s after), warned 399 and 273 s ahead; on NVML
    // alone nothing: one segment per trial after its cache, then the crash. In replay critical
    // 13 and 1 s ahead, none twice as slow: each trial's peak rises about 2 MB/s, and the
    // level the forecast counts down to (the peak, what it holds outside the allocator and a
    // request) is some 0.1 GiB short of where a request fails, a minute at that pace.
    allow("c-multi-leak-10", None, "eta", 0.0),
    allow("c-multi-leak-10", None, "bounds", 0.28),
    allow("c-multi-leak-10", Some("no client"), "high", 0.0),
    allow("c-multi-leak-10", Some("no client"), "bounds", 0.0),
    allow("c-multi-leak-10", Some("slower ×2"), "slower", 0.0),
    allow("c-multi-leak-11", None, "eta", 0.0),
    allow("c-multi-leak-11", None, "bounds", 0.12),
    allow("c-multi-leak-11", Some("no client"), "high", 0.0),
    allow("c-multi-leak-11", Some("no client"), "bounds", 0.0),
    allow("c-multi-leak-11", Some("slower ×2"), "slower", 2.0),
    // - a warm-up whose record batches each took a segment of their own (13 GiB steps 40-78 s
    //   apart) to 96 % of the card, then flat with a fifth of it in use: paged live, with and
    //   without the client, critical for 105 s in replay. With the client no longer (2026-11-27,
    //   fifth: steps of what a process holds that its empty segments would serve at its peak
    //   are its cache's, `Demand::update`). Without it NVML sees a staircase whose next step
    //   does not fit, due on its schedule: the forecast stands until 1.5 gaps have passed, as
    //   for a batch warm-up that will crash there. Its held staircase read as a leak for 75 s
    //   (120 twice as slow) until a rise of what a process holds that its empty segments
    //   would give back at its peak was no leak (2026-11-27). Since 2026-11-29 (docs/forecast.md,
    //   "Segments of a request that grows") never at high without the client either.
    // Held out, reearned-eleventh (four H100s, data/results/h100x4-2026-11-27-eleventh), recorded
    // with the build after the rule above and scored once. Live with the client: the warm-up
    // nothing (NVML alone a page, as above), the gathers nothing, the fragmentation crash paged
    // 87 s ahead, the batch warm-up 52 s. In replay:
    // - a fragmentation crash: critical first 128 s ahead but not held (the cache flushed and
    //   regrown near the limit takes the ETA away for a second now and then: 5 s held), as
    //   before the rule; nothing on NVML alone;
    allow("c-frag-2", None, "high", 4.0),
    allow("c-frag-2", None, "eta", 0.1),
    allow("c-frag-2", None, "bounds", 0.41),
    allow("c-frag-2", Some("no client"), "high", 0.0),
    allow("c-frag-2", Some("no client"), "eta", 0.0),
    allow("c-frag-2", Some("no client"), "bounds", 0.0),
    // - a batch warm-up: critical 56 s ahead, high from 58 s; 24 s without the client;
    allow("c-batch-warmup-6", None, "high", 58.0),
    allow("c-batch-warmup-6", None, "eta", 0.18),
    allow("c-batch-warmup-6", None, "bounds", 0.29),
    allow("c-batch-warmup-6", Some("no client"), "critical", 24.0),
    allow("c-batch-warmup-6", Some("no client"), "high", 24.0),
    allow("c-batch-warmup-6", Some("no client"), "eta", 0.05),
    allow("c-batch-warmup-6", Some("no client"), "bounds", 0.05),
    // - gathers of a fifth of the model near the limit: high for 3 s (ETA 177 s at the least);
    allow("h-ckpt-gather-10", None, "high_seconds", 3.0),
    allow("h-ckpt-gather-10", None, "min_eta", 177.0),
    // - the warm-up again (13 GiB segments to 96 %): never at high with the client; without
    //   it critical for 108 s, as h-warmup-saturate-6; its held staircase no leak (it was for
    //   90 s before the rule above). Since 2026-11-29 never at high without the client either.
    // Held out, reearned-twelfth (two H100s, data/results/h100x2-2026-11-27-twelfth), recorded
    // with the build after the rule that a rise of what a process holds that its empty segments
    // would give back is no leak, and scored once. Live, a page on each run with and without the
    // client: the evaluations' 51 / 56 s ahead, and the warm-up's a page on a healthy job (at
    // 79-139 s, between its steps at 64 and 143 s; no replay at 1 s, in any phase, reaches high
    // there: docs/forecast.md). In replay:
    // - evaluations every ~23 s that keep their outputs: critical 58 s ahead, high from 67 s;
    allow("c-eval-kept-8", None, "high", 66.0),
    allow("c-eval-kept-8", None, "eta", 0.47),
    allow("c-eval-kept-8", None, "bounds", 0.47),
    allow("c-eval-kept-8", Some("one expandable segment"), "eta", 0.02),
    allow(
        "c-eval-kept-8",
        Some("one expandable segment"),
        "bounds",
        0.54,
    ),
    // - a warm-up by ever rarer batch sizes to 91 %: never at high with the client; without it
    //   the staircase's next step did not fit, critical 67 s until the job ended, until its
    //   first step after loading, 19 s after it in a staircase whose gap was 80 s, was read as
    //   the load's last stage (2026-11-28, a tread measured against the staircase's own gap):
    //   nothing in any variant. Its job again with the same seed (h-warmup-saturate-8b, for development)
    //   likewise.
    // Held out, reearned-thirteenth (data/results/h100x4-2026-11-27-thirteenth), scored once
    // with the build watched live: nothing live on any run or route, nothing in replay but a
    // load of 30 GiB over 90 s twice as slow, a leak for 117 s (the flag needed its floor flat
    // over a minute to let go; 92 s since 30 s do).
    allow("h-slow-load-6", Some("slower ×2"), "leak_seconds", 112.0),
    // Held out, reearned-fourteenth (two H100s, two runs at a time; data/results/
    // h100x2-2026-11-27-fourteenth), scored once with the build watched live, the first whose
    // exporters analysed every second. Live, with the client / NVML alone: the evaluations paged
    // 42 / 47 s ahead, the rollouts 32 / 22 s, the warm-up and the load nothing. In replay:
    // - evaluations every ~26 s that keep 12.7 GiB each: critical 58 s ahead in every variant
    //   (`predict_linear` 50 s), high from 76 s;
    allow("c-eval-kept-9", None, "high", 75.0),
    allow("c-eval-kept-9", None, "eta", 0.55),
    allow("c-eval-kept-9", None, "bounds", 0.55),
    allow("c-eval-kept-9", Some("one expandable segment"), "eta", 0.24),
    allow(
        "c-eval-kept-9",
        Some("one expandable segment"),
        "bounds",
        0.54,
    ),
    // - rollouts from half the card whose peaks rise until the sixth does not fit: critical 35 s
    //   ahead (`predict_linear` 4 s), high no earlier; twice as slow a first critical 315 s
    //   ahead (not held: held 68 s);
    allow("c-rising-peaks-6", None, "high", 70.0),
    allow("c-rising-peaks-6", None, "eta", 0.46),
    allow("c-rising-peaks-6", None, "bounds", 0.50),
    // - a load of 24 GiB over 130 s, then serving: never at high; its last shards a leak for
    //   42 s (167 s twice as slow), as the other slow loads.
    allow("h-slow-load-7", None, "leak_seconds", 147.0),
    // Held out, reearned-fifteenth (four H100s; data/results/h100x4-2026-11-28-fifteenth),
    // scored once with the build watched live. Live, with the client / NVML alone: the
    // evaluations paged 55 / 45 s ahead, the checkpoint gather and the warm-up nothing, and
    // three trials leaking together no page (a warning 48 s ahead with the client, nothing
    // without). In replay:
    // - evaluations every ~31 s that keep 12.7 GiB each: critical 60 s ahead in every variant
    //   but one (`predict_linear` 59 s), high from 90 s; with one expandable segment critical
    //   44 s and high 59 s ahead;
    allow("c-eval-kept-10", None, "high", 89.0),
    allow("c-eval-kept-10", None, "bounds", 0.69),
    allow(
        "c-eval-kept-10",
        Some("one expandable segment"),
        "high",
        62.0,
    ),
    allow(
        "c-eval-kept-10",
        Some("one expandable segment"),
        "eta",
        0.38,
    ),
    allow(
        "c-eval-kept-10",
        Some("one expandable segment"),
        "bounds",
        0.45,
    ),
    // - three trials of a sweep leaking 6 MB/s each inside their caches, the device flat at
    //   98 % for the last 87 s: no critical (`predict_linear` none either), high 100 s ahead
    //   with the client on an ETA that stands at 89 s (the room beside what they hold, which
    //   does not close while the growth stays in their caches), nothing without it. Each took
    //   one segment since loading, too few to know the size of the request that fails.
    allow("c-multi-leak-12", None, "eta", 0.0),
    allow("c-multi-leak-12", None, "bounds", 0.0),
    allow("c-multi-leak-12", Some("no client"), "high", 0.0),
    // Held out, reearned-sixteenth (four H100s; data/results/h100x4-2026-11-28-sixteenth),
    // scored once with the same build. Live, with the client / NVML alone: the rollouts paged
    // 19 / 24 s ahead, two warm-ups and a load nothing. In replay:
    // - rollouts from half the card whose peaks rise until the sixth does not fit: critical 16 s
    //   ahead with the client, 32 s without (`predict_linear` 4 s); with the client the need
    //   forgot the fifth round's peak a high-water window after it, while another view's growth
    //   was the steepest, and the ETA was gone for three seconds as the sixth round began. Since
    //   a process whose rounds rise needs its highest round whichever view is the steepest: 32 s
    //   in every variant, high no earlier;
    allow("c-rising-peaks-7", None, "high", 63.0),
    allow("c-rising-peaks-7", None, "eta", 0.41),
    allow("c-rising-peaks-7", None, "bounds", 0.43),
    // - a load of 28 GiB over 110 s, then serving: high 20 s while it rose, never after; its last
    //   shards a leak for 22 s (107 s twice as slow), as the other slow loads.
    allow("h-slow-load-8", None, "leak_seconds", 107.0),
    // Held out, reearned-seventeenth (four H100s; data/results/h100x4-2026-11-28-seventeenth),
    // scored once with the build after the rule above. Live, with the client / NVML alone: the
    // rollouts paged 20 / 25 s ahead, the evaluations 49 / 54 s, the RL loop nothing, and the
    // warm-up nothing with the client but a page without it. In replay:
    // - evaluations every ~29 s that keep 12.7 GiB each: critical 61 s ahead (`predict_linear`
    //   56 s), high 85 s;
    allow("c-eval-kept-11", None, "high", 84.0),
    allow("c-eval-kept-11", None, "bounds", 0.38),
    allow(
        "c-eval-kept-11",
        Some("one expandable segment"),
        "eta",
        0.11,
    ),
    // - rollouts from 45 % of the card whose peaks rise until the sixth does not fit: critical
    //   34 s ahead in every variant (`predict_linear` 5 s), high no earlier;
    allow("c-rising-peaks-8", None, "high", 58.0),
    allow("c-rising-peaks-8", None, "eta", 0.44),
    allow("c-rising-peaks-8", None, "bounds", 0.45),
    // - a warm-up whose new largest batches took 14-16 GiB each, 24, 24 and 56 s apart, to
    //   96 %: without the client a staircase whose next step did not fit, critical for 80 s,
    //   and the live page; nothing in any variant since a tread is measured against the
    //   staircase's own gap (2026-11-28: its first step after loading came 22 s after it, the
    //   next 56 s later).
    // Held out, reearned-eighteenth (four H100s; data/results/h100x4-2026-11-28-eighteenth),
    // scored once with the build watched live (the forecast of the seventeenth). Live, with the
    // client / NVML alone: the evaluations paged 60 / 50 s ahead, the two trials 41 / 46 s, the
    // load and the gathers nothing. In replay:
    // - evaluations every ~41 s that keep 15.3 GiB each: critical 61 s ahead (`predict_linear`
    //   40 s), high 80 s (the first evaluation read as a stage of the start-up, as c-eval-kept-9),
    //   its bounds 60 %; with one expandable segment critical and high 42 s;
    allow("c-eval-kept-12", None, "high", 79.0),
    allow("c-eval-kept-12", None, "bounds", 0.59),
    allow(
        "c-eval-kept-12",
        Some("one expandable segment"),
        "eta",
        0.37,
    ),
    allow(
        "c-eval-kept-12",
        Some("one expandable segment"),
        "bounds",
        0.49,
    ),
    // - two trials leaking together: critical 53 s ahead (`predict_linear` 51 s), high 111 s;
    //   the ETA within 35 % at 34-37 % of the seconds, its bounds the same; without the client
    //   high from 54 s (as c-multi-leak-7 and -8);
    allow("c-multi-leak-13", None, "eta", 0.34),
    allow("c-multi-leak-13", None, "bounds", 0.34),
    allow("c-multi-leak-13", Some("no client"), "high", 53.0),
    // - a load of 19.4 GiB over 160 s in five shards at 88-250 MiB/s: never at high; its last
    //   shards read as a leak for 18-20 s, 210 s twice as slow (as the other slow loads; the
    //   leak alert waits 5 minutes). The checkpoint gathering 18 % of the card every 55 s:
    //   nothing as recorded, but twice as slow high for 130 s, its ETA counting down to a step
    //   made of the trainer's first peak after loading and the first gather, 110 s apart; since
    //   a tread is measured against the staircase's own gap and read after a change of level
    //   too (2026-11-28), nothing in any variant.
    allow("h-slow-load-9", None, "leak_seconds", 20.0),
    allow("h-slow-load-9", Some("slower ×2"), "leak_seconds", 215.0),
    // Held out, reearned-nineteenth (four H100s; data/results/h100x4-2026-11-28-nineteenth),
    // scored once with the build after the tread rule, watched live: the warm-up to 94 %
    // nothing on either route (and h-warmup-saturate-14's job again, in dev, nothing where it
    // paged before), the evaluations paged 44 / 49 s ahead, the batch warm-up 56 / 46 s. In
    // replay:
    // - evaluations every ~26 s that keep their outputs: critical 58 s ahead (`predict_linear`
    //   50 s), high 76 s (the first evaluation read as a stage of the start-up, as
    //   c-eval-kept-9 and -12); a staircase's ETA is right to its level, its point off by up to
    //   half a gap: within 35 % at 53-55 % of the seconds, its bounds 55 %; with one
    //   expandable segment 13 % and 38 % (11 % since the first evaluation is known as a step
    //   in hindsight: critical 100 s ahead, its ETA short);
    allow("c-eval-kept-13", None, "high", 75.0),
    allow("c-eval-kept-13", None, "eta", 0.52),
    allow("c-eval-kept-13", None, "bounds", 0.54),
    allow(
        "c-eval-kept-13",
        Some("one expandable segment"),
        "eta",
        0.11,
    ),
    allow(
        "c-eval-kept-13",
        Some("one expandable segment"),
        "bounds",
        0.61,
    ),
    // - a batch raised every 30 s until a stage does not fit: critical 58 s ahead
    //   (`predict_linear` 48 s), high from its second step after loading, 58 s (as
    //   c-batch-warmup-3 and -6); the ETA within 35 % and its bounds at 38-39 % of the seconds,
    //   19 % and 30 % with one expandable segment.
    allow("c-batch-warmup-7", None, "high", 58.0),
    allow("c-batch-warmup-7", None, "eta", 0.37),
    allow("c-batch-warmup-7", None, "bounds", 0.37),
    allow(
        "c-batch-warmup-7",
        Some("one expandable segment"),
        "eta",
        0.18,
    ),
    allow(
        "c-batch-warmup-7",
        Some("one expandable segment"),
        "bounds",
        0.29,
    ),
    // Held out, reearned-twentieth (four H100s; data/results/h100x4-2026-11-28-twentieth),
    // scored once with the build watched live (the tread rule's). Live, with the client / NVML
    // alone: the warm-up to 96 % and the gathers nothing (NVML alone inferred an OOM when the
    // warm-up ended: forecast.md, known limits), the evaluations paged 44 / 49 s ahead, the
    // curriculum 16 s / not at all. In replay (the build before the tread rule: the warm-up
    // without the client critical 18 s, the gathers twice as slow high 43 s):
    // - evaluations every ~36 s that keep their outputs: critical 58 s ahead (`predict_linear`
    //   35 s), high 70 s (the first evaluation a stage of the start-up); the ETA within 35 % and
    //   its bounds at 50 %, 11 % and 16 % with one expandable segment;
    allow("c-eval-kept-14", None, "high", 70.0),
    allow("c-eval-kept-14", None, "eta", 0.49),
    allow("c-eval-kept-14", None, "bounds", 0.49),
    allow(
        "c-eval-kept-14",
        Some("one expandable segment"),
        "eta",
        0.13,
    ),
    allow(
        "c-eval-kept-14",
        Some("one expandable segment"),
        "bounds",
        0.50,
    ),
    // - a curriculum whose third stage ran out 75 s into its growth (the plan allowed five):
    //   two steps make a staircase, so critical 23 s ahead, at the second; one step is a change
    //   of level; without the client NVML showed one step, 25 s before the crash (the first
    //   stage was served by the cache the start-up left): a change of level, nothing.
    //   `predict_linear` "leads" by 74 s because it extrapolates the 65 GiB block taken at
    //   start-up, as it pages every load;
    allow("c-curriculum-5", None, "critical", 23.0),
    allow("c-curriculum-5", Some("no client"), "critical", 0.0),
    //   Gathers of 20 % of the card every 90 s: twice as slow, in two phases of four, high for
    //   16 s once the forecast's five-minute window had slid past the loading's end (the
    //   trainer's first peak after loading and the first gather made two steps again); since a
    //   tread is read from when the level the window cut was reached (2026-11-28), nothing.
    // Since a single segment taken after loading sizes the request when one of its size was
    // taken while loading too (`Demand::request`, 2026-11-28): the cache is known to serve
    // the steps of an evaluation that keeps its outputs or of views kept in a list, and the
    // forecast measures their room from the peak. Critical as early as before or nearly
    // (kept-views 83 -> 68 s ahead), high later and the ETA less often within 35 %: the cost
    // of paging the sweeps whose trials leak inside their caches (c-multi-leak-11, -12,
    // h200-c-multi-leak-15 now critical 144, 86, 74 s ahead; c-multi-leak-3 twice as slow 85).
    allow("kept-views", None, "high", 69.0),
    allow("kept-views", None, "eta", 0.28),
    allow("kept-views", Some("141 GiB card"), "eta", 0.25),
    allow("kept-views", None, "bounds", 0.65),
    allow("kept-views", Some("141 GiB card"), "bounds", 0.6),
    allow("c-eval-kept-2", Some("one expandable segment"), "eta", 0.20),
    allow(
        "h200-c-eval-kept-3",
        Some("one expandable segment"),
        "eta",
        0.23,
    ),
    allow(
        "h200-c-eval-kept-3",
        Some("one expandable segment"),
        "bounds",
        0.76,
    ),
];
