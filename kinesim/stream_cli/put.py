"""`kinesim put STREAM`: a console producer, like kafka-console-producer: lines from stdin, or
generated events, batched into PutRecords calls."""
from __future__ import annotations

import argparse
import json
import queue
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import orjson
from botocore.exceptions import BotoCoreError, ClientError
from tqdm import tqdm

from .connection import (CommandError, add_endpoint_args, describe_stream, explain, fail, kinesis_client,
                         positive_int)
from .generators import GENERATORS

DESCRIPTION = """\
Put records to a Kinesis stream: each line read from stdin becomes one record (its data is the line
without the line ending), or --generate makes realistic events. Records are sent in PutRecords
batches (at most 500 records and 5 MiB each); records the server throttles
(ProvisionedThroughputExceededException, e.g. under `kinesim serve --enforce-limits`) are sent again
after a backoff.

Partition keys decide the shard and, within a shard, the order: by default each record gets a random
key (spread over all shards, no order between records); --partition-key sends all to one shard in
order; --key-field takes the key from each line's JSON, so records of one user, order, device...
stay in order. Generated events are keyed by their entity (clickstream: user_id).

A progress bar with records/s and MB/s is shown on stderr when it is a terminal; a summary line is
always printed at the end.
"""

EPILOG = """\
generators:
  clickstream  click events on an online shop, one JSON object per record:
               {"event_id", "user_id", "session_id", "page", "referrer", "ts", "device", "country",
                "duration_ms"}; visitors move through sessions browse -> cart -> checkout

examples:
  echo '{"user": "alice", "action": "login"}' | kinesim put events --key-field user
  kinesim put logs < app.log
  tail -F app.log | kinesim put logs --partition-key app-1
  kinesim put clicks --generate clickstream --count 100000
  kinesim put clicks --generate clickstream --rate 50/s            # until Ctrl-C
  kinesim put clicks --generate clickstream --count 1000 --seed 42  # the same events each run
"""

# `run` installs its Ctrl-C handling (`_interrupt`) once it is ready to send; an earlier Ctrl-C
# exits 130 (see kinesim/cli.py).
HANDLES_CTRL_C = True
MAX_BATCH_RECORDS = 500
MAX_BATCH_BYTES = 5 << 20  # data and partition keys, as PutRecords counts them
MAX_KEY_CHARS = 256
# Records wait at most this long for a fuller batch (a person typing, `tail -F` trickling lines).
LINGER_S = 0.05
# Sources never block longer than this without yielding IDLE, so the linger is honoured.
TICK_S = 0.02
IDLE = None
# Failed entries are retried with exponential backoff (with jitter), giving up after this many
# rounds in a row in which nothing at all got through.
RETRYABLE = {"ProvisionedThroughputExceededException", "InternalFailure"}
BACKOFF_START_S, BACKOFF_MAX_S, MAX_STALLED_ROUNDS = 0.05, 1.0, 20

Item = tuple[bytes, "dict[str, Any] | None"]  # a record's data and, when generated, its fields


class BadInput(CommandError):
    """A line that cannot become a record; what was read before it is still sent."""


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("stream", help="the stream to put records to")
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--partition-key", metavar="KEY",
                      help="the partition key of every record: all go to one shard, in order")
    keys.add_argument("--key-field", metavar="FIELD",
                      help="each line is a JSON object and its FIELD is the record's partition key")
    parser.add_argument("--generate", choices=sorted(GENERATORS), metavar="GENERATOR",
                        help="put generated events instead of reading stdin: " + ", ".join(sorted(GENERATORS)))
    parser.add_argument("--count", type=positive_int, metavar="N",
                        help="with --generate: how many events to put (default: until Ctrl-C)")
    parser.add_argument("--rate", type=_rate, metavar="R/s",
                        help="with --generate: events per second, e.g. 100 or 100/s (default: as fast as possible)")
    parser.add_argument("--seed", type=int,
                        help="seed for generated events and random partition keys: runs repeat exactly "
                             "(except events' ts, the time they are generated)")
    add_endpoint_args(parser)
    return parser


def _rate(text: str) -> float:
    try:
        value = float(text.removesuffix("/s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: use events per second, e.g. 100 or 100/s") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: must be more than 0")
    return value


def run(args: argparse.Namespace) -> int:
    if (args.count or args.rate) and not args.generate:
        print("kinesim put: --count and --rate go with --generate (stdin is read to its end)", file=sys.stderr)
        return 2
    try:
        summary = describe_stream(args, args.stream)
    except CommandError as err:
        return fail("put", err)
    max_record = summary.get("MaxRecordSizeInKiB", 1024) * 1024
    if args.generate:
        generator = GENERATORS[args.generate](seed=args.seed)
        source, default_field = generated(generator, args.count, args.rate), generator.key_field
    else:
        source, default_field = stdin_lines(sys.stdin.buffer), None
    try:
        key_of = keyer(args.partition_key, args.key_field or default_field, random.Random(args.seed))
    except BadInput as err:
        return fail("put", err)
    if not args.generate and sys.stdin.isatty():
        print("kinesim put: one record per line; Ctrl-D to finish", file=sys.stderr)
    show = sys.stderr.isatty() and (args.generate is not None or not sys.stdin.isatty())
    bar = tqdm(total=args.count, unit="rec", unit_scale=True, file=sys.stderr, disable=not show, dynamic_ncols=True)
    producer = Producer(kinesis_client(args), args.endpoint_url, args.stream, bar)
    started = time.monotonic()
    error: CommandError | None = None
    code = 0
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, _interrupt(stop))
    try:
        try:
            produce(source, producer, key_of, max_record, stop)
        except BadInput as err:
            error = err
        producer.flush()
    except CommandError as err:
        error = err
    except KeyboardInterrupt:  # a second Ctrl-C, during the last send
        code = 130
    finally:
        signal.signal(signal.SIGINT, previous)
        bar.close()
    elapsed = time.monotonic() - started
    print(summary_line(producer.records, producer.bytes, args.stream, elapsed), file=sys.stderr)
    if error is not None:
        return fail("put", error)
    return code


def _interrupt(stop: threading.Event) -> Callable[[int, Any], None]:
    """The first Ctrl-C ends the input, but a PutRecords call in flight completes and what was read
    is still sent, so the summary counts exactly what the stream holds; a second one stops at once."""
    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
    return handler


def produce(source: Iterator[Item | None], producer: Producer, key_of: Callable[[bytes, Any, int], str],
            max_record: int, stop: threading.Event | None = None) -> None:
    number = 0
    for item in source:
        if stop is not None and stop.is_set():
            return
        if item is IDLE:
            producer.idle()
            continue
        number += 1
        data, fields = item
        if len(data) > max_record:
            raise BadInput(f"record {number} is {len(data)} bytes; this stream takes records of at most "
                           f"{max_record} bytes (its MaxRecordSizeInKiB)")
        producer.add(data, key_of(data, fields, number))


def summary_line(records: int, nbytes: int, stream: str, elapsed: float) -> str:
    rate = records / elapsed if elapsed > 0 else 0.0
    noun = "record" if records == 1 else "records"
    return (f"put {records} {noun} ({nbytes / 1e6:.1f} MB) to {stream} in {elapsed:.1f} s: "
            f"{rate:,.0f} records/s")


def stdin_lines(stream: BinaryIO) -> Iterator[Item | None]:
    """Lines of `stream` without their line ending, and IDLE whenever none came for a tick, so the
    records held can be sent while the writer pauses. A thread reads: a blocking read cannot time out."""
    lines: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def read() -> None:
        try:
            for line in stream:
                lines.put(line)
        finally:
            lines.put(None)

    threading.Thread(target=read, name="stdin", daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=TICK_S)
        except queue.Empty:
            yield IDLE
            continue
        if line is None:
            return
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        yield line, None


def generated(events: Iterator[dict[str, Any]], count: int | None, rate: float | None) -> Iterator[Item | None]:
    """`count` events (None: endless) as compact JSON, `rate` a second if given."""
    start = time.monotonic()
    made = 0
    while count is None or made < count:
        if rate:
            wait = start + made / rate - time.monotonic()
            if wait > 0:
                yield IDLE
                time.sleep(min(wait, TICK_S))
                continue
        event = next(events)
        made += 1
        yield orjson.dumps(event), event


def keyer(fixed: str | None, field: str | None, rng: random.Random) -> Callable[[bytes, Any, int], str]:
    """A function from (data, generated fields or None, record number) to the partition key."""
    if fixed is not None:
        check_key(fixed, "--partition-key")
        return lambda data, fields, number: fixed
    if field is None:
        return lambda data, fields, number: f"{rng.getrandbits(128):032x}"

    def from_field(data: bytes, fields: Any, number: int) -> str:
        if fields is None:
            try:
                fields = json.loads(data)
            except ValueError:
                raise BadInput(f"line {number} is not JSON, so it has no field {field!r} for --key-field: "
                               f"{data[:80].decode('utf-8', 'replace')}") from None
        value = fields.get(field) if isinstance(fields, dict) else None
        if value is None:
            raise BadInput(f"record {number} has no field {field!r} for --key-field")
        key = value if isinstance(value, str) else json.dumps(value)
        check_key(key, f"field {field!r} of record {number}")
        return key
    return from_field


def check_key(key: str, where: str) -> None:
    if not 1 <= len(key) <= MAX_KEY_CHARS:
        raise BadInput(f"{where}: a partition key is 1 to {MAX_KEY_CHARS} characters, not {len(key)}")


class Producer:
    """Batches records into PutRecords calls within AWS's limits and sends again what was throttled."""

    def __init__(self, client: Any, endpoint: str, stream: str, progress: tqdm):
        self.client, self.endpoint, self.stream, self.progress = client, endpoint, stream, progress
        self.pending: list[tuple[bytes, str]] = []
        self.pending_bytes = 0
        self.oldest = 0.0  # when the first pending record was added
        self.records = 0  # sent and acknowledged
        self.bytes = 0
        self.started = time.monotonic()

    def add(self, data: bytes, key: str) -> None:
        size = len(data) + len(key.encode())
        if self.pending and (len(self.pending) == MAX_BATCH_RECORDS or self.pending_bytes + size > MAX_BATCH_BYTES):
            self.flush()
        if not self.pending:
            self.oldest = time.monotonic()
        self.pending.append((data, key))
        self.pending_bytes += size
        self.idle()

    def idle(self) -> None:
        if self.pending and time.monotonic() - self.oldest >= LINGER_S:
            self.flush()

    def flush(self) -> None:
        batch, self.pending, self.pending_bytes = self.pending, [], 0
        delay, stalled = BACKOFF_START_S, 0
        while batch:
            retry = self._send(batch)
            stalled = stalled + 1 if len(retry) == len(batch) else 0
            if retry and stalled >= MAX_STALLED_ROUNDS:
                raise CommandError(f"{len(retry)} records were still throttled after {stalled} tries; the stream "
                                   f"needs more shards for this rate (or use --rate)")
            if retry:
                time.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, BACKOFF_MAX_S)
            batch = retry

    def _send(self, batch: list[tuple[bytes, str]]) -> list[tuple[bytes, str]]:
        """Send one batch; the records to send again."""
        try:
            if len(batch) == 1 and len(batch[0][0]) + len(batch[0][1].encode()) > MAX_BATCH_BYTES:
                # A record bigger than a PutRecords request (streams take up to 10 MiB): on its own.
                self.client.put_record(StreamName=self.stream, Data=batch[0][0], PartitionKey=batch[0][1])
                results: list[dict[str, Any]] = [{}]
            else:
                results = self.client.put_records(
                    StreamName=self.stream, Records=[{"Data": d, "PartitionKey": k} for d, k in batch])["Records"]
        except self.client.exceptions.ProvisionedThroughputExceededException:
            return batch
        except (ClientError, BotoCoreError) as err:
            raise explain(err, self.endpoint, self.stream) from None
        retry, rejected, sent, nbytes = [], [], 0, 0
        for record, result in zip(batch, results):
            code = result.get("ErrorCode")
            if code is None:
                sent += 1
                nbytes += len(record[0])
            elif code in RETRYABLE:
                retry.append(record)
            else:
                rejected.append(result)
        self._count(sent, nbytes)
        if rejected:
            first = rejected[0]
            raise CommandError(f"the server rejected {len(rejected)} records: {first['ErrorCode']}: "
                               f"{first.get('ErrorMessage', '')}")
        return retry

    def _count(self, sent: int, nbytes: int) -> None:
        self.records += sent
        self.bytes += nbytes
        self.progress.update(sent)
        elapsed = time.monotonic() - self.started
        if elapsed > 0:
            self.progress.set_postfix_str(f"{self.bytes / 1e6 / elapsed:.1f} MB/s", refresh=False)
