"""The `kinesim` command."""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading

from .config import Settings

DESCRIPTION = """\
kinesim: a local, durable emulator of the AWS streaming stack on one port: Kinesis Data Streams,
Lambda (Python and Node.js functions, triggered by streams, queues, uploads and topics), Firehose,
S3, SQS, SNS and CloudWatch Logs; CloudFormation (SAM and CDK templates deploy), STS and Parameter
Store; Spark SQL over what was delivered, continuous queries over live streams, and a web console
at http://localhost:4566/_kinesim/console/. boto3, the AWS CLI and other AWS SDKs use it unchanged.

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
        formatter_class=argparse.ArgumentDefaultsHelpFormatter, allow_abbrev=False)
    p.add_argument("--host", default=d.host,
                   help="address to listen on; anything but a loopback address lets other machines run code "
                        "here: use --verify-signatures then")
    p.add_argument("--port", type=int, default=d.port, help="port to listen on (4566 is the usual local AWS port)")
    p.add_argument("--kafka-port", type=_kafka_port, default=argparse.SUPPRESS, metavar="PORT",
                   help="port for Kafka clients (the Kafka protocol onto the same streams: a topic is a "
                        f"stream, a partition a shard); 0 or 'off': none. Default {d.kafka_port}, skipped with "
                        "a warning when taken; a port given here and taken is an error")
    p.add_argument("--kafka-initial-rebalance-ms", type=int, default=d.kafka_initial_rebalance_ms, metavar="MS",
                   help="how long a new Kafka consumer group waits for more members before its first "
                        "assignment (Kafka's group.initial.rebalance.delay.ms)")
    p.add_argument("--data-dir", default=d.data_dir, help="where streams and records are stored")
    p.add_argument("--in-memory", action="store_true", help="keep nothing after exit (no --data-dir)")
    p.add_argument("--create-stream-ms", type=int, default=d.create_stream_ms,
                   help="how long a new stream stays CREATING (0: ACTIVE at once)")
    p.add_argument("--delete-stream-ms", type=int, default=d.delete_stream_ms,
                   help="how long a deleted stream stays DELETING")
    p.add_argument("--update-stream-ms", type=int, default=d.update_stream_ms,
                   help="how long a stream stays UPDATING after resharding or a settings change")
    p.add_argument("--shard-limit", type=int, default=d.shard_limit, help="open shards allowed in the account")
    p.add_argument("--stack-limit", type=int, default=d.stack_limit,
                   help="CloudFormation stacks allowed in the account (AWS's default quota: 2000)")
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
    p.add_argument("--request-threads", type=int, default=d.request_threads,
                   help="threads serving requests, made as needed; an open SubscribeToShard or a slow upload "
                        "holds one while it lasts")
    p.add_argument("--idle-timeout", type=float, default=d.idle_connection_s, dest="idle_connection_s",
                   help="seconds a connection may stay silent (before or between requests, or halfway through "
                        "a request's head) before the server closes it; at most 60")
    p.add_argument("--max-subscriptions", type=int, default=d.max_subscriptions,
                   help="SubscribeToShard calls open at once (more get LimitExceededException), so that "
                        "threads stay free for short calls")
    p.add_argument("--max-long-polls", type=int, default=d.max_long_polls,
                   help="SQS ReceiveMessage long polls waiting at once (more answer at once with what the "
                        "queue has), so that threads stay free for short calls")
    p.add_argument("--firehose-interval-scale", type=float, default=d.firehose_interval_scale,
                   help="multiply Firehose buffering intervals and retry durations by this (0.01: a 60 s "
                        "buffer flushes after 0.6 s); for tests")
    p.add_argument("--cors-origins", nargs="+", default=[], metavar="ORIGIN",
                   help="web origins (e.g. https://app.example:8443) whose pages may call kinesim, besides pages "
                        "served from this machine (localhost, 127.0.0.1); '*' allows every site")
    p.add_argument("--allowed-hosts", nargs="+", default=[], metavar="NAME",
                   help="host names clients may reach kinesim by, besides localhost and IP addresses (requests "
                        "naming another host are refused: DNS rebinding); '.example' allows its subdomains")
    p.add_argument("--verify-signatures", action="store_true",
                   help="check SigV4 signatures as AWS does, against --credential (else the AWS_ACCESS_KEY_ID / "
                        "AWS_SECRET_ACCESS_KEY of kinesim's environment); by default any credentials work")
    p.add_argument("--credential", action="append", default=[], dest="credentials", metavar="KEY_ID:SECRET",
                   help="an access key id and its secret accepted by --verify-signatures (repeatable)")
    p.add_argument("--firehose-s3-endpoint", default=d.firehose_s3_endpoint,
                   help="S3 endpoint URL that Firehose writes to for buckets not found in kinesim's own "
                        "object store (credentials from the usual AWS environment/config)")
    p.add_argument("--spark", action="store_true",
                   help="start a warm Spark Connect server now (else the first `kinesim sql` starts it); "
                        "it stops with kinesim")
    p.add_argument("--spark-memory", metavar="SIZE", help="the warm Spark server's driver memory, e.g. 4g")


def _kafka_port(text: str) -> int:
    if text.lower() == "off":
        return 0
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535) nor 'off'")
    return port


# The other commands: (module, one-line help). Each module has `configure(parser)`, `run(args)`,
# `DESCRIPTION` (else its docstring) and optionally `EPILOG`; each keeps its heavy imports inside
# `run`, so that building every parser stays cheap. `run` is called with Ctrl-C raising
# KeyboardInterrupt, unless the module sets `HANDLES_CTRL_C = True`: then an early Ctrl-C still
# ends the process at once (see `main`) until `run` installs handling of its own.
COMMANDS = {
    "deploy": ("kinesim.deploy.cli",
               "create/update/delete a stack of streams, functions and triggers from a SAM template"),
    "logs": ("kinesim.functions.logs_cli",
             "print a function's log (START / its output / END / REPORT), optionally following it"),
    "put": ("kinesim.stream_cli.put",
            "put records to a stream from stdin (one per line) or a generator, like kafka-console-producer"),
    "tail": ("kinesim.stream_cli.tail", "print a stream's records as they arrive, like kafka-console-consumer"),
    "sql": ("kinesim.analytics.sql_cli",
            "Spark SQL over what Firehose delivered, each delivery stream a table (needs kinesim[spark] and "
            "Java 17+); "
            "--continuous: over live streams"),
    "queries": ("kinesim.analytics.queries_cli",
                "list, stop, resume or delete the continuous queries `kinesim sql --continuous --into` started"),
}


def _command_parser(sub: argparse._SubParsersAction, name: str) -> None:
    module = importlib.import_module(COMMANDS[name][0])
    module.configure(sub.add_parser(
        name, help=COMMANDS[name][1], description=getattr(module, "DESCRIPTION", module.__doc__),
        epilog=getattr(module, "EPILOG", None), formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False))


def _unrecognized(parser: argparse.ArgumentParser, unknown: list[str]) -> None:
    """Exit as argparse does for arguments no parser took, but with the command's own usage and,
    for a mistyped option, the one it is closest to (`tail --form`: did you mean --format?)."""
    import difflib
    options = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    typo = next((a.split("=", 1)[0] for a in unknown if a.startswith("--")), None)
    close = difflib.get_close_matches(typo, options, n=1, cutoff=0.6) if typo else []
    hint = f" (did you mean {close[0]}?)" if close else ""
    parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")


def _exit_at_once(signum: int, frame: object) -> None:
    # Not an exception: CPython prints and drops one raised while a weakref callback or __del__
    # runs (the import machinery's module locks use them), and the command would carry on as if
    # Ctrl-C had never been pressed. Nothing has been printed or sent yet: nothing is lost.
    os._exit(130)


def main(argv: list[str] | None = None) -> int:
    # First of all: a Ctrl-C that comes before the command has taken it over (while boto3 imports
    # on a busy machine, or while the stream is looked up) ends the command quietly with 130, the
    # status shells give a process stopped by Ctrl-C, not with a KeyboardInterrupt traceback.
    # Commands whose normal end is a Ctrl-C (tail, logs --follow, put's first one) handle it
    # themselves and exit as they document. Left alone: a SIGINT that is ignored (`nohup`, a
    # background job) and a caller's own handler, as when main runs inside another program.
    take_over = (threading.current_thread() is threading.main_thread()
                 and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    if take_over:
        signal.signal(signal.SIGINT, _exit_at_once)
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130
    finally:
        if take_over:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def _ctrl_c_raises() -> None:
    """Give a command Python's KeyboardInterrupt on Ctrl-C, if main took Ctrl-C over."""
    if signal.getsignal(signal.SIGINT) is _exit_at_once:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def build_parser(argv: list[str] | None = None) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The `kinesim` parser and its commands' (only serve's for `kinesim serve ...`)."""
    # No parser takes an abbreviation of an option: `tail --form` (a typo) would be taken for
    # --format and answered "invalid choice", and a new option could change what an old
    # abbreviation means. An unknown option is reported as what it is.
    parser = argparse.ArgumentParser(prog="kinesim", description=DESCRIPTION, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _serve_parser(sub)
    # A command builds no other command's parser: their modules import boto3, YAML, the Kinesis
    # reader and more (`kinesim serve`: ~0.1 s and ~20 MB before its first answer; `kinesim sql`:
    # ~0.4 s of its 1.7 s warm answer). Without a command (`kinesim --help`), every parser.
    first = (sys.argv[1:] if argv is None else list(argv))[:1]
    for name in COMMANDS:
        if not first or first[0] in (name, "-h", "--help") or first[0] not in (*COMMANDS, "serve"):
            _command_parser(sub, name)
    return parser, sub


def _main(argv: list[str] | None) -> int:
    parser, sub = build_parser(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _unrecognized(sub.choices.get(args.command, parser), unknown)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "serve":
        from .server import serve
        opts = {k: v for k, v in vars(args).items() if k not in ("command", "spark", "spark_memory")}
        # Without --kafka-port, opts has no kafka_port (SUPPRESS): Settings' default applies, and a
        # default that is taken is only a warning.
        settings = Settings(**opts)
        logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                            stream=sys.stderr)
        _ctrl_c_raises()
        # The warm Spark's supervisor waits for the server to answer, then watches it: it also
        # stops by itself after a kill -9.
        serve(settings, spark=args.spark, spark_memory=args.spark_memory, kafka_port_given="kafka_port" in opts)
        return 0
    module = importlib.import_module(COMMANDS[args.command][0])
    if not getattr(module, "HANDLES_CTRL_C", False):
        _ctrl_c_raises()
    return module.run(args)
