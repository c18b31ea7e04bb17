"""One warm Spark Connect server per kinesim server, so that `kinesim sql` answers in seconds.

``ensure(endpoint_url, memory=None, say=None) -> "sc://127.0.0.1:PORT"``: the address of the
Spark Connect server kept for the kinesim server at `endpoint_url`, started when none runs.

The Spark server (PySpark's own ``SparkConnectServer`` class, run with ``spark-submit``) is the
child of a small supervisor process (``python -m kinesim.analytics.connect_server ENDPOINT``)
that outlives the `kinesim sql` which started it and stops Spark when the kinesim server stops
answering its health check: Spark is "stopped with the server" whoever started it
(`kinesim serve --spark` starts the same supervisor at once). Once Spark listens, the supervisor
runs its first queries (`warmup`: a new JVM's first queries cost several times later ones) and
only then records it as ready, so the user's first query finds a warmed-up Spark. Its state lives
next to the server's buckets (``<data dir>/spark-connect/``): ``server.json`` (pid, port) once
Spark is ready, the warehouse and Derby metastore directories, JSON tables' kept schemas
(``schemas/``, `json_schemas`), and Spark's log (``spark.log``).
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

STATE_DIR_NAME = "spark-connect"  # beside the buckets and the database
STATE_FILE = "server.json"
SUPERVISOR_LOCK = "supervisor.lock"
START_TIMEOUT_S = 180.0
# Health checks the kinesim server may miss in a row (a busy machine) before Spark is stopped.
MISSES_BEFORE_STOP = 5
CHECK_EVERY_S = 2.0
# The warm-up takes ~5-15 s on a quiet 2-core machine; past this Spark is recorded ready anyway.
WARM_UP_TIMEOUT_S = 120.0


def state_dir(s3_root: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(s3_root)), STATE_DIR_NAME)


def schema_cache(s3_root: str, conf: dict[str, str] | None = None):
    """JSON tables' schemas (`json_schemas.SchemaCache`), kept with the warm Spark's state; `conf`,
    the session's Spark settings, may change what Spark infers."""
    from .json_schemas import SchemaCache
    return SchemaCache(os.path.join(state_dir(s3_root), "schemas"), json.dumps(sorted((conf or {}).items())))


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
            say("Spark is starting (first query takes ~20-40 s, over a minute on a busy machine; "
                "later ones reuse it)...")
        # A supervisor may be starting Spark already (`kinesim serve --spark`): wait for it.
        supervisor = None if _supervised(directory) else spawn(endpoint_url, memory)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            address = running(directory)
            if address:
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


def spawn(endpoint_url: str, memory: str | None = None) -> subprocess.Popen:
    """Start the supervisor, detached from our terminal and process group (Ctrl-C on `kinesim sql`
    must not stop the warm Spark)."""
    command = [sys.executable, "-m", "kinesim.analytics.connect_server", endpoint_url]
    if memory:
        command += ["--memory", memory]
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _spark_command(directory: str, port: int, memory: str | None) -> list[str]:
    import pyspark
    from .session import _log4j2_file
    home = os.path.dirname(pyspark.__file__)
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
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={derby} "
                                         f"-Dlog4j2.configurationFile=file:{_log4j2_file('warn')}",
    }
    command = [os.path.join(home, "bin", "spark-submit"), "--master", "local[*]", "--name", "kinesim-spark-connect",
               "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
    if memory:
        command += ["--driver-memory", memory]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return command + ["spark-internal"]


def supervise(endpoint_url: str, memory: str | None) -> int:
    """Run Spark until the kinesim server at `endpoint_url` stops answering (or we are signalled)."""
    from .session import check_java
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
    check_java()
    port = _free_port()
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    with open(os.path.join(directory, "spark.log"), "ab") as log:
        # Its own process group: Spark's Python workers (a streaming source's runner) are in it,
        # and are stopped with it (they outlived the JVM by up to a minute otherwise).
        spark = subprocess.Popen(_spark_command(directory, port, memory), cwd=directory, env=env,
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    state_path = os.path.join(directory, STATE_FILE)
    recorded, misses = False, 0
    warming: subprocess.Popen | None = None
    warm_until = 0.0
    try:
        while not stop.is_set() and spark.poll() is None:
            if not recorded and warming is None and _listening(port):
                # Its first queries before anyone's (see warmup): a `kinesim sql` meanwhile waits for them.
                warming = _warm_up(port, directory, endpoint_url, env)
                warm_until = time.monotonic() + WARM_UP_TIMEOUT_S
            if not recorded and warming is not None and (warming.poll() is not None
                                                         or time.monotonic() > warm_until):
                stop_process(warming)
                tmp = f"{state_path}.{os.getpid()}"
                with open(tmp, "w") as f:
                    json.dump({"pid": spark.pid, "port": port, "supervisor": os.getpid()}, f)
                os.replace(tmp, state_path)
                recorded = True
                threading.Thread(target=_resume_queries, args=(port, directory),
                                 daemon=True).start()
            misses = 0 if _healthy(endpoint_url) else misses + 1
            if misses >= MISSES_BEFORE_STOP:
                break
            stop.wait(0.25 if not recorded else CHECK_EVERY_S)
    finally:
        with contextlib.suppress(OSError):
            if recorded:
                os.unlink(state_path)
        if warming is not None:
            stop_process(warming)
        stop_process(spark, group=True)
    return 0


def _warm_up(port: int, directory: str, endpoint_url: str, env: dict[str, str]) -> subprocess.Popen:
    """Start the warm-up (`warmup`: first queries, then the server's tables' schemas), its output
    to spark.log."""
    with open(os.path.join(directory, "spark.log"), "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "kinesim.analytics.warmup", f"sc://127.0.0.1:{port}", directory,
                                 endpoint_url],
                                cwd=directory, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def stop_supervisor(data_root: str, timeout: float = 20.0) -> None:
    """Stop the warm Spark kept for the server whose data is in `data_root` (the directory of its
    database and buckets), if one runs, and wait (up to `timeout`) for it and its Spark to be
    gone: SIGTERM, then SIGKILL for the supervisor and Spark's process group."""
    directory = os.path.join(os.path.abspath(data_root), STATE_DIR_NAME)
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
        spark = _recorded_spark(directory)
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


def _recorded_spark(directory: str) -> int:
    try:
        with open(os.path.join(directory, STATE_FILE)) as f:
            return int(json.load(f).get("pid", 0))
    except (OSError, ValueError, AttributeError):
        return 0


def _resume_queries(port: int, directory: str) -> None:
    """Continuous queries that were running when Spark last stopped go on from their checkpoints
    (what happened is written to spark.log)."""
    from .continuous import queries_dir, resume_all

    def log(text: str) -> None:
        with open(os.path.join(directory, "spark.log"), "a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} kinesim: {text}\n")
    try:
        resume_all(f"sc://127.0.0.1:{port}", queries_dir(directory), log=log)
    except Exception as error:  # noqa: BLE001 - Spark stays up for `kinesim sql` whatever happens here
        log(f"could not resume continuous queries: {error}")


def stop_process(process: subprocess.Popen, group: bool = False) -> None:
    """SIGTERM, then SIGKILL after 10 s; with `group`, whatever is left of the process's group
    (it was started in a session of its own) is killed too."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
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
    args = parser.parse_args(argv)
    return supervise(args.endpoint_url, args.memory)


if __name__ == "__main__":
    code = main()
    # Not sys.exit: the Spark Connect client that resumed continuous queries leaves threads that
    # interpreter shutdown waits for, and the supervisor then hung, deaf to SIGTERM (its handler
    # only sets the stop flag), until SIGKILL. Spark is stopped by now: nothing is left to flush.
    sys.stdout.flush()
    os._exit(code)
