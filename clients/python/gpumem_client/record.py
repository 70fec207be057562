"""Record a run's GPU memory into traces that ``gpumem-exporter replay`` reads.

Two forms, one file format (``data/traces/README.md`` in the exporter's repository):

* around a command, from the outside::

      python -m gpumem_client record -o run.jsonl -- torchrun --nproc-per-node 2 train.py

  The recorder samples NVML on every GPU; each Python process of the command samples its own
  caching allocator (a ``sitecustomize`` on ``PYTHONPATH`` starts a thread once CUDA is
  initialised) and catches its own out-of-memory error. A process that is not Python, or
  that runs with ``python -I``, is recorded from NVML alone. One trace is written per process
  and GPU it used: ``run.jsonl`` for the first, ``run-<pid>.jsonl`` for the others, each
  naming its GPU; replay them together.

  The traces are written as the run goes: at any moment the output holds a valid trace up to
  the last sample, so a recorder killed with SIGKILL still leaves one. SIGTERM, SIGINT and
  SIGHUP are passed to the command's whole process group; the recorder waits ``--grace``
  seconds for it, then kills the group, finishes the traces and exits with the command's
  status. The command never outlives the recorder.

* inside a script::

      from gpumem_client import record
      record.start("run.jsonl", interval=0.5)
      ...
      record.stop()

A user attaches the files to a bug report; a recording whose header says ``"truth": "oom"``
ended in a real ``torch.OutOfMemoryError`` and serves as ground truth for the forecast.
"""

import argparse
import atexit
import collections
import ctypes
import glob
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Set, Tuple

from ._sampler import AllocatorSampler as _AllocatorSampler, LineWriter as _LineWriter

log = logging.getLogger("gpumem_client")

ENV_DIR = "GPUMEM_RECORD_DIR"
ENV_T0 = "GPUMEM_RECORD_T0"
ENV_INTERVAL = "GPUMEM_RECORD_INTERVAL"
ENV_UUID = "GPUMEM_RECORD_UUID"
# A process started with this set to 1 is not recorded from inside (an "NVML-only" process);
# set to "stats", only its events (its out-of-memory error) are.
ENV_SKIP = "GPUMEM_RECORD_SKIP"


# NVML samples kept per GPU for a process that shows up later: its trace starts with what the
# GPU looked like before it came (30 min at the default interval).
BACKLOG_SAMPLES = 3600

PR_SET_PDEATHSIG = 1


# ---------------------------------------------------------------------------- trace files


def _read_lines(path: str) -> List[Dict[str, Any]]:
    out = []
    with open(path) as f:
        for raw in f:
            raw = raw.strip()
            if not raw:
                continue
            try:
                out.append(json.loads(raw))
            except ValueError:
                continue  # a line cut short by a kill
    return out


class _TraceFile:
    """One trace, written as it goes: the header first, then lines as they come, flushed, so
    the file replays at any moment. ``finish`` tidies it (lines in time order, what was learnt
    at the end in the header) through a rename: the tidy copy is never the only one."""

    def __init__(self, path: str, header: Dict[str, Any]) -> None:
        self.path = path
        self.header = {k: v for k, v in header.items() if v is not None}
        self._stream = open(path, "w")
        self._write(self.header)

    def _write(self, obj: Dict[str, Any]) -> None:
        self._stream.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def append(self, objs: List[Dict[str, Any]]) -> None:
        for obj in objs:
            self._write(obj)
        self._stream.flush()

    def finish(self, truth: Optional[str], extra: Dict[str, Any]) -> Dict[str, Any]:
        self._stream.close()
        lines = [o for o in _read_lines(self.path) if o.get("kind") != "header"]
        lines.sort(key=lambda o: o.get("t", 0.0))
        oom = [o for o in lines if o.get("kind") == "event" and o.get("name") == "oom"]
        header = dict(self.header)
        header.update({k: v for k, v in extra.items() if v is not None})
        header["truth"] = "oom" if oom else truth
        if oom:
            header["oom_t"] = oom[0]["t"]
        if header.get("total_memory") is None:
            header["total_memory"] = next((o["nvml"]["total"] for o in lines if "nvml" in o), None)
        header["complete"] = True
        header = {k: v for k, v in header.items() if v is not None}
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            for obj in [header] + lines:
                f.write(json.dumps(obj, separators=(",", ":")) + "\n")
        os.replace(tmp, self.path)
        self.header = header
        return header


def _header(
    pid: int, t0: float, interval: float, gpu: Dict[str, Any], scenario: Optional[str], truth: Optional[str]
) -> Dict[str, Any]:
    return {
        "kind": "header",
        "scenario": scenario,
        "gpu": gpu.get("name"),
        "gpu_index": gpu.get("index"),
        "gpu_uuid": gpu.get("uuid"),
        "total_memory": gpu.get("total"),
        "pid": pid,
        "period_s": interval,
        "t0_unix": t0,
        "truth": truth,
        "recorder": "gpumem_client.record",
        # Set when the recorder tidied the trace at the end; absent, it was cut short.
        "complete": False,
    }


# ---------------------------------------------------------------------------- in-process form

_active = None  # type: Optional[Dict[str, Any]]


def start(
    path: str,
    interval: float = 0.5,
    gpu: Optional[int] = None,
    truth: Optional[str] = None,
    scenario: Optional[str] = None,
) -> bool:
    """Record this process into ``path`` until ``stop()`` (or exit). NVML is read for GPU
    ``gpu`` (default: the first of ``CUDA_VISIBLE_DEVICES``, else 0) when the driver's library
    is there; without it the trace holds the allocator's side only. The trace is written as
    it goes. Returns False if a recording is already running."""
    global _active
    if _active is not None:
        return False
    from . import _nvml

    device = None
    try:
        device = _nvml.open_device(_default_gpu() if gpu is None else gpu)
    except Exception as e:
        log.warning("gpumem record: no NVML (%s); recording the allocator only", e)
    t0 = time.time()
    info = {"uuid": device.uuid, "name": device.name, "index": device.index} if device else {}
    trace = _TraceFile(path, _header(os.getpid(), t0, interval, info, scenario, truth))
    meta = {}  # type: Dict[str, Any]
    # The sampler and user events write through the trace's own stream, one line at a time.
    out = _LineWriter(trace._stream, t0)
    sampler = _AllocatorSampler(
        out, interval, device.uuid if device else None, device, on_meta=meta.update
    )
    _active = {"out": out, "sampler": sampler, "trace": trace, "truth": truth, "meta": meta}
    sampler.start()
    atexit.register(stop)
    return True


def event(name: str, **fields: Any) -> None:
    """Write an event (``model_ready``, ``step``, ``empty_cache``...) into the running
    recording, in either form; a no-op when nothing records this process."""
    target = _active["out"] if _active is not None else _child_out
    if target is None:
        return
    line = {"kind": "event", "t": target.now(), "name": str(name)}  # type: Dict[str, Any]
    line.update(fields)
    target.write(line)


def stop() -> Optional[str]:
    """Finish the in-process recording and tidy the trace; returns its path."""
    global _active
    state = _active
    if state is None:
        return None
    _active = None
    state["sampler"].stop()
    state["out"].write({"kind": "event", "t": state["out"].now(), "name": "end"})
    # Closed under the writer's lock: an event from another thread now is dropped, not torn.
    state["out"].close()
    meta = state["meta"]
    trace = state["trace"]
    if "gpu_uuid" not in trace.header and meta.get("uuid"):
        trace.header["gpu_uuid"] = meta["uuid"]
    trace.finish(state["truth"], {"torch": meta.get("torch"), "alloc_conf": meta.get("alloc_conf")})
    return trace.path


# ---------------------------------------------------------------------------- child bootstrap

_child_out = None  # type: Optional[_LineWriter]


def _child_bootstrap() -> None:
    """Run from the recorder's ``sitecustomize`` in every Python process of the command."""
    global _child_out
    directory = os.environ.get(ENV_DIR)
    if not directory or os.environ.get(ENV_SKIP) == "1" or _child_out is not None:
        return
    try:
        t0 = float(os.environ[ENV_T0])
        interval = float(os.environ.get(ENV_INTERVAL, "0.5"))
        stream = open(os.path.join(directory, "torch-%d.jsonl" % os.getpid()), "w")
    except Exception as e:
        log.debug("gpumem record: child not recorded: %s", e)
        return
    _child_out = _LineWriter(stream, t0)
    sampler = _AllocatorSampler(
        _child_out,
        interval,
        os.environ.get(ENV_UUID) or None,
        stats=os.environ.get(ENV_SKIP) != "stats",
    )
    sampler.start()

    def finish() -> None:
        sampler.stop()
        _child_out.close()

    atexit.register(finish)


_SITECUSTOMIZE = """\
# Written by gpumem_client.record: records this process's allocator, then hands over to any
# other sitecustomize on the path.
import importlib, os, sys
_here = os.path.dirname(os.path.abspath(__file__))
try:
    from gpumem_client import record as _gpumem_record
    _gpumem_record._child_bootstrap()
except Exception:
    pass
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules["sitecustomize"]
try:
    importlib.import_module("sitecustomize")
except ImportError:
    pass
"""

# Runs beside the recorder in a session of its own. It reads its stdin until the recorder
# closes it: a recorder that says "done" first ended well; end of file alone means the
# recorder was killed, and then the job must not outlive it.
_WATCHDOG = """\
import os, shutil, signal, sys, time
pgid, grace, parts, output = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
said = sys.stdin.buffer.read()
if said == b"done":
    sys.exit(0)
def alive():
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False
if alive():
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive():
        os.killpg(pgid, signal.SIGKILL)
if parts:
    shutil.rmtree(parts, ignore_errors=True)
sys.stderr.write("gpumem record: the recorder was killed; its job (process group %d) was stopped;"
                 " %s holds the run up to the recorder's last sample\\n" % (pgid, output))
"""


# ---------------------------------------------------------------------------- the recorder


def _default_gpu() -> int:
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def _output_name(base: str, pid: int, first: bool, gpu: Optional[int] = None) -> str:
    if first:
        return base
    stem, ext = os.path.splitext(base)
    suffix = "-%d" % pid if gpu is None else "-%d-gpu%d" % (pid, gpu)
    return "%s%s%s" % (stem, suffix, ext or ".jsonl")


def _proc_stat(pid: int) -> Optional[Tuple[int, int]]:
    """(parent pid, process group) of ``pid`` from /proc, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[1]), int(fields[2])
    except (OSError, IndexError, ValueError):
        return None


def job_pids(root: int) -> Set[int]:
    """``root`` and every process descended from it or left in its process group (a worker
    whose parent died is re-parented, but keeps the group)."""
    found = {root}
    parents = {}  # type: Dict[int, int]
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = _proc_stat(int(name))
        if st is None:
            continue
        parents[int(name)] = st[0]
        if st[1] == root:
            found.add(int(name))
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                changed = True
    return found


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False


def _job_preexec(recorder: int) -> Callable[[], None]:
    libc = ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:
        os.setpgid(0, 0)
        # The job's leader hears of the recorder's death at once, whatever killed it.
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != recorder:
            os._exit(1)

    return preexec


class _Child:
    """A Python process's part file, read as it grows."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.rest = ""
        self.uuid = None  # type: Optional[str]
        self.meta = {}  # type: Dict[str, Any]
        self.pending = []  # type: List[Dict[str, Any]]

    def read(self) -> List[Dict[str, Any]]:
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                text = f.read()
                self.offset = f.tell()
        except OSError:
            return []
        text = self.rest + text
        whole, _, self.rest = text.rpartition("\n")
        out = []
        for raw in whole.split("\n"):
            if raw.strip():
                try:
                    out.append(json.loads(raw))
                except ValueError:
                    pass
        return out


class Recording:
    """The recorder around one command: NVML on every GPU, the Python processes' parts, the
    traces, the signals and the job's end."""

    def __init__(self, args: argparse.Namespace, devices: List[Any]) -> None:
        self.args = args
        self.devices = devices
        self.t0 = time.time()
        base = os.path.abspath(args.output)
        self.parts = os.path.join(os.path.dirname(base), "." + os.path.basename(base) + ".parts")
        self.backlog = {d.uuid: collections.deque(maxlen=BACKLOG_SAMPLES) for d in devices}  # type: Dict[str, Deque[Dict[str, Any]]]
        self.traces = {}  # type: Dict[Tuple[int, str], _TraceFile]
        self.children = {}  # type: Dict[int, _Child]
        self.info = {
            d.uuid: {"uuid": d.uuid, "name": d.name, "index": d.index} for d in devices
        }  # type: Dict[str, Dict[str, Any]]
        self.failed_nvml = set()  # type: Set[str]
        self.job = None  # type: Optional[subprocess.Popen]
        self.stop_signal = None  # type: Optional[int]
        self.kill_at = None  # type: Optional[float]
        self.killed = False

    def now(self) -> float:
        return round(time.time() - self.t0, 4)

    # -- the job

    def launch(self) -> None:
        shutil.rmtree(self.parts, ignore_errors=True)
        os.makedirs(os.path.join(self.parts, "site"))
        with open(os.path.join(self.parts, "site", "sitecustomize.py"), "w") as f:
            f.write(_SITECUSTOMIZE)
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(self.parts, "site"), package_root]
            + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        env[ENV_DIR] = self.parts
        env[ENV_T0] = repr(self.t0)
        env[ENV_INTERVAL] = str(self.args.interval)
        if self.args.gpu is not None:
            env[ENV_UUID] = self.devices[0].uuid
        self.job = subprocess.Popen(self.args.command, env=env, preexec_fn=_job_preexec(os.getpid()))
        # A watchdog in its own session: if this recorder is killed outright, it stops the job.
        self.watchdog = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WATCHDOG,
                str(self.job.pid),
                str(self.args.grace),
                "" if self.args.keep_parts else self.parts,
                self.args.output,
            ],
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        assert self.job is not None
        name = signal.Signals(signum).name
        if self.stop_signal == signal.SIGINT and signum == signal.SIGINT:
            # Ctrl-C twice: no more waiting.
            self._kill("a second SIGINT")
            return
        first = self.stop_signal is None
        if first:
            self.stop_signal = signum
            self.kill_at = time.monotonic() + self.args.grace
        try:
            os.killpg(self.job.pid, signum)
        except OSError:
            pass
        if first:
            sys.stderr.write(
                "gpumem record: %s passed to the job (process group %d); SIGKILL after %g s\n"
                % (name, self.job.pid, self.args.grace)
            )

    def _kill(self, why: str) -> None:
        assert self.job is not None
        if _group_alive(self.job.pid):
            sys.stderr.write("gpumem record: %s: killing the job's process group %d\n" % (why, self.job.pid))
            try:
                os.killpg(self.job.pid, signal.SIGKILL)
            except OSError:
                pass
        self.killed = True

    # -- sampling

    def tick(self) -> None:
        assert self.job is not None
        t = self.now()
        samples = {}  # type: Dict[str, Dict[str, Any]]
        for d in self.devices:
            try:
                nv = d.memory()
                nv["procs"] = d.processes()
            except Exception as e:
                if d.uuid not in self.failed_nvml:
                    self.failed_nvml.add(d.uuid)
                    log.warning("gpumem record: NVML on GPU %d failed: %s", d.index, e)
                continue
            self.info[d.uuid].setdefault("total", nv.get("total"))
            line = {"kind": "sample", "t": t, "nvml": nv}
            samples[d.uuid] = line
            self.backlog[d.uuid].append(line)
        for (pid, uuid), trace in self.traces.items():
            if uuid in samples:
                trace.append([samples[uuid]])
        pids = job_pids(self.job.pid)
        seen = sorted(
            (self.info[uuid]["index"], p["pid"], uuid)
            for uuid, line in samples.items()
            for p in line["nvml"].get("procs", [])
            if p["pid"] in pids
        )
        for _, pid, uuid in seen:
            self._trace(pid, uuid)
        self._read_children()

    def _trace(self, pid: int, uuid: str) -> _TraceFile:
        key = (pid, uuid)
        if key not in self.traces:
            info = self.info.get(uuid) or {"uuid": uuid}
            first = not self.traces
            other_gpu = any(p == pid for p, _ in self.traces)
            path = _output_name(self.args.output, pid, first, info.get("index") if other_gpu else None)
            trace = _TraceFile(
                path, _header(pid, self.t0, self.args.interval, info, self.args.scenario, self.args.truth)
            )
            trace.header["command"] = self.args.command
            trace.append(list(self.backlog.get(uuid, ())))
            self.traces[key] = trace
        return self.traces[key]

    def _read_children(self) -> None:
        for path in glob.glob(os.path.join(self.parts, "torch-*.jsonl")):
            pid = int(os.path.basename(path)[6:-6])
            child = self.children.setdefault(pid, _Child(path))
            for obj in child.read():
                if obj.get("kind") == "meta":
                    child.meta = obj
                    if obj.get("uuid"):
                        child.uuid = obj["uuid"]
                    continue
                # An event that names its device (an OOM) goes to that device's trace.
                uuid = obj.pop("uuid", None) or child.uuid
                if uuid is None:
                    child.pending.append(obj)
                    continue
                if child.pending and uuid == child.uuid:
                    obj_list = child.pending + [obj]
                    child.pending = []
                else:
                    obj_list = [obj]
                self._trace(pid, uuid).append(obj_list)

    # -- the run

    def run(self) -> int:
        self.launch()
        assert self.job is not None
        next_t = time.monotonic()
        while True:
            try:
                self.tick()
            except Exception as e:  # a recorder fault must not lose the job's end
                log.warning("gpumem record: sample failed: %s", e)
            if self.job.poll() is not None:
                break
            if self.kill_at is not None and time.monotonic() >= self.kill_at and not self.killed:
                self._kill("the job outlived the grace period")
            next_t += self.args.interval
            time.sleep(max(0.0, next_t - time.monotonic()))
        code = self.job.returncode
        # Workers left behind by the job's leader (its group, or its descendants) go with it.
        if _group_alive(self.job.pid):
            try:
                os.killpg(self.job.pid, signal.SIGTERM)
            except OSError:
                pass
            deadline = time.monotonic() + self.args.grace
            while _group_alive(self.job.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            self._kill("workers outlived the job's leader")
        self.tick()
        return self.finish(code)

    def finish(self, code: int) -> int:
        assert self.job is not None
        status = code if code >= 0 else 128 - code
        end = {"kind": "event", "t": self.now(), "name": "end", "exit_code": status}
        if self.stop_signal is not None:
            end["signal"] = signal.Signals(self.stop_signal).name
        # Lines a process wrote before saying which GPU it used: its only trace gets them.
        for pid, child in self.children.items():
            mine = [tr for (p, _), tr in self.traces.items() if p == pid]
            if child.pending and len(mine) == 1:
                mine[0].append(child.pending)
        if not self.traces:
            uuid = self.devices[0].uuid
            sys.stderr.write(
                "gpumem record: the job never showed up on a GPU; writing what NVML saw on GPU %d\n"
                % self.devices[0].index
            )
            self._trace(self.job.pid, uuid)
        extra = {"exit_code": status}
        if self.stop_signal is not None:
            extra["stopped_by"] = signal.Signals(self.stop_signal).name
        for (pid, uuid), trace in self.traces.items():
            child = self.children.get(pid)
            meta = child.meta if child else {}
            trace.append([end])
            h = trace.finish(
                self.args.truth,
                dict(extra, torch=meta.get("torch"), alloc_conf=meta.get("alloc_conf")),
            )
            sys.stderr.write(
                "gpumem record: %s (pid %s, GPU %s, truth %s%s)\n"
                % (
                    trace.path,
                    h["pid"],
                    h.get("gpu_index", "?"),
                    h.get("truth", "unset"),
                    ", oom at %.1f s" % h["oom_t"] if "oom_t" in h else "",
                )
            )
        paths = " ".join(t.path for t in self.traces.values())
        sys.stderr.write("gpumem record: verdict: gpumem-exporter replay %s\n" % paths)
        try:
            assert self.watchdog.stdin is not None
            self.watchdog.stdin.write(b"done")
            self.watchdog.stdin.close()
            self.watchdog.wait(timeout=5)
        except Exception:
            pass
        if self.args.keep_parts:
            sys.stderr.write("gpumem record: raw parts kept in %s\n" % self.parts)
        else:
            shutil.rmtree(self.parts, ignore_errors=True)
        return status


def run_command(args: argparse.Namespace) -> int:
    from . import _nvml

    try:
        if args.gpu is not None:
            devices = [_nvml.open_device(args.gpu)]
        else:
            devices = [_nvml.open_device(i) for i in range(_nvml.device_count())]
        if not devices:
            raise _nvml.NvmlError("NVML sees no GPU")
    except Exception as e:
        print("gpumem record: %s" % e, file=sys.stderr)
        return 2
    return Recording(args, devices).run()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", required=True, help="trace file to write (JSON lines)")
    p.add_argument("--interval", type=float, default=0.5, help="seconds between samples (0.5)")
    p.add_argument(
        "--gpu", type=int, default=None, help="NVML index of the one GPU to record (default: every GPU the job uses)"
    )
    p.add_argument(
        "--grace",
        type=float,
        default=10.0,
        help="seconds the job has to stop after a signal before its process group is killed (10;"
        " keep it under the grace your scheduler gives the recorder)",
    )
    p.add_argument(
        "--truth",
        choices=("oom", "healthy"),
        default=None,
        help="ground truth for the header; 'oom' is set by itself when a process ran out of memory",
    )
    p.add_argument("--scenario", default=None, help="a name for the run, kept in the header")
    p.add_argument("--keep-parts", action="store_true", help="keep the per-process raw files")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpumem_client record", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    args = p.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        p.error("no command: put it after --")
    if args.interval <= 0:
        p.error("--interval must be positive")
    if args.grace < 0:
        p.error("--grace must not be negative")
    return run_command(args)
