"""Event source mappings' pollers: Kinesis shards read in order and fed to a function in batches.
(A mapping whose source is an SQS queue gets an SqsPoller instead: sqs_poller.py; one whose source
is a topic of kinesim's Kafka listener a KafkaPoller, this poller in Kafka's clothes: kafka_source.py;
this manager starts, stops and reconfigures every kind alike.)

A poller reads a stream's shards like any other consumer (the store's ordered log, waking on the
shard's append condition), never from PutRecord, and follows what AWS documents for Kinesis
event source mappings:

* Per shard, `ParallelizationFactor` lanes; a record's lane comes from a hash of its partition key,
  so one key's records stay in order in one lane. A lane collects up to `BatchSize` records (and
  at most 6 MB of event), waiting up to `MaximumBatchingWindowInSeconds` after its previous
  invocation to fill a batch (0: invoke as soon as records exist).
* `StartingPosition` applies the first time only; afterwards each lane resumes from its durable
  checkpoint (checkpoints.py), written after a batch succeeded or was given up. A restart
  repeats at most the batch that was in flight.
* A function error retries the batch with a growing backoff until `MaximumRetryAttempts` or
  `MaximumRecordAgeInSeconds` is exhausted (-1: until the records expire). With
  `BisectBatchOnFunctionError` a failing batch is split in halves first; splitting does not use up
  retries. Given-up batches are described to the `OnFailure` destination (an SQS queue, an SNS
  topic, an S3 bucket with the whole event, or a Kinesis stream: failure_destinations.py) and
  skipped; a destination that cannot take the description (no such bucket) holds the shard until
  it can.
  Errors before the function ran (function not found, throttled) are retried without counting.
* `ReportBatchItemFailures`: the function's `batchItemFailures` move the checkpoint to just before
  the lowest reported sequence number and the rest of the batch is retried.
* `FilterCriteria`: records no filter matches are skipped without invoking.
* `TumblingWindowInSeconds`: batches never span windows (by arrival time); each invocation gets
  the state the previous one returned; a final invocation with `isFinalInvokeForWindow` follows
  the window's end.
* Resharding: a child shard is read only after its parents were read to their end (the shard
  reader's lineage order, kinesis/reader.py).
* The source is a stream (records polled from the store) or an enhanced fan-out consumer of it
  (records pushed by the consumer's subscription: consumer_source.py); only the reading differs
  (shard_sources.py), everything above is the same.

Modules: this one (the manager of all mappings and the delays), mapping_poller.py (one mapping:
its stream, shards and checkpoint), lane.py (one lane's batch/invoke/retry/bisect loop),
batches.py (batches and AWS's rules for an invocation's answer), windows.py (tumbling windows),
mapping_status.py (LastProcessingResult and the write gate), checkpoints.py (what is stored).

Threads: one per mapping (finds streams and shards, starts lanes), and a pool of at most
LANE_THREADS per mapping that runs its lanes, started as work needs them, plus one timer thread
for all mappings (lane_runner.py): a lane waiting for records or for a backoff holds no thread, so
the threads do not grow with the shards and an idle mapping costs nothing. All stop promptly on
`close()`. An invocation that finishes while its poller stops is still checkpointed,
but nothing is written once `close()`/`stop()` returned, so a new poller on the same store never
races an old one (an invocation still running then is simply repeated).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from ..config import Settings
from ..destinations import Destinations
from ..kinesis.service import KinesisService
from ..s3.objects import ObjectStore
from ..store import Store
from . import kafka_mappings
from . import mapping_status as status
from .batch_timeline import BatchTimeline
from .batches import Invocation, Invoke
from .checkpoints import Checkpoints
from .failure_destinations import FailureSender
from .lane_runner import Timers
from .mapping_config import MappingConfig
from .mapping_poller import MappingPoller
from .poller_timing import Timing
from .sqs_poller import QueueSource, SqsPoller
from .sqs_source import SqsMappingConfig, is_queue_arn

__all__ = ["MappingManager", "Invocation", "Invoke"]

# Tunables (module attributes so tests can shorten them; read when a MappingManager is made).
RETRY_BACKOFF_S = 0.1        # delay before the first retry of a failed batch; doubles per retry
RETRY_BACKOFF_MAX_S = 3.0
PROBLEM_RETRY_S = 1.0        # delay when the function could not be invoked at all
SCAN_S = 0.5                 # how often a mapping looks for its stream and new shards unprompted
LANE_THREADS = 16            # a mapping's lanes run on at most this many threads (lane_runner.py);
                             # more would only wait: a function runs on at most 10 workers at once
PASS_CHECKPOINT_S = 1.0      # how often a lane saves a position moved only by records it passed
STOP_JOIN_S = 2.0            # how long close() waits for threads (an invocation may be running)

ENABLED_STATES = {"Enabled", "Creating", "Enabling"}
DISABLED_STATES = {"Disabled", "Disabling", "Deleting"}


class MappingManager:
    """The running pollers of all event source mappings, kept in step with their configurations."""

    def __init__(self, kinesis: KinesisService, store: Store, invoke: Invoke, settings: Settings,
                 objects: ObjectStore | None = None, role_of: Callable[[str], str | None] | None = None,
                 destinations: Destinations | None = None, queues: QueueSource | None = None):
        self.kinesis, self.store, self.invoke, self.settings = kinesis, store, invoke, settings
        self.queues = queues  # SQS queues, read by the pollers of SQS mappings (sqs_poller.py)
        # Where on-failure records go: S3 buckets in `objects`, SQS/SNS through `destinations`.
        self.failures = FailureSender(kinesis, objects, destinations)
        self.role_of = role_of  # a function's execution role (its Role), by function name
        self.lock = threading.Lock()
        self.pollers: dict[str, MappingPoller | SqsPoller] = {}
        # Each mapping's last batch outcomes (the web console's timeline); kept across a poller's
        # restarts (reconfiguration, disable/enable), dropped with the mapping.
        self.timelines: dict[str, BatchTimeline] = {}
        # The delays, as this module's attributes say when the manager is made (tests shorten them).
        self.timing = Timing(retry_backoff_s=RETRY_BACKOFF_S, retry_backoff_max_s=RETRY_BACKOFF_MAX_S,
                             problem_retry_s=PROBLEM_RETRY_S, scan_s=SCAN_S,
                             pass_checkpoint_s=PASS_CHECKPOINT_S, stop_join_s=STOP_JOIN_S)
        self.lane_threads = LANE_THREADS
        self.timers = Timers()  # the lanes' deadlines (batching windows, backoffs), for every mapping

    def sync(self, mapping: dict[str, Any]) -> None:
        """Start, stop or reconfigure the mapping's poller to match its configuration.

        Raises AwsError InvalidParameterValueException for what cannot run (a bad filter pattern,
        an OnFailure destination of the wrong service). State "Updating" keeps a running poller running.
        """
        config: MappingConfig | SqsMappingConfig
        if kafka_mappings.is_kafka(mapping):
            # Imported on first use: it loads the Kafka side (kio's schemas), which a server whose
            # mappings read no topic need not load.
            from .kafka_source import KafkaMappingConfig
            config = KafkaMappingConfig.from_kafka_mapping(mapping, self.settings)
        elif is_queue_arn(mapping["EventSourceArn"]):
            config = SqsMappingConfig.from_mapping(mapping)
        else:
            config = MappingConfig.from_mapping(mapping)
            if config.on_failure:
                self.failures.check_usable(config.on_failure)
        with self.lock:
            current = self.pollers.get(config.uuid)
            if config.state in ENABLED_STATES:
                enabled = True
            elif config.state in DISABLED_STATES:
                enabled = False
            else:  # Updating: whatever it was doing
                enabled = current.active if current is not None else True
            if (current is not None and current.active == enabled and type(current.config) is type(config)
                    and current.config.same_work(config)):  # type: ignore[arg-type]
                current.config = config  # type: ignore[assignment]
                return
            if current is not None:
                current.stop()
            poller = self._poller(config)
            self.pollers[config.uuid] = poller
            if enabled:
                poller.start()

    def _poller(self, config: MappingConfig | SqsMappingConfig) -> MappingPoller | SqsPoller:
        if isinstance(config, SqsMappingConfig):
            return SqsPoller(self, config)
        if kafka_mappings.is_kafka_config(config):
            from .kafka_source import KafkaPoller
            return KafkaPoller(self, config)  # type: ignore[arg-type]
        return MappingPoller(self, config)

    def timeline(self, uuid: str) -> BatchTimeline:
        """The mapping's batch outcomes (made on first use)."""
        timeline = self.timelines.get(uuid)
        if timeline is None:
            timeline = self.timelines.setdefault(uuid, BatchTimeline())
        return timeline

    def lag(self, uuid: str) -> dict[str, int] | None:
        """How far a running Kinesis mapping is behind its stream (MappingPoller.lag); None for
        an SQS mapping or a stopped one."""
        poller = self.pollers.get(uuid)
        return poller.lag() if isinstance(poller, MappingPoller) and poller.active else None

    def check_destination(self, arn: str) -> None:
        """CreateEventSourceMapping/Update: refuse an OnFailure destination this server cannot reach."""
        self.failures.check_available(arn)

    def remove(self, uuid: str) -> None:
        """Stop the mapping's poller and forget its checkpoints."""
        with self.lock:
            poller = self.pollers.pop(uuid, None)
        if poller is not None:
            poller.stop()
        self.timelines.pop(uuid, None)
        Checkpoints(self.store, uuid).delete_all()

    def status(self, uuid: str) -> dict[str, str]:
        poller = self.pollers.get(uuid)
        if poller is None:
            result = Checkpoints(self.store, uuid).load_result() or status.NO_RECORDS
            return {"State": "Disabled", "StateTransitionReason": "User action", "LastProcessingResult": result}
        return poller.status()

    def close(self) -> None:
        """Stop every poller (server shutdown): all are told at once, then joined."""
        with self.lock:
            pollers = list(self.pollers.values())
            self.pollers.clear()
        for poller in pollers:
            poller.signal_stop()
        deadline = time.monotonic() + self.timing.stop_join_s
        for poller in pollers:
            poller.join(deadline)
            poller.seal()
        self.timers.close()
