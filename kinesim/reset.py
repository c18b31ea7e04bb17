"""What a reset of the server deletes (`POST /_kinesim/reset`, `Services.reset`): of every service,
or of those named, its resources as a freshly started server has none of them.

Each service owns documents in the store (by kind, below), and some own more: Kinesis the record
log, Firehose its buffers, S3 the object store's directory, Lambda its functions' code and layers,
CloudWatch Logs the log files (functions' logs included: they are log groups). A reset stops the
service's background work (closing it as a server stop does), deletes all of that, and has the
service made again on its next use. The services whose objects hold a reset one (`HOLDERS`) are
closed and made again too, from the store, as after a restart: their own resources are kept.

Not reset: what belongs to no service. The shard uid counter and the iterators' key (a shard uid is
never given out twice: a mapping's checkpoint names a shard by it), the warm Spark and its named
queries (`kinesim sql`; they read the buckets, and see them emptied), the server's settings.
"""
from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from typing import TYPE_CHECKING, Any, Iterable

from .scoped_store import split_kind

if TYPE_CHECKING:
    from .store import Store

log = logging.getLogger("kinesim.reset")

# The services, by the names boto3 gives their clients (and /_kinesim/health lists).
SERVICES = ("kinesis", "lambda", "firehose", "s3", "sqs", "sns", "logs", "iam", "sts", "ssm", "ecr", "cloudformation")

# Services whose objects hold another's, given when they are made (not looked up on each use): the
# Lambda service holds Kinesis's, the object store and SQS's consumers; Firehose holds Kinesis's and
# the object store; CloudWatch Logs holds the Lambda service's log files. When the one held is made
# anew, so are they.
HOLDERS = {"kinesis": ("lambda", "firehose"), "s3": ("lambda", "firehose"), "sqs": ("lambda",), "lambda": ("logs",)}

# Document kinds by owner: the exact kinds, then the prefixes (a test checks that every kind a
# workload of every service writes has an owner). "meta" is Kinesis's, but for `KEPT_META`.
_KINDS = {
    "stream": "kinesis", "policy": "kinesis",  # a stream's or a consumer's resource policy, by ARN
    "function": "lambda", "function_version": "lambda", "function_alias": "lambda", "layer": "lambda",
    "layer_version": "lambda", "mapping": "lambda", "mapping-checkpoint": "lambda", "mapping-result": "lambda",
    "checkpoint": "lambda", "event-invoke-config": "lambda",
    "stack": "cloudformation", "deleted-stack": "cloudformation", "stack-events": "cloudformation",
    "change-set": "cloudformation",
}
_PREFIXES = {"kinesis-": "kinesis", "lambda-": "lambda", "firehose-": "firehose", "sqs-": "sqs", "sns-": "sns",
             "logs-": "logs", "iam-": "iam", "sts-": "sts", "ssm-": "ssm", "ecr-": "ecr"}
KEPT_META = frozenset(("next-shard-uid", "iterator-key"))

# How long a reset of CloudFormation waits for the stack operations under way to stop.
STACK_STOP_S = 30.0


def owner(kind: str) -> str | None:
    """The service that owns documents of `kind`, in any scope (None: none known)."""
    kind = split_kind(kind)[2]
    if kind == "meta":
        return "kinesis"
    found = _KINDS.get(kind)
    if found is None:
        found = next((service for prefix, service in _PREFIXES.items() if kind.startswith(prefix)), None)
    return found


def checked(names: Iterable[str]) -> tuple[str, ...]:
    """The services named (comma-separated lists taken apart), in `SERVICES` order; all of them
    when none is named. ValueError names what is not a service."""
    wanted = {n.strip().lower() for name in names for n in name.split(",") if n.strip()}
    unknown = sorted(wanted.difference(SERVICES))
    if unknown:
        raise ValueError(f"Unknown service{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: "
                         f"kinesim resets {', '.join(SERVICES)}.")
    return tuple(s for s in SERVICES if s in wanted) if wanted else SERVICES


def with_holders(named: Iterable[str]) -> tuple[str, ...]:
    """`named` and the services that hold one of them, directly or not, in `SERVICES` order."""
    found, todo = set(), list(named)
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(HOLDERS.get(name, ()))
    return tuple(s for s in SERVICES if s in found)


def stop_stack_operations(service: Any, timeout: float = STACK_STOP_S) -> None:
    """Stop the stack operations under way: providers are no longer waited for, each operation is
    cancelled (as by CancelUpdateStack: it stops before its next resource) and waited for."""
    service.responses.abandon("kinesim was reset while the resource waited for its provider")
    runner = service.runner
    deadline = time.monotonic() + timeout
    while True:
        with runner.lock:
            names = list(runner.deployers)
        for name in names:
            runner.cancel(name)
        running = [t for t in list(runner.threads) if t.is_alive() and t is not threading.current_thread()]
        if not running or time.monotonic() >= deadline:
            break
        running[0].join(0.05)  # an operation not yet cancelled (making its engine) is cancelled next round
    if running:
        log.warning("reset: %d stack operation(s) still running after %.0f s", len(running), timeout)


def stop_kinesis(kinesis: Any) -> None:
    """Delete every stream as DeleteStream does (its subscriptions' and readers' waits end) and stop
    every Kinesis queue's reader."""
    for queue in list(kinesis.queues.queues.values()):
        if queue.state is not None:
            queue.state.close()
    for stream in list(kinesis.streams.values()):
        kinesis.drop(stream)


def delete_state(store: "Store", named: tuple[str, ...], s3_root: str, functions_files: str | None,
                 scopes: Iterable[tuple[str, Any]]) -> None:
    """Delete what the `named` services keep in every scope, their background work stopped:
    documents, records, buffers, the object store's directory (`s3_root`), functions' code, layers
    and log files (`scopes`: each scope's directory of them and its Lambda service if made, whose
    log files' caches must forget the groups; `functions_files`: None when there are none). Every
    service named: also documents no service is known to own (logged: `_KINDS` should name them)."""
    everything = set(named) == set(SERVICES)
    for kind in store.document_kinds():
        who = owner(kind)
        if split_kind(kind)[2] == "meta":
            if "kinesis" in named:
                store.delete_documents(kind, [name for name in store.documents(kind) if name not in KEPT_META])
        elif who in named or (who is None and everything):
            if who is None:
                log.warning("reset: deleting documents of kind %r, which no service is known to own", kind)
            store.delete_documents(kind)
    if "kinesis" in named:
        store.delete_records(store.shard_uids_with_records())  # what in-flight puts left besides streams
    if "firehose" in named:
        store.firehose_buffer_clear()
    if "s3" in named:
        empty_directory(s3_root)
    if functions_files is None:
        return
    for files, functions in scopes:
        if "lambda" in named:
            for sub in ("functions", "layers"):
                shutil.rmtree(os.path.join(files, sub), ignore_errors=True)
        if "logs" in named:
            if functions is not None:  # its log files' caches forget the groups as they go
                for group in functions.logs.group_dirs():
                    functions.logs.delete_group(group)
            empty_directory(os.path.join(files, "logs"))


def empty_directory(path: str) -> None:
    """Remove what `path` holds, keeping it."""
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except FileNotFoundError:
            pass
