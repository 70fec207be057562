"""Record a run's GPU memory into a trace that ``gpumem-exporter replay`` reads.

Two forms, one file format (``tests/traces/README.md`` in the exporter's repository):

* around a command, from the outside::

      python -m gpumem_client record -o run.jsonl -- python train.py --lr 3e-4

  The recorder samples NVML for the GPU; every Python process the command starts samples its
  own caching allocator (a ``sitecustomize`` on ``PYTHONPATH`` starts a thread once CUDA is
  initialised) and catches its own out-of-memory error. One trace is written per process that
  used the GPU: ``run.jsonl`` for the first, ``run-<pid>.jsonl`` for the others.

* inside a script::

      from gpumem_client import record
      record.start("run.jsonl", interval=0.5)
      ...
      record.stop()

A user attaches the file to a bug report; a recording whose header says ``"truth": "oom"``
ended in a real ``torch.OutOfMemoryError`` and serves as ground truth for the forecast.
"""

import argparse
import atexit
import glob
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, IO, List, Optional

from . import _collect

log = logging.getLogger("gpumem_client")

ENV_DIR = "GPUMEM_RECORD_DIR"
ENV_T0 = "GPUMEM_RECORD_T0"
ENV_INTERVAL = "GPUMEM_RECORD_INTERVAL"
ENV_UUID = "GPUMEM_RECORD_UUID"
# A process started with this set to 1 is not recorded from inside (an "NVML-only" process);
# set to "stats", only its events (its out-of-memory error) are.
ENV_SKIP = "GPUMEM_RECORD_SKIP"

# torch's key -> the trace's key (the trace keeps torch's own names).
TORCH_KEYS = [key for _, key in _collect.TORCH_FIELDS]


class _LineWriter:
    """JSON lines to one file from several threads; times relative to ``t0`` (unix seconds)."""

    def __init__(self, stream: IO[str], t0: float) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.t0 = t0

    def now(self) -> float:
        return round(time.time() - self.t0, 4)

    def write(self, obj: Dict[str, Any]) -> None:
        line = json.dumps(obj, separators=(",", ":"))
        with self._lock:
            if self._stream.closed:
                return
            self._stream.write(line + "\n")
            self._stream.flush()

    def close(self) -> None:
        with self._lock:
            if not self._stream.closed:
                self._stream.close()


class _AllocatorSampler:
    """Samples this process's caching allocator on a daemon thread; catches its OOM."""

    def __init__(
        self,
        out: _LineWriter,
        interval: float,
        uuid: Optional[str],
        nvml_device: Any = None,
        snapshot_every: int = 10,
        stats: bool = True,
    ) -> None:
        self.out = out
        self.stats = stats
        self.interval = interval
        self.uuid = uuid
        self.nvml_device = nvml_device
        self.snapshot_every = max(1, snapshot_every)
        self._collector = _collect.TorchCollector()
        self._index = None  # type: Optional[int]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpumem-record", daemon=True)
        self._n = 0
        self._oom_attached = False
        self._meta_written = False
        self.oom_seen = False

    def start(self) -> None:
        self._thread.start()
        self._hook_exceptions()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=2 * self.interval + 1)
        # One last sample: the state at exit (after an OOM, what the allocator held then).
        self._sample()

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            try:
                self._sample()
            except Exception as e:  # never take the training process down
                log.debug("gpumem record: sample failed: %s", e)
            next_t += self.interval
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def _device_index(self, cuda: Any) -> int:
        if self._index is None:
            self._index = cuda.current_device()
            if self.uuid:
                for i in range(cuda.device_count()):
                    if self._collector.uuid(cuda, i) == self.uuid:
                        self._index = i
                        break
        return self._index

    def _sample(self) -> None:
        line = {"kind": "sample", "t": self.out.now()}  # type: Dict[str, Any]
        if self.nvml_device is not None:
            try:
                nv = self.nvml_device.memory()
                nv["procs"] = self.nvml_device.processes()
                line["nvml"] = nv
            except Exception as e:
                log.debug("gpumem record: NVML failed: %s", e)
        cuda = self._collector.cuda()
        if cuda is not None:
            if not self._oom_attached:
                self._attach_oom_observer()
            if not self.stats:
                return
            index = self._device_index(cuda)
            stats = self._collector.stats(cuda, index)
            torch_part = {key: stats.get(key) for key in TORCH_KEYS}
            if self._n % self.snapshot_every == 0:
                torch_part["largest_free_cached"] = self._collector.largest_free(cuda).get(index, 0)
            line["torch"] = torch_part
            self._n += 1
            if not self._meta_written:
                self._meta_written = True
                torch = sys.modules.get("torch")
                self.out.write(
                    {
                        "kind": "meta",
                        "t": line["t"],
                        "torch": getattr(torch, "__version__", None),
                        "cuda_index": index,
                        "uuid": self._collector.uuid(cuda, index),
                        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
                        or os.environ.get("PYTORCH_ALLOC_CONF"),
                    }
                )
        if "nvml" in line or "torch" in line:
            self.out.write(line)

    def _attach_oom_observer(self) -> None:
        self._oom_attached = True
        torch = sys.modules.get("torch")
        attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
        if attach is not None:
            try:
                attach(self._on_oom)
            except Exception as e:
                log.debug("gpumem record: no OOM observer: %s", e)

    def _on_oom(self, device: Any, alloc: Any, device_allocated: Any, device_free: Any) -> None:
        try:
            self.oom_seen = True
            self.out.write(
                {
                    "kind": "event",
                    "t": self.out.now(),
                    "name": "oom",
                    "request_bytes": int(alloc),
                    "device_free": int(device_free),
                    "error": "CUDA out of memory on cuda:%s: tried to allocate %s bytes; %s bytes"
                    " free" % (device, alloc, device_free),
                }
            )
        except Exception:
            pass

    def _hook_exceptions(self) -> None:
        previous = sys.excepthook

        def hook(exc_type: Any, exc: Any, tb: Any) -> None:
            try:
                if "OutOfMemory" in getattr(exc_type, "__name__", ""):
                    if not self.oom_seen:
                        # An allocator without the observer (or JAX): the exception is the crash.
                        self.oom_seen = True
                        self.out.write(
                            {"kind": "event", "t": self.out.now(), "name": "oom", "error": str(exc)[:2000]}
                        )
                    else:
                        self.out.write(
                            {"kind": "event", "t": self.out.now(), "name": "exception", "error": str(exc)[:2000]}
                        )
            except Exception:
                pass
            previous(exc_type, exc, tb)

        sys.excepthook = hook


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
    is there; without it the trace holds the allocator's side only. Returns False if a
    recording is already running."""
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
    out = _LineWriter(open(path + ".part", "w"), t0)
    sampler = _AllocatorSampler(out, interval, device.uuid if device else None, device)
    _active = {
        "path": path,
        "out": out,
        "sampler": sampler,
        "device": device,
        "truth": truth,
        "scenario": scenario,
        "interval": interval,
    }
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
    """Finish the in-process recording and write the trace; returns its path."""
    global _active
    state = _active
    if state is None:
        return None
    _active = None
    state["sampler"].stop()
    state["out"].write({"kind": "event", "t": state["out"].now(), "name": "end"})
    state["out"].close()
    device = state["device"]
    gpu = {"uuid": device.uuid, "name": device.name, "index": device.index} if device else {}
    write_trace(
        state["path"],
        [state["path"] + ".part"],
        pid=os.getpid(),
        t0=state["out"].t0,
        interval=state["interval"],
        gpu=gpu,
        truth=state["truth"],
        scenario=state["scenario"],
    )
    os.unlink(state["path"] + ".part")
    return state["path"]


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


# ---------------------------------------------------------------------------- writing traces


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


def write_trace(
    path: str,
    parts: List[str],
    pid: int,
    t0: float,
    interval: float,
    gpu: Dict[str, Any],
    truth: Optional[str],
    scenario: Optional[str],
    extra: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """Merge line files into one trace at ``path`` (header first, then by time)."""
    lines = []  # type: List[Dict[str, Any]]
    meta = {}  # type: Dict[str, Any]
    for p in parts:
        for obj in _read_lines(p):
            if obj.get("kind") == "meta":
                meta = obj
            else:
                lines.append(obj)
    lines.sort(key=lambda o: o.get("t", 0.0))
    oom = [o for o in lines if o.get("kind") == "event" and o.get("name") == "oom"]
    total = next((o["nvml"]["total"] for o in lines if "nvml" in o), None)
    header = {
        "kind": "header",
        "scenario": scenario,
        "gpu": gpu.get("name"),
        "gpu_index": gpu.get("index"),
        "gpu_uuid": gpu.get("uuid") or meta.get("uuid"),
        "total_memory": total,
        "pid": pid,
        "period_s": interval,
        "t0_unix": t0,
        "torch": meta.get("torch"),
        "alloc_conf": meta.get("alloc_conf"),
        "truth": "oom" if oom else truth,
        "recorder": "gpumem_client.record",
    }
    if oom:
        header["oom_t"] = oom[0]["t"]
    if extra:
        header.update(extra)
    header = {k: v for k, v in header.items() if v is not None}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(header, separators=(",", ":")) + "\n")
        for obj in lines:
            f.write(json.dumps(obj, separators=(",", ":")) + "\n")
    os.replace(tmp, path)
    return header


def _default_gpu() -> int:
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def _output_name(base: str, pid: int, first: bool) -> str:
    if first:
        return base
    stem, ext = os.path.splitext(base)
    return "%s-%d%s" % (stem, pid, ext or ".jsonl")


def run_command(args: argparse.Namespace) -> int:
    from . import _nvml

    try:
        device = _nvml.open_device(args.gpu if args.gpu is not None else _default_gpu())
    except Exception as e:
        print("gpumem record: %s" % e, file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="gpumem-record-")
    site = os.path.join(work, "site")
    os.mkdir(site)
    with open(os.path.join(site, "sitecustomize.py"), "w") as f:
        f.write(_SITECUSTOMIZE)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    t0 = time.time()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [site, package_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    env[ENV_DIR] = work
    env[ENV_T0] = repr(t0)
    env[ENV_INTERVAL] = str(args.interval)
    env[ENV_UUID] = device.uuid
    nvml_out = _LineWriter(open(os.path.join(work, "nvml.jsonl"), "w"), t0)
    child = subprocess.Popen(args.command, env=env)
    # Ctrl-C reaches the child through the terminal; the recorder waits for it to finish.
    signal.signal(signal.SIGINT, lambda *_: None)
    next_t = time.monotonic()
    while child.poll() is None:
        try:
            nv = device.memory()
            nv["procs"] = device.processes()
            nvml_out.write({"kind": "sample", "t": nvml_out.now(), "nvml": nv})
        except Exception as e:
            log.warning("gpumem record: NVML sample failed: %s", e)
        next_t += args.interval
        time.sleep(max(0.0, next_t - time.monotonic()))
    code = child.returncode
    nvml_out.write({"kind": "event", "t": nvml_out.now(), "name": "end", "exit_code": code})
    nvml_out.close()

    gpu = {"uuid": device.uuid, "name": device.name, "index": device.index}
    children = []
    for p in sorted(glob.glob(os.path.join(work, "torch-*.jsonl"))):
        lines = [o for o in _read_lines(p) if o.get("kind") != "meta"]
        used = any(o.get("torch", {}).get("reserved_bytes.all.peak") for o in lines) or any(
            o.get("kind") == "event" for o in lines
        )
        if used:
            first_t = min((o.get("t", 0.0) for o in lines), default=0.0)
            children.append((first_t, int(os.path.basename(p)[6:-6]), p))
    children.sort()
    written = []
    extra = {"command": args.command, "exit_code": code}
    if not children:
        # Not a Python process, or one that never used CUDA: NVML's view alone.
        h = write_trace(
            args.output, [nvml_out_path(work)], child.pid, t0, args.interval, gpu, args.truth,
            args.scenario, extra,
        )
        written.append((args.output, h))
    for i, (_, pid, p) in enumerate(children):
        out = _output_name(args.output, pid, i == 0)
        h = write_trace(
            out, [nvml_out_path(work), p], pid, t0, args.interval, gpu, args.truth, args.scenario,
            extra,
        )
        written.append((out, h))
    for out, h in written:
        print(
            "gpumem record: %s (pid %s, truth %s%s)"
            % (out, h["pid"], h.get("truth", "unset"), ", oom at %.1f s" % h["oom_t"] if "oom_t" in h else ""),
            file=sys.stderr,
        )
    if args.keep_parts:
        print("gpumem record: raw parts kept in %s" % work, file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return code


def nvml_out_path(work: str) -> str:
    return os.path.join(work, "nvml.jsonl")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", required=True, help="trace file to write (JSON lines)")
    p.add_argument("--interval", type=float, default=0.5, help="seconds between samples (0.5)")
    p.add_argument("--gpu", type=int, default=None, help="NVML index of the GPU to record")
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
    return run_command(args)
