#!/usr/bin/env python3
"""Steps per second of a small transformer training loop on CUDA, for bench/training_effect.sh.

    python3 bench/train_steps.py --steps 200
prints one JSON line: {"steps_per_s": ..., "ms_per_step": ...}
"""
import argparse
import json
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    a = p.parse_args()
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 4).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(16, 256, 1024, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t
    print(json.dumps({"steps_per_s": a.steps / dt, "ms_per_step": dt / a.steps * 1e3}))


if __name__ == "__main__":
    main()
