"""Function logs in CloudWatch Logs' shape: a log group `/aws/lambda/<name>` of log streams, each
stream the events of one execution environment (worker) in time order.

On disk: `root_dir/<FunctionName>/<quoted stream name>.jsonl`, one JSON object per event
(`{"timestamp": ms, "message": str, "ingestionTime": ms}`). A stream is written by one worker
at a time, so each file is already in time order and a read merges the files; a file whose last
write is older than `since_ms` holds nothing newer and is skipped unread, which keeps following
a function's logs cheap however long its history.
"""
from __future__ import annotations

import heapq
import os
import shutil
import threading
import time
from typing import Iterator
from urllib.parse import quote, unquote

import orjson

_SUFFIX = ".jsonl"
_MTIME_SLACK_MS = 2000  # file times come from a coarser clock than event times (and some filesystems')


class FunctionLogs:
    def __init__(self, root_dir: str):
        self.root_dir = root_dir
        self._lock = threading.Lock()  # appends and deletes; a read takes no lock
        self._paths: dict[tuple[str, str], str] = {}  # (function, stream) -> file, for streams seen

    def group_name(self, function_name: str) -> str:
        return f"/aws/lambda/{function_name}"

    def write(self, function_name: str, stream_name: str, lines: list[str],
              timestamps: list[int] | None = None) -> None:
        """Append events to a stream. `timestamps` (epoch ms, one per line) default to now."""
        if not lines:
            return
        now = int(time.time() * 1000)
        stamps = timestamps if timestamps is not None else [now] * len(lines)
        data = b"".join(orjson.dumps({"timestamp": ts, "message": line, "ingestionTime": now}) + b"\n"
                        for ts, line in zip(stamps, lines))
        with self._lock:
            path = self._paths.get((function_name, stream_name))
            if path is None:  # a new stream (a new worker): make its directory once
                directory = self._dir(function_name)
                os.makedirs(directory, exist_ok=True)
                path = self._paths[function_name, stream_name] = os.path.join(
                    directory, quote(stream_name, safe="") + _SUFFIX)
            with open(path, "ab") as f:
                f.write(data)

    def read(self, function_name: str, since_ms: int = 0, limit: int = 10000) -> list[dict]:
        """Events at or after `since_ms`, oldest first, at most `limit`."""
        directory = self._dir(function_name)
        try:
            names = [n for n in os.listdir(directory) if n.endswith(_SUFFIX)]
        except FileNotFoundError:
            return []
        streams = []
        for name in names:
            path = os.path.join(directory, name)
            try:
                if os.stat(path).st_mtime * 1000 < since_ms - _MTIME_SLACK_MS:
                    continue
            except FileNotFoundError:  # deleted since listdir
                continue
            streams.append(self._events(path, unquote(name[:-len(_SUFFIX)]), since_ms))
        out = []
        for event in heapq.merge(*streams, key=lambda e: e["timestamp"]):
            if len(out) >= limit:
                break
            out.append(event)
        return out

    def delete(self, function_name: str) -> None:
        with self._lock:
            shutil.rmtree(self._dir(function_name), ignore_errors=True)
            self._paths = {k: v for k, v in self._paths.items() if k[0] != function_name}

    def _dir(self, function_name: str) -> str:
        return os.path.join(self.root_dir, quote(function_name, safe=""))

    @staticmethod
    def _events(path: str, stream_name: str, since_ms: int) -> Iterator[dict]:
        try:
            with open(path, "rb") as f:
                lines = f.readlines()
        except FileNotFoundError:
            return
        for line in lines:
            if not line.endswith(b"\n"):  # the end of an append still in progress: next read
                break
            event = orjson.loads(line)
            if event["timestamp"] >= since_ms:
                yield {"timestamp": event["timestamp"], "message": event["message"],
                       "logStreamName": stream_name, "ingestionTime": event["ingestionTime"]}
