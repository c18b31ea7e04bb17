"""`kinesim sql` as a user meets it: wall time of the command, run as a subprocess against a
kinesim server (bench/peers.py `Server`: its own port and data directory), over a delivery
stream's table.

Per server (one per table size, fresh, so no warm Spark runs for it at first):

- cold: the first query, which starts the warm Spark Connect server
  (kinesim/analytics/connect_server.py) and waits for it;
- warm: the next queries (median of `--warm`), each a new `kinesim sql` process that finds
  `<data dir>/spark-connect/server.json` and reuses that Spark;
- warm `SELECT 1`: the fixed cost of a warm command (Python and PySpark imports, asking the
  server for its delivery streams, registering every table, which for JSON lines means Spark
  reading every record to infer the schema), with no work of the query itself;
- `--master local[*]`: Spark in the command's own process, a JVM per command (the way before
  the warm server), for reference.

The objects are Firehose's (bench/sql.py writes them with Firehose's code) and reach the server
through its S3 API (PutObject), under the Prefix of a delivery stream created on the server with
that bucket as its destination: `kinesim sql` finds them as it finds what the delivery stream
delivered (kinesim/analytics/tables.py matches the keys Firehose gives).
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from peers import REPO_DIR, Server

PYTHON = str(REPO_DIR / ".venv" / "bin" / "python")
QUERY_TIMEOUT_S = 900


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def boto(endpoint: str, service: str):
    import boto3
    from botocore.config import Config
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 2}, read_timeout=300, s3={"addressing_style": "path"}))


def upload(endpoint: str, bucket: str, bucket_dir: Path, prefix: str, streams: dict[str, dict]) -> int:
    """Create `bucket`, the delivery streams (`name -> ExtendedS3DestinationConfiguration extras`)
    and PutObject every delivered file under `bucket_dir/prefix`; returns the bytes sent."""
    s3, firehose = boto(endpoint, "s3"), boto(endpoint, "firehose")
    s3.create_bucket(Bucket=bucket)
    for name, extra in streams.items():
        firehose.create_delivery_stream(DeliveryStreamName=name, DeliveryStreamType="DirectPut",
                                        ExtendedS3DestinationConfiguration={
                                            "RoleARN": "arn:aws:iam::000000000000:role/firehose",
                                            "BucketARN": f"arn:aws:s3:::{bucket}", **extra})
    sent = 0
    for path in sorted((bucket_dir / prefix).rglob("*")):
        if path.is_file():
            body = path.read_bytes()
            s3.put_object(Bucket=bucket, Key=path.relative_to(bucket_dir).as_posix(), Body=body)
            sent += len(body)
    return sent


class Run(NamedTuple):
    seconds: float              # wall time of the command
    rows: list[dict]            # its answer
    appeared: float | None      # when the watched file appeared (None: not watched, or never)


def kinesim_sql(endpoint: str, query: str, *options: str, watch: Path | None = None) -> Run:
    """Run `kinesim sql --format json QUERY` as a user would."""
    command = [PYTHON, "-m", "kinesim", "sql", "--endpoint-url", endpoint, "--format", "json", *options, query]
    appeared = None
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=REPO_DIR)
        try:
            while process.poll() is None:
                if watch is not None and appeared is None and watch.exists():
                    appeared = time.perf_counter() - started
                if time.perf_counter() - started > QUERY_TIMEOUT_S:
                    raise TimeoutError(f"kinesim sql still running after {QUERY_TIMEOUT_S} s")
                time.sleep(0.05)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if process.returncode != 0:
        raise RuntimeError(f"kinesim sql exited {process.returncode}: {stderr.strip()[-800:]}")
    return Run(seconds, [json.loads(line) for line in stdout.splitlines() if line.strip()], appeared)


def stop_warm_spark(data_dir: Path, timeout: float = 60.0) -> None:
    """Stop the warm Spark the first query started, by the supervisor's pid in its state file
    (it would stop by itself a few health checks after the kinesim server, but the next size's
    server should not share the cores with it)."""
    try:
        state = json.loads((data_dir / "spark-connect" / "server.json").read_text())
    except (OSError, ValueError):
        return
    pids = [int(state[k]) for k in ("supervisor", "pid") if state.get(k)]
    if pids:
        _terminate(pids[0])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    for pid in pids:
        if _alive(pid):
            _terminate(pid, signal.SIGKILL)


def _terminate(pid: int, sig: int = signal.SIGTERM) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def measure(work_dir: Path, records: int, bucket_dir: Path, bucket: str, prefix: str, stream: str,
            extra: dict, query: str, check, warm: int = 3, spark_memory: str | None = None,
            local: bool = True) -> dict:
    """The figures of one table size on a fresh server. `check(rows)` raises when an answer is wrong."""
    server = Server("kinesim", work_dir / f"cli-{records}").start()
    data_dir = server.dir / "data"
    figures: dict = {"records": records}
    try:
        measure_queries(server, figures, bucket_dir, bucket, prefix, stream, extra, query, check, warm,
                        spark_memory, local)
    except Exception as e:  # noqa: BLE001 - keep what was measured before the failure
        figures["error"] = f"{type(e).__name__}: {e}"
        log(f"  {records:,}: FAILED: {figures['error'][:2000]}")
    finally:
        server.stop()
        stop_warm_spark(data_dir)
    log(f"  {records:,}: " + ", ".join(f"{label} {figures[key]:.1f} s" for label, key in (
        ("cold", "cold_s"), ("warm", "warm_median_s"), ("local[*]", "local_s")) if figures.get(key) is not None))
    return figures


def measure_queries(server: Server, figures: dict, bucket_dir: Path, bucket: str, prefix: str, stream: str,
                    extra: dict, query: str, check, warm: int, spark_memory: str | None, local: bool) -> None:
    records = figures["records"]
    figures["upload_bytes"] = upload(server.endpoint, bucket, bucket_dir, prefix, {stream: extra})
    memory = ("--spark-memory", spark_memory) if spark_memory else ()
    log(f"  {records:,}: cold kinesim sql (starts the warm Spark) ...")
    state = server.dir / "data" / "spark-connect" / "server.json"
    cold = kinesim_sql(server.endpoint, query, *memory, watch=state)
    figures["cold_s"], figures["cold_spark_listening_s"] = cold.seconds, cold.appeared
    check(cold.rows)
    log(f"  {records:,}: cold: {figures['cold_s']:.1f} s (Spark Connect server listening after "
        f"{figures['cold_spark_listening_s'] or 0:.1f} s)")
    times = []
    for i in range(warm):
        seconds, rows, _ = kinesim_sql(server.endpoint, query)
        check(rows)
        times.append(seconds)
        log(f"  {records:,}: warm {i + 1}: {seconds:.1f} s")
    figures["warm_s"] = times
    figures["warm_median_s"] = statistics.median(times)
    ones = []
    for _ in range(warm):
        seconds, rows, _ = kinesim_sql(server.endpoint, "SELECT 1 AS one")
        assert rows == [{"one": 1}], rows
        ones.append(seconds)
    figures["select1_median_s"] = statistics.median(ones)
    if local:
        log(f"  {records:,}: kinesim sql --master local[*] ...")
        conf = ("--conf", f"spark.driver.memory={spark_memory}") if spark_memory else ()
        figures["local_s"], rows, _ = kinesim_sql(server.endpoint, query, "--master", "local[*]", *conf)
        check(rows)


def report(runs: list[dict], fmt: str, warm: int) -> None:
    print(f"\n`kinesim sql --format json` wall time, a new process per query ({fmt} table; "
          f"{os.cpu_count()} cores)\n")
    header = (f"{'records':>10}{'cold s':>9}{'(Spark up)':>11}{'warm s':>9}{'warm SELECT 1 s':>17}"
              f"{'local[*] s':>12}{'cold/warm':>11}")
    print(header)
    print("-" * len(header))

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"
    for r in runs:
        cold, warm_s = r.get("cold_s"), r.get("warm_median_s")
        ratio = f"{cold / warm_s:.1f}x" if cold and warm_s else "-"
        print(f"{r['records']:>10,}{cell(cold):>9}{cell(r.get('cold_spark_listening_s')):>11}{cell(warm_s):>9}"
              f"{cell(r.get('select1_median_s')):>17}{cell(r.get('local_s')):>12}{ratio:>11}")
    for r in runs:
        if r.get("error"):
            print(f"{r['records']:,}: failed after the figures shown: {r['error'][:300]}")
    print(f"cold: the first query, which starts the warm Spark Connect server (Spark up: when that listened);\n"
          f"warm: median of the next {warm}; warm SELECT 1: a warm command's fixed cost (imports, table registration\n"
          "with JSON schema inference); local[*]: Spark in the command's own process (a JVM per command).")
