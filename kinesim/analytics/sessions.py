"""Spark Connect sessions of the warm Spark kept from one `kinesim sql` to the next.

A Spark Connect client session is a session on the server, which builds its state (catalog,
analyzer, settings) at its first query: measured over a kept 20,000-row table, a count took
0.38-0.40 s of Spark's CPU in a new session and 0.15-0.26 s in one that had run queries before,
and registering the tables 0.1 s against 0.05 s. A `kinesim sql` process is one short session, so
it paid that every time (a warm count over 1M records: 2.7 s without kept sessions, 2.3 s with;
3.8 s and 2.6 s with one core busy; bench/README.md, "Spark waits"). So the warm Spark's sessions are kept in *slots*
(``<data dir>/spark-connect/sessions/slot-N.json``, at most `SLOTS`): a command takes a free slot
(a lock held while it runs: two commands at once take two slots) and its session, and leaves it
for the next command if the session is as a fresh one would be, apart from what a next command
sets again itself:

- runtime settings: ``RESET`` when a command takes a used session (then its ``--conf``);
- its tables: registered again by every command; views registered by the last command that this
  one does not register (a delivery stream deleted since) are dropped;
- anything else a statement may change in a session (a temp view or function, ``SET``, ``USE``,
  variables...): only statements that cannot (`read_only`: SELECT, WITH, VALUES, TABLE, FROM,
  SHOW, DESCRIBE, EXPLAIN) leave the session reusable; after any other the command releases it
  (as every command did before), and the slot's next command starts a new one.

A command that ends without saying (killed) leaves its slot marked in use: the next one releases
that session and starts a new one. When Spark restarts, the slot's session is gone with it: a
session recorded for another Spark (address and pid) is not used.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import uuid
from typing import IO, Any

SLOTS = 4
READ_ONLY = re.compile(r"(SELECT|WITH|VALUES|TABLE|FROM|SHOW|DESCRIBE|DESC|EXPLAIN)\b", re.IGNORECASE)


def read_only(statement: str) -> bool:
    """Whether a statement cannot change its session's state (its first keyword, after comments
    and opening parentheses)."""
    text = statement
    while True:
        text = text.lstrip().lstrip("(")
        if text.startswith("--"):
            text = text.split("\n", 1)[1] if "\n" in text else ""
        elif text.startswith("/*"):
            text = text.split("*/", 1)[1] if "*/" in text else ""
        else:
            return READ_ONLY.match(text) is not None


class Slot:
    """A kept session taken by this process (see the module's docstring)."""

    def __init__(self, directory: str, number: int, lock: IO[str]):
        self.path = os.path.join(directory, f"slot-{number}.json")
        self.lock = lock
        self.views: list[str] = []
        self.reusable = True

    def record(self, state: dict) -> None:
        tmp = f"{self.path}.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, self.path)


def take(directory: str) -> Slot | None:
    """A free slot, locked until this process ends or `finish`; None when all are taken."""
    os.makedirs(directory, exist_ok=True)
    for number in range(SLOTS):
        lock = open(os.path.join(directory, f"slot-{number}.lock"), "a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return Slot(directory, number, lock)
    return None


def open_session(address: str, spark_pid: int, slot: Slot, conf: dict[str, str]) -> Any:
    """The slot's session if it can be used again, else a new one (the old one released)."""
    from .remote import remote_session
    try:
        with open(slot.path) as f:
            kept = json.load(f)
    except (OSError, ValueError):
        kept = {}
    same_spark = kept.get("address") == address and kept.get("spark") == spark_pid
    if same_spark and kept.get("id") and not kept.get("clean"):
        with contextlib.suppress(Exception):   # a command killed while using it: release it
            remote_session(f"{address}/;session_id={kept['id']}", {}, keep=True).client.release_session()
    reuse = same_spark and kept.get("clean") and kept.get("id")
    session_id = kept["id"] if reuse else str(uuid.uuid4())
    slot.record({"id": session_id, "address": address, "spark": spark_pid, "clean": False,
                 "views": kept.get("views", []) if reuse else []})
    spark = remote_session(f"{address}/;session_id={session_id}", {}, keep=True)
    if reuse:
        spark.sql("RESET").collect()   # the last command's --conf
        slot.views = list(kept.get("views", []))
    for key, value in conf.items():
        spark.conf.set(key, value)
    return spark


def registered(spark: Any, slot: Slot, names: list[str]) -> None:
    """This command registered `names`: views the last one registered and this one did not are
    dropped (their delivery stream is gone, or nothing is left of what it delivered)."""
    for name in set(slot.views) - set(names):
        with contextlib.suppress(Exception):
            spark.catalog.dropTempView(name)
    slot.views = list(names)


def finish(spark: Any, slot: Slot, address: str, spark_pid: int) -> None:
    """At the command's end: leave the session for the next command, or release it."""
    if slot.reusable:
        slot.record({"id": spark.session_id, "address": address, "spark": spark_pid, "clean": True,
                     "views": slot.views})
    else:
        with contextlib.suppress(Exception):
            spark.client.release_session()
        with contextlib.suppress(OSError):
            os.unlink(slot.path)
    slot.lock.close()
