"""The recorder's trace writing and command line, without a GPU (the recording itself ran on
an H100 to make tests/traces/corpus in the exporter's repository)."""

import json
import os

import pytest

from gpumem_client import record


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f]


def write(path, objs):
    with open(path, "w") as f:
        for o in objs:
            f.write(json.dumps(o) + "\n")


def test_a_trace_merges_nvml_and_allocator_parts_by_time(tmp_path):
    nvml = tmp_path / "nvml.jsonl"
    torch = tmp_path / "torch-7.jsonl"
    write(nvml, [
        {"kind": "sample", "t": 0.0, "nvml": {"total": 100, "used": 10, "free": 90, "procs": []}},
        {"kind": "sample", "t": 1.0, "nvml": {"total": 100, "used": 60, "free": 40, "procs": [{"pid": 7, "used": 50}]}},
    ])
    write(torch, [
        {"kind": "meta", "t": 0.5, "torch": "2.11.0", "uuid": "GPU-x", "alloc_conf": None},
        {"kind": "sample", "t": 0.5, "torch": {"allocated_bytes.all.current": 1, "reserved_bytes.all.current": 2}},
        {"kind": "event", "t": 1.5, "name": "oom", "request_bytes": 786, "device_free": 670, "error": "boom"},
    ])
    # A line cut short by a kill is skipped, not fatal.
    with open(torch, "a") as f:
        f.write('{"kind": "sam')
    out = tmp_path / "run.jsonl"
    h = record.write_trace(str(out), [str(nvml), str(torch)], pid=7, t0=1000.0, interval=0.5,
                           gpu={"uuid": "GPU-x", "name": "H100", "index": 0}, truth=None, scenario="s")
    got = lines(out)
    assert got[0] == h
    assert h["kind"] == "header" and h["pid"] == 7 and h["t0_unix"] == 1000.0
    assert h["truth"] == "oom" and h["oom_t"] == 1.5, "an OOM event makes the truth"
    assert h["torch"] == "2.11.0" and h["total_memory"] == 100 and h["gpu_uuid"] == "GPU-x"
    assert "alloc_conf" not in h, "unknown fields are left out, not null"
    assert [o["t"] for o in got[1:]] == [0.0, 0.5, 1.0, 1.5]
    assert all(o["kind"] != "meta" for o in got)


def test_a_healthy_run_keeps_the_truth_it_was_given(tmp_path):
    nvml = tmp_path / "nvml.jsonl"
    write(nvml, [{"kind": "sample", "t": 0.0, "nvml": {"total": 100, "used": 10, "free": 90, "procs": []}}])
    out = tmp_path / "run.jsonl"
    h = record.write_trace(str(out), [str(nvml)], pid=1, t0=0.0, interval=1.0, gpu={},
                           truth="healthy", scenario=None)
    assert h["truth"] == "healthy" and "oom_t" not in h


def test_second_processes_get_their_own_file_names():
    assert record._output_name("runs/a.jsonl", 42, True) == "runs/a.jsonl"
    assert record._output_name("runs/a.jsonl", 42, False) == "runs/a-42.jsonl"
    assert record._output_name("runs/a", 42, False) == "runs/a-42.jsonl"


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
