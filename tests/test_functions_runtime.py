"""The function runtime, unit level: FunctionRuntime driven directly (no HTTP) over the handlers in
tests/functions/, checked against what AWS Lambda's Python runtime returns and logs."""
from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid

import pytest

from kinesim.functions.logs import FunctionLogs
from kinesim.functions.runtime import FunctionRuntime

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, "functions", "app")
BROKEN = os.path.join(HERE, "functions", "broken")
ENDPOINT = "http://127.0.0.1:4566"
STREAM_NAME = re.compile(r"^\d{4}/\d{2}/\d{2}/\[\$LATEST\][0-9a-f]{32}$")
REPORT = re.compile(r"^REPORT RequestId: (?P<id>[0-9a-f-]{36})\tDuration: (?P<duration>\d+\.\d\d) ms\t"
                    r"Billed Duration: (?P<billed>\d+) ms\tMemory Size: 128 MB\tMax Memory Used: (?P<memory>\d+) MB\t"
                    r"(?:Init Duration: (?P<init>\d+\.\d\d) ms\t)?(?P<status>Status: .*)?\n$")


def function(handler: str, code_dir: str = APP, **overrides) -> dict:
    """A stored FunctionConfiguration as the Lambda API keeps it, plus CodeDir."""
    name = "fn-" + uuid.uuid4().hex[:10]
    config = {"FunctionName": name, "FunctionArn": f"arn:aws:lambda:us-east-1:000000000000:function:{name}",
              "Runtime": "python3.11", "Handler": handler, "Timeout": 3, "MemorySize": 128,
              "Environment": {"Variables": {"STAGE": "test", "TZ": ":UTC"}}, "Version": "$LATEST",
              "CodeSha256": "sha", "LastModified": "2026-11-23T10:00:00.000+0000", "CodeDir": code_dir}
    config.update(overrides)
    return config


@pytest.fixture
def logs(tmp_path):
    return FunctionLogs(str(tmp_path / "logs"))


@pytest.fixture
def runtime(logs):
    rt = FunctionRuntime(logs, ENDPOINT, "eu-west-1", "000000000000")
    yield rt
    rt.close()


def messages(logs: FunctionLogs, fn: dict) -> list[str]:
    return [e["message"] for e in logs.read(fn["FunctionName"])]


def invoke_together(rt: FunctionRuntime, fn: dict, payload: bytes, n: int = 2) -> list:
    results = []
    threads = [threading.Thread(target=lambda: results.append(rt.invoke(fn, payload))) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == n
    return results


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_handler_sees_context_and_environment(runtime, monkeypatch):
    monkeypatch.setenv("KINESIM_SERVER_SECRET", "must-not-leak")
    fn = function("app.describe")
    arn = fn["FunctionArn"] + ":live"
    result = runtime.invoke(fn, b'{"n": 1}', "11111111-2222-3333-4444-555555555555",
                            client_context={"custom": {"k": "v"}, "env": None, "client": None},
                            identity={"cognitoIdentityId": "id-1", "cognitoIdentityPoolId": "pool-1"},
                            invoked_function_arn=arn)
    assert result.function_error is None
    out = json.loads(result.payload)
    assert out["event"] == {"n": 1}
    assert out["aws_request_id"] == result.request_id == "11111111-2222-3333-4444-555555555555"
    assert out["function_name"] == fn["FunctionName"]
    assert out["function_version"] == "$LATEST"
    assert out["invoked_function_arn"] == arn
    assert out["memory_limit_in_mb"] == "128"  # a string, as AWS's runtime reads it from the environment
    assert out["log_group_name"] == "/aws/lambda/" + fn["FunctionName"]
    assert STREAM_NAME.match(out["log_stream_name"])
    assert 2000 < out["remaining_ms"] <= 3000
    assert out["identity"] == ["id-1", "pool-1"]
    assert out["client_context"] == {"k": "v"}
    assert out["cwd"] == APP and out["sys_path0"] == APP and out["helper"] == "helper"
    assert out["stdout_encoding"] == "utf-8"
    env = out["env"]
    assert env["STAGE"] == "test"
    expected = {
        "AWS_LAMBDA_FUNCTION_NAME": fn["FunctionName"], "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128", "AWS_LAMBDA_LOG_GROUP_NAME": "/aws/lambda/" + fn["FunctionName"],
        "AWS_LAMBDA_LOG_STREAM_NAME": out["log_stream_name"], "AWS_REGION": "eu-west-1",
        "AWS_DEFAULT_REGION": "eu-west-1", "AWS_EXECUTION_ENV": "AWS_Lambda_python3.11", "LAMBDA_TASK_ROOT": APP,
        "_HANDLER": "app.describe", "TZ": ":UTC", "AWS_ENDPOINT_URL": ENDPOINT,
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand"}
    assert {k: env.get(k) for k in expected} == expected
    assert env["AWS_ACCESS_KEY_ID"] and env["AWS_SECRET_ACCESS_KEY"] and env["AWS_SESSION_TOKEN"]
    assert "KINESIM_SERVER_SECRET" not in env
    assert result.max_memory_mb > 0 and result.billed_ms >= 1


def test_reserved_variables_win_over_the_functions_own(runtime):
    fn = function("app.describe", Environment={"Variables": {"AWS_REGION": "mars-1", "MY": "x"}})
    env = json.loads(runtime.invoke(fn, b"{}").payload)["env"]
    assert env["AWS_REGION"] == "eu-west-1" and env["MY"] == "x"


def test_warm_worker_is_reused_and_init_runs_once(runtime, logs):
    fn = function("app.describe")
    outs = [json.loads(runtime.invoke(fn, b"{}").payload) for _ in range(3)]
    assert [o["invocations"] for o in outs] == [1, 2, 3]
    assert {o["pid"] for o in outs} == {outs[0]["init_pid"]}
    text = messages(logs, fn)
    assert text.count("init: loading app\n") == 1
    reports = [m for m in text if m.startswith("REPORT")]
    assert len(reports) == 3
    assert REPORT.match(reports[0])["init"] is not None  # the cold start
    assert [REPORT.match(r)["init"] for r in reports[1:]] == [None, None]


def test_handler_in_a_package_directory(runtime):
    for handler in ("pkg/handlers.handler", "pkg.handlers.handler"):
        result = runtime.invoke(function(handler), b"{}")
        assert json.loads(result.payload) == {"module": "pkg.handlers", "helper": "helper"}


# Each invocation waits until `n` of them are running at once (or gives up after a minute): they
# meet only if they run side by side, however long a cold start takes on a busy machine.
MEET = """
import os, time
def handler(event, context):
    open(os.path.join(event["dir"], str(os.getpid())), "w").close()
    deadline = time.monotonic() + 60
    while len(os.listdir(event["dir"])) < event["n"] and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"pid": os.getpid(), "met": len(os.listdir(event["dir"])) >= event["n"]}
"""


def test_concurrent_invocations_use_separate_workers(runtime, tmp_path):
    code, meeting = tmp_path / "code", tmp_path / "meeting"
    code.mkdir()
    meeting.mkdir()
    (code / "meet.py").write_text(MEET)
    fn = function("meet.handler", code_dir=str(code), Timeout=120)
    runtime.invoke(fn, json.dumps({"dir": str(tmp_path), "n": 0}).encode())  # one warm worker; another starts
    meet = json.dumps({"dir": str(meeting), "n": 2}).encode()
    runs = [json.loads(r.payload) for r in invoke_together(runtime, fn, meet)]
    assert len({run["pid"] for run in runs}) == 2
    assert all(run["met"] for run in runs)  # they overlapped


def test_invocations_wait_for_a_worker_past_the_limit(logs):
    rt = FunctionRuntime(logs, ENDPOINT, "us-east-1", "000000000000", max_workers_per_function=1)
    try:
        runs = sorted((json.loads(r.payload) for r in invoke_together(rt, function("app.sleep"), b'{"seconds": 0.3}')),
                      key=lambda run: run["started"])
        assert len({run["pid"] for run in runs}) == 1
        assert runs[1]["started"] >= runs[0]["ended"]  # one after the other
    finally:
        rt.close()


def test_timeout_kills_the_worker_and_the_next_invoke_gets_a_new_one(runtime, logs):
    fn = function("app.sleep", Timeout=1)
    first = json.loads(runtime.invoke(fn, b'{"seconds": 0}').payload)["pid"]
    start = time.perf_counter()
    result = runtime.invoke(fn, b'{"seconds": 30}', "aaaaaaaa-0000-0000-0000-000000000001")
    assert time.perf_counter() - start < 20  # stopped at its timeout, not after the 30 s it asked for
    assert result.function_error == "Unhandled"
    assert json.loads(result.payload) == {
        "errorMessage": "RequestId: aaaaaaaa-0000-0000-0000-000000000001 Error: Task timed out after 1.00 seconds",
        "errorType": "Sandbox.Timedout"}
    assert result.duration_ms == 1000.0 and result.billed_ms == 1000
    assert not alive(first)
    report = REPORT.match(messages(logs, fn)[-1])
    assert report["duration"] == "1000.00" and report["status"] == "Status: timeout"
    assert "sleeping 30\n" in result.log_tail  # what it printed before it was killed is kept
    second = json.loads(runtime.invoke(fn, b'{"seconds": 0}').payload)["pid"]
    assert second != first


def test_exception_payload_and_log(runtime, logs):
    fn = function("app.fail")
    result = runtime.invoke(fn, b'{"n": 7}', "bbbbbbbb-0000-0000-0000-000000000001")
    assert result.function_error == "Unhandled"
    error = json.loads(result.payload)
    assert list(error) == ["errorMessage", "errorType", "requestId", "stackTrace"]
    assert error["errorMessage"] == "bad input: 7" and error["errorType"] == "ValueError"
    assert error["requestId"] == "bbbbbbbb-0000-0000-0000-000000000001"
    assert len(error["stackTrace"]) == 1  # starts in the handler: none of the runtime's own frames
    assert error["stackTrace"][0].startswith(f'  File "{APP}/app.py", line ')
    assert error["stackTrace"][0].endswith(', in fail\n    raise ValueError("bad input: " + str(event.get("n")))\n')
    assert result.payload.startswith(b'{"errorMessage": "bad input: 7", "errorType"')  # AWS's spacing
    # one log event, lines joined, traceback indented with no-break spaces as AWS prints it
    event = next(m for m in messages(logs, fn) if m.startswith("[ERROR]"))
    lines = event.split("\n")
    assert lines[0] == "[ERROR] ValueError: bad input: 7"
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[2].startswith('\u00a0\u00a0File "') and lines[3].startswith("\u00a0\u00a0\u00a0\u00a0raise ValueError")
    # a handled exception does not cost the worker
    assert runtime.invoke(fn, b'{"n": 8}').function_error == "Unhandled"
    assert messages(logs, fn).count("init: loading app\n") == 1


def test_import_error_and_missing_handler(runtime, logs):
    fn = function("nope.handler")
    result = runtime.invoke(fn, b"{}")
    assert result.function_error == "Unhandled"
    assert json.loads(result.payload) == {
        "errorMessage": "Unable to import module 'nope': No module named 'nope'",
        "errorType": "Runtime.ImportModuleError", "requestId": "", "stackTrace": []}
    text = messages(logs, fn)
    assert text[0].startswith("[WARNING]\t") and "\t\tLAMBDA_WARNING: Unhandled exception." in text[0]
    assert text[1] == ("[ERROR] Runtime.ImportModuleError: Unable to import module 'nope': No module named 'nope'\n"
                       "Traceback (most recent call last):")
    assert re.match(r"INIT_REPORT Init Duration: \d+\.\d\d ms\tPhase: invoke\tStatus: error\t"
                    r"Error Type: Runtime.ImportModuleError\n$", text[2])
    assert text[3].startswith("START RequestId: ") and text[4].startswith("END RequestId: ")
    assert REPORT.match(text[5])["status"] == "Status: error\tError Type: Runtime.ImportModuleError"
    # each invoke tries the init again, as AWS does
    assert json.loads(runtime.invoke(fn, b"{}").payload)["errorType"] == "Runtime.ImportModuleError"

    missing = runtime.invoke(function("app.nope"), b"{}")
    assert json.loads(missing.payload) == {
        "errorMessage": "Handler 'nope' missing on module 'app'", "errorType": "Runtime.HandlerNotFound",
        "requestId": "", "stackTrace": []}


def test_syntax_error_and_failing_init_code(runtime):
    syntax = json.loads(runtime.invoke(function("syntax.handler", BROKEN), b"{}").payload)
    assert syntax["errorType"] == "Runtime.UserCodeSyntaxError"
    assert syntax["errorMessage"].startswith("Syntax error in module 'syntax': expected ':'")
    assert syntax["stackTrace"] == [f'  File "{BROKEN}/syntax.py" Line 1\n    def handler(event, context)\n']

    init = json.loads(runtime.invoke(function("init_fails.handler", BROKEN), b"{}").payload)
    assert (init["errorType"], init["errorMessage"], init["requestId"]) == (
        "RuntimeError", "cannot reach the database", "")
    assert 'in _connect\n    raise RuntimeError("cannot reach the database")\n' in init["stackTrace"][-1]


def test_unserializable_result_and_decimals(runtime):
    result = runtime.invoke(function("app.unserializable"), b"{}", "cccccccc-0000-0000-0000-000000000001")
    assert result.function_error == "Unhandled"
    assert json.loads(result.payload) == {
        "errorMessage": "Unable to marshal response: Object of type set is not JSON serializable",
        "errorType": "Runtime.MarshalError", "requestId": "cccccccc-0000-0000-0000-000000000001", "stackTrace": []}
    # DynamoDB's Decimals are returned as numbers; non-ASCII escaped (python3.11's encoder)
    assert runtime.invoke(function("app.decimals"), b"{}").payload == b'{"price": 19.99, "text": "caf\\u00e9"}'


def test_exit_and_crash_are_exit_errors_and_the_worker_is_replaced(runtime, logs):
    fn = function("app.exit_")
    result = runtime.invoke(fn, b'{"code": 1}', "dddddddd-0000-0000-0000-000000000001")
    assert result.function_error == "Unhandled"
    assert json.loads(result.payload) == {
        "errorType": "Runtime.ExitError",
        "errorMessage": "RequestId: dddddddd-0000-0000-0000-000000000001 Error: Runtime exited with error: exit status 1"}
    text = messages(logs, fn)
    assert "about to exit\n" in text  # printed just before os._exit: kept
    assert ("RequestId: dddddddd-0000-0000-0000-000000000001 Error: Runtime exited with error: exit status 1\n"
            "Runtime.ExitError\n") in text
    assert REPORT.match(text[-1])["status"] == "Status: error\tError Type: Runtime.ExitError"
    # a new worker for the next invocation
    assert runtime.invoke(fn, b'{"code": 3}').payload.endswith(b"Runtime exited with error: exit status 3\"}")
    assert messages(logs, fn).count("init: loading app\n") == 2

    crash = json.loads(runtime.invoke(function("app.crash"), b"{}").payload)
    assert crash["errorMessage"].endswith("Error: Runtime exited with error: signal: segmentation fault")
    quiet = json.loads(runtime.invoke(function("app.sys_exit"), b"{}").payload)
    assert quiet["errorMessage"].endswith("Error: Runtime exited without providing a reason")


def test_retire_picks_up_new_code(runtime, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "main.py").write_text("def handler(event, context):\n    return 'v1'\n")
    fn = function("main.handler", str(code))
    assert runtime.invoke(fn, b"{}").payload == b'"v1"'
    (code / "main.py").write_text("def handler(event, context):\n    return 'v2'\n")
    assert runtime.invoke(fn, b"{}").payload == b'"v1"'  # the warm worker still has the old module
    runtime.retire(fn["FunctionName"])
    assert runtime.invoke(fn, b"{}").payload == b'"v2"'
    # a changed configuration is new environments too, even without retire()
    (code / "main.py").write_text("def handler(event, context):\n    return 'v3'\n")
    assert runtime.invoke(dict(fn, CodeSha256="other"), b"{}").payload == b'"v3"'


def test_logs_start_end_report(runtime, logs):
    fn = function("app.describe")
    result = runtime.invoke(fn, b"{}")
    events = logs.read(fn["FunctionName"])
    assert [e["message"] for e in events] == [
        "init: loading app\n",
        f"START RequestId: {result.request_id} Version: $LATEST\n",
        "describe got {}\n",
        events[3]["message"],
        f"END RequestId: {result.request_id}\n",
        events[5]["message"]]
    assert re.match(rf"\[INFO\]\t\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{{3}}Z\t{result.request_id}\tlogged at info\n$",
                    events[3]["message"])
    report = REPORT.match(events[5]["message"])
    assert report["id"] == result.request_id and report["status"] is None
    assert float(report["duration"]) == round(result.duration_ms, 2)
    assert int(report["billed"]) == result.billed_ms and int(report["memory"]) == result.max_memory_mb
    # The report prints the init duration to 2 decimals; billing adds it unrounded (the sum can
    # cross a whole millisecond between the two: 0.34 + 48.656 bills 49, 0.34 + 48.66 reads 50).
    init = float(report["init"])
    assert result.billed_ms in {max(1, -(-(result.duration_ms + init + d) // 1)) for d in (-0.005, 0.005)}
    assert {e["logStreamName"] for e in events} == {json.loads(result.payload)["log_stream_name"]}
    stamps = [e["timestamp"] for e in events]
    assert stamps == sorted(stamps) and all(e["ingestionTime"] >= e["timestamp"] for e in events)


def test_everything_printed_is_logged(runtime, logs):
    fn = function("app.shout")
    result = runtime.invoke(fn, b"{}")
    text = messages(logs, fn)
    start = text.index(f"START RequestId: {result.request_id} Version: $LATEST\n")
    body = text[start + 1:text.index(f"END RequestId: {result.request_id}\n")]
    warnings = [m for m in body if m.startswith("[WARNING]")]
    assert len(warnings) == 1  # one event per record, however many lines
    assert re.match(r"\[WARNING\]\t.*Z\t[0-9a-f-]{36}\tmulti\nline\n$", warnings[0])
    assert sorted(body) == sorted(["to stdout\n", "to stderr\n", "from a subprocess\n", warnings[0],
                                   "via context.log\n", "no newline"])
    # Order is kept within a stream (stdout: print, then the subprocess's fd 1, then print), as on
    # AWS, where each stream is one pipe; stderr and the logging channel are streams of their own.
    assert [m for m in body if m in ("to stdout\n", "from a subprocess\n", "no newline")] == [
        "to stdout\n", "from a subprocess\n", "no newline"]


def test_a_subprocess_and_print_keep_their_order_on_stdout(runtime, logs, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "interleave.py").write_text(
        "import os\n"
        "def handler(event, context):\n"
        "    for i in range(event['n']):\n"
        "        os.system(f'echo from a subprocess {i}')\n"  # fd 1, through the capture pipe
        "        print(f'from print {i}')\n")                   # sys.stdout, sent at once
    fn = function("interleave.handler", code_dir=str(code))
    result = runtime.invoke(fn, b'{"n": 40}')
    assert result.function_error is None, result.payload
    text = messages(logs, fn)
    body = text[text.index(f"START RequestId: {result.request_id} Version: $LATEST\n") + 1:
                text.index(f"END RequestId: {result.request_id}\n")]
    assert body == [line for i in range(40) for line in (f"from a subprocess {i}\n", f"from print {i}\n")]


def test_log_tail_is_the_last_4kb(runtime):
    fn = function("app.chatty")
    short = runtime.invoke(fn, b'{"lines": 1}')
    assert short.log_tail.startswith("init: loading app\nSTART RequestId: ")
    assert short.log_tail.endswith("\n") and "\nREPORT RequestId: " in short.log_tail
    long = runtime.invoke(fn, b'{"lines": 500}')
    assert len(long.log_tail.encode()) == 4096
    assert "line 00499 " in long.log_tail and "START" not in long.log_tail
    assert long.log_tail.rstrip("\n").split("\n")[-1].startswith(f"REPORT RequestId: {long.request_id}\t")


def test_six_megabyte_payloads_and_the_response_limit(runtime):
    fn = function("app.echo")
    big = json.dumps("z" * (6 * 1024 * 1024 - 100)).encode()
    result = runtime.invoke(fn, big)
    assert result.function_error is None and result.payload == big
    too_big = runtime.invoke(function("app.big"), b'{"size": 6291556}')
    assert too_big.function_error == "Unhandled"
    assert json.loads(too_big.payload) == {
        "errorMessage": "Response payload size exceeded maximum allowed payload size (6291556 bytes).",
        "errorType": "Function.ResponseSizeTooLarge"}


def test_close_stops_every_worker(logs):
    rt = FunctionRuntime(logs, ENDPOINT, "us-east-1", "000000000000")
    fn = function("app.sleep")
    idle_pid = json.loads(rt.invoke(fn, b'{"seconds": 0}').payload)["pid"]
    busy, slow = [], function("app.sleep", Timeout=60)
    t = threading.Thread(target=lambda: busy.append(rt.invoke(slow, b'{"seconds": 30}')))
    t.start()
    deadline = time.monotonic() + 30
    while "sleeping 30\n" not in messages(logs, slow):  # flushed while running: the log can be followed
        assert time.monotonic() < deadline
        time.sleep(0.05)
    start = time.perf_counter()
    rt.close()
    t.join(25)
    assert time.perf_counter() - start < 25  # not after the 30 s it sleeps
    assert not alive(idle_pid)
    assert busy and busy[0].function_error == "Unhandled"
    with pytest.raises(RuntimeError):
        rt.invoke(fn, b"{}")


def test_function_logs_store(tmp_path):
    store = FunctionLogs(str(tmp_path))
    assert store.group_name("f") == "/aws/lambda/f"
    assert store.read("f") == []

    def writer(stream: str, base: int) -> None:
        for i in range(50):
            store.write("f", stream, [f"{stream} {i}\n"], [base + i * 2])

    threads = [threading.Thread(target=writer, args=("2026/11/23/[$LATEST]" + c * 32, base))
               for c, base in (("a", 1000), ("b", 1001))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = store.read("f")
    assert len(events) == 100
    assert [e["timestamp"] for e in events] == list(range(1000, 1100))  # merged in time order
    assert events[0]["logStreamName"] == "2026/11/23/[$LATEST]" + "a" * 32
    assert events[1]["message"] == "2026/11/23/[$LATEST]" + "b" * 32 + " 0\n"
    assert [e["timestamp"] for e in store.read("f", since_ms=1090, limit=5)] == [1090, 1091, 1092, 1093, 1094]
    store.write("f", "s", ["now\n"])  # timestamps default to now
    assert abs(store.read("f", since_ms=2000)[0]["timestamp"] - time.time() * 1000) < 5000
    store.delete("f")
    assert store.read("f") == [] and not os.path.exists(tmp_path / "f")
    store.write("f", "s", ["again\n"])
    assert [e["message"] for e in store.read("f")] == ["again\n"]
