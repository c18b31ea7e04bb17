"""kinesim's pytest plugin (issue 32), as a user's project meets it: a separate project directory with
its own pyproject.toml and tests that use only the `kinesim` fixture and boto3, run with the
pytest of kinesim's environment (where installing kinesim put the plugin's entry point). Every
test creates the same stream, bucket and queue and first checks that none exists: run twice in a
row, and with two xdist workers (a server each, data kept on disk), each test sees a clean state.
The AWS environment the tests are started with points elsewhere; the fixture's wins."""
from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(300)

PROJECT_TESTS = '''
import os

import boto3
import pytest


@pytest.mark.parametrize("round", range(4))
def test_streams_start_empty(kinesim, round):
    kinesis = boto3.client("kinesis")
    assert kinesis.list_streams()["StreamNames"] == []
    kinesis.create_stream(StreamName="orders", ShardCount=1)
    kinesis.get_waiter("stream_exists").wait(StreamName="orders")
    kinesis.put_record(StreamName="orders", Data=b"order", PartitionKey="customer-1")


@pytest.mark.parametrize("round", range(4))
def test_buckets_and_queues_start_empty(kinesim, round):
    s3, sqs = boto3.client("s3"), boto3.client("sqs")
    assert s3.list_buckets()["Buckets"] == []
    assert "QueueUrls" not in sqs.list_queues()
    s3.create_bucket(Bucket="uploads")
    s3.put_object(Bucket="uploads", Key="report.csv", Body=b"a,b\\n")
    sqs.send_message(QueueUrl=sqs.create_queue(QueueName="jobs")["QueueUrl"], MessageBody="job")
    assert os.environ["AWS_ENDPOINT_URL"] == kinesim.url and boto3.Session().region_name == kinesim.region


def test_without_the_fixture():
    assert "AWS_ENDPOINT_URL" not in os.environ or "127.0.0.1:9" in os.environ["AWS_ENDPOINT_URL"]
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("orders-app")
    (root / "pyproject.toml").write_text(textwrap.dedent("""\
        [project]
        name = "orders-app"
        version = "0.1.0"
        dependencies = ["boto3"]

        [tool.pytest.ini_options]
        testpaths = ["tests"]
        """))
    (root / "tests").mkdir()
    (root / "tests" / "test_orders.py").write_text(PROJECT_TESTS)
    return root


def run_pytest(project, *args: str) -> subprocess.CompletedProcess:
    """pytest in the project, from an environment whose AWS settings point elsewhere (a profile that
    does not exist, an endpoint nothing listens on, another region) and with nothing of this run's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "AWS_"))}
    env.update(AWS_PROFILE="no-such-profile", AWS_ENDPOINT_URL="http://127.0.0.1:9", AWS_DEFAULT_REGION="eu-west-3")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=240)


def passed(run: subprocess.CompletedProcess) -> int:
    assert run.returncode == 0, run.stdout + run.stderr
    return int(re.search(r"(\d+) passed", run.stdout).group(1))


def test_the_entry_point_is_installed():
    plugins = {e.name: e.value for e in importlib.metadata.entry_points(group="pytest11")}
    assert plugins.get("kinesim") == "kinesim.pytest_plugin", \
        "reinstall kinesim (pip install -e .) to register its pytest plugin"


def test_twice_in_a_row_each_test_sees_a_clean_state(project):
    for _ in range(2):
        assert passed(run_pytest(project)) == 9


def test_two_workers_each_with_a_server_of_their_own(project, tmp_path):
    data = tmp_path / "kinesim-data"
    run = run_pytest(project, "-n", "2", "--kinesim-data-dir", str(data))
    assert passed(run) == 9
    assert sorted(os.listdir(data)) == ["gw0", "gw1"]  # a data directory per worker: both served tests
    assert all((data / worker / "kinesim.db").exists() for worker in ("gw0", "gw1"))


def test_no_server_unless_a_test_asks(project, tmp_path):
    run = run_pytest(project, "-k", "without_the_fixture", "--basetemp", str(tmp_path / "base"))
    assert passed(run) == 1
    assert not (tmp_path / "base").exists() or not list((tmp_path / "base").glob("kinesim*"))
