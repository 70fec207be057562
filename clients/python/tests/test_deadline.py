"""One deadline per request: an exporter that is slow, silent or unable to accept costs the
caller the deadline and no more; the report is dropped and counted, and the next one to a
healthy exporter gets through. Also the answers that tell the client to wait or that a GPU is
unknown."""

import email.utils
import logging
import os
import socket
import time

import pytest

import gpumem_client
from gpumem_client.client import RETRY_AFTER_MAX, _retry_after
from conftest import (
    UUID0,
    UUID1,
    RawServer,
    answer_bytes,
    fill_backlog,
    headers_only,
    read_request,
    silent,
    start_unix_server,
    trickle,
    torch_stats,
    validate_report,
    wait_until,
)

DEADLINE = 0.1
# What the bound may exceed the deadline by: scheduling, collecting, encoding.
MARGIN = 0.15

CALLS = {
    "mark": lambda c: c.mark("step"),
    "flush": lambda c: c.flush(),
    "send_allocator_stats": lambda c: c.send_allocator_stats(UUID0, torch_stats(1, 2)),
    "send_report": lambda c: c.send_report({"devices": []}),
}


def timed(call, client):
    t0 = time.monotonic()
    result = call(client)
    return result, time.monotonic() - t0


def healthy_again(client, path):
    """Replace whatever listens at ``path`` with a real exporter and wait out the back-off."""
    if os.path.exists(path):
        os.unlink(path)
    good = start_unix_server(path)
    assert wait_until(lambda: not client._in_backoff(), timeout=2)
    return good


def test_default_deadline_is_100_ms(sockdir):
    assert gpumem_client.DEFAULT_TIMEOUT == 0.1
    assert gpumem_client.Client(socket=os.path.join(sockdir, "x.sock")).timeout == 0.1
    client = gpumem_client.start(socket=os.path.join(sockdir, "x.sock"), interval=60)
    assert client.timeout == 0.1
    # and it stays configurable
    assert gpumem_client.Client(socket=os.path.join(sockdir, "x.sock"), timeout=0.3).timeout == 0.3


# A trickle gives each recv() a byte well within any per-recv timeout: only a deadline for
# the whole answer stops it.
BEHAVIOURS = {"silent": silent, "trickle": trickle, "headers_only": headers_only}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("behaviour", sorted(BEHAVIOURS))
def test_a_hung_or_slow_exporter_costs_the_caller_one_deadline(
    sockdir, no_frameworks, behaviour, call
):
    path = os.path.join(sockdir, "ingest.sock")
    bad = RawServer(BEHAVIOURS[behaviour], path)
    client = gpumem_client.Client(socket=path, timeout=DEADLINE, backoff_initial=0.05)
    client.enter_phase("before")  # queued, not sent: it rides with the report under test
    try:
        result, elapsed = timed(CALLS[call], client)
        assert result is False
        assert elapsed < DEADLINE + MARGIN, elapsed
        assert wait_until(lambda: bad.requests == 1)  # it was the answer that never came
        assert client.stats["sent"] == client.stats["failed"] == 1
        assert client.stats["accepted"] == 0
        assert "timed out" in client.last_error, client.last_error
        # the report is dropped; the connection it was on is not used again
        assert client._transport._conn is None
    finally:
        bad.close()
    good = healthy_again(client, path)
    try:
        assert CALLS[call](client) is True, client.last_error
        (body,) = good.bodies
        validate_report(body)
        if call != "send_report":  # that one sends its body as it is
            # the events of the report that timed out go with the next one
            names = [e["name"] for e in body["events"]]
            assert names[:2] == ["before", "step"] if call == "mark" else ["before"], names
    finally:
        good.close()


def test_a_full_backlog_costs_the_caller_at_most_one_deadline(sockdir, no_frameworks):
    path = os.path.join(sockdir, "ingest.sock")
    full = fill_backlog(path)
    if full is None:
        pytest.skip("this platform does not refuse a connect() to a full Unix-socket backlog")
    listener, fillers = full
    client = gpumem_client.Client(socket=path, timeout=DEADLINE, backoff_initial=0.05)
    try:
        for call in ("mark", "send_allocator_stats"):
            client._next_attempt = 0.0
            result, elapsed = timed(CALLS[call], client)
            assert result is False
            assert elapsed < DEADLINE + MARGIN, elapsed
        assert client.stats["failed"] == 2 and client.stats["sent"] == 2
    finally:
        for s in fillers:
            s.close()
        listener.close()
    good = healthy_again(client, path)
    try:
        assert client.mark("after") is True, client.last_error
        assert [e["name"] for e in good.bodies[0]["events"]] == ["step", "after"]
    finally:
        good.close()


def test_over_tcp_the_deadline_holds_too(no_frameworks):
    bad = RawServer(trickle)
    try:
        client = gpumem_client.Client(url=bad.address, timeout=DEADLINE)
        result, elapsed = timed(CALLS["send_allocator_stats"], client)
        assert result is False
        assert elapsed < DEADLINE + MARGIN, elapsed
        assert client.stats["failed"] == 1
    finally:
        bad.close()


def hangs_up_on_the_second_request(then_hang):
    """The first connection answers one request, then closes on the next without a word
    (like an exporter closing an idle keep-alive connection just as it is reused). Later
    connections answer, or hang when ``then_hang``."""

    def behave(server, conn, index):
        buf = bytearray()
        if index == 0:
            if read_request(conn, buf):
                server.got_request()
                conn.sendall(answer_bytes())
            if read_request(conn, buf):
                server.got_request()
            conn.close()
        elif then_hang:
            silent(server, conn, index)
        else:
            while read_request(conn, buf):
                server.got_request()
                conn.sendall(answer_bytes())

    return behave


@pytest.mark.parametrize("hang", [False, True], ids=["answers", "hangs"])
def test_a_stale_kept_alive_connection_is_retried_once_within_the_deadline(sockdir, hang):
    path = os.path.join(sockdir, "ingest.sock")
    bad = RawServer(hangs_up_on_the_second_request(hang), path)
    try:
        client = gpumem_client.Client(socket=path, timeout=DEADLINE)
        assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is True
        result, elapsed = timed(CALLS["send_allocator_stats"], client)
        assert client._transport.connections_opened == 2  # one retry, on a new connection
        if hang:
            assert result is False
            assert elapsed < DEADLINE + MARGIN, elapsed
            assert client.stats["failed"] == 1
        else:
            assert result is True, client.last_error
            assert client.stats["failed"] == 0
        assert wait_until(lambda: bad.requests == 3)
    finally:
        bad.close()


def test_mark_with_the_thread_running_never_waits_for_the_exporter(sockdir, fake_torch):
    path = os.path.join(sockdir, "ingest.sock")
    bad = RawServer(silent, path)
    client = gpumem_client.Client(socket=path, timeout=DEADLINE, backoff_initial=0.05)
    try:
        client.start(interval=0.01)
        assert wait_until(lambda: bad.requests >= 1)
        worst = 0.0
        for i in range(50):
            t0 = time.monotonic()
            assert client.mark("m%d" % i) is True  # queued for the thread
            with client.phase("forward"):
                pass
            worst = max(worst, time.monotonic() - t0)
            time.sleep(0.005)
        # A call that waited for the silent exporter would take its whole deadline; anything
        # short of it is a scheduler's hiccup on a loaded machine, not a wait.
        assert worst < DEADLINE, worst
        assert wait_until(lambda: client.stats["failed"] >= 2)
        # the reporting thread, too, waits one deadline per request and then backs off
        assert client.stats["dropped"] >= 1
        t0 = time.monotonic()
        client.stop(flush=False)
        assert time.monotonic() - t0 < DEADLINE + 0.5 + MARGIN
    finally:
        client.stop(flush=False)
        bad.close()


def test_the_oom_report_is_bounded_too(sockdir, no_frameworks):
    path = os.path.join(sockdir, "ingest.sock")
    bad = RawServer(trickle, path)
    try:
        client = gpumem_client.Client(socket=path, timeout=DEADLINE)
        t0 = time.monotonic()
        client._on_oom(0, 1 << 30, 80 << 30, 1 << 20)
        assert time.monotonic() - t0 < DEADLINE + MARGIN
        assert client.stats["failed"] == 1
        assert [e["kind"] for e in client._events] == ["oom"]  # kept for the next report
    finally:
        bad.close()


# --------------------------------------------------------------------------- reading answers

BODY = b'{"accepted": true, "pid": 7}'


def _chunks(body):
    return b"".join(b"%x;ext=1\r\n%s\r\n" % (1, body[i : i + 1]) for i in range(len(body)))


ANSWERS = {
    "chunked": (
        b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n"
        + _chunks(BODY)
        + b"0\r\nX-Trailer: 1\r\n\r\n",
        True,
    ),
    "until_close": (b"HTTP/1.0 202 Accepted\r\nContent-Type: text/json\r\n\r\n" + BODY, False),
    "continue_first": (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: %d\r\n\r\n%s"
        % (len(BODY), BODY),
        True,
    ),
    "connection_close": (
        b"HTTP/1.1 202 Accepted\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
        % (len(BODY), BODY),
        False,
    ),
    "bare_newlines": (
        b"HTTP/1.1 202 Accepted\nContent-Length: %d\n\n%s" % (len(BODY), BODY),
        True,
    ),
}


@pytest.mark.parametrize("kind", sorted(ANSWERS))
def test_answers_of_every_framing_are_read(sockdir, kind):
    data, kept = ANSWERS[kind]

    def behave(server, conn, index):
        buf = bytearray()
        while read_request(conn, buf):
            server.got_request()
            conn.sendall(data)
            if not kept:
                conn.close()
                return

    path = os.path.join(sockdir, "ingest.sock")
    srv = RawServer(behave, path)
    try:
        client = gpumem_client.Client(socket=path, timeout=1.0)
        for _ in range(3):
            assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is True, client.last_error
        assert client.last_pid == 7
        assert client._transport.connections_opened == (1 if kept else 3)
    finally:
        srv.close()


@pytest.mark.parametrize(
    "data",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
        b"HTTP/1.1 2O2 Accepted\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 202 Accepted\r\nContent-Length: 99999999\r\n\r\n",
        b"HTTP/1.1 202 Accepted\r\nContent-Length: 5\r\n\r\nab",  # then the server closes
        b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"HTTP/1.1 202 Accepted\r\n" + b"X: y\r\n" * 20000,
    ],
    ids=["not_http", "bad_status", "huge_body", "cut_short", "gzip", "endless_headers"],
)
def test_an_unreadable_answer_is_a_counted_failure(sockdir, data):
    def behave(server, conn, index):
        buf = bytearray()
        if read_request(conn, buf):
            server.got_request()
            conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)

    path = os.path.join(sockdir, "ingest.sock")
    srv = RawServer(behave, path)
    try:
        client = gpumem_client.Client(socket=path, timeout=1.0)
        assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is False
        assert client.stats["failed"] == 1 and client.stats["accepted"] == 0
        assert client._transport._conn is None
    finally:
        srv.close()


# --------------------------------------------------------------------------- what answers say

RATE_LIMITED = {"error": "more than 20 reports/s from pid 1234", "reason": "rate_limited"}


def test_rate_limited_429_sends_nothing_until_retry_after(server, no_frameworks, caplog):
    server.answer(429, RATE_LIMITED, headers={"Retry-After": "1"})
    # a back-off far shorter than Retry-After: the header wins
    client = gpumem_client.Client(socket=server.address, backoff_initial=0.05)
    with caplog.at_level(logging.WARNING, logger="gpumem_client"):
        t0 = time.monotonic()
        assert client.mark("a") is False
        assert client.stats["rejected"] == 1
        assert "rate_limited" in client.last_error
        calls = 0
        while time.monotonic() - t0 < 0.8:
            assert client.mark("b%d" % calls) is False
            assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is False
            calls += 2
            time.sleep(0.02)
    assert len(server.requests) == 1  # nothing sent while waiting, no retry loop
    assert client.stats["dropped"] == calls
    assert client.stats["sent"] == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "rate_limited" in warnings[0] and "1s" in warnings[0]
    assert wait_until(lambda: not client._in_backoff(), timeout=1)
    assert time.monotonic() - t0 >= 1.0
    assert client.mark("c") is True, client.last_error
    # the events of the refused report and those queued meanwhile all arrive
    names = [e["name"] for e in server.bodies[-1]["events"]]
    assert names[0] == "a" and names[-1] == "c" and len(names) == 2 + calls // 2
    assert client.stats["events_dropped"] == 0
    assert client.backoff == 0.0


def test_rate_limited_with_the_thread_running_waits_too(server, fake_torch):
    server.answer(429, RATE_LIMITED, headers={"Retry-After": "1"})
    client = gpumem_client.Client(socket=server.address, backoff_initial=0.05)
    client.start(interval=0.01)
    try:
        assert server.wait_for(lambda reqs: len(reqs) == 1)
        time.sleep(0.7)
        assert len(server.requests) == 1, client.stats
        assert client.stats["dropped"] >= 20
        assert server.wait_for(lambda reqs: len(reqs) >= 3, timeout=2)
        # The server has answered before the client thread counts the answer: wait for it.
        assert wait_until(lambda: client.stats["accepted"] >= 2, timeout=2), client.stats
    finally:
        client.stop()


def test_retry_after_forms():
    assert _retry_after({"retry-after": "2"}) == 2.0
    assert _retry_after({"retry-after": " 0.5 "}) == 0.5
    assert _retry_after({"retry-after": "-3"}) == 0.0
    assert _retry_after({"retry-after": "1e9"}) == RETRY_AFTER_MAX
    assert _retry_after({"retry-after": "nan"}) is None
    assert _retry_after({"retry-after": "soon"}) is None
    assert _retry_after({}) is None
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= _retry_after({"retry-after": date}) <= 30


def test_429_without_retry_after_backs_off_as_before(server):
    server.always(429, RATE_LIMITED)
    client = gpumem_client.Client(socket=server.address, backoff_initial=0.2)
    assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is False
    assert client.backoff == 0.2
    assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is False
    assert len(server.requests) == 1


def test_unknown_gpu_422_warns_once_per_gpu_set_and_keeps_going(server, caplog):
    server.always(
        422, {"error": "GPU-%s is not a GPU of this node" % UUID0, "reason": "unknown_gpu"}
    )
    client = gpumem_client.Client(socket=server.address)
    with caplog.at_level(logging.WARNING, logger="gpumem_client"):
        for _ in range(3):
            assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is False
        assert client.send_allocator_stats(UUID1, torch_stats(1, 2)) is False
        assert client.send_allocator_stats("GPU-" + UUID0, torch_stats(1, 2)) is False
        # an OOM event names its GPU too
        oom = {"kind": "oom", "name": "GPU-" + UUID1, "message": "out of memory"}
        assert client.send_report({"devices": [], "events": [oom]}) is False
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "GPU-" + UUID0 in warnings[0] and "unknown_gpu" in warnings[0]
    assert "GPU-" + UUID1 in warnings[1]
    # no back-off: every report was sent, each counted as rejected
    assert len(server.requests) == 6
    assert client.stats["rejected"] == 6 and client.stats["dropped"] == 0
    assert client.backoff == 0.0 and not client._in_backoff()
    server.always(202)
    assert client.send_allocator_stats(UUID0, torch_stats(1, 2)) is True


def test_accepted_with_unlisted_gpus(server):
    unlisted = ["GPU-" + UUID1]
    server.answer(202, {"accepted": True, "pid": os.getpid(), "unlisted": unlisted})
    client = gpumem_client.Client(socket=server.address)
    assert client.send_allocator_stats(UUID1, torch_stats(1, 2)) is True
    assert client.last_unlisted == unlisted
    assert client.stats["accepted"] == 1 and client.stats["rejected"] == 0
    assert client.send_allocator_stats(UUID1, torch_stats(1, 2)) is True
    assert client.last_unlisted == []
