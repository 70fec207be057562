"""The recorder's trace writing, its view of the job and its command line, without a GPU. The
recorder end to end (stand-in NVML, real signals, replayed traces) is tested from the exporter's
repository (tests/recorder.rs); on a GPU, the recordings of data/corpus came from it."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from gpumem_client import record


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f]


def write(path, objs):
    with open(path, "w") as f:
        for o in objs:
            f.write(json.dumps(o) + "\n")


def test_a_trace_is_valid_while_written_and_tidied_at_the_end(tmp_path):
    out = tmp_path / "run.jsonl"
    trace = record._TraceFile(
        str(out),
        record._header(7, 1000.0, 0.5, {"uuid": "GPU-x", "name": "H100", "index": 0}, "s", None),
    )
    trace.append([
        {"kind": "sample", "t": 1.0, "nvml": {"total": 100, "used": 60, "free": 40, "procs": [{"pid": 7, "used": 50}]}},
        {"kind": "sample", "t": 0.5, "torch": {"allocated_bytes.all.current": 1, "reserved_bytes.all.current": 2}},
    ])
    # Before the end: the header first, every line flushed, the header saying it is cut short.
    got = lines(out)
    assert got[0]["kind"] == "header" and got[0]["complete"] is False and got[0]["pid"] == 7
    assert len(got) == 3
    trace.append([{"kind": "event", "t": 1.5, "name": "oom", "request_bytes": 786, "device_free": 670}])
    # A line cut short by a kill is skipped, not fatal.
    with open(out, "a") as f:
        f.write('{"kind": "sam')
    h = trace.finish(None, {"torch": "2.11.0", "alloc_conf": None, "exit_code": 1})
    got = lines(out)
    assert got[0] == h
    assert h["truth"] == "oom" and h["oom_t"] == 1.5, "an OOM event makes the truth"
    assert h["torch"] == "2.11.0" and h["total_memory"] == 100 and h["gpu_uuid"] == "GPU-x"
    assert h["complete"] is True and h["exit_code"] == 1
    assert "alloc_conf" not in h, "unknown fields are left out, not null"
    assert [o["t"] for o in got[1:]] == [0.5, 1.0, 1.5]


def test_a_healthy_run_keeps_the_truth_it_was_given(tmp_path):
    out = tmp_path / "run.jsonl"
    trace = record._TraceFile(str(out), record._header(1, 0.0, 1.0, {}, None, "healthy"))
    trace.append([{"kind": "sample", "t": 0.0, "nvml": {"total": 100, "used": 10, "free": 90, "procs": []}}])
    h = trace.finish("healthy", {})
    assert h["truth"] == "healthy" and "oom_t" not in h


def test_a_part_is_read_in_whole_lines_as_it_grows(tmp_path):
    part = tmp_path / "torch-9.jsonl"
    part.write_text('{"kind":"sample","t":0.5}\n{"kind":"sam')
    child = record._Child(str(part))
    assert child.read() == [{"kind": "sample", "t": 0.5}]
    with open(part, "a") as f:
        f.write('ple","t":1.0}\n')
    assert child.read() == [{"kind": "sample", "t": 1.0}]
    assert child.read() == []


def test_the_job_is_its_leader_its_descendants_and_its_process_group():
    # A leader in a group of its own whose child starts a grandchild.
    leader = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c',"
         " 'import subprocess, sys, time; subprocess.Popen([\"sleep\", \"30\"]); time.sleep(30)']);"
         " time.sleep(30)"],
        start_new_session=True,
    )
    try:
        found = set()
        deadline = time.monotonic() + 30
        while len(found) < 3 and time.monotonic() < deadline:
            found = record.job_pids(leader.pid)
            time.sleep(0.05)
        assert leader.pid in found and len(found) == 3
        assert os.getpid() not in found
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()


def test_second_processes_get_their_own_file_names():
    assert record._output_name("runs/a.jsonl", 42, True) == "runs/a.jsonl"
    assert record._output_name("runs/a.jsonl", 42, False) == "runs/a-42.jsonl"
    assert record._output_name("runs/a", 42, False) == "runs/a-42.jsonl"
    # The same process on a second GPU.
    assert record._output_name("runs/a.jsonl", 42, False, 1) == "runs/a-42-gpu1.jsonl"


def test_the_command_line_wants_a_command(capsys):
    with pytest.raises(SystemExit) as e:
        record.main(["-o", "x.jsonl"])
    assert e.value.code == 2
    assert "no command" in capsys.readouterr().err


def test_without_nvml_the_wrapper_says_so(tmp_path, monkeypatch, capsys):
    from gpumem_client import _nvml

    def no_nvml(index):
        raise _nvml.NvmlError("libnvidia-ml.so.1 not found")

    monkeypatch.setattr(_nvml, "open_device", no_nvml)
    code = record.main(["-o", str(tmp_path / "r.jsonl"), "--", "true"])
    assert code == 2
    assert "libnvidia-ml.so.1" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "r.jsonl")


def test_events_are_a_no_op_when_nothing_records():
    record.event("step", step=1)


def test_the_in_process_form_writes_as_it_goes_and_tidies_at_stop(tmp_path, monkeypatch, fake_torch):
    from gpumem_client import _nvml
    from conftest import UUID0, wait_until

    def no_nvml(index):
        raise _nvml.NvmlError("libnvidia-ml.so.1 not found")

    monkeypatch.setattr(_nvml, "open_device", no_nvml)
    out = tmp_path / "run.jsonl"
    assert record.start(str(out), interval=0.02, scenario="inside")
    try:
        # Replayable while running: the header, then the allocator's samples.
        assert wait_until(lambda: len(lines(out)) >= 4)
        got = lines(out)
        assert got[0]["kind"] == "header" and got[0]["complete"] is False
        assert all("torch" in l for l in got[1:] if l["kind"] == "sample")
        assert all(l["kind"] != "meta" for l in got), "the format replay reads, nothing else"
        record.event("epoch", n=3)
    finally:
        assert record.stop() == str(out)
    got = lines(out)
    h = got[0]
    assert h["complete"] is True and h["scenario"] == "inside"
    assert h["gpu_uuid"] == "GPU-" + UUID0, "the device the allocator samples described"
    assert any(l.get("name") == "epoch" and l.get("n") == 3 for l in got)
    assert got[-1]["name"] == "end"


def test_a_sampler_that_falls_behind_skips_ticks_rather_than_writing_a_burst():
    # A job's thread can hold the GIL for seconds (a large copy to pinned host memory): the
    # sampler's thread then wakes late. A burst of catch-up samples a fraction of a millisecond
    # apart repeats a time once rounded, and a replay refuses a trace whose times repeat.
    # The schedule is read on a clock of our own: a test that slept would time the machine.
    from gpumem_client._sampler import next_tick

    interval = 1.0
    # On time: every tick one interval after the last one due, however late within it.
    assert next_tick(10.0, 10.3, interval) == 11.0
    assert next_tick(10.0, 10.999, interval) == 11.0
    # Woken ten ticks late: the next sample a whole interval after now, not the ten missed.
    due, now, samples = 10.0, 20.5, []
    for _ in range(5):
        due = next_tick(due, now, interval)
        samples.append(due)
        now = due  # woken exactly on time from here on
    assert samples == [21.5, 22.5, 23.5, 24.5, 25.5], samples
    # Due exactly now is a tick missed, not one to take twice.
    assert next_tick(10.0, 11.0, interval) == 12.0


def test_a_sampler_whose_sample_stalls_writes_times_that_never_repeat(tmp_path, fake_torch):
    from conftest import wait_until
    from gpumem_client import _sampler

    out = _sampler.LineWriter(open(tmp_path / "t.jsonl", "w"), time.time())
    s = _sampler.AllocatorSampler(out, interval=0.02, uuid=None)
    stats = s._collector.stats
    calls = [0]

    def stalled(cuda, index):
        calls[0] += 1
        if calls[0] == 3:
            time.sleep(0.2)  # ten ticks missed
        return stats(cuda, index)

    s._collector.stats = stalled
    s.start()
    # Well past the stall, however slow the machine; a sampler that stopped sampling fails.
    assert wait_until(lambda: calls[0] >= 10, timeout=30), calls
    s.stop()
    out.close()
    t = [l["t"] for l in lines(tmp_path / "t.jsonl") if l["kind"] == "sample"]
    assert len(t) >= 4, t
    assert all(a < b for a, b in zip(t, t[1:])), "a time repeats: %s" % t
