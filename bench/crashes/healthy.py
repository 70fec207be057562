"""The healthy jobs: each runs for ``--duration`` seconds (or its own schedule) and exits 0."""

from common import *  # noqa: F401,F403


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


def healthy_kv_saturate(a):
    """A server whose sessions each hold their keys and values in a block of their own (one of
    a few sizes, ``KV_SESSION_MIB``) and end after a random time; the sessions it holds grow
    along a curve that saturates (``kv_saturate_plan``, time constant ``--tau-s``) to fill
    ``--fraction`` of the card, then hold there while sessions keep coming and going for the
    rest of ``--duration``. Admission counts what the sessions hold (as a server counts its
    blocks), not the allocator's cache: a session that would take the sessions past the pool
    waits for the next tick. Never runs out while ``--fraction`` leaves the allocator's cache
    its room; at 1 or above (``kv-decay``) the sessions' pool is past the card and the server
    runs out as the rise slows: a crash whose growth decays, the mirror of this healthy job."""
    free, total = torch.cuda.mem_get_info()
    pool = a.fraction * total - (total - free)
    plan = kv_saturate_plan(pool, a.tau_s, a.life_s, a.duration, a.seed)
    log("pool %.1f GiB (%.0f %% of the card with what is already held), tau %.0f s, sessions live %.0f s"
        % (pool / GiB, 100 * a.fraction, a.tau_s, a.life_s))
    mark("model_ready", pool_bytes=int(pool))
    held, sessions, waiting, deferred = 0, {}, [], 0
    t0 = time.time()
    for t, opened, closed in plan:
        sleep_until(t0 + t)
        for i in closed:
            if i in sessions:
                held -= sessions.pop(i).numel()
            else:
                waiting = [w for w in waiting if w[0] != i]
        waiting.extend(opened)
        while waiting and held + waiting[0][1] * MiB <= pool:
            i, mib = waiting.pop(0)
            kv = torch.empty(mib * MiB, dtype=torch.uint8, device=DEV)
            kv[:MiB].fill_(1)  # the prompt's keys and values written
            sessions[i] = kv
            held += kv.numel()
        deferred = max(deferred, len(waiting))
        if int(t) % 20 == 0 and t == int(t):
            log("t %.0f s: %d sessions, %.1f GiB held, %.1f GiB reserved, %d waiting"
                % (t, len(sessions), held / GiB, torch.cuda.memory_reserved() / GiB, len(waiting)))
    torch.cuda.synchronize()
    log("healthy run done (at most %d sessions waited at once)" % deferred)


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
