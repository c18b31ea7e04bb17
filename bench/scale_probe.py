"""The machinery of bench/scale.py: servers started with a high shard limit (and kinesim from another
checkout if asked), what /proc says about a server's process tree, streams of N shards, a function
with an event source mapping, and PutRecords load with random partition keys.

Kept apart from scale.py so that each file stays readable; nothing here prints a table.
"""
from __future__ import annotations

import base64
import io
import os
import random
import subprocess
import sys
import time
import uuid
import zipfile
from collections import Counter

import workloads as wl
from client import Client, KinesisError, dumps, loads
from peers import VENV_BIN, Server, _cpu_of, _process_tree, command

# Far above any shard count measured: kinesim's default is 500 open shards, kinesalite's 10.
SHARD_LIMIT = 100_000
REGION = "us-east-1"
ROLE = "arn:aws:iam::000000000000:role/bench-scale-role"
HANDLER = "scale_handler"

# kinesim is launched through this instead of .venv/bin/kinesim (which runs the same
# `kinesim.cli.main`), so that the server's log says which checkout it imported: with
# --kinesim-src the figures are only worth anything if PYTHONPATH really won over the venv's
# editable install (whose finder comes after sys.path, so it should).
LAUNCHER = ("import sys, kinesim; print('kinesim imported from ' + kinesim.__file__, file=sys.stderr, flush=True); "
            "from kinesim.cli import main; sys.exit(main(sys.argv[1:]))")
FROM_LINE = "kinesim imported from "


class ScaleServer(Server):
    """A peers.Server with a high shard limit, optionally kinesim from `src` (PYTHONPATH in front),
    and, once `ready_stream` is set, ready only when that stream answers DescribeStreamSummary
    ACTIVE: how a restart is timed. `ready_s` = launch to ready."""

    poll_s = 0.02  # restart times are a fraction of a second to seconds; poll finely
    src: str | None = None
    ready_stream: str | None = None
    launched = answered = ready_s = 0.0

    def command(self) -> list[str]:
        cmd = command(self.name, self.port, self.dir / "data")
        if self.name.startswith("kinesim"):
            python = VENV_BIN / "python"
            return [str(python if python.exists() else sys.executable), "-c", LAUNCHER] + cmd[1:] + [
                "--shard-limit", str(SHARD_LIMIT)]
        if self.name == "kinesalite":
            return cmd + ["--shardLimit", str(SHARD_LIMIT)]
        return cmd

    log_mode = "ab"  # a restart keeps what the first run said

    def environment(self) -> dict[str, str] | None:
        if not (self.src and self.name.startswith("kinesim")):
            return None
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (self.src, env.get("PYTHONPATH")) if p)
        return env

    def start(self, timeout: float = 120.0) -> "ScaleServer":
        self.launched = time.monotonic()
        super().start(timeout)
        self.ready_s = self.answered - self.launched
        return self

    def _ready(self) -> bool:
        # A Kinesis call, not kinesim's /_kinesim/health (peers.Server's check), which makes every
        # service (Lambda, S3, SQS, ...) and so starts a dozen threads a Kinesis user never has
        c = Client(self.endpoint, timeout=10)
        try:
            if self.ready_stream is None:
                ok = "StreamNames" in c.call("ListStreams", {})
            else:
                ok = c.call("DescribeStreamSummary", {"StreamName": self.ready_stream})[
                    "StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE"
        finally:
            c.close()
        if ok:
            self.answered = time.monotonic()
        return ok

    def imported_from(self) -> str | None:
        """The kinesim package the server imported (from its log), None for the peers."""
        try:
            for line in self.log_path.read_text(errors="replace").splitlines():
                if line.startswith(FROM_LINE):
                    return line[len(FROM_LINE):].strip()
        except OSError:
            pass
        return None

    def data_bytes(self) -> int:
        """Bytes of the data directory on disk (allocated blocks, as du counts them)."""
        total = 0
        for root, _, files in os.walk(self.dir / "data"):
            for f in files:
                try:
                    total += os.stat(os.path.join(root, f)).st_blocks * 512
                except OSError:
                    pass
        return total


def check_src(src: str) -> str:
    """Which kinesim the venv's Python imports with PYTHONPATH=src in front (before any server)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p))
    python = VENV_BIN / "python"
    # cwd "/": `python -c` puts the working directory first on sys.path, which would find the
    # checkout the benchmark is run from (the servers run in their temp directories)
    out = subprocess.run([str(python if python.exists() else sys.executable), "-c",
                          "import kinesim; print(kinesim.__file__)"], env=env, capture_output=True, text=True,
                         check=True, cwd="/")
    return out.stdout.strip()


# ---------------------------------------------------------------------------------------------
# /proc: the whole process tree (kinesim's function workers are child processes)

def _proc_fields(pid: int, path: str, names: tuple[str, ...]) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/{path}") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in names:
                    out[key] = int(value.split()[0])
    except (OSError, ValueError):
        pass
    return out


def sample(pid: int) -> dict:
    """Threads, processes, RSS (MB), CPU seconds and bytes written to storage (write_bytes: pages
    dirtied for the disk, counted when written, so a later checkpoint or writeback counts at the
    time it happens), summed over the tree; threads also counted by name (/proc/.../comm)."""
    pids = _process_tree(pid)
    threads = rss_kb = written = cancelled = 0
    names: Counter = Counter()
    for p in pids:
        st = _proc_fields(p, "status", ("Threads", "VmRSS"))
        threads += st.get("Threads", 0)
        rss_kb += st.get("VmRSS", 0)
        io_ = _proc_fields(p, "io", ("write_bytes", "cancelled_write_bytes"))
        written += io_.get("write_bytes", 0)
        cancelled += io_.get("cancelled_write_bytes", 0)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/comm") as f:
                    names[f.read().strip()] += 1
        except OSError:
            pass
    return {"threads": threads, "processes": len(pids), "rss_mb": rss_kb / 1024,
            "cpu_s": sum(_cpu_of(p) for p in pids), "write_bytes": written, "cancelled_bytes": cancelled,
            "names": dict(names), "t": time.monotonic()}


def idle_window(server: Server, seconds: float, step: float = 1.0) -> dict:
    """Nothing asked of the server for `seconds`: its CPU (% of one core) over the window,
    threads at the end and at their peak (sampled every `step` s), RSS, bytes written per second."""
    first = last = sample(server.pid)
    peak = first["threads"]
    end = first["t"] + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(step, left))
        last = sample(server.pid)
        peak = max(peak, last["threads"])
    wall = last["t"] - first["t"]
    return {"threads": last["threads"], "threads_peak": peak, "processes": last["processes"],
            "cpu_pct": 100 * (last["cpu_s"] - first["cpu_s"]) / wall, "rss_mb": last["rss_mb"],
            "write_kb_s": (last["write_bytes"] - first["write_bytes"]) / 1024 / wall,
            "thread_names": last["names"]}


# ---------------------------------------------------------------------------------------------
# streams, the function and its mapping

def create_stream(endpoint: str, shards: int, tag: str, timeout: float = 300.0) -> tuple[str, float]:
    """A stream of `shards` shards, waited ACTIVE (DescribeStreamSummary: DescribeStream would page
    through 2,048 shards); returns (name, seconds from CreateStream to ACTIVE)."""
    name = f"scale-{tag}-{uuid.uuid4().hex[:6]}"
    c = Client(endpoint, timeout=timeout)
    try:
        t0 = time.monotonic()
        c.call("CreateStream", {"StreamName": name, "ShardCount": shards})
        while c.call("DescribeStreamSummary", {"StreamName": name})[
                "StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"stream {name} ({shards} shards) not ACTIVE after {timeout:.0f}s")
            time.sleep(0.05)
        return name, time.monotonic() - t0
    finally:
        c.close()


def shard_ids(endpoint: str, stream: str) -> list[str]:
    c = Client(endpoint)
    try:
        out, params = [], {"StreamName": stream}
        while True:
            r = c.call("ListShards", params)
            out += [s["ShardId"] for s in r["Shards"]]
            if not r.get("NextToken"):
                return out
            params = {"NextToken": r["NextToken"]}
    finally:
        c.close()


def function_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{HANDLER}.py", "def handler(event, context):\n    return None\n")
    return buf.getvalue()


def add_mapping(endpoint: str, stream: str, timeout: float = 300.0) -> dict:
    """A python3.12 function with a no-op handler (boto3 CreateFunction with a zip) and an event
    source mapping at LATEST on `stream`, waited Enabled. No record flows: what is measured is
    what a mapping costs while it only watches the shards."""
    import boto3  # only this section needs it; importing it costs ~0.3 s
    from botocore.config import Config

    kw = dict(endpoint_url=endpoint, region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test",
              config=Config(retries={"max_attempts": 1}, read_timeout=timeout))
    lam, kinesis = boto3.client("lambda", **kw), boto3.client("kinesis", **kw)
    function = f"scale-{uuid.uuid4().hex[:6]}"
    t0 = time.monotonic()
    lam.create_function(FunctionName=function, Runtime="python3.12", Role=ROLE, Handler=f"{HANDLER}.handler",
                        Code={"ZipFile": function_zip()})
    arn = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
    mapping = lam.create_event_source_mapping(FunctionName=function, EventSourceArn=arn,
                                              StartingPosition="LATEST")["UUID"]
    while (state := lam.get_event_source_mapping(UUID=mapping)["State"]) != "Enabled":
        if time.monotonic() - t0 > timeout or state not in ("Creating", "Enabling", "Updating"):
            raise RuntimeError(f"mapping {mapping} is {state} after {time.monotonic() - t0:.1f}s")
        time.sleep(0.05)
    return {"function": function, "mapping": mapping, "enabled_s": time.monotonic() - t0}


# ---------------------------------------------------------------------------------------------
# load: PutRecords of 500 records with random partition keys (so every shard of a 1,024-shard
# stream gets records: workloads.putn_worker reuses one batch of 500 keys, which reaches at most
# 500 shards) and random payloads (nothing compressible flatters a server that would compress)

BODIES = 32  # distinct request bodies per connection, cycled: 16,000 keys reach every shard


def random_put_worker(endpoint: str, stream: str, wid: int, record_bytes: int, t_end: float,
                      min_records: int, t_hard_end: float, quota: int | None, t_start: float) -> dict:
    """PutRecords until t_end, or past it until this connection has min_records acknowledged
    (never past t_hard_end); with `quota`, stop once that many are acknowledged. Counts only."""
    rnd = random.Random(wid * 7919 + os.getpid())
    c = Client(endpoint)
    c.call("DescribeStreamSummary", {"StreamName": stream})  # connected before the clock starts

    def body(records: int) -> bytes:
        return dumps({"StreamName": stream, "Records": [
            {"Data": base64.b64encode(rnd.randbytes(record_bytes)).decode(), "PartitionKey": f"{rnd.getrandbits(64):x}"}
            for _ in range(records)]})

    bodies = [body(500) for _ in range(BODIES)]
    n, i, shards, errors = 0, 0, set(), Counter()
    wl.sleep_until(t_start)
    cpu0 = time.thread_time()
    while True:
        now = time.monotonic()
        if (quota is not None and n >= quota) or now >= t_hard_end or (now >= t_end and n >= min_records):
            break
        try:
            # the last request of a quota carries just what is left, so that a load is exact
            batch = bodies[i % BODIES] if quota is None or quota - n >= 500 else body(quota - n)
            r = loads(c.raw("PutRecords", batch))
        except (KinesisError, OSError) as e:
            errors[getattr(e, "code", type(e).__name__)] += 500
            if sum(errors.values()) > 50_000:
                break
            time.sleep(0.05)
            continue
        i += 1
        for rec in r["Records"]:
            if rec.get("ErrorCode"):
                errors[rec["ErrorCode"]] += 1
            else:
                n += 1
                shards.add(rec["ShardId"])
    done = time.monotonic()
    c.close()
    return {"n": n, "shards": sorted(shards), "errors": dict(errors), "cpu": time.thread_time() - cpu0,
            "t_done": done}


def put_load(server: Server, stream: str, clients: int, seconds: float, min_records: int = 0,
             quota: int | None = None, record_bytes: int = 100, log=print) -> dict:
    """Timed PutRecords load from `clients` connections (each in its own process); returns
    records, records/s, bytes written by the server's tree per record, server cores, errors."""
    ctx = wl.Ctx(server=server, seconds=seconds, clients=clients, procs=clients, log=log)
    lead = 0.5 + 0.05 * clients  # the workers build their bodies and connect before t_start
    t_end = time.monotonic() + lead + seconds
    per_client = -(-min_records // clients)
    each = None if quota is None else -(-quota // clients)
    before = sample(server.pid)
    run = wl.Timed(ctx, random_put_worker, [(server.endpoint, stream, w, record_bytes, t_end, per_client,
                                             t_end + max(3 * seconds, 30.0), each) for w in range(clients)],
                   lead=lead)
    after = sample(server.pid)
    n = sum(r["n"] for r in run.results)
    errors: Counter = Counter()
    for r in run.results:
        errors.update(r["errors"])
    written = after["write_bytes"] - before["write_bytes"]
    return {"records": n, "rps": n / run.wall if run.wall > 0 else None, "seconds": run.wall,
            "written_bytes": written, "bytes_per_record": written / n if n else None,
            "cancelled_bytes": after["cancelled_bytes"] - before["cancelled_bytes"],
            "shards_written": len(set().union(*(r["shards"] for r in run.results))),
            "server_cores": run.server_cpu / run.wall if run.wall > 0 else None,
            "client_cores": run.client_cpu / run.wall if run.wall > 0 else None,
            "rss_mb": after["rss_mb"], "errors": dict(errors)}


def read_latency(endpoint: str, stream: str, shards: list[str], rounds: int, limit: int = 10_000) -> dict:
    """GetRecords at TRIM_HORIZON, first page (Limit `limit`), `rounds` times over the shards in
    turn, each on a fresh iterator: ms from sending to having read the whole answer (before
    parsing it). Returns the sorted times and the records per page."""
    c = Client(endpoint)
    times, counts = [], []
    try:
        for i in range(rounds):
            it = c.call("GetShardIterator", {"StreamName": stream, "ShardId": shards[i % len(shards)],
                                             "ShardIteratorType": "TRIM_HORIZON"})["ShardIterator"]
            t0 = time.monotonic()
            r = c.call("GetRecords", {"ShardIterator": it, "Limit": limit})
            times.append(1000 * (c.last_recv - t0))
            counts.append(len(r.get("Records") or ()))
    finally:
        c.close()
    return {"ms": sorted(times), "records": counts}
