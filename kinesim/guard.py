"""Who may talk to the server: the Host a request names and the web origin it comes from.

kinesim runs code it is sent (CreateFunction + Invoke) and deletes what it is told to, with no
credentials checked by default. That is fine for the processes of the user's own machine, and
must never be reachable by a web page the user happens to open:

* **Foreign origins.** A page on any site can send CORS-"simple" requests (`Content-Type:
  text/plain`, credentials in the query string) without a preflight. Browsers put an `Origin`
  header on every cross-origin request (and on same-origin ones that are not GET/HEAD), so a
  request whose `Origin` is not allowed is refused before it reaches a service. Allowed by
  default: pages served from this machine (`localhost`, `*.localhost`, `127.0.0.1`, `[::1]`, any
  port); `--cors-origins` adds more, `*` allows every origin. Requests without `Origin` (SDKs,
  the CLI, curl) are not browser requests and pass, unless the browser says in
  `Sec-Fetch-Site` that a foreign site caused them.
* **DNS rebinding.** A page on `evil.example` can make its own name resolve to 127.0.0.1 and then
  talk to the server "same-origin", with `Host: evil.example:4566`. So the `Host` header must
  name this server: an IP literal (a rebinding attack needs a DNS name), `localhost` or
  `*.localhost` (S3 virtual-host style), an AWS host name, the machine's own name when bound to
  every interface, or a name given with `--allowed-hosts`.

An allowed origin gets CORS answers as AWS gives them: a preflight (`OPTIONS` with
`Access-Control-Request-Method`) is answered 200 with the requested method and headers echoed and
`Access-Control-Max-Age: 172800`; every response names the origin in
`Access-Control-Allow-Origin` and exposes AWS's response headers (request ids included) so that
browser SDKs can read them.
"""
from __future__ import annotations

import ipaddress
import socket
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
LOOPBACK_BINDS = ("127.0.0.1", "localhost", "::1")
WILDCARD_BINDS = ("0.0.0.0", "::", "")
# Names no web page can point at this machine: `*.localhost` (S3 virtual-host style) resolves to
# loopback by definition, and AWS's own names are in AWS's DNS, not an attacker's (clients that
# map `kinesis.us-east-1.amazonaws.com` to kinesim in /etc/hosts send them).
TRUSTED_SUFFIXES = (".localhost", ".amazonaws.com", ".amazonaws.com.cn")
PREFLIGHT_MAX_AGE = "172800"
# Response headers a browser SDK reads: request ids, S3's object metadata and checksums, Lambda's
# function error and log tail, the event stream's content type.
EXPOSE_HEADERS = ",".join((
    "x-amzn-RequestId", "x-amzn-ErrorType", "x-amz-request-id", "x-amz-id-2", "x-amzn-ErrorMessage", "x-amz-apigw-id",
    "Date", "ETag", "Content-Length", "Content-Type", "Content-Range", "Last-Modified", "x-amz-version-id",
    "x-amz-delete-marker", "x-amz-server-side-encryption", "x-amz-checksum-crc32", "x-amz-checksum-crc32c",
    "x-amz-checksum-sha1", "x-amz-checksum-sha256", "x-amz-checksum-crc64nvme", "x-amz-function-error",
    "x-amz-log-result", "x-amz-executed-version",
))


class Refusal(Exception):
    """A request the guard will not let through: `message` tells the user what to change."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """`Host` without its port, lowercased: `[::1]:4566` -> `::1`, `a.localhost:1` -> `a.localhost`."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _normal_origin(origin: str) -> str:
    """An origin as compared: lowercase scheme and host, no trailing slash."""
    return origin.strip().rstrip("/").lower()


class RequestGuard:
    def __init__(self, bind_host: str, allowed_hosts: Iterable[str] = (), cors_origins: Iterable[str] = ()):
        self.any_origin = "*" in cors_origins
        self.origins = frozenset(_normal_origin(o) for o in cors_origins if o != "*")
        self.any_host = "*" in allowed_hosts
        names = {h.lower() for h in allowed_hosts if h != "*"}
        if bind_host not in WILDCARD_BINDS and bind_host not in LOOPBACK_BINDS:
            names.add(bind_host.lower())
        if bind_host in WILDCARD_BINDS:
            # Listening on every interface: the machine's own names reach it too.
            names.update(n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n)
        self.host_names = frozenset(n for n in names if not n.startswith("."))
        self.host_suffixes = tuple(n for n in names if n.startswith(".")) + TRUSTED_SUFFIXES
        # Host header values seen: a dict lookup on the hot path instead of parsing each time.
        self._hosts_seen: dict[str, bool] = {}

    # the checks

    def host_allowed(self, host_header: str | None) -> bool:
        if host_header is None or self.any_host:
            return True  # HTTP/1.0 without Host: no browser sends that
        known = self._hosts_seen.get(host_header)
        if known is None:
            name = _host_name(host_header)
            known = (name in LOCAL_NAMES or name in self.host_names or _is_ip_literal(name)
                     or name.endswith(self.host_suffixes))
            if len(self._hosts_seen) < 1024:
                self._hosts_seen[host_header] = known
        return known

    def origin_allowed(self, origin: str) -> bool:
        if self.any_origin:
            return True
        normal = _normal_origin(origin)
        if normal in self.origins:
            return True
        parts = urlsplit(normal)
        if parts.scheme not in ("http", "https"):
            return False  # `null` (sandboxed frames, file:// pages) and the like, unless listed
        host = parts.hostname or ""
        return host in LOCAL_NAMES or host.endswith(".localhost")

    def check(self, environ: dict[str, Any]) -> str | None:
        """The request's allowed origin (None: not a cross-origin browser request); raises Refusal."""
        if not self.host_allowed(environ.get("HTTP_HOST")):
            raise Refusal(
                f"Host {environ.get('HTTP_HOST')!r} is not a name of this kinesim server (a page using DNS "
                "rebinding sends such names). Reach it as localhost or by IP address, or start it with "
                "--allowed-hosts NAME.")
        origin = environ.get("HTTP_ORIGIN")
        if origin is None:
            if environ.get("HTTP_SEC_FETCH_SITE") == "cross-site":
                raise Refusal("A request caused by a page of another site is not served. Start kinesim with "
                              "--cors-origins ORIGIN to allow that site's pages.")
            return None
        if not self.origin_allowed(origin):
            raise Refusal(f"Origin {origin!r} is not allowed to call kinesim (only pages served from this "
                          "machine are, by default). Start kinesim with --cors-origins ORIGIN to allow it.")
        return origin

    # CORS answers for allowed origins

    @staticmethod
    def is_preflight(environ: dict[str, Any]) -> bool:
        # AWS answers any OPTIONS that carries an Origin as a preflight, even without
        # Access-Control-Request-Method (kinesalite's recordings of Kinesis).
        return environ.get("REQUEST_METHOD") == "OPTIONS"

    @staticmethod
    def preflight(environ: dict[str, Any], origin: str, start_response: Callable, request_id: str) -> list[bytes]:
        """200, empty, the requested method and headers echoed, cached for two days; a request id
        but no x-amz-id-2 (as AWS answers)."""
        headers = [("x-amzn-RequestId", request_id), ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
                   ("Access-Control-Max-Age", PREFLIGHT_MAX_AGE), ("Content-Length", "0")]
        for asked, allowed in (("HTTP_ACCESS_CONTROL_REQUEST_METHOD", "Access-Control-Allow-Methods"),
                               ("HTTP_ACCESS_CONTROL_REQUEST_HEADERS", "Access-Control-Allow-Headers")):
            if environ.get(asked):
                headers.append((allowed, environ[asked]))
        start_response("200 OK", headers)
        return [b""]

    @staticmethod
    def with_cors(origin: str, start_response: Callable) -> Callable:
        """`start_response` that adds the CORS headers of an allowed origin."""
        extra = [("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
                 ("Access-Control-Expose-Headers", EXPOSE_HEADERS)]

        def start(status: str, headers: list, exc_info: Any = None):
            return start_response(status, headers + extra, exc_info) if exc_info else \
                start_response(status, headers + extra)
        return start
