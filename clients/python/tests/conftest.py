"""Test helpers: a real HTTP/1.1 server on a Unix socket, a fake ``torch``, a report validator."""

import http.server
import json
import os
import shutil
import socket
import socketserver
import struct
import sys
import tempfile
import threading
import time
import types
from collections import deque
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the package, also when it is not installed

import gpumem_client  # noqa: E402

DOC = HERE.parents[2] / "docs" / "ingest.md"

UUID0 = "691620e2-e976-8472-86a6-fef67566f1fe"
UUID1 = "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"


# --------------------------------------------------------------------------- the server


class Recorded:
    def __init__(self, method, path, headers, body, peer_pid, conn_id):
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.peer_pid = peer_pid
        self.conn_id = conn_id

    @property
    def json(self) -> Dict[str, Any]:
        return json.loads(self.body.decode("utf-8"))


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        srv = self.server
        with srv.lock:
            srv.connections += 1
            self.conn_id = srv.connections
            srv.open_sockets.append(self.connection)

    def do_POST(self):
        srv = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        peer_pid = None
        if self.connection.family == socket.AF_UNIX:
            creds = self.connection.getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
            )
            peer_pid = struct.unpack("3i", creds)[0]
        rec = Recorded("POST", self.path, dict(self.headers), body, peer_pid, self.conn_id)
        with srv.lock:
            srv.requests.append(rec)
            status, answer, headers = srv.answers.popleft() if srv.answers else srv.default_answer
            delay = srv.delay
        if delay:
            time.sleep(delay)
        if answer is None:
            answer = {"accepted": True, "pid": peer_pid if peer_pid is not None else -1}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        if srv.close_silently:
            # Like a server closing an idle keep-alive connection: no "Connection: close".
            self.close_connection = True

    def log_message(self, *args):
        pass

    def address_string(self):
        return "unix"


class _Quiet:
    def handle_error(self, request, client_address):
        pass  # a client that gave up (the timeout tests) leaves a broken pipe here


class _UnixServer(_Quiet, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True


class _TcpServer(_Quiet, socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _prime(srv):
    srv.lock = threading.Lock()
    srv.requests = []  # type: List[Recorded]
    srv.answers = deque()
    srv.default_answer = (202, None, None)
    srv.connections = 0
    srv.delay = 0.0
    srv.close_silently = False
    srv.open_sockets = []


class ServerHandle:
    def __init__(self, srv, address):
        self.srv = srv
        self.address = address
        self.thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.daemon = True
        self.thread.start()

    @property
    def requests(self) -> List[Recorded]:
        with self.srv.lock:
            return list(self.srv.requests)

    @property
    def bodies(self) -> List[Dict[str, Any]]:
        return [r.json for r in self.requests]

    @property
    def connections(self) -> int:
        return self.srv.connections

    def answer(
        self,
        status: int,
        body: Optional[Dict[str, Any]] = None,
        times: int = 1,
        headers: Optional[Dict[str, str]] = None,
    ):
        with self.srv.lock:
            for _ in range(times):
                self.srv.answers.append((status, body, headers))

    def always(
        self,
        status: int,
        body: Optional[Dict[str, Any]] = None,
        headers: Optional[Dict[str, str]] = None,
    ):
        self.srv.default_answer = (status, body, headers)

    def wait_for(self, predicate: Callable[[List[Recorded]], bool], timeout: float = 5.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate(self.requests):
                return True
            time.sleep(0.01)
        return predicate(self.requests)

    def close(self):
        """Stop like a process that exits: the kept-alive connections end too."""
        self.srv.shutdown()
        self.srv.server_close()
        with self.srv.lock:
            for sock in self.srv.open_sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


# --------------------------------------------------------------------------- misbehaving servers


def read_request(conn: socket.socket, buf: bytearray) -> bool:
    """Read one request (head and Content-Length body) off ``conn``; False at end of stream."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return False
        buf += data
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return False
        rest += data
    buf[:] = rest[length:]
    return True


def answer_bytes(status: int = 202, body: Optional[Dict[str, Any]] = None) -> bytes:
    data = json.dumps(body if body is not None else {"accepted": True, "pid": os.getpid()})
    return (
        "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (status, len(data), data)
    ).encode()


class RawServer:
    """A listening socket whose connections ``behave(server, conn, index)`` handles, each in a
    thread: servers that are slow, silent or odd on purpose. close() ends every connection."""

    def __init__(self, behave: Callable[["RawServer", socket.socket, int], None], path=None):
        self.behave = behave
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.conns = []  # type: List[socket.socket]
        self.requests = 0
        if path is not None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(path)
            self.address = path
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.bind(("127.0.0.1", 0))
            self.address = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            conn.settimeout(None)
            with self.lock:
                self.conns.append(conn)
                index = len(self.conns) - 1
            threading.Thread(target=self._run, args=(conn, index), daemon=True).start()

    def _run(self, conn, index):
        try:
            self.behave(self, conn, index)
        except OSError:
            pass  # the client gave up and closed: that is what these tests are about

    def got_request(self):
        with self.lock:
            self.requests += 1

    def close(self):
        self.stopping.set()
        self.thread.join(2)
        self.sock.close()
        with self.lock:
            for conn in self.conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()


def silent(server: RawServer, conn: socket.socket, index: int) -> None:
    """Accepts and reads the request, never answers."""
    buf = bytearray()
    if read_request(conn, buf):
        server.got_request()
    server.stopping.wait()


def trickle(server: RawServer, conn: socket.socket, index: int) -> None:
    """A correct answer, one byte every 50 ms."""
    buf = bytearray()
    while read_request(conn, buf):
        server.got_request()
        for byte in answer_bytes():
            if server.stopping.wait(0.05):
                return
            conn.sendall(bytes([byte]))


def headers_only(server: RawServer, conn: socket.socket, index: int) -> None:
    """The head of a 202 with a body announced and never sent."""
    buf = bytearray()
    if read_request(conn, buf):
        server.got_request()
        conn.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 40\r\n\r\n")
    server.stopping.wait()


def fill_backlog(path: str, tries: int = 256):
    """A Unix socket that listens and never accepts, its backlog full; None where the
    platform does not refuse at once (then a connect() could not be made to wait either)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(0)
    fillers = []
    for _ in range(tries):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(path)
        except (BlockingIOError, InterruptedError):
            s.close()
            return listener, fillers
        except OSError:
            s.close()
            break
        fillers.append(s)
    for s in fillers:
        s.close()
    listener.close()
    return None


@pytest.fixture
def sockdir():
    # Unix socket paths are limited to 108 bytes: keep them short.
    d = tempfile.mkdtemp(prefix="gm")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def start_unix_server(path: str) -> ServerHandle:
    srv = _UnixServer(path, _Handler)
    _prime(srv)
    return ServerHandle(srv, path)


@pytest.fixture
def server(sockdir):
    path = os.path.join(sockdir, "ingest.sock")
    handle = start_unix_server(path)
    yield handle
    handle.close()


@pytest.fixture
def tcp_server():
    srv = _TcpServer(("127.0.0.1", 0), _Handler)
    _prime(srv)
    handle = ServerHandle(srv, "http://127.0.0.1:%d" % srv.server_address[1])
    yield handle
    handle.close()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in (
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "TORCHELASTIC_RUN_ID",
        "GPUMEM_INGEST_SOCKET",
        "GPUMEM_INGEST_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    yield
    gpumem_client.stop()
    gpumem_client._client = None


# --------------------------------------------------------------------------- fake frameworks


class FakeUuid:
    """Like torch's _CUuuid: str() gives the bare UUID."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self):
        return self.text


def torch_stats(allocated, reserved, **extra) -> Dict[str, int]:
    stats = {
        "allocated_bytes.all.current": allocated,
        "reserved_bytes.all.current": reserved,
        "active_bytes.all.current": allocated + 4096,
        "inactive_split_bytes.all.current": 2 << 20,
        "segment.all.current": 7,
        "num_alloc_retries": 1,
        "num_ooms": 0,
        "allocated_bytes.all.peak": allocated + (1 << 20),
        "reserved_bytes.all.peak": reserved,
        # keys a real memory_stats() has that the protocol does not carry
        "allocation.all.current": 99,
        "requested_bytes.all.current": allocated - 10,
    }
    stats.update(extra)
    return stats


class FakeCuda:
    def __init__(self, initialized: bool = True):
        self.initialized = initialized
        self.calls = []  # type: List[Any]
        self.stats = {
            0: torch_stats(8 << 30, 12 << 30),
            1: torch_stats(0, 0, **{"reserved_bytes.all.peak": 0}),
        }
        self.uuids = {0: UUID0, 1: UUID1}
        self.segments = [
            {
                "device": 0,
                "total_size": 20 << 20,
                "allocated_size": 2 << 20,
                "blocks": [
                    {"size": 2 << 20, "state": "active_allocated"},
                    {"size": 18 << 20, "state": "inactive"},
                ],
            },
            {
                "device": 0,
                "total_size": 64 << 20,
                "allocated_size": 32 << 20,
                "blocks": [
                    {"size": 8 << 20, "state": "inactive"},
                    {"size": 32 << 20, "state": "active_allocated"},
                    {"size": 24 << 20, "state": "inactive"},
                ],
            },
            {
                # cannot beat 24 MiB: its blocks must not even be looked at
                "device": 0,
                "total_size": 10 << 20,
                "allocated_size": 0,
                "blocks": None,
            },
        ]

    def is_available(self):
        return True

    def is_initialized(self):
        return self.initialized

    def device_count(self):
        return len(self.stats)

    def current_device(self):
        return 0

    def memory_stats(self, device=None):
        self.calls.append(("memory_stats", device))
        return dict(self.stats[device])

    def memory_snapshot(self):
        self.calls.append(("memory_snapshot",))
        return self.segments

    def get_device_properties(self, device):
        self.calls.append(("get_device_properties", device))
        return types.SimpleNamespace(name="Fake GPU", uuid=FakeUuid(self.uuids[device]))

    def count(self, name):
        return sum(1 for c in self.calls if c[0] == name)


def make_fake_torch(initialized: bool = True, observer_hook: bool = True) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.cuda = FakeCuda(initialized)
    torch.observers = []
    c = types.SimpleNamespace()
    if observer_hook:
        c._cuda_attach_out_of_memory_observer = torch.observers.append
    torch._C = c
    return torch


@pytest.fixture
def fake_torch(monkeypatch):
    torch = make_fake_torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    # the OOM observer is attached once per process: let each test attach its own
    monkeypatch.setattr(gpumem_client.client, "_oom_attached_pid", 0)
    return torch


@pytest.fixture
def no_frameworks(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "jax", raising=False)


# --------------------------------------------------------------------------- the protocol

MAX_BYTES = 1 << 53

# Every field of docs/ingest.md "Body, version 1", with its check.
TOP = {"version", "identity", "devices", "phase", "events", "components"}
IDENTITY = {"job", "rank", "local_rank", "world_size"}
DEVICE_REQUIRED = {"uuid", "allocated_bytes", "reserved_bytes"}
DEVICE_INTS = {
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "segments",
    "alloc_retries",
    "ooms",
    "allocated_peak_bytes",
    "reserved_peak_bytes",
    "largest_free_block_bytes",
}
DEVICE = DEVICE_INTS | {"uuid", "allocator"}
EVENT = {"kind", "name", "message", "request_bytes", "free_bytes"}
COMPONENT = {"component", "parameters_bytes", "gradients_bytes", "optimizer_bytes"}


def documented_fields():
    return (
        {"version", "identity", "devices", "phase", "events", "components"}
        | {"identity." + k for k in IDENTITY}
        | {"devices[]." + k for k in DEVICE}
        | {"events[]." + k for k in EVENT}
        | {"components[]." + k for k in COMPONENT}
    )


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def validate_report(body: Dict[str, Any], strict_uuid: bool = True) -> None:
    """Assert that ``body`` is a version-1 report exactly as docs/ingest.md describes it."""
    assert isinstance(body, dict)
    assert set(body) <= TOP, "unknown top-level members %s" % (set(body) - TOP)
    assert body["version"] == 1 and _is_int(body["version"])
    if "identity" in body:
        ident = body["identity"]
        assert isinstance(ident, dict) and set(ident) <= IDENTITY
        if "job" in ident:
            assert isinstance(ident["job"], str) and 0 < len(ident["job"]) <= 128
        for k in ("rank", "local_rank", "world_size"):
            if k in ident:
                assert _is_int(ident[k]) and 0 <= ident[k] <= 1000000
    devices = body["devices"]
    assert isinstance(devices, list) and len(devices) <= 64
    for d in devices:
        assert isinstance(d, dict)
        assert DEVICE_REQUIRED <= set(d) <= DEVICE, set(d) ^ DEVICE
        assert isinstance(d["uuid"], str) and d["uuid"]
        if strict_uuid:
            assert d["uuid"].startswith("GPU-"), d["uuid"]
        if "allocator" in d:
            assert isinstance(d["allocator"], str) and d["allocator"]
        for k in DEVICE_INTS & set(d):
            assert _is_int(d[k]) and 0 <= d[k] <= MAX_BYTES, (k, d[k])
        assert d["allocated_bytes"] <= d["reserved_bytes"] + (1 << 20)
    if "phase" in body:
        assert body["phase"] is None or (
            isinstance(body["phase"], str) and len(body["phase"]) <= 64
        )
    if "events" in body:
        events = body["events"]
        assert isinstance(events, list) and len(events) <= 256
        for e in events:
            assert set(e) <= EVENT and {"kind", "name"} <= set(e)
            assert e["kind"] in ("phase", "mark", "oom")
            assert isinstance(e["name"], str) and len(e["name"]) <= 64
            if "message" in e:
                assert isinstance(e["message"], str) and len(e["message"]) <= 1024
            for k in ("request_bytes", "free_bytes"):
                if k in e:
                    assert e["kind"] == "oom" and _is_int(e[k]) and 0 <= e[k] <= MAX_BYTES, (k, e[k])
    if "components" in body:
        comps = body["components"]
        assert isinstance(comps, list) and len(comps) <= 32
        for c in comps:
            assert set(c) <= COMPONENT and "component" in c
            assert isinstance(c["component"], str) and 0 < len(c["component"]) <= 32
            for k in ("parameters_bytes", "gradients_bytes", "optimizer_bytes"):
                if k in c:
                    assert _is_int(c[k]) and 0 <= c[k] <= MAX_BYTES


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
