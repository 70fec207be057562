"""HTTP/1.1 to the exporter's ingest endpoint over a Unix domain socket (or loopback TCP).

One connection is kept open between reports (HTTP keep-alive) and opened again after any
error. Every request has a deadline: nothing here blocks longer than the timeout it is given.
"""

import http.client
import os
import socket
import time
import urllib.parse
from typing import Dict, Optional, Tuple

REPORT_PATH = "/api/v1/report"
DEFAULT_SOCKET = "/run/gpumem/ingest.sock"

# Errors that a kept-alive connection the server has closed in the meantime produces on reuse.
_STALE_ERRORS = (
    BrokenPipeError,
    ConnectionResetError,  # http.client.RemoteDisconnected is one of these
    ConnectionAbortedError,
)


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTPConnection whose connect() opens an AF_UNIX stream socket."""

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


class Transport:
    """Posts report bodies; raises OSError or http.client.HTTPException when no answer came."""

    def __init__(self, socket_path: Optional[str] = None, url: Optional[str] = None) -> None:
        self.socket_path = socket_path
        self.url = url
        if url:
            self._host, self._port, self._path = parse_url(url)
        else:
            if not socket_path:
                socket_path = DEFAULT_SOCKET
            self.socket_path = socket_path
            self._path = REPORT_PATH
        self._conn = None  # type: Optional[http.client.HTTPConnection]
        self._conn_pid = 0
        self.connections_opened = 0

    def describe(self) -> str:
        return self.url if self.url else "unix:" + str(self.socket_path)

    def _open(self, timeout: float) -> http.client.HTTPConnection:
        if self.url:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        else:
            conn = UnixHTTPConnection(str(self.socket_path), timeout=timeout)
        self.connections_opened += 1
        return conn

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def post(self, payload: bytes, timeout: float) -> Tuple[int, bytes]:
        """POST one body; returns (status, response body)."""
        deadline = time.monotonic() + timeout
        headers = {"Content-Type": "application/json"}  # type: Dict[str, str]
        if self.url:
            headers["X-Gpumem-Pid"] = str(os.getpid())
        for attempt in (0, 1):
            conn = self._conn
            if conn is not None and self._conn_pid != os.getpid():
                # Inherited across fork(): the socket is shared with the parent. Leave it alone.
                self._conn = conn = None
            fresh = conn is None
            if conn is None:
                conn = self._open(max(0.001, deadline - time.monotonic()))
                self._conn = conn
                self._conn_pid = os.getpid()
            try:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise socket.timeout("gpumem ingest: deadline passed")
                conn.timeout = remaining
                if conn.sock is not None:
                    conn.sock.settimeout(remaining)
                conn.request("POST", self._path, body=payload, headers=headers)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise socket.timeout("gpumem ingest: deadline passed")
                if conn.sock is not None:
                    conn.sock.settimeout(remaining)
                response = conn.getresponse()
                data = response.read()
                if response.will_close:
                    self.close()
                return response.status, data
            except _STALE_ERRORS:
                self.close()
                if fresh or attempt or time.monotonic() >= deadline:
                    raise
                # The server closed the idle kept-alive connection: open a new one once.
            except BaseException:
                self.close()
                raise
        raise ConnectionError("gpumem ingest: unreachable")  # not reached
