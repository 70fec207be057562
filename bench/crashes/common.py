"""What the recorded jobs share: logging and marks, the card's free memory, the resident
block, the models, the pure plans of the scheduled jobs, and the loop that runs a step until
the out-of-memory error."""

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


# Sizes of a session's keys and values, in MiB: one of a few, as a server's length buckets give.
KV_SESSION_MIB = (128, 192, 256, 320, 384)


def kv_saturate_plan(pool_bytes, tau_s, life_s, duration_s, seed, tick_s=0.25):
    """A server's sessions: how many it holds follows ``n(t) = N (1 - exp(-t / tau_s))``, N the
    sessions of mean size that fill ``pool_bytes``; each lives an exponential ``life_s`` on
    average and holds one block of ``KV_SESSION_MIB``. Returns [(t, [(id, MiB), ...] opened,
    [id, ...] closed), ...] per tick, a pure function of its arguments and the seed."""
    rng = random.Random(seed)
    mean = sum(KV_SESSION_MIB) / len(KV_SESSION_MIB) * MiB
    cap = pool_bytes / mean
    live, ticks, nxt = {}, [], 0
    for k in range(int(duration_s / tick_s)):
        t = k * tick_s
        closed = [i for i, end in live.items() if end <= t]
        for i in closed:
            del live[i]
        opened = []
        while len(live) < cap * (1.0 - math.exp(-t / tau_s)):
            live[nxt] = t + rng.expovariate(1.0 / life_s)
            opened.append((nxt, rng.choice(KV_SESSION_MIB)))
            nxt += 1
        ticks.append((t, opened, closed))
    return ticks


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
