"""The poller of one SQS event source mapping: it receives the queue's messages in-process (the
SQS service's consumer interface, never HTTP), invokes the function synchronously with AWS's
SQS event, and deletes what the function handled, as the Lambda guide's "Using Lambda with
Amazon SQS" describes:

* A batch is up to `BatchSize` messages (and at most 6 MB of event). Without a batching window
  the function is invoked with what one receive returned (up to 10, as soon as any is there);
  with `MaximumBatchingWindowInSeconds` the poller keeps receiving for up to that long after the
  batch's first message, until the batch is full.
* Received messages stay in the queue, hidden for the queue's visibility timeout. After a
  successful invocation they are deleted. On a function error (or an invocation that could not
  run) they are left alone: they become visible again when the timeout ends, and the queue's
  redrive policy moves one received `maxReceiveCount` times to its dead-letter queue, exactly as
  for any other consumer.
* Recursive loop detection (recursion.py): the invocation runs in the chain of its messages'
  AWSTraceHeader; one stopped (RecursiveInvocationException) leaves the batch to the visibility
  timeout like a failed one, so a looping message reaches the queue's dead-letter queue.
* `ReportBatchItemFailures`: only the messages the function lists in `batchItemFailures` stay;
  the rest are deleted (sqs_events.failed_messages has AWS's rules for odd answers).
* `FilterCriteria`: a message no pattern matches is deleted without invoking the function (the
  guide: Lambda "automatically deletes" messages that do not match).
* FIFO queues: the queue hands out no message of a group while another of that group is in
  flight (SQS's own rule), so a group's messages reach the function in order, one batch at a time,
  while other groups' batches run alongside.
* Concurrency: up to `ScalingConfig.MaximumConcurrency` batches at once; unset, DEFAULT_CONCURRENCY
  (AWS starts an SQS mapping at five concurrent batches and scales up from there; locally
  the function's worker pool is the limit anyway, so more brings nothing but threads).
  A mapping does not account for the function's reserved concurrency: a batch beyond it is
  throttled (concurrency.py) and its messages come back after their visibility timeout, as on AWS
  ("Event source mappings don't account for reserved concurrency", AWS's lambda-sqs-scaling
  article; the Lambda guide's services-sqs-configure: a visibility timeout of six times the
  function's timeout "allows Lambda to retry if your function is throttled").

Threads: one receiving thread per mapping, plus one per batch being invoked. `signal_stop` ends
the receiving thread's wait at once (messages received but not yet handed on are made visible
again); an invocation already running finishes and deletes what it handled. Nothing is
persisted here: the queue keeps all the state.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ..protocol.errors import AwsError
from . import events, recursion
from .filters import FilterCriteria
from .sqs_events import failed_messages, filter_view, sqs_event, sqs_record
from .sqs_source import STATE_REASON, SqsMappingConfig

if TYPE_CHECKING:
    from ..sqs.consumer import QueueConsumer, QueueInfo, Received

log = logging.getLogger("kinesim.pollers")

# Tunables (module attributes so tests can change them; read when a poller is made).
DEFAULT_CONCURRENCY = 5      # concurrent batches of a mapping without ScalingConfig
LOCAL_MAX_CONCURRENCY = 10   # the runtime's workers per function: MaximumConcurrency above it adds nothing
LONG_POLL_S = 20.0           # a receive's longest wait (AWS's pollers long-poll; stop ends it at once)
MISSING_QUEUE_RETRY_S = 1.0  # how often a mapping whose queue is gone looks for it again
RECEIVE_MAX = 10             # what one ReceiveMessage returns at most


class QueueSource(Protocol):
    """The SQS service's consumer interface, as the composition root hands it over."""

    def find(self, arn: str) -> QueueInfo | None: ...

    def consumer(self, arn: str) -> QueueConsumer: ...


class SqsPoller:
    """One SQS mapping: a receiving thread and the invocations of its batches."""

    def __init__(self, manager: Any, config: SqsMappingConfig):
        self.invoke, self.settings, self.timing = manager.invoke, manager.settings, manager.timing
        self.config = config
        self.filters = FilterCriteria.parse({"Filters": [{"Pattern": p} for p in config.filter_patterns]})
        queues: QueueSource | None = manager.queues
        self.consumer = queues.consumer(config.source_arn) if queues is not None else None
        self.timeline = manager.timeline(config.uuid)  # what became of each batch (the console's)
        self.concurrency = max(1, min(config.maximum_concurrency or DEFAULT_CONCURRENCY, LOCAL_MAX_CONCURRENCY))
        self.active = False
        self.stopped = threading.Event()
        self.cv = threading.Condition()                 # guards `invoking`
        self.invoking: set[threading.Thread] = set()
        self.thread: threading.Thread | None = None

    # lifecycle (the MappingManager's interface, shared with the Kinesis MappingPoller)

    def start(self) -> None:
        self.active = True
        self.thread = threading.Thread(target=self.run, name=f"sqs-mapping-{self.config.uuid[:8]}", daemon=True)
        self.thread.start()

    def signal_stop(self) -> None:
        self.stopped.set()
        self.active = False
        with self.cv:
            self.cv.notify_all()
        if self.consumer is not None:
            self.consumer.wake()

    def join(self, deadline: float) -> None:
        """The receiving thread and the invocations still running, until `deadline`."""
        with self.cv:
            threads = list(self.invoking)
        for t in ([self.thread] if self.thread else []) + threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def seal(self) -> None:
        """Nothing to seal: the queue holds the state, an invocation finishing late only deletes
        the messages it handled."""

    def stop(self) -> None:
        """Stop receiving now; invocations already running finish on their own."""
        self.signal_stop()
        if self.thread is not None:
            self.thread.join(self.timing.stop_join_s)

    def status(self) -> dict[str, str]:
        return {"State": "Enabled" if self.active else "Disabled", "StateTransitionReason": STATE_REASON}

    # receiving

    def run(self) -> None:
        if self.consumer is None:
            log.warning("mapping %s: this server has no SQS service to read %s", self.config.uuid,
                        self.config.source_arn)
            return
        while not self.stopped.is_set():
            if not self.free_slot():
                return
            try:
                batch = self.gather(self.consumer)
            except Exception:  # not the function's fault: the messages come back after their timeout
                log.exception("mapping %s: receiving from %s failed", self.config.uuid, self.config.source_arn)
                self.stopped.wait(self.timing.problem_retry_s)
                continue
            if batch is None:  # no such queue (deleted, not created yet): look again later
                self.stopped.wait(MISSING_QUEUE_RETRY_S)
                continue
            if batch and self.stopped.is_set():  # disabled while receiving: nothing more is invoked
                self.consumer.release([m.receipt_handle for m, _ in batch])
            elif batch:
                self.hand_on(batch)

    def free_slot(self) -> bool:
        """Wait until fewer than `concurrency` batches are being invoked; False once stopped."""
        with self.cv:
            while len(self.invoking) >= self.concurrency and not self.stopped.is_set():
                self.cv.wait()
            return not self.stopped.is_set()

    def gather(self, consumer: QueueConsumer) -> list[tuple[Received, dict[str, Any]]] | None:
        """The next batch: messages that pass the filters, with their event records; [] when none
        came; None when the queue does not exist."""
        cfg = self.config
        batch: list[tuple[Received, dict[str, Any]]] = []
        position: dict[str, int] = {}  # message id -> its place in the batch
        size = events.EVENT_OVERHEAD_BYTES
        deadline: float | None = None
        region = self.settings.region
        while True:
            if self.stopped.is_set():
                consumer.release([m.receipt_handle for m, _ in batch])
                return []
            if deadline is None:
                wait = 0.0 if batch else LONG_POLL_S
            else:
                wait = max(0.0, deadline - time.monotonic())
            got = consumer.receive(min(RECEIVE_MAX, cfg.batch_size - len(batch)), wait, self.stopped.is_set)
            if got is None:
                return None  # the queue went away with the messages received so far
            if got and deadline is None and cfg.batching_window_s > 0:
                deadline = time.monotonic() + cfg.batching_window_s
            dropped, overflow = [], []
            for m in got:
                record = sqs_record(m, cfg.source_arn, region)
                if self.filters is not None and not self.filters.matches(filter_view(record)):
                    dropped.append(m.receipt_handle)
                    continue
                # A visibility timeout shorter than the batching window (AWS advises against it)
                # hands a message out again while its batch is still gathering: it counts once,
                # with its newest receipt handle.
                again = position.get(m.message_id)
                if again is not None:
                    batch[again] = (m, record)
                    continue
                n = len(orjson.dumps(record)) + 1
                if overflow or (batch and size + n > events.MAX_PAYLOAD_BYTES):
                    overflow.append(m.receipt_handle)
                    continue
                position[m.message_id] = len(batch)
                batch.append((m, record))
                size += n
            if dropped:
                consumer.delete(dropped)  # as AWS does for SQS: filtered out means deleted
            if overflow:
                consumer.release(overflow)  # the next batch starts with them
                return batch
            if len(batch) >= cfg.batch_size:
                return batch
            if deadline is None:
                if batch or not got:
                    return batch  # no window: invoke with what one receive brought
                continue  # everything received was filtered out: receive again
            if time.monotonic() >= deadline:
                return batch

    # invoking

    def hand_on(self, batch: list[tuple[Received, dict[str, Any]]]) -> None:
        thread = threading.Thread(target=self.deliver, args=(batch,), daemon=True,
                                  name=f"sqs-invoke-{self.config.uuid[:8]}")
        with self.cv:
            self.invoking.add(thread)
        thread.start()

    def deliver(self, batch: list[tuple[Received, dict[str, Any]]]) -> None:
        try:
            done = self.invoke_batch(batch)
            if done and self.consumer is not None:
                self.consumer.delete(done)
        except Exception:
            log.exception("mapping %s: a batch of %s failed", self.config.uuid, self.config.source_arn)
        finally:
            with self.cv:
                self.invoking.discard(threading.current_thread())
                self.cv.notify_all()

    def invoke_batch(self, batch: list[tuple[Received, dict[str, Any]]]) -> list[str]:
        """Invoke the function with the batch; the receipt handles of the messages to delete."""
        cfg = self.config
        event = sqs_event([record for _, record in batch])
        function = ":".join(cfg.function_arn.split(":")[:7])  # unqualified: the chain counts the function
        trace = recursion.deepest((m.attributes.get("AWSTraceHeader") for m, _ in batch), function)
        try:
            invocation = self.invoke(cfg.invoke_name, event, trace)
        except AwsError as err:
            # The function could not run (deleted, throttled, a recursive loop stopped): the messages
            # come back after their visibility timeout, and the queue's redrive policy moves them to
            # its dead-letter queue after maxReceiveCount receives (for a stopped loop, as the
            # Lambda guide's invocation-recursion page says AWS does).
            log.info("mapping %s: could not invoke %s: %s", cfg.uuid, cfg.invoke_name, err.message or err.code)
            self.timeline.add_problem(f"PROBLEM: {err.message or err.code}")
            return []
        done: list[str] = []
        if not invocation.function_error:
            failed = failed_messages(invocation.payload, [m.message_id for m, _ in batch]) \
                if cfg.report_item_failures else set()
            # None: an answer AWS reads as "the whole batch failed"
            done = [] if failed is None else [m.receipt_handle for m, _ in batch if m.message_id not in failed]
        outcome = "ok" if len(done) == len(batch) else "partial" if done else "failed"
        self.timeline.add(outcome, len(batch), done=len(done), request_id=invocation.request_id,
                          error=invocation.function_error, first=batch[0][0].message_id,
                          last=batch[-1][0].message_id)
        return done
