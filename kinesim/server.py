"""Running the edge: in the foreground under granian (HTTP/1.1 and h2c on one port), in a
background thread of the current process, or as a subprocess (for tests and benchmarks)."""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import logging
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from .config import DEFAULT_KAFKA_PORT, Settings, SettingsError
from .edge import Edge
from .idle_connections import IdleReaper
from .store.owner import DataDirInUse, claim

log = logging.getLogger("kinesim")

MAX_HEAD_BYTES = 1024 * 1024 + 16 * 1024


def serve(settings: Settings, spark: bool = False, spark_memory: str | None = None,
          kafka_port_given: bool = True) -> None:
    """Serve until SIGINT/SIGTERM. One process: state, readers and notifications are shared.
    With `spark`, a warm Spark Connect server is started beside it (see analytics/connect_server);
    whoever started one, it is stopped when this server stops. `kafka_port_given`: the user chose
    `settings.kafka_port` (taken, it is an error; the default taken is a warning)."""
    from granian.constants import HTTPModes, Interfaces
    from granian.http import HTTP1Settings
    from granian.server.mt import MTServer

    class OneProcessServer(MTServer):
        # granian runs workers as threads only on free-threaded Python and checks for it; its
        # WSGI worker is the same either way, and one process is what we need: a single owner
        # of the database and of the readers' wake-ups, and a `kill -9` that leaves no orphan.
        def _check_gil(self) -> None:
            pass

        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.main_loop_interrupt = WakingEvent()

    limit_malloc_arenas()
    warn_if_exposed(settings)
    if not 0 < settings.idle_connection_s <= 60:
        raise SystemExit("kinesim: --idle-timeout must be more than 0 and at most 60 seconds")
    if spark:
        from .analytics import spark_extra  # finds, imports nothing of Spark's
        if spark_extra.missing():
            raise SystemExit(spark_extra.message("kinesim serve --spark"))
    url = f"http://{settings.host}:{settings.port}"
    try:
        owner = None if settings.in_memory else claim(settings.data_dir, url)
        check_port_free(settings.host, settings.port)
        kafka_sock = kafka_socket(settings.host, settings.kafka_port, kafka_port_given)
        if kafka_sock is None and settings.kafka_port:  # the default port was taken: no Kafka served,
            settings = dataclasses.replace(settings, kafka_port=0)  # and mappings must not think it is
        edge = Edge(settings)
    except (SettingsError, DataDirInUse) as err:
        raise SystemExit(f"kinesim: {err}") from None
    connections = raise_open_files_limit()
    log.info("kinesim listening on %s (data: %s)", url,
             "in memory" if settings.in_memory else os.path.abspath(settings.data_dir))
    log.info("web console: %s/_kinesim/console/", settings.local_url)
    supervisor = None
    if spark:
        from .analytics import connect_server
        supervisor = connect_server.spawn(settings.local_url, spark_memory)
    server = OneProcessServer(
        "kinesim.edge:Edge", address=settings.host, port=settings.port, interface=Interfaces.WSGI,
        http=HTTPModes.auto, workers=1, log_enabled=settings.log_level == "debug",
        # Threads are started as requests need them: a thousand cost nothing until held requests
        # (subscriptions, slow uploads, long polls) ask for them. They are kept 600 s idle (granian's
        # most), not its 30: the pool grows only when a request is queued, so a request handed to a
        # thread that is just ending its idle time waits for the next request to arrive; with every
        # other thread held (slow uploads), that can be never (a ListStreams behind 100 slow uploads
        # hung 60 s in one CI run, when the module's first threads reached 30 s idle).
        blocking_threads=settings.request_threads, blocking_threads_idle_timeout=600,
        # granian's backpressure counts connections, not requests: at its default (the thread count)
        # 1,024 idle connections left no room for a request. Connections are limited by open files
        # only; an idle one holds no thread, and is closed after --idle-timeout (granian's header-read
        # timeout, and the reaper for connections that never send a byte).
        backpressure=connections,
        # A request head may reach 1 MiB: a longer URL still gets 414 URI Too Long (granian's
        # default of 400 KiB answered 431 from there on, and closed on clients still sending).
        http1_settings=HTTP1Settings(header_read_timeout=max(1, int(settings.idle_connection_s * 1000)),
                                     max_buffer_size=MAX_HEAD_BYTES))
    reaper = IdleReaper(settings.port, settings.idle_connection_s).start()
    kafka = None
    if kafka_sock is not None:
        from .kafka.listener import KafkaListener  # kio's schemas load only when Kafka is served
        kafka = KafkaListener(edge, kafka_sock, settings.idle_connection_s).start()
    edge.keeper.start()
    try:
        server.serve(target_loader=lambda *a, **k: edge, wrap_loader=False)
    finally:
        edge.keeper.stop()
        reaper.stop()
        if kafka is not None:
            kafka.stop()  # its handlers use the store: stopped before the edge closes it
        # Stopping the server stops everything it started, and a warm Spark some `kinesim sql`
        # started for its data (the supervisor would otherwise wait for missed health checks).
        from .analytics import connect_server  # here, not at start-up (7 ms before the first answer)
        connect_server.stop_supervisor(os.path.dirname(edge.store.path))
        if supervisor is not None:  # gone by now, unless it was still starting
            connect_server.stop_process(supervisor)
        edge.close()
        if owner is not None:
            owner.release()
        log.info("kinesim stopped")


class WakingEvent(threading.Event):
    """An Event whose untimed wait wakes twice a second to let the main thread run signal handlers.
    Python runs them in the main thread only, and a SIGTERM or Ctrl-C the kernel hands to another
    of the process's threads does not wake a main thread blocked without a timeout: granian's main
    loop then slept on, and `kill` left the server running (stops under load hung until SIGKILL)."""

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None:
            return super().wait(timeout)
        while not super().wait(0.5):
            pass
        return True


def limit_malloc_arenas(arenas: int = 2) -> None:
    """Cap glibc's malloc arenas before the request threads exist. glibc gives each busy thread an
    arena of its own (up to 8 per core) and each keeps its highest use: after a fuzz run's large
    requests the server held 352 MiB, with two arenas 244 MiB, for 2% fewer requests per second.
    Elsewhere than glibc, nothing to do."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, arenas)


_M_ARENA_MAX = -8  # malloc.h


def check_port_free(host: str, port: int) -> None:
    """Refuse a port another server listens on. granian binds with SO_REUSEPORT, which Linux lets
    a second process share: two servers on one port would each get some of the connections. A
    bind without it fails while any socket listens there."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT leftovers are fine
        try:
            probe.bind((host, port))
        except OSError as err:
            raise port_error(host, port, err, "--port") from None


def port_error(host: str, port: int, err: OSError, flag: str) -> SettingsError:
    """What to say when `host:port` cannot be listened on; `flag` is the option that chose it."""
    if err.errno == errno.EADDRINUSE:
        from .port_holder import port_taken_message  # only when the port is taken
        return SettingsError(port_taken_message(host, port, err.strerror, flag))
    return SettingsError(f"cannot listen on {host}:{port}: {err.strerror}. Choose another --host or {flag}.")


def kafka_socket(host: str, port: int, explicit: bool) -> socket.socket | None:
    """The Kafka port's listening socket, or None when Kafka is off. A port the user asked for
    that is taken stops the server (the same error as the HTTP port's); the default one taken
    (another Kafka on this machine, most likely) only means no Kafka: one warning, and the rest
    of the server starts."""
    if not port:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # Bound for real, not probed: without SO_REUSEPORT the bind fails while any other socket
    # listens there. SO_REUSEADDR only lets a previous run's TIME_WAIT connections be.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)
    except OSError as err:
        sock.close()
        if explicit or err.errno != errno.EADDRINUSE:
            raise port_error(host, port, err, "--kafka-port") from None
        log.warning("kafka: %s:%d is taken (%s); Kafka clients are not served, use --kafka-port", host, port,
                    err.strerror)
        return None
    sock.setblocking(False)
    return sock


def raise_open_files_limit() -> int:
    """Raise this process's open-files limit to its hard limit (each connection is one) and give
    the number of connections the server may hold: that limit, less room for its own files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if wanted > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
    return max(256, soft - 256)


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
    import urllib.request  # for tests and tools: `kinesim serve` does not need it (12 ms of its start-up)
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
        # Kafka is off unless a test asks for it (with a free port): tests never bind 9092.
        # Groups form at once (no initial rebalance delay) unless a test asks for one.
        self.settings = settings or Settings(**{"port": free_port(), "kafka_port": 0, "kafka_initial_rebalance_ms": 0,
                                                **overrides})
        if settings is not None and settings.kafka_port == DEFAULT_KAFKA_PORT:
            self.settings = dataclasses.replace(settings, kafka_port=0)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return self.settings.local_url

    def command(self) -> list[str]:
        s = self.settings
        cmd = [sys.executable, "-m", "kinesim", "serve", "--host", s.host, "--port", str(s.port),
               "--data-dir", s.data_dir, "--create-stream-ms", str(s.create_stream_ms),
               "--delete-stream-ms", str(s.delete_stream_ms), "--update-stream-ms", str(s.update_stream_ms),
               "--shard-limit", str(s.shard_limit), "--stack-limit", str(s.stack_limit), "--region", s.region,
               "--account-id", s.account_id, "--log-level", s.log_level, "--iterator-ttl", str(s.iterator_ttl_s),
               "--retention-sweep", str(s.retention_sweep_s), "--retention-hour", str(s.retention_hour_s),
               "--subscription-lifetime", str(s.subscription_s),
               "--subscription-heartbeat", str(s.subscription_heartbeat_s),
               "--request-threads", str(s.request_threads), "--max-subscriptions", str(s.max_subscriptions),
               "--max-long-polls", str(s.max_long_polls), "--idle-timeout", str(s.idle_connection_s),
               "--firehose-interval-scale", str(s.firehose_interval_scale), "--kafka-port", str(s.kafka_port),
               "--kafka-initial-rebalance-ms", str(s.kafka_initial_rebalance_ms)]
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

    def start(self, timeout: float = 30.0, preexec_fn: Callable[[], None] | None = None) -> "ServerProcess":
        """`preexec_fn` runs in the child before the server (to reset a signal, say)."""
        self.proc = subprocess.Popen(self.command(), preexec_fn=preexec_fn)
        wait_ready(self.url, timeout, self.proc)
        return self

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout` (the server waits for a warm Spark to stop)."""
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
        return self.settings.local_url

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
