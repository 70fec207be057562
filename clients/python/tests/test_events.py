"""Phases and marks."""

import logging
import time

import pytest

import gpumem_client
from conftest import validate_report


def test_mark_without_thread_is_sent_at_once(server, no_frameworks):
    client = gpumem_client.Client(socket=server.address)
    assert client.mark("模型创建") is True  # the seeds' record("...") names
    assert client.mark("前向传播", "loss=0.1234") is True
    b1, b2 = server.bodies
    for b in (b1, b2):
        validate_report(b)
        assert b["devices"] == []
        assert "phase" not in b  # no phase was ever used
    assert b1["events"] == [{"kind": "mark", "name": "模型创建"}]
    assert b2["events"] == [{"kind": "mark", "name": "前向传播", "message": "loss=0.1234"}]


def test_phases_nest_and_are_queued_until_the_next_report(server, no_frameworks):
    client = gpumem_client.Client(socket=server.address)
    with client.phase("forward"):
        assert client.current_phase == "forward"
        with client.phase("attention"):
            assert client.current_phase == "attention"
        assert client.current_phase == "forward"
        assert server.requests == []  # phases alone are not sent at once
        client.mark("loss", "1.5")
    assert client.current_phase is None
    (body,) = server.bodies
    validate_report(body)
    assert body["phase"] == "forward"
    assert body["events"] == [
        {"kind": "phase", "name": "forward"},
        {"kind": "phase", "name": "attention"},
        {"kind": "mark", "name": "loss", "message": "1.5"},
    ]
    # the next report says that no phase is current, with no new events
    assert client.flush()
    body = server.bodies[1]
    validate_report(body)
    assert body["phase"] is None and "events" not in body


def test_enter_phase_replaces_the_current_phase(server, no_frameworks):
    client = gpumem_client.Client(socket=server.address)
    client.enter_phase("forward")
    client.enter_phase("backward")
    with client.phase("allreduce"):
        client.flush()
    assert client.current_phase == "backward"
    client.flush()
    b1, b2 = server.bodies
    assert b1["phase"] == "allreduce"
    assert [e["name"] for e in b1["events"]] == ["forward", "backward", "allreduce"]
    assert b2["phase"] == "backward"


def test_exceptions_inside_a_phase_propagate_and_the_phase_ends(server, no_frameworks):
    client = gpumem_client.Client(socket=server.address)
    with pytest.raises(ZeroDivisionError):
        with client.phase("forward"):
            1 / 0
    assert client.current_phase is None


def test_phase_as_decorator(server, no_frameworks):
    client = gpumem_client.Client(socket=server.address)

    @client.phase("optimizer")
    def step():
        return client.current_phase

    assert step() == "optimizer"
    assert client.current_phase is None


def test_names_are_cleaned_and_cut(server, no_frameworks):
    client = gpumem_client.Client(socket=server.address)
    client.mark("a\nb\x00c" + "x" * 100, "m" * 5000)
    with client.phase(123):
        client.flush()
    client.mark("\udc80bad surrogate")
    bodies = server.bodies
    for b in bodies:
        validate_report(b)
    ev = bodies[0]["events"][0]
    assert ev["name"] == ("abc" + "x" * 100)[:64]
    assert ev["message"] == "m" * 1024
    assert bodies[1]["phase"] == "123"
    assert bodies[2]["events"][0]["name"] == "?bad surrogate"


def test_module_functions_use_the_started_client(server, no_frameworks):
    # without a started client they do nothing and raise nothing
    assert gpumem_client.mark("nobody listens") is False
    with gpumem_client.phase("nothing"):
        pass
    gpumem_client.enter_phase("nothing")
    assert gpumem_client.report_model(object()) is False
    assert gpumem_client.get_client() is None

    client = gpumem_client.start(interval=0.01, socket=server.address)
    assert gpumem_client.get_client() is client
    with gpumem_client.phase("forward"):
        gpumem_client.mark("step", "1")
        assert server.wait_for(lambda reqs: len(reqs) >= 1)
    gpumem_client.stop()
    assert not client.running
    events = [e for b in server.bodies for e in b.get("events", [])]
    assert events == [
        {"kind": "phase", "name": "forward"},
        {"kind": "mark", "name": "step", "message": "1"},
    ]
    assert server.bodies[0]["phase"] == "forward"


def test_stop_sends_what_is_queued(server, no_frameworks):
    client = gpumem_client.start(interval=60, socket=server.address)
    gpumem_client.mark("done")
    gpumem_client.stop()
    assert [e["name"] for b in server.bodies for e in b.get("events", [])] == ["done"]
    # start() after stop() starts a new client
    again = gpumem_client.start(interval=60, socket=server.address)
    assert again is not client and again.running


def test_a_forked_child_reports_on_its_own_connection(server, no_frameworks):
    import os
    import warnings

    client = gpumem_client.start(interval=0.01, socket=server.address)
    client.mark("parent")
    assert server.wait_for(lambda reqs: len(reqs) >= 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            # no thread in the child: the mark is sent at once, on a new connection
            ok = not client.running and gpumem_client.mark("child")
            code = 0 if ok else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    child = [r for r in server.requests if r.peer_pid == pid]
    assert [e["name"] for r in child for e in r.json.get("events", [])] == ["child"]
    assert client.running  # the parent goes on


def test_without_an_allocator_the_client_says_why_it_sends_no_memory(server, no_frameworks, monkeypatch, caplog):
    # The quick start without PyTorch: one report for the phase, then nothing, and the log
    # says why (once), after NOTHING_TO_REPORT_AFTER_S.
    from gpumem_client import client as client_module

    monkeypatch.setattr(client_module, "NOTHING_TO_REPORT_AFTER_S", 0.05)
    with caplog.at_level(logging.WARNING, logger="gpumem_client"):
        client = gpumem_client.start(interval=0.01, socket=server.address)
        with gpumem_client.phase("forward"):
            pass
        assert server.wait_for(lambda reqs: len(reqs) >= 1)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(
            "no allocator statistics" in r.getMessage() for r in caplog.records
        ):
            time.sleep(0.01)
        time.sleep(0.1)
        gpumem_client.stop()
    assert not client.running
    said = [r.getMessage() for r in caplog.records if "no allocator statistics" in r.getMessage()]
    assert len(said) == 1, said
    assert "neither PyTorch nor JAX is imported" in said[0]
    assert all(b["devices"] == [] for b in server.bodies)
    assert len(server.bodies) == 1, server.bodies
