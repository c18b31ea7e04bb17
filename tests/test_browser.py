"""A browser as the client: headless Chromium (Debian's `chromium`) opens tests/browser/index.html,
which runs the AWS SDK for JavaScript v3 browser build (bundled from npm by esbuild) against a kinesim
server: CreateStream, PutRecord(s), GetShardIterator, GetRecords and a call that fails. The page
reports what it saw as JSON (in its DOM, and POSTed back to the server that served it); the tests
assert on that report.

The page is served from an origin kinesim allows by default (http://localhost:<port>) and from one it
does not (http://127.0.0.2:<port>: only `localhost`, `127.0.0.1` and `[::1]` are this machine's
origins, see kinesim/guard.py), where the browser must not get through.

Set-up happens once and outside the tests' timing: `npm ci` (cached by npm's own lock stamp), the
esbuild bundle (rebuilt only when its inputs change), and Chromium (installed with apt-get when
missing and running as root; the tests skip only when it cannot be had)."""
from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlencode

import pytest

from chromium_setup import APT_TIMEOUT_S, chromium, run_bounded
from conftest import client_for, start_server
from npm_setup import NODE, NPM, NPM_TIMEOUT_S, ensure_node_modules, newer_than

PAGE_DIR = Path(__file__).parent / "browser"
BUNDLE = PAGE_DIR / "dist" / "kinesis-sdk.js"
PAGE_DEADLINE_S = 90  # the page's own deadline; the test waits a little longer for its report

pytestmark = [
    pytest.mark.skipif(not (NODE and NPM),
                       reason=f"node and npm are needed to bundle the AWS SDK for JavaScript (node={NODE}, npm={NPM})"),
    # a first run installs the SDK and maybe Chromium (set-up counts towards pytest-timeout)
    pytest.mark.timeout(NPM_TIMEOUT_S + 2 * APT_TIMEOUT_S + 4 * PAGE_DEADLINE_S),
]


# set-up: the bundle and the browser

def _ensure_bundle() -> None:
    """`npm ci` when node_modules is missing or older than the package files, then the esbuild bundle
    when it is missing or older than what it is built from."""
    stamp = ensure_node_modules(PAGE_DIR)
    if not newer_than(BUNDLE, [stamp, PAGE_DIR / "entry.js", PAGE_DIR / "build.mjs"]):
        res = run_bounded([NODE, "build.mjs"], NPM_TIMEOUT_S, cwd=PAGE_DIR)
        if res.returncode != 0:
            pytest.fail(f"esbuild failed ({res.returncode})\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}")


@pytest.fixture(scope="module")
def browser() -> str:
    _ensure_bundle()
    return chromium()


@pytest.fixture(scope="module")
def kinesim(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


# the page's server and the browser

class _PageHandler(SimpleHTTPRequestHandler):
    """Serves tests/browser; POST /result takes the page's report."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/result":
            self.server.reports.append(json.loads(body))
            self.server.reported.set()
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@contextmanager
def page_server(address: str):
    httpd = ThreadingHTTPServer((address, 0), partial(_PageHandler, directory=str(PAGE_DIR)))
    httpd.reports, httpd.reported = [], threading.Event()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def open_page(chromium: str, page_host: str, page_address: str, endpoint: str, stream: str) -> dict:
    """Open the page served from http://<page_host>:<port> in headless Chromium; its report."""
    with page_server(page_address) as httpd, tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        query = urlencode(dict(endpoint=endpoint, stream=stream, deadline_ms=PAGE_DEADLINE_S * 1000))
        url = f"http://{page_host}:{httpd.server_address[1]}/index.html?{query}"
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--no-default-browser-check", "--no-proxy-server", "--disable-extensions",
               "--disable-background-networking", "--disable-component-update", "--enable-logging=stderr",
               f"--user-data-dir={profile}", url]
        log_path = Path(profile) / "chromium.log"
        with open(log_path, "w") as log:
            # its own process group: Chromium's helper processes are ended with it
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + PAGE_DEADLINE_S + 30
            while not httpd.reported.wait(0.5):
                if proc.poll() is not None or time.monotonic() > deadline:
                    what = f"exited with {proc.returncode}" if proc.returncode is not None else "timed out"
                    pytest.fail(f"Chromium {what} before the page reported\n{url}\n{log_path.read_text()[-4000:]}")
        finally:
            _stop(proc)
        return httpd.reports[0]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _stream() -> str:
    return "browser-" + uuid.uuid4().hex[:12]


# the tests

def test_page_on_local_origin_puts_and_reads_records(browser, kinesim):
    stream = _stream()
    seen = open_page(browser, "localhost", "127.0.0.1", kinesim.url, stream)
    assert seen["ok"] is True, seen
    assert seen["status"] == "ACTIVE"
    assert seen["failedRecordCount"] == 0
    # what it read back is what it put, in order, bytes for bytes (the 256 byte values included)
    assert [(r["data"], r["partitionKey"]) for r in seen["read"]] == \
        [(r["data"], r["partitionKey"]) for r in seen["put"]]
    assert base64.b64decode(seen["put"][2]["data"]) == bytes(range(256))
    assert [r["sequenceNumber"] for r in seen["read"]] == seen["putSequenceNumbers"]
    assert all(r["arrival"] for r in seen["read"])
    # the SDK read the request id of every answer: the header is exposed to the page
    assert all(seen["requestIds"]), seen["requestIds"]
    # an error reaches the page as AWS's error, with its status and request id
    assert seen["failure"]["name"] == "ResourceNotFoundException", seen["failure"]
    assert seen["failure"]["status"] == 400
    assert seen["failure"]["requestId"]
    assert f"{stream}-missing" in seen["failure"]["message"]
    # and kinesim holds what the page put
    records = _records(kinesim.url, stream)
    assert [base64.b64encode(r["Data"]).decode() for r in records] == [r["data"] for r in seen["put"]]


def test_page_on_foreign_origin_is_refused(browser, kinesim):
    stream = _stream()
    seen = open_page(browser, "127.0.0.2", "127.0.0.2", kinesim.url, stream)
    assert seen["origin"].startswith("http://127.0.0.2:")
    # the first call fails in the browser (its preflight is refused: no CORS answer), not at AWS
    assert seen["ok"] is False, seen
    assert seen["steps"] == ["CreateStream"], seen
    assert seen["error"]["name"] == "TypeError" and seen["error"]["status"] is None, seen["error"]
    # and nothing reached the service
    kinesis = client_for(kinesim.url)
    assert stream not in kinesis.list_streams(Limit=10000)["StreamNames"]


def _records(url: str, stream: str) -> list[dict]:
    kinesis = client_for(url)
    shard = kinesis.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard,
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    return kinesis.get_records(ShardIterator=iterator)["Records"]
