"""Stack operations in the background, as CloudFormation runs them: the request that starts one is
answered at once with the stack IN_PROGRESS; the engine (kinesim.deploy's Deployer) then calls the
services' APIs on this same server, like any client, saving the stack's state before and after
every call and recording its events.

Each operation is kept in the stack's state (`Operation`) until it ends, so that a server killed
in the middle carries it on when it starts again: the engine settles what the kill left half-made.

An operation's lines (one per resource, as `kinesim deploy` prints them) are kept for the last
operation of each stack, for `kinesim deploy` to follow (`/_kinesim/stacks/<name>/log`).
"""
from __future__ import annotations

import logging
import threading
import time
import urllib.request
from typing import Any, Callable

from botocore.exceptions import BotoCoreError, ClientError

from kinesim.deploy.template import DeployError

from .records import Records

log = logging.getLogger("kinesim.cloudformation")

# The lines kept of one operation.
MAX_LINES = 5000
# How long a client's request that starts an operation waits for it to end before answering: most
# end well within it. The stack's work is asynchronous on AWS, and a request held 20 s (as it was)
# holds a request thread as long.
SETTLE_WAIT_S = 2.0


class OperationLog:
    """The lines of a stack's last operation, and how it ended."""

    def __init__(self, operation_id: str):
        self.operation_id = operation_id
        self.lines: list[str] = []
        self.done = False
        self.finished = threading.Event()
        self.error: str | None = None

    def add(self, line: str) -> None:
        if len(self.lines) < MAX_LINES:
            self.lines.append(line)

    def view(self, since: int) -> dict[str, Any]:
        return {"OperationId": self.operation_id, "Lines": self.lines[since:], "Next": len(self.lines),
                "Done": self.done, "Error": self.error}


class StoreStates:
    """The engine's StateStore over the records: a deleted stack is kept by id, not forgotten."""

    def __init__(self, records: Records):
        self.records = records
        self.last: dict[str, dict[str, Any]] = {}

    def get(self, name: str) -> dict[str, Any] | None:
        return self.records.live(name)

    def put(self, name: str, state: dict[str, Any]) -> None:
        self.records.put(state)
        self.last[name] = state

    def delete(self, name: str) -> None:
        state = self.last.pop(name, None) or self.records.live(name)
        if state is not None:
            self.records.bury(state)


class Runner:
    def __init__(self, records: Records, make_deployer: Callable[[str, Callable[[str], None]], Any],
                 health_url: str):
        self.records = records
        self.make_deployer = make_deployer  # (stack name, echo) -> Deployer
        self.health_url = health_url
        self.logs: dict[str, OperationLog] = {}
        self.lock = threading.Lock()
        self.threads: set[threading.Thread] = set()
        self.deployers: dict[str, Any] = {}  # the engine of each operation under way

    def busy(self, name: str) -> bool:
        with self.lock:
            found = self.logs.get(name)
            return found is not None and not found.done

    def start(self, name: str, operation_id: str, work: Callable[[Any], None],
              on_end: Callable[[bool], None] | None = None) -> None:
        """Run `work(deployer)` for stack `name` in a thread of its own; then `on_end(succeeded)`."""
        oplog = OperationLog(operation_id)
        with self.lock:
            self.logs[name] = oplog
        thread = threading.Thread(target=self._run, args=(name, oplog, work, on_end), name=f"cfn-{name}",
                                  daemon=True)
        self.threads.add(thread)
        thread.start()

    def _run(self, name: str, oplog: OperationLog, work: Callable[[Any], None],
             on_end: Callable[[bool], None] | None) -> None:
        try:
            deployer = self.make_deployer(name, oplog.add)
            with self.lock:
                self.deployers[name] = deployer
            work(deployer)
        except (DeployError, ClientError, BotoCoreError) as err:
            oplog.error = str(err)
        except Exception as err:  # noqa: BLE001 - a bug must not leave the stack IN_PROGRESS unsaid
            log.exception("stack %s: operation failed", name)
            oplog.error = f"internal error: {err}"
        finally:
            state = self.records.live(name)
            if state is not None and state.pop("Operation", None) is not None:
                self.records.put(state)
            with self.lock:
                self.deployers.pop(name, None)
            if on_end is not None:
                on_end(oplog.error is None)
            oplog.done = True
            oplog.finished.set()
            self.threads.discard(threading.current_thread())

    def settle(self, name: str, timeout: float = SETTLE_WAIT_S) -> None:
        """Wait a little for the operation on stack `name` to end. The API answers at once on AWS;
        here most operations take well under a second, and a stack already settled when a tool
        first looks saves it a poll interval (5 s for the CDK, 30 s for the AWS CLI's waiters)."""
        self.wait(name, timeout)

    def wait(self, name: str, timeout: float) -> bool:
        """Wait up to `timeout` s for the operation under way on stack `name` to end; False at once
        if none is. The engine waits so for a nested stack it made: a chain of hundreds of nested
        stacks each polling DescribeStacks every second was a load that grew with the chain."""
        with self.lock:
            found = self.logs.get(name)
        if found is None or found.done:
            return False
        found.finished.wait(timeout)
        return True

    def cancel(self, name: str) -> bool:
        """Ask the operation under way on stack `name` to stop (CancelUpdateStack): it rolls back."""
        with self.lock:
            deployer = self.deployers.get(name)
        if deployer is None:
            return False
        deployer.cancelled = True
        return True

    def view(self, name: str, since: int) -> dict[str, Any] | None:
        with self.lock:
            found = self.logs.get(name)
        return found.view(since) if found is not None else None

    def resume(self, carry_on: Callable[[dict[str, Any]], None]) -> None:
        """After a restart: carry on each operation a kill interrupted, once this server answers
        (the engine reaches the services through it)."""
        pending = [s for s in self.records.stacks().values() if s.get("Operation")]
        if not pending:
            return

        def later() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(self.health_url, timeout=5):
                        break
                except OSError:
                    time.sleep(0.2)
            for state in pending:
                carry_on(state)

        threading.Thread(target=later, name="cfn-resume", daemon=True).start()
