#!/usr/bin/env python3
"""Spark's waits as a user meets them (issue 33): the first `kinesim sql` (no Spark runs: it
starts one), warm counts and GROUP BYs over N delivered records, and the start of a continuous
query with Spark warm; each quiet and with one core kept busy (`yes > /dev/null`).

    .venv/bin/python bench/sql_waits.py                                   # 20k and 1M, quiet and busy (~15 min)
    .venv/bin/python bench/sql_waits.py --records 1000000 --busy 1 --keep /tmp/clicks
    .venv/bin/python bench/sql_waits.py --code /tmp/before --json before.json   # another checkout's kinesim

Per table size and load, a fresh kinesim server (bench/peers.py `Server`) with a delivery stream
`clicks-json` whose objects (bench/sql.py: Firehose's keys and GZIP, 5 MiB buffers) are
PutObject'ed under its prefix, and a 1-shard stream `bench-clicks` holding 1,000 clicks. Each a
new `kinesim sql` process, wall time:

- cold: `SELECT count(*)` with no Spark running (the command starts the warm Spark and waits);
  `--cold N` times, Spark stopped before each;
- warm count / warm GROUP BY: `--warm N` each, Spark warm: once the warm Spark's streaming
  warm-up is done (it runs once Spark has idled for 5 s after the cold commands; a command
  meanwhile shares the cores with it), the wait reported;
- continuous start: `kinesim sql --continuous "SELECT page, window.start AS minute, count(*) AS
  views FROM STREAM bench-clicks GROUP BY window(ts, '1 minute'), page" --event-time ts --watermark
  "1 minute" --into bench-views --name ...` (docs/spark.md's example) from TRIM_HORIZON, until it
  returns (it returns once the query's first micro-batch ran), Spark warm; `--continuous N` times,
  each query deleted after.

`--code DIR` runs every kinesim process (server, commands, the warm Spark's Python workers) from
the checkout in DIR (`git archive` of an older commit), for before/after figures in the same
conditions. A benchmark, not a test: it exits 0 whatever the figures are.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # before bench/ (bench/firehose.py)

import sql  # noqa: E402  (bench/sql.py: the delivered objects)
import sql_warm  # noqa: E402  (bench/sql_warm.py: upload, stop_warm_spark)
from client import Client  # noqa: E402
from peers import REPO_DIR, Server  # noqa: E402

STREAM, OUT = "bench-clicks", "bench-views"
TABLE = "clicks_json"
COUNT = f"SELECT count(*) AS n FROM {TABLE}"
GROUP_BY = f"SELECT page, count(*) AS views FROM {TABLE} GROUP BY page ORDER BY views DESC"
CONTINUOUS = f"SELECT page, window.start AS minute, count(*) AS views FROM STREAM {STREAM} GROUP BY window(ts, '1 minute'), page"
TIMEOUT_S = 600
CODE = {"dir": REPO_DIR}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# CPU seconds of the last command (`kinesim`): its own process, and the warm Spark's (the JVM and
# the Python workers of its process group). Less moved by the machine's other load than wall time:
# on an idle machine a warm command's wall time is about their sum.
CPU: dict[str, float] = {}


def spark_cpu(data_dir: Path) -> float:
    """CPU seconds used so far by the warm Spark of `data_dir`: every live process of its process
    group (it is started in a session of its own), with the children each has reaped."""
    try:
        pgid = int(json.loads((data_dir / "spark-connect" / "server.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return 0.0
    total = 0
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += sum(int(f) for f in fields[11:15])   # utime, stime, cutime, cstime
    return total / os.sysconf("SC_CLK_TCK")


def kinesim(*args: str, data_dir: Path | None = None) -> tuple[float, subprocess.CompletedProcess]:
    """A `kinesim` command's wall time and result, run from the measured checkout; its CPU in `CPU`."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    spark_before = spark_cpu(data_dir) if data_dir else 0.0
    started = time.perf_counter()
    done = subprocess.run([sql_warm.PYTHON, "-m", "kinesim", *args], capture_output=True, text=True,
                          timeout=TIMEOUT_S, cwd=CODE["dir"], stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.update(command=after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime,
               spark=(spark_cpu(data_dir) - spark_before) if data_dir else 0.0)
    if done.returncode != 0:
        raise RuntimeError(f"kinesim {' '.join(args[:2])} exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return seconds, done


def count(endpoint: str, records: int, data_dir: Path | None = None) -> float:
    seconds, done = kinesim("sql", "--endpoint-url", endpoint, "--format", "json", COUNT, data_dir=data_dir)
    assert [json.loads(line) for line in done.stdout.splitlines()] == [{"n": records}], done.stdout[:300]
    return seconds


def group_by(endpoint: str, records: int, data_dir: Path | None = None) -> float:
    seconds, done = kinesim("sql", "--endpoint-url", endpoint, "--format", "json", GROUP_BY, data_dir=data_dir)
    views = sum(json.loads(line)["views"] for line in done.stdout.splitlines())
    assert views == records, f"{views} views, not {records}"
    return seconds


def continuous_start(endpoint: str, n: int) -> float:
    name = f"waits-{n}"
    seconds, _ = kinesim("sql", "--endpoint-url", endpoint, "--continuous", CONTINUOUS, "--event-time", "ts",
                         "--watermark", "1 minute", "--into", OUT, "--name", name, "--starting-position", "TRIM_HORIZON")
    kinesim("queries", "delete", name, "--endpoint-url", endpoint)
    return seconds


class Busy:
    """`yes > /dev/null` on one core while the block runs (none when `cores` is 0)."""

    def __init__(self, cores: int):
        self.cores, self.procs = cores, []

    def __enter__(self) -> "Busy":
        self.procs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(self.cores)]
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def class_archive() -> bool:
    """Whether the class archive of Spark's classes is there for the warm Spark to map in
    (kinesim/analytics/spark_jvm.py; an older kinesim, --code, uses none)."""
    if CODE["dir"] != REPO_DIR:
        return False
    from kinesim.analytics import spark_jvm
    from kinesim.analytics.session import check_java
    return os.path.isfile(spark_jvm.archive_path(check_java(), spark_jvm.spark_home()))


def wait_warm(data_dir: Path, timeout: float = 300.0) -> float:
    """Until the warm Spark's streaming warm-up is done (kinesim/analytics/connect_server.py: it
    runs once Spark idles after the last command); the seconds waited. An older kinesim records
    no warm-up state: nothing to wait for."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        try:
            state = json.loads((data_dir / "spark-connect" / "server.json").read_text())
        except (OSError, ValueError):
            state = {}
        if state.get("warm_up", "done") == "done":
            break
        time.sleep(0.5)
    waited = time.perf_counter() - started
    log(f"  warm-up done {waited:.1f} s after the last cold command")
    return waited


def load_average() -> float:
    return os.getloadavg()[0]


def measure(args, records: int, busy: int, s3_root: Path, work_dir: Path) -> dict:
    server = Server("kinesim", work_dir / f"waits-{records}-{busy}").start()
    data_dir = server.dir / "data"
    endpoint = server.endpoint
    figures: dict = {"records": records, "busy": busy}
    try:
        sql_warm.upload(endpoint, sql.BUCKET, s3_root / sql.BUCKET, "json/",
                        {"clicks-json": {"Prefix": "json/", "ErrorOutputPrefix": "errors/", "CompressionFormat": "GZIP"}})
        client = Client(endpoint)
        client.call("CreateStream", {"StreamName": STREAM, "ShardCount": 1})
        client.call("CreateStream", {"StreamName": OUT, "ShardCount": 1})
        time.sleep(0.5)
        for start in range(0, 1000, 500):
            client.call("PutRecords", {"StreamName": STREAM, "Records": [
                {"PartitionKey": f"k{i}", "Data": base64.b64encode(json.dumps(
                    {"page": sql.PAGES[i % len(sql.PAGES)], "ts": i}).encode()).decode()}
                for i in range(start, start + 500)]})
        with Busy(busy):
            figures["load_before"] = load_average()
            figures["cold_s"], figures["cold_archive"] = [], []
            for i in range(args.cold):
                sql_warm.stop_warm_spark(data_dir, timeout=120)   # a JVM recording its class archive takes longer
                figures["cold_archive"].append(class_archive())
                figures["cold_s"].append(count(endpoint, records))
                log(f"  {records:,} busy={busy}: cold count {figures['cold_s'][-1]:.1f} s "
                    f"(class archive {'present' if figures['cold_archive'][-1] else 'absent'})")
            figures["warm_up_wait_s"] = wait_warm(data_dir)
            for label, fn in (("warm_count_s", count), ("warm_group_by_s", group_by)):
                figures[label], figures[label + "_cpu"] = [], []
                for _ in range(args.warm):
                    figures[label].append(fn(endpoint, records, data_dir))
                    figures[label + "_cpu"].append([round(CPU["command"], 2), round(CPU["spark"], 2)])
                log(f"  {records:,} busy={busy}: {label} {', '.join(f'{t:.1f}' for t in figures[label])} "
                    f"(CPU s, command + Spark: {', '.join(f'{c}+{k}' for c, k in figures[label + '_cpu'])})")
            figures["continuous_start_s"] = [continuous_start(endpoint, n) for n in range(args.continuous)]
            log(f"  {records:,} busy={busy}: continuous start "
                f"{', '.join(f'{t:.1f}' for t in figures['continuous_start_s'])} s")
            figures["load_after"] = load_average()
    except Exception as e:  # noqa: BLE001 - keep what was measured
        figures["error"] = f"{type(e).__name__}: {e}"
        log(f"  {records:,} busy={busy}: FAILED: {figures['error'][:1500]}")
    finally:
        server.stop()
        sql_warm.stop_warm_spark(data_dir)
    return figures


def span(values: list[float] | None) -> str:
    if not values:
        return "-"
    low, high = min(values), max(values)
    middle = statistics.median(values)
    return f"{middle:.1f} s" if len(values) == 1 or high - low < 0.05 else f"{middle:.1f} s ({low:.1f}–{high:.1f})"


def cpu(pairs: list[list[float]] | None) -> str:
    if not pairs:
        return "-"
    return f"{statistics.median(c for c, _ in pairs):.2f} + {statistics.median(k for _, k in pairs):.2f}"


def report(runs: list[dict]) -> None:
    print(f"\nSpark's waits, wall time of a new `kinesim sql` process ({os.cpu_count()} cores; median (min–max))\n")
    print("| records | load | cold count | warm count | warm GROUP BY | continuous start | load avg | "
          "CPU s of a warm count / GROUP BY (command + Spark) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        absent = [t for t, a in zip(r.get("cold_s", []), r.get("cold_archive", [])) if not a]
        cold = span(r.get("cold_s")) + (f" ({len(absent)} without class archive)" if absent else "")
        print(f"| {r['records']:,} | {'one core busy' if r['busy'] else 'quiet'} | {cold} | "
              f"{span(r.get('warm_count_s'))} | {span(r.get('warm_group_by_s'))} | "
              f"{span(r.get('continuous_start_s'))} | {r.get('load_before', 0):.1f}–{r.get('load_after', 0):.1f} | "
              f"{cpu(r.get('warm_count_s_cpu'))} / {cpu(r.get('warm_group_by_s_cpu'))} |")
        if r.get("error"):
            print(f"  failed after the figures shown: {r['error'][:300]}")


def compile_once() -> None:
    """Compile what a command imports into PYTHONPYCACHEPREFIX before anything is timed."""
    import sysconfig
    packages = ("pyspark", "pandas", "numpy", "pyarrow", "grpc", "google", "boto3", "botocore", "s3transfer",
                "dateutil", "urllib3", "jmespath", "py4j", "zstandard", "orjson", "yaml", "tqdm")
    site = Path(sysconfig.get_paths(vars={"base": str(REPO_DIR / ".venv")})["purelib"])
    targets = [str(site / p) for p in packages if (site / p).is_dir()]
    targets += [str(CODE["dir"] / p) for p in ("kinesim", "firehose", "lambdas") if (CODE["dir"] / p).is_dir()]
    started = time.perf_counter()
    subprocess.run([sql_warm.PYTHON, "-m", "compileall", "-q", "-j", "0", *targets], capture_output=True)
    log(f"compiled into {os.environ['PYTHONPYCACHEPREFIX']} ({time.perf_counter() - started:.0f} s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", default="20000,1000000", help="delivered records, a comma list (default 20000,1000000)")
    parser.add_argument("--busy", default="0,1", help="cores kept busy, a comma list (default 0,1)")
    parser.add_argument("--cold", type=int, default=1, help="cold commands per run (default 1)")
    parser.add_argument("--warm", type=int, default=5, help="warm counts and GROUP BYs per run (default 5)")
    parser.add_argument("--continuous", type=int, default=2, help="continuous query starts per run (default 2)")
    parser.add_argument("--keep", metavar="DIR", help="keep the delivered objects here (reused by the next run)")
    parser.add_argument("--code", metavar="DIR", help="run kinesim from this checkout (default: this one)")
    parser.add_argument("--json", metavar="PATH", help="also save the figures as JSON")
    parser.add_argument("--new-cache", action="store_true",
                        help="an empty ~/.cache for the run: the first warm Spark on a machine (no class archive)")
    args = parser.parse_args()
    sizes = [int(n.replace("_", "")) for n in args.records.split(",") if n.strip()]
    loads = [int(n) for n in args.busy.split(",") if n.strip()]
    if args.code:
        CODE["dir"] = Path(args.code).resolve()
        # Every child (server, commands, supervisor, Spark's Python workers) imports kinesim from there.
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CODE["dir"]), os.environ.get("PYTHONPATH")]))
    if args.new_cache:
        os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="kinesim-bench-cache-")
    # Commands compile their modules once, as a user's do: a PYTHONDONTWRITEBYTECODE environment
    # (CI, containers) compiles every kinesim module at every command, 0.3-0.4 s of CPU each time.
    # The bytecode goes to a directory of the run's own, not into the checkout.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / f"kinesim-bench-pyc-{CODE['dir'].name}")
    compile_once()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kinesim-bench-waits-"))
    work_dir = Path(tempfile.mkdtemp(prefix="kinesim-bench-waits-servers-"))
    runs = []
    try:
        for records in sizes:
            s3_root, _, _ = sql.prepare(root, records)
            for busy in loads:
                runs.append(measure(args, records, busy, s3_root, work_dir))
        report(runs)
        if args.json:
            Path(args.json).write_text(json.dumps(runs, indent=2))
    finally:
        import shutil
        shutil.rmtree(work_dir, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        if args.new_cache:
            shutil.rmtree(os.environ["XDG_CACHE_HOME"], ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
