"""Bodies and transport against docs/ingest.md, through a real HTTP server on a Unix socket."""

import json
import os
import re
import socket
import time

import pytest

import gpumem_client
from conftest import (
    DOC,
    UUID0,
    documented_fields,
    start_unix_server,
    torch_stats,
    validate_report,
)


def _doc_body_fields():
    """Field names of the table under "Body, version 1" in docs/ingest.md."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Body, version 1", 1)[1].split("\n## ", 1)[0]
    fields = set()
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = line.split("|")[1]
        names = re.findall(r"`([^`]+)`", first_cell)
        prefix = names[0].rsplit(".", 1)[0] + "." if "." in names[0] else ""
        fields.add(names[0])
        for other in names[1:]:
            fields.add(prefix + other)
    return fields, section


@pytest.mark.skipif(not DOC.exists(), reason="docs/ingest.md is not beside this checkout")
def test_validator_knows_exactly_the_documented_fields():
    fields, section = _doc_body_fields()
    assert fields == documented_fields()
    # and the example in the document is a valid body by the same rules
    example = json.loads(section.split("```json", 1)[1].split("```", 1)[0])
    validate_report(example)


def test_send_allocator_stats_maps_every_field(server):
    client = gpumem_client.Client(socket=server.address, job="llama-ft-42", rank=3)
    stats = torch_stats(8696321536, 12993953792)
    assert client.send_allocator_stats(UUID0, stats, largest_free_block=2147483648) is True
    (req,) = server.requests
    assert req.method == "POST" and req.path == "/api/v1/report"
    assert req.headers["Content-Type"] == "application/json"
    assert int(req.headers["Content-Length"]) == len(req.body)
    assert "X-Gpumem-Pid" not in req.headers  # the Unix socket carries the pid itself
    assert req.peer_pid == os.getpid()
    body = req.json
    validate_report(body)
    assert body == {
        "version": 1,
        "identity": {"job": "llama-ft-42", "rank": 3},
        "devices": [
            {
                "uuid": "GPU-" + UUID0,
                "allocator": "pytorch",
                "allocated_bytes": 8696321536,
                "reserved_bytes": 12993953792,
                "active_bytes": 8696321536 + 4096,
                "inactive_split_bytes": 2 << 20,
                "segments": 7,
                "alloc_retries": 1,
                "ooms": 0,
                "allocated_peak_bytes": 8696321536 + (1 << 20),
                "reserved_peak_bytes": 12993953792,
                "largest_free_block_bytes": 2147483648,
            }
        ],
    }
    assert client.stats["sent"] == client.stats["accepted"] == 1
    assert client.last_pid == os.getpid()


def test_uuid_with_prefix_is_kept_and_missing_optional_stats_are_left_out(server):
    client = gpumem_client.Client(socket=server.address)
    stats = {"allocated_bytes.all.current": 10, "reserved_bytes.all.current": 20}
    assert client.send_allocator_stats("GPU-" + UUID0, stats)
    body = server.bodies[0]
    validate_report(body)
    assert body["devices"] == [
        {"uuid": "GPU-" + UUID0, "allocator": "pytorch", "allocated_bytes": 10, "reserved_bytes": 20}
    ]
    assert "identity" not in body and "phase" not in body and "events" not in body


def test_values_the_exporter_would_reject_are_never_sent(server):
    client = gpumem_client.Client(socket=server.address)
    # required field missing: nothing to send
    assert not client.send_allocator_stats(UUID0, {"allocated_bytes.all.current": 1})
    # allocated far above reserved: inconsistent, not sent
    assert not client.send_allocator_stats(
        UUID0, torch_stats(100 << 20, 1 << 20)
    )
    # negative, absurd, float, bool optional values are dropped, not sent
    stats = torch_stats(10, 20)
    stats["num_ooms"] = -1
    stats["segment.all.current"] = 1 << 60
    stats["num_alloc_retries"] = True
    stats["active_bytes.all.current"] = 12.0
    assert client.send_allocator_stats(UUID0, stats)
    (body,) = server.bodies
    validate_report(body)
    dev = body["devices"][0]
    assert "ooms" not in dev and "segments" not in dev and "alloc_retries" not in dev
    assert dev["active_bytes"] == 12 and isinstance(dev["active_bytes"], int)


def test_send_report_sends_the_body_and_defaults_version(server):
    client = gpumem_client.Client(socket=server.address)
    assert client.send_report({"devices": []}) is True
    assert server.bodies == [{"devices": [], "version": 1}]


def test_keep_alive_one_connection_for_many_reports(server):
    client = gpumem_client.Client(socket=server.address)
    for i in range(5):
        assert client.send_allocator_stats(UUID0, torch_stats(i, 100))
    assert len(server.requests) == 5
    assert server.connections == 1
    assert {r.conn_id for r in server.requests} == {1}


def test_reconnects_when_the_server_closed_the_kept_alive_connection(server):
    server.srv.close_silently = True
    client = gpumem_client.Client(socket=server.address)
    for i in range(4):
        assert client.send_allocator_stats(UUID0, torch_stats(i, 100)), client.last_error
    assert len(server.requests) == 4
    assert server.connections == 4
    assert client.stats == {
        "sent": 4,
        "accepted": 4,
        "rejected": 0,
        "failed": 0,
        "dropped": 0,
        "events_dropped": 0,
    }


def test_reconnects_after_the_exporter_restarts(sockdir):
    path = os.path.join(sockdir, "ingest.sock")
    first = start_unix_server(path)
    client = gpumem_client.Client(socket=path, backoff_initial=0.05)
    assert client.send_allocator_stats(UUID0, torch_stats(1, 2))
    first.close()
    os.unlink(path)
    second = start_unix_server(path)
    try:
        # the old connection is dead: the client opens a new one within the same call
        assert client.send_allocator_stats(UUID0, torch_stats(1, 2)), client.last_error
        assert len(second.requests) == 1
        assert client.stats["failed"] == 0
    finally:
        second.close()


def test_tcp_ingest_sends_the_pid_header(tcp_server, monkeypatch):
    monkeypatch.setenv("GPUMEM_INGEST_URL", tcp_server.address)
    client = gpumem_client.Client()
    assert client.url == tcp_server.address and client.socket_path is None
    assert client.send_allocator_stats(UUID0, torch_stats(1, 2))
    (req,) = tcp_server.requests
    assert req.path == "/api/v1/report"
    assert req.headers["X-Gpumem-Pid"] == str(os.getpid())
    validate_report(req.json)


def test_a_bad_url_disables_reporting_without_raising():
    client = gpumem_client.Client(url="https://example.invalid:1")
    assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is False
    assert client.mark("x") is False
    assert client.stats["dropped"] >= 1


def test_never_blocks_longer_than_the_timeout(server):
    server.srv.delay = 1.0  # an exporter that hangs
    client = gpumem_client.Client(socket=server.address, timeout=0.2)
    t0 = time.monotonic()
    assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is False
    elapsed = time.monotonic() - t0
    assert elapsed < 0.45, elapsed
    assert client.stats["failed"] == 1
    assert "timeout" in (client.last_error or "").lower() or "timed out" in (
        client.last_error or ""
    )


def test_connection_refused_is_a_counted_failure(sockdir):
    path = os.path.join(sockdir, "dead.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)  # bound, never listening: connect() is refused
    try:
        client = gpumem_client.Client(socket=path)
        assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is False
        assert client.stats["failed"] == 1
        assert "ConnectionRefused" in client.last_error
    finally:
        s.close()


def test_unix_http_connection_can_be_used_directly(server):
    conn = gpumem_client.UnixHTTPConnection(server.address, timeout=1.0)
    conn.request(
        "POST",
        gpumem_client.REPORT_PATH,
        body=b'{"version":1,"devices":[]}',
        headers={"Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    assert resp.status == 202
    assert json.loads(resp.read())["accepted"] is True
    conn.close()
