"""One lane of one shard of an event source mapping (pollers.py has the whole picture): an ordered
reader of the shard's records whose partition keys hash to the lane, that gathers them into
batches, invokes the function, retries and bisects failed batches, gives up on them to the
OnFailure destination, keeps its tumbling window, and checkpoints.

The lane's code reads as one loop, but it is a generator: where it would wait it yields a
lane_runner.Wait or Sleep, and the runner parks it until then, so that it holds no thread while it
waits (lane_runner.py). `yield from` marks every method that may wait."""
from __future__ import annotations

import logging
import threading
import time
import uuid as uuidlib
from collections import deque
from typing import Any, Generator

import orjson

from ..kinesis.reader import MAX_READ
from ..protocol.errors import AwsError
from . import events, windows
from . import mapping_status as status
from .batches import Batch, Item, Outcome, Part, judge, lane_of
from .lane_runner import Sleep, Wait

# What a lane's generator methods are: they yield what they wait for and return their result.
Steps = Generator["Wait | Sleep", None, Any]

log = logging.getLogger("kinesim.pollers")


class Lane:
    """An ordered reader of one shard's records of one lane, and the invocations they make."""

    def __init__(self, work: Any, number: int):  # a mapping_poller.ShardWork
        self.work, self.number = work, number
        self.poller, self.config = work.poller, work.poller.config
        self.svc, self.stream, self.shard = work.poller.svc, work.stream, work.shard
        self.timing = work.poller.timing
        self.index = self.saved_index = work.mark.positions[number]
        self.saved_at = time.monotonic()
        saved = work.mark.states[number]
        self.window: dict[str, Any] | None = dict(saved) if saved else None
        # When the previous invocation ended: the batching window counts from there (AWS: "the
        # next window begins as soon as the previous function invocation completes").
        self.last_done = time.monotonic()
        self.invoked_at = 0.0  # when the last invocation started (epoch s): the timeline's IteratorAge
        self.gen = self.steps()
        self.park_lock = threading.Lock()
        self.parks = 0                     # numbers the parks: a timer wakes only the park it was set for
        self.parked: tuple[int, bool] | None = None   # (park number, waits for an append)

    # how the runner drives it (lane_runner.py)

    def start(self) -> None:
        self.poller.pool.submit(self.step)

    def step(self) -> None:
        """Run until the lane waits (then park it) or ends; on one of the mapping's pool threads."""
        try:
            wanted = next(self.gen)
        except StopIteration:
            return
        if self.stopped():
            return
        with self.park_lock:
            self.parks += 1
            park = self.parks
            self.parked = (park, isinstance(wanted, Wait))
        if isinstance(wanted, Sleep):
            self.poller.timers.after(wanted.seconds, lambda: self.wake(park))
        elif not self.work.source.listen(wanted.index, self.appended):
            self.wake(park)  # already there: run on
        elif wanted.timeout is not None:
            self.poller.timers.after(wanted.timeout, lambda: self.wake(park))

    def appended(self) -> None:
        """The source's callback: whatever the lane waits for may be there (a Sleep goes on)."""
        with self.park_lock:
            if self.parked is None or not self.parked[1]:
                return
            self.parked = None
        self.poller.pool.submit(self.step)

    def wake(self, park: int) -> None:
        with self.park_lock:
            if self.parked is None or self.parked[0] != park:
                return  # woken already (an append came first)
            self.parked = None
        self.poller.pool.submit(self.step)

    # running

    def steps(self) -> Steps:
        while not self.stopped():
            try:
                yield from self.loop()
                return
            except Exception:  # not the function's fault: resume from the last checkpoint
                log.exception("mapping %s: %s lane %d failed", self.config.uuid, self.shard.shard_id, self.number)
            yield Sleep(self.timing.problem_retry_s)
            self.index = self.saved_index = self.work.mark.positions[self.number]
            saved = self.work.mark.states[self.number]
            self.window = dict(saved) if saved else None

    def stopped(self) -> bool:
        return self.poller.stopped.is_set()

    def gone(self) -> bool:
        return self.work.cursor.gone() is not None or self.work.source.gone() is not None

    def loop(self) -> Steps:
        tumbling = self.config.tumbling_window_s > 0
        while True:
            batch = yield from self.collect()
            if batch is None:
                return
            if batch.items:
                if tumbling and self.window is None:
                    self.window = windows.opened(batch.window_start, self.config.tumbling_window_s)
                if not (yield from self.deliver(batch)):
                    return
            else:
                # Records nobody wants here (other lanes', filtered out, expired) are passed; the
                # position is saved now and then, not per record: passing them again is harmless.
                self.index = batch.next_index
                if self.index != self.saved_index and (
                        batch.ended or time.monotonic() - self.saved_at >= self.timing.pass_checkpoint_s):
                    if not self.checkpoint(self.index):
                        return
            # A window ends when a later window's record comes, or when its time is over and every
            # record stamped inside it was read (a lane catching up may still be in the past).
            if tumbling and self.window is not None and (batch.window_over or batch.ended or (
                    batch.at_tip and windows.due_in(self.window) <= 0)):
                if not (yield from self.close_window()):
                    return
            if batch.ended:
                self.work.lane_ended()
                return

    # reading

    def collect(self) -> Steps:  # -> Batch | None
        """The next batch: up to BatchSize records of this lane that pass the filters, at most 6 MB
        of event, within one tumbling window, gathered for up to the batching window."""
        cfg, poller = self.config, self.poller
        items: list[Item] = []
        size = events.EVENT_OVERHEAD_BYTES
        index = self.index
        window_start = self.window["start"] if self.window else None
        deadline = self.last_done + cfg.batching_window_s if cfg.batching_window_s else None
        role_arn = poller.role_arn()
        while True:
            if self.stopped() or self.gone():
                return None
            want = min(MAX_READ, (cfg.batch_size - len(items)) * cfg.lanes)
            read = self.work.source.read(index, want, max(1, events.MAX_PAYLOAD_BYTES - size))
            for row in read.records:
                if lane_of(row[2], cfg.lanes) != self.number:
                    index = row[0] + 1
                    continue
                entry = poller.record_entry(row, self.stream, self.shard, role_arn)
                if not poller.matches(entry, row):
                    index = row[0] + 1
                    continue
                if cfg.tumbling_window_s:
                    start = windows.window_start(row[4], cfg.tumbling_window_s)
                    if window_start is None:
                        window_start = start
                    elif start > window_start:
                        return Batch(items, index, window_start, window_over=True)
                n = len(orjson.dumps(entry)) + 1
                if items and size + n > events.MAX_PAYLOAD_BYTES:
                    return Batch(items, index, window_start)
                items.append(Item(row, entry, n, poller.record_key(row, self.stream, self.shard)))
                size += n
                index = row[0] + 1
                if len(items) >= cfg.batch_size:
                    return Batch(items, index, window_start)
            if not read.records:
                index = max(index, read.next_position)  # an empty read below the tip: those records expired
            if not read.at_tip:
                continue
            if read.finished:
                return Batch(items, index, window_start, at_tip=True, ended=True)
            now = time.monotonic()
            if items and (deadline is None or now >= deadline):
                return Batch(items, index, window_start, at_tip=True)
            if not items and index != self.index:
                return Batch(items, index, at_tip=True)
            timeout: float | None = None  # nothing due: only an append (or a stop) wakes the lane
            if items:
                timeout = deadline - now
            if self.window is not None:
                due = windows.due_in(self.window)
                if due <= 0 and not items:
                    return Batch(items, index, at_tip=True)
                timeout = max(0.0, due) if timeout is None else min(timeout, max(0.0, due))
            if not items and index != self.saved_index:  # passed records' position to save
                due = self.saved_at + self.timing.pass_checkpoint_s - now
                if due <= 0:
                    return Batch(items, index, at_tip=True)
                timeout = due if timeout is None else min(timeout, due)
            yield Wait(index, timeout)

    # invoking

    def deliver(self, batch: Batch) -> Steps:  # -> bool
        """Invoke the function with `batch` until it succeeds or is given up; False if stopped."""
        cfg = self.config
        parts = deque([Part(batch.items)])
        while parts:
            if self.stopped():
                return False
            part = parts[0]
            stale = self.stale(part.items)
            if stale:
                given, part.items = part.items[:stale], part.items[stale:]
                if not (yield from self.give_up(given, "RecordAgeExceeded", part)):
                    return False
                if not part.items:
                    parts.popleft()
                if not self.checkpoint(given[-1].row[0] + 1 if parts else batch.next_index):
                    return False
                continue
            outcome = self.attempt(part)
            if outcome.kind == "problem":
                self.poller.set_result(outcome.problem)
                self.poller.timeline.add_problem(outcome.problem, shard=self.shard.shard_id)
                yield Sleep(self.timing.problem_retry_s)
                continue
            if outcome.kind == "ok":
                parts.popleft()
                self.poller.set_result(status.OK)
                self.note("ok", part.items, part)
                if not (yield from self.succeeded(outcome.state, part.items[-1].row[0] + 1 if parts
                                                  else batch.next_index)):
                    return False
                continue
            self.poller.set_result(status.FUNCTION_FAILED)
            if outcome.kind == "partial":
                self.note("partial", part.items, part, done=outcome.failed_at)
            if outcome.kind == "partial" and outcome.failed_at > 0:
                done, part.items = part.items[:outcome.failed_at], part.items[outcome.failed_at:]
                if not (yield from self.succeeded(outcome.state, done[-1].row[0] + 1)):
                    return False
                if cfg.bisect:  # "bisected at the returned sequence number": not a retry
                    continue
            elif outcome.kind == "error" and cfg.bisect and len(part.items) > 1:
                half = len(part.items) // 2
                self.note("bisected", part.items, part, halves=[half, len(part.items) - half])
                parts.popleft()
                parts.extendleft([Part(part.items[half:], part.invokes, last=part.last),
                                  Part(part.items[:half], part.invokes, last=part.last)])
                continue
            part.retries += 1
            if 0 <= cfg.max_retries < part.retries:
                if not (yield from self.give_up(part.items, "RetryAttemptsExhausted", part)):
                    return False
                parts.popleft()
                if not self.checkpoint(part.items[-1].row[0] + 1 if parts else batch.next_index):
                    return False
                continue
            if outcome.kind == "error":
                self.note("retried", part.items, part)
            yield Sleep(self.timing.backoff(part.retries))
        return True

    def event(self, items: list[Item], final: bool = False, early: bool = False) -> bytes:
        """The event that carries `items` to the function (with the open tumbling window, if any)."""
        entries = [it.entry for it in items]
        if self.window is not None:
            w = self.window
            return orjson.dumps(events.window_event(entries, w["start"], w["end"], w["state"], self.shard.shard_id,
                                                    self.stream.arn, final, early))
        return orjson.dumps(self.poller.batch_event(entries, self.stream, self.shard))

    def attempt(self, part: Part, final: bool = False, early: bool = False) -> Outcome:
        event = self.event(part.items, final, early)
        self.invoked_at = time.time()
        try:
            invocation = self.poller.invoke(self.config.invoke_name, event)
        except AwsError as err:  # the batch did not reach the function: retried, not counted
            if err.code == "ResourceNotFoundException":
                return Outcome("problem", problem=status.FUNCTION_NOT_FOUND)
            return Outcome("problem", problem=f"PROBLEM: {err.message or err.code}")
        except Exception:  # the runtime failed us, not the function: retried, not counted
            log.exception("mapping %s: invoking %s failed", self.config.uuid, self.config.invoke_name)
            return Outcome("problem", problem=status.FUNCTION_FAILED)
        finally:
            self.last_done = time.monotonic()
        part.invokes += 1
        part.last = invocation
        return judge(invocation, part.items, self.config.report_item_failures and not final,
                     needs_state=self.window is not None and not final, reported_key=self.poller.reported_key)

    def succeeded(self, state: Any, next_index: int) -> Steps:  # -> bool
        """Records up to `next_index` are done: keep the window's new state, checkpoint."""
        if self.window is not None and state is not None:
            self.window["state"] = state
            if windows.state_too_big(state):  # AWS ends it early; the window goes on, state fresh
                if not self.checkpoint(next_index) or not (yield from self.close_window(early=True)):
                    return False
                return True
        return self.checkpoint(next_index)

    def stale(self, items: list[Item]) -> int:
        """How many leading records are past MaximumRecordAgeInSeconds or the stream's retention."""
        now = time.time()
        horizon = self.svc.retention_horizon(self.stream)
        if self.config.max_record_age_s >= 0:
            horizon = max(horizon, now - self.config.max_record_age_s)
        n = 0
        while n < len(items) and items[n].row[4] < horizon:
            n += 1
        return n

    def give_up(self, items: list[Item], condition: str, part: Part) -> Steps:  # -> bool
        """Discard records once their invocation record reached the OnFailure destination; False if
        the poller stopped first. A destination that cannot take the record (a missing bucket or
        stream) holds the shard: the records are kept, delivery is retried, and LastProcessingResult
        says why until it succeeds."""
        last = part.last
        record = events.failure_record(
            request_id=last.request_id if last else str(uuidlib.uuid4()), function_arn=self.config.function_arn,
            condition=condition, invoke_count=part.invokes, status_code=200,
            executed_version=getattr(last, "executed_version", self.config.executed_version),  # an alias: what ran
            function_error=last.function_error if last else None,
            shard_id=self.shard.shard_id, rows=[it.row for it in items], stream_arn=self.stream.arn)
        before = self.poller.result
        while (problem := self.poller.send_failure(record, self.shard.shard_id, self.event(items))) is not None:
            self.poller.set_result(problem)
            yield Sleep(self.timing.problem_retry_s)
            if self.stopped() or self.gone():
                return False
        self.poller.set_result(before)
        self.note("on-failure" if self.config.on_failure else "skipped", items, part, condition=condition,
                  destination=self.config.on_failure)
        log.info("mapping %s: %d record(s) of %s discarded (%s)", self.config.uuid, len(items),
                 self.shard.shard_id, condition)
        return True

    def note(self, outcome: str, items: list[Item], part: Part, **details: Any) -> None:
        """Record what became of (part of) a batch in the mapping's timeline. `age_ms`: the
        IteratorAge of its invocation (the newest record's age when the function was invoked)."""
        last = part.last
        self.poller.timeline.add(
            outcome, len(items), shard=self.shard.shard_id, first=items[0].row[1], last=items[-1].row[1],
            invokes=part.invokes, retries=part.retries, request_id=last.request_id if last else None,
            error=last.function_error if last else None,
            age_ms=round((self.invoked_at - items[-1].row[4]) * 1000) if last else None, **details)

    def close_window(self, early: bool = False) -> Steps:  # -> bool
        """The window's final invocation (no records, isFinalInvokeForWindow), retried like a batch;
        then its state is dropped (an early end keeps the window, with a fresh state)."""
        cfg = self.config
        part = Part([])
        while not self.stopped():
            outcome = self.attempt(part, final=True, early=early)
            if outcome.kind == "problem":
                self.poller.set_result(outcome.problem)
                yield Sleep(self.timing.problem_retry_s)
                continue
            if outcome.kind in ("ok", "partial"):
                self.poller.set_result(status.OK)
                break
            self.poller.set_result(status.FUNCTION_FAILED)
            part.retries += 1
            if 0 <= cfg.max_retries < part.retries:
                break
            yield Sleep(self.timing.backoff(part.retries))
        else:
            return False
        if early and self.window is not None:
            self.window = {**self.window, "state": {}}
        else:
            self.window = None
        return self.checkpoint(self.index)

    def checkpoint(self, index: int) -> bool:
        if self.gone():
            return False
        self.index = self.saved_index = index
        self.saved_at = time.monotonic()
        return self.work.checkpoint(self.number, index, self.window)
