"""The server's side of a table preview: `tables` run in a child process, a few at a time.

`read_table(f, fmt)` hands the open object file to `python -I -m kinesim.previews.tables` as its
stdin and returns the child's document (see `tables`), or {"error", "over_limit"} when the child
did not answer within its limits. What a hostile file can cost is then CHILD_MEMORY per child and
CHILD_SLOTS children, whatever it declares; a file that crashes pyarrow ends the child, not the
server. The child is a separate program (fork and exec, never a fork of the threaded server), in a
session of its own, with nothing of the server's environment but what pyarrow's threads and
allocators need to stay within the limit.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any, BinaryIO

# Address space and CPU time of one child. pyarrow with its modules loaded and single-threaded
# (below) has about 290 MB of address space mapped before reading a byte (a few MB resident).
CHILD_MEMORY = 768 << 20
CHILD_CPU_S = 20
# Wall clock: the CPU limit ends a child that works too long; this one that waits on nothing (a
# loaded machine is slow, so it is generous).
CHILD_WAIT_S = 120.0
CHILD_SLOTS = threading.BoundedSemaphore(2)
# One thread for pyarrow's computations and IO, the system allocator, one malloc arena: every
# thread's stack and arena, and jemalloc's or mimalloc's reservations, count against the address
# space (mimalloc alone reserves 1 GiB).
_ENV = {"OMP_NUM_THREADS": "1", "ARROW_IO_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "1", "TZ": "UTC"}


def read_table(f: BinaryIO, fmt: str) -> dict[str, Any]:
    """The child's document for the object open as `f` (a file of the object store), `fmt` being
    "parquet" or "orc"."""
    env = dict(_ENV)
    if "LD_LIBRARY_PATH" in os.environ:  # a Python built against a libpython outside the usual paths
        env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
    with CHILD_SLOTS:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-m", "kinesim.previews.tables", fmt, str(CHILD_MEMORY), str(CHILD_CPU_S)],
                stdin=f, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        except OSError as err:
            return {"error": f"the preview's reader did not start: {err}", "over_limit": False}
        try:
            out, _ = proc.communicate(timeout=CHILD_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return _over(f"took more than {CHILD_WAIT_S:.0f} s")
    if proc.returncode == -signal.SIGXCPU:
        return _over(f"took more than {CHILD_CPU_S} s of CPU")
    try:
        doc = json.loads(out) if proc.returncode == 0 else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        # pyarrow ended the process: liborc aborts on some failed allocations, and a damaged file
        # can crash a decoder; either way the limit is what stopped it or the file is unreadable.
        return _over(f"its reader ended ({_ending(proc.returncode)})")
    if doc.get("over_limit"):
        return _over(f"needs more memory ({doc.get('error')})")
    return doc


def _over(why: str) -> dict[str, Any]:
    return {"error": f"reading its first rows {why} (a preview may use {CHILD_MEMORY >> 20} MiB and "
                     f"{CHILD_CPU_S} s of CPU)", "over_limit": True}


def _ending(code: int) -> str:
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"
