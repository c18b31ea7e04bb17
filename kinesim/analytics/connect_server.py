"""One warm Spark Connect server per kinesim server, so that `kinesim sql` answers in seconds.

``ensure(endpoint_url, memory=None, say=None) -> "sc://127.0.0.1:PORT"``: the address of the
Spark Connect server kept for the kinesim server at `endpoint_url`, started when none runs.

The Spark server (PySpark's own ``SparkConnectServer`` class, run with ``spark-submit``) is the
child of a small supervisor process (``python -m kinesim.analytics.connect_server ENDPOINT``)
that outlives the `kinesim sql` which started it and stops Spark when the kinesim server stops
answering its health check: Spark is "stopped with the server" whoever started it
(`kinesim serve --spark` starts the same supervisor at once). Its JVM maps a class-data-sharing
archive of Spark's classes and its Python workers import PySpark's compiled modules (`spark_jvm`),
and its SQL settings suit a small machine (`settings`).

Warming up (`warmup`: a new JVM's first queries cost several times later ones) happens before
Spark is recorded ready only when nobody waits for it (`kinesim serve --spark`), so that the first
`kinesim sql` finds a warmed-up Spark. A `kinesim sql` that started Spark itself (``--quick``) is
not kept waiting for it: its own query warms the JVM up as much, and the warm-up would have
doubled the wait (measured: 39 s of warm-up on a busy machine before a 3 s query). Once Spark is
recorded ready and its JVM has idled for `IDLE_S` (no query of anyone's to slow down), the
supervisor runs a continuous query's first micro-batches (`warmup_stream`), so that the first
`kinesim sql --continuous` does not pay the JVM's first streaming query; ``server.json`` says how
far that is (``warm_up``: pending, running, done).

Its state lives next to the server's buckets (``<data dir>/spark-connect/``): ``server.json``
(pid, port) once Spark is ready, the warehouse and Derby metastore directories, JSON tables' kept
schemas (``schemas/``, `json_schemas`), the tables kept in Spark's memory (``warm/``,
`table_cache`), and Spark's log (``spark.log``).
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Callable

# Where the state is (also imported from here by callers).
from .state import STATE_DIR_NAME, state_dir

STATE_FILE = "server.json"
SUPERVISOR_LOCK = "supervisor.lock"
RECORDING = "cds-recording"   # present while Spark's JVM records its class archive (spark_jvm)
START_TIMEOUT_S = 180.0
# Health checks the kinesim server may miss in a row (a busy machine) before Spark is stopped.
MISSES_BEFORE_STOP = 5
CHECK_EVERY_S = 2.0
# The warm-up takes ~5-15 s on a quiet 2-core machine; past this Spark is recorded ready anyway.
WARM_UP_TIMEOUT_S = 120.0
# The streaming warm-up waits for Spark's JVM to use less than IDLE_CPU of a core for IDLE_S (a
# command keeps it busier than that; between two commands of a script it idles ~1-2 s).
IDLE_S, IDLE_CPU = 5.0, 0.1
# What the first `kinesim sql` waits for when it starts Spark, as measured on the 2-core VM
# (bench/sql_waits.py; bench/README.md): the command's progress line says it.
FIRST_QUERY_WAIT = "~10-15 s on a quiet 2-core machine, ~15-25 s with one core busy, more under heavier load"


def shuffle_partitions() -> int:
    """Spark's default of 200 shuffle partitions is for clusters: here each GROUP BY scheduled 200
    tasks on 2 cores (adaptive execution coalesces them after the map stage, not before it).
    Measured over 1M cached rows: 0.43 s with 4, 0.5-0.65 s with 200. Two per core, at least 4."""
    return max(4, 2 * (os.cpu_count() or 2))


def settings() -> dict[str, str]:
    """The warm server's Spark SQL settings (a session's --conf overrides them)."""
    return {"spark.sql.shuffle.partitions": str(shuffle_partitions())}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def running(directory: str) -> str | None:
    """The sc:// address of a Spark Connect server recorded in `directory` that still answers."""
    try:
        with open(os.path.join(directory, STATE_FILE)) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    if _alive(int(state.get("pid", 0))) and _listening(int(state.get("port", 0))):
        return f"sc://127.0.0.1:{state['port']}"
    return None


def recorded_pid(directory: str) -> int:
    """The pid of the Spark recorded ready in `directory` (0 if none): which Spark a kept session
    belongs to (sessions)."""
    try:
        with open(os.path.join(directory, STATE_FILE)) as f:
            return int(json.load(f).get("pid", 0))
    except (OSError, ValueError, AttributeError):
        return 0


def _healthy(endpoint_url: str) -> bool:
    try:
        with urllib.request.urlopen(endpoint_url.rstrip("/") + "/_kinesim/health", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def ensure(endpoint_url: str, s3_root: str, memory: str | None = None,
           say: Callable[[str], None] | None = None) -> str:
    """The warm server's address, starting it (and waiting for it) when none runs."""
    directory = state_dir(s3_root)
    os.makedirs(directory, exist_ok=True)
    address = running(directory)
    if address:
        return address
    # One starter at a time: two first queries at once share one Spark.
    with open(os.path.join(directory, "start.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        address = running(directory)
        if address:
            return address
        if say:
            say(f"Spark is starting ({FIRST_QUERY_WAIT}; later queries reuse it)...")
        # A supervisor may be starting Spark already (`kinesim serve --spark`): wait for it.
        supervisor = None if _supervised(directory) else spawn(endpoint_url, memory, quick=True)
        started = time.monotonic()
        deadline = started + START_TIMEOUT_S
        while time.monotonic() < deadline:
            address = running(directory)
            if address:
                if say:
                    say(f"Spark ready after {time.monotonic() - started:.0f} s")
                return address
            # Ours may have lost the race to another supervisor: then that one is waited for.
            if (supervisor is None or supervisor.poll() is not None) and not _supervised(directory):
                break
            time.sleep(0.25)
        raise RuntimeError(f"Spark Connect server did not start; see {os.path.join(directory, 'spark.log')}")


def _supervised(directory: str) -> bool:
    """Whether a supervisor holds the directory (it keeps SUPERVISOR_LOCK locked while it lives)."""
    try:
        with open(os.path.join(directory, SUPERVISOR_LOCK), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
    except BlockingIOError:
        return True


def spawn(endpoint_url: str, memory: str | None = None, quick: bool = False) -> subprocess.Popen:
    """Start the supervisor, detached from our terminal and process group (Ctrl-C on `kinesim sql`
    must not stop the warm Spark). `quick`: a command waits for Spark; no warm-up before it is ready."""
    command = [sys.executable, "-m", "kinesim.analytics.connect_server", endpoint_url]
    if memory:
        command += ["--memory", memory]
    if quick:
        command.append("--quick")
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _spark_command(directory: str, port: int, memory: str | None, jvm_options: list[str] = (),
                   home: str | None = None) -> list[str]:
    """spark-submit of PySpark's SparkConnectServer, from Spark home `home` (`spark_jvm.spark_home`)."""
    import pyspark
    from .session import _log4j2_file
    home = home or os.path.dirname(pyspark.__file__)
    warehouse = os.path.join(directory, "warehouse")
    derby = os.path.join(directory, "derby")
    conf = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.warehouse.dir": warehouse,
        # Continuous queries live in a session no client may touch for days; Spark's default drops
        # an idle session (and stops its streaming queries) after 60 minutes.
        "spark.connect.session.manager.defaultSessionTimeout": "3650d",
        "spark.driver.extraJavaOptions": " ".join([f"-Dderby.system.home={derby}",
                                                   f"-Dlog4j2.configurationFile=file:{_log4j2_file('warn')}",
                                                   *jvm_options]),
        **settings(),
    }
    command = [os.path.join(home, "bin", "spark-submit"), "--master", "local[*]", "--name", "kinesim-spark-connect",
               "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
    if memory:
        command += ["--driver-memory", memory]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return command + ["spark-internal"]


def supervise(endpoint_url: str, memory: str | None, quick: bool = False) -> int:
    """Run Spark until the kinesim server at `endpoint_url` stops answering (or we are signalled).
    `quick`: a command waits for Spark, which is recorded ready as soon as it listens."""
    from .session import check_java
    from .spark_jvm import RECORDING_STOP_S, archive_options, discard_archive, jvm_command, keep_archive, spark_home
    from .tables import server_info
    deadline = time.monotonic() + 60
    while True:  # `kinesim serve --spark` starts us before it listens
        try:
            info = server_info(endpoint_url)
            break
        except Exception:
            if time.monotonic() > deadline:
                return 1
            time.sleep(0.5)
    directory = state_dir(info["s3_root"])
    os.makedirs(directory, exist_ok=True)
    # One supervisor (one Spark) per data directory, held until this process ends; its pid is
    # written there so that the kinesim server can stop it (stop_supervisor).
    held = open(os.path.join(directory, SUPERVISOR_LOCK), "a+")
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0
    held.seek(0)
    held.truncate()
    held.write(str(os.getpid()))
    held.flush()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    home = spark_home()
    jvm_options, recording = archive_options(check_java(), home)
    if recording:   # for stop_supervisor: Spark's stop will take longer
        with open(os.path.join(directory, RECORDING), "w") as f:
            f.write(recording)
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_HOME=home)
    port = _free_port()
    spark = _start_spark(directory, port, memory, jvm_options, env)
    state_path = os.path.join(directory, STATE_FILE)
    listening = recorded = streaming = False
    misses, warm_until = 0, 0.0
    command: list[str] | None = None     # Spark's JVM command line, to check the archive it records
    warming: subprocess.Popen | None = None
    try:
        while not stop.is_set():
            if spark.poll() is not None:
                if listening or not discard_archive(jvm_options):
                    break
                # It died mapping the class archive (a damaged file): once more, without one.
                _log(directory, "Spark exited at start with its class archive; starting it without")
                jvm_options, recording, port = [], None, _free_port()
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(directory, RECORDING))
                spark = _start_spark(directory, port, memory, jvm_options, env)
                continue
            if not listening and _listening(port):
                listening, command = True, jvm_command(spark.pid)
                if not quick:
                    # Its first queries before anyone's (see warmup): a `kinesim sql` meanwhile waits for them.
                    warming = _warm_up(port, directory, endpoint_url, env)
                    warm_until = time.monotonic() + WARM_UP_TIMEOUT_S
            if listening and not recorded and (warming is None or warming.poll() is not None
                                               or time.monotonic() > warm_until):
                if warming is not None:
                    stop_process(warming)
                    warming = None
                _record(state_path, spark.pid, port, "pending")
                recorded, idle = True, IdleWatch(spark.pid)
                threading.Thread(target=_resume_queries, args=(port, directory),
                                 daemon=True).start()
            elif recorded and not streaming and warming is None and idle.idle_for(IDLE_S, IDLE_CPU):
                warming, streaming = _warm_up(port, directory, endpoint_url, env, "streaming"), True
                _record(state_path, spark.pid, port, "running")
            elif recorded and streaming and warming is not None and warming.poll() is not None:
                warming = None
                _record(state_path, spark.pid, port, "done")
            misses = 0 if _healthy(endpoint_url) else misses + 1
            if misses >= MISSES_BEFORE_STOP:
                break
            stop.wait(0.25 if not recorded else 0.5 if not streaming else CHECK_EVERY_S)
    finally:
        with contextlib.suppress(OSError):
            if recorded:
                os.unlink(state_path)
        if warming is not None:
            stop_process(warming)
        # Recording, the JVM writes the class archive on its way out: give it the time to.
        stop_process(spark, group=True, timeout=RECORDING_STOP_S if recording else 10)
        if recording:
            kept = keep_archive(recording, command, spark.returncode)
            _log(directory, f"Spark's class archive {'kept' if kept else 'not usable, deleted'}")
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, RECORDING))
    return 0


def _start_spark(directory: str, port: int, memory: str | None, jvm_options: list[str],
                 env: dict[str, str]) -> subprocess.Popen:
    with open(os.path.join(directory, "spark.log"), "ab") as log:
        # Its own process group: Spark's Python workers (a streaming source's runner) are in it,
        # and are stopped with it (they outlived the JVM by up to a minute otherwise).
        return subprocess.Popen(_spark_command(directory, port, memory, jvm_options, env.get("SPARK_HOME")),
                                cwd=directory, env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)


def _log(directory: str, text: str) -> None:
    with contextlib.suppress(OSError), open(os.path.join(directory, "spark.log"), "a") as f:
        f.write(f"{time.strftime('%H:%M:%S')} kinesim: {text}\n")


def _record(state_path: str, pid: int, port: int, warm_up: str) -> None:
    """Record Spark as ready (`running` reads it), with how far the streaming warm-up is: pending,
    running or done (bench/sql_waits.py waits for done to time a warm Spark)."""
    tmp = f"{state_path}.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"pid": pid, "port": port, "supervisor": os.getpid(), "warm_up": warm_up}, f)
    os.replace(tmp, state_path)


class IdleWatch:
    """Whether a process (Spark's JVM) has used under a share of a core for a while, from its CPU
    time in /proc (elsewhere: always idle)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.since, self.cpu = time.monotonic(), self._cpu()

    def _cpu(self) -> float | None:
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime + stime
        except (OSError, ValueError, IndexError):
            return None

    def idle_for(self, seconds: float, share: float) -> bool:
        now, cpu = time.monotonic(), self._cpu()
        if cpu is None or self.cpu is None:
            return True
        if cpu - self.cpu > share * (now - self.since):   # busy: start the window again
            self.since, self.cpu = now, cpu
            return False
        return now - self.since >= seconds


def _warm_up(port: int, directory: str, endpoint_url: str, env: dict[str, str],
             stage: str = "batch") -> subprocess.Popen:
    """Start the warm-up (`warmup`: the batch one, or with `stage` "streaming" a continuous
    query's first micro-batches), its output to spark.log."""
    with open(os.path.join(directory, "spark.log"), "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "kinesim.analytics.warmup", f"sc://127.0.0.1:{port}", directory,
                                 endpoint_url, stage],
                                cwd=directory, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def stop_supervisor(data_root: str, timeout: float = 20.0) -> None:
    """Stop the warm Spark kept for the server whose data is in `data_root` (the directory of its
    database and buckets), if one runs, and wait (up to `timeout`; longer while its JVM records
    its class archive, once per installation) for it and its Spark to be gone: SIGTERM, then
    SIGKILL for the supervisor and Spark's process group."""
    directory = os.path.join(os.path.abspath(data_root), STATE_DIR_NAME)
    if os.path.exists(os.path.join(directory, RECORDING)):
        from .spark_jvm import RECORDING_STOP_S
        timeout = max(timeout, RECORDING_STOP_S + 10)
    try:
        held = open(os.path.join(directory, SUPERVISOR_LOCK), "r")
    except OSError:
        return
    with held:
        if _lock_free(held):
            return
        pid = _int(held.read())
        if not pid:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _lock_free(held):
                return
            time.sleep(0.1)
        spark = recorded_pid(directory)
        for target in (pid, -spark if spark else 0):
            if target:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(target, signal.SIGKILL)


def _lock_free(handle) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(handle, fcntl.LOCK_UN)
    return True


def _int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        return 0


def _resume_queries(port: int, directory: str) -> None:
    """Continuous queries that were running when Spark last stopped go on from their checkpoints
    (what happened is written to spark.log)."""
    from .continuous import queries_dir, resume_all
    try:
        resume_all(f"sc://127.0.0.1:{port}", queries_dir(directory), log=lambda text: _log(directory, text))
    except Exception as error:  # noqa: BLE001 - Spark stays up for `kinesim sql` whatever happens here
        _log(directory, f"could not resume continuous queries: {error}")


def stop_process(process: subprocess.Popen, group: bool = False, timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL after `timeout` s; with `group`, whatever is left of the process's group
    (it was started in a session of its own) is killed too."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if group:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kinesim.analytics.connect_server", allow_abbrev=False)
    parser.add_argument("endpoint_url")
    parser.add_argument("--memory", help="the Spark driver's memory, e.g. 4g")
    parser.add_argument("--quick", action="store_true", help="record Spark ready once it listens (a command waits)")
    args = parser.parse_args(argv)
    return supervise(args.endpoint_url, args.memory, args.quick)


if __name__ == "__main__":
    code = main()
    # Not sys.exit: the Spark Connect client that resumed continuous queries leaves threads that
    # interpreter shutdown waits for, and the supervisor then hung, deaf to SIGTERM (its handler
    # only sets the stop flag), until SIGKILL. Spark is stopped by now: nothing is left to flush.
    sys.stdout.flush()
    os._exit(code)
