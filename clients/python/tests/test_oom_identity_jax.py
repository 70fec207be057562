"""The out-of-memory observer, identity and endpoint from the environment, the JAX path."""

import os
import sys
import time
import types

import pytest

import gpumem_client
from gpumem_client import _collect
from conftest import UUID0, UUID1, validate_report, wait_until

# --------------------------------------------------------------------------- out of memory


def test_oom_observer_sends_an_event_at_once(server, fake_torch):
    client = gpumem_client.start(interval=60, socket=server.address)  # no periodic reports
    assert wait_until(lambda: len(fake_torch.observers) == 1)
    assert server.wait_for(lambda reqs: len(reqs) == 1)  # the first report
    observer = fake_torch.observers[0]
    observer(0, 2 << 30, 80 << 30, 1 << 20)  # device, alloc, device total, device free
    assert len(server.requests) == 2  # sent before the observer returned
    body = server.bodies[1]
    validate_report(body)
    (event,) = body["events"]
    assert event["kind"] == "oom" and event["name"] == "GPU-" + UUID0
    assert str(2 << 30) in event["message"] and "out of memory" in event["message"]
    # The exporter keeps the failing request and the free bytes for the alert's text.
    assert event["request_bytes"] == 2 << 30 and event["free_bytes"] == 1 << 20
    assert client.stats["accepted"] == 2


def test_oom_observer_with_no_exporter_is_quick_and_quiet(sockdir, fake_torch):
    client = gpumem_client.start(interval=60, socket=os.path.join(sockdir, "none.sock"))
    assert wait_until(lambda: len(fake_torch.observers) == 1)
    observer = fake_torch.observers[0]
    t0 = time.monotonic()
    observer(1, 1, 2, 3)  # a device it never reported, while backing off
    observer("not a device", None)  # odd arguments
    assert time.monotonic() - t0 < 0.3
    events = list(client._events)
    assert events[0]["kind"] == "oom" and events[0]["name"] == "GPU-" + UUID1
    assert events[1]["kind"] == "oom" and events[1]["name"] == ""
    assert events[0]["request_bytes"] == 1 and events[0]["free_bytes"] == 3
    assert "request_bytes" not in events[1] and "free_bytes" not in events[1]


def test_oom_observer_survives_a_client_that_is_gone(fake_torch):
    gpumem_client.client._set_oom_client(None)
    gpumem_client.client._oom_observer(0, 1, 2, 3)  # nothing to do, nothing raised


def test_no_observer_hook_is_fine(server, monkeypatch):
    from conftest import make_fake_torch

    torch = make_fake_torch(observer_hook=False)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(gpumem_client.client, "_oom_attached_pid", 0)
    client = gpumem_client.start(interval=0.01, socket=server.address)
    assert server.wait_for(lambda reqs: len(reqs) >= 2)
    assert client.running


# --------------------------------------------------------------------------- identity


def test_identity_from_environment(server, monkeypatch, no_frameworks):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "llama-ft-42")
    client = gpumem_client.Client(socket=server.address)
    client.mark("x")
    body = server.bodies[0]
    validate_report(body)
    assert body["identity"] == {"job": "llama-ft-42", "rank": 3, "local_rank": 1, "world_size": 8}


def test_explicit_identity_wins():
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "TORCHELASTIC_RUN_ID": "env-job"}
    ident = gpumem_client.identity_from_env(env, job="mine", rank=5)
    assert ident == {"job": "mine", "rank": 5, "local_rank": 1, "world_size": 8}
    assert gpumem_client.Client(socket="/nonexistent", job="j", rank=0).identity == {
        "job": "j",
        "rank": 0,
    }


@pytest.mark.parametrize(
    "env,expected",
    [
        ({}, {}),
        ({"RANK": "x", "LOCAL_RANK": "-1", "WORLD_SIZE": "1000001"}, {}),
        ({"RANK": " 7 ", "WORLD_SIZE": "1000000"}, {"rank": 7, "world_size": 1000000}),
        ({"TORCHELASTIC_RUN_ID": "none"}, {}),  # torchrun's placeholder, not a job
        ({"TORCHELASTIC_RUN_ID": "j" * 200}, {"job": "j" * 128}),
        ({"TORCHELASTIC_RUN_ID": "a\tb"}, {"job": "ab"}),
    ],
)
def test_identity_parsing(env, expected):
    assert gpumem_client.identity_from_env(env) == expected


def test_endpoint_resolution(monkeypatch):
    r = gpumem_client.resolve_endpoint
    assert r() == ("/run/gpumem/ingest.sock", None)
    monkeypatch.setenv("GPUMEM_INGEST_SOCKET", "/tmp/x.sock")
    assert r() == ("/tmp/x.sock", None)
    assert r(socket="/arg.sock") == ("/arg.sock", None)
    monkeypatch.setenv("GPUMEM_INGEST_URL", "http://127.0.0.1:9401")
    assert r() == (None, "http://127.0.0.1:9401")
    assert r(socket="/arg.sock") == ("/arg.sock", None)  # an argument wins over both
    assert r(url="http://127.0.0.1:1") == (None, "http://127.0.0.1:1")


def test_start_takes_job_and_rank(server, monkeypatch, no_frameworks):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("GPUMEM_INGEST_SOCKET", server.address)
    client = gpumem_client.start(interval=60, job="run-1", rank=4)
    assert client.socket_path == server.address
    assert client.identity == {"job": "run-1", "rank": 4}


# --------------------------------------------------------------------------- JAX


class FakeJaxDevice:
    def __init__(self, platform, hw_id, stats):
        self.platform = platform
        self.local_hardware_id = hw_id
        self.id = hw_id
        self._stats = stats

    def memory_stats(self):
        return self._stats


def _fake_jax(monkeypatch, initialized=True, devices=None):
    jax = types.ModuleType("jax")
    calls = []

    def local_devices():
        calls.append("local_devices")
        return devices

    jax.local_devices = local_devices
    bridge = types.ModuleType("jax._src.xla_bridge")
    bridge.backends_are_initialized = lambda: initialized
    monkeypatch.setitem(sys.modules, "jax", jax)
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", bridge)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    return calls


JAX_STATS = {
    "bytes_in_use": 3 << 30,
    "peak_bytes_in_use": 5 << 30,
    "num_allocs": 1234,
    "largest_alloc_size": 1 << 30,
    "bytes_limit": 60 << 30,
    "bytes_reserved": 0,
    "peak_bytes_reserved": 0,
    "largest_free_block_bytes": 40 << 30,
    "pool_bytes": 60 << 30,
    "peak_pool_bytes": 60 << 30,
}


def test_jax_devices_are_reported(server, monkeypatch):
    devices = [
        FakeJaxDevice("gpu", 0, JAX_STATS),
        FakeJaxDevice("gpu", 1, None),  # no stats: skipped
        FakeJaxDevice("cpu", 0, {"bytes_in_use": 1}),  # not a GPU: skipped
    ]
    _fake_jax(monkeypatch, devices=devices)
    client = gpumem_client.Client(socket=server.address)
    client._jax.uuid_of = {0: "GPU-" + UUID0, 1: "GPU-" + UUID1}.get
    assert client.flush()
    body = server.bodies[0]
    validate_report(body)
    assert body["devices"] == [
        {
            "uuid": "GPU-" + UUID0,
            "allocator": "jax",
            "allocated_bytes": 3 << 30,
            "reserved_bytes": 60 << 30,
            "allocated_peak_bytes": 5 << 30,
            "reserved_peak_bytes": 60 << 30,
            "largest_free_block_bytes": 40 << 30,
        }
    ]


def test_jax_without_a_pool_figure_uses_bytes_reserved_or_nothing():
    stats = {"bytes_in_use": 10, "bytes_reserved": 20}
    assert _collect.jax_entry("GPU-x", stats)["reserved_bytes"] == 20
    # in use far above reserved: inconsistent, the device is left out rather than invented
    assert _collect.jax_entry("GPU-x", {"bytes_in_use": 5 << 30, "bytes_reserved": 0}) is None
    assert _collect.jax_entry("GPU-x", {"bytes_in_use": 10}) is None


def test_jax_backends_are_never_initialised_by_the_client(server, monkeypatch):
    calls = _fake_jax(monkeypatch, initialized=False, devices=[])
    client = gpumem_client.Client(socket=server.address)
    client.mark("x")
    assert calls == []
    assert server.bodies[0]["devices"] == []
