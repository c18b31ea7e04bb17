"""Fixtures: a real kinesim server on a free port (a subprocess, as users run it) and boto3 clients."""
from __future__ import annotations

import os
import signal
import time
import uuid

import boto3
import pytest
from botocore.config import Config

from kinesim.config import Settings
from kinesim.kinesis.service import KinesisService
from kinesim.server import ServerProcess, free_port
from kinesim.store import Store

# Every JVM the tests start (kinesim's warm Spark, the classic Spark of the streaming tests) compiles
# with the JIT's first tier only: a test's Spark does little work, and the second tier's compiler
# threads cost more CPU at start-up than they win back (the Spark tests ran 18% faster, the windowed
# continuous query 73 s instead of 83 s). Spark's launcher adds SPARK_SUBMIT_OPTS to the JVM's
# command line; servers and commands started by the tests inherit it. A user's Spark is untouched.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")


def client_for(url: str, service: str = "kinesis", **config):
    return boto3.client(service, endpoint_url=url, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test", config=Config(retries={"max_attempts": 1}, **config))


def ctrl_c_reaches_child() -> None:
    """`preexec_fn` for a child a test sends Ctrl-C (SIGINT) to. A shell starts a background job's
    processes with SIGINT ignored (CI runners, `nohup`, `bash .ci/run &`) and children inherit
    that; a user's terminal delivers Ctrl-C to the command whatever started the shell."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_server(tmp_path_factory, **overrides) -> ServerProcess:
    settings = Settings(port=free_port(), data_dir=str(tmp_path_factory.mktemp("data")), create_stream_ms=0,
                        delete_stream_ms=0, update_stream_ms=0, log_level="warning")
    for k, v in overrides.items():
        setattr(settings, k, v)
    return ServerProcess(settings).start()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def tool_server(tmp_path_factory):
    """A server of the module's own, for the deploy tools' tests: they leave stacks behind (SAM's
    managed stack, CDKToolkit) as they do on AWS."""
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def kinesis(server):
    return client_for(server.url)


# Module-scoped: a test module with a server of its own gets clients of it.
@pytest.fixture(scope="module")
def cfn(server):
    return client_for(server.url, "cloudformation")


@pytest.fixture(scope="module")
def sqs(server):
    return client_for(server.url, "sqs")


@pytest.fixture
def stream_name():
    return "test-" + uuid.uuid4().hex[:12]


@pytest.fixture
def make_stream(kinesis):
    """Create a stream (ACTIVE at once: the session server has zero state delays)."""
    def make(shards: int = 1, name: str | None = None) -> str:
        name = name or "test-" + uuid.uuid4().hex[:12]
        kinesis.create_stream(StreamName=name, ShardCount=shards)
        return name
    return make


def make_service(path, **overrides) -> KinesisService:
    """A Kinesis service in this process, without HTTP, on a store in `path`: for unit tests."""
    settings = Settings(create_stream_ms=0, update_stream_ms=0, delete_stream_ms=0)
    for k, v in overrides.items():
        setattr(settings, k, v)
    return KinesisService(settings, Store(str(path)))


@pytest.fixture
def svc(tmp_path):
    service = make_service(tmp_path)
    yield service
    service.store.close()


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.1):
    """predicate()'s first true value, asked every `interval` s; fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(interval)


@pytest.fixture(scope="module")
def local_spark():
    """A classic Spark in this process, two cores, the "kinesim" data source registered."""
    from kinesim.analytics.session import spark_session
    from kinesim.analytics.streaming import register
    session = spark_session("local[2]", "kinesim-tests", **{"spark.sql.shuffle.partitions": "2"})
    register(session)
    yield session
    session.stop()
