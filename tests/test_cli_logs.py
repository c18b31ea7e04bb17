"""`kinesim logs FUNCTION [--follow]` as a user runs it: a subprocess against a real server."""
from __future__ import annotations

import io
import subprocess
import sys
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


def test_logs_follow_shows_new_invocations(server, function):
    lam, name = function
    proc = subprocess.Popen([sys.executable, "-m", "kinesim", "logs", name, "--follow", "--endpoint-url", server.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)  # the follower is polling before the invocation happens
        lam.invoke(FunctionName=name, Payload=b'{"who": "later"}')
        deadline = time.time() + 20
        seen = []
        while time.time() < deadline:
            line = proc.stdout.readline()
            seen.append(line)
            if line.startswith("REPORT RequestId: "):
                break
        assert "hello from later\n" in seen and seen[-1].startswith("REPORT RequestId: ")
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
