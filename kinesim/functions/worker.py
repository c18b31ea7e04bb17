"""One warm execution environment for a Python handler, behaving as AWS's Python runtime
(awslambdaric) does: the same `context` object, logging format, error payloads and log lines.

runtime.py starts it as a script, `python3.X -s -S worker.py LAYERS SDK FD`,
in the function's code directory, with the function's environment (its PYTHON* variables
honoured, as on AWS; none of the server's): isolated from kinesim (no `import kinesim`, no
site-packages, nothing of kinesim's directory on sys.path), it runs on any Python 3.9+
with the standard library alone, and puts on sys.path what AWS's does (see `_set_path`): the code
directory, the layers (LAYERS, os.pathsep-joined), the SDK directory holding the boto3 & co AWS's
runtime includes (SDK), the function's own PYTHONPATH entries, the standard library. It imports
the handler once (the cold start), then runs invocations one at a time, as AWS runs one per
execution environment, until FD closes.

Protocol over the socket FD: frames as multiprocessing.connection writes them (a 4-byte big-endian
length, or -1 and an 8-byte one), each a JSON header line followed by a raw body.
  server -> worker  {"id", "deadline_ms", "arn", "client_context", "identity", "trace"} + event bytes
  worker -> server  {"t": "log", "events": [[epoch ms, text], ...]}   output, as it is written
                    {"t": "init", "error": type|null, "rss_kb"}       + error JSON if it failed
                    {"t": "done", "error": type|null, "ms", "rss_kb"} + result or error JSON
Log events are sent as they are written, so what a handler printed before a crash is kept. The
handler's stdout and stderr never carry protocol data: `sys.stdout`/`sys.stderr` become event
streams, and file descriptors 1 and 2 (subprocesses, C code) point at a pipe this worker reads.
Before any event is sent, what is already in that pipe is sent first: output keeps the order it was
written in, as on AWS, where a `print` and a subprocess's `echo` go into the same stdout pipe.
"""
from __future__ import annotations

import decimal
import importlib
import io
import json
import logging
import math
import os
import resource
import select
import struct
import sys
import threading
import time
import traceback
from typing import Any, Callable

_THIS_FILE = os.path.abspath(__file__)
_ERROR_INDENT = "\u00a0"  # AWS indents traceback lines in the log with no-break spaces
_UNHANDLED_WARNING = (
    "LAMBDA_WARNING: Unhandled exception. The most likely cause is an issue in the function code. However, "
    "in rare cases, a Lambda runtime update can cause unexpected function behavior. For functions using "
    "managed runtimes, runtime updates can be triggered by a function change, or can be applied "
    "automatically. To determine if the runtime has been updated, check the runtime version in the "
    "INIT_START log entry. If this error correlates with a change in the runtime version, you may be able "
    "to mitigate this error by temporarily rolling back to the previous runtime version. For more "
    "information, see https://docs.aws.amazon.com/lambda/latest/dg/runtimes-update.html")
_LEVELS = ("CRITICAL", "FATAL", "ERROR", "WARN", "WARNING", "INFO", "DEBUG", "NOTSET")

_request_id: str | None = None  # the invocation in progress, for log records


def pack(header: dict, body: bytes = b"") -> bytes:
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + body


def unpack(data: bytes) -> tuple[dict, bytes]:
    head, _, body = data.partition(b"\n")
    return json.loads(head), body


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _rss_kb() -> int:
    """Peak resident memory of this process, Lambda's "Max Memory Used". Not getrusage's
    ru_maxrss: Linux carries it over from the process that forked this one (the server) across
    exec, where VmHWM is this program's own."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class Channel:
    """The worker's end of the socket, framed as multiprocessing.connection does (the server's
    end is one; importing multiprocessing here would cost the handler memory). Locked: handler
    threads log while the main thread replies."""

    def __init__(self, fd: int):
        os.set_inheritable(fd, False)  # not into the handler's subprocesses: the server sees EOF when we die
        self._fd = fd
        self._lock = threading.Lock()

    def send(self, header: dict, body: bytes = b"") -> None:
        data = pack(header, body)
        size = struct.pack("!i", len(data)) if len(data) <= 0x7FFFFFFF else struct.pack("!iQ", -1, len(data))
        with self._lock:
            view = memoryview(size + data)
            while view:
                view = view[os.write(self._fd, view):]

    def log(self, events: list[list]) -> None:
        self.send({"t": "log", "events": events})

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = os.read(self._fd, min(left, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def recv(self) -> tuple[dict, bytes]:
        size, = struct.unpack("!i", self._read(4))
        if size == -1:
            size, = struct.unpack("!Q", self._read(8))
        return unpack(self._read(size))


Emit = Callable[[list[list]], None]  # sends log events ([[epoch ms, text], ...])


class LineSink(io.RawIOBase):
    """A binary stream whose every complete line becomes one log event, as the Lambda platform
    does with a runtime's output. A partial line waits for its end or for `flush_partial`."""

    def __init__(self, emit: Emit, fd: int):
        super().__init__()
        self._emit = emit
        self._fd = fd
        self._partial = b""
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return False

    def write(self, b: Any) -> int:
        data = bytes(b)
        with self._lock:  # held while sending, so two threads' lines keep their order
            lines = (self._partial + data).split(b"\n")
            self._partial = lines.pop()
            if lines:
                ts = _now_ms()
                self._emit([[ts, line.decode("utf-8", "replace") + "\n"] for line in lines])
        return len(data)

    def flush_partial(self) -> None:
        with self._lock:
            if self._partial:
                self._emit([[_now_ms(), self._partial.decode("utf-8", "replace")]])
                self._partial = b""


class FdCapture:
    """File descriptors 1 and 2 made the write end of a pipe; a thread turns what arrives into log
    events. Reads happen only under the lock, so `drain` at the end of an invocation collects
    everything written so far: no byte is ever read but not yet logged."""

    def __init__(self, sink: LineSink):
        self._sink = sink
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        self._fd = read_fd
        self._lock = threading.Lock()
        threading.Thread(target=self._run, name="kinesim-fd-capture", daemon=True).start()

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        while True:
            poller.poll()
            self.drain()

    def drain(self) -> None:
        with self._lock:
            while True:
                try:
                    chunk = os.read(self._fd, 65536)
                except BlockingIOError:
                    return
                self._sink.write(chunk)


class Output:
    """Everything a handler can print to, turned into log events in the order it was written."""

    def __init__(self, channel: Channel):
        self._channel = channel
        self.fd_sink = LineSink(channel.log, 1)
        self.fds = FdCapture(self.fd_sink)
        self.stdout = LineSink(self.log, 1)
        self.stderr = LineSink(self.log, 2)
        # write_through: nothing waits in a buffer, as with AWS's unbuffered stdout and stderr
        sys.stdout = io.TextIOWrapper(self.stdout, encoding="utf-8", errors="backslashreplace",
                                      write_through=True)
        sys.stderr = io.TextIOWrapper(self.stderr, encoding="utf-8", errors="backslashreplace",
                                      write_through=True)

    def log(self, events: list[list]) -> None:
        """Send events written by this process (print, logging, context.log, the runtime's own),
        after what is already in the fd 1/2 pipe: a subprocess that has returned, or C code that has
        written, wrote before them. The capture thread alone would race with them."""
        self.fds.drain()
        self._channel.log(events)

    def flush(self) -> None:
        """At the end of an invocation: what it printed belongs to it, even without a newline."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # a handler may have replaced or closed them
                pass
        self.fds.drain()
        for sink in (self.stdout, self.stderr, self.fd_sink):
            sink.flush_partial()


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.aws_request_id = _request_id or ""
        return True


class _LambdaLogHandler(logging.Handler):
    """One log event per record, multi-line records included (AWS's telemetry log sink)."""

    def __init__(self, send: Emit):
        super().__init__()
        self.send = send

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.send([[_now_ms(), self.format(record)]])
        except Exception:
            self.handleError(record)


def setup_logging(send: Emit) -> None:
    logging.Formatter.converter = time.gmtime
    handler = _LambdaLogHandler(send)
    handler.setFormatter(logging.Formatter(
        "[%(levelname)s]\t%(asctime)s.%(msecs)03dZ\t%(aws_request_id)s\t%(message)s\n", "%Y-%m-%dT%H:%M:%S"))
    handler.addFilter(_RequestIdFilter())
    root = logging.getLogger()
    level = os.environ.get("AWS_LAMBDA_LOG_LEVEL", "").upper()
    if level in _LEVELS:
        root.setLevel(level)
    root.addHandler(handler)


# --- the context object -------------------------------------------------------------------------

class CognitoIdentity:
    __slots__ = ["cognito_identity_id", "cognito_identity_pool_id"]

    def __repr__(self) -> str:
        return (f"CognitoIdentity([cognito_identity_id={self.cognito_identity_id},"
                f"cognito_identity_pool_id={self.cognito_identity_pool_id}])")


class Client:
    __slots__ = ["installation_id", "app_title", "app_version_name", "app_version_code", "app_package_name"]

    def __repr__(self) -> str:
        return "Client([" + ",".join(f"{k}={getattr(self, k)}" for k in self.__slots__) + "])"


class ClientContext:
    __slots__ = ["custom", "env", "client"]

    def __repr__(self) -> str:
        return f"ClientContext([custom={self.custom},env={self.env},client={self.client}])"


def _from_dict(cls: type, values: dict | None) -> Any:
    """An instance with every slot set from `values` (None where absent), or None for no dict."""
    if values is None:
        return None
    obj = cls()
    for field in cls.__slots__:
        setattr(obj, field, values.get(field))
    return obj


class LambdaContext:
    """AWS's context object. Like AWS's, it reads the function's details from the reserved
    environment variables, so `memory_limit_in_mb` is a string ("128")."""

    def __init__(self, request_id: str, client_context: dict | None, identity: dict | None,
                 deadline_ms: int, invoked_function_arn: str | None = None, tenant_id: str | None = None):
        self.aws_request_id = request_id
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME")
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
        self.memory_limit_in_mb = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION")
        self.invoked_function_arn = invoked_function_arn
        self.tenant_id = tenant_id
        self.client_context = _from_dict(ClientContext, client_context)
        if self.client_context is not None:
            self.client_context.client = _from_dict(Client, self.client_context.client)
        self.identity = _from_dict(CognitoIdentity, {})
        if identity is not None:
            self.identity.cognito_identity_id = identity.get("cognitoIdentityId")
            self.identity.cognito_identity_pool_id = identity.get("cognitoIdentityPoolId")
        self._deadline_ms = deadline_ms

    def get_remaining_time_in_millis(self) -> int:
        return max(self._deadline_ms - int(time.time() * 1000), 0)

    def log(self, msg: Any) -> None:
        for handler in logging.getLogger().handlers:
            if isinstance(handler, _LambdaLogHandler):
                handler.send([[_now_ms(), str(msg)]])
                return
        sys.stdout.write(str(msg))

    def __repr__(self) -> str:
        return (f"LambdaContext([aws_request_id={self.aws_request_id},log_group_name={self.log_group_name},"
                f"log_stream_name={self.log_stream_name},function_name={self.function_name},"
                f"memory_limit_in_mb={self.memory_limit_in_mb},function_version={self.function_version},"
                f"invoked_function_arn={self.invoked_function_arn},client_context={self.client_context},"
                f"identity={self.identity},tenant_id={self.tenant_id}])")


# --- errors, as the runtime reports and logs them ----------------------------------------------

class Fault(Exception):
    """An error of the runtime itself (bad handler, unserializable result...), AWS's `Runtime.*`."""

    def __init__(self, error_type: str, message: str, trace: list[str] | None = None):
        super().__init__(message)
        self.error_type, self.message, self.trace = error_type, message, trace


def make_error(message: str, error_type: str, stack_trace: list[str] | None, request_id: str | None) -> dict:
    return {"errorMessage": message or "", "errorType": error_type or "",
            "requestId": request_id if request_id is not None else "", "stackTrace": stack_trace or []}


def error_from_exception(exc: BaseException, request_id: str | None) -> dict:
    # plain (file, line, function, text) tuples, as AWS formats them: no ^^^ column markers
    frames = [(f.filename, f.lineno, f.name, f.line) for f in traceback.extract_tb(exc.__traceback__)]
    while len(frames) > 1 and frames[0][0] == _THIS_FILE:  # the stack starts past the runtime's own code
        frames = frames[1:]
    return make_error(str(exc), type(exc).__name__, traceback.format_list(frames), request_id)


def error_log_text(error: dict) -> str:
    """`[ERROR] Type: message` and the traceback, one log event (AWS's text log format)."""
    description = "[ERROR]"
    if error["errorType"]:
        description += " " + error["errorType"]
    if error["errorMessage"]:
        description += (":" if error["errorType"] else "") + " " + error["errorMessage"]
    lines = [description, "Traceback (most recent call last):"]
    for element in error["stackTrace"]:
        if element == "":
            lines.append("")
            continue
        for line in element.splitlines():
            stripped = line.lstrip(" ")
            lines.append(_ERROR_INDENT * (len(line) - len(stripped)) + stripped)
    return "\n".join(lines)


# --- marshalling ---------------------------------------------------------------------------------

_simplejson: Any = None
_response_encoder: Any = None


def _json_lib() -> Any:
    """simplejson, as AWS's runtime encodes and decodes with it; imported once sys.path holds the
    runtime's packages (it is one of them: awslambdaric's dependency)."""
    global _simplejson
    if _simplejson is None:
        import simplejson
        _simplejson = simplejson
    return _simplejson


def _encoder() -> Any:
    """AWS's response encoder: simplejson, Decimals written as they are (DynamoDB items can be
    returned as they come), non-ASCII escaped except on python3.12, where AWS stopped escaping."""
    global _response_encoder
    if _response_encoder is not None:
        return _response_encoder
    simplejson = _json_lib()

    class Encoder(simplejson.JSONEncoder):
        def default(self, o: Any) -> Any:
            if isinstance(o, decimal.Decimal):
                return math.nan if o.is_nan() else simplejson.RawJSON(str(o))
            return super().default(o)

    escape = os.environ.get("AWS_EXECUTION_ENV") != "AWS_Lambda_python3.12"
    _response_encoder = Encoder(use_decimal=False, ensure_ascii=escape)
    return _response_encoder


def to_json(obj: Any) -> bytes:
    return _encoder().encode(obj).encode("utf-8")


def _loads() -> Callable[[bytes], Any]:
    """simplejson's decoder when its C scanner loaded, else the standard library's: the SDK
    directory's simplejson is compiled for the server's Python, so on another interpreter it runs
    as pure Python and decodes a 100-record Kinesis event about ten times slower (mapping
    throughput halved), while both give the same objects for any JSON document."""
    simplejson = _json_lib()
    return simplejson.loads if simplejson.scanner.c_make_scanner is not None else json.loads


def unmarshal(body: bytes) -> Any:
    try:
        return _loads()(body)
    except Exception as e:
        raise Fault("Runtime.UnmarshalError", f"Unable to unmarshal input: {e}") from None


def marshal(response: Any) -> bytes:
    if isinstance(response, bytes):
        return response
    try:
        return to_json(response)
    except Exception as e:
        raise Fault("Runtime.MarshalError", f"Unable to marshal response: {e}") from None


# --- the handler -------------------------------------------------------------------------------

def load_handler(spec: str) -> Callable:
    """`module.function`, `package.module.function` or `dir/module.function`, with AWS's errors."""
    try:
        module_name, function_name = spec.rsplit(".", 1)
    except ValueError as e:
        raise Fault("Runtime.MalformedHandlerName", f"Bad handler '{spec}': {e}") from None
    if module_name.split(".")[0] in sys.builtin_module_names:
        raise Fault("Runtime.BuiltInModuleConflict", f"Cannot use built-in module {module_name} as a handler module")
    try:
        module = importlib.import_module(module_name.replace("/", "."))
    except ImportError as e:
        raise Fault("Runtime.ImportModuleError", f"Unable to import module '{module_name}': {e}") from None
    except SyntaxError as e:
        raise Fault("Runtime.UserCodeSyntaxError", f"Syntax error in module '{module_name}': {e}",
                    [f'  File "{e.filename}" Line {e.lineno}\n    {e.text}']) from None
    try:
        return getattr(module, function_name)
    except AttributeError:
        raise Fault("Runtime.HandlerNotFound",
                    f"Handler '{function_name}' missing on module '{module_name}'") from None


class Worker:
    def __init__(self, channel: Channel):
        self.channel = channel
        self.output = Output(channel)
        setup_logging(self.output.log)

    def init(self) -> Callable:
        """Import the handler; on failure report the error as AWS does and exit with status 1."""
        try:
            return load_handler(os.environ["_HANDLER"])
        except Exception as e:
            error = (make_error(e.message, e.error_type, e.trace, None) if isinstance(e, Fault)
                     else error_from_exception(e, None))
        logging.warning(_UNHANDLED_WARNING)
        self.output.log([[_now_ms(), error_log_text(error)]])
        self.output.flush()
        self.channel.send({"t": "init", "error": error["errorType"], "rss_kb": _rss_kb()}, to_json(error))
        raise SystemExit(1)

    def invoke(self, handler: Callable, header: dict, body: bytes) -> None:
        global _request_id
        request_id = _request_id = header["id"]
        _set_trace_id(header.get("trace"))
        error = None
        start = time.perf_counter()
        try:
            context = LambdaContext(request_id, header.get("client_context"), header.get("identity"),
                                    header["deadline_ms"], header.get("arn"))
            result = marshal(handler(unmarshal(body), context))
        except Fault as e:
            error = make_error(e.message, e.error_type, e.trace, request_id)
        except Exception as e:  # not BaseException: sys.exit() in a handler ends the runtime, as on AWS
            error = error_from_exception(e, request_id)
        elapsed_ms = (time.perf_counter() - start) * 1000
        if error is not None:
            self.output.log([[_now_ms(), error_log_text(error)]])
            result = to_json(error)
        self.output.flush()
        self.channel.send({"t": "done", "error": error and error["errorType"], "ms": elapsed_ms,
                           "rss_kb": _rss_kb()}, result)

    def serve(self) -> None:
        handler = self.init()
        self.channel.send({"t": "init", "error": None, "rss_kb": _rss_kb()})
        while True:
            try:
                header, body = self.channel.recv()
            except (EOFError, OSError):  # the server closed the socket: stop
                return
            self.invoke(handler, header, body)


def _set_trace_id(trace_id: str | None) -> None:
    """The invocation's X-Ray trace header in `_X_AMZN_TRACE_ID`, as awslambdaric's
    update_xray_env_variable does before each event (removed when there is none): boto3 sends it
    with every call the handler makes (botocore's add_recursion_detection_header), which is how
    Lambda follows a chain of invocations."""
    if trace_id:
        os.environ["_X_AMZN_TRACE_ID"] = trace_id
    else:
        os.environ.pop("_X_AMZN_TRACE_ID", None)


def _exit_when_orphaned() -> None:
    """A handler stuck in a loop never reads the closed socket: leave if the server dies."""
    parent = os.getppid()
    while True:
        time.sleep(1)
        if os.getppid() != parent:
            os._exit(1)


def _set_path(task_root: str, layers: list[str], sdk_dir: str) -> None:
    """sys.path in AWS's order (a python3.13 function's: /var/task, /opt/python/lib/python3.13/
    site-packages, /opt/python, /var/lang/lib/python3.13/site-packages (boto3 & co), /var/runtime
    (PYTHONPATH), the standard library): the code directory, the layers, the SDK directory, the
    PYTHONPATH entries (AWS's is /var/runtime, here the SDK directory again unless the function sets
    its own), then the standard library. Python put this script's directory (kinesim's) first, the
    PYTHONPATH entries next and the standard library last (-S: no site-packages)."""
    first = 0 if getattr(sys.flags, "safe_path", False) else 1
    count = len(os.environ["PYTHONPATH"].split(os.pathsep)) if os.environ.get("PYTHONPATH") else 0
    pythonpath = [p for p in sys.path[first:first + count] if p != sdk_dir]
    stdlib = sys.path[first + count:]
    # The runtime's own simplejson, before the function's code or layers can shadow it (AWS's
    # runtime imports it at start, with /var/task and /opt not on sys.path yet)
    sys.path[:] = [sdk_dir, *stdlib]
    _encoder()
    sys.path[:] = [task_root, *layers, sdk_dir, *pythonpath, *stdlib]


def main() -> None:
    layers, sdk_dir, fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.argv = [_THIS_FILE]
    # -S left out `site`, and with it the builtins it adds, which AWS's handlers have
    import site
    site.setquit()
    site.setcopyright()
    site.sethelper()
    threading.Thread(target=_exit_when_orphaned, name="kinesim-orphan-watch", daemon=True).start()
    worker = Worker(Channel(fd))
    # Layers (/opt/python... on AWS) come after the function's own code, before the runtime's packages
    _set_path(os.environ["LAMBDA_TASK_ROOT"], [p for p in layers.split(os.pathsep) if p], sdk_dir)
    # No bytecode written (AWS's code directory is read-only): none left in a user's source tree,
    # and none stale when code changes within the second its .pyc was written. The SDK's were
    # compiled by the server.
    sys.dont_write_bytecode = True
    code = 0
    try:
        worker.serve()
    except SystemExit as e:  # from the handler (or a failed init): the runtime exits with its code
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # KeyboardInterrupt and the like end the runtime with a traceback
        traceback.print_exc()
        code = 1
    finally:
        worker.output.flush()
    # os._exit: threads the handler started must not keep a retired environment alive
    os._exit(code)


if __name__ == "__main__":
    main()
