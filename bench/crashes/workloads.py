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
"""

import argparse
import collections
import math
import os
import random
import sys
import tempfile
import time

import torch

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


def idle_neighbour(a):
    """A process that holds ``--start-gib`` and does nothing: another team's idle notebook."""
    t = torch.empty(int(a.start_gib * GiB), dtype=torch.uint8, device=DEV)
    mark("model_ready")
    time.sleep(a.duration)
    del t


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
    a = p.parse_args()
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
