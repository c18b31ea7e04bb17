"""The README and the docs/ pages as a newcomer walks them: their examples run as written, in any order,
leave nothing behind."""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import client_for, start_server, wait_for
from readme_blocks import PAGES, ROOT, blocks, section

EXAMPLE = ROOT / "examples" / "pageviews_per_minute.py"
# Every block, alone and twice: tests/test_readme_snippets.py.


def _kinesim(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinesim", *args], capture_output=True, text=True,
                          timeout=kw.pop("timeout", 60), **kw)


# ------------------------------------------------------------------ the boto3 quick start

def test_quick_start_runs_twice_and_leaves_the_templates_clicks_stream_alone(server):
    block = re.search(r"```python\n(.*?)```", section("Quick start with boto3"), re.S)[1]
    assert '"clicks"' not in block  # the template's stream: deploying after the quick start must work
    script = block.replace("http://localhost:4566", server.url)
    kinesis = client_for(server.url)
    kinesis.create_stream(StreamName="clicks", ShardCount=1)  # as `kinesim deploy template.yaml` made it
    try:
        for _ in range(2):  # a second run (or a run after the template) does not fail
            proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, proc.stderr
            assert re.fullmatch(r"\d+ records in shardId-\d{12}\n", proc.stdout), proc.stdout
        assert kinesis.describe_stream_summary(StreamName="clicks")["StreamDescriptionSummary"]["OpenShardCount"] == 1
    finally:
        kinesis.delete_stream(StreamName="clicks", EnforceConsumerDeletion=True)
        kinesis.delete_stream(StreamName="quickstart", EnforceConsumerDeletion=True)


# ------------------------------------------------------------------ commands a fresh clone has

def test_shell_blocks_name_the_venvs_python_and_aws():
    """A fresh machine may have no `python` or `aws`: `make serve` put both in .venv/bin."""
    bare = []
    for block in blocks():
        for line in block.code.splitlines() if block.language == "sh" else []:
            command = re.sub(r"^\s*(?:[A-Z_]+=\S+\s+)*", "", line)  # past VAR=value prefixes
            if re.match(r"(python3?|aws|kinesim)\s", command):
                bare.append(line)
    assert bare == []
    for page, text in PAGES.items():
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        assert re.findall(r"`python3? [^`]*`", prose) == [], page


# ------------------------------------------------------------------ what the commands say of themselves

def test_kinesim_help_says_what_kinesim_emulates_now():
    text = " ".join(_kinesim("--help").stdout.split())
    assert "as it grows" not in text
    for service in ("Kinesis", "Lambda", "Firehose", "S3", "SQS", "SNS", "CloudWatch Logs", "CloudFormation",
                    "Spark SQL", "web console"):
        assert service in text


def test_readme_names_the_columns_kinesim_queries_prints():
    from kinesim.analytics.queries_cli import LIST_COLUMNS
    line = next(line for b in blocks() for line in b.code.splitlines() if re.search(r"kinesim queries\s+#", line))
    assert line.split("#", 1)[1].strip() == ", ".join(LIST_COLUMNS)


# ------------------------------------------------------------------ the example script

def test_example_is_an_executable_script():
    mode = EXAMPLE.stat().st_mode
    assert mode & stat.S_IXUSR and mode & stat.S_IXGRP and mode & stat.S_IXOTH
    assert EXAMPLE.read_text().startswith("#!/usr/bin/env python3\n")
    # Run as a command (with the venv's python first on PATH, as `. .venv/bin/activate` does).
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run([str(EXAMPLE), "--help"], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "--stream" in proc.stdout


# ------------------------------------------------------------------ `kinesim logs` starts 10 minutes back

def test_logs_default_is_the_last_ten_minutes_and_since_widens_it(server):
    logs = client_for(server.url, "logs")
    group = f"/readme/{uuid.uuid4().hex[:8]}"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="s")
    now_ms = int(time.time() * 1000)
    logs.put_log_events(logGroupName=group, logStreamName="s", logEvents=[
        {"timestamp": now_ms - 30 * 60_000, "message": "half an hour ago"},
        {"timestamp": now_ms - 60_000, "message": "a minute ago"},
    ])
    try:
        recent = _kinesim("logs", group, "--endpoint-url", server.url)
        assert recent.returncode == 0, recent.stderr
        assert recent.stdout == "a minute ago\n"
        wider = _kinesim("logs", group, "--since", "1h", "--endpoint-url", server.url)
        assert wider.stdout == "half an hour ago\na minute ago\n", wider.stderr
        assert "default 10m" in _kinesim("logs", "--help").stdout
    finally:
        logs.delete_log_group(logGroupName=group)


# ------------------------------------------------------------------ `kinesim sql` leaves the cwd clean

def test_spark_scratch_settings_point_outside_the_working_directory():
    from kinesim.analytics.session import scratch_dir, scratch_settings
    conf, java_option = scratch_settings()
    home = scratch_dir()
    assert os.path.isdir(home) and not home.startswith(os.getcwd() + os.sep)
    assert conf["spark.sql.warehouse.dir"].startswith(home + os.sep)
    assert java_option == f"-Dderby.system.home={home}"


@pytest.mark.slow
def test_kinesim_sql_leaves_no_spark_warehouse_in_the_working_directory(tmp_path_factory, tmp_path):
    memory = start_server(tmp_path_factory, in_memory=True)
    try:
        # A managed table is what makes Spark write into its warehouse directory.
        proc = _kinesim("sql", "--endpoint-url", memory.url, "--master", "local[1]", "--format", "csv",
                        "CREATE TABLE walk AS SELECT 1 AS a; SELECT a FROM walk",
                        cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[-1] == "1"
        assert sorted(os.listdir(tmp_path)) == []  # no spark-warehouse/, metastore_db/, derby.log
    finally:
        memory.stop()


# ------------------------------------------------------------------ the Structured Streaming example

@pytest.mark.slow
def test_structured_streaming_example_prints_the_records_and_ends_cleanly(tmp_path_factory, tmp_path):
    block = next(b.code for b in blocks() if b.name == "Spark #1")
    assert "readStream" in block
    memory = start_server(tmp_path_factory, in_memory=True)
    try:
        kinesis = client_for(memory.url)
        kinesis.create_stream(StreamName="clicks", ShardCount=2)
        kinesis.get_waiter("stream_exists").wait(StreamName="clicks", WaiterConfig={"Delay": 1})
        kinesis.put_records(StreamName="clicks", Records=[
            {"Data": f'{{"page": "/p{i}"}}'.encode(), "PartitionKey": str(i)} for i in range(12)])
        proc = subprocess.run([sys.executable, "-c", block.replace("http://localhost:4566", memory.url)],
                              capture_output=True, text=True, timeout=400, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        # Not even for the query's stop (PySpark's source runner printed EOFError and BrokenPipeError
        # when it answered after its socket closed: kinesim/analytics/source_runner.py).
        assert "Traceback" not in proc.stderr, proc.stderr
        assert "Batch: 0" in proc.stdout
        assert len(re.findall(r"\|\s*shardId-00000000000[01]\|", proc.stdout)) == 12, proc.stdout
        # Nothing of its Spark outlives the example: its source runner (working in the example's
        # directory, as Spark does) ended with the query. The deadline is generous, not a figure.
        wait_for(lambda: not _source_runners_in(tmp_path), timeout=30)
    finally:
        memory.stop()


def _source_runners_in(directory: Path) -> list[int]:
    """PySpark's streaming source runner processes working in `directory` (zombies left out)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if b"python_streaming_source_runner" not in f.read():
                    continue
            with open(f"/proc/{name}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            if os.path.samefile(os.readlink(f"/proc/{name}/cwd"), directory):
                found.append(int(name))
        except OSError:
            continue
    return found
