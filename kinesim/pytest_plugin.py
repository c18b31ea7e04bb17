"""kinesim's pytest plugin: installing kinesim makes it available (the `pytest11` entry point), and
it does nothing until a test asks for one of its fixtures.

- `kinesim_server` (session): one `kinesim serve` per test session (per xdist worker: each is a
  session of its own) on a free port, in memory unless `--kinesim-data-dir` (ini
  `kinesim_data_dir`) says where to keep its data, stream state changes immediate
  (`--create-stream-ms 0` and friends; ini `kinesim_args` adds or overrides `kinesim serve`
  arguments). Stopped when the session ends.
- `kinesim` (function): that server reset (`POST /_kinesim/reset`: every service as a fresh server
  has it), and for the test's duration the environment boto3, the AWS CLI and the AWS SDK for
  JavaScript read: `AWS_ENDPOINT_URL`, `AWS_DEFAULT_REGION`/`AWS_REGION`, test credentials, and
  no shared config or credentials file, profile or service-specific endpoint to override them.

Both give a `KinesimServer`: `url`, `region`, `env`, `client(service)`, `reset(*services)`.
See docs/testing.md.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Iterator

import pytest

# `kinesim serve` arguments the plugin gives before the user's (`kinesim_args`): Kinesis streams,
# consumers, queues and channels and Firehose delivery streams change state at once, so that waiters
# (which ask first, then sleep: 10 s for Kinesis's) pass at their first call.
SERVE_ARGS = ("--create-stream-ms", "0", "--delete-stream-ms", "0", "--update-stream-ms", "0",
              "--log-level", "warning")
ACCESS_KEY_ID = SECRET_ACCESS_KEY = "test"
START_TIMEOUT_S = 60.0
# The environment a test runs in besides the plugin's: what would take precedence over it or
# point elsewhere (a profile's endpoint, region or S3 addressing style; a session token).
_CLEARED = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
            "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kinesim", "kinesim server (fixtures kinesim and kinesim_server)")
    group.addoption("--kinesim-data-dir", metavar="DIR", default=None,
                    help="keep the kinesim server's data in DIR (DIR/<worker> under xdist) instead of in memory")
    parser.addini("kinesim_data_dir", "keep the kinesim server's data in this directory (relative to the "
                                      "rootdir) instead of in memory", default="")
    parser.addini("kinesim_args", "more arguments for `kinesim serve`, e.g. --create-stream-ms 100",
                  type="args", default=[])


class KinesimServer:
    """A `kinesim serve` process of the test session."""

    def __init__(self, url: str, region: str, process: Any = None, log_path: str | None = None,
                 data_dir: str | None = None):
        self.url = url
        self.region = region
        self.process = process  # subprocess.Popen
        self.log_path = log_path  # the server's output
        self.data_dir = data_dir  # None: in memory

    @property
    def env(self) -> dict[str, str]:
        """What boto3, the AWS CLI and the JavaScript SDK read to call this server."""
        return {"AWS_ENDPOINT_URL": self.url, "AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region,
                "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
                "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true"}

    def client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client of this server, whatever the environment says."""
        import boto3
        settings = {"endpoint_url": self.url, "region_name": self.region, "aws_access_key_id": ACCESS_KEY_ID,
                    "aws_secret_access_key": SECRET_ACCESS_KEY, **kwargs}
        return boto3.client(service, **settings)

    def reset(self, *services: str) -> list[str]:
        """Every service's state as a fresh server has it, or only the named services' (boto3's
        names: "kinesis", "s3"...); the services reset."""
        import json
        import urllib.error
        import urllib.parse
        import urllib.request
        query = "?" + urllib.parse.urlencode({"services": ",".join(services)}) if services else ""
        request = urllib.request.Request(f"{self.url}/_kinesim/reset{query}", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                return json.load(answer)["reset"]
        except urllib.error.HTTPError as err:
            message = err.read().decode("utf-8", "replace")
            raise RuntimeError(f"kinesim reset failed ({err.code}): {message}") from None

    def stop(self, timeout: float = 30.0) -> None:
        import subprocess
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def start_server(log_path: str, data_dir: str | None = None, args: list[str] | tuple[str, ...] = (),
                 timeout: float = START_TIMEOUT_S) -> KinesimServer:
    """`kinesim serve` on a free port of 127.0.0.1, its output in `log_path`; answers once ready."""
    import subprocess
    storage = ["--data-dir", data_dir] if data_dir else ["--in-memory"]
    for _ in range(5):  # a free port may be taken by someone else before the server binds it
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "kinesim", "serve", "--host", "127.0.0.1", "--port", str(port), *storage,
                 *SERVE_ARGS, *args], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=_server_environment(), preexec_fn=_ends_with_parent if sys.platform == "linux" else None)
        health = _wait_ready(url, process, timeout)
        if health is not None:
            return KinesimServer(url, health.get("region") or "us-east-1", process, log_path, data_dir)
        if "cannot listen on" not in _tail(log_path):
            break
    raise RuntimeError(f"kinesim serve did not start (exit code {process.poll()}); its output "
                       f"({log_path}) ends:\n{_tail(log_path)}")


def _ends_with_parent() -> None:
    """In the server's process, before it runs: a SIGTERM when the test process ends, however it
    ends (killed, its finalizers never run), so that no server outlives its tests."""
    import ctypes
    import signal
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _server_environment() -> dict[str, str]:
    """The test process's environment without the AWS configuration meant for AWS (a profile, a
    config file) that the server's own AWS SDK would otherwise read."""
    env = {name: value for name, value in os.environ.items()
           if name not in _CLEARED and not name.startswith("AWS_ENDPOINT_URL")}
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    return env


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, process: Any, timeout: float) -> dict[str, Any] | None:
    """The server's health document once it answers; None if it exited (or never answered)."""
    import json
    import urllib.request
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return None
        try:
            with urllib.request.urlopen(f"{url}/_kinesim/health", timeout=2) as answer:
                return json.load(answer)
        except OSError:
            time.sleep(0.05)
    process.kill()
    process.wait()
    return None


def _tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def _data_dir(config: pytest.Config) -> str | None:
    given = config.getoption("kinesim_data_dir")
    if given:
        base = os.path.abspath(given)
    elif config.getini("kinesim_data_dir"):
        base = os.path.join(str(config.rootpath), config.getini("kinesim_data_dir"))
    else:
        return None
    worker = getattr(config, "workerinput", {}).get("workerid")  # pytest-xdist: a server per worker
    return os.path.join(base, worker) if worker else base


@pytest.fixture(scope="session")
def kinesim_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KinesimServer]:
    """One kinesim server for the test session (each xdist worker's), stopped at its end."""
    log_path = str(tmp_path_factory.mktemp("kinesim") / "server.log")
    server = start_server(log_path, _data_dir(request.config), request.config.getini("kinesim_args"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kinesim(kinesim_server: KinesimServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[KinesimServer]:
    """The session's kinesim server, reset, with the AWS environment pointing at it for the test."""
    kinesim_server.reset()
    for name in list(os.environ):
        if name in _CLEARED or name.startswith("AWS_ENDPOINT_URL_"):
            monkeypatch.delenv(name)
    for name, value in kinesim_server.env.items():
        monkeypatch.setenv(name, value)
    yield kinesim_server
