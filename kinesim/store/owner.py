"""One server per data directory.

Two servers on one directory would both append to the same shards: each numbers records from
its own memory of the shard's end, so acknowledged writes of one collide with the other's
(`UNIQUE constraint failed: records.key`). The first server holds an exclusive `flock` on
`<data dir>/server.lock` for its life and writes who it is there; the kernel drops the lock when
the process ends however it ends (`kill -9` included), so a stale file never blocks a restart.
"""
from __future__ import annotations

import fcntl
import json
import os
from typing import IO

LOCK_FILE = "server.lock"


class DataDirInUse(RuntimeError):
    """Another live process serves the directory; the message names it and says what to do."""


class Owner:
    """The held lock; `release()` (or the process's end) lets another server in."""

    def __init__(self, handle: IO[str]):
        self.handle: IO[str] | None = handle

    def release(self) -> None:
        if self.handle is not None:
            self.handle.close()  # closing the file drops the flock
            self.handle = None


def claim(data_dir: str, url: str) -> Owner:
    """Lock `data_dir` for this process, serving at `url`; DataDirInUse when another holds it."""
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, LOCK_FILE)
    # "a+": opening must not empty the file before the lock is ours, or the owner's record is lost.
    handle = open(path, "a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = _read(handle.read())
        handle.close()
        raise DataDirInUse(_in_use_message(os.path.abspath(data_dir), holder)) from None
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "url": url}))
    handle.flush()
    return Owner(handle)


def _read(text: str) -> dict:
    try:
        holder = json.loads(text)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _in_use_message(path: str, holder: dict) -> str:
    who = "another kinesim server"
    if holder.get("pid"):
        who += f" (pid {holder['pid']}" + (f", {holder['url']}" if holder.get("url") else "") + ")"
    return (f"the data directory {path} is in use by {who}. Stop that server first, or give this one "
            "another --data-dir (or --in-memory).")
