"""The reporting thread with a fake ``torch`` module (no real PyTorch needed)."""

import sys

import gpumem_client
from gpumem_client import _collect
from conftest import UUID0, FakeCuda, torch_stats, validate_report, wait_until


def test_thread_reports_used_devices_with_mapped_fields(server, fake_torch):
    client = gpumem_client.start(interval=0.02, socket=server.address, snapshot_every=3)
    assert client is not None and client.running
    assert gpumem_client.start(interval=5) is client  # idempotent
    assert server.wait_for(lambda reqs: len(reqs) >= 7)
    gpumem_client.stop()
    bodies = server.bodies
    for body in bodies:
        validate_report(body)
        # device 1 was never touched by this process's allocator: not reported
        assert [d["uuid"] for d in body["devices"]] == ["GPU-" + UUID0]
        assert "events" not in body and "phase" not in body
    dev = bodies[0]["devices"][0]
    assert dev["allocator"] == "pytorch"
    assert dev["allocated_bytes"] == 8 << 30 and dev["reserved_bytes"] == 12 << 30
    assert dev["segments"] == 7 and dev["alloc_retries"] == 1 and dev["ooms"] == 0
    # largest inactive block over the snapshot's segments, every 3rd report only
    has_lfb = ["largest_free_block_bytes" in b["devices"][0] for b in bodies[:7]]
    assert has_lfb == [True, False, False, True, False, False, True]
    assert bodies[0]["devices"][0]["largest_free_block_bytes"] == 24 << 20
    # UUIDs are looked up once per device, snapshots only when due
    assert fake_torch.cuda.count("get_device_properties") == 1
    assert fake_torch.cuda.count("memory_snapshot") == (len(bodies) + 2) // 3


def test_cuda_is_never_initialised_by_the_client(server, fake_torch):
    fake_torch.cuda.initialized = False
    client = gpumem_client.start(interval=0.01, socket=server.address)
    assert wait_until(lambda: client._reports_collected == 0 and client.running)
    import time

    time.sleep(0.15)
    assert fake_torch.cuda.calls == []  # only is_initialized() was asked
    assert server.requests == []  # nothing to say
    assert fake_torch.observers == []  # observers wait for CUDA too
    # the training process initialises CUDA later: reports begin
    fake_torch.cuda.initialized = True
    assert server.wait_for(lambda reqs: len(reqs) >= 1)
    validate_report(server.bodies[0])
    assert len(fake_torch.observers) == 1


def test_nested_stats_are_read_without_flattening(server, fake_torch):
    class NestedCuda(FakeCuda):
        def memory_stats_as_nested_dict(self, device=None):
            self.calls.append(("nested", device))
            flat = self.stats[device]
            nested = {}
            for key, value in flat.items():
                node = nested
                parts = key.split(".")
                for part in parts[:-1]:
                    node = node.setdefault(part, {})
                node[parts[-1]] = value
            return nested

        def memory_stats(self, device=None):
            raise AssertionError("memory_stats() should not be needed")

    fake_torch.cuda = NestedCuda()
    client = gpumem_client.Client(socket=server.address)
    assert client.flush() is True
    (body,) = server.bodies
    validate_report(body)
    dev = body["devices"][0]
    assert dev["allocated_bytes"] == 8 << 30 and dev["segments"] == 7
    assert dev["reserved_peak_bytes"] == 12 << 30


def test_largest_free_blocks_per_device():
    segments = [
        {"device": 0, "total_size": 100, "allocated_size": 100, "blocks": None},
        {
            "device": 1,
            "total_size": 100,
            "allocated_size": 10,
            "blocks": [
                {"size": 10, "state": "active_allocated"},
                {"size": 30, "state": "inactive"},
                {"size": 20, "state": "active_pending_free"},
                {"size": 40, "state": "inactive"},
            ],
        },
        {"device": 1, "total_size": 50, "allocated_size": 0,
         "blocks": [{"size": 50, "state": "inactive"}]},
    ]
    assert gpumem_client.largest_free_blocks(segments) == {0: 0, 1: 50}
    assert gpumem_client.largest_free_blocks([]) == {}


def test_uuid_formats():
    f = _collect.format_uuid
    assert f(UUID0) == "GPU-" + UUID0
    assert f("GPU-" + UUID0) == "GPU-" + UUID0
    assert f("MIG-" + UUID0) == "MIG-" + UUID0
    assert f(UUID0.upper()) == "GPU-" + UUID0

    class Raw:
        bytes = bytes(range(16))

        def __str__(self):
            return "<_CUuuid object>"

    assert f(Raw()) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert f(None) is None and f("junk") is None


def test_a_failing_framework_never_stops_the_thread(server, fake_torch):
    def boom(device=None):
        raise RuntimeError("driver went away")

    fake_torch.cuda.memory_stats = boom
    client = gpumem_client.start(interval=0.01, socket=server.address)
    gpumem_client.mark("still alive")
    assert server.wait_for(lambda reqs: len(reqs) >= 1)
    assert client.running
    body = server.bodies[0]
    validate_report(body)
    assert body["devices"] == []
    assert body["events"] == [{"kind": "mark", "name": "still alive"}]


def test_client_never_imports_frameworks(server, tmp_path):
    import subprocess

    code = (
        "import sys, time, gpumem_client\n"
        "c = gpumem_client.start(interval=0.01, socket=%r)\n"
        "gpumem_client.mark('m')\n"
        "time.sleep(0.1)\n"
        "gpumem_client.stop()\n"
        "assert 'torch' not in sys.modules and 'jax' not in sys.modules\n"
        "print(c.stats['accepted'])\n" % server.address
    )
    pkg = str(__import__("pathlib").Path(gpumem_client.__file__).parents[1])
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYTHONPATH": pkg, "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) >= 1
