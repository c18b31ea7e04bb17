"""The function runtime: Lambda's platform side. Each function gets warm worker processes
(execution environments, see worker.py), started on first use, reused, one invocation at a time
each, up to `max_workers_per_function`. Around each invocation it does what Lambda does: the
timeout (SIGKILL and a fresh environment next time), a crashed runtime (`Runtime.ExitError`), the
6 MB response limit, and the START / END / REPORT log lines in the worker's log stream.

Thread-safe: pollers and HTTP requests call `invoke` concurrently.
"""
from __future__ import annotations

import logging
import math
import os
import secrets
import sys
import threading
import time
import uuid
from dataclasses import dataclass

import orjson

from . import js_sdk_fetch, python_sdk, runtime_sdks, runtimes
from .invocation_stats import InvocationStats
from .logs import FunctionLogs
from .worker_pool import Pool, Retired
from .worker_process import WorkerProcess

log = logging.getLogger("kinesim.functions")

INIT_LIMIT_S = 10.0  # AWS's limit for the init phase; a longer function timeout extends it
MAX_RESPONSE_BYTES = 6 * 1024 * 1024 + 100  # AWS's "maximum allowed payload size (6291556 bytes)"
TAIL_BYTES = 4096
LOG_FLUSH_S = 0.5  # a long invocation's output reaches the log file at least this often
# What a worker keeps of the server's environment: enough to run a program, nothing of the server's
# own (its PYTHONPATH and virtualenv least of all: a function sees what AWS's runtime has, no more)
_PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "LD_LIBRARY_PATH")
_HERE = os.path.dirname(os.path.abspath(__file__))
NODE_BOOTSTRAP = os.path.join(_HERE, "node", "bootstrap.mjs")
PYTHON_WORKER = os.path.join(_HERE, "worker.py")


@dataclass
class Invocation:
    request_id: str
    payload: bytes              # the handler's return value as JSON bytes; on error, AWS's error JSON
    function_error: str | None  # None, or "Unhandled" (exception / timeout / crash): X-Amz-Function-Error
    log_tail: str               # the last 4 KB of this invocation's log (LogType=Tail), plain text
    duration_ms: float
    billed_ms: int
    max_memory_mb: int


class FunctionRuntime:
    def __init__(self, logs: FunctionLogs, endpoint_url: str, region: str, account_id: str,
                 max_workers_per_function: int = 10):
        self.logs = logs
        self.endpoint_url = endpoint_url
        self.region = region
        self.account_id = account_id
        self.max_workers = max_workers_per_function
        self._pools: dict[tuple[str, str], Pool] = {}  # by (FunctionName, Version)
        self.stats = InvocationStats()  # every invocation's figures, for the web console
        self._lock = threading.Lock()
        self._closed = False

    def invoke(self, fn: dict, payload: bytes, request_id: str | None = None, *,
               client_context: dict | None = None, identity: dict | None = None,
               invoked_function_arn: str | None = None, trace_id: str | None = None) -> Invocation:
        """Run one invocation, blocking. `fn` is the FunctionConfiguration plus "CodeDir", and
        optionally "Version" (default $LATEST: each version has environments of its own) and
        "LayerDirs" (the extracted contents of its layers, in its Layers order). `client_context`
        (decoded X-Amz-Client-Context), `identity` (Cognito) and the ARN the caller used
        (qualified or not) reach the handler's `context`; `trace_id` (the invocation's X-Ray trace
        header) its `_X_AMZN_TRACE_ID`, for the SDKs to send on (recursion.py)."""
        request_id = request_id or str(uuid.uuid4())
        waited = False
        while True:
            pool = self._pool(fn)
            try:
                worker, waited = pool.acquire()
                break
            except Retired:  # the function changed while we waited: use the new configuration
                continue
        result = None
        try:
            if worker is None:  # no idle environment: a cold start
                try:
                    started = self._start(fn)
                except _Unrunnable as e:
                    result = _unrunnable(request_id, str(e))
                    return result
                worker = pool.started(started)
                result = self._init(worker, fn, request_id)
                if result is not None:
                    return result
            result = self._run(worker, fn, payload, request_id, {
                "client_context": client_context, "identity": identity,
                "arn": invoked_function_arn or fn.get("FunctionArn"), "trace": trace_id})
            return result
        finally:
            if worker is not None:
                pool.release(worker)
            else:
                pool.start_failed()
            if result is not None:  # the console's figures (an exception here is kinesim's, not counted)
                self.stats.record(fn["FunctionName"], result.duration_ms, result.function_error is not None, waited)

    def workers(self, function_name: str) -> dict[str, int]:
        """The function's execution environments now, every version together: `idle` (warm,
        waiting), `busy` (running an invocation), `starting` (a cold start under way)."""
        with self._lock:
            pools = [pool for key, pool in self._pools.items() if key[0] == function_name]
        counts = [pool.counts() for pool in pools]
        return {"idle": sum(c[0] for c in counts), "busy": sum(c[1] for c in counts),
                "starting": sum(c[2] for c in counts)}

    def retire(self, function_name: str) -> None:
        """Stop the workers of every version of this function; running invocations finish first,
        on the old code."""
        with self._lock:
            pools = [self._pools.pop(key) for key in list(self._pools) if key[0] == function_name]
        for pool in pools:
            pool.retire()

    def close(self) -> None:
        """Stop every worker at once, running ones included (server shutdown)."""
        with self._lock:
            self._closed = True
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.retire(stop_busy=True)

    # --- environments -----------------------------------------------------------------------

    def _pool(self, fn: dict) -> Pool:
        signature = _signature(fn)
        key = (fn["FunctionName"], fn.get("Version") or "$LATEST")
        stale = None
        with self._lock:
            if self._closed:
                raise RuntimeError("the function runtime is closed")
            pool = self._pools.get(key)
            if pool is None or pool.signature != signature:
                # code or configuration changed without a retire(): AWS starts new environments too
                stale = pool
                pool = self._pools[key] = Pool(signature, self.max_workers)
        if stale is not None:
            stale.retire()
        return pool

    def _start(self, fn: dict) -> WorkerProcess:
        version = fn.get("Version") or "$LATEST"
        stream = time.strftime("%Y/%m/%d", time.gmtime()) + f"/[{version}]" + secrets.token_hex(16)
        runtime = runtimes.describe(fn.get("Runtime") or "python3.12")
        if not runtime.runnable:  # e.g. its Node.js was removed since CreateFunction: a failed init
            raise _Unrunnable(runtime.reason or runtime.name)
        layers = [d for d in fn.get("LayerDirs") or () if d]
        unavailable: dict[str, str] = {}
        if runtime.language == "nodejs":
            # the SDK packages its code imports, installed on first use: waited for (AWS's Pending)
            unavailable = js_sdk_fetch.FETCHER.prepare(fn)
            env = self._environment(fn, stream, runtime, runtime_sdks.js_sdk_modules())
            command = [runtime.executable, *runtimes.node_memory_flags(env),
                       *runtimes.node_feature_flags(runtime.major, env), NODE_BOOTSTRAP]
            worker = WorkerProcess(command, fn["CodeDir"], env, stream, capture_output=True)
        else:
            sdk_dir = python_sdk.sdk_dir()
            python_sdk.compile_for(runtime.executable, sdk_dir)
            env = self._environment(fn, stream, runtime, sdk_dir)
            # -s -S: no site-packages (the interpreter's, the user's, kinesim's venv): the worker
            # builds sys.path itself from the layers and the SDK directory it is given. Not -I: a
            # function's PYTHON* variables (PYTHONWARNINGS, PYTHONHASHSEED...) work as on AWS, and
            # the environment holds no PYTHON* variable of the server's.
            command = [runtime.executable, "-s", "-S", PYTHON_WORKER,
                       os.pathsep.join(runtimes.python_layer_paths(layers, runtime.name)), sdk_dir]
            worker = WorkerProcess(command, fn["CodeDir"], env, stream)
        worker.warning = runtime.warning
        if unavailable:
            worker.sdk_unavailable = unavailable
            worker.warning = (worker.warning or "") + js_sdk_fetch.warning(unavailable)
        log.debug("started worker %d for %s (%s)", worker.proc.pid, fn["FunctionName"], stream)
        return worker

    def _environment(self, fn: dict, stream: str, runtime: runtimes.Runtime,
                     runtime_dir: str | None) -> dict[str, str]:
        """The function's environment as AWS's runtime sets it. `runtime_dir`: where the SDK AWS's
        runtime includes is (Python: the boto3 & co directory; Node.js: the JS SDK's
        node_modules, None when not installed)."""
        env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
        env["PATH"] = _search_path(runtime.executable, env.get("PATH", os.defpath))
        env["TZ"] = ":UTC"
        # The AWS SDKs inside a handler (boto3, JS v3) talk to kinesim
        env["AWS_ENDPOINT_URL"] = self.endpoint_url
        variables = (fn.get("Environment") or {}).get("Variables") or {}
        env.update({k: str(v) for k, v in variables.items()})
        layers = [d for d in fn.get("LayerDirs") or () if d]
        if runtime.language == "nodejs":
            if "NODE_PATH" not in variables:  # AWS's bootstrap sets it only when the function does not
                # AWS's: /opt/nodejs/nodeNN/node_modules:/opt/nodejs/node_modules:/var/runtime/node_modules:
                # /var/runtime:/var/task (LocalStack's snapshot of a real nodejs20.x function)
                sdk = [runtime_dir] if runtime_dir else []
                env["NODE_PATH"] = os.pathsep.join(runtimes.node_layer_paths(layers, runtime.major) + sdk
                                                   + [fn["CodeDir"]])
        elif "PYTHONPATH" not in variables:  # AWS's is /var/runtime, where its runtime's packages are
            env["PYTHONPATH"] = runtime_dir or ""
        runtime_name = runtime.name if runtime.runnable and runtime.name.startswith(("python", "nodejs")) \
            else f"python{sys.version_info.major}.{sys.version_info.minor}"
        name = fn["FunctionName"]
        env.update({  # reserved: a function's own variables cannot override these
            "_HANDLER": fn["Handler"],
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{runtime_name}",
            "AWS_LAMBDA_FUNCTION_NAME": name,
            "AWS_LAMBDA_FUNCTION_VERSION": fn.get("Version") or "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.get("MemorySize", 128)),
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_LAMBDA_LOG_GROUP_NAME": self.logs.group_name(name),
            "AWS_LAMBDA_LOG_STREAM_NAME": stream,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "LAMBDA_TASK_ROOT": fn["CodeDir"],
            # Credentials of the right shape (kinesim checks their shape only) whose key id is the
            # function's account, so that its SDK's calls land there (kinesim/scopes.py).
            "AWS_ACCESS_KEY_ID": self.account_id,
            "AWS_ACCESS_KEY": self.account_id,
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_SESSION_TOKEN": "test",
        })
        if runtime_dir:  # AWS's /var/runtime (reserved too), where its SDK is: Node.js's in node_modules
            env["LAMBDA_RUNTIME_DIR"] = os.path.dirname(runtime_dir) if runtime.language == "nodejs" else runtime_dir
        return env

    # --- one invocation ---------------------------------------------------------------------

    def _init(self, worker: WorkerProcess, fn: dict, request_id: str) -> Invocation | None:
        """Wait for the handler's import (the cold start). None when it succeeded; otherwise the
        invocation's result, AWS's for an init that failed in the invoke phase."""
        record = worker.cold_start_log = _InvocationLog(self.logs, fn["FunctionName"], worker)
        if worker.warning:  # the first line of its log stream, where users look first
            record.add(worker.warning)
        deadline = worker.started + max(INIT_LIMIT_S, float(fn.get("Timeout", 3)))
        try:
            header, body = self._receive_until(worker, record, deadline, "init")
        except TimeoutError:
            status, error_type = "timeout", None
        except EOFError:
            status, error_type = "error", "Runtime.ExitError"
        else:
            worker.rss_kb = header["rss_kb"]
            worker.init_ms = (time.perf_counter() - worker.started) * 1000
            if header["error"] is None:
                return None
            status, error_type = "error", header["error"]
            if worker.sdk_unavailable:  # an SDK package kinesim could not install: say so, and what to do
                body, error_type = _explained(body, error_type, worker.sdk_unavailable)
        init_ms = (time.perf_counter() - worker.started) * 1000
        worker.init_ms = None  # reported by INIT_REPORT, not in REPORT
        rss_kb = worker.peak_rss_kb()
        reason = worker.stop(grace_s=0 if status == "timeout" else 1.0)  # a failed init exits by itself
        record.add(f"INIT_REPORT Init Duration: {init_ms:.2f} ms\tPhase: invoke\tStatus: {status}"
                   + (f"\tError Type: {error_type}" if error_type else "") + "\n")
        if status == "timeout":
            payload = _timeout_payload(request_id, fn)
        elif error_type == "Runtime.ExitError":
            payload = _exit_payload(request_id, reason)
            record.add(f"RequestId: {request_id} Error: {reason}\nRuntime.ExitError\n")
        else:
            payload = body  # the runtime's error JSON, with "requestId": "" as AWS's init errors have
        record.add(f"START RequestId: {request_id} Version: {fn.get('Version', '$LATEST')}\n")
        return self._finish(record, worker, fn, request_id, payload, "Unhandled", init_ms, rss_kb, status, error_type)

    def _run(self, worker: WorkerProcess, fn: dict, payload: bytes, request_id: str, extra: dict) -> Invocation:
        record = worker.cold_start_log or _InvocationLog(self.logs, fn["FunctionName"], worker)
        worker.cold_start_log = None
        timeout_s = float(fn.get("Timeout", 3))
        start = time.perf_counter()
        start_ms = time.time_ns() // 1_000_000
        record.add(f"START RequestId: {request_id} Version: {fn.get('Version', '$LATEST')}\n", start_ms)
        try:
            worker.send({"id": request_id, "deadline_ms": start_ms + int(timeout_s * 1000), **extra}, payload)
            header, body = self._receive_until(worker, record, start + timeout_s, "done")
        except TimeoutError:
            rss_kb = worker.peak_rss_kb()
            worker.stop()
            return self._finish(record, worker, fn, request_id, _timeout_payload(request_id, fn), "Unhandled",
                                timeout_s * 1000, rss_kb, "timeout", None)
        except EOFError:
            elapsed_ms = (time.perf_counter() - start) * 1000
            rss_kb = worker.peak_rss_kb()
            reason = worker.stop(grace_s=1.0)  # it is exiting: its own exit status, not our SIGKILL
            record.add(f"RequestId: {request_id} Error: {reason}\nRuntime.ExitError\n")
            return self._finish(record, worker, fn, request_id, _exit_payload(request_id, reason), "Unhandled",
                                elapsed_ms, rss_kb, "error", "Runtime.ExitError")
        worker.rss_kb = header["rss_kb"]
        if header.get("exit") is not None:
            # Node.js: an uncaught exception or unhandled rejection fails the invocation, then the
            # runtime exits (129 / 128, AWS's RIC): the next invocation gets a fresh environment
            reason = worker.stop(grace_s=1.0)
            record.add(f"RequestId: {request_id} Error: {reason}\nRuntime.ExitError\n")
        function_error = "Unhandled" if header["error"] else None
        if function_error is None and len(body) > MAX_RESPONSE_BYTES:
            body = orjson.dumps({"errorMessage": "Response payload size exceeded maximum allowed payload size "
                                 f"({MAX_RESPONSE_BYTES} bytes).", "errorType": "Function.ResponseSizeTooLarge"})
            function_error = "Unhandled"
        return self._finish(record, worker, fn, request_id, body, function_error, header["ms"], worker.rss_kb,
                            None, None)

    @staticmethod
    def _receive_until(worker: WorkerProcess, record: _InvocationLog, deadline: float, kind: str) -> tuple[dict, bytes]:
        """Log what the worker prints until its `kind` message. TimeoutError past `deadline`
        (perf_counter), EOFError if the worker dies."""
        while True:
            try:
                header, body = worker.receive(min(deadline, record.flush_due()))
            except TimeoutError:
                if time.perf_counter() >= deadline:
                    raise
                record.flush()  # a quiet moment in a long invocation: let its output be followed
                continue
            if header["t"] == kind:
                return header, body
            if header["t"] == "log":
                record.add_events(header["events"])

    @staticmethod
    def _finish(record: _InvocationLog, worker: WorkerProcess, fn: dict, request_id: str, payload: bytes,
                function_error: str | None, duration_ms: float, rss_kb: int, status: str | None,
                error_type: str | None) -> Invocation:
        init_ms, worker.init_ms = worker.init_ms, None  # a cold start's init is reported once
        # AWS bills whole milliseconds, at least one, and the init phase too (since August 2025)
        billed_ms = max(1, math.ceil(duration_ms + (init_ms or 0)))
        memory_mb = math.ceil(rss_kb / 1024)
        report = (f"REPORT RequestId: {request_id}\tDuration: {duration_ms:.2f} ms\tBilled Duration: {billed_ms} ms\t"
                  f"Memory Size: {fn.get('MemorySize', 128)} MB\tMax Memory Used: {memory_mb} MB\t")
        if init_ms is not None:
            report += f"Init Duration: {init_ms:.2f} ms\t"
        if status:
            report = report + f"Status: {status}" + (f"\tError Type: {error_type}" if error_type else "")
        record.add(f"END RequestId: {request_id}\n")
        record.add(report + "\n")
        record.flush()
        return Invocation(request_id, payload, function_error, record.tail(), duration_ms, billed_ms, memory_mb)


def _search_path(executable: str | None, path: str) -> str:
    """PATH for a worker: its language's directory first (AWS's /var/lang/bin, so a handler's
    `python3` or `node` subprocess is the runtime's), and never kinesim's virtualenv."""
    venv_bin = os.path.realpath(os.path.join(sys.prefix, "bin"))
    first = [os.path.dirname(executable)] if executable else []
    rest = [p for p in path.split(os.pathsep) if p and os.path.realpath(p) != venv_bin and p not in first]
    return os.pathsep.join(first + rest)


def _signature(fn: dict) -> tuple:
    """What makes an environment out of date: AWS starts new ones after any code or config change."""
    return (fn.get("CodeDir"), fn.get("CodeSha256"), fn.get("LastModified"), fn.get("Handler"), fn.get("Runtime"),
            fn.get("MemorySize"), fn.get("Version"), repr(fn.get("Environment")), tuple(fn.get("LayerDirs") or ()))


class _Unrunnable(Exception):
    """The function's runtime cannot run here (any more): its Node.js was removed, say."""


def _explained(payload: bytes, error_type: str, unavailable: dict[str, str]) -> tuple[bytes, str]:
    """A failed init's error and type, as the Runtime.ImportModuleError it is when it is about an
    SDK package that is not installed (js_sdk_fetch.explain)."""
    try:
        error = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return payload, error_type
    explained = js_sdk_fetch.explain(error, unavailable) if isinstance(error, dict) else None
    return (payload, error_type) if explained is None else (orjson.dumps(explained), explained["errorType"])


def _unrunnable(request_id: str, reason: str) -> Invocation:
    payload = orjson.dumps({"errorType": "Runtime.InvalidRuntime", "errorMessage": reason})
    return Invocation(request_id, payload, "Unhandled", "", 0.0, 1, 0)


def _timeout_payload(request_id: str, fn: dict) -> bytes:
    return orjson.dumps({"errorMessage": f"RequestId: {request_id} Error: Task timed out after "
                         f"{float(fn.get('Timeout', 3)):.2f} seconds", "errorType": "Sandbox.Timedout"})


def _exit_payload(request_id: str, reason: str) -> bytes:
    return orjson.dumps({"errorType": "Runtime.ExitError", "errorMessage": f"RequestId: {request_id} Error: {reason}"})


class _InvocationLog:
    """One invocation's log events, written to its worker's stream as they come (at least every
    LOG_FLUSH_S, so a long invocation can be followed) and kept for the tail."""

    def __init__(self, logs: FunctionLogs, function_name: str, worker: WorkerProcess):
        self._logs = logs
        self._function_name = function_name
        self._worker = worker
        self.messages: list[str] = []
        self._stamps: list[int] = []
        self._written = 0
        self._last_flush = time.perf_counter()

    def add(self, message: str, ts: int | None = None) -> None:
        ts = max(ts if ts is not None else time.time_ns() // 1_000_000, self._worker.last_log_ms)
        self._worker.last_log_ms = ts
        self.messages.append(message)
        self._stamps.append(ts)

    def add_events(self, events: list[list]) -> None:
        for ts, message in events:
            self.add(message, ts)
        if time.perf_counter() > self.flush_due():
            self.flush()

    def flush_due(self) -> float:
        """When unwritten events must be written (perf_counter); never if there are none."""
        return self._last_flush + LOG_FLUSH_S if self._written < len(self.messages) else math.inf

    def flush(self) -> None:
        if self._written < len(self.messages):
            self._logs.write(self._function_name, self._worker.stream_name, self.messages[self._written:],
                             self._stamps[self._written:])
            self._written = len(self.messages)
        self._last_flush = time.perf_counter()

    def tail(self) -> str:
        parts, size = [], 0
        for message in reversed(self.messages):
            text = message if message.endswith("\n") else message + "\n"
            parts.append(text)
            size += len(text.encode())
            if size >= TAIL_BYTES:
                break
        return "".join(reversed(parts)).encode()[-TAIL_BYTES:].decode("utf-8", "ignore")
