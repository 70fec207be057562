"""Against real JAX on a GPU, where it is installed (the GPU machine); skipped loudly elsewhere."""

import importlib.util
import os

import pytest

import gpumem_client
from conftest import validate_report

HAVE_JAX = importlib.util.find_spec("jax") is not None


@pytest.mark.skipif(not HAVE_JAX, reason="JAX not installed: real-JAX test runs on the GPU machine")
def test_real_jax_gpu_is_reported(server, monkeypatch):
    # Keep JAX from taking 75% of the GPU up front, for the PyTorch tests in this process.
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp

    client = gpumem_client.Client(socket=server.address)
    if not any(d.platform == "gpu" for d in jax.local_devices()):
        pytest.skip("JAX sees no GPU: real-JAX test runs on the GPU machine")
    x = jnp.ones((16 << 20,), dtype=jnp.float32)  # 64 MiB
    x.block_until_ready()
    assert client.flush()
    validate_report(server.bodies[-1])
    # (read directly: a device PyTorch reports as well is sent once, as PyTorch's)
    jax_devices = client._jax.collect()
    validate_report({"version": 1, "devices": jax_devices})
    assert jax_devices, jax.local_devices()[0].memory_stats()
    dev = jax_devices[0]
    assert dev["allocator"] == "jax"
    assert dev["uuid"].startswith("GPU-") and len(dev["uuid"]) == 40
    assert dev["allocated_bytes"] >= 64 << 20
    assert dev["reserved_bytes"] >= dev["allocated_bytes"]
    del x
