"""`kinesim serve` loads what a request needs when it is first asked for (issue 22): a server
asked only Kinesis calls has not imported the other services, Flask, pyarrow, Spark or the deploy
engine; one whose data directory holds delivery streams resumes their delivery at start-up all
the same, without being asked anything of Firehose.

What a server has loaded is read from `/_kinesim/modules` (top-level module names of the server
process; answered without Flask, to this machine only)."""
from __future__ import annotations

import json
import subprocess
import urllib.request
import uuid

from conftest import client_for, wait_for
from kinesim.admin import loaded_modules
from kinesim.config import Settings
from kinesim.server import ServerProcess, free_port

# Never needed by a Kinesis call (nor by kinesim's own routes): the web console's framework, the
# format conversion, Spark, the deploy engine's linter and SAM translator, and the Firehose package.
HEAVY = {"flask", "pyarrow", "numpy", "pyspark", "cfnlint", "samtranslator", "firehose"}
# Never needed by the server at all: Spark's client (the `spark` extra; Spark runs in a process of its
# own) and the `test` extra's tools, which an install without the extras lacks (test_install_extras.py).
NEVER = {"pyspark", "py4j", "pandas", "grpc", "pytest", "moto", "playwright", "awscli", "localstack_client",
         "requests"}
# Never needed by kinesim's own routes or the web console until something is converted or deployed.
NOT_FOR_OWN_ROUTES = {"pyarrow", "cfnlint", "samtranslator"} | NEVER


def _settings(tmp_path, **overrides) -> Settings:
    return Settings(port=free_port(), data_dir=str(tmp_path / "data"), create_stream_ms=0, delete_stream_ms=0,
                    update_stream_ms=0, log_level="warning", **overrides)


def _modules(url: str) -> set[str]:
    with urllib.request.urlopen(url + "/_kinesim/modules", timeout=10) as answer:
        return set(json.load(answer)["modules"])


def _launched(settings: Settings) -> ServerProcess:
    """`kinesim serve` started without asking it anything but Kinesis (ServerProcess.start would
    wait on /_kinesim/health, one of the Flask routes)."""
    server = ServerProcess(settings)
    server.proc = subprocess.Popen(server.command())
    return server


def _first_answer(server: ServerProcess) -> dict:
    kinesis = client_for(server.url, "kinesis")

    def listed():
        assert server.proc.poll() is None, "kinesim serve exited"
        try:
            return kinesis.list_streams()
        except Exception:  # not listening yet
            return None
    return wait_for(listed, timeout=60)


def test_a_kinesis_call_loads_nothing_it_does_not_need(tmp_path):
    server = _launched(_settings(tmp_path))
    try:
        assert _first_answer(server)["StreamNames"] == []
        loaded = _modules(server.url)
        assert "kinesim" in loaded and "granian" in loaded  # the list is the server's
        assert not loaded & (HEAVY | NEVER), f"loaded before they were needed: {sorted(loaded & (HEAVY | NEVER))}"
        # kinesim's own routes (Flask, the web console) still load nothing of the heavy kind.
        with urllib.request.urlopen(server.url + "/_kinesim/health", timeout=30) as answer:
            assert json.load(answer)["status"] == "running"
        loaded = _modules(server.url)
        assert "flask" in loaded
        assert not loaded & NOT_FOR_OWN_ROUTES, sorted(loaded & NOT_FOR_OWN_ROUTES)
    finally:
        server.stop()


def test_modules_answers_this_machine_only():
    statuses = []
    body = loaded_modules({"REMOTE_ADDR": "192.0.2.1", "REQUEST_METHOD": "GET"},
                          lambda status, headers: statuses.append(status))
    assert statuses == ["403 Forbidden"] and "modules" not in json.loads(b"".join(body))


def test_delivery_resumes_at_start_up_without_a_firehose_call(tmp_path):
    """A record buffered by a delivery stream before kill -9 is delivered after the restart,
    though nothing asks Firehose anything: the delivery stream's worker resumes at start-up."""
    settings = _settings(tmp_path, firehose_interval_scale=0.01)  # IntervalInSeconds 900: 9 s
    first = ServerProcess(settings).start()
    bucket, name = "bkt-" + uuid.uuid4().hex[:10], "fh-" + uuid.uuid4().hex[:10]
    try:
        client_for(first.url, "s3", s3={"addressing_style": "path"}).create_bucket(Bucket=bucket)
        firehose = client_for(first.url, "firehose")
        firehose.create_delivery_stream(DeliveryStreamName=name, ExtendedS3DestinationConfiguration={
            "RoleARN": "arn:aws:iam::000000000000:role/firehose", "BucketARN": f"arn:aws:s3:::{bucket}",
            "BufferingHints": {"IntervalInSeconds": 900, "SizeInMBs": 128}})
        firehose.put_record(DeliveryStreamName=name, Record={"Data": b"before the kill\n"})
    finally:
        first.kill()
    second = _launched(settings)
    try:
        _first_answer(second)
        s3 = client_for(second.url, "s3", s3={"addressing_style": "path"})
        contents = wait_for(lambda: s3.list_objects_v2(Bucket=bucket).get("Contents"), timeout=120)
        [found] = contents
        assert s3.get_object(Bucket=bucket, Key=found["Key"])["Body"].read() == b"before the kill\n"
        loaded = _modules(second.url)
        assert "firehose" in loaded and not loaded & NEVER, sorted(loaded & NEVER)
    finally:
        second.stop()
