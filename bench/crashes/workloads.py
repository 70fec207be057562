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

import argparse
import collections
import math
import os
import random
import sys
import tempfile
import time

try:
    import torch
except ImportError:  # --dry-run needs no PyTorch
    torch = None

GiB = 1 << 30
MiB = 1 << 20
DEV = "cuda"


def log(msg):
    print("[%s %.1f] %s" % (os.path.basename(sys.argv[0]), time.time(), msg), flush=True)


def mark(name, **fields):
    try:
        from gpumem_client import record

        record.event(name, **fields)
    except Exception:
        pass


def free_bytes():
    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0]


def hold_resident(room):
    """Leave about ``room`` bytes free on the device (never less than zero to hold)."""
    n = free_bytes() - int(room)
    if n <= 0:
        log("no resident block: only %.1f GiB free" % (free_bytes() / GiB))
        return None
    t = torch.empty(n, dtype=torch.uint8, device=DEV)
    log("resident %.1f GiB; %.1f GiB free" % (n / GiB, free_bytes() / GiB))
    mark("resident", bytes=n)
    return t


def sleep_until(t):
    time.sleep(max(0.0, t - time.time()))


# ------------------------------------------------------------------------------------ plans
# Pure functions of the card, the job's own measurements and a seed: the run follows exactly
# the schedule that --dry-run prints.

# A 5120-wide decoder (the shapes of a 14B-class model), bf16: the tensors a slow load reads.
LOAD_HIDDEN, LOAD_INTER, LOAD_VOCAB = 5120, 13824, 152064


def slow_load_plan(load_bytes, load_s, seed):
    """The tensors of a decoder of about ``load_bytes`` (bf16), in the order its checkpoint
    holds them (embedding, layers, head), grouped into shard files of 2 to 6 GiB, and the
    seconds each shard takes: ``load_s`` in all, shared by size and by a storage pace that
    varies from shard to shard (0.5x to 1.6x). Returns (layers, [(seconds, [shape, ...]), ...])."""
    rng = random.Random(seed)
    h, f, v = LOAD_HIDDEN, LOAD_INTER, LOAD_VOCAB
    layer = [(h, h)] * 4 + [(f, h), (f, h), (h, f)]  # q k v o, gate up down (out, in)
    per_layer = sum(r * c for r, c in layer) * 2
    n_layer = max(1, int((load_bytes - 2 * v * h * 2) // per_layer))
    tensors = [(v, h)] + layer * n_layer + [(v, h)]
    shards, cur, size, limit = [], [], 0, rng.uniform(2, 6) * GiB
    for r, c in tensors:
        if cur and size + 2 * r * c > limit:
            shards.append(cur)
            cur, size, limit = [], 0, rng.uniform(2, 6) * GiB
        cur.append((r, c))
        size += 2 * r * c
    shards.append(cur)
    nbytes = [sum(2 * r * c for r, c in sh) for sh in shards]
    pace = [rng.uniform(0.5, 1.6) for _ in shards]
    norm = sum(p * b for p, b in zip(pace, nbytes))
    return n_layer, [(load_s * p * b / norm, sh) for p, b, sh in zip(pace, nbytes, shards)]


def warmup_plan(steps, warm_steps, seed):
    """Relative sizes (0..1] of a server's request batches, one per step: a heavy tail
    (exponential, scaled so that the largest would come about once in 0.8 ``warm_steps``), the
    largest itself (1.0) held back and placed once at a random step of the last fifth of the
    warm-up; later steps draw from the whole tail. New maxima, each a new segment in the
    caching allocator, come ever more rarely and stop at the largest."""
    rng = random.Random(seed)
    e_max = math.log(max(2.0, 0.8 * warm_steps))
    top = rng.randrange(int(0.8 * warm_steps), max(int(0.8 * warm_steps) + 1, warm_steps))
    xs = []
    for i in range(steps):
        e = rng.expovariate(1.0)
        while i < top and e >= e_max:
            e = rng.expovariate(1.0)
        xs.append(1.0 if i == top else min(1.0, e / e_max))
    return xs


def records(sizes):
    """(step, size) of each step whose size exceeds every earlier one."""
    out, best = [], 0
    for i, s in enumerate(sizes):
        if s > best:
            out.append((i, s))
            best = s
    return out


def warmup_batches(xs, budget_seqs):
    """Batches (in sequences) for the relative sizes ``xs``, the largest batch as large as lets
    the sum of the new maxima (what the allocator's cache grows by: every new maximum takes a
    segment of its own, earlier ones stay cached) stay within ``budget_seqs``."""

    def of(cap):
        return [max(1, math.ceil(x * cap)) for x in xs]

    lo, hi = 1, max(1, int(budget_seqs))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(b for _, b in records(of(mid))) <= budget_seqs:
            lo = mid
        else:
            hi = mid - 1
    return of(lo), lo


def rising_peaks_plan(room_bytes, block_bytes, crash_round, rollout_s):
    """Rounds whose rollouts keep ``k * (round + 2)`` KV blocks, each rollout's length (and
    time) growing with its round: the room left is ``k * (crash_round + 1.5)`` blocks, so the
    round before ``crash_round`` peaks half a step under it and ``crash_round`` half a step
    over. Returns (k, room, [(round, blocks, rollout seconds), ...])."""
    k = max(1, round(room_bytes / (block_bytes * (crash_round + 1.5))))
    room = int(k * block_bytes * (crash_round + 1.5))
    return k, room, [(r, k * (r + 2), rollout_s * (r + 2) / 3) for r in range(1, crash_round + 1)]


def eval_kept_batches(free_bytes_, batch_bytes, steps):
    """Evaluation batches whose kept predictions step the floor by a 1/(steps + 0.6) share of
    the room: ``steps`` evaluations fit, the next one does not."""
    return max(1, round(free_bytes_ / (steps + 0.6) / batch_bytes))


# ----------------------------------------------------------------------------------- models


def gpt2(n_layer=12, n_positions=2048):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=n_layer, n_positions=n_positions)
    return GPT2LMHeadModel(cfg).to(DEV)


def resnet50():
    import torchvision

    return torchvision.models.resnet50(weights=None).to(DEV)


class GptTrainer:
    def __init__(self, batch=8, seq=512, n_layer=12):
        self.model = gpt2(n_layer)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4)
        self.batch, self.seq = batch, seq
        self.vocab = self.model.config.vocab_size

    def step(self, seq=None, hidden=False, train=True, batch=None, accum=1):
        """One optimizer step over ``accum`` micro-batches (one forward pass when not training)."""
        seq = seq or self.seq
        self.model.train(train)
        for _ in range(accum if train else 1):
            x = torch.randint(0, self.vocab, (batch or self.batch, seq), device=DEV)
            with torch.autocast("cuda", dtype=torch.bfloat16), torch.set_grad_enabled(train):
                out = self.model(x, labels=x, output_hidden_states=hidden)
            if train:
                (out.loss / accum).backward()
        if train:
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        return out


class ResnetTrainer:
    def __init__(self, batch=64):
        self.model = resnet50().to(memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        self.batch = batch
        self.loss = torch.nn.CrossEntropyLoss()

    def step(self, train=True, batch=None, size=224):
        b = batch or self.batch
        x = torch.randn(b, 3, size, size, device=DEV).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (b,), device=DEV)
        self.model.train(train)
        with torch.autocast("cuda", dtype=torch.bfloat16), torch.set_grad_enabled(train):
            loss = self.loss(self.model(x), y)
        if train:
            loss.backward()
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        return loss


def measure_rate(step, steps=15):
    """Bytes per second the job's allocated memory grows while ``step`` runs."""
    torch.cuda.synchronize()
    a0, t0 = torch.cuda.memory_allocated(), time.time()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return (torch.cuda.memory_allocated() - a0) / (time.time() - t0)


def run_until_oom(step, label):
    n = 0
    t0 = time.time()
    while True:
        step()
        n += 1
        if n % 50 == 0:
            torch.cuda.synchronize()
            log(
                "%s step %d at %.0f s: allocated %.2f GiB, reserved %.2f GiB, free %.2f GiB"
                % (
                    label,
                    n,
                    time.time() - t0,
                    torch.cuda.memory_allocated() / GiB,
                    torch.cuda.memory_reserved() / GiB,
                    free_bytes() / GiB,
                )
            )
            mark("step", step=n)


# ------------------------------------------------------------------------------- mechanisms


def healthy_prelude(a, step):
    """``--delay-s`` of healthy training before the bug begins, as in a real job."""
    t0 = time.time()
    while time.time() - t0 < a.delay_s:
        step()


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
    growth_s`` free, then all leak from the same moment until a real out-of-memory error."""
    tr = GptTrainer(batch=a.batch or 8, seq=512)
    kept = []
    n = [0]

    def leak_step():
        out = tr.step()
        n[0] += 1
        if n[0] % a.every == 0:
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
    room = a.trials * rate * a.growth_s
    train_until(a.sync_at + a.measure_s + 1 + 2 * a.trial)
    share = max(0, free_bytes() - int(room)) // (a.trials - a.trial)
    _resident = torch.empty(share, dtype=torch.uint8, device=DEV) if share else None
    mark("resident", bytes=share)
    log("trial %d leaks %.0f MiB/s; holds %.1f GiB more; %.1f GiB free" % (a.trial, rate / MiB, share / GiB, free_bytes() / GiB))
    train_until(a.sync_at + a.measure_s + 2 + 2 * a.trials)
    mark("model_ready")
    run_until_oom(leak_step, "trial %d" % a.trial)


# --------------------------------------------------------------------------------- healthy


def for_duration(a, step, every=None):
    t0 = time.time()
    last = t0
    while time.time() - t0 < a.duration:
        step()
        if every and time.time() - last > every[0]:
            every[1]()
            last = time.time()
    torch.cuda.synchronize()
    log("healthy run done")


def healthy_load_ramp(a):
    """Loading a large checkpoint shard by shard over ~40 s, then steady training."""
    shards = []
    for i in range(int(a.load_gib)):
        shards.append(torch.empty(GiB, dtype=torch.uint8, device=DEV))
        time.sleep(a.load_s / a.load_gib)
    tr = GptTrainer(batch=8, seq=512)
    mark("model_ready")
    for_duration(a, tr.step)


def healthy_train_eval(a):
    """ResNet-50: 15 s of training, then 8 s of evaluation at a larger batch, alternating."""
    tr = ResnetTrainer(batch=64)
    mark("model_ready")
    t0 = time.time()
    while time.time() - t0 < a.duration:
        phase_t = time.time()
        while time.time() - phase_t < 15:
            tr.step()
        mark("eval")
        with torch.no_grad():
            phase_t = time.time()
            while time.time() - phase_t < 8:
                tr.step(train=False, batch=256)
        mark("train")
    log("healthy run done")


def healthy_empty_cache(a):
    """GPT-2 training that calls torch.cuda.empty_cache() every 10 s."""
    tr = GptTrainer(batch=8, seq=512)
    mark("model_ready")
    rng = random.Random(a.seed)

    def empty():
        torch.cuda.empty_cache()
        mark("empty_cache")

    for_duration(a, lambda: tr.step(rng.choice((256, 512, 1024))), (10, empty))


def healthy_prealloc(a):
    """A serving engine that takes ~90 % of the GPU up front (vLLM's gpu_memory_utilization)
    and then works inside it: NVML shows a flat, nearly full device."""
    total = torch.cuda.mem_get_info()[1]
    pool = torch.empty(int(total * a.fraction) - int(torch.cuda.memory_reserved()) - GiB, dtype=torch.uint8, device=DEV)
    model = gpt2(12).half().eval()
    mark("model_ready")
    x = torch.randint(0, model.config.vocab_size, (16, 256), device=DEV)

    @torch.no_grad()
    def step():
        pool[: 64 * MiB].fill_(1)
        model(x)

    for_duration(a, step)


def healthy_resnet(a):
    """Plain steady ResNet-50 training."""
    tr = ResnetTrainer(batch=a.batch or 64)
    mark("model_ready")
    for_duration(a, tr.step)


def healthy_steady(a):
    """Plain steady GPT-2 training (run it beside a large idle neighbour)."""
    tr = GptTrainer(batch=a.batch or 8, seq=512)
    mark("model_ready")
    for_duration(a, tr.step)


def healthy_long(a):
    """A long run: GPT-2 with gradient accumulation over ``--accum`` micro-batches and a
    checkpoint (model and optimizer, torch.save straight from the GPU tensors) every
    ``--ckpt-s`` seconds."""
    tr = GptTrainer(batch=a.batch or 8, seq=512)
    mark("model_ready")
    path = os.path.join(tempfile.gettempdir(), "gpumem-ckpt-%d.pt" % os.getpid())

    def ckpt():
        torch.save({"model": tr.model.state_dict(), "opt": tr.opt.state_dict()}, path)
        mark("checkpoint")

    try:
        for_duration(a, lambda: tr.step(accum=a.accum), (a.ckpt_s, ckpt) if a.ckpt_s > 0 else None)
    finally:
        if os.path.exists(path):
            os.unlink(path)


def healthy_ckpt(a):
    """Checkpoints staged on the GPU: every ``--ckpt-s`` seconds a copy of the model and the
    optimizer state is taken on the device (as asynchronous checkpointing and EMA snapshots
    do), moved to the host and written; the copy is freed after."""
    tr = GptTrainer(batch=a.batch or 8, seq=512)
    mark("model_ready")
    path = os.path.join(tempfile.gettempdir(), "gpumem-ckpt-%d.pt" % os.getpid())

    def ckpt():
        snap = {k: v.detach().clone() for k, v in tr.model.state_dict().items()}
        for i, st in enumerate(tr.opt.state.values()):
            for k, v in st.items():
                if torch.is_tensor(v) and v.is_cuda:
                    snap["opt.%d.%s" % (i, k)] = v.detach().clone()
        torch.cuda.synchronize()
        host = {k: v.to("cpu") for k, v in snap.items()}
        del snap
        torch.save(host, path)
        mark("checkpoint")

    try:
        for_duration(a, tr.step, (a.ckpt_s, ckpt))
    finally:
        if os.path.exists(path):
            os.unlink(path)


def healthy_dynpad(a):
    """Dynamic padding over long-tailed sequence lengths: each batch is padded to its longest
    sample, lengths follow a log-normal tail, so the cache grows in steps whenever a longer
    batch than any before arrives, then levels off."""
    tr = GptTrainer(batch=a.batch or 8, seq=512)
    rng = random.Random(a.seed)
    mark("model_ready")

    def length():
        x = rng.lognormvariate(math.log(a.median_len), a.len_sigma)
        return int(min(2048, max(64, math.ceil(x / 64) * 64)))

    longest = [0]

    def step():
        s = max(length() for _ in range(tr.batch))
        if s > longest[0]:
            longest[0] = s
            mark("longest", seq=s)
        tr.step(seq=s)

    for_duration(a, step)


def healthy_infer_bursty(a):
    """An inference server with bursty traffic: busy spells of requests whose batch sizes
    follow a heavy tail, idle spells that start with torch.cuda.empty_cache()."""
    model = gpt2(12).half().eval()
    vocab = model.config.vocab_size
    rng = random.Random(a.seed)
    mark("model_ready")
    t0 = time.time()
    while time.time() - t0 < a.duration:
        busy_t = time.time()
        busy = rng.uniform(10, 40)
        while time.time() - busy_t < busy and time.time() - t0 < a.duration:
            b = min(48, int(rng.paretovariate(1.3)))
            s = rng.choice((128, 256, 512))
            with torch.no_grad():
                model(torch.randint(0, vocab, (b, s), device=DEV))
            time.sleep(rng.expovariate(20.0))
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        mark("empty_cache")
        time.sleep(min(rng.uniform(5, 25), max(0.0, a.duration - (time.time() - t0))))
    log("healthy run done")


def healthy_compile(a):
    """Warm-up spikes of torch.compile: the first steps compile (and the optimizer creates its
    state at the first step), then training runs steady."""
    tr = GptTrainer(batch=a.batch or 8, seq=512)
    try:
        tr.model = torch.compile(tr.model)
        mark("compiled")
    except Exception as e:  # no compiler on the node: say so, run eager
        log("torch.compile unavailable: %s" % e)
        mark("compile_failed")
    mark("model_ready")
    for_duration(a, tr.step)


def healthy_cudnn(a):
    """Warm-up spikes of cuDNN autotuning: multi-scale ResNet-50 training with
    cudnn.benchmark on; each new input size is benchmarked once (workspaces of several
    algorithms), then the sizes come round again."""
    torch.backends.cudnn.benchmark = True
    tr = ResnetTrainer(batch=a.batch or 32)
    rng = random.Random(a.seed)
    mark("model_ready")
    sizes = (160, 192, 224, 256)
    for_duration(a, lambda: tr.step(size=rng.choice(sizes)))


def healthy_tight_eval(a):
    """Periodic evaluation close to the limit: GPT-2 trains for ``--train-s``, then evaluates
    at four times the batch for ``--eval-s`` and empties its cache. The room left beside it
    is sized so that the evaluation's peak comes within a few GiB of full and its allocator
    must free the training cache and retry, the same way every time."""
    tr = GptTrainer(batch=a.batch or 8, seq=512)
    eval_batch = 4 * tr.batch
    for _ in range(5):
        tr.step()
    base = torch.cuda.memory_allocated()
    r_train = torch.cuda.memory_reserved()
    tr.step(train=False, batch=eval_batch)
    tr.step(train=False, batch=eval_batch)
    r_eval = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    for _ in range(3):
        tr.step()
    need = r_eval - r_train
    releasable = r_train - base
    # Room for the evaluation only once part of the training cache is released.
    room = max(need - 0.4 * releasable, 0.5 * need, GiB)
    log("eval needs %.2f GiB beyond a %.2f GiB training cache (%.2f GiB of it free); room %.2f GiB"
        % (need / GiB, r_train / GiB, releasable / GiB, room / GiB))
    _resident = hold_resident(room)
    mark("model_ready")
    t0 = time.time()
    while time.time() - t0 < a.duration:
        phase_t = time.time()
        while time.time() - phase_t < a.train_s:
            tr.step()
        mark("eval")
        phase_t = time.time()
        while time.time() - phase_t < a.eval_s:
            tr.step(train=False, batch=eval_batch)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        mark("empty_cache")
        s = torch.cuda.memory_stats()
        log("eval done: retries %d, free %.2f GiB" % (s.get("num_alloc_retries", 0), free_bytes() / GiB))
    log("healthy run done")


def healthy_rl(a):
    """A reinforcement-learning style loop: each round generates rollouts with the policy,
    whose KV caches grow for ``--gen-s`` seconds to about ``--fraction`` of the card, drops
    them (and empties the cache with ``--empty``, as colocated trainers do to make room), then
    trains on them for ``--train-s`` seconds. The number of rollouts varies by round."""
    from transformers import DynamicCache

    tr = GptTrainer(batch=a.batch or 8, seq=512)
    cfg = tr.model.config
    rng = random.Random(a.seed)
    total = torch.cuda.mem_get_info()[1]
    length = 1008  # tokens per rollout, within GPT-2's 1024 positions
    per_token = 2 * cfg.n_layer * cfg.n_embd * 2  # K and V, bf16
    mark("model_ready")
    t0 = time.time()
    rnd = 0
    while time.time() - t0 < a.duration:
        rnd += 1
        room = total * a.fraction * rng.uniform(0.8, 1.0) - torch.cuda.memory_reserved()
        seqs = max(1, int(room / (length * per_token)))
        mark("generate", round=rnd, rollouts=seqs)
        cache = DynamicCache()
        tokens = 0
        g0 = time.time()
        tr.model.eval()
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            while tokens < length:
                due = length * (time.time() - g0) / a.gen_s
                if tokens >= due:
                    time.sleep(0.02)
                    continue
                x = torch.randint(0, cfg.vocab_size, (seqs, 16), device=DEV)
                cache = tr.model(x, past_key_values=cache, use_cache=True).past_key_values
                tokens += 16
        del cache, x
        if a.empty:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        mark("train", round=rnd)
        p0 = time.time()
        while time.time() - p0 < a.train_s and time.time() - t0 < a.duration:
            tr.step()
    log("healthy run done")


def healthy_interactive(a):
    """An interactive session in a notebook: load a dataset to the GPU in pieces, compute on
    it, drop it (now and then with ``empty_cache``), think, load another. Tens of GiB come and
    go; nothing is kept."""
    rng = random.Random(a.seed)
    total = torch.cuda.mem_get_info()[1]
    mark("model_ready")
    t0 = time.time()
    while time.time() - t0 < a.duration:
        want = total * rng.uniform(0.1, a.fraction)
        pieces = rng.randint(3, 12)
        data = []
        for _ in range(pieces):
            data.append(torch.randn(int(want / pieces / 4), device=DEV))
            time.sleep(rng.uniform(0.2, 1.5))
        mark("loaded", gib=round(want / GiB, 1))
        c0 = time.time()
        busy = rng.uniform(5, 20)
        while time.time() - c0 < busy:
            x = data[rng.randrange(len(data))]
            _ = (x[: 1 << 24] * 2.0).sum()
            m = torch.randn(4096, 4096, device=DEV)
            _ = m @ m
        del data, x, m
        if rng.random() < 0.5:
            torch.cuda.empty_cache()
            mark("empty_cache")
        time.sleep(min(rng.uniform(3, 25), max(0.0, a.duration - (time.time() - t0))))
    log("healthy run done")


def healthy_slow_load(a):
    """A server started from slow storage: the weights of a 5120-wide decoder of about
    ``--load-gib`` (bf16) read tensor by tensor, shard file by shard file, over ``--load-s``
    seconds at the pace of a network file system whose speed varies from shard to shard (each
    tensor copied from host memory as it arrives), then a KV pool of ``--kv-gib`` taken once
    and requests served steadily for ``--duration`` seconds through every layer's value,
    output and MLP projections (attention itself, which takes no memory that lasts, left out)."""
    n_layer, plan = slow_load_plan(int(a.load_gib * GiB), a.load_s, a.seed)
    src = torch.randn(32 * MiB).to(torch.bfloat16)  # 64 MiB of host bytes to copy from
    log("reading %d layers, %.1f GiB in %d shards over %.0f s"
        % (n_layer, sum(2 * r * c for _, sh in plan for r, c in sh) / GiB, len(plan), a.load_s))
    weights = []
    due = time.time()
    for i, (secs, shard) in enumerate(plan):
        due += 0.1 * secs  # opening the file and reading its header
        sleep_until(due)
        per_elem = 0.9 * secs / sum(r * c for r, c in shard)
        for r, c in shard:
            w = torch.empty((r, c), dtype=torch.bfloat16, device=DEV)
            flat = w.view(-1)
            for off in range(0, r * c, src.numel()):
                m = min(src.numel(), r * c - off)
                flat[off : off + m].copy_(src[:m])
            weights.append(w)
            due += per_elem * r * c
            sleep_until(due)
        mark("shard", index=i, bytes=sum(2 * r * c for r, c in shard))
        log("shard %d/%d read: %.1f GiB in %.0f s" % (i + 1, len(plan), sum(2 * r * c for r, c in shard) / GiB, secs))
    mark("loaded")
    kv = torch.empty(int(a.kv_gib * GiB), dtype=torch.uint8, device=DEV)
    mark("model_ready")
    embed, head = weights[0], weights[-1]
    layers = [weights[1 + 7 * j : 8 + 7 * j] for j in range(n_layer)]
    F = torch.nn.functional
    rng = random.Random(a.seed)

    @torch.no_grad()
    def request():
        tokens = rng.choice((16, 32, 64, 128))
        x = embed[torch.randint(0, embed.shape[0], (tokens,), device=DEV)]
        for _q, _k, v, o, gate, up, down in layers:
            h = F.layer_norm(x, (x.shape[-1],))
            x = x + (h @ v.t()) @ o.t()
            h = F.layer_norm(x, (x.shape[-1],))
            x = x + (F.silu(h @ gate.t()) * (h @ up.t())) @ down.t()
        (F.layer_norm(x, (x.shape[-1],)) @ head.t()).argmax(-1)
        kv[: 64 * MiB].fill_(1)  # the request's keys and values written to its pages

    t0 = time.time()
    while time.time() - t0 < a.duration:
        request()
        time.sleep(rng.expovariate(1.0 / a.period_s))
    torch.cuda.synchronize()
    log("healthy run done")


def healthy_warmup_saturate(a):
    """A scoring server (GPT-2, fp16, the logits of every position, as a perplexity or
    reranking service computes them) whose request batches vary in size with a heavy tail: the
    caching allocator keeps a segment for every new largest batch, so its cache grows in
    steps that come ever more rarely (``warmup_plan``), up to the largest batch the server
    takes; then it holds flat. The largest batch is sized at start from
    torch.cuda.mem_get_info so that the cache ends near ``--fraction`` of the card; a new
    largest batch that would pass 98.5 % is cut to the largest so far. Never runs out."""
    model = gpt2(12).half().eval()
    vocab = model.config.vocab_size
    seq = 1024
    with torch.no_grad():
        probe = model(torch.randint(0, vocab, (1, 64), device=DEV), use_cache=False).logits
    per_token = probe.element_size() * vocab  # the logits, by far the largest tensor of a step
    del probe
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    others = total - free - torch.cuda.memory_reserved()  # the context, anything else on the card
    target = a.fraction * total - others
    hard = 0.985 * total - others
    budget = target - torch.cuda.memory_reserved() - GiB // 2  # half a GiB for small blocks
    steps, warm = int(a.duration / a.period_s), int(a.warmup_s / a.period_s)
    batches, cap = warmup_batches(warmup_plan(steps, warm, a.seed), budget / (per_token * seq))
    log("largest batch %d x %d tokens (%.1f GiB of logits); new largest batches at %s s"
        % (cap, seq, cap * seq * per_token / GiB, [round(i * a.period_s, 1) for i, _ in records(batches)]))
    mark("model_ready", largest_batch=cap)
    longest = 0
    t0 = time.time()
    for i, b in enumerate(batches):
        sleep_until(t0 + i * a.period_s)
        if b > longest:
            if longest and torch.cuda.memory_reserved() + b * seq * per_token > hard:
                log("batch %d cut to %d: the cache would pass 98.5 %% of the card" % (b, longest))
                b = longest
            else:
                longest = b
                mark("longest", batch=b)
        with torch.no_grad():
            out = model(torch.randint(0, vocab, (b, seq), device=DEV), use_cache=False)
            out.logits[:, -1].argmax(-1)
        del out
        if i % 200 == 0:
            log("step %d batch %d: reserved %.2f GiB, free %.2f GiB"
                % (i, b, torch.cuda.memory_reserved() / GiB, free_bytes() / GiB))
    log("healthy run done")


def healthy_ckpt_gather(a):
    """A model at about ``--fraction`` of the card (GPT-2 training, the rest of its weights and
    optimizer state a resident block) whose checkpoint, every ``--ckpt-s`` seconds, gathers a
    copy of part of its state on the GPU (``--gather-fraction`` of the card, as a sharded
    model's full state dict is gathered), copies it to pinned host memory for the writer,
    saves the trainer's own state and frees the copy. The copy's block stays in PyTorch's
    cache: the device's memory is flat after the first checkpoint."""
    tr = GptTrainer(batch=a.batch or 8, seq=512)
    for _ in range(5):
        tr.step()
    total = torch.cuda.mem_get_info()[1]
    n_state = max(0, int(a.fraction * total) - torch.cuda.memory_reserved())
    state = torch.empty(n_state, dtype=torch.uint8, device=DEV)
    mark("resident", bytes=n_state)
    n_gather = min(int(a.gather_fraction * total), n_state)
    host = torch.empty(n_gather, dtype=torch.uint8, pin_memory=True)
    path = os.path.join(tempfile.gettempdir(), "gpumem-ckpt-%d.pt" % os.getpid())
    log("state %.1f GiB (%.0f %% of the card with the trainer); each checkpoint gathers %.1f GiB"
        % (n_state / GiB, 100 * torch.cuda.memory_reserved() / total, n_gather / GiB))

    def ckpt():
        gathered = torch.empty(n_gather, dtype=torch.uint8, device=DEV)
        gathered.copy_(state[:n_gather])
        host.copy_(gathered)
        del gathered
        torch.save(tr.model.state_dict(), path)
        mark("checkpoint", bytes=n_gather)

    mark("model_ready")
    try:
        for_duration(a, tr.step, (a.ckpt_s, ckpt))
    finally:
        if os.path.exists(path):
            os.unlink(path)


def idle_neighbour(a):
    """A process that holds ``--start-gib`` and does nothing: another team's idle notebook."""
    t = torch.empty(int(a.start_gib * GiB), dtype=torch.uint8, device=DEV)
    mark("model_ready")
    time.sleep(a.duration)
    del t


# ------------------------------------------------------------------------------- --dry-run

# What the jobs measure on the GPU, as an H100 80GB showed it (tests/traces/corpus): the CUDA
# context, GPT-2 training at batch 8 x 512 after warm-up (what PyTorch reserves), its fp16 or
# bf16 logits per token, and a kept-logits leak shared by three trials.
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
        room = a.trials * ASSUME_TRIAL_LEAK * a.growth_s
        go = a.measure_s + 2 + 2 * a.trials
        print("  at the sync time: %.0f s of leak measured together; trials take their shares at +%s s; all leak from +%.0f s"
              % (a.measure_s, [a.measure_s + 1 + 2 * k for k in range(a.trials)], go))
        print("  each trial's share %.1f GiB of %.1f GiB free, leaving %.1f GiB (%d trials x %.0f MiB/s x %.0f s);"
              " out of memory about %.0f s after the sync time"
              % ((free - room) / a.trials / GiB, free / GiB, room / GiB, a.trials, ASSUME_TRIAL_LEAK / MiB, a.growth_s, go + a.growth_s))
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
