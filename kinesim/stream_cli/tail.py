"""`kinesim tail STREAM`: a console consumer, like kafka-console-consumer: prints the records of
every shard as they arrive, following resharding."""
from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, BinaryIO, Iterator

import orjson
from botocore.exceptions import BotoCoreError, ClientError

from . import reader_gone
from .connection import (CommandError, add_endpoint_args, describe_stream, explain, fail, kinesis_client,
                         positive_int)

DESCRIPTION = """\
Print the records of a Kinesis stream as they arrive: each record's data, decoded as UTF-8 (bytes
that are not UTF-8 print as U+FFFD), one record per line. Every shard is read; within a shard
records print in order. When a shard is split or merged, its children are read once it is read to
its end (a merged child once both parents are), so the records of one partition key print in the
order they were put, across resharding.

--format json prints one JSON object per record instead:
  {"shardId", "sequenceNumber", "partitionKey", "approximateArrivalTimestamp" (seconds since the
   epoch, as in a Lambda event), "data" (UTF-8 text)}

Reads use GetShardIterator and GetRecords, at most 5 calls a second per shard (AWS's limit).
Ctrl-C stops.
"""

EPILOG = """\
examples:
  kinesim tail clicks                                  # new records, until Ctrl-C
  kinesim tail clicks --from TRIM_HORIZON --no-follow  # everything stored, then exit
  kinesim tail clicks --from TRIM_HORIZON --max 10     # the first 10 records
  kinesim tail clicks --timestamp 2024-05-01T12:00:00Z # from a point in time (UTC)
  kinesim tail clicks --format json | jq -r .partitionKey
"""

# Ctrl-C ends a tail that is reading with status 0 (`run` installs that); an earlier one exits 130
# (see kinesim/cli.py).
HANDLES_CTRL_C = True
POLL_INTERVAL_S = 0.2  # AWS allows 5 GetRecords calls a second per shard
THROTTLED_BACKOFF_S = 1.0
MAX_RECORDS_PER_CALL = 10_000


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("stream", help="the stream to read")
    parser.add_argument("--from", dest="start", choices=["TRIM_HORIZON", "LATEST", "AT_TIMESTAMP"],
                        help="where to start: TRIM_HORIZON (the oldest record kept), LATEST (records put from "
                             "now on; the default) or AT_TIMESTAMP (--timestamp)")
    parser.add_argument("--timestamp", type=parse_timestamp, metavar="ISO",
                        help="with --from AT_TIMESTAMP (implied): the arrival time to start at, ISO 8601 "
                             "(UTC unless it has an offset) or seconds since the epoch")
    parser.add_argument("--format", choices=["raw", "json"], default="raw",
                        help="raw: the data only (default); json: one object per record with its shard, "
                             "sequence number, partition key and arrival time")
    parser.add_argument("--max", type=positive_int, metavar="N", help="exit after printing N records")
    parser.add_argument("--no-follow", dest="follow", action="store_false",
                        help="exit once every shard has been read up to its latest record")
    add_endpoint_args(parser)
    return parser


def parse_timestamp(text: str) -> datetime:
    try:
        return datetime.fromtimestamp(float(text), timezone.utc)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: use ISO 8601, e.g. 2024-05-01T12:00:00Z, or seconds "
                                         "since the epoch") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def run(args: argparse.Namespace, out: BinaryIO | None = None) -> int:
    if args.start is None:
        args.start = "AT_TIMESTAMP" if args.timestamp else "LATEST"
    if (args.start == "AT_TIMESTAMP") != (args.timestamp is not None):
        print("kinesim tail: --timestamp goes with --from AT_TIMESTAMP, and AT_TIMESTAMP needs --timestamp",
              file=sys.stderr)
        return 2
    out = out or sys.stdout.buffer
    try:
        summary = describe_stream(args, args.stream)
        tail = Tail(kinesis_client(args), args, out)
        tail.start()
        with _ctrl_c_stops():
            if sys.stderr.isatty() and args.follow:
                print(f"kinesim tail: reading {args.stream} from {args.start} (open shards: "
                      f"{summary['OpenShardCount']}); Ctrl-C to stop", file=sys.stderr)
            tail.run()
        return 0
    except CommandError as err:
        return fail("tail", err)
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        return reader_gone()


@contextlib.contextmanager
def _ctrl_c_stops() -> Iterator[None]:
    """Meanwhile Ctrl-C raises KeyboardInterrupt, which `run` turns into a quiet exit (unless SIGINT
    is ignored, as under `nohup`)."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN or threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass
class ShardReader:
    shard_id: str
    start: str  # the iterator type it starts from
    iterator: str | None = None  # None: get one (again) before the next read
    last_sequence: str | None = None
    due: float = 0.0  # time.monotonic() of the next allowed GetRecords


class Tail:
    """Reads every shard in turn, each as often as AWS allows, and a closed shard's children once all
    their parents have been read to their end."""

    def __init__(self, client: Any, args: argparse.Namespace, out: BinaryIO):
        self.client, self.args, self.out = client, args, out
        self.readers: dict[str, ShardReader] = {}
        self.drained: set[str] = set()  # shards read to their end, or never to be read
        self.started: set[str] = set()
        self.printed = 0
        self.child_start = "AT_TIMESTAMP" if args.start == "AT_TIMESTAMP" else "TRIM_HORIZON"

    def start(self) -> None:
        shards = self._list_shards()
        listed = {s["ShardId"] for s in shards}
        for shard in shards:
            parents = [p for p in (shard.get("ParentShardId"), shard.get("AdjacentParentShardId")) if p]
            # Parents past retention are gone from the list: nothing of theirs is left to read first.
            self.drained.update(p for p in parents if p not in listed)
            closed = "EndingSequenceNumber" in shard["SequenceNumberRange"]
            if self.args.start == "LATEST":
                if closed:
                    self.drained.add(shard["ShardId"])  # nothing will be put to it again
                else:
                    self._add(shard["ShardId"], "LATEST")
            elif not any(p in listed for p in parents):
                self._add(shard["ShardId"], self.args.start)
        # LATEST means "from now": take those iterators before reading anything.
        for reader in self.readers.values():
            reader.iterator = self._iterator(reader)

    def run(self) -> None:
        while self.readers:
            reader = min(self.readers.values(), key=lambda r: r.due)
            wait = reader.due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if self._read(reader):
                return

    def _add(self, shard_id: str, start: str) -> None:
        self.readers[shard_id] = ShardReader(shard_id, start)
        self.started.add(shard_id)

    def _read(self, reader: ShardReader) -> bool:
        """One GetRecords on the reader's shard, its records printed; whether --max was reached."""
        reader.due = time.monotonic() + POLL_INTERVAL_S
        if reader.iterator is None:
            reader.iterator = self._iterator(reader)
        limit = MAX_RECORDS_PER_CALL
        if self.args.max is not None:
            limit = min(limit, self.args.max - self.printed)
        try:
            response = self.client.get_records(ShardIterator=reader.iterator, Limit=limit)
        except self.client.exceptions.ExpiredIteratorException:  # e.g. stdout was blocked for minutes
            reader.iterator, reader.due = None, 0.0  # a new one, from where this one was
            return False
        except self.client.exceptions.ProvisionedThroughputExceededException:
            reader.due = time.monotonic() + THROTTLED_BACKOFF_S
            return False
        except (ClientError, BotoCoreError) as err:
            raise self._explain(err) from None
        records = response["Records"]
        if records:
            self._print(reader.shard_id, records)
            reader.last_sequence = records[-1]["SequenceNumber"]
            if self.args.max is not None and self.printed >= self.args.max:
                return True
        reader.iterator = response.get("NextShardIterator")
        if reader.iterator is None:  # closed and read to its end
            del self.readers[reader.shard_id]
            self.drained.add(reader.shard_id)
            self._start_children(response.get("ChildShards", []))
        elif not self.args.follow and not records and response.get("MillisBehindLatest", 0) == 0:
            del self.readers[reader.shard_id]  # caught up
        return False

    def _start_children(self, children: list[dict[str, Any]]) -> None:
        for child in children:
            if child["ShardId"] not in self.started and all(p in self.drained for p in child["ParentShards"]):
                self._add(child["ShardId"], self.child_start)

    def _iterator(self, reader: ShardReader) -> str:
        params: dict[str, Any] = {"StreamName": self.args.stream, "ShardId": reader.shard_id}
        if reader.last_sequence is not None:  # after an expired iterator: carry on after the last record
            params.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=reader.last_sequence)
        else:
            params["ShardIteratorType"] = reader.start
            if reader.start == "AT_TIMESTAMP":
                params["Timestamp"] = self.args.timestamp
        try:
            return self.client.get_shard_iterator(**params)["ShardIterator"]
        except (ClientError, BotoCoreError) as err:
            raise self._explain(err) from None

    def _print(self, shard_id: str, records: list[dict[str, Any]]) -> None:
        if self.args.max is not None:
            records = records[:self.args.max - self.printed]
        if self.args.format == "json":
            lines = [orjson.dumps({"shardId": shard_id, "sequenceNumber": r["SequenceNumber"],
                                   "partitionKey": r["PartitionKey"],
                                   "approximateArrivalTimestamp": r["ApproximateArrivalTimestamp"].timestamp(),
                                   "data": r["Data"].decode("utf-8", "replace")}) for r in records]
        else:
            lines = [r["Data"].decode("utf-8", "replace").encode() for r in records]
        write_all(self.out, b"\n".join(lines) + b"\n")
        self.out.flush()
        self.printed += len(records)

    def _list_shards(self) -> list[dict[str, Any]]:
        try:
            pages = self.client.get_paginator("list_shards").paginate(StreamName=self.args.stream)
            return [shard for page in pages for shard in page["Shards"]]
        except (ClientError, BotoCoreError) as err:
            raise explain(err, self.args.endpoint_url, self.args.stream) from None

    def _explain(self, err: Exception) -> CommandError:
        """Errors while reading: the stream existed when we started."""
        if isinstance(err, ClientError) and err.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return CommandError(f"stream {self.args.stream!r} no longer exists on {self.args.endpoint_url} "
                                f"({err.response['Error'].get('Message', '')})")
        return explain(err, self.args.endpoint_url, self.args.stream)


def write_all(out: BinaryIO, data: bytes) -> None:
    """Write all of `data`: a buffered write into a pipe returns short when the reader goes away
    mid-write (the next write raises BrokenPipeError) and may when a signal arrives."""
    view = memoryview(data)
    while view:
        view = view[out.write(view):]
