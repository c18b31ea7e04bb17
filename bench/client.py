"""A lean Kinesis client for the benchmark: one keep-alive HTTP/1.1 connection, AWS JSON 1.1.

No signing (a fixed, SigV4-shaped dummy Authorization header), no retries beyond re-sending once
when the server closed an idle keep-alive connection, no botocore: per request the client does a
dict lookup for the headers, one send, one read and one orjson parse. Not thread-safe: one per
thread.

Two implementations with the same interface, chosen by `Client()` from HTTP_IMPL (run.py sets it
from --http before any worker process is forked):
  stdlib  http.client.HTTPConnection
  raw     (run.py default) a minimal socket client: one sendall per request, Content-Length or
          chunked answers;
          about half the client CPU per small request, for when the client competes with the
          server for the cores
"""
from __future__ import annotations

import http.client
import socket
import time
from urllib.parse import urlsplit

try:
    import orjson

    def dumps(obj) -> bytes:
        return orjson.dumps(obj)

    loads = orjson.loads
except ImportError:  # pragma: no cover - orjson is a kinesim dependency
    import json

    def dumps(obj) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    loads = json.loads

TARGET_PREFIX = "Kinesis_20131202."
AMZ_DATE = "20260101T000000Z"
AUTHORIZATION = ("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/kinesis/aws4_request, "
                 "SignedHeaders=host;x-amz-date, Signature=0000")
CONNECTION_ERRORS = (http.client.RemoteDisconnected, http.client.CannotSendRequest,
                     http.client.ResponseNotReady, http.client.IncompleteRead,
                     ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class KinesisError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


def _error(status: int, data: bytes) -> KinesisError:
    code, message = f"HTTP{status}", data[:300].decode("utf-8", "replace")
    try:
        body = loads(data)
        code = str(body.get("__type") or code).rsplit("#", 1)[-1]
        message = body.get("message") or body.get("Message") or message
    except (ValueError, AttributeError):
        pass
    return KinesisError(status, code, message)


HTTP_IMPL = "stdlib"


def Client(endpoint: str, timeout: float = 120.0):  # noqa: N802 - reads like the class it returns
    return (RawClient if HTTP_IMPL == "raw" else StdClient)(endpoint, timeout)


class StdClient:
    """`call(op, params)` -> parsed JSON answer; `last_recv` = time.monotonic() when the answer
    had been read completely (before parsing), for latency measurements."""

    def __init__(self, endpoint: str, timeout: float = 120.0):
        u = urlsplit(endpoint)
        self.host, self.port, self.timeout = u.hostname, u.port or 80, timeout
        self.conn: http.client.HTTPConnection | None = None
        self.last_recv = 0.0
        self._headers: dict[str, dict[str, str]] = {}

    def headers(self, op: str) -> dict[str, str]:
        h = self._headers.get(op)
        if h is None:
            h = self._headers[op] = {
                "Content-Type": "application/x-amz-json-1.1",
                "X-Amz-Target": TARGET_PREFIX + op,
                "X-Amz-Date": AMZ_DATE,
                "Authorization": AUTHORIZATION,
            }
        return h

    def connect(self) -> None:
        self.close()
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def raw(self, op: str, body: bytes) -> bytes:
        """POST a ready-made JSON body; returns the raw 200 answer or raises KinesisError."""
        for attempt in (0, 1):
            if self.conn is None:
                self.connect()
            try:
                self.conn.request("POST", "/", body, self.headers(op))
                resp = self.conn.getresponse()
                data = resp.read()
                break
            except CONNECTION_ERRORS:
                self.close()
                if attempt:
                    raise
        self.last_recv = time.monotonic()
        if resp.will_close:
            self.close()
        if resp.status != 200:
            raise _error(resp.status, data)
        return data

    def call(self, op: str, params: dict | None = None) -> dict:
        data = self.raw(op, dumps(params or {}))
        return loads(data) if data else {}


class RawClient(StdClient):
    """The same over a plain socket; understands just enough HTTP/1.1 for these servers."""

    sock: socket.socket | None = None

    def __init__(self, endpoint: str, timeout: float = 120.0):
        super().__init__(endpoint, timeout)
        self._heads: dict[str, bytes] = {}
        self.buf = bytearray()
        self.used = 0

    def head(self, op: str) -> bytes:
        h = self._heads.get(op)
        if h is None:
            h = self._heads[op] = (f"POST / HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n" + "".join(
                f"{k}: {v}\r\n" for k, v in self.headers(op).items()) + "Content-Length: ").encode()
        return h

    def connect(self) -> None:
        self.close()
        self.sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.used = 0

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def raw(self, op: str, body: bytes) -> bytes:
        for attempt in (0, 1):
            if self.sock is None:
                self.connect()
            reused = self.used > 0
            try:
                self.sock.sendall(b"".join((self.head(op), str(len(body)).encode(), b"\r\n\r\n", body)))
                status, close, data = self._response()
                break
            except CONNECTION_ERRORS:
                self.close()
                if attempt or not reused:
                    raise
        self.last_recv = time.monotonic()
        self.used += 1
        if close:
            self.close()
        if status != 200:
            raise _error(status, data)
        return data

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 18)
        if not chunk:
            raise http.client.RemoteDisconnected("connection closed by the server")
        self.buf += chunk

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def _line(self) -> bytes:
        while (i := self.buf.find(b"\r\n")) < 0:
            self._fill()
        return self._take(i + 2)[:-2]

    def _response(self) -> tuple[int, bool, bytes]:
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            self._fill()
        head = self._take(end + 4).decode("latin-1").split("\r\n")
        status = int(head[0].split(" ", 2)[1])
        fields = {}
        for line in head[1:]:
            k, _, v = line.partition(":")
            fields[k.strip().lower()] = v.strip()
        close = fields.get("connection", "").lower() == "close"
        if "content-length" in fields:
            return status, close, self._take(int(fields["content-length"]))
        if "chunked" in fields.get("transfer-encoding", "").lower():
            parts = []
            while (size := int(self._line().split(b";")[0], 16)) > 0:
                parts.append(self._take(size))
                self._take(2)
            while self._line():  # trailers
                pass
            return status, close, b"".join(parts)
        try:  # no length: the body ends with the connection
            while True:
                self._fill()
        except http.client.RemoteDisconnected:
            return status, True, self._take(len(self.buf))
