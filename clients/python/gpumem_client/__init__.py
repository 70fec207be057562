"""Report PyTorch's and JAX's allocator statistics to the gpumem exporter on this node.

    import gpumem_client
    gpumem_client.start()                 # a daemon thread reports every second
    with gpumem_client.phase("forward"):
        loss = model(batch)
    gpumem_client.mark("checkpoint saved")
    gpumem_client.report_model(model, optimizer)

Standard library only; PyTorch and JAX are used when the process has imported them, and
never imported or initialised by this package. No function here raises or blocks training.
The wire protocol is the exporter's docs/ingest.md (version 1).
"""

import atexit
import contextlib
import logging
import threading
from typing import Any, Optional

from ._collect import largest_free_blocks
from ._model import classify, model_components
from ._transport import DEFAULT_SOCKET, REPORT_PATH, UnixHTTPConnection
from .client import DEFAULT_TIMEOUT, Client, identity_from_env, resolve_endpoint

__version__ = "0.1.0"

__all__ = [
    "Client",
    "DEFAULT_SOCKET",
    "DEFAULT_TIMEOUT",
    "REPORT_PATH",
    "UnixHTTPConnection",
    "classify",
    "enter_phase",
    "get_client",
    "identity_from_env",
    "largest_free_blocks",
    "mark",
    "model_components",
    "phase",
    "report_model",
    "resolve_endpoint",
    "start",
    "stop",
]

log = logging.getLogger("gpumem_client")

_lock = threading.Lock()
_client = None  # type: Optional[Client]
_atexit_registered = False


def start(
    interval: float = 1.0,
    socket: Optional[str] = None,
    job: Optional[str] = None,
    rank: Optional[int] = None,
    snapshot_every: int = 10,
    *,
    url: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Optional[Client]:
    """Start reporting from a daemon thread every ``interval`` seconds; the largest free
    block is read every ``snapshot_every`` reports (0: never). One report (connect, send,
    answer) takes at most ``timeout`` seconds. Calling it again while it runs returns the
    running client. Returns the Client."""
    global _client, _atexit_registered
    try:
        with _lock:
            if _client is not None and _client.running:
                return _client
            client = Client(socket=socket, url=url, timeout=timeout, job=job, rank=rank)
            client.start(interval=interval, snapshot_every=snapshot_every)
            _client = client
            if not _atexit_registered:
                atexit.register(_stop_at_exit)
                _atexit_registered = True
            return client
    except Exception as e:
        log.debug("gpumem: start failed: %s", e)
        return _client


def stop() -> None:
    """Stop the client that start() started, sending what it has queued."""
    try:
        with _lock:
            client = _client
        if client is not None:
            client.stop()
    except Exception as e:
        log.debug("gpumem: stop failed: %s", e)


def _stop_at_exit() -> None:
    client = _client
    if client is not None and client.running:
        client.stop()


def get_client() -> Optional[Client]:
    """The client start() started, or None."""
    return _client


def mark(name: str, message: Optional[str] = None) -> bool:
    """Queue a named point for the next report of the started client (no-op without one)."""
    client = _client
    if client is None:
        return False
    return client.mark(name, message)


def phase(name: str) -> Any:
    """``with gpumem_client.phase("forward"):`` on the started client (no-op without one)."""
    client = _client
    if client is None:
        return contextlib.nullcontext()
    return client.phase(name)


def enter_phase(name: str) -> None:
    """Enter a phase until the next one, on the started client (no-op without one)."""
    client = _client
    if client is not None:
        client.enter_phase(name)


def report_model(model: Any, optimizer: Optional[Any] = None) -> bool:
    """Report model memory by component on the started client (no-op without one)."""
    client = _client
    if client is None:
        return False
    return client.report_model(model, optimizer)
