"""The `kinesim` command."""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

from .config import Settings

DESCRIPTION = """\
kinesim: a local, durable emulator of AWS Kinesis Data Streams (and, as it grows, the rest of
the streaming stack) that boto3, the AWS CLI and other AWS SDKs use unchanged.

Point a client at it:
  aws --endpoint-url http://localhost:4566 kinesis list-streams
  AWS_ENDPOINT_URL=http://localhost:4566 python my_producer.py
"""


def _serve_parser(sub: argparse._SubParsersAction) -> None:
    d = Settings()
    p = sub.add_parser(
        "serve", help="run the server (HTTP/1.1 and HTTP/2 on one port)",
        description="Run the kinesim server in the foreground until Ctrl-C / SIGTERM. Data written to "
                    "--data-dir survives restarts and crashes: every acknowledged write is committed first.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--host", default=d.host, help="address to listen on")
    p.add_argument("--port", type=int, default=d.port, help="port to listen on (4566 is the usual local AWS port)")
    p.add_argument("--data-dir", default=d.data_dir, help="where streams and records are stored")
    p.add_argument("--in-memory", action="store_true", help="keep nothing after exit (no --data-dir)")
    p.add_argument("--create-stream-ms", type=int, default=d.create_stream_ms,
                   help="how long a new stream stays CREATING (0: ACTIVE at once)")
    p.add_argument("--delete-stream-ms", type=int, default=d.delete_stream_ms,
                   help="how long a deleted stream stays DELETING")
    p.add_argument("--update-stream-ms", type=int, default=d.update_stream_ms,
                   help="how long a stream stays UPDATING after resharding or a settings change")
    p.add_argument("--shard-limit", type=int, default=d.shard_limit, help="open shards allowed in the account")
    p.add_argument("--region", default=d.region, help="region used in ARNs")
    p.add_argument("--account-id", default=d.account_id, help="account id used in ARNs and messages")
    p.add_argument("--enforce-limits", action="store_true",
                   help="apply AWS's per-shard throughput limits (1 MiB/s or 1000 records/s in, 2 MiB/s and "
                        "5 GetRecords/s out): excess calls get ProvisionedThroughputExceededException")
    p.add_argument("--log-level", default=d.log_level, choices=["debug", "info", "warning", "error"])
    p.add_argument("--iterator-ttl", type=float, default=d.iterator_ttl_s, dest="iterator_ttl_s",
                   help="seconds before a shard iterator expires (AWS: 300); for testing expiry")
    p.add_argument("--retention-sweep", type=float, default=d.retention_sweep_s, dest="retention_sweep_s",
                   help="seconds between deletions of records past retention")
    p.add_argument("--retention-hour", type=float, default=d.retention_hour_s, dest="retention_hour_s",
                   help="seconds in one hour of a retention period (AWS: 3600); lower for testing expiry")
    p.add_argument("--subscription-lifetime", type=float, default=d.subscription_s, dest="subscription_s",
                   help="seconds a SubscribeToShard subscription lasts (AWS: 300)")
    p.add_argument("--subscription-heartbeat", type=float, default=d.subscription_heartbeat_s,
                   dest="subscription_heartbeat_s",
                   help="longest gap in seconds between a subscription's events, records or not")
    p.add_argument("--firehose-interval-scale", type=float, default=d.firehose_interval_scale,
                   help="multiply Firehose buffering intervals and retry durations by this (0.01: a 60 s "
                        "buffer flushes after 0.6 s); for tests")
    p.add_argument("--firehose-s3-endpoint", default=d.firehose_s3_endpoint,
                   help="S3 endpoint URL that Firehose writes to for buckets not found in kinesim's own "
                        "object store (credentials from the usual AWS environment/config)")


# The other commands: (module, one-line help). Each module has `configure(parser)`, `run(args)`,
# `DESCRIPTION` (else its docstring) and optionally `EPILOG`; each keeps its heavy imports inside
# `run`, so that building every parser stays cheap.
COMMANDS = {
    "deploy": ("kinesim.deploy.cli",
               "create/update/delete a stack of streams, functions and triggers from a SAM template"),
    "logs": ("kinesim.functions.logs_cli",
             "print a function's log (START / its output / END / REPORT), optionally following it"),
    "put": ("kinesim.console.put",
            "put records to a stream from stdin (one per line) or a generator, like kafka-console-producer"),
    "tail": ("kinesim.console.tail", "print a stream's records as they arrive, like kafka-console-consumer"),
    "sql": ("kinesim.analytics.sql_cli",
            "Spark SQL over what Firehose delivered, each delivery stream a table (needs Java 17+)"),
}


def _command_parser(sub: argparse._SubParsersAction, name: str) -> None:
    module = importlib.import_module(COMMANDS[name][0])
    module.configure(sub.add_parser(
        name, help=COMMANDS[name][1], description=getattr(module, "DESCRIPTION", module.__doc__),
        epilog=getattr(module, "EPILOG", None), formatter_class=argparse.RawDescriptionHelpFormatter))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kinesim", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _serve_parser(sub)
    for name in COMMANDS:
        _command_parser(sub, name)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "serve":
        from .server import serve
        opts = {k: v for k, v in vars(args).items() if k != "command"}
        settings = Settings(**opts)
        logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                            stream=sys.stderr)
        serve(settings)
        return 0
    return importlib.import_module(COMMANDS[args.command][0]).run(args)
