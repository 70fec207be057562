"""The reporting client: builds version-1 report bodies and sends them (docs/ingest.md)."""

import collections
import contextlib
import email.utils
import itertools
import json
import logging
import os
import sys
import threading
import time
import weakref
from typing import Any, Deque, Dict, List, Mapping, Optional, Tuple

from . import _collect, _model
from ._transport import DEFAULT_SOCKET, Answer, Transport

log = logging.getLogger("gpumem_client")

VERSION = 1
MAX_EVENTS = 256
MAX_BODY_BYTES = 1 << 20
MAX_RANK = 1000000
NAME_MAX = 64
MESSAGE_MAX = 1024
JOB_MAX = 128
# Wake the reporting thread early when this many events wait, so that none are lost.
EVENTS_WAKE_AT = 192
# A client with no allocator to read this long after start says why in its log, once: without
# PyTorch (or JAX) on the GPU there is nothing to report but marks and phases.
NOTHING_TO_REPORT_AFTER_S = 10.0
# The exporter keeps the largest free block for 60 s; take it at least this often.
SNAPSHOT_MAX_PERIOD_S = 30.0
# Answers after which the client also waits before trying again.
_BACKOFF_STATUSES = (409, 429)
# One request (connect, send, the whole answer) never takes longer than this by default: the
# reporting thread shares the interpreter with training, and mark() without a thread runs in
# the training loop itself.
DEFAULT_TIMEOUT = 0.1
# The longest Retry-After honoured, so that a wrong header cannot silence a job for good.
RETRY_AFTER_MAX = 600.0
# Distinct GPU sets warned about as unknown to the exporter, at most (the rest: debug).
_UNKNOWN_GPU_WARNINGS = 16

_clients = weakref.WeakSet()  # type: weakref.WeakSet


def _clean(value: Any, limit: int) -> str:
    """A short printable string: control characters dropped, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    text = text.encode("utf-8", "replace").decode("utf-8", "replace")
    if not text.isprintable():
        text = "".join(ch for ch in text if ch.isprintable() or ch == " ")
    return text[:limit]


def _rank_value(value: Any) -> Optional[int]:
    if value is None or isinstance(value, bool):
        return None
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    if 0 <= n <= MAX_RANK:
        return n
    return None


def identity_from_env(
    env: Optional[Mapping[str, str]] = None,
    job: Optional[str] = None,
    rank: Optional[int] = None,
    local_rank: Optional[int] = None,
    world_size: Optional[int] = None,
) -> Dict[str, Any]:
    """The ``identity`` object: explicit arguments win over RANK, LOCAL_RANK, WORLD_SIZE and
    TORCHELASTIC_RUN_ID. torchrun's placeholder run id ``none`` is not a job name."""
    if env is None:
        env = os.environ
    out = {}  # type: Dict[str, Any]
    if job is None:
        env_job = (env.get("TORCHELASTIC_RUN_ID") or "").strip()
        if env_job and env_job.lower() != "none":
            job = env_job
    if job is not None:
        cleaned = _clean(job, JOB_MAX)
        if cleaned:
            out["job"] = cleaned
    for key, explicit, var in (
        ("rank", rank, "RANK"),
        ("local_rank", local_rank, "LOCAL_RANK"),
        ("world_size", world_size, "WORLD_SIZE"),
    ):
        value = _rank_value(explicit)
        if value is None:
            value = _rank_value(env.get(var))
        if value is not None:
            out[key] = value
    return out


def resolve_endpoint(
    socket: Optional[str] = None, url: Optional[str] = None
) -> Tuple[Optional[str], Optional[str]]:
    """(socket path, url): arguments first, then GPUMEM_INGEST_URL, then GPUMEM_INGEST_SOCKET,
    then the default socket."""
    if url:
        return None, url
    if socket:
        return os.fspath(socket), None
    env_url = os.environ.get("GPUMEM_INGEST_URL", "").strip()
    if env_url:
        return None, env_url
    return os.environ.get("GPUMEM_INGEST_SOCKET", "").strip() or DEFAULT_SOCKET, None


class _Phase(contextlib.ContextDecorator):
    """``with client.phase("forward"):`` (also usable as a decorator)."""

    def __init__(self, client: "Client", name: str) -> None:
        self._client = client
        self._name = name
        self._token = None  # type: Any

    def __enter__(self) -> "_Phase":
        self._token = self._client._push_phase(self._name)
        return self

    def __exit__(self, *exc: Any) -> bool:
        self._client._pop_phase(self._token)
        return False


class Client:
    """Sends allocator reports to the gpumem exporter on this node.

    No method raises and none blocks its caller longer than ``timeout`` seconds (one
    deadline for connecting, sending and the whole answer). ``stats`` counts what happened:
    ``sent`` requests, of which ``accepted`` (202), ``rejected`` (any other answer) and
    ``failed`` (no complete answer within the deadline, or none at all); ``dropped`` reports
    not attempted because the client was backing off or honouring a ``Retry-After``;
    ``events_dropped`` events thrown away (queue full, or the report that carried them was
    rejected).
    """

    def __init__(
        self,
        socket: Optional[str] = None,
        url: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        job: Optional[str] = None,
        rank: Optional[int] = None,
        local_rank: Optional[int] = None,
        world_size: Optional[int] = None,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
    ) -> None:
        self.stats = {
            "sent": 0,
            "accepted": 0,
            "rejected": 0,
            "failed": 0,
            "dropped": 0,
            "events_dropped": 0,
        }  # type: Dict[str, int]
        self.timeout = float(timeout) if timeout and timeout > 0 else DEFAULT_TIMEOUT
        self.backoff_initial = float(backoff_initial)
        self.backoff_max = float(backoff_max)
        self.backoff = 0.0  # the current retry delay; 0 while the exporter answers
        self.last_error = None  # type: Optional[str]
        self.last_pid = None  # type: Optional[int]  # pid the exporter filed the last report under
        # GPUs of the last accepted report on which the exporter does not (yet) see this process
        self.last_unlisted = []  # type: List[str]
        self.interval = None  # type: Optional[float]
        self.snapshot_every = 0
        self.socket_path, self.url = resolve_endpoint(socket, url)
        self.identity = identity_from_env(
            job=job, rank=rank, local_rank=local_rank, world_size=world_size
        )
        self._transport = None  # type: Optional[Transport]
        try:
            self._transport = Transport(self.socket_path, self.url)
        except Exception as e:
            self.last_error = str(e)
            log.warning("gpumem: reporting disabled: %s", e)
        self._torch = _collect.TorchCollector()
        self._jax = _collect.JaxCollector()
        self._init_runtime_state()
        _clients.add(self)

    def _init_runtime_state(self) -> None:
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = None  # type: Optional[threading.Thread]
        self._events = collections.deque()  # type: Deque[Dict[str, Any]]
        self._phases = []  # type: List[Tuple[int, str]]
        self._phase_used = False
        self._tokens = itertools.count(1)
        self._components = None  # type: Optional[List[Dict[str, Any]]]
        self._components_unsent = False
        self._last_devices = []  # type: List[Dict[str, Any]]
        self._next_attempt = 0.0
        self._warned = set()  # type: set
        self._reported_unreachable = False
        self._reports_collected = 0
        self._oom_attached = False
        self._tick_errors = 0
        self._started_at = None  # type: Optional[float]

    # ------------------------------------------------------------------ public API

    @property
    def running(self) -> bool:
        """True while the reporting thread runs."""
        t = self._thread
        return t is not None and t.is_alive() and not self._stopping

    def endpoint(self) -> str:
        return self._transport.describe() if self._transport else "(none)"

    def start(self, interval: float = 1.0, snapshot_every: int = 10) -> "Client":
        """Start the reporting thread (no-op when it runs already)."""
        try:
            with self._lock:
                if self.running:
                    return self
                try:
                    interval = float(interval)
                except (TypeError, ValueError):
                    interval = 1.0
                self.interval = interval if interval > 0 else 1.0
                try:
                    self.snapshot_every = max(0, int(snapshot_every or 0))
                except (TypeError, ValueError):
                    self.snapshot_every = 10
                self._stopping = False
                self._wake.clear()
                _set_oom_client(self)
                self._started_at = time.monotonic()
                thread = threading.Thread(target=self._run, name="gpumem-client", daemon=True)
                self._thread = thread
                thread.start()
        except Exception as e:
            log.debug("gpumem: start failed: %s", e)
        return self

    def stop(self, flush: bool = True) -> None:
        """Stop the reporting thread; send what is queued (at most ``timeout`` seconds)."""
        try:
            thread = self._thread
            self._stopping = True
            self._wake.set()
            if thread is not None and thread is not threading.current_thread():
                thread.join(self.timeout + 0.5)
            self._thread = None
            if flush:
                with self._lock:
                    pending = bool(self._events)
                if pending:
                    self._send_report(list(self._last_devices))
            with self._io_lock:
                if self._transport is not None:
                    self._transport.close()
        except Exception as e:
            log.debug("gpumem: stop failed: %s", e)

    def send_allocator_stats(
        self, device_uuid: str, stats: Mapping[str, Any], largest_free_block: Optional[int] = None
    ) -> bool:
        """Report one device from a ``torch.cuda.memory_stats()`` mapping (with the queued
        phase, events and components). True only when the exporter answered 202."""
        try:
            uuid = _collect.format_uuid(device_uuid) or _clean(device_uuid, 96)
            entry = _collect.torch_entry(uuid, stats, largest_free_block)
            if entry is None:
                log.debug("gpumem: stats for %s lack allocated/reserved bytes", uuid)
                return False
            return self._send_report([entry])
        except Exception as e:
            log.debug("gpumem: send_allocator_stats failed: %s", e)
            return False

    def send_report(self, body: Mapping[str, Any]) -> bool:
        """Send a report body as it is (``version`` defaults to 1). True only on 202."""
        try:
            body = dict(body)
            body.setdefault("version", VERSION)
            return self._deliver(body, [])
        except Exception as e:
            log.debug("gpumem: send_report failed: %s", e)
            return False

    def flush(self) -> bool:
        """Send a report now: current device statistics and whatever is queued."""
        try:
            if self._in_backoff():
                self.stats["dropped"] += 1  # what is queued waits for the next try
                return False
            return self._send_report(self._collect(snapshot=False))
        except Exception as e:
            log.debug("gpumem: flush failed: %s", e)
            return False

    def mark(self, name: str, message: Optional[str] = None) -> bool:
        """A named point in time (the seeds' ``record("...")``). Queued for the next report;
        sent at once when no reporting thread runs."""
        try:
            event = {"kind": "mark", "name": _clean(name, NAME_MAX)}  # type: Dict[str, Any]
            if message is not None:
                event["message"] = _clean(message, MESSAGE_MAX)
            self._queue_event(event)
            if not self.running:
                return self.flush()
            return True
        except Exception as e:
            log.debug("gpumem: mark failed: %s", e)
            return False

    def phase(self, name: str) -> _Phase:
        """``with client.phase("forward"): ...``: the process is in this phase inside the block;
        the enclosing phase (or none) again after it."""
        return _Phase(self, name)

    def enter_phase(self, name: str) -> None:
        """Enter a phase until the next one is entered (replaces any ``with`` phases)."""
        try:
            cleaned = _clean(name, NAME_MAX)
            with self._lock:
                self._phases = [(next(self._tokens), cleaned)]
                self._phase_used = True
            self._queue_event({"kind": "phase", "name": cleaned})
        except Exception as e:
            log.debug("gpumem: enter_phase failed: %s", e)

    @property
    def current_phase(self) -> Optional[str]:
        with self._lock:
            return self._phases[-1][1] if self._phases else None

    def report_model(self, model: Any, optimizer: Optional[Any] = None) -> bool:
        """Bytes of parameters, gradients and optimizer state by component (attention, mlp,
        embedding, norm, lora, other); replaces the list sent before."""
        try:
            components = _model.model_components(model, optimizer)
        except Exception as e:
            log.debug("gpumem: report_model failed: %s", e)
            return False
        with self._lock:
            self._components = components
            self._components_unsent = True
        if not self.running:
            return self.flush()
        return True

    # ------------------------------------------------------------------ internals

    def _push_phase(self, name: str) -> Optional[int]:
        try:
            cleaned = _clean(name, NAME_MAX)
            token = next(self._tokens)
            with self._lock:
                self._phases.append((token, cleaned))
                self._phase_used = True
            self._queue_event({"kind": "phase", "name": cleaned})
            return token
        except Exception as e:
            log.debug("gpumem: phase failed: %s", e)
            return None

    def _pop_phase(self, token: Optional[int]) -> None:
        try:
            with self._lock:
                for i in range(len(self._phases) - 1, -1, -1):
                    if self._phases[i][0] == token:
                        del self._phases[i]
                        break
        except Exception as e:
            log.debug("gpumem: phase exit failed: %s", e)

    def _queue_event(self, event: Dict[str, Any]) -> None:
        with self._lock:
            if len(self._events) >= MAX_EVENTS:
                self._events.popleft()
                self.stats["events_dropped"] += 1
            self._events.append(event)
            n = len(self._events)
        if n >= EVENTS_WAKE_AT and self._thread is not None and not self._in_backoff():
            self._wake.set()

    def _requeue(self, events: List[Dict[str, Any]]) -> None:
        """Put events of a report that got no answer back at the front of the queue."""
        if not events:
            return
        with self._lock:
            merged = events + list(self._events)
            excess = len(merged) - MAX_EVENTS
            if excess > 0:
                self.stats["events_dropped"] += excess
                merged = merged[excess:]
            self._events = collections.deque(merged)

    def _collect(self, snapshot: bool) -> List[Dict[str, Any]]:
        devices = []  # type: List[Dict[str, Any]]
        try:
            devices = self._torch.collect(snapshot)
        except Exception as e:
            self._debug_once("torch", "gpumem: reading PyTorch allocator stats failed: %s", e)
        try:
            devices.extend(self._jax.collect(skip_uuids=[d["uuid"] for d in devices]))
        except Exception as e:
            self._debug_once("jax", "gpumem: reading JAX allocator stats failed: %s", e)
        return devices[:64]

    def _build_body(self, devices: List[Dict[str, Any]]) -> Tuple[Dict[str, Any], List]:
        body = {"version": VERSION}  # type: Dict[str, Any]
        if self.identity:
            body["identity"] = dict(self.identity)
        body["devices"] = devices
        with self._lock:
            if self._phase_used:
                body["phase"] = self._phases[-1][1] if self._phases else None
            events = list(self._events)
            self._events.clear()
            if self._components is not None:
                body["components"] = self._components
                self._components_unsent = False
        if events:
            body["events"] = events
        return body, events

    def _send_report(self, devices: List[Dict[str, Any]]) -> bool:
        if devices:
            self._last_devices = devices
        body, events = self._build_body(devices)
        return self._deliver(body, events)

    def _in_backoff(self) -> bool:
        return time.monotonic() < self._next_attempt

    def _deliver(self, body: Dict[str, Any], events: List[Dict[str, Any]]) -> bool:
        """Send one body; counts and logs the outcome. Never raises."""
        transport = self._transport
        if transport is None:
            self.stats["dropped"] += 1
            self._count_lost_events(events)
            return False
        if self._in_backoff():
            self.stats["dropped"] += 1
            self._requeue(events)
            return False
        try:
            payload = json.dumps(body, separators=(",", ":"), allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as e:
            self._warn_once("encode", "gpumem: report not sent, it is not JSON: %s", e)
            self.stats["rejected"] += 1
            self._count_lost_events(events)
            return False
        if len(payload) > MAX_BODY_BYTES:
            self._warn_once("too_large_local", "gpumem: report of %d bytes not sent", len(payload))
            self.stats["dropped"] += 1
            self._count_lost_events(events)
            return False
        # One deadline covers waiting for another thread's request and this one's.
        deadline = time.monotonic() + self.timeout
        if not self._io_lock.acquire(timeout=self.timeout):
            self.stats["dropped"] += 1
            self._requeue(events)
            return False
        try:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stats["dropped"] += 1
                self._requeue(events)
                return False
            self.stats["sent"] += 1
            try:
                answer = transport.post(payload, left)
            except Exception as e:
                self.stats["failed"] += 1
                self._on_failure(e)
                self._requeue(events)
                return False
        finally:
            self._io_lock.release()
        return self._on_answer(answer, body, events)

    def _on_failure(self, error: BaseException) -> None:
        self.last_error = "%s: %s" % (type(error).__name__, error)
        self.backoff = min(
            self.backoff_max, self.backoff * 2 if self.backoff else self.backoff_initial
        )
        self._next_attempt = time.monotonic() + self.backoff
        if not self._reported_unreachable:
            self._reported_unreachable = True
            level = logging.WARNING if "unreachable" not in self._warned else logging.DEBUG
            self._warned.add("unreachable")
            log.log(
                level,
                "gpumem: cannot reach the exporter at %s (%s); retrying with back-off up to %gs",
                self.endpoint(),
                self.last_error,
                self.backoff_max,
            )

    def _on_answer(
        self, answer: Answer, body: Mapping[str, Any], events: List[Dict[str, Any]]
    ) -> bool:
        status, data = answer.status, answer.body
        if self._reported_unreachable:
            self._reported_unreachable = False
            log.info("gpumem: reporting to %s", self.endpoint())
        try:
            parsed = json.loads(data.decode("utf-8"))
        except Exception:
            parsed = None
        if not isinstance(parsed, dict):
            parsed = None
        if status == 202:
            self.stats["accepted"] += 1
            self.backoff = 0.0
            self._next_attempt = 0.0
            if parsed is not None:
                pid = parsed.get("pid")
                if isinstance(pid, int) and not isinstance(pid, bool):
                    self.last_pid = pid
                self._note_unlisted(parsed.get("unlisted"))
            return True
        self.stats["rejected"] += 1
        reason, error = "http_%d" % status, ""
        if parsed is not None:
            reason = _clean(parsed.get("reason") or reason, NAME_MAX)
            error = _clean(parsed.get("error") or "", MESSAGE_MAX)
        else:
            error = _clean(data[:200].decode("utf-8", "replace"), 200)
        self.last_error = "%d %s: %s" % (status, reason, error)
        if status == 429:
            # The exporter did not look at the report, only at who sent it: its events are
            # as good as before and go with the next report that gets through.
            self._requeue(events)
        else:
            self._count_lost_events(events)
        if status == 422 and reason == "unknown_gpu":
            self._on_unknown_gpu(body, error)
            self.backoff = 0.0
            self._next_attempt = 0.0
            return False
        retry_after = _retry_after(answer.headers) if status in (429, 503) else None
        if retry_after is not None:
            # The exporter said when: nothing is sent before then, however short the back-off.
            self.backoff = retry_after
            self._next_attempt = time.monotonic() + retry_after
            self._warn_once(
                "reject:" + reason,
                "gpumem: the exporter rejected a report (%d, %s): %s; "
                "sending nothing for %gs (Retry-After)",
                status,
                reason,
                error,
                retry_after,
            )
            return False
        if status in _BACKOFF_STATUSES or status >= 500:
            self.backoff = min(
                self.backoff_max, self.backoff * 2 if self.backoff else self.backoff_initial
            )
            self._next_attempt = time.monotonic() + self.backoff
        else:
            self.backoff = 0.0
            self._next_attempt = 0.0
        self._warn_once(
            "reject:" + reason,
            "gpumem: the exporter rejected a report (%d, %s): %s",
            status,
            reason,
            error,
        )
        return False

    def _on_unknown_gpu(self, body: Mapping[str, Any], error: str) -> None:
        # The GPUs the report named: its devices and the devices of its OOM events.
        uuids = set()
        devices = body.get("devices") if isinstance(body, Mapping) else None
        for device in devices if isinstance(devices, list) else []:
            if isinstance(device, Mapping) and isinstance(device.get("uuid"), str):
                uuids.add(_clean(device["uuid"], 96))
        events = body.get("events") if isinstance(body, Mapping) else None
        for event in events if isinstance(events, list) else []:
            if isinstance(event, Mapping) and event.get("kind") == "oom" and event.get("name"):
                uuids.add(_clean(event["name"], 96))
        named = ", ".join(sorted(uuids)) or "(none named)"
        key = "unknown_gpu:" + named
        warned = sum(1 for k in self._warned if k.startswith("unknown_gpu:"))
        if key in self._warned or warned >= _UNKNOWN_GPU_WARNINGS:
            log.debug("gpumem: the exporter does not know GPU %s: %s", named, error)
            return
        self._warned.add(key)
        log.warning(
            "gpumem: the exporter's node has no GPU %s (422 unknown_gpu: %s); reports naming "
            "it are not stored (is the socket the exporter's on this node?)",
            named,
            error,
        )

    def _note_unlisted(self, unlisted: Any) -> None:
        if not isinstance(unlisted, list):
            self.last_unlisted = []
            return
        self.last_unlisted = [_clean(u, 96) for u in unlisted[:64] if isinstance(u, str)]
        if self.last_unlisted:
            self._debug_once(
                "unlisted",
                "gpumem: the exporter does not see this process on %s yet (nothing to do)",
                ", ".join(self.last_unlisted),
            )

    def _count_lost_events(self, events: List[Dict[str, Any]]) -> None:
        if events:
            self.stats["events_dropped"] += len(events)

    def _warn_once(self, key: str, msg: str, *args: Any) -> None:
        if key in self._warned:
            log.debug(msg, *args)
        else:
            self._warned.add(key)
            log.warning(msg, *args)

    def _debug_once(self, key: str, msg: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.debug(msg, *args)

    # ------------------------------------------------------------------ the thread

    def _snapshot_due(self) -> bool:
        every = self.snapshot_every
        if every <= 0:
            return False
        interval = self.interval or 1.0
        every = max(1, min(every, int(SNAPSHOT_MAX_PERIOD_S / interval)))
        every *= self._torch.snapshot_scale
        return self._reports_collected % every == 0

    def _tick(self) -> None:
        if not self._oom_attached:
            self._attach_oom_observer()
        if self._in_backoff():
            self.stats["dropped"] += 1
            return
        devices = self._collect(snapshot=self._snapshot_due())
        if devices:
            self._reports_collected += 1
        else:
            self._say_why_nothing()
            with self._lock:
                if not self._events and not self._components_unsent:
                    return  # nothing to say
        self._send_report(devices)

    def _say_why_nothing(self) -> None:
        """Once, a while after start with no allocator ever read: why no memory is reported."""
        started = self._started_at
        if (
            self._reports_collected
            or started is None
            or "nothing-to-report" in self._warned
            or time.monotonic() - started < NOTHING_TO_REPORT_AFTER_S
        ):
            return
        if "torch" not in sys.modules and "jax" not in sys.modules:
            why = "neither PyTorch nor JAX is imported in this process"
        elif "torch" in sys.modules and _collect.TorchCollector.cuda() is None:
            why = "PyTorch has not initialised CUDA in this process yet"
        else:
            why = "no GPU has memory from this process's allocator yet"
        self._warn_once(
            "nothing-to-report",
            "gpumem: no allocator statistics to report %.0f s after start: %s. Memory reports begin "
            "once it has; until then only marks and phases are sent, each once (nothing when "
            "there are none)",
            NOTHING_TO_REPORT_AFTER_S,
            why,
        )

    def _run(self) -> None:
        while not self._stopping:
            started = time.monotonic()
            try:
                self._tick()
            except Exception as e:
                self._tick_errors += 1
                if self._tick_errors == 1:
                    log.warning("gpumem: reporting failed: %s", e, exc_info=True)
                else:
                    log.debug("gpumem: reporting failed: %s", e)
            wait = (self.interval or 1.0) - (time.monotonic() - started)
            if wait > 0 and not self._stopping:
                self._wake.wait(wait)
            self._wake.clear()

    # ------------------------------------------------------------------ out of memory

    def _attach_oom_observer(self) -> None:
        cuda = _collect.TorchCollector.cuda()
        if cuda is None:
            return  # the allocator attaches observers to devices it has set up: wait for init
        self._oom_attached = True
        _attach_oom_observer_once()

    def _on_oom(self, device: Any, alloc: Any, total: Any, free: Any) -> None:
        try:
            index = int(device)
        except Exception:
            index = -1
        uuid = self._torch.uuid_if_known(index)
        if uuid is None and index >= 0:
            try:
                cuda = _collect.TorchCollector.cuda()
                if cuda is not None:
                    uuid = self._torch.uuid(cuda, index)
            except Exception:
                uuid = None
        message = _clean(
            "CUDA out of memory on cuda:%s: tried to allocate %s bytes; %s bytes free of %s"
            % (device, alloc, free, total),
            MESSAGE_MAX,
        )
        event = {"kind": "oom", "name": _clean(uuid or "", NAME_MAX), "message": message}
        # The failing request and the free bytes then, for the exporter's OOM event and its
        # alert's text; left out where the observer passed something that is not a size.
        for key, value in (("request_bytes", alloc), ("free_bytes", free)):
            size = _size(value)
            if size is not None:
                event[key] = size
        transport = self._transport
        if transport is None or self._in_backoff():
            self._queue_event(event)
            return
        body = {"version": VERSION, "devices": [], "events": [event]}  # type: Dict[str, Any]
        if self.identity:
            body["identity"] = dict(self.identity)
        # A connection of its own, so that it never waits for the reporting thread's.
        oom_transport = transport.twin()
        try:
            payload = json.dumps(body, separators=(",", ":")).encode("utf-8")
            self.stats["sent"] += 1
            answer = oom_transport.post(payload, min(self.timeout, 0.25))
        except Exception as e:
            self.stats["failed"] += 1
            self._on_failure(e)
            self._queue_event(event)
            return
        finally:
            oom_transport.close()
        self._on_answer(answer, body, [event])


def _size(value: Any) -> Optional[int]:
    """A byte count the exporter accepts (0..2^53), or None."""
    try:
        n = int(value)
    except Exception:
        return None
    return n if 0 <= n <= _collect.MAX_COUNT else None


def _retry_after(headers: Mapping[str, str]) -> Optional[float]:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), or None."""
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
            seconds = when.timestamp() - time.time()
        except Exception:
            return None
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_MAX)


_oom_lock = threading.Lock()
_oom_attached_pid = 0
_oom_client = None  # type: Optional[weakref.ref]


def _oom_observer(*args: Any) -> None:
    """Called by PyTorch's allocator on out-of-memory: report it, never raise."""
    try:
        ref = _oom_client
        client = ref() if ref is not None else None
        if client is None:
            return
        device, alloc, total, free = (list(args) + [None] * 4)[:4]
        client._on_oom(device, alloc, total, free)
    except Exception:
        pass


def _set_oom_client(client: Optional[Client]) -> None:
    global _oom_client
    _oom_client = weakref.ref(client) if client is not None else None


def _attach_oom_observer_once() -> None:
    """Attach the observer once per process (PyTorch has no way to detach one)."""
    global _oom_attached_pid
    import sys

    with _oom_lock:
        if _oom_attached_pid == os.getpid():
            return
        torch = sys.modules.get("torch")
        attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
        if attach is None:
            _oom_attached_pid = os.getpid()
            return
        try:
            attach(_oom_observer)
        except Exception as e:
            log.debug("gpumem: cannot attach the out-of-memory observer: %s", e)
        _oom_attached_pid = os.getpid()


def _after_fork_in_child() -> None:
    for client in list(_clients):
        try:
            # Locks may have been held by a thread that does not exist here, the connection
            # belongs to the parent, and the parent reports what was queued.
            transport = client._transport
            client._init_runtime_state()
            if transport is not None:
                transport._conn = None
        except Exception:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
