"""HTTP/1.1 to the exporter's ingest endpoint over a Unix domain socket (or loopback TCP).

One connection is kept open between reports (HTTP keep-alive) and opened again after any
error. A request has one deadline for connecting, sending and reading the whole answer: every
socket operation is given only the time that is left of it. ``http.client`` is not used here
because its timeout applies to each ``recv()`` afresh, so a server that answers a byte at a
time, or sends its headers and never the body, would hold the caller (the training step) for
as long as it likes.
"""

import http.client
import os
import re
import select
import socket
import time
import urllib.parse
from typing import Dict, List, NamedTuple, Optional, Tuple

REPORT_PATH = "/api/v1/report"
DEFAULT_SOCKET = "/run/gpumem/ingest.sock"

# The exporter answers with a few hundred bytes; anything far larger is not its answer, and
# reading it would only cost memory and time.
MAX_HEAD_BYTES = 64 * 1024
MAX_ANSWER_BYTES = 1 << 20
_RECV_BYTES = 64 * 1024

_HEAD_END = re.compile(b"\r?\n\r?\n")


class DeadlineTimeout(socket.timeout):
    """The request did not complete within its deadline."""


class BadAnswer(ConnectionError):
    """What came back is not an HTTP/1.x answer this client can read."""


class Answer(NamedTuple):
    status: int
    body: bytes
    headers: Dict[str, str]  # names in lower case; repeated headers joined with ", "


class _Deadline:
    __slots__ = ("timeout", "end")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.end = time.monotonic() + timeout

    def left(self) -> float:
        """Seconds left; raises DeadlineTimeout when none are."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise self.expired()
        return left

    def expired(self) -> DeadlineTimeout:
        return DeadlineTimeout(
            "timed out: no complete answer within the %.3g s deadline" % self.timeout
        )


class _Connection:
    """A connected socket, what has been read from it beyond the last answer, and the pid that
    opened it."""

    __slots__ = ("sock", "buf", "pid", "received")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.pid = os.getpid()
        self.received = 0  # bytes read during the current request

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _recv(self, deadline: _Deadline) -> bytes:
        self.sock.settimeout(deadline.left())
        try:
            data = self.sock.recv(_RECV_BYTES)
        except socket.timeout:
            raise deadline.expired() from None
        self.received += len(data)
        return data

    def send_all(self, data: bytes, deadline: _Deadline) -> None:
        view = memoryview(data)
        while view:
            self.sock.settimeout(deadline.left())
            try:
                sent = self.sock.send(view)
            except socket.timeout:
                raise deadline.expired() from None
            view = view[sent:]

    def read_head(self, deadline: _Deadline) -> bytes:
        while True:
            found = _HEAD_END.search(self.buf)
            if found is not None:
                head = bytes(self.buf[: found.start()])
                del self.buf[: found.end()]
                return head
            if len(self.buf) > MAX_HEAD_BYTES:
                raise BadAnswer("answer headers longer than %d bytes" % MAX_HEAD_BYTES)
            data = self._recv(deadline)
            if not data:
                if not self.buf:
                    raise ConnectionResetError("the exporter closed the connection unanswered")
                raise BadAnswer("the exporter closed the connection inside the answer headers")
            self.buf += data

    def read_line(self, deadline: _Deadline) -> bytes:
        while True:
            end = self.buf.find(b"\n")
            if end >= 0:
                line = bytes(self.buf[:end]).rstrip(b"\r")
                del self.buf[: end + 1]
                return line
            if len(self.buf) > MAX_HEAD_BYTES:
                raise BadAnswer("chunked answer with a line longer than %d bytes" % MAX_HEAD_BYTES)
            data = self._recv(deadline)
            if not data:
                raise BadAnswer("the exporter closed the connection inside a chunked answer")
            self.buf += data

    def read_exact(self, n: int, deadline: _Deadline) -> bytes:
        while len(self.buf) < n:
            data = self._recv(deadline)
            if not data:
                raise BadAnswer("answer body cut short: %d of %d bytes" % (len(self.buf), n))
            self.buf += data
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_to_eof(self, deadline: _Deadline) -> bytes:
        while True:
            if len(self.buf) > MAX_ANSWER_BYTES:
                raise BadAnswer("answer body longer than %d bytes" % MAX_ANSWER_BYTES)
            data = self._recv(deadline)
            if not data:
                out = bytes(self.buf)
                self.buf.clear()
                return out
            self.buf += data


def _parse_head(head: bytes) -> Tuple[int, str, Dict[str, str]]:
    lines = head.replace(b"\r\n", b"\n").split(b"\n")
    parts = lines[0].split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or len(parts[1]) != 3:
        raise BadAnswer("not an HTTP/1.x status line: %r" % lines[0][:80])
    try:
        status = int(parts[1])
    except ValueError:
        raise BadAnswer("not an HTTP status: %r" % parts[1]) from None
    headers = {}  # type: Dict[str, str]
    name = None  # type: Optional[str]
    for raw in lines[1:]:
        line = raw.decode("latin-1")
        if line[:1] in (" ", "\t") and name is not None:
            headers[name] += " " + line.strip()  # obsolete line folding
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise BadAnswer("malformed header line: %r" % line[:80])
        name = key.strip().lower()
        value = value.strip()
        headers[name] = headers[name] + ", " + value if name in headers else value
    return status, parts[0].decode("latin-1"), headers


def _tokens(value: str) -> List[str]:
    return [t.strip().lower() for t in value.split(",") if t.strip()]


def _content_length(value: str) -> int:
    # A repeated header is joined with ", "; the copies must agree (RFC 9112, 6.3).
    values = set(_tokens(value))
    if len(values) != 1:
        raise BadAnswer("conflicting Content-Length: %r" % value)
    (text,) = values
    if not text.isdigit():
        raise BadAnswer("bad Content-Length: %r" % value)
    n = int(text)
    if n > MAX_ANSWER_BYTES:
        raise BadAnswer("answer body of %d bytes" % n)
    return n


def _read_chunked(conn: _Connection, deadline: _Deadline) -> bytes:
    body = bytearray()
    while True:
        size_text = conn.read_line(deadline).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadAnswer("bad chunk size: %r" % size_text[:20]) from None
        if size < 0 or len(body) + size > MAX_ANSWER_BYTES:
            raise BadAnswer("chunked answer body over %d bytes" % MAX_ANSWER_BYTES)
        if size == 0:
            while conn.read_line(deadline):
                pass  # trailer fields: nothing here needs them
            return bytes(body)
        body += conn.read_exact(size, deadline)
        if conn.read_line(deadline):
            raise BadAnswer("chunk not followed by CRLF")


def read_answer(conn: _Connection, deadline: _Deadline) -> Tuple[Answer, bool]:
    """One answer from ``conn``; the flag says whether the connection can carry another."""
    while True:
        status, version, headers = _parse_head(conn.read_head(deadline))
        if 100 <= status < 200 and status != 101:
            continue  # interim answer (100 Continue, 103 Early Hints): the real one follows
        break
    connection = _tokens(headers.get("connection", ""))
    if version == "HTTP/1.0":
        keep = "keep-alive" in connection
    else:
        keep = "close" not in connection
    coding = _tokens(headers.get("transfer-encoding", ""))
    if status in (101, 204, 304):
        body = b""
    elif coding:
        if coding[-1] != "chunked":
            raise BadAnswer("unsupported Transfer-Encoding: %s" % headers["transfer-encoding"])
        body = _read_chunked(conn, deadline)
    elif "content-length" in headers:
        body = conn.read_exact(_content_length(headers["content-length"]), deadline)
    else:
        body = conn.read_to_eof(deadline)  # delimited by the server closing the connection
        keep = False
    if status == 101 or conn.buf:
        keep = False  # a protocol switch, or bytes no request asked for: start afresh
    return Answer(status, body, headers), keep


def _peer_has_spoken(sock: socket.socket) -> bool:
    """True when an idle kept-alive connection is readable: the server closed it (EOF) or sent
    something unasked. Either way it cannot carry the next request."""
    try:
        if hasattr(select, "poll"):
            # poll, not select: select() fails for descriptors above FD_SETSIZE (1024), which
            # a training process with many data-loader workers and files easily passes.
            poller = select.poll()
            poller.register(sock, select.POLLIN | select.POLLPRI)
            return bool(poller.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)
    except (OSError, ValueError):
        return True


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTPConnection whose connect() opens an AF_UNIX stream socket.

    Kept for code that talks to the ingest socket itself. Its timeout, like any
    HTTPConnection's, bounds each socket operation, not the request: the client does not use
    it."""

    def __init__(self, path: str, timeout: float = 0.5) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def parse_url(url: str) -> Tuple[str, int, str]:
    """(host, port, request path) for an ingest URL such as ``http://127.0.0.1:9401``."""
    parsed = urllib.parse.urlsplit(url.strip())
    if parsed.scheme != "http":
        raise ValueError("ingest URL must start with http:// (got %r)" % url)
    host = parsed.hostname
    if not host:
        raise ValueError("ingest URL has no host: %r" % url)
    port = parsed.port or 80
    path = parsed.path.rstrip("/")
    if not path.endswith(REPORT_PATH):
        path += REPORT_PATH
    return host, port, path


# Errors of a kept-alive connection that the server closed while it sat idle.
_STALE_ERRORS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class Transport:
    """Posts report bodies. Raises OSError (DeadlineTimeout when the deadline passed,
    BadAnswer when the answer cannot be read) when no complete answer came."""

    def __init__(self, socket_path: Optional[str] = None, url: Optional[str] = None) -> None:
        self.socket_path = socket_path
        self.url = url
        self._addresses = []  # type: List[Tuple]
        if url:
            self._host, self._port, self._path = parse_url(url)
            host = self._host
            self._host_header = "%s:%d" % ("[%s]" % host if ":" in host else host, self._port)
            # Resolved once, here: getaddrinfo() knows no deadline, and a lookup that hangs
            # would hold every request. The TCP ingest is loopback-only, so the address
            # does not change under a running job.
            self._addresses = socket.getaddrinfo(
                host, self._port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
            )
        else:
            if not socket_path:
                socket_path = DEFAULT_SOCKET
            self.socket_path = socket_path
            self._path = REPORT_PATH
            self._host_header = "localhost"
        self._conn = None  # type: Optional[_Connection]
        self.connections_opened = 0

    def twin(self) -> "Transport":
        """A transport to the same endpoint with a connection of its own; the TCP address is
        not looked up again."""
        other = Transport.__new__(Transport)
        other.__dict__.update(self.__dict__)
        other._conn = None
        other.connections_opened = 0
        return other

    def describe(self) -> str:
        return self.url if self.url else "unix:" + str(self.socket_path)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _connect(self, deadline: _Deadline) -> _Connection:
        if not self.url:
            targets = [(socket.AF_UNIX, socket.SOCK_STREAM, 0, str(self.socket_path))]
        else:
            targets = [(a[0], a[1], a[2], a[4]) for a in self._addresses]
        error = None  # type: Optional[BaseException]
        for family, kind, proto, address in targets:
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(deadline.left())
                sock.connect(address)
            except socket.timeout:
                sock.close()
                raise deadline.expired() from None
            except OSError as e:
                # A Unix socket whose backlog is full refuses at once (EAGAIN) rather than
                # making a caller with a timeout wait: that too is a failed request.
                sock.close()
                error = e
                continue
            except BaseException:
                sock.close()
                raise
            if family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connections_opened += 1
            return _Connection(sock)
        raise error if error is not None else ConnectionError("no address for %s" % self.url)

    def _request(self, payload: bytes) -> bytes:
        head = [
            "POST %s HTTP/1.1" % self._path,
            "Host: %s" % self._host_header,
            "Content-Type: application/json",
            "Content-Length: %d" % len(payload),
            "Accept-Encoding: identity",
        ]
        if self.url:
            # TCP has no peer credentials: the exporter takes the pid from here.
            head.append("X-Gpumem-Pid: %d" % os.getpid())
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload

    def post(self, payload: bytes, timeout: float) -> Answer:
        """POST one body and read the whole answer, all within ``timeout`` seconds."""
        deadline = _Deadline(timeout)
        request = self._request(payload)
        for attempt in (0, 1):
            conn = self._conn
            if conn is not None and conn.pid != os.getpid():
                # Inherited across fork(): the parent owns the conversation on it. Closing
                # this process's descriptor leaves the parent's connection as it is.
                self.close()
                conn = None
            if conn is not None and _peer_has_spoken(conn.sock):
                self.close()
                conn = None
            reused = conn is not None
            try:
                if conn is None:
                    conn = self._connect(deadline)
                    self._conn = conn
                conn.received = 0
                conn.send_all(request, deadline)
                answer, keep = read_answer(conn, deadline)
            except _STALE_ERRORS:
                self.close()
                # The server closed the idle connection just as it was reused, before any
                # of an answer came: one more try on a new connection, within the same
                # deadline.
                if not reused or attempt or conn is None or conn.received:
                    raise
                deadline.left()  # raises when nothing is left for a second try
                continue
            except BaseException:
                self.close()
                raise
            if not keep:
                self.close()
            return answer
        raise ConnectionError("gpumem ingest: unreachable")  # not reached
