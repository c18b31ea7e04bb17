"""How the kinesim stream reader ends with PySpark's streaming source runner.

PySpark runs a Python data source's stream reader (initialOffset, latestOffset, partitions, commit)
in a process of its own per query, ``python -m pyspark.sql.streaming.python_streaming_source_runner``:
a child of Spark's JVM that reads one command at a time from a socket to the JVM, calls the reader
and writes the answer back. When the query stops, the JVM interrupts the query's thread (which
closes that socket if the thread was waiting for an answer), then sends the runner SIGTERM. When
the JVM ends without stopping the query (the driver exited or was killed, a Spark Connect server was
stopped), nothing is sent: the socket just closes.

The runner only notices a closed socket when it next reads or writes it, and that went wrong twice:

* Stopped while answering (the reader's Kinesis calls in latestOffset) and, on a busy machine,
  scheduled before the SIGTERM landed, the runner wrote its answer to the closed socket, and
  PySpark's runner printed what followed (``EOFError`` in ``read_int``, then ``BrokenPipeError``
  twice) as a traceback on Spark's stderr: for a normal ``query.stop()``.
* With the JVM gone, a runner inside a Kinesis call went on until the call ended: up to a minute
  of botocore's retries and read timeouts when the kinesim server had stopped too or did not answer.

So, in that process and nowhere else: `end_if_jvm_hung_up` (the reader's ``stop()``, which the
runner calls on its way out of its command loop) ends the process at once and quietly when the
way out is the JVM having hung up, and `end_with_jvm` ends it as soon as the JVM is gone. Nothing
is lost either way: no one is left to read an answer, and the reader keeps no state of its own
(positions live in Spark's checkpoint).
"""
from __future__ import annotations

import os
import select
import sys
import threading
from types import TracebackType

RUNNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"
# What reading or writing the runner's socket raises once the JVM has closed it.
HANG_UPS = (EOFError, BrokenPipeError, ConnectionResetError)
# Without pidfd (not Linux): how often the watcher looks whether the JVM is still the parent.
PARENT_POLL_S = 0.5

_watched: list[int] = []


def in_source_runner() -> bool:
    """Whether this process is PySpark's streaming source runner."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == RUNNER_MODULE


def end_with_jvm() -> None:
    """In the runner, once per process: end the process as soon as its parent, Spark's JVM, ends."""
    if _watched or not in_source_runner():
        return
    parent = os.getppid()
    _watched.append(parent)
    threading.Thread(target=_exit_after, args=(parent,), daemon=True, name="kinesim-runner-watch").start()


def _exit_after(parent: int) -> None:
    try:
        handle = os.pidfd_open(parent)
    except (AttributeError, OSError):   # not Linux 5.3+, or the parent is gone already
        while os.getppid() == parent:
            threading.Event().wait(PARENT_POLL_S)
    else:
        select.select([handle], [], [])   # readable once the process has ended
    os._exit(0)


def end_if_jvm_hung_up() -> None:
    """In the runner, on its way out: end the process now, quietly, if the JVM closed the socket
    (the exception being handled is the runner's own socket I/O failing, not the reader's)."""
    error = sys.exc_info()[1]
    if isinstance(error, HANG_UPS) and not _through_kinesim(error.__traceback__) and in_source_runner():
        os._exit(0)


def _through_kinesim(tb: TracebackType | None) -> bool:
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith("kinesim"):
            return True
        tb = tb.tb_next
    return False
