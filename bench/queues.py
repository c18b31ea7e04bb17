#!/usr/bin/env python3
"""Benchmark Kinesis queues: ReceiveQueueRecords + AcknowledgeQueueRecords records/s.

    .venv/bin/python bench/queues.py                     # 40,000 records, 4 consumers
    .venv/bin/python bench/queues.py --records 5000 --consumers 8 --json bench/results/queues.json

kinesim only: no peer (kinesalite, moto, LocalStack) emulates Kinesis queues, so there is
nothing to compare with. A durable kinesim (temp data dir) gets an on-demand stream (4 shards),
preloaded with `--records` records, and a TRIM_HORIZON queue on it; `--consumers` threads, each
with its own keep-alive connection, receive 10 records at a time and acknowledge them, until
every record was acknowledged. The figure is acknowledged records per second over that drain;
the run also checks that each record was acknowledged exactly once.
"""
from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from client import Client  # noqa: E402

from kinesim.config import Settings  # noqa: E402
from kinesim.server import ServerProcess, free_port  # noqa: E402

NO_PEER = "kinesim only: no peer (kinesalite, moto, LocalStack) emulates Kinesis queues"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=40_000)
    p.add_argument("--consumers", type=int, default=4)
    p.add_argument("--json", help="write the figures here")
    return p.parse_args(argv)


def preload(endpoint: str, stream: str, count: int) -> None:
    client = Client(endpoint)
    for start in range(0, count, 500):
        records = [{"Data": base64.b64encode(f"r-{i}".encode()).decode(), "PartitionKey": str(i)}
                   for i in range(start, min(count, start + 500))]
        answer = client.call("PutRecords", {"StreamName": stream, "Records": records})
        assert answer["FailedRecordCount"] == 0
    client.close()


def drain(endpoint: str, queue: str, total: int, acked: list[str], lock: threading.Lock,
          stats: dict[str, float]) -> None:
    client = Client(endpoint)
    try:
        while True:
            with lock:
                if len(acked) >= total:
                    return
            got = client.call("ReceiveQueueRecords", {"QueueARN": queue, "Limit": 10, "WaitTimeSeconds": 1,
                                                      "VisibilityTimeoutSeconds": 300})["QueueRecords"]
            with lock:
                stats["receives"] += 1
            if not got:
                continue
            answer = client.call("AcknowledgeQueueRecords", {
                "QueueARN": queue, "Entries": [{"ReceiptHandle": r["ReceiptHandle"]} for r in got]})
            by_handle = {r["ReceiptHandle"]: r["RecordId"] for r in got}
            with lock:
                acked.extend(by_handle[s["ReceiptHandle"]] for s in answer["Successful"])
                stats["failed_acks"] += len(answer["Failed"])
                if len(acked) >= total and "done_at" not in stats:
                    # The drain ends with the last acknowledgement, not when the other consumers'
                    # last (empty) long polls return.
                    stats["done_at"] = time.monotonic()
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(NO_PEER)
    with tempfile.TemporaryDirectory(prefix="kinesim-bench-queues-") as data_dir:
        settings = Settings(port=free_port(), data_dir=data_dir, create_stream_ms=0, delete_stream_ms=0,
                            update_stream_ms=0, log_level="warning")
        with ServerProcess(settings) as server:
            control = Client(server.url)
            stream = "bench-queues"
            control.call("CreateStream", {"StreamName": stream, "StreamModeDetails": {"StreamMode": "ON_DEMAND"}})
            summary = control.call("DescribeStreamSummary", {"StreamName": stream})["StreamDescriptionSummary"]
            queue = control.call("CreateQueue", {"QueueName": "bench", "StreamConfigurationList": [
                {"StreamARN": summary["StreamARN"], "StartingPosition": {"Type": "TRIM_HORIZON"}}]})[
                "QueueDescription"]["QueueARN"]
            preload(server.url, stream, args.records)
            acked: list[str] = []
            lock = threading.Lock()
            stats: dict[str, float] = {"receives": 0, "failed_acks": 0}
            threads = [threading.Thread(target=drain, args=(server.url, queue, args.records, acked, lock, stats))
                       for _ in range(args.consumers)]
            started = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = stats.get("done_at", time.monotonic()) - started
            control.close()
    unique = len(set(acked))
    figures = {
        "shards": summary["OpenShardCount"], "consumers": args.consumers, "records": args.records,
        "acknowledged": len(acked), "unique": unique, "duplicates": len(acked) - unique,
        "failed_acks": stats["failed_acks"], "receives": stats["receives"], "seconds": round(elapsed, 3),
        "records_per_s": round(len(acked) / elapsed, 1), "note": NO_PEER,
    }
    print(f"ReceiveQueueRecords+AcknowledgeQueueRecords on a {figures['shards']}-shard on-demand stream, "
          f"{args.consumers} consumers: {figures['records_per_s']} records/s "
          f"({len(acked)} records in {elapsed:.2f} s, {stats['receives']} receives, "
          f"{figures['duplicates']} duplicates, {stats['failed_acks']} failed acknowledgements)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2))
    ok = unique == args.records and figures["duplicates"] == 0 and stats["failed_acks"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
