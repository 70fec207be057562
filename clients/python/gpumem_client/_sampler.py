"""Sampling inside a recorded process: its caching allocator on a daemon thread, its
out-of-memory error, as JSON lines (``record`` merges them into traces)."""

import json
import logging
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, IO, Mapping, Optional, Tuple

from . import _collect

log = logging.getLogger("gpumem_client")

# torch's key -> the trace's key (the trace keeps torch's own names).
TORCH_KEYS = [key for _, key in _collect.TORCH_FIELDS]


class LineWriter:
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


def next_tick(due: float, now: float, interval: float) -> float:
    """When the sampler samples next, given when it was due last and the time now.

    A thread that fell behind (the GIL held through a long host copy, say) skips the ticks it
    missed and samples next a whole interval on: catching up would write a burst of samples a
    fraction of a millisecond apart, the same time once rounded, which a replay refuses."""
    due += interval
    return due if due > now else now + interval


class AllocatorSampler:
    """Samples this process's caching allocator on a daemon thread; catches its OOM.

    ``on_meta`` hears which device the samples describe (and torch's version) whenever that
    changes: a ``torchrun`` worker picks its GPU after CUDA may already be initialised."""

    def __init__(
        self,
        out: LineWriter,
        interval: float,
        uuid: Optional[str],
        nvml_device: Any = None,
        snapshot_every: int = 10,
        stats: bool = True,
        on_meta: Optional[Callable[[Dict[str, Any]], None]] = None,
    ) -> None:
        self.out = out
        self.stats = stats
        self.interval = interval
        self.uuid = uuid
        self.nvml_device = nvml_device
        self.snapshot_every = max(1, snapshot_every)
        self.on_meta = on_meta or out.write
        self._collector = _collect.TorchCollector()
        self._index = None  # type: Optional[int]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpumem-record", daemon=True)
        self._n = 0
        self._last_t = None  # type: Optional[float]
        self._oom_attached = False
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
            next_t = next_tick(next_t, time.monotonic(), self.interval)
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def _device(self, cuda: Any) -> Tuple[int, Mapping[str, Any]]:
        """The device this process's allocator holds the most on, and its statistics (read
        once). Not ``current_device()``: that is per thread, and this thread never chose one (a
        torchrun worker's ``set_device(local_rank)`` is its main thread's); a worker also keeps
        a small context on GPU 0. Ties keep the device sampled so far."""
        if self.uuid:
            if self._index is None:
                self._index = 0
                for i in range(cuda.device_count()):
                    if self._collector.uuid(cuda, i) == self.uuid:
                        self._index = i
                        break
            return self._index, self._collector.stats(cuda, self._index)
        stats = [self._collector.stats(cuda, i) for i in range(cuda.device_count())]
        if not stats:
            return 0, {}
        reserved = [st.get("reserved_bytes.all.current") or 0 for st in stats]
        best = max(range(len(stats)), key=lambda i: reserved[i])
        if self._index is not None and self._index < len(stats) and reserved[self._index] >= reserved[best]:
            best = self._index
        return best, stats[best]

    def _sample(self) -> None:
        t = self.out.now()
        if self._last_t is not None and t <= self._last_t:
            return  # the last sample at exit right after a tick: one sample per time
        self._last_t = t
        line = {"kind": "sample", "t": t}  # type: Dict[str, Any]
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
            index, stats = self._device(cuda)
            if index != self._index or self._n == 0:
                self._index = index
                torch = sys.modules.get("torch")
                self.on_meta(
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
            torch_part = {key: stats.get(key) for key in TORCH_KEYS}
            if self._n % self.snapshot_every == 0:
                torch_part["largest_free_cached"] = self._collector.largest_free(cuda).get(index, 0)
            line["torch"] = torch_part
            self._n += 1
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
            cuda = self._collector.cuda()
            self.out.write(
                {
                    "kind": "event",
                    "t": self.out.now(),
                    "name": "oom",
                    # The failing device, which need not be the one sampled so far.
                    "uuid": self._collector.uuid(cuda, int(device)) if cuda is not None else None,
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
