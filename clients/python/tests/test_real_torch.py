"""Against real PyTorch, where it is installed (the GPU machine); skipped loudly elsewhere."""

import importlib.util
import os

import pytest

import gpumem_client
from conftest import validate_report, wait_until

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(
    not HAVE_TORCH, reason="PyTorch not installed: real-torch test runs on the GPU machine"
)


def _cuda_ok():
    if not HAVE_TORCH:
        return False
    import torch

    return torch.cuda.is_available()


@needs_torch
def test_report_model_with_real_modules(server):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(50, 16)
            self.attn = nn.MultiheadAttention(16, 2)
            self.norm = nn.LayerNorm(16)
            self.mlp = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16))
            self.lora_A = nn.Linear(16, 4, bias=False)
            self.head = nn.Linear(16, 3)

        def forward(self, idx):
            x = self.embed(idx)
            x = x + self.attn(x, x, x, need_weights=False)[0]
            x = self.norm(x)
            x = x + self.mlp(x) + self.lora_A(x).sum(-1, keepdim=True)
            return self.head(x)

    model = Block()
    opt = torch.optim.Adam(model.parameters())
    model(torch.randint(0, 50, (5, 2))).sum().backward()
    opt.step()

    def nbytes(mod):
        return sum(p.numel() * p.element_size() for p in mod.parameters())

    client = gpumem_client.Client(socket=server.address)
    assert client.report_model(model, opt)
    body = server.bodies[-1]
    validate_report(body)
    comps = {c["component"]: c for c in body["components"]}
    assert set(comps) == {"attention", "mlp", "embedding", "norm", "lora", "other"}
    for name, mod in [
        ("attention", model.attn),
        ("mlp", model.mlp),
        ("embedding", model.embed),
        ("norm", model.norm),
        ("lora", model.lora_A),
        ("other", model.head),
    ]:
        c = comps[name]
        assert c["parameters_bytes"] == nbytes(mod), name
        assert c["gradients_bytes"] == nbytes(mod), name
        # Adam: exp_avg and exp_avg_sq of each parameter's size, plus a scalar step each
        n_params = len(list(mod.parameters()))
        assert 2 * nbytes(mod) <= c["optimizer_bytes"] <= 2 * nbytes(mod) + 8 * n_params, name


@needs_torch
def test_real_torch_without_cuda_init_reports_no_devices(server):
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        pytest.skip("CUDA was initialised by an earlier test in this process")
    client = gpumem_client.Client(socket=server.address)
    client.mark("cpu only")
    # (a JAX device of an earlier test in this process may be there; PyTorch's may not)
    assert [d for d in server.bodies[0]["devices"] if d["allocator"] == "pytorch"] == []
    assert not torch.cuda.is_initialized()  # the client did not initialise it


@pytest.mark.skipif(not _cuda_ok(), reason="no CUDA device: real-GPU test runs on the GPU machine")
def test_real_cuda_device_is_reported(server):
    import torch

    x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")  # 64 MiB
    client = gpumem_client.start(interval=0.05, socket=server.address, snapshot_every=1)
    assert server.wait_for(lambda reqs: any(r.json["devices"] for r in reqs))
    gpumem_client.stop()
    body = next(b for b in server.bodies if b["devices"])
    validate_report(body)
    dev = body["devices"][0]
    want = "GPU-" + str(torch.cuda.get_device_properties(x.device.index).uuid).replace("GPU-", "")
    assert dev["uuid"] == want
    stats = torch.cuda.memory_stats(x.device.index)
    assert dev["allocated_bytes"] >= 64 << 20
    assert dev["reserved_bytes"] == stats["reserved_bytes.all.current"]
    assert "largest_free_block_bytes" in dev
    assert server.requests[0].peer_pid == os.getpid()
    assert len(server.srv.requests) >= 1
    del x


@pytest.mark.skipif(not _cuda_ok(), reason="no CUDA device: real-GPU test runs on the GPU machine")
def test_real_out_of_memory_is_reported(server):
    import torch

    torch.zeros(1, device="cuda")  # CUDA initialised: the observer can be attached
    client = gpumem_client.start(interval=0.05, socket=server.address)
    assert wait_until(lambda: client._oom_attached)
    n_before = len(server.requests)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")  # 1 PiB
    # the observer sent the event before the error reached this frame
    ooms = [
        e
        for r in server.requests[n_before:]
        for e in r.json.get("events", [])
        if e["kind"] == "oom"
    ]
    assert len(ooms) == 1
    want = "GPU-" + str(torch.cuda.get_device_properties(0).uuid).replace("GPU-", "")
    assert ooms[0]["name"] == want
    assert str(1 << 50) in ooms[0]["message"]
    assert server.wait_for(
        lambda reqs: any(d.get("ooms", 0) >= 1 for r in reqs for d in r.json["devices"])
    )
    gpumem_client.stop()
