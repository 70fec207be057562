"""A missing or unhappy exporter: back-off, counting, logging; never an exception."""

import logging
import os
import time

import gpumem_client
from conftest import UUID0, start_unix_server, torch_stats, validate_report, wait_until


def test_missing_socket_backs_off_with_growing_delay(sockdir, caplog):
    path = os.path.join(sockdir, "absent.sock")
    client = gpumem_client.Client(socket=path, backoff_initial=0.05, backoff_max=0.2)
    delays = []
    with caplog.at_level(logging.DEBUG, logger="gpumem_client"):
        for _ in range(5):
            t0 = time.monotonic()
            assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is False
            assert time.monotonic() - t0 < 0.1  # a missing socket fails at once
            delays.append(client.backoff)
            # while backing off, nothing is even tried
            assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is False
            time.sleep(client.backoff + 0.01)
    assert delays == [0.05, 0.1, 0.2, 0.2, 0.2]  # doubles, capped
    assert client.stats["failed"] == 5
    assert client.stats["sent"] == 5
    assert client.stats["dropped"] == 5
    assert client.stats["accepted"] == 0
    assert "FileNotFoundError" in client.last_error
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cannot reach the exporter" in warnings[0].getMessage()


def test_default_backoff_caps_at_30_seconds(sockdir):
    client = gpumem_client.Client(socket=os.path.join(sockdir, "absent.sock"))
    for _ in range(10):
        client._next_attempt = 0.0  # pretend the delay has passed
        client.send_allocator_stats(UUID0, torch_stats(1, 2))
    assert client.backoff == 30.0
    assert client.stats["failed"] == 10


def test_thread_survives_a_missing_exporter_and_recovers(sockdir, fake_torch):
    path = os.path.join(sockdir, "late.sock")
    client = gpumem_client.Client(socket=path, backoff_initial=0.05, backoff_max=0.1)
    client.start(interval=0.01)
    client.mark("queued while the exporter is away")
    time.sleep(0.3)
    assert client.running
    failed = client.stats["failed"]
    assert 1 <= failed <= 8, client.stats  # about one try per back-off delay, not per tick
    assert client.stats["dropped"] > failed
    server = start_unix_server(path)
    try:
        assert server.wait_for(lambda reqs: len(reqs) >= 2, timeout=3)
        body = server.bodies[0]
        validate_report(body)
        # the event queued while the exporter was away arrives with the first report
        assert body["events"] == [{"kind": "mark", "name": "queued while the exporter is away"}]
        assert client.backoff == 0.0
    finally:
        client.stop()
        server.close()


def test_rejections_are_counted_and_logged_once_per_reason(server, caplog):
    server.always(400, {"error": "devices[0].reserved_bytes: invalid", "reason": "invalid_value"})
    client = gpumem_client.Client(socket=server.address)
    with caplog.at_level(logging.WARNING, logger="gpumem_client"):
        for _ in range(3):
            client.mark("m")  # sent at once: no thread
    assert client.stats["rejected"] == 3
    assert client.stats["sent"] == 3 and client.stats["accepted"] == 0
    assert client.stats["events_dropped"] == 3  # a rejected report's events are not resent
    assert len(server.requests) == 3  # a 400 is no reason to wait
    assert client.backoff == 0.0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "invalid_value" in warnings[0] and "reserved_bytes" in warnings[0]
    assert "400" in client.last_error
    # another reason is logged once too
    server.always(415, {"error": "not JSON", "reason": "content_type"})
    with caplog.at_level(logging.WARNING, logger="gpumem_client"):
        client.mark("m")
        client.mark("m")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and "content_type" in warnings[1]


def test_too_many_processes_backs_off(server):
    server.always(429, {"error": "tracking 1024 processes already", "reason": "too_many_processes"})
    client = gpumem_client.Client(socket=server.address, backoff_initial=0.2)
    assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is False
    assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is False
    assert len(server.requests) == 1
    assert client.stats == {
        "sent": 1,
        "accepted": 0,
        "rejected": 1,
        "failed": 0,
        "dropped": 1,
        "events_dropped": 0,
    }
    server.always(202)
    time.sleep(0.21)
    assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is True
    assert client.backoff == 0.0


def test_event_queue_is_bounded(sockdir):
    client = gpumem_client.Client(socket=os.path.join(sockdir, "absent.sock"))
    client._next_attempt = time.monotonic() + 60  # backing off: everything stays queued
    for i in range(300):
        client.mark("m%d" % i)
    assert len(client._events) == 256
    assert client.stats["events_dropped"] == 44
    assert client._events[0]["name"] == "m44"  # the oldest went first


def test_many_events_are_sent_early_not_lost(server, fake_torch):
    client = gpumem_client.Client(socket=server.address)
    client.start(interval=30.0)  # long interval: the queue, not the clock, triggers the send
    assert server.wait_for(lambda reqs: len(reqs) == 1)  # first report at once
    t0 = time.monotonic()
    for i in range(200):
        client.mark("m%d" % i)
    assert wait_until(lambda: sum(len(b.get("events", [])) for b in server.bodies) >= 192)
    assert time.monotonic() - t0 < 5
    client.stop()  # sends the rest
    for b in server.bodies:
        validate_report(b)
    names = [e["name"] for b in server.bodies for e in b.get("events", [])]
    assert names == ["m%d" % i for i in range(200)]
    assert client.stats["events_dropped"] == 0
