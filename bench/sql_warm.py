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
delivered (kinesim/analytics/table_sources.py matches the keys Firehose gives).
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
            local: bool = True, count_query: str | None = None, late: tuple[str, bytes, int] | None = None) -> dict:
    """The figures of one table size on a fresh server. `check(rows, records)` raises when an answer
    over `records` records is wrong;
    `count_query` answers one row `n` (the records); `late` is an object (key, body, records)
    delivered after the warm commands, which the next count must include."""
    server = Server("kinesim", work_dir / f"cli-{records}").start()
    data_dir = server.dir / "data"
    figures: dict = {"records": records}
    try:
        measure_queries(server, figures, bucket_dir, bucket, prefix, stream, extra, query, check, warm,
                        spark_memory, local, count_query, late)
    except Exception as e:  # noqa: BLE001 - keep what was measured before the failure
        figures["error"] = f"{type(e).__name__}: {e}"
        log(f"  {records:,}: FAILED: {figures['error'][:2000]}")
    finally:
        server.stop()
        stop_warm_spark(data_dir)
    log(f"  {records:,}: " + ", ".join(f"{label} {figures[key]:.1f} s" for label, key in (
        ("first", "first_count_s"), ("warm count", "warm_count_median_s"), ("warm", "warm_median_s"),
        ("cold", "cold_s"), ("local[*]", "local_s")) if figures.get(key) is not None))
    return figures


def start_supervisor(endpoint: str, state: Path, memory: str | None) -> float:
    """What `kinesim serve --spark` does: start the warm Spark's supervisor at once; the seconds
    until it records the Spark Connect server as ready (listening, and warmed up by a first query)."""
    started = time.perf_counter()
    command = [PYTHON, "-m", "kinesim.analytics.connect_server", endpoint] + (["--memory", memory] if memory else [])
    subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, cwd=REPO_DIR)
    while not state.exists():
        if time.perf_counter() - started > QUERY_TIMEOUT_S:
            raise TimeoutError(f"the warm Spark did not start in {QUERY_TIMEOUT_S} s")
        time.sleep(0.05)
    return time.perf_counter() - started


def one(rows: list[dict]) -> None:
    assert rows == [{"one": 1}], rows


def median_of(endpoint: str, query: str, warm: int, check) -> list[float]:
    times = []
    for _ in range(warm):
        run = kinesim_sql(endpoint, query)
        check(run.rows)
        times.append(run.seconds)
    return times


def measure_queries(server: Server, figures: dict, bucket_dir: Path, bucket: str, prefix: str, stream: str,
                    extra: dict, query: str, check, warm: int, spark_memory: str | None, local: bool,
                    count_query: str | None, late: tuple[str, bytes, int] | None) -> None:
    records = figures["records"]
    figures["upload_bytes"] = upload(server.endpoint, bucket, bucket_dir, prefix, {stream: extra})
    memory = ("--spark-memory", spark_memory) if spark_memory else ()
    state = server.dir / "data" / "spark-connect" / "server.json"

    def counted(expected: int):
        def check_count(rows: list[dict]) -> None:
            assert rows == [{"n": expected}], f"{rows}, not {expected} records"
        return check_count
    # As after `kinesim serve --spark`: the supervisor starts (and warms up) Spark before any query.
    figures["serve_spark_ready_s"] = start_supervisor(server.endpoint, state, spark_memory)
    log(f"  {records:,}: warm Spark ready {figures['serve_spark_ready_s']:.1f} s after its supervisor started")
    if count_query:
        first = kinesim_sql(server.endpoint, count_query)
        counted(records)(first.rows)
        figures["first_count_s"] = first.seconds
        log(f"  {records:,}: first command (count): {first.seconds:.1f} s")
        figures["warm_count_s"] = median_of(server.endpoint, count_query, warm, counted(records))
        figures["warm_count_median_s"] = statistics.median(figures["warm_count_s"])
        log(f"  {records:,}: warm count: {', '.join(f'{t:.1f}' for t in figures['warm_count_s'])} s")
    figures["warm_s"] = median_of(server.endpoint, query, warm, lambda rows: check(rows, records))
    figures["warm_median_s"] = statistics.median(figures["warm_s"])
    log(f"  {records:,}: warm GROUP BY: {', '.join(f'{t:.1f}' for t in figures['warm_s'])} s")
    figures["select1_median_s"] = statistics.median(median_of(server.endpoint, "SELECT 1 AS one", warm, one))
    total = records
    if count_query and late:
        key, body, added = late
        total += added
        boto(server.endpoint, "s3").put_object(Bucket=bucket, Key=key, Body=body)
        run = kinesim_sql(server.endpoint, count_query)
        counted(total)(run.rows)
        figures["after_new_object_count_s"] = run.seconds
        log(f"  {records:,}: count after a new object ({added:,} records, a new field): {run.seconds:.1f} s")
    # The first query of a `kinesim sql` that starts the warm Spark itself (none runs).
    stop_warm_spark(server.dir / "data")
    log(f"  {records:,}: cold kinesim sql (starts the warm Spark) ...")
    cold = kinesim_sql(server.endpoint, query, *memory, watch=state)
    figures["cold_s"], figures["cold_spark_listening_s"] = cold.seconds, cold.appeared
    check(cold.rows, total)
    log(f"  {records:,}: cold: {figures['cold_s']:.1f} s (Spark Connect server ready after "
        f"{figures['cold_spark_listening_s'] or 0:.1f} s)")
    if local:
        log(f"  {records:,}: kinesim sql --master local[*] ...")
        conf = ("--conf", f"spark.driver.memory={spark_memory}") if spark_memory else ()
        figures["local_s"], rows, _ = kinesim_sql(server.endpoint, query, "--master", "local[*]", *conf)
        check(rows, total)


def report(runs: list[dict], fmt: str, warm: int) -> None:
    print(f"\n`kinesim sql --format json` wall time, a new process per query ({fmt} table; "
          f"{os.cpu_count()} cores)\n")
    columns = [("records", None), ("Spark ready", "serve_spark_ready_s"), ("first count", "first_count_s"),
               ("warm count", "warm_count_median_s"), ("warm GROUP BY", "warm_median_s"),
               ("warm SELECT 1", "select1_median_s"), ("new object", "after_new_object_count_s"),
               ("cold", "cold_s"), ("local[*]", "local_s")]
    widths = [max(len(label), 8) + 2 for label, _ in columns]
    header = "".join(f"{label:>{w}}" for (label, _), w in zip(columns, widths))
    print(header)
    print("-" * len(header))
    for r in runs:
        cells = [f"{r['records']:,}"] + ["-" if r.get(key) is None else f"{r[key]:.1f}" for _, key in columns[1:]]
        print("".join(f"{c:>{w}}" for c, w in zip(cells, widths)))
    for r in runs:
        if r.get("error"):
            print(f"{r['records']:,}: failed after the figures shown: {r['error'][:300]}")
    print(f"seconds. Spark ready: from the supervisor's start (as `kinesim serve --spark` starts it) to the Spark\n"
          f"Connect server recorded ready; first count: the first command then; warm: medians of {warm} more;\n"
          "warm SELECT 1: a warm command's fixed cost; new object: a count after one more object was delivered\n"
          "(records with a new field); cold: a `kinesim sql` that starts the warm Spark itself (none runs; the\n"
          "GROUP BY); local[*]: Spark in the command's own process (a JVM per command).")
