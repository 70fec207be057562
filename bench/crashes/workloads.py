#!/usr/bin/env python3
"""Real training and inference jobs that run a GPU out of memory the way users' jobs do.

    python3 bench/crashes/workloads.py MECHANISM [--growth-s 150]

Each builds a real architecture from its config (transformers GPT-2, torchvision ResNet-50;
no weights are downloaded), trains or serves it as users do, and carries one of the bugs or
load patterns that end in ``torch.OutOfMemoryError``. The run is cut to minutes, not hours,
by a *resident* block allocated after warm-up (what a larger model's frozen weights or a
larger batch would hold): it leaves about ``rate × growth_s`` free, where the rate is the
job's own growth measured during warm-up. Only the room is set; the crash itself, its request
size and the free memory at that moment are whatever PyTorch's allocator does.

Healthy mechanisms (``healthy-*``) run for ``--duration`` seconds and exit 0.

The jobs whose memory follows a schedule (the slow load, the saturating warm-up, the gathered
checkpoint, the rising peaks, the kept evaluations, the sweep) compute it from the card with
the pure functions under "plans"; ``--dry-run`` prints it for an assumed card without PyTorch
or a GPU:

    python3 bench/crashes/workloads.py rising-peaks --dry-run --card-gib 79.6
"""

import os
import sys

# The jobs' modules sit beside this script, also under `python3 -I`.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import *  # noqa: E402,F401,F403
from healthy import *  # noqa: E402,F401,F403


def kept_logits(a):
    """A metrics list never cleared: fp32 copies of the last position's logits every step."""
    tr = GptTrainer(batch=8, seq=512)
    kept = []
    for _ in range(5):
        tr.step()
    mark("model_ready")
    healthy_prelude(a, tr.step)

    n = [0]

    def step():
        out = tr.step()
        n[0] += 1
        if n[0] % a.every == 0:
            kept.append(out.logits[:, -a.keep_positions :].detach().float().clone())

    rate = measure_rate(step, 15 * a.every)
    log("kept logits grow %.0f MiB/s" % (rate / MiB))
    _resident = hold_resident(rate * a.growth_s)
    mark("model_ready")
    run_until_oom(step, "kept-logits")


def kept_views(a):
    """A debugging list of slices of hidden states: each small view pins its whole storage."""
    tr = GptTrainer(batch=8, seq=512)
    kept = []
    for _ in range(5):
        tr.step()
    n = [0]

    def step():
        out = tr.step(hidden=True)
        n[0] += 1
        if n[0] % a.every == 0:
            kept.append(out.hidden_states[6][:, :1].detach())

    rate = measure_rate(step, 20)
    log("kept views grow %.0f MiB/s" % (rate / MiB))
    _resident = hold_resident(rate * a.growth_s)
    mark("model_ready")
    run_until_oom(step, "kept-views")


def hook_capture(a):
    """Feature capture through a forward hook, kept for later analysis and never cleared."""
    tr = ResnetTrainer(batch=64)
    feats = []
    n = [0]

    def hook(_m, _i, out):
        n[0] += 1
        if n[0] % a.every == 0:
            feats.append(out.detach())

    for _ in range(5):
        tr.step()
    tr.model.layer3.register_forward_hook(hook)
    rate = measure_rate(tr.step, 20)
    log("hook capture grows %.0f MiB/s" % (rate / MiB))
    _resident = hold_resident(rate * a.growth_s)
    mark("model_ready")
    run_until_oom(tr.step, "hook-capture")


def curriculum(a):
    """Sequence-length curriculum: +128 tokens every ``--stage-s`` seconds, no leak at all."""
    tr = GptTrainer(batch=16, seq=256)
    seq = 256
    for _ in range(5):
        tr.step(seq)
    torch.cuda.reset_peak_memory_stats()
    tr.step(seq)
    p0 = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    tr.step(seq + 128)
    d = torch.cuda.max_memory_allocated() - p0
    stages = a.growth_s / a.stage_s
    log("peak grows %.0f MiB per stage; room for %.1f stages" % (d / MiB, stages))
    # Room for the stages still to come, on top of the cache the job already holds.
    extra = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    _resident = hold_resident(max(d * stages - extra, d))
    mark("model_ready")
    t0 = time.time()
    n = 0
    while True:
        stage = int((time.time() - t0) // a.stage_s)
        s = 256 + 128 * stage
        if n % 20 == 0:
            mark("seq_len", seq=s)
        tr.step(s)
        n += 1
        if n % 50 == 0:
            log("curriculum seq %d, reserved %.2f GiB, free %.2f GiB" % (s, torch.cuda.memory_reserved() / GiB, free_bytes() / GiB))


def batch_warmup(a):
    """Batch-size warm-up: the batch grows by ``--batch-step`` every ``--stage-s`` seconds, as
    ramp-up schedules do, until a step no longer fits. No leak: each stage's peak is a new,
    higher recurring need."""
    b0 = a.batch0
    tr = GptTrainer(batch=b0, seq=512)
    for _ in range(5):
        tr.step()
    torch.cuda.reset_peak_memory_stats()
    tr.step()
    p0 = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    tr.step(batch=b0 + a.batch_step)
    d = torch.cuda.max_memory_allocated() - p0
    stages = a.growth_s / a.stage_s
    log("peak grows %.0f MiB per stage; room for %.1f stages" % (d / MiB, stages))
    extra = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    _resident = hold_resident(max(d * stages - extra, d))
    mark("model_ready")
    t0 = time.time()
    batch = None
    n = 0
    while True:
        b = b0 + a.batch_step * int((time.time() - t0) // a.stage_s)
        if b != batch:
            batch = b
            mark("batch", batch=b)
            log("batch %d, reserved %.2f GiB, free %.2f GiB" % (b, torch.cuda.memory_reserved() / GiB, free_bytes() / GiB))
        tr.step(batch=b)
        n += 1


def frag(a):
    """Weight streaming with growing, mixed shapes: an LRU of 48 blocks whose sizes drift up,
    plus short-lived activations; the allocator's cache ends up in pieces."""
    rng = random.Random(a.seed)
    cache = collections.deque()

    def one(hi_mb):
        size = int(rng.uniform(16, hi_mb) * MiB)
        cache.append(torch.empty(size, dtype=torch.uint8, device=DEV))
        if len(cache) > 48:
            cache.popleft()
        act = torch.empty(int(rng.uniform(4, hi_mb / 2) * MiB), dtype=torch.uint8, device=DEV)
        del act

    for _ in range(200):
        one(256)
    room = a.room_gib * GiB
    _resident = hold_resident(room)
    mark("model_ready")
    t0 = time.time()
    n = 0
    while True:
        frac = (time.time() - t0) / a.growth_s
        one(256 * (1 + 2 * frac))
        n += 1
        time.sleep(0.005)
        if n % 400 == 0:
            s = torch.cuda.memory_stats()
            log(
                "frag: allocated %.2f reserved %.2f inactive_split %.2f free %.2f GiB"
                % (
                    s["allocated_bytes.all.current"] / GiB,
                    s["reserved_bytes.all.current"] / GiB,
                    s["inactive_split_bytes.all.current"] / GiB,
                    free_bytes() / GiB,
                )
            )


def kv_sessions(a):
    """GPT-2 serving sessions whose KV caches are never evicted: one request a call, 70 % of
    them continuing a session; returns the request and the sessions it keeps."""
    from transformers import DynamicCache

    model = gpt2(12).half().eval()
    vocab = model.config.vocab_size
    sessions = {}
    rng = random.Random(a.seed)

    @torch.no_grad()
    def request():
        sid = rng.randrange(len(sessions) + 1) if sessions and rng.random() < 0.7 else len(sessions)
        cache = sessions.get(sid)
        if cache is None or cache.get_seq_length() > 1500:
            cache = DynamicCache()
            n = 256
            sid = len(sessions)
        else:
            n = 32
        x = torch.randint(0, vocab, (4, n), device=DEV)
        out = model(x, past_key_values=cache, use_cache=True)
        sessions[sid] = out.past_key_values
        time.sleep(a.period_s)  # requests arrive; the server is not saturated

    return request, sessions


def kv_cache(a):
    """An inference server that keeps every session's KV cache and never evicts one."""
    request, sessions = kv_sessions(a)

    for _ in range(10):
        request()
    rate = measure_rate(request, 40)
    log("KV caches grow %.0f MiB/s over %d sessions" % (rate / MiB, len(sessions)))
    _resident = hold_resident(rate * a.growth_s)
    mark("model_ready")
    run_until_oom(request, "kv-cache")


def grower(a):
    """A process that takes ``--chunk-mib`` more every ``--period-s`` (a cache on the GPU that
    nobody bounds). With ``--greedy`` it survives its own OOM and keeps trying, holding all it
    got (a neighbour that squeezes others out); otherwise its OOM is the crash."""
    held = []
    if a.leave_gib:
        held.append(torch.empty(max(0, free_bytes() - int(a.leave_gib * GiB)), dtype=torch.uint8, device=DEV))
        log("grower starts at %.1f GiB, %.1f GiB free" % (held[0].numel() / GiB, free_bytes() / GiB))
    elif a.start_gib:
        held.append(torch.empty(int(a.start_gib * GiB), dtype=torch.uint8, device=DEV))
    mark("model_ready")
    while True:
        try:
            held.append(torch.empty(a.chunk_mib * MiB, dtype=torch.uint8, device=DEV))
        except torch.OutOfMemoryError:
            if not a.greedy:
                raise
        time.sleep(a.period_s)


def kv_server(a):
    """An inference server as it starts for real: its weights read shard by shard (a ramp, no
    single block), a few warm-up requests, then traffic whose KV caches are never evicted. The
    weights are sized to leave ``rate × growth_s`` free, the rate measured while warming up."""
    request, sessions = kv_sessions(a)

    for _ in range(10):
        request()
    rate = measure_rate(request, 40)
    sessions.clear()
    torch.cuda.empty_cache()
    weights = max(0, free_bytes() - int(rate * a.growth_s))
    shard = max(GiB // 4, weights // max(1, int(a.load_s * 4)))
    log("KV caches grow %.0f MiB/s; reading %.1f GiB of weights over %.0f s" % (rate / MiB, weights / GiB, a.load_s))
    shards = []
    t0 = time.time()
    while sum(x.numel() for x in shards) + shard <= weights:
        shards.append(torch.empty(shard, dtype=torch.uint8, device=DEV))
        time.sleep(max(0.0, a.load_s * len(shards) * shard / max(weights, 1) - (time.time() - t0)))
    mark("model_ready")
    run_until_oom(request, "kv-server")


def victim(a):
    """Training with variable sequence lengths that empties its cache every ``--empty-s``: after
    each empty_cache it must take its peak back from the driver, and a neighbour may have it."""
    tr = GptTrainer(batch=8, seq=512)
    rng = random.Random(a.seed)
    mark("model_ready")
    last = time.time()
    n = 0
    while True:
        tr.step(rng.choice((128, 256, 512, 768, 1024)))
        n += 1
        if time.time() - last > a.empty_s:
            torch.cuda.empty_cache()
            mark("empty_cache")
            last = time.time()
        if n % 100 == 0:
            log("victim step %d, reserved %.2f GiB, free %.2f GiB" % (n, torch.cuda.memory_reserved() / GiB, free_bytes() / GiB))


def rising_peaks(a):
    """A reinforcement-learning loop whose peaks rise: each round generates rollouts whose
    keys and values are kept in a paged cache (blocks of 16 tokens per sequence, one block per
    decode step, as serving engines keep them), drops the cache and empties PyTorch's (as
    colocated trainers do to make room), then trains for ``--train-s``. A length curriculum
    makes every round's rollouts longer, so every round's peak is higher than the last; the
    room is sized so that round ``--rounds`` is the first whose peak does not fit."""
    tr = GptTrainer(batch=a.batch or 8, seq=512)
    cfg = tr.model.config
    chunk = 16
    block_shape = (2, cfg.n_layer, a.seqs, chunk, cfg.n_embd)  # keys and values, every layer
    block = math.prod(block_shape) * 2  # bf16

    @torch.no_grad()
    def decode():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x = torch.randint(0, cfg.vocab_size, (a.seqs, chunk), device=DEV)
            h = tr.model.transformer(x, use_cache=False).last_hidden_state
            tr.model.lm_head(h[:, -1]).argmax(-1)
        blk = torch.empty(block_shape, dtype=torch.bfloat16, device=DEV)
        blk.copy_(h.to(torch.bfloat16).expand_as(blk))
        return blk

    for _ in range(5):
        tr.step()
    tr.model.eval()
    decode()  # the rollout path warmed once; its block is freed at once
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    total = torch.cuda.mem_get_info()[1]
    k, room, rounds = rising_peaks_plan(a.fraction * total, block, a.rounds, a.rollout_s)
    log("KV block %.0f MiB; rounds keep %s blocks; room %.1f GiB: round %d should not fit"
        % (block / MiB, [n for _, n, _ in rounds], room / GiB, a.rounds))
    _resident = hold_resident(room)
    mark("model_ready", block_bytes=block, room_bytes=room)
    r = 0
    while True:
        r += 1
        n, secs = k * (r + 2), a.rollout_s * (r + 2) / 3
        torch.cuda.empty_cache()
        mark("rollout", round=r, blocks=n, tokens=n * chunk)
        tr.model.eval()
        pool = []
        g0 = time.time()
        for i in range(n):
            pool.append(decode())
            sleep_until(g0 + (i + 1) * secs / n)
        torch.cuda.synchronize()
        log("round %d: %d blocks (%.1f GiB) over %.0f s; free %.2f GiB"
            % (r, n, n * block / GiB, time.time() - g0, free_bytes() / GiB))
        del pool
        torch.cuda.empty_cache()
        mark("train", round=r)
        p0 = time.time()
        while time.time() - p0 < a.train_s:
            tr.step()


def eval_kept(a):
    """Training with an evaluation after every ``--train-s`` seconds whose predictions (every
    evaluation batch's logits, kept to compute metrics at the end, as an evaluation loop that
    gathers them on the device does) go into a list on the GPU that is never cleared: the
    floor steps up at each evaluation by about 1/(``--steps`` + 0.6) of the room the job had,
    so ``--steps`` evaluations fit and the next one runs out."""
    tr = GptTrainer(batch=a.batch or 8, seq=512)
    for _ in range(5):
        tr.step()
    out = tr.step(train=False)
    per = out.logits.numel() * out.logits.element_size()
    del out
    free = free_bytes()
    n_batches = eval_kept_batches(free, per, a.steps)
    log("each evaluation keeps %d batches of %.0f MiB (%.1f GiB) of %.1f GiB free"
        % (n_batches, per / MiB, n_batches * per / GiB, free / GiB))
    mark("model_ready", eval_batches=n_batches, eval_bytes=n_batches * per)
    predictions = []
    k = 0
    while True:
        t = time.time()
        while time.time() - t < a.train_s:
            tr.step()
        k += 1
        mark("eval", index=k)
        for _ in range(n_batches):
            predictions.append(tr.step(train=False).logits.detach())
        torch.cuda.synchronize()
        log("evaluation %d: %.1f GiB of predictions kept, free %.2f GiB"
            % (k, len(predictions) * per / GiB, free_bytes() / GiB))
        mark("train")


def sweep_trial(a):
    """Trial ``--trial`` of ``--trials`` of a sweep started together on one GPU, each GPT-2
    training with the same bug (the last position's logits kept every ``--every`` steps). The
    trials meet at ``--sync-at`` (a Unix time): they measure their leak together for
    ``--measure-s``, then one after another each takes its share of the card (what a larger
    model of each trial would hold) so that together they leave about ``trials × rate ×
    growth_s`` free, then all leak from the same moment until a real out-of-memory error.
    With ``--every 0`` the trials keep nothing (a healthy sweep): they take their shares so
    that ``--leave-gib`` stays free, then train for ``--duration`` seconds and end."""
    tr = GptTrainer(batch=a.batch or 8, seq=512)
    kept = []
    n = [0]

    def leak_step():
        out = tr.step()
        n[0] += 1
        if a.every and n[0] % a.every == 0:
            kept.append(out.logits[:, -a.keep_positions :].detach().float().clone())

    def train_until(t):
        while time.time() < t:
            tr.step()

    for _ in range(5):
        tr.step()
    if time.time() > a.sync_at:
        log("trial %d ready %.1f s after the sync time: its share will be off" % (a.trial, time.time() - a.sync_at))
    train_until(a.sync_at)
    torch.cuda.synchronize()
    a0, t0 = torch.cuda.memory_allocated(), time.time()
    while time.time() - t0 < a.measure_s:
        leak_step()
    torch.cuda.synchronize()
    rate = (torch.cuda.memory_allocated() - a0) / (time.time() - t0)
    room = a.trials * rate * a.growth_s if a.every else a.leave_gib * GiB
    train_until(a.sync_at + a.measure_s + 1 + 2 * a.trial)
    share = max(0, free_bytes() - int(room)) // (a.trials - a.trial)
    _resident = torch.empty(share, dtype=torch.uint8, device=DEV) if share else None
    mark("resident", bytes=share)
    log("trial %d leaks %.0f MiB/s; holds %.1f GiB more; %.1f GiB free" % (a.trial, rate / MiB, share / GiB, free_bytes() / GiB))
    train_until(a.sync_at + a.measure_s + 2 + 2 * a.trials)
    mark("model_ready")
    if a.every:
        run_until_oom(leak_step, "trial %d" % a.trial)
    train_until(time.time() + a.duration)
    log("trial %d trained %.0f s and ends" % (a.trial, a.duration))


# --------------------------------------------------------------------------------- healthy


ASSUME_CONTEXT = 0.5 * GiB
ASSUME_TRAINER = 8.3 * GiB
ASSUME_LOGITS_PER_TOKEN = 50257 * 2
ASSUME_TRIAL_LEAK = 17 * MiB


def dry_run(a):
    """Print the schedule a job would follow on a card of ``--card-gib``, from the plan
    functions it runs, with its measurements assumed as above; no PyTorch, no GPU."""
    total = a.card_gib * GiB
    pct = lambda b: 100.0 * b / total  # noqa: E731
    m = a.mechanism
    print("%s on a card of %.1f GiB (assumed: context %.1f GiB, GPT-2 trainer %.1f GiB)"
          % (m, a.card_gib, ASSUME_CONTEXT / GiB, ASSUME_TRAINER / GiB))
    if m == "healthy-slow-load":
        n_layer, plan = slow_load_plan(int(a.load_gib * GiB), a.load_s, a.seed)
        t = 0.0
        for i, (secs, shard) in enumerate(plan):
            t += secs
            b = sum(2 * r * c for r, c in shard)
            print("  shard %d: %d tensors, %.2f GiB in %.1f s (%.0f MiB/s), done at %.0f s"
                  % (i + 1, len(shard), b / GiB, secs, b / MiB / secs, t))
        weights = sum(2 * r * c for _, sh in plan for r, c in sh)
        used = ASSUME_CONTEXT + weights + a.kv_gib * GiB
        print("  %d layers, %.1f GiB read over %.0f s; then a %.1f GiB KV pool and %.0f s of serving"
              " at %.1f GiB (%.0f %% of the card)" % (n_layer, weights / GiB, t, a.kv_gib, a.duration, used / GiB, pct(used)))
        print("  expected length: %.0f s after the job is ready" % (t + a.duration))
    elif m == "healthy-warmup-saturate":
        others, model = ASSUME_CONTEXT, 0.3 * GiB
        budget = a.fraction * total - others - model - GiB // 2
        batches, cap = warmup_batches(
            warmup_plan(int(a.duration / a.period_s), int(a.warmup_s / a.period_s), a.seed),
            budget / (ASSUME_LOGITS_PER_TOKEN * 1024),
        )
        level = others + model
        for i, b in records(batches):
            level += b * 1024 * ASSUME_LOGITS_PER_TOKEN
            print("  %6.1f s: new largest batch %3d x 1024 tokens: cache to %.1f GiB (%.1f %% of the card)"
                  % (i * a.period_s, b, level / GiB, pct(level)))
        last = records(batches)[-1][0] * a.period_s
        print("  flat from %.0f s to %.0f s (%.0f s); largest step of the sawtooth %.1f GiB"
              % (last, a.duration, a.duration - last, cap * 1024 * ASSUME_LOGITS_PER_TOKEN / GiB))
    elif m == "healthy-ckpt-gather":
        base = max(a.fraction * total, ASSUME_TRAINER)
        gather = a.gather_fraction * total
        print("  model and trainer %.1f GiB (%.0f %%), every %.0f s a gathered copy of %.1f GiB: peak %.1f GiB (%.0f %%)"
              % (base / GiB, pct(base + ASSUME_CONTEXT), a.ckpt_s, gather / GiB,
                 (base + gather) / GiB, pct(base + gather + ASSUME_CONTEXT)))
        print("  checkpoints at %s s; expected length %.0f s after the job is ready"
              % ([round(a.ckpt_s * (i + 1)) for i in range(int(a.duration // a.ckpt_s))], a.duration))
    elif m in ("healthy-kv-saturate", "kv-decay"):
        pool = a.fraction * total - ASSUME_CONTEXT
        held, sizes = 0, {}
        for t, opened, closed in kv_saturate_plan(pool, a.tau_s, a.life_s, a.duration, a.seed):
            for i in closed:
                held -= sizes.pop(i, 0)
            for i, mib in opened:
                if held + mib * MiB <= pool:
                    sizes[i] = mib * MiB
                    held += mib * MiB
            if t % 20 == 0:
                print("  %5.0f s: %3d sessions, %.1f GiB (%.0f %% of the card)"
                      % (t, len(sizes), held / GiB, pct(held + ASSUME_CONTEXT)))
        print("  (a session that does not fit waits in the job; here it is dropped)")
    elif m == "rising-peaks":
        block = 2 * 12 * a.seqs * 16 * 768 * 2
        k, room, rounds = rising_peaks_plan(a.fraction * total, block, a.rounds, a.rollout_s)
        print("  KV block %.0f MiB (%d sequences x 16 tokens, 12 layers); room %.1f GiB (%.0f %% of the card)"
              % (block / MiB, a.seqs, room / GiB, pct(room)))
        t = 0.0
        for r, n, secs in rounds:
            peak = n * block
            if peak > room:
                t += secs * room / peak
                print("  round %d: %d blocks (%.1f GiB, %.0f %% of the room) over %.0f s: out of memory"
                      " about %.0f s after the job is ready" % (r, n, peak / GiB, 100 * peak / room, secs, t))
                break
            t += secs + a.train_s
            print("  round %d: %d blocks (%.1f GiB, %.0f %% of the room) over %.0f s, then %.0f s of training: ends at %.0f s"
                  % (r, n, peak / GiB, 100 * peak / room, secs, a.train_s, t))
    elif m == "eval-kept":
        free = total - ASSUME_CONTEXT - ASSUME_TRAINER
        per = 8 * 512 * ASSUME_LOGITS_PER_TOKEN
        n = eval_kept_batches(free, per, a.steps)
        step = n * per
        fails = int(free // step) + 1
        print("  %.1f GiB free after warm-up; each evaluation keeps %d batches of %.0f MiB = %.1f GiB (1/%.1f of it)"
              % (free / GiB, n, per / MiB, step / GiB, free / step))
        print("  evaluations every ~%.0f s; %d fit; evaluation %d runs out about %.0f s after the job is ready"
              % (a.train_s + 1, fails - 1, fails, fails * (a.train_s + 1)))
    elif m == "sweep-trial":
        free = total - ASSUME_CONTEXT - a.trials * (ASSUME_CONTEXT + ASSUME_TRAINER)
        room = a.trials * ASSUME_TRIAL_LEAK * a.growth_s if a.every else a.leave_gib * GiB
        go = a.measure_s + 2 + 2 * a.trials
        print("  at the sync time: %.0f s of leak measured together; trials take their shares at +%s s; all leak from +%.0f s"
              % (a.measure_s, [a.measure_s + 1 + 2 * k for k in range(a.trials)], go))
        print("  each trial's share %.1f GiB of %.1f GiB free, leaving %.1f GiB (%d trials x %.0f MiB/s x %.0f s);"
              " out of memory about %.0f s after the sync time"
              % ((free - room) / a.trials / GiB, free / GiB, room / GiB, a.trials, ASSUME_TRIAL_LEAK / MiB, a.growth_s, go + a.growth_s))
        if not a.every:
            print("  (--every 0: nothing kept; %.1f GiB left free, %.0f s of training, then the trials end)"
                  % (room / GiB, a.duration))
    else:
        sys.exit("%s has no schedule to print (--dry-run is for the planned jobs)" % m)


MECHANISMS = {
    "kept-logits": kept_logits,
    "kept-views": kept_views,
    "hook-capture": hook_capture,
    "curriculum": curriculum,
    "frag": frag,
    "kv-cache": kv_cache,
    "kv-server": kv_server,
    "grower": grower,
    "victim": victim,
    "rising-peaks": rising_peaks,
    "eval-kept": eval_kept,
    "sweep-trial": sweep_trial,
    "healthy-load-ramp": healthy_load_ramp,
    "healthy-train-eval": healthy_train_eval,
    "healthy-empty-cache": healthy_empty_cache,
    "healthy-prealloc": healthy_prealloc,
    "healthy-steady": healthy_steady,
    "healthy-resnet": healthy_resnet,
    "healthy-long": healthy_long,
    "healthy-ckpt": healthy_ckpt,
    "healthy-dynpad": healthy_dynpad,
    "healthy-infer-bursty": healthy_infer_bursty,
    "healthy-compile": healthy_compile,
    "healthy-cudnn": healthy_cudnn,
    "healthy-tight-eval": healthy_tight_eval,
    "healthy-rl": healthy_rl,
    "healthy-interactive": healthy_interactive,
    "healthy-slow-load": healthy_slow_load,
    "healthy-warmup-saturate": healthy_warmup_saturate,
    "healthy-ckpt-gather": healthy_ckpt_gather,
    "healthy-kv-saturate": healthy_kv_saturate,
    "kv-decay": healthy_kv_saturate,
    "batch-warmup": batch_warmup,
    "idle": idle_neighbour,
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mechanism", choices=sorted(MECHANISMS))
    p.add_argument("--growth-s", type=float, default=150.0, help="seconds of growth the room allows")
    p.add_argument("--duration", type=float, default=75.0, help="healthy runs: seconds")
    p.add_argument("--keep-positions", type=int, default=1)
    p.add_argument("--every", type=int, default=1)
    p.add_argument("--stage-s", type=float, default=20.0)
    p.add_argument("--room-gib", type=float, default=8.0)
    p.add_argument("--chunk-mib", type=int, default=64)
    p.add_argument("--period-s", type=float, default=0.5)
    p.add_argument("--start-gib", type=float, default=0.0)
    p.add_argument("--leave-gib", type=float, default=0.0)
    p.add_argument("--greedy", action="store_true")
    p.add_argument("--empty-s", type=float, default=8.0)
    p.add_argument("--load-gib", type=float, default=30.0)
    p.add_argument("--load-s", type=float, default=40.0)
    p.add_argument("--fraction", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--delay-s", type=float, default=0.0, help="healthy training before the bug")
    p.add_argument("--batch", type=int, default=None, help="batch size (each job has its own default)")
    p.add_argument("--accum", type=int, default=1, help="gradient accumulation micro-batches")
    p.add_argument("--ckpt-s", type=float, default=0.0, help="seconds between checkpoints")
    p.add_argument("--median-len", type=float, default=200.0)
    p.add_argument("--len-sigma", type=float, default=0.7)
    p.add_argument("--train-s", type=float, default=40.0)
    p.add_argument("--eval-s", type=float, default=8.0)
    p.add_argument("--batch0", type=int, default=4)
    p.add_argument("--batch-step", type=int, default=4)
    p.add_argument("--gen-s", type=float, default=30.0)
    p.add_argument("--empty", action="store_true", help="healthy-rl: empty_cache after each round")
    p.add_argument("--kv-gib", type=float, default=4.0, help="healthy-slow-load: the KV pool after loading")
    p.add_argument("--warmup-s", type=float, default=90.0, help="healthy-warmup-saturate: seconds of new maxima")
    p.add_argument("--gather-fraction", type=float, default=0.12, help="healthy-ckpt-gather: share of the card gathered")
    p.add_argument("--tau-s", type=float, default=50.0, help="healthy-kv-saturate: time constant of the sessions held")
    p.add_argument("--life-s", type=float, default=20.0, help="healthy-kv-saturate: a session's mean life")
    p.add_argument("--rounds", type=int, default=7, help="rising-peaks: the round that should not fit")
    p.add_argument("--rollout-s", type=float, default=9.0, help="rising-peaks: the first round's rollout seconds")
    p.add_argument("--seqs", type=int, default=256, help="rising-peaks: sequences per rollout")
    p.add_argument("--steps", type=int, default=6, help="eval-kept: evaluations that fit")
    p.add_argument("--trial", type=int, default=0, help="sweep-trial: this trial's index")
    p.add_argument("--trials", type=int, default=3, help="sweep-trial: trials started together")
    p.add_argument("--sync-at", type=float, default=None, help="sweep-trial: Unix time the trials meet (default: 30 s from now)")
    p.add_argument("--measure-s", type=float, default=8.0, help="sweep-trial: seconds of leak measured together")
    p.add_argument("--dry-run", action="store_true", help="print the job's schedule for --card-gib; no GPU")
    p.add_argument("--card-gib", type=float, default=79.6, help="--dry-run: the card's memory (H100 80GB: 79.6)")
    a = p.parse_args()
    if a.sync_at is None:
        a.sync_at = time.time() + 30
    if not 0 <= a.trial < a.trials:
        p.error("--trial must be in 0..--trials-1")
    if a.dry_run:
        dry_run(a)
        return
    if torch is None:
        p.error("PyTorch is not installed (only --dry-run works without it)")
    torch.manual_seed(a.seed)
    torch.cuda.init()
    if os.environ.get("GPUMEM_SOCKET"):
        # Report to a running exporter as a user's job would.
        import gpumem_client

        gpumem_client.start(socket=os.environ["GPUMEM_SOCKET"], interval=1.0)
    log("start %s on %s" % (a.mechanism, torch.cuda.get_device_name()))
    MECHANISMS[a.mechanism](a)


if __name__ == "__main__":
    main()
