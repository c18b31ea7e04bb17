"""`kinesim logs FUNCTION [--follow]` as a user runs it: a subprocess against a real server."""
from __future__ import annotations

import io
import queue
import json
import subprocess
import sys
import threading
import time
import uuid
import zipfile

import pytest

from conftest import client_for

HANDLER = "def handler(event, context):\n    print('hello from', event['who'])\n    return 'ok'\n"


def package() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", HANDLER)
    return buf.getvalue()


@pytest.fixture
def function(server):
    lam = client_for(server.url, "lambda")
    name = "logs-" + uuid.uuid4().hex[:8]
    lam.create_function(FunctionName=name, Runtime="python3.11", Role="arn:aws:iam::000000000000:role/r",
                        Handler="app.handler", Code={"ZipFile": package()})
    yield lam, name
    lam.delete_function(FunctionName=name)


def kinesim(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinesim", *args], capture_output=True, text=True, timeout=60, **kw)


def test_logs_prints_the_invocation(server, function):
    lam, name = function
    lam.invoke(FunctionName=name, Payload=b'{"who": "first"}')
    out = kinesim("logs", name, "--endpoint-url", server.url)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("START RequestId: ")]
    assert len(starts) == 1 and "Version: $LATEST" in lines[starts[0]]
    printed = lines.index("hello from first")
    end = next(i for i, line in enumerate(lines) if line.startswith("END RequestId: "))
    report = next(i for i, line in enumerate(lines) if line.startswith("REPORT RequestId: "))
    assert starts[0] < printed < end < report
    assert "Duration: " in lines[report] and "Memory Size: 128 MB" in lines[report]


def lines_until_report(lines: queue.Queue, timeout: float = 60.0) -> list[str]:
    """What a follower prints up to and including the next REPORT line."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while not (seen and seen[-1].startswith("REPORT RequestId: ")):
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no REPORT line within {timeout} s: {seen}") from None
        assert line, f"the follower exited: {seen}"
        seen.append(line)
    return seen


def test_logs_follow_shows_new_invocations(server, function):
    lam, name = function
    lam.invoke(FunctionName=name, Payload=b'{"who": "earlier"}')
    proc = subprocess.Popen([sys.executable, "-m", "kinesim", "logs", name, "--follow", "--endpoint-url", server.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in iter(proc.stdout.readline, "")] + [lines.put("")],
                     daemon=True).start()
    try:
        # Once the earlier invocation is printed, the follower is polling: the next one is new to it.
        assert "hello from earlier\n" in lines_until_report(lines)
        lam.invoke(FunctionName=name, Payload=b'{"who": "later"}')
        seen = lines_until_report(lines)
        assert "hello from later\n" in seen and "hello from earlier\n" not in seen
        assert sum(1 for line in seen if line.startswith("START ")) == 1  # each line printed once
    finally:
        proc.terminate()
        proc.wait(10)


def test_logs_of_a_missing_function_says_so(server):
    out = kinesim("logs", "no-such-function", "--endpoint-url", server.url)
    assert out.returncode == 2 and "function 'no-such-function' does not exist" in out.stderr


def test_logs_without_a_server_says_what_to_do():
    out = kinesim("logs", "f", "--endpoint-url", "http://127.0.0.1:9")
    assert out.returncode == 1 and "is `kinesim serve` running?" in out.stderr


def test_logs_into_a_reader_that_goes_away(server, function):
    # `kinesim logs F | head -1`: the reader closes the pipe after one line; no traceback.
    lam, name = function
    for i in range(20):
        lam.invoke(FunctionName=name, Payload=json.dumps({"who": "x" * 2000 + str(i)}).encode())
    proc = subprocess.Popen([sys.executable, "-m", "kinesim", "logs", name, "--endpoint-url", server.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does once it has its line
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()
