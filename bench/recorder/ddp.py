#!/usr/bin/env python3
"""A real DDP job for recording under torchrun: GPT-2 (transformers, from its config, no
download) trained with DistributedDataParallel over NCCL, one process per GPU.

    torchrun --nproc-per-node 2 bench/recorder/ddp.py --duration 40            # healthy
    torchrun --nproc-per-node 2 bench/recorder/ddp.py --grow --stage-s 20      # runs out of memory

With ``--grow`` the batch grows every ``--stage-s`` seconds on every rank (a batch-size
ramp-up), and the last rank also holds a block that leaves it room for ``--stages`` stages (a
larger model's frozen weights would): that rank fails first with a real
``torch.OutOfMemoryError``, and torchrun stops the others, as in a real job.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist

GiB = 1 << 30


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--duration", type=float, default=40.0)
    p.add_argument("--grow", action="store_true")
    p.add_argument("--stage-s", type=float, default=20.0)
    p.add_argument("--stages", type=float, default=5.0)
    p.add_argument("--batch0", type=int, default=4)
    p.add_argument("--batch-step", type=int, default=4)
    a = p.parse_args()
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    if os.environ.get("GPUMEM_SOCKET"):
        # Report to a running exporter as a user's job would.
        import gpumem_client

        gpumem_client.start(socket=os.environ["GPUMEM_SOCKET"], interval=1.0)
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=12, n_positions=1024)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-4)
    vocab = model.config.vocab_size

    def step(batch):
        x = torch.randint(0, vocab, (batch, 512), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = ddp(x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step(a.batch0)
    resident = None
    if a.grow and rank == dist.get_world_size() - 1:
        # Measured without gradient all-reduce: the other ranks run no matching collectives.
        with ddp.no_sync():
            torch.cuda.reset_peak_memory_stats()
            step(a.batch0)
            p0 = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            step(a.batch0 + a.batch_step)
            per_stage = torch.cuda.max_memory_allocated() - p0
        cached = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
        free = torch.cuda.mem_get_info()[0]
        hold = free - int(max(per_stage * a.stages - cached, per_stage))
        if hold > 0:
            resident = torch.empty(hold, dtype=torch.uint8, device="cuda")
        print("rank %d: %.2f GiB a stage, holding %.1f GiB" % (rank, per_stage / GiB, max(hold, 0) / GiB), flush=True)
    dist.barrier()
    t0 = time.time()
    batch = None
    done = torch.zeros(1, device="cuda")
    while True:
        if not a.grow:
            # Every rank stops after the same step, or the last all-reduce would wait forever.
            done.fill_(float(time.time() - t0 >= a.duration))
            dist.all_reduce(done, op=dist.ReduceOp.MAX)
            if done.item():
                break
        b = a.batch0 + (a.batch_step * int((time.time() - t0) // a.stage_s) if a.grow else 0)
        if b != batch:
            batch = b
            print("rank %d batch %d at %.0f s" % (rank, b, time.time() - t0), flush=True)
        step(b)
    del resident
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
