"""Running the edge: in the foreground under granian (HTTP/1.1 and h2c on one port), in a
background thread of the current process, or as a subprocess (for tests and benchmarks)."""
from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any

from .config import Settings, SettingsError
from .edge import Edge

log = logging.getLogger("kinesim")


def serve(settings: Settings) -> None:
    """Serve until SIGINT/SIGTERM. One process: state, readers and notifications are shared."""
    from granian.constants import HTTPModes, Interfaces
    from granian.server.mt import MTServer

    class OneProcessServer(MTServer):
        # granian runs workers as threads only on free-threaded Python and checks for it; its
        # WSGI worker is the same either way, and one process is what we need: a single owner
        # of the database and of the readers' wake-ups, and a `kill -9` that leaves no orphan.
        def _check_gil(self) -> None:
            pass

    warn_if_exposed(settings)
    try:
        edge = Edge(settings)
    except SettingsError as err:
        raise SystemExit(f"kinesim: {err}") from None
    log.info("kinesim listening on http://%s:%d (data: %s)", settings.host, settings.port,
             "in memory" if settings.in_memory else os.path.abspath(settings.data_dir))
    server = OneProcessServer(
        "kinesim.edge:Edge", address=settings.host, port=settings.port, interface=Interfaces.WSGI,
        http=HTTPModes.auto, workers=1, log_enabled=settings.log_level == "debug",
        # Threads are started as requests need them: a thousand cost nothing until held requests
        # (subscriptions, slow uploads, long polls) ask for them. They are kept 600 s idle (granian's
        # most), not its 30: the pool grows only when a request is queued, so a request handed to a
        # thread that is just ending its idle time waits for the next request to arrive; with every
        # other thread held (slow uploads), that can be never (a ListStreams behind 100 slow uploads
        # hung 60 s in one CI run, when the module's first threads reached 30 s idle).
        blocking_threads=settings.request_threads, backpressure=settings.request_threads,
        blocking_threads_idle_timeout=600)
    try:
        server.serve(target_loader=lambda *a, **k: edge, wrap_loader=False)
    finally:
        edge.close()
        log.info("kinesim stopped")


def warn_if_exposed(settings: Settings) -> None:
    """Say so when other machines can reach a server that runs whatever code it is sent."""
    if settings.host in ("127.0.0.1", "localhost", "::1") or settings.host.startswith("127."):
        return
    if settings.verify_signatures:
        log.warning("listening on %s: other machines can reach kinesim; only requests signed with the "
                    "configured credentials are served", settings.host)
        return
    log.warning("listening on %s: ANY machine that reaches this address can create and run functions "
                "(code execution on this machine) and read or delete all data, with any credentials. "
                "Use --host 127.0.0.1, or --verify-signatures with --credential KEY_ID:SECRET.", settings.host)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"kinesim exited with code {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url + "/_kinesim/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"kinesim at {url} not ready after {timeout}s")


class ServerProcess:
    """`kinesim serve` in a subprocess, exactly as a user runs it."""

    def __init__(self, settings: Settings | None = None, **overrides: Any):
        self.settings = settings or Settings(port=free_port(), **overrides)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.settings.port}"

    def command(self) -> list[str]:
        s = self.settings
        cmd = [sys.executable, "-m", "kinesim", "serve", "--host", s.host, "--port", str(s.port),
               "--data-dir", s.data_dir, "--create-stream-ms", str(s.create_stream_ms),
               "--delete-stream-ms", str(s.delete_stream_ms), "--update-stream-ms", str(s.update_stream_ms),
               "--shard-limit", str(s.shard_limit), "--region", s.region, "--account-id", s.account_id,
               "--log-level", s.log_level, "--iterator-ttl", str(s.iterator_ttl_s),
               "--retention-sweep", str(s.retention_sweep_s), "--retention-hour", str(s.retention_hour_s),
               "--subscription-lifetime", str(s.subscription_s),
               "--subscription-heartbeat", str(s.subscription_heartbeat_s),
               "--request-threads", str(s.request_threads), "--max-subscriptions", str(s.max_subscriptions),
               "--max-long-polls", str(s.max_long_polls),
               "--firehose-interval-scale", str(s.firehose_interval_scale)]
        for flag, values in (("--cors-origins", s.cors_origins), ("--allowed-hosts", s.allowed_hosts)):
            if values:
                cmd += [flag, *values]
        if s.verify_signatures:
            cmd.append("--verify-signatures")
        for credential in s.credentials:
            cmd += ["--credential", credential]
        if s.firehose_s3_endpoint:
            cmd += ["--firehose-s3-endpoint", s.firehose_s3_endpoint]
        if s.in_memory:
            cmd.append("--in-memory")
        if s.enforce_limits:
            cmd.append("--enforce-limits")
        return cmd

    def start(self, timeout: float = 30.0) -> "ServerProcess":
        self.proc = subprocess.Popen(self.command())
        wait_ready(self.url, timeout, self.proc)
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (for durability tests)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class InProcessServer:
    """The same edge served from a thread of this process (werkzeug, HTTP/1.1 only): for tests
    that want to reach into the service objects. Use `ServerProcess` or `serve` for speed."""

    def __init__(self, settings: Settings | None = None, **overrides: Any):
        self.settings = settings or Settings(port=free_port(), **overrides)
        self.edge: Edge | None = None
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.settings.port}"

    def start(self) -> "InProcessServer":
        from werkzeug.serving import make_server
        self.edge = Edge(self.settings)
        self._server = make_server(self.settings.host, self.settings.port, self.edge, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, name="kinesim-inprocess", daemon=True)
        self._thread.start()
        wait_ready(self.url)
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._thread.join(10)
            self.edge.close()
            self._server = None

    def __enter__(self) -> "InProcessServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
