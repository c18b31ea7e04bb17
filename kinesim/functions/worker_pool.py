"""The execution environments (worker processes) of one function configuration, as the runtime
(runtime.py) hands them to invocations: one invocation at a time each, the most recently used
first, up to a limit; a caller waits when all are busy."""
from __future__ import annotations

import threading

from .worker_process import WorkerProcess


class Retired(Exception):
    """The pool was retired (its function changed or was deleted) while a caller waited."""


class Pool:
    """The workers of one function configuration: idle ones, busy ones, and room for more."""

    def __init__(self, signature: tuple, limit: int):
        self.signature = signature
        self.limit = limit
        self.idle: list[WorkerProcess] = []
        self.busy: set[WorkerProcess] = set()
        self.starting = 0
        self.retired = False
        self.closing = False  # retired with its busy workers stopped too
        self.cond = threading.Condition()

    def acquire(self) -> tuple[WorkerProcess | None, bool]:
        """An idle worker, or None: the caller starts one (its place is kept); and whether it had
        to wait because all `limit` were busy. Raises Retired if the pool is retired meanwhile."""
        waited = False
        with self.cond:
            while True:
                if self.retired:
                    raise Retired
                if self.idle:
                    worker = self.idle.pop()  # the most recently used: the others can stay cold
                    self.busy.add(worker)
                    return worker, waited
                if len(self.busy) + self.starting < self.limit:
                    self.starting += 1
                    return None, waited
                waited = True
                self.cond.wait()

    def started(self, worker: WorkerProcess) -> WorkerProcess:
        with self.cond:
            self.starting -= 1
            self.busy.add(worker)
            if self.closing:  # started while the server shut down: its invocation sees EOF
                worker.kill()
        return worker

    def start_failed(self) -> None:
        with self.cond:
            self.starting -= 1
            self.cond.notify()

    def release(self, worker: WorkerProcess) -> None:
        with self.cond:
            self.busy.discard(worker)
            keep = worker.alive and not self.retired
            if keep:
                self.idle.append(worker)
            self.cond.notify()
        if not keep and worker.alive:
            worker.stop()

    def counts(self) -> tuple[int, int, int]:
        """(idle, busy, starting) now."""
        with self.cond:
            return len(self.idle), len(self.busy), self.starting

    def retire(self, stop_busy: bool = False) -> None:
        """Idle workers stop now, busy ones when released, or at once with `stop_busy`."""
        with self.cond:
            self.retired = True
            self.closing = stop_busy
            idle, self.idle = self.idle, []
            busy = list(self.busy) if stop_busy else []
            self.cond.notify_all()
        for worker in idle:
            worker.stop()
        for worker in busy:
            worker.kill()  # its invoking thread sees EOF and reaps it
